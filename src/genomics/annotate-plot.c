/* annotate-plot.c -- one variant drawn as annotate scores it
 * (nofall-plot.h nf_annotate_plot_variant): the window of --fasta around
 * it (POS +- context + 100, as annotate), ref and alt, on the strand of
 * the gene --genes gives (the reverse complement on '-', drawn back in
 * genomic order), one forward of both, acceptor / donor probability at
 * the 201 central positions, ref vs alt. */
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
#include <htslib/faidx.h>

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
static int nf_ap_strand(const char * genes_path, const char * chr, int64_t pos, int protein_coding, int * strand,
                        int * in_gene, nf_err * err) {
    *in_gene = 0;
    *strand = 1;
    if (!genes_path) return NF_OK;
    nf_genes * gs = NULL;
    NF_TRY(nf_genes_load(genes_path, &gs, err));
    char cn[1024];
    if (strncmp(chr, "chr", 3) == 0 || strncmp(chr, "Chr", 3) == 0)
        snprintf(cn, sizeof(cn), "chr%s", chr + 3);
    else
        snprintf(cn, sizeof(cn), "chr%s", chr);
    const int s = nf_genes_strands(gs, nf_genes_has_contig(gs, cn) ? cn : chr, pos, protein_coding);
    nf_genes_free(gs);
    *in_gene = s != 0;
    *strand = s == 2 ? 2 : 1;
    return NF_OK;
}

int nf_annotate_plot_variant(const struct nf_annotate_opts * o, const char * variant, const char * path, nf_err * err) {
    char chr[1024], ref = 0, alt = 0, e[1024];
    int64_t pos = 0;
    if (!o || !o->model || !o->fasta || !variant || !path)
        return nf__err_set(err, NF_ERR_ARG, "--plot-variant needs --model, --fasta and --plot");
    NF_TRY(nf_ap_parse(variant, chr, sizeof(chr), &pos, &ref, &alt, err));
    int in_gene = 0, strand = 1;
    NF_TRY(nf_ap_strand(o->genes, chr, pos, o->protein_coding, &strand, &in_gene, err));
    nf_backend * be = NULL;
    nf_model * m = NULL;
    faidx_t * fai = NULL;
    char * seq = NULL;
    int64_t * tok = NULL;
    float *logits = NULL, *tr = NULL;
    char * svg = NULL;
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
    if (rc == NF_OK && context <= 0) rc = nf__err_set(err, NF_ERR_ARG, "--model: no context_len");
    const int64_t flank = context + 100, L = 2 * flank + 1, rows = L - 2 * context;
    const char * contig = chr;
    char cn[1100];
    snprintf(cn, sizeof(cn), "chr%s", chr);
    if (rc == NF_OK && !faidx_has_seq(fai, contig)) contig = faidx_has_seq(fai, cn) ? cn : NULL;
    if (rc == NF_OK && !contig)
        rc = nf__err_set(err, NF_ERR_ARG, "--plot-variant: contig %s is not in --fasta %s", nf__esc(e, sizeof(e), chr),
                         o->fasta);
    if (rc == NF_OK && (pos - flank < 1 || pos + flank > faidx_seq_len(fai, contig)))
        rc = nf__err_set(err, NF_ERR_ARG, "--plot-variant: the window %lld..%lld is not inside contig %s (length %lld)",
                         (long long) (pos - flank), (long long) (pos + flank), contig,
                         (long long) faidx_seq_len(fai, contig));
    hts_pos_t got = 0;
    if (rc == NF_OK && (!(seq = faidx_fetch_seq64(fai, contig, pos - flank - 1, pos + flank - 1, &got)) || got != L))
        rc = nf__err_set(err, NF_ERR_IO, "--fasta %s: cannot read %s:%lld-%lld", o->fasta, contig,
                         (long long) (pos - flank), (long long) (pos + flank));
    if (rc == NF_OK && (!(tok = malloc((size_t) (2 * L) * sizeof(int64_t))) ||
                        !(logits = malloc((size_t) (2 * rows * 18) * sizeof(float))) ||
                        !(tr = malloc((size_t) (4 * rows) * sizeof(float)))))
        rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    for (int64_t k = 0; rc == NF_OK && k < L; k++) {
        const int id = nf_ap_id(seq[k]);
        if (id < 0)
            rc = nf__err_set(err, NF_ERR_FORMAT, "--fasta %s:%lld is not one of A, C, G, T, N", contig,
                             (long long) (pos - flank + k));
        tok[k] = tok[L + k] = id;
    }
    if (rc == NF_OK) {
        tok[L + flank] = nf_ap_id(alt);
        if (strand == 2) /* reverse complement of both, as annotate scores a '-' gene */
            for (int w = 0; w < 2; w++)
                for (int64_t x = 0, y = L - 1; x <= y; x++, y--) {
                    int64_t *t = tok + w * L, tx = t[x], ty = t[y];
                    t[x] = ty == 4 ? 4 : 3 - ty;
                    t[y] = tx == 4 ? 4 : 3 - tx;
                }
        struct nf_array in = {"tokens", NF_ARRAY_I64, 2, {2, L}, tok};
        rc = nf_model_forward(m, &in, 1, logits, err);
    }
    if (rc == NF_OK) {
        /* softmax over channels 0..2; tr: ref acceptor, ref donor, alt acceptor, alt donor, genomic order */
        for (int w = 0; w < 2; w++)
            for (int64_t i = 0; i < rows; i++) {
                const float * x = logits + (w * rows + i) * 18;
                const double mx = fmax(fmax(x[0], x[1]), x[2]);
                double ex[3], sum = 0.0;
                for (int c = 0; c < 3; c++) sum += (ex[c] = exp((double) x[c] - mx));
                const int64_t g = strand == 2 ? rows - 1 - i : i;
                tr[(2 * w) * rows + g] = (float) (ex[1] / sum);
                tr[(2 * w + 1) * rows + g] = (float) (ex[2] / sum);
            }
        char title[1400], xl[1100];
        snprintf(title, sizeof(title), "%s:%lld %c>%c, %s strand%s", contig, (long long) pos,
                 toupper((unsigned char) seq[flank]), alt, strand == 2 ? "-" : "+", in_gene ? "" : " (no gene)");
        snprintf(xl, sizeof(xl), "%s position (1-based)", contig);
        if (toupper((unsigned char) seq[flank]) != ref)
            snprintf(title + strlen(title), sizeof(title) - strlen(title), "; REF %c differs from the genome", ref);
        svg = nf_plot_variant_svg(title, xl, pos - (rows - 1) / 2, pos, tr, tr + rows, tr + 2 * rows, tr + 3 * rows,
                                  rows, err);
        rc = svg ? nf_plot_write(path, "--plot", svg, err) : err->code;
    }
    nf_free(svg);
    free(tr);
    free(logits);
    free(tok);
    free(seq);
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
