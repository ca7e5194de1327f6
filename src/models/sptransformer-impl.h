/* sptransformer-impl.h -- SpTransformer (SpliceTransformer) internals shared
 * by the loader, the (future) forward and the synthetic-weight generator.
 * Spec: shared/specs/sptransformer.md §1 (configuration), §3 (forward),
 * §4 + Appendix C (the 586 state_dict entries). */
#ifndef NF_SPTRANSFORMER_IMPL_H
#define NF_SPTRANSFORMER_IMPL_H

#include "nf-impl.h"
#include "model.h"

struct cJSON;

#define NF_SPT_N_ENCODERS  2
#define NF_SPT_N_RESBLOCKS 16  /* per encoder: W = 11 x 8, 21 x 8 */
#define NF_SPT_N_SKIPS     4   /* encoder.E.convs.0..3            */
#define NF_SPT_N_SPLICE    3   /* no_splice, acceptor, donor      */
#define NF_SPT_ENC0_WIDTH  128 /* SpEncoder_L(128)                */
#define NF_SPT_ENC1_WIDTH  64  /* SpEncoder2_L(64)                */
#define NF_SPT_IN_CHANNELS 4   /* one-hot A, C, G, T; N = 0       */

/* token ids: A=0, C=1, G=2, T/U=3, N=4 */
enum { NF_SPT_A = 0, NF_SPT_C, NF_SPT_G, NF_SPT_T, NF_SPT_N };

/* SpTransformer(dim, context_len, tissue_num, max_seq_len, attn_depth) and
 * the transformer that upstream's AttnBlock builds from it (fixed there:
 * heads 8, 2 local heads, bucket 64, ff mult 4; attn_dim = 2 dim,
 * dim_head = attn_dim / heads). The released model: 128, 4000, 15, 8192, 8. */
struct nf_spt_config {
    int dim, context_len, tissue_num, max_seq_len, attn_depth;
    int attn_dim, heads, dim_head, n_local_attn_heads, bucket_size, ff_mult;
};

/* a BatchNorm1d in eval: weight, bias, running_mean, running_var */
struct nf_spt_bn {
    nf_tensor w, b, mean, var;
};

struct nf_spt_resblock {
    struct nf_spt_bn bn1, bn2;
    nf_tensor conv1_w, conv1_b, conv2_w, conv2_b;
};

struct nf_spt_encoder {
    nf_tensor conv1_w, conv1_b, skip_w, skip_b;
    struct nf_spt_resblock * res; /* NF_SPT_N_RESBLOCKS */
    nf_tensor convs_w[NF_SPT_N_SKIPS], convs_b[NF_SPT_N_SKIPS];
    /* encoder.0 only, unused by the forward (loaded: the load is strict) */
    nf_tensor splice_w, splice_b, tissue_w, tissue_b;
};

struct nf_spt_layer {
    nf_tensor ln0_w, ln0_b, to_q, to_kv, to_out_w, to_out_b; /* PreNorm(SinkhornSelfAttention) */
    nf_tensor ln1_w, ln1_b, w1, b1, w2, b2;                  /* PreNorm(Chunk(FeedForward))    */
    nf_tensor qkv;                                           /* view: [to_q; to_kv] (3Q, A)    */
    char qkv_name[48];
};

struct nf_spt_ws; /* a forward's device workspace (sptransformer-forward.c) */

typedef struct nf_spt {
    nf_backend * be;
    struct nf_spt_config cfg;
    struct nf_weights weights;            /* one device buffer; views bound below */
    struct nf_spt_encoder * enc;          /* NF_SPT_N_ENCODERS */
    nf_tensor c10_w, c10_b, c11_w, c11_b; /* conv1.0, conv1.1: the direct path */
    nf_tensor c2_w, c2_b;                 /* conv2: fusion */
    nf_tensor pe0, pe1;                   /* attn.pos_emb.weights_{0,1} */
    struct nf_spt_layer * layers;         /* attn_depth */
    nf_tensor norm_w, norm_b;             /* attn.norm */
    nf_tensor splice_w, splice_b, usage_w, usage_b;
    struct nf_input_desc input;
    struct nf_spt_ws * ws; /* kept for the next forward of the same shape */
    /* option "batch_reuse" (sptransformer-forward.c, "Reuse within a batch"):
     * 0 every sequence in full; 1 (default) identical sequences once and
     * encoder rows reused where that saves a quarter; 2 reuse wherever a
     * sequence differs from an earlier one (tests) */
    int64_t batch_reuse;
    int64_t last_distinct, last_reused; /* of the last forward: options "distinct", "reused" */
    int stages;                         /* enum nf_stages */
    nf_stage_fn stage_fn;
    void * stage_user;
    struct {
        char inputs[32], logits[32], ops[96];
    } placement;
} nf_spt;

/* The state_dict as a weight table. Symbols: E encoders (2), H encoder width
 * (by encoder), B resblocks (16), W kernel width (by resblock), O encoder 0
 * (its unused heads), T tissue_num, D dim, C conv2 inputs (dim + 192),
 * A attn_dim, Q heads x dim_head, F ff inner (ff_mult x attn_dim),
 * R axial rows (max_seq_len / bucket), G bucket_size, L attn_depth. */
extern const struct nf_wtable nf__spt_wtable;

/* config.json: read (the parsed document at path) / validate / write */
int nf__spt_config_parse(const struct cJSON * doc, const char * path, struct nf_spt_config * cfg, nf_err * err);
int nf__spt_config_check(const struct nf_spt_config * cfg, const char * where, nf_err * err);
int nf__spt_config_write(const char * dir, const struct nf_spt_config * cfg, nf_err * err);
struct cJSON * nf__spt_config_json(const struct nf_spt_config * cfg); /* NULL: out of memory */
/* the released configuration */
void nf__spt_config_default(struct nf_spt_config * cfg);

/* gen-weights for the vtable (options dim, depth, tissues) */
extern const struct nf_option_desc nf__spt_gen_options[];
int nf__spt_gen_weights(const char * dir, const char * ckpt_path, uint64_t seed, int n, const char * const * keys,
                        const char * const * values, const char * perturb_key, float perturb_delta, char * summary,
                        size_t summary_n, nf_err * err);

/* the forward (sptransformer-forward.c): tokens (B, L) ids 0..4, the
 * length already checked (2 context + 1 <= L <= 2 context + max_seq_len);
 * logits (B, L - 2 context, 3 + tissue_num) */
int nf__spt_forward_tokens(nf_spt * m, const int64_t * tokens, int64_t B, int64_t L, float * logits, nf_err * err);
void nf__spt_release_workspace(nf_spt * m);
int nf__spt_stage_count(const nf_spt * m);
int nf__spt_stage_name(const nf_spt * m, int i, char * out, size_t n);
/* views the forward uses, made once after the weights are bound */
void nf__spt_bind_views(nf_spt * m);

/* The seeded input (README "SpTransformer inputs"): n tokens in 0..3 from
 * splitmix64 (nf__rng_next) started at seed, token i = next() >> 62 (the top
 * two bits: A, C, G, T). Integer-only; reference/sptransformer_fixtures.py
 * has the same generator. */
void nf__spt_seeded_tokens(uint64_t seed, int64_t n, int8_t * out);
/* (sptransformer-weights.c; nofall-genomics.h nf_seq_* and verify read through
 * them) B sequences of n core ids each (core: B * n), flanked: pad adds
 * context N on each side; *ids: B x *L, malloc'ed. flag and path name the
 * input in the message of an empty one. */
int nf__spt_tokens_make(const int8_t * core, int64_t B, int64_t n, int pad, int64_t context, const char * flag,
                        const char * path, int8_t ** ids, int64_t * L, nf_err * err);
/* a .npy of ids (int8/int32/int64, (L,) or (B, L)), flanked as above */
int nf__spt_tokens_npy(const char * path, int pad, int64_t context, int8_t ** ids, int64_t * B, int64_t * L,
                       nf_err * err);
/* sptransformer-verify.c */
extern const struct nf_verify_i nf__spt_verify;

#endif
