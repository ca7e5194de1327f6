/*
 * cublas-dl.h -- cuBLAS, loaded when a cuda device is first opened.
 *
 * libcublas (with libcublasLt, over 600 MB) costs about 0.1 s of loading and
 * relocation in every process that links it, so every `nofall` command and
 * every program linking libnofall paid it, a cuda device or not. The backend
 * instead dlopen()s it on the first nf_backend_open("cuda:N") and calls
 * through this table; the call sites keep cuBLAS's own names (the macros
 * below). Included by cuda-impl.h after <cublas_v2.h>, for the real CUDA
 * build only (the host emulator defines these functions itself).
 */
#ifndef NF_CUBLAS_DL_H
#define NF_CUBLAS_DL_H

#include <cublas_v2.h>

/* every cuBLAS function the backend calls, by its exported (v2) name */
#define NF_CUBLAS_FNS(X)          \
    X(cublasCreate_v2)            \
    X(cublasDestroy_v2)           \
    X(cublasSetStream_v2)         \
    X(cublasGetVersion_v2)        \
    X(cublasSetMathMode)          \
    X(cublasSetAtomicsMode)       \
    X(cublasGemmEx)               \
    X(cublasGemmStridedBatchedEx) \
    X(cublasGetStatusName)        \
    X(cublasGetStatusString)

struct nf_cublas_dl {
#define NF_CUBLAS_PTR(f) __typeof__(f) * f;
    NF_CUBLAS_FNS(NF_CUBLAS_PTR)
#undef NF_CUBLAS_PTR
};
extern struct nf_cublas_dl nf__cublas_dl;

/* loads libcublas.so.<major of the headers> once (thread-safe); name: the
 * device, for the message */
int nf__cublas_load(const char * name, nf_err * err);

#ifndef NF_CUBLAS_DL_NO_MACROS /* cublas-dl.c names the table's members */
#undef cublasCreate
#undef cublasDestroy
#undef cublasSetStream
#undef cublasGetVersion
#define cublasCreate               nf__cublas_dl.cublasCreate_v2
#define cublasDestroy              nf__cublas_dl.cublasDestroy_v2
#define cublasSetStream            nf__cublas_dl.cublasSetStream_v2
#define cublasGetVersion           nf__cublas_dl.cublasGetVersion_v2
#define cublasSetMathMode          nf__cublas_dl.cublasSetMathMode
#define cublasSetAtomicsMode       nf__cublas_dl.cublasSetAtomicsMode
#define cublasGemmEx               nf__cublas_dl.cublasGemmEx
#define cublasGemmStridedBatchedEx nf__cublas_dl.cublasGemmStridedBatchedEx
#define cublasGetStatusName        nf__cublas_dl.cublasGetStatusName
#define cublasGetStatusString      nf__cublas_dl.cublasGetStatusString
#endif

#endif
