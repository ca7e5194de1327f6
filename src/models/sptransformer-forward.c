/* sptransformer-forward.c -- SpTransformer's forward, as spec §3 writes it
 * (shared/specs/sptransformer.md; Appendix A is the same in NumPy).
 *
 * Layout: position-major, as the transformer sees it: a sequence is (rows =
 * positions, columns = channels), so every 1x1 Conv1d is a LINEAR and the
 * dilated Conv1d's a CONV1D over rows. B sequences of one length L run in
 * one forward; sequence b's rows follow sequence b-1's.
 *
 *   §3.1  two encoders (widths 128 and 64): conv1, skip, 16 resblocks of
 *         BN-ReLU-conv-BN-ReLU-conv with an identity residual, a skip conv
 *         after every 4th; their skips go straight into columns 0..127 and
 *         128..191 of the feature buffer `feat`
 *   §3.2  the direct path conv1.1(conv1.0(x)) into columns 192..319
 *   §3.3  the 8192-row window of feat: rows s .. s+8191 with s = ceil((L -
 *         8192) / 2); feat is allocated with `zpad` zero rows before the
 *         sequence (and zero rows after it) so that the window is one run of
 *         rows whether it crops or pads
 *   §3.4  conv2 (320 -> 256) over the window
 *   §3.5  + the axial positional embedding; 8 pre-LN layers; LayerNorm
 *   §3.6  heads 0, 1: local attention (windows of 64, one window back and
 *         forward, no keys past the ends); heads 2..7: the top-1 bucket of
 *         each query bucket (BUCKET_ROUTE), its keys scaled by the bucket's
 *         probability and reused as values (BUCKET_GATHER), ATTENTION over
 *         [those; the bucket's own]
 *   §3.7  the feed-forward, exact erf GELU
 *   §3.8  the splice and usage heads on rows t .. t + L-8000 of the window,
 *         t = ceil(e/2) - (L & 1), e = 8192 - (L - 8000): output row i is
 *         input position 4000 + i
 *
 * Within a batch, a repeated sequence is computed once and a sequence that
 * differs from another in a short run reuses that one's encoder rows
 * outside the run's receptive field ("reuse within a batch" below; option
 * batch_reuse).
 */
#include "sptransformer-impl.h"
#include "nf-ops.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NF_SPT_LN_EPS 1e-5f
#define NF_SPT_BN_EPS 1e-5f

/* the dilated convs of a resblock (spec §3.1): widths and dilations */
static const int nf__spt_ar[NF_SPT_N_RESBLOCKS] = {1, 1, 1, 1, 4, 4, 4, 4, 10, 10, 10, 10, 20, 20, 20, 20};

static int64_t nf__floordiv(int64_t a, int64_t b) { /* Python's a // b, b > 0 */
    const int64_t q = a / b;
    return (a % b != 0 && a < 0) ? q - 1 : q;
}

struct nf_spt_ws {
    int64_t B, L;            /* batch, input length                              */
    int64_t N;               /* window rows: max_seq_len                         */
    int64_t start;           /* window start s in input positions (may be < 0)   */
    int64_t zpad;            /* zero rows of feat before the sequence: max(0, -s) */
    int64_t R;               /* feat rows per sequence                           */
    int64_t out_len;         /* L - 2 context                                    */
    int64_t out_off;         /* first window row of the output                   */
    nf_tensor x;             /* (B L, 4) one-hot                                  */
    nf_tensor conv, h1, h2;  /* (B L, 128): an encoder's stream and scratch */
    nf_tensor feat;          /* (B, R, 320)                                 */
    nf_tensor X, Xn;         /* (B N, A)                                    */
    nf_tensor qkv;           /* (B N, 3A): q, k, v                          */
    nf_tensor O;             /* (B N, A): the heads' outputs                */
    nf_tensor H;             /* (N, F): the feed-forward's hidden rows      */
    nf_tensor sel, prob;     /* (B, sinkhorn heads, N / bucket [, 2])       */
    nf_tensor kcat, vcat;    /* (B N/bucket, 2 bucket, sinkhorn heads x E)  */
    nf_tensor logits;        /* (B, out_len, 18)                            */
    nf_tensor rowidx;        /* i32 0 .. L-1 (row copies by GATHER_ROWS), made when first needed */
    struct nf_workspace mem; /* the tensors above, freed together; the stage dumps */
};

static void nf__ws_free(struct nf_spt_ws * w) {
    if (!w) return;
    nf__workspace_release(&w->mem);
    free(w);
}

void nf__spt_release_workspace(nf_spt * m) {
    if (!m) return;
    nf__ws_free(m->ws);
    m->ws = NULL;
}

void nf__spt_bind_views(nf_spt * m) {
    const int64_t A = m->cfg.attn_dim;
    for (int l = 0; l < m->cfg.attn_depth; l++) {
        struct nf_spt_layer * Ly = &m->layers[l];
        const int64_t ne[2] = {3 * A, A};
        Ly->qkv = nf__tensor_view(&Ly->to_q, 0, 2, ne); /* the table packs to_kv right after to_q */
        snprintf(Ly->qkv_name, sizeof(Ly->qkv_name), "layers.%d.to_q+to_kv", l);
        Ly->qkv.name = Ly->qkv_name;
    }
}

/* a (out, in, 1) Conv1d weight as the (out, in) matrix of a LINEAR */
static const nf_tensor * nf__w2(const nf_tensor * w, nf_tensor * tmp) {
    const int64_t ne[2] = {w->ne[0], w->ne[1]};
    *tmp = nf__tensor_view(w, 0, 2, ne);
    tmp->name = w->name;
    return tmp;
}

static int nf__ws_alloc(nf_spt * m, struct nf_spt_ws * w, nf_err * err) {
    nf_backend * be = m->be;
    const struct nf_spt_config * c = &m->cfg;
    const int64_t B = w->B, L = w->L, N = w->N, A = c->attn_dim, E = c->dim_head;
    const int64_t nsh = c->heads - c->n_local_attn_heads, nb = N / c->bucket_size;
    const int64_t Cf = c->dim + NF_SPT_ENC0_WIDTH + NF_SPT_ENC1_WIDTH,
                  Hmax = NF_SPT_ENC0_WIDTH > c->dim ? NF_SPT_ENC0_WIDTH : c->dim;
#define NF__ALLOC(t, type, name, n)                                                \
    do {                                                                           \
        const int64_t ne_[1] = {(n)};                                              \
        NF_TRY(nf__workspace_tensor(&w->mem, be, &w->t, type, 1, ne_, name, err)); \
    } while (0)
    NF__ALLOC(x, NF_F32, "one_hot", B * L * NF_SPT_IN_CHANNELS);
    NF__ALLOC(conv, NF_F32, "encoder_stream", B * L * Hmax);
    NF__ALLOC(h1, NF_F32, "encoder_scratch1", B * L * Hmax);
    NF__ALLOC(h2, NF_F32, "encoder_scratch2", B * L * Hmax);
    NF__ALLOC(feat, NF_F32, "features", B * w->R * Cf);
    NF__ALLOC(X, NF_F32, "stream", B * N * A);
    NF__ALLOC(Xn, NF_F32, "normed", B * N * A);
    NF__ALLOC(qkv, NF_F32, "qkv", B * N * 3 * A);
    NF__ALLOC(O, NF_F32, "heads_out", B * N * A);
    NF__ALLOC(H, NF_F32, "ff_hidden", N * (int64_t) c->ff_mult * A);
    NF__ALLOC(sel, NF_I32, "bucket_choice", B * nsh * nb);
    NF__ALLOC(prob, NF_F32, "bucket_prob", B * nsh * nb * 2);
    NF__ALLOC(kcat, NF_F32, "bucket_keys", B * nb * 2 * c->bucket_size * nsh * E);
    NF__ALLOC(vcat, NF_F32, "bucket_values", B * nb * 2 * c->bucket_size * nsh * E);
    NF__ALLOC(logits, NF_F32, "logits", B * w->out_len * (NF_SPT_N_SPLICE + c->tissue_num));
#undef NF__ALLOC
    return NF_OK;
}

static int nf__ws_get(nf_spt * m, int64_t B, int64_t L, struct nf_spt_ws ** out, nf_err * err) {
    struct nf_spt_ws * w = m->ws;
    if (w && w->B == B && w->L == L) {
        *out = w;
        return NF_OK;
    }
    nf__spt_release_workspace(m);
    w = calloc(1, sizeof(*w));
    if (!w) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    const int64_t N = m->cfg.max_seq_len, ctx2 = 2 * (int64_t) m->cfg.context_len;
    w->B = B;
    w->L = L;
    w->N = N;
    w->start = -nf__floordiv(-(L - N), 2); /* -((-d) // 2) = ceil(d / 2) */
    w->zpad = w->start < 0 ? -w->start : 0;
    w->R = w->zpad + (L > w->start + N ? L : w->start + N);
    w->out_len = L - ctx2;
    const int64_t e = N - w->out_len;
    w->out_off = -(nf__floordiv(-e, 2) + (L & 1)); /* -(left pad) of spec §3.8 */
    int rc = nf__ws_alloc(m, w, err);
    if (rc != NF_OK) {
        nf__ws_free(w);
        return rc;
    }
    *out = m->ws = w;
    return NF_OK;
}

/* ---- stages (verify --bisect) ------------------------------------------------------------ */

/* inputs.one_hot, features, embedding, per layer: attention, buckets,
 * bucket_prob, feed_forward; norm, head */
int nf__spt_stage_count(const nf_spt * m) { return 5 + 4 * m->cfg.attn_depth; }

int nf__spt_stage_name(const nf_spt * m, int i, char * out, size_t n) {
    static const char * const first[3] = {"inputs.one_hot", "features", "embedding"};
    static const char * const sub[4] = {"attention", "buckets", "bucket_prob", "feed_forward"};
    const int count = nf__spt_stage_count(m);
    if (i < 0 || i >= count) return 0;
    if (i < 3)
        snprintf(out, n, "%s", first[i]);
    else if (i == count - 2)
        snprintf(out, n, "norm");
    else if (i == count - 1)
        snprintf(out, n, "head");
    else
        snprintf(out, n, "layers.%d.%s", (i - 3) / 4, sub[(i - 3) % 4]);
    return 1;
}

/* hand a device tensor (its first numel(shape) elements) to the stage callback */
static int nf__stage(nf_spt * m, struct nf_spt_ws * w, const char * name, const nf_tensor * t, int ndim,
                     const int64_t * shape, int always, nf_err * err) {
    return nf__workspace_stage(&w->mem, m->stages, m->stage_fn, m->stage_user, name, t, ndim, shape, always, err);
}

/* ---- the blocks -------------------------------------------------------------------------- */

/* rows [r0, r0 + n) of a (rows, width) tensor */
static nf_tensor nf__rows(const nf_tensor * t, int64_t r0, int64_t n, int64_t width) {
    return nf_view1(t, r0 * width, n * width);
}

/* ---- reuse within a batch ----------------------------------------------------------------
 *
 * annotate's batches are pairs of windows that differ in one base (the
 * reference and the alternate allele), and a multi-allelic record repeats
 * its reference window. nf__spt_plan orders the batch's distinct sequences
 * so that the first F are computed in full and each later one names a base
 * among them whose tokens differ from its own only at positions [lo, hi).
 * The encoders are convolutions with pointwise steps between them, so such
 * a sequence's encoder rows can differ from its base's only within the
 * receptive field of [lo, hi): a resblock with "same" padding p per conv
 * widens that run by 2p. Its resblocks run on that run (plus the rows the
 * convs read), the rest of its residual stream is copied from its base's
 * after every resblock; everything after the encoders (the fusion, the
 * transformer, the heads) runs on every distinct sequence in full. The
 * rows computed are those a full forward computes, the same operations on
 * the same values, so the result is the full forward's up to the GEMM's
 * blocking (within fp32 rounding; tests/test-spt-reuse.c). */

struct nf_spt_plan {
    int64_t B, F;   /* distinct sequences; the first F in full                        */
    int64_t * src;  /* (B) the input sequence each computed one is                     */
    int64_t * of;   /* (B_in) the computed sequence each input one is                  */
    int64_t * base; /* (B) for b >= F: its base, < F                                   */
    int64_t * lo;   /* (B) for b >= F: positions [lo, hi) where it differs from its base */
    int64_t * hi;
};

static void nf__plan_free(struct nf_spt_plan * pl) {
    free(pl->src);
    free(pl->of);
    free(pl->base);
    free(pl->lo);
    free(pl->hi);
}

/* the "same" padding of resblock i's convs */
static int64_t nf__res_pad(const nf_spt * m, int i) { return nf__spt_ar[i] * (m->enc[0].res[i].conv1_w.ne[2] - 1) / 2; }

static int64_t nf__clip(int64_t v, int64_t L) { return v < 0 ? 0 : v > L ? L : v; }

/* The rows of one resblock (padding p) for a sequence differing from its
 * base at positions [lo, hi) of L, its run widened by `grow` by the
 * resblocks before (clipping once is clipping each time: the bounds only
 * move outward). A conv over a run of rows as if it were a whole sequence is
 * right except in the p rows at an end that is not the sequence's; so BN1
 * and conv1 on [lo-4p, hi+4p) (right on [lo-3p, hi+3p)), BN2 and conv2 on
 * that (right on [lo-2p, hi+2p): the new run), the rest copied. */
struct nf_delta_rows {
    int64_t r1, n1; /* BN1, conv1 */
    int64_t r2, n2; /* BN2, conv2 */
    int64_t lo, hi; /* the run after this resblock; outside it the base's rows */
};

static struct nf_delta_rows nf__delta_rows(int64_t lo, int64_t hi, int64_t grow, int64_t p, int64_t L) {
    lo -= grow;
    hi += grow;
    const struct nf_delta_rows d = {nf__clip(lo - 4 * p, L), nf__clip(hi + 4 * p, L) - nf__clip(lo - 4 * p, L),
                                    nf__clip(lo - 3 * p, L), nf__clip(hi + 3 * p, L) - nf__clip(lo - 3 * p, L),
                                    nf__clip(lo - 2 * p, L), nf__clip(hi + 2 * p, L)};
    return d;
}

/* the dilated convs' rows for a sequence differing at [lo, hi), as a
 * fraction of a full sequence's (the rows nf__resblock_delta computes) */
static double nf__delta_cost(const nf_spt * m, int64_t lo, int64_t hi, int64_t L) {
    double part = 0.0, full = 0.0;
    int64_t grow = 0;
    for (int i = 0; i < NF_SPT_N_RESBLOCKS; i++) {
        const int64_t p = nf__res_pad(m, i), K = m->enc[0].res[i].conv1_w.ne[2];
        const struct nf_delta_rows d = nf__delta_rows(lo, hi, grow, p, L);
        part += (double) K * (double) (d.n1 + d.n2);
        full += (double) K * 2.0 * (double) L;
        grow += 2 * p;
    }
    return part / full;
}

static uint64_t nf__seq_hash(const int64_t * t, int64_t L) {
    uint64_t h = 1469598103934665603u; /* FNV-1a */
    for (int64_t i = 0; i < L; i++) h = (h ^ (uint64_t) t[i]) * 1099511628211u;
    return h;
}

/* how many of the latest full sequences a sequence is compared with */
#define NF_SPT_BASE_SCAN 8

static int nf__spt_plan(const nf_spt * m, const int64_t * tokens, int64_t B, int64_t L, struct nf_spt_plan * pl,
                        nf_err * err) {
    memset(pl, 0, sizeof(*pl));
    const size_t n = (size_t) B;
    pl->src = malloc(n * sizeof(int64_t));
    pl->of = malloc(n * sizeof(int64_t));
    pl->base = malloc(n * sizeof(int64_t));
    pl->lo = malloc(n * sizeof(int64_t));
    pl->hi = malloc(n * sizeof(int64_t));
    uint64_t * hash = malloc(n * sizeof(uint64_t));
    int64_t * uniq = malloc(n * sizeof(int64_t)); /* input index of each distinct sequence, in input order */
    int64_t * kind = malloc(n * sizeof(int64_t)); /* per distinct one: -1 full, else its base (distinct index) */
    int64_t *dlo = malloc(n * sizeof(int64_t)), *dhi = malloc(n * sizeof(int64_t)), *slot = malloc(n * sizeof(int64_t));
    int rc = NF_OK;
    if (!pl->src || !pl->of || !pl->base || !pl->lo || !pl->hi || !hash || !uniq || !kind || !dlo || !dhi || !slot) {
        rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory planning a batch of %lld", (long long) B);
        goto out;
    }
    const int reuse = m->stages == NF_STAGES_NONE ? (int) m->batch_reuse : 0; /* stage dumps: the batch as given */
    int64_t U = 0, nfull = 0;
    for (int64_t i = 0; i < B; i++) {
        const int64_t * t = tokens + i * L;
        int64_t u = -1;
        if (reuse) {
            hash[i] = nf__seq_hash(t, L);
            for (int64_t v = 0; v < U && u < 0; v++)
                if (hash[uniq[v]] == hash[i] && memcmp(tokens + uniq[v] * L, t, (size_t) L * sizeof(int64_t)) == 0)
                    u = v;
        }
        if (u >= 0) {
            pl->of[i] = u; /* a distinct index for now */
            continue;
        }
        u = U++;
        uniq[u] = i;
        pl->of[i] = u;
        kind[u] = -1;
        /* the latest full ones: the one it differs from in the shortest run */
        int64_t best = -1, blo = 0, bhi = L;
        for (int64_t v = u - 1, seen = 0; reuse && v >= 0 && seen < NF_SPT_BASE_SCAN; v--) {
            if (kind[v] != -1) continue;
            seen++;
            const int64_t * s = tokens + uniq[v] * L;
            int64_t lo = 0, hi = L;
            while (lo < L && s[lo] == t[lo]) lo++;
            while (hi > lo && s[hi - 1] == t[hi - 1]) hi--;
            if (best < 0 || hi - lo < bhi - blo) best = v, blo = lo, bhi = hi;
        }
        if (best >= 0 && (reuse == 2 || nf__delta_cost(m, blo, bhi, L) <= 0.75)) {
            kind[u] = best;
            dlo[u] = blo;
            dhi[u] = bhi;
        } else {
            nfull++;
        }
    }
    /* the computed order: the full ones, then the others, each in input order */
    pl->B = U;
    pl->F = nfull;
    int64_t nf_ = 0, nd = nfull;
    for (int64_t u = 0; u < U; u++) slot[u] = kind[u] == -1 ? nf_++ : nd++;
    for (int64_t u = 0; u < U; u++) {
        const int64_t b = slot[u];
        pl->src[b] = uniq[u];
        pl->base[b] = kind[u] == -1 ? -1 : slot[kind[u]];
        pl->lo[b] = kind[u] == -1 ? 0 : dlo[u];
        pl->hi[b] = kind[u] == -1 ? 0 : dhi[u];
    }
    for (int64_t i = 0; i < B; i++) pl->of[i] = slot[pl->of[i]];
out:
    free(hash);
    free(uniq);
    free(kind);
    free(dlo);
    free(dhi);
    free(slot);
    if (rc != NF_OK) nf__plan_free(pl);
    return rc;
}

/* rows [r0, r0 + n) of sequence b's rows (of width H) in an encoder buffer */
static nf_tensor nf__seq_rows(const nf_tensor * t, const struct nf_spt_ws * w, int64_t b, int64_t r0, int64_t n,
                              int64_t H) {
    return nf__rows(t, b * w->L + r0, n, H);
}

/* sequence b's encoder stream rows [r0, r0 + n) = sequence a's */
static int nf__copy_rows(nf_graph * g, struct nf_spt_ws * w, int64_t H, int64_t a, int64_t b, int64_t r0, int64_t n) {
    if (n <= 0) return NF_OK;
    const struct nf_gather gs = {.rows = n, .k = H, .n_table = w->L, .ldw = H, .ldy = H, .scale = 1.0f};
    return nf_gather_rows(g, nf_label(g, "reuse_rows"), &gs, nf_view1(&w->rowidx, r0, n),
                          nf__seq_rows(&w->conv, w, a, 0, w->L, H), nf__seq_rows(&w->conv, w, b, r0, n, H));
}

/* resblock i for computed sequence b of the plan, whose stream differs from
 * its base a's (this resblock done) only in its run (nf__delta_rows), and
 * is right everywhere: the rows there, the rest of the stream from a */
static int nf__resblock_delta(nf_graph * g, const struct nf_spt_resblock * r, struct nf_spt_ws * w,
                              const struct nf_spt_plan * pl, int64_t H, int i, int64_t p, int64_t grow, int64_t b) {
    const int64_t L = w->L, ar = nf__spt_ar[i], a = pl->base[b];
    const struct nf_delta_rows d = nf__delta_rows(pl->lo[b], pl->hi[b], grow, p, L);
    const int64_t r1 = d.r1, n1 = d.n1, r2 = d.r2, n2 = d.n2;
    const struct nf_conv1d_shape c1 = {1, n1, ar, p}, c2 = {1, n2, ar, p};
    NF_TRY(nf_batch_norm(g, nf_label(g, "resblocks.%d.bn1", i), nf__seq_rows(&w->conv, w, b, r1, n1, H), n1, H,
                         &r->bn1.w, &r->bn1.b, &r->bn1.mean, &r->bn1.var, nf__seq_rows(&w->h1, w, b, r1, n1, H),
                         NF_SPT_BN_EPS, 1));
    NF_TRY(nf_conv1d(g, nf_label(g, "resblocks.%d.conv1", i), &c1, nf__seq_rows(&w->h1, w, b, r1, n1, H), &r->conv1_w,
                     &r->conv1_b, nf__seq_rows(&w->h2, w, b, r1, n1, H), 0));
    NF_TRY(nf_batch_norm(g, nf_label(g, "resblocks.%d.bn2", i), nf__seq_rows(&w->h2, w, b, r2, n2, H), n2, H, &r->bn2.w,
                         &r->bn2.b, &r->bn2.mean, &r->bn2.var, nf__seq_rows(&w->h1, w, b, r2, n2, H), NF_SPT_BN_EPS,
                         1));
    NF_TRY(nf_conv1d(g, nf_label(g, "resblocks.%d.conv2", i), &c2, nf__seq_rows(&w->h1, w, b, r2, n2, H), &r->conv2_w,
                     &r->conv2_b, nf__seq_rows(&w->conv, w, b, r2, n2, H), 1));
    NF_TRY(nf__copy_rows(g, w, H, a, b, 0, d.lo));
    return nf__copy_rows(g, w, H, a, b, d.hi, L - d.hi);
}

/* §3.1: encoder e; its skip goes to columns col .. col+H of feat. The
 * first pl->F sequences in full, the others by nf__resblock_delta. */
static int nf__encoder(nf_graph * g, const nf_spt * m, struct nf_spt_ws * w, const struct nf_spt_plan * pl, int e,
                       int64_t col) {
    const struct nf_spt_encoder * en = &m->enc[e];
    const int64_t H = e == 0 ? NF_SPT_ENC0_WIDTH : NF_SPT_ENC1_WIDTH, B = w->B, L = w->L;
    const int64_t Cf = nf__tensor_numel(&w->feat) / (B * w->R);
    nf_tensor t2;
    nf_graph_prefix(g, "encoder.%d.", e);
    NF_TRY(nf_linear(g, nf_label(g, "conv1"), w->x, B * L, NF_SPT_IN_CHANNELS, nf__w2(&en->conv1_w, &t2), &en->conv1_b,
                     w->conv, H, NF_ACT_NONE, 0));
    for (int64_t b = 0; b < B; b++) {
        NF_TRY(nf_linear(g, nf_label(g, "skip"), nf__rows(&w->conv, b * L, L, H), L, H, nf__w2(&en->skip_w, &t2),
                         &en->skip_b, nf_view1(&w->feat, (b * w->R + w->zpad) * Cf + col, L * Cf - col), Cf,
                         NF_ACT_NONE, 0));
    }
    const int64_t F = pl->F;
    int64_t grow = 0; /* how far the earlier resblocks widened a differing run */
    int j = 0;
    for (int i = 0; i < NF_SPT_N_RESBLOCKS; i++) {
        const struct nf_spt_resblock * r = &en->res[i];
        const int64_t ar = nf__spt_ar[i], p = nf__res_pad(m, i);
        const struct nf_conv1d_shape cs = {F, L, ar, p};
        NF_TRY(nf_batch_norm(g, nf_label(g, "resblocks.%d.bn1", i), w->conv, F * L, H, &r->bn1.w, &r->bn1.b,
                             &r->bn1.mean, &r->bn1.var, w->h1, NF_SPT_BN_EPS, 1));
        NF_TRY(nf_conv1d(g, nf_label(g, "resblocks.%d.conv1", i), &cs, w->h1, &r->conv1_w, &r->conv1_b, w->h2, 0));
        NF_TRY(nf_batch_norm(g, nf_label(g, "resblocks.%d.bn2", i), w->h2, F * L, H, &r->bn2.w, &r->bn2.b, &r->bn2.mean,
                             &r->bn2.var, w->h1, NF_SPT_BN_EPS, 1));
        NF_TRY(nf_conv1d(g, nf_label(g, "resblocks.%d.conv2", i), &cs, w->h1, &r->conv2_w, &r->conv2_b, w->conv, 1));
        for (int64_t b = F; b < B; b++) NF_TRY(nf__resblock_delta(g, r, w, pl, H, i, p, grow, b));
        grow += 2 * p;
        if ((i + 1) % 4 == 0) {
            for (int64_t b = 0; b < B; b++) {
                NF_TRY(nf_linear(g, nf_label(g, "convs.%d", j), nf__rows(&w->conv, b * L, L, H), L, H,
                                 nf__w2(&en->convs_w[j], &t2), &en->convs_b[j],
                                 nf_view1(&w->feat, (b * w->R + w->zpad) * Cf + col, L * Cf - col), Cf, NF_ACT_NONE,
                                 1));
            }
            j++;
        }
    }
    return NF_OK;
}

/* §3.6 local heads: window u attends to windows u-1, u, u+1 (the ones
 * that exist), for the windows ua .. ub of sequence b */
static int nf__local_heads(nf_graph * g, const nf_spt * m, struct nf_spt_ws * w, int64_t b, int64_t ua, int64_t ub) {
    const struct nf_spt_config * c = &m->cfg;
    const int64_t A = c->attn_dim, E = c->dim_head, G = c->bucket_size, nw = w->N / G, S3 = 3 * A;
    const nf_tensor q = nf_view1(&w->qkv, b * w->N * S3, w->N * S3);
    const nf_tensor k = nf_view1(&w->qkv, b * w->N * S3 + A, w->N * S3 - A);
    const nf_tensor v = nf_view1(&w->qkv, b * w->N * S3 + 2 * A, w->N * S3 - 2 * A);
    const nf_tensor o = nf_view1(&w->O, b * w->N * A, w->N * A);
    /* (first window, last window, keys per window) for the first window, the
     * interior and the last: the ends have no window before / after them */
    const int64_t lo = ua > 1 ? ua : 1, hi = ub < nw - 2 ? ub : nw - 2;
    const int64_t part[3][3] = {{0, ua == 0 ? 0 : -1, nw == 1 ? G : 2 * G},
                                {lo, hi, 3 * G},
                                {nw - 1, ub == nw - 1 && nw > 1 ? nw - 1 : nw - 2, 2 * G}};
    for (int pi = 0; pi < 3; pi++) {
        const int64_t u0 = part[pi][0], n = part[pi][1] - u0 + 1, lk = part[pi][2];
        if (n <= 0) continue;
        const int64_t k0 = u0 == 0 ? 0 : (u0 - 1) * G; /* first key row */
        const struct nf_attn_layout lay = {.groups = n,
                                           .lq = G,
                                           .lk = lk,
                                           .n_heads = c->n_local_attn_heads,
                                           .head_dim = E,
                                           .q_gs = G * S3,
                                           .q_ss = S3,
                                           .kv_gs = G * S3,
                                           .kv_ss = S3,
                                           .o_gs = G * A,
                                           .o_ss = A};
        NF_TRY(nf_attention(g, nf_label(g, "local_attention"), &lay, nf_view1(&q, u0 * G * S3, n * G * S3 - 2 * A),
                            nf_view1(&k, k0 * S3, (w->N - k0) * S3 - A),
                            nf_view1(&v, k0 * S3, (w->N - k0) * S3 - 2 * A), nf_view1(&o, u0 * G * A, n * G * A)));
    }
    return NF_OK;
}

/* §3.6 sinkhorn heads: top-1 bucket routing, then attention over
 * [chosen bucket's keys x p; own keys] with values [the same scaled keys;
 * own values]; the routing and the gather for every bucket (a bucket may
 * choose any other), the attention for the query buckets ua .. ub of each
 * sequence */
static int nf__bucket_heads(nf_graph * g, const nf_spt * m, struct nf_spt_ws * w, int64_t ua, int64_t ub) {
    const struct nf_spt_config * c = &m->cfg;
    const int64_t A = c->attn_dim, E = c->dim_head, G = c->bucket_size, nb = w->N / G, S3 = 3 * A;
    const int64_t h0 = c->n_local_attn_heads, nsh = c->heads - h0, B = w->B, tot = B * w->N * S3;
    const nf_tensor q = nf_view1(&w->qkv, h0 * E, tot - h0 * E);
    const nf_tensor k = nf_view1(&w->qkv, A + h0 * E, tot - A - h0 * E);
    const nf_tensor v = nf_view1(&w->qkv, 2 * A + h0 * E, tot - 2 * A - h0 * E);
    const struct nf_bucket_shape bs = {B, nb, G, nsh, E, S3, w->N * S3};
    NF_TRY(nf_bucket_route(g, nf_label(g, "sort_net"), &bs, q, k, w->sel, w->prob, 1.0f / sqrtf((float) E)));
    NF_TRY(nf_bucket_gather(g, nf_label(g, "reorder_buckets"), &bs, k, v, w->sel, w->prob, w->kcat, w->vcat, 1));
    const int64_t nu = ub - ua + 1, KC = 2 * G * nsh * E;
    const nf_tensor o = nf_view1(&w->O, h0 * E, B * w->N * A - h0 * E);
    struct nf_attn_layout lay = {.groups = B * nb,
                                 .lq = G,
                                 .lk = 2 * G,
                                 .n_heads = nsh,
                                 .head_dim = E,
                                 .q_gs = G * S3,
                                 .q_ss = S3,
                                 .kv_gs = KC,
                                 .kv_ss = nsh * E,
                                 .o_gs = G * A,
                                 .o_ss = A};
    if (nu == nb) return nf_attention(g, nf_label(g, "sinkhorn_attention"), &lay, q, w->kcat, w->vcat, o);
    lay.groups = nu;
    for (int64_t b = 0; b < B; b++) {
        const int64_t u0 = b * nb + ua;
        NF_TRY(nf_attention(g, nf_label(g, "sinkhorn_attention"), &lay,
                            nf_view1(&q, u0 * G * S3, nu * G * S3 - h0 * E - 2 * A),
                            nf_view1(&w->kcat, u0 * KC, nu * KC), nf_view1(&w->vcat, u0 * KC, nu * KC),
                            nf_view1(&o, u0 * G * A, nu * G * A - h0 * E)));
    }
    return NF_OK;
}

/* the row indices the row copies read, uploaded once per workspace (an input, like the one-hot) */
static int nf__rowidx(nf_spt * m, struct nf_spt_ws * w, nf_err * err) {
    if (w->rowidx.buf) return NF_OK;
    const int64_t ne[1] = {w->L};
    NF_TRY(nf__workspace_tensor(&w->mem, m->be, &w->rowidx, NF_I32, 1, ne, "row_index", err));
    int32_t * ix = malloc((size_t) w->L * sizeof(int32_t));
    if (!ix) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < w->L; i++) ix[i] = (int32_t) i;
    const int rc = nf__tensor_upload(&w->rowidx, ix, err);
    free(ix);
    return rc;
}

static int nf__spt_forward_ws(nf_spt * m, struct nf_spt_ws * w, const int64_t * tokens, const struct nf_spt_plan * pl,
                              float * logits, nf_err * err) {
    const struct nf_spt_config * c = &m->cfg;
    nf_backend * be = m->be;
    const int64_t B = w->B, L = w->L, N = w->N, A = c->attn_dim, D = c->dim;
    const int64_t Cf = D + NF_SPT_ENC0_WIDTH + NF_SPT_ENC1_WIDTH, C = NF_SPT_N_SPLICE + c->tissue_num;
    const int64_t nb = N / c->bucket_size, nsh = c->heads - c->n_local_attn_heads;
    snprintf(m->placement.inputs, sizeof(m->placement.inputs), "%s", w->x.buf->where);
    snprintf(m->placement.logits, sizeof(m->placement.logits), "%s", w->logits.buf->where);

    /* §2: the one-hot (channels A, C, G, T; N all zero), built on the host:
     * the only host->device copy of a forward */
    float * oh = calloc((size_t) (B * L * NF_SPT_IN_CHANNELS), sizeof(float));
    if (!oh) return nf__err_set(err, NF_ERR_NOMEM, "out of memory for the one-hot input");
    for (int64_t i = 0; i < B * L; i++)
        if (tokens[i] >= 0 && tokens[i] < NF_SPT_IN_CHANNELS) oh[i * NF_SPT_IN_CHANNELS + tokens[i]] = 1.0f;
    int rc = nf__tensor_upload(&w->x, oh, err);
    free(oh);
    NF_TRY(rc);
    const int64_t sh_x[3] = {B, L, NF_SPT_IN_CHANNELS};
    NF_TRY(nf__stage(m, w, "inputs.one_hot", &w->x, 3, sh_x, 1, err));

    nf_graph gr, *g = &gr;
    nf_graph_init(g, be, err);
    g->bf16_stream = 1; /* read by bf16-autocast only: every activation is bf16 under autocast */
    nf_tensor t2;

    /* §3.3's zero rows of feat (before and after each sequence) */
    for (int64_t b = 0; b < B; b++) {
        if (w->zpad > 0)
            NF_TRY(nf_fill(g, "window_pad", nf_view1(&w->feat, b * w->R * Cf, w->zpad * Cf), w->zpad, Cf, Cf, 0.0f));
        const int64_t tail = w->R - w->zpad - L;
        if (tail > 0)
            NF_TRY(nf_fill(g, "window_pad", nf_view1(&w->feat, (b * w->R + w->zpad + L) * Cf, tail * Cf), tail, Cf, Cf,
                           0.0f));
    }
    /* §3.1, §3.2 */
    if (pl->F < B) NF_TRY(nf__rowidx(m, w, err));
    NF_TRY(nf__encoder(g, m, w, pl, 0, 0));
    NF_TRY(nf__encoder(g, m, w, pl, 1, NF_SPT_ENC0_WIDTH));
    nf_graph_prefix(g, "%s", "");
    NF_TRY(nf_linear(g, "conv1.0", w->x, B * L, NF_SPT_IN_CHANNELS, nf__w2(&m->c10_w, &t2), &m->c10_b, w->h1, D,
                     NF_ACT_NONE, 0));
    const int64_t c0 = NF_SPT_ENC0_WIDTH + NF_SPT_ENC1_WIDTH;
    for (int64_t b = 0; b < B; b++) {
        NF_TRY(nf_linear(g, "conv1.1", nf__rows(&w->h1, b * L, L, D), L, D, nf__w2(&m->c11_w, &t2), &m->c11_b,
                         nf_view1(&w->feat, (b * w->R + w->zpad) * Cf + c0, L * Cf - c0), Cf, NF_ACT_NONE, 0));
    }
    const int64_t sh_f[3] = {B, w->R, Cf};
    NF_TRY(nf__stage(m, w, "features", &w->feat, 3, sh_f, 0, err));

    /* §3.4: conv2 over the window rows zpad + s .. + N of feat */
    for (int64_t b = 0; b < B; b++) {
        NF_TRY(nf_linear(g, "conv2", nf_view1(&w->feat, (b * w->R + w->zpad + w->start) * Cf, N * Cf), N, Cf,
                         nf__w2(&m->c2_w, &t2), &m->c2_b, nf__rows(&w->X, b * N, N, A), A, NF_ACT_NONE, 0));
    }
    const int64_t sh_X[3] = {B, N, A};
    NF_TRY(nf__stage(m, w, "embedding", &w->X, 3, sh_X, 0, err));
    /* §3.5 */
    NF_TRY(nf_axial_pos(g, "attn.pos_emb", &m->pe0, &m->pe1, w->X, B, N, A, c->bucket_size));

    const struct nf_mlp ff = {
        .eps = NF_SPT_LN_EPS, .act = NF_ACT_GELU, .ln_label = "ff.norm", .fc1_label = "ff.w1", .fc2_label = "ff.w2"};
    char st[64];
    for (int l = 0; l < c->attn_depth; l++) {
        const struct nf_spt_layer * Ly = &m->layers[l];
        nf_graph_prefix(g, "layers.%d.", l);
        NF_TRY(nf_layer_norm(g, nf_label(g, "attn.norm"), w->X, B * N, A, &Ly->ln0_w, &Ly->ln0_b, w->Xn, A,
                             NF_SPT_LN_EPS));
        NF_TRY(nf_linear(g, nf_label(g, "to_q+to_kv"), w->Xn, B * N, A, &Ly->qkv, NULL, w->qkv, 3 * A, NF_ACT_NONE, 0));
        /* the last layer's rows feed only the final norm and the heads, which
         * read the output rows: without stage dumps, its attention output,
         * to_out and feed-forward run on the buckets holding those rows (the
         * keys and the routing still cover every row) */
        const int trim = l == c->attn_depth - 1 && m->stages == NF_STAGES_NONE;
        const int64_t ua = trim ? w->out_off / c->bucket_size : 0,
                      ub = trim ? (w->out_off + w->out_len - 1) / c->bucket_size : nb - 1;
        const int64_t r0 = ua * c->bucket_size, nr = (ub - ua + 1) * c->bucket_size;
        for (int64_t b = 0; b < B; b++) NF_TRY(nf__local_heads(g, m, w, b, ua, ub));
        NF_TRY(nf__bucket_heads(g, m, w, ua, ub));
        for (int64_t b = 0; b < (trim ? B : 1); b++) {
            const int64_t rb = trim ? b * N + r0 : 0, nrb = trim ? nr : B * N;
            NF_TRY(nf_linear(g, nf_label(g, "to_out"), nf__rows(&w->O, rb, nrb, A), nrb, A, &Ly->to_out_w,
                             &Ly->to_out_b, nf__rows(&w->X, rb, nrb, A), A, NF_ACT_NONE, 1));
        }
        const int64_t sh_b[3] = {B, nsh, nb};
        snprintf(st, sizeof(st), "layers.%d.attention", l);
        NF_TRY(nf__stage(m, w, st, &w->X, 3, sh_X, 0, err));
        snprintf(st, sizeof(st), "layers.%d.buckets", l);
        NF_TRY(nf__stage(m, w, st, &w->sel, 3, sh_b, 1, err));
        const int64_t sh_p[4] = {B, nsh, nb, 2}; /* (p, p - runner-up) per choice */
        snprintf(st, sizeof(st), "layers.%d.bucket_prob", l);
        NF_TRY(nf__stage(m, w, st, &w->prob, 4, sh_p, 1, err));
        struct nf_mlp f = ff;
        f.ln_g = &Ly->ln1_w;
        f.ln_b = &Ly->ln1_b;
        f.w1 = &Ly->w1;
        f.b1 = &Ly->b1;
        f.w2 = &Ly->w2;
        f.b2 = &Ly->b2;
        for (int64_t b = 0; b < B; b++) /* one sequence's rows at a time: H holds N rows */
            NF_TRY(nf_prenorm_mlp(g, &f, nf__rows(&w->X, b * N + r0, nr, A), nr, A, nf__rows(&w->Xn, b * N + r0, nr, A),
                                  w->H));
        snprintf(st, sizeof(st), "layers.%d.feed_forward", l);
        NF_TRY(nf__stage(m, w, st, &w->X, 3, sh_X, 0, err));
    }
    nf_graph_prefix(g, "%s", "");
    if (m->stages != NF_STAGES_NONE) {
        NF_TRY(nf_layer_norm(g, "attn.norm", w->X, B * N, A, &m->norm_w, &m->norm_b, w->Xn, A, NF_SPT_LN_EPS));
        NF_TRY(nf__stage(m, w, "norm", &w->Xn, 3, sh_X, 0, err));
    } else { /* the output rows only, as the heads read */
        for (int64_t b = 0; b < B; b++)
            NF_TRY(nf_layer_norm(g, "attn.norm", nf__rows(&w->X, b * N + w->out_off, w->out_len, A), w->out_len, A,
                                 &m->norm_w, &m->norm_b, nf__rows(&w->Xn, b * N + w->out_off, w->out_len, A), A,
                                 NF_SPT_LN_EPS));
    }
    /* §3.8: the heads on the output rows only */
    for (int64_t b = 0; b < B; b++) {
        const nf_tensor xo = nf__rows(&w->Xn, b * N + w->out_off, w->out_len, A);
        const nf_tensor y = nf__rows(&w->logits, b * w->out_len, w->out_len, C);
        NF_TRY(
            nf_linear(g, "splice", xo, w->out_len, A, nf__w2(&m->splice_w, &t2), &m->splice_b, y, C, NF_ACT_NONE, 0));
        NF_TRY(nf_linear(g, "usage", xo, w->out_len, A, nf__w2(&m->usage_w, &t2), &m->usage_b,
                         nf_view1(&y, NF_SPT_N_SPLICE, w->out_len * C - NF_SPT_N_SPLICE), C, NF_ACT_NONE, 0));
    }
    /* outputs out: the only device->host copy */
    NF_TRY(nf__tensor_download(&w->logits, logits, err));
    if (m->stages != NF_STAGES_NONE) {
        const int64_t sh[3] = {B, w->out_len, C};
        if (m->stage_fn(m->stage_user, "head", logits, 3, sh) != 0)
            return nf__err_set(err, NF_ERR_GENERIC, "stage callback failed at head");
    }
    return NF_OK;
}

int nf__spt_forward_tokens(nf_spt * m, const int64_t * tokens, int64_t B, int64_t L, float * logits, nf_err * err) {
    for (int64_t i = 0; i < B * L; i++) {
        if (tokens[i] < 0 || tokens[i] > NF_SPT_N) {
            return nf__err_set(err, NF_ERR_INPUT, "tokens[%lld, %lld] = %lld is not a token id (A=0 C=1 G=2 T/U=3 N=4)",
                               (long long) (i / L), (long long) (i % L), (long long) tokens[i]);
        }
    }
    struct nf_spt_plan pl;
    NF_TRY(nf__spt_plan(m, tokens, B, L, &pl, err));
    /* the computed order, when it is not the batch as given */
    int same = pl.B == B;
    for (int64_t b = 0; same && b < B; b++) same = pl.src[b] == b;
    const int64_t out_len = L - 2 * (int64_t) m->cfg.context_len, C = NF_SPT_N_SPLICE + m->cfg.tissue_num;
    const size_t per = (size_t) (out_len * C);
    int64_t * tk = same ? (int64_t *) tokens : malloc((size_t) (pl.B * L) * sizeof(int64_t));
    float * lg = same ? logits : malloc((size_t) pl.B * per * sizeof(float));
    int rc = tk && lg ? NF_OK : nf__err_set(err, NF_ERR_NOMEM, "out of memory for a batch of %lld", (long long) B);
    if (rc == NF_OK && !same)
        for (int64_t b = 0; b < pl.B; b++) memcpy(tk + b * L, tokens + pl.src[b] * L, (size_t) L * sizeof(int64_t));
    nf__trace_where_reset(m->be);
    struct nf_spt_ws * w = NULL;
    if (rc == NF_OK) rc = nf__ws_get(m, pl.B, L, &w, err);
    if (rc == NF_OK) rc = nf__spt_forward_ws(m, w, tk, &pl, lg, err);
    if (rc != NF_OK) nf__spt_release_workspace(m); /* the device may be in error: start afresh */
    nf__trace_where(m->be, m->placement.ops, sizeof(m->placement.ops));
    if (rc == NF_OK && !same)
        for (int64_t i = 0; i < B; i++)
            memcpy(logits + (size_t) i * per, lg + (size_t) pl.of[i] * per, per * sizeof(float));
    if (rc == NF_OK) {
        m->last_distinct = pl.B;
        m->last_reused = pl.B - pl.F;
    }
    if (!same) {
        free(tk);
        free(lg);
    }
    nf__plan_free(&pl);
    return rc;
}
