/* test-mitra-episode.c FIXTURES -- Mitra fine-tuning's episodes and splits
 * (src/tabular/mitra-episode.c) against AutoGluon's own functions
 * (FIXTURES/episodes.json, made by reference/episode_fixtures.py from
 * DatasetFinetuneGenerator, DatasetFinetune and MitraBase._split_data).
 * Per case, exact integer equality of:
 *   1. every permutation / shuffle / choice upstream's RandomState made, in
 *      call order, replayed with nf__np_permutation / nf__np_shuffle_i64 from
 *      RandomState(get_numpy_seed(seed)), and the MT19937 state after them;
 *   2. the API: the episodes and evaluation support orders drawn in
 *      upstream's order from one stream (nf__mitra_episode,
 *      nf__mitra_eval_support; the state after them), the support and query
 *      row ids; the internal validation split's train and val row ids
 *      (nf__mitra_split_internal); upstream's refusals as errors.
 * Arrays longer than the fixture's "big" are compared on their first and last
 * 16 values and sum_j (j + 1) a[j]. Then the refusals of bad arguments. */
#include "tabular/tabular-impl.h"
#include "nf-test.h"
#include "nofall.h"

#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static long long n_arrays = 0;

/* got[0, n) against a fixture array (a list, or {n, head, tail, checksum}) */
static int same_ids(const cJSON * want, const int64_t * got, int64_t n) {
    n_arrays++;
    if (cJSON_IsArray(want)) {
        if (cJSON_GetArraySize(want) != n) return 0;
        int64_t i = 0;
        for (const cJSON * v = want->child; v; v = v->next, i++)
            if (!cJSON_IsNumber(v) || (int64_t) v->valuedouble != got[i]) return 0;
        return 1;
    }
    const cJSON *wn = cJSON_GetObjectItem(want, "n"), *head = cJSON_GetObjectItem(want, "head");
    const cJSON *tail = cJSON_GetObjectItem(want, "tail"), *ck = cJSON_GetObjectItem(want, "checksum");
    if (!cJSON_IsNumber(wn) || (int64_t) wn->valuedouble != n || !cJSON_IsArray(head) || !cJSON_IsArray(tail) ||
        !cJSON_IsNumber(ck) || n < 16)
        return 0;
    int64_t sum = 0;
    for (int64_t j = 0; j < n; j++) sum += (j + 1) * got[j];
    if ((double) sum != ck->valuedouble) return 0;
    for (int j = 0; j < 16; j++)
        if ((int64_t) cJSON_GetArrayItem(head, j)->valuedouble != got[j] ||
            (int64_t) cJSON_GetArrayItem(tail, j)->valuedouble != got[n - 16 + j])
            return 0;
    return 1;
}

static int64_t num(const cJSON * o, const char * k) {
    const cJSON * v = cJSON_GetObjectItem(o, k);
    return cJSON_IsNumber(v) ? (int64_t) v->valuedouble : -1;
}

/* the MT19937 state as the fixture records it: pos and sum (i + 1) key[i] */
static int same_state(const cJSON * end, const struct nf_np_rng * r) {
    int64_t ck = 0;
    for (int i = 0; i < 624; i++) ck += (int64_t) (i + 1) * r->key[i];
    return num(end, "pos") == r->pos && (double) ck == cJSON_GetObjectItem(end, "key_checksum")->valuedouble;
}

/* 1. the logged draws, replayed */
static long long replay_draws(const cJSON * c, const char * name, uint64_t seed, int64_t * buf, int64_t cap) {
    struct nf_np_rng r;
    nf__np_rng_seed(&r, nf__np_seed(seed));
    long long draws = 0;
    for (const cJSON * d = cJSON_GetObjectItem(c, "draws")->child; d; d = d->next, draws++) {
        const char * op = cJSON_GetObjectItem(d, "op")->valuestring;
        const cJSON * out = cJSON_GetObjectItem(d, "out");
        if (strcmp(op, "shuffle") == 0) {
            const cJSON * in = cJSON_GetObjectItem(d, "in");
            const int64_t n = cJSON_GetArraySize(in);
            CHECK(cJSON_IsArray(in) && n <= cap, "%s: draw %lld: shuffle input not a short list", name, draws);
            if (!cJSON_IsArray(in) || n > cap) return draws;
            int64_t i = 0;
            for (const cJSON * v = in->child; v; v = v->next) buf[i++] = (int64_t) v->valuedouble;
            nf__np_shuffle_i64(&r, buf, n);
            CHECK(same_ids(out, buf, n), "%s: draw %lld: shuffle of %lld values differs from numpy's", name, draws,
                  (long long) n);
        } else {
            const int64_t n = num(d, "n"), k = strcmp(op, "choice") == 0 ? num(d, "k") : n;
            CHECK(n >= 0 && n <= cap && k >= 0 && k <= n, "%s: draw %lld: %s n %lld k %lld", name, draws, op,
                  (long long) n, (long long) k);
            if (n < 0 || n > cap || k < 0 || k > n) return draws;
            nf__np_permutation(&r, n, buf);
            CHECK(same_ids(out, buf, k), "%s: draw %lld: %s(%lld, %lld) differs from numpy's", name, draws, op,
                  (long long) n, (long long) k);
        }
    }
    CHECK(same_state(cJSON_GetObjectItem(c, "end"), &r), "%s: the MT19937 state after the draws differs", name);
    return draws;
}

/* 2a. the episodes and evaluation orders of one stream, through the API */
static long long run_episodes(const cJSON * c, const char * name, uint64_t seed, const int64_t * y, int64_t n,
                              int64_t * buf) {
    const int64_t ms = num(c, "max_support"), mq = num(c, "max_query");
    struct nf_np_rng r;
    nf__np_rng_seed(&r, nf__np_seed(seed));
    long long events = 0;
    nf_err err = {0};
    for (const cJSON * e = cJSON_GetObjectItem(c, "events")->child; e; e = e->next, events++) {
        if (strcmp(cJSON_GetObjectItem(e, "ev")->valuestring, "eval") == 0) {
            const cJSON * chunks = cJSON_GetObjectItem(e, "chunks");
            const int64_t nc = nf__mitra_eval_chunks(num(e, "n_query"), mq);
            CHECK(nc == cJSON_GetArraySize(chunks), "%s: event %lld: %lld chunks, upstream %d", name, events,
                  (long long) nc, cJSON_GetArraySize(chunks));
            int64_t ci = 0;
            for (const cJSON * ch = chunks->child; ch; ch = ch->next, ci++) {
                int64_t k = -1;
                CHECK_RC(nf__mitra_eval_support(&r, n, ms, buf, &k, &err), NF_OK, &err);
                CHECK(same_ids(ch, buf, k), "%s: event %lld chunk %lld: support order differs", name, events,
                      (long long) ci);
            }
            continue;
        }
        struct nf_mitra_episode ep;
        const int rc = nf__mitra_episode(&r, y, n, ms, mq, &ep, &err);
        if (cJSON_GetObjectItem(e, "error")) {
            CHECK(rc != NF_OK && ep.support == NULL, "%s: event %lld: upstream raised, nofall did not", name, events);
            break;
        }
        CHECK_RC(rc, NF_OK, &err);
        if (rc != NF_OK) return events;
        CHECK(same_ids(cJSON_GetObjectItem(e, "support"), ep.support, ep.n_support),
              "%s: event %lld: support (%lld rows) differs", name, events, (long long) ep.n_support);
        CHECK(same_ids(cJSON_GetObjectItem(e, "query"), ep.query, ep.n_query),
              "%s: event %lld: query (%lld rows) differs", name, events, (long long) ep.n_query);
        nf__mitra_episode_free(&ep);
        CHECK(ep.support == NULL && ep.n_support == 0, "%s: episode_free", name);
    }
    CHECK(same_state(cJSON_GetObjectItem(c, "end"), &r), "%s: the MT19937 state after the episodes differs", name);
    return events;
}

/* 2b. the internal validation split */
static void run_split(const cJSON * c, const char * name, uint64_t seed, const int64_t * y, int64_t n) {
    struct nf_mitra_split s;
    nf_err err = {0};
    CHECK_RC(nf__mitra_split_internal(seed, y, n, &s, &err), NF_OK, &err);
    CHECK(same_ids(cJSON_GetObjectItem(c, "train"), s.train, s.n_train), "%s: train rows (%lld) differ", name,
          (long long) s.n_train);
    CHECK(same_ids(cJSON_GetObjectItem(c, "val"), s.val, s.n_val), "%s: val rows (%lld) differ", name,
          (long long) s.n_val);
    nf__mitra_split_free(&s);
}

static void refusals(void) {
    struct nf_np_rng r;
    nf__np_rng_seed(&r, 1);
    struct nf_mitra_episode ep;
    struct nf_mitra_split s;
    nf_err err = {0};
    const int64_t y[6] = {0, 1, -1, 1, 0, 1}, y2[4] = {0, 0, 1, 1};
    CHECK_RC(nf__mitra_episode(&r, NULL, 1, 8192, 1024, &ep, &err), NF_ERR_ARG, &err);
    CHECK_RC(nf__mitra_episode(&r, NULL, 10, 0, 1024, &ep, &err), NF_ERR_ARG, &err);
    CHECK_RC(nf__mitra_episode(&r, y, 6, 8192, 1024, &ep, &err), NF_ERR_INPUT, &err);
    CHECK_MSG(&err, "row 2");
    CHECK(ep.support == NULL && ep.query == NULL, "a refused episode holds memory");
    CHECK_RC(nf__mitra_split_internal(0, y2, 1, &s, &err), NF_ERR_ARG, &err); /* train_test_split of 1 row */
    CHECK(s.train == NULL && s.val == NULL, "a refused split holds memory");
    CHECK_RC(nf__mitra_split_internal(0, NULL, 0, &s, &err), NF_ERR_ARG, &err);
    unsigned char t[4];
    CHECK_RC(nf__sk_stratified_fold0(&r, y2, 4, 3, t, &err), NF_ERR_ARG, &err); /* 3 > both class counts */
    CHECK_RC(nf__sk_stratified_fold0(&r, y2, 4, 5, t, &err), NF_ERR_ARG, &err);
    CHECK_RC(nf__sk_stratified_fold0(&r, y2, 4, 2, t, &err), NF_OK, &err);
    CHECK(t[0] + t[1] == 1 && t[2] + t[3] == 1, "2-fold fold 0 takes one row of each class");
    CHECK(nf__mitra_eval_chunks(1025, 1024) == 2 && nf__mitra_eval_chunks(1024, 1024) == 1, "chunk count");
    /* labels above the row count: a label id without rows, the ShuffleSplit path */
    const int64_t big[10] = {0, 0, 0, 0, 0, 1000, 1000, 1000, 1000, 1000};
    CHECK_RC(nf__mitra_episode(&r, big, 10, 8192, 1024, &ep, &err), NF_OK, &err);
    CHECK(ep.n_support == 8 && ep.n_query == 2, "labels {0, 1000}: %lld + %lld rows", (long long) ep.n_support,
          (long long) ep.n_query);
    nf__mitra_episode_free(&ep);
}

int main(int argc, char ** argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test-mitra-episode FIXTURES\n");
        return 2;
    }
    char path[4096];
    snprintf(path, sizeof(path), "%s/episodes.json", argv[1]);
    cJSON * doc = NULL;
    nf_err err = {0};
    CHECK_RC(nf__json_read_file(path, &doc, &err), NF_OK, &err);
    if (!doc) return nf_test_done("mitra-episode");
    enum { CAP = 20000 };
    int64_t *buf = malloc(CAP * sizeof(int64_t)), *y = malloc(CAP * sizeof(int64_t));
    long long cases = 0, draws = 0, events = 0, splits = 0;
    for (const cJSON * c = cJSON_GetObjectItem(doc, "cases")->child; buf && y && c; c = c->next, cases++) {
        const char * name = cJSON_GetObjectItem(c, "name")->valuestring;
        const char * kind = cJSON_GetObjectItem(c, "kind")->valuestring;
        const uint64_t seed = (uint64_t) cJSON_GetObjectItem(c, "seed")->valuedouble;
        const int64_t n = num(c, "n");
        const cJSON * yj = cJSON_GetObjectItem(c, "y");
        CHECK(n >= 0 && n <= CAP && (cJSON_IsNull(yj) || cJSON_GetArraySize(yj) == n), "%s: n %lld", name,
              (long long) n);
        if (n < 0 || n > CAP) continue;
        int64_t i = 0;
        if (!cJSON_IsNull(yj))
            for (const cJSON * v = yj->child; v; v = v->next) y[i++] = (int64_t) v->valuedouble;
        const int64_t * yc = cJSON_IsNull(yj) ? NULL : y;
        draws += replay_draws(c, name, seed, buf, CAP);
        if (strcmp(kind, "episodes") == 0)
            events += run_episodes(c, name, seed, yc, n, buf);
        else {
            run_split(c, name, seed, yc, n);
            splits++;
        }
    }
    CHECK(cases >= 25 && draws >= 100 && events >= 35 && splits >= 10 && n_arrays >= 230,
          "%lld cases, %lld draws, %lld events, %lld splits, %lld arrays", cases, draws, events, splits, n_arrays);
    printf("mitra-episode: %lld cases, %lld draws, %lld episode/eval events, %lld splits, %lld arrays compared with "
           "AutoGluon's\n",
           cases, draws, events, splits, n_arrays);
    cJSON_Delete(doc);
    free(buf);
    free(y);
    refusals();
    return nf_test_done("mitra-episode");
}
