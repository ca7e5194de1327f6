/* tabstar-impl.h -- TabSTAR (the original, "v1": alana89/TabSTAR) internals
 * shared by the loader, the forward and the synthetic-weight generator.
 * Spec: shared/specs/tabstar.md §1 (pipeline), §4 (BERT), §5-7 (fusion,
 * interaction, heads), §8 + Appendix A (the 295 state_dict entries).
 *
 * Kept apart from a future TabSTAR v1.1 (tabstarv1p1: 6-wide numeric input,
 * LayerNorm fusion, a 200-bin regression head): that one would be its own
 * table and forward beside these; a v1.1 checkpoint is refused at load. */
#ifndef NF_TABSTAR_IMPL_H
#define NF_TABSTAR_IMPL_H

#include "nf-impl.h"
#include "model.h"

struct cJSON;
struct nf__wordpiece;

#define NF_TAB_D             384  /* D_MODEL, fixed upstream                       */
#define NF_TAB_FF            1536 /* the TELs' dim_feedforward = 4 D, head hidden  */
#define NF_TAB_SCALAR_HIDDEN 768  /* scalar_embedder: Linear(1, 2 D)              */
#define NF_TAB_FUSION_HEADS  2
#define NF_TAB_LAYERS        6 /* InteractionEncoder: always 6 (spec §6)        */
#define NF_TAB_HEADS         6 /* 384 // 64                                     */
#define NF_TAB_TEL_EPS       1e-5f
#define NF_TAB_BERT_EPS      1e-12f
#define NF_TAB_MAX_TOKENS    NF_TABSTAR_MAX_TOKENS /* nofall.h: BERT's model_max_length */

/* the e5-small-v2 BertModel inside (spec §4); text_layers and vocab may be
 * smaller in nofall's synthetic checkpoints (config.json "text_encoder") */
struct nf_tab_config {
    int text_layers, text_heads, text_ff, vocab, max_pos, type_vocab;
};

struct nf_tab_bert_layer {
    nf_tensor q_w, q_b, k_w, k_b, v_w, v_b; /* packed: [q; k; v] back to back */
    nf_tensor o_w, o_b, ln1_w, ln1_b;       /* attention.output.dense / LayerNorm */
    nf_tensor i_w, i_b, f_w, f_b, ln2_w, ln2_b;
    nf_tensor qkv_w, qkv_b; /* views (3D, D), (3D) */
    char qkv_w_name[64], qkv_b_name[64];
};

/* nn.TransformerEncoderLayer(norm_first=True) */
struct nf_tab_tel {
    nf_tensor in_w, in_b, out_w, out_b, l1_w, l1_b, l2_w, l2_b, n1_w, n1_b, n2_w, n2_b;
};

struct nf_tab_ws; /* a forward's device workspace (tabstar-forward.c) */

typedef struct nf_tab {
    nf_backend * be;
    struct nf_tab_config cfg;
    struct nf_weights weights;
    struct nf__wordpiece * vocab; /* DIR/vocab.txt */
    nf_tensor word, pos, type, eln_w, eln_b;
    struct nf_tab_bert_layer * bert; /* text_layers */
    nf_tensor pool_w, pool_b;        /* loaded (strict), unused: [CLS] is row 0 of the last hidden state */
    nf_tensor s0_w, s0_b, s3_w, s3_b;
    struct nf_tab_tel fusion;
    struct nf_tab_tel * tab; /* NF_TAB_LAYERS */
    nf_tensor cls_w0, cls_b0, cls_w2, cls_b2, reg_w0, reg_b0, reg_w2, reg_b2;
    struct nf_input_desc inputs[4];
    struct nf_tab_ws * ws;
    int stages;
    nf_stage_fn stage_fn;
    void * stage_user;
    int64_t last_strings, last_tokens; /* facts about the last forward */
    int adapter_modules;               /* LoRA modules merged (tabstar-lora.c) */
    struct {
        char inputs[32], logits[32], ops[96];
    } placement;
} nf_tab;

extern const struct nf_wtable nf__tab_wtable;

int nf__tab_config_parse(const struct cJSON * doc, const char * path, struct nf_tab_config * cfg, nf_err * err);
void nf__tab_config_default(struct nf_tab_config * cfg);

extern const struct nf_option_desc nf__tab_gen_options[];
int nf__tab_gen_weights(const char * dir, const char * ckpt_path, uint64_t seed, int n, const char * const * keys,
                        const char * const * values, const char * perturb_key, float perturb_delta, char * summary,
                        size_t summary_n, nf_err * err);
/* the synthetic vocabulary of gen-weights: n_vocab lines (>= 1000) */
int nf__tab_write_vocab(const char * path, int n_vocab, nf_err * err);

void nf__tab_bind_views(nf_tab * m);

/* The forward over pre-tokenized distinct strings (tabstar-forward.c):
 *   ids/lens: n_str strings, string u's ids at ids[off_u .. off_u + lens[u])
 *   (off_u = the sum of the lengths before it), each [CLS] ... [SEP];
 *   cell (B, S): the string index of every cell; x_num (B, S);
 *   C target tokens (cells 0..C-1 of every row);
 *   logits (B, C): cls_head when C > 1, reg_head when C == 1. */
int nf__tab_forward_tokens(nf_tab * m, const int32_t * ids, const int32_t * lens, int64_t n_str, const int32_t * cell,
                           const float * x_num, int64_t B, int64_t S, int64_t C, float * logits, nf_err * err);
void nf__tab_release_workspace(nf_tab * m);
int nf__tab_stage_count(const nf_tab * m);
int nf__tab_stage_name(const nf_tab * m, int i, char * out, size_t n);

/* Merge the PEFT LoRA adapter in dir (adapter_config.json +
 * adapter_model.safetensors) into the loaded weights (tabstar-lora.c);
 * summary: what was merged, in words. On an error the weights may be partly
 * merged: free the model. */
int nf__tab_merge_adapter(nf_model * model, const char * dir, char * summary, size_t summary_n, nf_err * err);

/* the loaded tokenizer (for the CLI's string inputs) */
const struct nf__wordpiece * nf__tab_vocab(const nf_model * model);

/* tabstar-verify.c */
extern const struct nf_verify_i nf__tabstar_verify;

#endif
