/* _nofall.c -- the CPython extension of the nofall package: libnofall's
 * models (load once, forwards on arrays, trace and placement) and its Mitra
 * predictor on tables (include/nofall-tabular.h). Arrays come in and go out
 * through the buffer protocol (numpy arrays without copies); the GIL is
 * released during forwards; a C error is raised as nofall.NofallError (or
 * NofallInputError, also a ValueError, for bad input) carrying the message
 * and the result code. Python-side conveniences live in nofall/_estimators.py.
 * SpTransformer's sequence inputs and annotate: _nofall_genomics.c. */
#include "_nofall.h"
#include "nofall-tabular.h"

#include <math.h>
#include <string.h>

static PyObject * NfError;      /* nofall.NofallError(RuntimeError) */
static PyObject * NfInputError; /* nofall.NofallInputError(NofallError, ValueError) */

PyObject * nf_py_raise(const nf_err * err) {
    const int c = err->code;
    PyObject * type = (c == NF_ERR_INPUT || c == NF_ERR_ARG || c == NF_ERR_SHAPE || c == NF_ERR_FORMAT) ? NfInputError
                                                                                                        : NfError;
    PyObject * exc = PyObject_CallFunction(type, "s", err->msg);
    if (!exc) return NULL;
    PyObject * code = PyLong_FromLong(c);
    PyObject * name = PyUnicode_FromString(nf_result_name(c));
    if (code) PyObject_SetAttrString(exc, "code", code);
    if (name) PyObject_SetAttrString(exc, "code_name", name);
    Py_XDECREF(code);
    Py_XDECREF(name);
    PyErr_SetObject(type, exc);
    Py_DECREF(exc);
    return NULL;
}

/* a buffer's struct format without its byte-order prefix */
static const char * nf_py_format(const Py_buffer * b) {
    const char * f = b->format ? b->format : "B";
    return *f == '<' || *f == '=' || *f == '@' ? f + 1 : f;
}

/* the buffer holds elements of format fmt (8-byte 'l' / 'L' count as 'q' / 'Q') */
static int nf_py_format_is(const Py_buffer * b, const char * fmt) {
    const char * f = nf_py_format(b);
    if (strcmp(f, fmt) == 0) return 1;
    if (strcmp(fmt, "q") == 0) return strcmp(f, "l") == 0 && b->itemsize == 8;
    if (strcmp(fmt, "Q") == 0) return strcmp(f, "L") == 0 && b->itemsize == 8;
    return 0;
}

/* a C-contiguous buffer of itemsize `size` and format `fmt` ("f", "d", "q"/"l") */
int nf_py_buffer(PyObject * o, Py_buffer * b, const char * fmt, int writable, const char * what) {
    if (PyObject_GetBuffer(o, b, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0)) != 0) return -1;
    const char * f = nf_py_format(b);
    if (!nf_py_format_is(b, fmt)) {
        PyErr_Format(PyExc_TypeError, "%s: a C-contiguous buffer of format '%s' is needed, not '%s'", what, fmt, f);
        PyBuffer_Release(b);
        return -1;
    }
    return 0;
}

/* a buffer of 8-byte integers (numpy int64 / uint64), not of doubles */
static int nf_py_int_buffer(PyObject * o) {
    Py_buffer b;
    if (PyObject_GetBuffer(o, &b, PyBUF_FORMAT) != 0) {
        PyErr_Clear();
        return 0;
    }
    const int ok = nf_py_format_is(&b, "q") || nf_py_format_is(&b, "Q");
    PyBuffer_Release(&b);
    return ok;
}

/* ---- Model ------------------------------------------------------------------ */
static void NfModel_dealloc(NfModel * self) {
    nf_model_free(self->m);
    nf_backend_free(self->be);
    Py_TYPE(self)->tp_free((PyObject *) self);
}

static int NfModel_init(NfModel * self, PyObject * args, PyObject * kw) {
    static char * kwl[] = {"model_dir", "device", "precision", NULL};
    const char *dir, *device = "cpu", *precision = "exact";
    if (!PyArg_ParseTupleAndKeywords(args, kw, "s|ss", kwl, &dir, &device, &precision)) return -1;
    int prec;
    if (strcmp(precision, "exact") == 0)
        prec = NF_PRECISION_EXACT;
    else if (strcmp(precision, "tf32") == 0)
        prec = NF_PRECISION_TF32;
    else {
        PyErr_Format(PyExc_ValueError, "precision: 'exact' or 'tf32', not '%s'", precision);
        return -1;
    }
    nf_err err = {0};
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = nf_backend_init(device, prec, &self->be, &err);
    if (rc == NF_OK) rc = nf_model_load(self->be, dir, &self->m, &err);
    Py_END_ALLOW_THREADS if (rc != NF_OK) {
        nf_py_raise(&err);
        return -1;
    }
    return 0;
}

static int nf_py_ready(NfModel * self) {
    if (!self->m) {
        PyErr_SetString(PyExc_RuntimeError, "the model is not loaded");
        return 0;
    }
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "the model is running a forward in another thread");
        return 0;
    }
    return 1;
}

/* inputs: a list of (name, buffer, shape tuple) into in / bufs (*got: the buffers held, to release) */
static int nf_py_inputs(NfModel * self, PyObject * list, struct nf_array * in, Py_buffer * bufs, Py_ssize_t * got) {
    const Py_ssize_t n = PyList_GET_SIZE(list);
    if (n < 1 || n > 8) {
        PyErr_Format(PyExc_ValueError, "forward: 1 to 8 inputs, not %zd", n);
        return -1;
    }
    memset(in, 0, sizeof(*in) * (size_t) n);
    for (*got = 0; *got < n;) {
        const Py_ssize_t i = *got;
        PyObject * item = PyList_GET_ITEM(list, i);
        const char * name;
        PyObject *arr, *shape;
        if (!PyArg_ParseTuple(item, "sOO!", &name, &arr, &PyTuple_Type, &shape)) return -1;
        const struct nf_input_desc * d = NULL;
        for (int k = 0; k < nf_model_n_inputs(self->m); k++)
            if (strcmp(nf_model_input(self->m, k)->name, name) == 0) d = nf_model_input(self->m, k);
        if (!d) {
            PyErr_Format(PyExc_ValueError, "forward: the model has no input '%s'", name);
            return -1;
        }
        if (nf_py_buffer(arr, &bufs[i], d->dtype == NF_ARRAY_I64 ? "q" : "f", 0, name) != 0) return -1;
        (*got)++;
        const Py_ssize_t nd = PyTuple_GET_SIZE(shape);
        if (nd < 1 || nd > NF_ARRAY_MAX_DIMS) {
            PyErr_Format(PyExc_ValueError, "forward: %s: %zd dims", name, nd);
            return -1;
        }
        in[i].name = d->name;
        in[i].dtype = d->dtype;
        in[i].ndim = (int) nd;
        int64_t numel = 1;
        for (Py_ssize_t k = 0; k < nd; k++) numel *= (in[i].shape[k] = PyLong_AsLongLong(PyTuple_GET_ITEM(shape, k)));
        in[i].data = bufs[i].buf;
        if (PyErr_Occurred() || numel * (int64_t) bufs[i].itemsize != (int64_t) bufs[i].len) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_ValueError, "forward: %s: the shape does not match the buffer", name);
            return -1;
        }
    }
    return 0;
}

static PyObject * nf_py_shape_tuple(int ndim, const int64_t * shp) {
    PyObject * ret = PyTuple_New(ndim);
    for (int k = 0; ret && k < ndim; k++) PyTuple_SET_ITEM(ret, k, PyLong_FromLongLong(shp[k]));
    return ret;
}

/* forward(inputs: list of (name, buffer, shape tuple), out: writable float32 buffer) */
static PyObject * NfModel_forward(NfModel * self, PyObject * args) {
    PyObject *list, *out;
    if (!PyArg_ParseTuple(args, "O!O", &PyList_Type, &list, &out)) return NULL;
    if (!nf_py_ready(self)) return NULL;
    const Py_ssize_t n = PyList_GET_SIZE(list);
    struct nf_array in[8];
    Py_buffer bufs[8], ob;
    Py_ssize_t got = 0;
    PyObject * ret = NULL;
    if (nf_py_inputs(self, list, in, bufs, &got) != 0) goto out;
    nf_err err = {0};
    int ndim;
    int64_t shp[NF_ARRAY_MAX_DIMS];
    if (nf_model_output_shape(self->m, in, (int) n, &ndim, shp, &err) != NF_OK) {
        nf_py_raise(&err);
        goto out;
    }
    int64_t numel = 1;
    for (int k = 0; k < ndim; k++) numel *= shp[k];
    if (nf_py_buffer(out, &ob, "f", 1, "out") != 0) goto out;
    if ((int64_t) ob.len != numel * 4) {
        PyErr_Format(PyExc_ValueError, "forward: out holds %zd floats, the output has %lld", ob.len / 4,
                     (long long) numel);
        PyBuffer_Release(&ob);
        goto out;
    }
    int rc;
    self->busy = 1;
    Py_BEGIN_ALLOW_THREADS rc = nf_model_forward(self->m, in, (int) n, (float *) ob.buf, &err);
    Py_END_ALLOW_THREADS self->busy = 0;
    PyBuffer_Release(&ob);
    if (rc != NF_OK) {
        nf_py_raise(&err);
        goto out;
    }
    ret = nf_py_shape_tuple(ndim, shp);
out:
    for (Py_ssize_t i = 0; i < got; i++) PyBuffer_Release(&bufs[i]);
    return ret;
}

/* output_shape(inputs as for forward): the output's shape, or the model's refusal of the inputs */
static PyObject * NfModel_output_shape(NfModel * self, PyObject * args) {
    PyObject * list;
    if (!PyArg_ParseTuple(args, "O!", &PyList_Type, &list)) return NULL;
    if (!self->m) return PyErr_Format(PyExc_RuntimeError, "the model is not loaded");
    struct nf_array in[8];
    Py_buffer bufs[8];
    Py_ssize_t got = 0;
    PyObject * ret = NULL;
    if (nf_py_inputs(self, list, in, bufs, &got) == 0) {
        nf_err err = {0};
        int ndim;
        int64_t shp[NF_ARRAY_MAX_DIMS];
        if (nf_model_output_shape(self->m, in, (int) got, &ndim, shp, &err) != NF_OK)
            nf_py_raise(&err);
        else
            ret = nf_py_shape_tuple(ndim, shp);
    }
    for (Py_ssize_t i = 0; i < got; i++) PyBuffer_Release(&bufs[i]);
    return ret;
}

static PyObject * NfModel_inputs(NfModel * self, PyObject * unused) {
    if (!self->m) return PyErr_Format(PyExc_RuntimeError, "the model is not loaded");
    PyObject * l = PyList_New(0);
    for (int i = 0; l && i < nf_model_n_inputs(self->m); i++) {
        const struct nf_input_desc * d = nf_model_input(self->m, i);
        PyObject * t = Py_BuildValue("{s:s,s:s,s:i,s:s,s:L}", "name", d->name, "dtype",
                                     d->dtype == NF_ARRAY_I64 ? "int64" : "float32", "ndim", d->ndim, "dims", d->dims,
                                     "n_classes", (long long) d->n_classes);
        if (!t || PyList_Append(l, t) != 0) {
            Py_XDECREF(t);
            Py_DECREF(l);
            return NULL;
        }
        Py_DECREF(t);
    }
    return l;
}

static PyObject * NfModel_config(NfModel * self, PyObject * unused) {
    if (!self->m) return PyErr_Format(PyExc_RuntimeError, "the model is not loaded");
    PyObject * d = PyDict_New();
    struct nf_config_item it;
    for (int i = 0; d && nf_model_config_item(self->m, i, &it); i++) {
        PyObject * v = it.str ? PyUnicode_FromString(it.str) : PyLong_FromLongLong(it.num);
        if (!v || PyDict_SetItemString(d, it.key, v) != 0) {
            Py_XDECREF(v);
            Py_DECREF(d);
            return NULL;
        }
        Py_DECREF(v);
    }
    return d;
}

static PyObject * NfModel_info(NfModel * self, PyObject * unused) {
    if (!self->m) return PyErr_Format(PyExc_RuntimeError, "the model is not loaded");
    struct nf_placement pl;
    nf_model_get_placement(self->m, &pl);
    return Py_BuildValue("{s:s,s:L,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s}", "type", nf_model_type(self->m), "n_params",
                         (long long) nf_model_n_params(self->m), "output", nf_model_output_name(self->m), "device",
                         nf_backend_name(self->be), "device_description", nf_backend_description(self->be), "precision",
                         nf_precision_name(nf_backend_precision(self->be)), "weights", pl.weights, "inputs_placement",
                         pl.inputs, "outputs_placement", pl.outputs, "ops_placement", pl.ops);
}

static PyObject * NfModel_trace_reset(NfModel * self, PyObject * args) {
    int mode = NF_TRACE_TOTALS;
    if (!PyArg_ParseTuple(args, "|i", &mode)) return NULL;
    if (!nf_py_ready(self)) return NULL;
    nf_trace_reset(self->be, mode);
    Py_RETURN_NONE;
}

static PyObject * NfModel_trace_totals(NfModel * self, PyObject * unused) {
    if (!self->m) return PyErr_Format(PyExc_RuntimeError, "the model is not loaded");
    struct nf_trace_totals t;
    nf_trace_totals_get(self->be, &t);
    return Py_BuildValue("{s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:d,s:d}", "ops", (long long) t.ops, "ops_off_device",
                         (long long) t.ops_off_device, "h2d_copies", (long long) t.h2d_copies, "d2h_copies",
                         (long long) t.d2h_copies, "h2d_bytes", (long long) t.h2d_bytes, "d2h_bytes",
                         (long long) t.d2h_bytes, "allocs", (long long) t.allocs, "alloc_bytes",
                         (long long) t.alloc_bytes, "records_dropped", (long long) t.records_dropped, "flops", t.flops,
                         "op_ms", t.op_ms);
}

static PyObject * NfModel_trace_json(NfModel * self, PyObject * unused) {
    if (!self->m) return PyErr_Format(PyExc_RuntimeError, "the model is not loaded");
    nf_err err = {0};
    char * s = nf_trace_json(self->be, &err);
    if (!s) return nf_py_raise(&err);
    PyObject * r = PyUnicode_FromString(s);
    nf_free(s);
    return r;
}

static PyObject * NfModel_set_option(NfModel * self, PyObject * args) {
    const char * key;
    long long v;
    if (!PyArg_ParseTuple(args, "sL", &key, &v)) return NULL;
    if (!nf_py_ready(self)) return NULL;
    nf_err err = {0};
    if (nf_model_set_option(self->m, key, v, &err) != NF_OK) return nf_py_raise(&err);
    Py_RETURN_NONE;
}

static PyObject * NfModel_release_workspace(NfModel * self, PyObject * unused) {
    if (!nf_py_ready(self)) return NULL;
    nf_model_release_workspace(self->m);
    Py_RETURN_NONE;
}

static PyMethodDef NfModel_methods[] = {
    {"forward", (PyCFunction) NfModel_forward, METH_VARARGS,
     "forward([(name, buffer, shape), ...], out): one forward into out (float32); returns the output shape"},
    {"output_shape", (PyCFunction) NfModel_output_shape, METH_VARARGS,
     "output_shape([(name, buffer, shape), ...]): the output's shape for these inputs"},
    {"inputs", (PyCFunction) NfModel_inputs, METH_NOARGS, "the model's inputs"},
    {"config", (PyCFunction) NfModel_config, METH_NOARGS, "the configuration (config.json items)"},
    {"info", (PyCFunction) NfModel_info, METH_NOARGS, "type, parameters, device, placement of the last forward"},
    {"trace_reset", (PyCFunction) NfModel_trace_reset, METH_VARARGS, "trace_reset(mode=0): clear the op trace"},
    {"trace_totals", (PyCFunction) NfModel_trace_totals, METH_NOARGS, "the op trace's totals since the last reset"},
    {"trace_json", (PyCFunction) NfModel_trace_json, METH_NOARGS, "the op trace as JSON text"},
    {"set_option", (PyCFunction) NfModel_set_option, METH_VARARGS, "set_option(key, value)"},
    {"release_workspace", (PyCFunction) NfModel_release_workspace, METH_NOARGS, "free the forward's workspace"},
    {NULL, NULL, 0, NULL}};

PyTypeObject NfModelType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "nofall._nofall.Model",
    .tp_basicsize = sizeof(NfModel),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Model(model_dir, device='cpu', precision='exact'): a checkpoint loaded once onto one device",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc) NfModel_init,
    .tp_dealloc = (destructor) NfModel_dealloc,
    .tp_methods = NfModel_methods,
};

/* ---- tables ------------------------------------------------------------------ */
/* columns: a list of (name, kind, data[, missing]): kind "int64" / "float64"
 * (data: a float64 buffer, NaN = missing), "int64" / "uint64" (data: an int64 /
 * uint64 buffer: exact integers), "text" (data: a list of str or
 * None) or "bool" (data: a list of bool or None) */
/* a column given as a list of n_rows items (what: their type, for the
 * message): a buffer of n_rows elements of elem bytes, or NULL with the
 * exception set */
static void * nf_py_list_buffer(PyObject * data, int64_t n_rows, const char * name, const char * what, size_t elem) {
    if (!PyList_Check(data) || PyList_GET_SIZE(data) != n_rows) {
        PyErr_Format(PyExc_ValueError, "column '%s': a list of %lld %s or None", name, (long long) n_rows, what);
        return NULL;
    }
    void * v = PyMem_Malloc((size_t) (n_rows ? n_rows : 1) * elem);
    if (!v) PyErr_NoMemory();
    return v;
}

static nf_table * nf_py_table(const char * tname, int64_t n_rows, PyObject * cols) {
    if (!PyList_Check(cols)) {
        PyErr_SetString(PyExc_TypeError, "columns: a list of (name, kind, data)");
        return NULL;
    }
    nf_err err = {0};
    nf_table * t = NULL;
    if (nf_table_new(tname, n_rows, &t, &err) != NF_OK) {
        nf_py_raise(&err);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(cols); i++) {
        const char *name, *kind;
        PyObject * data;
        if (!PyArg_ParseTuple(PyList_GET_ITEM(cols, i), "ssO", &name, &kind, &data)) goto fail;
        int rc;
        if (strcmp(kind, "text") == 0) {
            const char ** v = nf_py_list_buffer(data, n_rows, name, "str", sizeof(char *));
            if (!v) goto fail;
            int bad = 0;
            for (int64_t r = 0; r < n_rows && !bad; r++) {
                PyObject * s = PyList_GET_ITEM(data, r);
                if (s == Py_None)
                    v[r] = NULL;
                else if (PyUnicode_Check(s)) {
                    if (!(v[r] = PyUnicode_AsUTF8(s))) bad = 1;
                } else {
                    PyErr_Format(PyExc_TypeError, "column '%s', row %lld: not a str", name, (long long) r + 1);
                    bad = 1;
                }
            }
            rc = bad ? NF_OK : nf_table_add_text(t, name, v, NULL, &err);
            PyMem_Free(v);
            if (bad) goto fail;
        } else if (strcmp(kind, "bool") == 0) {
            signed char * v = nf_py_list_buffer(data, n_rows, name, "bool", 1);
            if (!v) goto fail;
            int bad = 0;
            for (int64_t r = 0; r < n_rows && !bad; r++) {
                PyObject * s = PyList_GET_ITEM(data, r);
                int tv = s == Py_None ? -1 : PyObject_IsTrue(s);
                if (s != Py_None && tv < 0) bad = 1;
                v[r] = (signed char) tv;
            }
            rc = bad ? NF_OK : nf_table_add_bool(t, name, v, &err);
            PyMem_Free(v);
            if (bad) goto fail;
        } else if ((strcmp(kind, "int64") == 0 || strcmp(kind, "uint64") == 0) && PyObject_CheckBuffer(data) &&
                   nf_py_int_buffer(data)) { /* exact integers: an int64 / uint64 buffer */
            const int u = kind[0] == 'u';
            Py_buffer b;
            if (nf_py_buffer(data, &b, u ? "Q" : "q", 0, name) != 0) goto fail;
            if (b.len != (Py_ssize_t) (n_rows * 8)) {
                PyBuffer_Release(&b);
                PyErr_Format(PyExc_ValueError, "column '%s': %zd values, the table has %lld rows", name, b.len / 8,
                             (long long) n_rows);
                goto fail;
            }
            rc = nf_table_add_int(t, name, b.buf, u, &err);
            PyBuffer_Release(&b);
        } else if (strcmp(kind, "int64") == 0 || strcmp(kind, "float64") == 0) {
            Py_buffer b;
            if (nf_py_buffer(data, &b, "d", 0, name) != 0) goto fail;
            if (b.len != (Py_ssize_t) (n_rows * 8)) {
                PyBuffer_Release(&b);
                PyErr_Format(PyExc_ValueError, "column '%s': %zd values, the table has %lld rows", name, b.len / 8,
                             (long long) n_rows);
                goto fail;
            }
            rc = nf_table_add_numeric(t, name, (const double *) b.buf, kind[0] == 'i', &err);
            PyBuffer_Release(&b);
        } else {
            PyErr_Format(PyExc_ValueError, "column '%s': kind '%s' (int64, float64, bool or text)", name, kind);
            goto fail;
        }
        if (rc != NF_OK) {
            nf_py_raise(&err);
            goto fail;
        }
    }
    return t;
fail:
    nf_table_free(t);
    return NULL;
}

/* ---- Predictor ----------------------------------------------------------------- */
typedef struct {
    PyObject_HEAD nf_predictor * p;
} NfPredictor;

static void NfPredictor_dealloc(NfPredictor * self) {
    nf_predictor_free(self->p);
    Py_TYPE(self)->tp_free((PyObject *) self);
}

/* Predictor(columns, n_rows, target, task=0, n_estimators=1, seed=0, mirror=True,
 *           mirror_signs=None: (columns, [[+-1, ...], ...], regression_mirror or None)) */
static int NfPredictor_init(NfPredictor * self, PyObject * args, PyObject * kw) {
    static char * kwl[] = {"columns",      "n_rows", "target",     "task", "n_estimators", "seed", "mirror",
                           "mirror_signs", "name",   "model_type", NULL};
    PyObject *cols, *ms = Py_None;
    long long n_rows, n_est = 0;
    unsigned long long seed = 0;
    const char *target, *name = "train", *model_type = NULL;
    int task = 0, mirror = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OLs|iLKpOsz", kwl, &cols, &n_rows, &target, &task, &n_est, &seed,
                                     &mirror, &ms, &name, &model_type))
        return -1;
    nf_table * t = nf_py_table(name, n_rows, cols);
    if (!t) return -1;
    struct nf_mirror_spec spec;
    memset(&spec, 0, sizeof(spec));
    const char ** names = NULL;
    int *signs = NULL, *regm = NULL, ok = 1;
    if (ms != Py_None) {
        PyObject *mc, *msg, *mr;
        ok = PyArg_ParseTuple(ms, "O!O!O", &PyList_Type, &mc, &PyList_Type, &msg, &mr);
        const Py_ssize_t F = ok ? PyList_GET_SIZE(mc) : 0, E = ok ? PyList_GET_SIZE(msg) : 0;
        if (ok) {
            names = PyMem_Calloc((size_t) F + 1, sizeof(char *));
            signs = PyMem_Calloc((size_t) (E * F) + 1, sizeof(int));
            regm = PyMem_Calloc((size_t) E + 1, sizeof(int));
            ok = names && signs && regm;
            if (!ok) PyErr_NoMemory();
        }
        for (Py_ssize_t j = 0; ok && j < F; j++) ok = (names[j] = PyUnicode_AsUTF8(PyList_GET_ITEM(mc, j))) != NULL;
        for (Py_ssize_t e = 0; ok && e < E; e++) {
            PyObject * row = PyList_GET_ITEM(msg, e);
            if (!PyList_Check(row) || PyList_GET_SIZE(row) != F) {
                PyErr_Format(NfInputError, "mirror_signs[%zd]: not a list of %zd signs (one per kept column)", e, F);
                ok = 0;
                break;
            }
            for (Py_ssize_t j = 0; ok && j < F; j++) {
                signs[e * F + j] = (int) PyLong_AsLong(PyList_GET_ITEM(row, j));
                ok = !PyErr_Occurred();
            }
        }
        if (ok && mr != Py_None) {
            if (!PyList_Check(mr) || PyList_GET_SIZE(mr) != E) {
                PyErr_Format(NfInputError, "regression_mirror: not a list of %zd booleans", E);
                ok = 0;
            }
            for (Py_ssize_t e = 0; ok && e < E; e++) {
                regm[e] = PyObject_IsTrue(PyList_GET_ITEM(mr, e));
                ok = regm[e] >= 0;
            }
        }
        spec.source = "mirror_signs";
        spec.n_columns = (int) F;
        spec.columns = names;
        spec.n_estimators = E;
        spec.signs = signs;
        spec.regression_mirror = mr != Py_None ? regm : NULL;
    }
    int rc = NF_OK;
    nf_err err = {0};
    if (ok) {
        struct nf_predictor_opts o = {.task = task,
                                      .n_estimators = n_est,
                                      .seed = seed,
                                      .no_mirror = !mirror,
                                      .mirror = ms != Py_None ? &spec : NULL,
                                      .model_type = model_type};
        Py_BEGIN_ALLOW_THREADS rc = nf_predictor_fit(t, target, &o, &self->p, &err);
        Py_END_ALLOW_THREADS
    }
    PyMem_Free(names);
    PyMem_Free(signs);
    PyMem_Free(regm);
    nf_table_free(t);
    if (!ok) return -1;
    if (rc != NF_OK) {
        nf_py_raise(&err);
        return -1;
    }
    return 0;
}

/* predict(model, columns, n_rows, out (float64), logits (float32 or None)) */
static PyObject * NfPredictor_predict(NfPredictor * self, PyObject * args) {
    NfModel * m;
    PyObject *cols, *out, *lg;
    long long n_rows;
    if (!PyArg_ParseTuple(args, "O!OLOO", &NfModelType, &m, &cols, &n_rows, &out, &lg)) return NULL;
    if (!nf_py_ready(m)) return NULL;
    nf_table * t = nf_py_table("X", n_rows, cols);
    if (!t) return NULL;
    const int64_t K = nf_predictor_n_outputs(self->p), E = nf_predictor_n_estimators(self->p);
    Py_buffer ob, lb;
    int have_l = lg != Py_None;
    if (nf_py_buffer(out, &ob, "d", 1, "out") != 0) {
        nf_table_free(t);
        return NULL;
    }
    if (have_l && nf_py_buffer(lg, &lb, "f", 1, "logits") != 0) {
        PyBuffer_Release(&ob);
        nf_table_free(t);
        return NULL;
    }
    PyObject * ret = NULL;
    if (ob.len != (Py_ssize_t) (n_rows * K * 8) || (have_l && lb.len != (Py_ssize_t) (E * n_rows * K * 4))) {
        PyErr_SetString(PyExc_ValueError, "predict: out / logits of the wrong size");
    } else {
        nf_err err = {0};
        int rc;
        m->busy = 1;
        Py_BEGIN_ALLOW_THREADS rc = nf_predictor_predict(self->p, m->m, t, (double *) ob.buf,
                                                         have_l ? (float *) lb.buf : NULL, &err);
        Py_END_ALLOW_THREADS m->busy = 0;
        if (rc != NF_OK)
            nf_py_raise(&err);
        else
            ret = PyFloat_FromDouble(nf_predictor_forward_ms(self->p));
    }
    PyBuffer_Release(&ob);
    if (have_l) PyBuffer_Release(&lb);
    nf_table_free(t);
    return ret;
}

static PyObject * NfPredictor_check(NfPredictor * self, PyObject * args) {
    PyObject * cols;
    long long n_rows;
    if (!PyArg_ParseTuple(args, "OL", &cols, &n_rows)) return NULL;
    nf_table * t = nf_py_table("X", n_rows, cols);
    if (!t) return NULL;
    nf_err err = {0};
    const int rc = nf_predictor_check_table(self->p, t, &err);
    nf_table_free(t);
    if (rc != NF_OK) return nf_py_raise(&err);
    Py_RETURN_NONE;
}

/* everything the fit decided, as a dict (report.json's items) */
static PyObject * NfPredictor_report(NfPredictor * self, PyObject * unused) {
    const nf_predictor * p = self->p;
    const int cls = nf_predictor_task(p) == NF_PREDICT_CLASSIFICATION;
    const int F = nf_predictor_n_kept(p);
    const int64_t E = nf_predictor_n_estimators(p);
    PyObject *d = PyDict_New(), *kept = PyList_New(0), *dropped = PyList_New(0), *signs = PyList_New(0),
             *rm = PyList_New(0), *classes = PyList_New(0);
    if (!d || !kept || !dropped || !signs || !rm || !classes) goto fail;
    for (int j = 0; j < F + nf_predictor_n_columns(p); j++) {
        struct nf_column_info ci;
        nf_predictor_column(p, j < F ? nf_predictor_kept(p, j) : j - F, &ci);
        if (j >= F && !ci.dropped) continue;
        PyObject * c = Py_BuildValue("{s:s,s:s,s:s}", "name", ci.name, "type", ci.kind, "csv_type", ci.csv_type);
        if (!c) goto fail;
        PyObject * v = NULL;
        if (j >= F) {
            v = PyUnicode_FromString(ci.dropped);
            if (v) PyDict_SetItemString(c, "reason", v);
        } else {
            if (strcmp(ci.kind, "category") == 0) {
                v = PyList_New(0);
                for (int64_t k = 0; v && k < ci.n_categories; k++) {
                    PyObject * s = PyUnicode_FromString(ci.categories[k]);
                    if (s) PyList_Append(v, s);
                    Py_XDECREF(s);
                }
                if (v) PyDict_SetItemString(c, "categories", v);
            } else if (strcmp(ci.kind, "bool") == 0) {
                v = ci.true_str ? PyUnicode_FromString(ci.true_str) : PyFloat_FromDouble(ci.true_num);
                if (v) PyDict_SetItemString(c, "true_value", v);
            }
            Py_XDECREF(v);
            v = PyFloat_FromDouble(isfinite(ci.mean) ? ci.mean : 0);
            if (v) PyDict_SetItemString(c, "mean", v);
        }
        Py_XDECREF(v);
        PyList_Append(j < F ? kept : dropped, c);
        Py_DECREF(c);
    }
    for (int64_t e = 0; e < E; e++) {
        const int * s = nf_predictor_mirror_signs(p, e);
        if (!s) continue; /* TabSTAR: no mirror */
        PyObject * row = PyList_New(F);
        if (!row) goto fail;
        for (int j = 0; j < F; j++) PyList_SET_ITEM(row, j, PyLong_FromLong(s[j]));
        PyList_Append(signs, row);
        Py_DECREF(row);
        if (!cls) {
            PyObject * b = PyBool_FromLong(nf_predictor_regression_mirror(p, e));
            PyList_Append(rm, b);
            Py_DECREF(b);
        }
    }
    for (int64_t k = 0; k < nf_predictor_n_classes(p); k++) {
        PyObject * s = PyUnicode_FromString(nf_predictor_class_name(p, k));
        if (s) PyList_Append(classes, s);
        Py_XDECREF(s);
    }
    double y0, y1;
    nf_predictor_target_range(p, &y0, &y1);
    PyObject * misc = Py_BuildValue("{s:s,s:s,s:s,s:L,s:L,s:L,s:d,s:d}", "model_type", nf_predictor_model_type(p),
                                    "task", cls ? "classification" : "regression", "target", nf_predictor_target(p),
                                    "n_train", (long long) nf_predictor_n_train(p), "n_estimators", (long long) E,
                                    "n_outputs", (long long) nf_predictor_n_outputs(p), "y_min", y0, "y_max", y1);
    if (!misc || PyDict_Update(d, misc) != 0) {
        Py_XDECREF(misc);
        goto fail;
    }
    Py_DECREF(misc);
    PyDict_SetItemString(d, "columns_kept", kept);
    PyDict_SetItemString(d, "columns_dropped", dropped);
    PyDict_SetItemString(d, "mirror_signs", signs);
    PyDict_SetItemString(d, "regression_mirror", rm);
    PyDict_SetItemString(d, "classes", classes);
    Py_DECREF(kept);
    Py_DECREF(dropped);
    Py_DECREF(signs);
    Py_DECREF(rm);
    Py_DECREF(classes);
    return d;
fail:
    Py_XDECREF(d);
    Py_XDECREF(kept);
    Py_XDECREF(dropped);
    Py_XDECREF(signs);
    Py_XDECREF(rm);
    Py_XDECREF(classes);
    return PyErr_Occurred() ? NULL : PyErr_NoMemory();
}

/* check_model(model, name): can the model predict for this predictor (its type, its task) */
static PyObject * NfPredictor_check_model(NfPredictor * self, PyObject * args) {
    NfModel * m;
    const char * name;
    if (!PyArg_ParseTuple(args, "O!s", &NfModelType, &m, &name)) return NULL;
    if (!nf_py_ready(m)) return NULL;
    nf_err err = {0};
    if (nf_predictor_check_model(self->p, m->m, name, &err) != NF_OK) return nf_py_raise(&err);
    Py_RETURN_NONE;
}

/* report_json(model, columns, n_rows): report.json's items of the last prediction on that table, as JSON text */
static PyObject * NfPredictor_report_json(NfPredictor * self, PyObject * args) {
    NfModel * m;
    PyObject * cols;
    long long n_rows;
    if (!PyArg_ParseTuple(args, "O!OL", &NfModelType, &m, &cols, &n_rows)) return NULL;
    nf_table * t = nf_py_table("X", n_rows, cols);
    if (!t) return NULL;
    nf_err err = {0};
    char * js = nf_predictor_report_json(self->p, m->m, t, &err);
    nf_table_free(t);
    if (!js) return nf_py_raise(&err);
    PyObject * r = PyUnicode_FromString(js);
    nf_free(js);
    return r;
}

/* finetune(model, val_columns or None, val_n_rows, steps, lr, weight_decay, warmup_steps, patience, seed,
 * keep_last): nf_predictor_finetune (the model's weights in place); {steps_run, best_step, stopped_at,
 * best_val_loss} */
static PyObject * NfPredictor_finetune(NfPredictor * self, PyObject * args) {
    NfModel * m;
    PyObject * vcols;
    long long vn, steps, warmup, patience;
    unsigned long long seed;
    double lr, wd;
    int keep_last;
    if (!PyArg_ParseTuple(args, "O!OLLddLLKp", &NfModelType, &m, &vcols, &vn, &steps, &lr, &wd, &warmup, &patience,
                          &seed, &keep_last))
        return NULL;
    if (!nf_py_ready(m)) return NULL;
    nf_table * v = NULL;
    if (vcols != Py_None && !(v = nf_py_table("the validation data", vn, vcols))) return NULL;
    struct nf_finetune_opts o;
    nf_finetune_opts_default(&o);
    o.steps = steps;
    o.lr = lr;
    o.weight_decay = wd;
    o.warmup_steps = warmup;
    o.patience = patience;
    o.seed = seed;
    o.keep_last = keep_last;
    struct nf_finetune_result res;
    nf_err err = {0};
    int rc;
    m->busy = 1;
    Py_BEGIN_ALLOW_THREADS rc = nf_predictor_finetune(self->p, m->m, v, &o, &res, &err);
    Py_END_ALLOW_THREADS m->busy = 0;
    nf_table_free(v);
    if (rc != NF_OK) return nf_py_raise(&err);
    return Py_BuildValue("{s:L,s:L,s:L,s:d}", "steps_run", (long long) res.steps_run, "best_step",
                         (long long) res.best_step, "stopped_at", (long long) res.stopped_at, "best_val_loss",
                         res.best_val_loss);
}

/* merge_adapter(model, dir): TabSTAR's PEFT LoRA adapter merged into the model's weights (once per model) */
static PyObject * NfPredictor_merge_adapter(NfPredictor * self, PyObject * args) {
    NfModel * m;
    const char * dir;
    if (!PyArg_ParseTuple(args, "O!s", &NfModelType, &m, &dir)) return NULL;
    if (!nf_py_ready(m)) return NULL;
    nf_err err = {0};
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = nf_predictor_merge_adapter(self->p, m->m, dir, &err);
    Py_END_ALLOW_THREADS if (rc != NF_OK) return nf_py_raise(&err);
    Py_RETURN_NONE;
}

static PyMethodDef NfPredictor_methods[] = {
    {"merge_adapter", (PyCFunction) NfPredictor_merge_adapter, METH_VARARGS,
     "merge_adapter(model, dir): TabSTAR's LoRA adapter merged into the model (once per loaded model)"},
    {"finetune", (PyCFunction) NfPredictor_finetune, METH_VARARGS,
     "finetune(model, val_columns, val_n_rows, steps, lr, weight_decay, warmup_steps, patience, seed, keep_last)"},
    {"check_model", (PyCFunction) NfPredictor_check_model, METH_VARARGS,
     "check_model(model, name): the model's type and task fit the predictor"},
    {"report_json", (PyCFunction) NfPredictor_report_json, METH_VARARGS,
     "report_json(model, columns, n_rows): report.json's items (JSON text) after a prediction on that table"},
    {"predict", (PyCFunction) NfPredictor_predict, METH_VARARGS,
     "predict(model, columns, n_rows, out, logits): probabilities / predictions into out; returns forward ms"},
    {"check", (PyCFunction) NfPredictor_check, METH_VARARGS, "check(columns, n_rows): the test table's checks"},
    {"report", (PyCFunction) NfPredictor_report, METH_NOARGS, "what the fit decided (as report.json)"},
    {NULL, NULL, 0, NULL}};

static PyTypeObject NfPredictorType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "nofall._nofall.Predictor",
    .tp_basicsize = sizeof(NfPredictor),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Predictor(columns, n_rows, target, task, n_estimators, seed, mirror, mirror_signs, name, "
              "model_type): the fitted preprocessing (Mitra's or TabSTAR's) and support set",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc) NfPredictor_init,
    .tp_dealloc = (destructor) NfPredictor_dealloc,
    .tp_methods = NfPredictor_methods,
};

/* ---- module functions ----------------------------------------------------------- */
static PyObject * nf_py_gen_weights(PyObject * mod, PyObject * args, PyObject * kw) {
    static char * kwl[] = {"model_type", "out_dir", "seed", "options", NULL};
    const char *type, *dir;
    unsigned long long seed = 0;
    PyObject * opts = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "ss|KO!", kwl, &type, &dir, &seed, &PyDict_Type, &opts)) return NULL;
    const Py_ssize_t n = opts ? PyDict_Size(opts) : 0;
    const char * keys[32];
    const char * vals[32];
    PyObject * strs[32];
    if (n > 32) return PyErr_Format(PyExc_ValueError, "gen_weights: at most 32 options");
    Py_ssize_t pos = 0, i = 0;
    PyObject *k, *v;
    while (opts && PyDict_Next(opts, &pos, &k, &v)) {
        strs[i] = PyObject_Str(v);
        if (!strs[i] || !(keys[i] = PyUnicode_AsUTF8(k)) || !(vals[i] = PyUnicode_AsUTF8(strs[i]))) {
            for (Py_ssize_t j = 0; j <= i; j++) Py_XDECREF(strs[j]);
            return NULL;
        }
        i++;
    }
    nf_err err = {0};
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = nf_model_gen_weights(type, dir, seed, (int) n, keys, vals, &err);
    Py_END_ALLOW_THREADS for (Py_ssize_t j = 0; j < i; j++) Py_DECREF(strs[j]);
    if (rc != NF_OK) return nf_py_raise(&err);
    Py_RETURN_NONE;
}

static PyObject * nf_py_devices(PyObject * mod, PyObject * unused) {
    nf_err err = {0};
    char * s = nf_devices_describe(&err);
    if (!s) return nf_py_raise(&err);
    PyObject * r = PyUnicode_FromString(s);
    nf_free(s);
    return r;
}

static PyObject * nf_py_read_mirror(PyObject * mod, PyObject * args) {
    const char * path;
    if (!PyArg_ParseTuple(args, "s", &path)) return NULL;
    nf_err err = {0};
    struct nf_mirror_spec * s = NULL;
    if (nf_mirror_spec_read(path, &s, &err) != NF_OK) return nf_py_raise(&err);
    PyObject *cols = PyList_New(s->n_columns), *signs = PyList_New(s->n_estimators), *rm = Py_None;
    for (int j = 0; cols && j < s->n_columns; j++) PyList_SET_ITEM(cols, j, PyUnicode_FromString(s->columns[j]));
    for (int64_t e = 0; signs && e < s->n_estimators; e++) {
        PyObject * row = PyList_New(s->n_columns);
        for (int j = 0; row && j < s->n_columns; j++)
            PyList_SET_ITEM(row, j, PyLong_FromLong(s->signs[e * s->n_columns + j]));
        PyList_SET_ITEM(signs, e, row);
    }
    if (s->regression_mirror) {
        rm = PyList_New(s->n_estimators);
        for (int64_t e = 0; rm && e < s->n_estimators; e++)
            PyList_SET_ITEM(rm, e, PyBool_FromLong(s->regression_mirror[e]));
    } else
        Py_INCREF(rm);
    nf_mirror_spec_free(s);
    return Py_BuildValue("(NNN)", cols, signs, rm);
}

static PyMethodDef nf_py_methods[] = {
    {"gen_weights", (PyCFunction) (void (*)(void)) nf_py_gen_weights, METH_VARARGS | METH_KEYWORDS,
     "gen_weights(model_type, out_dir, seed=0, options=None): a synthetic checkpoint"},
    {"devices", nf_py_devices, METH_NOARGS, "the compiled-in backends and their devices, as text"},
    {"read_mirror_signs", nf_py_read_mirror, METH_VARARGS,
     "read_mirror_signs(path): (columns, signs, regression_mirror or None) from a report.json-like file"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef nf_py_module = {
    PyModuleDef_HEAD_INIT, "_nofall", "libnofall bindings", -1, nf_py_methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__nofall(void) {
    if (PyType_Ready(&NfModelType) < 0 || PyType_Ready(&NfPredictorType) < 0) return NULL;
    PyObject * m = PyModule_Create(&nf_py_module);
    if (!m) return NULL;
    NfError = PyErr_NewExceptionWithDoc("nofall.NofallError", "an error of libnofall (code, code_name, message)",
                                        PyExc_RuntimeError, NULL);
    PyObject * bases = PyTuple_Pack(2, NfError, PyExc_ValueError);
    NfInputError = bases ? PyErr_NewExceptionWithDoc("nofall.NofallInputError",
                                                     "bad input to libnofall (a table, an array, an argument)", bases,
                                                     NULL)
                         : NULL;
    Py_XDECREF(bases);
    if (!NfError || !NfInputError) return NULL;
    Py_INCREF(&NfModelType);
    Py_INCREF(&NfPredictorType);
    PyModule_AddObject(m, "Model", (PyObject *) &NfModelType);
    PyModule_AddObject(m, "Predictor", (PyObject *) &NfPredictorType);
    Py_INCREF(NfError);
    Py_INCREF(NfInputError);
    PyModule_AddObject(m, "NofallError", NfError);
    PyModule_AddObject(m, "NofallInputError", NfInputError);
    PyModule_AddStringConstant(m, "__version__", nf_version()); /* as `nofall --version` */
    if (PyModule_AddFunctions(m, nf_py_genomics_methods) != 0) return NULL;
    return m;
}
