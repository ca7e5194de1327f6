/* annotate.c -- `annotate` in libnofall-genomics (nofall-genomics.h; README
 * "annotate"): score the SNVs of a VCF/BCF against a reference genome with a
 * SpTransformer model (annotate-score.c), write them (annotate-vcf.c). The
 * stages (new, open, load, run, close) and the loops: one process writes the
 * records as their batch finishes; a sharded run (the CLI's MPI layer,
 * through nf_annotate_hooks) goes chunk by chunk. Nothing is printed:
 * warnings and progress go to the hooks. */
#include "nofall-genomics.h"
#include "nofall-outputs.h"
#include "nf-impl.h"
#include "io/nf-io.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <time.h>

const char * const nf__ann_tissues[NF_ANNOTATE_TISSUES] = {
    "Adipose Tissue", "Blood",  "Blood Vessel", "Brain",           "Colon", "Heart",  "Kidney", "Liver",
    "Lung",           "Muscle", "Nerve",        "Small Intestine", "Skin",  "Spleen", "Stomach"};
static const char * const nf__ann_skip_names[NF_ANNOTATE_SKIP_N] = {"contig_name_over_6_characters", "not_snv",
                                                                    "no_alt", "alt_star"};

const char * nf_annotate_tissue(int t) { return t >= 0 && t < NF_ANNOTATE_TISSUES ? nf__ann_tissues[t] : NULL; }
const char * nf_annotate_skip_name(int r) { return r >= 0 && r < NF_ANNOTATE_SKIP_N ? nf__ann_skip_names[r] : NULL; }

void nf_annotate_opts_init(nf_annotate_opts * o) {
    memset(o, 0, sizeof(*o));
    o->device = "cpu";
    o->batch = 16;
}

const char * nf_annotate_index_suffix(const nf_annotate_opts * o) {
    return !o                                        ? NULL
           : o->write_index == NF_ANNOTATE_INDEX_CSI ? ".csi"
           : o->write_index == NF_ANNOTATE_INDEX_TBI ? ".tbi"
                                                     : NULL;
}

int nf_genomics_has_htslib(void) {
#ifdef NF_HAVE_HTSLIB
    return 1;
#else
    return 0;
#endif
}

#ifndef NF_HAVE_HTSLIB
static int nf__ann_no_htslib(nf_err * err) {
    return nf__err_set(err, NF_ERR_UNSUPPORTED,
                       "annotate: this build has no htslib (apt-get install libhts-dev, then rebuild)");
}
int nf_annotate_new(const nf_annotate_opts * o, const nf_annotate_hooks * h, nf_annotator ** out, nf_err * err) {
    (void) o;
    (void) h;
    *out = NULL;
    return nf__ann_no_htslib(err);
}
int nf_annotate_open(nf_annotator * a, const char * out_path, nf_err * err) {
    (void) a;
    (void) out_path;
    return nf__ann_no_htslib(err);
}
int nf_annotate_load(nf_annotator * a, nf_err * err) {
    (void) a;
    return nf__ann_no_htslib(err);
}
int nf_annotate_run(nf_annotator * a, nf_err * err) {
    (void) a;
    return nf__ann_no_htslib(err);
}
int nf_annotate_close(nf_annotator * a, nf_err * err) {
    (void) a;
    return nf__ann_no_htslib(err);
}
int nf_annotate_write_index(nf_annotator * a, const char * index_path, nf_err * err) {
    (void) a;
    (void) index_path;
    return nf__ann_no_htslib(err);
}
int nf_annotate_plot_prepare(nf_annotator * a, const char * variant, nf_err * err) {
    (void) a;
    (void) variant;
    return nf__ann_no_htslib(err);
}
int nf_annotate_plot_finish(nf_annotator * a, const char * path, int * from_run, nf_err * err) {
    (void) a;
    (void) path;
    if (from_run) *from_run = 0;
    return nf__ann_no_htslib(err);
}
void nf_annotate_get_stats(const nf_annotator * a, nf_annotate_stats * s) {
    (void) a;
    memset(s, 0, sizeof(*s));
}
char * nf_annotate_report_json(const nf_annotator * a, nf_err * err) {
    (void) a;
    nf__ann_no_htslib(err);
    return NULL;
}
void nf_annotate_free(nf_annotator * a) { (void) a; }
long long nf_annotate_count_records(const char * vcf) {
    (void) vcf;
    return 0;
}
int nf_annotate_file(const nf_annotate_opts * o, const char * report_path, nf_annotate_stats * s, nf_err * err) {
    (void) o;
    (void) report_path;
    if (s) memset(s, 0, sizeof(*s));
    return nf__ann_no_htslib(err);
}
#else
#include "annotate-impl.h"

double nf__ann_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec * 1e3 + (double) ts.tv_nsec * 1e-6;
}

/* ---- sharded (the CLI's MPI layer: README "Running on a cluster with mpirun") ----------
 * Every rank reads the whole VCF; record k (1-based) is scored by rank
 * (k - 1) % size. The records go in chunks: each rank scores its records of
 * the chunk, every rank says whether it failed (hooks' agree), the scores go
 * to rank 0 (hooks' gather), which writes the chunk's records in input order. */

/* a record another rank scores: rank 0 keeps it until its scores come */
static int nf_ann_remote(nf_annotator * a, bcf1_t * b, int64_t index, int owner, nf_err * err) {
    if (nf__ann_grow((void **) &a->recs, &a->cap_recs, a->n_recs + 1, sizeof(*a->recs))) {
        bcf_destroy(b);
        return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    }
    struct nf_ann_rec * rc = &a->recs[a->n_recs++];
    memset(rc, 0, sizeof(*rc));
    rc->b = b;
    rc->index = index;
    rc->owner = owner;
    rc->n_alt = b->n_allele > 1 ? b->n_allele - 1 : 1;
    if (!(rc->alt = calloc((size_t) rc->n_alt, sizeof(*rc->alt))))
        return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    return NF_OK;
}

static void nf_ann_discard(nf_annotator * a) {
    for (int64_t i = 0; i < a->n_recs; i++) {
        if (a->recs[i].b) bcf_destroy(a->recs[i].b);
        free(a->recs[i].alt);
    }
    a->n_recs = 0;
}

/* on the wire, per record: int64 index, int32 n_alt; per ALT: int32 skip,
 * float dsplice, float dtissue[15], float sai_ds[2][4], int32 sai_dp[2][4],
 * int32 strands (one machine type across the job) */
#define NF_ANN_WIRE_REC  (8 + 4)
#define NF_ANN_WIRE_ALT  (4 + 4 + 4 * NF_ANNOTATE_TISSUES + 64 + 4)

/* this rank's scores of the chunk to rank 0, into its remote records */
static int nf_ann_exchange(nf_annotator * a, nf_err * err) {
    const nf_annotate_hooks * mp = &a->h;
    char * blob = NULL;
    int64_t n = 0;
    int rc = NF_OK;
    if (mp->rank != 0) {
        for (int64_t i = 0; i < a->n_recs; i++) n += NF_ANN_WIRE_REC + (int64_t) a->recs[i].n_alt * NF_ANN_WIRE_ALT;
        if (!(blob = malloc(n > 0 ? (size_t) n : 1))) rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
        char * p = blob;
        for (int64_t i = 0; blob && i < a->n_recs; i++) {
            const struct nf_ann_rec * r = &a->recs[i];
            const int32_t na = r->n_alt;
            memcpy(p, &r->index, 8);
            memcpy(p + 8, &na, 4);
            p += NF_ANN_WIRE_REC;
            for (int k = 0; k < na; k++) {
                const int32_t sk = r->alt[k].skip;
                memcpy(p, &sk, 4);
                memcpy(p + 4, &r->alt[k].dsplice, 4);
                memcpy(p + 8, r->alt[k].dtissue, 4 * NF_ANNOTATE_TISSUES);
                memcpy(p + 8 + 4 * NF_ANNOTATE_TISSUES, r->alt[k].sai_ds, 32);
                memcpy(p + 8 + 4 * NF_ANNOTATE_TISSUES + 32, r->alt[k].sai_dp, 32);
                const int32_t st = r->alt[k].strands;
                memcpy(p + 8 + 4 * NF_ANNOTATE_TISSUES + 64, &st, 4);
                p += NF_ANN_WIRE_ALT;
            }
        }
        nf_ann_discard(a);
        if (rc != NF_OK) n = 0; /* still take part in the gather */
    }
    char * all = NULL;
    int64_t *lens = a->lens, *off = a->off, *end = a->end; /* allocated by new: no failure here */
    memset(lens, 0, (size_t) mp->size * sizeof(int64_t));
    const int grc = mp->gather(mp->ctx, blob, n, &all, lens, err);
    if (rc == NF_OK) rc = grc;
    free(blob);
    if (rc == NF_OK && mp->rank == 0) {
        for (int r = 0, o = 0; r < mp->size; o += (int) lens[r], r++) {
            off[r] = o;
            end[r] = o + lens[r];
        }
        char e[1024];
        for (int64_t i = 0; rc == NF_OK && i < a->n_recs; i++) {
            struct nf_ann_rec * r = &a->recs[i];
            if (r->owner == 0) continue;
            const int w = r->owner;
            int64_t idx = -1;
            int32_t na = -1;
            if (end[w] - off[w] >= NF_ANN_WIRE_REC) {
                memcpy(&idx, all + off[w], 8);
                memcpy(&na, all + off[w] + 8, 4);
            }
            if (idx != r->index || na != r->n_alt ||
                end[w] - off[w] < NF_ANN_WIRE_REC + (int64_t) na * NF_ANN_WIRE_ALT) {
                rc = nf__err_set(err, NF_ERR_MISMATCH,
                                 "%s: rank %d sent the scores of record %lld (%d ALTs) instead; do all ranks read "
                                 "the same --vcf?",
                                 nf__ann_where(a, r, e, sizeof(e)), w, (long long) idx, (int) na);
                break;
            }
            const char * p = all + off[w] + NF_ANN_WIRE_REC;
            for (int k = 0; k < na; k++, p += NF_ANN_WIRE_ALT) {
                int32_t sk;
                memcpy(&sk, p, 4);
                r->alt[k].skip = sk;
                memcpy(&r->alt[k].dsplice, p + 4, 4);
                memcpy(r->alt[k].dtissue, p + 8, 4 * NF_ANNOTATE_TISSUES);
                memcpy(r->alt[k].sai_ds, p + 8 + 4 * NF_ANNOTATE_TISSUES, 32);
                memcpy(r->alt[k].sai_dp, p + 8 + 4 * NF_ANNOTATE_TISSUES + 32, 32);
                int32_t st;
                memcpy(&st, p + 8 + 4 * NF_ANNOTATE_TISSUES + 64, 4);
                r->alt[k].strands = st;
            }
            off[w] += NF_ANN_WIRE_REC + (int64_t) na * NF_ANN_WIRE_ALT;
        }
        for (int r = 1; rc == NF_OK && r < mp->size; r++)
            if (off[r] != end[r])
                rc = nf__err_set(err, NF_ERR_MISMATCH,
                                 "rank %d sent scores of more records than rank 0 gave it; do all ranks read the same "
                                 "--vcf?",
                                 r);
    }
    free(all);
    return rc;
}

/* records in one chunk: per rank the hooks' chunk, or at least a full batch */
static int64_t nf_ann_chunk(const nf_annotator * a) {
    const int64_t per = a->h.chunk > 0 ? a->h.chunk : a->o.batch > 1024 ? a->o.batch : 1024;
    return per * a->h.size;
}

/* one process: the records as they come, written as their batch finishes */
static int nf_ann_loop_one(nf_annotator * a, nf_err * err) {
    int64_t index = 0;
    bcf1_t * b = NULL;
    int rc, got;
    while ((rc = nf__ann_read(a, &b, &index, &got, err)) == NF_OK && got) {
        bcf1_t * kept = b;
        b = NULL;
        if ((rc = nf__ann_record(a, kept, index, err)) != NF_OK) break;
        /* a full batch, or many records waiting: run; no job waiting: write */
        if (2 * a->n_jobs >= a->o.batch || a->n_recs >= 4096)
            if ((rc = nf__ann_run_jobs(a, err)) != NF_OK) break;
        if (a->n_jobs == 0 && (rc = nf__ann_flush(a, err)) != NF_OK) break;
    }
    if (b) bcf_destroy(b);
    if (rc == NF_OK) rc = nf__ann_run_jobs(a, err);
    if (rc == NF_OK) rc = nf__ann_flush(a, err);
    return rc;
}

/* the ranks of a sharded run: chunk by chunk */
static int nf_ann_loop_shard(nf_annotator * a, nf_err * err) {
    const nf_annotate_hooks * mp = &a->h;
    const int64_t chunk = nf_ann_chunk(a);
    int64_t index = 0;
    bcf1_t * b = NULL;
    int rc = NF_OK, eof = 0;
    while (!eof) {
        for (int64_t n = 0; rc == NF_OK && n < chunk; n++) {
            int got = 0;
            if ((rc = nf__ann_read(a, &b, &index, &got, err)) != NF_OK || !got) {
                eof = 1;
                break;
            }
            bcf1_t * kept = b;
            b = NULL;
            const int owner = (int) ((index - 1) % mp->size);
            if (owner == mp->rank) {
                if ((rc = nf__ann_record(a, kept, index, err)) != NF_OK) break;
                if (2 * a->n_jobs >= a->o.batch) rc = nf__ann_run_jobs(a, err);
            } else if (mp->rank == 0)
                rc = nf_ann_remote(a, kept, index, owner, err);
            else
                bcf_destroy(kept);
        }
        if (rc == NF_OK) rc = nf__ann_run_jobs(a, err);
        /* the ranks disagreeing on the end of the VCF: not the same file */
        int64_t ends[2] = {eof, 1};
        if ((rc = mp->agree(mp->ctx, rc, err)) != NF_OK) break;
        mp->sum_i64(mp->ctx, ends, 2, err);
        if (ends[0] != 0 && ends[0] != ends[1])
            rc = nf__err_set(err, NF_ERR_MISMATCH, "rank %d: --vcf ended after %lld records on %lld of %lld ranks",
                             mp->rank, (long long) index, (long long) ends[0], (long long) ends[1]);
        if (rc == NF_OK) rc = nf_ann_exchange(a, err);
        if (rc == NF_OK && mp->rank == 0) rc = nf__ann_flush(a, err);
        if ((rc = mp->agree(mp->ctx, rc, err)) != NF_OK) break;
        if (mp->rank == 0 && mp->chunk_done) mp->chunk_done(mp->ctx);
    }
    if (b) bcf_destroy(b);
    return rc;
}

/* ---- the stages ---------------------------------------------------------------------------- */

static int nf__ann_check_inputs(nf_annotator * a, nf_err * err);

static int nf__ann_check(nf_annotator * a, nf_err * err) {
    const nf_annotate_opts * o = &a->o;
    char e[1024];
    if (o->write_index < NF_ANNOTATE_INDEX_NONE || o->write_index > NF_ANNOTATE_INDEX_TBI)
        return nf__err_set(err, NF_ERR_ARG, "--write-index: %d is not csi (1) or tbi (2)", o->write_index);
    if (!o->model || !o->vcf || !o->fasta || !o->genes || !o->out)
        return nf__err_set(err, NF_ERR_ARG, "annotate needs the model, the VCF, the FASTA, the GTF and the output");
    if (o->batch < 2 || o->batch > 4096)
        return nf__err_set(err, NF_ERR_ARG, "--batch %lld: not in 2..4096", (long long) o->batch);
    size_t ol = strlen(o->out);
    a->enc = NF_ANN_PLAIN;
    if (o->out_type || strcmp(o->out, "-") == 0) { /* bcftools' -O, or stdout: a VCF / BCF whatever the name */
        const char t = o->out_type ? o->out_type : 'v';
        if (!strchr("vzbu", t)) return nf__err_set(err, NF_ERR_ARG, "--output-type %c: not v, z, b or u", t);
        const size_t gz = ol > 3 && strcmp(o->out + ol - 3, ".gz") == 0 ? 3 : 0;
        if (ol - gz > 4 &&
            (strncmp(o->out + ol - gz - 4, ".tsv", 4) == 0 || strncmp(o->out + ol - gz - 4, ".csv", 4) == 0))
            return nf__err_set(err, NF_ERR_ARG,
                               "--out %s: --output-type writes a VCF or BCF; a .tsv / .csv output takes its format "
                               "from its name",
                               nf__esc(e, sizeof(e), o->out));
        a->fmt = NF_ANN_VCF;
        a->enc = t == 'v' ? NF_ANN_PLAIN : t == 'z' ? NF_ANN_BGZF : NF_ANN_BCF;
        a->bcf_u = t == 'u';
        return nf__ann_check_inputs(a, err);
    } else if (ol > 4 && strcmp(o->out + ol - 4, ".bcf") == 0) {
        a->fmt = NF_ANN_VCF;
        a->enc = NF_ANN_BCF;
        ol = 0;
    } else if (ol > 7 && strcmp(o->out + ol - 3, ".gz") == 0) {
        a->enc = NF_ANN_BGZF;
        ol -= 3;
    }
    if (ol > 4 && strncmp(o->out + ol - 4, ".csv", 4) == 0)
        a->fmt = NF_ANN_CSV;
    else if (ol > 4 && strncmp(o->out + ol - 4, ".tsv", 4) == 0)
        a->fmt = NF_ANN_TSV;
    else if (ol > 4 && strncmp(o->out + ol - 4, ".vcf", 4) == 0)
        a->fmt = NF_ANN_VCF;
    else if (a->enc != NF_ANN_BCF)
        return nf__err_set(err, NF_ERR_ARG,
                           "--out %s: the name must end in .vcf, .vcf.gz, .bcf, .tsv, .tsv.gz, .csv or .csv.gz",
                           nf__esc(e, sizeof(e), o->out));
    return nf__ann_check_inputs(a, err);
}

/* the inputs, the model, the shard hooks (after the output's format) */
static int nf__ann_check_inputs(nf_annotator * a, nf_err * err) {
    const nf_annotate_opts * o = &a->o;
    char e[1024];
    /* a FASTA must be seekable (faidx), the GTF is read whole before any
     * work: a FIFO, a device or a directory is refused by name, never opened
     * by htslib (which would block on a FIFO with no writer) */
    const char * const seekable[2][2] = {{"--fasta", o->fasta}, {"--genes", o->genes}};
    for (int i = 0; i < 2; i++) {
        int fd;
        uint64_t size;
        NF_TRY(nf__open_regular_flag(seekable[i][0], seekable[i][1], &fd, &size, err));
        close(fd);
    }
    const char * ins[3] = {o->vcf, o->fasta, o->genes};
    for (int i = 0; i < 3; i++)
        if (strcmp(o->out, "-") != 0 && nf_out_same_file(o->out, ins[i]))
            return nf__err_set(err, NF_ERR_ARG, "--out %s is an input", nf__esc(e, sizeof(e), o->out));
    char type[64];
    nf_model_type_of(o->model, type, sizeof(type));
    struct stat sb; /* a FIFO or device is no checkpoint here (core's sniff lets its load say so) */
    if (stat(o->model, &sb) == 0 && !S_ISDIR(sb.st_mode) && !S_ISREG(sb.st_mode)) type[0] = '\0';
    if (strcmp(type, "sptransformer") != 0)
        return nf__err_set(err, NF_ERR_ARG, "--model %s: not a SpTransformer model", nf__esc(e, sizeof(e), o->model));
    if (a->h.size > 1) {
        if (!a->h.agree || !a->h.sum_i64 || !a->h.sum_f64 || !a->h.gather || a->h.rank < 0 || a->h.rank >= a->h.size)
            return nf__err_set(err, NF_ERR_ARG,
                               "annotate: a sharded run needs rank < size and the hooks agree, "
                               "sum_i64, sum_f64 and gather");
        a->lens = calloc((size_t) a->h.size, sizeof(int64_t));
        a->off = calloc((size_t) a->h.size, sizeof(int64_t));
        a->end = calloc((size_t) a->h.size, sizeof(int64_t));
        if (!a->lens || !a->off || !a->end) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    }
    return NF_OK;
}

int nf_annotate_new(const nf_annotate_opts * o, const nf_annotate_hooks * h, nf_annotator ** out, nf_err * err) {
    *out = NULL;
    /* htslib's own log echoes names and regions raw (an ESC reaches the
     * terminal) and this htslib has no log callback: silenced, nofall reports
     * every failure itself, escaped (README "Hostile input") */
    hts_set_log_level(HTS_LOG_OFF);
    nf_annotator * a = calloc(1, sizeof(*a));
    if (!a) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    a->t_start = nf__ann_now_ms();
    a->o = *o;
    if (!a->o.device) a->o.device = "cpu";
    if (h) a->h = *h;
    if (a->h.size < 1) a->h.size = 1;
    int rc = nf__ann_check(a, err);
    if (rc == NF_OK) rc = nf__ann_check_index(a, err);
    if (rc != NF_OK) {
        nf_annotate_free(a);
        return rc;
    }
    *out = a;
    return NF_OK;
}

/* the output (the writer), the genes, the FASTA on rank 0 (which creates
 * the .fai when missing, before any other rank looks for it) */
int nf_annotate_open(nf_annotator * a, const char * out_path, nf_err * err) {
    const nf_annotate_opts * o = &a->o;
    char e[1024];
    if (out_path) NF_TRY(nf__ann_open_writer(a, out_path, err));
    NF_TRY(nf_genes_load(o->genes, &a->genes, err));
    /* htslib trusts the .fai: a line of 0 bases divides by zero */
    if (a->h.rank == 0) NF_TRY(nf__fai_check(o->fasta, err));
    if (a->h.rank == 0 && !(a->fai = fai_load3(o->fasta, NULL, NULL, FAI_CREATE)))
        return nf__err_set(err, NF_ERR_IO,
                           "--fasta %s: not a FASTA file htslib can index (plain, or bgzip-compressed; the lines of "
                           "a record all one length)",
                           nf__esc(e, sizeof(e), o->fasta));
    /* the index htslib just built too: from a line with no bases it writes LINEBASES 0 */
    if (a->h.rank == 0) NF_TRY(nf__fai_check(o->fasta, err));
    return NF_OK;
}

/* the FASTA on the other ranks, the VCF, the device, the model, the header */
int nf_annotate_load(nf_annotator * a, nf_err * err) {
    const nf_annotate_opts * o = &a->o;
    char e[1024];
    if (!a->fai) NF_TRY(nf__fai_check(o->fasta, err));
    if (!a->fai && !(a->fai = fai_load3(o->fasta, NULL, NULL, FAI_CREATE)))
        return nf__err_set(err, NF_ERR_IO, "--fasta %s: cannot open it or its .fai", nf__esc(e, sizeof(e), o->fasta));
    if (!a->raw_open) {
        NF_TRY(nf__fasta_raw_open(&a->raw, o->fasta, err));
        a->raw_open = 1;
    }
    if (!(a->in = hts_open(o->vcf, "r")))
        return nf__err_set(err, NF_ERR_IO, "--vcf %s: cannot open", nf__esc(e, sizeof(e), o->vcf));
    if (a->in->format.category != variant_data || !(a->hdr = bcf_hdr_read(a->in)))
        return nf__err_set(err, NF_ERR_FORMAT, "--vcf %s: not a VCF/BCF file (no header)",
                           nf__esc(e, sizeof(e), o->vcf));
    if (a->h.backend)
        NF_TRY(a->h.backend(a->h.ctx, o->device, &a->be, err));
    else
        NF_TRY(nf_backend_init(o->device, 0, &a->be, err));
    NF_TRY(nf_model_load(a->be, o->model, &a->m, err));
    if (o->no_reuse) NF_TRY(nf_model_set_option(a->m, "batch_reuse", 0, err));
    struct nf_config_item ci;
    for (int i = 0; nf_model_config_item(a->m, i, &ci); i++)
        if (strcmp(ci.key, "context_len") == 0) a->context = ci.num;
    if (a->context <= 0) return nf__err_set(err, NF_ERR_ARG, "--model: no context_len");
    a->flank = a->context + 100;
    if (a->out || a->bgz || a->hout) return nf__ann_write_header(a, err);
    return NF_OK;
}

/* a warning (the hooks', rank 0) for each skip reason that covers more than
 * NF_ANN_SKIP_WARN of the ALTs: the reason and the way out; the run still
 * succeeds (exit 0), as upstream's does */
#define NF_ANN_SKIP_WARN 0.10
static void nf_ann_skip_warnings(const nf_annotator * a) {
    static const char * const why[NF_ANNOTATE_SKIP_N] = {
        [NF_ANNOTATE_SKIP_CONTIG_NAME] = "their contig name is over 6 characters (upstream SpTransformer's rule, kept "
                                         "for parity: NCBI names such as NC_000001.11 hit it); rename the contigs to "
                                         "chr1..chrY (bcftools annotate --rename-chrs, with the FASTA and GTF "
                                         "renamed alike) to score them",
        [NF_ANNOTATE_SKIP_NOT_SNV] = "they are not SNVs (SpTransformer's annotate scores single-base substitutions "
                                     "only, as upstream)",
        [NF_ANNOTATE_SKIP_NO_ALT] = "the record has no ALT",
        [NF_ANNOTATE_SKIP_STAR] = "the ALT is '*' or '.' (a deletion elsewhere / no ALT)",
    };
    const nf_annotate_stats * s = &a->st;
    if (!a->h.warning || a->h.rank != 0 || s->alts <= 0) return;
    for (int i = 0; i < NF_ANNOTATE_SKIP_N; i++)
        if ((double) s->skipped[i] > NF_ANN_SKIP_WARN * (double) s->alts) {
            char w[1024];
            snprintf(w, sizeof(w), "%lld of %lld ALTs (%.0f%%) not scored (%s): %s", (long long) s->skipped[i],
                     (long long) s->alts, 100.0 * (double) s->skipped[i] / (double) s->alts, nf_annotate_skip_name(i),
                     why[i]);
            a->h.warning(a->h.ctx, w);
        }
}

int nf_annotate_run(nf_annotator * a, nf_err * err) {
    if (!a->m || !a->hdr) return nf__err_set(err, NF_ERR_ARG, "annotate: nf_annotate_run before nf_annotate_load");
    if (a->h.rank == 0 && !a->out && !a->bgz && !a->hout)
        return nf__err_set(err, NF_ERR_ARG, "annotate: rank 0 writes: nf_annotate_open needs its output path");
    if (a->h.size == 1) {
        NF_TRY(nf_ann_loop_one(a, err));
        nf_ann_skip_warnings(a);
        return NF_OK;
    }
    NF_TRY(nf_ann_loop_shard(a, err));
    /* the totals (every rank past its last agree: all take part) */
    nf_annotate_stats * s = &a->st;
    int64_t c[10 + NF_ANNOTATE_SKIP_N] = {
        s->records,    s->alts,     s->scored,  s->scored_no_gene,   s->scored_ref_mismatch,
        s->window_cut, s->forwards, s->windows, s->windows_computed, s->windows_reused};
    for (int i = 0; i < NF_ANNOTATE_SKIP_N; i++) c[10 + i] = s->skipped[i];
    a->h.sum_i64(a->h.ctx, c, 10 + NF_ANNOTATE_SKIP_N, err);
    a->h.sum_f64(a->h.ctx, &s->forward_ms, 1, err);
    s->records = c[0], s->alts = c[1], s->scored = c[2], s->scored_no_gene = c[3];
    s->scored_ref_mismatch = c[4], s->window_cut = c[5], s->forwards = c[6], s->windows = c[7];
    s->windows_computed = c[8], s->windows_reused = c[9];
    for (int i = 0; i < NF_ANNOTATE_SKIP_N; i++) s->skipped[i] = c[10 + i];
    nf_ann_skip_warnings(a);
    return NF_OK;
}

int nf_annotate_close(nf_annotator * a, nf_err * err) { return nf__ann_close_out(a, NF_OK, err); }

int nf_annotate_plot_prepare(nf_annotator * a, const char * variant, nf_err * err) {
    if (a->h.size > 1) return nf__err_set(err, NF_ERR_ARG, "--plot: not under mpirun (run it on one process)");
    if (!a->m || !a->fai || !variant)
        return nf__err_set(err, NF_ERR_ARG,
                           "annotate: nf_annotate_plot_prepare after nf_annotate_load, with a variant");
    if (a->plot) {
        nf__ann_plot_free(a->plot);
        free(a->plot);
    }
    if (!(a->plot = calloc(1, sizeof(*a->plot)))) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    return nf__ann_plot_prepare(a->plot, variant, a->genes, a->o.protein_coding, a->fai, a->o.fasta, a->context, err);
}

int nf_annotate_plot_finish(nf_annotator * a, const char * path, int * from_run, nf_err * err) {
    if (from_run) *from_run = 0;
    if (!a->plot || !a->plot->ids || !path)
        return nf__err_set(err, NF_ERR_ARG, "annotate: nf_annotate_plot_finish after nf_annotate_plot_prepare");
    if (!a->plot->have) NF_TRY(nf__ann_plot_forward(a->plot, a->m, err));
    if (from_run) *from_run = a->plot->captured;
    return nf__ann_plot_draw(a->plot, path, err);
}

void nf_annotate_get_stats(const nf_annotator * a, nf_annotate_stats * s) {
    *s = a->st;
    s->ranks = a->h.size;
}

void nf_annotate_free(nf_annotator * a) {
    if (!a) return;
    nf_err ignored = {0};
    (void) nf__ann_close_out(a, NF_ERR_IO, &ignored); /* still open: an error path, whose error stands */
    nf_ann_discard(a);
    for (int64_t i = 0; i < a->n_jobs; i++) {
        free(a->jobs[i].ref);
        free(a->jobs[i].alt_ids);
    }
    free(a->recs);
    free(a->jobs);
    free(a->tok);
    free(a->logits);
    free(a->probs);
    free(a->ks.s);
    free(a->lens);
    free(a->off);
    free(a->end);
    free(a->out_path);
    if (a->hdr) bcf_hdr_destroy(a->hdr);
    if (a->in) hts_close(a->in);
    if (a->fai) fai_destroy(a->fai);
    if (a->raw_open) nf__fasta_raw_close(&a->raw);
    if (a->plot) nf__ann_plot_free(a->plot);
    free(a->plot);
    nf_genes_free(a->genes);
    nf_model_free(a->m);
    nf_backend_free(a->be);
    free(a);
}

int nf_annotate_file(const nf_annotate_opts * o, const char * report_path, nf_annotate_stats * s, nf_err * err) {
    nf_annotator * a = NULL;
    char * json = NULL;
    int rc = nf_annotate_new(o, NULL, &a, err);
    if (rc == NF_OK) rc = nf_annotate_open(a, o->out, err);
    if (rc == NF_OK) rc = nf_annotate_load(a, err);
    if (rc == NF_OK) rc = nf_annotate_run(a, err);
    if (rc == NF_OK) rc = nf_annotate_close(a, err);
    if (rc == NF_OK && o->write_index) {
        char * ip = malloc(strlen(o->out) + 5);
        if (!ip) rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
        if (ip) {
            sprintf(ip, "%s%s", o->out, nf_annotate_index_suffix(o));
            rc = nf_annotate_write_index(a, ip, err);
            free(ip);
        }
    }
    if (rc == NF_OK && report_path && !(json = nf_annotate_report_json(a, err))) rc = NF_ERR_NOMEM;
    if (json) {
        FILE * f = fopen(report_path, "w");
        const int ok = f && fputs(json, f) >= 0 && fputc('\n', f) != EOF;
        if ((f && fclose(f) != 0) || !ok) rc = nf__err_set(err, NF_ERR_IO, "%s: cannot write", report_path);
        free(json);
    }
    if (s) {
        if (a)
            nf_annotate_get_stats(a, s);
        else
            memset(s, 0, sizeof(*s));
    }
    nf_annotate_free(a);
    return rc;
}
#endif
