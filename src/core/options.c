/* options.c -- backend options (struct nf_backend_opts): lookup, validation,
 * and the command-line convenience that reads them from the environment. */
#include "nf-impl.h"

#include <stdlib.h>
#include <string.h>

const char * nf__opt(const struct nf_backend_opts * o, const char * key) {
    if (!o || !o->options) return NULL;
    const size_t n = strlen(key);
    const char * found = NULL;
    for (const char * const * kv = o->options; *kv; kv++) {
        if (strncmp(*kv, key, n) == 0 && (*kv)[n] == '=') found = *kv + n + 1; /* the last one wins */
    }
    return found;
}

int nf__opts_check(const struct nf_backend_opts * o, const char * kind, const char * const * known, nf_err * err) {
    if (!o || !o->options) return NF_OK;
    const size_t kn = strlen(kind);
    for (const char * const * kv = o->options; *kv; kv++) {
        const char * eq = strchr(*kv, '=');
        if (!eq || eq == *kv) return nf__err_set(err, NF_ERR_ARG, "backend option \"%s\": expected key=value", *kv);
        const char * dot = memchr(*kv, '.', (size_t) (eq - *kv));
        if (!dot) return nf__err_set(err, NF_ERR_ARG, "backend option \"%s\": expected <backend>.<name>=value", *kv);
        if ((size_t) (dot - *kv) != kn || strncmp(*kv, kind, kn) != 0) continue; /* another backend's */
        int ok = 0;
        for (const char * const * k = known; *k && !ok; k++) {
            ok = strlen(*k) == (size_t) (eq - dot - 1) && strncmp(dot + 1, *k, (size_t) (eq - dot - 1)) == 0;
        }
        if (!ok) {
            char list[512] = "";
            size_t len = 0;
            for (const char * const * k = known; *k && len + 1 < sizeof(list); k++) {
                const int w = snprintf(list + len, sizeof(list) - len, "%s%s.%s", len ? ", " : "", kind, *k);
                len = w > 0 && len + (size_t) w < sizeof(list) ? len + (size_t) w : sizeof(list) - 1;
            }
            return nf__err_set(err, NF_ERR_ARG, "unknown %s backend option \"%.*s\" (known: %s)", kind,
                               (int) (eq - *kv), *kv, len ? list : "none");
        }
    }
    return NF_OK;
}

/* ---- the environment, for command-line tools ------------------------------- */

static void nf__env_opt(struct nf_backend_env * e, int * n, const char * var, const char * key) {
    const char * v = getenv(var);
    if (!v || !v[0] || *n >= (int) (sizeof(e->kv) / sizeof(e->kv[0]))) return;
    snprintf(e->kv[*n], sizeof(e->kv[*n]), "%s=%s", key, v);
    e->list[*n] = e->kv[*n];
    (*n)++;
}

void nf_backend_env_read(struct nf_backend_env * e, int precision) {
    memset(e, 0, sizeof(*e));
    e->opts.precision = precision;
    const char * no = getenv("NOFALL_OPENCL_NO_CACHE");
    const char * d;
    if (no && no[0] && strcmp(no, "0") != 0) {
        e->cache_dir[0] = '\0';
    } else if ((d = getenv("NOFALL_CACHE_DIR")) && d[0]) {
        snprintf(e->cache_dir, sizeof(e->cache_dir), "%s/opencl", d);
    } else if ((d = getenv("XDG_CACHE_HOME")) && d[0]) {
        snprintf(e->cache_dir, sizeof(e->cache_dir), "%s/nofall/opencl", d);
    } else if ((d = getenv("HOME")) && d[0]) {
        snprintf(e->cache_dir, sizeof(e->cache_dir), "%s/.cache/nofall/opencl", d);
    }
    e->opts.cache_dir = e->cache_dir;
    int n = 0;
    nf__env_opt(e, &n, "NOFALL_OPENCL_GEMM", "opencl.gemm");
    nf__env_opt(e, &n, "NOFALL_OPENCL_GEMM_GEOMETRY", "opencl.gemm_geometry");
    nf__env_opt(e, &n, "NOFALL_OPENCL_TEST_BREAK_BUILD", "opencl.test_break_build");
    nf__env_opt(e, &n, "NF_CUDA_ATTENTION", "cuda.attention");
    nf__env_opt(e, &n, "NF_CUDA_CHUNK_FLOATS", "cuda.chunk_floats");
    e->list[n] = NULL;
    e->opts.options = e->list;
}
