/* annotate-impl.h -- the annotator's state, shared by annotate.c (the stages,
 * the loops, the shard exchange), annotate-score.c (windows, strands, jobs,
 * forwards, scores) and annotate-vcf.c (the output, the report). Built with
 * htslib only. */
#ifndef NF_ANNOTATE_IMPL_H
#define NF_ANNOTATE_IMPL_H

#include "nofall-genomics.h"
#include "nf-impl.h"
#include "io/nf-io.h"

#include <htslib/bgzf.h>
#include <htslib/faidx.h>
#include <htslib/kstring.h>
#include <htslib/vcf.h>
#include <stdio.h>

enum { NF_ANN_CSV, NF_ANN_TSV, NF_ANN_VCF };
/* how the output is written: as is, BGZF-compressed (.gz), BCF (.bcf; bcf_u: uncompressed) */
enum { NF_ANN_PLAIN, NF_ANN_BGZF, NF_ANN_BCF };

/* one scored ALT */
struct nf_ann_alt {
    int skip;      /* -1 scored, else a skip reason */
    int strands;   /* bit 1 '+', bit 2 '-' */
    int pending;   /* jobs not yet run */
    float dsplice; /* max over strands */
    float dtissue[NF_ANNOTATE_TISSUES];
    /* SpliceAI's layout (annotate-score.c), per strand (0 '+', 1 '-'): the
     * deltas DS_AG, DS_AL, DS_DG, DS_DL and their positions relative to POS */
    float sai_ds[2][4];
    int32_t sai_dp[2][4];
    char base;
};

struct nf_ann_rec {
    bcf1_t * b;
    int64_t index; /* 1-based data record number */
    int owner;     /* the rank that scores it (0 unsharded) */
    int n_alt;
    struct nf_ann_alt * alt;
};

/* one strand of one ALT: two windows */
struct nf_ann_job {
    int64_t rec; /* index into the pending records */
    int alt;
    int64_t L;
    int8_t * ref; /* L ids each */
    int8_t * alt_ids;
    int strand;  /* 0 '+', 1 '-' (reverse-complemented) */
    int64_t beg; /* the window's first position (1-based) */
    int64_t pos; /* the variant's */
};

/* --plot-variant (annotate-plot.c): the variant's ref and alt windows and
 * their acceptor / donor tracks, taken from annotate's own forward when one
 * of its jobs is these windows (nf__ann_plot_capture), else computed alone */
struct nf_ann_plot {
    char chr[1024], contig[1100]; /* as given; as in --fasta */
    int64_t pos;
    char ref, alt, genome_ref;
    int strand, in_gene; /* 1 '+', 2 '-'; a gene overlaps */
    int64_t context, flank, L, rows;
    int8_t * ids; /* 2 x L: ref, alt (reverse-complemented on '-') */
    float * tr;   /* 4 x rows, genomic order: ref acceptor, ref donor, alt acceptor, alt donor */
    int have;     /* tr is filled */
    int captured; /* from annotate's forward */
};
int nf__ann_plot_prepare(struct nf_ann_plot * p, const char * variant, const nf_genes * gs, int protein_coding,
                         faidx_t * fai, const char * fasta, int64_t context, nf_err * err);
/* annotate's job (ref, alt: L ids each; pr, pa: their rows x 18 probabilities):
 * taken when it is the plot's windows; 1 if taken */
int nf__ann_plot_capture(struct nf_ann_plot * p, const int8_t * ref, const int8_t * alt, int64_t L, const float * pr,
                         const float * pa);
int nf__ann_plot_forward(struct nf_ann_plot * p, nf_model * m, nf_err * err);
int nf__ann_plot_draw(const struct nf_ann_plot * p, const char * path, nf_err * err);
void nf__ann_plot_free(struct nf_ann_plot * p);

struct nf_annotator {
    nf_annotate_opts o;
    nf_annotate_hooks h;
    double t_start;
    nf_backend * be;
    nf_model * m;
    int64_t context, flank; /* flank = context + 100 */
    faidx_t * fai;
    struct nf_fasta_raw raw; /* the FASTA's raw bytes: each window checked for bytes htslib drops */
    int raw_open;
    nf_genes * genes;
    htsFile * in;
    bcf_hdr_t * hdr;
    int fmt, enc;
    char * out_path; /* the writer's, or NULL */
    FILE * out;      /* NF_ANN_PLAIN */
    BGZF * bgz;      /* NF_ANN_BGZF  */
    htsFile * hout;  /* NF_ANN_BCF   */
    int bcf_u;       /* NF_ANN_BCF uncompressed (-O u) */
    int64_t written; /* records written (the writer): the progress */
    kstring_t ks;
    struct nf_ann_rec * recs;
    int64_t n_recs, cap_recs;
    struct nf_ann_job * jobs;
    int64_t n_jobs, cap_jobs;
    int64_t * tok;
    float *logits, *probs;
    int64_t buf_seqs, buf_L;
    int64_t *lens, *off, *end; /* the exchange's, size entries (sharded) */
    nf_annotate_stats st;
    struct nf_ann_plot * plot; /* --plot-variant, or NULL */
};

double nf__ann_now_ms(void);
int nf__ann_grow(void ** p, int64_t * cap, int64_t need, size_t elem);
const char * nf__ann_where(const nf_annotator * a, const struct nf_ann_rec * r, char * buf, size_t n);
/* annotate-score.c */
/* the GTF's name of chrom (upstream looks genes up under the "chr" name; the
 * name as written when the GTF has no contig of that name); cn: n bytes */
const char * nf__ann_gene_contig(const nf_annotator * a, const char * chrom, char * cn, size_t n);
int nf__ann_record(nf_annotator * a, bcf1_t * b, int64_t index, nf_err * err);
int nf__ann_run_jobs(nf_annotator * a, nf_err * err);
/* the 15 tissue values of one ALT (Y/N flags, or raw) */
void nf__ann_tissue_values(const nf_annotator * a, const struct nf_ann_alt * al, char vals[][40]);
/* annotate-vcf.c */
int nf__ann_open_writer(nf_annotator * a, const char * path, nf_err * err);
int nf__ann_write_header(nf_annotator * a, nf_err * err);
int nf__ann_flush(nf_annotator * a, nf_err * err);
int nf__ann_close_out(nf_annotator * a, int rc, nf_err * err);
/* --write-index against the output's format (nf_annotate_new) */
int nf__ann_check_index(const nf_annotator * a, nf_err * err);
/* one data record into *b: *got 1, or 0 at the end; a malformed one an error naming it */
int nf__ann_read(nf_annotator * a, bcf1_t ** b, int64_t * index, int * got, nf_err * err);
extern const char * const nf__ann_tissues[NF_ANNOTATE_TISSUES];

/* nf_seq_tracks_write, keeping the acceptor / donor probabilities of the
 * first min(B, 8) records for a picture (seq-run.c): keep NULL, or 2 x
 * min(B, 8) x n floats (acceptor rows, then donor rows); *x0: record 0's
 * first position */
int nf__seq_tracks_write_keep(nf_model * m, const nf_seq * seq, const float * logits, const char * strand,
                              const char * dir, float * keep, int64_t * x0, nf_err * err);

#endif
