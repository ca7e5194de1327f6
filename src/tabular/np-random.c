/* np-random.c -- numpy's legacy RandomState, the part Mitra's prediction
 * draws from (spec shared/specs/mitra.md §5.4; README "predict", "More than
 * 8,192 training rows"): AutoGluon's
 *
 *     rng = np.random.RandomState(get_numpy_seed(seed))
 *     support_indices = rng.choice(n_support, size=min(8192, n_support), replace=False)
 *
 * reproduced draw for draw, so nofall picks the same support subsets:
 *
 *   get_numpy_seed   (autogluon.common.utils.random) a seed in [0, 2^32) as
 *                    it is, any other (seed ^ (seed >> 32)) & 0xFFFFFFFF;
 *   RandomState(s)   MT19937 seeded by init_genrand(s) (numpy's
 *                    _legacy_seeding of an int: mt19937_seed);
 *   choice(n, k, replace=False)  permutation(n)[:k] (legacy choice without
 *                    p), permutation(n) = shuffle(arange(n)), the legacy
 *                    shuffle = Fisher-Yates from the end: for i = n-1 .. 1,
 *                    j = random_interval(i), swap x[i], x[j];
 *   random_interval(max)  masked rejection: mask = the smallest 2^b - 1 >=
 *                    max; draw 32-bit outputs (64-bit ones, hi word first,
 *                    when max > 0xFFFFFFFF) & mask until <= max.
 *
 * Checked against numpy 2.4.6's own draws (tests/fixtures/np-random, made by
 * reference/np_random_fixtures.py; tests/test-np-random.c). */
#include "tabular-impl.h"

#include <stdlib.h>

#define NF_MT_N 624
#define NF_MT_M 397

uint32_t nf__np_seed(uint64_t seed) {
    return seed <= 0xFFFFFFFFu ? (uint32_t) seed : (uint32_t) ((seed ^ (seed >> 32)) & 0xFFFFFFFFu);
}

void nf__np_rng_seed(struct nf_np_rng * r, uint32_t seed) {
    uint32_t s = seed;
    for (int i = 0; i < NF_MT_N; i++) {
        r->key[i] = s;
        s = 1812433253u * (s ^ (s >> 30)) + (uint32_t) i + 1u;
    }
    r->pos = NF_MT_N;
}

static void nf__mt_gen(struct nf_np_rng * r) {
    static const uint32_t mag[2] = {0u, 0x9908b0dfu};
    int i;
    uint32_t y;
    for (i = 0; i < NF_MT_N - NF_MT_M; i++) {
        y = (r->key[i] & 0x80000000u) | (r->key[i + 1] & 0x7fffffffu);
        r->key[i] = r->key[i + NF_MT_M] ^ (y >> 1) ^ mag[y & 1u];
    }
    for (; i < NF_MT_N - 1; i++) {
        y = (r->key[i] & 0x80000000u) | (r->key[i + 1] & 0x7fffffffu);
        r->key[i] = r->key[i + (NF_MT_M - NF_MT_N)] ^ (y >> 1) ^ mag[y & 1u];
    }
    y = (r->key[NF_MT_N - 1] & 0x80000000u) | (r->key[0] & 0x7fffffffu);
    r->key[NF_MT_N - 1] = r->key[NF_MT_M - 1] ^ (y >> 1) ^ mag[y & 1u];
    r->pos = 0;
}

uint32_t nf__np_rng_u32(struct nf_np_rng * r) {
    if (r->pos >= NF_MT_N) nf__mt_gen(r);
    uint32_t y = r->key[r->pos++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= y >> 18;
    return y;
}

uint64_t nf__np_interval(struct nf_np_rng * r, uint64_t max) {
    if (max == 0) return 0;
    uint64_t mask = max, v;
    mask |= mask >> 1;
    mask |= mask >> 2;
    mask |= mask >> 4;
    mask |= mask >> 8;
    mask |= mask >> 16;
    mask |= mask >> 32;
    if (max <= 0xFFFFFFFFu) {
        while ((v = (uint64_t) nf__np_rng_u32(r) & mask) > max) {
        }
    } else {
        do {
            const uint64_t hi = nf__np_rng_u32(r);
            v = ((hi << 32) | nf__np_rng_u32(r)) & mask;
        } while (v > max);
    }
    return v;
}

int nf__np_choice(struct nf_np_rng * r, int64_t n, int64_t k, int64_t * perm, int64_t * out) {
    if (n < 1 || k < 0 || k > n) return 0;
    for (int64_t i = 0; i < n; i++) perm[i] = i;
    for (int64_t i = n - 1; i >= 1; i--) {
        const int64_t j = (int64_t) nf__np_interval(r, (uint64_t) i);
        const int64_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    if (out && out != perm)
        for (int64_t i = 0; i < k; i++) out[i] = perm[i];
    return 1;
}

/* np.add.reduce over contiguous float64 (pairwise_sum_DOUBLE: 8 accumulators,
 * blocks of 128), what Series.mean / np.mean / np.sum add up */
double nf__np_sum(const double * a, int64_t n) {
    if (n < 8) {
        double r = 0.;
        for (int64_t i = 0; i < n; i++) r += a[i];
        return r;
    }
    if (n <= 128) {
        double r[8];
        for (int k = 0; k < 8; k++) r[k] = a[k];
        int64_t i;
        for (i = 8; i < n - n % 8; i += 8)
            for (int k = 0; k < 8; k++) r[k] += a[i + k];
        double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; i < n; i++) res += a[i];
        return res;
    }
    int64_t n2 = n / 2;
    n2 -= n2 % 8;
    return nf__np_sum(a, n2) + nf__np_sum(a + n2, n - n2);
}
