/* mitra.c -- Mitra (AutoGluon Tab2D): strict checkpoint loading and the
 * in-context forward pass. Spec: shared/specs/mitra.md §2-§4.
 *
 * Layout of the residual streams (b = 1, no padding):
 *   S (n_s, T, D) support, Q (n_q, T, D) query; T = F + 1, token 0 = label.
 * Per layer l (pre-LayerNorm, residual):
 *   (a) row attention     S += O1(MHA(Q1 S', K1 S', V1 S')),  Q += O1(MHA(Q1 Q', K1 S', V1 S'))
 *                          per token column t, across rows; S' = LN1(S), Q' = LN1(Q)
 *   (b) MLP 1              X += linear2(GELU(linear1(LN2(X))))          X in {S, Q}
 *   (c) feature attention  X += O2(MHA(Q2 X', K2 X', V2 X')), X' = LN3(X), across the T tokens of a row
 *   (d) MLP 2              X += linear4(GELU(linear3(LN4(X))))
 * Head: logits = final_layer(final_layer_norm(Q[:, 0, :])).
 * Support and query rows live in one stream X = [S; Q] (n_s + n_q rows), so
 * every sub-block runs one GEMM over both; only the row-attention keys and
 * values come from the support rows alone. Layer-major order: the support is
 * computed once whatever the number of queries, and each sub-block walks X
 * in row chunks, so the scratch memory is bounded (the streams themselves
 * are O(rows x T x D)). The q, k, v weights of each attention sit back to
 * back on the device, so each projection is one LINEAR into [q k v]
 * (tokens, 3D) and ATTENTION reads q, k, v from it by stride. */
#include "mitra-forward.h"
#include "model.h"
#include "io/nf-io.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- loading --------------------------------------------------------------------- */

/* views over the packed q, k, v (the weight table packs them back to back) */
static void nf__mitra_bind_qkv(nf_mitra * m) {
    const int64_t D = m->cfg.dim;
    for (int l = 0; l < m->cfg.n_layers; l++) {
        struct nf_mitra_layer * L = &m->layers[l];
        for (int a = 0; a < 2; a++) {
            const int64_t ne_qkv_w[2] = {3 * D, D}, ne_kv_w[2] = {2 * D, D}, ne_qkv_b[1] = {3 * D},
                          ne_kv_b[1] = {2 * D};
            snprintf(L->qkv_name[a][0], sizeof(L->qkv_name[a][0]), "layers.%d.attention%d.qkv", l, a + 1);
            snprintf(L->qkv_name[a][1], sizeof(L->qkv_name[a][1]), "layers.%d.attention%d.kv", l, a + 1);
            L->qkv_w[a] = nf__tensor_view(&L->aw[a][0], 0, 2, ne_qkv_w);
            L->qkv_b[a] = nf__tensor_view(&L->ab[a][0], 0, 1, ne_qkv_b);
            L->kv_w[a] = nf__tensor_view(&L->aw[a][1], 0, 2, ne_kv_w);
            L->kv_b[a] = nf__tensor_view(&L->ab[a][1], 0, 1, ne_kv_b);
            L->qkv_w[a].name = L->qkv_b[a].name = L->qkv_name[a][0];
            L->kv_w[a].name = L->kv_b[a].name = L->qkv_name[a][1];
        }
    }
}

static void nf__mitra_describe_inputs(nf_mitra * m);

static void nf__mitra_free(void * impl) {
    nf_mitra * m = impl;
    if (!m) return;
    nf_mitra_release_workspace(m);
    nf__weights_free(&m->weights);
    free(m->layers);
    free(m);
}

static int nf__mitra_load(nf_backend * be, const char * weights, const cJSON * config, const char * config_path,
                          void ** out, nf_err * err) {
    *out = NULL;
    nf_mitra * m = calloc(1, sizeof(*m));
    if (!m) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    m->be = be;
    m->chunk_tokens = be->chunk_tokens > 0 ? be->chunk_tokens : 4096;
    int rc = nf__mitra_config_parse(config, config_path, &m->cfg, err);
    if (rc != NF_OK) {
        nf__mitra_free(m);
        return rc;
    }
    m->layers = calloc((size_t) (m->cfg.n_layers ? m->cfg.n_layers : 1), sizeof(*m->layers));
    if (!m->layers) {
        nf__mitra_free(m);
        return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    }
    rc = nf__weights_load(be, weights, &nf__mitra_wtable, &m->cfg, m, &m->weights, err);
    if (rc != NF_OK) {
        nf__mitra_free(m);
        return rc;
    }
    nf__mitra_bind_qkv(m);
    nf__mitra_describe_inputs(m);
    *out = m;
    return NF_OK;
}

/* ---- the model interface ------------------------------------------------------------ */

static const struct nf_weights * nf__mitra_weights(const void * impl) { return &((const nf_mitra *) impl)->weights; }

static int nf__mitra_config_item(const void * impl, int i, struct nf_config_item * out) {
    const struct nf_mitra_config * c = &((const nf_mitra *) impl)->cfg;
    static const char * const tasks[2] = {"CLASSIFICATION", "REGRESSION"};
    switch (i) {
        case 0: *out = (struct nf_config_item){"dim", NULL, c->dim}; return 1;
        case 1: *out = (struct nf_config_item){"dim_output", NULL, c->dim_output}; return 1;
        case 2: *out = (struct nf_config_item){"n_layers", NULL, c->n_layers}; return 1;
        case 3: *out = (struct nf_config_item){"n_heads", NULL, c->n_heads}; return 1;
        case 4: *out = (struct nf_config_item){"task", tasks[c->task], 0}; return 1;
        default: return 0;
    }
}

static int nf__mitra_n_inputs(const void * impl) { return NF_MITRA_N_INPUTS; }

static const struct nf_input_desc * nf__mitra_input(const void * impl, int i) {
    const nf_mitra * m = impl;
    return i >= 0 && i < NF_MITRA_N_INPUTS ? &m->inputs[i] : NULL;
}

static void nf__mitra_describe_inputs(nf_mitra * m) {
    const int cls = nf__mitra_class_labels(&m->cfg);
    m->inputs[NF_MITRA_SUPPORT_X] = (struct nf_input_desc){"support_x", NF_ARRAY_F32, 2, "n_support n_features", 0};
    m->inputs[NF_MITRA_SUPPORT_Y] = (struct nf_input_desc){"support_y", cls ? NF_ARRAY_I64 : NF_ARRAY_F32, 1,
                                                           "n_support", cls ? m->cfg.dim_output : 0};
    m->inputs[NF_MITRA_QUERY_X] = (struct nf_input_desc){"query_x", NF_ARRAY_F32, 2, "n_query n_features", 0};
}

/* the generic inputs as Mitra's: by name, dtype and shape */
static int nf__mitra_inputs(const nf_mitra * m, const struct nf_array * in, int n_in, struct nf_mitra_input * out,
                            nf_err * err) {
    const struct nf_array * a[NF_MITRA_N_INPUTS] = {NULL};
    for (int i = 0; i < n_in; i++) {
        int k = 0;
        while (k < NF_MITRA_N_INPUTS && strcmp(in[i].name, nf__mitra_input(m, k)->name) != 0) k++;
        if (k == NF_MITRA_N_INPUTS) return nf__err_set(err, NF_ERR_ARG, "mitra takes no input named '%s'", in[i].name);
        if (a[k]) return nf__err_set(err, NF_ERR_ARG, "input '%s' given twice", in[i].name);
        a[k] = &in[i];
    }
    for (int k = 0; k < NF_MITRA_N_INPUTS; k++) {
        const struct nf_input_desc * d = nf__mitra_input(m, k);
        if (!a[k]) return nf__err_set(err, NF_ERR_ARG, "missing input '%s'", d->name);
        if (a[k]->ndim != d->ndim)
            return nf__err_set(err, NF_ERR_SHAPE, "input '%s' must be %d-D (%s), got %d-D", d->name, d->ndim, d->dims,
                               a[k]->ndim);
        if (a[k]->dtype != d->dtype) {
            return nf__err_set(err, NF_ERR_INPUT,
                               d->dtype == NF_ARRAY_I64 ? "this model needs integer class labels"
                                                        : "input '%s' must be float32",
                               d->name);
        }
    }
    const struct nf_array *xs = a[NF_MITRA_SUPPORT_X], *ys = a[NF_MITRA_SUPPORT_Y], *xq = a[NF_MITRA_QUERY_X];
    if (xq->shape[1] != xs->shape[1]) {
        return nf__err_set(err, NF_ERR_SHAPE, "query_x has %lld features but support_x has %lld",
                           (long long) xq->shape[1], (long long) xs->shape[1]);
    }
    if (ys->shape[0] != xs->shape[0]) {
        return nf__err_set(err, NF_ERR_SHAPE, "support_y has %lld rows but support_x has %lld",
                           (long long) ys->shape[0], (long long) xs->shape[0]);
    }
    *out = (struct nf_mitra_input){
        .n_support = xs->shape[0],
        .n_query = xq->shape[0],
        .n_features = xs->shape[1],
        .x_support = xs->data,
        .x_query = xq->data,
        .y_class = ys->dtype == NF_ARRAY_I64 ? ys->data : NULL,
        .y_value = ys->dtype == NF_ARRAY_F32 ? ys->data : NULL,
    };
    return NF_OK;
}

static int nf__mitra_output_shape(const void * impl, const struct nf_array * in, int n_in, int * ndim, int64_t * shape,
                                  nf_err * err) {
    const nf_mitra * m = impl;
    struct nf_mitra_input mi;
    NF_TRY(nf__mitra_inputs(m, in, n_in, &mi, err));
    shape[0] = mi.n_query;
    /* one value per query row for a regressor with one output */
    if (m->cfg.task == NF_TASK_REGRESSION && m->cfg.dim_output == 1) {
        *ndim = 1;
    } else {
        *ndim = 2;
        shape[1] = m->cfg.dim_output;
    }
    return NF_OK;
}

static int nf__mitra_forward(void * impl, const struct nf_array * in, int n_in, float * out, nf_err * err) {
    struct nf_mitra_input mi;
    NF_TRY(nf__mitra_inputs(impl, in, n_in, &mi, err));
    return nf_mitra_forward(impl, &mi, out, err);
}

static void nf__mitra_release(void * impl) { nf_mitra_release_workspace(impl); }

static int nf__mitra_set_option(void * impl, const char * key, int64_t value, nf_err * err) {
    nf_mitra * m = impl;
    int64_t * opt = strcmp(key, "chunk_rows") == 0    ? &m->chunk_rows
                    : strcmp(key, "query_chunk") == 0 ? &m->query_chunk
                    : strcmp(key, "kv_cache_mb") == 0 ? &m->kv_cache_mb
                    : strcmp(key, "query_begin") == 0 ? &m->query_begin
                    : strcmp(key, "query_end") == 0   ? &m->query_end
                                                      : NULL;
    if (!opt)
        return nf__err_set(err, NF_ERR_ARG,
                           "mitra has no option \"%s\" (chunk_rows, query_chunk, kv_cache_mb, query_begin, query_end)",
                           key);
    *opt = value > 0 ? value : 0;
    return NF_OK;
}

static int nf__mitra_get_option(const void * impl, const char * key, int64_t * value);

static int nf__mitra_write_config(const void * impl, const char * dir, nf_err * err) {
    return nf__mitra_config_write(dir, &((const nf_mitra *) impl)->cfg, err);
}

/* inputs.support_x, inputs.query_x, embedding, 4 per layer, head */
static int nf__mitra_stage_count(const void * impl) { return 4 + 4 * ((const nf_mitra *) impl)->cfg.n_layers; }

static int nf__mitra_stage_name(const void * impl, int i, char * out, size_t n) {
    static const char * const sub[4] = {"row_attention", "mlp1", "feature_attention", "mlp2"};
    const int count = nf__mitra_stage_count(impl);
    if (i < 0 || i >= count) return 0;
    if (i == 0)
        snprintf(out, n, "inputs.support_x");
    else if (i == 1)
        snprintf(out, n, "inputs.query_x");
    else if (i == 2)
        snprintf(out, n, "embedding");
    else if (i == count - 1)
        snprintf(out, n, "head");
    else
        snprintf(out, n, "layers.%d.%s", (i - 3) / 4, sub[(i - 3) % 4]);
    return 1;
}

static void nf__mitra_set_stage_callback(void * impl, int stages, nf_stage_fn fn, void * user) {
    nf_mitra * m = impl;
    m->stage_fn = fn;
    m->stage_user = user;
    m->stages = fn ? stages : NF_STAGES_NONE;
}

static void nf__mitra_placement(const void * impl, struct nf_placement * out) {
    const nf_mitra * m = impl;
    snprintf(out->inputs, sizeof(out->inputs), "%s", m->placement.inputs);
    snprintf(out->outputs, sizeof(out->outputs), "%s", m->placement.logits);
    snprintf(out->ops, sizeof(out->ops), "%s", m->placement.ops);
}

/* mitra-inputs.c */
int nf__mitra_own_inputs(nf_model * model, int n, const char * const * keys, const char * const * values,
                         const struct nf_array * given, int n_given, struct nf_inputs * out, nf_err * err);
int nf__mitra_inputs_check(int n, const char * const * keys, const char * const * values, nf_err * err);
int nf__mitra_write_outputs(nf_model * model, const struct nf_inputs * in, const float * logits, const char * adapter,
                            const char * dir, struct nf_run_outputs * res, nf_err * err);
int nf__mitra_check_outputs(nf_model * model, const struct nf_inputs * in, const float * logits, const char * dir,
                            nf_err * err);
static const char * const nf__mitra_run_options[] = {"seed",        "support",     "query",   "features",
                                                     "support_x",   "support_y",   "query_x", "chunk_rows",
                                                     "query_chunk", "kv_cache_mb", NULL};
static const char * const nf__mitra_artifacts[] = {"support_x.npy", "support_y.npy", "query_x.npy", "logits.npy",
                                                   "class_ids.npy", "report.json",   NULL};

const struct nf_model_i nf__mitra_model = {
    .type = "mitra",
    .description = "Mitra (AutoGluon Tab2D) in-context tabular classifier / regressor",
    .load = nf__mitra_load,
    .free = nf__mitra_free,
    .weights = nf__mitra_weights,
    .config_item = nf__mitra_config_item,
    .n_inputs = nf__mitra_n_inputs,
    .input = nf__mitra_input,
    .output_name = "logits",
    .output_shape = nf__mitra_output_shape,
    .forward = nf__mitra_forward,
    .release_workspace = nf__mitra_release,
    .set_option = nf__mitra_set_option,
    .get_option = nf__mitra_get_option,
    .stage_count = nf__mitra_stage_count,
    .stage_name = nf__mitra_stage_name,
    .set_stage_callback = nf__mitra_set_stage_callback,
    .placement = nf__mitra_placement,
    .write_config = nf__mitra_write_config,
    .gen_options = nf__mitra_gen_options,
    .gen_weights = nf__mitra_gen_weights,
    .inputs = nf__mitra_own_inputs,
    .run_options = nf__mitra_run_options,
    .inputs_check = nf__mitra_inputs_check,
    .artifacts = nf__mitra_artifacts,
    .write_outputs = nf__mitra_write_outputs,
    .check_outputs = nf__mitra_check_outputs,
    .verify = &nf__mitra_verify,
};

/* ---- forward: on the core's typed op calls ---------------------------------------- */

/* The forward is written with the core's typed op calls and Mitra's
 * sub-blocks (mitra-blocks.c); labels are formatted by the graph context. */

/* the whole stream, support rows first (NF_STAGES_ALL only) */
static int nf__stage(nf_mitra * m, struct nf__ws * w, const char * name, nf_err * err) {
    const nf_tensor x = nf__mitra_rows(w, &w->X, 0, w->nx);
    const int64_t shape[3] = {w->nx, w->T, w->D};
    return nf__workspace_stage(&w->mem, m->stages, m->stage_fn, m->stage_user, name, &x, 3, shape, 0, err);
}

/* ---- forward ---------------------------------------------------------------------------- */

int nf__mitra_check_input(const nf_mitra * m, const struct nf_mitra_input * in, nf_err * err) {
    if (in->n_support < 1) return nf__err_set(err, NF_ERR_INPUT, "support set is empty (need >= 1 row)");
    if (in->n_query < 1) return nf__err_set(err, NF_ERR_INPUT, "query set is empty (need >= 1 row)");
    if (in->n_features < 1) return nf__err_set(err, NF_ERR_INPUT, "no features (need >= 1 column)");
    if (in->n_support > (1 << 24))
        return nf__err_set(err, NF_ERR_INPUT, "support set too large for quantile (> 2^24 rows)");
    for (int64_t i = 0; i < in->n_support * in->n_features; i++) {
        if (!isfinite(in->x_support[i])) {
            return nf__err_set(err, NF_ERR_INPUT,
                               "support_x[%lld, %lld] is %s; inputs must be finite (impute NaN first)",
                               (long long) (i / in->n_features), (long long) (i % in->n_features),
                               isnan(in->x_support[i]) ? "NaN" : "Inf");
        }
    }
    for (int64_t i = 0; i < in->n_query * in->n_features; i++) {
        if (!isfinite(in->x_query[i])) {
            return nf__err_set(err, NF_ERR_INPUT, "query_x[%lld, %lld] is %s; inputs must be finite",
                               (long long) (i / in->n_features), (long long) (i % in->n_features),
                               isnan(in->x_query[i]) ? "NaN" : "Inf");
        }
    }
    if (nf__mitra_class_labels(&m->cfg)) {
        if (!in->y_class) return nf__err_set(err, NF_ERR_INPUT, "this model needs integer class labels");
        for (int64_t i = 0; i < in->n_support; i++) {
            if (in->y_class[i] < 0 || in->y_class[i] >= m->cfg.dim_output) {
                return nf__err_set(err, NF_ERR_INPUT, "support_y[%lld] = %lld is out of range 0..%d", (long long) i,
                                   (long long) in->y_class[i], m->cfg.dim_output - 1);
            }
        }
    } else {
        if (!in->y_value) return nf__err_set(err, NF_ERR_INPUT, "this model needs float regression targets");
        for (int64_t i = 0; i < in->n_support; i++) {
            if (!isfinite(in->y_value[i]))
                return nf__err_set(err, NF_ERR_INPUT, "support_y[%lld] is not finite", (long long) i);
        }
    }
    return NF_OK;
}

/* step 3 (spec §4.4): layer l over rows [rbeg, rend) of X, its row attention
 * against the support K/V kv (computed already); stages reported in a JOINT
 * pass. In the last layer the query rows' feature attention and second MLP
 * run on token 0 only (spec §4.9). */
static int nf__layer(nf_graph * g, nf_mitra * m, struct nf__ws * w, int l, nf_tensor kv, int64_t rbeg, int64_t rend,
                     int64_t crows, nf_err * err) {
    const struct nf_mitra_layer * L = &m->layers[l];
    char st[64];
#define NF__STAGE(name)                                 \
    do {                                                \
        snprintf(st, sizeof(st), "layers.%d." name, l); \
        NF_TRY(nf__stage(m, w, st, err));               \
    } while (0)
    /* the last layer of query rows only: after the row attention and the
     * first MLP, the head reads token 0 alone (not when the whole stream is
     * reported stage by stage) */
    const int tok0 = l == m->cfg.n_layers - 1 && rbeg >= w->ns && m->stages != NF_STAGES_ALL;
    NF_TRY(nf__mitra_row_attend(g, w, m, L, kv, rbeg, rend, crows));
    NF__STAGE("row_attention");
    NF_TRY(nf__mitra_mlp(g, w, L, 0, rbeg, rend, crows, 0));
    NF__STAGE("mlp1");
    NF_TRY(nf__mitra_feature_attention(g, w, m, L, rbeg, rend, crows, tok0));
    NF__STAGE("feature_attention");
    NF_TRY(nf__mitra_mlp(g, w, L, 1, rbeg, rend, crows, tok0));
    NF__STAGE("mlp2");
#undef NF__STAGE
    return NF_OK;
}

/* A JOINT pass: the support and query rows [q0, q0 + c) together, layer by
 * layer, one K/V slice reused. In the last layer the support rows only
 * provide row-attention keys/values: nothing downstream reads the rest of
 * their update, so it is skipped (spec §4.9). */
static int nf__pass_joint(nf_graph * g, nf_mitra * m, struct nf__ws * w, int64_t q0, int64_t c, int64_t crows,
                          nf_err * err) {
    NF_TRY(nf__mitra_embed_support(g, m, w));
    NF_TRY(nf__mitra_embed_queries(g, m, w, q0, c));
    NF_TRY(nf__stage(m, w, "embedding", err));
    const nf_tensor kv = nf__mitra_kv(w, 0);
    for (int l = 0; l < m->cfg.n_layers; l++) {
        nf_graph_prefix(g, "layers.%d.", l);
        NF_TRY(nf__mitra_row_kv(g, w, &m->layers[l], kv, crows));
        NF_TRY(nf__layer(g, m, w, l, kv, l == m->cfg.n_layers - 1 ? w->ns : 0, w->ns + c, crows, err));
    }
    nf_graph_prefix(g, "%s", "");
    return nf__mitra_head(g, m, w, q0, c);
}

/* STREAM: the support once, keeping each layer's K/V, then the queries qc
 * rows at a time through every layer (the passes of [qbegin, qend): qbegin a
 * multiple of qc) */
static int nf__pass_stream(nf_graph * g, nf_mitra * m, struct nf__ws * w, int64_t qbegin, int64_t qend, int64_t crows,
                           nf_err * err) {
    const int nl = m->cfg.n_layers;
    NF_TRY(nf__mitra_embed_support(g, m, w));
    for (int l = 0; l < nl; l++) {
        nf_graph_prefix(g, "layers.%d.", l);
        NF_TRY(nf__mitra_row_kv(g, w, &m->layers[l], nf__mitra_kv(w, l), crows));
        if (l < nl - 1) NF_TRY(nf__layer(g, m, w, l, nf__mitra_kv(w, l), 0, w->ns, crows, err));
    }
    for (int64_t q0 = qbegin; q0 < qend; q0 += w->qc) {
        const int64_t c = q0 + w->qc < w->nq ? w->qc : w->nq - q0;
        nf_graph_prefix(g, "%s", "");
        NF_TRY(nf__mitra_embed_queries(g, m, w, q0, c));
        for (int l = 0; l < nl; l++) {
            nf_graph_prefix(g, "layers.%d.", l);
            NF_TRY(nf__layer(g, m, w, l, nf__mitra_kv(w, l), w->ns, w->ns + c, crows, err));
        }
        nf_graph_prefix(g, "%s", "");
        NF_TRY(nf__mitra_head(g, m, w, q0, c));
    }
    return NF_OK;
}

static int nf__mitra_forward_ws(nf_mitra * m, struct nf__ws * w, const struct nf_mitra_input * in, float * logits,
                                nf_err * err) {
    nf_backend * be = m->be;
    const int cls = nf__mitra_class_labels(&m->cfg);
    const int64_t C = m->cfg.dim_output, T = w->T;
    if (m->stages != NF_STAGES_NONE) {
        const int64_t xs = nf__tensor_numel(&w->xs), xq = nf__tensor_numel(&w->xq);
        w->host_s = malloc((size_t) xs * sizeof(float));
        w->host_q = malloc((size_t) xq * sizeof(float));
        if (!w->host_s || !w->host_q) return nf__err_set(err, NF_ERR_NOMEM, "out of memory for stage dumps");
    }
    snprintf(m->placement.inputs, sizeof(m->placement.inputs), "%s", w->xs.buf->where);
    snprintf(m->placement.logits, sizeof(m->placement.logits), "%s", w->logits.buf->where);

    /* inputs in: the only host->device copies of a forward */
    NF_TRY(nf__tensor_upload(&w->xs, in->x_support, err));
    NF_TRY(nf__tensor_upload(&w->xq, in->x_query, err));
    if (cls) {
        int32_t * y32 = malloc((size_t) w->ns * sizeof(int32_t));
        if (!y32) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
        for (int64_t i = 0; i < w->ns; i++) y32[i] = (int32_t) in->y_class[i];
        int rc = nf__tensor_upload(&w->ys, y32, err);
        free(y32);
        NF_TRY(rc);
    } else {
        NF_TRY(nf__tensor_upload(&w->ys, in->y_value, err));
    }
    if (m->stages != NF_STAGES_NONE) {
        /* read the inputs back from the device, so a verifier can check that
         * both sides computed on byte-identical data */
        NF_TRY(nf__tensor_download(&w->xs, w->host_s, err));
        NF_TRY(nf__tensor_download(&w->xq, w->host_q, err));
        const int64_t sx[2] = {w->ns, w->F}, qx[2] = {w->nq, w->F};
        if (m->stage_fn(m->stage_user, "inputs.support_x", w->host_s, 2, sx) != 0 ||
            m->stage_fn(m->stage_user, "inputs.query_x", w->host_q, 2, qx) != 0) {
            return nf__err_set(err, NF_ERR_GENERIC, "stage callback failed at inputs");
        }
    }

    nf_graph gr, *g = &gr;
    nf_graph_init(g, be, err);

    /* step 1: quantile embedding statistics (spec §4.2), of all rows at once */
    NF_TRY(nf_quantile(g, "x_quantile", w->xs, w->B, NF_MITRA_N_QUANTILES, NF_MITRA_Q_DENOM));
    NF_TRY(nf_bucketize_norm(g, "x_quantile", w->xs, w->xq, w->B, w->zs, w->zq));

    /* steps 2-4, pass by pass */
    const int64_t cmax = w->ct / T > 0 ? w->ct / T : 1;
    const int64_t crows = m->chunk_rows > 0 && m->chunk_rows < cmax ? m->chunk_rows : cmax;
    /* the passes run: those starting in [query_begin, query_end) -- every
     * one by default; a shard of an MPI job runs its share of the very
     * passes (same plan, same shapes) the whole forward runs */
    const int64_t qend = m->query_end > 0 && m->query_end < w->nq ? m->query_end : w->nq;
    const int64_t lo = (m->query_begin + w->qc - 1) / w->qc * w->qc;
    const int64_t hi_pass = (qend + w->qc - 1) / w->qc * w->qc;
    m->rows_begin = lo < w->nq ? lo : w->nq;
    m->rows_end = hi_pass < w->nq ? hi_pass : w->nq;
    if (m->rows_end < m->rows_begin) m->rows_end = m->rows_begin;
    m->support_passes = 0;
    if (w->mode == NF__STREAM) {
        if (m->rows_begin < m->rows_end) {
            NF_TRY(nf__pass_stream(g, m, w, m->rows_begin, m->rows_end, crows, err));
            m->support_passes = 1;
        }
    } else {
        for (int64_t q0 = m->rows_begin; q0 < m->rows_end; q0 += w->qc) {
            NF_TRY(nf__pass_joint(g, m, w, q0, q0 + w->qc < w->nq ? w->qc : w->nq - q0, crows, err));
            m->support_passes++;
        }
    }
    /* outputs out: the only device->host copy; rows of passes not run are 0 */
    NF_TRY(nf__tensor_download(&w->logits, logits, err));
    if (m->rows_begin > 0) memset(logits, 0, (size_t) (m->rows_begin * C) * sizeof(float));
    if (m->rows_end < w->nq) memset(logits + m->rows_end * C, 0, (size_t) ((w->nq - m->rows_end) * C) * sizeof(float));
    if (m->stages != NF_STAGES_NONE) {
        const int64_t sh[2] = {w->nq, C};
        if (m->stage_fn(m->stage_user, "head", logits, m->cfg.task == NF_TASK_REGRESSION && C == 1 ? 1 : 2, sh) != 0) {
            return nf__err_set(err, NF_ERR_GENERIC, "stage callback failed at head");
        }
    }
    return NF_OK;
}

/* The device workspace of a forward is kept in the model and reused by the
 * next forward of the same shape, so repeated forwards (bench, serving)
 * allocate nothing on the device: on cuda a cudaMalloc/cudaFree pair per
 * buffer would cost more than the small forwards themselves. A forward of
 * another shape, a failed forward, nf_mitra_release_workspace and
 * nf_mitra_free release it. */
void nf_mitra_release_workspace(nf_mitra * m) {
    if (!m) return;
    nf__mitra_ws_free(m->ws);
    m->ws = NULL;
}

/* How the queries go through (see "the work area"): qc rows a pass, by
 * default as many as 16 sub-block chunks hold; STREAM while the support K/V
 * of every layer fit in kv_cache_mb (default 4096 MiB), else RECOMPUTE in
 * passes of at least n_s query rows (the support is recomputed per pass). */
static void nf__plan(const nf_mitra * m, struct nf__ws * w) {
    const int64_t qc_auto = 16 * w->ct / w->T > 0 ? 16 * w->ct / w->T : 1;
    w->qc = m->query_chunk > 0 ? m->query_chunk : qc_auto;
    w->mode = NF__JOINT;
    w->n_kv = 1;
    if (m->stages == NF_STAGES_ALL || w->nq <= w->qc) {
        w->qc = w->nq;
    } else {
        const double kv_bytes = (double) m->cfg.n_layers * (double) nf__mitra_kv_elems(w) * 4.0;
        const double budget = (double) (m->kv_cache_mb > 0 ? m->kv_cache_mb : 4096) * 1048576.0;
        if (kv_bytes <= budget) {
            w->mode = NF__STREAM;
            w->n_kv = m->cfg.n_layers;
        } else {
            w->mode = NF__RECOMPUTE;
            if (m->query_chunk <= 0 && w->qc < w->ns) w->qc = w->ns < w->nq ? w->ns : w->nq;
        }
    }
    w->nx = w->ns + w->qc;
}

static int nf__ws_get(nf_mitra * m, const struct nf_mitra_input * in, struct nf__ws ** out, nf_err * err) {
    const int64_t T = in->n_features + 1, D = m->cfg.dim;
    const int64_t ct = m->chunk_tokens > T ? m->chunk_tokens : T;
    struct nf__ws want = {.ns = in->n_support, .nq = in->n_query, .F = in->n_features, .T = T, .D = D, .ct = ct};
    nf__plan(m, &want);
    struct nf__ws * w = m->ws;
    if (w && w->ns == want.ns && w->nq == want.nq && w->F == want.F && w->D == D && w->ct == ct && w->qc == want.qc &&
        w->mode == want.mode) {
        *out = w;
        return NF_OK;
    }
    nf_mitra_release_workspace(m);
    w = calloc(1, sizeof(*w));
    if (!w) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    *w = want;
    int rc = nf__mitra_ws_alloc(m, w, m->cfg.dim_output, err);
    if (rc != NF_OK) {
        nf__mitra_ws_free(w);
        return rc;
    }
    *out = m->ws = w;
    return NF_OK;
}

int nf_mitra_forward(nf_mitra * m, const struct nf_mitra_input * in, float * logits, nf_err * err) {
    NF_TRY(nf__mitra_check_input(m, in, err));
    nf__trace_where_reset(m->be);
    struct nf__ws * w = NULL;
    int rc = nf__ws_get(m, in, &w, err);
    if (rc == NF_OK) rc = nf__mitra_forward_ws(m, w, in, logits, err);
    if (w) nf__mitra_ws_free_host(w);
    if (rc != NF_OK) nf_mitra_release_workspace(m); /* the device may be in error: start afresh */
    nf__trace_where(m->be, m->placement.ops, sizeof(m->placement.ops));
    return rc;
}

/* the options as set, and what the last forward did: "query_chunk_used"
 * (query rows a pass), "support_passes" (1 = the support computed once),
 * "kv_cache_bytes" (support K/V kept), "query_rows_begin" / "query_rows_end"
 * (the query rows computed: all of them unless query_begin / query_end) */
static int nf__mitra_get_option(const void * impl, const char * key, int64_t * value) {
    const nf_mitra * m = impl;
    const struct nf__ws * w = m->ws;
    if (strcmp(key, "chunk_rows") == 0)
        *value = m->chunk_rows;
    else if (strcmp(key, "query_chunk") == 0)
        *value = m->query_chunk;
    else if (strcmp(key, "kv_cache_mb") == 0)
        *value = m->kv_cache_mb;
    else if (strcmp(key, "support_passes") == 0)
        *value = m->support_passes;
    else if (strcmp(key, "query_chunk_used") == 0)
        *value = w ? w->qc : 0;
    else if (strcmp(key, "kv_cache_bytes") == 0)
        *value = w ? w->n_kv * nf__mitra_kv_elems(w) * 4 : 0;
    else if (strcmp(key, "query_begin") == 0)
        *value = m->query_begin;
    else if (strcmp(key, "query_end") == 0)
        *value = m->query_end;
    else if (strcmp(key, "query_rows_begin") == 0)
        *value = m->rows_begin;
    else if (strcmp(key, "query_rows_end") == 0)
        *value = m->rows_end;
    else
        return 0;
    return 1;
}
