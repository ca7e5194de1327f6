/* _nofall.c -- the CPython extension of the nofall package: libnofall's
 * models (load once, forwards on arrays, trace and placement) and its Mitra
 * predictor on tables (include/nofall-tabular.h; _nofall_predictor.c). Arrays come in and go out
 * through the buffer protocol (numpy arrays without copies); the GIL is
 * released during forwards; a C error is raised as nofall.NofallError (or
 * NofallInputError, also a ValueError, for bad input) carrying the message
 * and the result code. Python-side conveniences live in nofall/_estimators.py.
 * SpTransformer's sequence inputs and annotate: _nofall_genomics.c. */
#include "_nofall.h"
#include "nofall-tabular.h"

#include <math.h>
#include <string.h>

static PyObject * NfError; /* nofall.NofallError(RuntimeError) */
PyObject * NfInputError;   /* nofall.NofallInputError(NofallError, ValueError) */

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
int nf_py_int_buffer(PyObject * o) {
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
    else if (strcmp(precision, "bf16-autocast") == 0)
        prec = NF_PRECISION_BF16_AUTOCAST;
    else {
        PyErr_Format(PyExc_ValueError, "precision: 'exact', 'tf32' or 'bf16-autocast', not '%s'", precision);
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

int nf_py_ready(NfModel * self) {
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
