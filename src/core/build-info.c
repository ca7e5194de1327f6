/* build-info.c -- what this build of the library is: its version (nf_version, generated at build time
 * by cmake/nf-version.cmake from the project version and the git commit), the backends compiled in
 * and the GEMM library each one calls (nf_build_info; `nofall --version` prints it). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nofall.h"
#include "base/nf-base.h"
#include "backends/cpu/cpu-gemm.h"

char * nf_build_info(nf_err * err) {
    struct nf_cpu_gemm_info g;
    nf__cpu_gemm_info(&g);
    const char * backends = "cpu"
#ifdef NF_HAVE_OPENCL
                            ", opencl"
#endif
#ifdef NF_HAVE_CUDA
                            ", cuda"
#endif
        ;
    char buf[1024];
    int n = snprintf(buf, sizeof(buf), "nofall %s\nbackends: %s\ngemm: cpu: %s\n", nf_version(), backends, g.library);
#ifdef NF_HAVE_OPENCL
#ifdef NF_HAVE_CLBLAST
    n += snprintf(buf + n, sizeof(buf) - (size_t) n,
                  "gemm: opencl: CLBlast (the built-in kernel with the option opencl.gemm=own)\n");
#else
    n += snprintf(buf + n, sizeof(buf) - (size_t) n, "gemm: opencl: the built-in kernel (built without CLBlast)\n");
#endif
#endif
#ifdef NF_HAVE_CUDA
    n += snprintf(buf + n, sizeof(buf) - (size_t) n,
                  "gemm: cuda: cuBLAS (pedantic fp32; TF32 with --precision tf32)\n");
#endif
    if (n < 0 || (size_t) n >= sizeof(buf)) {
        nf__err_set(err, NF_ERR_ARG, "nf_build_info: text too long");
        return NULL;
    }
    char * out = malloc((size_t) n + 1);
    if (!out) {
        nf__err_set(err, NF_ERR_NOMEM, "nf_build_info: out of memory");
        return NULL;
    }
    memcpy(out, buf, (size_t) n + 1);
    return out;
}
