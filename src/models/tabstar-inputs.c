/* tabstar-inputs.c -- TabSTAR's own inputs (nf_model_i.inputs, nofall.h
 * nf_model_inputs) and its adapter (nf_model_i.apply_adapter).
 *
 * Options: "cells" (a CELLS.json file, tabstar-cells.c) or "seed" (42): the
 * seeded input, one row of 2 target tokens and 6 numerical feature cells
 * drawn from splitmix64.
 *
 * A run writes logits.npy (float32 (B, C)); classification:
 * probabilities.npy (softmax over the C target tokens), class_ids.npy (int64
 * argmax); regression: predictions.npy (the z-scaled prediction: the cells
 * carry no target scaler, so this is the logit; `predict` inverse-scales). */
#include "tabstar-cells.h"
#include "io/nf-io.h"

#include <cjson/cJSON.h>
#include <math.h>
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

int nf__tab_inputs_check(int n, const char * const * keys, const char * const * values, nf_err * err) {
    if (nf__inputs_opt(n, keys, values, "cells") && nf__inputs_opt(n, keys, values, "seed"))
        return nf__err_set(err, NF_ERR_ARG, "--seed makes a seeded input; it does not go with --cells");
    return NF_OK;
}

int nf__tab_own_inputs(nf_model * model, int n, const char * const * keys, const char * const * values,
                       const struct nf_array * given, int n_given, struct nf_inputs * out, nf_err * err) {
    (void) given;
    static const char * const allowed[] = {"seed", "cells", NULL};
    NF_TRY(nf__inputs_keys_check("tabstar", n, keys, allowed, err));
    if (n_given) return nf__err_set(err, NF_ERR_ARG, "tabstar makes its inputs from cells or a seed, not given arrays");
    NF_TRY(nf__tab_inputs_check(n, keys, values, err));
    int64_t seed;
    NF_TRY(nf__inputs_int(n, keys, values, "seed", 0, NF_SEED_MAX, 42, &seed, err));
    const char * path = nf__inputs_opt(n, keys, values, "cells");
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
    nf__inputs_item_str(out, 2, "input_source", path ? path : "seeded");
    if (!path) nf__inputs_item_num(out, 2, "seed", seed);
    return NF_OK;
}

/* ---- run's outputs -------------------------------------------------------------------------- */

int nf__tab_write_outputs(nf_model * model, const struct nf_inputs * in, const float * logits, const char * adapter,
                          const char * dir, struct nf_run_outputs * res, nf_err * err) {
    (void) model;
    const struct nf_tab_cells * c = in->priv;
    const int64_t B = c->n_rows, C = c->n_targets;
    float * probs = malloc((size_t) (B * C > 0 ? B * C : 1) * sizeof(float));
    int64_t * cls = malloc((size_t) (B > 0 ? B : 1) * sizeof(int64_t));
    if (!probs || !cls) {
        free(probs);
        free(cls);
        return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    }
    /* softmax over the target tokens in fp32 (upstream: torch.softmax(logits.float(), dim=1)) */
    int64_t counts[64] = {0};
    for (int64_t r = 0; r < B && !c->regression; r++) {
        const float * x = logits + r * C;
        float mx = x[0];
        for (int64_t k = 1; k < C; k++) mx = x[k] > mx ? x[k] : mx;
        double sum = 0;
        for (int64_t k = 0; k < C; k++) sum += exp((double) x[k] - mx);
        for (int64_t k = 0; k < C; k++) probs[r * C + k] = (float) (exp((double) x[k] - mx) / sum);
        int64_t best = 0;
        for (int64_t k = 1; k < C; k++)
            if (x[k] > x[best]) best = k;
        cls[r] = best;
        if (best < 64) counts[best]++;
    }
    char p[4096];
    const int64_t lsh[2] = {B, C}, vsh[1] = {B};
    nf__path_join(p, sizeof(p), dir, "logits.npy");
    int rc = nf__npy_write(p, NF_NPY_F4, 2, lsh, logits, err);
    if (rc == NF_OK && c->regression) {
        nf__path_join(p, sizeof(p), dir, "predictions.npy");
        rc = nf__npy_write(p, NF_NPY_F4, 1, vsh, logits, err);
    } else if (rc == NF_OK) {
        nf__path_join(p, sizeof(p), dir, "probabilities.npy");
        rc = nf__npy_write(p, NF_NPY_F4, 2, lsh, probs, err);
        nf__path_join(p, sizeof(p), dir, "class_ids.npy");
        if (rc == NF_OK) rc = nf__npy_write(p, NF_NPY_I8, 1, vsh, cls, err);
    }
    free(probs);
    free(cls);
    NF_TRY(rc);
    size_t len = 0;
    snprintf(res->shape, sizeof(res->shape), "%lldx%lld", (long long) B, (long long) C);
    for (int64_t k = 0; k < C && k < 64 && !c->regression; k++)
        nf__msg_append(res->classes, sizeof(res->classes), &len, "%s%lld:%lld", k ? "," : "", (long long) k,
                       (long long) counts[k]);
    cJSON * rep = cJSON_CreateObject();
    if (!rep) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    for (int i = 0; i < in->n_report; i++) {
        const struct nf_inputs_item * it = &in->report[i];
        if (it->is_str)
            cJSON_AddStringToObject(rep, it->key, it->str);
        else
            cJSON_AddNumberToObject(rep, it->key, (double) it->num);
    }
    cJSON_AddStringToObject(rep, "task", c->regression ? "regression" : "classification");
    cJSON_AddNumberToObject(rep, "n_rows", (double) B);
    cJSON_AddNumberToObject(rep, "n_cells", (double) c->n_cells);
    cJSON_AddNumberToObject(rep, "n_target_tokens", (double) C);
    cJSON_AddNumberToObject(rep, "distinct_strings", (double) c->n_strings);
    int64_t ntok = 0;
    for (int64_t u = 0; u < c->n_strings; u++) ntok += c->token_lengths[u];
    cJSON_AddNumberToObject(rep, "text_tokens", (double) ntok);
    cJSON_AddStringToObject(rep, "adapter", adapter ? adapter : "none");
    if (c->classes) cJSON_AddItemToObject(rep, "classes", cJSON_Duplicate(c->classes, 1));
    if (c->regression)
        cJSON_AddStringToObject(rep, "predictions",
                                "z-scaled (the cells carry no target scaler): predictions.npy = logits[:, 0]");
    char * text = cJSON_PrintUnformatted(rep);
    cJSON_Delete(rep);
    if (text) {
        res->report = malloc(strlen(text) + 1);
        if (res->report) memcpy(res->report, text, strlen(text) + 1);
        cJSON_free(text);
    }
    return res->report ? NF_OK : nf__err_set(err, NF_ERR_NOMEM, "out of memory");
}

int nf__tab_check_outputs(nf_model * model, const struct nf_inputs * in, const float * logits, const char * dir,
                          nf_err * err) {
    (void) model;
    return nf__tab_check_arrays(in->priv, logits, dir, err);
}

int nf__tab_check_arrays(const struct nf_tab_cells * c, const float * logits, const char * dir, nf_err * err) {
    char p[4096];
    const int64_t B = c->n_rows, C = c->n_targets;
    const char * files[3] = {"logits.npy", c->regression ? "predictions.npy" : "probabilities.npy",
                             c->regression ? NULL : "class_ids.npy"};
    for (int i = 0; i < 3 && files[i]; i++) {
        struct nf_npy a;
        nf__path_join(p, sizeof(p), dir, files[i]);
        NF_TRY(nf__npy_read(p, &a, err));
        const int want_i8 = i == 2;
        const int64_t w = (i == 1 && c->regression) || i == 2 ? 1 : C;
        int ok = a.dtype == (want_i8 ? NF_NPY_I8 : NF_NPY_F4) && a.shape[0] == B &&
                 (w == 1 && i > 0 ? a.ndim == 1 : a.ndim == 2 && a.shape[1] == C);
        const size_t n = a.nbytes / nf__npy_dtype_size(a.dtype);
        for (size_t e = 0; ok && e < n; e++)
            ok = want_i8 ? ((const int64_t *) a.data)[e] >= 0 && ((const int64_t *) a.data)[e] < C
                         : isfinite(((const float *) a.data)[e]) != 0;
        if (ok && i == 0 && logits) ok = memcmp(a.data, logits, (size_t) (B * C) * sizeof(float)) == 0;
        nf__npy_free(&a);
        if (!ok) return nf__err_set(err, NF_ERR_IO, "%s: read back with the wrong shape/dtype/values", p);
    }
    return NF_OK;
}

int nf__tab_apply_adapter(nf_model * model, const char * dir, char * summary, size_t summary_n, nf_err * err) {
    return nf__tab_merge_adapter(model, dir, summary, summary_n, err);
}
