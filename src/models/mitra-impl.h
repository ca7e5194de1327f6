/* mitra-impl.h -- Mitra (Tab2D) internals shared by the loader, the forward
 * and the synthetic-weight generator. Spec: shared/specs/mitra.md §2-§4. */
#ifndef NF_MITRA_IMPL_H
#define NF_MITRA_IMPL_H

#include "nf-impl.h"
#include "model.h"

struct cJSON;

#define NF_MITRA_N_QUANTILES 999 /* q = 1/1000 .. 999/1000 */
#define NF_MITRA_Q_DENOM     1000
#define NF_MITRA_LN_EPS      1e-5f

enum nf_task { NF_TASK_CLASSIFICATION = 0, NF_TASK_REGRESSION = 1 };

struct nf_mitra_config {
    int dim, dim_output, n_layers, n_heads;
    int task; /* enum nf_task */
};

struct nf_mitra_layer {
    nf_tensor ln_w[4], ln_b[4];   /* layer_norm1..4                 */
    nf_tensor aw[2][4], ab[2][4]; /* attention{1,2}.{q,k,v,o}       */
    nf_tensor lw[4], lb[4];       /* linear1..4                     */
    /* q, k, v of each attention are packed back to back on the device, so
     * one LINEAR computes all three: qkv = [q; k; v] (3D, D), kv = [k; v] */
    nf_tensor qkv_w[2], qkv_b[2], kv_w[2], kv_b[2];
    char qkv_name[2][2][48]; /* "layers.L.attentionA.{qkv,kv}" */
};

enum { NF_MITRA_SUPPORT_X, NF_MITRA_SUPPORT_Y, NF_MITRA_QUERY_X, NF_MITRA_N_INPUTS };

/* measured during the last forward (nf_placement, with logits = outputs) */
struct nf_mitra_placement {
    char inputs[32], logits[32], ops[96];
};

typedef struct nf_mitra {
    nf_backend * be;
    struct nf_mitra_config cfg;
    struct nf_weights weights; /* one device buffer; views bound below */
    nf_tensor x_w, x_b, y_w, y_b, y_mask, fln_w, fln_b, f_w, f_b;
    struct nf_mitra_layer * layers;
    int64_t chunk_tokens;
    int64_t chunk_rows;
    int64_t query_chunk;            /* query rows a pass (0: as many as 16 chunks of chunk_tokens hold) */
    int64_t kv_cache_mb;            /* STREAM while every layer's support K/V fit (0: 4096) */
    int64_t support_passes;         /* the last forward: times the support stream was computed */
    int64_t query_begin, query_end; /* only the passes starting in [begin, end) (end 0: all; MPI shards) */
    int64_t rows_begin, rows_end;   /* the last forward: the query rows it computed */
    nf_stage_fn stage_fn;
    void * stage_user;
    int stages;
    struct nf_mitra_placement placement;
    struct nf__ws * ws; /* the last forward's device workspace, kept for the next one */
    struct nf_input_desc inputs[NF_MITRA_N_INPUTS];
} nf_mitra;

struct nf_mitra_input {
    int64_t n_support, n_query, n_features;
    const float * x_support; /* (n_support, n_features) row-major        */
    const float * x_query;   /* (n_query,   n_features)                  */
    const int64_t * y_class; /* classification: (n_support), 0..C-1      */
    const float * y_value;   /* regression:     (n_support)              */
};

/* Label tokens come from an embedding table (classification, and binned
 * regression with dim_output > 1) or from Linear(1, D) (regression, C == 1). */
int nf__mitra_class_labels(const struct nf_mitra_config * cfg);

/* The state_dict (spec §3) as a weight table; symbols D dim, C dim_output,
 * L n_layers; K class-label embedding, V value embedding (conditions). */
extern const struct nf_wtable nf__mitra_wtable;
/* mitra-inputs.c: the table from .npy files, the seeded table (verify's too) */
int nf__mitra_files(const char * sx, const char * sy, const char * qx, int class_labels, struct nf_inputs * out,
                    nf_err * err);
int nf__mitra_seeded(nf_model * model, uint64_t seed, int64_t ns, int64_t nq, int64_t nf, struct nf_inputs * out,
                     nf_err * err);
/* mitra-verify.c */
extern const struct nf_verify_i nf__mitra_verify;

/* config.json: read (the parsed document at path) / validate / write */
int nf__mitra_config_parse(const struct cJSON * doc, const char * path, struct nf_mitra_config * cfg, nf_err * err);
int nf__mitra_config_check(const struct nf_mitra_config * cfg, const char * where, nf_err * err);
int nf__mitra_config_write(const char * dir, const struct nf_mitra_config * cfg, nf_err * err);

/* gen-weights for the vtable (options dim, layers, heads, outputs, task) */
extern const struct nf_option_desc nf__mitra_gen_options[];
int nf__mitra_gen_weights(const char * dir, const char * ckpt_path, uint64_t seed, int n, const char * const * keys,
                          const char * const * values, const char * perturb_key, float perturb_delta, char * summary,
                          size_t summary_n, nf_err * err);

/* The forward (mitra.c). These two keep their historical names while the
 * forward is being rewritten (typed op calls); they are not public API. */
int nf_mitra_forward(nf_mitra * m, const struct nf_mitra_input * in, float * logits, nf_err * err);
void nf_mitra_release_workspace(nf_mitra * m);

#endif
