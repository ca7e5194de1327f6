/* cli-common.c -- tables, argument helpers, comparisons, statistics. */
#include "cli.h"
#include "io/nf-io.h"
#include "weights.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

void nf_cli_table_free(struct nf_cli_table * t) {
    free(t->xs);
    free(t->xq);
    free(t->yc);
    free(t->yv);
    memset(t, 0, sizeof(*t));
}

void nf_cli_table_arrays(const struct nf_cli_table * t, struct nf_array out[NF_CLI_TABLE_INPUTS]) {
    out[0] = (struct nf_array){"support_x", NF_ARRAY_F32, 2, {t->n_support, t->n_features}, t->xs};
    out[1] = (struct nf_array){"support_y",
                               t->yc ? NF_ARRAY_I64 : NF_ARRAY_F32,
                               1,
                               {t->n_support},
                               t->yc ? (const void *) t->yc : (const void *) t->yv};
    out[2] = (struct nf_array){"query_x", NF_ARRAY_F32, 2, {t->n_query, t->n_features}, t->xq};
}

int nf_cli_table_model(const nf_model * m, int * class_labels, int64_t * n_classes, nf_err * err) {
    static const char * const names[NF_CLI_TABLE_INPUTS] = {"support_x", "support_y", "query_x"};
    int ok = nf_model_n_inputs(m) == NF_CLI_TABLE_INPUTS;
    for (int i = 0; ok && i < NF_CLI_TABLE_INPUTS; i++) {
        const struct nf_input_desc * d = nf_model_input(m, i);
        ok = strcmp(d->name, names[i]) == 0 && d->ndim == (i == 1 ? 1 : 2) && (i == 1 || d->dtype == NF_ARRAY_F32);
        if (ok && i == 1) {
            *class_labels = d->dtype == NF_ARRAY_I64;
            *n_classes = d->n_classes;
        }
    }
    if (!ok)
        return nf__err_set(err, NF_ERR_UNSUPPORTED,
                           "model type %s does not take a table (support_x, support_y, query_x): "
                           "the command line cannot feed it yet",
                           nf_model_type(m));
    return NF_OK;
}

int nf_cli_output_shape(const nf_model * m, const struct nf_cli_table * t, int * ndim, int64_t * shape, int * width,
                        nf_err * err) {
    struct nf_array in[NF_CLI_TABLE_INPUTS];
    nf_cli_table_arrays(t, in);
    NF_TRY(nf_model_output_shape(m, in, NF_CLI_TABLE_INPUTS, ndim, shape, err));
    int64_t w = 1;
    for (int d = 1; d < *ndim; d++) w *= shape[d];
    *width = (int) w;
    return NF_OK;
}

int nf_cli_same_config(const nf_model * a, const nf_model * b) {
    if (strcmp(nf_model_type(a), nf_model_type(b)) != 0) return 0;
    struct nf_config_item x, y;
    for (int i = 0;; i++) {
        const int ha = nf_model_config_item(a, i, &x), hb = nf_model_config_item(b, i, &y);
        if (ha != hb) return 0;
        if (!ha) return 1;
        if (strcmp(x.key, y.key) != 0 || x.num != y.num || (!x.str) != (!y.str) || (x.str && strcmp(x.str, y.str) != 0))
            return 0;
    }
}

int nf_cli_table_generate(uint64_t seed, int64_t ns, int64_t nq, int64_t nf, int class_labels, int n_classes,
                          struct nf_cli_table * t, nf_err * err) {
    memset(t, 0, sizeof(*t));
    if (ns < 1 || nq < 1 || nf < 1) return nf__err_set(err, NF_ERR_ARG, "table sizes must be >= 1");
    t->n_support = ns;
    t->n_query = nq;
    t->n_features = nf;
    t->xs = malloc((size_t) (ns * nf) * sizeof(float));
    t->xq = malloc((size_t) (nq * nf) * sizeof(float));
    if (class_labels)
        t->yc = malloc((size_t) ns * sizeof(int64_t));
    else
        t->yv = malloc((size_t) ns * sizeof(float));
    if (!t->xs || !t->xq || (!t->yc && !t->yv)) {
        nf_cli_table_free(t);
        return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    }
    uint64_t s = seed ^ 0xD1B54A32D192ED03ull;
    /* each row: a class/target, features = noisy class-dependent means on a
     * 1/64 grid (exact in float; ties are realistic) */
    for (int64_t r = 0; r < ns + nq; r++) {
        const float c = (float) (nf__rng_next(&s) % (uint64_t) (n_classes > 0 ? n_classes : 1));
        float * row = r < ns ? t->xs + r * nf : t->xq + (r - ns) * nf;
        for (int64_t j = 0; j < nf; j++) {
            float g = 0.0f;
            for (int i = 0; i < 4; i++) g += nf__rng_unif(&s);
            const float v = (g - 2.0f) * 2.0f + 0.25f * c * (float) ((j % 3) - 1);
            row[j] = roundf(v * 64.0f) / 64.0f;
        }
        if (r < ns) {
            if (class_labels)
                t->yc[r] = (int64_t) c;
            else
                t->yv[r] = nf__rng_unif(&s);
        }
    }
    return NF_OK;
}

static int nf_cli_npy_matrix(const char * path, struct nf_npy * a, float ** out, nf_err * err) {
    if (a->ndim != 2)
        return nf__err_set(err, NF_ERR_SHAPE, "%s: expected a 2-D array (rows, features), got %d-D", path, a->ndim);
    const int64_t n = a->shape[0] * a->shape[1];
    float * f = malloc((size_t) (n ? n : 1) * sizeof(float));
    if (!f) return nf__err_set(err, NF_ERR_NOMEM, "%s: out of memory", path);
    if (a->dtype == NF_NPY_F4)
        memcpy(f, a->data, (size_t) n * sizeof(float));
    else if (a->dtype == NF_NPY_F8)
        for (int64_t i = 0; i < n; i++) f[i] = (float) ((const double *) a->data)[i];
    else {
        free(f);
        return nf__err_set(err, NF_ERR_FORMAT, "%s: dtype %s, expected float32 or float64", path,
                           nf__npy_dtype_name(a->dtype));
    }
    *out = f;
    return NF_OK;
}

int nf_cli_table_load(const char * sx, const char * sy, const char * qx, int class_labels, struct nf_cli_table * t,
                      nf_err * err) {
    memset(t, 0, sizeof(*t));
    struct nf_npy a = {0}, b = {0}, c = {0};
    int rc = nf__npy_read(sx, &a, err);
    if (rc == NF_OK) rc = nf__npy_read(sy, &b, err);
    if (rc == NF_OK) rc = nf__npy_read(qx, &c, err);
    if (rc == NF_OK) rc = nf_cli_npy_matrix(sx, &a, &t->xs, err);
    if (rc == NF_OK) rc = nf_cli_npy_matrix(qx, &c, &t->xq, err);
    if (rc == NF_OK) {
        t->n_support = a.shape[0];
        t->n_features = a.shape[1];
        t->n_query = c.shape[0];
        if (c.shape[1] != a.shape[1]) {
            rc = nf__err_set(err, NF_ERR_SHAPE, "%s has %lld features but %s has %lld", qx, (long long) c.shape[1], sx,
                             (long long) a.shape[1]);
        } else if (b.ndim != 1 || b.shape[0] != a.shape[0]) {
            rc = nf__err_set(err, NF_ERR_SHAPE, "%s: expected shape (%lld,) to match %s", sy, (long long) a.shape[0],
                             sx);
        }
    }
    if (rc == NF_OK) {
        const int64_t n = b.shape[0];
        if (class_labels) {
            t->yc = malloc((size_t) (n ? n : 1) * sizeof(int64_t));
            if (!t->yc)
                rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
            else if (b.dtype == NF_NPY_I8)
                memcpy(t->yc, b.data, (size_t) n * sizeof(int64_t));
            else if (b.dtype == NF_NPY_I4)
                for (int64_t i = 0; i < n; i++) t->yc[i] = ((const int32_t *) b.data)[i];
            else
                rc = nf__err_set(err, NF_ERR_FORMAT, "%s: dtype %s, expected int64 or int32 class labels", sy,
                                 nf__npy_dtype_name(b.dtype));
        } else {
            t->yv = malloc((size_t) (n ? n : 1) * sizeof(float));
            if (!t->yv)
                rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
            else if (b.dtype == NF_NPY_F4)
                memcpy(t->yv, b.data, (size_t) n * sizeof(float));
            else if (b.dtype == NF_NPY_F8)
                for (int64_t i = 0; i < n; i++) t->yv[i] = (float) ((const double *) b.data)[i];
            else
                rc = nf__err_set(err, NF_ERR_FORMAT, "%s: dtype %s, expected float32 regression targets", sy,
                                 nf__npy_dtype_name(b.dtype));
        }
    }
    nf__npy_free(&a);
    nf__npy_free(&b);
    nf__npy_free(&c);
    if (rc != NF_OK) nf_cli_table_free(t);
    return rc;
}

int nf_cli_parse_u64_list(const char * s, uint64_t max, uint64_t * out, int cap) {
    int n = 0;
    if (!*s) return -1;
    while (*s) {
        if (*s < '0' || *s > '9') return -1;
        uint64_t v = 0;
        while (*s >= '0' && *s <= '9') {
            const uint64_t d = (uint64_t) (*s++ - '0');
            if (v > (max - d) / 10) return -1;
            v = v * 10 + d;
        }
        if (n == cap) return -1;
        out[n++] = v;
        if (*s == ',') {
            s++;
            if (!*s) return -1;
        } else if (*s)
            return -1;
    }
    return n;
}

int nf_cli_parse_int(const char * flag, const char * v, int64_t min, int64_t max, int64_t * out) {
    const char * s = v;
    int neg = 0;
    if (*s == '-' && min < 0) {
        neg = 1;
        s++;
    }
    int ok = *s != '\0';
    uint64_t mag = 0;
    const uint64_t lim = neg ? (uint64_t) (-(min + 1)) + 1 : (uint64_t) max;
    for (; ok && *s; s++) {
        if (*s < '0' || *s > '9') {
            ok = 0;
            break;
        }
        const uint64_t d = (uint64_t) (*s - '0');
        if (mag > (lim - d) / 10) {
            ok = 0;
            break;
        }
        mag = mag * 10 + d;
    }
    if (ok) {
        const int64_t r = neg ? (mag == 0 ? 0 : -(int64_t) (mag - 1) - 1) : (int64_t) mag;
        if (r >= min && r <= max) {
            *out = r;
            return 1;
        }
    }
    char e[256];
    fprintf(stderr, "error: %s takes an integer in [%lld, %lld], got '%s'\n", flag, (long long) min, (long long) max,
            nf__esc(e, sizeof(e), v));
    return 0;
}

int nf_cli_parse_double(const char * flag, const char * v, double min, double max, double * out) {
    char * end = NULL;
    errno = 0;
    const double d = *v && !isspace((unsigned char) *v) ? strtod(v, &end) : NAN;
    if (end && !*end && errno == 0 && isfinite(d) && d >= min && d <= max) {
        *out = d;
        return 1;
    }
    char e[256];
    fprintf(stderr, "error: %s takes a finite number in [%g, %g], got '%s'\n", flag, min, max,
            nf__esc(e, sizeof(e), v));
    return 0;
}

void nf_cli_print_error(const nf_err * err, int rc) {
    /* the message may carry names from files and arguments; keep its line
     * breaks (a kernel build log), escape every other control character */
    static char out[sizeof(err->msg) * 4];
    char line[sizeof(err->msg)];
    size_t o = 0;
    const char * m = err->msg;
    while (*m && o + 8 < sizeof(out)) {
        size_t l = strcspn(m, "\n");
        snprintf(line, sizeof(line), "%.*s", (int) l, m);
        nf__esc(out + o, sizeof(out) - o, line);
        o += strlen(out + o);
        m += l;
        if (*m == '\n' && o + 1 < sizeof(out)) {
            out[o++] = '\n';
            out[o] = '\0';
            m++;
        }
    }
    out[o] = '\0';
    fprintf(stderr, "error: %s (%s)\n", out, nf_result_name(rc));
}

int nf_cli_stdout_ok(void) {
    errno = 0;
    if (fflush(stdout) == 0 && !ferror(stdout)) return 1;
    fprintf(stderr, "error: cannot write to standard output: %s\n", strerror(errno ? errno : EIO));
    return 0;
}

const char * nf_cli_need_value(int argc, char ** argv, int * i) {
    if (*i + 1 >= argc) {
        fprintf(stderr, "error: %s needs a value\n", argv[*i]);
        return NULL;
    }
    (*i)++;
    return argv[*i];
}

int nf_cli_parse_precision(const char * s, int * out) {
    if (strcmp(s, "exact") == 0 || strcmp(s, "fp32") == 0) {
        *out = NF_PRECISION_EXACT;
        return 1;
    }
    if (strcmp(s, "tf32") == 0) {
        *out = NF_PRECISION_TF32;
        return 1;
    }
    return 0;
}

double nf_cli_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec * 1e3 + (double) ts.tv_nsec * 1e-6;
}

int64_t nf_cli_argmax(const float * row, int width) {
    int64_t best = 0;
    for (int c = 1; c < width; c++)
        if (row[c] > row[best]) best = c;
    return best;
}

void nf_cli_diff(const float * a, const float * b, int64_t rows, int width, struct nf_cli_diff * d) {
    memset(d, 0, sizeof(*d));
    d->finite = true;
    d->n_rows = rows;
    double sum = 0.0;
    for (int64_t i = 0; i < rows * width; i++) {
        if (!isfinite(a[i]) || !isfinite(b[i])) {
            d->finite = false;
            continue;
        }
        const double e = fabs((double) a[i] - (double) b[i]);
        if (e > d->max_abs) d->max_abs = e;
        sum += e;
        d->n++;
    }
    if (!d->finite) d->max_abs = INFINITY;
    d->mean_abs = d->n ? sum / (double) d->n : 0.0;
    if (width > 1) {
        for (int64_t r = 0; r < rows; r++) {
            d->class_disagree += nf_cli_argmax(a + r * width, width) != nf_cli_argmax(b + r * width, width);
        }
    }
}

static int nf_cli_cmp_double(const void * a, const void * b) {
    double x = *(const double *) a, y = *(const double *) b;
    return (x > y) - (x < y);
}

void nf_cli_stats(double * v, int n, struct nf_cli_stats * s) {
    memset(s, 0, sizeof(*s));
    if (n <= 0) return;
    qsort(v, (size_t) n, sizeof(double), nf_cli_cmp_double);
    double sum = 0;
    for (int i = 0; i < n; i++) sum += v[i];
    s->mean = sum / n;
    s->min = v[0];
    s->max = v[n - 1];
    s->median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    /* p90: linear interpolation between closest ranks (numpy's default) */
    double pos = 0.9 * (n - 1);
    int lo = (int) pos;
    int hi = lo + 1 < n ? lo + 1 : lo;
    s->p90 = v[lo] + (pos - lo) * (v[hi] - v[lo]);
}

/* the trace JSON to f (the caller's output file) */
int nf_cli_write_trace(const nf_backend * be, FILE * f, const char * what, nf_err * err) {
    char * json = nf_trace_json(be, err);
    if (!json) return NF_ERR_NOMEM;
    int rc = fputs(json, f) < 0 ? NF_ERR_IO : NF_OK;
    nf_free(json);
    if (rc == NF_OK && (fflush(f) != 0 || ferror(f))) rc = NF_ERR_IO;
    if (rc != NF_OK) {
        char e[1024];
        return nf__err_set(err, rc, "%s: write failed", nf__esc(e, sizeof(e), what));
    }
    return NF_OK;
}

int nf_cli_backend_init(const char * device, int precision, nf_backend ** out, nf_err * err) {
    struct nf_backend_env env;
    nf_backend_env_read(&env, precision);
    const int rc = nf_backend_init_opts(device, &env.opts, out, err);
    if (rc != NF_OK) { /* the flag named: a failed --device leaves no doubt which option to fix */
        char e[256];
        return strncmp(err->msg, "--device", 8) == 0
                   ? rc
                   : nf__err_prefix(err, "--device %s", nf__esc(e, sizeof(e), device));
    }
    nf_cli_backend_warn(*out);
    return NF_OK;
}

int nf_cli_model_load(nf_backend * be, const char * model, nf_model ** out, nf_err * err) {
    const int rc = nf_model_load(be, model, out, err);
    if (rc != NF_OK && strncmp(err->msg, "--model", 7) != 0) {
        char e[1024];
        return nf__err_prefix(err, "--model %s", nf__esc(e, sizeof(e), model));
    }
    return rc;
}

void nf_cli_backend_warn(const nf_backend * be) {
    const char * w = nf_backend_warning(be);
    if (w && w[0]) fprintf(stderr, "warning: %s: %s\n", nf_backend_name(be), w);
}

/* all of required[] present in dir */
static int nf__case_has(const char * dir, const char * const * required, int n_required) {
    char p[4096];
    struct stat sb;
    for (int i = 0; i < n_required; i++) {
        nf__path_join(p, sizeof(p), dir, required[i]);
        if (stat(p, &sb) != 0) return 0; /* opened (and checked to be a regular file) by the readers */
    }
    return 1;
}

int nf_cli_case_dirs(const char * against, const char * const * required, int n_required, char *** out, int * n,
                     nf_err * err) {
    *out = NULL;
    *n = 0;
    if (nf__case_has(against, required, n_required)) {
        *out = malloc(sizeof(char *));
        if (!*out || !((*out)[0] = strdup(against))) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
        *n = 1;
        return NF_OK;
    }
    DIR * d = opendir(against);
    if (!d) {
        char e[1024];
        return nf__err_set(err, NF_ERR_IO, "%s: not a fixture directory: %s", nf__esc(e, sizeof(e), against),
                           strerror(errno));
    }
    struct dirent * e;
    int cap = 0, rc = NF_OK;
    while (rc == NF_OK && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char sub[4096];
        nf__path_join(sub, sizeof(sub), against, e->d_name);
        if (!nf__case_has(sub, required, n_required)) continue;
        if (*n == cap) {
            cap = cap ? cap * 2 : 16;
            char ** t = realloc(*out, (size_t) cap * sizeof(char *));
            if (!t) {
                rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
                break;
            }
            *out = t;
        }
        if (!((*out)[*n] = strdup(sub)))
            rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
        else
            (*n)++;
    }
    closedir(d);
    if (rc != NF_OK) return rc;
    for (int i = 0; i < *n; i++)
        for (int j = i + 1; j < *n; j++)
            if (strcmp((*out)[i], (*out)[j]) > 0) {
                char * t = (*out)[i];
                (*out)[i] = (*out)[j];
                (*out)[j] = t;
            }
    if (*n == 0) {
        char want[512] = "";
        size_t len = 0;
        for (int i = 0; i < n_required; i++)
            nf__msg_append(want, sizeof(want), &len, "%s%s", i ? " + " : "", required[i]);
        return nf__err_set(err, NF_ERR_IO, "%s: no case directory with %s", against, want);
    }
    return NF_OK;
}
