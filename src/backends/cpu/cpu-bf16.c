/* cpu-bf16.c -- the cpu backend's --precision bf16-autocast: upstream's
 * torch.autocast("cpu", dtype=torch.bfloat16) numerics for Mitra's and
 * SpTransformer's forwards (docs/precision.md has the dtype traces this follows).
 *
 * Under CPU autocast, torch runs linear (addmm/mm) and
 * scaled_dot_product_attention on bf16 operands with fp32 accumulation and
 * bf16 results; every other op Mitra uses (quantile, bucketize, layer_norm,
 * embedding, the fp32 + bf16 residual add) runs in fp32. Here:
 *  - LINEAR: x, W and bias rounded to bf16 (round to nearest even), x·Wᵀ by
 *    oneDNN's bf16 matmul (bf16 x bf16 -> f32, fp32 accumulation), + bias in
 *    fp32, rounded to bf16; GELU (torch's gelu on a bf16 tensor: computed in
 *    fp32, rounded to bf16) on that; the residual add in fp32.
 *  - ATTENTION: q, k, v rounded to bf16; scores in fp32 (exact products of
 *    bf16 values, fp32 sums), softmax numerators exp(s - max) in fp32 with
 *    their fp32 sum, the numerators rounded to bf16 before P·V (as torch's
 *    CPU flash-attention kernel does), P·V in fp32, times 1/sum, rounded to
 *    bf16. From 64 keys and 64 query rows on, the two products on oneDNN's bf16
 *    matmul (as torch's flash kernel), below that on sgemm over the same values.
 *  - EMBED_FEATURES and the regressor's LABEL_TOKENS (Linear(1, D)):
 *    bf16(bf16(z) * bf16(w) + bf16(b)); the classifier's label and mask
 *    embeddings (nn.Embedding) stay fp32.
 *  - the fp32 ops (QUANTILE, BUCKETIZE_NORM, LAYER_NORM, ...) run the exact
 *    kernels; an op with no autocast rule here (the bucket ops, the training
 *    ops) is refused, never run in fp32 silently.
 *  - SpTransformer's ops (its activations all bf16, docs/precision.md
 *    "SpTransformer under CPU autocast"): CONV1D (nf__bf16_conv1d), ATTENTION
 *    with p.bf16_stream (cpu-bf16-spt.c's rule; from 64 query rows and keys on
 *    batched bf16 matmuls here), the bucket and axial ops (cpu-bf16-spt.c);
 *    BATCH_NORM, BUCKET_GATHER, EMBED_FEATURES and LABEL_TOKENS are the exact
 *    kernels with their rounding flag set (nf__cpu_*_r, cpu-kernels.h).
 * The mode needs oneDNN's bf16 kernels (AVX512_BF16 or AMX): without them
 * nf__backend_cpu_init refuses it, naming the missing feature.
 * Speed, with the same roundings (outputs bitwise the straightforward code's):
 * W's bf16 copy kept from its first use, packed into the layout oneDNN's
 * matmul picks for it (its kernels would otherwise copy W into that layout on
 * every call; the same values, the same sums); LAYER_NORM, GELU LINEARs and ATTENTION
 * leave the bf16 bits of their output for the LINEAR that reads it; ATTENTION reads
 * q, k, v in place where a LINEAR wrote them whole (bf16 values already);
 * every such copy or mark is dropped when anything writes its bytes
 * (nf__cpu_bf16_forget: op destinations, uploads, frees). GELU of a bf16
 * value by a table of all 65536 (built with the exact kernel's GELU). */
#include "cpu-bf16.h"

#include "cpu-bf16-spt.h"

#include "cpu-gemm.h"
#include "cpu-kernels.h"

#include <math.h>
#include <oneapi/dnnl/dnnl.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif
#include <stdlib.h>
#include <string.h>

#define NF__PTR(t)  ((float *) ((char *) (t)->buf->handle + (t)->offs))
#define NF__IPTR(t) ((int32_t *) ((char *) (t)->buf->handle + (t)->offs))

/* ---- bf16 rounding ------------------------------------------------------------------ */

uint16_t nf__bf16_bits(float f) { return (uint16_t) (nf__bf16_u32(f) >> 16); }

float nf__bf16_round(float f) { return nf__bf16_rnd(f); }

__attribute__((target_clones(NF__CPU_CLONES), noinline)) void nf__bf16_bits_row(uint16_t * restrict d,
                                                                                const float * restrict s, int64_t n) {
    for (int64_t i = 0; i < n; i++) d[i] = (uint16_t) (nf__bf16_u32(s[i]) >> 16);
}

/* ---- availability ------------------------------------------------------------------- */

int nf__cpu_bf16_check(char * why, size_t n) {
    const dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
    const unsigned v = (unsigned) isa, need = (unsigned) dnnl_cpu_isa_avx512_core_bf16;
    if ((v & need) == need) return 1;
    int cpu_has = 0;
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    cpu_has = __builtin_cpu_supports("avx512bf16");
#endif
    if (cpu_has) {
        snprintf(why, n,
                 "the CPU has AVX512_BF16 but oneDNN's kernels are capped below avx512_core_bf16 (effective ISA "
                 "0x%x; is ONEDNN_MAX_CPU_ISA / DNNL_MAX_CPU_ISA set?)",
                 v);
    } else {
        snprintf(why, n, "this CPU has neither AVX512_BF16 nor AMX-BF16 (oneDNN's bf16 GEMM kernels need one)");
    }
    return 0;
}

/* ---- oneDNN bf16 matmul, primitives cached by shape ---------------------------------- */

#define NF__MM_CACHE 24

enum { NF__W_NK = 0, NF__W_ANY = 1, NF__W_KN = 2 }; /* where W (B of A·B) sits: see struct nf__mm */

struct nf__mm {
    int64_t m, n, k, ldc, ldb; /* ldb: W's row stride where plain (NF__W_NK, NF__W_KN) */
    int packed;                /* W in the layout the primitive picked (NF__W_ANY), plain (n, k) (NF__W_NK) or (k, n) */
    int acc;                   /* a sum post-op: t = t + xa · Wᵀ (one fp32 add per element, as t[i] + u[i]) */
    /* user_sp: run by several threads at once, each passing its own scratchpad (spmd,
     * sp_bytes) -- oneDNN's library-managed scratchpad is one, shared by every primitive */
    int user_sp;
    size_t sp_bytes;
    dnnl_memory_desc_t spmd;
    dnnl_memory_desc_t wmd; /* W's layout */
    dnnl_primitive_t prim;
    unsigned long long used;
};

/* a bf16 copy of an fp32 region of a buffer: rows x k values at stride ld
 * from byte offs of handle, stored rows x k contiguous (a weight: in the
 * layout wmd). Valid while nothing has written the region: every op's
 * destinations, every upload and every free of the buffer are checked
 * against it (nf__cpu_bf16_forget), so a copy is never stale. Two kinds:
 * weights (LINEAR's W: converted at first use, packed in its matmul's
 * layout, kept for the run) and the last activations an op wrote that a
 * LINEAR reads next (LAYER_NORM's output, GELU's): the producer writes the
 * bf16 copy in the same pass, the LINEAR skips its conversion. */
struct nf__copy {
    void * handle;
    size_t offs, end; /* the bytes [offs, end) of handle it copies */
    int64_t rows, k, ld;
    uint16_t * bits;
    size_t cap; /* elements bits holds */
    int valid;
    dnnl_memory_desc_t wmd; /* a weight's: the layout bits hold (a matmul's packed W) */
};

/* a batched bf16 matmul over (n, H) batches: dst (lq, nn) f32 dense = a (lq, kk) · b (kk, nn),
 * a and b bf16 at the 4-d strides of its key (SpTransformer's attention: a batch per (group,
 * head), run by several threads at once, each with its own scratchpad) */
struct nf__bmm {
    int64_t key[16]; /* a's dims and strides, b's dims and strides */
    dnnl_memory_desc_t a_md, b_md, c_md, spmd;
    size_t sp_bytes;
    dnnl_primitive_t prim;
    unsigned long long used;
};
#define NF__BMM_CACHE 16

#define NF__ACT_COPIES     2                  /* producer and consumer in one op: ping-pong */
#define NF__VALS           16                 /* regions known to hold bf16 values (bf16_vals) */
#define NF__KV_COPIES      2                  /* attention's keys and values, when in two regions */
#define NF__WEIGHT_CAP_MAX ((size_t) 1 << 30) /* bf16 weight copies kept at most, bytes */

struct nf_cpu_bf16 {
    dnnl_engine_t eng;
    dnnl_stream_t stream;
    struct nf__mm mm[NF__MM_CACHE];
    struct nf__bmm bmm[NF__BMM_CACHE];
    unsigned long long tick;
    uint16_t *xa, *wa; /* bf16 copies of x and W where no cached copy serves */
    size_t xa_n, wa_n;
    struct nf__copy act[NF__ACT_COPIES];
    /* the bf16 bits of the keys' and values' regions ATTENTION read last (Mitra's row
     * attention: every chunk of query rows attends to the same support keys and values) */
    struct nf__copy kv[NF__KV_COPIES];
    int next_kv;
    struct nf__copy * w; /* the weights' copies */
    int n_w, cap_w;
    size_t w_bytes;
    uint32_t * gelu; /* R(GELU(x)) for every bf16 x, by its bits (built at first use) */
    /* regions a LINEAR wrote whole (y contiguous, not accumulated) and so hold bf16 values
     * only: ATTENTION reads its q, k, v there as they are (rounding them is the identity) */
    struct nf__copy bf16_vals[NF__VALS];
    int next_vals;
    char impl[96]; /* the kernel oneDNN picked last */
};

static void nf__copy_set(struct nf__copy * e, const nf_tensor * t, int64_t rows, int64_t k, int64_t ld) {
    e->handle = t->buf->handle;
    e->offs = t->offs;
    e->end = t->offs + (size_t) ((rows - 1) * ld + k) * sizeof(float);
    e->rows = rows;
    e->k = k;
    e->ld = ld;
    e->valid = 1;
}

static int nf__copy_is(const struct nf__copy * e, const nf_tensor * t, int64_t rows, int64_t k, int64_t ld) {
    return e->valid && e->handle == t->buf->handle && e->offs == t->offs && e->k == k && e->ld == ld && rows <= e->rows;
}

/* 1 when e is a valid copy of bytes that [lo, hi) of handle overlaps */
static int nf__copy_hit(const struct nf__copy * e, const void * handle, size_t lo, size_t hi) {
    return e->valid && e->handle == handle && lo < e->end && e->offs < hi;
}

void nf__cpu_bf16_forget(struct nf_cpu_bf16 * c, const void * handle, size_t lo, size_t hi) {
    for (int i = 0; i < NF__ACT_COPIES; i++)
        if (nf__copy_hit(&c->act[i], handle, lo, hi)) c->act[i].valid = 0;
    for (int i = 0; i < NF__KV_COPIES; i++)
        if (nf__copy_hit(&c->kv[i], handle, lo, hi)) c->kv[i].valid = 0;
    for (int i = 0; i < NF__VALS; i++)
        if (nf__copy_hit(&c->bf16_vals[i], handle, lo, hi)) c->bf16_vals[i].valid = 0;
    for (int i = 0; i < c->n_w; i++) {
        struct nf__copy * e = &c->w[i];
        if (nf__copy_hit(e, handle, lo, hi)) {
            e->valid = 0;
            c->w_bytes -= e->cap * sizeof(uint16_t);
            free(e->bits);
            e->bits = NULL;
            e->cap = 0;
        }
    }
}

static uint16_t * nf__grow(uint16_t ** p, size_t * have, size_t n) {
    if (n > *have) {
        free(*p);
        *p = malloc(n * sizeof(uint16_t));
        *have = *p ? n : 0;
    }
    return *p;
}

/* an activation copy to fill for t (rows x k at ld), not `busy` (the one the
 * op reads); NULL when out of memory (the op then just does not leave one) */
static struct nf__copy * nf__act_begin(struct nf_cpu_bf16 * c, const nf_tensor * t, int64_t rows, int64_t k, int64_t ld,
                                       const uint16_t * busy) {
    struct nf__copy * e = &c->act[0];
    if (busy && c->act[0].bits == busy)
        e = &c->act[1];
    else if (!(busy && c->act[1].bits == busy) && c->act[0].valid && !c->act[1].valid)
        e = &c->act[1];
    e->valid = 0;
    if (!nf__grow(&e->bits, &e->cap, (size_t) (rows * k))) return NULL;
    nf__copy_set(e, t, rows, k, ld);
    e->valid = 0; /* valid once filled (nf__act_done) */
    return e;
}

static int nf__dnnl_err(nf_err * err, const char * what, dnnl_status_t st);

/* W's bf16 copy in the layout wmd of the matmul that reads it (oneDNN's
 * blocked bf16 layout, which its kernels would otherwise copy W into on every
 * call): rounded to bf16 by nf__bf16_bits_row, then moved into wmd by a
 * oneDNN reorder (bf16 to bf16: the same values, placed). Kept from the first
 * use on; a use with another layout (another M may pick another blocking)
 * re-packs it. *out NULL: not kept (out of memory, or over the cap): the
 * caller runs the plain-layout matmul. */
static int nf__weight_packed(struct nf_cpu_bf16 * c, const nf_tensor * W, int64_t n, int64_t k,
                             const dnnl_memory_desc_t * wmd, const uint16_t ** out, nf_err * err) {
    *out = NULL;
    int slot = -1;
    for (int i = 0; i < c->n_w; i++) {
        struct nf__copy * e = &c->w[i];
        if (nf__copy_is(e, W, n, k, k) && e->rows == n) {
            if (dnnl_memory_desc_equal(&e->wmd, wmd)) {
                *out = e->bits;
                return NF_OK;
            }
            nf__cpu_bf16_forget(c, e->handle, e->offs, e->end); /* another layout: re-pack */
        }
        if (!e->valid && slot < 0) slot = i;
    }
    const size_t bytes = (dnnl_memory_desc_get_size(wmd) + 63) & ~(size_t) 63;
    if (c->w_bytes + bytes > NF__WEIGHT_CAP_MAX) return NF_OK;
    uint16_t * plain = nf__grow(&c->wa, &c->wa_n, (size_t) (n * k));
    if (!plain) return NF_OK;
    if (slot < 0) {
        if (c->n_w == c->cap_w) {
            const int cap = c->cap_w ? 2 * c->cap_w : 64;
            struct nf__copy * w = realloc(c->w, (size_t) cap * sizeof(*w));
            if (!w) return NF_OK;
            c->w = w;
            c->cap_w = cap;
        }
        slot = c->n_w++;
        memset(&c->w[slot], 0, sizeof(c->w[slot]));
    }
    struct nf__copy * e = &c->w[slot];
    e->bits = aligned_alloc(64, bytes);
    if (!e->bits) return NF_OK;
    const float * src = NF__PTR(W);
#pragma omp parallel for schedule(static) if (NF_CPU_PAR(n * k))
    for (int64_t r = 0; r < n; r++) nf__bf16_bits_row(plain + r * k, src + r * k, k);
    dnnl_memory_desc_t pmd;
    dnnl_dims_t bd = {k, n};
    dnnl_primitive_desc_t rpd = NULL;
    dnnl_primitive_t r = NULL;
    dnnl_memory_t from = NULL, to = NULL;
    dnnl_status_t st = dnnl_memory_desc_init_by_tag(&pmd, 2, bd, dnnl_bf16, dnnl_ba);
    if (st == dnnl_success) st = dnnl_reorder_primitive_desc_create(&rpd, &pmd, c->eng, wmd, c->eng, NULL);
    if (st == dnnl_success) st = dnnl_primitive_create(&r, rpd);
    if (st == dnnl_success) st = dnnl_memory_create(&from, &pmd, c->eng, plain);
    if (st == dnnl_success) st = dnnl_memory_create(&to, wmd, c->eng, e->bits);
    if (st == dnnl_success) {
        dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
        st = dnnl_primitive_execute(r, c->stream, 2, args);
        if (st == dnnl_success) st = dnnl_stream_wait(c->stream);
    }
    if (from) dnnl_memory_destroy(from);
    if (to) dnnl_memory_destroy(to);
    if (r) dnnl_primitive_destroy(r);
    if (rpd) dnnl_primitive_desc_destroy(rpd);
    if (st != dnnl_success) {
        free(e->bits);
        e->bits = NULL;
        return nf__dnnl_err(err, "packing a bf16 weight", st);
    }
    e->cap = bytes / sizeof(uint16_t);
    c->w_bytes += bytes;
    e->wmd = *wmd;
    nf__copy_set(e, W, n, k, k);
    *out = e->bits;
    return NF_OK;
}

static int nf__dnnl_err(nf_err * err, const char * what, dnnl_status_t st) {
    return nf__err_set(err, st == dnnl_out_of_memory ? NF_ERR_NOMEM : NF_ERR_GENERIC,
                       "cpu: bf16-autocast: %s failed with oneDNN status %d", what, (int) st);
}

int nf__cpu_bf16_new(struct nf_cpu_bf16 ** out, nf_err * err) {
    struct nf_cpu_bf16 * c = calloc(1, sizeof(*c));
    if (!c) return nf__err_set(err, NF_ERR_NOMEM, "cpu: out of memory");
    dnnl_status_t st = dnnl_engine_create(&c->eng, dnnl_cpu, 0);
    if (st == dnnl_success) st = dnnl_stream_create(&c->stream, c->eng, dnnl_stream_default_flags);
    if (st != dnnl_success) {
        nf__cpu_bf16_free(c);
        return nf__dnnl_err(err, "creating the oneDNN cpu engine", st);
    }
    *out = c;
    return NF_OK;
}

void nf__cpu_bf16_free(struct nf_cpu_bf16 * c) {
    if (!c) return;
    for (int i = 0; i < NF__MM_CACHE; i++)
        if (c->mm[i].prim) dnnl_primitive_destroy(c->mm[i].prim);
    for (int i = 0; i < NF__BMM_CACHE; i++)
        if (c->bmm[i].prim) dnnl_primitive_destroy(c->bmm[i].prim);
    if (c->stream) dnnl_stream_destroy(c->stream);
    if (c->eng) dnnl_engine_destroy(c->eng);
    free(c->xa);
    free(c->wa);
    for (int i = 0; i < NF__ACT_COPIES; i++) free(c->act[i].bits);
    for (int i = 0; i < NF__KV_COPIES; i++) free(c->kv[i].bits);
    for (int i = 0; i < c->n_w; i++) free(c->w[i].bits);
    free(c->w);
    free(c->gelu);
    free(c);
}

const char * nf__cpu_bf16_impl(const struct nf_cpu_bf16 * c) { return c->impl; }

/* the matmul (m, k) bf16 x (k, n) bf16 -> (m, n) f32 at row stride ldc; W stored as n
 * rows of k (NF__W_NK: a LINEAR's W, attention's keys) or k rows of n (NF__W_KN:
 * attention's values), rows ldb apart, or in the layout oneDNN picks for it (NF__W_ANY,
 * e->wmd); acc 1: added to what the destination holds (oneDNN's sum post-op, scale 1) */
static int nf__mm_get(struct nf_cpu_bf16 * c, int64_t m, int64_t n, int64_t k, int64_t ldc, int64_t ldb, int packed,
                      int acc, int user_sp, struct nf__mm ** out, nf_err * err) {
    if (packed == NF__W_ANY) ldb = 0;
    int lru = 0;
    for (int i = 0; i < NF__MM_CACHE; i++) {
        struct nf__mm * e = &c->mm[i];
        if (e->prim && e->m == m && e->n == n && e->k == k && e->ldc == ldc && e->ldb == ldb && e->packed == packed &&
            e->acc == acc && e->user_sp == user_sp) {
            e->used = ++c->tick;
            *out = e;
            return NF_OK;
        }
        if (!e->prim || e->used < c->mm[lru].used) lru = i;
        if (!e->prim) break;
    }
    dnnl_memory_desc_t a_md, b_md, c_md, sp_md = {0};
    dnnl_dims_t ad = {m, k}, bd = {k, n}, cd = {m, n}, cs = {ldc, 1};
    dnnl_dims_t bs = {packed == NF__W_KN ? ldb : 1, packed == NF__W_KN ? 1 : ldb};
    dnnl_status_t st = dnnl_memory_desc_init_by_tag(&a_md, 2, ad, dnnl_bf16, dnnl_ab);
    if (st == dnnl_success)
        st = packed == NF__W_ANY ? dnnl_memory_desc_init_by_tag(&b_md, 2, bd, dnnl_bf16, dnnl_format_tag_any)
                                 : dnnl_memory_desc_init_by_strides(&b_md, 2, bd, dnnl_bf16, bs);
    if (st == dnnl_success) st = dnnl_memory_desc_init_by_strides(&c_md, 2, cd, dnnl_f32, cs);
    dnnl_matmul_desc_t md;
    if (st == dnnl_success) st = dnnl_matmul_desc_init(&md, &a_md, &b_md, NULL, &c_md);
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    if (st == dnnl_success && (acc || user_sp)) st = dnnl_primitive_attr_create(&attr);
    if (st == dnnl_success && acc) {
        st = dnnl_post_ops_create(&po);
        if (st == dnnl_success) st = dnnl_post_ops_append_sum(po, 1.0f);
        if (st == dnnl_success) st = dnnl_primitive_attr_set_post_ops(attr, po);
    }
    if (st == dnnl_success && user_sp) st = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
    dnnl_primitive_desc_t pd = NULL;
    if (st == dnnl_success) st = dnnl_primitive_desc_create(&pd, &md, attr, c->eng, NULL);
    if (po) dnnl_post_ops_destroy(po);
    if (attr) dnnl_primitive_attr_destroy(attr);
    dnnl_primitive_t prim = NULL;
    if (st == dnnl_success) {
        const char * impl = NULL;
        if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl)
            snprintf(c->impl, sizeof(c->impl), "%s", impl);
        const dnnl_memory_desc_t * w = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
        const dnnl_memory_desc_t * sp = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
        if (w)
            b_md = *w;
        else
            st = dnnl_runtime_error;
        if (sp) sp_md = *sp;
    }
    if (st == dnnl_success) st = dnnl_primitive_create(&prim, pd);
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (st != dnnl_success) return nf__dnnl_err(err, "creating a bf16 matmul", st);
    struct nf__mm * e = &c->mm[lru];
    if (e->prim) dnnl_primitive_destroy(e->prim);
    *e = (struct nf__mm){
        m,     n,    k,    ldc,      ldb, packed, acc, user_sp, user_sp ? dnnl_memory_desc_get_size(&sp_md) : 0,
        sp_md, b_md, prim, ++c->tick};
    *out = e;
    return NF_OK;
}

/* runs prim on strm: dst (c_md) = a (a_md) · b (b_md), with the scratchpad sp (spmd) where
 * sp_bytes; waits for it */
static int nf__prim_exec(struct nf_cpu_bf16 * c, dnnl_stream_t strm, dnnl_primitive_t prim,
                         const dnnl_memory_desc_t * a_md, const void * a, const dnnl_memory_desc_t * b_md,
                         const void * b, const dnnl_memory_desc_t * c_md, float * dst, const dnnl_memory_desc_t * spmd,
                         size_t sp_bytes, void * sp, nf_err * err) {
    dnnl_memory_t am = NULL, bm = NULL, cm = NULL, spm = NULL;
    dnnl_status_t st = dnnl_memory_create(&am, a_md, c->eng, (void *) a);
    if (st == dnnl_success) st = dnnl_memory_create(&bm, b_md, c->eng, (void *) b);
    if (st == dnnl_success) st = dnnl_memory_create(&cm, c_md, c->eng, dst);
    if (st == dnnl_success && sp_bytes) st = dnnl_memory_create(&spm, spmd, c->eng, sp);
    if (st == dnnl_success) {
        dnnl_exec_arg_t args[4] = {
            {DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}, {DNNL_ARG_SCRATCHPAD, spm}};
        st = dnnl_primitive_execute(prim, strm, spm ? 4 : 3, args);
        if (st == dnnl_success) st = dnnl_stream_wait(strm);
    }
    if (am) dnnl_memory_destroy(am);
    if (bm) dnnl_memory_destroy(bm);
    if (cm) dnnl_memory_destroy(cm);
    if (spm) dnnl_memory_destroy(spm);
    if (st != dnnl_success) return nf__dnnl_err(err, "a bf16 matmul", st);
    return NF_OK;
}

/* t (m, n) f32 at row stride e->ldc = xa (m, k) bf16 · W ᵀ, W's bf16 values at wb in e->wmd's
 * layout, on stream strm (c->stream, or a thread's own inside a parallel region); sp: the
 * thread's scratchpad where e->user_sp */
static int nf__mm_exec(struct nf_cpu_bf16 * c, dnnl_stream_t strm, const struct nf__mm * e, const uint16_t * xa,
                       const void * wb, float * t, void * sp, nf_err * err) {
    dnnl_memory_desc_t a_md, c_md;
    dnnl_dims_t ad = {e->m, e->k}, cd = {e->m, e->n}, cs = {e->ldc, 1};
    dnnl_memory_desc_init_by_tag(&a_md, 2, ad, dnnl_bf16, dnnl_ab);
    dnnl_memory_desc_init_by_strides(&c_md, 2, cd, dnnl_f32, cs);
    return nf__prim_exec(c, strm, e->prim, &a_md, xa, &e->wmd, wb, &c_md, t, &e->spmd, e->sp_bytes, sp, err);
}

/* the batched matmul of a (dims ad, strides as) · b (bd, bs), both bf16, 4-d: (n, H) batches
 * of (lq, kk) · (kk, nn) into a dense f32 (n, H, lq, nn); cached by dims and strides, a user
 * scratchpad (each thread passes its own) */
static int nf__bmm_get(struct nf_cpu_bf16 * c, const int64_t ad[4], const int64_t as[4], const int64_t bd[4],
                       const int64_t bs[4], struct nf__bmm ** out, nf_err * err) {
    int64_t key[16];
    memcpy(key, ad, 4 * sizeof(int64_t)), memcpy(key + 4, as, 4 * sizeof(int64_t));
    memcpy(key + 8, bd, 4 * sizeof(int64_t)), memcpy(key + 12, bs, 4 * sizeof(int64_t));
    int lru = 0;
    for (int i = 0; i < NF__BMM_CACHE; i++) {
        struct nf__bmm * e = &c->bmm[i];
        if (e->prim && !memcmp(e->key, key, sizeof(key))) {
            e->used = ++c->tick;
            *out = e;
            return NF_OK;
        }
        if (!e->prim || e->used < c->bmm[lru].used) lru = i;
        if (!e->prim) break;
    }
    struct nf__bmm n;
    memset(&n, 0, sizeof(n));
    memcpy(n.key, key, sizeof(key));
    dnnl_dims_t a_d = {ad[0], ad[1], ad[2], ad[3]}, a_s = {as[0], as[1], as[2], as[3]};
    dnnl_dims_t b_d = {bd[0], bd[1], bd[2], bd[3]}, b_s = {bs[0], bs[1], bs[2], bs[3]};
    dnnl_dims_t c_d = {ad[0], ad[1], ad[2], bd[3]};
    dnnl_status_t st = dnnl_memory_desc_init_by_strides(&n.a_md, 4, a_d, dnnl_bf16, a_s);
    if (st == dnnl_success) st = dnnl_memory_desc_init_by_strides(&n.b_md, 4, b_d, dnnl_bf16, b_s);
    if (st == dnnl_success) st = dnnl_memory_desc_init_by_tag(&n.c_md, 4, c_d, dnnl_f32, dnnl_abcd);
    dnnl_matmul_desc_t md;
    if (st == dnnl_success) st = dnnl_matmul_desc_init(&md, &n.a_md, &n.b_md, NULL, &n.c_md);
    dnnl_primitive_attr_t attr = NULL;
    if (st == dnnl_success) st = dnnl_primitive_attr_create(&attr);
    if (st == dnnl_success) st = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
    dnnl_primitive_desc_t pd = NULL;
    if (st == dnnl_success) st = dnnl_primitive_desc_create(&pd, &md, attr, c->eng, NULL);
    if (attr) dnnl_primitive_attr_destroy(attr);
    if (st == dnnl_success) {
        const dnnl_memory_desc_t * sp = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
        if (sp) n.spmd = *sp, n.sp_bytes = dnnl_memory_desc_get_size(sp);
        st = dnnl_primitive_create(&n.prim, pd);
    }
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (st != dnnl_success) return nf__dnnl_err(err, "creating a batched bf16 matmul", st);
    struct nf__bmm * e = &c->bmm[lru];
    if (e->prim) dnnl_primitive_destroy(e->prim);
    *e = n;
    e->used = ++c->tick;
    *out = e;
    return NF_OK;
}

/* ---- a team of threads on oneDNN: in a parallel region, each thread runs its tasks'
 * primitives on its own stream with its own scratch (kernels single-threaded there) ---- */

struct nf__team {
    dnnl_stream_t st;
    void * buf; /* the thread's scratch, 64-byte aligned */
    nf_err err; /* a failed task's message */
};

/* the calling thread's `bytes` of scratch and (where stream) its stream; 0 where either
 * could not be had */
static int nf__team_begin(struct nf_cpu_bf16 * c, struct nf__team * t, size_t bytes, int stream) {
    memset(t, 0, sizeof(*t));
    if (bytes && !(t->buf = aligned_alloc(64, (bytes + 63) / 64 * 64))) return 0;
    if (stream && dnnl_stream_create(&t->st, c->eng, dnnl_stream_default_flags) != dnnl_success) {
        t->st = NULL;
        return 0;
    }
    return 1;
}

static void nf__team_end(struct nf__team * t) {
    if (t->st) dnnl_stream_destroy(t->st);
    free(t->buf);
}

/* a task's result: the team's first failure (its code in *failed, its message in *err) */
static void nf__team_fail(const struct nf__team * t, int rc, int * failed, nf_err * err) {
    if (rc == NF_OK) return;
#pragma omp critical(nf__team_fail)
    if (!*failed) {
        *failed = rc;
        if (err) *err = t->err;
    }
}

/* after the region: NF_OK, or the failure named with op */
static int nf__team_result(int failed, const nf_op * op, nf_err * err) {
    const char *name = nf__op_name(op->type), *label = op->label ? op->label : "";
    if (failed == NF_ERR_NOMEM && (!err || err->code != NF_ERR_NOMEM))
        return nf__err_set(err, NF_ERR_NOMEM, "%s %s: out of memory", name, label);
    if (failed) return nf__err_prefix(err, "%s %s", name, label);
    return NF_OK;
}

/* ---- the kernels ------------------------------------------------------------------ */

/* LINEAR's epilogue, one row at a time (the passes stay in L1): t = R(R?(t) + bb), R the bf16
 * rounding, bb the rounded bias (twice: upstream's mm + add, x·Wᵀ rounded first) */
__attribute__((target_clones(NF__CPU_CLONES), noinline)) static void nf__bf16_epi_bias(float * t,
                                                                                       const float * restrict bb,
                                                                                       int64_t n, int twice) {
    if (twice)
        for (int64_t o = 0; o < n; o++) t[o] = nf__bf16_rnd(nf__bf16_rnd(t[o]) + bb[o]);
    else
        for (int64_t o = 0; o < n; o++) t[o] = nf__bf16_rnd(t[o] + bb[o]);
}

/* ... then v = R(t) after the activation (or t as it is), y = y + v (acc) or v, and
 * the bits of v into bits (the next LINEAR's bf16 input) where bits is not NULL */
__attribute__((target_clones(NF__CPU_CLONES), noinline)) static void nf__bf16_epi_out(float * y, const float * t,
                                                                                      int64_t n, int round, int acc,
                                                                                      uint16_t * restrict bits) {
    for (int64_t o = 0; o < n; o++) {
        const float v = round ? nf__bf16_rnd(t[o]) : t[o];
        y[o] = acc ? y[o] + v : v;
    }
    if (bits)
        for (int64_t o = 0; o < n; o++) bits[o] = (uint16_t) (nf__bf16_u32(y[o]) >> 16);
}

/* GELU on a bf16 input has 65536 possible inputs: R(GELU(x)) for all of them, computed
 * once with the exact kernel's GELU (nf__cpu_act_row) and rounded as the epilogue
 * rounds it, so a lookup is bitwise the computation */
static const uint32_t * nf__gelu_table(struct nf_cpu_bf16 * c) {
    if (c->gelu) return c->gelu;
    float * x = malloc(65536 * sizeof(float));
    uint32_t * t = malloc(65536 * sizeof(uint32_t));
    if (!x || !t) {
        free(x);
        free(t);
        return NULL;
    }
    for (uint32_t b = 0; b < 65536; b++) {
        const uint32_t u = b << 16;
        memcpy(&x[b], &u, sizeof(u));
    }
    nf__cpu_act_row(x, x, 65536, NF_ACT_GELU);
    for (uint32_t b = 0; b < 65536; b++) t[b] = nf__bf16_u32(x[b]);
    free(x);
    return c->gelu = t;
}

/* the GELU LINEAR's epilogue in one pass over a row: y = [y +] R(GELU(R(R?(t) + bb)))
 * by the table, the bits of R(GELU(..)) into bits (not NULL) */
static void nf__bf16_epi_gelu_tail(float * y, const float * t, const float * bb, int64_t o, int64_t n, int twice,
                                   int acc, const uint32_t * lut, uint16_t * bits) {
    for (; o < n; o++) {
        const float v = twice ? nf__bf16_rnd(t[o]) : t[o];
        const uint32_t g = lut[nf__bf16_u32(v + bb[o]) >> 16];
        float gv;
        memcpy(&gv, &g, sizeof(gv));
        y[o] = acc ? y[o] + gv : gv;
        if (bits) bits[o] = (uint16_t) (g >> 16);
    }
}

#if defined(__x86_64__) && defined(__GNUC__)
/* the mode runs only where oneDNN has avx512_core_bf16 kernels, so AVX-512F is there; the
 * compilers do not vectorise the lookup (no gathers in their cost models), hence intrinsics */
__attribute__((target("avx512f"))) static inline __m512i nf__bf16_u32_v(__m512i u) {
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                                  _mm512_set1_epi32(0x7f800000));
    const __m512i hi = _mm512_set1_epi32((int) 0xffff0000u);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    const __m512i r = _mm512_and_si512(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), lsb), hi);
    const __m512i q = _mm512_and_si512(_mm512_or_si512(u, _mm512_set1_epi32(0x00400000)), hi);
    return _mm512_mask_blend_epi32(nan, r, q);
}

__attribute__((target("avx512f"), noinline)) static void nf__bf16_epi_gelu(float * y, const float * t,
                                                                           const float * restrict bb, int64_t n,
                                                                           int twice, int acc,
                                                                           const uint32_t * restrict lut,
                                                                           uint16_t * restrict bits) {
    int64_t o = 0;
    for (; o + 16 <= n; o += 16) {
        __m512i u = _mm512_castps_si512(_mm512_loadu_ps(t + o));
        if (twice) u = nf__bf16_u32_v(u);
        const __m512 v = _mm512_add_ps(_mm512_castsi512_ps(u), _mm512_loadu_ps(bb + o));
        const __m512i idx = _mm512_srli_epi32(nf__bf16_u32_v(_mm512_castps_si512(v)), 16);
        const __m512i g = _mm512_i32gather_epi32(idx, (const void *) lut, 4);
        __m512 gv = _mm512_castsi512_ps(g);
        if (acc) gv = _mm512_add_ps(_mm512_loadu_ps(y + o), gv);
        _mm512_storeu_ps(y + o, gv);
        if (bits) _mm256_storeu_si256((__m256i *) (bits + o), _mm512_cvtepi32_epi16(_mm512_srli_epi32(g, 16)));
    }
    nf__bf16_epi_gelu_tail(y, t, bb, o, n, twice, acc, lut, bits);
}
#else
static void nf__bf16_epi_gelu(float * y, const float * t, const float * bb, int64_t n, int twice, int acc,
                              const uint32_t * lut, uint16_t * bits) {
    nf__bf16_epi_gelu_tail(y, t, bb, 0, n, twice, acc, lut, bits);
}
#endif

/* the bf16 copy of LINEAR's x: the one its producer left (LAYER_NORM, a GELU LINEAR), or
 * converted here into c->xa */
static const uint16_t * nf__x_bits(struct nf_cpu_bf16 * c, const nf_tensor * x, int64_t m, int64_t k, int64_t ldx) {
    for (int i = 0; i < NF__ACT_COPIES; i++)
        if (nf__copy_is(&c->act[i], x, m, k, ldx)) return c->act[i].bits;
    uint16_t * xa = nf__grow(&c->xa, &c->xa_n, (size_t) (m * k));
    if (!xa) return NULL;
    const float * src = NF__PTR(x);
#pragma omp parallel for schedule(static) if (NF_CPU_PAR(m * k))
    for (int64_t r = 0; r < m; r++) nf__bf16_bits_row(xa + r * k, src + r * ldx, k);
    return xa;
}

static int nf__bf16_linear(nf_backend * be, const nf_op * op, nf_err * err) {
    struct nf_cpu_bf16 * c = be->ctx;
    const struct nf_linear_params * p = &op->p.linear;
    if (p->m == 0) return NF_OK;
    const int64_t m = p->m, n = p->n, k = p->k;
    const float * bias = op->n_src == 3 ? NF__PTR(&op->src[2]) : NULL;
    float * y = NF__PTR(&op->dst[0]);
    const int act = p->act, acc = p->accumulate, twice = p->bias_after_round;
    const uint16_t * xa = nf__x_bits(c, &op->src[0], m, k, p->ldx);
    /* x·Wᵀ straight into y unless y accumulates it */
    float * scratch = nf__backend_host_scratch(be, (size_t) (n + (acc ? m * n : 0)) * sizeof(float));
    if (!xa || !scratch) return nf__err_set(err, NF_ERR_NOMEM, "LINEAR %s: out of memory", op->label ? op->label : "");
    float *bb = scratch, *t = acc ? scratch + n : y;
    const int64_t ldt = acc ? n : p->ldy;
    /* W's packed bf16 copy (kept), else W rounded into c->wa for the plain-layout matmul */
    struct nf__mm * mm = NULL;
    const uint16_t * wa = NULL;
    NF_TRY(nf__mm_get(c, m, n, k, ldt, 0, NF__W_ANY, 0, 0, &mm, err));
    NF_TRY(nf__weight_packed(c, &op->src[1], n, k, &mm->wmd, &wa, err));
    if (!wa) {
        if (!nf__grow(&c->wa, &c->wa_n, (size_t) (n * k)))
            return nf__err_set(err, NF_ERR_NOMEM, "LINEAR %s: out of memory", op->label ? op->label : "");
        const float * W = NF__PTR(&op->src[1]);
#pragma omp parallel for schedule(static) if (NF_CPU_PAR(n * k))
        for (int64_t r = 0; r < n; r++) nf__bf16_bits_row(c->wa + r * k, W + r * k, k);
        wa = c->wa;
        NF_TRY(nf__mm_get(c, m, n, k, ldt, k, NF__W_NK, 0, 0, &mm, err));
    }
    for (int64_t o = 0; o < n; o++) bb[o] = bias ? nf__bf16_rnd(bias[o]) : 0.0f;
    NF_TRY(nf__mm_exec(c, c->stream, mm, xa, wa, t, NULL, err));
    /* a GELU's output is the next LINEAR's x: its bf16 bits now, while the row is in cache */
    struct nf__copy * out = act != NF_ACT_NONE && !acc ? nf__act_begin(c, &op->dst[0], m, n, p->ldy, xa) : NULL;
    const uint32_t * lut = act == NF_ACT_GELU ? nf__gelu_table(c) : NULL;
#pragma omp parallel for schedule(static) if (NF_CPU_PAR(m * n))
    for (int64_t r = 0; r < m; r++) {
        float * tr = t + r * ldt;
        if (lut) {
            nf__bf16_epi_gelu(y + r * p->ldy, tr, bb, n, twice, acc, lut, out ? out->bits + r * n : NULL);
            continue;
        }
        nf__bf16_epi_bias(tr, bb, n, twice);
        if (act != NF_ACT_NONE) nf__cpu_act_row(tr, tr, n, act);
        if (act != NF_ACT_NONE || acc)
            nf__bf16_epi_out(y + r * p->ldy, tr, n, act != NF_ACT_NONE, acc, out ? out->bits + r * n : NULL);
        if (acc && p->bf16_stream) /* SpTransformer's residual: bf16 + bf16 -> bf16 */
            for (int64_t o = 0; o < n; o++) y[r * p->ldy + o] = nf__bf16_rnd(y[r * p->ldy + o]);
    }
    if (out) out->valid = 1;
    if (!acc && p->ldy == n) { /* y holds bf16 values only, all of [y, y + m n) */
        struct nf__copy * e = &c->bf16_vals[c->next_vals++ % (NF__VALS)];
        nf__copy_set(e, &op->dst[0], 1, m * n, m * n);
    }
    return NF_OK;
}

/* LAYER_NORM: the exact kernel, leaving the bf16 copy of its output for the LINEAR that
 * reads it (autocast rounds it there anyway) */
static int nf__bf16_layer_norm(nf_backend * be, const nf_op * op) {
    struct nf_cpu_bf16 * c = be->ctx;
    const struct nf_layer_norm_params * p = &op->p.layer_norm;
    struct nf__copy * out = p->m > 0 ? nf__act_begin(c, &op->dst[0], p->m, p->k, p->ldy, NULL) : NULL;
    nf__cpu_layer_norm_rows(op, out ? out->bits : NULL);
    if (out) out->valid = 1;
    return NF_OK;
}

/* d[e] = R(s[e]), e < n */
__attribute__((target_clones(NF__CPU_CLONES), noinline)) static void nf__bf16_rnd_row(float * restrict d,
                                                                                      const float * restrict s,
                                                                                      int64_t n) {
    for (int64_t e = 0; e < n; e++) d[e] = nf__bf16_rnd(s[e]);
}

/* d[e] = R(s[e] * f), e < n */
__attribute__((target_clones(NF__CPU_CLONES), noinline)) static void nf__bf16_scale_rnd_row(float * restrict d,
                                                                                            const float * restrict s,
                                                                                            int64_t n, float f) {
    for (int64_t e = 0; e < n; e++) d[e] = nf__bf16_rnd(s[e] * f);
}

/* the softmax numerators of nb rows of S (row stride lk), in place: e = exp(s - max)
 * (nf__bf16_expf, vectorised), their fp32 sum in j order (four rows' sums interleaved),
 * inv[i] = 1 / sum, then e rounded to bf16 -- in S, or (pbits not NULL) as bf16 bits
 * into pbits (nb x lk) for the P·V matmul */
__attribute__((target_clones(NF__CPU_CLONES), noinline)) static void nf__bf16_softmax_num(float * restrict S,
                                                                                          int64_t nb, int64_t lk,
                                                                                          float * restrict inv,
                                                                                          uint16_t * restrict pbits) {
    for (int64_t i = 0; i < nb; i++) {
        float * s = S + i * lk;
        const float mx = nf__cpu_max_row(s, lk);
        for (int64_t j = 0; j < lk; j++) s[j] = nf__bf16_expf(s[j] - mx);
    }
    int64_t i = 0;
    for (; i + 4 <= nb; i += 4) {
        const float *s0 = S + i * lk, *s1 = s0 + lk, *s2 = s1 + lk, *s3 = s2 + lk;
        float l0 = 0.0f, l1 = 0.0f, l2 = 0.0f, l3 = 0.0f;
        for (int64_t j = 0; j < lk; j++) {
            l0 += s0[j];
            l1 += s1[j];
            l2 += s2[j];
            l3 += s3[j];
        }
        inv[i] = 1.0f / l0, inv[i + 1] = 1.0f / l1, inv[i + 2] = 1.0f / l2, inv[i + 3] = 1.0f / l3;
    }
    for (; i < nb; i++) {
        float l = 0.0f;
        for (int64_t j = 0; j < lk; j++) l += S[i * lk + j];
        inv[i] = 1.0f / l;
    }
    if (pbits)
        for (int64_t t = 0; t < nb * lk; t++) pbits[t] = (uint16_t) (nf__bf16_u32(S[t]) >> 16);
    else
        for (int64_t t = 0; t < nb * lk; t++) S[t] = nf__bf16_rnd(S[t]);
}

/* one (group, head, block of query rows): see the file comment */
struct nf__bf16_attn {
    const struct nf_attention_params * p;
    const float *q, *k, *v;
    float * o;
    int direct;       /* q, k, v hold bf16 values: read in place, not rounded into copies */
    uint16_t * obits; /* o's bf16 bits at o's offsets (the o-projection's input), or NULL */
};

/* 1 when the bytes t reads from (n floats from t's offset) lie in regions known to hold
 * bf16 values only (one, or several that meet: e.g. the support rows' and the query
 * rows' projections, written by two LINEARs) */
static int nf__bf16_valued(const struct nf_cpu_bf16 * c, const nf_tensor * t, int64_t n) {
    const size_t hi = t->offs + (size_t) n * sizeof(float);
    size_t lo = t->offs;
    for (int step = 0; step < NF__VALS && lo < hi; step++) {
        size_t next = lo;
        for (int i = 0; i < NF__VALS; i++) {
            const struct nf__copy * e = &c->bf16_vals[i];
            if (e->valid && e->handle == t->buf->handle && e->offs <= lo && lo < e->end && e->end > next) next = e->end;
        }
        if (next == lo) return 0;
        lo = next;
    }
    return lo >= hi;
}

/* query rows i0 .. i0 + nb of (g, h): o = R(ob · inv), and their bits where o keeps them */
static void nf__bf16_attn_out(const struct nf__bf16_attn * a, int64_t g, int64_t h, int64_t i0, int64_t nb,
                              const float * ob, const float * inv) {
    const struct nf_attention_params * p = a->p;
    const int64_t E = p->head_dim;
    for (int64_t i = 0; i < nb; i++) {
        float * orow = a->o + g * p->o_gs + (i0 + i) * p->o_ss + h * E;
        nf__bf16_scale_rnd_row(orow, ob + i * E, E, inv[i]);
        if (a->obits) nf__bf16_bits_row(a->obits + (orow - a->o), orow, E);
    }
}

static int nf__bf16_attn_task(const struct nf__bf16_attn * a, int64_t g, int64_t h, int64_t i0, int64_t nb, float * buf,
                              nf_err * err) {
    const struct nf_attention_params * p = a->p;
    const int64_t E = p->head_dim, lk = p->lk;
    float *qb = buf, *kb = qb + nb * E, *vb = kb + lk * E, *S = vb + lk * E, *ob = S + nb * lk, *sum = ob + nb * E;
    const float *qs = a->q + g * p->q_gs + i0 * p->q_ss + h * E, *ks = a->k + g * p->kv_gs + h * E,
                *vs = a->v + g * p->kv_gs + h * E;
    int64_t ldq = p->q_ss, ldkv = p->kv_ss;
    if (!a->direct) {
        for (int64_t i = 0; i < nb; i++) nf__bf16_rnd_row(qb + i * E, qs + i * p->q_ss, E);
        for (int64_t j = 0; j < lk; j++) {
            nf__bf16_rnd_row(kb + j * E, ks + j * p->kv_ss, E);
            nf__bf16_rnd_row(vb + j * E, vs + j * p->kv_ss, E);
        }
        qs = qb, ks = kb, vs = vb, ldq = ldkv = E;
    }
    NF_TRY(nf__cpu_sgemm(1, nb, lk, E, p->scale, qs, ldq, ks, ldkv, S, lk, err));
    nf__bf16_softmax_num(S, nb, lk, sum, NULL);
    NF_TRY(nf__cpu_sgemm(0, nb, E, lk, 1.0f, S, lk, vs, ldkv, ob, E, err));
    nf__bf16_attn_out(a, g, h, i0, nb, ob, sum);
    return NF_OK;
}

/* d[e] = s[e] * f, e < n */
__attribute__((target_clones(NF__CPU_CLONES), noinline)) static void nf__scale_row(float * d, int64_t n, float f) {
    for (int64_t e = 0; e < n; e++) d[e] *= f;
}

/* the bf16 bits of the bytes [lo, hi) of buf (floats), at the same offsets from the
 * returned pointer: from a kept copy of a region that holds them (converted by an
 * earlier ATTENTION, still valid: nf__cpu_bf16_forget), else converted now into the
 * other copy, in parallel. NULL when out of memory. */
static const uint16_t * nf__kv_bits(struct nf_cpu_bf16 * c, const struct nf_buffer * buf, size_t lo, size_t hi) {
    for (int i = 0; i < NF__KV_COPIES; i++) {
        const struct nf__copy * e = &c->kv[i];
        if (e->valid && e->handle == buf->handle && e->offs <= lo && hi <= e->end)
            return e->bits + (lo - e->offs) / sizeof(float);
    }
    struct nf__copy * e = &c->kv[c->next_kv++ % NF__KV_COPIES];
    const int64_t n = (int64_t) ((hi - lo) / sizeof(float));
    e->valid = 0;
    if (!nf__grow(&e->bits, &e->cap, (size_t) n)) return NULL;
    const float * src = (const float *) ((const char *) buf->handle + lo);
    const int64_t blk = 4096;
#pragma omp parallel for schedule(static) if (NF_CPU_PAR(n))
    for (int64_t b = 0; b < n; b += blk) nf__bf16_bits_row(e->bits + b, src + b, n - b < blk ? n - b : blk);
    e->handle = buf->handle, e->offs = lo, e->end = hi, e->rows = 1, e->k = e->ld = n, e->valid = 1;
    return e->bits;
}

/* the bits of ATTENTION's keys and values (n floats each from their offsets): one region
 * where both lie in one buffer (Mitra's packed [k v] rows), else one each */
static int nf__kv_bits_pair(struct nf_cpu_bf16 * c, const nf_tensor * k, const nf_tensor * v, int64_t n,
                            const uint16_t ** kb, const uint16_t ** vb) {
    const size_t nb = (size_t) n * sizeof(float);
    if (k->buf == v->buf) {
        const size_t lo = k->offs < v->offs ? k->offs : v->offs;
        const size_t hi = k->offs + nb > v->offs + nb ? k->offs + nb : v->offs + nb;
        const uint16_t * b = nf__kv_bits(c, k->buf, lo, hi);
        if (!b) return NF_ERR_NOMEM;
        *kb = b + (k->offs - lo) / sizeof(float), *vb = b + (v->offs - lo) / sizeof(float);
        return NF_OK;
    }
    *kb = nf__kv_bits(c, k->buf, k->offs, k->offs + nb);
    *vb = *kb ? nf__kv_bits(c, v->buf, v->offs, v->offs + nb) : NULL;
    return *kb && *vb ? NF_OK : NF_ERR_NOMEM;
}

/* from this many keys and query rows on, the row attention's two products run on
 * oneDNN's bf16 matmul (its AMX / AVX512_BF16 kernels, as torch's CPU flash attention
 * runs them: bf16 operands, fp32 accumulation) instead of sgemm on the same values */
#define NF__ATTN_MM_MIN 64

/* the matmuls of the row attention: [0] scores (bq, lk) = q (bq, E) · kᵀ, k stored
 * (lk, E); [1] outputs (bq, E) = P (bq, lk) · v, v stored (lk, E); [2], [3] the same
 * for the last block of lq % bq rows */
struct nf__bf16_attn_mm {
    struct nf__mm * mm[4];
    int64_t bq;
    size_t sp_bytes;               /* the largest of their scratchpads (each thread has its own) */
    const uint16_t *kbits, *vbits; /* the keys' and values' bits, at the offsets of k and v */
};

/* one (group, head) on the matmuls, its keys and values read from their bf16 bits
 * (nf__kv_bits) at their row stride: per block of query rows the rule of
 * nf__bf16_attn_task -- s = scale · (q·kᵀ) in fp32, the numerators rounded to bf16,
 * o = R((P·V) · (1 / sum)) */
static int nf__bf16_attn_head_mm(struct nf_cpu_bf16 * c, const struct nf__bf16_attn * a,
                                 const struct nf__bf16_attn_mm * m, int64_t g, int64_t h, float * buf, dnnl_stream_t st,
                                 nf_err * err) {
    const struct nf_attention_params * p = a->p;
    const int64_t E = p->head_dim, lk = p->lk, lq = p->lq, bq = m->bq;
    float *S = buf, *ob = S + bq * lk, *sum = ob + bq * E;
    uint16_t *qb = (uint16_t *) (sum + bq), *pb = qb + bq * E;
    /* the scratchpad after them, 64-byte aligned */
    void * sp = (void *) (((uintptr_t) (pb + bq * lk) + 63) & ~(uintptr_t) 63);
    const float * qs = a->q + g * p->q_gs + h * E;
    const uint16_t *kb = m->kbits + g * p->kv_gs + h * E, *vb = m->vbits + g * p->kv_gs + h * E;
    for (int64_t i0 = 0; i0 < lq; i0 += bq) {
        const int64_t nb = lq - i0 < bq ? lq - i0 : bq;
        const int last = nb != bq ? 2 : 0;
        for (int64_t i = 0; i < nb; i++) nf__bf16_bits_row(qb + i * E, qs + (i0 + i) * p->q_ss, E);
        NF_TRY(nf__mm_exec(c, st, m->mm[last], qb, kb, S, sp, err));
        nf__scale_row(S, nb * lk, p->scale);
        nf__bf16_softmax_num(S, nb, lk, sum, pb);
        NF_TRY(nf__mm_exec(c, st, m->mm[last + 1], pb, vb, ob, sp, err));
        nf__bf16_attn_out(a, g, h, i0, nb, ob, sum);
    }
    return NF_OK;
}

static int nf__bf16_attention(nf_backend * be, const nf_op * op, nf_err * err) {
    const struct nf_attention_params * p = &op->p.attention;
    const int64_t G = p->n_groups, H = p->n_heads, E = p->head_dim, lq = p->lq, lk = p->lk;
    if (G == 0 || lq == 0) return NF_OK;
    struct nf_cpu_bf16 * c = be->ctx;
    const int64_t q_n = (G - 1) * p->q_gs + (lq - 1) * p->q_ss + H * E,
                  kv_n = (G - 1) * p->kv_gs + (lk - 1) * p->kv_ss + H * E;
    /* many keys and query rows: a task per (group, head) on the bf16 matmuls, each run in
     * its thread on the thread's own stream, which convert q, k, v to bits (rounding them);
     * else a task per block of query rows on sgemm, reading q, k, v in place where they
     * hold bf16 values only */
    const int use_mm = lk >= NF__ATTN_MM_MIN && lq >= NF__ATTN_MM_MIN;
    const int direct = !use_mm && lk > 0 && nf__bf16_valued(c, &op->src[0], q_n) &&
                       nf__bf16_valued(c, &op->src[1], kv_n) && nf__bf16_valued(c, &op->src[2], kv_n);
    /* where o's rows are whole (G lq rows of H E, in either order), the bf16 copy of o for
     * the o-projection that reads it next, written as each row is */
    const int64_t HE = H * E;
    const int whole = (p->o_gs == HE && p->o_ss == G * HE) || (p->o_ss == HE && p->o_gs == lq * HE);
    struct nf__copy * out = whole ? nf__act_begin(c, &op->dst[0], G * lq, HE, HE, NULL) : NULL;
    const struct nf__bf16_attn a = {
        p,      NF__PTR(&op->src[0]),  NF__PTR(&op->src[1]), NF__PTR(&op->src[2]), NF__PTR(&op->dst[0]),
        direct, out ? out->bits : NULL};
    const int64_t bq = lq < 128 ? lq : 128, nblk = (lq + bq - 1) / bq;
    struct nf__bf16_attn_mm m = {{NULL}, bq, 0, NULL, NULL};
    if (use_mm) {
        const int64_t ld = p->kv_ss;
        if (nf__kv_bits_pair(c, &op->src[1], &op->src[2], kv_n, &m.kbits, &m.vbits) != NF_OK)
            return nf__err_set(err, NF_ERR_NOMEM, "ATTENTION %s: out of memory", op->label ? op->label : "");
        NF_TRY(nf__mm_get(c, bq, lk, E, lk, ld, NF__W_NK, 0, 1, &m.mm[0], err));
        NF_TRY(nf__mm_get(c, bq, E, lk, E, ld, NF__W_KN, 0, 1, &m.mm[1], err));
        if (lq % bq) {
            NF_TRY(nf__mm_get(c, lq % bq, lk, E, lk, ld, NF__W_NK, 0, 1, &m.mm[2], err));
            NF_TRY(nf__mm_get(c, lq % bq, E, lk, E, ld, NF__W_KN, 0, 1, &m.mm[3], err));
        }
        for (int i = 0; i < 4; i++)
            if (m.mm[i] && m.mm[i]->sp_bytes > m.sp_bytes) m.sp_bytes = m.mm[i]->sp_bytes;
    }
    /* floats: the sgemm task's copies, scores, outputs and sums; or the scores, outputs,
     * sums and (as bf16 pairs) the queries' and probabilities' bits */
    const size_t nfl = use_mm ? (size_t) (bq * lk + bq * E + bq + (bq * E + bq * lk + 1) / 2) +
                                    (m.sp_bytes + 64) / sizeof(float) + 1
                              : (size_t) (bq * E + 2 * lk * E + bq * lk + bq * E + bq);
    const int64_t ntask = use_mm ? G * H : G * H * nblk;
    int failed = 0;
#pragma omp parallel if (use_mm || NF_CPU_PAR(G * H * lq * lk * E))
    {
        struct nf__team t;
        const int ready = nf__team_begin(c, &t, nfl * sizeof(float), use_mm);
#pragma omp for schedule(dynamic, 1)
        for (int64_t task = 0; task < ntask; task++) {
            int rc = NF_ERR_NOMEM;
            if (ready && use_mm) {
                rc = nf__bf16_attn_head_mm(c, &a, &m, task / H, task % H, t.buf, t.st, &t.err);
            } else if (ready) {
                const int64_t g = task / (H * nblk), h = (task / nblk) % H, i0 = (task % nblk) * bq;
                const int64_t nb = lq - i0 < bq ? lq - i0 : bq;
                rc = nf__bf16_attn_task(&a, g, h, i0, nb, t.buf, &t.err);
            }
            nf__team_fail(&t, rc, &failed, err);
        }
        nf__team_end(&t);
    }
    NF_TRY(nf__team_result(failed, op, err));
    if (out) out->valid = 1;
    return NF_OK;
}

/* SpTransformer's attention (p.bf16_stream: torch's unfused bf16 attention, the rule of
 * cpu-bf16-spt.c) on oneDNN's batched bf16 matmuls, from NF__SPT_MM_MIN query rows and keys
 * on: chunks of groups, each in one thread -- its q, k and v rows to bits (each group's
 * keys and values a copy of their own: oneDNN refuses the windows' overlapping strides),
 * S = q·kᵀ over its (group, head) batches (fp32 sums of bf16 products), s = R(R(S) ·
 * scale) and P = R(softmax(s)) 8 rows at a time (nf__spt_softmax_rows), o = R(P·V) --
 * the chunk's scores (NF__SPT_CHUNK floats) held in cache between the two products */
#define NF__SPT_MM_MIN 64
#define NF__SPT_CHUNK  131072

/* 64-byte-aligned parts of a thread's scratch: the chunk's scores (ng H lq lk floats), its
 * outputs (ng H lq E), then the bits of q (ng lq H E), k and v (ng lk H E each), P (as S),
 * then the primitives' scratchpad */
struct nf__spt_mm_buf {
    size_t S, O, qb, kb, vb, pb, sp, bytes;
};

static size_t nf__al64(size_t n) { return (n + 63) / 64 * 64; }

static struct nf__spt_mm_buf nf__spt_mm_layout(const struct nf_attention_params * p, int64_t ng, size_t sp_bytes) {
    const int64_t HE = p->n_heads * p->head_dim, ns = ng * p->n_heads * p->lq * p->lk;
    const int64_t nk = ng * p->lk;
    struct nf__spt_mm_buf b;
    b.S = 0;
    b.O = b.S + nf__al64((size_t) ns * sizeof(float));
    b.qb = b.O + nf__al64((size_t) (ng * p->n_heads * p->lq * p->head_dim) * sizeof(float));
    b.kb = b.qb + nf__al64((size_t) (ng * p->lq * HE) * sizeof(uint16_t));
    b.vb = b.kb + nf__al64((size_t) (nk * HE) * sizeof(uint16_t));
    b.pb = b.vb + nf__al64((size_t) (nk * HE) * sizeof(uint16_t));
    b.sp = b.pb + nf__al64((size_t) ns * sizeof(uint16_t));
    b.bytes = b.sp + nf__al64(sp_bytes);
    return b;
}

/* the groups g0 .. g0 + n of op on mm[0] (the scores) and mm[1] (P·V) */
static int nf__spt_attn_chunk(struct nf_cpu_bf16 * c, const nf_op * op, struct nf__bmm * const mm[2], int64_t g0,
                              int64_t n, const struct nf__spt_mm_buf * L, struct nf__team * t) {
    const struct nf_attention_params * p = &op->p.attention;
    const int64_t H = p->n_heads, E = p->head_dim, lq = p->lq, lk = p->lk, HE = H * E;
    const float *q = NF__PTR(&op->src[0]), *k = NF__PTR(&op->src[1]), *v = NF__PTR(&op->src[2]);
    float * o = NF__PTR(&op->dst[0]);
    char * base = t->buf;
    float *S = (float *) (base + L->S), *O = (float *) (base + L->O);
    uint16_t *qb = (uint16_t *) (base + L->qb), *kb = (uint16_t *) (base + L->kb), *vb = (uint16_t *) (base + L->vb),
             *pb = (uint16_t *) (base + L->pb);
    for (int64_t r = 0; r < n * lq; r++)
        nf__bf16_bits_row(qb + r * HE, q + (g0 + r / lq) * p->q_gs + r % lq * p->q_ss, HE);
    for (int64_t r = 0; r < n * lk; r++) {
        const int64_t off = (g0 + r / lk) * p->kv_gs + r % lk * p->kv_ss;
        nf__bf16_bits_row(kb + r * HE, k + off, HE);
        nf__bf16_bits_row(vb + r * HE, v + off, HE);
    }
    NF_TRY(nf__prim_exec(c, t->st, mm[0]->prim, &mm[0]->a_md, qb, &mm[0]->b_md, kb, &mm[0]->c_md, S, &mm[0]->spmd,
                         mm[0]->sp_bytes, base + L->sp, &t->err));
    for (int64_t r = 0; r < n * H * lq; r += NF__SPT_SM_ROWS) {
        const int64_t nr = n * H * lq - r < NF__SPT_SM_ROWS ? n * H * lq - r : NF__SPT_SM_ROWS;
        nf__spt_softmax_rows(S + r * lk, lk, lk, (int) nr, p->scale, pb + r * lk);
    }
    NF_TRY(nf__prim_exec(c, t->st, mm[1]->prim, &mm[1]->a_md, pb, &mm[1]->b_md, vb, &mm[1]->c_md, O, &mm[1]->spmd,
                         mm[1]->sp_bytes, base + L->sp, &t->err));
    for (int64_t r = 0; r < n * H * lq; r++) { /* r = (g H + h) lq + i */
        const int64_t g = r / (H * lq), h = r / lq % H, i = r % lq;
        nf__bf16_rnd_row(o + (g0 + g) * p->o_gs + i * p->o_ss + h * E, O + r * E, E);
    }
    return NF_OK;
}

static int nf__bf16_spt_attention_mm(struct nf_cpu_bf16 * c, const nf_op * op, nf_err * err) {
    const struct nf_attention_params * p = &op->p.attention;
    const int64_t G = p->n_groups, H = p->n_heads, E = p->head_dim, lq = p->lq, lk = p->lk, HE = H * E;
    if (G == 0) return NF_OK;
    int64_t ng = NF__SPT_CHUNK / (H * lq * lk);
    ng = ng < 1 ? 1 : ng > G ? G : ng;
    const int64_t nch = (G + ng - 1) / ng, ng_last = G - (nch - 1) * ng;
    struct nf__bmm * mm[2][2] = {{NULL, NULL}, {NULL, NULL}}; /* [last chunk][scores, P·V] */
    size_t sp_bytes = 0;
    for (int li = 0; li < (ng_last != ng ? 2 : 1); li++) {
        const int64_t n = li ? ng_last : ng;
        const int64_t ad0[4] = {n, H, lq, E}, as0[4] = {lq * HE, E, HE, 1};
        const int64_t bd0[4] = {n, H, E, lk}, bs0[4] = {lk * HE, E, 1, HE};
        const int64_t ad1[4] = {n, H, lq, lk}, as1[4] = {H * lq * lk, lq * lk, lk, 1};
        const int64_t bd1[4] = {n, H, lk, E}, bs1[4] = {lk * HE, E, HE, 1};
        NF_TRY(nf__bmm_get(c, ad0, as0, bd0, bs0, &mm[li][0], err));
        NF_TRY(nf__bmm_get(c, ad1, as1, bd1, bs1, &mm[li][1], err));
        for (int i = 0; i < 2; i++) sp_bytes = mm[li][i]->sp_bytes > sp_bytes ? mm[li][i]->sp_bytes : sp_bytes;
    }
    const struct nf__spt_mm_buf L = nf__spt_mm_layout(p, ng, sp_bytes);
    int failed = 0;
#pragma omp parallel
    {
        struct nf__team t;
        const int ready = nf__team_begin(c, &t, L.bytes, 1);
#pragma omp for schedule(static)
        for (int64_t ci = 0; ci < nch; ci++) {
            const int64_t g0 = ci * ng, n = G - g0 < ng ? G - g0 : ng;
            const int rc = ready ? nf__spt_attn_chunk(c, op, mm[n != ng], g0, n, &L, &t) : NF_ERR_NOMEM;
            nf__team_fail(&t, rc, &failed, err);
        }
        nf__team_end(&t);
    }
    return nf__team_result(failed, op, err);
}

/* CONV1D (SpTransformer's dilated convs, docs/precision.md "SpTransformer
 * under CPU autocast"): torch's bf16 convolution -- x, W and the bias rounded
 * to bf16, fp32 sums, one rounding after the bias; accumulating into y (the
 * resblock residual, whose stream is bf16 under autocast) rounds the sum
 * again. Per tap one bf16 matmul over every output row, reading x's bf16
 * copy with zero rows before and after it (rows past the ends add zeros), the
 * taps summed in fp32 in tap order: tap 0's matmul writes t, each later tap's adds
 * its own product to t (oneDNN's sum post-op: t + that product, one fp32 add per
 * element). Over blocks of NF__CONV_ROWS output rows, so that t stays in cache
 * across the taps, a block's taps and epilogue in one thread. */
#define NF__CONV_ROWS 512
/* CONV1D's epilogue for one row: y = R(t + bb), or y = R(y + R(t + bb)) accumulating */
__attribute__((target_clones(NF__CPU_CLONES), noinline)) static void nf__bf16_conv_epi(float * restrict y,
                                                                                       const float * restrict t,
                                                                                       const float * restrict bb,
                                                                                       int64_t n, int acc) {
    if (acc)
        for (int64_t o = 0; o < n; o++) y[o] = nf__bf16_rnd(y[o] + nf__bf16_rnd(t[o] + bb[o]));
    else
        for (int64_t o = 0; o < n; o++) y[o] = nf__bf16_rnd(t[o] + bb[o]);
}

static int nf__bf16_conv1d(nf_backend * be, const nf_op * op, nf_err * err) {
    struct nf_cpu_bf16 * c = be->ctx;
    const struct nf_conv1d_params * p = &op->p.conv1d;
    if (p->n_seq == 0 || p->len == 0) return NF_OK;
    const float * x = NF__PTR(&op->src[0]);
    const float * W = NF__PTR(&op->src[1]);
    const float * bias = op->n_src == 3 ? NF__PTR(&op->src[2]) : NULL;
    float * y = NF__PTR(&op->dst[0]);
    const int64_t cin = p->cin, cout = p->cout, K = p->ksize, L = p->len;
    const int64_t p0 = p->pad > 0 ? p->pad : 0, p1e = (K - 1) * p->dilation - p->pad, p1 = p1e > 0 ? p1e : 0;
    const int64_t rows = p0 + L + p1;
    uint16_t * xa = nf__grow(&c->xa, &c->xa_n, (size_t) (rows * cin));
    uint16_t * wa = nf__grow(&c->wa, &c->wa_n, (size_t) (K * cout * cin));
    float * t = nf__backend_host_scratch(be, (size_t) (L * cout + cout) * sizeof(float));
    if (!xa || !wa || !t) return nf__err_set(err, NF_ERR_NOMEM, "CONV1D %s: out of memory", op->label ? op->label : "");
    float * bb = t + L * cout; /* the bias rounded once */
    for (int64_t o = 0; o < cout; o++) bb[o] = bias ? nf__bf16_rnd(bias[o]) : 0.0f;
    for (int64_t o = 0; o < cout; o++) /* tap-major (K, cout, cin) */
        for (int64_t ci = 0; ci < cin; ci++)
            for (int64_t k = 0; k < K; k++) wa[(k * cout + o) * cin + ci] = nf__bf16_bits(W[(o * cin + ci) * K + k]);
    memset(xa, 0, (size_t) (p0 * cin) * sizeof(uint16_t));
    memset(xa + (p0 + L) * cin, 0, (size_t) (p1 * cin) * sizeof(uint16_t));
    /* the blocks of output rows spread over the threads, each block's taps run in its
     * thread (oneDNN's kernels single-threaded inside the region) on the thread's own
     * stream and scratchpad: mm[acc][last block], tap 0 writing t, later taps adding */
    const int64_t nblk = (L + NF__CONV_ROWS - 1) / NF__CONV_ROWS, nr_full = L < NF__CONV_ROWS ? L : NF__CONV_ROWS;
    const int64_t nr_last = L - (nblk - 1) * NF__CONV_ROWS;
    struct nf__mm * mm[2][2] = {{NULL, NULL}, {NULL, NULL}};
    size_t sp_bytes = 0;
    for (int acc = 0; acc < 2; acc++)
        for (int li = 0; li < (nr_last != nr_full ? 2 : 1); li++) {
            NF_TRY(nf__mm_get(c, li ? nr_last : nr_full, cout, cin, cout, cin, NF__W_NK, acc, 1, &mm[acc][li], err));
            if (mm[acc][li]->sp_bytes > sp_bytes) sp_bytes = mm[acc][li]->sp_bytes;
        }
    for (int64_t s = 0; s < p->n_seq; s++) {
        const float * xs = x + s * p->x_gs;
        float * ys = y + s * p->y_gs;
#pragma omp parallel for schedule(static) if (NF_CPU_PAR(L * cin))
        for (int64_t r = 0; r < L; r++) nf__bf16_bits_row(xa + (p0 + r) * cin, xs + r * p->ldx, cin);
        int failed = 0;
#pragma omp parallel
        {
            struct nf__team tm;
            const int ready = nf__team_begin(c, &tm, sp_bytes, 1);
#pragma omp for schedule(static)
            for (int64_t b = 0; b < nblk; b++) {
                const int64_t r0 = b * NF__CONV_ROWS, nr = L - r0 < NF__CONV_ROWS ? L - r0 : NF__CONV_ROWS;
                const int li = nr != nr_full;
                int rc = ready ? NF_OK : NF_ERR_NOMEM;
                for (int64_t k = 0; k < K && rc == NF_OK; k++) {
                    const int64_t sh = k * p->dilation - p->pad; /* output row r reads input row r + sh */
                    rc = nf__mm_exec(c, tm.st, mm[k > 0][li], xa + (p0 + r0 + sh) * cin, wa + k * cout * cin,
                                     t + r0 * cout, tm.buf, &tm.err);
                }
                nf__team_fail(&tm, rc, &failed, err);
                if (rc != NF_OK) continue;
                for (int64_t r = r0; r < r0 + nr; r++)
                    nf__bf16_conv_epi(ys + r * p->ldy, t + r * cout, bb, cout, p->accumulate);
            }
            nf__team_end(&tm);
        }
        NF_TRY(nf__team_result(failed, op, err));
    }
    return NF_OK;
}

/* ---- dispatch --------------------------------------------------------------------- */

int nf__cpu_bf16_launch(nf_backend * be, const struct nf_kernel * k, const nf_op * op, nf_err * err) {
    /* what the op writes, no bf16 copy of it holds any more */
    for (int i = 0; i < op->n_dst; i++)
        if (op->dst[i].buf)
            nf__cpu_bf16_forget(be->ctx, op->dst[i].buf->handle, op->dst[i].offs,
                                op->dst[i].offs + nf__tensor_nbytes(&op->dst[i]));
    switch (op->type) {
        case NF_OP_LINEAR: return nf__bf16_linear(be, op, err);
        case NF_OP_ATTENTION:
            if (!op->p.attention.bf16_stream) return nf__bf16_attention(be, op, err);
            return op->p.attention.lq >= NF__SPT_MM_MIN && op->p.attention.lk >= NF__SPT_MM_MIN
                       ? nf__bf16_spt_attention_mm(be->ctx, op, err)
                       : nf__bf16_spt_attention(op, err);
        case NF_OP_AXIAL_POS: return nf__bf16_spt_axial_pos(op);
        case NF_OP_BUCKET_ROUTE: return nf__bf16_spt_bucket_route(op, err);
        case NF_OP_BUCKET_GATHER: return nf__cpu_bucket_gather_r(op, 1);
        case NF_OP_EMBED_FEATURES: return nf__cpu_embed_features_r(op, 1);
        case NF_OP_LABEL_TOKENS: return nf__cpu_label_tokens_r(op, 1, err);
        case NF_OP_CONV1D: return nf__bf16_conv1d(be, op, err);
        case NF_OP_BATCH_NORM: return nf__cpu_batch_norm_r(op, 1, err);
        case NF_OP_LAYER_NORM: return nf__bf16_layer_norm(be, op);
        /* fp32 under autocast (not on its bf16 list, or fp32-listed): the exact kernels */
        case NF_OP_QUANTILE:
        case NF_OP_BUCKETIZE_NORM:
        case NF_OP_FILL:
        case NF_OP_COPY:
        case NF_OP_GATHER_ROWS: return k->run(be, op, err);
        default:
            return nf__err_set(err, NF_ERR_UNSUPPORTED,
                               "op %s (%s): no bf16-autocast rule for it on cpu (the mode covers Mitra's forward, "
                               "docs/precision.md); run with --precision exact",
                               nf__op_name(op->type), op->label ? op->label : "");
    }
}
