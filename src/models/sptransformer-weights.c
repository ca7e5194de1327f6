/* sptransformer-weights.c -- the SpTransformer state_dict as a weight table
 * (spec §4, Appendix C: 586 entries in registration order), its
 * config.json, synthetic checkpoints and the seeded input.
 *
 * Synthetic values follow PyTorch's default init scales so activations look
 * realistic: Conv1d / Linear weights and biases U(-1/sqrt(fan_in),
 * +1/sqrt(fan_in)) (fan_in = in_channels x kernel width), the axial
 * positional embeddings N(0, 1) (axial-positional-embedding's normal_(0, 1)).
 * BatchNorm and LayerNorm affine parameters are perturbed from PyTorch's 1/0
 * (gamma 1 + U(-0.1, 0.1), beta U(-0.1, 0.1)) and the BatchNorm running
 * statistics randomised (mean U(-0.1, 0.1), var 0.5 + U(0, 1)), so a
 * swapped or skipped one changes the logits. num_batches_tracked is written
 * (an I64 scalar, as torch saves it); a load accepts it absent. */
#include "sptransformer-impl.h"
#include "model.h"
#include "io/nf-io.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the weight table ------------------------------------------------------------ */

static int64_t nf__spt_dim(const void * c, char sym, const int * idx, int depth) {
    const struct nf_spt_config * cfg = c;
    switch (sym) {
        case 'E': return NF_SPT_N_ENCODERS;
        case 'H': return depth >= 1 ? (idx[0] == 0 ? NF_SPT_ENC0_WIDTH : NF_SPT_ENC1_WIDTH) : -1;
        case 'O': return depth >= 1 ? idx[0] == 0 : -1;
        case 'B': return NF_SPT_N_RESBLOCKS;
        case 'W': return depth >= 2 ? (idx[1] < 8 ? 11 : 21) : -1;
        case 'T': return cfg->tissue_num;
        case 'D': return cfg->dim;
        case 'C': return cfg->dim + NF_SPT_ENC0_WIDTH + NF_SPT_ENC1_WIDTH;
        case 'A': return cfg->attn_dim;
        case 'Q': return (int64_t) cfg->heads * cfg->dim_head;
        case 'F': return (int64_t) cfg->ff_mult * cfg->attn_dim;
        case 'R': return cfg->max_seq_len / cfg->bucket_size;
        case 'G': return cfg->bucket_size;
        case 'L': return cfg->attn_depth;
        default: return -1;
    }
}

#define S_(f) NF_WSLOT(struct nf_spt, f)
#define E_(f) NF_WSLOT(struct nf_spt_encoder, f)
#define R_(f) NF_WSLOT(struct nf_spt_resblock, f)
#define L_(f) NF_WSLOT(struct nf_spt_layer, f)
/* a Conv1d / Linear: weight (shape), bias (out), both U(+-1/sqrt(fan_in)) */
#define CONV(pre, name, wshape, bshape, fan, SL, w, b)            \
    {pre name ".weight", wshape, .fan_in = fan, .slot = SL(w)}, { \
        pre name ".bias", bshape, .fan_in = fan, .slot = SL(b)    \
    }
/* BatchNorm1d(H) n of a resblock: 4 F32 entries + the optional I64 counter */
#define BN(n)                                                                                                   \
    {"encoder.%d.resblocks.%d.bn" #n ".weight", "H", .init = NF_INIT_NORM_WEIGHT, .slot = R_(bn##n.w)},         \
        {"encoder.%d.resblocks.%d.bn" #n ".bias", "H", .init = NF_INIT_NORM_BIAS, .slot = R_(bn##n.b)},         \
        {"encoder.%d.resblocks.%d.bn" #n ".running_mean", "H", .flags = NF_W_BUFFER, .init = NF_INIT_NORM_BIAS, \
         .slot = R_(bn##n.mean)},                                                                               \
        {"encoder.%d.resblocks.%d.bn" #n ".running_var", "H", .flags = NF_W_BUFFER, .init = NF_INIT_VARIANCE,   \
         .slot = R_(bn##n.var)},                                                                                \
    {                                                                                                           \
        "encoder.%d.resblocks.%d.bn" #n ".num_batches_tracked", "", .dtype = NF_ST_I64, .flags = NF_W_OPTIONAL, \
                                                                    .init = NF_INIT_COUNT                       \
    }
#define SKIP(j) CONV("encoder.%d.convs." #j, "", "H H 1", "H", "H", E_, convs_w[j], convs_b[j])
#define LAYER   "attn.attn.layers.layers.%d."
#define LN(pre, w, b)                                                   \
    {pre ".weight", "A", .init = NF_INIT_NORM_WEIGHT, .slot = L_(w)}, { \
        pre ".bias", "A", .init = NF_INIT_NORM_BIAS, .slot = L_(b)      \
    }

static const struct nf_wentry nf__spt_entries[] = {
    NF_WREPEAT('E', struct nf_spt, enc, struct nf_spt_encoder),
    CONV("encoder.%d.", "conv1", "H 4 1", "H", "4", E_, conv1_w, conv1_b),
    CONV("encoder.%d.", "skip", "H H 1", "H", "H", E_, skip_w, skip_b),
    NF_WREPEAT('B', struct nf_spt_encoder, res, struct nf_spt_resblock),
    BN(1),
    CONV("encoder.%d.resblocks.%d.", "conv1", "H H W", "H", "HW", R_, conv1_w, conv1_b),
    BN(2),
    CONV("encoder.%d.resblocks.%d.", "conv2", "H H W", "H", "HW", R_, conv2_w, conv2_b),
    NF_WEND,
    SKIP(0),
    SKIP(1),
    SKIP(2),
    SKIP(3),
    /* SpEncoder_L's own heads (encoder 0 only; unused by SpTransformer.forward) */
    {"encoder.%d.splice_output.weight", "3 H 1", .when = 'O', .fan_in = "H", .slot = E_(splice_w)},
    {"encoder.%d.splice_output.bias", "3", .when = 'O', .fan_in = "H", .slot = E_(splice_b)},
    {"encoder.%d.tissue_output.weight", "T H 1", .when = 'O', .fan_in = "H", .slot = E_(tissue_w)},
    {"encoder.%d.tissue_output.bias", "T", .when = 'O', .fan_in = "H", .slot = E_(tissue_b)},
    NF_WEND,
    CONV("", "conv1.0", "D 4 1", "D", "4", S_, c10_w, c10_b),
    CONV("", "conv1.1", "D D 1", "D", "D", S_, c11_w, c11_b),
    CONV("", "conv2", "2D C 1", "2D", "C", S_, c2_w, c2_b),
    /* axial-positional-embedding < 0.3 names them weights_0/_1, >= 0.3 weights.0/.1 (spec §4.3) */
    {"attn.pos_emb.weights_0", "1 R 1 A", .alias = "attn.pos_emb.weights.0", .init = NF_INIT_NORMAL, .slot = S_(pe0)},
    {"attn.pos_emb.weights_1", "1 1 G A", .alias = "attn.pos_emb.weights.1", .init = NF_INIT_NORMAL, .slot = S_(pe1)},
    NF_WREPEAT('L', struct nf_spt, layers, struct nf_spt_layer),
    LN(LAYER "0.norm", ln0_w, ln0_b),
    /* to_q and to_kv (no bias) back to back: one [q; k; v] (3Q, A) matrix */
    {LAYER "0.fn.to_q.weight", "Q A", .fan_in = "A", .pack = 1, .slot = L_(to_q)},
    {LAYER "0.fn.to_kv.weight", "2Q A", .fan_in = "A", .pack = 1, .slot = L_(to_kv)},
    CONV(LAYER "0.fn.", "to_out", "A Q", "A", "Q", L_, to_out_w, to_out_b),
    LN(LAYER "1.norm", ln1_w, ln1_b),
    CONV(LAYER "1.fn.fn.", "w1", "F A", "F", "A", L_, w1, b1),
    CONV(LAYER "1.fn.fn.", "w2", "A F", "A", "F", L_, w2, b2),
    NF_WEND,
    {"attn.norm.weight", "A", .init = NF_INIT_NORM_WEIGHT, .slot = S_(norm_w)},
    {"attn.norm.bias", "A", .init = NF_INIT_NORM_BIAS, .slot = S_(norm_b)},
    CONV("", "splice", "3 A 1", "3", "A", S_, splice_w, splice_b),
    CONV("", "usage", "T A 1", "T", "A", S_, usage_w, usage_b),
};

const struct nf_wtable nf__spt_wtable = {
    .model = "sptransformer",
    .entries = nf__spt_entries,
    .n_entries = (int) (sizeof(nf__spt_entries) / sizeof(nf__spt_entries[0])),
    .dim = nf__spt_dim,
};

/* ---- config.json -------------------------------------------------------------------- */

/* what upstream's AttnBlock derives or fixes (model/model.py: SinkhornTransformer(dim * 2, depth, heads=8,
 * n_local_attn_heads=2, ...), bucket_size 64, dim_head and ff_mult at sinkhorn-transformer's defaults) */
static void nf__spt_config_derive(struct nf_spt_config * cfg) {
    cfg->attn_dim = 2 * cfg->dim;
    cfg->heads = 8;
    cfg->dim_head = cfg->attn_dim / 8;
    cfg->n_local_attn_heads = 2;
    cfg->bucket_size = 64;
    cfg->ff_mult = 4;
}

int nf__spt_config_check(const struct nf_spt_config * cfg, const char * where, nf_err * err) {
    if (cfg->dim < 4 || cfg->dim > 8192 || cfg->dim % 4 != 0) {
        return nf__err_set(err, NF_ERR_CHECKPOINT,
                           "%s: dim %d must be a multiple of 4 in [4, 8192] (the transformer is 2 x dim wide, 8 heads)",
                           where, cfg->dim);
    }
    if (cfg->context_len < 0 || cfg->context_len > (1 << 20))
        return nf__err_set(err, NF_ERR_CHECKPOINT, "%s: bad context_len %d", where, cfg->context_len);
    if (cfg->tissue_num < 1 || cfg->tissue_num > 4096)
        return nf__err_set(err, NF_ERR_CHECKPOINT, "%s: bad tissue_num %d", where, cfg->tissue_num);
    if (cfg->attn_depth < 0 || cfg->attn_depth > 256)
        return nf__err_set(err, NF_ERR_CHECKPOINT, "%s: bad attn_depth %d", where, cfg->attn_depth);
    if (cfg->bucket_size < 1 || cfg->max_seq_len < cfg->bucket_size || cfg->max_seq_len > (1 << 20) ||
        cfg->max_seq_len % cfg->bucket_size != 0) {
        return nf__err_set(err, NF_ERR_CHECKPOINT,
                           "%s: max_seq_len %d must be a positive multiple of bucket_size %d (at most 2^20)", where,
                           cfg->max_seq_len, cfg->bucket_size);
    }
    struct nf_spt_config d = *cfg;
    nf__spt_config_derive(&d);
    const struct {
        const char * key;
        int got, want;
    } fixed[] = {
        {"attn_dim", cfg->attn_dim, d.attn_dim},
        {"heads", cfg->heads, d.heads},
        {"dim_head", cfg->dim_head, d.dim_head},
        {"n_local_attn_heads", cfg->n_local_attn_heads, d.n_local_attn_heads},
        {"bucket_size", cfg->bucket_size, d.bucket_size},
        {"ff_mult", cfg->ff_mult, d.ff_mult},
    };
    for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++) {
        if (fixed[i].got != fixed[i].want) {
            return nf__err_set(err, NF_ERR_CHECKPOINT, "%s: %s is %d, but upstream's SpTransformer(dim=%d) builds %d",
                               where, fixed[i].key, fixed[i].got, cfg->dim, fixed[i].want);
        }
    }
    return NF_OK;
}

void nf__spt_config_default(struct nf_spt_config * cfg) {
    *cfg = (struct nf_spt_config){
        .dim = 128, .context_len = 4000, .tissue_num = 15, .max_seq_len = 8192, .attn_depth = 8};
    nf__spt_config_derive(cfg);
}

/* an optional integer: absent keeps *out */
static int nf__spt_config_opt(const cJSON * doc, const char * key, const char * path, int * out, nf_err * err) {
    return cJSON_GetObjectItemCaseSensitive(doc, key) ? nf__config_int(doc, key, path, out, err) : NF_OK;
}

int nf__spt_config_parse(const cJSON * doc, const char * path, struct nf_spt_config * cfg, nf_err * err) {
    memset(cfg, 0, sizeof(*cfg));
    /* the constructor arguments: required */
    NF_TRY(nf__config_int(doc, "dim", path, &cfg->dim, err));
    NF_TRY(nf__config_int(doc, "context_len", path, &cfg->context_len, err));
    NF_TRY(nf__config_int(doc, "tissue_num", path, &cfg->tissue_num, err));
    NF_TRY(nf__config_int(doc, "max_seq_len", path, &cfg->max_seq_len, err));
    NF_TRY(nf__config_int(doc, "attn_depth", path, &cfg->attn_depth, err));
    /* the transformer's: derived by upstream; when given, they must agree */
    nf__spt_config_derive(cfg);
    NF_TRY(nf__spt_config_opt(doc, "attn_dim", path, &cfg->attn_dim, err));
    NF_TRY(nf__spt_config_opt(doc, "heads", path, &cfg->heads, err));
    NF_TRY(nf__spt_config_opt(doc, "dim_head", path, &cfg->dim_head, err));
    NF_TRY(nf__spt_config_opt(doc, "n_local_attn_heads", path, &cfg->n_local_attn_heads, err));
    NF_TRY(nf__spt_config_opt(doc, "bucket_size", path, &cfg->bucket_size, err));
    NF_TRY(nf__spt_config_opt(doc, "ff_mult", path, &cfg->ff_mult, err));
    return nf__spt_config_check(cfg, path, err);
}

cJSON * nf__spt_config_json(const struct nf_spt_config * cfg) {
    cJSON * doc = cJSON_CreateObject();
    if (!doc) return NULL;
    cJSON_AddStringToObject(doc, "model_type", "sptransformer");
    cJSON_AddNumberToObject(doc, "dim", cfg->dim);
    cJSON_AddNumberToObject(doc, "context_len", cfg->context_len);
    cJSON_AddNumberToObject(doc, "tissue_num", cfg->tissue_num);
    cJSON_AddNumberToObject(doc, "max_seq_len", cfg->max_seq_len);
    cJSON_AddNumberToObject(doc, "attn_depth", cfg->attn_depth);
    cJSON_AddNumberToObject(doc, "attn_dim", cfg->attn_dim);
    cJSON_AddNumberToObject(doc, "heads", cfg->heads);
    cJSON_AddNumberToObject(doc, "dim_head", cfg->dim_head);
    cJSON_AddNumberToObject(doc, "n_local_attn_heads", cfg->n_local_attn_heads);
    cJSON_AddNumberToObject(doc, "bucket_size", cfg->bucket_size);
    cJSON_AddNumberToObject(doc, "ff_mult", cfg->ff_mult);
    return doc;
}

int nf__spt_config_write(const char * dir, const struct nf_spt_config * cfg, nf_err * err) {
    char path[4096];
    nf__path_join(path, sizeof(path), dir, "config.json");
    cJSON * doc = nf__spt_config_json(cfg);
    if (!doc) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    int rc = nf__json_write_file(path, doc, err);
    cJSON_Delete(doc);
    return rc;
}

/* ---- gen-weights ------------------------------------------------------------------------ */

const struct nf_option_desc nf__spt_gen_options[] = {
    {"dim", "dim of SpTransformer(dim, ...) (128; the transformer is 2 x dim wide)"},
    {"depth", "attn_depth, transformer layers (8)"},
    {"tissues", "tissue_num, tissue-usage outputs (15)"},
    {"context", "context_len, flanking positions on each side of the output (4000)"},
    {"window", "max_seq_len, the transformer's window: a multiple of the bucket size 64 (8192)"},
    {NULL, NULL},
};

int nf__spt_gen_weights(const char * dir, const char * ckpt_path, uint64_t seed, int n, const char * const * keys,
                        const char * const * values, const char * perturb_key, float perturb_delta, char * summary,
                        size_t summary_n, nf_err * err) {
    struct nf_spt_config cfg;
    nf__spt_config_default(&cfg); /* the released model's unless told otherwise */
    for (int i = 0; i < n; i++) {
        const char *k = keys[i], *v = values[i];
        if (strcmp(k, "dim") == 0)
            NF_TRY(nf__option_int(k, v, &cfg.dim, err));
        else if (strcmp(k, "depth") == 0)
            NF_TRY(nf__option_int(k, v, &cfg.attn_depth, err));
        else if (strcmp(k, "tissues") == 0)
            NF_TRY(nf__option_int(k, v, &cfg.tissue_num, err));
        else if (strcmp(k, "context") == 0)
            NF_TRY(nf__option_int(k, v, &cfg.context_len, err));
        else if (strcmp(k, "window") == 0)
            NF_TRY(nf__option_int(k, v, &cfg.max_seq_len, err));
        else
            return nf__err_set(err, NF_ERR_ARG, "sptransformer has no option '%s'", k);
    }
    nf__spt_config_derive(&cfg);
    NF_TRY(nf__spt_config_check(&cfg, "gen-weights", err));
    NF_TRY(nf__mkdir_p(dir, err));
    char path[4096];
    nf__path_join(path, sizeof(path), dir, "model.safetensors");
    NF_TRY(nf__weights_generate_ckpt(path, ckpt_path, &nf__spt_wtable, &cfg, seed, perturb_key, perturb_delta, err));
    NF_TRY(nf__spt_config_write(dir, &cfg, err));
    snprintf(summary, summary_n, "dim %d, context_len %d, tissue_num %d, max_seq_len %d, attn_depth %d", cfg.dim,
             cfg.context_len, cfg.tissue_num, cfg.max_seq_len, cfg.attn_depth);
    return NF_OK;
}

/* ---- the seeded input ---------------------------------------------------------------------- */

void nf__spt_seeded_tokens(uint64_t seed, int64_t n, int8_t * out) {
    uint64_t s = seed;
    for (int64_t i = 0; i < n; i++) out[i] = (int8_t) (nf__rng_next(&s) >> 62);
}

/* ---- token ids (nf_seq_*, verify's fixtures) ------------------------------------------------ */

int nf__spt_tokens_make(const int8_t * core, int64_t B, int64_t n, int pad, int64_t context, const char * flag,
                        const char * path, int8_t ** ids, int64_t * L, nf_err * err) {
    const int64_t f = pad ? context : 0;
    *L = n + 2 * f;
    if (B < 1 || n < 1) {
        char e[1024];
        return nf__err_set(err, NF_ERR_INPUT, "%s%s%s: the input has no sequence (%lld sequence(s) of %lld nt)", flag,
                           path ? " " : "", path ? nf__esc(e, sizeof(e), path) : "", (long long) B, (long long) n);
    }
    *ids = malloc((size_t) (B * *L));
    if (!*ids)
        return nf__err_set(err, NF_ERR_NOMEM, "out of memory (%lld x %lld tokens)", (long long) B, (long long) *L);
    for (int64_t b = 0; b < B; b++) {
        memset(*ids + b * *L, 4, (size_t) f);
        memcpy(*ids + b * *L + f, core + b * n, (size_t) n);
        memset(*ids + b * *L + f + n, 4, (size_t) f);
    }
    return NF_OK;
}

int nf__spt_tokens_npy(const char * path, int pad, int64_t context, int8_t ** ids, int64_t * B, int64_t * L,
                       nf_err * err) {
    struct nf_npy a;
    NF_TRY(nf__npy_read(path, &a, err));
    int rc = NF_OK;
    int8_t * core = NULL;
    if (a.dtype != NF_NPY_I1 && a.dtype != NF_NPY_I4 && a.dtype != NF_NPY_I8) {
        rc = nf__err_set(err, NF_ERR_INPUT, "%s: token ids must be int8, int32 or int64, not %s", path,
                         nf__npy_dtype_name(a.dtype));
        goto done;
    }
    if (a.ndim != 1 && a.ndim != 2) {
        rc = nf__err_set(err, NF_ERR_INPUT, "%s: token ids must be (L,) or (B, L), not %d-dimensional", path, a.ndim);
        goto done;
    }
    const int64_t nb = a.ndim == 2 ? a.shape[0] : 1, n = a.shape[a.ndim - 1];
    core = malloc((size_t) (nb * n > 0 ? nb * n : 1));
    if (!core) {
        rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int64_t i = 0; i < nb * n; i++) {
        const int64_t v = a.dtype == NF_NPY_I1   ? ((const int8_t *) a.data)[i]
                          : a.dtype == NF_NPY_I4 ? ((const int32_t *) a.data)[i]
                                                 : ((const int64_t *) a.data)[i];
        if (v < 0 || v > 4) {
            rc = nf__err_set(err, NF_ERR_INPUT, "%s: token [%lld, %lld] is %lld, not an id (A=0 C=1 G=2 T/U=3 N=4)",
                             path, (long long) (i / n), (long long) (i % n), (long long) v);
            goto done;
        }
        core[i] = (int8_t) v;
    }
    rc = nf__spt_tokens_make(core, nb, n, pad, context, "--tokens", path, ids, L, err);
    if (rc == NF_OK) *B = nb;
done:
    free(core);
    nf__npy_free(&a);
    return rc;
}
