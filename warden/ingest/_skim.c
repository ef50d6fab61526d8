/* warden.ingest._skim: the transcript parser's fast path, whole lines read in C (Reader).
 *
 * Built by setup.py where a compiler is there (optional: without it every line is read by the
 * pure-Python parser, which stays the specification; WARDEN_PURE_PYTHON turns this off too).
 *
 * Reader(**hooks).feed_block(parser, data, upto, offset, max_line) reads the complete lines of
 * data[:upto] (upto: the index of the block's last newline; offset: the file offset of data[0])
 * into ``parser``, a warden.ingest.parser.TranscriptParser, exactly as its feed_line would: the
 * pure-Python parser is the specification, and the tests compare the two on every corpus
 * transcript and on generated ones.
 *
 * A line is read in two passes. The first scans it (_json_scan.h) into the fields the parser reads,
 * without touching the parser; it gives up on anything it cannot read exactly as msgspec and the
 * parser would — odd JSON, text that is not UTF-8, a number that is not a small integer, an odd
 * shape, a duplicated field, rare cases the parser handles in Python (a progress line's embedded
 * response, a Task result naming its subagent) — and the line then goes to the parser's own
 * feed_line. The second applies the line to the parser's state, in the order the parser does.
 * The state stays the parser's Python objects (its __dict__, its _State's, its LineStats'), so the
 * two paths can take turns line by line; only the line count and the offset are held here
 * between fallbacks.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h> /* T_OBJECT_EX */
#include <datetime.h>
#include <stdio.h>
#include "_json_scan.h"

/* ---- names ---------------------------------------------------------------------------------- */

#define NAMES(X) \
    X(_s) X(stats) X(turns) X(tool_calls) X(user_prompts) X(compactions) X(_turn_by_key) X(_call_by_id) \
    X(_raw_usage) X(offset) X(session_id) X(agent_id) X(cwd) X(version) X(models) X(first_ts) X(last_ts) \
    X(counters) X(reads) X(edit_gen) X(digest) X(digest_dropped) X(task_types) X(subagent_types) X(awaiting) \
    X(last_turn_tools) \
    X(last_turn_text) X(last_stop_reason) X(interrupted) X(tool_index) X(turn_index) X(lines) X(duplicate_usage) \
    X(zeroed_usage) X(oversized) X(malformed) X(_ledger_only) X(_ledger_prompts) X(rereads) X(edits) X(greps) X(failed) X(other) X(read) X(edit) X(write) X(grep) \
    X(glob) X(bash) X(task) X(_feed_fallback) X(index) X(message_key) X(model) X(usage) X(timestamp) X(text) \
    X(tool_call_indexes) X(content_bytes) X(tool_use_id) X(name) X(kind) X(input) X(input_bytes) X(path) \
    X(line_range) X(command) X(result_bytes) X(result_text) X(is_error) X(is_reread) X(turn) X(input_tokens) \
    X(output_tokens) X(cache_write_5m) X(cache_write_1h) X(cache_read)

enum {
#define AS_ENUM(n) N_##n,
    NAMES(AS_ENUM)
#undef AS_ENUM
    N_COUNT
};
static const char *name_text[N_COUNT] = {
#define AS_TEXT(n) #n,
    NAMES(AS_TEXT)
#undef AS_TEXT
};
static PyObject *NAME[N_COUNT];
static PyObject *EMPTY, *QUESTION, *NONE_TEXT, *SYNTHETIC;

/* ---- the reader and its hooks --------------------------------------------------------------- */

/* fn(text) remembered by the raw JSON of ``text`` (fn is pure, and equal raw JSON is equal
 * text): a session reads, edits and runs the same few paths and commands over and over, and a
 * repeated one then needs no str. Open addressing; emptied when half full. */
#define MEMO_SLOTS 8192

typedef struct {
    uint64_t hash;
    Py_ssize_t len;
    unsigned char *raw; /* PyMem_Malloc'd */
    PyObject *value;    /* NULL: a free slot */
} MemoSlot;

typedef struct {
    MemoSlot *slots;
    Py_ssize_t used;
} RawMemo;

static void
memo_clear(RawMemo *m)
{
    for (Py_ssize_t i = 0; m->slots != NULL && i < MEMO_SLOTS; i++) {
        if (m->slots[i].value != NULL) {
            PyMem_Free(m->slots[i].raw);
            Py_CLEAR(m->slots[i].value);
        }
    }
    m->used = 0;
}

/* A one-entry cache of what a JSON value's raw text last read as (its text alike, line after line). */
typedef struct {
    PyObject *raw;   /* bytes: the raw JSON text, or NULL */
    PyObject *value;
} LastValue;

/* The value kept for ``v``'s raw text (a new reference), or NULL if it is not the one kept. */
static inline PyObject *
last_value(const LastValue *last, const JVal *v)
{
    Py_ssize_t n = v->e - v->p;
    if (last->raw != NULL && PyBytes_GET_SIZE(last->raw) == n && memcmp(PyBytes_AS_STRING(last->raw), v->p, (size_t)n) == 0)
        return Py_NewRef(last->value);
    return NULL;
}

/* Keep ``value`` as what ``v``'s raw text reads as; -1 (an exception set) if that fails. */
static int
keep_last_value(LastValue *last, const JVal *v, PyObject *value)
{
    PyObject *raw = PyBytes_FromStringAndSize((const char *)v->p, v->e - v->p);
    if (raw == NULL)
        return -1;
    Py_XSETREF(last->raw, raw);
    Py_XSETREF(last->value, Py_NewRef(value));
    return 0;
}

typedef struct {
    PyObject_HEAD
    /* the parser's records and helpers (parser.py hands them over: one definition of each) */
    PyTypeObject *usage_cls, *turn_cls, *call_cls, *prompt_cls;
    PyObject *no_usage, *tool_kinds, *free_models;
    PyObject *valid_id, *stored_project, *clean_label, *model_name, *path_key, *digest_target;
    PyObject *parse_timestamp, *utc_text, *decode;
    Py_ssize_t max_result_text, max_prompt_text, max_turn_text, max_digest_steps, max_awaiting, max_read_registry;
    long long bytes_per_token; /* warden.tokens.BYTES_PER_TOKEN */
    /* slot offsets */
    Py_ssize_t u_off[5];
    Py_ssize_t t_off[8];
    Py_ssize_t c_off[15];
    Py_ssize_t p_off[2];
    /* per line scratch */
    struct Block *blocks;
    Py_ssize_t n_blocks, cap_blocks;
    struct Item *items;
    Py_ssize_t n_items, cap_items;
    char *text_buf;
    Py_ssize_t text_cap;
    JVal task_agent;     /* a Task result's toolUseResult.agentId (left_to_python reads it for apply_user) */
    int task_agent_read; /* whether the line's Task results name their subagent there */
    /* one-entry caches: a response's lines share a timestamp, a model and a stop reason */
    LastValue last_ts, last_model, last_stop;
    RawMemo path_keys, targets; /* path_key's and digest_target's results */
    PyObject *empty_target;     /* digest_target("") */
    /* tool names (raw JSON text, no escape) and their kind */
    PyObject *kind_names[64], *kind_values[64];
    int kind_codes[64], n_kinds;
} Reader;

enum { T_INDEX, T_KEY, T_MODEL, T_USAGE, T_TIMESTAMP, T_TEXT, T_CALLS, T_CONTENT_BYTES };
enum { C_INDEX, C_ID, C_NAME, C_KIND, C_INPUT, C_INPUT_BYTES, C_PATH, C_RANGE, C_COMMAND, C_RESULT_BYTES,
       C_RESULT_TEXT, C_IS_ERROR, C_IS_REREAD, C_TIMESTAMP, C_TURN };

#define SLOT(obj, off) (*(PyObject **)((char *)(obj) + (off)))

/* Replace a slot's value (the new reference is stolen). */
static inline void
set_slot(PyObject *obj, Py_ssize_t off, PyObject *value)
{
    PyObject *old = SLOT(obj, off);
    SLOT(obj, off) = value;
    Py_XDECREF(old);
}

/* A new instance of a slots class with every slot filled (references stolen; NULL ones: the
 * instance is dropped and NULL returned). */
static PyObject *
new_record(PyTypeObject *cls, const Py_ssize_t *offsets, int n, PyObject **values)
{
    int failed = 0;
    for (int i = 0; i < n; i++)
        failed |= values[i] == NULL;
    PyObject *obj = failed ? NULL : cls->tp_alloc(cls, 0);
    if (obj == NULL) {
        for (int i = 0; i < n; i++)
            Py_XDECREF(values[i]);
        return NULL;
    }
    for (int i = 0; i < n; i++)
        SLOT(obj, offsets[i]) = values[i];
    return obj;
}

/* ---- the first pass: a line's fields ---------------------------------------------------------- */

typedef struct Item { /* a tool result's content item */
    JVal type, text, data; /* data: source.data of an image */
} Item;

enum { B_OTHER, B_TEXT, B_TOOL_USE, B_THINKING, B_TOOL_RESULT };
enum { R_NONE, R_TEXT, R_ITEMS }; /* a tool result's content, as the parser reads it */

typedef struct Block {
    int kind;
    JVal type, text, thinking, id, name, input, tool_use_id, content, is_error;
    /* tool_use: its input as the parser reads it */
    Py_ssize_t input_bytes;
    JVal file_path, path, notebook_path, offset, limit, pattern, command, subagent_type;
    /* tool_result */
    int result;
    Py_ssize_t first_item, n_items;
} Block;

typedef struct {
    JVal type, subtype, session_id, agent_id, is_sidechain, cwd, version, timestamp, uuid, request_id,
        is_compact_summary, is_meta, tool_use_result, data, parent_tool_use_id;
    int message; /* J_ABSENT, J_NULL, J_OBJ */
    JVal id, model, usage, stop_reason;
    int content; /* J_ABSENT, J_NULL, J_STR, J_ARR */
    JVal content_text;
    /* usage: counts as parser.usage_from_json reads them, and zeroed_counts */
    long long counts[5];
    int zeroed;
} Line;

#define GROW(arr, n, cap, type)                                                              \
    do {                                                                                     \
        if ((n) >= (cap)) {                                                                  \
            Py_ssize_t new_cap = (cap) ? 2 * (cap) : 16;                                     \
            type *grown = PyMem_Realloc((arr), (size_t)new_cap * sizeof(type));              \
            if (grown == NULL)                                                               \
                return NULL;                                                                 \
            (arr) = grown;                                                                   \
            (cap) = new_cap;                                                                 \
        }                                                                                    \
    } while (0)

/* A read value into *v (a field the schema names: typed Any). A duplicate gives up: msgspec keeps
 * the last, and the first pass would have to unread the first. */
static inline const unsigned char *
read_field(const unsigned char *p, const unsigned char *e, JVal *v)
{
    if (v->kind != J_ABSENT)
        return NULL;
    JVal got;
    const unsigned char *q = scan_value(p, e, 1, 1, &got);
    if (q == NULL || got.kind == J_NUM)
        return NULL;
    *v = got;
    return q;
}

static inline const unsigned char *
skip_field(const unsigned char *p, const unsigned char *e)
{
    return skip_value(p, e, 0);
}

/* usage_from_json's count and _readable_count of one value */
static inline long long
count_of(const JVal *v, int required, int *readable)
{
    switch (v->kind) {
    case J_ABSENT:
    case J_NULL:
        *readable = !required;
        return 0;
    case J_INT:
        *readable = v->i >= 0 && v->i < 1000000000000000LL;
        return v->i > 0 && v->i < 1000000000000000LL ? v->i : 0;
    default: /* a bool, a string, a container: no count */
        *readable = 0;
        return 0;
    }
}

/* A usage object: its five counts and zeroed flag into line (usage_from_json, zeroed_counts). */
static const unsigned char *
read_usage(const unsigned char *p, const unsigned char *e, Line *line)
{
    JVal input = {0}, output = {0}, creation = {0}, read = {0}, split = {0}, w5 = {0}, w1 = {0};
    int more = 1;
    const unsigned char *start = p;
    p = skip_ws(p + 1, e);
    if (p < e && *p == '}') {
        p++;
        more = 0;
    }
    while (more) {
        const unsigned char *name;
        Py_ssize_t len;
        if ((p = scan_read_key(p, e, &name, &len)) == NULL)
            return NULL;
        if (NAME_IS(name, len, "input_tokens"))
            p = read_field(p, e, &input);
        else if (NAME_IS(name, len, "output_tokens"))
            p = read_field(p, e, &output);
        else if (NAME_IS(name, len, "cache_creation_input_tokens"))
            p = read_field(p, e, &creation);
        else if (NAME_IS(name, len, "cache_read_input_tokens"))
            p = read_field(p, e, &read);
        else if (NAME_IS(name, len, "cache_creation")) {
            if (split.kind != J_ABSENT)
                return NULL;
            if (p < e && *p == '{') { /* the split: its two counts */
                split.kind = J_OBJ;
                int inner = 1;
                p = skip_ws(p + 1, e);
                if (p < e && *p == '}') {
                    p++;
                    inner = 0;
                }
                while (inner) {
                    const unsigned char *n2;
                    Py_ssize_t l2;
                    if ((p = scan_read_key(p, e, &n2, &l2)) == NULL)
                        return NULL;
                    if (NAME_IS(n2, l2, "ephemeral_5m_input_tokens"))
                        p = read_field(p, e, &w5);
                    else if (NAME_IS(n2, l2, "ephemeral_1h_input_tokens"))
                        p = read_field(p, e, &w1);
                    else {
                        JVal other = {0};
                        p = read_field(p, e, &other);
                    }
                    if (p == NULL || (p = next_member(p, e, '}', &inner)) == NULL)
                        return NULL;
                }
            } else {
                p = read_field(p, e, &split); /* not a split: read, and ignored */
                split.kind = J_NULL;
            }
        } else {
            JVal other = {0};
            p = read_field(p, e, &other);
        }
        if (p == NULL || (p = next_member(p, e, '}', &more)) == NULL)
            return NULL;
    }
    int ok_in, ok_out, ok_creation, ok_read, ok_5m = 1, ok_1h = 1;
    long long in = count_of(&input, 1, &ok_in), out = count_of(&output, 1, &ok_out);
    long long total = count_of(&creation, 0, &ok_creation), rd = count_of(&read, 0, &ok_read);
    long long c5 = total, c1 = 0;
    if (split.kind == J_OBJ) {
        long long v5 = count_of(&w5, 0, &ok_5m), v1 = count_of(&w1, 0, &ok_1h);
        if (w5.kind != J_ABSENT || w1.kind != J_ABSENT) {
            c5 = v5;
            c1 = v1;
            if (total > c5 + c1) /* the split never undercounts the billed total: the rest is 5m */
                c5 += total - (c5 + c1);
        }
    }
    line->counts[0] = in;
    line->counts[1] = out;
    line->counts[2] = c5;
    line->counts[3] = c1;
    line->counts[4] = rd;
    line->zeroed = !(ok_in && ok_out && ok_creation && ok_read && ok_5m && ok_1h);
    line->usage.kind = J_OBJ;
    line->usage.p = start;
    line->usage.e = p;
    return p;
}

/* A tool input's value at p: its length as orjson writes it added to *size. Gives up where the
 * parser's dict would not be what the bytes say (a key twice), or orjson would write it
 * otherwise (a number that is not a small integer). Top-level fields the parser reads into b. */
static const unsigned char *
read_input_value(const unsigned char *p, const unsigned char *e, int depth, Py_ssize_t *size, Block *b)
{
    if (p >= e)
        return NULL;
    if (*p == '{') {
        if (depth >= MAX_DEPTH)
            return NULL;
        enum { MAX_KEYS = 64 };
        const unsigned char *key_at[MAX_KEYS];
        Py_ssize_t key_len[MAX_KEYS];
        int n_keys = 0, more = 1;
        *size += 2;
        p = skip_ws(p + 1, e);
        if (p < e && *p == '}')
            return p + 1;
        while (more) {
            if (p >= e || *p != '"')
                return NULL;
            JVal key;
            const unsigned char *q = scan_string(p, e, 1, &key);
            if (q == NULL || key.escaped || n_keys == MAX_KEYS)
                return NULL; /* an escaped key could repeat another one */
            const unsigned char *name = p + 1;
            Py_ssize_t len = q - p - 2;
            for (int k = 0; k < n_keys; k++)
                if (key_len[k] == len && memcmp(key_at[k], name, (size_t)len) == 0)
                    return NULL;
            key_at[n_keys] = name;
            key_len[n_keys++] = len;
            *size += key.jsize + 1 + (n_keys > 1); /* the key, its colon, the comma before it */
            q = skip_ws(q, e);
            if (q >= e || *q != ':')
                return NULL;
            p = skip_ws(q + 1, e);
            JVal *field = NULL;
            if (depth == 0 && b != NULL) {
                if (NAME_IS(name, len, "file_path"))
                    field = &b->file_path;
                else if (NAME_IS(name, len, "path"))
                    field = &b->path;
                else if (NAME_IS(name, len, "notebook_path"))
                    field = &b->notebook_path;
                else if (NAME_IS(name, len, "offset"))
                    field = &b->offset;
                else if (NAME_IS(name, len, "limit"))
                    field = &b->limit;
                else if (NAME_IS(name, len, "pattern"))
                    field = &b->pattern;
                else if (NAME_IS(name, len, "command"))
                    field = &b->command;
                else if (NAME_IS(name, len, "subagent_type"))
                    field = &b->subagent_type;
            }
            const unsigned char *value_at = p;
            if ((p = read_input_value(p, e, depth + 1, size, NULL)) == NULL)
                return NULL;
            if (field != NULL) { /* scanned again: its fields (a string's measures) */
                JVal v;
                scan_value(value_at, e, 1, 1, &v);
                *field = v;
            }
            if ((p = next_member(p, e, '}', &more)) == NULL)
                return NULL;
        }
        return p;
    }
    if (*p == '[') {
        if (depth >= MAX_DEPTH)
            return NULL;
        int more = 1, n = 0;
        *size += 2;
        p = skip_ws(p + 1, e);
        if (p < e && *p == ']')
            return p + 1;
        while (more) {
            *size += n++ > 0;
            if ((p = read_input_value(p, e, depth + 1, size, NULL)) == NULL)
                return NULL;
            if ((p = next_member(p, e, ']', &more)) == NULL)
                return NULL;
        }
        return p;
    }
    JVal v;
    const unsigned char *q = scan_value(p, e, 1, depth, &v);
    if (q == NULL || v.kind == J_NUM)
        return NULL;
    *size += v.kind == J_STR ? v.jsize : q - p;
    return q;
}

/* A tool result's content list: its items (objects) into the reader's item array. */
static const unsigned char *
read_items(Reader *r, const unsigned char *p, const unsigned char *e, Block *b)
{
    int more = 1;
    b->first_item = r->n_items;
    b->n_items = 0;
    p = skip_ws(p + 1, e);
    if (p < e && *p == ']')
        return p + 1;
    while (more) {
        if (p >= e || *p != '{')
            return NULL; /* an item that is not an object: the parser drops it (left to it) */
        GROW(r->items, r->n_items, r->cap_items, Item);
        Item *item = &r->items[r->n_items];
        memset(item, 0, sizeof(*item));
        int inner = 1;
        p = skip_ws(p + 1, e);
        if (p < e && *p == '}') {
            p++;
            inner = 0;
        }
        while (inner) {
            const unsigned char *name;
            Py_ssize_t len;
            if ((p = scan_key(p, e, &name, &len)) == NULL)
                return NULL;
            if (NAME_IS(name, len, "type"))
                p = read_field(p, e, &item->type);
            else if (NAME_IS(name, len, "text"))
                p = read_field(p, e, &item->text);
            else if (NAME_IS(name, len, "source")) {
                JVal source = {0};
                const unsigned char *at = p;
                if ((p = read_field(p, e, &source)) != NULL && source.kind == J_OBJ) {
                    /* source.get("data"): its members again, for that one */
                    int m = 1;
                    const unsigned char *s = skip_ws(at + 1, e);
                    if (*s == '}')
                        m = 0;
                    while (m) {
                        const unsigned char *n2;
                        Py_ssize_t l2;
                        if ((s = scan_key(s, e, &n2, &l2)) == NULL)
                            return NULL;
                        if (NAME_IS(n2, l2, "data"))
                            s = read_field(s, e, &item->data);
                        else
                            s = skip_field(s, e);
                        if (s == NULL || (s = next_member(s, e, '}', &m)) == NULL)
                            return NULL;
                    }
                }
            } else {
                p = skip_field(p, e);
            }
            if (p == NULL || (p = next_member(p, e, '}', &inner)) == NULL)
                return NULL;
        }
        r->n_items++;
        b->n_items++;
        if ((p = next_member(p, e, ']', &more)) == NULL)
            return NULL;
    }
    return p;
}

/* A content block at p (an object) into the reader's block array. */
static const unsigned char *
read_block(Reader *r, const unsigned char *p, const unsigned char *e)
{
    if (p >= e || *p != '{')
        return NULL;
    GROW(r->blocks, r->n_blocks, r->cap_blocks, Block);
    Block *b = &r->blocks[r->n_blocks];
    memset(b, 0, sizeof(*b));
    b->input_bytes = 2; /* no input, or one that is not a dict: the parser reads {} */
    int more = 1;
    p = skip_ws(p + 1, e);
    if (p < e && *p == '}') {
        p++;
        more = 0;
    }
    while (more) {
        const unsigned char *name;
        Py_ssize_t len;
        if ((p = scan_key(p, e, &name, &len)) == NULL)
            return NULL;
        if (NAME_IS(name, len, "type"))
            p = read_field(p, e, &b->type);
        else if (NAME_IS(name, len, "text"))
            p = read_field(p, e, &b->text);
        else if (NAME_IS(name, len, "thinking"))
            p = read_field(p, e, &b->thinking);
        else if (NAME_IS(name, len, "id"))
            p = read_field(p, e, &b->id);
        else if (NAME_IS(name, len, "name"))
            p = read_field(p, e, &b->name);
        else if (NAME_IS(name, len, "input")) {
            if (b->input.kind != J_ABSENT)
                return NULL;
            const unsigned char *at = p;
            if (p < e && *p == '{') {
                Py_ssize_t size = 0;
                if ((p = read_input_value(p, e, 0, &size, b)) == NULL)
                    return NULL;
                b->input.kind = J_OBJ;
                b->input_bytes = size;
            } else {
                p = read_field(p, e, &b->input);
            }
            b->input.p = at;
            b->input.e = p;
        } else if (NAME_IS(name, len, "tool_use_id"))
            p = read_field(p, e, &b->tool_use_id);
        else if (NAME_IS(name, len, "is_error"))
            p = read_field(p, e, &b->is_error);
        else if (NAME_IS(name, len, "content")) {
            /* raw in the schema; a user line's tool result reads it (read mode: the parser decodes it) */
            if (b->content.kind != J_ABSENT)
                return NULL;
            const unsigned char *at = p;
            if (p < e && *p == '"') {
                p = scan_string(p, e, 1, &b->content);
                b->result = R_TEXT;
            } else if (p < e && *p == '[') {
                p = read_items(r, p, e, b);
                b->content.kind = J_ARR;
                b->result = R_ITEMS;
            } else {
                p = read_field(p, e, &b->content);
                b->result = b->content.kind == J_NULL ? R_NONE : -1; /* -1: another value (left to Python) */
            }
            b->content.p = at;
            b->content.e = p;
        } else {
            p = skip_field(p, e);
        }
        if (p == NULL || (p = next_member(p, e, '}', &more)) == NULL)
            return NULL;
    }
    if (STR_IS(b->type, "text"))
        b->kind = B_TEXT;
    else if (STR_IS(b->type, "tool_use"))
        b->kind = B_TOOL_USE;
    else if (STR_IS(b->type, "thinking"))
        b->kind = B_THINKING;
    else if (STR_IS(b->type, "tool_result"))
        b->kind = B_TOOL_RESULT;
    else if (b->type.kind == J_STR && b->type.escaped)
        return NULL; /* an escape could spell one of them */
    r->n_blocks++;
    return p;
}

static const unsigned char *
read_message(Reader *r, const unsigned char *p, const unsigned char *e, Line *line)
{
    int more = 1;
    p = skip_ws(p + 1, e);
    if (p < e && *p == '}') {
        p++;
        more = 0;
    }
    while (more) {
        const unsigned char *name;
        Py_ssize_t len;
        if ((p = scan_key(p, e, &name, &len)) == NULL)
            return NULL;
        if (NAME_IS(name, len, "id"))
            p = read_field(p, e, &line->id);
        else if (NAME_IS(name, len, "model"))
            p = read_field(p, e, &line->model);
        else if (NAME_IS(name, len, "stop_reason"))
            p = read_field(p, e, &line->stop_reason);
        else if (NAME_IS(name, len, "usage")) {
            if (line->usage.kind != J_ABSENT)
                return NULL;
            if (p < e && *p == '{')
                p = read_usage(p, e, line);
            else if ((p = read_field(p, e, &line->usage)) != NULL && line->usage.kind != J_NULL)
                return NULL; /* not a dict: no counts, and a value kept to compare (left to Python) */
        } else if (NAME_IS(name, len, "content")) {
            if (line->content != J_ABSENT)
                return NULL;
            if (p < e && *p == '[') {
                line->content = J_ARR;
                int m = 1;
                p = skip_ws(p + 1, e);
                if (p < e && *p == ']') {
                    p++;
                    m = 0;
                }
                while (m) {
                    if ((p = read_block(r, p, e)) == NULL || (p = next_member(p, e, ']', &m)) == NULL)
                        return NULL;
                }
            } else {
                JVal v = {0};
                if ((p = read_field(p, e, &v)) == NULL || (v.kind != J_STR && v.kind != J_NULL))
                    return NULL; /* another value: the parser reshapes the line */
                line->content = v.kind;
                line->content_text = v;
            }
        } else {
            p = skip_field(p, e);
        }
        if (p == NULL || (p = next_member(p, e, '}', &more)) == NULL)
            return NULL;
    }
    return p;
}

/* The first pass over a whole line (its first byte '{', its last '}'): 1 if it is read here. */
static int
read_line(Reader *r, const unsigned char *p, const unsigned char *e, Line *line)
{
    memset(line, 0, sizeof(*line));
    r->n_blocks = r->n_items = 0;
    int more = 1;
    p = skip_ws(p + 1, e);
    if (p < e && *p == '}') {
        p++;
        more = 0;
    }
    while (more) {
        const unsigned char *name;
        Py_ssize_t len;
        JVal *field = NULL;
        if ((p = scan_key(p, e, &name, &len)) == NULL)
            return 0;
        switch (len) {
        case 3:
            if (memcmp(name, "cwd", 3) == 0)
                field = &line->cwd;
            break;
        case 4:
            if (memcmp(name, "type", 4) == 0)
                field = &line->type;
            else if (memcmp(name, "uuid", 4) == 0)
                field = &line->uuid;
            else if (memcmp(name, "data", 4) == 0)
                field = &line->data;
            break;
        case 6:
            if (memcmp(name, "isMeta", 6) == 0)
                field = &line->is_meta;
            break;
        case 7:
            if (memcmp(name, "subtype", 7) == 0)
                field = &line->subtype;
            else if (memcmp(name, "agentId", 7) == 0)
                field = &line->agent_id;
            else if (memcmp(name, "version", 7) == 0)
                field = &line->version;
            else if (memcmp(name, "message", 7) == 0) {
                if (line->message != J_ABSENT)
                    return 0;
                if (p < e && *p == '{') {
                    line->message = J_OBJ;
                    p = read_message(r, p, e, line);
                } else {
                    JVal v = {0};
                    if ((p = read_field(p, e, &v)) == NULL || v.kind != J_NULL)
                        return 0; /* not an object: the parser reshapes the line */
                    line->message = J_NULL;
                }
                if (p == NULL)
                    return 0;
                goto next;
            }
            break;
        case 9:
            if (memcmp(name, "sessionId", 9) == 0)
                field = &line->session_id;
            else if (memcmp(name, "requestId", 9) == 0)
                field = &line->request_id;
            else if (memcmp(name, "timestamp", 9) == 0)
                field = &line->timestamp;
            break;
        case 11:
            if (memcmp(name, "isSidechain", 11) == 0)
                field = &line->is_sidechain;
            break;
        case 13:
            if (memcmp(name, "toolUseResult", 13) == 0) { /* raw: only whether it is there */
                if (line->tool_use_result.kind != J_ABSENT)
                    return 0;
                const unsigned char *at = p;
                if ((p = skip_value(p, e, 0)) == NULL)
                    return 0;
                line->tool_use_result.kind = J_OBJ; /* there (whatever its value) */
                line->tool_use_result.p = at;
                line->tool_use_result.e = p;
                goto next;
            }
            break;
        case 15:
            if (memcmp(name, "parentToolUseID", 15) == 0)
                field = &line->parent_tool_use_id;
            break;
        case 16:
            if (memcmp(name, "isCompactSummary", 16) == 0)
                field = &line->is_compact_summary;
            break;
        }
        p = field != NULL ? read_field(p, e, field) : skip_field(p, e);
        if (p == NULL)
            return 0;
    next:
        if ((p = next_member(p, e, '}', &more)) == NULL)
            return 0;
    }
    return skip_ws(p, e) == e;
}

/* ---- text ------------------------------------------------------------------------------------- */

/* The decoded text of a read string: its first max_chars characters' UTF-8 into out (room for
 * 4 bytes a character); the bytes written. */
static Py_ssize_t
text_head(const JVal *v, Py_ssize_t max_chars, char *out)
{
    const unsigned char *s = v->p + 1, *e = v->e - 1;
    if (!v->escaped && v->ascii) {
        Py_ssize_t n = e - s < max_chars ? e - s : max_chars;
        memcpy(out, s, (size_t)n);
        return n;
    }
    Py_ssize_t chars = 0, len = 0;
    while (s < e && chars < max_chars) {
        /* a run of plain ASCII (what a scanned string holds up to its next escape or multi-byte
         * character), copied whole */
        Py_ssize_t run = string_stop(s, e, 1) - s;
        if (run > max_chars - chars)
            run = max_chars - chars;
        memcpy(out + len, s, (size_t)run);
        len += run;
        chars += run;
        s += run;
        if (s >= e || chars >= max_chars)
            break;
        Py_UCS4 cp;
        if (*s == '\\') {
            unsigned char x = s[1];
            if (x == 'u') {
                int u = hex4_at(s + 2);
                if (u >= 0xD800 && u <= 0xDBFF) {
                    cp = 0x10000 + (((Py_UCS4)u - 0xD800) << 10) + ((Py_UCS4)hex4_at(s + 8) - 0xDC00);
                    s += 12;
                } else {
                    cp = (Py_UCS4)u;
                    s += 6;
                }
            } else {
                cp = x == 'b' ? '\b' : x == 'f' ? '\f' : x == 'n' ? '\n' : x == 'r' ? '\r' : x == 't' ? '\t' : x;
                s += 2;
            }
        } else { /* a multi-byte character, well-formed (the scan checked it): copied */
            int n = utf8_char(s, e, &cp);
            if (n == 0)
                break;
            memcpy(out + len, s, (size_t)n);
            len += n;
            s += n;
            chars++;
            continue;
        }
        int n = utf8_len_of(cp);
        char *h = out + len;
        if (n == 1) {
            h[0] = (char)cp;
        } else if (n == 2) {
            h[0] = (char)(0xC0 | (cp >> 6));
            h[1] = (char)(0x80 | (cp & 0x3F));
        } else if (n == 3) {
            h[0] = (char)(0xE0 | (cp >> 12));
            h[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
            h[2] = (char)(0x80 | (cp & 0x3F));
        } else {
            h[0] = (char)(0xF0 | (cp >> 18));
            h[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
            h[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
            h[3] = (char)(0x80 | (cp & 0x3F));
        }
        len += n;
        chars++;
    }
    return len;
}

static char *
text_room(Reader *r, Py_ssize_t chars)
{
    Py_ssize_t need = 4 * chars + 8;
    if (need > r->text_cap) {
        char *grown = PyMem_Realloc(r->text_buf, (size_t)need);
        if (grown == NULL) {
            PyErr_NoMemory();
            return NULL;
        }
        r->text_buf = grown;
        r->text_cap = need;
    }
    return r->text_buf;
}

/* The str of a read string's first max_chars characters (all: -1). */
static PyObject *
text_str(Reader *r, const JVal *v, Py_ssize_t max_chars)
{
    if (max_chars < 0 || max_chars > v->chars)
        max_chars = v->chars;
    if (!v->escaped) {
        if (v->ascii || max_chars == v->chars) {
            Py_ssize_t n = v->ascii ? max_chars : v->e - v->p - 2;
            return PyUnicode_DecodeUTF8((const char *)v->p + 1, n, NULL);
        }
    }
    char *out = text_room(r, max_chars);
    if (out == NULL)
        return NULL;
    return PyUnicode_DecodeUTF8(out, text_head(v, max_chars, out), NULL);
}

/* Whether the decoded text has a character str.isspace() is false for (text.strip() is not
 * empty), reading only as far as the first one. */
static int
has_nonspace(const JVal *v)
{
    const unsigned char *s = v->p + 1, *e = v->e - 1;
    while (s < e) {
        Py_UCS4 cp;
        if (*s == '\\') {
            unsigned char x = s[1];
            if (x == 'u') {
                int u = hex4_at(s + 2);
                if (u >= 0xD800 && u <= 0xDBFF)
                    return 1; /* astral: no space */
                cp = (Py_UCS4)u;
                s += 6;
            } else {
                cp = x == 'b' ? '\b' : x == 'f' ? '\f' : x == 'n' ? '\n' : x == 'r' ? '\r' : x == 't' ? '\t' : x;
                s += 2;
            }
        } else {
            int n = utf8_char(s, e, &cp); /* validated by the scan: never 0 */
            if (n == 0)
                return 1;
            s += n;
        }
        if (!Py_UNICODE_ISSPACE(cp))
            return 1;
    }
    return 0;
}

/* Whether the decoded text starts with the ASCII literal prefix. */
static int
starts_with(const JVal *v, const char *prefix)
{
    Py_ssize_t n = (Py_ssize_t)strlen(prefix);
    if (v->chars < n)
        return 0;
    if (!v->escaped)
        return memcmp(v->p + 1, prefix, (size_t)n) == 0;
    char out[4 * 64];
    Py_ssize_t len = text_head(v, n < 64 ? n : 64, out);
    return len >= n && memcmp(out, prefix, (size_t)n) == 0;
}

/* A read string as a str (the value as the parser has it), or a borrowed constant for null/absent
 * (Py_None) — new reference either way. */
static PyObject *
value_str(Reader *r, const JVal *v)
{
    if (v->kind == J_STR)
        return text_str(r, v, -1);
    return Py_NewRef(Py_None);
}

/* The Python value of a read scalar the parser passes to a helper (valid_id, clean_label,
 * _model_name): a str, None, a bool or an int; a container is decoded by the hook. */
static PyObject *
value_of(Reader *r, const JVal *v)
{
    switch (v->kind) {
    case J_STR:
        return text_str(r, v, -1);
    case J_TRUE:
        return Py_NewRef(Py_True);
    case J_FALSE:
        return Py_NewRef(Py_False);
    case J_INT:
        return PyLong_FromLongLong(v->i);
    case J_OBJ:
    case J_ARR: {
        PyObject *raw = PyMemoryView_FromMemory((char *)v->p, v->e - v->p, PyBUF_READ);
        PyObject *value = raw ? PyObject_CallOneArg(r->decode, raw) : NULL;
        Py_XDECREF(raw);
        return value;
    }
    default:
        return Py_NewRef(Py_None);
    }
}

static inline int
nonempty_str(const JVal *v)
{
    return v->kind == J_STR && v->chars > 0;
}

/* ---- timestamps of Claude Code's form --------------------------------------------------------- */

/* The digits text[at..at+n) as a number, or -1 unless all are ASCII digits. */
static int
digits_at(const unsigned char *text, int at, int n)
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
/* The naive datetime of "YYYY-MM-DDTHH:MM:SS.mmmZ" (text: n ASCII bytes), as parser.parse_timestamp
 * reads it; NULL without an exception for any other text or an impossible date (parse_timestamp
 * decides then). */
static PyObject *
utc_datetime_of(const unsigned char *c, Py_ssize_t n)
{
    if (n != 24 || c[4] != '-' || c[7] != '-' || c[10] != 'T' || c[13] != ':' || c[16] != ':' || c[19] != '.'
        || c[23] != 'Z')
        return NULL;
    int year = digits_at(c, 0, 4), month = digits_at(c, 5, 2), day = digits_at(c, 8, 2);
    int hour = digits_at(c, 11, 2), minute = digits_at(c, 14, 2), second = digits_at(c, 17, 2);
    int milli = digits_at(c, 20, 3);
    if (year < 1 || month < 1 || month > 12 || day < 1 || hour < 0 || hour > 23 || minute < 0 || minute > 59
        || second < 0 || second > 59 || milli < 0)
        return NULL;
    static const int month_days[12] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    if (day > month_days[month - 1] || (month == 2 && day == 29 && !leap))
        return NULL;
    return PyDateTime_FromDateAndTime(year, month, day, hour, minute, second, milli * 1000);
}

/* ---- the second pass: the line applied to the parser --------------------------------------- */

/* The parser's scalars this pass reads and writes, held here while a block is read: the dicts
 * get them back before a line goes to the Python parser, and at the block's end. */
enum { D_PARSER, D_STATE, D_STATS };
enum { H_LINES, H_DUPLICATE_USAGE, H_ZEROED_USAGE, H_OVERSIZED, H_MALFORMED, H_TURN_INDEX, H_TOOL_INDEX,
       H_DIGEST_DROPPED, H_OFFSET, H_COMPACTIONS, H_LEDGER_PROMPTS, N_HELD_INTS };
static const int held_int_dict[N_HELD_INTS] = {D_STATS, D_STATS, D_STATS, D_STATS, D_STATS, D_STATE, D_STATE,
                                               D_STATE, D_PARSER, D_PARSER, D_PARSER};
static const int held_int_name[N_HELD_INTS] = {N_lines, N_duplicate_usage, N_zeroed_usage, N_oversized, N_malformed,
                                               N_turn_index, N_tool_index, N_digest_dropped, N_offset, N_compactions,
                                               N__ledger_prompts};
enum { O_SESSION_ID, O_AGENT_ID, O_CWD, O_VERSION, O_LAST_STOP_REASON, O_LAST_TURN_TOOLS, O_LAST_TURN_TEXT,
       O_INTERRUPTED, N_HELD_OBJECTS }; /* of the state */
static const int held_object_name[N_HELD_OBJECTS] = {N_session_id, N_agent_id, N_cwd, N_version, N_last_stop_reason,
                                                     N_last_turn_tools, N_last_turn_text, N_interrupted};
/* the state's counters, a key each only once counted (as the parser's counters.get(k, 0) + 1) */
enum { K_TOOL_CALLS, K_READS, K_REREADS, K_EDITS, K_GREPS, K_FAILED, N_COUNTERS };
static const int counter_name[N_COUNTERS] = {N_tool_calls, N_reads, N_rereads, N_edits, N_greps, N_failed};

/* An instant (the state's first_ts, last_ts): a str, or Claude Code's form held as its 24 ASCII
 * bytes until the dicts get it back (one a line: no str made for each). */
typedef struct {
    PyObject *text; /* owned; NULL while raw holds it */
    unsigned char raw[24];
} Instant;

typedef struct {
    int ledger; /* a ledger-only parse (parser._ledger_only): no tool calls, prompts or texts built */
    PyObject *parser, *pd, *sd, *td; /* the parser's, its state's and its stats' __dict__ (borrowed) */
    PyObject *turns, *turn_by_key, *raw_usage, *calls, *call_by_id, *prompts;
    PyObject *reads, *edit_gen, *digest, *awaiting, *task_types, *subagent_types, *models, *counters;
    long long held[N_HELD_INTS];
    PyObject *object[N_HELD_OBJECTS]; /* owned */
    long long counter[N_COUNTERS];
    int counted[N_COUNTERS];          /* the key is in the dict (or will be) */
    int new_counters[N_COUNTERS], n_new_counters; /* keys first counted here, in order */
    Instant first, last;
} Ctx;

/* d[name] (borrowed), NULL with KeyError when missing */
static PyObject *
item(PyObject *d, int name)
{
    PyObject *v = PyDict_GetItemWithError(d, NAME[name]);
    if (v == NULL && !PyErr_Occurred())
        PyErr_SetObject(PyExc_KeyError, NAME[name]);
    return v;
}

/* d[name] = value, the reference stolen */
static int
put(PyObject *d, int name, PyObject *value)
{
    if (value == NULL)
        return -1;
    int rc = PyDict_SetItem(d, NAME[name], value);
    Py_DECREF(value);
    return rc;
}

/* counters[name] = counters.get(name, 0) + 1 */
static inline void
count(Ctx *c, int k)
{
    if (!c->counted[k]) {
        c->counted[k] = 1;
        c->new_counters[c->n_new_counters++] = k;
    }
    c->counter[k]++;
}

/* A held object replaced (the new reference stolen; NULL: -1) */
static inline int
hold(Ctx *c, int o, PyObject *value)
{
    if (value == NULL)
        return -1;
    Py_XSETREF(c->object[o], value);
    return 0;
}

static inline int
hold_bool(Ctx *c, int o, int value)
{
    return hold(c, o, Py_NewRef(value ? Py_True : Py_False));
}

static PyObject *
dict_of(Ctx *c, int which)
{
    return which == D_PARSER ? c->pd : which == D_STATE ? c->sd : c->td;
}

static void
release(Ctx *c)
{
    for (int o = 0; o < N_HELD_OBJECTS; o++)
        Py_CLEAR(c->object[o]);
    Py_CLEAR(c->first.text);
    Py_CLEAR(c->last.text);
}

static int
load_instant(Ctx *c, int name, Instant *at)
{
    PyObject *v = item(c->sd, name);
    if (v == NULL)
        return -1;
    at->text = Py_NewRef(v);
    return 0;
}

/* The parser's dicts and containers, and the scalars held here (state_clean has checked what
 * they hold, or the caller reads no line itself). */
static int
load(Ctx *c, PyObject *parser)
{
    c->parser = parser;
    PyObject **dp = _PyObject_GetDictPtr(parser);
    if (dp == NULL || *dp == NULL) {
        PyErr_SetString(PyExc_TypeError, "the parser has no __dict__");
        return -1;
    }
    c->pd = *dp;
    PyObject *s = item(c->pd, N__s), *stats = item(c->pd, N_stats);
    if (s == NULL || stats == NULL)
        return -1;
    PyObject **sp = _PyObject_GetDictPtr(s), **tp = _PyObject_GetDictPtr(stats);
    if (sp == NULL || *sp == NULL || tp == NULL || *tp == NULL) {
        PyErr_SetString(PyExc_TypeError, "the parser's state has no __dict__");
        return -1;
    }
    c->sd = *sp;
    c->td = *tp;
#define TAKE(field, d, name) if ((c->field = item(c->d, name)) == NULL) return -1;
    TAKE(turns, pd, N_turns) TAKE(turn_by_key, pd, N__turn_by_key) TAKE(raw_usage, pd, N__raw_usage)
    TAKE(calls, pd, N_tool_calls) TAKE(call_by_id, pd, N__call_by_id) TAKE(prompts, pd, N_user_prompts)
    TAKE(counters, sd, N_counters) TAKE(reads, sd, N_reads) TAKE(edit_gen, sd, N_edit_gen)
    TAKE(digest, sd, N_digest) TAKE(awaiting, sd, N_awaiting) TAKE(task_types, sd, N_task_types)
    TAKE(subagent_types, sd, N_subagent_types)
    TAKE(models, sd, N_models)
#undef TAKE
    PyObject *ledger = item(c->pd, N__ledger_only);
    if (ledger == NULL)
        return -1;
    c->ledger = ledger == Py_True;
    for (int h = 0; h < N_HELD_INTS; h++) {
        PyObject *v = item(dict_of(c, held_int_dict[h]), held_int_name[h]);
        if (v == NULL)
            return -1;
        c->held[h] = PyLong_CheckExact(v) ? PyLong_AsLongLong(v) : 0;
        if (c->held[h] == -1 && PyErr_Occurred())
            return -1;
    }
    for (int o = 0; o < N_HELD_OBJECTS; o++) {
        PyObject *v = item(c->sd, held_object_name[o]);
        if (v == NULL)
            return -1;
        c->object[o] = Py_NewRef(v);
    }
    c->n_new_counters = 0;
    for (int k = 0; k < N_COUNTERS; k++) {
        PyObject *v = PyDict_CheckExact(c->counters) ? PyDict_GetItemWithError(c->counters, NAME[counter_name[k]]) : NULL;
        if (v == NULL && PyErr_Occurred())
            return -1;
        c->counted[k] = v != NULL;
        c->counter[k] = v != NULL && PyLong_CheckExact(v) ? PyLong_AsLongLong(v) : 0;
        if (c->counter[k] == -1 && PyErr_Occurred())
            return -1;
    }
    if (load_instant(c, N_first_ts, &c->first) < 0 || load_instant(c, N_last_ts, &c->last) < 0)
        return -1;
    return 0;
}

static PyObject *
instant_text(const Instant *at)
{
    return at->text != NULL ? Py_NewRef(at->text) : PyUnicode_DecodeASCII((const char *)at->raw, 24, NULL);
}

/* The held scalars back into the parser's dicts (then released: load takes them again). */
static int
flush(Ctx *c)
{
    int rc = 0;
    for (int h = 0; h < N_HELD_INTS && rc == 0; h++)
        rc = put(dict_of(c, held_int_dict[h]), held_int_name[h], PyLong_FromLongLong(c->held[h]));
    for (int o = 0; o < N_HELD_OBJECTS && rc == 0; o++)
        rc = PyDict_SetItem(c->sd, NAME[held_object_name[o]], c->object[o]);
    for (int k = 0; k < N_COUNTERS && rc == 0; k++) /* the keys there before keep their place */
        if (c->counted[k] && PyDict_Contains(c->counters, NAME[counter_name[k]]) == 1)
            rc = put(c->counters, counter_name[k], PyLong_FromLongLong(c->counter[k]));
    for (int i = 0; i < c->n_new_counters && rc == 0; i++) { /* new ones in the order first counted */
        int k = c->new_counters[i];
        rc = put(c->counters, counter_name[k], PyLong_FromLongLong(c->counter[k]));
    }
    if (rc == 0)
        rc = put(c->sd, N_first_ts, instant_text(&c->first));
    if (rc == 0)
        rc = put(c->sd, N_last_ts, instant_text(&c->last));
    release(c);
    return rc;
}

static inline int
exact_int(PyObject *v)
{
    return v != NULL && PyLong_CheckExact(v);
}

/* Whether the state holds only what this path takes for granted (the parser's own state always
 * does; a stored one that was tampered with may not: then the parser reads every line itself). */
static int
state_clean(Ctx *c)
{
    if (!PyList_CheckExact(c->turns) || !PyDict_CheckExact(c->turn_by_key) || !PyDict_CheckExact(c->raw_usage)
        || !PyList_CheckExact(c->calls) || !PyDict_CheckExact(c->call_by_id) || !PyList_CheckExact(c->prompts)
        || !PyDict_CheckExact(c->counters) || !PyDict_CheckExact(c->reads) || !PyDict_CheckExact(c->edit_gen)
        || !PyList_CheckExact(c->digest) || !PyDict_CheckExact(c->awaiting) || !PyDict_CheckExact(c->task_types)
        || !PyDict_CheckExact(c->subagent_types)
        || !PyList_CheckExact(c->models))
        return 0;
    static const int ints_s[] = {N_tool_index, N_turn_index, N_digest_dropped};
    static const int ints_t[] = {N_duplicate_usage, N_zeroed_usage, N_lines, N_oversized};
    for (size_t i = 0; i < sizeof(ints_s) / sizeof(ints_s[0]); i++)
        if (!exact_int(PyDict_GetItem(c->sd, NAME[ints_s[i]])))
            return 0;
    for (size_t i = 0; i < sizeof(ints_t) / sizeof(ints_t[0]); i++)
        if (!exact_int(PyDict_GetItem(c->td, NAME[ints_t[i]])))
            return 0;
    if (!exact_int(PyDict_GetItem(c->pd, NAME[N_compactions])))
        return 0;
    PyObject *first = PyDict_GetItem(c->sd, NAME[N_first_ts]), *last = PyDict_GetItem(c->sd, NAME[N_last_ts]);
    if (!((first == Py_None && last == Py_None) || (first != NULL && last != NULL && PyUnicode_CheckExact(first)
                                                    && PyUnicode_CheckExact(last))))
        return 0;
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    while (PyDict_Next(c->counters, &pos, &k, &v))
        if (!exact_int(v))
            return 0;
    pos = 0;
    while (PyDict_Next(c->edit_gen, &pos, &k, &v))
        if (!exact_int(v))
            return 0;
    pos = 0;
    Py_ssize_t steps = PyList_GET_SIZE(c->digest);
    while (PyDict_Next(c->awaiting, &pos, &k, &v)) {
        if (!exact_int(v))
            return 0;
        Py_ssize_t at = PyLong_AsSsize_t(v);
        if (at == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            return 0;
        }
        if (at < 0 || (at < steps && !(PyList_CheckExact(PyList_GET_ITEM(c->digest, at))
                                       && PyList_GET_SIZE(PyList_GET_ITEM(c->digest, at)) >= 5)))
            return 0;
    }
    return 1;
}

/* _when: a timestamp value as the parser's records hold it (a naive UTC datetime or None). */
static PyObject *
when(Reader *r, const JVal *ts)
{
    if (ts->kind != J_STR)
        return Py_NewRef(Py_None);
    PyObject *value = last_value(&r->last_ts, ts);
    if (value != NULL)
        return value;
    if (!ts->escaped && ts->ascii)
        value = utc_datetime_of(ts->p + 1, ts->e - ts->p - 2);
    if (value == NULL && !PyErr_Occurred()) {
        PyObject *text = text_str(r, ts, -1);
        value = text != NULL ? PyObject_CallOneArg(r->parse_timestamp, text) : NULL;
        Py_XDECREF(text);
    }
    if (value == NULL || keep_last_value(&r->last_ts, ts, value) < 0) {
        Py_XDECREF(value);
        return NULL;
    }
    return value;
}

/* An instant is None (no instant yet) */
static inline int
instant_none(const Instant *at)
{
    return at->text == Py_None;
}

/* -1, 0, 1 as the held instant compares with the ASCII text t[0:n] (str order: code points) */
static int
instant_cmp(const Instant *at, const unsigned char *t, Py_ssize_t n)
{
    const unsigned char *h = at->raw;
    Py_ssize_t hn = 24;
    if (at->text != NULL) {
        if (!PyUnicode_IS_ASCII(at->text)) { /* rare: compared as strs */
            PyObject *other = PyUnicode_DecodeASCII((const char *)t, n, NULL);
            if (other == NULL)
                return -2;
            int order = PyUnicode_Compare(at->text, other);
            Py_DECREF(other);
            return order == -1 && PyErr_Occurred() ? -2 : order;
        }
        h = PyUnicode_1BYTE_DATA(at->text);
        hn = PyUnicode_GET_LENGTH(at->text);
    }
    int order = memcmp(h, t, (size_t)(hn < n ? hn : n));
    if (order == 0)
        return hn < n ? -1 : hn > n;
    return order < 0 ? -1 : 1;
}

/* The held instant set to the instant ``text`` (a str), or to ``raw`` (24 ASCII bytes) */
static void
instant_set(Instant *at, PyObject *text, const unsigned char *raw)
{
    if (raw != NULL) {
        memcpy(at->raw, raw, 24);
        Py_CLEAR(at->text);
    } else {
        Py_XSETREF(at->text, Py_NewRef(text));
    }
}

/* A valid session or agent id (valid_id), held where there is none yet */
static int
take_id(Reader *r, Ctx *c, int o, const JVal *v)
{
    PyObject *id = value_str(r, v);
    PyObject *ok = id ? PyObject_CallOneArg(r->valid_id, id) : NULL;
    int valid = ok != NULL ? PyObject_IsTrue(ok) : -1;
    Py_XDECREF(ok);
    if (valid > 0)
        return hold(c, o, id);
    Py_XDECREF(id);
    return valid < 0 ? -1 : 0;
}

/* The common fields of _record: session, agent, project, version, first and last instants. */
static int
apply_common(Reader *r, Ctx *c, const Line *line)
{
    if (c->object[O_SESSION_ID] == Py_None && line->session_id.kind == J_STR
        && take_id(r, c, O_SESSION_ID, &line->session_id) < 0)
        return -1;
    if (c->object[O_AGENT_ID] == Py_None && line->agent_id.kind == J_STR && line->is_sidechain.kind != J_FALSE
        && take_id(r, c, O_AGENT_ID, &line->agent_id) < 0)
        return -1;
    if (c->object[O_CWD] == Py_None && nonempty_str(&line->cwd)) {
        PyObject *cwd = value_str(r, &line->cwd);
        int rc = cwd != NULL ? hold(c, O_CWD, PyObject_CallOneArg(r->stored_project, cwd)) : -1;
        Py_XDECREF(cwd);
        if (rc < 0)
            return -1;
    }
    if (nonempty_str(&line->version)) {
        PyObject *current = c->object[O_VERSION];
        int same = 0;
        if (PyUnicode_CheckExact(current) && PyUnicode_IS_ASCII(current) && !line->version.escaped && line->version.ascii) {
            Py_ssize_t n = line->version.e - line->version.p - 2;
            same = PyUnicode_GET_LENGTH(current) == n && memcmp(PyUnicode_1BYTE_DATA(current), line->version.p + 1, (size_t)n) == 0;
        }
        if (!same) {
            PyObject *version = value_str(r, &line->version);
            int differs = version != NULL ? PyObject_RichCompareBool(version, current, Py_NE) : -1;
            if (differs > 0)
                hold(c, O_VERSION, version);
            else
                Py_XDECREF(version);
            if (differs < 0)
                return -1;
        }
    }
    if (nonempty_str(&line->timestamp)) {
        /* compared as text: one form ("…T…Z", 24 characters), whose text order is time order */
        const JVal *ts = &line->timestamp;
        if (!ts->escaped && ts->ascii && ts->chars == 24 && ts->p[11] == 'T' && ts->p[24] == 'Z') {
            const unsigned char *raw = ts->p + 1;
            int order = instant_none(&c->last) ? -1 : instant_cmp(&c->last, raw, 24); /* the last vs this */
            if (order == -2)
                return -1;
            if (order < 0) {
                instant_set(&c->last, NULL, raw);
                if (instant_none(&c->first))
                    instant_set(&c->first, NULL, raw);
            } else {
                order = instant_cmp(&c->first, raw, 24); /* the first vs this */
                if (order == -2)
                    return -1;
                if (order > 0)
                    instant_set(&c->first, NULL, raw);
            }
            return 0;
        }
        PyObject *instant, *text = text_str(r, ts, -1);
        if (text == NULL)
            return -1;
        if (PyUnicode_GET_LENGTH(text) == 24 && PyUnicode_READ_CHAR(text, 23) == 'Z'
            && PyUnicode_READ_CHAR(text, 10) == 'T') {
            instant = text;
        } else {
            instant = PyObject_CallOneArg(r->utc_text, text);
            Py_DECREF(text);
        }
        if (instant == NULL)
            return -1;
        if (instant != Py_None) { /* compared as strs */
            PyObject *last = instant_text(&c->last), *first = last ? instant_text(&c->first) : NULL;
            int later = first == NULL ? -1 : last == Py_None ? 1 : PyUnicode_Compare(instant, last) > 0;
            if (later > 0) {
                instant_set(&c->last, instant, NULL);
                if (first == Py_None)
                    instant_set(&c->first, instant, NULL);
            } else if (later == 0 && PyUnicode_Compare(instant, first) < 0) {
                instant_set(&c->first, instant, NULL);
            }
            Py_XDECREF(last);
            Py_XDECREF(first);
            if (later < 0 || PyErr_Occurred()) {
                Py_DECREF(instant);
                return -1;
            }
        }
        Py_DECREF(instant);
    }
    return 0;
}

static long long
usage_field(Reader *r, PyObject *usage, int i)
{
    PyObject *v = SLOT(usage, r->u_off[i]);
    return v == NULL ? 0 : PyLong_AsLongLong(v);
}

/* _usage_rank(a) > _usage_rank(b) for Usage objects */
static int
ranks_higher(Reader *r, PyObject *a, PyObject *b)
{
    long long ta = 0, tb = 0;
    for (int i = 0; i < 5; i++) {
        ta += usage_field(r, a, i);
        tb += usage_field(r, b, i);
    }
    if (PyErr_Occurred())
        return -1;
    return ta != tb ? ta > tb : usage_field(r, a, 1) > usage_field(r, b, 1);
}

/* _turn_text */
static int
apply_turn_text(Reader *r, Ctx *c, PyObject *turn, const JVal *text)
{
    if (text->chars > 0 && has_nonspace(text) && hold_bool(c, O_LAST_TURN_TEXT, 1) < 0)
        return -1;
    PyObject *bytes = SLOT(turn, r->t_off[T_CONTENT_BYTES]);
    long long n = PyLong_AsLongLong(bytes);
    if (n == -1 && PyErr_Occurred())
        return -1;
    PyObject *sum = PyLong_FromLongLong(n + text->chars);
    if (sum == NULL)
        return -1;
    set_slot(turn, r->t_off[T_CONTENT_BYTES], sum);
    if (c->ledger)
        return 0; /* no text: a ledger-only parse's turns carry their usage */
    PyObject *so_far = SLOT(turn, r->t_off[T_TEXT]);
    Py_ssize_t have = PyUnicode_GET_LENGTH(so_far);
    if (have < r->max_turn_text) {
        PyObject *more = text_str(r, text, r->max_turn_text - have);
        PyObject *joined = more != NULL ? PyUnicode_Concat(so_far, more) : NULL;
        Py_XDECREF(more);
        if (joined == NULL)
            return -1;
        set_slot(turn, r->t_off[T_TEXT], joined);
    }
    return 0;
}

static int
add_content_bytes(Reader *r, PyObject *turn, long long n)
{
    long long have = PyLong_AsLongLong(SLOT(turn, r->t_off[T_CONTENT_BYTES]));
    if (have == -1 && PyErr_Occurred())
        return -1;
    PyObject *sum = PyLong_FromLongLong(have + n);
    if (sum == NULL)
        return -1;
    set_slot(turn, r->t_off[T_CONTENT_BYTES], sum);
    return 0;
}

/* parser._as_int of offset/limit: an int, or 1-11 ASCII digits in a string; else None (-1 in *none) */
static long long
as_int(const JVal *v, int *none)
{
    *none = 0;
    if (v->kind == J_INT)
        return v->i;
    if (v->kind == J_STR && v->ascii && v->chars >= 1 && v->chars <= 11) {
        char digits[4 * 11];
        Py_ssize_t len = text_head(v, 11, digits);
        long long n = 0;
        for (Py_ssize_t k = 0; k < len; k++) {
            if (!is_digit((unsigned char)digits[k])) {
                *none = 1;
                return 0;
            }
            n = n * 10 + (digits[k] - '0');
        }
        return n;
    }
    *none = 1;
    return 0;
}

static uint64_t
raw_hash(const unsigned char *s, Py_ssize_t n)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (Py_ssize_t i = 0; i < n; i++)
        h = (h ^ s[i]) * 1099511628211ULL;
    return h;
}

/* fn(the text of the read string v), remembered in m; a new reference */
static PyObject *
memo_call(Reader *r, RawMemo *m, PyObject *fn, const JVal *v)
{
    const unsigned char *raw = v->p + 1;
    Py_ssize_t n = v->e - v->p - 2;
    uint64_t h = raw_hash(raw, n);
    if (m->slots == NULL && (m->slots = PyMem_Calloc(MEMO_SLOTS, sizeof(MemoSlot))) == NULL)
        return PyErr_NoMemory();
    size_t i = (size_t)h & (MEMO_SLOTS - 1);
    for (; m->slots[i].value != NULL; i = (i + 1) & (MEMO_SLOTS - 1)) {
        MemoSlot *slot = &m->slots[i];
        if (slot->hash == h && slot->len == n && memcmp(slot->raw, raw, (size_t)n) == 0)
            return Py_NewRef(slot->value);
    }
    PyObject *text = text_str(r, v, -1);
    PyObject *value = text != NULL ? PyObject_CallOneArg(fn, text) : NULL;
    Py_XDECREF(text);
    if (value == NULL)
        return NULL;
    if (m->used >= MEMO_SLOTS / 2) {
        memo_clear(m);
        i = (size_t)h & (MEMO_SLOTS - 1);
    }
    unsigned char *copy = PyMem_Malloc(n > 0 ? (size_t)n : 1);
    if (copy == NULL) {
        Py_DECREF(value);
        return PyErr_NoMemory();
    }
    memcpy(copy, raw, (size_t)n);
    m->slots[i] = (MemoSlot){h, n, copy, Py_NewRef(value)};
    m->used++;
    return value;
}

/* The kinds the parser branches on (values of TOOL_KIND_BY_NAME) */
enum { KIND_OTHER, KIND_READ, KIND_EDIT, KIND_WRITE, KIND_GREP, KIND_GLOB, KIND_BASH, KIND_TASK };

static int
kind_code(PyObject *kind)
{
    static const int names[] = {N_read, N_edit, N_write, N_grep, N_glob, N_bash, N_task};
    for (int i = 0; i < 7; i++)
        if (PyUnicode_Compare(kind, NAME[names[i]]) == 0)
            return i + 1;
    return KIND_OTHER;
}

/* TOOL_KIND_BY_NAME.get(name, "other") of a block's name (a str; "?" when not one), a new
 * reference, and its code in *code. A name's str is built only the first time it is seen (or
 * when it holds an escape). */
static PyObject *
kind_of(Reader *r, const JVal *name, int *code)
{
    Py_ssize_t n = name->kind == J_STR && !name->escaped ? name->e - name->p : -1;
    for (int i = 0; n >= 0 && i < r->n_kinds; i++) {
        PyObject *known = r->kind_names[i];
        if (PyBytes_GET_SIZE(known) == n && memcmp(PyBytes_AS_STRING(known), name->p, (size_t)n) == 0) {
            *code = r->kind_codes[i];
            return Py_NewRef(r->kind_values[i]);
        }
    }
    PyObject *text = name->kind == J_STR ? text_str(r, name, -1) : Py_NewRef(QUESTION);
    if (text == NULL)
        return NULL;
    PyObject *kind = PyDict_GetItemWithError(r->tool_kinds, text);
    Py_DECREF(text);
    if (kind == NULL && PyErr_Occurred())
        return NULL;
    kind = kind != NULL ? kind : NAME[N_other];
    *code = kind_code(kind);
    if (n >= 0 && r->n_kinds < 64) {
        PyObject *raw = PyBytes_FromStringAndSize((const char *)name->p, n);
        if (raw == NULL)
            return NULL;
        r->kind_names[r->n_kinds] = raw;
        r->kind_codes[r->n_kinds] = *code;
        r->kind_values[r->n_kinds++] = Py_NewRef(kind);
    }
    return Py_NewRef(kind);
}

/* _tool_use */
static int
apply_tool_use(Reader *r, Ctx *c, PyObject *turn, const Block *b, const JVal *ts)
{
    PyObject *tool_id = b->id.kind == J_STR ? text_str(r, &b->id, -1) : Py_NewRef(EMPTY);
    if (tool_id == NULL)
        return -1;
    int has_id = PyUnicode_GET_LENGTH(tool_id) > 0;
    if (has_id) {
        int seen = PyDict_Contains(c->call_by_id, tool_id);
        if (seen != 0) {
            Py_DECREF(tool_id);
            return seen < 0 ? -1 : 0; /* the same content block written twice */
        }
    }
    PyObject *name = NULL, *tool_input = NULL, *path = NULL, *line_range = NULL, *command = NULL, *key = NULL;
    PyObject *call = NULL;
    int rc = -1;
    int code;
    PyObject *kind = kind_of(r, &b->name, &code);
    if (kind == NULL)
        goto done;
    if (!c->ledger) { /* the call's own fields: a ledger-only parse builds no call */
        name = b->name.kind == J_STR ? text_str(r, &b->name, -1) : Py_NewRef(QUESTION);
        if (name == NULL)
            goto done_kind;
        if (b->input.kind == J_OBJ) {
            PyObject *raw = PyMemoryView_FromMemory((char *)b->input.p, b->input.e - b->input.p, PyBUF_READ);
            tool_input = raw != NULL ? PyObject_CallOneArg(r->decode, raw) : NULL;
            Py_XDECREF(raw);
        } else {
            tool_input = PyDict_New();
        }
        if (tool_input == NULL)
            goto done_kind;
    }
    long long input_bytes = b->input_bytes;
    if (add_content_bytes(r, turn, input_bytes) < 0)
        goto done_kind;
    long long index = c->held[H_TOOL_INDEX]++;
    count(c, K_TOOL_CALLS);
    /* file_path, else path, else notebook_path: present with any value; a path if a non-empty str */
    const JVal *p = b->file_path.kind != J_ABSENT ? &b->file_path : b->path.kind != J_ABSENT ? &b->path : &b->notebook_path;
    const JVal *path_v = nonempty_str(p) ? p : NULL;
    if (path_v != NULL && !c->ledger && (path = text_str(r, path_v, -1)) == NULL)
        goto done_kind;
    int is_reread = 0;
    if (code == KIND_READ && path_v != NULL) {
        int no_offset, no_limit;
        long long off = as_int(&b->offset, &no_offset), lim = as_int(&b->limit, &no_limit);
        char range_text[64];
        if (!no_offset || !no_limit) {
            line_range = Py_BuildValue("(LL)", off, lim);
            if (line_range == NULL)
                goto done_kind;
            snprintf(range_text, sizeof(range_text), "(%lld, %lld)", off, lim);
        } else {
            snprintf(range_text, sizeof(range_text), "None");
        }
        count(c, K_READS);
        if ((key = memo_call(r, &r->path_keys, r->path_key, path_v)) == NULL)
            goto done_kind;
        PyObject *reg_key = PyUnicode_FromFormat("%U%c%s", key, 0, range_text);
        if (reg_key == NULL)
            goto done_kind;
        PyObject *generation = PyDict_GetItemWithError(c->edit_gen, key);
        if (generation == NULL && PyErr_Occurred()) {
            Py_DECREF(reg_key);
            goto done_kind;
        }
        PyObject *zero = NULL;
        if (generation == NULL)
            generation = zero = PyLong_FromLong(0);
        PyObject *stored = generation ? PyDict_GetItemWithError(c->reads, reg_key) : NULL;
        int same = stored != NULL ? PyObject_RichCompareBool(stored, generation, Py_EQ) : 0;
        int fail = generation == NULL || same < 0 || PyErr_Occurred();
        if (!fail && same) {
            is_reread = 1;
            count(c, K_REREADS);
        } else if (!fail && (PyDict_GET_SIZE(c->reads) < r->max_read_registry || stored != NULL)) {
            fail = PyDict_SetItem(c->reads, reg_key, generation) < 0;
        }
        Py_XDECREF(zero);
        Py_DECREF(reg_key);
        if (fail)
            goto done_kind;
    } else if (code == KIND_EDIT || code == KIND_WRITE) {
        count(c, K_EDITS);
        if (path_v != NULL) {
            if ((key = memo_call(r, &r->path_keys, r->path_key, path_v)) == NULL)
                goto done_kind;
            PyObject *gen = PyDict_GetItemWithError(c->edit_gen, key);
            if (gen == NULL && PyErr_Occurred())
                goto done_kind;
            long long g = gen == NULL ? 0 : PyLong_AsLongLong(gen);
            PyObject *next = PyLong_FromLongLong(g + 1);
            int fail = next == NULL || PyDict_SetItem(c->edit_gen, key, next) < 0;
            Py_XDECREF(next);
            if (fail)
                goto done_kind;
        }
    } else if (code == KIND_GREP) {
        count(c, K_GREPS);
    }
    const JVal *command_v = (code == KIND_GREP || code == KIND_GLOB) && b->pattern.kind == J_STR ? &b->pattern
                            : code == KIND_BASH && b->command.kind == J_STR ? &b->command : NULL;
    if (command_v != NULL && !c->ledger && (command = text_str(r, command_v, -1)) == NULL)
        goto done_kind;
    if (code == KIND_TASK) {
        PyObject *value = value_of(r, &b->subagent_type);
        PyObject *label = value != NULL ? PyObject_CallOneArg(r->clean_label, value) : NULL;
        Py_XDECREF(value);
        if (label == NULL)
            goto done_kind;
        int truthy = PyObject_IsTrue(label);
        int fail = truthy < 0 || (truthy && has_id && PyDict_SetItem(c->task_types, tool_id, label) < 0);
        Py_DECREF(label);
        if (fail)
            goto done_kind;
    }
    if (c->ledger) {
        /* no call: the id kept only to know the block if it is written twice */
        if (has_id && PyDict_SetItem(c->call_by_id, tool_id, Py_None) < 0)
            goto done_kind;
    } else {
        /* every field in order: index, tool_use_id, name, kind, input, input_bytes, path, line_range,
         * command, result_bytes, result_text, is_error, is_reread, timestamp, turn */
        PyObject *values[15] = {
            PyLong_FromLongLong(index), Py_NewRef(tool_id), Py_NewRef(name), Py_NewRef(kind), Py_NewRef(tool_input),
            PyLong_FromLongLong(input_bytes), Py_NewRef(path ? path : Py_None),
            Py_NewRef(line_range ? line_range : Py_None), Py_NewRef(command ? command : Py_None), PyLong_FromLong(0),
            Py_NewRef(EMPTY), Py_NewRef(Py_False), Py_NewRef(is_reread ? Py_True : Py_False), when(r, ts),
            Py_NewRef(SLOT(turn, r->t_off[T_INDEX]))};
        if ((call = new_record(r->call_cls, r->c_off, 15, values)) == NULL)
            goto done_kind;
        if (PyList_Append(c->calls, call) < 0)
            goto done_kind;
        PyObject *index_obj = SLOT(call, r->c_off[C_INDEX]);
        if (PyList_Append(SLOT(turn, r->t_off[T_CALLS]), index_obj) < 0)
            goto done_kind;
        if (has_id) {
            PyObject *at = PyLong_FromSsize_t(PyList_GET_SIZE(c->calls) - 1);
            int fail = at == NULL || PyDict_SetItem(c->call_by_id, tool_id, at) < 0;
            Py_XDECREF(at);
            if (fail)
                goto done_kind;
        }
    }
    if (hold_bool(c, O_LAST_TURN_TOOLS, 1) < 0)
        goto done_kind;
    if (PyList_GET_SIZE(c->digest) < r->max_digest_steps) {
        /* the target of path or command or "" */
        const JVal *target_v = path_v != NULL ? path_v : command_v != NULL && command_v->chars > 0 ? command_v : NULL;
        if (target_v == NULL && r->empty_target == NULL)
            r->empty_target = PyObject_CallOneArg(r->digest_target, EMPTY);
        PyObject *target = target_v != NULL ? memo_call(r, &r->targets, r->digest_target, target_v)
                                            : Py_XNewRef(r->empty_target);
        /* [kind, target, input_bytes, result_bytes, error] */
        PyObject *step = target ? PyList_New(5) : NULL;
        PyObject *size = step ? PyLong_FromLongLong(input_bytes) : NULL;
        if (size != NULL) {
            PyList_SET_ITEM(step, 0, Py_NewRef(kind));
            PyList_SET_ITEM(step, 1, Py_NewRef(target));
            PyList_SET_ITEM(step, 2, size);
            PyList_SET_ITEM(step, 3, PyLong_FromLong(0)); /* small ints: cached, never NULL */
            PyList_SET_ITEM(step, 4, PyLong_FromLong(0));
        }
        Py_XDECREF(target);
        int fail = size == NULL || PyList_Append(c->digest, step) < 0;
        Py_XDECREF(step);
        if (fail)
            goto done_kind;
        if (has_id) {
            if (PyDict_GET_SIZE(c->awaiting) >= r->max_awaiting) { /* results that never came: forget the oldest */
                Py_ssize_t pos = 0;
                PyObject *oldest, *ignored;
                if (PyDict_Next(c->awaiting, &pos, &oldest, &ignored)) {
                    Py_INCREF(oldest);
                    int fail2 = PyDict_DelItem(c->awaiting, oldest) < 0;
                    Py_DECREF(oldest);
                    if (fail2)
                        goto done_kind;
                }
            }
            PyObject *at = PyLong_FromSsize_t(PyList_GET_SIZE(c->digest) - 1);
            int fail2 = at == NULL || PyDict_SetItem(c->awaiting, tool_id, at) < 0;
            Py_XDECREF(at);
            if (fail2)
                goto done_kind;
        }
    } else {
        c->held[H_DIGEST_DROPPED]++;
    }
    rc = 0;
done_kind:
    Py_DECREF(kind);
done:
    Py_XDECREF(call);
    Py_XDECREF(key);
    Py_XDECREF(command);
    Py_XDECREF(line_range);
    Py_XDECREF(path);
    Py_XDECREF(tool_input);
    Py_XDECREF(name);
    Py_DECREF(tool_id);
    return rc;
}

/* The model as the parser stores it (_model_name): the plain string, else cleaned, else "unknown". */
static PyObject *
model_of(Reader *r, const JVal *m)
{
    if (m->kind == J_STR && !m->escaped && m->ascii && m->chars > 0) {
        PyObject *kept = last_value(&r->last_model, m);
        if (kept != NULL)
            return kept;
        int printable = 1;
        for (const unsigned char *s = m->p + 1; s < m->e - 1; s++)
            printable &= *s >= 0x20 && *s < 0x7F;
        if (printable) {
            PyObject *model = PyUnicode_DecodeASCII((const char *)m->p + 1, m->e - m->p - 2, NULL);
            if (model == NULL || keep_last_value(&r->last_model, m, model) < 0) {
                Py_XDECREF(model);
                return NULL;
            }
            return model;
        }
    }
    PyObject *value = value_of(r, m); /* another text or value: as _model_name reads it */
    if (value == NULL)
        return NULL;
    PyObject *model = PyObject_CallOneArg(r->model_name, value);
    Py_DECREF(value);
    return model;
}

/* A stop reason's str (a new reference): the last one's again where its raw JSON is the same (a
 * few values, repeated line after line). */
static PyObject *
stop_reason_of(Reader *r, const JVal *v)
{
    PyObject *text = last_value(&r->last_stop, v);
    if (text != NULL)
        return text;
    text = text_str(r, v, -1);
    if (text == NULL || keep_last_value(&r->last_stop, v, text) < 0) {
        Py_XDECREF(text);
        return NULL;
    }
    return text;
}

/* Whether the raw usage of this line equals the one kept for its response (raw_usage == kept). */
static int
same_usage(Reader *r, PyObject *kept, const JVal *usage)
{
    Py_ssize_t n = usage->e - usage->p;
    if (PyBytes_CheckExact(kept) && PyBytes_GET_SIZE(kept) == n && memcmp(PyBytes_AS_STRING(kept), usage->p, (size_t)n) == 0)
        return 1;
    if (kept == Py_None)
        return 0;
    /* other bytes, or a dict the Python path kept: compared as decoded values */
    PyObject *raw = PyMemoryView_FromMemory((char *)usage->p, n, PyBUF_READ);
    PyObject *mine = raw ? PyObject_CallOneArg(r->decode, raw) : NULL;
    Py_XDECREF(raw);
    if (mine == NULL)
        return -1;
    PyObject *theirs = PyBytes_CheckExact(kept) ? PyObject_CallOneArg(r->decode, kept) : Py_NewRef(kept);
    int same = theirs != NULL ? PyObject_RichCompareBool(mine, theirs, Py_EQ) : -1;
    Py_DECREF(mine);
    Py_XDECREF(theirs);
    return same;
}


/* _assistant */
static int
apply_assistant(Reader *r, Ctx *c, const Line *line)
{
    if (line->message != J_OBJ)
        return 0;
    /* the response's key: "<message id>|<request id>", or the message id alone */
    PyObject *key;
    const JVal *mid = &line->id, *rid = &line->request_id;
    if (!nonempty_str(rid)) {
        key = text_str(r, mid, -1);
    } else if (!mid->escaped && !rid->escaped && mid->ascii && rid->ascii) { /* the common key: one str */
        Py_ssize_t n1 = mid->e - mid->p - 2, n2 = rid->e - rid->p - 2;
        key = PyUnicode_New(n1 + 1 + n2, 127);
        if (key != NULL) {
            Py_UCS1 *k = PyUnicode_1BYTE_DATA(key);
            memcpy(k, mid->p + 1, (size_t)n1);
            k[n1] = '|';
            memcpy(k + n1 + 1, rid->p + 1, (size_t)n2);
        }
    } else {
        PyObject *m = text_str(r, mid, -1), *q = m ? text_str(r, rid, -1) : NULL;
        key = q ? PyUnicode_FromFormat("%U|%U", m, q) : NULL;
        Py_XDECREF(m);
        Py_XDECREF(q);
    }
    if (key == NULL)
        return -1;
    PyObject *usage = NULL, *model = NULL, *turn = NULL;
    int rc = -1;
    PyObject *at = PyDict_GetItemWithError(c->turn_by_key, key); /* borrowed: an int */
    if (at == NULL && PyErr_Occurred())
        goto done;
    int zeroed = 0, duplicate = 0;
    if (at != NULL && line->usage.kind == J_OBJ) {
        PyObject *kept = PyDict_GetItemWithError(c->raw_usage, key);
        if (kept == NULL && PyErr_Occurred())
            goto done;
        int same = kept != NULL ? same_usage(r, kept, &line->usage) : 0;
        if (same < 0)
            goto done;
        duplicate = same;
    }
    if (duplicate) { /* the same counts streamed again on the response's next line */
        c->held[H_DUPLICATE_USAGE]++;
    } else {
        if (line->usage.kind == J_OBJ) {
            PyObject *values[5];
            for (int i = 0; i < 5; i++)
                values[i] = PyLong_FromLongLong(line->counts[i]);
            if ((usage = new_record(r->usage_cls, r->u_off, 5, values)) == NULL)
                goto done;
            zeroed = line->zeroed;
        }
        PyObject *kept = line->usage.kind == J_OBJ
                             ? PyBytes_FromStringAndSize((const char *)line->usage.p, line->usage.e - line->usage.p)
                             : Py_NewRef(Py_None);
        if (kept == NULL || PyDict_SetItem(c->raw_usage, key, kept) < 0) {
            Py_XDECREF(kept);
            goto done;
        }
        Py_DECREF(kept);
    }
    if ((model = model_of(r, &line->model)) == NULL)
        goto done;
    if (zeroed) {
        int free_model = PySequence_Contains(r->free_models, model);
        if (free_model < 0)
            goto done;
        c->held[H_ZEROED_USAGE] += !free_model;
    }
    if (at == NULL) {
        long long index = c->held[H_TURN_INDEX]++;
        /* every field in order: index, message_key, model, usage, timestamp, text, tool_call_indexes, content_bytes */
        PyObject *values[8] = {PyLong_FromLongLong(index), Py_NewRef(key), Py_NewRef(model),
                               Py_NewRef(usage ? usage : r->no_usage), when(r, &line->timestamp), Py_NewRef(EMPTY),
                               PyList_New(0), PyLong_FromLong(0)};
        if ((turn = new_record(r->turn_cls, r->t_off, 8, values)) == NULL || PyList_Append(c->turns, turn) < 0)
            goto done;
        PyObject *position = PyLong_FromSsize_t(PyList_GET_SIZE(c->turns) - 1);
        int fail = position == NULL || PyDict_SetItem(c->turn_by_key, key, position) < 0;
        Py_XDECREF(position);
        if (fail)
            goto done;
        int known = PySequence_Contains(c->models, model);
        int synthetic = PyUnicode_Compare(model, SYNTHETIC) == 0;
        if (known < 0 || (!known && !synthetic && PyList_Append(c->models, model) < 0))
            goto done;
        if (hold_bool(c, O_LAST_TURN_TOOLS, 0) < 0 || hold_bool(c, O_LAST_TURN_TEXT, 0) < 0
            || hold_bool(c, O_INTERRUPTED, 0) < 0)
            goto done;
    } else {
        Py_ssize_t position = PyLong_AsSsize_t(at);
        if (position == -1 && PyErr_Occurred())
            goto done;
        turn = Py_NewRef(PyList_GET_ITEM(c->turns, position));
        if (usage != NULL) {
            c->held[H_DUPLICATE_USAGE]++;
            int higher = ranks_higher(r, usage, SLOT(turn, r->t_off[T_USAGE]));
            if (higher < 0)
                goto done;
            if (higher)
                set_slot(turn, r->t_off[T_USAGE], Py_NewRef(usage));
        }
    }
    if (line->stop_reason.kind == J_STR && hold(c, O_LAST_STOP_REASON, stop_reason_of(r, &line->stop_reason)) < 0)
        goto done;
    if (line->content == J_ARR) {
        for (Py_ssize_t i = 0; i < r->n_blocks; i++) {
            const Block *b = &r->blocks[i];
            if (b->kind == B_TEXT) {
                if (b->text.kind == J_STR && apply_turn_text(r, c, turn, &b->text) < 0)
                    goto done;
            } else if (b->kind == B_TOOL_USE) {
                if (apply_tool_use(r, c, turn, b, &line->timestamp) < 0)
                    goto done;
            } else if (b->kind == B_THINKING) {
                if (b->thinking.kind == J_STR && add_content_bytes(r, turn, b->thinking.chars) < 0)
                    goto done;
            }
        }
    } else if (line->content == J_STR) {
        if (apply_turn_text(r, c, turn, &line->content_text) < 0)
            goto done;
    }
    rc = 0;
done:
    Py_XDECREF(turn);
    Py_XDECREF(model);
    Py_XDECREF(usage);
    Py_DECREF(key);
    return rc;
}

#define INTERRUPT_MARK "[Request interrupted by user"

/* _prompt */
static int
apply_prompt(Reader *r, Ctx *c, const Line *line, const JVal *text)
{
    if (starts_with(text, INTERRUPT_MARK))
        return hold_bool(c, O_INTERRUPTED, 1);
    if (line->is_meta.kind == J_TRUE || starts_with(text, "<command-") || starts_with(text, "<local-command")
        || starts_with(text, "Caveat:"))
        return 0;
    if (!has_nonspace(text))
        return 0;
    if (c->ledger) { /* no prompt built: only that there was one (the run's activity) */
        c->held[H_LEDGER_PROMPTS]++;
        return 0;
    }
    PyObject *values[2] = {text_str(r, text, r->max_prompt_text), when(r, &line->timestamp)};
    PyObject *prompt = new_record(r->prompt_cls, r->p_off, 2, values);
    int rc = prompt != NULL ? PyList_Append(c->prompts, prompt) : -1;
    Py_XDECREF(prompt);
    return rc;
}

/* A tool result's (size, head): parser._text_size of its content, the head cut at ``max``
 * characters (the parser's MAX_RESULT_TEXT, or fewer where only its start is read). */
static PyObject *
result_head(Reader *r, const Block *b, long long *size, Py_ssize_t max)
{
    *size = 0;
    if (b->result == R_TEXT) {
        *size = b->content.size;
        return text_str(r, &b->content, max);
    }
    if (b->result != R_ITEMS || b->n_items == 0)
        return Py_NewRef(EMPTY);
    /* "\n".join(the items' texts)[:max]: the texts after the cut are never needed */
    Py_ssize_t chars = 0, len = 0;
    char *out = text_room(r, max);
    if (out == NULL)
        return NULL;
    int first = 1;
    for (Py_ssize_t i = 0; i < b->n_items; i++) {
        const Item *it = &r->items[b->first_item + i];
        if (it->text.kind == J_STR) {
            *size += it->text.size;
            if (chars < max) {
                if (!first) {
                    out[len++] = '\n';
                    chars++;
                }
                if (chars < max) {
                    Py_ssize_t take = it->text.chars < max - chars ? it->text.chars : max - chars;
                    len += text_head(&it->text, take, out + len);
                    chars += take;
                }
            }
            first = 0;
        } else if (STR_IS(it->type, "image") && it->data.kind == J_STR) {
            *size += it->data.chars;
        }
    }
    return PyUnicode_DecodeUTF8(out, len, NULL);
}

/* _tool_result */
static int
apply_tool_result(Reader *r, Ctx *c, const Block *b)
{
    int is_error = b->is_error.kind == J_TRUE;
    long long size;
    /* a ledger-only parse keeps no head: it reads only whether it starts with the mark */
    PyObject *head = result_head(r, b, &size, c->ledger ? (Py_ssize_t)strlen(INTERRUPT_MARK) : r->max_result_text);
    if (head == NULL)
        return -1;
    PyObject *tool_id = b->tool_use_id.kind == J_STR ? text_str(r, &b->tool_use_id, -1) : Py_NewRef(NONE_TEXT);
    int rc = -1;
    if (tool_id == NULL)
        goto done;
    if (is_error)
        count(c, K_FAILED);
    if (PyUnicode_GET_LENGTH(head) >= (Py_ssize_t)strlen(INTERRUPT_MARK)) {
        PyObject *mark = PyUnicode_FromString(INTERRUPT_MARK);
        int starts = mark ? PyUnicode_Tailmatch(head, mark, 0, PyUnicode_GET_LENGTH(mark), -1) : -1;
        Py_XDECREF(mark);
        if (starts < 0 || (starts && hold_bool(c, O_INTERRUPTED, 1) < 0))
            goto done;
    }
    PyObject *pos = PyDict_GetItemWithError(c->awaiting, tool_id);
    if (pos == NULL && PyErr_Occurred())
        goto done;
    if (pos != NULL) {
        Py_ssize_t at = PyLong_AsSsize_t(pos); /* >= 0: state_clean */
        if (PyDict_DelItem(c->awaiting, tool_id) < 0)
            goto done;
        if (at < PyList_GET_SIZE(c->digest)) {
            PyObject *step = PyList_GET_ITEM(c->digest, at);
            PyObject *bytes = PyLong_FromLongLong(size), *error = PyLong_FromLong(is_error);
            if (bytes == NULL || error == NULL) {
                Py_XDECREF(bytes);
                Py_XDECREF(error);
                goto done;
            }
            if (PyList_SetItem(step, 3, bytes) < 0 || PyList_SetItem(step, 4, error) < 0)
                goto done;
        }
    }
    PyObject *index = c->ledger ? NULL : PyDict_GetItemWithError(c->call_by_id, tool_id);
    if (index == NULL) {
        rc = PyErr_Occurred() ? -1 : 0;
        goto done;
    }
    Py_ssize_t i = PyLong_AsSsize_t(index);
    if (i == -1 && PyErr_Occurred())
        goto done;
    PyObject *call = PyList_GET_ITEM(c->calls, i);
    PyObject *bytes = PyLong_FromLongLong(size);
    if (bytes == NULL)
        goto done;
    set_slot(call, r->c_off[C_RESULT_BYTES], bytes);
    set_slot(call, r->c_off[C_RESULT_TEXT], Py_NewRef(head));
    set_slot(call, r->c_off[C_IS_ERROR], Py_NewRef(is_error ? Py_True : Py_False));
    rc = 0;
done:
    Py_XDECREF(tool_id);
    Py_DECREF(head);
    return rc;
}

/* _user */
/* Whether a tool_result block answers a Task call that gave its subagent a type (parser._user's
 * s.task_types.get(str(block.tool_use_id))): 1 with that type in *agent_type (borrowed), 0 for none,
 * -1 on error. */
static int
task_type_of(Reader *r, Ctx *c, const Block *b, PyObject **agent_type)
{
    PyObject *id = b->tool_use_id.kind == J_STR ? text_str(r, &b->tool_use_id, -1) : Py_NewRef(NONE_TEXT);
    if (id == NULL)
        return -1;
    *agent_type = PyDict_GetItemWithError(c->task_types, id);
    Py_DECREF(id);
    if (*agent_type == NULL)
        return PyErr_Occurred() ? -1 : 0;
    return PyObject_IsTrue(*agent_type);
}

/* parser._user's last step: the subagent a Task result's toolUseResult names (r->task_agent, a valid
 * id) takes the type each of the line's Task results' calls gave (the last one given). */
static int
apply_task_agent(Reader *r, Ctx *c)
{
    if (r->task_agent.kind != J_STR)
        return 0; /* valid_id of anything else is None */
    PyObject *text = text_str(r, &r->task_agent, -1);
    PyObject *agent_id = text ? PyObject_CallOneArg(r->valid_id, text) : NULL;
    Py_XDECREF(text);
    if (agent_id == NULL)
        return -1;
    int valid = PyObject_IsTrue(agent_id);
    for (Py_ssize_t i = 0; valid > 0 && i < r->n_blocks; i++) {
        const Block *b = &r->blocks[i];
        if (b->kind != B_TOOL_RESULT)
            continue;
        PyObject *agent_type;
        int truthy = task_type_of(r, c, b, &agent_type);
        if (truthy < 0 || (truthy && PyDict_SetItem(c->subagent_types, agent_id, agent_type) < 0))
            valid = -1;
    }
    Py_DECREF(agent_id);
    return valid < 0 ? -1 : 0;
}

/* The "agentId" of a line's toolUseResult as parser._user reads it (orjson.loads(...).get("agentId")):
 * into *agent, J_ABSENT where there is none (or the value is not an object); 0 where this scan cannot
 * tell what orjson reads — a string that is not UTF-8, a number other than a small integer, an escaped
 * key (it could spell agentId), a deep nesting: the line is left to Python. */
static int
task_result_agent(const Line *line, JVal *agent)
{
    const unsigned char *p = line->tool_use_result.p, *e = line->tool_use_result.e;
    agent->kind = J_ABSENT;
    if (skip_value(p, e, 1) != e) /* read: what orjson decodes, or less */
        return 0;
    if (*p != '{')
        return 1;
    p = skip_ws(p + 1, e);
    int more = p < e && *p != '}';
    while (more) {
        const unsigned char *name;
        Py_ssize_t len;
        if ((p = scan_key(p, e, &name, &len)) == NULL)
            return 0;
        if (NAME_IS(name, len, "agentId")) { /* the last one, as orjson keeps it */
            if ((p = scan_value(p, e, 1, 0, agent)) == NULL)
                return 0;
        } else if ((p = skip_field(p, e)) == NULL) {
            return 0;
        }
        if ((p = next_member(p, e, '}', &more)) == NULL)
            return 0;
    }
    return 1;
}

static int
apply_user(Reader *r, Ctx *c, const Line *line)
{
    if (line->message != J_OBJ)
        return 0;
    if (line->is_compact_summary.kind == J_TRUE) {
        c->held[H_COMPACTIONS]++;
        return 0;
    }
    if (line->content == J_STR)
        return apply_prompt(r, c, line, &line->content_text);
    if (line->content != J_ARR)
        return 0;
    for (Py_ssize_t i = 0; i < r->n_blocks; i++) {
        const Block *b = &r->blocks[i];
        if (b->kind == B_TOOL_RESULT) {
            if (apply_tool_result(r, c, b) < 0)
                return -1;
        } else if (b->kind == B_TEXT && b->text.kind == J_STR) {
            if (apply_prompt(r, c, line, &b->text) < 0)
                return -1;
        }
    }
    return r->task_agent_read ? apply_task_agent(r, c) : 0;
}

enum { L_OTHER, L_ASSISTANT, L_USER, L_PROGRESS, L_SYSTEM };

/* What only the parser's Python reads, or reads otherwise than this pass would: 1 to leave the
 * line to it. Checked before anything is applied. */
static int
left_to_python(Reader *r, Ctx *c, const Line *line, int kind)
{
    r->task_agent_read = 0;
    if (line->type.kind == J_STR && line->type.escaped)
        return 1; /* an escape could spell a record type */
    int texts = kind == L_ASSISTANT || kind == L_USER;
    if (texts && line->message == J_OBJ) {
        /* storable_text drops NUL from the texts read: a rare case, left to it */
        if (line->content == J_STR && line->content_text.nul)
            return 1;
        for (Py_ssize_t i = 0; i < r->n_blocks; i++)
            if (r->blocks[i].kind == B_TEXT && r->blocks[i].text.kind == J_STR && r->blocks[i].text.nul)
                return 1;
    }
    if (kind == L_SYSTEM && line->subtype.kind == J_STR && line->subtype.escaped)
        return 1; /* an escape could spell compact_boundary */
    if (kind == L_ASSISTANT && line->message == J_OBJ) {
        if (!nonempty_str(&line->id) || line->id.nul || (nonempty_str(&line->request_id) && line->request_id.nul))
            return 1; /* a key from the line's uuid or offset, or one storable_text cleans */
    }
    if (kind == L_USER && line->message == J_OBJ && line->is_compact_summary.kind != J_TRUE && line->content == J_ARR) {
        int task_results = line->tool_use_result.kind != J_ABSENT && PyDict_GET_SIZE(c->task_types) > 0;
        for (Py_ssize_t i = 0; i < r->n_blocks; i++) {
            const Block *b = &r->blocks[i];
            if (b->kind != B_TOOL_RESULT)
                continue;
            if (b->result < 0 || (b->tool_use_id.kind != J_STR && b->tool_use_id.kind != J_NULL
                                  && b->tool_use_id.kind != J_ABSENT))
                return 1;
            for (Py_ssize_t k = 0; k < b->n_items; k++)
                if (r->items[b->first_item + k].type.kind == J_STR && r->items[b->first_item + k].type.escaped)
                    return 1; /* an escape could spell "image" */
            if (task_results) { /* a Task's result names the subagent it ran */
                PyObject *agent_type;
                int truthy = task_type_of(r, c, b, &agent_type);
                if (truthy < 0)
                    return -1;
                if (truthy && !r->task_agent_read) { /* its subagent is read here, if it can be */
                    if (!task_result_agent(line, &r->task_agent))
                        return 1;
                    r->task_agent_read = 1;
                }
            }
        }
    }
    if (kind == L_PROGRESS && line->data.kind == J_OBJ) {
        /* data.message: a subagent's response, for the embedded dedupe: left to Python */
        const unsigned char *p = skip_ws(line->data.p + 1, line->data.e), *e = line->data.e;
        int more = *p != '}';
        while (more) {
            const unsigned char *name;
            Py_ssize_t len;
            if ((p = scan_key(p, e, &name, &len)) == NULL)
                return 1;
            if (NAME_IS(name, len, "message"))
                return 1;
            if ((p = skip_field(p, e)) == NULL || (p = next_member(p, e, '}', &more)) == NULL)
                return 1;
        }
    }
    return 0;
}

/* _record, after the line is counted and consumed */
static int
apply_line(Reader *r, Ctx *c, const Line *line, int kind)
{
    if (apply_common(r, c, line) < 0)
        return -1;
    switch (kind) {
    case L_ASSISTANT:
        return apply_assistant(r, c, line);
    case L_USER:
        return apply_user(r, c, line);
    case L_SYSTEM:
        c->held[H_COMPACTIONS] += STR_IS(line->subtype, "compact_boundary");
        return 0;
    default:
        return 0;
    }
}

static int
line_kind(const Line *line)
{
    if (STR_IS(line->type, "assistant"))
        return L_ASSISTANT;
    if (STR_IS(line->type, "user"))
        return L_USER;
    if (STR_IS(line->type, "progress"))
        return L_PROGRESS;
    if (STR_IS(line->type, "system"))
        return L_SYSTEM;
    return L_OTHER;
}

/* The record types that carry nothing the ledger needs (parser._SKIP_PREFIXES): written with
 * "type" first, so counted without a read. */
static const char *skip_types[] = {"file-history-snapshot", "queue-operation", "permission-mode", "last-prompt",
                                   "summary", "custom-title", "tag"};

static int
skipped_type(const unsigned char *s, Py_ssize_t n)
{
    static const char head[] = "{\"type\":\"";
    const Py_ssize_t h = (Py_ssize_t)sizeof(head) - 1;
    if (n < h || memcmp(s, head, (size_t)h) != 0)
        return 0;
    for (size_t i = 0; i < sizeof(skip_types) / sizeof(skip_types[0]); i++) {
        Py_ssize_t len = (Py_ssize_t)strlen(skip_types[i]);
        if (n >= h + len + 1 && memcmp(s + h, skip_types[i], (size_t)len) == 0 && s[h + len] == '"')
            return 1;
    }
    return 0;
}

/* A line the parser's feed_line reads (flushed before, loaded again after) */
static int
fall_back(Ctx *c, const unsigned char *s, Py_ssize_t n, long long end)
{
    if (flush(c) < 0)
        return -1;
    PyObject *line = PyBytes_FromStringAndSize((const char *)s, n);
    PyObject *at = line ? PyLong_FromLongLong(end) : NULL;
    PyObject *args[3] = {c->parser, line, at};
    PyObject *got = at ? PyObject_VectorcallMethod(NAME[N__feed_fallback], args, 3 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL)
                       : NULL;
    Py_XDECREF(line);
    Py_XDECREF(at);
    if (got == NULL)
        return -1;
    Py_DECREF(got);
    return load(c, c->parser);
}

/* Every line of a block read by the Python parser (a state this pass does not take for granted). */
static int
feed_all_to_python(PyObject *parser, const unsigned char *base, Py_ssize_t upto, long long offset, Py_ssize_t max_line)
{
    Py_ssize_t pos = 0;
    for (;;) {
        const unsigned char *nl = pos < upto ? memchr(base + pos, '\n', (size_t)(upto - pos)) : NULL;
        Py_ssize_t stop = nl ? nl - base : upto;
        PyObject *end = PyLong_FromLongLong(offset + stop + 1), *got;
        if (end == NULL)
            return -1;
        if (stop - pos > max_line) {
            got = PyObject_CallMethod(parser, "feed_oversized", "O", end);
        } else {
            PyObject *line = PyBytes_FromStringAndSize((const char *)base + pos, stop - pos);
            PyObject *args[3] = {parser, line, end};
            got = line ? PyObject_VectorcallMethod(NAME[N__feed_fallback], args, 3 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL)
                       : NULL;
            Py_XDECREF(line);
        }
        Py_DECREF(end);
        if (got == NULL)
            return -1;
        Py_DECREF(got);
        if (nl == NULL)
            return 0;
        pos = stop + 1;
    }
}

/* The scratch text buffer given back once a block is read, if one huge text (a command of
 * megabytes) grew it: a process parses for long and keeps what it holds. */
static void
keep_small(Reader *r)
{
    if (r->text_cap > (1 << 20)) {
        PyMem_Free(r->text_buf);
        r->text_buf = NULL;
        r->text_cap = 0;
    }
}

static PyObject *
Reader_feed_block(Reader *r, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "feed_block takes (parser, data, upto, offset, max_line)");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[1], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    Py_ssize_t upto = PyLong_AsSsize_t(args[2]);
    long long offset = PyLong_AsLongLong(args[3]);
    Py_ssize_t max_line = PyLong_AsSsize_t(args[4]);
    if (!PyErr_Occurred() && (upto < 0 || upto > view.len))
        PyErr_SetString(PyExc_ValueError, "upto is outside the data");
    if (PyErr_Occurred()) {
        PyBuffer_Release(&view);
        return NULL;
    }
    const unsigned char *base = (const unsigned char *)view.buf;
    Ctx c;
    memset(&c, 0, sizeof(c));
    if (load(&c, args[0]) < 0)
        goto fail;
    if (!state_clean(&c)) {
        release(&c);
        int rc = feed_all_to_python(args[0], base, upto, offset, max_line);
        PyBuffer_Release(&view);
        return rc < 0 ? NULL : Py_NewRef(Py_None);
    }
    Py_ssize_t pos = 0;
    Line line;
    for (;;) {
        const unsigned char *s = base + pos;
        const unsigned char *nl = pos < upto ? memchr(s, '\n', (size_t)(upto - pos)) : NULL;
        Py_ssize_t stop = nl ? nl - base : upto;
        Py_ssize_t n = stop - pos;
        long long end = offset + stop + 1;
        if (n > max_line) { /* skipped unread (feed_oversized) */
            c.held[H_LINES]++;
            c.held[H_OVERSIZED]++;
            c.held[H_OFFSET] = end;
        } else if (n >= 2 && s[0] == '{' && s[n - 1] == '}' && skipped_type(s, n)) {
            c.held[H_LINES]++;
            c.held[H_OFFSET] = end;
        } else if (n >= 2 && s[0] == '{' && s[n - 1] == '}' && read_line(r, s, s + n, &line)) {
            int kind = line_kind(&line);
            int leave = left_to_python(r, &c, &line, kind);
            if (leave < 0 || (leave && fall_back(&c, s, n, end) < 0))
                goto fail;
            if (!leave) {
                c.held[H_LINES]++; /* counted and consumed before it is read (_take) */
                c.held[H_OFFSET] = end;
                if (apply_line(r, &c, &line, kind) < 0) {
                    if (!PyErr_ExceptionMatches(PyExc_Exception))
                        goto fail; /* KeyboardInterrupt and its kind: as the Python parser, not swallowed */
                    PyErr_Clear(); /* as feed_lines: a line whose reading raised is counted malformed */
                    c.held[H_MALFORMED]++;
                }
            }
        } else if (fall_back(&c, s, n, end) < 0) {
            goto fail;
        }
        if (nl == NULL)
            break;
        pos = stop + 1;
    }
    PyBuffer_Release(&view);
    keep_small(r);
    if (flush(&c) < 0)
        return NULL;
    Py_RETURN_NONE;
fail:
    release(&c);
    PyBuffer_Release(&view);
    keep_small(r);
    return NULL;
}

/* ---- the Reader type -------------------------------------------------------------------------- */

/* The offset of each of ``names``' slots in ``cls`` (a slots dataclass of the parser's records). */
static int
slot_offsets(PyTypeObject *cls, const char *const *names, int n, Py_ssize_t *offsets)
{
    for (int i = 0; i < n; i++) {
        PyObject *descr = PyDict_GetItemString(cls->tp_dict, names[i]); /* borrowed */
        if (descr == NULL || !PyObject_TypeCheck(descr, &PyMemberDescr_Type)
            || ((PyMemberDescrObject *)descr)->d_member->type != T_OBJECT_EX) {
            PyErr_Format(PyExc_TypeError, "%s has no object slot %s", cls->tp_name, names[i]);
            return -1;
        }
        offsets[i] = ((PyMemberDescrObject *)descr)->d_member->offset;
    }
    if (cls->tp_base != &PyBaseObject_Type || cls->tp_dictoffset != 0 || cls->tp_itemsize != 0) {
        PyErr_Format(PyExc_TypeError, "%s is not a slots class on object", cls->tp_name);
        return -1;
    }
    return 0;
}

static void
Reader_dealloc(Reader *r)
{
    Py_XDECREF(r->usage_cls);
    Py_XDECREF(r->turn_cls);
    Py_XDECREF(r->call_cls);
    Py_XDECREF(r->prompt_cls);
    Py_XDECREF(r->no_usage);
    Py_XDECREF(r->tool_kinds);
    Py_XDECREF(r->free_models);
    Py_XDECREF(r->valid_id);
    Py_XDECREF(r->stored_project);
    Py_XDECREF(r->clean_label);
    Py_XDECREF(r->model_name);
    Py_XDECREF(r->path_key);
    Py_XDECREF(r->digest_target);
    Py_XDECREF(r->parse_timestamp);
    Py_XDECREF(r->utc_text);
    Py_XDECREF(r->decode);
    LastValue *lasts[] = {&r->last_ts, &r->last_model, &r->last_stop};
    for (size_t i = 0; i < sizeof lasts / sizeof *lasts; i++) {
        Py_XDECREF(lasts[i]->raw);
        Py_XDECREF(lasts[i]->value);
    }
    memo_clear(&r->path_keys);
    memo_clear(&r->targets);
    PyMem_Free(r->path_keys.slots);
    PyMem_Free(r->targets.slots);
    Py_XDECREF(r->empty_target);
    for (int i = 0; i < r->n_kinds; i++) {
        Py_DECREF(r->kind_names[i]);
        Py_DECREF(r->kind_values[i]);
    }
    PyMem_Free(r->blocks);
    PyMem_Free(r->items);
    PyMem_Free(r->text_buf);
    Py_TYPE(r)->tp_free((PyObject *)r);
}

static PyObject *
Reader_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"usage", "turn", "tool_call", "user_prompt", "no_usage", "tool_kinds", "free_models",
                             "valid_id", "stored_project", "clean_label", "model_name", "path_key", "digest_target",
                             "parse_timestamp", "utc_text", "decode", "max_result_text", "max_prompt_text",
                             "max_turn_text", "max_digest_steps", "max_awaiting", "max_read_registry",
                             "bytes_per_token", NULL};
    PyTypeObject *usage, *turn, *call, *prompt;
    PyObject *hooks[12];
    Py_ssize_t limits[7];
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "$O!O!O!O!OO!OOOOOOOOOOnnnnnnn", kwlist, &PyType_Type, &usage,
                                     &PyType_Type, &turn, &PyType_Type, &call, &PyType_Type, &prompt, &hooks[0],
                                     &PyDict_Type, &hooks[1], &hooks[2], &hooks[3], &hooks[4], &hooks[5], &hooks[6],
                                     &hooks[7], &hooks[8], &hooks[9], &hooks[10], &hooks[11], &limits[0], &limits[1],
                                     &limits[2], &limits[3], &limits[4], &limits[5], &limits[6]))
        return NULL;
    static const char *const usage_slots[] = {"input_tokens", "output_tokens", "cache_write_5m", "cache_write_1h",
                                              "cache_read"};
    static const char *const turn_slots[] = {"index", "message_key", "model", "usage", "timestamp", "text",
                                             "tool_call_indexes", "content_bytes"};
    static const char *const call_slots[] = {"index", "tool_use_id", "name", "kind", "input", "input_bytes", "path",
                                             "line_range", "command", "result_bytes", "result_text", "is_error",
                                             "is_reread", "timestamp", "turn"};
    static const char *const prompt_slots[] = {"text", "timestamp"};
    Reader *r = (Reader *)type->tp_alloc(type, 0);
    if (r == NULL)
        return NULL;
    if (slot_offsets(usage, usage_slots, 5, r->u_off) < 0 || slot_offsets(turn, turn_slots, 8, r->t_off) < 0
        || slot_offsets(call, call_slots, 15, r->c_off) < 0 || slot_offsets(prompt, prompt_slots, 2, r->p_off) < 0) {
        Py_DECREF(r);
        return NULL;
    }
    r->usage_cls = (PyTypeObject *)Py_NewRef(usage);
    r->turn_cls = (PyTypeObject *)Py_NewRef(turn);
    r->call_cls = (PyTypeObject *)Py_NewRef(call);
    r->prompt_cls = (PyTypeObject *)Py_NewRef(prompt);
    PyObject **fields[12] = {&r->no_usage, &r->tool_kinds, &r->free_models, &r->valid_id, &r->stored_project,
                             &r->clean_label, &r->model_name, &r->path_key, &r->digest_target, &r->parse_timestamp,
                             &r->utc_text, &r->decode};
    for (int i = 0; i < 12; i++)
        *fields[i] = Py_NewRef(hooks[i]);
    r->max_result_text = limits[0];
    r->max_prompt_text = limits[1];
    r->max_turn_text = limits[2];
    r->max_digest_steps = limits[3];
    r->max_awaiting = limits[4];
    r->max_read_registry = limits[5];
    r->bytes_per_token = limits[6] > 0 ? limits[6] : 1;
    return (PyObject *)r;
}

/* turn_usage(turns) -> [(message key, model, input, output, cache write 5m, 1h, cache read,
 * timestamp), ...]: ParsedRun.usage_of_turns of the parser's turns (a ledger-only parse keeps it
 * instead of its turns), read from their slots. */
static PyObject *
Reader_turn_usage(Reader *r, PyObject *turns)
{
    if (!PyList_CheckExact(turns)) {
        PyErr_SetString(PyExc_TypeError, "turn_usage takes the parser's list of turns");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(turns);
    PyObject *out = PyList_New(n);
    for (Py_ssize_t i = 0; out != NULL && i < n; i++) {
        PyObject *turn = PyList_GET_ITEM(turns, i);
        if (Py_TYPE(turn) != r->turn_cls || Py_TYPE(SLOT(turn, r->t_off[T_USAGE])) != r->usage_cls) {
            PyErr_SetString(PyExc_TypeError, "turn_usage takes Turns holding a Usage");
            Py_CLEAR(out);
            break;
        }
        PyObject *usage = SLOT(turn, r->t_off[T_USAGE]);
        PyObject *row = PyTuple_New(8);
        if (row == NULL) {
            Py_CLEAR(out);
            break;
        }
        PyTuple_SET_ITEM(row, 0, Py_NewRef(SLOT(turn, r->t_off[T_KEY])));
        PyTuple_SET_ITEM(row, 1, Py_NewRef(SLOT(turn, r->t_off[T_MODEL])));
        for (int k = 0; k < 5; k++)
            PyTuple_SET_ITEM(row, 2 + k, Py_NewRef(SLOT(usage, r->u_off[k])));
        PyTuple_SET_ITEM(row, 7, Py_NewRef(SLOT(turn, r->t_off[T_TIMESTAMP])));
        PyList_SET_ITEM(out, i, row);
    }
    return out;
}

/* A usage row's timestamp: a naive datetime as SQLite's text ("YYYY-MM-DD HH:MM:SS.ffffff", what
 * SQLiteDateTime makes of it) where naive_as_text, anything else through convert (None: as is). */
static PyObject *
row_stamp(PyObject *stamp, PyObject *convert, int naive_as_text)
{
    if (naive_as_text && PyDateTime_CheckExact(stamp) && !((PyDateTime_DateTime *)stamp)->hastzinfo) {
        const int fields[7] = {PyDateTime_GET_YEAR(stamp), PyDateTime_GET_MONTH(stamp), PyDateTime_GET_DAY(stamp),
                               PyDateTime_DATE_GET_HOUR(stamp), PyDateTime_DATE_GET_MINUTE(stamp),
                               PyDateTime_DATE_GET_SECOND(stamp), PyDateTime_DATE_GET_MICROSECOND(stamp)};
        static const int digits[7] = {4, 2, 2, 2, 2, 2, 6};
        static const char after[7] = "-- ::.";  /* the separator after each field (none after the last) */
        PyObject *text = PyUnicode_New(26, 127);
        if (text == NULL)
            return NULL;
        Py_UCS1 *out = PyUnicode_1BYTE_DATA(text);
        for (int f = 0; f < 7; f++) {
            for (int d = digits[f] - 1, v = fields[f]; d >= 0; d--, v /= 10)
                out[d] = (Py_UCS1)('0' + v % 10);
            out += digits[f];
            if (f < 6)
                *out++ = (Py_UCS1)after[f];
        }
        return text;
    }
    return convert == Py_None ? Py_NewRef(stamp) : PyObject_CallOneArg(convert, stamp);
}

/* The text cut to max characters, as text[:max]. */
static PyObject *
cut(PyObject *text, Py_ssize_t max)
{
    if (PyUnicode_Check(text) && PyUnicode_GET_LENGTH(text) > max)
        return PyUnicode_Substring(text, 0, max);
    return Py_NewRef(text);
}

/* usage_rows(turn_usage, run_key, convert, naive_as_text) -> {key: row}: transcripts._usage_rows's
 * rows of a run's turns (ParsedRun.usage_of_turns), each (key[:400], run_key, model[:120], stamp,
 * the five counts), the stamp by row_stamp; a later turn of a key already seen replaces it (the
 * caller compares the sizes: a parse's turns are distinct responses). */
static PyObject *
Reader_usage_rows(Reader *r, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4 || !PyList_CheckExact(args[0]) || !PyUnicode_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "usage_rows takes (turn_usage list, run_key, convert, naive_as_text)");
        return NULL;
    }
    PyObject *turns = args[0], *run_key = args[1], *convert = args[2];
    int naive_as_text = PyObject_IsTrue(args[3]);
    if (naive_as_text < 0)
        return NULL;
    PyObject *rows = PyDict_New();
    for (Py_ssize_t i = 0; rows != NULL && i < PyList_GET_SIZE(turns); i++) {
        PyObject *turn = PyList_GET_ITEM(turns, i);
        if (!PyTuple_CheckExact(turn) || PyTuple_GET_SIZE(turn) != 8) {
            PyErr_SetString(PyExc_TypeError, "usage_rows takes (key, model, five counts, timestamp) tuples");
            Py_CLEAR(rows);
            break;
        }
        PyObject *row = PyTuple_New(9);
        if (row == NULL) {
            Py_CLEAR(rows);
            break;
        }
        PyObject *key = cut(PyTuple_GET_ITEM(turn, 0), 400);
        PyTuple_SET_ITEM(row, 0, key);
        PyTuple_SET_ITEM(row, 1, Py_NewRef(run_key));
        PyTuple_SET_ITEM(row, 2, cut(PyTuple_GET_ITEM(turn, 1), 120));
        PyObject *stamp = row_stamp(PyTuple_GET_ITEM(turn, 7), convert, naive_as_text);
        PyTuple_SET_ITEM(row, 3, stamp);
        for (int k = 0; k < 5; k++)
            PyTuple_SET_ITEM(row, 4 + k, Py_NewRef(PyTuple_GET_ITEM(turn, 2 + k)));
        if (key == NULL || PyTuple_GET_ITEM(row, 2) == NULL || stamp == NULL || PyDict_SetItem(rows, key, row) < 0)
            Py_CLEAR(rows);
        Py_DECREF(row);
    }
    return rows;
}

/* placeholder_verdicts(turns, first, last) -> (responses, placeholders): parser._placeholder_verdicts
 * of turns[first:last], read from their slots (parser._placeholder_verdict: a synthetic reply is no
 * response; a placeholder is an output count far below the content the response produced). */
static PyObject *
Reader_placeholder_verdicts(Reader *r, PyObject *const *args, Py_ssize_t nargs)
{
    Py_ssize_t first, last;
    if (nargs != 3 || !PyList_CheckExact(args[0]) || (first = PyLong_AsSsize_t(args[1])) < 0
        || (last = PyLong_AsSsize_t(args[2])) < first || last > PyList_GET_SIZE(args[0])) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "placeholder_verdicts takes (turns, first, last) within the list");
        return NULL;
    }
    long long responses = 0, placeholders = 0;
    for (Py_ssize_t i = first; i < last; i++) {
        PyObject *turn = PyList_GET_ITEM(args[0], i);
        if (Py_TYPE(turn) != r->turn_cls || Py_TYPE(SLOT(turn, r->t_off[T_USAGE])) != r->usage_cls) {
            PyErr_SetString(PyExc_TypeError, "placeholder_verdicts takes Turns holding a Usage");
            return NULL;
        }
        PyObject *model = SLOT(turn, r->t_off[T_MODEL]);
        int synthetic = PyUnicode_Check(model) ? PyUnicode_Compare(model, SYNTHETIC) == 0 : 0;
        if (synthetic)
            continue;
        long long content = PyLong_AsLongLong(SLOT(turn, r->t_off[T_CONTENT_BYTES]));
        long long output = usage_field(r, SLOT(turn, r->t_off[T_USAGE]), 1);
        if (PyErr_Occurred())
            return NULL;
        long long tokens = ((content > 0 ? content : 0) + r->bytes_per_token - 1) / r->bytes_per_token;
        responses++;
        placeholders += tokens >= 8 && output * 4 < tokens;
    }
    return Py_BuildValue("(LL)", responses, placeholders);
}

static PyMethodDef Reader_methods[] = {
    {"placeholder_verdicts", (PyCFunction)(void (*)(void))Reader_placeholder_verdicts, METH_FASTCALL,
     "placeholder_verdicts(turns, first, last) -> (responses, placeholders) of turns[first:last]."},
    {"usage_rows", (PyCFunction)(void (*)(void))Reader_usage_rows, METH_FASTCALL,
     "usage_rows(turn_usage, run_key, convert, naive_as_text) -> {key: usage row} (transcripts._usage_rows)."},
    {"turn_usage", (PyCFunction)Reader_turn_usage, METH_O,
     "turn_usage(turns) -> the turns' (key, model, five counts, timestamp) tuples."},
    {"feed_block", (PyCFunction)(void (*)(void))Reader_feed_block, METH_FASTCALL,
     "feed_block(parser, data, upto, offset, max_line): the complete lines of data[:upto] read into the parser."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject ReaderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "warden.ingest._skim.Reader",
    .tp_basicsize = sizeof(Reader),
    .tp_dealloc = (destructor)Reader_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Reader(**hooks): the transcript parser's lines read in C (see parser.fast_reader).",
    .tp_methods = Reader_methods,
    .tp_new = Reader_new,
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_skim", "The transcript parser's fast path.", -1, NULL};

PyMODINIT_FUNC
PyInit__skim(void)
{
    for (int i = 0; i < N_COUNT; i++)
        if (NAME[i] == NULL && (NAME[i] = PyUnicode_InternFromString(name_text[i])) == NULL)
            return NULL;
    if ((EMPTY = PyUnicode_InternFromString("")) == NULL || (QUESTION = PyUnicode_InternFromString("?")) == NULL
        || (NONE_TEXT = PyUnicode_InternFromString("None")) == NULL
        || (SYNTHETIC = PyUnicode_InternFromString("<synthetic>")) == NULL)
        return NULL;
    if (PyType_Ready(&ReaderType) < 0)
        return NULL;
    PyDateTime_IMPORT;
    if (PyDateTimeAPI == NULL)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && PyModule_AddType(m, &ReaderType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
