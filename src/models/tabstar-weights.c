/* tabstar-weights.c -- the TabSTAR state_dict as a weight table (spec §8.1,
 * Appendix A: 295 F32 entries in registration order), its config.json,
 * synthetic checkpoints and their vocabulary.
 *
 * config.json: Hugging Face ships TabStarConfig (PretrainedConfig,
 * model_type "tabstar", d_model 384, ...); the BERT inside is not described
 * there (upstream loads e5-small-v2's config by name), so nofall takes
 * e5-small-v2's (spec §4) unless an object "text_encoder" gives
 * num_hidden_layers / vocab_size (nofall's small synthetic checkpoints).
 *
 * Synthetic values: nn.Linear weights and biases U(-1/sqrt(fan_in),
 * +1/sqrt(fan_in)) (PyTorch's default), embeddings N(0, 1), LayerNorm gamma
 * 1 + U(-0.1, 0.1) and beta U(-0.1, 0.1) (so a swapped gamma/beta shows). */
#include "tabstar-impl.h"
#include "model.h"
#include "io/nf-io.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the weight table ------------------------------------------------------------ */

static int64_t nf__tab_dim(const void * c, char sym, const int * idx, int depth) {
    const struct nf_tab_config * cfg = c;
    (void) idx;
    (void) depth;
    switch (sym) {
        case 'V': return cfg->vocab;
        case 'P': return cfg->max_pos;
        case 'T': return cfg->type_vocab;
        case 'D': return NF_TAB_D;
        case 'I': return cfg->text_ff;
        case 'L': return cfg->text_layers;
        case 'F': return NF_TAB_FF;
        case 'S': return NF_TAB_SCALAR_HIDDEN;
        case 'N': return NF_TAB_LAYERS;
        default: return -1;
    }
}

#define M_(f) NF_WSLOT(struct nf_tab, f)
#define B_(f) NF_WSLOT(struct nf_tab_bert_layer, f)
#define T_(f) NF_WSLOT(struct nf_tab_tel, f)
#define BERT  "text_encoder.encoder.layer.%d."
#define LINW(name, shape, fan, SL, f) \
    { name ".weight", shape, .fan_in = fan, .slot = SL(f) }
#define LINB(name, shape, fan, SL, f) \
    { name ".bias", shape, .fan_in = fan, .slot = SL(f) }
#define LN(name, SL, w, b)                                               \
    {name ".weight", "D", .init = NF_INIT_NORM_WEIGHT, .slot = SL(w)}, { \
        name ".bias", "D", .init = NF_INIT_NORM_BIAS, .slot = SL(b)      \
    }
/* q, k, v weights share pack 1 and their biases pack 2: [q; k; v] is one (3D, D) matrix */
#define QKV(n, w, b)                                                                        \
    {BERT "attention.self." n ".weight", "D D", .fan_in = "D", .pack = 1, .slot = B_(w)}, { \
        BERT "attention.self." n ".bias", "D", .fan_in = "D", .pack = 2, .slot = B_(b)      \
    }
/* the 12 entries of a TransformerEncoderLayer under prefix P */
#define TEL(P, SL)                                                                                                     \
    {P "self_attn.in_proj_weight", "3D D", .fan_in = "D", .slot = SL(in_w)},                                           \
        {P "self_attn.in_proj_bias", "3D", .fan_in = "D", .slot = SL(in_b)},                                           \
        LINW(P "self_attn.out_proj", "D D", "D", SL, out_w), LINB(P "self_attn.out_proj", "D", "D", SL, out_b),        \
        LINW(P "linear1", "F D", "D", SL, l1_w), LINB(P "linear1", "F", "D", SL, l1_b),                                \
        LINW(P "linear2", "D F", "F", SL, l2_w), LINB(P "linear2", "D", "F", SL, l2_b), LN(P "norm1", SL, n1_w, n1_b), \
        LN(P "norm2", SL, n2_w, n2_b)
#define HEAD(P, w0, b0, w2, b2)                                                     \
    LINW(P ".layers.0", "F D", "D", M_, w0), LINB(P ".layers.0", "F", "D", M_, b0), \
        LINW(P ".layers.2", "1 F", "F", M_, w2), LINB(P ".layers.2", "1", "F", M_, b2)

static const struct nf_wentry nf__tab_entries[] = {
    {"text_encoder.embeddings.word_embeddings.weight", "V D", .init = NF_INIT_NORMAL, .slot = M_(word)},
    {"text_encoder.embeddings.position_embeddings.weight", "P D", .init = NF_INIT_NORMAL, .slot = M_(pos)},
    {"text_encoder.embeddings.token_type_embeddings.weight", "T D", .init = NF_INIT_NORMAL, .slot = M_(type)},
    LN("text_encoder.embeddings.LayerNorm", M_, eln_w, eln_b),
    /* an old transformers' persistent buffer (spec §8.1): accepted, ignored */
    {"text_encoder.embeddings.position_ids", "1 P", .dtype = NF_ST_I64, .flags = NF_W_IGNORED},
    NF_WREPEAT('L', struct nf_tab, bert, struct nf_tab_bert_layer),
    QKV("query", q_w, q_b),
    QKV("key", k_w, k_b),
    QKV("value", v_w, v_b),
    LINW(BERT "attention.output.dense", "D D", "D", B_, o_w),
    LINB(BERT "attention.output.dense", "D", "D", B_, o_b),
    LN(BERT "attention.output.LayerNorm", B_, ln1_w, ln1_b),
    LINW(BERT "intermediate.dense", "I D", "D", B_, i_w),
    LINB(BERT "intermediate.dense", "I", "D", B_, i_b),
    LINW(BERT "output.dense", "D I", "I", B_, f_w),
    LINB(BERT "output.dense", "D", "I", B_, f_b),
    LN(BERT "output.LayerNorm", B_, ln2_w, ln2_b),
    NF_WEND,
    LINW("text_encoder.pooler.dense", "D D", "D", M_, pool_w),
    LINB("text_encoder.pooler.dense", "D", "D", M_, pool_b),
    LINW("numerical_fusion.scalar_embedder.0", "S 1", "1", M_, s0_w),
    LINB("numerical_fusion.scalar_embedder.0", "S", "1", M_, s0_b),
    LINW("numerical_fusion.scalar_embedder.3", "D S", "S", M_, s3_w),
    LINB("numerical_fusion.scalar_embedder.3", "D", "S", M_, s3_b),
#define F_(f) NF_WSLOT(struct nf_tab, fusion.f)
    TEL("numerical_fusion.fusion_block.", F_),
#undef F_
    NF_WREPEAT('N', struct nf_tab, tab, struct nf_tab_tel),
    TEL("tabular_encoder.encoder.layers.%d.", T_),
    NF_WEND,
    HEAD("cls_head", cls_w0, cls_b0, cls_w2, cls_b2),
    HEAD("reg_head", reg_w0, reg_b0, reg_w2, reg_b2),
};

const struct nf_wtable nf__tab_wtable = {
    .model = "tabstar",
    .entries = nf__tab_entries,
    .n_entries = (int) (sizeof(nf__tab_entries) / sizeof(nf__tab_entries[0])),
    .dim = nf__tab_dim,
};

/* ---- config.json -------------------------------------------------------------------- */

void nf__tab_config_default(struct nf_tab_config * cfg) {
    /* intfloat/e5-small-v2's config.json (spec §4) */
    *cfg = (struct nf_tab_config){
        .text_layers = 12, .text_heads = 12, .text_ff = 1536, .vocab = 30522, .max_pos = 512, .type_vocab = 2};
}

static int nf__tab_opt_int(const cJSON * doc, const char * key, const char * path, int * out, nf_err * err) {
    return cJSON_GetObjectItemCaseSensitive(doc, key) ? nf__config_int(doc, key, path, out, err) : NF_OK;
}

int nf__tab_config_parse(const cJSON * doc, const char * path, struct nf_tab_config * cfg, nf_err * err) {
    nf__tab_config_default(cfg);
    int d = NF_TAB_D;
    NF_TRY(nf__tab_opt_int(doc, "d_model", path, &d, err));
    if (d != NF_TAB_D)
        return nf__err_set(err, NF_ERR_CHECKPOINT, "%s: d_model is %d; TabSTAR is built with %d", path, d, NF_TAB_D);
    const cJSON * te = cJSON_GetObjectItemCaseSensitive(doc, "text_encoder");
    if (te) {
        if (!cJSON_IsObject(te))
            return nf__err_set(err, NF_ERR_CHECKPOINT, "%s: \"text_encoder\" must be an object", path);
        char where[4200];
        snprintf(where, sizeof(where), "%s (text_encoder)", path);
        NF_TRY(nf__tab_opt_int(te, "num_hidden_layers", where, &cfg->text_layers, err));
        NF_TRY(nf__tab_opt_int(te, "vocab_size", where, &cfg->vocab, err));
        int hs = NF_TAB_D, nh = cfg->text_heads, ff = cfg->text_ff, mp = cfg->max_pos, tv = cfg->type_vocab;
        NF_TRY(nf__tab_opt_int(te, "hidden_size", where, &hs, err));
        NF_TRY(nf__tab_opt_int(te, "num_attention_heads", where, &nh, err));
        NF_TRY(nf__tab_opt_int(te, "intermediate_size", where, &ff, err));
        NF_TRY(nf__tab_opt_int(te, "max_position_embeddings", where, &mp, err));
        NF_TRY(nf__tab_opt_int(te, "type_vocab_size", where, &tv, err));
        if (hs != NF_TAB_D || nh != 12 || ff != 1536 || mp != 512 || tv != 2) {
            return nf__err_set(err, NF_ERR_CHECKPOINT,
                               "%s: only e5-small-v2's shape is supported (hidden 384, 12 heads, intermediate 1536, "
                               "512 positions, 2 token types)",
                               where);
        }
    }
    if (cfg->text_layers < 1 || cfg->text_layers > 64)
        return nf__err_set(err, NF_ERR_CHECKPOINT, "%s: bad text_encoder num_hidden_layers %d", path, cfg->text_layers);
    if (cfg->vocab < 104 || cfg->vocab > (1 << 22))
        return nf__err_set(err, NF_ERR_CHECKPOINT, "%s: bad text_encoder vocab_size %d", path, cfg->vocab);
    return NF_OK;
}

static int nf__tab_config_write(const char * dir, const struct nf_tab_config * cfg, nf_err * err) {
    struct nf_tab_config def;
    nf__tab_config_default(&def);
    cJSON * doc = cJSON_CreateObject();
    if (!doc) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    /* TabStarConfig.to_dict() as save_pretrained writes it (the keys inference reads) */
    cJSON * arch = cJSON_AddArrayToObject(doc, "architectures");
    cJSON_AddItemToArray(arch, cJSON_CreateString("TabStarModel"));
    cJSON_AddNumberToObject(doc, "d_model", NF_TAB_D);
    cJSON_AddStringToObject(doc, "embedding_model", "intfloat/e5-small-v2");
    cJSON_AddStringToObject(doc, "model_type", "tabstar");
    cJSON_AddNumberToObject(doc, "num_layers", NF_TAB_LAYERS);
    cJSON_AddStringToObject(doc, "torch_dtype", "float32");
    if (cfg->text_layers != def.text_layers || cfg->vocab != def.vocab) {
        cJSON * te = cJSON_AddObjectToObject(doc, "text_encoder");
        cJSON_AddNumberToObject(te, "num_hidden_layers", cfg->text_layers);
        cJSON_AddNumberToObject(te, "vocab_size", cfg->vocab);
    }
    char path[4096];
    nf__path_join(path, sizeof(path), dir, "config.json");
    int rc = nf__json_write_file(path, doc, err);
    cJSON_Delete(doc);
    return rc;
}

/* ---- the synthetic vocabulary ------------------------------------------------------------ */

/* BERT uncased's layout where it matters: [PAD] 0, [unused0..98] 1..99,
 * [UNK] 100, [CLS] 101, [SEP] 102, [MASK] 103; then single characters (and
 * their ## forms), the words of the verbalizer's templates, digits pairs,
 * and filler words up to n_vocab. Deterministic. */
int nf__tab_write_vocab(const char * path, int n_vocab, nf_err * err) {
    static const char * const words[] = {
        "predictive", "feature", "value", "target", "numerical", "to",     "lower", "higher",  "than",   "quantile",
        "unknown",    "the",     "of",    "and",    "an",        "in",     "is",    "age",     "income", "class",
        "yes",        "no",      "true",  "false",  "red",       "green",  "blue",  "high",    "low",    "medium",
        "city",       "name",    "color", "score",  "rating",    "year",   "genre", "drama",   "not",    "price",
        "size",       "small",   "large", "type",   "##es",      "##ing",  "##ed",  "##er",    "##ly",   "##tion",
        "cat",        "dog",     "bird",  "fish",   "paris",     "london", "tokyo", "##ville", "state",  "group",
    };
    const int n_words = (int) (sizeof(words) / sizeof(words[0]));
    if (n_vocab < 1000 || n_vocab > (1 << 22))
        return nf__err_set(err, NF_ERR_ARG, "vocab size %d: at least 1000, at most 2^22", n_vocab);
    FILE * f = fopen(path, "wb");
    if (!f) return nf__err_set(err, NF_ERR_IO, "%s: cannot create", path);
    int n = 0;
    fprintf(f, "[PAD]\n");
    n++;
    for (int i = 0; i < 99; i++, n++) fprintf(f, "[unused%d]\n", i);
    fprintf(f, "[UNK]\n[CLS]\n[SEP]\n[MASK]\n");
    n += 4;
    for (int c = 33; c < 127; c++, n++) fprintf(f, "%c\n", c);
    for (int c = 33; c < 127; c++, n++) fprintf(f, "##%c\n", c);
    for (int i = 0; i < n_words; i++, n++) fprintf(f, "%s\n", words[i]);
    for (int i = 10; i < 100; i++, n++) fprintf(f, "%d\n", i);
    for (int i = 0; i < 100; i++, n++) fprintf(f, "##%02d\n", i);
    for (int i = 0; n < n_vocab; i++, n++) {
        /* filler: "q" + base-26 letters, never one of the words above */
        char w[16];
        int v = i, k = 0;
        w[k++] = 'q';
        do {
            w[k++] = (char) ('a' + v % 26);
            v /= 26;
        } while (v && k < 14);
        w[k] = '\0';
        fprintf(f, "%s\n", w);
    }
    const int bad = ferror(f);
    if (fclose(f) != 0 || bad) return nf__err_set(err, NF_ERR_IO, "%s: write failed", path);
    return NF_OK;
}

/* ---- gen-weights ------------------------------------------------------------------------ */

const struct nf_option_desc nf__tab_gen_options[] = {
    {"layers", "text encoder (BERT) layers (12; e5-small-v2's)"},
    {"vocab", "vocabulary size, also of the synthetic vocab.txt (30522; at least 1000)"},
    {NULL, NULL},
};

int nf__tab_gen_weights(const char * dir, const char * ckpt_path, uint64_t seed, int n, const char * const * keys,
                        const char * const * values, const char * perturb_key, float perturb_delta, char * summary,
                        size_t summary_n, nf_err * err) {
    struct nf_tab_config cfg;
    nf__tab_config_default(&cfg);
    for (int i = 0; i < n; i++) {
        if (strcmp(keys[i], "layers") == 0)
            NF_TRY(nf__option_int(keys[i], values[i], &cfg.text_layers, err));
        else if (strcmp(keys[i], "vocab") == 0)
            NF_TRY(nf__option_int(keys[i], values[i], &cfg.vocab, err));
        else
            return nf__err_set(err, NF_ERR_ARG, "tabstar has no option '%s'", keys[i]);
    }
    if (cfg.text_layers < 1 || cfg.text_layers > 64)
        return nf__err_set(err, NF_ERR_ARG, "--layers %d: 1 .. 64", cfg.text_layers);
    if (cfg.vocab < 1000 || cfg.vocab > (1 << 22))
        return nf__err_set(err, NF_ERR_ARG, "--vocab %d: 1000 .. 2^22", cfg.vocab);
    if (ckpt_path) return nf__err_set(err, NF_ERR_ARG, "tabstar has no torch.save checkpoint form");
    NF_TRY(nf__mkdir_p(dir, err));
    char path[4096];
    nf__path_join(path, sizeof(path), dir, "model.safetensors");
    NF_TRY(nf__weights_generate(path, &nf__tab_wtable, &cfg, seed, perturb_key, perturb_delta, err));
    nf__path_join(path, sizeof(path), dir, "vocab.txt");
    NF_TRY(nf__tab_write_vocab(path, cfg.vocab, err));
    NF_TRY(nf__tab_config_write(dir, &cfg, err));
    snprintf(summary, summary_n, "and vocab.txt: text encoder %d layers, vocabulary %d, 6 interaction layers, d 384",
             cfg.text_layers, cfg.vocab);
    return NF_OK;
}
