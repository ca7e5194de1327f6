/* tabstar-train-cache.c -- the text cache of TabSTAR's training step: with
 * dropout off, text layers 0..NF_TAB_TRAIN_BERT-1 are a fixed function of a
 * string's token ids, so their output (every token's row, which layer
 * NF_TAB_TRAIN_BERT attends over) is computed once per fit and kept on the
 * device (spec finetune.md §3.5: "their layer-5 output per unique string can
 * be cached across the whole fit"). Keyed by the token ids (a host hash
 * table); rows are appended until the buffer is full, after which a batch
 * with uncached strings runs those layers for the whole batch again. */
#include "tabstar-train-impl.h"

#include <stdlib.h>
#include <string.h>

static uint64_t nf__tt_hash(const int32_t * ids, int32_t len) {
    uint64_t h = 1469598103934665603ull ^ (uint64_t) len;
    for (int32_t i = 0; i < len; i++) {
        h ^= (uint32_t) ids[i];
        h *= 1099511628211ull;
    }
    return h ^ (h >> 29);
}

int64_t nf__tt_cache_find(const struct nf_tab_train * t, const int32_t * ids, int32_t len) {
    if (!t->n_cent) return -1;
    const uint64_t h = nf__tt_hash(ids, len), mask = (uint64_t) t->n_cent - 1;
    for (uint64_t i = h & mask;; i = (i + 1) & mask) {
        const struct nf__tt_cent * e = &t->cent[i];
        if (!e->ids) return -1;
        if (e->h == h && e->len == len && memcmp(e->ids, ids, (size_t) len * sizeof(int32_t)) == 0) return e->row;
    }
}

static void nf__tt_put(struct nf__tt_cent * tab, int64_t n, struct nf__tt_cent e) {
    const uint64_t mask = (uint64_t) n - 1;
    uint64_t i = e.h & mask;
    while (tab[i].ids) i = (i + 1) & mask;
    tab[i] = e;
}

int nf__tt_cache_add(struct nf_tab_train * t, const int32_t * ids, int32_t len, int64_t row, nf_err * err) {
    if (2 * (t->n_cached + 1) > t->n_cent) {
        const int64_t n = t->n_cent ? 2 * t->n_cent : 1024;
        struct nf__tt_cent * tab = calloc((size_t) n, sizeof(*tab));
        if (!tab) return nf__err_set(err, NF_ERR_NOMEM, "out of memory (text cache)");
        for (int64_t i = 0; i < t->n_cent; i++)
            if (t->cent[i].ids) nf__tt_put(tab, n, t->cent[i]);
        free(t->cent);
        t->cent = tab;
        t->n_cent = n;
    }
    struct nf__tt_cent e = {nf__tt_hash(ids, len), row, len, malloc((size_t) len * sizeof(int32_t))};
    if (!e.ids) return nf__err_set(err, NF_ERR_NOMEM, "out of memory (text cache)");
    memcpy(e.ids, ids, (size_t) len * sizeof(int32_t));
    nf__tt_put(t->cent, t->n_cent, e);
    t->n_cached++;
    return NF_OK;
}

void nf__tt_cache_clear(struct nf_tab_train * t) {
    for (int64_t i = 0; i < t->n_cent; i++) {
        free(t->cent[i].ids);
        t->cent[i].ids = NULL;
    }
    t->n_cached = 0;
    t->cache_used = 0;
}

void nf__tt_cache_free(struct nf_tab_train * t) {
    nf__tt_cache_clear(t);
    free(t->cent);
    t->cent = NULL;
    t->n_cent = 0;
    nf__workspace_release(&t->cache_mem);
    t->cache_rows = 0;
}

int nf__tab_train_text_cache(struct nf_tab_train * t, int64_t max_bytes, nf_err * err) {
    nf__tt_cache_free(t);
    if (max_bytes < 0) return nf__err_set(err, NF_ERR_ARG, "text cache: %lld bytes", (long long) max_bytes);
    int64_t rows = max_bytes / (NF_TAB_D * (int64_t) sizeof(float));
    if (rows > INT32_MAX / 2) rows = INT32_MAX / 2;
    if (rows < 1) return NF_OK;
    const int64_t n = rows * NF_TAB_D;
    NF_TRY(nf__workspace_tensor(&t->cache_mem, t->m->be, &t->cache, NF_F32, 1, &n, "train.text_cache", err));
    t->cache_rows = rows;
    return NF_OK;
}

int64_t nf__tab_train_text_cached(const struct nf_tab_train * t) { return t->n_cached; }

void nf__tab_train_text_cache_rows(struct nf_tab_train * t, int64_t min_rows) {
    t->min_rows = min_rows > 0 ? min_rows : 0;
}
