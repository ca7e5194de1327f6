/* test-np-random.c FIXTURES -- nofall's copy of numpy's legacy RandomState
 * (src/tabular/np-random.c) against numpy's own draws
 * (tests/fixtures/np-random/choice.txt, made by reference/np_random_fixtures.py):
 * for each case a RandomState(get_numpy_seed(seed)) and several
 * choice(n, min(k, n), replace=False) calls in sequence, each compared on its
 * first and last 8 indices and a checksum of the whole draw; plus the
 * MT19937 reference outputs of init_genrand(5489) and that every draw is a
 * permutation. Then the subsets in use (docs/mitra.md "More than 8,192 training
 * rows"): a predictor on 8,200 training rows, 1,030 test rows (two chunks),
 * two members -- each chunk's logits equal, bit for bit, a direct forward on
 * that chunk with the support the replayed RandomState picks (the fit's 2 x 9
 * draws first); nf_predictor_predict_part of the second chunk alone gives
 * the same rows, zeros elsewhere. */
#include "tabular/tabular-impl.h"
#include "nf-test.h"
#include "nofall.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* a small model's logits through the predictor vs direct forwards */
static void subsets_in_use(void) {
    enum { NS = 8200, NQ = 1030, NE = 2, W = 10 };
    nf_err err = {0};
    const char * mdir = "np-random.tmp-model";
    const char * keys[] = {"dim", "layers", "heads"};
    const char * vals[] = {"8", "1", "1"};
    CHECK_RC(nf_model_gen_weights("mitra", mdir, 3, 3, keys, vals, &err), NF_OK, &err);
    double *xs = malloc(NS * sizeof(double)), *xq = malloc(NQ * sizeof(double));
    const char ** ys = malloc(NS * sizeof(char *));
    int64_t * yi = malloc(NS * sizeof(int64_t));
    float *fx = malloc(NS * sizeof(float)), *sx = malloc(8192 * sizeof(float)), *qx = malloc(NQ * sizeof(float));
    int64_t *sy = malloc(8192 * sizeof(int64_t)), *perm = malloc(NS * sizeof(int64_t));
    float *lg = malloc((size_t) NE * NQ * 2 * sizeof(float)), *lp = malloc((size_t) NE * NQ * 2 * sizeof(float));
    float * direct = malloc((size_t) 1024 * W * sizeof(float));
    double *out = malloc(NQ * 2 * sizeof(double)), *outp = malloc(NQ * 2 * sizeof(double));
    if (!xs || !xq || !ys || !yi || !fx || !sx || !qx || !sy || !perm || !lg || !lp || !direct || !out || !outp) {
        CHECK(0, "out of memory");
        return;
    }
    uint64_t g = 99;
    for (int i = 0; i < NS; i++) {
        g = g * 6364136223846793005ull + 1442695040888963407ull;
        xs[i] = (double) (g >> 40) / 16777216.0 * 4 - 2;
        yi[i] = xs[i] + (double) ((g >> 20) & 1023) / 1024.0 - 0.5 > 0;
        ys[i] = yi[i] ? "b" : "a";
        fx[i] = (float) xs[i];
    }
    for (int i = 0; i < NQ; i++) {
        xq[i] = -2 + 4.0 * i / NQ;
        qx[i] = (float) xq[i];
    }
    nf_table *tr = NULL, *te = NULL;
    CHECK_RC(nf_table_new("train", NS, &tr, &err), NF_OK, &err);
    CHECK_RC(nf_table_add_numeric(tr, "x", xs, 0, &err), NF_OK, &err);
    CHECK_RC(nf_table_add_text(tr, "y", ys, NULL, &err), NF_OK, &err);
    CHECK_RC(nf_table_new("test", NQ, &te, &err), NF_OK, &err);
    CHECK_RC(nf_table_add_numeric(te, "x", xq, 0, &err), NF_OK, &err);
    struct nf_predictor_opts o = {.n_estimators = NE, .seed = 4, .no_mirror = 1};
    nf_predictor * p = NULL;
    nf_backend * be = NULL;
    nf_model * m = NULL;
    CHECK_RC(nf_predictor_fit(tr, "y", &o, &p, &err), NF_OK, &err);
    CHECK_RC(nf_backend_init("cpu", 0, &be, &err), NF_OK, &err);
    if (be) CHECK_RC(nf_model_load(be, mdir, &m, &err), NF_OK, &err);
    if (!p || !m) goto out;
    CHECK_RC(nf_predictor_predict(p, m, te, out, lg, &err), NF_OK, &err);
    struct nf_predict_stats st;
    nf_predictor_last_stats(p, &st);
    CHECK(st.subsets && st.support_rows == 8192 && st.query_chunk == 1024 && st.forwards == NE * 2 &&
              st.rows_begin == 0 && st.rows_end == NQ,
          "stats: subsets %d, support %lld, forwards %lld, rows [%lld, %lld)", st.subsets, (long long) st.support_rows,
          (long long) st.forwards, (long long) st.rows_begin, (long long) st.rows_end);
    struct nf_np_rng r;
    nf__np_rng_seed(&r, nf__np_seed(4));
    for (int d = 0; d < NE * 9; d++) nf__np_choice(&r, NS, 8192, perm, NULL); /* the fit's evaluate */
    int same = 1, distinct = 0;
    int64_t first0 = -1;
    for (int e = 0; e < NE; e++)
        for (int c = 0; c < 2; c++) {
            nf__np_choice(&r, NS, 8192, perm, NULL);
            if (first0 < 0)
                first0 = perm[0];
            else if (perm[0] != first0)
                distinct = 1;
            for (int i = 0; i < 8192; i++) {
                sx[i] = fx[perm[i]];
                sy[i] = yi[perm[i]];
            }
            const int64_t q0 = c * 1024, cq = c ? NQ - 1024 : 1024;
            struct nf_array in[3];
            memset(in, 0, sizeof(in));
            in[0] = (struct nf_array){
                .name = "support_x", .dtype = NF_ARRAY_F32, .ndim = 2, .shape = {8192, 1}, .data = sx};
            in[1] = (struct nf_array){
                .name = "support_y", .dtype = NF_ARRAY_I64, .ndim = 1, .shape = {8192}, .data = sy};
            in[2] = (struct nf_array){
                .name = "query_x", .dtype = NF_ARRAY_F32, .ndim = 2, .shape = {cq, 1}, .data = qx + q0};
            CHECK_RC(nf_model_forward(m, in, 3, direct, &err), NF_OK, &err);
            for (int64_t q = 0; q < cq; q++)
                for (int k = 0; k < 2; k++)
                    if (memcmp(&direct[q * W + k], &lg[((int64_t) e * NQ + q0 + q) * 2 + k], sizeof(float)) != 0)
                        same = 0;
        }
    CHECK(same, "the predictor's chunk logits differ from direct forwards with the replayed subsets");
    CHECK(distinct, "every chunk got the same subset");
    /* the second chunk alone (an MPI shard): the same rows, the rest 0 */
    int64_t r0 = -1, r1 = -1;
    CHECK_RC(nf_predictor_predict_part(p, m, te, 1000, NQ, outp, lp, &r0, &r1, &err), NF_OK, &err);
    CHECK(r0 == 1024 && r1 == NQ, "part rows [%lld, %lld)", (long long) r0, (long long) r1);
    int part_same = 1;
    for (int e = 0; e < NE; e++)
        for (int64_t i = 0; i < NQ * 2; i++) {
            const float want = i >= 1024 * 2 ? lg[e * NQ * 2 + i] : 0.0f;
            if (memcmp(&lp[e * NQ * 2 + i], &want, sizeof(float)) != 0) part_same = 0;
        }
    for (int64_t i = 0; i < NQ * 2; i++)
        if (outp[i] != (i >= 1024 * 2 ? out[i] : 0.0)) part_same = 0;
    CHECK(part_same, "predict_part's rows differ from the whole prediction's");
    nf_predictor_last_stats(p, &st);
    CHECK(st.forwards == NE, "part: %lld forwards", (long long) st.forwards);
    CHECK_RC(nf_predictor_predict_part(p, m, te, 5, NQ + 1, outp, lp, &r0, &r1, &err), NF_ERR_ARG, &err);
out:
    nf_model_free(m);
    nf_backend_free(be);
    nf_predictor_free(p);
    nf_table_free(tr);
    nf_table_free(te);
    free(xs);
    free(xq);
    free(ys);
    free(yi);
    free(fx);
    free(sx);
    free(qx);
    free(sy);
    free(perm);
    free(lg);
    free(lp);
    free(direct);
    free(out);
    free(outp);
}

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
        int got = sscanf(line,
                         "%lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld "
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
            if (perm[j] < 0 || perm[j] >= n || seen[perm[j]])
                is_perm = 0;
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
        CHECK(
            same,
            "seed %lld n %lld k %lld call %lld: indices %lld %lld %lld ... (checksum %lld) vs numpy's %lld %lld %lld ... (%lld)",
            seed, n, k, call, (long long) perm[0], kk > 1 ? (long long) perm[1] : -1LL,
            kk > 2 ? (long long) perm[2] : -1LL, sum, fx[0], fx[1], fx[2], ck);
        draws++;
    }
    fclose(f);
    free(perm);
    CHECK(cases >= 8 && draws >= 20, "%s: %lld cases, %lld draws", path, cases, draws);
    printf("np-random: %lld cases, %lld draws compared with numpy's\n", cases, draws);
    subsets_in_use();
    return nf_test_done("np-random");
}
