/* mitra-dedupe.c -- AutoGluon's DropDuplicatesFeatureGenerator on the
 * predictor's generated features: a feature equal to an earlier kept one --
 * numeric (0/1 included) by value, NaN equal to NaN; a category by the
 * partition of the rows it makes -- is dropped, the first kept. Each
 * feature's values are hashed as they are compared, and only features with
 * equal hashes are compared, so a wide table is linear in its columns. */
#include "mitra-impl.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* both vectors the same values, NaN where the other has NaN */
static int nf_same_values(const double * a, const double * b, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        if (isnan(a[i]) != isnan(b[i])) return 0;
        if (!isnan(a[i]) && a[i] != b[i]) return 0;
    }
    return 1;
}
/* the same partition of the rows: category codes (-1 = missing) relabelled
 * in first-appearance order on both sides, then compared; codes < n_a, n_b */
static int nf_same_partition(const double * a, int64_t n_a, const double * b, int64_t n_b, int64_t n) {
    int64_t * la = malloc((size_t) (n_a + 1) * sizeof(int64_t));
    int64_t * lb = malloc((size_t) (n_b + 1) * sizeof(int64_t));
    int same = la && lb;
    for (int64_t k = 0; same && k <= n_a; k++) la[k] = -1;
    for (int64_t k = 0; same && k <= n_b; k++) lb[k] = -1;
    int64_t next_a = 0, next_b = 0;
    for (int64_t i = 0; same && i < n; i++) {
        const int64_t ca = (int64_t) a[i] + 1, cb = (int64_t) b[i] + 1;
        if (la[ca] < 0) la[ca] = next_a++;
        if (lb[cb] < 0) lb[cb] = next_b++;
        same = la[ca] == lb[cb];
    }
    free(la);
    free(lb);
    return same;
}

/* a feature's values hashed as nf_same_values / nf_same_partition compare
 * them (NaN one value, -0 = 0; categories relabelled in first-appearance
 * order), its kind (category or not) included; lab: n_cats + 1 scratch */
static uint64_t nf_feat_hash(const struct nf_feat * f, int64_t n, int64_t * lab) {
    const int cat = f->kind == NF_FEAT_CAT;
    uint64_t h = 0xcbf29ce484222325ull ^ (uint64_t) cat;
    if (cat)
        for (int64_t k = 0; k <= f->n_cats; k++) lab[k] = -1;
    int64_t next = 0;
    for (int64_t i = 0; i < n; i++) {
        uint64_t v;
        if (cat) {
            const int64_t c = (int64_t) f->xs[i] + 1;
            if (lab[c] < 0) lab[c] = next++;
            v = (uint64_t) lab[c];
        } else {
            const double x = isnan(f->xs[i]) ? NAN : f->xs[i] == 0 ? 0.0 : f->xs[i];
            memcpy(&v, &x, sizeof(v));
        }
        h = (h ^ v) * 0x100000001b3ull;
        h ^= h >> 29;
    }
    return h;
}

struct nf_feat_key {
    uint64_t h;
    int i;
};
static int nf_feat_key_cmp(const void * a, const void * b) {
    const struct nf_feat_key *x = a, *y = b;
    if (x->h != y->h) return x->h < y->h ? -1 : 1;
    return (x->i > y->i) - (x->i < y->i);
}

/* a feature equal to an earlier kept one is dropped: compared only within
 * equal hashes (sorted by hash, then column), so linear in the features */
int nf__mitra_drop_duplicates(struct nf_mitra * p, int64_t ns, nf_err * err) {
    int64_t max_cats = 0;
    for (int i = 0; i < p->n_feats; i++)
        if (p->feats[i].kind == NF_FEAT_CAT && p->feats[i].n_cats > max_cats) max_cats = p->feats[i].n_cats;
    struct nf_feat_key * keys = malloc((size_t) (p->n_feats + 1) * sizeof(*keys));
    int64_t * lab = malloc((size_t) (max_cats + 1) * sizeof(int64_t));
    if (!keys || !lab) {
        free(keys);
        free(lab);
        return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    }
    int nk = 0;
    for (int i = 0; i < p->n_feats; i++)
        if (!p->feats[i].dropped) keys[nk++] = (struct nf_feat_key){nf_feat_hash(&p->feats[i], ns, lab), i};
    qsort(keys, (size_t) nk, sizeof(*keys), nf_feat_key_cmp);
    for (int g = 0, e; g < nk; g = e) {
        for (e = g + 1; e < nk && keys[e].h == keys[g].h;) e++;
        for (int q = g + 1; q < e; q++) { /* columns in order: each against the kept ones before it */
            struct nf_feat * a = &p->feats[keys[q].i];
            for (int r = g; r < q; r++) {
                const struct nf_feat * b = &p->feats[keys[r].i];
                if (b->dropped || (a->kind == NF_FEAT_CAT) != (b->kind == NF_FEAT_CAT)) continue;
                if (a->kind == NF_FEAT_CAT ? nf_same_partition(a->xs, a->n_cats, b->xs, b->n_cats, ns)
                                           : nf_same_values(a->xs, b->xs, ns)) {
                    a->dropped = "duplicate";
                    break;
                }
            }
        }
    }
    free(keys);
    free(lab);
    return NF_OK;
}
