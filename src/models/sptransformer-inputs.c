/* sptransformer-inputs.c -- SpTransformer's own inputs (nf_model_i.inputs,
 * nofall.h nf_model_inputs): "batch" (1) seeded sequences of seeds seed,
 * seed+1, ... ("seed", 42) of input length "length" (8201, the
 * variant-scoring window; flanks included), the context_len positions at
 * each end N. */
#include "sptransformer-impl.h"

#include <stdlib.h>
#include <string.h>

#define NF_SEED_MAX ((int64_t) 9007199254740991) /* 2^53 - 1 */

int nf__spt_own_inputs(nf_model * model, int n, const char * const * keys, const char * const * values,
                       struct nf_inputs * out, nf_err * err);
int nf__spt_own_inputs(nf_model * model, int n, const char * const * keys, const char * const * values,
                       struct nf_inputs * out, nf_err * err) {
    static const char * const allowed[] = {"seed", "length", "batch", NULL};
    NF_TRY(nf__inputs_keys_check("sptransformer", n, keys, allowed, err));
    int64_t seed, length, batch, context = 0;
    NF_TRY(nf__inputs_int(n, keys, values, "seed", 0, NF_SEED_MAX, 42, &seed, err));
    NF_TRY(nf__inputs_int(n, keys, values, "length", 1, 1 << 24, 8201, &length, err));
    NF_TRY(nf__inputs_int(n, keys, values, "batch", 1, 1 << 16, 1, &batch, err));
    struct nf_config_item ci;
    for (int i = 0; nf_model_config_item(model, i, &ci); i++)
        if (strcmp(ci.key, "context_len") == 0) context = ci.num;
    int64_t * tokens = malloc((size_t) (batch * length) * sizeof(int64_t));
    int8_t * core = malloc((size_t) length);
    if (!tokens || !core) {
        free(tokens);
        free(core);
        return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    }
    const int64_t nc = length - 2 * context > 0 ? length - 2 * context : 0;
    for (int64_t b = 0; b < batch; b++) {
        nf__spt_seeded_tokens((uint64_t) seed + (uint64_t) b, nc, core);
        for (int64_t i = 0; i < length; i++) {
            const int64_t j = i - context;
            tokens[b * length + i] = j >= 0 && j < nc ? core[j] : 4;
        }
    }
    free(core);
    const int64_t sh[2] = {batch, length};
    nf__inputs_array(out, "tokens", NF_ARRAY_I64, 2, sh, tokens, 1);
    int ndim = 0;
    int64_t osh[NF_ARRAY_MAX_DIMS];
    NF_TRY(nf_model_output_shape(model, out->a, 1, &ndim, osh, err));
    char name[96];
    snprintf(name, sizeof(name), "batch=%lld length=%lld", (long long) batch, (long long) length);
    nf__inputs_item_str(out, 0, "case", name);
    nf__inputs_item_num(out, 0, "batch", batch);
    nf__inputs_item_num(out, 0, "length", length);
    nf__inputs_item_num(out, 1, "INPUT_LENGTH", length);
    nf__inputs_item_num(out, 1, "POSITIONS_SCORED", osh[1]);
    return NF_OK;
}
