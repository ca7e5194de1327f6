/* mitra-episode.c -- which training rows Mitra's fine-tuning feeds, draw for
 * draw as AutoGluon 1.6 picks them from one legacy numpy RandomState (spec
 * shared/specs/finetune.md §1.2-§1.4, §1.8, §4.3; README "Layout"):
 *
 *   permutation(n) / shuffle(a)   numpy's legacy Fisher-Yates (np-random.c);
 *   StratifiedKFold(k, shuffle=True, random_state=rng), fold 0 (sklearn
 *                  _make_test_folds): classes numbered by first appearance in
 *                  y; y_order = the encoded y sorted; allocation[i][c] = the
 *                  rows of class c among y_order[i::k]; per class, in that
 *                  numbering, the fold list [0]*a[0][c] + [1]*a[1][c] + ... is
 *                  rng.shuffle'd and given to the class's rows in row order;
 *   train_test_split(test_size=0.2, random_state=rng) (ShuffleSplit):
 *                  n_test = ceil(0.2 * n) in double, p = permutation(n),
 *                  test = p[:n_test], train = p[n_test:];
 *   the episode    make_dataset_split (stratified 5-fold fold 0 after a
 *                  permutation when every label id 0..max(y) has >= 5 rows,
 *                  else train_test_split; always train_test_split for
 *                  regression), support = the first max_support of the
 *                  train part, query = the first max_query of the test part,
 *                  then DatasetFinetune.__getitem__'s
 *                  rng.choice(n_s, n_s, replace=False) reorders the support;
 *   the internal validation split (no X_val): classification =
 *                  make_stratified_dataset_split on a fresh
 *                  RandomState(get_numpy_seed(seed)); regression = upstream's
 *                  np.random.choice(range(n), int(0.2 n), replace=False) from
 *                  the global, unseeded numpy RNG -- nofall draws it from
 *                  RandomState(get_numpy_seed(seed)) instead (the one
 *                  deviation: upstream's is not reproducible);
 *   the evaluation / predict support: rng.choice(N_sup, min(N_sup, 8192))
 *                  per 1,024-row query chunk.
 *
 * Checked against AutoGluon's own functions (tests/test-mitra-episode.c,
 * tests/fixtures/finetune-episodes, made by reference/episode_fixtures.py). */
#include "tabular-impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void nf__np_shuffle_i64(struct nf_np_rng * r, int64_t * a, int64_t n) {
    for (int64_t i = n - 1; i >= 1; i--) {
        const int64_t j = (int64_t) nf__np_interval(r, (uint64_t) i);
        const int64_t t = a[i];
        a[i] = a[j];
        a[j] = t;
    }
}

void nf__np_permutation(struct nf_np_rng * r, int64_t n, int64_t * out) {
    for (int64_t i = 0; i < n; i++) out[i] = i;
    nf__np_shuffle_i64(r, out, n);
}

static void * nf__ep_alloc(int64_t n, size_t size) { return malloc((size_t) (n > 0 ? n : 1) * size); }

struct nf__ep_first {
    int64_t y, row;
};

static int nf__ep_cmp_y_row(const void * a, const void * b) {
    const struct nf__ep_first *x = a, *y = b;
    if (x->y != y->y) return x->y < y->y ? -1 : 1;
    return x->row < y->row ? -1 : x->row > y->row;
}

static int nf__ep_cmp_row(const void * a, const void * b) {
    const struct nf__ep_first *x = a, *y = b;
    return x->row < y->row ? -1 : x->row > y->row;
}

int nf__sk_stratified_fold0(struct nf_np_rng * r, const int64_t * y, int64_t n, int64_t n_splits, unsigned char * test,
                            nf_err * err) {
    if (n_splits < 2 || n_splits > n)
        return nf__err_set(err, NF_ERR_ARG, "StratifiedKFold: n_splits %lld with %lld rows (2 <= n_splits <= rows)",
                           (long long) n_splits, (long long) n);
    struct nf__ep_first * s = nf__ep_alloc(n, sizeof(*s));
    int64_t *enc = nf__ep_alloc(n, sizeof(int64_t)), *cnt = nf__ep_alloc(n, sizeof(int64_t));
    int64_t * folds = nf__ep_alloc(n, sizeof(int64_t));
    int rc = NF_OK;
    if (!s || !enc || !cnt || !folds) {
        rc = nf__err_set(err, NF_ERR_NOMEM, "StratifiedKFold: out of memory for %lld rows", (long long) n);
        goto out;
    }
    /* the classes: each one's first row, then numbered in that order */
    for (int64_t i = 0; i < n; i++) s[i] = (struct nf__ep_first){y[i], i};
    qsort(s, (size_t) n, sizeof(*s), nf__ep_cmp_y_row);
    int64_t K = 0;
    for (int64_t i = 0; i < n; i++)
        if (i == 0 || s[i].y != s[i - 1].y) s[K++] = s[i];
    qsort(s, (size_t) K, sizeof(*s), nf__ep_cmp_row);
    /* encode every row: its label's number, found by binary search among
     * the classes sorted by label (byval[].row holds the number) */
    struct nf__ep_first * byval = nf__ep_alloc(K, sizeof(*byval));
    if (!byval) {
        rc = nf__err_set(err, NF_ERR_NOMEM, "StratifiedKFold: out of memory for %lld classes", (long long) K);
        goto out;
    }
    for (int64_t k = 0; k < K; k++) byval[k] = (struct nf__ep_first){s[k].y, k};
    qsort(byval, (size_t) K, sizeof(*byval), nf__ep_cmp_y_row);
    for (int64_t k = 0; k < K; k++) cnt[k] = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t lo = 0, hi = K - 1, mid = 0;
        while (lo <= hi) {
            mid = lo + (hi - lo) / 2;
            if (byval[mid].y == y[i]) break;
            if (byval[mid].y < y[i])
                lo = mid + 1;
            else
                hi = mid - 1;
        }
        enc[i] = byval[mid].row;
        cnt[enc[i]]++;
    }
    free(byval);
    int all_small = 1;
    for (int64_t k = 0; k < K; k++)
        if (cnt[k] >= n_splits) all_small = 0;
    if (all_small) {
        rc = nf__err_set(err, NF_ERR_ARG,
                         "StratifiedKFold: n_splits=%lld cannot be greater than the number of members "
                         "in each class",
                         (long long) n_splits);
        goto out;
    }
    /* per class in the numbering: its block [start, start + cnt) of y_order;
     * fold i gets the positions p of the block with p % n_splits == i */
    int64_t start = 0;
    for (int64_t k = 0; k < K; k++) {
        int64_t m = 0;
        for (int64_t i = 0; i < n_splits; i++) {
            /* positions p in [start, start + cnt[k]) with p = i (mod n_splits) */
            const int64_t first = start + ((i - start % n_splits) % n_splits + n_splits) % n_splits;
            const int64_t a = first < start + cnt[k] ? (start + cnt[k] - 1 - first) / n_splits + 1 : 0;
            for (int64_t j = 0; j < a; j++) folds[m++] = i;
        }
        nf__np_shuffle_i64(r, folds, m);
        for (int64_t i = 0, j = 0; i < n; i++)
            if (enc[i] == k) test[i] = folds[j++] == 0;
        start += cnt[k];
    }
out:
    free(s);
    free(enc);
    free(cnt);
    free(folds);
    return rc;
}

int nf__sk_train_test_split(struct nf_np_rng * r, int64_t n, int64_t * perm, int64_t * n_test, nf_err * err) {
    const int64_t t = (int64_t) ceil(0.2 * (double) n);
    if (n < 1 || n - t < 1)
        return nf__err_set(err, NF_ERR_ARG,
                           "train_test_split: with n_samples=%lld and test_size=0.2 the train set would be empty",
                           (long long) n);
    nf__np_permutation(r, n, perm);
    *n_test = t;
    return NF_OK;
}

/* the smallest count among label ids 0..max(y) (np.min(np.bincount(y))):
 * 0 when max(y) >= n, as some id then has no row */
static int nf__ep_min_count(const int64_t * y, int64_t n, int64_t * min_count, nf_err * err) {
    int64_t mx = 0;
    for (int64_t i = 0; i < n; i++) {
        if (y[i] < 0)
            return nf__err_set(err, NF_ERR_INPUT, "class label %lld of row %lld: negative (np.bincount)",
                               (long long) y[i], (long long) i);
        if (y[i] > mx) mx = y[i];
    }
    *min_count = 0;
    if (mx >= n) return NF_OK;
    int64_t * c = calloc((size_t) mx + 1, sizeof(int64_t));
    if (!c) return nf__err_set(err, NF_ERR_NOMEM, "out of memory for %lld label counts", (long long) mx + 1);
    for (int64_t i = 0; i < n; i++) c[y[i]]++;
    *min_count = c[0];
    for (int64_t k = 1; k <= mx; k++)
        if (c[k] < *min_count) *min_count = c[k];
    free(c);
    return NF_OK;
}

/* make_stratified_dataset_split's body after its permutation perm: fold 0 of
 * StratifiedKFold(n_splits) on y[perm], or (min_count < 2)
 * train_test_split on the permuted rows. train / val get row ids (n each) */
static int nf__ep_stratified(struct nf_np_rng * r, const int64_t * y, int64_t n, int64_t max_splits,
                             const int64_t * perm, int64_t min_count, int64_t * train, int64_t * n_train, int64_t * val,
                             int64_t * n_val, nf_err * err) {
    int64_t *yp = nf__ep_alloc(n, sizeof(int64_t)), *p2 = nf__ep_alloc(n, sizeof(int64_t));
    unsigned char * test = nf__ep_alloc(n, 1);
    int rc = NF_OK;
    if (!yp || !p2 || !test) {
        rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory for the split of %lld rows", (long long) n);
        goto out;
    }
    *n_train = *n_val = 0;
    if (n >= 2 && min_count >= 2) {
        int64_t k = max_splits;
        if (n - 1 < k) k = n - 1;
        if (min_count < k) k = min_count;
        if (k < 2) k = 2;
        for (int64_t i = 0; i < n; i++) yp[i] = y[perm[i]];
        rc = nf__sk_stratified_fold0(r, yp, n, k, test, err);
        if (rc != NF_OK) goto out;
        for (int64_t i = 0; i < n; i++) {
            if (test[i])
                val[(*n_val)++] = perm[i];
            else
                train[(*n_train)++] = perm[i];
        }
    } else {
        int64_t t = 0;
        rc = nf__sk_train_test_split(r, n, p2, &t, err);
        if (rc != NF_OK) goto out;
        for (int64_t i = 0; i < n; i++) {
            if (i < t)
                val[(*n_val)++] = perm[p2[i]];
            else
                train[(*n_train)++] = perm[p2[i]];
        }
    }
out:
    free(yp);
    free(p2);
    free(test);
    return rc;
}

void nf__mitra_episode_free(struct nf_mitra_episode * e) {
    if (!e) return;
    free(e->support);
    free(e->query);
    memset(e, 0, sizeof(*e));
}

int nf__mitra_episode(struct nf_np_rng * rng, const int64_t * y_class, int64_t n, int64_t max_support,
                      int64_t max_query, struct nf_mitra_episode * out, nf_err * err) {
    memset(out, 0, sizeof(*out));
    if (n < 2)
        return nf__err_set(err, NF_ERR_ARG, "fine-tuning episode: %lld training rows (at least 2: train_test_split)",
                           (long long) n);
    if (max_support < 1 || max_query < 1)
        return nf__err_set(err, NF_ERR_ARG, "fine-tuning episode: max support %lld, max query %lld (at least 1)",
                           (long long) max_support, (long long) max_query);
    int64_t min_count = 0;
    if (y_class) NF_TRY(nf__ep_min_count(y_class, n, &min_count, err));
    int64_t *perm = nf__ep_alloc(n, sizeof(int64_t)), *sup = nf__ep_alloc(n, sizeof(int64_t));
    int64_t *qry = nf__ep_alloc(n, sizeof(int64_t)), *p2 = nf__ep_alloc(n, sizeof(int64_t));
    int64_t ns = 0, nq = 0;
    int rc = NF_OK;
    if (!perm || !sup || !qry || !p2) {
        rc = nf__err_set(err, NF_ERR_NOMEM, "fine-tuning episode: out of memory for %lld rows", (long long) n);
        goto out;
    }
    if (y_class && min_count >= 5) {
        nf__np_permutation(rng, n, perm);
        rc = nf__ep_stratified(rng, y_class, n, 5, perm, min_count, sup, &ns, qry, &nq, err);
    } else {
        int64_t t = 0;
        rc = nf__sk_train_test_split(rng, n, perm, &t, err);
        if (rc == NF_OK) {
            memcpy(qry, perm, (size_t) t * sizeof(int64_t));
            memcpy(sup, perm + t, (size_t) (n - t) * sizeof(int64_t));
            nq = t;
            ns = n - t;
        }
    }
    if (rc != NF_OK) goto out;
    if (ns > max_support) ns = max_support;
    if (nq > max_query) nq = max_query;
    out->support = nf__ep_alloc(ns, sizeof(int64_t));
    out->query = nf__ep_alloc(nq, sizeof(int64_t));
    if (!out->support || !out->query) {
        nf__mitra_episode_free(out);
        rc = nf__err_set(err, NF_ERR_NOMEM, "fine-tuning episode: out of memory");
        goto out;
    }
    nf__np_permutation(rng, ns, p2); /* rng.choice(n_s, n_s, replace=False) */
    for (int64_t i = 0; i < ns; i++) out->support[i] = sup[p2[i]];
    memcpy(out->query, qry, (size_t) nq * sizeof(int64_t));
    out->n_support = ns;
    out->n_query = nq;
out:
    free(perm);
    free(sup);
    free(qry);
    free(p2);
    return rc;
}

void nf__mitra_split_free(struct nf_mitra_split * s) {
    if (!s) return;
    free(s->train);
    free(s->val);
    memset(s, 0, sizeof(*s));
}

int nf__mitra_split_internal(uint64_t seed, const int64_t * y_class, int64_t n, struct nf_mitra_split * out,
                             nf_err * err) {
    memset(out, 0, sizeof(*out));
    if (n < 1) return nf__err_set(err, NF_ERR_ARG, "validation split: %lld training rows", (long long) n);
    int64_t min_count = 0;
    if (y_class) NF_TRY(nf__ep_min_count(y_class, n, &min_count, err));
    struct nf_np_rng * rng = malloc(sizeof(*rng));
    int64_t * perm = nf__ep_alloc(n, sizeof(int64_t));
    out->train = nf__ep_alloc(n, sizeof(int64_t));
    out->val = nf__ep_alloc(n, sizeof(int64_t));
    int rc = NF_OK;
    if (!rng || !perm || !out->train || !out->val) {
        rc = nf__err_set(err, NF_ERR_NOMEM, "validation split: out of memory for %lld rows", (long long) n);
        goto out;
    }
    nf__np_rng_seed(rng, nf__np_seed(seed));
    nf__np_permutation(rng, n, perm);
    if (y_class) {
        rc = nf__ep_stratified(rng, y_class, n, 5, perm, min_count, out->train, &out->n_train, out->val, &out->n_val,
                               err);
    } else {
        /* np.random.choice(range(n), int(0.2 n), replace=False): the first
         * int(0.2 n) of the permutation; training rows: the rest, ascending */
        const int64_t k = (int64_t) (0.2 * (double) n);
        unsigned char * in_val = calloc((size_t) n, 1);
        if (!in_val) {
            rc = nf__err_set(err, NF_ERR_NOMEM, "validation split: out of memory for %lld rows", (long long) n);
            goto out;
        }
        for (int64_t i = 0; i < k; i++) {
            out->val[i] = perm[i];
            in_val[perm[i]] = 1;
        }
        out->n_val = k;
        for (int64_t i = 0; i < n; i++)
            if (!in_val[i]) out->train[out->n_train++] = i;
        free(in_val);
    }
out:
    if (rc != NF_OK) nf__mitra_split_free(out);
    free(rng);
    free(perm);
    return rc;
}

int nf__mitra_eval_support(struct nf_np_rng * rng, int64_t n_support, int64_t max_support, int64_t * perm, int64_t * k,
                           nf_err * err) {
    if (n_support < 1 || max_support < 1)
        return nf__err_set(err, NF_ERR_ARG, "evaluation support: %lld rows, at most %lld (at least 1 each)",
                           (long long) n_support, (long long) max_support);
    nf__np_permutation(rng, n_support, perm);
    *k = n_support < max_support ? n_support : max_support;
    return NF_OK;
}

int64_t nf__mitra_eval_chunks(int64_t n_query, int64_t max_query) {
    return max_query < 1 || n_query < 1 ? 0 : (n_query + max_query - 1) / max_query;
}
