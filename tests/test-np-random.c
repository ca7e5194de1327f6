/* test-np-random.c FIXTURES -- nofall's copy of numpy's legacy RandomState
 * (src/tabular/np-random.c) against numpy's own draws
 * (tests/fixtures/np-random/choice.txt, made by reference/np_random_fixtures.py):
 * for each case a RandomState(get_numpy_seed(seed)) and several
 * choice(n, min(k, n), replace=False) calls in sequence, each compared on its
 * first and last 8 indices and a checksum of the whole draw; plus the
 * MT19937 reference outputs of init_genrand(5489) and that every draw is a
 * permutation. */
#include "tabular/tabular-impl.h"
#include "nf-test.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char ** argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test-np-random FIXTURES\n");
        return 2;
    }
    /* MT19937's reference: init_genrand(5489), the 1st and the 10000th output */
    struct nf_np_rng r;
    nf__np_rng_seed(&r, 5489u);
    uint32_t first = nf__np_rng_u32(&r), v = first;
    for (int i = 1; i < 10000; i++) v = nf__np_rng_u32(&r);
    CHECK(first == 3499211612u, "mt19937(5489) first output %u", first);
    CHECK(v == 4123659995u, "mt19937(5489) 10000th output %u", v);
    CHECK(nf__np_seed(17) == 17 && nf__np_seed(4294967295u) == 4294967295u, "get_numpy_seed in range");
    CHECK(nf__np_seed(4294967296ull + 17) == (uint32_t) ((4294967296ull + 17) ^ 1), "get_numpy_seed fold");

    char path[4096];
    snprintf(path, sizeof(path), "%s/choice.txt", argv[1]);
    FILE * f = fopen(path, "r");
    CHECK(f != NULL, "%s: cannot open", path);
    if (!f) return 1;
    char line[1024];
    long long cur_seed = -1, cur_n = -1, cases = 0, draws = 0;
    int64_t * perm = NULL;
    while (fgets(line, sizeof(line), f)) {
        if (line[0] == '#') continue;
        long long seed, n, k, call, fx[16], ck;
        int got = sscanf(line, "%lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld "
                               "%lld %lld %lld %lld",
                         &seed, &n, &k, &call, &fx[0], &fx[1], &fx[2], &fx[3], &fx[4], &fx[5], &fx[6], &fx[7], &fx[8],
                         &fx[9], &fx[10], &fx[11], &fx[12], &fx[13], &fx[14], &fx[15], &ck);
        CHECK(got == 21, "%s: malformed line '%s'", path, line);
        if (got != 21) break;
        if (call == 0) {
            nf__np_rng_seed(&r, nf__np_seed((uint64_t) seed));
            free(perm);
            perm = malloc((size_t) n * sizeof(int64_t));
            cur_seed = seed;
            cur_n = n;
            cases++;
        }
        CHECK(seed == cur_seed && n == cur_n && perm, "%s: a case's draws out of order", path);
        if (!perm) break;
        const int64_t kk = k < n ? k : n;
        CHECK(nf__np_choice(&r, n, kk, perm, NULL), "choice(%lld, %lld)", n, (long long) kk);
        long long sum = 0;
        unsigned char * seen = calloc((size_t) n, 1);
        int is_perm = seen != NULL;
        for (int64_t j = 0; j < n && seen; j++) {
            if (perm[j] < 0 || perm[j] >= n || seen[perm[j]]) is_perm = 0;
            else
                seen[perm[j]] = 1;
        }
        free(seen);
        for (int64_t j = 0; j < kk; j++) sum += (long long) (j + 1) * perm[j];
        int same = sum == ck;
        for (int j = 0; j < 8; j++) {
            if (j < kk && perm[j] != fx[j]) same = 0;
            if (j < kk && perm[kk - (kk < 8 ? kk : 8) + j] != fx[8 + j]) same = 0;
        }
        CHECK(is_perm, "seed %lld n %lld call %lld: not a permutation", seed, n, call);
        CHECK(same, "seed %lld n %lld k %lld call %lld: indices %lld %lld %lld ... (checksum %lld) vs numpy's %lld %lld %lld ... (%lld)",
              seed, n, k, call, (long long) perm[0], kk > 1 ? (long long) perm[1] : -1LL,
              kk > 2 ? (long long) perm[2] : -1LL, sum, fx[0], fx[1], fx[2], ck);
        draws++;
    }
    fclose(f);
    free(perm);
    CHECK(cases >= 8 && draws >= 20, "%s: %lld cases, %lld draws", path, cases, draws);
    printf("np-random: %lld cases, %lld draws compared with numpy's\n", cases, draws);
    return nf_test_done("np-random");
}
