/* cli-common.c -- argument helpers, errors, backends, traces, statistics. */
#include "cli.h"
#include "io/nf-io.h"
#include "nofall-plot.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

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
    if (strcmp(s, "bf16-autocast") == 0) {
        *out = NF_PRECISION_BF16_AUTOCAST;
        return 1;
    }
    return 0;
}

double nf_cli_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec * 1e3 + (double) ts.tv_nsec * 1e-6;
}

int nf_cli_write_trace(const nf_backend * be, FILE * f, const char * what, nf_err * err) {
    return nf_cli_write_trace_as(be, 0, f, what, err);
}

/* chrome: Chrome trace events (nofall-plot.h), else nofall's JSON */
int nf_cli_write_trace_as(const nf_backend * be, int chrome, FILE * f, const char * what, nf_err * err) {
    char * json = chrome ? nf_trace_chrome_json(be, err) : nf_trace_json(be, err);
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

int nf_cli_mpi_command_exit(const struct nf_mpi * m, int rc, const nf_err * err, int failed_rank) {
    if (m->rank == 0) return nf_cli_command_exit(rc, err);
    if (rc == NF_OK) return 0;
    /* a failing rank prints its own message too; the others only exit != 0 */
    if (failed_rank == m->rank) nf_cli_print_error(err, rc);
    return 1;
}
