/* cmd-annotate.c -- `nofall annotate` (README "annotate"): score the SNVs of a
 * VCF/BCF against a reference genome with a SpTransformer model, as upstream
 * SpliceTransformer's `sptransformer.py` (Annotator.annotate_variant_table /
 * query_scores; spec shared/specs/sptransformer.md §5):
 *
 *   - SNVs only (REF and ALT one base); a contig name over 6 characters is
 *     skipped; multi-allelic records are scored per ALT;
 *   - strands: those of the genes (GTF `gene` rows) overlapping POS; none:
 *     score 0 and no forward;
 *   - per strand: the window POS-(C+100) .. POS+(C+100) (C = context_len,
 *     4000: L = 8201), ALT at offset C+100, minus strand reverse-complemented,
 *     ref and alt through the model; probabilities as upstream's driver;
 *     a[i] = max(acceptor, donor); dsplice = max |a_alt - a_ref| over the
 *     central 201 positions; tissue usage masked at a >= 0.09 (each allele by
 *     its own a), dtissue = max |U_alt - U_ref|; both maximised over strands;
 *   - tissue flags: z = ((d_t - mean(d)) - mu_t) / sd_t, 'Y' if z > thr95_t
 *     (Appendix B), or the raw d_t with --raw-score.
 *
 * Input: whatever htslib reads as variants (.vcf, .vcf.gz, .bcf).
 * Output: .csv / .tsv with upstream's columns and formatting (a pandas index
 * column, '%.2f' score, Python float repr for raw values), or .vcf: every
 * input record, INFO/SPT=ALT|DSPLICE|<15 tissue values> per scored ALT;
 * .vcf.gz / .tsv.gz / .csv.gz: the same bytes, BGZF-compressed; .bcf: the
 * .vcf's header and records as BCF (htslib "wb").
 * Written under a temporary name and renamed at the end, with OUT.report.json
 * (counts by reason). Batching: the windows of many variants in one forward.
 * A progress bar (progress.c) on a terminal's stderr (--quiet: none, --progress: always). */
#include "cli.h"
#include "opts.h"
#include "io/nf-io.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef NF_HAVE_HTSLIB
#include <htslib/bgzf.h>
#include <htslib/faidx.h>
#include <htslib/kstring.h>
#include <htslib/tbx.h>
#include <htslib/vcf.h>
#endif

#define NF_ANN_TISSUES 15
static const char * const nf_ann_tissues[NF_ANN_TISSUES] = {
    "Adipose Tissue", "Blood",  "Blood Vessel", "Brain",           "Colon", "Heart",  "Kidney", "Liver",
    "Lung",           "Muscle", "Nerve",        "Small Intestine", "Skin",  "Spleen", "Stomach"};
/* upstream sptransformer.py, Annotator._threshold (spec Appendix B) */
static const double nf_ann_mu[NF_ANN_TISSUES] = {
    0.016170055925538048, -0.1466492029720345, -0.004814086515620099, 0.017831358519558433, 0.03297392759250731,
    -0.0238562463866956,  0.03762999484050797, -0.057356272980532315, 0.04777555561381407,  -0.04901297259546376,
    0.03865417911254773,  0.05855564392852844, 0.008105610846240991,  0.001179770193512726, 0.022812684877590292};
static const double nf_ann_sd[NF_ANN_TISSUES] = {
    0.015315100552740593, 0.07765363341706003,  0.02180354730921543,  0.03280497132872753,  0.018426896200775304,
    0.02340998308282473,  0.022809397819461737, 0.037399009450944404, 0.02457642947897365,  0.03512151853661846,
    0.025045859953448327, 0.03187442362925183,  0.015884291924608274, 0.022923747771506405, 0.01608487821592824};
static const double nf_ann_thr95[NF_ANN_TISSUES] = {
    1.8050256807163338, 1.2976271940160122, 1.7301640366913926, 1.5711727792118446, 1.6529818774325018,
    1.5579432960092778, 1.9147687989032427, 1.4824945358487465, 1.7212837086526112, 1.4469248306980924,
    1.5899046195758109, 1.8459915073972142, 1.838922268820402,  1.709814212823414,  1.8189643807065778};

/* numpy's float64 sum of 15 values (pairwise_sum: 8 partial sums, then the rest) */
static double nf_ann_np_mean15(const double * a) {
    double r[8];
    for (int j = 0; j < 8; j++) r[j] = a[j];
    double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (int i = 8; i < NF_ANN_TISSUES; i++) res += a[i];
    return res / NF_ANN_TISSUES;
}

struct nf_ann_opts {
    const char *model, *vcf, *fasta, *genes, *out, *device;
    int raw, protein_coding;
    int no_reuse; /* --no-reuse: every window in full (the model's batch_reuse 0) */
    int progress; /* NF_PROGRESS_AUTO / _QUIET (--quiet) / _FORCE (--progress) */
    int64_t batch;
};

enum { NF_ANN_CSV, NF_ANN_TSV, NF_ANN_VCF };
/* how --out is written: as is, BGZF-compressed (.gz), BCF (.bcf) */
enum { NF_ANN_PLAIN, NF_ANN_BGZF, NF_ANN_BCF };

/* skip reasons (the report's "skipped" object) */
enum { NF_SKIP_CONTIG_NAME, NF_SKIP_NOT_SNV, NF_SKIP_NO_ALT, NF_SKIP_STAR, NF_SKIP_N };
static const char * const nf_skip_names[NF_SKIP_N] = {"contig_name_over_6_characters", "not_snv", "no_alt", "alt_star"};

int nf_cmd_annotate(int argc, char ** argv);

#ifndef NF_HAVE_HTSLIB
int nf_cmd_annotate(int argc, char ** argv) {
    (void) argc;
    (void) argv;
    fprintf(stderr, "error: annotate: this build has no htslib (apt-get install libhts-dev, then rebuild)\n");
    return 1;
}
#else

static int nf_ann_parse(int argc, char ** argv, struct nf_ann_opts * o) {
    struct nf_cli_opts v;
    memset(o, 0, sizeof(*o));
    if (!nf_cli_opts_parse(NF_M(ANNOTATE), argc, argv, 1, NULL, &v)) return 0;
    o->model = nf_cli_opt_str(&v, NF_O_MODEL, NULL);
    o->vcf = nf_cli_opt_str(&v, NF_O_VCF, NULL);
    o->fasta = nf_cli_opt_str(&v, NF_O_ANN_FASTA, NULL);
    o->genes = nf_cli_opt_str(&v, NF_O_GENES, NULL);
    o->out = nf_cli_opt_str(&v, NF_O_OUT_FILE, NULL);
    o->device = nf_cli_opt_str(&v, NF_O_DEVICE, "cpu");
    o->batch = v.set[NF_O_ANN_BATCH] ? v.i[NF_O_ANN_BATCH] : 16;
    o->raw = v.set[NF_O_RAW_SCORE];
    o->protein_coding = v.set[NF_O_PROTEIN_CODING];
    o->no_reuse = v.set[NF_O_NO_REUSE];
    o->progress = v.set[NF_O_QUIET] ? NF_PROGRESS_QUIET : v.set[NF_O_PROGRESS] ? NF_PROGRESS_FORCE : NF_PROGRESS_AUTO;
    if (!o->model || !o->vcf || !o->fasta || !o->genes || !o->out) {
        fprintf(stderr, "error: annotate needs --model M --vcf IN --fasta REF --genes GTF --out "
                        "OUT.vcf|.vcf.gz|.bcf|.tsv[.gz]|.csv[.gz]\n");
        return 0;
    }
    return 1;
}

/* one scored ALT */
struct nf_ann_alt {
    int skip;      /* -1 scored, else a skip reason */
    int strands;   /* bit 1 '+', bit 2 '-' */
    int pending;   /* jobs not yet run */
    float dsplice; /* max over strands */
    float dtissue[NF_ANN_TISSUES];
    char base;
};

struct nf_ann_rec {
    bcf1_t * b;
    int64_t index; /* 1-based data record number */
    int owner;     /* the rank that scores it (0 without MPI) */
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
};

struct nf_ann {
    const struct nf_ann_opts * o;
    const struct nf_cli_mpi * mp;
    const char * device; /* this rank's */
    nf_backend * be;
    struct nf_cli_outfile of; /* --out (rank 0) */
    nf_model * m;
    int64_t context, flank; /* flank = context + 100 */
    faidx_t * fai;
    struct nf_genes * genes;
    htsFile * in;
    bcf_hdr_t * hdr;
    int fmt, enc;
    FILE * out;     /* NF_ANN_PLAIN */
    BGZF * bgz;     /* NF_ANN_BGZF  */
    htsFile * hout; /* NF_ANN_BCF   */
    nf_progress * prog;
    int64_t written; /* records written (rank 0): the progress */
    kstring_t ks;
    struct nf_ann_rec * recs;
    int64_t n_recs, cap_recs;
    struct nf_ann_job * jobs;
    int64_t n_jobs, cap_jobs;
    int64_t * tok;
    float *logits, *probs;
    int64_t buf_seqs, buf_L;
    /* counts */
    int64_t records, alts, scored, no_gene, ref_mismatch, truncated, forwards, windows, rows_out;
    int64_t computed, reused; /* windows computed (repeats once), and of those reusing encoder rows */
    int64_t skipped[NF_SKIP_N];
    double forward_ms;
};

static const char * nf_ann_where(const struct nf_ann * a, const struct nf_ann_rec * r, char * buf, size_t n) {
    char e[256];
    snprintf(buf, n, "--vcf record %lld (%s:%lld %s)", (long long) r->index,
             nf__esc(e, sizeof(e), bcf_seqname(a->hdr, r->b)), (long long) r->b->pos + 1,
             r->b->d.id ? r->b->d.id : ".");
    return buf;
}

/* upstream's normalise_chrom(c, 'chr'): "Chr" -> "chr", a missing "chr" added */
static void nf_ann_chr_name(const char * c, char * out, size_t n) {
    if (strncmp(c, "Chr", 3) == 0)
        snprintf(out, n, "chr%s", c + 3);
    else if (strncmp(c, "chr", 3) == 0)
        snprintf(out, n, "%s", c);
    else
        snprintf(out, n, "chr%s", c);
}

static int nf_ann_id(int c) {
    switch (c) {
        case 'A':
        case 'a': return 0;
        case 'C':
        case 'c': return 1;
        case 'G':
        case 'g': return 2;
        case 'T':
        case 't': return 3;
        case 'N':
        case 'n': return 4;
        default: return -1;
    }
}

static void nf_ann_probs(const float * lg, float * pr, int64_t rows) {
    for (int64_t r = 0; r < rows; r++) {
        const float * x = lg + r * 18;
        float * p = pr + r * 18;
        const double mx = fmax(fmax(x[0], x[1]), x[2]);
        double e[3], sum = 0.0;
        for (int c = 0; c < 3; c++) sum += (e[c] = exp((double) x[c] - mx));
        for (int c = 0; c < 3; c++) p[c] = (float) (e[c] / sum);
        for (int c = 3; c < 18; c++) p[c] = (float) (1.0 / (1.0 + exp(-(double) x[c])));
    }
}

/* the scores of one job from its two probability tracks (rows x 18) */
static void nf_ann_score(const float * pr, const float * pa, int64_t rows, struct nf_ann_alt * out) {
    float ds = 0.0f, dt[NF_ANN_TISSUES] = {0};
    for (int64_t i = 0; i < rows; i++) {
        const float * r = pr + i * 18;
        const float * x = pa + i * 18;
        const float ar = r[1] > r[2] ? r[1] : r[2];
        const float aa = x[1] > x[2] ? x[1] : x[2];
        const float d = fabsf(aa - ar);
        if (d > ds) ds = d;
        const float mr = ar >= 0.09f ? 1.0f : 0.0f, ma = aa >= 0.09f ? 1.0f : 0.0f;
        for (int t = 0; t < NF_ANN_TISSUES; t++) {
            const float u = fabsf(x[3 + t] * ma - r[3 + t] * mr);
            if (u > dt[t]) dt[t] = u;
        }
    }
    if (ds > out->dsplice) out->dsplice = ds;
    for (int t = 0; t < NF_ANN_TISSUES; t++)
        if (dt[t] > out->dtissue[t]) out->dtissue[t] = dt[t];
}

static int nf_ann_grow(void ** p, int64_t * cap, int64_t need, size_t elem) {
    if (need <= *cap) return 0;
    int64_t nc = *cap ? *cap : 64;
    while (nc < need) nc *= 2;
    void * q = realloc(*p, (size_t) nc * elem);
    if (!q) return -1;
    *p = q;
    *cap = nc;
    return 0;
}

/* run the queued jobs: consecutive jobs of one L, up to --batch windows a forward */
static int nf_ann_run_jobs(struct nf_ann * a, nf_err * err) {
    const int64_t per = a->o->batch / 2 > 0 ? a->o->batch / 2 : 1;
    for (int64_t j0 = 0; j0 < a->n_jobs;) {
        const int64_t L = a->jobs[j0].L;
        int64_t j1 = j0;
        while (j1 < a->n_jobs && j1 - j0 < per && a->jobs[j1].L == L) j1++;
        const int64_t B = 2 * (j1 - j0), rows = L - 2 * a->context;
        if (B > a->buf_seqs || L > a->buf_L) {
            free(a->tok);
            free(a->logits);
            free(a->probs);
            const int64_t bs = B > a->buf_seqs ? B : a->buf_seqs, bl = L > a->buf_L ? L : a->buf_L;
            a->tok = malloc((size_t) (bs * bl) * sizeof(int64_t));
            a->logits = malloc((size_t) (bs * (bl - 2 * a->context) * 18) * sizeof(float));
            a->probs = malloc((size_t) (bs * (bl - 2 * a->context) * 18) * sizeof(float));
            if (!a->tok || !a->logits || !a->probs) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
            a->buf_seqs = bs;
            a->buf_L = bl;
        }
        for (int64_t j = j0; j < j1; j++) {
            int64_t * t = a->tok + (2 * (j - j0)) * L;
            for (int64_t i = 0; i < L; i++) t[i] = a->jobs[j].ref[i];
            for (int64_t i = 0; i < L; i++) t[L + i] = a->jobs[j].alt_ids[i];
        }
        struct nf_array in = {"tokens", NF_ARRAY_I64, 2, {B, L}, a->tok};
        const double t0 = nf_cli_now_ms();
        NF_TRY(nf_model_forward(a->m, &in, 1, a->logits, err));
        a->forward_ms += nf_cli_now_ms() - t0;
        a->forwards++;
        a->windows += B;
        int64_t v = 0;
        if (nf_model_get_option(a->m, "distinct", &v, err) == NF_OK) a->computed += v;
        if (nf_model_get_option(a->m, "reused", &v, err) == NF_OK) a->reused += v;
        for (int64_t i = 0; i < B * rows * 18; i++)
            if (!isfinite(a->logits[i])) return nf__err_set(err, NF_ERR_MISMATCH, "forward produced non-finite logits");
        nf_ann_probs(a->logits, a->probs, B * rows);
        for (int64_t j = j0; j < j1; j++) {
            struct nf_ann_job * jb = &a->jobs[j];
            struct nf_ann_alt * al = &a->recs[jb->rec].alt[jb->alt];
            const float * pr = a->probs + (2 * (j - j0)) * rows * 18;
            nf_ann_score(pr, pr + rows * 18, rows, al);
            al->pending--;
            free(jb->ref);
            free(jb->alt_ids);
            jb->ref = jb->alt_ids = NULL;
        }
        j0 = j1;
    }
    a->n_jobs = 0;
    return NF_OK;
}

static void nf_ann_field(kstring_t * ks, const char * s, char sep) {
    /* pandas' QUOTE_MINIMAL */
    if (strchr(s, sep) || strchr(s, '"') || strchr(s, '\n') || strchr(s, '\r')) {
        kputc('"', ks);
        for (const char * p = s; *p; p++) {
            if (*p == '"') kputc('"', ks);
            kputc(*p, ks);
        }
        kputc('"', ks);
    } else
        kputs(s, ks);
}

/* the 15 tissue values of one ALT (flags or raw) into vals */
static void nf_ann_tissue_values(const struct nf_ann * a, const struct nf_ann_alt * al, char vals[][40]) {
    double d[NF_ANN_TISSUES];
    for (int t = 0; t < NF_ANN_TISSUES; t++) d[t] = (double) al->dtissue[t];
    const double mean = nf_ann_np_mean15(d);
    for (int t = 0; t < NF_ANN_TISSUES; t++) {
        if (a->o->raw)
            nf__py_float_repr(d[t], vals[t], 40);
        else {
            const double z = ((d[t] - mean) - nf_ann_mu[t]) / nf_ann_sd[t];
            snprintf(vals[t], 40, "%s", z > nf_ann_thr95[t] ? "Y" : "N");
        }
    }
}

/* a->ks to --out */
static int nf_ann_put(struct nf_ann * a, nf_err * err) {
    char e[1024];
    if (!a->ks.l) return NF_OK;
    const int ok = a->enc == NF_ANN_BGZF ? bgzf_write(a->bgz, a->ks.s, a->ks.l) == (ssize_t) a->ks.l
                                         : fwrite(a->ks.s, 1, a->ks.l, a->out) == a->ks.l;
    if (!ok) return nf__err_set(err, NF_ERR_IO, "--out %s: write failed", nf__esc(e, sizeof(e), a->o->out));
    return NF_OK;
}

/* write the pending records (all their jobs done), in input order */
static int nf_ann_flush(struct nf_ann * a, nf_err * err) {
    char e[1024];
    for (int64_t r = 0; r < a->n_recs; r++) {
        struct nf_ann_rec * rc = &a->recs[r];
        bcf1_t * b = rc->b;
        a->ks.l = 0;
        char vals[NF_ANN_TISSUES][40], score[32];
        if (a->fmt == NF_ANN_VCF) {
            kstring_t info = {0, 0, NULL};
            for (int i = 0; i < rc->n_alt; i++) {
                const struct nf_ann_alt * al = &rc->alt[i];
                if (al->skip >= 0) continue;
                nf_ann_tissue_values(a, al, vals);
                snprintf(score, sizeof(score), "%.2f", (double) al->dsplice);
                if (info.l) kputc(',', &info);
                kputs(b->d.allele[i + 1], &info);
                kputc('|', &info);
                if (a->o->raw) {
                    char raw[40];
                    nf__py_float_repr((double) al->dsplice, raw, sizeof(raw));
                    kputs(raw, &info);
                } else
                    kputs(score, &info);
                for (int t = 0; t < NF_ANN_TISSUES; t++) {
                    kputc('|', &info);
                    kputs(vals[t], &info);
                }
            }
            if (info.l && bcf_update_info_string(a->hdr, b, "SPT", info.s) < 0) {
                free(info.s);
                return nf__err_set(err, NF_ERR_IO, "%s: cannot set INFO/SPT", nf_ann_where(a, rc, e, sizeof(e)));
            }
            free(info.s);
            if (a->enc == NF_ANN_BCF) {
                /* htslib refuses a record whose contig or tag the header
                 * lacks (the header is written: it would make a broken BCF) */
                if (b->errcode & (BCF_ERR_CTG_UNDEF | BCF_ERR_TAG_UNDEF))
                    return nf__err_set(err, NF_ERR_FORMAT,
                                       "%s: its %s is not declared in the --vcf header; a .bcf --out needs every "
                                       "contig and INFO / FORMAT field declared (declare it, or write .vcf / "
                                       ".vcf.gz)",
                                       nf_ann_where(a, rc, e, sizeof(e)),
                                       b->errcode & BCF_ERR_CTG_UNDEF ? "contig" : "INFO or FORMAT field");
                if (bcf_write(a->hout, a->hdr, b) < 0)
                    return nf__err_set(err, NF_ERR_IO,
                                       "%s: cannot write it as BCF to --out %s (a full disk, or a contig, INFO or "
                                       "FORMAT field the --vcf header does not declare: declare it, or write .vcf / "
                                       ".vcf.gz)",
                                       nf_ann_where(a, rc, e, sizeof(e)), a->o->out);
            } else if (vcf_format(a->hdr, b, &a->ks) < 0)
                return nf__err_set(err, NF_ERR_IO, "%s: cannot format the output line",
                                   nf_ann_where(a, rc, e, sizeof(e)));
            a->rows_out++;
        } else {
            const char sep = a->fmt == NF_ANN_CSV ? ',' : '\t';
            for (int i = 0; i < rc->n_alt; i++) {
                const struct nf_ann_alt * al = &rc->alt[i];
                if (al->skip >= 0) continue;
                nf_ann_tissue_values(a, al, vals);
                snprintf(score, sizeof(score), "%.2f", (double) al->dsplice);
                char idx[32], pos[32];
                snprintf(idx, sizeof(idx), "%lld", (long long) a->rows_out++);
                snprintf(pos, sizeof(pos), "%lld", (long long) b->pos + 1);
                const char * id = b->d.id && strcmp(b->d.id, ".") != 0 ? b->d.id : "";
                const char * cols[6] = {idx, bcf_seqname(a->hdr, b), pos, id, b->d.allele[0], b->d.allele[i + 1]};
                for (int c = 0; c < 6; c++) {
                    if (c) kputc(sep, &a->ks);
                    nf_ann_field(&a->ks, cols[c], sep);
                }
                kputc(sep, &a->ks);
                kputs(score, &a->ks);
                for (int t = 0; t < NF_ANN_TISSUES; t++) {
                    kputc(sep, &a->ks);
                    nf_ann_field(&a->ks, vals[t], sep);
                }
                kputc('\n', &a->ks);
            }
        }
        NF_TRY(nf_ann_put(a, err));
        bcf_destroy(b);
        free(rc->alt);
        rc->b = NULL;
        rc->alt = NULL;
        a->written++;
    }
    a->n_recs = 0;
    nf_progress_update(a->prog, a->written);
    return NF_OK;
}

/* one input record: its ALTs, their strands, the jobs */
static int nf_ann_record(struct nf_ann * a, bcf1_t * b, int64_t index, nf_err * err) {
    char e[1024], where[1024];
    if (nf_ann_grow((void **) &a->recs, &a->cap_recs, a->n_recs + 1, sizeof(*a->recs)))
        return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    struct nf_ann_rec * rc = &a->recs[a->n_recs];
    memset(rc, 0, sizeof(*rc));
    rc->b = b;
    rc->index = index;
    const int64_t ri = a->n_recs++;
    nf_ann_where(a, rc, where, sizeof(where));
    const char * chrom = bcf_seqname(a->hdr, b);
    const int n_alt = b->n_allele > 1 ? b->n_allele - 1 : 1;
    rc->n_alt = n_alt;
    if (!(rc->alt = calloc((size_t) n_alt, sizeof(*rc->alt)))) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    a->records++;
    a->alts += n_alt;
    const char * ref = b->d.allele[0];
    int fetched = 0;
    char * seq = NULL;
    int64_t L = 0;
    char contig[1024] = "";
    for (int i = 0; i < n_alt; i++) {
        struct nf_ann_alt * al = &rc->alt[i];
        al->skip = -1;
        const char * alt = b->n_allele > 1 ? b->d.allele[i + 1] : NULL;
        if (strlen(chrom) > 6)
            al->skip = NF_SKIP_CONTIG_NAME;
        else if (!alt)
            al->skip = NF_SKIP_NO_ALT;
        else if (strlen(ref) > 1 || strlen(alt) > 1)
            al->skip = NF_SKIP_NOT_SNV;
        else if (strcmp(alt, "*") == 0 || strcmp(alt, ".") == 0)
            al->skip = NF_SKIP_STAR;
        if (al->skip >= 0) {
            a->skipped[al->skip]++;
            continue;
        }
        a->scored++;
        const int64_t pos = b->pos + 1;
        /* the strands: upstream looks the genes up under the "chr" name; the
         * name as written when the GTF has no contig of that name */
        char cn[1024];
        nf_ann_chr_name(chrom, cn, sizeof(cn));
        const char * gname = nf_genes_has_contig(a->genes, cn) ? cn : chrom;
        al->strands = nf_genes_strands(a->genes, gname, pos, a->o->protein_coding);
        if (!al->strands) {
            a->no_gene++;
            continue;
        }
        if (nf_ann_id(alt[0]) < 0) {
            free(seq);
            return nf__err_set(err, NF_ERR_FORMAT, "%s: ALT '%s' is not one of A, C, G, T, N", where,
                               nf__esc(e, sizeof(e), alt));
        }
        if (!fetched) {
            fetched = 1;
            snprintf(contig, sizeof(contig), "%s", faidx_has_seq(a->fai, cn) ? cn : chrom);
            if (!faidx_has_seq(a->fai, contig)) {
                if (strcmp(cn, chrom) == 0)
                    return nf__err_set(err, NF_ERR_ARG, "%s: contig %s is not in --fasta %s (a gene overlaps it)",
                                       where, nf__esc(e, sizeof(e), cn), a->o->fasta);
                return nf__err_set(err, NF_ERR_ARG, "%s: contig %s (or %s) is not in --fasta %s (a gene overlaps it)",
                                   where, nf__esc(e, sizeof(e), cn), chrom, a->o->fasta);
            }
            const int64_t clen = faidx_seq_len(a->fai, contig);
            const int64_t beg = pos - a->flank, end = pos + a->flank;
            if (pos > clen)
                return nf__err_set(err, NF_ERR_ARG, "%s: POS is past the end of contig %s (length %lld)", where, contig,
                                   (long long) clen);
            if (beg < 1)
                return nf__err_set(err, NF_ERR_ARG,
                                   "%s: the window %lld..%lld starts before contig %s (upstream's pyfaidx refuses "
                                   "it; POS must be > %lld)",
                                   where, (long long) beg, (long long) end, contig, (long long) a->flank);
            const int64_t e2 = end > clen ? clen : end;
            L = e2 - beg + 1;
            if (L < 2 * a->context + 1)
                return nf__err_set(err, NF_ERR_ARG,
                                   "%s: the window %lld..%lld runs %lld nt past the end of contig %s (length %lld); "
                                   "upstream scores a window cut by at most %lld nt, this one leaves no output "
                                   "position",
                                   where, (long long) beg, (long long) end, (long long) (end - clen), contig,
                                   (long long) clen, (long long) (2 * (a->flank - a->context)));
            if (L != 2 * a->flank + 1) a->truncated++;
            hts_pos_t got = 0;
            seq = faidx_fetch_seq64(a->fai, contig, beg - 1, e2 - 1, &got);
            if (!seq || got != L) {
                free(seq);
                return nf__err_set(err, NF_ERR_IO, "%s: --fasta %s: cannot read %s:%lld-%lld", where, a->o->fasta,
                                   contig, (long long) beg, (long long) e2);
            }
            for (int64_t k = 0; k < L; k++)
                if (nf_ann_id(seq[k]) < 0) {
                    const int c = (unsigned char) seq[k];
                    free(seq);
                    return nf__err_set(err, NF_ERR_FORMAT,
                                       "%s: --fasta %s:%lld holds '%c' (0x%02x), not one of A, C, G, T, N", where,
                                       contig, (long long) (beg + k), isprint(c) ? c : '?', c);
                }
            if (toupper((unsigned char) seq[a->flank]) != toupper((unsigned char) ref[0])) {
                a->ref_mismatch++;
                nf_progress_suspend(a->prog);
                fprintf(stderr, "warning: %s: REF %s but the genome has %c there; scored anyway, as upstream does\n",
                        where, nf__esc(e, sizeof(e), ref), seq[a->flank]);
            }
        }
        for (int s = 1; s <= 2; s++) {
            if (!(al->strands & s)) continue;
            if (nf_ann_grow((void **) &a->jobs, &a->cap_jobs, a->n_jobs + 1, sizeof(*a->jobs))) {
                free(seq);
                return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
            }
            struct nf_ann_job * jb = &a->jobs[a->n_jobs++];
            jb->rec = ri;
            jb->alt = i;
            jb->L = L;
            jb->ref = malloc((size_t) L);
            jb->alt_ids = malloc((size_t) L);
            if (!jb->ref || !jb->alt_ids) {
                free(seq);
                return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
            }
            for (int64_t k = 0; k < L; k++) jb->ref[k] = (int8_t) nf_ann_id(seq[k]);
            memcpy(jb->alt_ids, jb->ref, (size_t) L);
            jb->alt_ids[a->flank] = (int8_t) nf_ann_id(alt[0]);
            if (s == 2) /* reverse complement: positions and A<->T, C<->G; N stays */
                for (int w = 0; w < 2; w++) {
                    int8_t * t = w ? jb->alt_ids : jb->ref;
                    for (int64_t x = 0, y = L - 1; x <= y; x++, y--) {
                        const int8_t tx = t[x], ty = t[y];
                        t[x] = ty == 4 ? 4 : (int8_t) (3 - ty);
                        t[y] = tx == 4 ? 4 : (int8_t) (3 - tx);
                    }
                }
            al->pending++;
        }
    }
    free(seq);
    return NF_OK;
}

static int nf_ann_write_header(struct nf_ann * a, nf_err * err) {
    char e[1024];
    a->ks.l = 0;
    if (a->fmt == NF_ANN_VCF) {
        if (bcf_hdr_get_hrec(a->hdr, BCF_HL_INFO, "ID", "SPT", NULL))
            return nf__err_set(err, NF_ERR_ARG, "--vcf %s: already has an INFO/SPT field; annotate writes it",
                               nf__esc(e, sizeof(e), a->o->vcf));
        kstring_t line = {0, 0, NULL};
        ksprintf(&line,
                 "##INFO=<ID=SPT,Number=.,Type=String,Description=\"SpTransformer (nofall annotate%s): per scored "
                 "ALT, ALT|DELTA_SPLICE|",
                 a->o->raw ? " --raw-score" : "");
        for (int t = 0; t < NF_ANN_TISSUES; t++) ksprintf(&line, "%s%s", t ? "|" : "", nf_ann_tissues[t]);
        ksprintf(&line,
                 "; DELTA_SPLICE = max |a_alt - a_ref| over the 201 central positions, a = max(acceptor, "
                 "donor), both strands of the overlapping genes; the tissue values are %s\">",
                 a->o->raw ? "the raw tissue-usage deltas" : "Y/N: the tissue z-score over its 95% threshold");
        const int r = bcf_hdr_append(a->hdr, line.s);
        free(line.s);
        if (r < 0 || bcf_hdr_sync(a->hdr) < 0) return nf__err_set(err, NF_ERR_IO, "cannot add the INFO/SPT header");
        if (a->enc == NF_ANN_BCF) {
            if (bcf_hdr_write(a->hout, a->hdr) < 0)
                return nf__err_set(err, NF_ERR_IO, "--out %s: write failed", nf__esc(e, sizeof(e), a->o->out));
            return NF_OK;
        }
        if (bcf_hdr_format(a->hdr, 0, &a->ks) < 0) return nf__err_set(err, NF_ERR_IO, "cannot format the header");
    } else {
        const char sep = a->fmt == NF_ANN_CSV ? ',' : '\t';
        static const char * const cols[6] = {"#CHROM", "POS", "ID", "REF", "ALT", "score"};
        for (int c = 0; c < 6; c++) {
            kputc(sep, &a->ks);
            kputs(cols[c], &a->ks);
        }
        for (int t = 0; t < NF_ANN_TISSUES; t++) {
            kputc(sep, &a->ks);
            kputs(nf_ann_tissues[t], &a->ks);
        }
        kputc('\n', &a->ks);
    }
    return nf_ann_put(a, err);
}

static int nf_ann_report(const struct nf_ann * a, const char * path, double wall_ms, nf_err * err) {
    cJSON * d = cJSON_CreateObject();
    cJSON_AddStringToObject(d, "command", "annotate");
    cJSON_AddStringToObject(d, "version", NF_VERSION);
    cJSON_AddStringToObject(d, "model", a->o->model);
    cJSON_AddStringToObject(d, "vcf", a->o->vcf);
    cJSON_AddStringToObject(d, "fasta", a->o->fasta);
    cJSON_AddStringToObject(d, "genes", a->o->genes);
    cJSON_AddStringToObject(d, "out", a->o->out);
    cJSON_AddStringToObject(d, "device", a->o->device);
    cJSON_AddBoolToObject(d, "raw_score", a->o->raw);
    cJSON_AddBoolToObject(d, "protein_coding_only", a->o->protein_coding);
    cJSON_AddNumberToObject(d, "batch", (double) a->o->batch);
    if (a->mp->size > 1) cJSON_AddNumberToObject(d, "ranks", (double) a->mp->size); /* the counts are totals */
    cJSON_AddNumberToObject(d, "records", (double) a->records);
    cJSON_AddNumberToObject(d, "alts", (double) a->alts);
    cJSON_AddNumberToObject(d, "scored", (double) a->scored);
    cJSON_AddNumberToObject(d, "scored_no_gene", (double) a->no_gene);
    cJSON_AddNumberToObject(d, "scored_ref_mismatch", (double) a->ref_mismatch);
    cJSON_AddNumberToObject(d, "records_window_cut_at_contig_end", (double) a->truncated);
    cJSON * sk = cJSON_AddObjectToObject(d, "skipped");
    for (int i = 0; i < NF_SKIP_N; i++) cJSON_AddNumberToObject(sk, nf_skip_names[i], (double) a->skipped[i]);
    cJSON_AddNumberToObject(d, "rows_written", (double) a->rows_out);
    cJSON_AddNumberToObject(d, "forwards", (double) a->forwards);
    cJSON_AddNumberToObject(d, "windows", (double) a->windows);
    cJSON_AddBoolToObject(d, "batch_reuse", !a->o->no_reuse);
    cJSON_AddNumberToObject(d, "windows_computed", (double) a->computed);
    cJSON_AddNumberToObject(d, "windows_reusing_encoder_rows", (double) a->reused);
    cJSON_AddNumberToObject(d, "forward_ms", a->forward_ms);
    cJSON_AddNumberToObject(d, "wall_ms", wall_ms);
    char * s = cJSON_Print(d);
    cJSON_Delete(d);
    if (!s) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    struct nf_cli_outfile of;
    int rc = nf_cli_outfile_open(&of, path, "report", err);
    if (rc == NF_OK) {
        FILE * f = nf_cli_outfile_fp(&of);
        if (!f || fputs(s, f) < 0 || fputc('\n', f) < 0) rc = nf__err_set(err, NF_ERR_IO, "%s: write failed", path);
        if (rc == NF_OK) rc = nf_cli_outfile_commit(&of, err);
        if (rc != NF_OK) nf_cli_outfile_abort(&of);
    }
    free(s);
    return rc;
}

/* ---- MPI (README "Running on a cluster with mpirun") -------------------------------------
 * Every rank reads the whole VCF; record k (1-based) is scored by rank
 * (k - 1) % size. The records go in chunks: each rank scores its records of
 * the chunk, every rank says whether it failed (nf_cli_mpi_agree), the
 * scores go to rank 0, which writes the chunk's records in input order. */

/* a record another rank scores: rank 0 keeps it until its scores come */
static int nf_ann_remote(struct nf_ann * a, bcf1_t * b, int64_t index, int owner, nf_err * err) {
    if (nf_ann_grow((void **) &a->recs, &a->cap_recs, a->n_recs + 1, sizeof(*a->recs))) {
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

static void nf_ann_discard(struct nf_ann * a) {
    for (int64_t i = 0; i < a->n_recs; i++) {
        if (a->recs[i].b) bcf_destroy(a->recs[i].b);
        free(a->recs[i].alt);
    }
    a->n_recs = 0;
}

/* on the wire, per record: int64 index, int32 n_alt; per ALT: int32 skip,
 * float dsplice, float dtissue[15] (one machine type across the job) */
#define NF_ANN_WIRE_REC (8 + 4)
#define NF_ANN_WIRE_ALT (4 + 4 + 4 * NF_ANN_TISSUES)

/* this rank's scores of the chunk to rank 0, into its remote records */
static int nf_ann_exchange(struct nf_ann * a, nf_err * err) {
    const struct nf_cli_mpi * mp = a->mp;
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
                memcpy(p + 8, r->alt[k].dtissue, 4 * NF_ANN_TISSUES);
                p += NF_ANN_WIRE_ALT;
            }
        }
        nf_ann_discard(a);
        if (rc != NF_OK) n = 0; /* still take part in the gather */
    }
    char * all = NULL;
    int64_t * lens = calloc((size_t) mp->size, sizeof(int64_t));
    int64_t *off = calloc((size_t) mp->size, sizeof(int64_t)), *end = calloc((size_t) mp->size, sizeof(int64_t));
    if (!lens || !off || !end) {
        /* cannot take part: MPI's collectives would hang; out of memory for
         * three small arrays ends the job */
        fprintf(stderr, "error: rank %d: out of memory\n", mp->rank);
        exit(1);
    }
    const int grc = nf_cli_mpi_gather(mp, blob, n, &all, lens, err);
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
                                 nf_ann_where(a, r, e, sizeof(e)), w, (long long) idx, (int) na);
                break;
            }
            const char * p = all + off[w] + NF_ANN_WIRE_REC;
            for (int k = 0; k < na; k++, p += NF_ANN_WIRE_ALT) {
                int32_t sk;
                memcpy(&sk, p, 4);
                r->alt[k].skip = sk;
                memcpy(&r->alt[k].dsplice, p + 4, 4);
                memcpy(r->alt[k].dtissue, p + 8, 4 * NF_ANN_TISSUES);
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
    free(lens);
    free(off);
    free(end);
    return rc;
}

/* records per rank in one chunk: at least a full --batch */
static int64_t nf_ann_chunk(const struct nf_ann * a) {
    int64_t per = a->o->batch > 1024 ? a->o->batch : 1024;
#ifdef NF_TEST_HOOKS
    const char * t = getenv("NOFALL_TEST_ANNOTATE_CHUNK"); /* tests: several chunks on a small VCF */
    if (t && atoll(t) > 0) per = atoll(t);
#endif
    return per * a->mp->size;
}

/* the malformed-record message (the same on every rank: all read the VCF) */
static int nf_ann_malformed(const struct nf_ann * a, int64_t bad, nf_err * err) {
    char e[1024];
    return nf__err_set(err, NF_ERR_FORMAT,
                       "--vcf %s: data record %lld is malformed (htslib could not parse it, or POS is not a positive "
                       "integer)",
                       nf__esc(e, sizeof(e), a->o->vcf), (long long) bad);
}

/* read one record into *b: *got 1, or 0 at the end; NF_OK or the error */
static int nf_ann_read(struct nf_ann * a, bcf1_t ** b, int64_t * index, int * got, nf_err * err) {
    *got = 0;
    if (!*b && !(*b = bcf_init())) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    const int r = bcf_read(a->in, a->hdr, *b);
    if (r == -1) return NF_OK;
    if (r < -1) return nf_ann_malformed(a, *index + 1, err);
    ++*index;
    if (((*b)->errcode & ~(BCF_ERR_CTG_UNDEF | BCF_ERR_TAG_UNDEF)) || bcf_unpack(*b, BCF_UN_STR) < 0 || (*b)->pos < 0 ||
        (*b)->n_allele < 1)
        return nf_ann_malformed(a, *index, err);
    *got = 1;
    return NF_OK;
}

/* one process: the records as they come, written as their batch finishes */
static int nf_ann_loop_one(struct nf_ann * a, nf_err * err) {
    int64_t index = 0;
    bcf1_t * b = NULL;
    int rc, got;
    while ((rc = nf_ann_read(a, &b, &index, &got, err)) == NF_OK && got) {
        bcf1_t * kept = b;
        b = NULL;
        if ((rc = nf_ann_record(a, kept, index, err)) != NF_OK) break;
        /* a full batch, or many records waiting: run; no job waiting: write */
        if (2 * a->n_jobs >= a->o->batch || a->n_recs >= 4096)
            if ((rc = nf_ann_run_jobs(a, err)) != NF_OK) break;
        if (a->n_jobs == 0 && (rc = nf_ann_flush(a, err)) != NF_OK) break;
    }
    if (b) bcf_destroy(b);
    if (rc == NF_OK) rc = nf_ann_run_jobs(a, err);
    if (rc == NF_OK) rc = nf_ann_flush(a, err);
    return rc;
}

/* the ranks of an MPI job: chunk by chunk; *failed_rank: the rank whose error err holds */
static int nf_ann_loop_mpi(struct nf_ann * a, int * failed_rank, nf_err * err) {
    const struct nf_cli_mpi * mp = a->mp;
    const int64_t chunk = nf_ann_chunk(a);
    int64_t index = 0;
    bcf1_t * b = NULL;
    int rc = NF_OK, eof = 0;
    while (!eof) {
        for (int64_t n = 0; rc == NF_OK && n < chunk; n++) {
            int got = 0;
            if ((rc = nf_ann_read(a, &b, &index, &got, err)) != NF_OK || !got) {
                eof = 1;
                break;
            }
            bcf1_t * kept = b;
            b = NULL;
            const int owner = (int) ((index - 1) % mp->size);
            if (owner == mp->rank) {
                if ((rc = nf_ann_record(a, kept, index, err)) != NF_OK) break;
                if (2 * a->n_jobs >= a->o->batch) rc = nf_ann_run_jobs(a, err);
            } else if (mp->rank == 0)
                rc = nf_ann_remote(a, kept, index, owner, err);
            else
                bcf_destroy(kept);
        }
        if (rc == NF_OK) rc = nf_ann_run_jobs(a, err);
        /* the ranks disagreeing on the end of the VCF: not the same file */
        int64_t ends[2] = {eof, 1};
        if ((rc = nf_cli_mpi_agree(mp, rc, err, failed_rank)) != NF_OK) break;
        nf_cli_mpi_sum_i64(mp, ends, 2, err);
        if (ends[0] != 0 && ends[0] != ends[1])
            rc = nf__err_set(err, NF_ERR_MISMATCH, "rank %d: --vcf ended after %lld records on %lld of %lld ranks",
                             mp->rank, (long long) index, (long long) ends[0], (long long) ends[1]);
        if (rc == NF_OK) rc = nf_ann_exchange(a, err);
        if (rc == NF_OK && mp->rank == 0) rc = nf_ann_flush(a, err);
        if ((rc = nf_cli_mpi_agree(mp, rc, err, failed_rank)) != NF_OK) break;
        if (mp->rank == 0) nf_cli_test_delay("annotate-chunk");
    }
    if (b) bcf_destroy(b);
    return rc;
}

/* setup, first part: --out (rank 0), --genes, --fasta on rank 0 (which
 * creates the .fai when missing, before any other rank looks for it) */
static int nf_ann_setup1(struct nf_ann * a, nf_err * err) {
    const struct nf_ann_opts * o = a->o;
    char e[1024];
    int rc;
    if (a->mp->rank == 0) {
        if ((rc = nf_cli_outfile_open(&a->of, o->out, "--out", err)) != NF_OK) return rc;
        /* htslib writes the temporary file by its name (the same inode:
         * nf_cli_outfile_close fsyncs it through the descriptor kept open) */
        if (a->enc == NF_ANN_PLAIN)
            a->out = nf_cli_outfile_fp(&a->of);
        else if (a->enc == NF_ANN_BGZF)
            a->bgz = bgzf_open(a->of.tmp, "w");
        else
            a->hout = hts_open(a->of.tmp, "wb");
        if (!a->out && !a->bgz && !a->hout)
            return nf__err_set(err, NF_ERR_IO, "--out %s: cannot write", nf__esc(e, sizeof(e), o->out));
    }
    if ((rc = nf_genes_load(o->genes, &a->genes, err)) != NF_OK) return rc;
    /* htslib trusts the .fai: a line of 0 bases divides by zero */
    if (a->mp->rank == 0 && (rc = nf__fai_check(o->fasta, err)) != NF_OK) return rc;
    if (a->mp->rank == 0 && !(a->fai = fai_load3(o->fasta, NULL, NULL, FAI_CREATE)))
        return nf__err_set(err, NF_ERR_IO,
                           "--fasta %s: not a FASTA file htslib can index (plain, or bgzip-compressed; the lines of "
                           "a record all one length)",
                           nf__esc(e, sizeof(e), o->fasta));
    return NF_OK;
}

/* setup, second part: --fasta on the other ranks, --vcf, the device, the model, the header */
static int nf_ann_setup2(struct nf_ann * a, nf_err * err) {
    const struct nf_ann_opts * o = a->o;
    char e[1024];
    int rc;
    if (!a->fai && (rc = nf__fai_check(o->fasta, err)) != NF_OK) return rc;
    if (!a->fai && !(a->fai = fai_load3(o->fasta, NULL, NULL, FAI_CREATE)))
        return nf__err_set(err, NF_ERR_IO, "--fasta %s: cannot open it or its .fai", nf__esc(e, sizeof(e), o->fasta));
    if (!(a->in = hts_open(o->vcf, "r")))
        return nf__err_set(err, NF_ERR_IO, "--vcf %s: cannot open", nf__esc(e, sizeof(e), o->vcf));
    if (a->in->format.category != variant_data || !(a->hdr = bcf_hdr_read(a->in)))
        return nf__err_set(err, NF_ERR_FORMAT, "--vcf %s: not a VCF/BCF file (no header)",
                           nf__esc(e, sizeof(e), o->vcf));
    if ((rc = nf_cli_backend_init(a->device, 0, &a->be, err)) != NF_OK) return rc;
    if ((rc = nf_model_load(a->be, o->model, &a->m, err)) != NF_OK) return rc;
    if (o->no_reuse && (rc = nf_model_set_option(a->m, "batch_reuse", 0, err)) != NF_OK) return rc;
    struct nf_config_item ci;
    for (int i = 0; nf_model_config_item(a->m, i, &ci); i++)
        if (strcmp(ci.key, "context_len") == 0) a->context = ci.num;
    if (a->context <= 0) return nf__err_set(err, NF_ERR_ARG, "--model: no context_len");
    a->flank = a->context + 100;
    if (a->mp->rank == 0) return nf_ann_write_header(a, err);
    return NF_OK;
}

/* the compressed / BCF --out ended (their last blocks, the BGZF EOF block);
 * NF_OK, or the error when it is still NF_OK */
static int nf_ann_close_out(struct nf_ann * a, int rc, nf_err * err) {
    char e[1024];
    int bad = 0;
    if (a->bgz) bad |= bgzf_close(a->bgz) < 0;
    if (a->hout) bad |= hts_close(a->hout) != 0;
    a->bgz = NULL;
    a->hout = NULL;
    if (bad && rc == NF_OK)
        return nf__err_set(err, NF_ERR_IO, "--out %s: write failed", nf__esc(e, sizeof(e), a->o->out));
    return rc;
}

/* the data records of --vcf for the progress bar, 0 when not cheaply known:
 * its index's counts (.tbi / .csi next to it), else one pass over it when it
 * is a regular file (never a pipe or a FIFO: that would consume it) */
static long long nf_ann_count(const char * path) {
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) return 0;
    htsFile * f = hts_open(path, "r");
    if (!f) return 0;
    bcf_hdr_t * h = f->format.category == variant_data ? bcf_hdr_read(f) : NULL;
    long long n = 0;
    if (h) {
        hts_idx_t * idx = NULL;
        tbx_t * tbx = NULL;
        if (f->format.format == bcf)
            idx = bcf_index_load3(path, NULL, HTS_IDX_SILENT_FAIL);
        else if (f->format.compression == bgzf && (tbx = tbx_index_load3(path, NULL, HTS_IDX_SILENT_FAIL)))
            idx = tbx->idx;
        if (idx) {
            for (int i = 0; i < hts_idx_nseq(idx); i++) {
                uint64_t m = 0, u = 0;
                if (hts_idx_get_stat(idx, i, &m, &u) == 0) n += (long long) (m + u);
            }
            if (tbx)
                tbx_destroy(tbx);
            else
                hts_idx_destroy(idx);
        }
        if (n == 0 && f->format.format == bcf) {
            bcf1_t * b = bcf_init();
            while (b && bcf_read(f, h, b) == 0) n++;
            if (b) bcf_destroy(b);
        } else if (n == 0) {
            kstring_t ks = {0, 0, NULL};
            while (hts_getline(f, 2 /* KS_SEP_LINE */, &ks) >= 0)
                if (ks.l && ks.s[0] != '#') n++;
            free(ks.s);
        }
        bcf_hdr_destroy(h);
    }
    hts_close(f);
    return n;
}

static int nf_ann_main(const struct nf_ann_opts * o, const struct nf_cli_mpi * mp, int * failed_rank, nf_err * err) {
    char e[1024];
    struct nf_ann a;
    memset(&a, 0, sizeof(a));
    a.o = o;
    a.mp = mp;
    a.of.fd = a.of.slot = -1;
    char device[64];
    nf_cli_mpi_device(mp, o->device, device, sizeof(device));
    a.device = device;
    *failed_rank = -1;
    int rc = NF_OK;
    const double t_start = nf_cli_now_ms();
    size_t ol = strlen(o->out);
    a.enc = NF_ANN_PLAIN;
    if (ol > 4 && strcmp(o->out + ol - 4, ".bcf") == 0) {
        a.fmt = NF_ANN_VCF;
        a.enc = NF_ANN_BCF;
        ol = 0;
    } else if (ol > 7 && strcmp(o->out + ol - 3, ".gz") == 0) {
        a.enc = NF_ANN_BGZF;
        ol -= 3;
    }
    if (ol > 4 && strncmp(o->out + ol - 4, ".csv", 4) == 0)
        a.fmt = NF_ANN_CSV;
    else if (ol > 4 && strncmp(o->out + ol - 4, ".tsv", 4) == 0)
        a.fmt = NF_ANN_TSV;
    else if (ol > 4 && strncmp(o->out + ol - 4, ".vcf", 4) == 0)
        a.fmt = NF_ANN_VCF;
    else if (a.enc != NF_ANN_BCF)
        rc = nf__err_set(err, NF_ERR_ARG,
                         "--out %s: the name must end in .vcf, .vcf.gz, .bcf, .tsv, .tsv.gz, .csv or .csv.gz",
                         nf__esc(e, sizeof(e), o->out));
    const char * ins[3] = {o->vcf, o->fasta, o->genes};
    for (int i = 0; rc == NF_OK && i < 3; i++)
        if (nf_cli_same_file(o->out, ins[i]))
            rc = nf__err_set(err, NF_ERR_ARG, "--out %s is an input", nf__esc(e, sizeof(e), o->out));
    if (rc == NF_OK) {
        char type[64];
        nf_cli_model_type(o->model, type, sizeof(type));
        if (strcmp(type, "sptransformer") != 0)
            rc = nf__err_set(err, NF_ERR_ARG, "--model %s: not a SpTransformer model", nf__esc(e, sizeof(e), o->model));
    }
    if (rc == NF_OK) rc = nf_ann_setup1(&a, err);
    if ((rc = nf_cli_mpi_agree(mp, rc, err, failed_rank)) != NF_OK) goto done;
    rc = nf_ann_setup2(&a, err);
    if ((rc = nf_cli_mpi_agree(mp, rc, err, failed_rank)) != NF_OK) goto done;
    /* the bar: rank 0's, over the records of every rank (rank 0 writes them all) */
    if (mp->rank == 0 && nf_progress_enabled(o->progress))
        a.prog = nf_progress_begin("annotate", "records", nf_ann_count(o->vcf), o->progress);
    if (mp->size == 1)
        rc = nf_ann_loop_one(&a, err);
    else
        rc = nf_ann_loop_mpi(&a, failed_rank, err);
    nf_progress_end(a.prog);
    a.prog = NULL;
    if (rc != NF_OK) goto done;
    if (mp->size > 1) {
        /* the totals (every rank past its last agree: all take part) */
        int64_t c[10 + NF_SKIP_N] = {a.records,   a.alts,     a.scored,  a.no_gene,  a.ref_mismatch,
                                     a.truncated, a.forwards, a.windows, a.computed, a.reused};
        for (int i = 0; i < NF_SKIP_N; i++) c[10 + i] = a.skipped[i];
        nf_cli_mpi_sum_i64(mp, c, 10 + NF_SKIP_N, err);
        nf_cli_mpi_sum_f64(mp, &a.forward_ms, 1, err);
        a.records = c[0], a.alts = c[1], a.scored = c[2], a.no_gene = c[3];
        a.ref_mismatch = c[4], a.truncated = c[5], a.forwards = c[6], a.windows = c[7];
        a.computed = c[8], a.reused = c[9];
        for (int i = 0; i < NF_SKIP_N; i++) a.skipped[i] = c[10 + i];
    }
    char rp[4200];
    snprintf(rp, sizeof(rp), "%s.report.json", o->out);
    if (mp->rank == 0) {
        if ((rc = nf_ann_close_out(&a, NF_OK, err)) == NF_OK && (rc = nf_cli_outfile_close(&a.of, err)) == NF_OK &&
            (rc = nf_ann_report(&a, rp, nf_cli_now_ms() - t_start, err)) == NF_OK)
            rc = nf_cli_outfile_commit(&a.of, err);
    }
    /* rank 0's writing failed: every rank fails */
    if ((rc = nf_cli_mpi_agree(mp, rc, err, failed_rank)) != NF_OK) goto done;
    if (mp->rank != 0) goto done;
    if (o->progress != NF_PROGRESS_QUIET) {
        fprintf(stderr,
                "annotate: %lld records, %lld ALTs: %lld scored (%lld with no gene: score 0; %lld REF mismatches "
                "scored), skipped:",
                (long long) a.records, (long long) a.alts, (long long) a.scored, (long long) a.no_gene,
                (long long) a.ref_mismatch);
        for (int i = 0; i < NF_SKIP_N; i++) fprintf(stderr, " %s=%lld", nf_skip_names[i], (long long) a.skipped[i]);
        fprintf(stderr, "; %lld forwards (%lld windows, %lld computed, %lld reusing encoder rows) in %.1f s",
                (long long) a.forwards, (long long) a.windows, (long long) a.computed, (long long) a.reused,
                a.forward_ms / 1000.0);
        if (mp->size > 1) fprintf(stderr, " on %d ranks", mp->size);
        fprintf(stderr, "; %lld rows to %s\n", (long long) a.rows_out, nf__esc(e, sizeof(e), o->out));
    }
    printf("RECORDS=%lld\nALTS_SCORED=%lld\nALTS_SKIPPED=%lld\nFORWARDS=%lld\nWINDOWS=%lld\nREPORT=%s\n",
           (long long) a.records, (long long) a.scored, (long long) (a.alts - a.scored), (long long) a.forwards,
           (long long) a.windows, nf__esc(e, sizeof(e), rp));
done:
    nf_progress_end(a.prog);
    (void) nf_ann_close_out(&a, NF_ERR_IO, err); /* still open: an error path, whose error stands */
    nf_ann_discard(&a);
    for (int64_t i = 0; i < a.n_jobs; i++) {
        free(a.jobs[i].ref);
        free(a.jobs[i].alt_ids);
    }
    free(a.recs);
    free(a.jobs);
    free(a.tok);
    free(a.logits);
    free(a.probs);
    free(a.ks.s);
    if (rc != NF_OK) nf_cli_outfile_abort(&a.of);
    if (a.hdr) bcf_hdr_destroy(a.hdr);
    if (a.in) hts_close(a.in);
    if (a.fai) fai_destroy(a.fai);
    nf_genes_free(a.genes);
    nf_model_free(a.m);
    nf_backend_free(a.be);
    return rc;
}

int nf_cmd_annotate(int argc, char ** argv) {
    /* under mpirun: one rank of the job (all ranks parse the same argv) */
    struct nf_cli_mpi mp;
    nf_err err = {0};
    if (nf_cli_mpi_init(&argc, &argv, &mp, &err) != NF_OK) {
        nf_cli_print_error(&err, err.code);
        return 1;
    }
    struct nf_ann_opts o;
    int ret = 2;
    /* a usage error is every rank's: rank 0 prints it */
    const int quiet = nf_cli_mpi_quiet_begin(&mp);
    const int parsed = nf_ann_parse(argc, argv, &o);
    nf_cli_mpi_quiet_end(quiet);
    if (parsed) {
        nf_cli_signals_install();
        int failed_rank = -1;
        const int rc = nf_ann_main(&o, &mp, &failed_rank, &err);
        ret = nf_cli_mpi_command_exit(&mp, rc, &err, failed_rank);
    }
    nf_cli_mpi_finalize(&mp);
    return ret;
}
#endif
