/* _nofall_predictor.c -- the table predictor (nofall-tabular.h) for Python:
 * tables from column lists, nofall._nofall.Predictor (fit, predict, report,
 * fine-tune, adapters). Shares the Model type and the errors with _nofall.c. */
#include "_nofall.h"
#include "nofall-tabular.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- tables ------------------------------------------------------------------ */
/* columns: a list of (name, kind, data[, type]): kind "int64" / "float64"
 * (data: a float64 buffer, NaN = missing), "int64" / "uint64" (data: an int64 /
 * uint64 buffer: exact integers), "text" (data: a list of str or
 * None) or "bool" (data: a list of bool or None); type (None or absent: none)
 * a column type (nf_table_set_type: "category", "numeric", "text", "datetime") */
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
        const char *name, *kind, *type = NULL;
        PyObject * data;
        if (!PyArg_ParseTuple(PyList_GET_ITEM(cols, i), "ssO|z", &name, &kind, &data, &type)) goto fail;
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
        /* a type the user gave (column_types, a pandas category): nofall-tabular.h nf_table_set_type */
        if (rc == NF_OK && type) rc = nf_table_set_type(t, name, type, "column_types", &err);
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

/* tabstar_fit(model, model_dir, columns, n_rows, max_epochs, patience, seed, no_average[, val_columns,
 * val_n_rows[, dropout]]): upstream TabSTAR's fit on the training table (the predictor's own, as columns), on
 * the validation table when given (upstream's x_val / y_val; None: upstream's split), with nofall's own
 * dropout p when given: nf_predictor_tabstar_fit, the model's weights in place and the predictor's verbalizer
 * the train part's; {epochs, best_epoch, epochs_averaged, val_loss, metric, stopped_at, n_train, n_val,
 * validation} */
static PyObject * NfPredictor_tabstar_fit(NfPredictor * self, PyObject * args) {
    NfModel * m;
    const char * dir;
    PyObject *cols, *vcols = Py_None;
    long long n_rows, max_epochs, patience, vn = 0;
    unsigned long long seed;
    int no_average;
    double dropout = 0.0;
    if (!PyArg_ParseTuple(args, "O!sOLLLKp|OLd", &NfModelType, &m, &dir, &cols, &n_rows, &max_epochs, &patience, &seed,
                          &no_average, &vcols, &vn, &dropout))
        return NULL;
    if (!(dropout >= 0.0 && dropout < 1.0)) {
        PyErr_Format(PyExc_ValueError, "dropout %g: from 0 (off) to below 1", dropout);
        return NULL;
    }
    if (!nf_py_ready(m)) return NULL;
    if (max_epochs < 1 || max_epochs > 1000000 || patience < 1 || patience > 1000000) {
        PyErr_Format(PyExc_ValueError, "max_epochs %lld, patience %lld: each from 1 to 1000000", max_epochs, patience);
        return NULL;
    }
    nf_table *t = nf_py_table("the training data", n_rows, cols), *v = NULL;
    if (!t) return NULL;
    if (vcols != Py_None && !(v = nf_py_table("the validation data", vn, vcols))) {
        nf_table_free(t);
        return NULL;
    }
    struct nf_tabstar_fit_opts o;
    nf_tabstar_fit_opts_default(&o);
    o.max_epochs = (int) max_epochs;
    o.patience = (int) patience;
    o.seed = seed;
    o.no_average = no_average;
    o.val = v;
    o.dropout = (float) dropout;
    struct nf_tabstar_fit_result res;
    nf_err err = {0};
    int rc;
    m->busy = 1;
    Py_BEGIN_ALLOW_THREADS rc = nf_predictor_tabstar_fit(self->p, m->m, dir, t, &o, &res, &err);
    Py_END_ALLOW_THREADS m->busy = 0;
    nf_table_free(t);
    nf_table_free(v);
    if (rc != NF_OK) return nf_py_raise(&err);
    return Py_BuildValue("{s:i,s:i,s:i,s:d,s:d,s:i,s:L,s:L,s:s}", "epochs", res.epochs, "best_epoch", res.best_epoch,
                         "epochs_averaged", res.epochs_averaged, "val_loss", res.val_loss, "metric", res.metric,
                         "stopped_at", res.stopped_at, "n_train", (long long) res.n_train, "n_val",
                         (long long) res.n_val, "validation", res.val_table ? "table" : "internal split");
}

/* tabstar_use_fit(model_dir, columns, n_rows): nf_predictor_tabstar_use_fit -- on a directory nofall's fit
 * wrote, the verbalizer it was fine-tuned with (its verbalizer.json); True when taken */
static PyObject * NfPredictor_tabstar_use_fit(NfPredictor * self, PyObject * args) {
    const char * dir;
    PyObject * cols;
    long long n_rows;
    if (!PyArg_ParseTuple(args, "sOL", &dir, &cols, &n_rows)) return NULL;
    nf_table * t = nf_py_table("the training data", n_rows, cols);
    if (!t) return NULL;
    nf_err err = {0};
    int used = 0;
    const int rc = nf_predictor_tabstar_use_fit(self->p, dir, t, &used, &err);
    nf_table_free(t);
    if (rc != NF_OK) return nf_py_raise(&err);
    return PyBool_FromLong(used);
}

static PyMethodDef NfPredictor_methods[] = {
    {"tabstar_fit", (PyCFunction) NfPredictor_tabstar_fit, METH_VARARGS,
     "tabstar_fit(model, model_dir, columns, n_rows, max_epochs, patience, seed, no_average[, val_columns, "
     "val_n_rows]): upstream TabSTAR's fit"},
    {"tabstar_use_fit", (PyCFunction) NfPredictor_tabstar_use_fit, METH_VARARGS,
     "tabstar_use_fit(model_dir, columns, n_rows): a fine-tuned directory's verbalizer (verbalizer.json)"},
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

PyTypeObject NfPredictorType = {
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
