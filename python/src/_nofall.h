/* _nofall.h -- what the extension's two source files share: _nofall.c (models,
 * tables, errors) and _nofall_genomics.c (SpTransformer's sequence inputs and
 * annotate, include/nofall-genomics.h). */
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
/* the module functions of _nofall_genomics.c */
extern PyMethodDef nf_py_genomics_methods[];

#endif
