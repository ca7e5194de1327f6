/* tabstar-cells.c -- the model-level TabSTAR input (README "TabSTAR"): rows
 * of already verbalized cells, exactly what upstream's
 * TabStarModel.forward(x_txt, x_num, d_output) consumes, read from
 *   {"format": "nofall-tabstar-cells/1", "task": "classification"|"regression",
 *    "n_target_tokens": C, "n_rows": B, "n_cells": S,
 *    "x_txt": [[S strings] x B], "x_num": [[S numbers] x B], "classes": [C labels]}
 * and turned into the model's arrays: every distinct string tokenized once
 * (first occurrence order), the cells as indices into them. */
#include "tabstar-cells.h"
#include "text/nf-text.h"
#include "io/nf-io.h"
#include "weights.h"

#include <cjson/cJSON.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void nf__tab_cells_free(struct nf_tab_cells * c) {
    if (!c) return;
    free(c->token_ids);
    free(c->token_lengths);
    free(c->cells);
    free(c->x_num);
    free(c->targets);
    if (c->strings)
        for (int64_t u = 0; u < c->n_strings; u++) free(c->strings[u]);
    free(c->strings);
    cJSON_Delete(c->classes);
    memset(c, 0, sizeof(*c));
}

void nf__tab_cells_arrays(const struct nf_tab_cells * c, struct nf_array out[5]) {
    out[0] = (struct nf_array){"token_ids", NF_ARRAY_I64, 2, {c->n_strings, c->max_len}, c->token_ids};
    out[1] = (struct nf_array){"token_lengths", NF_ARRAY_I64, 1, {c->n_strings}, c->token_lengths};
    out[2] = (struct nf_array){"cells", NF_ARRAY_I64, 2, {c->n_rows, c->n_cells}, c->cells};
    out[3] = (struct nf_array){"x_num", NF_ARRAY_F32, 2, {c->n_rows, c->n_cells}, c->x_num};
    out[4] = (struct nf_array){"target_tokens", NF_ARRAY_I64, 1, {c->n_targets}, c->targets};
}

static int nf__cells_int(const cJSON * doc, const char * key, const char * path, int64_t lo, int64_t hi, int64_t * out,
                         nf_err * err) {
    const cJSON * v = cJSON_GetObjectItemCaseSensitive(doc, key);
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < (double) lo ||
        v->valuedouble > (double) hi)
        return nf__err_set(err, NF_ERR_INPUT, "%s: \"%s\" must be an integer in [%lld, %lld]", path, key,
                           (long long) lo, (long long) hi);
    *out = (int64_t) v->valuedouble;
    return NF_OK;
}

int nf__tab_cells_build(const cJSON * doc, const char * path, const struct nf__wordpiece * vocab,
                        struct nf_tab_cells * c, nf_err * err) {
    memset(c, 0, sizeof(*c));
    const cJSON * f = cJSON_GetObjectItemCaseSensitive(doc, "format");
    if (!cJSON_IsString(f) || strcmp(f->valuestring, "nofall-tabstar-cells/1") != 0)
        return nf__err_set(err, NF_ERR_INPUT, "%s: \"format\" must be \"nofall-tabstar-cells/1\"", path);
    const cJSON * task = cJSON_GetObjectItemCaseSensitive(doc, "task");
    if (!cJSON_IsString(task) ||
        (strcmp(task->valuestring, "classification") != 0 && strcmp(task->valuestring, "regression") != 0))
        return nf__err_set(err, NF_ERR_INPUT, "%s: \"task\" must be \"classification\" or \"regression\"", path);
    c->regression = strcmp(task->valuestring, "regression") == 0;
    NF_TRY(nf__cells_int(doc, "n_rows", path, 1, 1 << 24, &c->n_rows, err));
    NF_TRY(nf__cells_int(doc, "n_cells", path, 1, 1 << 16, &c->n_cells, err));
    NF_TRY(nf__cells_int(doc, "n_target_tokens", path, 1, c->n_cells, &c->n_targets, err));
    if (c->regression ? c->n_targets != 1 : c->n_targets < 2)
        return nf__err_set(err, NF_ERR_INPUT, "%s: a %s task has %s target tokens, not %lld", path, task->valuestring,
                           c->regression ? "1" : "at least 2", (long long) c->n_targets);
    const int64_t B = c->n_rows, S = c->n_cells, BS = B * S;
    const cJSON * cl = cJSON_GetObjectItemCaseSensitive(doc, "classes");
    if (!c->regression && (!cJSON_IsArray(cl) || cJSON_GetArraySize(cl) != c->n_targets))
        return nf__err_set(err, NF_ERR_INPUT, "%s: \"classes\" must list the %lld classes", path,
                           (long long) c->n_targets);
    if (cl && !(c->classes = cJSON_Duplicate(cl, 1))) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    const cJSON * xt = cJSON_GetObjectItemCaseSensitive(doc, "x_txt");
    const cJSON * xn = cJSON_GetObjectItemCaseSensitive(doc, "x_num");
    if (!cJSON_IsArray(xt) || cJSON_GetArraySize(xt) != B || !cJSON_IsArray(xn) || cJSON_GetArraySize(xn) != B)
        return nf__err_set(err, NF_ERR_INPUT, "%s: \"x_txt\" and \"x_num\" must have n_rows = %lld rows", path,
                           (long long) B);
    c->cells = malloc((size_t) BS * sizeof(int64_t));
    c->x_num = malloc((size_t) BS * sizeof(float));
    c->targets = malloc((size_t) c->n_targets * sizeof(int64_t));
    c->strings = calloc((size_t) BS, sizeof(char *));
    int32_t * tok = malloc((size_t) NF_TAB_MAX_TOKENS * sizeof(int32_t));
    int32_t ** ids = calloc((size_t) BS, sizeof(int32_t *));
    int32_t * lens = calloc((size_t) BS, sizeof(int32_t));
    struct nf_namemap map = {0};
    int rc = NF_OK;
    if (!c->cells || !c->x_num || !c->targets || !c->strings || !tok || !ids || !lens) {
        rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int64_t k = 0; k < c->n_targets; k++) c->targets[k] = k;
    if ((rc = nf__namemap_init(&map, (size_t) BS, err)) != NF_OK) goto done;
    int64_t U = 0, maxlen = 2;
    for (int64_t r = 0; r < B && rc == NF_OK; r++) {
        const cJSON * rt = cJSON_GetArrayItem(xt, (int) r);
        const cJSON * rn = cJSON_GetArrayItem(xn, (int) r);
        if (!cJSON_IsArray(rt) || cJSON_GetArraySize(rt) != S || !cJSON_IsArray(rn) || cJSON_GetArraySize(rn) != S) {
            rc = nf__err_set(err, NF_ERR_INPUT, "%s: row %lld of x_txt / x_num does not have n_cells = %lld cells",
                             path, (long long) r, (long long) S);
            break;
        }
        const cJSON * st = rt->child;
        const cJSON * nu = rn->child;
        for (int64_t s = 0; s < S; s++, st = st->next, nu = nu->next) {
            if (!cJSON_IsString(st) || !cJSON_IsNumber(nu)) {
                rc = nf__err_set(err, NF_ERR_INPUT, "%s: cell [%lld][%lld]: x_txt must be a string, x_num a number",
                                 path, (long long) r, (long long) s);
                break;
            }
            if (!(fabs(nu->valuedouble) <= (double) FLT_MAX)) {
                rc = nf__err_set(err, NF_ERR_INPUT, "%s: x_num[%lld][%lld] = %g does not fit a float32", path,
                                 (long long) r, (long long) s, nu->valuedouble);
                break;
            }
            c->x_num[r * S + s] = (float) nu->valuedouble; /* parsed as double, cast to float32 */
            int u = nf__namemap_get(&map, st->valuestring);
            if (u < 0) {
                char ctx[96];
                snprintf(ctx, sizeof(ctx), "%s: x_txt[%lld][%lld]", path, (long long) r, (long long) s);
                int n = 0;
                rc = nf__wp_encode(vocab, st->valuestring, strlen(st->valuestring), NF_TAB_MAX_TOKENS, tok, &n, ctx,
                                   NULL, err);
                if (rc != NF_OK) break;
                u = (int) U++;
                c->strings[u] = strdup(st->valuestring);
                ids[u] = malloc((size_t) n * sizeof(int32_t));
                if (!c->strings[u] || !ids[u]) {
                    c->n_strings = U;
                    rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
                    break;
                }
                memcpy(ids[u], tok, (size_t) n * sizeof(int32_t));
                lens[u] = n;
                if (n > maxlen) maxlen = n;
                nf__namemap_put(&map, c->strings[u], u);
            }
            c->cells[r * S + s] = u;
        }
    }
    c->n_strings = U;
    if (rc != NF_OK) goto done;
    c->max_len = maxlen;
    c->token_ids = calloc((size_t) (U * maxlen), sizeof(int64_t));
    c->token_lengths = malloc((size_t) U * sizeof(int64_t));
    if (!c->token_ids || !c->token_lengths) {
        rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int64_t u = 0; u < U; u++) {
        c->token_lengths[u] = lens[u];
        for (int j = 0; j < lens[u]; j++) c->token_ids[u * maxlen + j] = ids[u][j];
    }
done:
    if (ids)
        for (int64_t u = 0; u < BS; u++) free(ids[u]);
    free(ids);
    free(lens);
    free(tok);
    nf__namemap_free(&map);
    if (rc != NF_OK) nf__tab_cells_free(c);
    return rc;
}

/* A cells file that is not valid UTF-8: which cell. The invalid bytes are
 * marked with DEL (when the file has none of its own), the marked copy
 * parsed, the first x_txt / classes string with a mark named (0: not found). */
static int nf__cells_bad_utf8(const char * path, char * where, size_t n, long * first) {
    char * txt = NULL;
    size_t len = 0;
    nf_err e2 = {0};
    if (nf__file_read_all(path, &txt, &len, 16u << 20, &e2) != NF_OK) return 0;
    int found = 0;
    if (!memchr(txt, 0x7f, len) && !nf__utf8_valid(txt, len)) {
        for (size_t i = 0; i < len;) {
            size_t k = 1;
            while (k <= 4 && (i + k > len || !nf__utf8_valid(txt + i, k))) k++;
            if (k > 4) {
                if (*first < 0) *first = (long) i;
                txt[i++] = 0x7f;
                continue;
            }
            i += k;
        }
        cJSON * doc = NULL;
        if (nf__json_parse(txt, len, path, &doc, &e2) == NF_OK) {
            const cJSON * xt = cJSON_GetObjectItemCaseSensitive(doc, "x_txt");
            int r = 0;
            for (const cJSON * row = cJSON_IsArray(xt) ? xt->child : NULL; row && !found; row = row->next, r++) {
                int c = 0;
                for (const cJSON * st = cJSON_IsArray(row) ? row->child : NULL; st && !found; st = st->next, c++)
                    if (cJSON_IsString(st) && strchr(st->valuestring, 0x7f)) {
                        snprintf(where, n, "x_txt[%d][%d] (row %d, cell %d)", r, c, r, c);
                        found = 1;
                    }
            }
            const cJSON * cl = cJSON_GetObjectItemCaseSensitive(doc, "classes");
            int k = 0;
            for (const cJSON * st = cJSON_IsArray(cl) ? cl->child : NULL; st && !found; st = st->next, k++)
                if (cJSON_IsString(st) && strchr(st->valuestring, 0x7f)) {
                    snprintf(where, n, "classes[%d]", k);
                    found = 1;
                }
            cJSON_Delete(doc);
        }
    }
    free(txt);
    return found;
}

int nf__tab_cells_load(const char * path, const struct nf__wordpiece * vocab, struct nf_tab_cells * c, nf_err * err) {
    cJSON * doc = NULL;
    memset(c, 0, sizeof(*c));
    int rc = nf__json_read_data(path, &doc, err);
    if (rc != NF_OK) {
        char where[128], e[1024];
        long first = -1;
        if (rc == NF_ERR_FORMAT && nf__cells_bad_utf8(path, where, sizeof(where), &first))
            rc = nf__err_set(err, NF_ERR_FORMAT, "%s: %s: invalid UTF-8 at byte %ld", nf__esc(e, sizeof(e), path),
                             where, first);
        return rc;
    }
    rc = cJSON_IsObject(doc) ? nf__tab_cells_build(doc, path, vocab, c, err)
                             : nf__err_set(err, NF_ERR_INPUT, "%s: not a JSON object", path);
    cJSON_Delete(doc);
    return rc;
}
