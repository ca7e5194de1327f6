/*
 * nofall-genomics.h -- SpTransformer's genomic pipelines in libnofall-genomics
 * (README "annotate", "SpTransformer inputs"), for the command line
 * (`nofall run`, `nofall annotate`) and the Python package alike. A library
 * of its own (it links htslib; libnofall does not):
 *
 *   nf_seq        token ids (A=0 C=1 G=2 T/U=3 N=4) from a seeded generator,
 *                 a string, a .npy of ids or a FASTA file (a region of it),
 *                 flanked as the model takes them.
 *   nf_genes      the `gene` rows of a GTF by contig: the strands of the genes
 *                 overlapping a position.
 *   nf_annotator  `annotate`: the SNVs of a VCF/BCF scored against a
 *                 reference genome (windows, strands, batched forwards with
 *                 reuse, delta-splice, tissue z-scores), written as .vcf,
 *                 .vcf.gz, .bcf, .tsv[.gz] or .csv[.gz] to a path the caller
 *                 gives, with the report's content (JSON) and its counts.
 *
 * Errors as in nofall.h: result codes, messages naming the flag, file and
 * record (the messages name the inputs by the CLI's flags: --vcf, --fasta,
 * --genes, --out, --model). Nothing is printed: warnings and progress go to
 * the caller's hooks. Built without htslib, the FASTA and GTF readers and
 * annotate return NF_ERR_UNSUPPORTED (nf_genomics_has_htslib() says so).
 */
#ifndef NOFALL_GENOMICS_H
#define NOFALL_GENOMICS_H

#include "nofall.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 1 when built with htslib (FASTA, GTF, VCF/BCF), else 0 */
NF_API int nf_genomics_has_htslib(void);

/* ---- SpTransformer's sequence inputs ---------------------------------------- */
typedef struct nf_seq {
    int64_t B, L;  /* sequences, tokens each (flanks included)       */
    int8_t * ids;  /* B x L ids: A=0 C=1 G=2 T/U=3 N=4                */
    int pad;       /* 1: the flanks were added (pad mode)             */
    int64_t flank; /* N added on each side (0 when the input has them) */
    char source[32];
    /* where the B x L ids come from (a FASTA file): record b's name
     * (names[b], NULL without names) and the 1-based position of its ids[0]
     * (starts[b]; a --region's start, flanks included in mode given) */
    char ** names;
    int64_t * starts;
    /* how the flanks were made: NF_SEQ_GIVEN (the input has them), NF_SEQ_PAD
     * (N added) or NF_SEQ_GENOME (nf_seq_fasta with a region: the FASTA's
     * context bases beyond the region on each side; starts[b] is then the
     * region's start - context, 0 or less near a contig's start); past_ends:
     * in mode genome, the N put where a flank runs past the contig's start /
     * end (as SpliceAI pads at contig ends), else 0 */
    int mode;
    int64_t past_ends[2];
} nf_seq;
enum { NF_SEQ_GIVEN = 0, NF_SEQ_PAD = 1, NF_SEQ_GENOME = 2 };
/* "given", "pad" or "genome": seq's mode as --context names it */
NF_API const char * nf_seq_mode_name(const nf_seq * s);
NF_API void nf_seq_free(nf_seq * s);
NF_API int nf_seq_id(int c); /* a nucleotide letter's id (any case, T = U), -1 if none */
/* pad: NF_SEQ_PAD (1) adds `context` N on each side, NF_SEQ_GIVEN (0) takes the
 * input as already flanked; NF_SEQ_GENOME (2, --context genome) is
 * nf_seq_fasta's with a region only (an error elsewhere) */
NF_API int nf_seq_seeded(nf_seq * s, uint64_t seed, int64_t n, int64_t context, nf_err * err); /* always padded */
NF_API int nf_seq_string(nf_seq * s, const char * text, int pad, int64_t context, nf_err * err);
NF_API int nf_seq_npy(nf_seq * s, const char * path, int pad, int64_t context, nf_err * err);
/* every record (all one length) or one region "chr:start-end" (1-based,
 * inclusive); the .fai is checked, and built beside path when missing.
 * pad NF_SEQ_GENOME (with a region): ids are the context bases of the FASTA
 * before the region, the region, the context bases after it, N past the
 * contig's ends; every position of the region is scored */
NF_API int nf_seq_fasta(nf_seq * s, const char * path, const char * region, int pad, int64_t context, nf_err * err);

/* ---- the gene index -------------------------------------------------------- */
typedef struct nf_genes nf_genes;
/* the `gene` rows of a GTF (plain, gzip or bgzip) */
NF_API int nf_genes_load(const char * path, nf_genes ** out, nf_err * err);
NF_API void nf_genes_free(nf_genes * gs);
NF_API int nf_genes_has_contig(const nf_genes * gs, const char * name);
NF_API int64_t nf_genes_count(const nf_genes * gs);
/* strands of the genes overlapping pos (1-based): bit 1 '+', bit 2 '-';
 * protein_coding: only genes of that type */
NF_API int nf_genes_strands(const nf_genes * gs, const char * contig, int64_t pos, int protein_coding);
/* the genes overlapping pos (1-based; protein_coding: only genes of that
 * type), ordered by start then name: up to max of them into names (gene_name,
 * else gene_id; owned by gs) and strands ('+' / '-'); returns how many there
 * are in all */
NF_API int nf_genes_at(const nf_genes * gs, const char * contig, int64_t pos, int protein_coding, const char ** names,
                       char * strands, int max);

/* ---- annotate ------------------------------------------------------------------ */
#define NF_ANNOTATE_TISSUES 15
NF_API const char * nf_annotate_tissue(int t); /* "Adipose Tissue", ... (t < 15) */

/* why an ALT is not scored (the report's "skipped" keys) */
enum {
    NF_ANNOTATE_SKIP_CONTIG_NAME = 0, /* contig_name_over_6_characters */
    NF_ANNOTATE_SKIP_NOT_SNV,         /* not_snv                       */
    NF_ANNOTATE_SKIP_NO_ALT,          /* no_alt                        */
    NF_ANNOTATE_SKIP_STAR,            /* alt_star                      */
    NF_ANNOTATE_SKIP_N
};
NF_API const char * nf_annotate_skip_name(int reason);

typedef struct nf_annotate_opts {
    const char * model;  /* a SpTransformer model (directory or .ckpt)       */
    const char * device; /* "cpu" (the default), "opencl[:N]", "cuda[:N]"    */
    const char *vcf, *fasta, *genes;
    const char * out;   /* the output's name: its format (.vcf, .vcf.gz, .bcf, .tsv[.gz],
                         .csv[.gz]) and the report's "out"; written to the path
                         nf_annotate_open is given */
    int raw_score;      /* the raw tissue deltas, not the Y/N flags       */
    int protein_coding; /* only protein-coding genes give strands         */
    int no_reuse;       /* every window in full (the model's batch_reuse 0) */
    int64_t batch;      /* windows per forward, 2..4096 (16)              */
    int format;         /* a VCF / BCF's INFO: NF_ANNOTATE_FORMAT_* (0: SpliceAI's) */
    /* out_type: bcftools' -O: 'v' VCF, 'z' bgzipped VCF, 'b' compressed BCF, 'u'
     * uncompressed BCF, whatever out's name (not a .tsv / .csv name); 0: by out's
     * name. out "-": standard output (nf_annotate_open given "-"), 'v' unless set */
    char out_type;
    /* write_index: bcftools' --write-index[=FMT]: the output indexed once
     * written (nf_annotate_write_index), a NF_ANNOTATE_INDEX_*; only a
     * bgzipped VCF (CSI or TBI) or a compressed BCF (CSI) can be, never "-" */
    int write_index;
} nf_annotate_opts;
enum {
    NF_ANNOTATE_INDEX_NONE = 0,
    NF_ANNOTATE_INDEX_CSI = 1, /* OUT.csi, min_shift 14 (bcftools' default) */
    NF_ANNOTATE_INDEX_TBI = 2  /* OUT.tbi (tabix), a bgzipped VCF only     */
};
enum {
    NF_ANNOTATE_FORMAT_SPLICEAI = 0,     /* INFO/SpliceAI ALLELE|SYMBOL|DS_AG|DS_AL|DS_DG|DS_DL|DP_AG|DP_AL|DP_DG|DP_DL
                                            per ALT and overlapping gene; INFO/SPT_DS, SPT_TISSUES per ALT */
    NF_ANNOTATE_FORMAT_SPTRANSFORMER = 1 /* upstream's: INFO/SPT ALT|DELTA_SPLICE|<15 tissues> per scored ALT */
};
NF_API void nf_annotate_opts_init(nf_annotate_opts * o); /* zeros, device "cpu", batch 16 */

/* the counts (summed over the ranks of a sharded run) */
typedef struct nf_annotate_stats {
    int64_t records, alts, scored; /* data records, their ALTs, the ALTs scored  */
    int64_t scored_no_gene;        /* scored 0: no gene overlaps                 */
    int64_t scored_ref_mismatch;   /* REF differs from the genome (scored anyway) */
    int64_t window_cut;            /* windows cut at a contig end                */
    int64_t skipped[NF_ANNOTATE_SKIP_N];
    int64_t rows_written; /* output rows (the writer's)                    */
    int64_t forwards, windows, windows_computed, windows_reused;
    double forward_ms;
    int ranks;
} nf_annotate_stats;

/* The caller's side. Every member may be 0 / NULL (one process, no
 * progress, warnings dropped, the backend by nf_backend_init(device, 0)).
 * Sharding (the CLI's MPI layer): record k (1-based) is scored by rank
 * (k - 1) % size; records go in chunks of `chunk` per rank (0: max(batch,
 * 1024)); every rank calls the same functions in the same order; rank 0
 * alone writes (nf_annotate_open given a path), the others' scores reach it
 * through gather. agree: collective "did any rank fail": NF_OK on every
 * rank when none did, else an error (in err) on all. */
typedef struct nf_annotate_hooks {
    void * ctx;
    void (*progress)(void * ctx, int64_t records_written); /* the writer, after each flush   */
    void (*warning)(void * ctx, const char * msg);         /* e.g. a REF mismatch, no prefix */
    int (*backend)(void * ctx, const char * device, nf_backend ** out, nf_err * err);
    int rank, size;
    int64_t chunk;
    int (*agree)(void * ctx, int rc, nf_err * err);
    int (*sum_i64)(void * ctx, int64_t * v, int n, nf_err * err);
    int (*sum_f64)(void * ctx, double * v, int n, nf_err * err);
    /* every rank's n bytes to rank 0, in rank order (all: malloc'd, lens: size entries) */
    int (*gather)(void * ctx, const void * data, int64_t n, char ** all, int64_t * lens, nf_err * err);
    void (*chunk_done)(void * ctx); /* rank 0, after writing a chunk */
} nf_annotate_hooks;

typedef struct nf_annotator nf_annotator;
/* The stages, in this order (a sharded caller agrees between them):
 *   new    the arguments: the output name, no output that is an input, a
 *          SpTransformer model. o's strings and h are kept (not copied).
 *   open   out_path (the writer: NULL on the other ranks) opened, --genes
 *          read, --fasta's index checked (and built) when out_path is given
 *   load   --fasta (if not yet), --vcf's header, the backend, the model;
 *          the output's header written
 *   run    every record scored and written (sharded: the totals summed)
 *   close  the output's last blocks written and closed (the writer)
 * then the report (JSON text) and the counts; free on every path. */
NF_API int nf_annotate_new(const nf_annotate_opts * o, const nf_annotate_hooks * h, nf_annotator ** out, nf_err * err);
NF_API int nf_annotate_open(nf_annotator * a, const char * out_path, nf_err * err);
NF_API int nf_annotate_load(nf_annotator * a, nf_err * err);
NF_API int nf_annotate_run(nf_annotator * a, nf_err * err);
NF_API int nf_annotate_close(nf_annotator * a, nf_err * err);
/* o->write_index's name suffix (".csi", ".tbi"; NULL for none): the index
 * of OUT is OUT.csi / OUT.tbi, as bcftools names it */
NF_API const char * nf_annotate_index_suffix(const nf_annotate_opts * o);
/* after close, the writer with o->write_index set: the closed output indexed
 * (htslib's bcf_index_build3: CSI, or TBI) into index_path (the caller's
 * temporary name, committed with the output's); records out of order (an
 * unsorted --vcf) an error saying so. A no-op on the other ranks. */
NF_API int nf_annotate_write_index(nf_annotator * a, const char * index_path, nf_err * err);
NF_API void nf_annotate_get_stats(const nf_annotator * a, nf_annotate_stats * s);
/* report.json's content (wall_ms: since new); malloc'd, free() it */
NF_API char * nf_annotate_report_json(const nf_annotator * a, nf_err * err);
NF_API void nf_annotate_free(nf_annotator * a);
/* `annotate --plot-variant CHR:POS:REF:ALT --plot FILE.svg` (docs/plots.md)
 * on one process: prepare, after load and before run, parses the variant
 * and builds its ref and alt windows as nf_annotate_plot_variant does (a
 * bad variant, contig or window an error before any scoring); run takes
 * their tracks from its own forward when one of its jobs is these windows
 * (the variant in the VCF, scored on the strand the picture shows); finish,
 * after run, makes the one forward when none did (not in the VCF, in no
 * gene, skipped), draws the picture and writes it to path. *from_run (may be
 * NULL): 1 when the tracks came from run's forward. */
NF_API int nf_annotate_plot_prepare(nf_annotator * a, const char * variant, nf_err * err);
NF_API int nf_annotate_plot_finish(nf_annotator * a, const char * path, int * from_run, nf_err * err);
/* the data records of a VCF/BCF when cheaply known (its index, or one pass
 * over a regular file), else 0 */
NF_API long long nf_annotate_count_records(const char * vcf);
/* All of it on one process: o->out written in place (no temporary name),
 * its index o->out + nf_annotate_index_suffix(o) when o->write_index,
 * report_path (may be NULL) the report; s (may be NULL) the counts. */
NF_API int nf_annotate_file(const nf_annotate_opts * o, const char * report_path, nf_annotate_stats * s, nf_err * err);

/* ---- per-position tracks with coordinates (seq-track.c; docs/sequences.md) ---- */
typedef struct nf_seq_track {
    char contig[256]; /* the contig ("sequence" when none was given)                   */
    int64_t start;    /* 1-based forward-strand position of row 0                     */
    int64_t n;        /* positions (rows), forward-strand order on either strand       */
    char strand;      /* '+' or '-' (on '-' the reverse complement was scored)          */
    int64_t channels; /* 3 + tissues: no_splice, acceptor, donor, tissue usage          */
    int64_t tile;     /* positions per forward                                        */
    int64_t tiles;    /* forwards made                                                */
    float * probs;    /* n x channels probabilities (softmax over 0..2, sigmoid after) */
} nf_seq_track;
NF_API void nf_seq_track_free(nf_seq_track * t);
/* a channel's column name: "no_splice", "acceptor", "donor", "adipose_tissue", ... */
NF_API const char * nf_seq_track_channel(const nf_seq_track * t, int64_t c);
/* SpTransformer model m on the bases ids[left .. left+n) (forward strand,
 * ids as nf_seq's), ids[0 .. left) and ids[left+n .. left+n+right) the
 * reference around them (0 when none): tiles of `tile` positions (0: the
 * model's max_seq_len), each one forward of the tile with context_len bases of
 * flank taken from ids and N beyond, exactly as one forward on that span
 * pads; on strand '-' the reverse complement of the whole span is tiled from
 * its 5' end and the rows mapped back to forward positions. start: the
 * 1-based position of ids[left]. */
NF_API int nf_seq_track_score(nf_model * m, const int8_t * ids, int64_t n, int64_t left, int64_t right, char strand,
                              const char * contig, int64_t start, int64_t tile, nf_seq_track * out, nf_err * err);
/* the track of one forward's position_logits (n x channels, strand '+'), no
 * forward made: e.g. `run`'s own forward when it fits one window */
NF_API int nf_seq_track_from_logits(const float * logits, int64_t n, int64_t channels, const char * contig,
                                    int64_t start, nf_seq_track * out, nf_err * err);
/* record b of seq (nf_seq_fasta / nf_seq_string's B x L ids, flanks included)
 * as `nofall run --fasta F [--region R] [--strand S]` writes its tracks: the
 * rows are the L - 2 * context_len positions the run's outputs are, named by
 * the record's contig (seq->names[b]; "sequence<b+1>" when B > 1 and none;
 * "sequence" when B = 1 and none) at their 1-based positions (seq->starts,
 * flanks included in mode given); logits: the run's own forward of this
 * record ((L - 2 * context) x channels, strand '+' only), or NULL: scored
 * here by nf_seq_track_score (tiled when longer than the window) */
NF_API int nf_seq_track_record(nf_model * m, const nf_seq * seq, int64_t b, const float * logits, char strand,
                               nf_seq_track * out, nf_err * err);
/* TSV: header contig pos strand acceptor donor <tissues>, 1-based positions;
 * append: add the rows to path (no header), e.g. the next record */
NF_API int nf_seq_track_write_tsv(const nf_seq_track * t, const char * path, int append, nf_err * err);
/* bedGraph of one channel: a track line, then contig, 0-based start, end
 * (half-open), value; append: the rows only */
NF_API int nf_seq_track_write_bedgraph(const nf_seq_track * t, int64_t channel, const char * path, int append,
                                       nf_err * err);
/* `run --region`'s tracks: tracks.tsv, acceptor.bedGraph, donor.bedGraph
 * (nf_seq_track_files, NULL-ended; docs/sequences.md) of every record of seq
 * into dir, rows appended in record order; strand NULL: '+'; logits: a
 * forward already made on seq (B x positions x channels), used on '+'
 * (NULL: the forwards are made here) */
NF_API extern const char * const nf_seq_track_files[];
NF_API int nf_seq_tracks_write(nf_model * m, const nf_seq * seq, const float * logits, const char * strand,
                               const char * dir, nf_err * err);
/* is seq longer than one window of m (positions > max_seq_len)? `run` then
 * scores it as tiles: the tracks and report.json, no .npy */
NF_API int nf_seq_tiled_needed(const nf_model * m, const nf_seq * seq);
/* what mode given leaves out of a region (record 0 of seq, read with
 * region): a sentence into buf naming the positions scored and that
 * --context genome scores the region itself (e.g. `run`'s note on stderr,
 * report.json's region "note"); returns 1, or 0 with buf "" when every
 * position of the region is scored (mode pad or genome, no region, context 0) */
NF_API int nf_seq_scored_note(const nf_model * m, const nf_seq * seq, const char * region, char * buf, size_t n);

/* ---- `run` on a sequence (seq-run.c; docs/sequences.md) --------------------- */
struct cJSON;
struct nf_run_meas;
/* report.json's "region" (only when region or strand is given): the spec, the
 * strand ('+' when NULL), each record's contig and the first and last
 * positions of its rows (as tracks.tsv numbers them) */
NF_API void nf_seq_report_region(struct cJSON * rep, const nf_model * m, const nf_seq * seq, const char * region,
                                 const char * strand);
/* `run` on a seq longer than one window of m (nf_seq_tiled_needed): the
 * tracks (nf_seq_tracks_write, the forwards made here) and report.json
 * (nofall-outputs.h's common members and markers, the "region", the
 * "tracks") written into dir, tracks.tsv read back (a header and every
 * position); *meas: the placement measured after the forwards, *wall_ms
 * their time, shape: LOGITS_SHAPE ("records,positions,channels");
 * model_path: report.json's "model"; svg: NULL, or the picture of the
 * tracks (nofall-plot.h's nf_plot_tracks_svg, run --plot; nf_free) made
 * from the same rows. */
NF_API int nf_seq_run_tiled(nf_model * m, const nf_backend * be, const nf_seq * seq, const char * region,
                            const char * strand, const char * model_path, const char * dir, struct nf_run_meas * meas,
                            double * wall_ms, char * shape, size_t shape_n, char ** svg, nf_err * err);

#ifdef __cplusplus
}
#endif
#endif
