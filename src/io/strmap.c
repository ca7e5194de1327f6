/* strmap.c -- the project's string -> index hash (open addressing, FNV-1a;
 * the keys are borrowed, not copied): the readers' name lookups, the weight
 * loader's and TabSTAR's cells' (core/weights.h nf_namemap). */
#include "nf-io.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t nf__hash(const char * s, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char) s[i]) * 0x100000001b3ull;
    return h;
}

void nf__smap_free(struct nf__smap * m) {
    free(m->k);
    free(m->kl);
    free(m->v);
    memset(m, 0, sizeof(*m));
}

static int nf__smap_rehash(struct nf__smap * m, size_t cap) {
    struct nf__smap n = {calloc(cap, sizeof(char *)), calloc(cap, sizeof(size_t)), calloc(cap, sizeof(int)), cap, 0};
    if (!n.k || !n.kl || !n.v) {
        nf__smap_free(&n);
        return -1;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->k[i]) continue;
        size_t j = nf__hash(m->k[i], m->kl[i]) & (cap - 1);
        while (n.k[j]) j = (j + 1) & (cap - 1);
        n.k[j] = m->k[i];
        n.kl[j] = m->kl[i];
        n.v[j] = m->v[i];
        n.n++;
    }
    nf__smap_free(m);
    *m = n;
    return 0;
}

static int nf__smap_grow(struct nf__smap * m) { return nf__smap_rehash(m, m->cap ? 2 * m->cap : 64); }

int nf__smap_reserve(struct nf__smap * m, size_t n) {
    size_t cap = m->cap ? m->cap : 64;
    while (cap < 2 * (m->n + n)) cap *= 2;
    return cap == m->cap ? 0 : nf__smap_rehash(m, cap);
}

/* -1 absent */
int nf__smap_get(const struct nf__smap * m, const char * s, size_t n) {
    if (!m->cap) return -1;
    for (size_t j = nf__hash(s, n) & (m->cap - 1); m->k[j]; j = (j + 1) & (m->cap - 1)) {
        if (m->kl[j] == n && memcmp(m->k[j], s, n) == 0) return m->v[j];
    }
    return -1;
}

/* 0 added, 1 duplicate, -1 out of memory */
int nf__smap_put(struct nf__smap * m, const char * s, size_t n, int v) {
    if (nf__smap_get(m, s, n) >= 0) return 1;
    if (2 * (m->n + 1) > m->cap && nf__smap_grow(m) != 0) return -1;
    size_t j = nf__hash(s, n) & (m->cap - 1);
    while (m->k[j]) j = (j + 1) & (m->cap - 1);
    m->k[j] = s;
    m->kl[j] = n;
    m->v[j] = v;
    m->n++;
    return 0;
}
