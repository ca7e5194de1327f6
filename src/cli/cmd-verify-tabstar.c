/* cmd-verify-tabstar.c -- `nofall verify` on a TabSTAR
 * model (README "TabSTAR").
 *
 * verify --model DIR --device DEV --against cpu|CASE_DIR [--adapter A]
 *        [--cells CELLS.json] [--max-abs 1e-4] [--mean-abs 1e-5]
 *   against cpu: the cells (or the seeded input) on DEV and on cpu;
 *   against CASE_DIR: a fixture case (cells.json + logits.npy, e.g.
 *   tests/fixtures/tabstar/cls2 with its weights from gen-weights), or a
 *   directory of them. max_abs / mean_abs and the argmax per case;
 *   RESULT=PASS|FAIL; exit 0, 3 on a failed comparison, 1 on an error.
 * (bench is the generic one, cmd-bench.c). */
#include "cli.h"
#include "opts.h"
#include "io/nf-io.h"

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
};

static int nf_tv_parse(int argc, char ** argv, struct nf_tv_opts * o) {
    struct nf_cli_opts v;
    memset(o, 0, sizeof(*o));
    if (!nf_cli_opts_parse(NF_M(VERIFY_TAB), argc, argv, 1, NULL, &v)) return 0;
    o->model = nf_cli_opt_str(&v, NF_O_MODEL, NULL);
    o->device = nf_cli_opt_str(&v, NF_O_DEVICE, "cpu");
    o->against = nf_cli_opt_str(&v, NF_O_AGAINST, NULL);
    o->adapter = nf_cli_opt_str(&v, NF_O_ADAPTER, NULL);
    o->cells = nf_cli_opt_str(&v, NF_O_CELLS, NULL);
    o->max_abs = v.set[NF_O_MAX_ABS] ? v.d[NF_O_MAX_ABS] : 1e-4;
    o->mean_abs = v.set[NF_O_MEAN_ABS] ? v.d[NF_O_MEAN_ABS] : 1e-5;
    if (!o->model || !o->against) {
        fprintf(stderr, "error: verify needs --model and --against\n");
        return 0;
    }
    return 1;
}

static int nf_tv_load(const char * dev, const struct nf_tv_opts * o, nf_backend ** be, nf_model ** m, nf_err * err) {
    char sum[4400];
    NF_TRY(nf_cli_backend_init(dev, NF_PRECISION_EXACT, be, err));
    NF_TRY(nf_model_load(*be, o->model, m, err));
    if (o->adapter) NF_TRY(nf_model_apply_adapter(*m, o->adapter, sum, sizeof(sum), err));
    return NF_OK;
}

/* the model's input: the cells of path, or the seeded row (nf_model_inputs) */
static int nf_tv_cells(nf_model * m, const char * path, nf_inputs ** in, nf_err * err) {
    const char * key = "cells";
    return nf_model_inputs(m, path ? 1 : 0, &key, &path, in, err);
}

/* the forward; rows x targets of its output */
static int nf_tv_forward(nf_model * m, const nf_inputs * in, float ** out, int64_t * B, int64_t * C, nf_err * err) {
    int ndim = 0;
    int64_t sh[NF_ARRAY_MAX_DIMS];
    NF_TRY(nf_model_output_shape(m, nf_inputs_arrays(in), nf_inputs_count(in), &ndim, sh, err));
    *B = sh[0];
    *C = ndim > 1 ? sh[1] : 1;
    *out = malloc((size_t) (*B * *C > 0 ? *B * *C : 1) * sizeof(float));
    if (!*out) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    return nf_model_forward(m, nf_inputs_arrays(in), nf_inputs_count(in), *out, err);
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
    nf_inputs * in = NULL;
    nf__path_join(p, sizeof(p), dir, "cells.json");
    NF_TRY(nf_tv_cells(m, p, &in, err));
    struct nf_npy want;
    memset(&want, 0, sizeof(want));
    float * got = NULL;
    int64_t B = 0, C = 0;
    nf__path_join(p, sizeof(p), dir, "logits.npy");
    int rc = nf__npy_read(p, &want, err);
    if (rc == NF_OK) rc = nf_tv_forward(m, in, &got, &B, &C, err);
    if (rc == NF_OK && (want.dtype != NF_NPY_F4 || (int64_t) (want.nbytes / 4) != B * C))
        rc = nf__err_set(err, NF_ERR_SHAPE, "%s: not float32 (%lld, %lld)", p, (long long) B, (long long) C);
    if (rc == NF_OK && !nf_tv_compare(name, got, want.data, B, C, o)) (*failed)++;
    free(got);
    nf__npy_free(&want);
    nf_inputs_free(in);
    return rc;
}

static int nf_tv_main(const struct nf_tv_opts * o, int * failed, nf_err * err) {
    nf_backend *be = NULL, *rbe = NULL;
    nf_model *m = NULL, *rm = NULL;
    nf_inputs * in = NULL;
    float *a = NULL, *b = NULL;
    int64_t B = 0, C = 0;
    int rc = nf_tv_load(o->device, o, &be, &m, err);
    if (rc != NF_OK) goto done;
    if (strcmp(o->against, "cpu") == 0) {
        if ((rc = nf_tv_load("cpu", o, &rbe, &rm, err)) != NF_OK) goto done;
        if ((rc = nf_tv_cells(m, o->cells, &in, err)) != NF_OK) goto done;
        if ((rc = nf_tv_forward(m, in, &a, &B, &C, err)) != NF_OK) goto done;
        if ((rc = nf_tv_forward(rm, in, &b, &B, &C, err)) != NF_OK) goto done;
        if (!nf_tv_compare(o->cells ? o->cells : "seeded", a, b, B, C, o)) (*failed)++;
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
    nf_inputs_free(in);
    nf_model_free(m);
    nf_model_free(rm);
    nf_backend_free(be);
    nf_backend_free(rbe);
    return rc;
}

int nf_cmd_verify_tabstar(int argc, char ** argv) {
    struct nf_tv_opts o;
    if (!nf_tv_parse(argc, argv, &o)) return 2;
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
