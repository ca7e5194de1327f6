/* mitra-forward.h -- the forward's work area and sub-blocks (mitra-blocks.c),
 * shared by the inference forward (mitra.c) and the training step
 * (mitra-train.c). Spec: shared/specs/mitra.md §4. */
#ifndef NF_MITRA_FORWARD_H
#define NF_MITRA_FORWARD_H

#include "mitra-impl.h"
#include "nf-ops.h"

/* ---- forward: the work area ------------------------------------------------------------ */

/* The residual stream X (nx, T, D) holds the support rows [0, n_s) followed
 * by the query rows of one pass [n_s, nx): every sub-block but the choice of
 * row-attention keys treats the two alike, so they share each GEMM. The
 * queries go through in passes of at most qc rows (spec §4.9: a query row
 * only reads the support rows' keys and values, never another query row):
 *
 *   JOINT      all queries in one pass with the support (nq <= qc): X holds
 *              every row, and one layer's support K/V at a time;
 *   STREAM     the support once, layer by layer, keeping every layer's
 *              support K/V (n_layers x n_s x T x 2D floats); then the query
 *              rows qc at a time through all layers against them -- memory
 *              independent of the number of queries, the same FLOPs as JOINT;
 *   RECOMPUTE  when that cache would exceed kv_cache_mb: one JOINT pass per
 *              query chunk, the support recomputed each time (as upstream
 *              does with its 1,024-row chunks), memory still bounded.
 * A forward with every stage reported (NF_STAGES_ALL) runs JOINT: its stages
 * are the whole stream. */
enum nf__pass_mode { NF__JOINT, NF__STREAM, NF__RECOMPUTE };

struct nf__ws {
    int64_t ns, nq, F, T, D, ct; /* ct: tokens per chunk of a sub-block */
    int64_t qc, nx;              /* query rows per pass, stream rows (ns + qc) */
    int mode, n_kv;              /* enum nf__pass_mode, K/V slices kept   */
    nf_tensor xs, xq, ys, B, zs, zq;
    nf_tensor X;              /* the residual stream                       */
    nf_tensor KV;             /* row attention: n_kv x [k v] of the support rows, (n_s, T, 2D) each */
    nf_tensor Xn, Pqkv, A, H; /* per-chunk scratch; Pqkv (ct, 3D)          */
    nf_tensor hq, logits;
    float *host_s, *host_q;  /* the inputs read back (stage dumps)        */
    struct nf_workspace mem; /* the tensors above, freed together; the stage dumps of the stream */
};

void nf__mitra_ws_free_host(struct nf__ws * w);
void nf__mitra_ws_free(struct nf__ws * w);
/* floats of one K/V slice: [k v] of the support rows, (n_s, T, 2D) */
int64_t nf__mitra_kv_elems(const struct nf__ws * w);
/* the tensors of w for its shape fields (ns, nq, F, T, D, ct, qc, nx, n_kv); C logits per query row */
int nf__mitra_ws_alloc(nf_mitra * m, struct nf__ws * w, int64_t C, nf_err * err);
/* rows [r0, r1) of a stream-shaped tensor, as a flat view */
nf_tensor nf__mitra_rows(const struct nf__ws * w, const nf_tensor * t, int64_t r0, int64_t r1);
/* K/V slice i: (n_s, T, 2D) */
nf_tensor nf__mitra_kv(const struct nf__ws * w, int i);

/* (b)/(d): X += linear_{2h+2}(GELU(linear_{2h+1}(LN_{2h+2}(X)))) for rows [rbeg, rend) in chunks of crows;
 * tok0: token 0 of each row only (the last layer's queries) */
int nf__mitra_mlp(nf_graph * g, struct nf__ws * w, const struct nf_mitra_layer * L, int half, int64_t rbeg,
                  int64_t rend, int64_t crows, int tok0);
/* (c): X[r] += O2(MHA over the T tokens of row r); tok0: token 0 only */
int nf__mitra_feature_attention(nf_graph * g, struct nf__ws * w, const nf_mitra * m, const struct nf_mitra_layer * L,
                                int64_t rbeg, int64_t rend, int64_t crows, int tok0);
/* (a), first half: kv (n_s, T, 2D) = [K1 V1] LN1(S) of the support rows */
int nf__mitra_row_kv(nf_graph * g, struct nf__ws * w, const struct nf_mitra_layer * L, nf_tensor kv, int64_t crows);
/* the row attention's layout: c query rows (T, D each) against the support's packed [k v] */
struct nf_attn_layout nf__mitra_row_layout(const struct nf__ws * w, const nf_mitra * m, int64_t c);
/* (a), second half: rows [rbeg, rend) attend to the support rows' kv */
int nf__mitra_row_attend(nf_graph * g, struct nf__ws * w, const nf_mitra * m, const struct nf_mitra_layer * L,
                         nf_tensor kv, int64_t rbeg, int64_t rend, int64_t crows);
/* token embeddings: the support rows into X[0, n_s); query rows [q0, q0 + c) into X[n_s, n_s + c) */
int nf__mitra_embed_support(nf_graph * g, const nf_mitra * m, struct nf__ws * w);
int nf__mitra_embed_queries(nf_graph * g, const nf_mitra * m, struct nf__ws * w, int64_t q0, int64_t c);
/* logits[q0, q0 + c) = the head on token 0 of the query rows X[n_s, n_s + c) */
int nf__mitra_head(nf_graph * g, const nf_mitra * m, struct nf__ws * w, int64_t q0, int64_t c);

/* the inputs' sizes, finiteness and labels (mitra.c) */
int nf__mitra_check_input(const nf_mitra * m, const struct nf_mitra_input * in, nf_err * err);

#endif
