/* warden.ingest._skim: the transcript reader's optional C fast path.
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

static PyMethodDef methods[] = {
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
