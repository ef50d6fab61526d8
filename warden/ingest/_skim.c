/* warden.ingest._skim: the transcript reader's optional C fast path.
 *
 * usage_counts(usage) -> (input, output, cache write 5m, cache write 1h, cache read, zeroed) reads
 * an API usage dict (exactly a dict: the caller checks) as warden.ingest.parser's
 * usage_from_json and zeroed_counts do together (_usage_counts_py, the reference), in one pass
 * without a Python call per count: it ran on every response's first line.
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

/* parser._count: an int (not a bool) or a non-NaN float in (0, MAX_COUNT), truncated; else 0.
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
        return v > 0 && v < (double)MAX_COUNT ? (long long)v : 0;
    }
    *readable = value == Py_None ? !required : 0;
    return 0;
}

static PyObject *
usage_counts(PyObject *self, PyObject *raw)
{
    if (!PyDict_CheckExact(raw)) {
        PyErr_SetString(PyExc_TypeError, "usage_counts takes a dict");
        return NULL;
    }
    int ok_in, ok_out, ok_creation, ok_read, ok_5m = 1, ok_1h = 1;
    /* PyDict_GetItemString: borrowed, and a str key never raises on a dict of decoded JSON */
    long long input = count_of(PyDict_GetItemString(raw, "input_tokens"), 1, &ok_in);
    long long output = count_of(PyDict_GetItemString(raw, "output_tokens"), 1, &ok_out);
    long long creation = count_of(PyDict_GetItemString(raw, "cache_creation_input_tokens"), 0, &ok_creation);
    long long read = count_of(PyDict_GetItemString(raw, "cache_read_input_tokens"), 0, &ok_read);
    long long w5 = creation, w1 = 0;
    PyObject *split = PyDict_GetItemString(raw, "cache_creation");
    if (split != NULL && PyDict_Check(split)) {
        PyObject *s5 = PyDict_GetItemString(split, "ephemeral_5m_input_tokens");
        PyObject *s1 = PyDict_GetItemString(split, "ephemeral_1h_input_tokens");
        long long v5 = count_of(s5, 0, &ok_5m), v1 = count_of(s1, 0, &ok_1h);
        if (s5 != NULL || s1 != NULL) {
            w5 = v5;
            w1 = v1;
            if (creation > w5 + w1) /* the split never undercounts the billed total: the rest is 5m */
                w5 += creation - (w5 + w1);
        }
    }
    int zeroed = !(ok_in && ok_out && ok_creation && ok_read && ok_5m && ok_1h);
    return Py_BuildValue("(LLLLLO)", input, output, w5, w1, read, zeroed ? Py_True : Py_False);
}

static PyMethodDef methods[] = {
    {"usage_counts", usage_counts, METH_O,
     "usage_counts(usage) -> (input, output, write_5m, write_1h, read, zeroed) of an API usage dict."},
    {"split_lines", split_lines, METH_VARARGS,
     "split_lines(data, upto, offset, max_line) -> (lines, ends): the complete lines of data[:upto]."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_skim", NULL, -1, methods};

PyMODINIT_FUNC
PyInit__skim(void)
{
    return PyModule_Create(&module);
}
