/* cpu-kernels.c -- the reference kernels (host pointers), one per op.
 *
 * These define the numerics every other backend is checked against
 * (tests/test-backend-ops.c). Exact fp32: erf GELU and the softmax's exp
 * correctly rounded (evaluated in double), softmax with max subtraction,
 * sqrtf; compiled with -ffp-contract=off. GEMMs go through
 * oneDNN's sgemm (cpu-gemm.c); the loops are parallel over independent rows with OpenMP
 * and never split a reduction, so results are identical run to run. */
#include "cpu-bf16.h"
#include "cpu-gemm.h"
#include "cpu-kernels.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#define NF__PTR(t)  ((float *) ((char *) (t)->buf->handle + (t)->offs))
#define NF__IPTR(t) ((int32_t *) ((char *) (t)->buf->handle + (t)->offs))

/* ---- QUANTILE ------------------------------------------------------------------ */

static int nf__cmp_float_nan_last(const void * pa, const void * pb) {
    float a = *(const float *) pa, b = *(const float *) pb;
    int na = isnan(a), nb = isnan(b);
    if (na || nb) return na - nb;
    return (a > b) - (a < b);
}

/* x (n, F) -> B (F, nq): torch.quantile linear interpolation, float32 lerp. */
static int nf__cpu_quantile(nf_backend * be, const nf_op * op, nf_err * err) {
    const float * x = NF__PTR(&op->src[0]);
    float * B = NF__PTR(&op->dst[0]);
    const int64_t n = op->src[0].ne[0], F = op->src[0].ne[1];
    const int nq = op->p.quantile.nq;
    const float denom = (float) op->p.quantile.q_denom;
    float * v = malloc((size_t) n * sizeof(float));
    if (!v) return nf__err_set(err, NF_ERR_NOMEM, "QUANTILE: out of memory");
    for (int64_t j = 0; j < F; j++) {
        int has_nan = 0;
        for (int64_t r = 0; r < n; r++) {
            v[r] = x[r * F + j];
            has_nan |= isnan(v[r]);
        }
        qsort(v, (size_t) n, sizeof(float), nf__cmp_float_nan_last);
        for (int k = 1; k <= nq; k++) {
            float out;
            if (has_nan) {
                out = NAN;
            } else {
                const float q = (float) k / denom;
                const float pos = q * (float) (n - 1);
                const int64_t lo = (int64_t) pos;
                const int64_t hi = (int64_t) ceilf(pos);
                const float w = pos - (float) lo;
                const float a = v[lo], b = v[hi];
                out = fabsf(w) < 0.5f ? fmaf(w, b - a, a) : fmaf(w - 1.0f, b - a, b);
            }
            B[j * nq + (k - 1)] = out;
        }
    }
    free(v);
    return NF_OK;
}

/* ---- BUCKETIZE_NORM -------------------------------------------------------------- */

/* #{k : B[k] < x}; NaN x -> nb (torch.bucketize lower_bound, right=False) */
static int64_t nf__lower_bound(const float * B, int64_t nb, float x) {
    int64_t lo = 0, hi = nb;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (!(B[mid] >= x))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static int nf__cpu_bucketize_norm(nf_backend * be, const nf_op * op, nf_err * err) {
    const float * xs = NF__PTR(&op->src[0]);
    const float * xq = op->src[1].ne[0] ? NF__PTR(&op->src[1]) : NULL;
    const float * B = NF__PTR(&op->src[2]);
    float * zs = NF__PTR(&op->dst[0]);
    float * zq = op->dst[1].ne[0] ? NF__PTR(&op->dst[1]) : NULL;
    const int64_t ns = op->src[0].ne[0], nqr = op->src[1].ne[0], F = op->src[0].ne[1];
    const int64_t nb = op->src[2].ne[1];
    const float fns = (float) ns;
#pragma omp parallel for schedule(static) if (NF_CPU_PAR(F * ns))
    for (int64_t j = 0; j < F; j++) {
        const float * Bj = B + j * nb;
        double sum = 0.0;
        for (int64_t r = 0; r < ns; r++) {
            float u = (float) nf__lower_bound(Bj, nb, xs[r * F + j]) / fns;
            zs[r * F + j] = u;
            sum += u;
        }
        const float mean = (float) sum / fns;
        double sq = 0.0;
        for (int64_t r = 0; r < ns; r++) {
            float u = zs[r * F + j] - mean;
            zs[r * F + j] = u;
            sq += (double) (u * u);
        }
        const float var = (float) sq / fns;
        const float sd = sqrtf(var);
        for (int64_t r = 0; r < ns; r++) zs[r * F + j] = var == 0.0f ? 0.0f : zs[r * F + j] / sd;
        for (int64_t r = 0; r < nqr; r++) {
            float u = (float) nf__lower_bound(Bj, nb, xq[r * F + j]) / fns - mean;
            zq[r * F + j] = var == 0.0f ? 0.0f : u / sd;
        }
    }
    return NF_OK;
}

/* ---- token embeddings -------------------------------------------------------------- */

/* EMBED_FEATURES: tok[r][1+j] = z[r][j] w + b; bf16 (bf16-autocast, Linear(1, D) under
 * autocast): R(R(z) R(w) + R(b)), R the rounding to bf16 */
int nf__cpu_embed_features_r(const nf_op * op, int bf16) {
    const float * z = NF__PTR(&op->src[0]);
    const float * w = NF__PTR(&op->src[1]);
    const float * b = NF__PTR(&op->src[2]);
    float * tok = NF__PTR(&op->dst[0]);
    const int64_t n = op->src[0].ne[0], F = op->src[0].ne[1], D = op->dst[0].ne[2];
#pragma omp parallel for schedule(static) if (NF_CPU_PAR(n * F * D))
    for (int64_t r = 0; r < n; r++) {
        for (int64_t j = 0; j < F; j++) {
            float * t = tok + (r * (F + 1) + 1 + j) * D;
            if (bf16) {
                const float zz = nf__bf16_rnd(z[r * F + j]);
                for (int64_t c = 0; c < D; c++) t[c] = nf__bf16_rnd(zz * nf__bf16_rnd(w[c]) + nf__bf16_rnd(b[c]));
            } else {
                const float zz = z[r * F + j];
                for (int64_t c = 0; c < D; c++) t[c] = zz * w[c] + b[c];
            }
        }
    }
    return NF_OK;
}

static int nf__cpu_embed_features(nf_backend * be, const nf_op * op, nf_err * err) {
    return nf__cpu_embed_features_r(op, 0);
}

/* LABEL_TOKENS; bf16: the regressor's Linear(1, D) as EMBED_FEATURES's (the class and mask
 * embeddings are nn.Embedding, fp32 under autocast) */
int nf__cpu_label_tokens_r(const nf_op * op, int bf16, nf_err * err) {
    float * tok = NF__PTR(&op->dst[0]);
    const int64_t n = op->dst[0].ne[0], T = op->dst[0].ne[1], D = op->dst[0].ne[2];
    for (int64_t r = 0; r < n; r++) {
        float * t = tok + r * T * D;
        if (op->p.label_tokens.mode == NF_LABEL_CLASS) {
            const int32_t y = NF__IPTR(&op->src[0])[r];
            if (y < 0 || y >= op->src[1].ne[0]) {
                return nf__err_set(err, NF_ERR_INPUT, "LABEL_TOKENS: label %d out of range 0..%lld", (int) y,
                                   (long long) op->src[1].ne[0] - 1);
            }
            memcpy(t, NF__PTR(&op->src[1]) + (int64_t) y * D, (size_t) D * sizeof(float));
        } else if (op->p.label_tokens.mode == NF_LABEL_VALUE) {
            const float y = NF__PTR(&op->src[0])[r];
            const float * w = NF__PTR(&op->src[1]);
            const float * b = NF__PTR(&op->src[2]);
            if (bf16)
                for (int64_t c = 0; c < D; c++)
                    t[c] = nf__bf16_rnd(nf__bf16_rnd(y) * nf__bf16_rnd(w[c]) + nf__bf16_rnd(b[c]));
            else
                for (int64_t c = 0; c < D; c++) t[c] = y * w[c] + b[c];
        } else {
            memcpy(t, NF__PTR(&op->src[1]), (size_t) D * sizeof(float));
        }
    }
    return NF_OK;
}

static int nf__cpu_label_tokens(nf_backend * be, const nf_op * op, nf_err * err) {
    return nf__cpu_label_tokens_r(op, 0, err);
}

/* ---- LAYER_NORM ------------------------------------------------------------------ */

/* one row: the statistics, then y = (x - mu) * rstd * g + b, vectorised */
__attribute__((target_clones(NF__CPU_CLONES), noinline)) static void nf__layer_norm_row(float * yr, const float * xr,
                                                                                        const float * restrict g,
                                                                                        const float * restrict b,
                                                                                        int64_t k, float eps) {
    float mu, rstd;
    nf__cpu_ln_stats(xr, k, eps, &mu, &rstd);
    for (int64_t c = 0; c < k; c++) yr[c] = (xr[c] - mu) * rstd * g[c] + b[c];
}

void nf__cpu_layer_norm_rows(const nf_op * op, uint16_t * bits) {
    const struct nf_layer_norm_params * p = &op->p.layer_norm;
    const float * x = NF__PTR(&op->src[0]);
    const float * g = NF__PTR(&op->src[1]);
    const float * b = NF__PTR(&op->src[2]);
    float * y = NF__PTR(&op->dst[0]);
    /* a row costs about eight times an elementwise pass (two double-precision
     * statistics passes, then the affine pass), so the rows go parallel from
     * an eighth of NF_CPU_PAR_MIN elements: Mitra's 56..84-row LayerNorms */
#pragma omp parallel for schedule(static) if (p->m > 1 && NF_CPU_PAR(8 * p->m * p->k))
    for (int64_t r = 0; r < p->m; r++) {
        nf__layer_norm_row(y + r * p->ldy, x + r * p->ldx, g, b, p->k, p->eps);
        if (bits) nf__bf16_bits_row(bits + r * p->k, y + r * p->ldy, p->k);
    }
}

static int nf__cpu_layer_norm(nf_backend * be, const nf_op * op, nf_err * err) {
    nf__cpu_layer_norm_rows(op, NULL);
    return NF_OK;
}

/* ---- LINEAR ---------------------------------------------------------------------- */

/* erf for float arguments, evaluated in double: erf(z) = z * g(z^2) with
 * g(u) = erf(sqrt u) / sqrt u as a degree-20 Chebyshev series on u in [0, 16]
 * (tools/erf-coefficients.py; max relative error 1.3e-11), here in the
 * monomial basis of t = u/8 - 1 (the tool converts the Chebyshev
 * coefficients exactly and rounds once; the terms alternate and shrink, so
 * nothing cancels) and evaluated by Estrin's scheme: a dependency chain of 10
 * operations instead of Clenshaw's 60, the same work. Rounded to float this
 * is the correctly rounded erf except within ~1e-11 of a rounding tie -- at
 * least as exact as libm's erff -- and bitwise the Clenshaw evaluation's on
 * every float (tools/erf-coefficients.py --check compiles both and compares
 * all 2^32 inputs), branch-free so the GELU loop vectorises. Each a + b*t
 * is one fma() (a vector FMA where the ISA has one): on all 2^32 floats the
 * result is bitwise that of the separate multiply and add (checked
 * 2026-12-04 by compiling both; the exp below likewise). |z| >= 4: +-1
 * (erf(4) = 1 - 1.5e-8 rounds to 1.0f). */
static const double nf__erf_mono[21] = {0.3535309956434054,      -0.17657623321423782,    0.13167511686624997,
                                        -0.1077104489097085,     0.090208996192394197,    -0.074727728371029631,
                                        0.059886860207166735,    -0.045766463501636732,   0.033061073767210312,
                                        -0.022466263549072996,   0.014347216537304777,    -0.0086298333945898555,
                                        0.0048612582297797181,   -0.0025306714636356494,  0.0012770717467123595,
                                        -0.00067279817667152046, 0.00029513931753916861,  -7.2461218650001516e-05,
                                        3.2978976208581685e-05,  -3.6683671066324973e-05, 1.2874135134978859e-05};

/* nf__erf_inline in three steps, so that a loop can run the series over
 * doubles alone (eight lanes a vector, no float halves to juggle):
 * nf__erf_arg, the clamped argument as a double; nf__erf_series, z g(z^2);
 * nf__erf_fix, the float rounding and the |x| >= 4 and NaN cases. The range
 * tests are integer tests on the bit pattern: a floating-point compare may
 * trap as far as the compiler knows, and it then refuses to vectorise the
 * selects; the selects are bit blends with all-ones/all-zero masks (a
 * ternary lets the compiler sink the float work into a branch it may not
 * if-convert). */
static inline double nf__erf_arg(float x) {
    uint32_t bits;
    memcpy(&bits, &x, sizeof(bits));
    const uint32_t mag = bits & 0x7fffffffu, sign = bits & 0x80000000u;
    const uint32_t big = (uint32_t) 0 - (uint32_t) (mag >= 0x40800000u); /* |x| >= 4, Inf, NaN */
    const uint32_t cbits = (bits & ~big) | ((sign | 0x40800000u) & big); /* clamp to +-4 */
    float xc;
    memcpy(&xc, &cbits, sizeof(xc));
    return (double) xc;
}

static inline double nf__erf_series(double z) {
    const double u = z * z; /* u in [0, 16] */
    const double t = fma(u, 0.125, -1.0);
    const double t2 = t * t, t4 = t2 * t2, t8 = t4 * t4, t16 = t8 * t8;
    const double * a = nf__erf_mono;
    const double q0 = fma(a[1], t, a[0]), q1 = fma(a[3], t, a[2]), q2 = fma(a[5], t, a[4]), q3 = fma(a[7], t, a[6]),
                 q4 = fma(a[9], t, a[8]), q5 = fma(a[11], t, a[10]), q6 = fma(a[13], t, a[12]),
                 q7 = fma(a[15], t, a[14]), q8 = fma(a[17], t, a[16]), q9 = fma(a[19], t, a[18]);
    const double r0 = fma(q1, t2, q0), r1 = fma(q3, t2, q2), r2 = fma(q5, t2, q4), r3 = fma(q7, t2, q6),
                 r4 = fma(q9, t2, q8);
    const double s0 = fma(r1, t4, r0), s1 = fma(r3, t4, r2), s2 = fma(a[20], t4, r4);
    return z * fma(s2, t16, fma(s1, t8, s0));
}

static inline float nf__erf_fix(float x, double zg) {
    uint32_t bits;
    memcpy(&bits, &x, sizeof(bits));
    const uint32_t mag = bits & 0x7fffffffu, sign = bits & 0x80000000u;
    const uint32_t big = (uint32_t) 0 - (uint32_t) (mag >= 0x40800000u);
    const uint32_t nan = (uint32_t) 0 - (uint32_t) (mag > 0x7f800000u);
    const float r = (float) zg;
    uint32_t rbits;
    memcpy(&rbits, &r, sizeof(rbits));
    rbits = (rbits & ~big) | ((sign | 0x3f800000u) & big); /* +-1.0f */
    rbits = (rbits & ~nan) | ((bits | 0x00400000u) & nan); /* NaN stays (quiet) NaN */
    float out;
    memcpy(&out, &rbits, sizeof(out));
    return out;
}

static inline float nf__erf_inline(float x) { return nf__erf_fix(x, nf__erf_series(nf__erf_arg(x))); }
float nf__erf_f32(float x) { return nf__erf_inline(x); }

/* y[i] = GELU(x[i] + b[i]) over nb <= NF__SERIES_BLOCK values (b may be NULL; x
 * may be y), GELU(v) = 0.5 v (1 + erf(v / sqrt 2)), the exact (erf) form, in
 * float as 0.5f * v * (1.0f + erf(v * 0.70710678f)) with nf__erf_inline's
 * erf. Three passes, so that the erf series runs in a loop of doubles alone:
 * in one loop the compiler takes sixteen floats as two halves of eight
 * doubles and spills the series' registers. Measured in cache (Intel Xeon,
 * AVX-512): 1.18 -> 1.06 ns a value; bitwise the one-pass loop's on all 2^32
 * floats (checked 2026-12-05). */
#define NF__SERIES_BLOCK 64
static inline __attribute__((always_inline)) void nf__gelu_block(float * y, const float * x, const float * b,
                                                                 int64_t nb) {
    double z[NF__SERIES_BLOCK];
    for (int64_t i = 0; i < nb; i++) {
        const float v = b ? x[i] + b[i] : x[i];
        y[i] = v;
        z[i] = nf__erf_arg(v * 0.70710678118654752440f);
    }
    for (int64_t i = 0; i < nb; i++) z[i] = nf__erf_series(z[i]);
    for (int64_t i = 0; i < nb; i++) {
        const float v = y[i];
        y[i] = 0.5f * v * (1.0f + nf__erf_fix(v * 0.70710678118654752440f, z[i]));
    }
}

/* t[o] = GELU(t[o] + bias[o]) over a row (bias may be NULL), compiled for
 * several ISAs and picked at load time: the same IEEE operations in each (no
 * FMA contraction), only the vector width differs. */
__attribute__((target_clones(NF__CPU_CLONES), noinline)) static void nf__gelu_row(float * t, const float * bias,
                                                                                  int64_t n) {
    for (int64_t o = 0; o < n; o += NF__SERIES_BLOCK)
        nf__gelu_block(t + o, t + o, bias ? bias + o : NULL, n - o < NF__SERIES_BLOCK ? n - o : NF__SERIES_BLOCK);
}

/* y[o] = GELU(x[o]) out of place (x and y do not overlap): nf__gelu_row's operations */
__attribute__((target_clones(NF__CPU_CLONES), noinline)) static void nf__gelu_row_to(float * y, const float * x,
                                                                                     int64_t n) {
    for (int64_t o = 0; o < n; o += NF__SERIES_BLOCK)
        nf__gelu_block(y + o, x + o, NULL, n - o < NF__SERIES_BLOCK ? n - o : NF__SERIES_BLOCK);
}

/* t[o] = act(t[o] + bias[o]); y[o] += t[o] when accumulating (t is then a
 * scratch row, else t == y): one pass each, with the roundings of the
 * expression y + act(t + b). */
static void nf__linear_epilogue(float * yr, float * tr, const float * restrict bias, int64_t n, int gelu, int acc) {
    if (gelu == 2) { /* ReLU: t < 0 ? 0 : t (NaN stays NaN) */
        for (int64_t o = 0; o < n; o++) {
            const float t = bias ? tr[o] + bias[o] : tr[o];
            const float r = t < 0.0f ? 0.0f : t;
            if (acc)
                yr[o] = yr[o] + r;
            else
                tr[o] = r;
        }
    } else if (gelu) {
        nf__gelu_row(tr, bias, n);
        if (acc)
            for (int64_t o = 0; o < n; o++) yr[o] = yr[o] + tr[o];
    } else if (acc) {
        if (bias)
            for (int64_t o = 0; o < n; o++) yr[o] = yr[o] + (tr[o] + bias[o]);
        else
            for (int64_t o = 0; o < n; o++) yr[o] = yr[o] + tr[o];
    } else if (bias) {
        for (int64_t o = 0; o < n; o++) tr[o] = tr[o] + bias[o];
    }
}

/* ACT (cpu-train.c): y = act(x) with LINEAR's epilogue code (x may be y) */
void nf__cpu_act_row(float * y, const float * x, int64_t n, int act) {
    if (act == NF_ACT_GELU) {
        const uintptr_t ya = (uintptr_t) y, xa = (uintptr_t) x, nb = (uintptr_t) n * sizeof(float);
        if (ya + nb <= xa || xa + nb <= ya) {
            nf__gelu_row_to(y, x, n);
            return;
        }
        if (y != x) memmove(y, x, (size_t) n * sizeof(float));
        nf__gelu_row(y, NULL, n);
    } else {
        for (int64_t o = 0; o < n; o++) {
            const float t = x[o];
            y[o] = t < 0.0f ? 0.0f : t; /* NaN stays NaN */
        }
    }
}

/* LINEAR splits its rows across the OpenMP threads from this many rows per
 * thread and this many multiply-adds (below, one sgemm call threaded by
 * oneDNN, then the epilogue): measured on 2 threads, the split is faster
 * from 16 rows per thread (16 x 512 x 512: 34 -> 141 GFLOP/s, 336 x 512 x
 * 2048: 155 -> 184), slower for tiny GEMMs (8 x 64 x 64: 67 -> 35) */
#define NF__LINEAR_SPLIT_ROWS 16
#define NF__LINEAR_SPLIT_MACS ((int64_t) 1 << 20)

static int nf__cpu_linear(nf_backend * be, const nf_op * op, nf_err * err) {
    const struct nf_linear_params * p = &op->p.linear;
    if (p->m == 0) return NF_OK;
    const float * x = NF__PTR(&op->src[0]);
    const float * W = NF__PTR(&op->src[1]);
    const float * bias = op->n_src == 3 ? NF__PTR(&op->src[2]) : NULL;
    float * y = NF__PTR(&op->dst[0]);
    const int m = (int) p->m, n = (int) p->n, k = (int) p->k;
    /* t = x·Wᵀ into y directly, or into scratch when accumulating so that the
     * sum is y + (x·Wᵀ + b), the order PyTorch's residual add uses */
    float * t = y;
    int64_t ldt = p->ldy;
    if (p->accumulate) {
        t = nf__backend_host_scratch(be, (size_t) m * (size_t) n * sizeof(float));
        if (!t) return nf__err_set(err, NF_ERR_NOMEM, "LINEAR %s: out of memory", op->label ? op->label : "");
        ldt = n;
    }
    const int gelu = p->act == NF_ACT_GELU ? 1 : p->act == NF_ACT_RELU ? 2 : 0, acc = p->accumulate;
    const int nth = omp_in_parallel() ? 1 : omp_get_max_threads();
    if (nth > 1 && m >= NF__LINEAR_SPLIT_ROWS * nth && (int64_t) m * n * k >= NF__LINEAR_SPLIT_MACS) {
        /* one contiguous block of rows per thread, each a single-threaded
         * sgemm (oneDNN runs sequentially inside a parallel region) and then
         * its epilogue while the block is in cache: oneDNN's own threading
         * of one call reaches ~0.7 of the sgemm rate on n = 512, k = 2048
         * (docs/benchmarks.md "LINEAR split by rows across threads"). The
         * blocks depend only on m and the thread count. */
        int rc_all = NF_OK, th_err = nth;
#pragma omp parallel num_threads(nth)
        {
            const int th = omp_get_thread_num(), nt = omp_get_num_threads();
            const int64_t r0 = (int64_t) m * th / nt, r1 = (int64_t) m * (th + 1) / nt;
            nf_err terr;
            terr.code = NF_OK;
            terr.msg[0] = '\0';
            const int rc = nf__cpu_sgemm(1, r1 - r0, n, k, 1.0f, x + r0 * p->ldx, p->ldx, W, k, t + r0 * ldt, ldt,
                                         &terr);
            if (rc == NF_OK) {
                for (int64_t r = r0; r < r1; r++) nf__linear_epilogue(y + r * p->ldy, t + r * ldt, bias, n, gelu, acc);
            } else {
#pragma omp critical(nf__linear_err)
                if (th < th_err) { /* the lowest failing block's error, whatever the timing */
                    th_err = th;
                    rc_all = rc;
                    if (err) *err = terr;
                }
            }
        }
        return rc_all;
    }
    NF_TRY(nf__cpu_sgemm(1, m, n, k, 1.0f, x, p->ldx, W, k, t, ldt, err));
#pragma omp parallel for schedule(static) if (NF_CPU_PAR(m * n))
    for (int64_t r = 0; r < m; r++) nf__linear_epilogue(y + r * p->ldy, t + r * ldt, bias, n, gelu, acc);
    return NF_OK;
}

/* ---- ATTENTION ------------------------------------------------------------------- */

/* exp for float arguments, evaluated in double: x = n ln2 + r with n the
 * nearest integer to x/ln2 and |r| <= ln2/2 (Cody-Waite: ln2 split in two,
 * n*ln2_hi exact), exp(r) by its Taylor series to degree 13 (truncation
 * 4e-18 relative) in Estrin's scheme, times 2^n built from the exponent
 * bits, rounded to float once: the correctly rounded exp except within
 * ~1e-15 relative of a rounding tie (tests/test-ops-cpu.c compares it with
 * the long double expl and with libm's expf; the reduction and the series
 * in fma(), bitwise the unfused form's on all 2^32 floats), subnormal results and the
 * overflow to Inf included, as the conversion of the double rounds them.
 * Branch-free with integer range tests, like the erf, so the softmax loop
 * vectorises: libm's expf is one call per element. */
/* In three steps, as the erf above (so that a loop can run the double part
 * over doubles alone): nf__exp_arg, the clamped argument; nf__exp_series,
 * exp of it in double; nf__exp_fix, the float rounding and NaN. */
static inline double nf__exp_arg(float x) {
    uint32_t bits;
    memcpy(&bits, &x, sizeof(bits));
    const uint32_t mag = bits & 0x7fffffffu, sign = bits & 0x80000000u;
    /* |x| > 110 (Inf too) is clamped to +-110: exp then still over/underflows
     * float, and n stays small enough for the exponent arithmetic */
    const uint32_t big = (uint32_t) 0 - (uint32_t) (mag > 0x42dc0000u);
    const uint32_t cbits = (bits & ~big) | ((sign | 0x42dc0000u) & big);
    float xc;
    memcpy(&xc, &cbits, sizeof(xc));
    return (double) xc;
}

static inline double nf__exp_series(double xd) {
    const double shifter = 6755399441055744.0; /* 1.5 * 2^52: adding it rounds to an integer */
    const double tn = xd * 1.4426950408889634074 + shifter;
    const double n = tn - shifter;
    const double r = fma(-n, 1.90821492927058770002e-10, fma(-n, 6.93147180369123816490e-01, xd));
    const double r2 = r * r, r4 = r2 * r2, r8 = r4 * r4;
    const double q0 = 1.0 + r, q1 = fma(r, 1.0 / 6, 1.0 / 2), q2 = fma(r, 1.0 / 120, 1.0 / 24),
                 q3 = fma(r, 1.0 / 5040, 1.0 / 720), q4 = fma(r, 1.0 / 362880, 1.0 / 40320),
                 q5 = fma(r, 1.0 / 39916800, 1.0 / 3628800), q6 = fma(r, 1.0 / 6227020800, 1.0 / 479001600);
    const double e0 = fma(q1, r2, q0), e1 = fma(q3, r2, q2), e2 = fma(q5, r2, q4);
    const double er = fma(fma(q6, r4, e2), r8, fma(e1, r4, e0));
    uint64_t tbits, sbits;
    memcpy(&tbits, &tn, sizeof(tbits));
    sbits = (tbits - 0x4338000000000000ull + 1023u) << 52; /* n + 1023 in the exponent field */
    double sc;
    memcpy(&sc, &sbits, sizeof(sc));
    return er * sc;
}

static inline float nf__exp_fix(float x, double e) {
    uint32_t bits;
    memcpy(&bits, &x, sizeof(bits));
    const uint32_t nan = (uint32_t) 0 - (uint32_t) ((bits & 0x7fffffffu) > 0x7f800000u);
    const float res = (float) e;
    uint32_t rbits;
    memcpy(&rbits, &res, sizeof(rbits));
    rbits = (rbits & ~nan) | ((bits | 0x00400000u) & nan); /* NaN stays (quiet) NaN */
    float out;
    memcpy(&out, &rbits, sizeof(out));
    return out;
}

static inline float nf__exp_inline(float x) { return nf__exp_fix(x, nf__exp_series(nf__exp_arg(x))); }
float nf__exp_f32(float x) { return nf__exp_inline(x); }

/* p[j] = exp(p[j] - mx) over a row: nf__exp_f32's values, vectorised, by
 * blocks of 64 in three passes (the double part over doubles alone, as the
 * GELU's erf); bitwise the one-pass loop's on all 2^32 floats (checked
 * 2026-12-05) */
__attribute__((target_clones(NF__CPU_CLONES), noinline)) void nf__cpu_exp_sub_row(float * restrict p, int64_t n,
                                                                                  float mx) {
    double e[NF__SERIES_BLOCK];
    for (int64_t j0 = 0; j0 < n; j0 += NF__SERIES_BLOCK) {
        const int64_t nb = n - j0 < NF__SERIES_BLOCK ? n - j0 : NF__SERIES_BLOCK;
        float * restrict pr = p + j0;
        for (int64_t j = 0; j < nb; j++) {
            pr[j] = pr[j] - mx;
            e[j] = nf__exp_arg(pr[j]);
        }
        for (int64_t j = 0; j < nb; j++) e[j] = nf__exp_series(e[j]);
        for (int64_t j = 0; j < nb; j++) pr[j] = nf__exp_fix(pr[j], e[j]);
    }
}

/* dx = dy * GELU'(x) in ACT_BACKWARD's float order (cpu-train.c), vectorised,
 * the erf and exp series over doubles alone (bitwise the one-pass loop's on
 * all 2^32 floats, checked 2026-12-05); dx may be dy (each chunk is read whole
 * before it is written) */
__attribute__((target_clones(NF__CPU_CLONES), noinline)) void nf__cpu_gelu_backward_row(float * dx, const float * x,
                                                                                        const float * dy, int64_t n) {
    float t[NF__SERIES_BLOCK];
    double ze[NF__SERIES_BLOCK], ee[NF__SERIES_BLOCK]; /* the series passes, as nf__gelu_block's */
    for (int64_t i0 = 0; i0 < n; i0 += NF__SERIES_BLOCK) {
        const int64_t nb = n - i0 < NF__SERIES_BLOCK ? n - i0 : NF__SERIES_BLOCK;
        for (int64_t i = 0; i < nb; i++) {
            const float xv = x[i0 + i];
            ze[i] = nf__erf_arg(xv * 0.70710678f);
            ee[i] = nf__exp_arg(-0.5f * xv * xv);
        }
        for (int64_t i = 0; i < nb; i++) ze[i] = nf__erf_series(ze[i]);
        for (int64_t i = 0; i < nb; i++) ee[i] = nf__exp_series(ee[i]);
        for (int64_t i = 0; i < nb; i++) {
            const float xv = x[i0 + i];
            const float cdf = 0.5f * (1.0f + nf__erf_fix(xv * 0.70710678f, ze[i]));
            const float pdf = nf__exp_fix(-0.5f * xv * xv, ee[i]) * 0.3989422804f;
            t[i] = dy[i0 + i] * (cdf + xv * pdf);
        }
        memcpy(dx + i0, t, (size_t) nb * sizeof(float));
    }
}

/* softmax over a row, in place: the max, exp(s - max), their sum in 16
 * interleaved partial sums (element j into lane j % 16, the lanes then added
 * pairwise: a fixed order, whatever the vector width), times 1/sum. A NaN
 * anywhere makes the whole row NaN. */
__attribute__((target_clones(NF__CPU_CLONES), noinline)) static void nf__softmax_row(float * s, int64_t n) {
    float ls[NF__LANES];
    nf__cpu_exp_sub_row(s, n, nf__cpu_max_row(s, n));
    for (int l = 0; l < NF__LANES; l++) ls[l] = 0.0f;
    int64_t j = 0;
    for (; j + NF__LANES <= n; j += NF__LANES)
        for (int l = 0; l < NF__LANES; l++) ls[l] += s[j + l];
    for (; j < n; j++) ls[j % NF__LANES] += s[j];
    for (int w = NF__LANES / 2; w >= 1; w /= 2)
        for (int l = 0; l < w; l++) ls[l] = ls[l] + ls[l + w];
    const float inv = 1.0f / ls[0];
    for (int64_t i = 0; i < n; i++) s[i] *= inv;
}

/* The small-problem attention kernel (up to NF__TILE_MAXK keys: Mitra's
 * feature attention, SpTransformer's windows and buckets, where a GEMM call
 * costs more than its arithmetic): one (group, head) at a time, four query
 * rows at a time against sixteen keys (scores) or sixteen channels (output)
 * held in registers. Each score is the plain sum over e in order, each
 * output the plain sum over j in order, so the result does not depend on
 * the vector width, the blocking or the machine. */
#define NF__TILE_MAXK 256

/* gh: the (group, head) pair, g * n_heads + h: its dropout mask's rows */
__attribute__((target_clones(NF__CPU_CLONES), noinline)) static void nf__attn_tile_run(const struct nf__attn_tile * t,
                                                                                       const float * q, int64_t q_ss,
                                                                                       const float * k, const float * v,
                                                                                       int64_t kv_ss, float * o,
                                                                                       int64_t o_ss, int64_t gh) {
    const int64_t lq = t->lq, lk = t->lk, E = t->E, lk16 = t->lk16, E16 = t->E16;
    float *s = t->s, *qb = t->qb;
    int64_t v_ss;
    const float * vr = nf__attn_tile_layout(t, k, v, kv_ss, &v_ss);
    for (int64_t i0 = 0; i0 < lq; i0 += NF__TILE_ROWS) {
        const int64_t nr = nf__attn_tile_qblock(t, q, q_ss, i0);
        for (int64_t jb = 0; jb < lk16;) {
            nf__v16 acc[2 * NF__TILE_ROWS];
            const int nv = nf__tile4n(qb, E, t->kt + jb, lk16, E, lk16 - jb, acc);
            for (int c = 0; c < nv; c++, jb += NF__LANES)
                for (int64_t r = 0; r < NF__TILE_ROWS; r++) {
                    const nf__v16 sc = t->scale * acc[c * NF__TILE_ROWS + r];
                    memcpy(s + r * lk16 + jb, &sc, sizeof(sc));
                }
        }
        for (int64_t r = 0; r < nr; r++) nf__softmax_row(s + r * lk16, lk);
        for (int64_t r = 0; t->p->drop_threshold > 0 && r < nr; r++) /* P M */
            nf__cpu_dropout_row(s + r * lk16, s + r * lk16, lk, (gh * lq + i0 + r) * lk, (uint64_t) t->p->drop_seed,
                                t->p->drop_threshold, t->p->drop_scale, 0);
        for (int64_t eb = 0; eb < E16;) {
            nf__v16 acc[2 * NF__TILE_ROWS];
            const int nv = nf__tile4n(s, lk16, vr + eb, v_ss, lk, E16 - eb, acc);
            for (int c = 0; c < nv; c++, eb += NF__LANES) {
                const int64_t ne = E - eb < NF__LANES ? E - eb : NF__LANES;
                for (int64_t r = 0; r < nr; r++)
                    memcpy(o + (i0 + r) * o_ss + eb, &acc[c * NF__TILE_ROWS + r], (size_t) ne * sizeof(float));
            }
        }
    }
}

/* rows of n floats (stride ss) asked into cache ahead of use */
static void nf__prefetch_rows(const float * x, int64_t rows, int64_t ss, int64_t n) {
    for (int64_t r = 0; r < rows; r++) {
        const char * b = (const char *) (x + r * ss);
        for (int64_t off = 0; off < n * (int64_t) sizeof(float); off += 64) __builtin_prefetch(b + off, 0, 3);
        __builtin_prefetch(b + n * (int64_t) sizeof(float) - 1, 0, 3);
    }
}

/* the rows of task gh (group gh / n_heads, head gh % n_heads): q's lq rows,
 * k's and v's lk rows, head_dim floats each; nothing when gh is past the end */
static void nf__attn_prefetch(const struct nf_attention_params * p, const float * q, const float * k, const float * v,
                              int64_t gh) {
    if (gh >= p->n_groups * p->n_heads) return;
    const int64_t g = gh / p->n_heads, h = gh % p->n_heads, E = p->head_dim;
    nf__prefetch_rows(q + g * p->q_gs + h * E, p->lq, p->q_ss, E);
    nf__prefetch_rows(k + g * p->kv_gs + h * E, p->lk, p->kv_ss, E);
    nf__prefetch_rows(v + g * p->kv_gs + h * E, p->lk, p->kv_ss, E);
}

int nf__cpu_attn_tiles(const nf_op * op, nf__attn_tile_fn fn, nf_err * err) {
    const struct nf_attention_params * p = &op->p.attention;
    const float *q = NF__PTR(&op->src[0]), *k = NF__PTR(&op->src[1]), *v = NF__PTR(&op->src[2]);
    float * o = NF__PTR(&op->dst[0]);
    const int64_t G = p->n_groups, H = p->n_heads, E = p->head_dim, lq = p->lq, lk = p->lk;
    if (G == 0 || lq == 0 || lk == 0) return NF_OK;
    const int64_t lk16 = (lk + NF__LANES - 1) / NF__LANES * NF__LANES;
    const int64_t E16 = (E + NF__LANES - 1) / NF__LANES * NF__LANES;
    const size_t nfl = (size_t) (E * lk16 + lk * E16 + NF__TILE_ROWS * lk16 + NF__TILE_ROWS * E);
    int failed = 0;
#pragma omp parallel if (NF_CPU_PAR(G * H * lq * lk * E))
    {
        float * buf = nf__cpu_team_buf(nfl, &failed);
        const struct nf__attn_tile t = {lq,
                                        lk,
                                        E,
                                        lk16,
                                        E16,
                                        p->scale,
                                        buf,
                                        buf + E * lk16,
                                        buf + E * lk16 + lk * E16,
                                        buf + E * lk16 + lk * E16 + NF__TILE_ROWS * lk16,
                                        p};
#pragma omp for schedule(static)
        for (int64_t gh = 0; gh < G * H; gh++) {
            if (!buf) continue;
            const int64_t g = gh / H, h = gh % H;
            nf__attn_prefetch(p, q, k, v, gh + 1); /* the next task's rows, while this one computes */
            fn(&t, q + g * p->q_gs + h * E, p->q_ss, k + g * p->kv_gs + h * E, v + g * p->kv_gs + h * E, p->kv_ss,
               o + g * p->o_gs + h * E, p->o_ss, gh);
        }
        free(buf);
    }
    if (failed) return nf__err_set(err, NF_ERR_NOMEM, "ATTENTION %s: out of memory", op->label ? op->label : "");
    return NF_OK;
}

static int nf__cpu_attention(nf_backend * be, const nf_op * op, nf_err * err) {
    const struct nf_attention_params * p = &op->p.attention;
    const float * q = NF__PTR(&op->src[0]);
    const float * k = NF__PTR(&op->src[1]);
    const float * v = NF__PTR(&op->src[2]);
    float * o = NF__PTR(&op->dst[0]);
    const int64_t G = p->n_groups, H = p->n_heads, E = p->head_dim, lq = p->lq, lk = p->lk;
    if (G == 0 || lq == 0) return NF_OK;
    const float scale = p->scale;

    if (lk <= NF__TILE_MAXK && ((lk < 128 && lq * lk * E <= 64 * 64 * 128) || (lq <= 128 && E <= 64))) {
        /* small problems: one task per (group, head). Measured: Mitra's
         * feature attention (17 x 17 x 128) and SpTransformer's windows (64 x
         * 128..192 x 32) run faster here, Mitra's row attention (16 or 512 query
         * rows x 256 support rows x 128) in the two GEMMs below */
        return nf__cpu_attn_tiles(op, nf__attn_tile_run, err);
    }

    /* large problems (row attention): one task per (group, head, block of
     * query rows), spread over the OpenMP threads; each task's two sgemm
     * calls run single-threaded inside the parallel region (oneDNN's OpenMP
     * build does that by itself), so no reduction is split and the result
     * does not depend on the thread count. */
    const int64_t bq = lq < 128 ? lq : 128;
    const int64_t nblk = (lq + bq - 1) / bq;
    int failed = 0, gemm_failed = 0;
#pragma omp parallel
    {
        float * S = nf__cpu_team_buf((size_t) bq * (size_t) lk, &failed);
#pragma omp for schedule(dynamic, 1)
        for (int64_t task = 0; task < G * H * nblk; task++) {
            if (!S) continue;
            const int64_t g = task / (H * nblk), h = (task / nblk) % H, i0 = (task % nblk) * bq;
            const int64_t nb = lq - i0 < bq ? lq - i0 : bq;
            const float * qb = q + g * p->q_gs + i0 * p->q_ss + h * E;
            const float * kb = k + g * p->kv_gs + h * E;
            const float * vb = v + g * p->kv_gs + h * E;
            float * ob = o + g * p->o_gs + i0 * p->o_ss + h * E;
            nf_err terr;
            terr.code = NF_OK;
            terr.msg[0] = '\0';
            int rc = nf__cpu_sgemm(1, nb, lk, E, scale, qb, p->q_ss, kb, p->kv_ss, S, lk, &terr);
            if (rc == NF_OK) {
                for (int64_t i = 0; i < nb; i++) nf__softmax_row(S + i * lk, lk);
                for (int64_t i = 0; p->drop_threshold > 0 && i < nb; i++) /* P M */
                    nf__cpu_dropout_row(S + i * lk, S + i * lk, lk, ((g * H + h) * lq + i0 + i) * lk,
                                        (uint64_t) p->drop_seed, p->drop_threshold, p->drop_scale, 0);
                rc = nf__cpu_sgemm(0, nb, E, lk, 1.0f, S, lk, vb, p->kv_ss, ob, p->o_ss, &terr);
            }
            if (rc != NF_OK) {
#pragma omp critical(nf__attention_err)
                if (!gemm_failed) {
                    gemm_failed = rc;
                    if (err) *err = terr;
                }
            }
        }
        free(S);
    }
    if (failed)
        return nf__err_set(err, NF_ERR_NOMEM, "ATTENTION: out of memory (%lld x %lld scores)", (long long) bq,
                           (long long) lk);
    if (gemm_failed) return nf__err_prefix(err, "ATTENTION %s", op->label ? op->label : "");
    return NF_OK;
}

/* ---- the kernel table ------------------------------------------------------------------ */

/* Every op has a reference kernel nf__cpu_<name> (no limits, and no list of
 * lacking ops as the accelerators have, nf-impl.h NF_KERNEL_ENTRY): the table
 * is generated from nf-ops.def, so an op without one does not compile. */
const struct nf_kernel nf__cpu_kernels[NF_OP_COUNT] = {
#define NF_OP(NAME, name, SRC, DST, PARAMS, validate, flops) [NF_OP_##NAME] = {nf__cpu_##name, NULL},
#include "nf-ops.def"
};
