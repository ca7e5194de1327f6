/* cmd-annotate.c -- `nofall annotate` (README "annotate"): a client of
 * libnofall-genomics (nofall-genomics.h), which scores the SNVs of a VCF/BCF
 * against a reference genome with a SpTransformer model and writes them.
 * Here: the options, the output written under a temporary name and renamed
 * at the end with OUT.report.json (outset.c), the signals, a progress bar
 * (progress.c) on a terminal's stderr (--quiet: none, --progress: always),
 * the warnings, the summary line and the markers, and MPI: under mpirun the
 * ranks shard the records (mpi-shard.c drives the library's hooks). */
#include "cli.h"
#include "opts.h"
#include "io/nf-io.h"
#include "nofall-genomics.h"
#include "nofall-plot.h"

#include <stdlib.h>
#include <string.h>

struct nf_ann_opts {
    const char *model, *vcf, *fasta, *genes, *out, *device;
    int raw, protein_coding, format;
    int no_reuse; /* --no-reuse: every window in full (the model's batch_reuse 0) */
    int progress; /* NF_PROGRESS_AUTO / _QUIET (--quiet) / _FORCE (--progress) */
    int64_t batch;
    char out_type;                   /* -O / --output-type v|z|b|u, 0: by --out's name */
    int write_index;                 /* -W / --write-index[=csi|tbi]: NF_ANNOTATE_INDEX_* */
    int to_stdout;                   /* --out -: the output on stdout, nothing else there (no markers, no report) */
    const char *plot, *plot_variant; /* --plot FILE.svg --plot-variant CHR:POS:REF:ALT (docs/plots.md) */
};

int nf_cmd_annotate(int argc, char ** argv);

#ifndef NF_HAVE_HTSLIB
int nf_cmd_annotate(int argc, char ** argv) {
    (void) argc;
    (void) argv;
    fprintf(stderr, "error: annotate: this build has no htslib (apt-get install libhts-dev, then rebuild)\n");
    return 1;
}
#else

/* bcftools' -O TYPE / -OTYPE: --output-type TYPE; -W[FMT] / -W=FMT: --write-index[=FMT]
 * (argv's words are kept; av: argc + 1 slots) */
static int nf_ann_short_o(int argc, char ** argv, char ** av, char * buf) {
    int n = 0;
    for (int i = 0; i < argc; i++) {
        if (i > 0 && strncmp(argv[i], "-W", 2) == 0) {
            const char * f = argv[i][2] == '=' ? argv[i] + 3 : argv[i] + 2;
            av[n++] = !*f                     ? "--write-index"
                      : strcmp(f, "csi") == 0 ? "--write-index=csi"
                      : strcmp(f, "tbi") == 0 ? "--write-index=tbi"
                                              : argv[i]; /* refused as unknown, by name */
            continue;
        }
        if (i > 0 && strncmp(argv[i], "-O", 2) == 0 && strlen(argv[i]) <= 3) {
            av[n++] = "--output-type";
            if (argv[i][2]) {
                buf[0] = argv[i][2], buf[1] = 0;
                av[n++] = buf;
            }
            continue;
        }
        av[n++] = argv[i];
    }
    av[n] = NULL;
    return n;
}

static int nf_ann_parse(int argc, char ** argv, struct nf_ann_opts * o) {
    struct nf_cli_opts v;
    memset(o, 0, sizeof(*o));
    char ** av = calloc((size_t) argc + 2, sizeof(char *));
    char one[2];
    if (!av) return 0;
    const int ok = nf_cli_opts_parse(NF_M(ANNOTATE), nf_ann_short_o(argc, argv, av, one), av, 1, NULL, &v);
    free(av);
    if (!ok) return 0;
    o->out_type = v.set[NF_O_ANN_OUT_TYPE] ? nf_cli_opt_str(&v, NF_O_ANN_OUT_TYPE, "v")[0] : 0;
    o->model = nf_cli_opt_str(&v, NF_O_MODEL, NULL);
    o->vcf = nf_cli_opt_str(&v, NF_O_VCF, NULL);
    o->fasta = nf_cli_opt_str(&v, NF_O_ANN_FASTA, NULL);
    o->genes = nf_cli_opt_str(&v, NF_O_GENES, NULL);
    o->out = nf_cli_opt_str(&v, NF_O_OUT_FILE, NULL);
    o->device = nf_cli_opt_str(&v, NF_O_DEVICE, "cpu");
    o->batch = v.set[NF_O_ANN_BATCH] ? v.i[NF_O_ANN_BATCH] : 16;
    o->raw = v.set[NF_O_RAW_SCORE];
    o->protein_coding = v.set[NF_O_PROTEIN_CODING];
    o->format = strcmp(nf_cli_opt_str(&v, NF_O_ANN_FORMAT, "spliceai"), "sptransformer") == 0
                    ? NF_ANNOTATE_FORMAT_SPTRANSFORMER
                    : NF_ANNOTATE_FORMAT_SPLICEAI;
    o->no_reuse = v.set[NF_O_NO_REUSE];
    /* --write-index, =csi, =tbi: the last one given */
    static const int wi[3] = {NF_O_WRITE_INDEX, NF_O_WRITE_INDEX_CSI, NF_O_WRITE_INDEX_TBI};
    for (int k = 0, at = -1; k < 3; k++)
        if (v.set[wi[k]] && v.pos[wi[k]] > at) {
            at = v.pos[wi[k]];
            o->write_index = k == 2 ? NF_ANNOTATE_INDEX_TBI : NF_ANNOTATE_INDEX_CSI;
        }
    o->progress = nf_cli_opt_progress(&v);
    if (!o->model || !o->vcf || !o->fasta || !o->genes || !o->out) {
        fprintf(stderr, "error: annotate needs --model M --vcf IN --fasta REF --genes GTF --out "
                        "OUT.vcf|.vcf.gz|.bcf|.tsv[.gz]|.csv[.gz]\n");
        return 0;
    }
    o->to_stdout = strcmp(o->out, "-") == 0;
    o->plot = nf_cli_opt_str(&v, NF_O_PLOT, NULL);
    o->plot_variant = nf_cli_opt_str(&v, NF_O_PLOT_VARIANT, NULL);
    if (!o->plot != !o->plot_variant) {
        fprintf(stderr, "error: annotate: --plot FILE.svg and --plot-variant CHR:POS:REF:ALT go together\n");
        return 0;
    }
    if (o->plot && (strcmp(o->plot, o->out) == 0 || nf_out_same_file(o->plot, o->out))) {
        fprintf(stderr, "error: annotate: --plot and --out name the same file\n");
        return 0;
    }
    if (o->plot && o->write_index) {
        char ix[4200];
        snprintf(ix, sizeof(ix), "%s%s", o->out, o->write_index == NF_ANNOTATE_INDEX_TBI ? ".tbi" : ".csi");
        if (strcmp(o->plot, ix) == 0 || nf_out_same_file(o->plot, ix)) {
            fprintf(stderr, "error: annotate: --plot and --write-index name the same file\n");
            return 0;
        }
    }
    return 1;
}

/* the hooks' side: this rank, its bar, the rank whose error err holds */
struct nf_ann_cli {
    const struct nf_mpi * mp;
    const char * device; /* this rank's */
    nf_progress * prog;
    int failed_rank;
};

static void nf_ann_cli_progress(void * ctx, int64_t written) {
    nf_progress_update(((struct nf_ann_cli *) ctx)->prog, written);
}
static void nf_ann_cli_warning(void * ctx, const char * msg) {
    nf_progress_suspend(((struct nf_ann_cli *) ctx)->prog);
    fprintf(stderr, "warning: %s\n", msg);
}
static int nf_ann_cli_backend(void * ctx, const char * device, nf_backend ** out, nf_err * err) {
    (void) device; /* --device as given; this rank's: cuda -> cuda:<local rank> */
    return nf_cli_backend_init(((struct nf_ann_cli *) ctx)->device, 0, out, err);
}
static int nf_ann_cli_agree(void * ctx, int rc, nf_err * err) {
    struct nf_ann_cli * c = ctx;
    return nf_mpi_agree(c->mp, rc, err, &c->failed_rank);
}
static int nf_ann_cli_sum_i64(void * ctx, int64_t * v, int n, nf_err * err) {
    return nf_mpi_sum_i64(((struct nf_ann_cli *) ctx)->mp, v, n, err);
}
static int nf_ann_cli_sum_f64(void * ctx, double * v, int n, nf_err * err) {
    return nf_mpi_sum_f64(((struct nf_ann_cli *) ctx)->mp, v, n, err);
}
static int nf_ann_cli_gather(void * ctx, const void * data, int64_t n, char ** all, int64_t * lens, nf_err * err) {
    return nf_mpi_gather(((struct nf_ann_cli *) ctx)->mp, data, n, all, lens, err);
}
static void nf_ann_cli_chunk_done(void * ctx) {
    (void) ctx;
    nf_out_test_delay("annotate-chunk");
}

/* report.json's text to path, through a temporary name (committed with the output) */
static int nf_ann_write_report(const nf_annotator * a, const char * path, struct nf_outfile * of, nf_err * err) {
    char * s = nf_annotate_report_json(a, err);
    if (!s) return err->code ? err->code : NF_ERR_NOMEM;
    int rc = nf_outfile_open(of, path, "report", err);
    if (rc == NF_OK) {
        FILE * f = nf_outfile_fp(of);
        if (!f || fputs(s, f) < 0 || fputc('\n', f) < 0) rc = nf__err_set(err, NF_ERR_IO, "%s: write failed", path);
        if (rc == NF_OK) rc = nf_outfile_close(of, err);
    }
    free(s);
    return rc;
}

static void nf_ann_summary(const nf_annotate_stats * s, const char * out) {
    char e[1024];
    fprintf(stderr,
            "annotate: %lld records, %lld ALTs: %lld scored (%lld with no gene: score 0; %lld REF mismatches "
            "scored), skipped:",
            (long long) s->records, (long long) s->alts, (long long) s->scored, (long long) s->scored_no_gene,
            (long long) s->scored_ref_mismatch);
    for (int i = 0; i < NF_ANNOTATE_SKIP_N; i++)
        fprintf(stderr, " %s=%lld", nf_annotate_skip_name(i), (long long) s->skipped[i]);
    fprintf(stderr, "; %lld forwards (%lld windows, %lld computed, %lld reusing encoder rows) in %.1f s",
            (long long) s->forwards, (long long) s->windows, (long long) s->windows_computed,
            (long long) s->windows_reused, s->forward_ms / 1000.0);
    if (s->ranks > 1) fprintf(stderr, " on %d ranks", s->ranks);
    fprintf(stderr, "; %lld rows to %s\n", (long long) s->rows_written, nf__esc(e, sizeof(e), out));
}

static int nf_ann_main(const struct nf_ann_opts * o, const struct nf_mpi * mp, int * failed_rank, nf_err * err) {
    char e[1024];
    char device[64];
    nf_mpi_device(mp, o->device, device, sizeof(device));
    struct nf_ann_cli c = {mp, device, NULL, -1};
    nf_annotate_hooks h = {
        &c, nf_ann_cli_progress, nf_ann_cli_warning, nf_ann_cli_backend, mp->rank,          mp->size,
        0,  nf_ann_cli_agree,    nf_ann_cli_sum_i64, nf_ann_cli_sum_f64, nf_ann_cli_gather, nf_ann_cli_chunk_done};
#ifdef NF_TEST_HOOKS
    const char * t = getenv("NOFALL_TEST_ANNOTATE_CHUNK"); /* tests: several chunks on a small VCF */
    if (t && atoll(t) > 0) h.chunk = atoll(t);
#endif
    nf_annotate_opts ao;
    nf_annotate_opts_init(&ao);
    ao.model = o->model;
    ao.device = o->device;
    ao.vcf = o->vcf;
    ao.fasta = o->fasta;
    ao.genes = o->genes;
    ao.out = o->out;
    ao.raw_score = o->raw;
    ao.protein_coding = o->protein_coding;
    ao.format = o->format;
    ao.no_reuse = o->no_reuse;
    ao.batch = o->batch;
    ao.out_type = o->out_type;
    ao.write_index = o->write_index;
    struct nf_outfile of, rf, xf; /* the output, its report, its index (--write-index) */
    memset(&of, 0, sizeof(of));
    memset(&rf, 0, sizeof(rf));
    memset(&xf, 0, sizeof(xf));
    of.fd = of.slot = rf.fd = rf.slot = xf.fd = xf.slot = -1;
    nf_annotator * a = NULL;
    *failed_rank = -1;
    int rc = nf_annotate_new(&ao, &h, &a, err);
    /* --out (rank 0: created now, so an unwritable place fails before any work); --out -: stdout, no report */
    const int file = mp->rank == 0 && !o->to_stdout;
    if (rc == NF_OK && file) rc = nf_outfile_open(&of, o->out, "--out", err);
    char rp[4200];
    snprintf(rp, sizeof(rp), "%s.report.json", o->out);
    /* the report, written at the end, must not be an input either: checked now (path-guard.c) */
    if (rc == NF_OK && file) rc = nf_out_check(rp, "--out (its report OUT.report.json)", err);
    char xp[4200]; /* the index, OUT.csi / OUT.tbi: created now too */
    snprintf(xp, sizeof(xp), "%s%s", o->out, o->write_index ? nf_annotate_index_suffix(&ao) : "");
    if (rc == NF_OK && file && o->write_index) rc = nf_outfile_open(&xf, xp, "--write-index", err);
    if (rc == NF_OK) rc = nf_annotate_open(a, mp->rank == 0 ? (file ? of.tmp : "-") : NULL, err);
    if ((rc = nf_mpi_agree(mp, rc, err, failed_rank)) != NF_OK) goto done;
    rc = nf_annotate_load(a, err);
    /* --plot-variant's windows (one process): a bad variant fails here, before any scoring */
    if (rc == NF_OK && o->plot) rc = nf_annotate_plot_prepare(a, o->plot_variant, err);
    if ((rc = nf_mpi_agree(mp, rc, err, failed_rank)) != NF_OK) goto done;
    /* the bar: rank 0's, over the records of every rank (rank 0 writes them all) */
    if (mp->rank == 0 && nf_progress_enabled(o->progress))
        c.prog = nf_progress_begin("annotate", "records", nf_annotate_count_records(o->vcf), o->progress);
    rc = nf_annotate_run(a, err);
    *failed_rank = c.failed_rank;
    nf_progress_end(c.prog);
    c.prog = NULL;
    /* the picture: its tracks from the run's forward of the variant when it made one (docs/plots.md) */
    int from_run = 0;
    if (rc == NF_OK && o->plot) rc = nf_annotate_plot_finish(a, o->plot, &from_run, err);
#ifdef NF_TEST_HOOKS
    if (rc == NF_OK && o->plot && getenv("NOFALL_TEST_PLOT_SOURCE")) /* tests: where the picture's tracks came from */
        fprintf(stderr, "nofall: test hook: --plot tracks %s\n",
                from_run ? "from the run's forward" : "computed alone");
#endif
    if (rc != NF_OK) goto done;
    /* rank 0: the output and its report written and synced under temporary
     * names, the summary and markers printed and stdout checked, and only
     * then both renamed into place: a failure up to there (stdout closed or
     * full included) leaves the previous output and report as they were */
    if (mp->rank == 0 && o->to_stdout) { /* stdout: the VCF only; the summary on stderr */
        if ((rc = nf_annotate_close(a, err)) == NF_OK && o->progress != NF_PROGRESS_QUIET) {
            nf_annotate_stats st;
            nf_annotate_get_stats(a, &st);
            nf_ann_summary(&st, "standard output");
        }
    } else if (mp->rank == 0) {
        rc = nf_annotate_close(a, err);
        if (rc == NF_OK && o->write_index && (rc = nf_annotate_write_index(a, xf.tmp, err)) == NF_OK)
            rc = nf_outfile_close(&xf, err);
        if (rc == NF_OK && (rc = nf_outfile_close(&of, err)) == NF_OK) rc = nf_ann_write_report(a, rp, &rf, err);
        nf_out_test_delay("write");
        if (rc == NF_OK) {
            nf_annotate_stats st;
            nf_annotate_get_stats(a, &st);
            if (o->progress != NF_PROGRESS_QUIET) nf_ann_summary(&st, o->out);
            printf("RECORDS=%lld\nALTS_SCORED=%lld\nALTS_SKIPPED=%lld\nFORWARDS=%lld\nWINDOWS=%lld\nREPORT=%s\n",
                   (long long) st.records, (long long) st.scored, (long long) (st.alts - st.scored),
                   (long long) st.forwards, (long long) st.windows, nf__esc(e, sizeof(e), rp));
            if (o->write_index) printf("INDEX=%s\n", nf__esc(e, sizeof(e), xp));
            if (!nf_cli_stdout_ok())
                rc = nf__err_set(err, NF_ERR_IO,
                                 "standard output: the markers could not be written; the previous %s is kept",
                                 nf__esc(e, sizeof(e), o->out));
        }
        if (rc == NF_OK) { /* the renames, signals deferred: all files of this run, or none; the index
                            * last (an index older than its file is one htslib warns of) */
            struct nf_outfile * all[3] = {&rf, &of, &xf};
            rc = nf_outfiles_commit(all, o->write_index ? 3 : 2, err);
        }
    }
    /* rank 0's writing failed: every rank fails */
    rc = nf_mpi_agree(mp, rc, err, failed_rank);
done:
    nf_progress_end(c.prog);
    nf_annotate_free(a); /* an output still open: closed (an error path, whose error stands) */
    if (rc != NF_OK) {
        nf_outfile_abort(&rf);
        nf_outfile_abort(&of);
        nf_outfile_abort(&xf);
    }
    return rc;
}

int nf_cmd_annotate(int argc, char ** argv) {
    /* under mpirun: one rank of the job (all ranks parse the same argv) */
    struct nf_mpi mp;
    nf_err err = {0};
    if (nf_mpi_init(&argc, &argv, &mp, &err) != NF_OK) {
        nf_cli_print_error(&err, err.code);
        return 1;
    }
    struct nf_ann_opts o;
    int ret = 2;
    /* a usage error is every rank's: rank 0 prints it */
    const int quiet = nf_mpi_quiet_begin(&mp);
    const int parsed = nf_ann_parse(argc, argv, &o);
    nf_mpi_quiet_end(quiet);
    if (parsed) {
        nf_out_signals_install();
        int failed_rank = -1;
        int rc = NF_OK;
        if (o.plot) { /* --plot: checked first (drawn after the run, nf_ann_main; docs/plots.md) */
            rc = mp.size > 1 ? nf__err_set(&err, NF_ERR_ARG, "--plot: not under mpirun (run it on one process)")
                             : nf_out_check(o.plot, "--plot", &err);
            if (rc == NF_OK) rc = nf_plot_check_writable(o.plot, "--plot", &err);
        }
        if (rc == NF_OK) rc = nf_ann_main(&o, &mp, &failed_rank, &err);
        if (o.to_stdout && mp.rank == 0) { /* no markers: stdout is the VCF's */
            if (rc != NF_OK) nf_cli_print_error(&err, rc);
            ret = rc != NF_OK;
        } else
            ret = nf_cli_mpi_command_exit(&mp, rc, &err, failed_rank);
    }
    nf_mpi_finalize(&mp);
    return ret;
}
#endif
