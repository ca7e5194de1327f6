/* sptransformer.c -- SpTransformer (SpliceTransformer, ShenLab-Genomics):
 * strict checkpoint loading and the model interface. Spec:
 * shared/specs/sptransformer.md.
 *
 * config.json, the strict check of all 586 state_dict entries (names incl.
 * the §4.3 alias spellings, dtypes, shapes; num_batches_tracked optional),
 * the one upload of the weights with every tensor bound to its slot, the
 * input/output description (tokens (B, L) -> position_logits (B, L - 2
 * context, 18)); the forward is sptransformer-forward.c. */
#include "sptransformer-impl.h"
#include "model.h"
#include "io/nf-io.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void nf__spt_free(void * impl) {
    nf_spt * m = impl;
    if (!m) return;
    nf__spt_release_workspace(m);
    nf__weights_free(&m->weights);
    if (m->enc)
        for (int e = 0; e < NF_SPT_N_ENCODERS; e++) free(m->enc[e].res);
    free(m->enc);
    free(m->layers);
    free(m);
}

static int nf__spt_load(nf_backend * be, const char * weights, const cJSON * config, const char * config_path,
                        void ** out, nf_err * err) {
    *out = NULL;
    nf_spt * m = calloc(1, sizeof(*m));
    if (!m) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    m->be = be;
    m->batch_reuse = 1;
    int rc = nf__spt_config_parse(config, config_path, &m->cfg, err);
    if (rc != NF_OK) {
        nf__spt_free(m);
        return rc;
    }
    m->enc = calloc(NF_SPT_N_ENCODERS, sizeof(*m->enc));
    m->layers = calloc((size_t) (m->cfg.attn_depth ? m->cfg.attn_depth : 1), sizeof(*m->layers));
    int ok = m->enc && m->layers;
    for (int e = 0; ok && e < NF_SPT_N_ENCODERS; e++)
        ok = (m->enc[e].res = calloc(NF_SPT_N_RESBLOCKS, sizeof(*m->enc[e].res))) != NULL;
    if (!ok) {
        nf__spt_free(m);
        return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    }
    rc = nf__weights_load(be, weights, &nf__spt_wtable, &m->cfg, m, &m->weights, err);
    if (rc != NF_OK) {
        nf__spt_free(m);
        return rc;
    }
    nf__spt_bind_views(m);
    m->input = (struct nf_input_desc){"tokens", NF_ARRAY_I64, 2, "batch length", NF_SPT_N + 1};
    *out = m;
    return NF_OK;
}

static const struct nf_weights * nf__spt_weights(const void * impl) { return &((const nf_spt *) impl)->weights; }

static int nf__spt_config_item(const void * impl, int i, struct nf_config_item * out) {
    const struct nf_spt_config * c = &((const nf_spt *) impl)->cfg;
    const struct nf_config_item items[] = {
        {"dim", NULL, c->dim},
        {"context_len", NULL, c->context_len},
        {"tissue_num", NULL, c->tissue_num},
        {"max_seq_len", NULL, c->max_seq_len},
        {"attn_depth", NULL, c->attn_depth},
        {"attn_dim", NULL, c->attn_dim},
        {"heads", NULL, c->heads},
        {"dim_head", NULL, c->dim_head},
        {"n_local_attn_heads", NULL, c->n_local_attn_heads},
        {"bucket_size", NULL, c->bucket_size},
        {"ff_mult", NULL, c->ff_mult},
    };
    if (i < 0 || i >= (int) (sizeof(items) / sizeof(items[0]))) return 0;
    *out = items[i];
    return 1;
}

static int nf__spt_n_inputs(const void * impl) {
    (void) impl;
    return 1;
}

static const struct nf_input_desc * nf__spt_input(const void * impl, int i) {
    return i == 0 ? &((const nf_spt *) impl)->input : NULL;
}

/* tokens (B, L) int64 ids 0..4, 2 context + 1 <= L <= 2 context + max_seq_len
 * -> position_logits (B, L - 2 context, 3 + tissue_num) */
static int nf__spt_output_shape(const void * impl, const struct nf_array * in, int n_in, int * ndim, int64_t * shape,
                                nf_err * err) {
    const nf_spt * m = impl;
    const struct nf_array * t = NULL;
    for (int i = 0; i < n_in; i++) {
        if (strcmp(in[i].name, "tokens") == 0)
            t = &in[i];
        else
            return nf__err_set(err, NF_ERR_ARG, "sptransformer takes one input, tokens; got '%s'", in[i].name);
    }
    if (!t) return nf__err_set(err, NF_ERR_ARG, "sptransformer needs the input tokens (batch, length)");
    if (t->dtype != NF_ARRAY_I64 || t->ndim != 2)
        return nf__err_set(err, NF_ERR_SHAPE, "tokens must be int64 (batch, length)");
    const int64_t ctx2 = 2 * (int64_t) m->cfg.context_len, L = t->shape[1];
    if (t->shape[0] < 1 || L < ctx2 + 1 || L > ctx2 + m->cfg.max_seq_len) {
        return nf__err_set(
            err, NF_ERR_SHAPE,
            "tokens: length %lld is not in [%lld, %lld] (%d nt of context each side + 1 .. %d positions), batch %lld",
            (long long) L, (long long) (ctx2 + 1), (long long) (ctx2 + m->cfg.max_seq_len), m->cfg.context_len,
            m->cfg.max_seq_len, (long long) t->shape[0]);
    }
    *ndim = 3;
    shape[0] = t->shape[0];
    shape[1] = L - ctx2;
    shape[2] = NF_SPT_N_SPLICE + m->cfg.tissue_num;
    return NF_OK;
}

static int nf__spt_forward(void * impl, const struct nf_array * in, int n_in, float * out, nf_err * err) {
    nf_spt * m = impl;
    int ndim;
    int64_t shape[NF_ARRAY_MAX_DIMS];
    NF_TRY(nf__spt_output_shape(impl, in, n_in, &ndim, shape, err));
    if (!in[0].data || !out) return nf__err_set(err, NF_ERR_ARG, "sptransformer forward: tokens or output is NULL");
    return nf__spt_forward_tokens(m, in[0].data, in[0].shape[0], in[0].shape[1], out, err);
}

static void nf__spt_release(void * impl) { nf__spt_release_workspace(impl); }

static int nf__spt_set_option(void * impl, const char * key, int64_t value, nf_err * err) {
    nf_spt * m = impl;
    if (strcmp(key, "batch_reuse") != 0)
        return nf__err_set(err, NF_ERR_ARG, "sptransformer has no option \"%s\" (batch_reuse)", key);
    if (value < 0 || value > 2)
        return nf__err_set(err, NF_ERR_ARG, "batch_reuse is 0 (off), 1 (where it saves) or 2 (always), not %lld",
                           (long long) value);
    m->batch_reuse = value;
    return NF_OK;
}

/* batch_reuse; of the last forward: distinct (sequences computed), reused
 * (of those, the ones whose encoder rows came partly from another) */
static int nf__spt_get_option(const void * impl, const char * key, int64_t * value) {
    const nf_spt * m = impl;
    const int64_t * v = strcmp(key, "batch_reuse") == 0 ? &m->batch_reuse
                        : strcmp(key, "distinct") == 0  ? &m->last_distinct
                        : strcmp(key, "reused") == 0    ? &m->last_reused
                                                        : NULL;
    if (!v) return 0;
    *value = *v;
    return 1;
}
static int nf__spt_stages(const void * impl) { return nf__spt_stage_count(impl); }
static int nf__spt_stage(const void * impl, int i, char * out, size_t n) { return nf__spt_stage_name(impl, i, out, n); }
static void nf__spt_set_stage_callback(void * impl, int stages, nf_stage_fn fn, void * user) {
    nf_spt * m = impl;
    m->stage_fn = fn;
    m->stage_user = user;
    m->stages = fn ? stages : NF_STAGES_NONE;
}
static void nf__spt_placement(const void * impl, struct nf_placement * out) {
    const nf_spt * m = impl;
    snprintf(out->inputs, sizeof(out->inputs), "%s", m->placement.inputs);
    snprintf(out->outputs, sizeof(out->outputs), "%s", m->placement.logits);
    snprintf(out->ops, sizeof(out->ops), "%s", m->placement.ops);
}

/* a bare .ckpt (upstream's released file) has no config.json: the released configuration */
static struct cJSON * nf__spt_config_released(void) {
    struct nf_spt_config cfg;
    nf__spt_config_default(&cfg);
    return nf__spt_config_json(&cfg);
}
/* sptransformer-inputs.c */
int nf__spt_own_inputs(nf_model * model, int n, const char * const * keys, const char * const * values,
                       const struct nf_array * given, int n_given, struct nf_inputs * out, nf_err * err);
int nf__spt_inputs_check(int n, const char * const * keys, const char * const * values, nf_err * err);
int nf__spt_write_outputs(nf_model * model, const struct nf_inputs * in, const float * logits, const char * adapter,
                          const char * dir, struct nf_run_outputs * res, nf_err * err);
int nf__spt_check_outputs(nf_model * model, const struct nf_inputs * in, const float * logits, const char * dir,
                          nf_err * err);
static const char * const nf__spt_run_options[] = {"seed",     "length", "positions", "batch",   "tokens",
                                                   "sequence", "fasta",  "region",    "context", NULL};
static const char * const nf__spt_artifacts[] = {
    "tokens.npy", "position_logits.npy", "class_ids.npy", "probabilities.npy", "encoding_metadata.json", "report.json",
    NULL};

const struct nf_model_i nf__sptransformer_model = {
    .type = "sptransformer",
    .description = "SpTransformer (SpliceTransformer): splice sites and tissue usage from sequence",
    .load = nf__spt_load,
    .free = nf__spt_free,
    .weights = nf__spt_weights,
    .config_item = nf__spt_config_item,
    .n_inputs = nf__spt_n_inputs,
    .input = nf__spt_input,
    .output_name = "position_logits",
    .output_shape = nf__spt_output_shape,
    .forward = nf__spt_forward,
    .release_workspace = nf__spt_release,
    .set_option = nf__spt_set_option,
    .get_option = nf__spt_get_option,
    .stage_count = nf__spt_stages,
    .stage_name = nf__spt_stage,
    .set_stage_callback = nf__spt_set_stage_callback,
    .placement = nf__spt_placement,
    .gen_options = nf__spt_gen_options,
    .gen_weights = nf__spt_gen_weights,
    .ckpt_name = "SpTransformer_pytorch.ckpt", /* upstream's file name (its README, tasks_annotate_mutations.py) */
    .config_default = nf__spt_config_released,
    .config_default_what = "the released SpTransformer configuration",
    .inputs = nf__spt_own_inputs,
    .run_options = nf__spt_run_options,
    .inputs_check = nf__spt_inputs_check,
    .artifacts = nf__spt_artifacts,
    .write_outputs = nf__spt_write_outputs,
    .check_outputs = nf__spt_check_outputs,
    .verify = &nf__spt_verify,
};
