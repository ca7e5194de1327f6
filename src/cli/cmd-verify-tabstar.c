/* cmd-verify-tabstar.c -- `nofall verify` and `nofall bench` on a TabSTAR
 * model (README "TabSTAR").
 *
 * verify --model DIR --device DEV --against cpu|CASE_DIR [--adapter A]
 *        [--cells CELLS.json] [--max-abs 1e-4] [--mean-abs 1e-5]
 *   against cpu: the cells (or the seeded input) on DEV and on cpu;
 *   against CASE_DIR: a fixture case (cells.json + logits.npy, e.g.
 *   tests/fixtures/tabstar/cls2 with its weights from gen-weights), or a
 *   directory of them. max_abs / mean_abs and the argmax per case;
 *   RESULT=PASS|FAIL; exit 0, 3 on a failed comparison, 1 on an error.
 * bench --model DIR --device DEV [--cells CELLS.json] [--adapter A]
 *        [--warmup 2] [--runs 10]: forward wall times (the tokenized input
 *   reused: the BERT work of every distinct string runs in every forward). */
#include "cli.h"
#include "opts.h"
#include "core/model.h"
#include "io/nf-io.h"
#include "models/tabstar-cells.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct nf_tv_opts {
    const char *model, *device, *against, *adapter, *cells;
    double max_abs, mean_abs;
    int64_t warmup, runs;
};

static int nf_tv_parse(int argc, char ** argv, struct nf_tv_opts * o, int bench) {
    struct nf_cli_opts v;
    memset(o, 0, sizeof(*o));
    if (!nf_cli_opts_parse(bench ? NF_M(BENCH_TAB) : NF_M(VERIFY_TAB), argc, argv, 1, NULL, &v)) return 0;
    o->model = nf_cli_opt_str(&v, NF_O_MODEL, NULL);
    o->device = nf_cli_opt_str(&v, NF_O_DEVICE, "cpu");
    o->against = nf_cli_opt_str(&v, NF_O_AGAINST, NULL);
    o->adapter = nf_cli_opt_str(&v, NF_O_ADAPTER, NULL);
    o->cells = nf_cli_opt_str(&v, NF_O_CELLS, NULL);
    o->max_abs = v.set[NF_O_MAX_ABS] ? v.d[NF_O_MAX_ABS] : 1e-4;
    o->mean_abs = v.set[NF_O_MEAN_ABS] ? v.d[NF_O_MEAN_ABS] : 1e-5;
    o->warmup = v.set[NF_O_WARMUP] ? v.i[NF_O_WARMUP] : 2;
    o->runs = v.set[NF_O_RUNS] ? v.i[NF_O_RUNS] : 10;
    if (!o->model || (!bench && !o->against)) {
        fprintf(stderr, bench ? "error: bench needs --model\n" : "error: verify needs --model and --against\n");
        return 0;
    }
    return 1;
}

/* the seeded input of `run` (cmd-run-tabstar.c) */
cJSON * nf_tab_seeded_cells(uint64_t seed);

static int nf_tv_load(const char * dev, const struct nf_tv_opts * o, nf_backend ** be, nf_model ** m, nf_err * err) {
    char sum[4400];
    NF_TRY(nf_cli_backend_init(dev, NF_PRECISION_EXACT, be, err));
    NF_TRY(nf_model_load(*be, o->model, m, err));
    if (o->adapter) NF_TRY(nf__tab_merge_adapter(*m, o->adapter, sum, sizeof(sum), err));
    return NF_OK;
}

static int nf_tv_cells(const nf_model * m, const char * path, struct nf_tab_cells * c, nf_err * err) {
    if (path) return nf__tab_cells_load(path, nf__tab_vocab(m), c, err);
    cJSON * d = nf_tab_seeded_cells(42);
    int rc = d ? nf__tab_cells_build(d, "the seeded input", nf__tab_vocab(m), c, err)
               : nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    cJSON_Delete(d);
    return rc;
}

static int nf_tv_forward(nf_model * m, const struct nf_tab_cells * c, float ** out, nf_err * err) {
    struct nf_array in[5];
    nf__tab_cells_arrays(c, in);
    *out = malloc((size_t) (c->n_rows * c->n_targets) * sizeof(float));
    if (!*out) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    return nf_model_forward(m, in, 5, *out, err);
}

/* one comparison: prints its line, returns whether it passed */
static int nf_tv_compare(const char * name, const float * got, const float * want, int64_t B, int64_t C,
                         const struct nf_tv_opts * o) {
    double mx = 0, sum = 0;
    int same = 1;
    for (int64_t i = 0; i < B * C; i++) {
        const double d = fabs((double) got[i] - (double) want[i]);
        mx = d > mx || isnan(d) ? d : mx;
        sum += d;
    }
    for (int64_t r = 0; C > 1 && r < B; r++)
        same &= nf_cli_argmax(got + r * C, (int) C) == nf_cli_argmax(want + r * C, (int) C);
    const double mean = sum / (double) (B * C);
    const int pass = mx <= o->max_abs && mean <= o->mean_abs && same;
    printf("CASE=%s ROWS=%lld TARGETS=%lld MAX_ABS=%.3g MEAN_ABS=%.3g ARGMAX=%s %s\n", name, (long long) B,
           (long long) C, mx, mean, same ? "same" : "differs", pass ? "PASS" : "FAIL");
    return pass;
}

static int nf_tv_case(nf_model * m, const char * dir, const char * name, const struct nf_tv_opts * o, int * failed,
                      nf_err * err) {
    char p[4200];
    struct nf_tab_cells c;
    nf__path_join(p, sizeof(p), dir, "cells.json");
    NF_TRY(nf_tv_cells(m, p, &c, err));
    struct nf_npy want;
    memset(&want, 0, sizeof(want));
    float * got = NULL;
    nf__path_join(p, sizeof(p), dir, "logits.npy");
    int rc = nf__npy_read(p, &want, err);
    if (rc == NF_OK && (want.dtype != NF_NPY_F4 || (int64_t) (want.nbytes / 4) != c.n_rows * c.n_targets))
        rc = nf__err_set(err, NF_ERR_SHAPE, "%s: not float32 (%lld, %lld)", p, (long long) c.n_rows,
                         (long long) c.n_targets);
    if (rc == NF_OK) rc = nf_tv_forward(m, &c, &got, err);
    if (rc == NF_OK && !nf_tv_compare(name, got, want.data, c.n_rows, c.n_targets, o)) (*failed)++;
    free(got);
    nf__npy_free(&want);
    nf__tab_cells_free(&c);
    return rc;
}

static int nf_tv_main(const struct nf_tv_opts * o, int * failed, nf_err * err) {
    nf_backend *be = NULL, *rbe = NULL;
    nf_model *m = NULL, *rm = NULL;
    struct nf_tab_cells c;
    memset(&c, 0, sizeof(c));
    float *a = NULL, *b = NULL;
    int rc = nf_tv_load(o->device, o, &be, &m, err);
    if (rc != NF_OK) goto done;
    if (strcmp(o->against, "cpu") == 0) {
        if ((rc = nf_tv_load("cpu", o, &rbe, &rm, err)) != NF_OK) goto done;
        if ((rc = nf_tv_cells(m, o->cells, &c, err)) != NF_OK) goto done;
        if ((rc = nf_tv_forward(m, &c, &a, err)) != NF_OK) goto done;
        if ((rc = nf_tv_forward(rm, &c, &b, err)) != NF_OK) goto done;
        if (!nf_tv_compare(o->cells ? o->cells : "seeded", a, b, c.n_rows, c.n_targets, o)) (*failed)++;
    } else {
        char p[4200];
        struct stat sb;
        nf__path_join(p, sizeof(p), o->against, "cells.json");
        if (stat(p, &sb) == 0) {
            rc = nf_tv_case(m, o->against, o->against, o, failed, err);
        } else {
            DIR * d = opendir(o->against);
            if (!d) {
                rc = nf__err_set(err, NF_ERR_IO,
                                 "%s: not a case directory (cells.json + logits.npy) or a directory "
                                 "of them",
                                 o->against);
                goto done;
            }
            int n = 0;
            for (struct dirent * e; rc == NF_OK && (e = readdir(d));) {
                char cd[4200];
                nf__path_join(cd, sizeof(cd), o->against, e->d_name);
                nf__path_join(p, sizeof(p), cd, "cells.json");
                if (e->d_name[0] == '.' || stat(p, &sb) != 0) continue;
                rc = nf_tv_case(m, cd, e->d_name, o, failed, err);
                n++;
            }
            closedir(d);
            if (rc == NF_OK && n == 0) rc = nf__err_set(err, NF_ERR_IO, "%s: no cases", o->against);
        }
    }
done:
    if (rc == NF_OK) printf("RESULT=%s\n", *failed ? "FAIL" : "PASS");
    free(a);
    free(b);
    nf__tab_cells_free(&c);
    nf_model_free(m);
    nf_model_free(rm);
    nf_backend_free(be);
    nf_backend_free(rbe);
    return rc;
}

int nf_cmd_verify_tabstar(int argc, char ** argv) {
    struct nf_tv_opts o;
    if (!nf_tv_parse(argc, argv, &o, 0)) return 2;
    nf_cli_signals_install();
    nf_err err = {0};
    int failed = 0;
    const int rc = nf_tv_main(&o, &failed, &err);
    if (rc != NF_OK) {
        nf_cli_print_error(&err, rc);
        return 1;
    }
    return failed ? 3 : 0;
}

static int nf_cmp_double(const void * a, const void * b) {
    const double x = *(const double *) a, y = *(const double *) b;
    return x < y ? -1 : x > y;
}

int nf_cmd_bench_tabstar(int argc, char ** argv) {
    struct nf_tv_opts o;
    if (!nf_tv_parse(argc, argv, &o, 1)) return 2;
    nf_err err = {0};
    nf_backend * be = NULL;
    nf_model * m = NULL;
    struct nf_tab_cells c;
    memset(&c, 0, sizeof(c));
    float * out = NULL;
    double * t = calloc((size_t) o.runs, sizeof(double));
    int rc = t ? nf_tv_load(o.device, &o, &be, &m, &err) : nf__err_set(&err, NF_ERR_NOMEM, "out of memory");
    if (rc == NF_OK) rc = nf_tv_cells(m, o.cells, &c, &err);
    for (int64_t i = 0; rc == NF_OK && i < o.warmup + o.runs; i++) {
        free(out);
        out = NULL;
        const double t0 = nf_cli_now_ms();
        rc = nf_tv_forward(m, &c, &out, &err);
        if (i >= o.warmup) t[i - o.warmup] = nf_cli_now_ms() - t0;
    }
    if (rc == NF_OK) {
        qsort(t, (size_t) o.runs, sizeof(double), nf_cmp_double);
        int64_t tok = 0;
        for (int64_t u = 0; u < c.n_strings; u++) tok += c.token_lengths[u];
        printf("MODEL=tabstar\nDEVICE=%s\nROWS=%lld\nCELLS=%lld\nDISTINCT_STRINGS=%lld\nTEXT_TOKENS=%lld\n"
               "RUNS=%lld\nMIN_MS=%.3f\nMEDIAN_MS=%.3f\nMAX_MS=%.3f\n",
               o.device, (long long) c.n_rows, (long long) c.n_cells, (long long) c.n_strings, (long long) tok,
               (long long) o.runs, t[0], t[o.runs / 2], t[o.runs - 1]);
    }
    free(out);
    free(t);
    nf__tab_cells_free(&c);
    nf_model_free(m);
    nf_backend_free(be);
    return nf_cli_command_exit(rc, &err);
}
