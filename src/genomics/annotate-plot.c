/* annotate-plot.c -- one variant drawn as annotate scores it
 * (nofall-plot.h nf_annotate_plot_variant; annotate's --plot-variant,
 * nf_annotate_plot_prepare / _finish): the window of --fasta around it (POS
 * +- context + 100, as annotate), ref and alt, on the strand of the gene
 * --genes gives (the reverse complement on '-', drawn back in genomic
 * order), acceptor / donor probability at the 201 central positions, ref vs
 * alt. Inside annotate the tracks are taken from the run's own forward when
 * one of its jobs is these two windows (nf__ann_plot_capture: the tokens
 * compared, annotate's softmax), else one forward of both is made. */
#include "nofall-genomics.h"
#include "nofall-plot.h"
#include "nf-impl.h"
#include "io/nf-io.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef NF_HAVE_HTSLIB
#include "annotate-impl.h"

static int nf_ap_id(int c) {
    switch (toupper(c)) {
        case 'A': return 0;
        case 'C': return 1;
        case 'G': return 2;
        case 'T':
        case 'U': return 3;
        case 'N': return 4;
        default: return -1;
    }
}

/* "CHR:POS:REF:ALT" (POS 1-based, REF and ALT one base each) */
static int nf_ap_parse(const char * v, char * chr, size_t n, int64_t * pos, char * ref, char * alt, nf_err * err) {
    char e[256];
    const char * p[3] = {NULL, NULL, NULL};
    const char * end = v + strlen(v);
    const char * q = end;
    for (int k = 2; k >= 0; k--) {
        while (q > v && q[-1] != ':') q--;
        if (q == v) break;
        p[k] = q;
        q--;
    }
    if (!p[0] || p[0] - 1 == v || p[1] - p[0] < 2 || end - p[2] != 1 || p[2] - p[1] != 2 || nf_ap_id(p[1][0]) < 0 ||
        nf_ap_id(p[2][0]) < 0)
        return nf__err_set(err, NF_ERR_ARG, "--plot-variant %s: not CHR:POS:REF:ALT with one-base REF and ALT",
                           nf__esc(e, sizeof(e), v));
    int64_t x = 0;
    for (const char * c = p[0]; c < p[1] - 1; c++) {
        if (*c < '0' || *c > '9' || x > 100000000000LL)
            return nf__err_set(err, NF_ERR_ARG, "--plot-variant %s: POS is not a number", nf__esc(e, sizeof(e), v));
        x = x * 10 + (*c - '0');
    }
    if (x < 1) return nf__err_set(err, NF_ERR_ARG, "--plot-variant %s: POS must be >= 1", nf__esc(e, sizeof(e), v));
    snprintf(chr, n, "%.*s", (int) (p[0] - 1 - v), v);
    *pos = x;
    *ref = (char) toupper(p[1][0]);
    *alt = (char) toupper(p[2][0]);
    return NF_OK;
}

/* the strand annotate would score first: '+' (1) unless only a '-' gene overlaps (2) */
static void nf_ap_strand(const nf_genes * gs, const char * chr, int64_t pos, int protein_coding, int * strand,
                         int * in_gene) {
    *in_gene = 0;
    *strand = 1;
    if (!gs) return;
    char cn[1024];
    if (strncmp(chr, "chr", 3) == 0 || strncmp(chr, "Chr", 3) == 0)
        snprintf(cn, sizeof(cn), "chr%s", chr + 3);
    else
        snprintf(cn, sizeof(cn), "chr%s", chr);
    const int s = nf_genes_strands(gs, nf_genes_has_contig(gs, cn) ? cn : chr, pos, protein_coding);
    *in_gene = s != 0;
    *strand = s == 2 ? 2 : 1;
}

/* the windows of the variant (both 2 x L ids, strand-transformed as annotate's jobs) */
static int nf_ap_windows(struct nf_ann_plot * p, faidx_t * fai, const char * fasta, nf_err * err) {
    char e[1024];
    const char * contig = p->chr;
    char cn[1100];
    snprintf(cn, sizeof(cn), "chr%s", p->chr);
    if (!faidx_has_seq(fai, contig)) contig = faidx_has_seq(fai, cn) ? cn : NULL;
    if (!contig)
        return nf__err_set(err, NF_ERR_ARG, "--plot-variant: contig %s is not in --fasta %s",
                           nf__esc(e, sizeof(e), p->chr), fasta);
    snprintf(p->contig, sizeof(p->contig), "%s", contig);
    const int64_t pos = p->pos, flank = p->flank, L = p->L;
    if (pos - flank < 1 || pos + flank > faidx_seq_len(fai, contig))
        return nf__err_set(
            err, NF_ERR_ARG, "--plot-variant: the window %lld..%lld is not inside contig %s (length %lld)",
            (long long) (pos - flank), (long long) (pos + flank), contig, (long long) faidx_seq_len(fai, contig));
    hts_pos_t got = 0;
    char * seq = faidx_fetch_seq64(fai, contig, pos - flank - 1, pos + flank - 1, &got);
    if (!seq || got != L) {
        free(seq);
        return nf__err_set(err, NF_ERR_IO, "--fasta %s: cannot read %s:%lld-%lld", fasta, contig,
                           (long long) (pos - flank), (long long) (pos + flank));
    }
    if (!(p->ids = malloc((size_t) (2 * L))) || !(p->tr = malloc((size_t) (4 * p->rows) * sizeof(float)))) {
        free(seq);
        return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    }
    for (int64_t k = 0; k < L; k++) {
        const int id = nf_ap_id(seq[k]);
        if (id < 0) {
            free(seq);
            return nf__err_set(err, NF_ERR_FORMAT, "--fasta %s:%lld is not one of A, C, G, T, N", contig,
                               (long long) (pos - flank + k));
        }
        p->ids[k] = p->ids[L + k] = (int8_t) id;
    }
    p->genome_ref = (char) toupper((unsigned char) seq[flank]);
    free(seq);
    p->ids[L + flank] = (int8_t) nf_ap_id(p->alt);
    if (p->strand == 2) /* reverse complement of both, as annotate scores a '-' gene */
        for (int w = 0; w < 2; w++)
            for (int64_t x = 0, y = L - 1; x <= y; x++, y--) {
                int8_t *t = p->ids + w * L, tx = t[x], ty = t[y];
                t[x] = ty == 4 ? 4 : (int8_t) (3 - ty);
                t[y] = tx == 4 ? 4 : (int8_t) (3 - tx);
            }
    return NF_OK;
}

int nf__ann_plot_prepare(struct nf_ann_plot * p, const char * variant, const nf_genes * gs, int protein_coding,
                         faidx_t * fai, const char * fasta, int64_t context, nf_err * err) {
    memset(p, 0, sizeof(*p));
    NF_TRY(nf_ap_parse(variant, p->chr, sizeof(p->chr), &p->pos, &p->ref, &p->alt, err));
    nf_ap_strand(gs, p->chr, p->pos, protein_coding, &p->strand, &p->in_gene);
    if (context <= 0) return nf__err_set(err, NF_ERR_ARG, "--model: no context_len");
    p->context = context;
    p->flank = context + 100;
    p->L = 2 * p->flank + 1;
    p->rows = p->L - 2 * context;
    return nf_ap_windows(p, fai, fasta, err);
}

void nf__ann_plot_free(struct nf_ann_plot * p) {
    free(p->ids);
    free(p->tr);
    p->ids = NULL;
    p->tr = NULL;
}

/* one track pair (w 0 ref, 1 alt) from probabilities (rows x 18: softmax over channels 0..2, as annotate's) */
static void nf_ap_track(struct nf_ann_plot * p, int w, const float * pr) {
    for (int64_t i = 0; i < p->rows; i++) {
        const int64_t g = p->strand == 2 ? p->rows - 1 - i : i; /* genomic order */
        p->tr[(2 * w) * p->rows + g] = pr[i * 18 + 1];
        p->tr[(2 * w + 1) * p->rows + g] = pr[i * 18 + 2];
    }
}

int nf__ann_plot_capture(struct nf_ann_plot * p, const int8_t * ref, const int8_t * alt, int64_t L, const float * pr,
                         const float * pa) {
    if (p->have || L != p->L || memcmp(ref, p->ids, (size_t) L) != 0 || memcmp(alt, p->ids + L, (size_t) L) != 0)
        return 0;
    nf_ap_track(p, 0, pr);
    nf_ap_track(p, 1, pa);
    p->have = p->captured = 1;
    return 1;
}

int nf__ann_plot_forward(struct nf_ann_plot * p, nf_model * m, nf_err * err) {
    const int64_t L = p->L, rows = p->rows;
    int64_t * tok = malloc((size_t) (2 * L) * sizeof(int64_t));
    float * lg = malloc((size_t) (2 * rows * 18) * sizeof(float));
    int rc = tok && lg ? NF_OK : nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    for (int64_t k = 0; rc == NF_OK && k < 2 * L; k++) tok[k] = p->ids[k];
    struct nf_array in = {"tokens", NF_ARRAY_I64, 2, {2, L}, tok};
    if (rc == NF_OK) rc = nf_model_forward(m, &in, 1, lg, err);
    if (rc == NF_OK) {
        /* softmax over channels 0..2 (annotate's arithmetic: nf_ann_probs) */
        for (int64_t r = 0; r < 2 * rows; r++) {
            float * x = lg + r * 18;
            const double mx = fmax(fmax(x[0], x[1]), x[2]);
            double ex[3], sum = 0.0;
            for (int c = 0; c < 3; c++) sum += (ex[c] = exp((double) x[c] - mx));
            for (int c = 0; c < 3; c++) x[c] = (float) (ex[c] / sum);
        }
        nf_ap_track(p, 0, lg);
        nf_ap_track(p, 1, lg + rows * 18);
        p->have = 1;
    }
    free(lg);
    free(tok);
    return rc;
}

int nf__ann_plot_draw(const struct nf_ann_plot * p, const char * path, nf_err * err) {
    char title[1400], xl[1100];
    const int64_t rows = p->rows;
    snprintf(title, sizeof(title), "%s:%lld %c>%c, %s strand%s", p->contig, (long long) p->pos, p->genome_ref, p->alt,
             p->strand == 2 ? "-" : "+", p->in_gene ? "" : " (no gene)");
    snprintf(xl, sizeof(xl), "%s position (1-based)", p->contig);
    if (p->genome_ref != p->ref)
        snprintf(title + strlen(title), sizeof(title) - strlen(title), "; REF %c differs from the genome", p->ref);
    const float * tr = p->tr;
    char * svg = nf_plot_variant_svg(title, xl, p->pos - (rows - 1) / 2, p->pos, tr, tr + rows, tr + 2 * rows,
                                     tr + 3 * rows, rows, err);
    const int rc = svg ? nf_plot_write(path, "--plot", svg, err) : err->code;
    nf_free(svg);
    return rc;
}

int nf_annotate_plot_variant(const struct nf_annotate_opts * o, const char * variant, const char * path, nf_err * err) {
    char chr[1024], ref = 0, alt = 0, e[1024];
    int64_t pos = 0;
    if (!o || !o->model || !o->fasta || !variant || !path)
        return nf__err_set(err, NF_ERR_ARG, "--plot-variant needs --model, --fasta and --plot");
    NF_TRY(nf_ap_parse(variant, chr, sizeof(chr), &pos, &ref, &alt, err)); /* before anything is read */
    nf_genes * gs = NULL;
    if (o->genes) NF_TRY(nf_genes_load(o->genes, &gs, err));
    nf_backend * be = NULL;
    nf_model * m = NULL;
    faidx_t * fai = NULL;
    struct nf_ann_plot p;
    memset(&p, 0, sizeof(p));
    int rc = nf__fai_check(o->fasta, err);
    if (rc == NF_OK && !(fai = fai_load3(o->fasta, NULL, NULL, FAI_CREATE)))
        rc = nf__err_set(err, NF_ERR_IO, "--fasta %s: not a FASTA file htslib can index",
                         nf__esc(e, sizeof(e), o->fasta));
    if (rc == NF_OK) rc = nf_backend_init(o->device ? o->device : "cpu", 0, &be, err);
    if (rc == NF_OK) rc = nf_model_load(be, o->model, &m, err);
    int64_t context = 0;
    struct nf_config_item ci;
    for (int i = 0; rc == NF_OK && nf_model_config_item(m, i, &ci); i++)
        if (strcmp(ci.key, "context_len") == 0) context = ci.num;
    if (rc == NF_OK) rc = nf__ann_plot_prepare(&p, variant, gs, o->protein_coding, fai, o->fasta, context, err);
    if (rc == NF_OK) rc = nf__ann_plot_forward(&p, m, err);
    if (rc == NF_OK) rc = nf__ann_plot_draw(&p, path, err);
    nf__ann_plot_free(&p);
    nf_genes_free(gs);
    if (fai) fai_destroy(fai);
    nf_model_free(m);
    nf_backend_free(be);
    return rc;
}
#else
int nf_annotate_plot_variant(const struct nf_annotate_opts * o, const char * variant, const char * path, nf_err * err) {
    (void) o;
    (void) variant;
    (void) path;
    return nf__err_set(err, NF_ERR_UNSUPPORTED, "annotate: this build has no htslib (apt-get install libhts-dev)");
}
#endif
