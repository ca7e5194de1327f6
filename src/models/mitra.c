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
#include "mitra-impl.h"
#include "io/nf-io.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

struct nf_mitra_layer {
    nf_tensor ln_w[4], ln_b[4];          /* layer_norm1..4                 */
    nf_tensor aw[2][4], ab[2][4];         /* attention{1,2}.{q,k,v,o}       */
    nf_tensor lw[4], lb[4];              /* linear1..4                     */
    /* q, k, v of each attention are packed back to back on the device, so
     * one LINEAR computes all three: qkv = [q; k; v] (3D, D), kv = [k; v] */
    nf_tensor qkv_w[2], qkv_b[2], kv_w[2], kv_b[2];
    char      qkv_name[2][2][48];        /* "layers.L.attentionA.{qkv,kv}" */
};

struct nf_mitra {
    nf_backend * be;
    struct nf_mitra_config cfg;
    struct nf_mitra_key * keys;
    int       n_keys;
    nf_tensor wbuf;                      /* all weights, one device buffer */
    nf_tensor * w;                       /* n_keys views into wbuf         */
    nf_tensor x_w, x_b, y_w, y_b, y_mask, fln_w, fln_b, f_w, f_b;
    struct nf_mitra_layer * layers;
    int64_t   n_params;
    int64_t   chunk_tokens;
    int64_t   chunk_rows;
    nf_stage_fn stage_fn;
    void *      stage_user;
    int         stages;
    struct nf_mitra_placement placement;
    struct nf__ws * ws;                  /* the last forward's device workspace, kept for the next one */
};

/* ---- config -------------------------------------------------------------------- */

static int nf__json_int(const cJSON * doc, const char * key, const char * path, int * out, nf_err * err) {
    const cJSON * v = cJSON_GetObjectItemCaseSensitive(doc, key);
    if (!v) return nf__err_set(err, NF_ERR_CHECKPOINT, "%s: missing key \"%s\"", path, key);
    if (!cJSON_IsNumber(v) || v->valuedouble != (double) (int) v->valuedouble) {
        return nf__err_set(err, NF_ERR_CHECKPOINT, "%s: \"%s\" must be an integer", path, key);
    }
    *out = (int) v->valuedouble;
    return NF_OK;
}

static int nf__mitra_config_read(const char * dir, struct nf_mitra_config * cfg, nf_err * err) {
    char path[4096];
    nf__path_join(path, sizeof(path), dir, "config.json");
    cJSON * doc;
    NF_TRY(nf__json_read_file(path, &doc, err));
    int rc = NF_OK;
    if (!cJSON_IsObject(doc)) { rc = nf__err_set(err, NF_ERR_CHECKPOINT, "%s: not a JSON object", path); goto done; }
    if ((rc = nf__json_int(doc, "dim", path, &cfg->dim, err)) != NF_OK) goto done;
    if ((rc = nf__json_int(doc, "dim_output", path, &cfg->dim_output, err)) != NF_OK) goto done;
    if ((rc = nf__json_int(doc, "n_layers", path, &cfg->n_layers, err)) != NF_OK) goto done;
    if ((rc = nf__json_int(doc, "n_heads", path, &cfg->n_heads, err)) != NF_OK) goto done;
    const cJSON * task = cJSON_GetObjectItemCaseSensitive(doc, "task");
    /* upstream looks the task up by enum member name: Task[cfg["task"]] */
    if (!cJSON_IsString(task)) { rc = nf__err_set(err, NF_ERR_CHECKPOINT, "%s: missing string \"task\"", path); goto done; }
    if      (strcmp(task->valuestring, "CLASSIFICATION") == 0) cfg->task = NF_TASK_CLASSIFICATION;
    else if (strcmp(task->valuestring, "REGRESSION") == 0)     cfg->task = NF_TASK_REGRESSION;
    else { rc = nf__err_set(err, NF_ERR_CHECKPOINT, "%s: unknown task \"%s\" (CLASSIFICATION or REGRESSION)", path, task->valuestring); goto done; }
    rc = nf__mitra_config_check(cfg, path, err);
done:
    cJSON_Delete(doc);
    return rc;
}

/* ---- loading --------------------------------------------------------------------- */

static void nf__msg_append(char * msg, size_t cap, size_t * len, const char * fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
static void nf__msg_append(char * msg, size_t cap, size_t * len, const char * fmt, ...) {
    if (*len + 1 >= cap) return;
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(msg + *len, cap - *len, fmt, ap);
    va_end(ap);
    if (w > 0) *len = *len + (size_t) w < cap ? *len + (size_t) w : cap - 1;
}

static void nf__shape_str(char * out, size_t n, int ndim, const int64_t * shape) {
    size_t len = 0;
    out[0] = '\0';
    nf__msg_append(out, n, &len, "[");
    for (int i = 0; i < ndim; i++) nf__msg_append(out, n, &len, i ? ", %lld" : "%lld", (long long) shape[i]);
    nf__msg_append(out, n, &len, "]");
}

/* Strict load_state_dict: same set of names, F32, same shapes. Lists every
 * offending name (up to the message size). */
static int nf__mitra_check_keys(const struct nf_safetensors * st, const struct nf_mitra_key * keys, int n_keys,
                                const char * path, nf_err * err) {
    char msg[3500];
    size_t len = 0;
    int bad = 0;
    msg[0] = '\0';
    for (int i = 0; i < n_keys; i++) {
        const struct nf_st_tensor * t = nf__st_find(st, keys[i].name);
        if (!t) { nf__msg_append(msg, sizeof(msg), &len, "%smissing '%s'", bad++ ? "; " : "", keys[i].name); continue; }
        if (t->dtype != NF_ST_F32) {
            nf__msg_append(msg, sizeof(msg), &len, "%s'%s' has dtype %s (expected F32)", bad++ ? "; " : "", keys[i].name, t->dtype_str);
            continue;
        }
        int same = t->ndim == keys[i].ndim;
        for (int d = 0; same && d < t->ndim; d++) same = t->shape[d] == keys[i].shape[d];
        if (!same) {
            char got[96], want[96];
            nf__shape_str(got, sizeof(got), t->ndim, t->shape);
            nf__shape_str(want, sizeof(want), keys[i].ndim, keys[i].shape);
            nf__msg_append(msg, sizeof(msg), &len, "%s'%s' has shape %s (expected %s)", bad++ ? "; " : "", keys[i].name, got, want);
        }
    }
    for (int j = 0; j < st->n_tensors; j++) {
        int known = 0;
        for (int i = 0; i < n_keys && !known; i++) known = strcmp(st->tensors[j].name, keys[i].name) == 0;
        if (!known) nf__msg_append(msg, sizeof(msg), &len, "%sunexpected '%s'", bad++ ? "; " : "", st->tensors[j].name);
    }
    if (bad) return nf__err_set(err, NF_ERR_CHECKPOINT, "%s: %d tensor(s) do not match the model: %s", path, bad, msg);
    return NF_OK;
}

static nf_tensor * nf__mitra_w(nf_mitra * m, const char * name) {
    for (int i = 0; i < m->n_keys; i++) {
        if (strcmp(m->keys[i].name, name) == 0) return &m->w[i];
    }
    return NULL;   /* cannot happen: names come from the same generator */
}

static void nf__mitra_bind(nf_mitra * m) {
    const int cls = nf__mitra_class_labels(&m->cfg);
    m->x_w    = *nf__mitra_w(m, "x_embedding.x_embedding.weight");
    m->x_b    = *nf__mitra_w(m, "x_embedding.x_embedding.bias");
    m->y_w    = *nf__mitra_w(m, "y_embedding.y_embedding.weight");
    if (!cls) m->y_b = *nf__mitra_w(m, "y_embedding.y_embedding.bias");
    m->y_mask = *nf__mitra_w(m, "y_embedding.y_mask.weight");
    m->fln_w  = *nf__mitra_w(m, "final_layer_norm.weight");
    m->fln_b  = *nf__mitra_w(m, "final_layer_norm.bias");
    m->f_w    = *nf__mitra_w(m, "final_layer.weight");
    m->f_b    = *nf__mitra_w(m, "final_layer.bias");
    static const char * const proj[4] = {"q", "k", "v", "o"};
    char nm[64];
    for (int l = 0; l < m->cfg.n_layers; l++) {
        struct nf_mitra_layer * L = &m->layers[l];
        for (int i = 0; i < 4; i++) {
            snprintf(nm, sizeof(nm), "layers.%d.layer_norm%d.weight", l, i + 1); L->ln_w[i] = *nf__mitra_w(m, nm);
            snprintf(nm, sizeof(nm), "layers.%d.layer_norm%d.bias", l, i + 1);   L->ln_b[i] = *nf__mitra_w(m, nm);
            snprintf(nm, sizeof(nm), "layers.%d.linear%d.weight", l, i + 1);     L->lw[i] = *nf__mitra_w(m, nm);
            snprintf(nm, sizeof(nm), "layers.%d.linear%d.bias", l, i + 1);       L->lb[i] = *nf__mitra_w(m, nm);
        }
        for (int a = 0; a < 2; a++) {
            for (int p = 0; p < 4; p++) {
                snprintf(nm, sizeof(nm), "layers.%d.attention%d.%s.weight", l, a + 1, proj[p]); L->aw[a][p] = *nf__mitra_w(m, nm);
                snprintf(nm, sizeof(nm), "layers.%d.attention%d.%s.bias", l, a + 1, proj[p]);   L->ab[a][p] = *nf__mitra_w(m, nm);
            }
            /* views over the packed q, k, v (nf_mitra_load placed them so) */
            const int64_t D = m->cfg.dim;
            const int64_t ne_qkv_w[2] = {3 * D, D}, ne_kv_w[2] = {2 * D, D}, ne_qkv_b[1] = {3 * D}, ne_kv_b[1] = {2 * D};
            snprintf(L->qkv_name[a][0], sizeof(L->qkv_name[a][0]), "layers.%d.attention%d.qkv", l, a + 1);
            snprintf(L->qkv_name[a][1], sizeof(L->qkv_name[a][1]), "layers.%d.attention%d.kv", l, a + 1);
            L->qkv_w[a] = nf__tensor_view(&L->aw[a][0], 0, 2, ne_qkv_w);
            L->qkv_b[a] = nf__tensor_view(&L->ab[a][0], 0, 1, ne_qkv_b);
            L->kv_w[a]  = nf__tensor_view(&L->aw[a][1], 0, 2, ne_kv_w);
            L->kv_b[a]  = nf__tensor_view(&L->ab[a][1], 0, 1, ne_kv_b);
            L->qkv_w[a].name = L->qkv_b[a].name = L->qkv_name[a][0];
            L->kv_w[a].name  = L->kv_b[a].name  = L->qkv_name[a][1];
        }
    }
}

static int64_t nf__key_numel(const struct nf_mitra_key * k) {
    return k->shape[0] * (k->ndim == 2 ? k->shape[1] : 1);
}

static int nf__key_index(const nf_mitra * m, const char * name) {
    for (int i = 0; i < m->n_keys; i++) if (strcmp(m->keys[i].name, name) == 0) return i;
    return -1;
}

/* Element offsets of every key in the device weight buffer: 64-float
 * aligned slots in key order, except that each attention's q, k, v weights
 * (and likewise their biases) share one slot back to back, in that order,
 * so that [q; k; v] and [k; v] are single matrices (nf__mitra_bind). */
static int nf__mitra_pack(nf_mitra * m, int64_t * offs, int64_t * total, nf_err * err) {
    int64_t at = 0;
    for (int i = 0; i < m->n_keys; i++) offs[i] = -1;
    for (int i = 0; i < m->n_keys; i++) {
        if (offs[i] >= 0) continue;
        const int64_t numel = nf__key_numel(&m->keys[i]);
        int l, a;
        char kind[8] = "", back[64] = "";
        if (sscanf(m->keys[i].name, "layers.%d.attention%d.q.%7s", &l, &a, kind) == 3) {
            snprintf(back, sizeof(back), "layers.%d.attention%d.q.%s", l, a, kind);
        }
        if (back[0] && strcmp(back, m->keys[i].name) == 0) {
            char nm[64];
            snprintf(nm, sizeof(nm), "layers.%d.attention%d.k.%s", l, a, kind);
            const int ik = nf__key_index(m, nm);
            snprintf(nm, sizeof(nm), "layers.%d.attention%d.v.%s", l, a, kind);
            const int iv = nf__key_index(m, nm);
            if (ik <= i || iv <= i || nf__key_numel(&m->keys[ik]) != numel || nf__key_numel(&m->keys[iv]) != numel) {
                return nf__err_set(err, NF_ERR_GENERIC, "internal: no k/v keys packable with '%s'", m->keys[i].name);
            }
            offs[i] = at; offs[ik] = at + numel; offs[iv] = at + 2 * numel;
            at += (3 * numel + 63) & ~(int64_t) 63;
            continue;
        }
        offs[i] = at;
        at += (numel + 63) & ~(int64_t) 63;
    }
    *total = at;
    return NF_OK;
}

void nf_mitra_free(nf_mitra * m) {
    if (!m) return;
    nf_mitra_release_workspace(m);
    nf__tensor_free(&m->wbuf);
    free(m->w);
    free(m->keys);
    free(m->layers);
    free(m);
}

int nf_mitra_load(nf_backend * be, const char * dir, nf_mitra ** out, nf_err * err) {
    *out = NULL;
    nf_mitra * m = calloc(1, sizeof(*m));
    if (!m) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    m->be = be;
    m->chunk_tokens = be->chunk_tokens > 0 ? be->chunk_tokens : 4096;
    int rc = nf__mitra_config_read(dir, &m->cfg, err);
    if (rc != NF_OK) { nf_mitra_free(m); return rc; }
    m->n_keys = nf__mitra_key_count(&m->cfg);
    m->keys   = calloc((size_t) m->n_keys, sizeof(*m->keys));
    m->w      = calloc((size_t) m->n_keys, sizeof(*m->w));
    m->layers = calloc((size_t) (m->cfg.n_layers ? m->cfg.n_layers : 1), sizeof(*m->layers));
    if (!m->keys || !m->w || !m->layers) { nf_mitra_free(m); return nf__err_set(err, NF_ERR_NOMEM, "out of memory"); }
    nf__mitra_keys(&m->cfg, m->keys);

    char path[4096];
    nf__path_join(path, sizeof(path), dir, "model.safetensors");
    struct nf_safetensors st;
    rc = nf__st_open(path, &st, err);
    if (rc != NF_OK) { nf_mitra_free(m); return rc; }
    rc = nf__mitra_check_keys(&st, m->keys, m->n_keys, path, err);
    if (rc != NF_OK) { nf__st_close(&st); nf_mitra_free(m); return rc; }

    /* pack every tensor into one host staging area (64-float aligned slots),
     * check it is finite, then upload it to the device in one copy */
    int64_t total = 0;
    int64_t * offs = malloc((size_t) m->n_keys * sizeof(int64_t));
    if (!offs) { nf__st_close(&st); nf_mitra_free(m); return nf__err_set(err, NF_ERR_NOMEM, "out of memory"); }
    for (int i = 0; i < m->n_keys; i++) m->n_params += nf__key_numel(&m->keys[i]);
    rc = nf__mitra_pack(m, offs, &total, err);
    if (rc != NF_OK) { free(offs); nf__st_close(&st); nf_mitra_free(m); return rc; }
    float * host = calloc((size_t) total, sizeof(float));
    if (!host) { free(offs); nf__st_close(&st); nf_mitra_free(m); return nf__err_set(err, NF_ERR_NOMEM, "out of memory (%lld weights)", (long long) total); }
    for (int i = 0; i < m->n_keys && rc == NF_OK; i++) {
        const struct nf_st_tensor * t = nf__st_find(&st, m->keys[i].name);
        size_t nb = (size_t) (t->end - t->begin);
        memcpy(host + offs[i], nf__st_data(&st, t), nb);
        for (size_t e = 0; e < nb / sizeof(float); e++) {
            if (!isfinite(host[offs[i] + (int64_t) e])) {
                rc = nf__err_set(err, NF_ERR_CHECKPOINT, "%s: tensor '%s' has a non-finite value at element %zu", path, m->keys[i].name, e);
                break;
            }
        }
    }
    nf__st_close(&st);
    if (rc == NF_OK) {
        int64_t ne[1] = {total};
        rc = nf__tensor_alloc(be, &m->wbuf, NF_F32, 1, ne, "weights", err);
    }
    if (rc == NF_OK) rc = nf__tensor_upload(&m->wbuf, host, err);
    free(host);
    if (rc != NF_OK) { free(offs); nf_mitra_free(m); return rc; }
    for (int i = 0; i < m->n_keys; i++) {
        m->w[i] = nf__tensor_view(&m->wbuf, offs[i], m->keys[i].ndim, m->keys[i].shape);
        m->w[i].name = m->keys[i].name;
    }
    free(offs);
    nf__mitra_bind(m);
    snprintf(m->placement.weights, sizeof(m->placement.weights), "%s", m->wbuf.buf->where);
    *out = m;
    return NF_OK;
}

const struct nf_mitra_config * nf_mitra_get_config(const nf_mitra * m) { return &m->cfg; }
int64_t nf_mitra_n_params(const nf_mitra * m) { return m->n_params; }
int nf_mitra_uses_class_labels(const nf_mitra * m) { return nf__mitra_class_labels(&m->cfg); }
int nf_mitra_output_width(const nf_mitra * m) {
    return (m->cfg.task == NF_TASK_REGRESSION && m->cfg.dim_output == 1) ? 1 : m->cfg.dim_output;
}
void nf_mitra_get_placement(const nf_mitra * m, struct nf_mitra_placement * out) { *out = m->placement; }
void nf_mitra_set_chunk_rows(nf_mitra * m, int64_t rows) { m->chunk_rows = rows > 0 ? rows : 0; }
void nf_mitra_set_stage_callback(nf_mitra * m, int stages, nf_stage_fn fn, void * user) {
    m->stage_fn = fn;
    m->stage_user = user;
    m->stages = fn ? stages : NF_STAGES_NONE;
}

int nf_mitra_weights_device(const nf_mitra * m, char * out, size_t n, nf_err * err) {
    /* ask the driver again, now, rather than trusting the allocation-time answer */
    nf_backend * be = m->wbuf.buf->be;
    return be->iface->buffer_where(be, m->wbuf.buf->handle, out, n, err);
}

/* ---- forward: on the core's typed op calls ---------------------------------------- */

/* The forward is written with the core's typed op calls and sub-blocks;
 * labels are formatted by the graph context. */
#include "nf-ops.h"

/* ---- forward: the work area ------------------------------------------------------------ */

/* One residual stream X (n, T, D) holds the support rows [0, n_s) followed by
 * the query rows [n_s, n): every sub-block but the choice of row-attention
 * keys treats the two alike, so they share each GEMM. */
struct nf__ws {
    int64_t ns, nq, n, F, T, D, ct;  /* ct: tokens per chunk */
    nf_tensor xs, xq, ys, B, zs, zq;
    nf_tensor X;                     /* the residual stream                       */
    nf_tensor Sqkv;                  /* row attention: [q k v] of the support rows, (n_s, T, 3D) */
    nf_tensor Xn, Pqkv, A, H;        /* per-chunk scratch; Pqkv (ct, 3D)          */
    nf_tensor hq, logits;
    float * host_s, * host_q;        /* stage dumps                               */
};

static void nf__ws_free_host(struct nf__ws * w) {
    free(w->host_s);
    free(w->host_q);
    w->host_s = w->host_q = NULL;
}

static void nf__ws_free(struct nf__ws * w) {
    if (!w) return;
    nf_tensor * all[] = {&w->xs, &w->xq, &w->ys, &w->B, &w->zs, &w->zq, &w->X, &w->Sqkv,
                         &w->Xn, &w->Pqkv, &w->A, &w->H, &w->hq, &w->logits};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) nf__tensor_free(all[i]);
    nf__ws_free_host(w);
    free(w);
}

static int nf__ws_alloc(nf_mitra * m, struct nf__ws * w, int64_t C, nf_err * err) {
    nf_backend * be = m->be;
    const int64_t D = w->D, T = w->T;
#define NF__ALLOC(t, type, nd, name, ...) do { int64_t ne_[] = {__VA_ARGS__}; NF_TRY(nf__tensor_alloc(be, &w->t, type, nd, ne_, name, err)); } while (0)
    NF__ALLOC(xs, NF_F32, 2, "x_support", w->ns, w->F);
    NF__ALLOC(xq, NF_F32, 2, "x_query", w->nq, w->F);
    NF__ALLOC(ys, nf__mitra_class_labels(&m->cfg) ? NF_I32 : NF_F32, 1, "y_support", w->ns);
    NF__ALLOC(B,  NF_F32, 2, "quantile_boundaries", w->F, NF_MITRA_N_QUANTILES);
    NF__ALLOC(zs, NF_F32, 2, "z_support", w->ns, w->F);
    NF__ALLOC(zq, NF_F32, 2, "z_query", w->nq, w->F);
    NF__ALLOC(X,  NF_F32, 3, "stream", w->n, T, D);
    NF__ALLOC(Sqkv, NF_F32, 1, "support_qkv", w->ns * T * 3 * D);
    NF__ALLOC(Xn, NF_F32, 1, "normed", w->ct * D);
    NF__ALLOC(Pqkv, NF_F32, 1, "proj_qkv", w->ct * 3 * D);
    NF__ALLOC(A,  NF_F32, 1, "attn_out", w->ct * D);
    NF__ALLOC(H,  NF_F32, 1, "mlp_hidden", w->ct * 4 * D);
    NF__ALLOC(hq, NF_F32, 2, "head_normed", w->nq, D);
    NF__ALLOC(logits, NF_F32, 2, "logits", w->nq, C);
#undef NF__ALLOC
    return NF_OK;
}

/* rows [r0, r1) of the stream, as a flat view */
static nf_tensor nf__rows(const struct nf__ws * w, const nf_tensor * t, int64_t r0, int64_t r1) {
    return nf_view1(t, r0 * w->T * w->D, (r1 - r0) * w->T * w->D);
}

/* ---- forward: sub-blocks ------------------------------------------------------------------- */

/* (b)/(d): X += linear_{2h+2}(GELU(linear_{2h+1}(LN_{2h+2}(X)))) for rows [rbeg, n) */
static int nf__mlp(nf_graph * g, struct nf__ws * w, const struct nf_mitra_layer * L, int half,
                   int64_t rbeg, int64_t crows) {
    const struct nf_mlp mlp = {
        .ln_g = &L->ln_w[1 + 2 * half], .ln_b = &L->ln_b[1 + 2 * half],
        .w1 = &L->lw[2 * half],     .b1 = &L->lb[2 * half],
        .w2 = &L->lw[1 + 2 * half], .b2 = &L->lb[1 + 2 * half],
        .eps = NF_MITRA_LN_EPS, .act = NF_ACT_GELU,
        .ln_label  = nf_label(g, "layer_norm%d", 2 + 2 * half),
        .fc1_label = nf_label(g, "linear%d", 1 + 2 * half),
        .fc2_label = nf_label(g, "linear%d", 2 + 2 * half),
    };
    for (int64_t r0 = rbeg; r0 < w->n; r0 += crows) {
        const int64_t r1 = r0 + crows < w->n ? r0 + crows : w->n;
        NF_TRY(nf_prenorm_mlp(g, &mlp, nf__rows(w, &w->X, r0, r1), (r1 - r0) * w->T, w->D, w->Xn, w->H));
    }
    return NF_OK;
}

/* (c): X[r] += O2(MHA over the T tokens of row r) for rows [rbeg, n) */
static int nf__feature_attention(nf_graph * g, struct nf__ws * w, const nf_mitra * m, const struct nf_mitra_layer * L,
                                 int64_t rbeg, int64_t crows) {
    const struct nf_mhsa mhsa = {
        .ln_g = &L->ln_w[2], .ln_b = &L->ln_b[2],
        .w_qkv = &L->qkv_w[1], .b_qkv = &L->qkv_b[1],
        .w_o = &L->aw[1][3], .b_o = &L->ab[1][3],
        .n_heads = m->cfg.n_heads, .eps = NF_MITRA_LN_EPS,
        .ln_label   = nf_label(g, "layer_norm3"),
        .qkv_label  = nf_label(g, "attention2.qkv"),
        .attn_label = nf_label(g, "attention2"),
        .o_label    = nf_label(g, "attention2.o"),
    };
    for (int64_t r0 = rbeg; r0 < w->n; r0 += crows) {
        const int64_t r1 = r0 + crows < w->n ? r0 + crows : w->n;
        NF_TRY(nf_prenorm_self_attention(g, &mhsa, nf__rows(w, &w->X, r0, r1), r1 - r0, w->T, w->Xn, w->Pqkv, w->A));
    }
    return NF_OK;
}

/* (a): per token column, rows [rbeg, n) attend to the support rows [0, n_s).
 * Pass 1 projects LN1 of the support rows (k, v, and q when the support
 * attends too) before any row changes; pass 2 attends and adds O1(.) to the
 * stream -- support rows with their stored q, query rows projecting q chunk
 * by chunk, so no per-query q is kept. */
static int nf__row_attention(nf_graph * g, struct nf__ws * w, const nf_mitra * m, const struct nf_mitra_layer * L,
                             int64_t rbeg, int64_t crows) {
    const int64_t D = w->D, T = w->T, D3 = 3 * D;
    const int64_t ns3 = w->ns * T * D3;   /* elements of Sqkv */
    const float eps = NF_MITRA_LN_EPS;
    for (int64_t r0 = 0; r0 < w->ns; r0 += crows) {
        const int64_t r1 = r0 + crows < w->ns ? r0 + crows : w->ns, tok = (r1 - r0) * T;
        NF_TRY(nf_layer_norm(g, nf_label(g, "layer_norm1"), nf__rows(w, &w->X, r0, r1), tok, D,
                             &L->ln_w[0], &L->ln_b[0], w->Xn, D, eps));
        /* Sqkv rows (tok, 3D) = [q k v], or only [k v] into columns D.. when
         * no support row attends (the last layer) */
        const int64_t at = r0 * T * D3;
        if (rbeg < w->ns) {
            NF_TRY(nf_linear(g, nf_label(g, "attention1.qkv"), w->Xn, tok, D, &L->qkv_w[0], &L->qkv_b[0],
                             nf_view1(&w->Sqkv, at, tok * D3), D3, NF_ACT_NONE, 0));
        } else {
            NF_TRY(nf_linear(g, nf_label(g, "attention1.kv"), w->Xn, tok, D, &L->kv_w[0], &L->kv_b[0],
                             nf_view1(&w->Sqkv, at + D, tok * D3 - D), D3, NF_ACT_NONE, 0));
        }
    }
    for (int64_t r0 = rbeg, r1; r0 < w->n; r0 = r1) {
        /* chunks do not straddle the support/query boundary */
        const int64_t lim = r0 < w->ns ? w->ns : w->n;
        r1 = r0 + crows < lim ? r0 + crows : lim;
        const int64_t c = r1 - r0, tok = c * T;
        nf_tensor x = nf__rows(w, &w->X, r0, r1), q;
        int64_t q_ld;   /* row stride of q's tokens */
        if (r0 < w->ns) {
            q = nf_view1(&w->Sqkv, r0 * T * D3, tok * D3);
            q_ld = D3;
        } else {
            NF_TRY(nf_layer_norm(g, nf_label(g, "layer_norm1"), x, tok, D, &L->ln_w[0], &L->ln_b[0], w->Xn, D, eps));
            q = nf_view1(&w->Pqkv, 0, tok * D);
            NF_TRY(nf_linear(g, nf_label(g, "attention1.q"), w->Xn, tok, D, &L->aw[0][0], &L->ab[0][0], q, D,
                             NF_ACT_NONE, 0));
            q_ld = D;
        }
        const struct nf_attn_layout lay = {
            .groups = T, .lq = c, .lk = w->ns, .n_heads = m->cfg.n_heads, .head_dim = D / m->cfg.n_heads,
            .q_gs = q_ld, .q_ss = T * q_ld, .kv_gs = D3, .kv_ss = T * D3, .o_gs = D, .o_ss = T * D,
        };
        NF_TRY(nf_attention(g, nf_label(g, "attention1"), &lay, q, nf_view1(&w->Sqkv, D, ns3 - D),
                            nf_view1(&w->Sqkv, 2 * D, ns3 - 2 * D), w->A));
        NF_TRY(nf_linear(g, nf_label(g, "attention1.o"), w->A, tok, D, &L->aw[0][3], &L->ab[0][3], x, D,
                         NF_ACT_NONE, 1));
    }
    return NF_OK;
}

static int nf__stage(nf_mitra * m, struct nf__ws * w, const char * name, nf_err * err) {
    if (m->stages != NF_STAGES_ALL) return NF_OK;
    nf_tensor s = nf__rows(w, &w->X, 0, w->ns), q = nf__rows(w, &w->X, w->ns, w->n);
    NF_TRY(nf__tensor_download(&s, w->host_s, err));
    NF_TRY(nf__tensor_download(&q, w->host_q, err));
    if (m->stage_fn(m->stage_user, name, w->host_s, nf__tensor_numel(&s), w->host_q, nf__tensor_numel(&q)) != 0) {
        return nf__err_set(err, NF_ERR_GENERIC, "stage callback failed at %s", name);
    }
    return NF_OK;
}

/* ---- forward ---------------------------------------------------------------------------- */

static int nf__mitra_check_input(const nf_mitra * m, const struct nf_mitra_input * in, nf_err * err) {
    if (in->n_support < 1) return nf__err_set(err, NF_ERR_INPUT, "support set is empty (need >= 1 row)");
    if (in->n_query < 1)   return nf__err_set(err, NF_ERR_INPUT, "query set is empty (need >= 1 row)");
    if (in->n_features < 1) return nf__err_set(err, NF_ERR_INPUT, "no features (need >= 1 column)");
    if (in->n_support > (1 << 24)) return nf__err_set(err, NF_ERR_INPUT, "support set too large for quantile (> 2^24 rows)");
    for (int64_t i = 0; i < in->n_support * in->n_features; i++) {
        if (!isfinite(in->x_support[i])) {
            return nf__err_set(err, NF_ERR_INPUT, "support_x[%lld, %lld] is %s; inputs must be finite (impute NaN first)",
                               (long long) (i / in->n_features), (long long) (i % in->n_features), isnan(in->x_support[i]) ? "NaN" : "Inf");
        }
    }
    for (int64_t i = 0; i < in->n_query * in->n_features; i++) {
        if (!isfinite(in->x_query[i])) {
            return nf__err_set(err, NF_ERR_INPUT, "query_x[%lld, %lld] is %s; inputs must be finite",
                               (long long) (i / in->n_features), (long long) (i % in->n_features), isnan(in->x_query[i]) ? "NaN" : "Inf");
        }
    }
    if (nf__mitra_class_labels(&m->cfg)) {
        if (!in->y_class) return nf__err_set(err, NF_ERR_INPUT, "this model needs integer class labels");
        for (int64_t i = 0; i < in->n_support; i++) {
            if (in->y_class[i] < 0 || in->y_class[i] >= m->cfg.dim_output) {
                return nf__err_set(err, NF_ERR_INPUT, "support_y[%lld] = %lld is out of range 0..%d",
                                   (long long) i, (long long) in->y_class[i], m->cfg.dim_output - 1);
            }
        }
    } else {
        if (!in->y_value) return nf__err_set(err, NF_ERR_INPUT, "this model needs float regression targets");
        for (int64_t i = 0; i < in->n_support; i++) {
            if (!isfinite(in->y_value[i])) return nf__err_set(err, NF_ERR_INPUT, "support_y[%lld] is not finite", (long long) i);
        }
    }
    return NF_OK;
}

static void nf__ops_devices(const nf_backend * be, int64_t from, char * out, size_t n) {
    out[0] = '\0';
    size_t len = 0;
    for (int64_t i = from; i < be->n_ops; i++) {
        const char * d = be->ops[i].where;
        char tag[40];
        snprintf(tag, sizeof(tag), "%s,", d);
        char * hay = out;
        int seen = 0;
        /* out is a comma-terminated list during construction */
        while (hay && *hay) {
            if (strncmp(hay, tag, strlen(tag)) == 0) { seen = 1; break; }
            hay = strchr(hay, ',');
            if (hay) hay++;
        }
        if (!seen) nf__msg_append(out, n, &len, "%s", tag);
    }
    if (len > 0 && out[len - 1] == ',') out[len - 1] = '\0';
}

static int nf__mitra_forward_ws(nf_mitra * m, struct nf__ws * w, const struct nf_mitra_input * in, float * logits, nf_err * err) {
    nf_backend * be = m->be;
    const int cls = nf__mitra_class_labels(&m->cfg);
    const int64_t C = m->cfg.dim_output, D = w->D, T = w->T;
    if (m->stages != NF_STAGES_NONE) {
        const int64_t ns = w->ns * T * D, nq = w->nq * T * D;
        const int64_t xs = nf__tensor_numel(&w->xs), xq = nf__tensor_numel(&w->xq);
        w->host_s = malloc((size_t) (ns > xs ? ns : xs) * sizeof(float));
        w->host_q = malloc((size_t) (nq > xq ? nq : xq) * sizeof(float));
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
        if (m->stage_fn(m->stage_user, "inputs", w->host_s, nf__tensor_numel(&w->xs), w->host_q, nf__tensor_numel(&w->xq)) != 0) {
            return nf__err_set(err, NF_ERR_GENERIC, "stage callback failed at inputs");
        }
    }

    nf_graph gr, * g = &gr;
    nf_graph_init(g, be, err);

    /* step 1: quantile embedding statistics (spec §4.2) */
    NF_TRY(nf_quantile(g, "x_quantile", w->xs, w->B, NF_MITRA_N_QUANTILES, NF_MITRA_Q_DENOM));
    NF_TRY(nf_bucketize_norm(g, "x_quantile", w->xs, w->xq, w->B, w->zs, w->zq));

    /* step 2: token embeddings (spec §4.3): token 0 = label, 1..F = features */
    int64_t ne_s[3] = {w->ns, T, D}, ne_q[3] = {w->nq, T, D};
    nf_tensor S = nf__tensor_view(&w->X, 0, 3, ne_s), Q = nf__tensor_view(&w->X, w->ns * T * D, 3, ne_q);
    NF_TRY(nf_embed_features(g, "x_embedding", w->zs, &m->x_w, &m->x_b, S));
    NF_TRY(nf_embed_features(g, "x_embedding", w->zq, &m->x_w, &m->x_b, Q));
    if (cls) NF_TRY(nf_label_tokens_class(g, "y_embedding", w->ys, &m->y_w, S));
    else     NF_TRY(nf_label_tokens_value(g, "y_embedding", w->ys, &m->y_w, &m->y_b, S));
    NF_TRY(nf_label_tokens_mask(g, "y_embedding.y_mask", &m->y_mask, Q));
    NF_TRY(nf__stage(m, w, "embedding", err));

    /* step 3: the layers (spec §4.4). In the last layer the support rows only
     * provide row-attention keys/values: nothing downstream reads the rest of
     * their update, so it is skipped (spec §4.9). */
    const int64_t cmax = w->ct / T > 0 ? w->ct / T : 1;
    const int64_t crows = m->chunk_rows > 0 && m->chunk_rows < cmax ? m->chunk_rows : cmax;
    char st[64];
    for (int l = 0; l < m->cfg.n_layers; l++) {
        const struct nf_mitra_layer * L = &m->layers[l];
        const int64_t rbeg = l == m->cfg.n_layers - 1 ? w->ns : 0;
        nf_graph_prefix(g, "layers.%d.", l);
#define NF__STAGE(name) do { snprintf(st, sizeof(st), "layers.%d." name, l); NF_TRY(nf__stage(m, w, st, err)); } while (0)
        NF_TRY(nf__row_attention(g, w, m, L, rbeg, crows));      NF__STAGE("row_attention");
        NF_TRY(nf__mlp(g, w, L, 0, rbeg, crows));                NF__STAGE("mlp1");
        NF_TRY(nf__feature_attention(g, w, m, L, rbeg, crows));  NF__STAGE("feature_attention");
        NF_TRY(nf__mlp(g, w, L, 1, rbeg, crows));                NF__STAGE("mlp2");
#undef NF__STAGE
    }
    nf_graph_prefix(g, "%s", "");

    /* step 4: head on token 0 of every query row (spec §4.5) */
    NF_TRY(nf_layer_norm(g, "final_layer_norm", nf__rows(w, &w->X, w->ns, w->n), w->nq, T * D, &m->fln_w, &m->fln_b,
                         w->hq, D, NF_MITRA_LN_EPS));
    NF_TRY(nf_linear(g, "final_layer", w->hq, w->nq, D, &m->f_w, &m->f_b, w->logits, C, NF_ACT_NONE, 0));
    /* outputs out: the only device->host copy */
    NF_TRY(nf__tensor_download(&w->logits, logits, err));
    if (m->stages != NF_STAGES_NONE) {
        if (m->stage_fn(m->stage_user, "head", NULL, 0, logits, w->nq * C) != 0) {
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
    nf__ws_free(m->ws);
    m->ws = NULL;
}

static int nf__ws_get(nf_mitra * m, const struct nf_mitra_input * in, struct nf__ws ** out, nf_err * err) {
    const int64_t T = in->n_features + 1, D = m->cfg.dim;
    const int64_t ct = m->chunk_tokens > T ? m->chunk_tokens : T;
    struct nf__ws * w = m->ws;
    if (w && w->ns == in->n_support && w->nq == in->n_query && w->F == in->n_features && w->D == D && w->ct == ct) {
        *out = w;
        return NF_OK;
    }
    nf_mitra_release_workspace(m);
    w = calloc(1, sizeof(*w));
    if (!w) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    w->ns = in->n_support; w->nq = in->n_query; w->n = w->ns + w->nq; w->F = in->n_features;
    w->T = T; w->D = D; w->ct = ct;
    int rc = nf__ws_alloc(m, w, m->cfg.dim_output, err);
    if (rc != NF_OK) { nf__ws_free(w); return rc; }
    *out = m->ws = w;
    return NF_OK;
}

int nf_mitra_forward(nf_mitra * m, const struct nf_mitra_input * in, float * logits, nf_err * err) {
    NF_TRY(nf__mitra_check_input(m, in, err));
    const int64_t first_op = m->be->n_ops;
    struct nf__ws * w = NULL;
    int rc = nf__ws_get(m, in, &w, err);
    if (rc == NF_OK) rc = nf__mitra_forward_ws(m, w, in, logits, err);
    if (w) nf__ws_free_host(w);
    if (rc != NF_OK) nf_mitra_release_workspace(m);   /* the device may be in error: start afresh */
    nf__ops_devices(m->be, first_op, m->placement.ops, sizeof(m->placement.ops));
    return rc;
}
