/* test-generic.c -- run / bench's model-generic path over the public API
 * (nofall.h nf_model_inputs, nf_model_write_outputs, nf_model_check_outputs),
 * for every model type compiled in, on tiny synthetic weights:
 *   - the seeded input is the one the model-specific code made before
 *     (SpTransformer: nf__spt_seeded_tokens with N flanks; TabSTAR: the
 *     seeded cells built by tabstar-cells.c; Mitra: its table, read back
 *     from the written .npy files through the file options, gives the same
 *     forward, byte for byte);
 *   - the written output array is the forward's output, byte for byte; every
 *     file written is one of the type's artifacts; the check reads them back
 *     and refuses a corrupted one;
 *   - a second device (argv[2], e.g. opencl:0) agrees with cpu within 1e-3.
 * usage: test-generic TMPDIR [DEVICE] */
#include "core/model.h"
#include "io/nf-io.h"
#include "models/sptransformer-impl.h"
#include "models/tabstar-cells.h"
#include "nofall.h"
#include "tiny-models.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int64_t numel(const struct nf_array * a) {
    int64_t n = 1;
    for (int d = 0; d < a->ndim; d++) n *= a->shape[d];
    return n;
}

/* the seeded input equals what the model-specific code made */
static void check_seeded(const char * type, nf_model * m, const nf_inputs * in) {
    const struct nf_array * a = nf_inputs_arrays(in);
    if (strcmp(type, "sptransformer") == 0) {
        const int64_t ctx = 8, L = a[0].shape[1], n = L - 2 * ctx;
        CHECK(nf_inputs_count(in) == 1 && n == 128, "sptransformer: one tokens array of 128 + 2 x 8");
        int8_t core[128];
        nf__spt_seeded_tokens(42, n, core);
        int same = 1;
        for (int64_t i = 0; i < L; i++)
            same &= ((const int64_t *) a[0].data)[i] == (i < ctx || i >= L - ctx ? 4 : core[i - ctx]);
        CHECK(same, "sptransformer: seeded tokens differ from nf__spt_seeded_tokens");
    } else if (strcmp(type, "tabstar") == 0) {
        struct nf_tab_cells c;
        memset(&c, 0, sizeof(c));
        nf_err err = {0};
        cJSON * d = nf__tab_seeded_cells(42);
        CHECK(nf__tab_cells_build(d, "seeded", nf__tab_vocab(m), &c, &err) == NF_OK, "%s", err.msg);
        cJSON_Delete(d);
        struct nf_array ref[5];
        nf__tab_cells_arrays(&c, ref);
        CHECK(nf_inputs_count(in) == 5, "tabstar: 5 arrays");
        for (int i = 0; i < 5 && i < nf_inputs_count(in); i++) {
            const size_t esz = ref[i].dtype == NF_ARRAY_I64 ? 8 : 4;
            CHECK(strcmp(a[i].name, ref[i].name) == 0 && numel(&a[i]) == numel(&ref[i]) &&
                      memcmp(a[i].data, ref[i].data, (size_t) numel(&ref[i]) * esz) == 0,
                  "tabstar: seeded array %s differs from the cells build", ref[i].name);
        }
        nf__tab_cells_free(&c);
    }
}

static float * forward(nf_model * m, const nf_inputs * in, int64_t * n, nf_err * err) {
    int ndim = 0;
    int64_t shape[NF_ARRAY_MAX_DIMS];
    if (nf_model_output_shape(m, nf_inputs_arrays(in), nf_inputs_count(in), &ndim, shape, err) != NF_OK) return NULL;
    *n = 1;
    for (int d = 0; d < ndim; d++) *n *= shape[d];
    float * out = malloc((size_t) *n * sizeof(float));
    if (out && nf_model_forward(m, nf_inputs_arrays(in), nf_inputs_count(in), out, err) != NF_OK) {
        free(out);
        return NULL;
    }
    return out;
}

static int is_artifact(const char * type, const char * f) {
    for (const char * const * a = nf_model_type_artifacts(type); *a; a++)
        if (strcmp(*a, f) == 0) return 1;
    return 0;
}

int main(int argc, char ** argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test-generic TMPDIR [DEVICE]\n");
        return 2;
    }
    const char * tmp = argv[1];
    for (int t = 0; t < nf_model_type_count(); t++) {
        const char * type = nf_model_type_name(t);
        const char *keys[8], *values[8];
        const int n = tiny(type, keys, values);
        char dir[4096], out[4096], p[4200];
        snprintf(dir, sizeof(dir), "%s/generic-%s", tmp, type);
        snprintf(out, sizeof(out), "%s/generic-%s-out", tmp, type);
        nf_err err = {0};
        CHECK(nf_model_gen_weights(type, dir, 3, n, keys, values, &err) == NF_OK, "%s gen-weights: %s", type, err.msg);
        CHECK(nf__mkdir_p(out, &err) == NF_OK, "%s", err.msg);
        float * ref = NULL;
        int64_t n_ref = 0;
        for (int d = 0; d < (argc > 2 ? 2 : 1); d++) {
            const char * dev = d ? argv[2] : "cpu";
            nf_backend * be = NULL;
            nf_model * m = NULL;
            nf_inputs * in = NULL;
            if (nf_backend_init(dev, NF_PRECISION_EXACT, &be, &err) != NF_OK ||
                nf_model_load(be, dir, &m, &err) != NF_OK || nf_model_inputs(m, 0, NULL, NULL, &in, &err) != NF_OK) {
                CHECK(0, "%s on %s: %s", type, dev, err.msg);
                nf_model_free(m);
                nf_backend_free(be);
                continue;
            }
            if (d == 0) check_seeded(type, m, in);
            int64_t n_out = 0;
            float * y = forward(m, in, &n_out, &err);
            CHECK(y != NULL, "%s forward on %s: %s", type, dev, err.msg);
            if (y && d == 0) {
                struct nf_run_outputs res;
                CHECK(nf_model_write_outputs(m, in, y, NULL, out, &res, &err) == NF_OK, "%s write: %s", type, err.msg);
                CHECK(res.report && res.report[0] == '{' && res.shape[0], "%s: report members and shape", type);
                CHECK(nf_model_check_outputs(m, in, y, out, &err) == NF_OK, "%s check: %s", type, err.msg);
                nf_free(res.report);
                /* the output array file holds the forward's output, byte for byte */
                const char * yf = strcmp(type, "sptransformer") == 0 ? "position_logits.npy" : "logits.npy";
                CHECK(is_artifact(type, yf), "%s: %s is an artifact", type, yf);
                snprintf(p, sizeof(p), "%s/%s", out, yf);
                struct nf_npy a;
                if (nf__npy_read(p, &a, &err) == NF_OK) {
                    CHECK(a.nbytes == (size_t) n_out * 4 && memcmp(a.data, y, a.nbytes) == 0,
                          "%s: %s is not the output", type, yf);
                    /* a corrupted file is refused by the check */
                    ((float *) a.data)[0] = NAN;
                    nf__npy_write(p, NF_NPY_F4, a.ndim, a.shape, a.data, &err);
                    nf__npy_free(&a);
                    CHECK(nf_model_check_outputs(m, in, y, out, &err) != NF_OK, "%s: a NaN in %s passed", type, yf);
                } else {
                    CHECK(0, "%s: %s", type, err.msg);
                }
                if (strcmp(type, "mitra") == 0) {
                    /* the table read back through the file options: the same forward */
                    char sx[4200], sy[4200], qx[4200];
                    snprintf(sx, sizeof(sx), "%s/support_x.npy", out);
                    snprintf(sy, sizeof(sy), "%s/support_y.npy", out);
                    snprintf(qx, sizeof(qx), "%s/query_x.npy", out);
                    const char *fk[3] = {"support_x", "support_y", "query_x"}, *fv[3] = {sx, sy, qx};
                    nf_inputs * in2 = NULL;
                    int64_t n2 = 0;
                    float * y2 = NULL;
                    CHECK(nf_model_inputs(m, 3, fk, fv, &in2, &err) == NF_OK, "mitra files: %s", err.msg);
                    if (in2) y2 = forward(m, in2, &n2, &err);
                    CHECK(y2 && n2 == n_out && memcmp(y, y2, (size_t) n_out * 4) == 0, "mitra: file inputs differ");
                    free(y2);
                    nf_inputs_free(in2);
                }
                /* an option the type does not take is refused, by name */
                const char *bk[1] = {"no_such_option"}, *bv[1] = {"1"};
                nf_inputs * bad = NULL;
                CHECK(nf_model_inputs(m, 1, bk, bv, &bad, &err) == NF_ERR_ARG && strstr(err.msg, "no_such_option"),
                      "%s: unknown input option accepted", type);
                nf_inputs_free(bad);
                ref = y;
                n_ref = n_out;
                y = NULL;
            } else if (y) {
                double mx = 0;
                for (int64_t i = 0; i < n_out && n_out == n_ref; i++) mx = fmax(mx, fabs((double) y[i] - ref[i]));
                CHECK(n_out == n_ref && mx <= 1e-3, "%s: %s vs cpu max_abs %.3e", type, dev, mx);
                printf("ok   %s: %s agrees with cpu (max_abs %.3e)\n", type, dev, mx);
            }
            free(y);
            nf_inputs_free(in);
            nf_model_free(m);
            nf_backend_free(be);
        }
        free(ref);
        printf("%s %s: generic run path\n", fails ? "..." : "ok  ", type);
    }
    printf(fails ? "FAILED: %d\n" : "all passed\n", fails);
    return fails ? 1 : 0;
}
