/* tabstar-fit-pieces.c -- the parts of TabSTAR's fit that need no model,
 * each as upstream computes it (spec finetune.md §3.1, §3.3, §3.4; checked
 * against tabstar 1.1.16 / sklearn / torch by tests/test-tabstar-fit.c with
 * reference/tabstar_fit_fixtures.py's values):
 *
 *   split_to_val   val_size = min(int(0.1 n), 1000), random_state 41:
 *     regression   train_test_split = ShuffleSplit: p = RandomState(41)
 *                  .permutation(n), val = p[:val_size], train = the rest;
 *     binary       RandomState(41).choice of one row of each class (sorted
 *                  order: randint(0, count) = random_interval(count - 1)),
 *                  those two held out, a stratified train_test_split of the
 *                  rest (a fresh RandomState(41)), then the two rows
 *                  appended to the validation part and DataFrame.sample(frac=1,
 *                  random_state=41) = RandomState(41).permutation of it;
 *     multiclass   a stratified train_test_split; when a class has one row
 *                  the singletons are left out of it, test_size = max(val_size,
 *                  classes left), and they join the train part, which is
 *                  then permuted as the binary case's validation part;
 *   StratifiedShuffleSplit (sklearn _iter_indices): classes sorted, each
 *                  class's rows ascending; n_i = _approximate_mode(counts,
 *                  n_train), t_i = _approximate_mode(counts - n_i, n_test);
 *                  per class a permutation(count) picks its first n_i rows
 *                  for train and the next t_i for test; then train and test
 *                  are each permuted;
 *   _approximate_mode  counts / total * n_draws floored; the rest handed out
 *                  by decreasing remainder, ties broken by rng.choice(inds,
 *                  k, replace=False) = inds[permutation(len(inds))[:k]]. */
#include "tabstar-fit.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define NF_TSF_SEED     41
#define NF_TSF_VAL_MAX  1000
#define NF_TSF_VAL_RATE 0.1

static void * nf_tsf_alloc(int64_t n, size_t size) { return calloc((size_t) (n > 0 ? n : 1), size); }

/* _approximate_mode(counts, n_draws, rng) */
static int nf_approx_mode(struct nf_np_rng * r, const int64_t * counts, int64_t K, int64_t n_draws, int64_t * out) {
    double *cont = nf_tsf_alloc(K, sizeof(double)), *fl = nf_tsf_alloc(K, sizeof(double)),
           *rem = nf_tsf_alloc(K, sizeof(double));
    int64_t *inds = nf_tsf_alloc(K, sizeof(int64_t)), *perm = nf_tsf_alloc(K, sizeof(int64_t));
    unsigned char * done = nf_tsf_alloc(K, 1);
    if (!cont || !fl || !rem || !inds || !perm || !done) {
        free(cont), free(fl), free(rem), free(inds), free(perm), free(done);
        return 0;
    }
    int64_t total = 0;
    for (int64_t k = 0; k < K; k++) total += counts[k];
    for (int64_t k = 0; k < K; k++) {
        cont[k] = (double) counts[k] / (double) total * (double) n_draws;
        fl[k] = floor(cont[k]);
        rem[k] = cont[k] - fl[k];
    }
    int64_t need = (int64_t) ((double) n_draws - nf__np_sum(fl, K));
    /* the distinct remainders in decreasing order */
    while (need > 0) {
        double v = -1.0;
        for (int64_t k = 0; k < K; k++)
            if (!done[k] && rem[k] > v) v = rem[k];
        if (v < 0) break;
        int64_t ni = 0;
        for (int64_t k = 0; k < K; k++)
            if (rem[k] == v) {
                inds[ni++] = k;
                done[k] = 1;
            }
        const int64_t add = ni < need ? ni : need;
        nf__np_permutation(r, ni, perm);
        for (int64_t i = 0; i < add; i++) fl[inds[perm[i]]] += 1.0;
        need -= add;
    }
    for (int64_t k = 0; k < K; k++) out[k] = (int64_t) fl[k];
    free(cont), free(fl), free(rem), free(inds), free(perm), free(done);
    return 1;
}

/* train_test_split(rows of ids, test_size=n_test, random_state=41,
 * stratify=y[ids]) over m rows: *train and *test (allocated) hold ids */
static int nf_stratified(const int64_t * y, const int64_t * ids, int64_t m, int64_t n_test, int64_t ** train,
                         int64_t * n_tr, int64_t ** test, int64_t * n_te, nf_err * err) {
    if (n_test <= 0 || n_test >= m)
        return nf__err_set(err, NF_ERR_INPUT,
                           "validation split: test_size=%lld should be positive and smaller than the number of "
                           "samples %lld (sklearn train_test_split)",
                           (long long) n_test, (long long) m);
    int64_t ymax = 0;
    for (int64_t i = 0; i < m; i++)
        if (y[ids[i]] > ymax) ymax = y[ids[i]];
    int64_t * cnt = nf_tsf_alloc(ymax + 1, sizeof(int64_t));
    if (!cnt) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < m; i++) cnt[y[ids[i]]]++;
    /* the present classes, sorted */
    int64_t K = 0;
    for (int64_t c = 0; c <= ymax; c++) K += cnt[c] > 0;
    int64_t *cls = nf_tsf_alloc(K, sizeof(int64_t)), *cc = nf_tsf_alloc(K, sizeof(int64_t)),
            *start = nf_tsf_alloc(K + 1, sizeof(int64_t)), *ni = nf_tsf_alloc(K, sizeof(int64_t)),
            *ti = nf_tsf_alloc(K, sizeof(int64_t)), *rest = nf_tsf_alloc(K, sizeof(int64_t));
    int64_t *byc = nf_tsf_alloc(m, sizeof(int64_t)), *perm = nf_tsf_alloc(m, sizeof(int64_t)),
            *fill = nf_tsf_alloc(K, sizeof(int64_t));
    int64_t *tr = nf_tsf_alloc(m, sizeof(int64_t)), *te = nf_tsf_alloc(m, sizeof(int64_t));
    int rc = NF_OK;
    if (!cls || !cc || !start || !ni || !ti || !rest || !byc || !perm || !fill || !tr || !te) {
        rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
        goto out;
    }
    int64_t *map = cnt, k = 0; /* cnt reused: class id -> position among the present */
    for (int64_t c = 0; c <= ymax; c++)
        if (cnt[c] > 0) {
            cls[k] = c;
            cc[k] = cnt[c];
            map[c] = k++;
        }
    const int64_t n_train = m - n_test;
    for (k = 0; k < K; k++)
        if (cc[k] < 2) {
            rc = nf__err_set(err, NF_ERR_INPUT,
                             "validation split: the least populated class (class id %lld) has only 1 member, which "
                             "is too few for the stratified split (sklearn StratifiedShuffleSplit)",
                             (long long) cls[k]);
            goto out;
        }
    if (n_train < K || n_test < K) {
        rc = nf__err_set(err, NF_ERR_INPUT,
                         "validation split: the %s size %lld should be greater or equal to the number of classes "
                         "%lld (sklearn StratifiedShuffleSplit; upstream raises too)",
                         n_train < K ? "train" : "validation", (long long) (n_train < K ? n_train : n_test),
                         (long long) K);
        goto out;
    }
    start[0] = 0;
    for (k = 0; k < K; k++) start[k + 1] = start[k] + cc[k];
    for (int64_t i = 0; i < m; i++) {
        const int64_t q = map[y[ids[i]]];
        byc[start[q] + fill[q]++] = ids[i];
    }
    struct nf_np_rng r;
    nf__np_rng_seed(&r, NF_TSF_SEED);
    if (!nf_approx_mode(&r, cc, K, n_train, ni)) {
        rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (k = 0; k < K; k++) rest[k] = cc[k] - ni[k];
    if (!nf_approx_mode(&r, rest, K, n_test, ti)) {
        rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
        goto out;
    }
    int64_t a = 0, b = 0;
    for (k = 0; k < K; k++) {
        nf__np_permutation(&r, cc[k], perm);
        for (int64_t i = 0; i < ni[k]; i++) tr[a++] = byc[start[k] + perm[i]];
        for (int64_t i = ni[k]; i < ni[k] + ti[k]; i++) te[b++] = byc[start[k] + perm[i]];
    }
    nf__np_shuffle_i64(&r, tr, a);
    nf__np_shuffle_i64(&r, te, b);
    *train = tr, *n_tr = a, *test = te, *n_te = b;
    tr = te = NULL;
out:
    free(cnt), free(cls), free(cc), free(start), free(ni), free(ti), free(rest), free(byc), free(perm), free(fill);
    free(tr), free(te);
    return rc;
}

/* merge_splits: a ++ b, then DataFrame.sample(frac=1, random_state=41) */
static int64_t * nf_merge(const int64_t * a, int64_t na, const int64_t * b, int64_t nb) {
    int64_t *o = nf_tsf_alloc(na + nb, sizeof(int64_t)), *p = nf_tsf_alloc(na + nb, sizeof(int64_t));
    if (!o || !p) {
        free(o), free(p);
        return NULL;
    }
    int64_t * cat = o;
    memcpy(cat, a, (size_t) na * sizeof(int64_t));
    memcpy(cat + na, b, (size_t) nb * sizeof(int64_t));
    struct nf_np_rng r;
    nf__np_rng_seed(&r, NF_TSF_SEED);
    nf__np_permutation(&r, na + nb, p);
    int64_t * res = nf_tsf_alloc(na + nb, sizeof(int64_t));
    if (res)
        for (int64_t i = 0; i < na + nb; i++) res[i] = cat[p[i]];
    free(o), free(p);
    return res;
}

void nf__tsf_split_free(struct nf_tsf_split * s) {
    free(s->train);
    free(s->val);
    memset(s, 0, sizeof(*s));
}

int nf__tsf_split_to_val(const int64_t * y, int64_t n, struct nf_tsf_split * out, nf_err * err) {
    memset(out, 0, sizeof(*out));
    int64_t val = (int64_t) ((double) n * NF_TSF_VAL_RATE);
    if (val > NF_TSF_VAL_MAX) val = NF_TSF_VAL_MAX;
    if (val <= 0 || val >= n)
        return nf__err_set(err, NF_ERR_INPUT,
                           "validation split: %lld training rows give a validation part of %lld rows "
                           "(min(int(0.1 n), 1000)); upstream's train_test_split refuses it (at least 10 rows). "
                           "Give a validation table (--val VAL.csv; Python: fit(X, y, X_val, y_val)), or predict "
                           "with the weights as they are: --no-fine-tune (Python: fine_tune=False)",
                           (long long) n, (long long) val);
    int64_t * ids = nf_tsf_alloc(n, sizeof(int64_t));
    if (!ids) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    int rc = NF_OK;
    if (!y) { /* ShuffleSplit */
        struct nf_np_rng r;
        nf__np_rng_seed(&r, NF_TSF_SEED);
        nf__np_permutation(&r, n, ids);
        out->val = nf_tsf_alloc(val, sizeof(int64_t));
        out->train = nf_tsf_alloc(n - val, sizeof(int64_t));
        if (!out->val || !out->train) {
            rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
            goto out;
        }
        memcpy(out->val, ids, (size_t) val * sizeof(int64_t));
        memcpy(out->train, ids + val, (size_t) (n - val) * sizeof(int64_t));
        out->n_val = val, out->n_train = n - val;
        goto out;
    }
    int64_t ymax = 0;
    for (int64_t i = 0; i < n; i++) {
        if (y[i] < 0) {
            rc = nf__err_set(err, NF_ERR_ARG, "validation split: class id %lld of row %lld", (long long) y[i],
                             (long long) i);
            goto out;
        }
        if (y[i] > ymax) ymax = y[i];
    }
    int64_t * cnt = nf_tsf_alloc(ymax + 1, sizeof(int64_t));
    if (!cnt) {
        rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
        goto out;
    }
    int64_t K = 0, single = 0;
    for (int64_t i = 0; i < n; i++) cnt[y[i]]++;
    for (int64_t c = 0; c <= ymax; c++) K += cnt[c] > 0, single += cnt[c] == 1;
    int64_t *tr = NULL, *te = NULL, ntr = 0, nte = 0;
    if (K == 2) {
        /* one row of each class held out, RandomState(41).choice */
        struct nf_np_rng r;
        nf__np_rng_seed(&r, NF_TSF_SEED);
        int64_t held[2], h = 0;
        for (int64_t c = 0; c <= ymax && h < 2; c++) {
            if (!cnt[c]) continue;
            const int64_t pick = (int64_t) nf__np_interval(&r, (uint64_t) (cnt[c] - 1));
            for (int64_t i = 0, seen = 0; i < n; i++)
                if (y[i] == c && seen++ == pick) held[h] = i;
            h++;
        }
        int64_t m = 0;
        for (int64_t i = 0; i < n; i++)
            if (i != held[0] && i != held[1]) ids[m++] = i;
        rc = nf_stratified(y, ids, m, val, &tr, &ntr, &te, &nte, err);
        if (rc == NF_OK) {
            out->train = tr, out->n_train = ntr;
            out->val = nf_merge(te, nte, held, 2), out->n_val = nte + 2;
            if (!out->val) rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
            free(te);
        }
    } else if (single > 0) {
        int64_t m = 0, ns = 0;
        int64_t * sg = nf_tsf_alloc(single, sizeof(int64_t));
        if (!sg) {
            free(cnt);
            rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
            goto out;
        }
        for (int64_t i = 0; i < n; i++)
            if (cnt[y[i]] == 1)
                sg[ns++] = i;
            else
                ids[m++] = i;
        const int64_t t = val > K - single ? val : K - single;
        rc = nf_stratified(y, ids, m, t, &tr, &ntr, &te, &nte, err);
        if (rc == NF_OK) {
            out->val = te, out->n_val = nte;
            out->train = nf_merge(tr, ntr, sg, ns), out->n_train = ntr + ns;
            if (!out->train) rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
            free(tr);
        }
        free(sg);
    } else {
        for (int64_t i = 0; i < n; i++) ids[i] = i;
        rc = nf_stratified(y, ids, n, val, &tr, &ntr, &te, &nte, err);
        if (rc == NF_OK) out->train = tr, out->n_train = ntr, out->val = te, out->n_val = nte;
    }
    free(cnt);
out:
    free(ids);
    if (rc != NF_OK) nf__tsf_split_free(out);
    return rc;
}

/* ---- metrics ---------------------------------------------------------------------- */

struct nf_tsf_ix {
    float s;
    int64_t i;
};
static int nf_tsf_desc(const void * a, const void * b) {
    const struct nf_tsf_ix *x = a, *y = b;
    return x->s > y->s ? -1 : x->s < y->s ? 1 : 0;
}

double nf__tsf_roc_auc(const unsigned char * pos, const float * score, int64_t n) {
    int64_t P = 0;
    for (int64_t i = 0; i < n; i++) P += pos[i] != 0;
    if (n < 2 || P == 0 || P == n) return NAN;
    struct nf_tsf_ix * ix = malloc((size_t) n * sizeof(*ix));
    /* thresholds: the distinct scores in decreasing order, tps/fps at each */
    double *tps = malloc((size_t) (n + 1) * sizeof(double)), *fps = malloc((size_t) (n + 1) * sizeof(double));
    double * t = malloc((size_t) (n + 1) * sizeof(double));
    if (!ix || !tps || !fps || !t) {
        free(ix), free(tps), free(fps), free(t);
        return NAN;
    }
    for (int64_t i = 0; i < n; i++) ix[i].s = score[i], ix[i].i = i;
    qsort(ix, (size_t) n, sizeof(*ix), nf_tsf_desc);
    int64_t k = 0, tp = 0;
    for (int64_t i = 0; i < n; i++) {
        tp += pos[ix[i].i] != 0;
        if (i == n - 1 || ix[i + 1].s != ix[i].s) {
            tps[k] = (double) tp;
            fps[k] = (double) (i + 1 - tp);
            k++;
        }
    }
    /* drop_intermediate: keep the ends and the points where the second
     * difference of fps or tps is non-zero */
    if (k > 2) {
        int64_t w = 1;
        double pf = fps[0], pt = tps[0]; /* the original previous point */
        for (int64_t i = 1; i < k - 1; i++) {
            const int keep = (fps[i + 1] - fps[i]) - (fps[i] - pf) != 0 || (tps[i + 1] - tps[i]) - (tps[i] - pt) != 0;
            pf = fps[i], pt = tps[i];
            if (keep) fps[w] = fps[i], tps[w] = tps[i], w++;
        }
        fps[w] = fps[k - 1], tps[w] = tps[k - 1], w++;
        k = w;
    }
    /* (0, 0) first; fpr, tpr; trapezoid = pairwise sum of dx (y1 + y0) / 2 */
    memmove(fps + 1, fps, (size_t) k * sizeof(double));
    memmove(tps + 1, tps, (size_t) k * sizeof(double));
    fps[0] = tps[0] = 0.0;
    k++;
    const double F = fps[k - 1], T = tps[k - 1];
    for (int64_t i = 0; i < k; i++) fps[i] = fps[i] / F, tps[i] = tps[i] / T;
    for (int64_t i = 0; i + 1 < k; i++) t[i] = (fps[i + 1] - fps[i]) * (tps[i + 1] + tps[i]) / 2.0;
    const double auc = nf__np_sum(t, k - 1);
    free(ix), free(tps), free(fps), free(t);
    return auc;
}

double nf__tsf_r2(const double * y, const float * p, int64_t n) {
    double * d = malloc((size_t) (n > 0 ? n : 1) * sizeof(double));
    if (!d || n < 1) {
        free(d);
        return NAN;
    }
    for (int64_t i = 0; i < n; i++) {
        const double e = y[i] - (double) p[i];
        d[i] = e * e;
    }
    const double num = nf__np_sum(d, n);
    const double mean = nf__np_sum(y, n) / (double) n;
    for (int64_t i = 0; i < n; i++) d[i] = (y[i] - mean) * (y[i] - mean);
    const double den = nf__np_sum(d, n);
    free(d);
    if (den == 0.0) return num == 0.0 ? 1.0 : 0.0; /* force_finite */
    return 1.0 - num / den;
}

double nf__tsf_metric(int64_t C, int64_t n, const int64_t * y_class, const double * y_value, const float * pred) {
    if (C == 1) return nf__tsf_r2(y_value, pred, n);
    unsigned char * pos = malloc((size_t) (n > 0 ? n : 1));
    float * col = malloc((size_t) (n > 0 ? n : 1) * sizeof(float));
    double * aucs = malloc((size_t) C * sizeof(double));
    double r = NAN;
    if (pos && col && aucs) {
        if (C == 2) {
            for (int64_t i = 0; i < n; i++) pos[i] = y_class[i] == 1, col[i] = pred[i * 2 + 1];
            r = nf__tsf_roc_auc(pos, col, n);
        } else {
            /* OVR macro; upstream's fallback (a class absent from y) averages
             * the classes present: both are the mean over the classes whose
             * one-vs-rest AUC is defined */
            int64_t k = 0;
            for (int64_t c = 0; c < C; c++) {
                for (int64_t i = 0; i < n; i++) pos[i] = y_class[i] == c, col[i] = pred[i * C + c];
                const double a = nf__tsf_roc_auc(pos, col, n);
                if (!isnan(a)) aucs[k++] = a;
            }
            if (k > 0) r = nf__np_sum(aucs, k) / (double) k;
        }
    }
    free(pos), free(col), free(aucs);
    return r;
}

/* ---- averaging ------------------------------------------------------------------ */

double nf__tsf_threshold(double best_loss) { return best_loss + 0.02 + 0.03 * (best_loss / (best_loss + 0.3)); }

/* torch's float32 sum over the outer dimension of a (k, m) tensor (ATen
 * cpu/SumKernel.cpp): multi_row_sum, a cascade of 4 levels of 2^max(4,
 * ceil(log2 k) / 4) rows; row_sum, the same over 4 interleaved partial
 * sums. vectorized_outer_sum uses multi_row_sum for the columns in full
 * blocks of 4 vectors of 8 floats and row_sum for the rest (checked against
 * torch 2.15's x86 build). */
static float nf_multi_row_sum(const float * const * x, int64_t j, int64_t first, int64_t step, int64_t size) {
    int64_t lp = 0;
    while (((int64_t) 1 << lp) < size) lp++;
    lp = lp / 4 > 4 ? lp / 4 : 4;
    const int64_t lstep = (int64_t) 1 << lp, mask = lstep - 1;
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    int64_t i = 0;
    while (i + lstep <= size) {
        for (int64_t q = 0; q < lstep; q++, i++) acc[0] += x[first + i * step][j];
        for (int l = 1; l < 4; l++) {
            acc[l] += acc[l - 1];
            acc[l - 1] = 0.0f;
            if ((i & (mask << (l * lp))) != 0) break;
        }
    }
    for (; i < size; i++) acc[0] += x[first + i * step][j];
    for (int l = 1; l < 4; l++) acc[0] += acc[l];
    return acc[0];
}

static float nf_row_sum(const float * const * x, int64_t j, int64_t k) {
    const int64_t ilp = k / 4;
    float p[4];
    for (int q = 0; q < 4; q++) p[q] = nf_multi_row_sum(x, j, q, 4, ilp);
    for (int64_t i = ilp * 4; i < k; i++) p[0] += x[i][j];
    for (int q = 1; q < 4; q++) p[0] += p[q];
    return p[0];
}

void nf__tsf_mean_f32(const float * const * x, int k, int64_t m, float * out) {
    const int64_t full = m / 32 * 32;
    for (int64_t j = 0; j < m; j++)
        out[j] = (j < full ? nf_multi_row_sum(x, j, 0, 1, k) : nf_row_sum(x, j, k)) / (float) k;
}

float nf__tsf_val_loss(const float * loss, const int64_t * rows, int n_batches) {
    float total = 0.0f;
    int64_t n = 0;
    for (int b = 0; b < n_batches; b++) {
        total += loss[b] * (float) rows[b];
        n += rows[b];
    }
    return total / (float) n;
}
