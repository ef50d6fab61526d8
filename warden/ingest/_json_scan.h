/* JSON scanning for the record reader (_reader.c): strict, allocation-free, and never more lenient
 * than msgspec, the decoder of the pure-Python parser. A scan either accepts a value exactly as
 * msgspec reads it, or gives up (NULL) and the line is left to the Python parser, which decides.
 *
 * Values come in two modes, as msgspec reads them: *read* values (a struct field typed Any, which
 * msgspec decodes: their text must be UTF-8, and a number that is not a small integer is left to
 * Python) and *skipped* values (fields the schema does not name, and raw ones: msgspec checks
 * their syntax, escapes and controls, but not their UTF-8).
 */
#ifndef WARDEN_JSON_SCAN_H
#define WARDEN_JSON_SCAN_H

#include <Python.h>
#include <stdint.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

enum {
    J_ABSENT = 0, /* the key was not there */
    J_NULL, J_FALSE, J_TRUE,
    J_INT,        /* an integer of at most 18 digits, not "-0" */
    J_NUM,        /* any other number: a fraction, an exponent, more digits, "-0" */
    J_STR, J_OBJ, J_ARR
};

#define MAX_DEPTH 64

#define ALWAYS_INLINE inline __attribute__((always_inline)) /* deeper values are left to Python (msgspec's own limit is higher) */

typedef struct {
    const unsigned char *p, *e; /* the value's bytes: [p, e), a string's quotes included */
    int kind;
    long long i; /* J_INT */
    /* J_STR, read mode only: */
    unsigned char escaped;      /* holds an escape */
    unsigned char ascii;        /* every character is below U+0080 */
    unsigned char nul;          /* holds U+0000 (only as an escape) */
    Py_ssize_t chars;           /* characters of the decoded text */
    Py_ssize_t size;            /* its UTF-8 bytes */
    Py_ssize_t jsize;           /* its length as orjson writes it, quotes included */
} JVal;

static inline const unsigned char *
skip_ws(const unsigned char *p, const unsigned char *e)
{
    /* one compare for the common case: compact JSON, a token next */
    while (p < e && *p <= ' ' && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n'))
        p++;
    return p;
}

static inline int
hex_digit(unsigned char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

static inline int
hex4_at(const unsigned char *p)
{
    int v = 0;
    for (int k = 0; k < 4; k++) {
        int d = hex_digit(p[k]);
        if (d < 0)
            return -1;
        v = v * 16 + d;
    }
    return v;
}

/* The length of the strictly well-formed UTF-8 character at s (no overlong form, no surrogate,
 * nothing past U+10FFFF), 0 for none; its code point in *cp. */
static inline int
utf8_char(const unsigned char *s, const unsigned char *e, Py_UCS4 *cp)
{
    unsigned char c = s[0], lo = 0x80, hi = 0xBF;
    int n;
    Py_UCS4 v;
    if (c < 0x80) {
        *cp = c;
        return 1;
    } else if (c >= 0xC2 && c <= 0xDF) {
        n = 2;
        v = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        v = c & 0x0F;
        if (c == 0xE0)
            lo = 0xA0;
        else if (c == 0xED)
            hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        v = c & 0x07;
        if (c == 0xF0)
            lo = 0x90;
        else if (c == 0xF4)
            hi = 0x8F;
    } else {
        return 0;
    }
    if (e - s < n)
        return 0;
    for (int k = 1; k < n; k++) {
        unsigned char t = s[k];
        if (t < (k == 1 ? lo : 0x80) || t > (k == 1 ? hi : 0xBF))
            return 0;
        v = (v << 6) | (t & 0x3F);
    }
    *cp = v;
    return n;
}

static inline int
utf8_len_of(Py_UCS4 cp)
{
    return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
}

#ifdef __SSE2__
/* The bytes of the 16 at s below a space (the controls), and in read mode those of a multi-byte
 * character too: read, a signed compare puts a byte >= 0x80 below a space with them. */
static ALWAYS_INLINE __m128i
low_bytes(__m128i v, int read)
{
    return read ? _mm_cmplt_epi8(v, _mm_set1_epi8(0x20))
                : _mm_cmpeq_epi8(_mm_min_epu8(v, _mm_set1_epi8(0x1f)), v);
}

/* Which of the 16 bytes at s a string's scan must look at (bit i: byte i): a quote, a
 * backslash, a low byte (low_bytes). */
static ALWAYS_INLINE unsigned
stop_mask16(const unsigned char *s, int read)
{
    __m128i v = _mm_loadu_si128((const __m128i *)s);
    return (unsigned)_mm_movemask_epi8(_mm_or_si128(
        _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('"')), _mm_cmpeq_epi8(v, _mm_set1_epi8('\\'))),
        low_bytes(v, read)));
}
#endif

/* The first byte at or after s that a string's scan must look at — a quote, a backslash, a
 * control, and in read mode a byte of a multi-byte character — or e. */
static ALWAYS_INLINE const unsigned char *
string_stop(const unsigned char *s, const unsigned char *e, int read)
{
#ifdef __SSE2__
    while (e - s >= 16) {
        unsigned mask = stop_mask16(s, read);
        if (mask)
            return s + __builtin_ctz(mask);
        s += 16;
    }
#endif
    while (s < e) {
        unsigned char c = *s;
        if (c == '"' || c == '\\' || c < 0x20 || (read && c >= 0x80))
            return s;
        s++;
    }
    return e;
}

/* orjson's length for a character written as an escape (quote, backslash, controls) or not */
static inline Py_ssize_t
orjson_char_len(Py_UCS4 cp)
{
    if (cp == '"' || cp == '\\' || cp == '\b' || cp == '\f' || cp == '\n' || cp == '\r' || cp == '\t')
        return 2;
    return cp < 0x20 ? 6 : utf8_len_of(cp);
}

/* The characters that may follow a backslash as an escape of two bytes (\u is longer: escape_len). */
static const unsigned char SHORT_ESCAPE[256] = {
    ['"'] = 1, ['\\'] = 1, ['/'] = 1, ['b'] = 1, ['f'] = 1, ['n'] = 1, ['r'] = 1, ['t'] = 1,
};

#ifdef __SSE2__
/* The bytes of a 64-byte block that follow the backslash of an escape (bit i: byte i), from its
 * backslashes, in a block that does not begin inside an escape. In a run of backslashes the first
 * begins an escape, the second is its character, and so on: every second one from the second is
 * escaped, and the byte after the run too if the run is odd. Where a run starts (an even or odd
 * bit) tells which: adding its first bit to the run clears it and sets the bit after it, so each
 * parity's runs are found by one sum. */
static ALWAYS_INLINE uint64_t
escaped_bytes(uint64_t b)
{
    const uint64_t even = 0x5555555555555555ULL;
    uint64_t starts = b & ~(b << 1);
    uint64_t even_sum = b + (starts & even), odd_sum = b + (starts & ~even);
    uint64_t from_even = (b & ~even_sum) | (even_sum & ~b); /* runs from even bits, and the byte after each */
    uint64_t from_odd = (b & ~odd_sum) | (odd_sum & ~b);
    return (from_even & ~even) | (from_odd & even);
}

/* 64 bytes of a string's text at s (not inside an escape; e - s >= 64) read at once, as
 * string_stop's callers read them stop by stop: the bytes before the first stop that is not a
 * short escape (a quote, a control, in read mode a byte of a multi-byte character; *stop: its
 * offset, or -1 if there is none), of which *escapes are two-byte escapes and *slashes of them
 * "\/". Returns how many bytes were read: the offset of the stop, or 64 (63 if the last byte
 * begins an escape: the next block begins with it); 0 if a \u escape or a bad one comes before
 * the stop (or the stop is the first byte): the caller reads on from s one stop at a time. Text
 * with an escape every few dozen bytes (file contents) then costs a few instructions a block
 * rather than a mispredicted branch an escape. */
static ALWAYS_INLINE int
string_block(const unsigned char *s, int read, int *stop, int *escapes, int *slashes)
{
    uint64_t quotes = 0, backslashes = 0, low = 0;
    for (int k = 0; k < 4; k++) {
        __m128i v = _mm_loadu_si128((const __m128i *)(s + 16 * k));
        quotes |= (uint64_t)(unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8('"'))) << (16 * k);
        backslashes |= (uint64_t)(unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8('\\'))) << (16 * k);
        low |= (uint64_t)(unsigned)_mm_movemask_epi8(low_bytes(v, read)) << (16 * k);
    }
    uint64_t escaped = backslashes ? escaped_bytes(backslashes) : 0;
    uint64_t stops = (quotes & ~escaped) | low;
    uint64_t first = stops & -stops;
    int n = 0, slash = 0;
    for (uint64_t check = escaped & (first ? (first << 1) - 1 : ~0ULL); check; check &= check - 1, n++) {
        unsigned char x = s[__builtin_ctzll(check)];
        if (!SHORT_ESCAPE[x])
            return 0;
        slash += x == '/';
    }
    *escapes = n;
    *slashes = slash;
    if (first) {
        *stop = __builtin_ctzll(stops);
        return *stop;
    }
    *stop = -1;
    return (backslashes & ~escaped) >> 63 ? 63 : 64;
}
#endif

static const unsigned char *scan_string_slow(const unsigned char *p, const unsigned char *e, int read, JVal *v);

/* A string at p (its opening quote). NULL unless msgspec reads it so: a raw control, a bad escape,
 * a surrogate escape that is not a pair, or (read mode) text that is not UTF-8. Most strings are
 * plain (no escape, ASCII) and shorter than 16 bytes past their quote, as ids, keys and times
 * are: those are measured from one vector compare. */
static ALWAYS_INLINE const unsigned char *
scan_string(const unsigned char *p, const unsigned char *e, int read, JVal *v)
{
#ifdef __SSE2__
    if (e - p >= 17) {
        unsigned mask = stop_mask16(p + 1, read);
        if (mask != 0) {
            int n = __builtin_ctz(mask);
            if (p[1 + n] == '"') { /* a plain string of n bytes */
                if (v != NULL) {
                    v->kind = J_STR;
                    v->p = p;
                    v->e = p + n + 2;
                    v->escaped = v->nul = 0;
                    v->ascii = 1;
                    v->chars = v->size = n;
                    v->jsize = n + 2;
                }
                return p + n + 2;
            }
        }
    }
#endif
    return scan_string_slow(p, e, read, v);
}

static const unsigned char *
scan_string_slow(const unsigned char *p, const unsigned char *e, int read, JVal *v)
{
    const unsigned char *s = p + 1;
    unsigned char escaped = 0, ascii = 1, nul = 0;
    Py_ssize_t chars = 0, size = 0, jsize = 2;
    for (;;) {
#ifdef __SSE2__
        int stop, escapes, slashes, got;
        if (e - s >= 64 && (got = string_block(s, read, &stop, &escapes, &slashes)) != 0) {
            /* bytes plain but for two-byte escapes: an ASCII character each, written by orjson in
             * two bytes but "\/" (in one) */
            chars += got - escapes;
            size += got - escapes;
            jsize += got - slashes;
            escaped |= escapes != 0;
            s += got;
            if (stop < 0)
                continue;
        } else
#endif
        {
            const unsigned char *stop_at = string_stop(s, e, read);
            Py_ssize_t plain = stop_at - s; /* ASCII (read mode), or bytes unexamined */
            chars += plain;
            size += plain;
            jsize += plain;
            s = stop_at;
        }
        if (s >= e)
            return NULL;
        unsigned char c = *s;
        if (c == '"')
            break;
        if (c == '\\') {
            if (e - s < 2)
                return NULL;
            escaped = 1;
            unsigned char x = s[1];
            Py_UCS4 cp;
            if (x == 'u') {
                int u = e - s >= 6 ? hex4_at(s + 2) : -1;
                if (u < 0)
                    return NULL;
                if (u >= 0xD800 && u <= 0xDFFF) {
                    if (u >= 0xDC00)
                        return NULL;
                    int lo = e - s >= 12 && s[6] == '\\' && s[7] == 'u' ? hex4_at(s + 8) : -1;
                    if (lo < 0xDC00 || lo > 0xDFFF)
                        return NULL;
                    s += 12;
                    cp = 0x10000 + (((Py_UCS4)u - 0xD800) << 10) + ((Py_UCS4)lo - 0xDC00);
                } else {
                    s += 6;
                    cp = (Py_UCS4)u;
                    if (u == 0)
                        nul = 1;
                }
            } else {
                switch (x) {
                case '"': cp = '"'; break;
                case '\\': cp = '\\'; break;
                case '/': cp = '/'; break;
                case 'b': cp = '\b'; break;
                case 'f': cp = '\f'; break;
                case 'n': cp = '\n'; break;
                case 'r': cp = '\r'; break;
                case 't': cp = '\t'; break;
                default: return NULL;
                }
                s += 2;
            }
            if (cp >= 0x80)
                ascii = 0;
            chars++;
            size += utf8_len_of(cp);
            jsize += orjson_char_len(cp);
            continue;
        }
        if (c < 0x20)
            return NULL;
        /* read mode: a multi-byte character */
        Py_UCS4 cp;
        int n = utf8_char(s, e, &cp);
        if (n == 0)
            return NULL;
        ascii = 0;
        s += n;
        chars++;
        size += n;
        jsize += n;
    }
    if (v != NULL) {
        v->kind = J_STR;
        v->p = p;
        v->e = s + 1;
        v->escaped = escaped;
        v->ascii = ascii;
        v->nul = nul;
        v->chars = chars;
        v->size = size;
        v->jsize = jsize;
    }
    return s + 1;
}

static inline int
is_digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}

/* A number at p, by JSON's grammar (msgspec's: no leading zero, no bare '.', no '+'). */
static const unsigned char *
scan_number(const unsigned char *p, const unsigned char *e, JVal *v)
{
    const unsigned char *s = p;
    int negative = 0, other = 0;
    if (s < e && *s == '-') {
        negative = 1;
        s++;
    }
    if (s >= e || !is_digit(*s))
        return NULL;
    const unsigned char *digits = s;
    long long value = *s++ - '0';
    if (value != 0) /* no leading zero: "0" stands alone */
        while (s < e && is_digit(*s)) {
            if (s - digits < 18)
                value = value * 10 + (*s - '0');
            s++;
        }
    if (s - digits > 18)
        other = 1;
    if (s < e && *s == '.') {
        s++;
        if (s >= e || !is_digit(*s))
            return NULL;
        while (s < e && is_digit(*s))
            s++;
        other = 1;
    }
    if (s < e && (*s == 'e' || *s == 'E')) {
        s++;
        if (s < e && (*s == '+' || *s == '-'))
            s++;
        if (s >= e || !is_digit(*s))
            return NULL;
        while (s < e && is_digit(*s))
            s++;
        other = 1;
    }
    if (negative && value == 0)
        other = 1; /* "-0": msgspec reads 0, orjson would write it shorter */
    v->kind = other ? J_NUM : J_INT;
    v->i = negative ? -value : value;
    v->p = p;
    v->e = s;
    return s;
}

/* The length of the escape at s (a backslash), as msgspec reads it: 2, 6 or 12 (a surrogate
 * pair), 0 for a bad one. */
static inline int
escape_len(const unsigned char *s, const unsigned char *e)
{
    if (e - s < 2)
        return 0;
    unsigned char x = s[1];
    if (x == 'u') {
        int u = e - s >= 6 ? hex4_at(s + 2) : -1;
        if (u < 0)
            return 0;
        if (u < 0xD800 || u > 0xDFFF)
            return 6;
        int lo = u < 0xDC00 && e - s >= 12 && s[6] == '\\' && s[7] == 'u' ? hex4_at(s + 8) : -1;
        return lo >= 0xDC00 && lo <= 0xDFFF ? 12 : 0;
    }
    return SHORT_ESCAPE[x] ? 2 : 0;
}

/* A string at p (its opening quote) checked as scan_string checks it, measuring nothing: the
 * byte after it, or NULL. Escapes are stepped over within a vector's 16 bytes (file contents
 * hold one every few dozen bytes), not by starting the scan again after each; past the first
 * vector, 64 bytes at a time (string_block). */
static inline const unsigned char *
skip_string(const unsigned char *p, const unsigned char *e, int read)
{
    const unsigned char *s = p + 1;
#ifdef __SSE2__
    if (!read && e - s >= 16 + 64) {
        unsigned mask = stop_mask16(s, 0); /* most strings end within 16 bytes: one vector */
        if (mask != 0 && s[__builtin_ctz(mask)] == '"')
            return s + __builtin_ctz(mask) + 1;
        int stop, escapes, slashes, n;
        while (e - s >= 64 && (n = string_block(s, 0, &stop, &escapes, &slashes)) != 0) {
            if (stop >= 0)
                return s[stop] == '"' ? s + stop + 1 : NULL; /* else a control, raw or escaped */
            s += n;
        }
    }
    if (!read) {
        while (e - s >= 16) {
            unsigned mask = stop_mask16(s, 0);
            const unsigned char *next = s + 16;
            while (mask) {
                const unsigned char *at = s + __builtin_ctz(mask);
                if (*at == '"')
                    return at + 1;
                if (*at != '\\')
                    return NULL; /* a raw control */
                int n = escape_len(at, e);
                if (n == 0)
                    return NULL;
                if (at + n >= next) { /* the escape runs to (or past) the vector's end */
                    next = at + n;
                    break;
                }
                mask &= ~0u << (at + n - s); /* the bytes it covers are its own */
            }
            s = next;
        }
    }
#endif
    for (;;) {
        s = string_stop(s, e, read);
        if (s >= e)
            return NULL;
        unsigned char c = *s;
        if (c == '"')
            return s + 1;
        if (c == '\\') {
            int n = escape_len(s, e);
            if (n == 0)
                return NULL;
            s += n;
            continue;
        }
        if (c < 0x20)
            return NULL;
        Py_UCS4 cp; /* read mode: a multi-byte character */
        int n = utf8_char(s, e, &cp);
        if (n == 0)
            return NULL;
        s += n;
    }
}

static inline int
is_ws(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* Any value at p checked as scan_value checks it, measuring nothing and without recursion (the
 * scan of what the parser does not read, most of a transcript's bytes): the byte after it, or
 * NULL. Whitespace is looked for only where a token was not found (compact JSON has none). */
static const unsigned char *
skip_value(const unsigned char *p, const unsigned char *e, int read)
{
    unsigned char close[MAX_DEPTH];
    int depth = 0;
    for (;;) {
        /* a value at p */
        if (p >= e)
            return NULL;
        switch (*p) {
        case '"':
            if ((p = skip_string(p, e, read)) == NULL)
                return NULL;
            break;
        case '{':
        case '[':
            if (depth == MAX_DEPTH - 1)
                return NULL;
            close[depth] = *p == '{' ? '}' : ']';
            p = skip_ws(p + 1, e);
            if (p < e && *p == close[depth]) {
                p++;
                break;
            }
            if (close[depth++] == ']')
                continue;
            goto key;
        case 't':
            if (e - p < 4 || memcmp(p, "true", 4) != 0)
                return NULL;
            p += 4;
            break;
        case 'f':
            if (e - p < 5 || memcmp(p, "false", 5) != 0)
                return NULL;
            p += 5;
            break;
        case 'n':
            if (e - p < 4 || memcmp(p, "null", 4) != 0)
                return NULL;
            p += 4;
            break;
        case ' ':
        case '\t':
        case '\r':
        case '\n':
            p = skip_ws(p, e);
            continue;
        default: {
            JVal number;
            if ((p = scan_number(p, e, &number)) == NULL || (read && number.kind == J_NUM))
                return NULL;
        }
        }
        /* after a value: the next member, or the end of containers */
        for (;;) {
            if (depth == 0)
                return p;
            if (p >= e)
                return NULL;
            unsigned char c = *p;
            if (c == close[depth - 1]) {
                p++;
                depth--;
            } else if (c == ',') {
                p++;
                break;
            } else if (is_ws(c)) {
                p = skip_ws(p, e);
            } else {
                return NULL;
            }
        }
        if (close[depth - 1] == ']')
            continue;
    key:
        if (p < e && *p != '"')
            p = skip_ws(p, e);
        if (p >= e || *p != '"' || (p = skip_string(p, e, read)) == NULL)
            return NULL;
        if (p < e && *p != ':')
            p = skip_ws(p, e);
        if (p >= e || *p != ':')
            return NULL;
        p++;
    }
}

/* Any value at p (no leading whitespace), into *v; the byte after it, or NULL. */
static const unsigned char *
scan_value(const unsigned char *p, const unsigned char *e, int read, int depth, JVal *v)
{
    if (p >= e)
        return NULL;
    const unsigned char *q;
    v->p = p;
    v->i = 0;
    switch (*p) {
    case '"':
        return scan_string(p, e, read, v);
    case '{':
    case '[':
        q = depth < MAX_DEPTH ? skip_value(p, e, read) : NULL;
        v->kind = *p == '{' ? J_OBJ : J_ARR;
        v->e = q;
        return q;
    case 't':
        if (e - p < 4 || memcmp(p, "true", 4) != 0)
            return NULL;
        v->kind = J_TRUE;
        v->e = p + 4;
        return v->e;
    case 'f':
        if (e - p < 5 || memcmp(p, "false", 5) != 0)
            return NULL;
        v->kind = J_FALSE;
        v->e = p + 5;
        return v->e;
    case 'n':
        if (e - p < 4 || memcmp(p, "null", 4) != 0)
            return NULL;
        v->kind = J_NULL;
        v->e = p + 4;
        return v->e;
    default:
        return scan_number(p, e, v);
    }
}

/* A struct field's name at p: an escape-free string (an escaped name could spell a field the
 * schema reads: left to Python). Its bytes in [*name, *name + *len); the byte after the colon
 * and whitespace, or NULL. */
static inline const unsigned char *
scan_key(const unsigned char *p, const unsigned char *e, const unsigned char **name, Py_ssize_t *len)
{
    if (p >= e || *p != '"')
        return NULL;
    const unsigned char *q = string_stop(p + 1, e, 0);
    if (q >= e || *q != '"') /* an escape (left to Python), a control, or no end */
        return NULL;
    *name = p + 1;
    *len = q - p - 1;
    q++;
    if (q < e && *q != ':')
        q = skip_ws(q, e);
    if (q >= e || *q != ':')
        return NULL;
    return skip_ws(q + 1, e);
}

/* A key of a read object (a dict msgspec decodes, whose keys it checks): as scan_key, its text
 * UTF-8 too. */
static inline const unsigned char *
scan_read_key(const unsigned char *p, const unsigned char *e, const unsigned char **name, Py_ssize_t *len)
{
    if (p >= e || *p != '"')
        return NULL;
    JVal k;
    const unsigned char *q = scan_string(p, e, 1, &k);
    if (q == NULL || k.escaped)
        return NULL;
    *name = p + 1;
    *len = q - p - 2;
    q = skip_ws(q, e);
    if (q >= e || *q != ':')
        return NULL;
    return skip_ws(q + 1, e);
}

/* After a member: the next member's first byte (*more = 1), or past the closing brace (0). */
static inline const unsigned char *
next_member(const unsigned char *p, const unsigned char *e, unsigned char close, int *more)
{
    if (p < e && *p != ',' && *p != close)
        p = skip_ws(p, e);
    if (p >= e)
        return NULL;
    if (*p == ',') {
        *more = 1;
        p++;
        return p < e && *p != '"' ? skip_ws(p, e) : p; /* most members are a struct's, keyed */
    }
    *more = 0;
    return *p == close ? p + 1 : NULL;
}

#define NAME_IS(name, len, literal) ((len) == (Py_ssize_t)sizeof(literal) - 1 && memcmp((name), (literal), (len)) == 0)

/* A string value equal to the ASCII literal, without an escape */
#define STR_IS(v, literal) ((v).kind == J_STR && !(v).escaped && (v).e - (v).p - 2 == (Py_ssize_t)sizeof(literal) - 1 \
                            && memcmp((v).p + 1, (literal), sizeof(literal) - 1) == 0)

#endif
