/* warden.ingest._skim: the transcript reader's optional C fast path.
 *
 * usage_counts(usage) -> (input, output, cache write 5m, cache write 1h, cache read, zeroed) reads
 * an API usage dict (exactly a dict: the caller checks) as warden.ingest.parser's
 * usage_from_json and zeroed_counts do together (_usage_counts_py, the reference), in one pass
 * without a Python call per count: it ran on every response's first line.
 *
 * utf8_size(text) is len(text.encode("utf-8", "surrogatepass")) counted without the bytes.
 *
 * utc_datetime(text) is parser.parse_timestamp(text) for Claude Code's own form of a timestamp
 * ("2026-01-01T10:00:00.000Z"), None for any other text (the caller then parses it in Python).
 *
 * slot_builder(cls, names) makes a callable building instances of a slots dataclass (Usage, Turn,
 * ToolCall) from all their field values, without the generated __init__ (parser._slot_builder).
 *
 * string_text(raw, max_chars) -> (size, head) reads a tool result's content kept as raw JSON by
 * the line schema: for a JSON string, the UTF-8 size of its decoded text and the text's first
 * max_chars characters, what decoding it and parser._text_size give (parser._result_text_py, the
 * reference), without building the whole text; None for any other value, and for any string
 * msgspec would refuse (invalid UTF-8, a control character, a bad escape, a lone surrogate), so
 * the reference decides (and refuses it the same way).
 *
 * split_lines(data, upto, offset, max_line) -> (lines, ends) frames the complete lines of a read
 * block in one call: data[:upto] split on b"\n" (upto is the index of the block's last newline),
 * each line without its newline, None for one longer than max_line (skipped unread), and each
 * line's end offset (offset + bytes through its newline). It is exactly
 * warden.ingest.collector._split_lines_py, which stays the reference (tests/test_parser_skim.py
 * compares the two); the framing is where a generator yielding line by line spent a fifth of a
 * parse's time. Built by setup.py when a compiler is there; without it the pure-Python path runs.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>
#include <math.h>
#include <structmember.h> /* T_OBJECT_EX, READONLY */
#include <datetime.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

static PyObject *
split_lines(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t upto, max_line;
    long long offset;
    if (!PyArg_ParseTuple(args, "y*nLn", &view, &upto, &offset, &max_line))
        return NULL;
    if (upto < 0 || upto > view.len) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "upto is outside the data");
        return NULL;
    }
    PyObject *lines = PyList_New(0);
    PyObject *ends = PyList_New(0);
    if (lines == NULL || ends == NULL)
        goto fail;
    const char *base = (const char *)view.buf;
    Py_ssize_t pos = 0;
    for (;;) {
        const char *nl = pos < upto ? memchr(base + pos, '\n', (size_t)(upto - pos)) : NULL;
        Py_ssize_t stop = nl ? (Py_ssize_t)(nl - base) : upto;
        Py_ssize_t len = stop - pos;
        PyObject *line;
        if (len > max_line) {
            line = Py_None;
            Py_INCREF(line);
        } else {
            line = PyBytes_FromStringAndSize(base + pos, len);
            if (line == NULL)
                goto fail;
        }
        offset += len + 1;
        PyObject *end = PyLong_FromLongLong(offset);
        if (end == NULL || PyList_Append(lines, line) < 0 || PyList_Append(ends, end) < 0) {
            Py_DECREF(line);
            Py_XDECREF(end);
            goto fail;
        }
        Py_DECREF(line);
        Py_DECREF(end);
        if (nl == NULL)
            break;
        pos = stop + 1;
    }
    PyBuffer_Release(&view);
    PyObject *result = PyTuple_Pack(2, lines, ends);
    Py_DECREF(lines);
    Py_DECREF(ends);
    return result;
fail:
    PyBuffer_Release(&view);
    Py_XDECREF(lines);
    Py_XDECREF(ends);
    return NULL;
}

#define MAX_COUNT 1000000000000000LL /* parser.MAX_COUNT: 10**15 */

/* parser._count: an int (not a bool) or an integral float in (0, MAX_COUNT); else 0.
 * *readable: parser._readable_count (absent = NULL is readable unless required). */
static long long
count_of(PyObject *value, int required, int *readable)
{
    if (value == NULL) {
        *readable = !required;
        return 0;
    }
    if (PyLong_CheckExact(value)) {
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
        if (v == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            overflow = 1;
        }
        if (overflow) {
            *readable = 0;
            return 0;
        }
        *readable = v >= 0 && v < MAX_COUNT;
        return v > 0 && v < MAX_COUNT ? v : 0;
    }
    if (PyFloat_CheckExact(value)) {
        double v = PyFloat_AS_DOUBLE(value);
        *readable = v == floor(v) && v >= 0 && v < (double)MAX_COUNT; /* NaN and inf fail */
        return *readable && v > 0 ? (long long)v : 0;
    }
    *readable = value == Py_None ? !required : 0;
    return 0;
}

/* The usage keys, interned once at import: PyDict_GetItemString built a str per lookup, which
 * cost more than the lookups themselves. */
enum { K_INPUT, K_OUTPUT, K_CREATION, K_READ, K_SPLIT, K_5M, K_1H, N_KEYS };
static const char *key_names[N_KEYS] = {
    "input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens",
    "cache_creation", "ephemeral_5m_input_tokens", "ephemeral_1h_input_tokens"};
static PyObject *keys[N_KEYS];

/* dict[key] borrowed, NULL when absent; -1 in *failed on an error (none for str keys of a dict
 * of decoded JSON, but the API allows one) */
static PyObject *
lookup(PyObject *dict, int key, int *failed)
{
    PyObject *value = PyDict_GetItemWithError(dict, keys[key]);
    if (value == NULL && PyErr_Occurred())
        *failed = 1;
    return value;
}

static PyObject *
usage_counts(PyObject *self, PyObject *raw)
{
    if (!PyDict_CheckExact(raw)) {
        PyErr_SetString(PyExc_TypeError, "usage_counts takes a dict");
        return NULL;
    }
    int failed = 0;
    int ok_in, ok_out, ok_creation, ok_read, ok_5m = 1, ok_1h = 1;
    long long input = count_of(lookup(raw, K_INPUT, &failed), 1, &ok_in);
    long long output = count_of(lookup(raw, K_OUTPUT, &failed), 1, &ok_out);
    long long creation = count_of(lookup(raw, K_CREATION, &failed), 0, &ok_creation);
    long long read = count_of(lookup(raw, K_READ, &failed), 0, &ok_read);
    long long w5 = creation, w1 = 0;
    PyObject *split = lookup(raw, K_SPLIT, &failed);
    if (split != NULL && PyDict_Check(split)) {
        PyObject *s5 = lookup(split, K_5M, &failed);
        PyObject *s1 = lookup(split, K_1H, &failed);
        long long v5 = count_of(s5, 0, &ok_5m), v1 = count_of(s1, 0, &ok_1h);
        if (s5 != NULL || s1 != NULL) {
            w5 = v5;
            w1 = v1;
            if (creation > w5 + w1) /* the split never undercounts the billed total: the rest is 5m */
                w5 += creation - (w5 + w1);
        }
    }
    if (failed)
        return NULL;
    int zeroed = !(ok_in && ok_out && ok_creation && ok_read && ok_5m && ok_1h);
    long long counts[5] = {input, output, w5, w1, read};
    PyObject *result = PyTuple_New(6);
    if (result == NULL)
        return NULL;
    for (int i = 0; i < 5; i++) {
        PyObject *v = PyLong_FromLongLong(counts[i]);
        if (v == NULL) {
            Py_DECREF(result);
            return NULL;
        }
        PyTuple_SET_ITEM(result, i, v);
    }
    PyObject *flag = zeroed ? Py_True : Py_False;
    Py_INCREF(flag);
    PyTuple_SET_ITEM(result, 5, flag);
    return result;
}

/* utf8_size(text) -> len(text.encode("utf-8", "surrogatepass")) without building the bytes
 * (parser._utf8_size_py, the reference): a tool result's size, where encoding a long non-ASCII
 * result only to measure it was most of _text_size. A surrogate (lone, as surrogatepass writes
 * it) takes 3 bytes, like any other code point below U+10000. */
static PyObject *
utf8_size(PyObject *self, PyObject *text)
{
    if (!PyUnicode_Check(text)) {
        PyErr_SetString(PyExc_TypeError, "utf8_size takes a str");
        return NULL;
    }
    if (PyUnicode_READY(text) < 0)
        return NULL;
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    if (PyUnicode_IS_ASCII(text))
        return PyLong_FromSsize_t(n);
    Py_ssize_t size = n; /* one byte each, plus the extra bytes below */
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    if (kind == PyUnicode_1BYTE_KIND) {
        const Py_UCS1 *c = (const Py_UCS1 *)data;
        for (Py_ssize_t i = 0; i < n; i++)
            size += c[i] >> 7;
    } else if (kind == PyUnicode_2BYTE_KIND) {
        const Py_UCS2 *c = (const Py_UCS2 *)data;
        for (Py_ssize_t i = 0; i < n; i++)
            size += (c[i] >= 0x80) + (c[i] >= 0x800);
    } else {
        const Py_UCS4 *c = (const Py_UCS4 *)data;
        for (Py_ssize_t i = 0; i < n; i++)
            size += (c[i] >= 0x80) + (c[i] >= 0x800) + (c[i] >= 0x10000);
    }
    return PyLong_FromSsize_t(size);
}

/* ---- utc_datetime: a timestamp of Claude Code's form ------------------------------------------ */

/* The digits text[at..at+n) as a number, or -1 unless all are ASCII digits. */
static int
digits_at(const Py_UCS1 *text, int at, int n)
{
    int v = 0;
    for (int i = at; i < at + n; i++) {
        if (text[i] < '0' || text[i] > '9')
            return -1;
        v = v * 10 + (text[i] - '0');
    }
    return v;
}

/* utc_datetime(text) -> the naive datetime of "YYYY-MM-DDTHH:MM:SS.mmmZ" (what parse_timestamp
 * reads it as: datetime.fromisoformat of the text before the Z), or None for any other text or
 * an impossible date (parse_timestamp then decides): a response's lines each parsed one, and
 * fromisoformat behind a Python function cost a tenth of reading a plain one. */
static PyObject *
utc_datetime(PyObject *self, PyObject *text)
{
    if (!PyUnicode_CheckExact(text) || PyUnicode_READY(text) < 0 || !PyUnicode_IS_ASCII(text)
        || PyUnicode_GET_LENGTH(text) != 24)
        Py_RETURN_NONE;
    const Py_UCS1 *c = PyUnicode_1BYTE_DATA(text);
    if (c[4] != '-' || c[7] != '-' || c[10] != 'T' || c[13] != ':' || c[16] != ':' || c[19] != '.' || c[23] != 'Z')
        Py_RETURN_NONE;
    int year = digits_at(c, 0, 4), month = digits_at(c, 5, 2), day = digits_at(c, 8, 2);
    int hour = digits_at(c, 11, 2), minute = digits_at(c, 14, 2), second = digits_at(c, 17, 2);
    int milli = digits_at(c, 20, 3);
    if (year < 1 || month < 1 || month > 12 || day < 1 || hour < 0 || hour > 23 || minute < 0 || minute > 59
        || second < 0 || second > 59 || milli < 0)
        Py_RETURN_NONE;
    static const int month_days[12] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    if (day > month_days[month - 1] || (month == 2 && day == 29 && !leap))
        Py_RETURN_NONE;
    return PyDateTime_FromDateAndTime(year, month, day, hour, minute, second, milli * 1000);
}

/* ---- slot_builder: records built without their dataclass __init__ ------------------------- */

/* slot_builder(cls, names) -> builder; builder(*values) is an instance of cls whose slots named
 * ``names`` hold ``values``: what cls(*values) makes when cls is a dataclass(slots=True) of exactly
 * those fields, without the generated __init__ (and a frozen one's object.__setattr__ per field),
 * which cost more than the rest of a turn's reading. Refused (TypeError) for any other class:
 * one with a base other than object, a __dict__, a slot that is not one of ``names``. */
typedef struct {
    PyObject_HEAD
    PyTypeObject *cls;
    Py_ssize_t n;
    Py_ssize_t offsets[1]; /* n of them */
} Builder;

static void
builder_dealloc(Builder *self)
{
    Py_XDECREF(self->cls);
    PyObject_Free(self);
}

static PyObject *
builder_call(Builder *self, PyObject *args, PyObject *kwargs)
{
    if ((kwargs != NULL && PyDict_GET_SIZE(kwargs) != 0) || PyTuple_GET_SIZE(args) != self->n) {
        PyErr_Format(PyExc_TypeError, "the builder takes exactly %zd positional values", self->n);
        return NULL;
    }
    PyObject *obj = self->cls->tp_alloc(self->cls, 0);
    if (obj == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < self->n; i++) {
        PyObject *value = PyTuple_GET_ITEM(args, i);
        Py_INCREF(value);
        *(PyObject **)((char *)obj + self->offsets[i]) = value;
    }
    return obj;
}

static PyTypeObject BuilderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "warden.ingest._skim.Builder",
    .tp_basicsize = sizeof(Builder),
    .tp_itemsize = sizeof(Py_ssize_t),
    .tp_dealloc = (destructor)builder_dealloc,
    .tp_call = (ternaryfunc)builder_call,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "builder(*values) -> an instance of its class with those slot values",
};

static PyObject *
slot_builder(PyObject *module, PyObject *args)
{
    PyTypeObject *cls;
    PyObject *names;
    if (!PyArg_ParseTuple(args, "O!O!", &PyType_Type, &cls, &PyTuple_Type, &names))
        return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(names);
    PyObject *slots = PyObject_GetAttrString((PyObject *)cls, "__slots__");
    if (slots == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError))
            return NULL;
        PyErr_Clear(); /* no slots: refused below */
    }
    int same = slots != NULL && PyTuple_Check(slots) && PyObject_RichCompareBool(slots, names, Py_EQ) == 1;
    Py_XDECREF(slots);
    if (PyErr_Occurred())
        return NULL;
    if (!same || cls->tp_base != &PyBaseObject_Type || cls->tp_dictoffset != 0 || cls->tp_weaklistoffset != 0
        || !(cls->tp_flags & Py_TPFLAGS_HEAPTYPE) || cls->tp_itemsize != 0) {
        PyErr_SetString(PyExc_TypeError, "slot_builder takes a slots class whose __slots__ are the names, on object");
        return NULL;
    }
    Builder *self = PyObject_NewVar(Builder, &BuilderType, n);
    if (self == NULL)
        return NULL;
    self->cls = NULL;
    self->n = n;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *descr = PyDict_GetItemWithError(cls->tp_dict, PyTuple_GET_ITEM(names, i)); /* borrowed */
        if (descr == NULL || !PyObject_TypeCheck(descr, &PyMemberDescr_Type)
            || ((PyMemberDescrObject *)descr)->d_member->type != T_OBJECT_EX
            || (((PyMemberDescrObject *)descr)->d_member->flags & READONLY)) {
            Py_DECREF(self);
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "slot_builder: a name is not an object slot of the class");
            return NULL;
        }
        self->offsets[i] = ((PyMemberDescrObject *)descr)->d_member->offset;
    }
    Py_INCREF(cls);
    self->cls = cls;
    return (PyObject *)self;
}

/* ---- string_text: a tool result's text, read from its raw JSON -------------------------------- */

static int
hex4(const unsigned char *p)
{
    int v = 0;
    for (int k = 0; k < 4; k++) {
        unsigned char c = p[k];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0)
            return -1;
        v = v * 16 + d;
    }
    return v;
}

/* The bytes a string's text holds as they are: printable ASCII but the quote and the backslash. */
static unsigned char plain_byte[256];

static void
init_plain_bytes(void)
{
    for (int c = 0x20; c < 0x80; c++)
        plain_byte[c] = c != '"' && c != '\\';
}

/* The end of the run of plain bytes from s[i] (at most s[end]). */
static inline Py_ssize_t
plain_run_end(const unsigned char *s, Py_ssize_t i, Py_ssize_t end)
{
#ifdef __SSE2__
    const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\'), space = _mm_set1_epi8(0x20);
    while (i + 16 <= end) {
        __m128i v = _mm_loadu_si128((const __m128i *)(s + i));
        /* signed: a byte >= 0x80 is negative, so "below a space" flags it with the controls */
        __m128i odd = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash)),
                                   _mm_cmplt_epi8(v, space));
        int mask = _mm_movemask_epi8(odd);
        if (mask)
            return i + __builtin_ctz((unsigned)mask);
        i += 16;
    }
#endif
    while (i < end && plain_byte[s[i]])
        i++;
    return i;
}

#define HEAD_ON_STACK 4096

/* max_chars as a Py_ssize_t in [0, 2**20]; -1 with an exception set otherwise */
static Py_ssize_t
max_chars_of(PyObject *value)
{
    Py_ssize_t max_chars = PyLong_AsSsize_t(value);
    if (max_chars == -1 && PyErr_Occurred())
        return -1;
    if (max_chars < 0 || max_chars > (1 << 20)) {
        PyErr_SetString(PyExc_ValueError, "max_chars must be in [0, 2**20]");
        return -1;
    }
    return max_chars;
}

/* string_text's reading of the raw value ``raw`` (any buffer): (size, head), or Py_None for
 * another value or a refused one; NULL with an exception (not a buffer, out of memory). */
static PyObject *
text_of_raw(PyObject *raw, Py_ssize_t max_chars)
{
    Py_buffer view;
    if (PyObject_GetBuffer(raw, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    const unsigned char *s = (const unsigned char *)view.buf;
    Py_ssize_t n = view.len;
    char on_stack[4 * HEAD_ON_STACK]; /* the head's UTF-8: at most 4 bytes a character */
    char *head = on_stack;
    PyObject *result = NULL;
    if (n < 2 || s[0] != '"' || s[n - 1] != '"')
        goto other;
    if (max_chars > HEAD_ON_STACK && (head = PyMem_Malloc((size_t)max_chars * 4)) == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t i = 1, end = n - 1, size = 0, chars = 0, head_len = 0;
    while (i < end) {
        Py_ssize_t run = plain_run_end(s, i, end);
        if (chars < max_chars) { /* plain bytes are characters of one byte each */
            Py_ssize_t take = run - i < max_chars - chars ? run - i : max_chars - chars;
            memcpy(head + head_len, s + i, (size_t)take);
            head_len += take;
            chars += take;
        }
        size += run - i;
        i = run;
        if (i >= end)
            break;
        unsigned char c = s[i];
        Py_UCS4 cp;
        Py_ssize_t bytes; /* of the decoded text */
        if (c < 0x80) {
            if (c != '\\') /* a quote before the end (not one string), or a raw control */
                goto other;
            if (i + 1 >= end)
                goto other;
            unsigned char e = s[i + 1];
            i += 2;
            switch (e) {
            case '"': cp = '"'; break;
            case '\\': cp = '\\'; break;
            case '/': cp = '/'; break;
            case 'b': cp = '\b'; break;
            case 'f': cp = '\f'; break;
            case 'n': cp = '\n'; break;
            case 'r': cp = '\r'; break;
            case 't': cp = '\t'; break;
            case 'u': {
                int u = i + 4 <= end ? hex4(s + i) : -1;
                if (u < 0)
                    goto other;
                i += 4;
                if (u >= 0xDC00 && u <= 0xDFFF) /* a low surrogate first: refused */
                    goto other;
                if (u >= 0xD800 && u <= 0xDBFF) { /* a high one: its low one must follow */
                    int lo = i + 6 <= end && s[i] == '\\' && s[i + 1] == 'u' ? hex4(s + i + 2) : -1;
                    if (lo < 0xDC00 || lo > 0xDFFF)
                        goto other;
                    i += 6;
                    cp = 0x10000 + (((Py_UCS4)u - 0xD800) << 10) + ((Py_UCS4)lo - 0xDC00);
                } else {
                    cp = (Py_UCS4)u;
                }
                break;
            }
            default:
                goto other;
            }
            bytes = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
        } else { /* UTF-8, strictly: no overlong form, no surrogate, nothing past U+10FFFF */
            unsigned char lo = 0x80, hi = 0xBF;
            if (c >= 0xC2 && c <= 0xDF) {
                bytes = 2;
                cp = c & 0x1F;
            } else if (c >= 0xE0 && c <= 0xEF) {
                bytes = 3;
                cp = c & 0x0F;
                if (c == 0xE0)
                    lo = 0xA0;
                else if (c == 0xED)
                    hi = 0x9F;
            } else if (c >= 0xF0 && c <= 0xF4) {
                bytes = 4;
                cp = c & 0x07;
                if (c == 0xF0)
                    lo = 0x90;
                else if (c == 0xF4)
                    hi = 0x8F;
            } else {
                goto other;
            }
            if (i + bytes > end)
                goto other;
            for (Py_ssize_t k = 1; k < bytes; k++) {
                unsigned char t = s[i + k];
                if (t < (k == 1 ? lo : 0x80) || t > (k == 1 ? hi : 0xBF))
                    goto other;
                cp = (cp << 6) | (t & 0x3F);
            }
            i += bytes;
        }
        size += bytes;
        if (chars < max_chars) { /* the character's UTF-8: well-formed, so decoding it cannot fail */
            char *h = head + head_len;
            if (bytes == 1) {
                h[0] = (char)cp;
            } else if (bytes == 2) {
                h[0] = (char)(0xC0 | (cp >> 6));
                h[1] = (char)(0x80 | (cp & 0x3F));
            } else if (bytes == 3) {
                h[0] = (char)(0xE0 | (cp >> 12));
                h[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
                h[2] = (char)(0x80 | (cp & 0x3F));
            } else {
                h[0] = (char)(0xF0 | (cp >> 18));
                h[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
                h[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
                h[3] = (char)(0x80 | (cp & 0x3F));
            }
            head_len += bytes;
            chars++;
        }
    }
    PyObject *text = PyUnicode_DecodeUTF8(head, head_len, "strict");
    if (text != NULL)
        result = Py_BuildValue("(nN)", size, text);
    goto done;
other:
    result = Py_None;
    Py_INCREF(result);
done:
    if (head != on_stack)
        PyMem_Free(head);
    PyBuffer_Release(&view);
    return result;
}

static PyObject *
string_text(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "string_text takes (raw, max_chars)");
        return NULL;
    }
    Py_ssize_t max_chars = max_chars_of(args[1]);
    return max_chars < 0 ? NULL : text_of_raw(args[0], max_chars);
}

/* ---- read_results: a decoded line's tool results, read in one call ---------------------------- */

enum { A_TYPE, A_MESSAGE, A_CONTENT, S_USER, S_TOOL_RESULT, N_NAMES };
static const char *name_texts[N_NAMES] = {"type", "message", "content", "user", "tool_result"};
static PyObject *names[N_NAMES];

/* value is the str names[which] (decoded JSON: an exact str, rarely the interned object itself) */
static int
is_name(PyObject *value, int which)
{
    PyObject *name = names[which];
    if (value == name)
        return 1;
    return PyUnicode_CheckExact(value) && PyUnicode_GET_LENGTH(value) == PyUnicode_GET_LENGTH(name)
           && PyUnicode_KIND(value) == PyUnicode_1BYTE_KIND
           && memcmp(PyUnicode_1BYTE_DATA(value), PyUnicode_1BYTE_DATA(name), PyUnicode_GET_LENGTH(name)) == 0;
}

/* 1 when obj's attribute names[attr] is the str names[which], 0 when it is not, -1 on an error */
static int
attr_is_name(PyObject *obj, int attr, int which)
{
    PyObject *value = PyObject_GetAttr(obj, names[attr]);
    if (value == NULL)
        return -1;
    int same = is_name(value, which);
    Py_DECREF(value);
    return same;
}

/* read_results(record, max_chars, fallback): parser._read_results in one call. For a "user"
 * record whose message's content is a list, each "tool_result" block's raw content is replaced
 * by its (size, head): string_text's, or fallback(raw)'s where string_text gives None (another
 * value, or text the reference refuses: fallback raises then, and so does this). */
static PyObject *
read_results(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "read_results takes (record, max_chars, fallback)");
        return NULL;
    }
    PyObject *record = args[0], *fallback = args[2];
    Py_ssize_t max_chars = max_chars_of(args[1]);
    if (max_chars < 0)
        return NULL;
    int user = attr_is_name(record, A_TYPE, S_USER);
    if (user <= 0)
        return user < 0 ? NULL : Py_NewRef(Py_None);
    PyObject *message = PyObject_GetAttr(record, names[A_MESSAGE]);
    if (message == NULL)
        return NULL;
    PyObject *content = message == Py_None ? NULL : PyObject_GetAttr(message, names[A_CONTENT]);
    Py_DECREF(message);
    if (content == NULL)
        return PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
    if (!PyList_CheckExact(content)) {
        Py_DECREF(content);
        Py_RETURN_NONE;
    }
    for (Py_ssize_t b = 0; b < PyList_GET_SIZE(content); b++) {
        PyObject *block = Py_NewRef(PyList_GET_ITEM(content, b)); /* held: fallback runs Python */
        int result_block = attr_is_name(block, A_TYPE, S_TOOL_RESULT);
        PyObject *raw = result_block > 0 ? PyObject_GetAttr(block, names[A_CONTENT]) : NULL;
        PyObject *text = raw != NULL ? text_of_raw(raw, max_chars) : NULL;
        if (text == Py_None) {
            Py_DECREF(text);
            text = PyObject_CallOneArg(fallback, raw);
        }
        int set = text != NULL ? PyObject_SetAttr(block, names[A_CONTENT], text) : -1;
        Py_XDECREF(text);
        Py_XDECREF(raw);
        Py_DECREF(block);
        if (result_block == 0)
            continue;
        if (set < 0)
            goto fail;
    }
    Py_DECREF(content);
    Py_RETURN_NONE;
fail:
    Py_DECREF(content);
    return NULL;
}

static PyMethodDef methods[] = {
    {"usage_counts", usage_counts, METH_O,
     "usage_counts(usage) -> (input, output, write_5m, write_1h, read, zeroed) of an API usage dict."},
    {"utf8_size", utf8_size, METH_O,
     "utf8_size(text) -> len(text.encode('utf-8', 'surrogatepass')), without building the bytes."},
    {"utc_datetime", utc_datetime, METH_O,
     "utc_datetime(text) -> the naive datetime of 'YYYY-MM-DDTHH:MM:SS.mmmZ', or None for other text."},
    {"slot_builder", slot_builder, METH_VARARGS,
     "slot_builder(cls, names) -> builder(*values): instances of a slots dataclass without its __init__."},
    {"string_text", (PyCFunction)(void (*)(void))string_text, METH_FASTCALL,
     "string_text(raw, max_chars) -> (size, head) of a raw JSON string's text, or None (another value, or refused)."},
    {"read_results", (PyCFunction)(void (*)(void))read_results, METH_FASTCALL,
     "read_results(record, max_chars, fallback): a decoded user line's tool results read into (size, head)."},
    {"split_lines", split_lines, METH_VARARGS,
     "split_lines(data, upto, offset, max_line) -> (lines, ends): the complete lines of data[:upto]."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_skim", NULL, -1, methods};

PyMODINIT_FUNC
PyInit__skim(void)
{
    for (int i = 0; i < N_KEYS; i++) {
        if (keys[i] == NULL && (keys[i] = PyUnicode_InternFromString(key_names[i])) == NULL)
            return NULL;
    }
    init_plain_bytes();
    for (int i = 0; i < N_NAMES; i++) {
        if (names[i] == NULL && (names[i] = PyUnicode_InternFromString(name_texts[i])) == NULL)
            return NULL;
    }
    if (PyType_Ready(&BuilderType) < 0)
        return NULL;
    PyDateTime_IMPORT;
    if (PyDateTimeAPI == NULL)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && PyModule_AddType(m, &BuilderType) < 0) { /* its type, for isinstance checks */
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
