/* tabstar.c -- TabSTAR (alanarazi7/TabSTAR, weights alana89/TabSTAR): strict
 * checkpoint loading and the model interface. Spec: shared/specs/tabstar.md.
 *
 * A TabSTAR directory: config.json (model_type "tabstar"), model.safetensors
 * (the 295 F32 tensors of Appendix A; an old transformers' position_ids
 * buffer is ignored), vocab.txt (e5-small-v2's WordPiece vocabulary, as many
 * lines as word_embeddings has rows). A TabSTAR v1.1 checkpoint (tabstar
 * 1.2's tabstarv1p1) is refused.
 *
 * The interface's inputs are the tokenized form of upstream's
 * TabStarModel.forward(x_txt, x_num, d_output) (the CLI tokenizes; see
 * README "TabSTAR"):
 *   token_ids      i64 (n_strings, max_len)  the distinct strings' ids, row u's
 *                                            first token_lengths[u] used
 *   token_lengths  i64 (n_strings)           2 .. 512
 *   cells          i64 (batch, n_cells)      the string of each cell
 *   x_num          f32 (batch, n_cells)      the cells' z-scores
 *   target_tokens  i64 (C)                   0 .. C-1: cells 0..C-1 are the targets
 * -> logits (batch, C). */
#include "tabstar-impl.h"
#include "tabstar-cells.h"
#include "model.h"
#include "text/nf-text.h"
#include "io/nf-io.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void nf__tab_free(void * impl) {
    nf_tab * m = impl;
    if (!m) return;
    nf__tab_release_workspace(m);
    nf__weights_free(&m->weights);
    nf__wp_free(m->vocab);
    free(m->bert);
    free(m->tab);
    free(m);
}

/* v1.1 (tabstar >= 1.2, tabstarv1p1): its config.json has model_type
 * "tabstar" too, but its TabStarConfig writes d_num / reg_dist_bins /
 * interaction_layers / text_model, and its class is TabSTARModel (v1:
 * TabStarModel with d_model / embedding_model) */
static int nf__tab_is_v1p1(const cJSON * doc) {
    static const char * const keys[] = {"d_num", "reg_dist_bins", "interaction_layers", "text_model"};
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
        if (cJSON_GetObjectItemCaseSensitive(doc, keys[i])) return 1;
    const cJSON * a = cJSON_GetObjectItemCaseSensitive(doc, "architectures");
    const cJSON * e;
    cJSON_ArrayForEach(e, a) {
        if (cJSON_IsString(e) && strcmp(e->valuestring, "TabSTARModel") == 0) return 1;
    }
    return 0;
}

static int nf__tab_load(nf_backend * be, const char * weights, const cJSON * config, const char * config_path,
                        void ** out, nf_err * err) {
    *out = NULL;
    if (nf__tab_is_v1p1(config)) {
        return nf__err_set(err, NF_ERR_CHECKPOINT,
                           "%s: this is a TabSTAR v1.1 checkpoint (tabstarv1p1: 6-wide numeric input, LayerNorm "
                           "fusion, 200-bin regression head); nofall runs the original TabSTAR (alana89/TabSTAR) only",
                           config_path);
    }
    nf_tab * m = calloc(1, sizeof(*m));
    if (!m) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    m->be = be;
    int rc = nf__tab_config_parse(config, config_path, &m->cfg, err);
    if (rc != NF_OK) goto fail;
    m->bert = calloc((size_t) m->cfg.text_layers, sizeof(*m->bert));
    m->tab = calloc(NF_TAB_LAYERS, sizeof(*m->tab));
    if (!m->bert || !m->tab) {
        rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
        goto fail;
    }
    /* vocab.txt beside config.json */
    char dir[4096], vpath[4200];
    snprintf(dir, sizeof(dir), "%s", config_path);
    char * slash = strrchr(dir, '/');
    if (slash)
        slash[1] = '\0';
    else
        snprintf(dir, sizeof(dir), ".");
    nf__path_join(vpath, sizeof(vpath), dir, "vocab.txt");
    rc = nf__wp_load(vpath, &m->vocab, err);
    if (rc != NF_OK) goto fail;
    if (nf__wp_vocab_size(m->vocab) != m->cfg.vocab) {
        rc = nf__err_set(
            err, NF_ERR_CHECKPOINT,
            "%s has %d tokens, but the model's word_embeddings has %d rows (a vocabulary of another model?)", vpath,
            nf__wp_vocab_size(m->vocab), m->cfg.vocab);
        goto fail;
    }
    if (nf__wp_special_id(m->vocab, NF_WP_CLS) < 0 || nf__wp_special_id(m->vocab, NF_WP_SEP) < 0) {
        rc = nf__err_set(err, NF_ERR_CHECKPOINT, "%s: no [CLS]/[SEP]", vpath);
        goto fail;
    }
    rc = nf__weights_load(be, weights, &nf__tab_wtable, &m->cfg, m, &m->weights, err);
    if (rc != NF_OK) goto fail;
    nf__tab_bind_views(m);
    m->inputs[0] = (struct nf_input_desc){"token_ids", NF_ARRAY_I64, 2, "n_strings max_len", m->cfg.vocab};
    m->inputs[1] = (struct nf_input_desc){"token_lengths", NF_ARRAY_I64, 1, "n_strings", 0};
    m->inputs[2] = (struct nf_input_desc){"cells", NF_ARRAY_I64, 2, "batch n_cells", 0};
    m->inputs[3] = (struct nf_input_desc){"x_num", NF_ARRAY_F32, 2, "batch n_cells", 0};
    *out = m;
    return NF_OK;
fail:
    nf__tab_free(m);
    return rc;
}

const struct nf__wordpiece * nf__tab_vocab(const nf_model * model) {
    return model && strcmp(model->iface->type, "tabstar") == 0 ? ((const nf_tab *) model->impl)->vocab : NULL;
}

static const struct nf_weights * nf__tab_weights(const void * impl) { return &((const nf_tab *) impl)->weights; }

static int nf__tab_config_item(const void * impl, int i, struct nf_config_item * out) {
    const struct nf_tab_config * c = &((const nf_tab *) impl)->cfg;
    const struct nf_config_item items[] = {
        {"d_model", NULL, NF_TAB_D},
        {"text_layers", NULL, c->text_layers},
        {"text_heads", NULL, c->text_heads},
        {"vocab_size", NULL, c->vocab},
        {"fusion_heads", NULL, NF_TAB_FUSION_HEADS},
        {"interaction_layers", NULL, NF_TAB_LAYERS},
        {"interaction_heads", NULL, NF_TAB_HEADS},
        {"max_tokens", NULL, NF_TAB_MAX_TOKENS},
    };
    if (i < 0 || i >= (int) (sizeof(items) / sizeof(items[0]))) return 0;
    *out = items[i];
    return 1;
}

static int nf__tab_n_inputs(const void * impl) {
    (void) impl;
    return 5;
}

static const struct nf_input_desc nf__tab_target_desc = {"target_tokens", NF_ARRAY_I64, 1, "C", 0};

static const struct nf_input_desc * nf__tab_input(const void * impl, int i) {
    if (i == 4) return &nf__tab_target_desc;
    return i >= 0 && i < 4 ? &((const nf_tab *) impl)->inputs[i] : NULL;
}

static const char * const nf__tab_in_names[5] = {"token_ids", "token_lengths", "cells", "x_num", "target_tokens"};

static int nf__tab_find(const struct nf_array * in, int n_in, const struct nf_array ** a, nf_err * err) {
    for (int k = 0; k < 5; k++) a[k] = NULL;
    for (int i = 0; i < n_in; i++) {
        int k = 0;
        while (k < 5 && strcmp(in[i].name, nf__tab_in_names[k]) != 0) k++;
        char e[128];
        if (k == 5) return nf__err_set(err, NF_ERR_ARG, "tabstar has no input '%s'", nf__esc(e, sizeof(e), in[i].name));
        if (a[k]) return nf__err_set(err, NF_ERR_ARG, "tabstar: input '%s' given twice", nf__tab_in_names[k]);
        a[k] = &in[i];
    }
    for (int k = 0; k < 5; k++)
        if (!a[k]) return nf__err_set(err, NF_ERR_ARG, "tabstar needs the input %s", nf__tab_in_names[k]);
    const int want_dt[5] = {NF_ARRAY_I64, NF_ARRAY_I64, NF_ARRAY_I64, NF_ARRAY_F32, NF_ARRAY_I64};
    const int want_nd[5] = {2, 1, 2, 2, 1};
    for (int k = 0; k < 5; k++) {
        if (a[k]->dtype != want_dt[k] || a[k]->ndim != want_nd[k]) {
            return nf__err_set(err, NF_ERR_SHAPE, "tabstar input %s must be %s with %d dims", nf__tab_in_names[k],
                               want_dt[k] == NF_ARRAY_F32 ? "float32" : "int64", want_nd[k]);
        }
    }
    const int64_t U = a[0]->shape[0], B = a[2]->shape[0], S = a[2]->shape[1], C = a[4]->shape[0];
    if (a[1]->shape[0] != U)
        return nf__err_set(err, NF_ERR_SHAPE, "token_lengths has %lld entries for %lld strings",
                           (long long) a[1]->shape[0], (long long) U);
    if (a[3]->shape[0] != B || a[3]->shape[1] != S)
        return nf__err_set(err, NF_ERR_SHAPE, "x_num must be (%lld, %lld) like cells", (long long) B, (long long) S);
    if (C < 1 || C > S)
        return nf__err_set(err, NF_ERR_SHAPE, "%lld target tokens for %lld cells a row (1 <= C <= n_cells)",
                           (long long) C, (long long) S);
    if (U < 1 || a[0]->shape[1] < 2) return nf__err_set(err, NF_ERR_SHAPE, "token_ids: no strings");
    return NF_OK;
}

static int nf__tab_output_shape(const void * impl, const struct nf_array * in, int n_in, int * ndim, int64_t * shape,
                                nf_err * err) {
    (void) impl;
    const struct nf_array * a[5];
    NF_TRY(nf__tab_find(in, n_in, a, err));
    *ndim = 2;
    shape[0] = a[2]->shape[0];
    shape[1] = a[4]->shape[0];
    return NF_OK;
}

static int nf__tab_forward(void * impl, const struct nf_array * in, int n_in, float * out, nf_err * err) {
    nf_tab * m = impl;
    const struct nf_array * a[5];
    NF_TRY(nf__tab_find(in, n_in, a, err));
    const int64_t U = a[0]->shape[0], Lmax = a[0]->shape[1], B = a[2]->shape[0], S = a[2]->shape[1], C = a[4]->shape[0];
    const int64_t *ids = a[0]->data, *lens = a[1]->data, *cells = a[2]->data, *tt = a[4]->data;
    for (int64_t c = 0; c < C; c++)
        if (tt[c] != c) return nf__err_set(err, NF_ERR_INPUT, "target_tokens must be 0 .. C-1 in order");
    int64_t total = 0;
    for (int64_t u = 0; u < U; u++) {
        if (lens[u] < 2 || lens[u] > Lmax || lens[u] > NF_TAB_MAX_TOKENS)
            return nf__err_set(err, NF_ERR_INPUT, "token_lengths[%lld] = %lld is not in [2, min(%lld, %d)]",
                               (long long) u, (long long) lens[u], (long long) Lmax, NF_TAB_MAX_TOKENS);
        total += lens[u];
    }
    int32_t * ids32 = malloc((size_t) total * sizeof(int32_t));
    int32_t * lens32 = malloc((size_t) U * sizeof(int32_t));
    int32_t * cell32 = malloc((size_t) (B * S) * sizeof(int32_t));
    int rc = NF_OK;
    if (!ids32 || !lens32 || !cell32) {
        rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
        goto done;
    }
    int64_t o = 0;
    for (int64_t u = 0; u < U && rc == NF_OK; u++) {
        lens32[u] = (int32_t) lens[u];
        for (int64_t j = 0; j < lens[u]; j++) {
            const int64_t id = ids[u * Lmax + j];
            if (id < 0 || id >= m->cfg.vocab) {
                rc = nf__err_set(err, NF_ERR_INPUT, "token_ids[%lld][%lld] = %lld is outside the vocabulary (%d)",
                                 (long long) u, (long long) j, (long long) id, m->cfg.vocab);
                break;
            }
            ids32[o++] = (int32_t) id;
        }
    }
    for (int64_t i = 0; i < B * S && rc == NF_OK; i++) {
        if (cells[i] < 0 || cells[i] >= U) {
            rc = nf__err_set(err, NF_ERR_INPUT, "cells[%lld][%lld] = %lld is not a string index (0 .. %lld)",
                             (long long) (i / S), (long long) (i % S), (long long) cells[i], (long long) (U - 1));
            break;
        }
        cell32[i] = (int32_t) cells[i];
    }
    if (rc == NF_OK) rc = nf__tab_forward_tokens(m, ids32, lens32, U, cell32, a[3]->data, B, S, C, out, err);
done:
    free(ids32);
    free(lens32);
    free(cell32);
    return rc;
}

static void nf__tab_release(void * impl) { nf__tab_release_workspace(impl); }
static int nf__tab_stages(const void * impl) { return nf__tab_stage_count(impl); }
static int nf__tab_stage(const void * impl, int i, char * out, size_t n) { return nf__tab_stage_name(impl, i, out, n); }
static void nf__tab_set_stage_callback(void * impl, int stages, nf_stage_fn fn, void * user) {
    nf_tab * m = impl;
    m->stage_fn = fn;
    m->stage_user = user;
    m->stages = fn ? stages : NF_STAGES_NONE;
}
static int nf__tab_get_option(const void * impl, const char * key, int64_t * value) {
    const nf_tab * m = impl;
    if (strcmp(key, "distinct_strings") == 0) {
        *value = m->last_strings;
        return 1;
    }
    if (strcmp(key, "text_tokens") == 0) {
        *value = m->last_tokens;
        return 1;
    }
    return 0;
}
static void nf__tab_placement(const void * impl, struct nf_placement * out) {
    const nf_tab * m = impl;
    snprintf(out->inputs, sizeof(out->inputs), "%s", m->placement.inputs);
    snprintf(out->outputs, sizeof(out->outputs), "%s", m->placement.logits);
    snprintf(out->ops, sizeof(out->ops), "%s", m->placement.ops);
}

static const char * const nf__tab_run_options[] = {"seed", "cells", "adapter", NULL};
static const char * const nf__tab_artifacts[] = {"logits.npy",      "probabilities.npy", "class_ids.npy",
                                                 "predictions.npy", "report.json",       NULL};

const struct nf_model_i nf__tabstar_model = {
    .type = "tabstar",
    .description = "TabSTAR: e5-small BERT cell embeddings, numeric fusion, a 6-layer cell transformer",
    .load = nf__tab_load,
    .free = nf__tab_free,
    .weights = nf__tab_weights,
    .config_item = nf__tab_config_item,
    .n_inputs = nf__tab_n_inputs,
    .input = nf__tab_input,
    .output_name = "logits",
    .output_shape = nf__tab_output_shape,
    .forward = nf__tab_forward,
    .release_workspace = nf__tab_release,
    .set_option = NULL,
    .get_option = nf__tab_get_option,
    .stage_count = nf__tab_stages,
    .stage_name = nf__tab_stage,
    .set_stage_callback = nf__tab_set_stage_callback,
    .placement = nf__tab_placement,
    .gen_options = nf__tab_gen_options,
    .gen_weights = nf__tab_gen_weights,
    .ckpt_name = NULL,
    .inputs = nf__tab_own_inputs,
    .apply_adapter = nf__tab_apply_adapter,
    .run_options = nf__tab_run_options,
    .inputs_check = nf__tab_inputs_check,
    .artifacts = nf__tab_artifacts,
    .write_outputs = nf__tab_write_outputs,
    .check_outputs = nf__tab_check_outputs,
    .verify = &nf__tabstar_verify,
};
