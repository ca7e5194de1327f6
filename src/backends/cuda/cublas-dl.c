/*
 * cublas-dl.c -- loads cuBLAS on the first cuda device (cublas-dl.h says why).
 *
 * The library is libcublas.so.<CUBLAS_VER_MAJOR>, the major version of the
 * headers the backend was compiled against: first by that name (the loader's
 * search path, this binary's RUNPATH), then beside the CUDA runtime this
 * process already loaded (a toolkit outside the search path). A missing
 * library or function is an NF_ERR_DEVICE naming it; nothing falls back.
 */
#define _GNU_SOURCE
#define NF_CUBLAS_DL_NO_MACROS
#include "cuda-impl.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define NF_STR2(x) #x
#define NF_STR(x)  NF_STR2(x)

struct nf_cublas_dl nf__cublas_dl;

static pthread_mutex_t nf__cublas_mu = PTHREAD_MUTEX_INITIALIZER;
static int nf__cublas_loaded;

static void * nf__cublas_open(char * tried, size_t n) {
    const char * so = "libcublas.so." NF_STR(CUBLAS_VER_MAJOR);
    void * h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
    snprintf(tried, n, "%s (%s)", so, h ? "" : dlerror());
    if (h) return h;
    Dl_info info; /* beside the CUDA runtime in use */
    if (dladdr((void *) cudaGetDeviceCount, &info) && info.dli_fname && strchr(info.dli_fname, '/')) {
        char path[4096];
        snprintf(path, sizeof(path), "%s", info.dli_fname);
        snprintf(strrchr(path, '/') + 1, sizeof(path) - (size_t) (strrchr(path, '/') + 1 - path), "%s", so);
        h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        size_t used = strlen(tried);
        snprintf(tried + used, n - used, ", %s (%s)", path, h ? "" : dlerror());
    }
    return h;
}

int nf__cublas_load(const char * name, nf_err * err) {
    int rc = NF_OK;
    pthread_mutex_lock(&nf__cublas_mu);
    if (!nf__cublas_loaded) {
        char tried[8192];
        void * h = nf__cublas_open(tried, sizeof(tried));
        if (!h) {
            rc = nf__err_set(err, NF_ERR_DEVICE, "%s: cannot load cuBLAS: tried %s", name, tried);
        } else {
            struct nf_cublas_dl t;
            const char * missing = NULL;
#define NF_CUBLAS_SYM(f) \
    if (!missing && !(*(void **) & t.f = dlsym(h, #f))) missing = #f;
            NF_CUBLAS_FNS(NF_CUBLAS_SYM)
#undef NF_CUBLAS_SYM
            if (missing) {
                rc = nf__err_set(err, NF_ERR_DEVICE, "%s: cuBLAS (%s) lacks %s", name, tried, missing);
                dlclose(h);
            } else {
                nf__cublas_dl = t;
                nf__cublas_loaded = 1; /* kept loaded for the process's life */
            }
        }
    }
    pthread_mutex_unlock(&nf__cublas_mu);
    return rc;
}
