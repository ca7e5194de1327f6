/* tabstar-inputs.c -- TabSTAR's own inputs (nf_model_i.inputs, nofall.h
 * nf_model_inputs) and its adapter (nf_model_i.apply_adapter).
 *
 * Options: "cells" (a CELLS.json file, tabstar-cells.c) or "seed" (42): the
 * seeded input, one row of 2 target tokens and 6 numerical feature cells
 * drawn from splitmix64. */
#include "tabstar-cells.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NF_SEED_MAX ((int64_t) 9007199254740991) /* 2^53 - 1 */

/* the seeded input: 1 row; targets "no"/"yes" of "target"; features f0..f5
 * with a bin label and a z-score from splitmix64 (nf__rng_next) at seed */
cJSON * nf__tab_seeded_cells(uint64_t seed) {
    uint64_t s = seed;
    cJSON * d = cJSON_CreateObject();
    cJSON_AddStringToObject(d, "format", "nofall-tabstar-cells/1");
    cJSON_AddStringToObject(d, "task", "classification");
    cJSON_AddNumberToObject(d, "n_target_tokens", 2);
    cJSON_AddNumberToObject(d, "n_rows", 1);
    cJSON_AddNumberToObject(d, "n_cells", 8);
    cJSON * xt = cJSON_AddArrayToObject(d, "x_txt");
    cJSON * xn = cJSON_AddArrayToObject(d, "x_num");
    cJSON *rt = cJSON_CreateArray(), *rn = cJSON_CreateArray();
    cJSON_AddItemToArray(xt, rt);
    cJSON_AddItemToArray(xn, rn);
    cJSON * cl = cJSON_AddArrayToObject(d, "classes");
    static const char * const cls[2] = {"no", "yes"};
    char buf[160];
    for (int c = 0; c < 2; c++) {
        cJSON_AddItemToArray(cl, cJSON_CreateString(cls[c]));
        snprintf(buf, sizeof(buf), "Target Feature: target\nFeature Value: %s", cls[c]);
        cJSON_AddItemToArray(rt, cJSON_CreateString(buf));
        cJSON_AddItemToArray(rn, cJSON_CreateNumber(0));
    }
    for (int j = 0; j < 6; j++) {
        const int bin = (int) (nf__rng_next(&s) % 12);
        const double z = (double) ((int) (nf__rng_next(&s) >> 40) - (1 << 23)) / (double) (1 << 23) * 3.0;
        if (bin == 0)
            snprintf(buf, sizeof(buf), "Predictive Feature: f%d\nFeature Value: Lower than 10 (Quantile 0%%)", j);
        else if (bin == 11)
            snprintf(buf, sizeof(buf), "Predictive Feature: f%d\nFeature Value: Higher than 100 (Quantile 100%%)", j);
        else
            snprintf(buf, sizeof(buf), "Predictive Feature: f%d\nFeature Value: %d to %d (Quantile %d - %d%%)", j,
                     10 * bin, 10 * bin + 10, 10 * (bin - 1), 10 * bin);
        cJSON_AddItemToArray(rt, cJSON_CreateString(buf));
        cJSON_AddItemToArray(rn, cJSON_CreateNumber((double) (float) z));
    }
    return d;
}

static void nf__tab_cells_release(void * p) {
    nf__tab_cells_free(p);
    free(p);
}

int nf__tab_own_inputs(nf_model * model, int n, const char * const * keys, const char * const * values,
                       struct nf_inputs * out, nf_err * err) {
    static const char * const allowed[] = {"seed", "cells", NULL};
    NF_TRY(nf__inputs_keys_check("tabstar", n, keys, allowed, err));
    int64_t seed;
    NF_TRY(nf__inputs_int(n, keys, values, "seed", 0, NF_SEED_MAX, 42, &seed, err));
    const char * path = nf__inputs_opt(n, keys, values, "cells");
    if (path && nf__inputs_opt(n, keys, values, "seed"))
        return nf__err_set(err, NF_ERR_ARG, "--seed makes a seeded input; it does not go with --cells");
    struct nf_tab_cells * c = calloc(1, sizeof(*c));
    if (!c) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    out->priv = c;
    out->priv_free = nf__tab_cells_release;
    const struct nf__wordpiece * wp = nf__tab_vocab(model);
    if (path) {
        NF_TRY(nf__tab_cells_load(path, wp, c, err));
    } else {
        cJSON * d = nf__tab_seeded_cells((uint64_t) seed);
        const int rc = d ? nf__tab_cells_build(d, "the seeded input", wp, c, err)
                         : nf__err_set(err, NF_ERR_NOMEM, "no memory");
        cJSON_Delete(d);
        NF_TRY(rc);
    }
    struct nf_array in[5];
    nf__tab_cells_arrays(c, in);
    for (int i = 0; i < 5; i++)
        nf__inputs_array(out, in[i].name, in[i].dtype, in[i].ndim, in[i].shape, (void *) in[i].data, 0);
    int64_t tok = 0;
    for (int64_t u = 0; u < c->n_strings; u++) tok += c->token_lengths[u];
    nf__inputs_item_str(out, 0, "case", path ? path : "seeded");
    nf__inputs_item_num(out, 0, "n_rows", c->n_rows);
    nf__inputs_item_num(out, 0, "n_cells", c->n_cells);
    nf__inputs_item_num(out, 0, "distinct_strings", c->n_strings);
    nf__inputs_item_num(out, 0, "text_tokens", tok);
    nf__inputs_item_num(out, 1, "ROWS", c->n_rows);
    nf__inputs_item_num(out, 1, "CELLS", c->n_cells);
    nf__inputs_item_num(out, 1, "DISTINCT_STRINGS", c->n_strings);
    nf__inputs_item_num(out, 1, "TEXT_TOKENS", tok);
    return NF_OK;
}

int nf__tab_apply_adapter(nf_model * model, const char * dir, char * summary, size_t summary_n, nf_err * err) {
    return nf__tab_merge_adapter(model, dir, summary, summary_n, err);
}
