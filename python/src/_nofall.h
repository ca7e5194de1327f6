/* _nofall.h -- what the extension's source files share: _nofall.c (models,
 * errors, the module), _nofall_predictor.c (tables, the predictor) and
 * _nofall_genomics.c (SpTransformer's sequence inputs and annotate,
 * include/nofall-genomics.h). */
#ifndef NOFALL_PY_H
#define NOFALL_PY_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "nofall.h"

/* nofall._nofall.Model: a model loaded once on its backend; busy while a forward runs */
typedef struct {
    PyObject_HEAD nf_backend * be;
    nf_model * m;
    int busy;
} NfModel;
extern PyTypeObject NfModelType;

/* err raised as NofallError / NofallInputError; returns NULL */
PyObject * nf_py_raise(const nf_err * err);
/* a C-contiguous buffer of format fmt ("f", "d", "q", "b", ...); -1 with the exception set */
int nf_py_buffer(PyObject * o, Py_buffer * b, const char * fmt, int writable, const char * what);
/* nofall.NofallInputError (a ValueError) */
extern PyObject * NfInputError;
/* does o expose a buffer of 8-byte integers (int64 / uint64)? */
int nf_py_int_buffer(PyObject * o);
/* the model loaded and not running a forward (else 0, the exception set) */
int nf_py_ready(NfModel * self);
/* nofall._nofall.Predictor (_nofall_predictor.c) */
extern PyTypeObject NfPredictorType;
/* the module functions of _nofall_genomics.c */
extern PyMethodDef nf_py_genomics_methods[];

#endif
