/* mitra-inputs.c -- Mitra's own inputs (nf_model_i.inputs, nofall.h
 * nf_model_inputs): the seeded table, byte-identical on every machine.
 *
 * Options: "seed" (42), "support" (16), "query" (8), "features" (13).
 * Labels 0 .. min(n_classes, 10)-1 for a classifier, targets in [0, 1) for
 * a regressor; features are noisy class-dependent means on a 1/64 grid
 * (exact in float; ties are realistic). */
#include "mitra-impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define NF_SEED_MAX ((int64_t) 9007199254740991) /* 2^53 - 1 */

int nf__mitra_own_inputs(nf_model * model, int n, const char * const * keys, const char * const * values,
                         struct nf_inputs * out, nf_err * err);
int nf__mitra_own_inputs(nf_model * model, int n, const char * const * keys, const char * const * values,
                         struct nf_inputs * out, nf_err * err) {
    static const char * const allowed[] = {"seed", "support", "query", "features", NULL};
    NF_TRY(nf__inputs_keys_check("mitra", n, keys, allowed, err));
    int64_t seed, ns, nq, nf;
    NF_TRY(nf__inputs_int(n, keys, values, "seed", 0, NF_SEED_MAX, 42, &seed, err));
    NF_TRY(nf__inputs_int(n, keys, values, "support", 1, 1 << 24, 16, &ns, err));
    NF_TRY(nf__inputs_int(n, keys, values, "query", 1, 1 << 24, 8, &nq, err));
    NF_TRY(nf__inputs_int(n, keys, values, "features", 1, 1 << 20, 13, &nf, err));
    const struct nf_input_desc * yd = nf_model_input(model, 1);
    const int class_labels = yd->dtype == NF_ARRAY_I64;
    const int n_classes = class_labels ? (int) (yd->n_classes < 10 ? yd->n_classes : 10) : 0;
    float * xs = malloc((size_t) (ns * nf) * sizeof(float));
    float * xq = malloc((size_t) (nq * nf) * sizeof(float));
    void * y = malloc((size_t) ns * (class_labels ? sizeof(int64_t) : sizeof(float)));
    if (!xs || !xq || !y) {
        free(xs);
        free(xq);
        free(y);
        return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    }
    uint64_t s = (uint64_t) seed ^ 0xD1B54A32D192ED03ull;
    for (int64_t r = 0; r < ns + nq; r++) {
        const float c = (float) (nf__rng_next(&s) % (uint64_t) (n_classes > 0 ? n_classes : 1));
        float * row = r < ns ? xs + r * nf : xq + (r - ns) * nf;
        for (int64_t j = 0; j < nf; j++) {
            float g = 0.0f;
            for (int i = 0; i < 4; i++) g += nf__rng_unif(&s);
            const float v = (g - 2.0f) * 2.0f + 0.25f * c * (float) ((j % 3) - 1);
            row[j] = roundf(v * 64.0f) / 64.0f;
        }
        if (r < ns) {
            if (class_labels)
                ((int64_t *) y)[r] = (int64_t) c;
            else
                ((float *) y)[r] = nf__rng_unif(&s);
        }
    }
    const int64_t sx[2] = {ns, nf}, sy[1] = {ns}, qx[2] = {nq, nf};
    nf__inputs_array(out, "support_x", NF_ARRAY_F32, 2, sx, xs, 1);
    nf__inputs_array(out, "support_y", class_labels ? NF_ARRAY_I64 : NF_ARRAY_F32, 1, sy, y, 1);
    nf__inputs_array(out, "query_x", NF_ARRAY_F32, 2, qx, xq, 1);
    char name[96];
    snprintf(name, sizeof(name), "%lldx%lldx%lld", (long long) ns, (long long) nq, (long long) nf);
    nf__inputs_item_str(out, 0, "case", name);
    nf__inputs_item_num(out, 0, "n_support", ns);
    nf__inputs_item_num(out, 0, "n_query", nq);
    nf__inputs_item_num(out, 0, "n_features", nf);
    return NF_OK;
}
