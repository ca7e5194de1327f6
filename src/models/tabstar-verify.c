/* tabstar-verify.c -- `verify` of a TabSTAR model (nf_model_i.verify,
 * core/verify.h; README "TabSTAR").
 *   against cpu: the cells (--cells, or the seeded row) on the device and on
 *   cpu; against a case directory: a fixture case (cells.json + logits.npy,
 *   e.g. tests/fixtures/tabstar/cls2 with its weights from gen-weights), or
 *   a directory of them. --adapter merges a LoRA adapter into both sides.
 * Per case max_abs / mean_abs (1e-4 / 1e-5) and the argmax; RESULT=PASS|FAIL. */
#include "tabstar-impl.h"
#include "verify.h"
#include "io/nf-io.h"

#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int nf__tv_check_opts(const struct nf_verify_opts * o, nf_err * err) {
    if (!o->model || !o->against) return nf__err_set(err, NF_ERR_ARG, "verify needs --model and --against");
    return NF_OK;
}

static int nf__tv_load(struct nf_verify * v, const char * dev, nf_backend ** be, nf_model ** m, nf_err * err) {
    char sum[4400];
    NF_TRY(nf__verify_backend(v, dev, NF_PRECISION_EXACT, be, err));
    NF_TRY(nf_model_load(*be, v->o.model, m, err));
    if (v->o.adapter) NF_TRY(nf_model_apply_adapter(*m, v->o.adapter, sum, sizeof(sum), err));
    return NF_OK;
}

/* the model's input: the cells of path, or the seeded row (nf_model_inputs) */
static int nf__tv_cells(nf_model * m, const char * path, nf_inputs ** in, nf_err * err) {
    const char * key = "cells";
    return nf_model_inputs(m, path ? 1 : 0, &key, &path, in, err);
}

/* the forward; rows x targets of its output */
static int nf__tv_forward(nf_model * m, const nf_inputs * in, float ** out, int64_t * B, int64_t * C, nf_err * err) {
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
static int nf__tv_compare(FILE * f, const char * name, const float * got, const float * want, int64_t B, int64_t C,
                          const struct nf_verify_opts * o) {
    double mx = 0, sum = 0;
    int same = 1;
    for (int64_t i = 0; i < B * C; i++) {
        const double d = fabs((double) got[i] - (double) want[i]);
        mx = d > mx || isnan(d) ? d : mx;
        sum += d;
    }
    for (int64_t r = 0; C > 1 && r < B; r++)
        same &= nf__verify_argmax(got + r * C, (int) C) == nf__verify_argmax(want + r * C, (int) C);
    const double mean = sum / (double) (B * C);
    const int pass = mx <= o->max_abs && mean <= o->mean_abs && same;
    fprintf(f, "CASE=%s ROWS=%lld TARGETS=%lld MAX_ABS=%.3g MEAN_ABS=%.3g ARGMAX=%s %s\n", name, (long long) B,
            (long long) C, mx, mean, same ? "same" : "differs", pass ? "PASS" : "FAIL");
    return pass;
}

static int nf__tv_case(FILE * f, nf_model * m, const char * dir, const char * name, const struct nf_verify_opts * o,
                       int * failed, nf_err * err) {
    char p[4200];
    nf_inputs * in = NULL;
    nf__path_join(p, sizeof(p), dir, "cells.json");
    NF_TRY(nf__tv_cells(m, p, &in, err));
    struct nf_npy want;
    memset(&want, 0, sizeof(want));
    float * got = NULL;
    int64_t B = 0, C = 0;
    nf__path_join(p, sizeof(p), dir, "logits.npy");
    int rc = nf__npy_read(p, &want, err);
    if (rc == NF_OK) rc = nf__tv_forward(m, in, &got, &B, &C, err);
    if (rc == NF_OK && (want.dtype != NF_NPY_F4 || (int64_t) (want.nbytes / 4) != B * C))
        rc = nf__err_set(err, NF_ERR_SHAPE, "%s: not float32 (%lld, %lld)", p, (long long) B, (long long) C);
    if (rc == NF_OK && !nf__tv_compare(f, name, got, want.data, B, C, o)) (*failed)++;
    free(got);
    nf__npy_free(&want);
    nf_inputs_free(in);
    return rc;
}

/* a case directory, or a directory of them (in the order readdir gives) */
static int nf__tv_fixture(FILE * f, struct nf_verify * v, nf_err * err) {
    const char * against = v->o.against;
    char p[4200];
    struct stat sb;
    nf__path_join(p, sizeof(p), against, "cells.json");
    if (stat(p, &sb) == 0) return nf__tv_case(f, v->m, against, against, &v->o, &v->failed, err);
    DIR * d = opendir(against);
    if (!d)
        return nf__err_set(err, NF_ERR_IO,
                           "%s: not a case directory (cells.json + logits.npy) or a directory "
                           "of them",
                           against);
    int n = 0, rc = NF_OK;
    for (struct dirent * e; rc == NF_OK && (e = readdir(d));) {
        char cd[4200];
        nf__path_join(cd, sizeof(cd), against, e->d_name);
        nf__path_join(p, sizeof(p), cd, "cells.json");
        if (e->d_name[0] == '.' || stat(p, &sb) != 0) continue;
        rc = nf__tv_case(f, v->m, cd, e->d_name, &v->o, &v->failed, err);
        n++;
    }
    closedir(d);
    if (rc == NF_OK && n == 0) rc = nf__err_set(err, NF_ERR_IO, "%s: no cases", against);
    return rc;
}

static int nf__tv_run(struct nf_verify * v, FILE * f, nf_err * err) {
    const struct nf_verify_opts * o = &v->o;
    nf_inputs * in = NULL;
    float *a = NULL, *b = NULL;
    int64_t B = 0, C = 0;
    int rc = nf__tv_load(v, o->device, &v->be, &v->m, err);
    if (rc != NF_OK) goto done;
    if (v->against_cpu) {
        if ((rc = nf__tv_load(v, "cpu", &v->rbe, &v->rm, err)) != NF_OK) goto done;
        if ((rc = nf__tv_cells(v->m, o->cells, &in, err)) != NF_OK) goto done;
        if ((rc = nf__tv_forward(v->m, in, &a, &B, &C, err)) != NF_OK) goto done;
        if ((rc = nf__tv_forward(v->rm, in, &b, &B, &C, err)) != NF_OK) goto done;
        if (!nf__tv_compare(f, o->cells ? o->cells : "seeded", a, b, B, C, o)) v->failed++;
    } else {
        rc = nf__tv_fixture(f, v, err);
    }
done:
    if (rc == NF_OK) fprintf(f, "RESULT=%s\n", v->failed ? "FAIL" : "PASS");
    free(a);
    free(b);
    nf_inputs_free(in);
    return rc;
}

const struct nf_verify_i nf__tabstar_verify = {
    .max_abs = 1e-4,
    .mean_abs = 1e-5,
    .device = "cpu",
    .check_opts = nf__tv_check_opts,
    .run = nf__tv_run,
};
