/* genes.c -- the gene interval index of annotate (nofall-genomics.h; README "annotate"):
 * the `gene` rows of a GTF (plain, gzip or bgzip; read through htslib's
 * hts_getline) by contig, and the strands of the genes overlapping a
 * position, as upstream's pyensembl `genes_at_locus` gives them (1-based,
 * start <= pos <= end, both ends inclusive). */
#include "nofall-genomics.h"
#include "nf-impl.h"
#include "io/nf-io.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef NF_HAVE_HTSLIB
#include <htslib/hts.h>
#include <htslib/kstring.h>
#endif

struct nf_gene {
    int64_t start, end; /* 1-based, inclusive */
    char strand;        /* '+' or '-' */
    char coding;        /* gene_type / gene_biotype "protein_coding" */
    char * name;        /* gene_name, else gene_id, else "." */
};

struct nf_gene_contig {
    char * name;
    struct nf_gene * g; /* sorted by start */
    int64_t * maxend;   /* maxend[i] = max end of g[0..i] */
    int64_t n, cap;
};

struct nf_genes {
    struct nf_gene_contig * c;
    int64_t n, cap, total;
};

void nf_genes_free(struct nf_genes * gs) {
    if (!gs) return;
    for (int64_t i = 0; i < gs->n; i++) {
        free(gs->c[i].name);
        for (int64_t j = 0; j < gs->c[i].n; j++) free(gs->c[i].g[j].name);
        free(gs->c[i].g);
        free(gs->c[i].maxend);
    }
    free(gs->c);
    free(gs);
}

static struct nf_gene_contig * nf_genes_contig(const struct nf_genes * gs, const char * name) {
    for (int64_t i = 0; i < gs->n; i++)
        if (strcmp(gs->c[i].name, name) == 0) return &gs->c[i];
    return NULL;
}

int nf_genes_has_contig(const struct nf_genes * gs, const char * name) { return nf_genes_contig(gs, name) != NULL; }
int64_t nf_genes_count(const struct nf_genes * gs) { return gs->total; }

static int nf_gene_cmp(const void * a, const void * b) {
    const struct nf_gene *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start ? 1 : 0;
}

/* the value of attribute key in a GTF attribute column (key "value"; ...) */
static int nf_gtf_attr_is(const char * attrs, const char * key, const char * value) {
    const size_t kl = strlen(key), vl = strlen(value);
    for (const char * p = attrs; (p = strstr(p, key)) != NULL; p += kl) {
        if (p != attrs && p[-1] != ' ' && p[-1] != ';' && p[-1] != '\t') continue;
        const char * q = p + kl;
        if (*q != ' ') continue;
        while (*q == ' ') q++;
        if (*q == '"') q++;
        return strncmp(q, value, vl) == 0 && (q[vl] == '"' || q[vl] == ';' || q[vl] == '\0' || q[vl] == ' ');
    }
    return 0;
}

/* the value of attribute key (a fresh string, quotes removed), or NULL */
static char * nf_gtf_attr(const char * attrs, const char * key) {
    const size_t kl = strlen(key);
    for (const char * p = attrs; (p = strstr(p, key)) != NULL; p += kl) {
        if (p != attrs && p[-1] != ' ' && p[-1] != ';' && p[-1] != '\t') continue;
        const char * q = p + kl;
        if (*q != ' ') continue;
        while (*q == ' ') q++;
        const int quoted = *q == '"';
        q += quoted;
        size_t n = 0;
        while (q[n] && (quoted ? q[n] != '"' : q[n] != ';' && q[n] != ' ')) n++;
        if (n == 0) return NULL;
        char * v = malloc(n + 1);
        if (v) {
            memcpy(v, q, n);
            v[n] = '\0';
        }
        return v;
    }
    return NULL;
}

#ifdef NF_HAVE_HTSLIB
/* one GTF line into gs (gene rows only); 0 ok, -1 malformed */
static int nf_gtf_line(struct nf_genes * gs, char * line, int * is_gene) {
    char * f[9];
    int n = 0;
    char * p = line;
    *is_gene = 0;
    while (n < 9) {
        f[n++] = p;
        char * t = strchr(p, '\t');
        if (!t) break;
        *t = '\0';
        p = t + 1;
    }
    if (n < 9) return -1;
    if (strcmp(f[2], "gene") != 0) return 0;
    char *e1, *e2;
    const long long s = strtoll(f[3], &e1, 10), e = strtoll(f[4], &e2, 10);
    if (*e1 || *e2 || e1 == f[3] || e2 == f[4] || s < 1 || e < s) return -1;
    if (strcmp(f[6], "+") != 0 && strcmp(f[6], "-") != 0) return -1;
    *is_gene = 1;
    struct nf_gene_contig * c = nf_genes_contig(gs, f[0]);
    if (!c) {
        if (gs->n == gs->cap) {
            const int64_t nc = gs->cap ? gs->cap * 2 : 32;
            void * q = realloc(gs->c, (size_t) nc * sizeof(*gs->c));
            if (!q) return -2;
            gs->c = q;
            gs->cap = nc;
        }
        c = &gs->c[gs->n];
        memset(c, 0, sizeof(*c));
        if (!(c->name = strdup(f[0]))) return -2;
        gs->n++;
    }
    if (c->n == c->cap) {
        const int64_t nc = c->cap ? c->cap * 2 : 256;
        void * q = realloc(c->g, (size_t) nc * sizeof(*c->g));
        if (!q) return -2;
        c->g = q;
        c->cap = nc;
    }
    struct nf_gene * g = &c->g[c->n++];
    g->start = s;
    g->end = e;
    g->strand = f[6][0];
    g->coding = (char) (nf_gtf_attr_is(f[8], "gene_type", "protein_coding") ||
                        nf_gtf_attr_is(f[8], "gene_biotype", "protein_coding"));
    g->name = nf_gtf_attr(f[8], "gene_name");
    if (!g->name) g->name = nf_gtf_attr(f[8], "gene_id");
    if (!g->name) g->name = strdup(".");
    gs->total++;
    if (!g->name) return -2;
    return 0;
}
#endif

int nf_genes_load(const char * path, struct nf_genes ** out, nf_err * err) {
    *out = NULL;
#ifndef NF_HAVE_HTSLIB
    (void) path;
    return nf__err_set(err, NF_ERR_UNSUPPORTED, "--genes: this build has no htslib (apt-get install libhts-dev)");
#else
    /* htslib's own log echoes names and regions raw (an ESC reaches the
     * terminal) and this htslib has no log callback: silenced, nofall reports
     * every failure itself, escaped (README "Hostile input") */
    hts_set_log_level(HTS_LOG_OFF);
    char e[1024];
    int fd;
    uint64_t size;
    /* a regular file only (README "annotate"): hts_open would block on a FIFO with no writer */
    NF_TRY(nf__open_regular_flag("--genes", path, &fd, &size, err));
    close(fd);
    htsFile * fp = hts_open(path, "r");
    if (!fp) return nf__err_set(err, NF_ERR_IO, "--genes %s: cannot open", nf__esc(e, sizeof(e), path));
    struct nf_genes * gs = calloc(1, sizeof(*gs));
    kstring_t ks = {0, 0, NULL};
    int rc = NF_OK, r;
    int64_t lineno = 0;
    while ((r = hts_getline(fp, '\n', &ks)) >= 0) {
        lineno++;
        if (!gs) break;
        if (ks.l == 0 || ks.s[0] == '#') continue;
        if (ks.l && ks.s[ks.l - 1] == '\r') ks.s[--ks.l] = '\0';
        if (memchr(ks.s, '\0', ks.l)) {
            rc = nf__err_set(err, NF_ERR_FORMAT, "--genes %s line %lld: not a GTF text line (a NUL byte)",
                             nf__esc(e, sizeof(e), path), (long long) lineno);
            break;
        }
        int is_gene;
        const int lr = nf_gtf_line(gs, ks.s, &is_gene);
        if (lr == -2) {
            rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory reading --genes");
            break;
        }
        if (lr < 0) {
            rc = nf__err_set(err, NF_ERR_FORMAT,
                             "--genes %s line %lld: not a GTF line (9 tab-separated columns; a gene row needs "
                             "start <= end, 1-based, and strand + or -)",
                             nf__esc(e, sizeof(e), path), (long long) lineno);
            break;
        }
    }
    if (rc == NF_OK && !gs) rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory reading --genes");
    if (rc == NF_OK && r < -1)
        rc = nf__err_set(err, NF_ERR_IO, "--genes %s: read error after line %lld (a damaged gzip file?)",
                         nf__esc(e, sizeof(e), path), (long long) lineno);
    free(ks.s);
    if (hts_close(fp) != 0 && rc == NF_OK)
        rc = nf__err_set(err, NF_ERR_IO, "--genes %s: read error (a damaged gzip file?)", nf__esc(e, sizeof(e), path));
    if (rc == NF_OK && gs->total == 0)
        rc = nf__err_set(err, NF_ERR_FORMAT, "--genes %s: no `gene` rows (not a GTF gene annotation?)",
                         nf__esc(e, sizeof(e), path));
    for (int64_t i = 0; rc == NF_OK && i < gs->n; i++) {
        struct nf_gene_contig * c = &gs->c[i];
        qsort(c->g, (size_t) c->n, sizeof(*c->g), nf_gene_cmp);
        if (!(c->maxend = malloc((size_t) c->n * sizeof(int64_t)))) {
            rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory reading --genes");
            break;
        }
        for (int64_t j = 0; j < c->n; j++)
            c->maxend[j] = j && c->maxend[j - 1] > c->g[j].end ? c->maxend[j - 1] : c->g[j].end;
    }
    if (rc != NF_OK) {
        nf_genes_free(gs);
        return rc;
    }
    *out = gs;
    return NF_OK;
#endif
}

/* the first gene of c with start > pos (genes are sorted by start) */
static int64_t nf_genes_after(const struct nf_gene_contig * c, int64_t pos) {
    int64_t lo = 0, hi = c->n;
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (c->g[mid].start <= pos)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The strands of the genes on contig overlapping pos (1-based): bit 1 '+',
 * bit 2 '-'; protein_coding: only genes of that type. */
int nf_genes_strands(const struct nf_genes * gs, const char * contig, int64_t pos, int protein_coding) {
    const struct nf_gene_contig * c = nf_genes_contig(gs, contig);
    if (!c || c->n == 0) return 0;
    int mask = 0;
    for (int64_t j = nf_genes_after(c, pos) - 1; j >= 0 && c->maxend[j] >= pos; j--) {
        const struct nf_gene * g = &c->g[j];
        if (g->end < pos || (protein_coding && !g->coding)) continue;
        mask |= g->strand == '+' ? 1 : 2;
        if (mask == 3) break;
    }
    return mask;
}

static int nf_gene_before(const struct nf_gene * a, const struct nf_gene * b) {
    return a->start < b->start || (a->start == b->start && strcmp(a->name, b->name) < 0);
}

/* The genes on contig overlapping pos (1-based), protein_coding: only genes of
 * that type; the first max of them by (start, name) into names / strands ('+' /
 * '-'); the count of all of them is returned. */
int nf_genes_at(const struct nf_genes * gs, const char * contig, int64_t pos, int protein_coding, const char ** names,
                char * strands, int max) {
    const struct nf_gene_contig * c = nf_genes_contig(gs, contig);
    if (!c || c->n == 0 || max <= 0) return 0;
    const struct nf_gene * kept[64];
    const int cap = max < 64 ? max : 64;
    int n = 0, k = 0;
    for (int64_t j = nf_genes_after(c, pos) - 1; j >= 0 && c->maxend[j] >= pos; j--) {
        const struct nf_gene * g = &c->g[j];
        if (g->end < pos || (protein_coding && !g->coding)) continue;
        n++;
        int i = k < cap ? k++ : cap; /* insertion by (start, name); past cap: only when it sorts earlier */
        while (i > 0 && nf_gene_before(g, kept[i - 1])) {
            if (i < cap) kept[i] = kept[i - 1];
            i--;
        }
        if (i < cap) kept[i] = g;
    }
    for (int i = 0; i < k; i++) {
        names[i] = kept[i]->name;
        strands[i] = kept[i]->strand;
    }
    return n;
}
