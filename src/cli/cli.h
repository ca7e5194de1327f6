/* cli.h -- shared pieces of the nofall command-line tool. */
#ifndef NF_CLI_H
#define NF_CLI_H

#include "nofall.h"
#include "nf-impl.h"

#include <stdbool.h>

/* Parse "--flag value" style: returns the value or NULL (and prints usage). */
const char * nf_cli_need_value(int argc, char ** argv, int * i);
/* Numeric option values, parsed completely (no sign where none is allowed,
 * no trailing characters, no empty string) and range-checked; on failure a
 * message naming the flag and the value goes to stderr and 0 is returned. */
int nf_cli_parse_int(const char * flag, const char * v, int64_t min, int64_t max, int64_t * out);
int nf_cli_parse_double(const char * flag, const char * v, double min, double max, double * out);
/* Print "error: MSG (CODE)" with control characters escaped. */
void nf_cli_print_error(const nf_err * err, int rc);
/* fflush(stdout) and report a failed write (a full disk, /dev/full, a closed
 * pipe) on stderr; 0 when stdout was lost. */
int nf_cli_stdout_ok(void);

/* ---- output files and output sets (outset.c; README "Output sets") ------------ */
/* SIGINT/SIGTERM/SIGHUP/SIGQUIT remove registered staging directories and
 * temporary files, then end the process by the signal; SIGPIPE is ignored. */
void nf_cli_signals_install(void);
/* Test builds (-DNOFALL_TEST_HOOKS=ON): NOFALL_TEST_DELAY=PHASE:MS sleeps there. */
void nf_cli_test_delay(const char * phase);
/* canonical absolute path (the last component may be missing); 0 on success */
int nf_cli_canonical(const char * path, char * out, size_t n);
/* both exist and are the same file (device + inode) */
int nf_cli_same_file(const char * a, const char * b);

/* ---- the path guard (path-guard.c): no file a command writes is one it reads ---- */
/* Register an input: a file (and what is read beside it: .fai, .gzi, .tbi,
 * .csi, a .ckpt's config.json) or a directory (the files in it). */
void nf_cli_input_add(const char * flag, const char * path);
void nf_cli_inputs_clear(void);
/* NF_ERR_ARG naming both when path is a registered input: the same device
 * and inode, or, not existing yet, the same canonical name. */
int nf_cli_output_check(const char * path, const char * flag, nf_err * err);
/* the same, ending the message with why (what happens, what to do) */
int nf_cli_output_check_why(const char * path, const char * flag, const char * why, nf_err * err);

/* One output file written under a private temporary name next to it
 * (created at open, so an unwritable place fails before any work) and
 * renamed into place by commit. */
struct nf_cli_outfile {
    char path[4096], tmp[4096];
    int fd, slot, closed;
    FILE * f;
};
int nf_cli_outfile_open(struct nf_cli_outfile * o, const char * path, const char * flag, nf_err * err);
FILE * nf_cli_outfile_fp(struct nf_cli_outfile * o);
int nf_cli_outfile_close(struct nf_cli_outfile * o, nf_err * err);  /* flush + fsync + close */
int nf_cli_outfile_commit(struct nf_cli_outfile * o, nf_err * err); /* close if open, rename */
void nf_cli_outfile_abort(struct nf_cli_outfile * o);
/* commit each in turn with SIGINT/SIGTERM/SIGHUP/SIGQUIT deferred until all
 * are renamed (a signal then ends the process with the new files in place) */
int nf_cli_outfiles_commit(struct nf_cli_outfile * const * files, int n, nf_err * err);

/* An output directory replaced as a set: lock, staging directory, swap. */
struct nf_outset {
    char out[4096], parent[4096], base[256], staging[4096], lock[4096];
    int lock_fd, existed, committed;
    const char * const * names; /* the artifact names a run may write */
    int n_names;
    /* the parents of --out begin created: made[0..made_len[k]) for each, outermost first */
    char made[4096];
    unsigned short made_len[2048];
    int n_made;
};
/* Check --out's name (lengths, components) before creating anything, create
 * its missing parents (recorded), lock it, recover from an interrupted run,
 * check it holds only files, create the staging directory. A failure here,
 * or an end without a commit, removes the parents it created (innermost
 * first, each only if empty). */
int nf_outset_begin(struct nf_outset * s, const char * out, const char * const * names, int n_names, nf_err * err);
/* staging/file */
void nf_outset_path(const struct nf_outset * s, const char * file, char * out, size_t n);
/* Is path directly inside --out? Its name there in name. */
int nf_outset_inside(const struct nf_outset * s, const char * path, char * name, size_t n);
/* Carry over the other files, swap the staging directory in, remove the
 * previous set; then commit extra (may be NULL). Signals blocked throughout. */
int nf_outset_commit(struct nf_outset * s, struct nf_cli_outfile * extra, nf_err * err);
/* Remove the staging directory if still there, release the lock; without a
 * commit, remove the parents begin created (each only if empty). */
void nf_outset_end(struct nf_outset * s);
int nf_cli_parse_precision(const char * s, int * out);

double nf_cli_now_ms(void);
/* Print the backend's warning (nf_backend_warning), if any, to stderr. */
void nf_cli_backend_warn(const nf_backend * be);
/* nf_backend_init_opts with the options the environment gives
 * (nf_backend_env_read: the CLI's NOFALL_* / NF_CUDA_* conveniences), then
 * the backend's warning, if any, on stderr. */
int nf_cli_backend_init(const char * device, int precision, nf_backend ** out, nf_err * err);
/* nf_model_load, its failure prefixed with "--model MODEL" (unless it names --model already) */
int nf_cli_model_load(nf_backend * be, const char * model, nf_model ** out, nf_err * err);
/* Write be's trace as JSON to f */
int nf_cli_write_trace(const nf_backend * be, FILE * f, const char * what, nf_err * err);
/* chrome 1: as Chrome trace events (bench --trace-format chrome) */
int nf_cli_write_trace_as(const nf_backend * be, int chrome, FILE * f, const char * what, nf_err * err);

/* statistics of n timings (sorted in place) */
struct nf_cli_stats {
    double median, mean, p90, min, max;
};
void nf_cli_stats(double * v, int n, struct nf_cli_stats * s);

/* ---- a progress bar on stderr (progress.c; README "Progress") -------------------------- */
/* One line "WHAT: DONE/TOTAL UNIT (P%), R/s, ETA H:MM:SS" redrawn in place
 * ('\r', at most 4 times a second); total <= 0: unknown (count, rate and the
 * time elapsed, no ETA). mode: NF_PROGRESS_AUTO draws when stderr is a
 * terminal, NF_PROGRESS_QUIET (--quiet) never, NF_PROGRESS_FORCE
 * (--progress) always (a log, or an MPI rank, whose stderr mpirun pipes).
 * begin returns NULL -- and every call below is a no-op on NULL -- when it
 * does not draw. suspend blanks the line before other output on stderr (the
 * next update redraws it); end draws the final state, ends the line and
 * frees p. */
enum { NF_PROGRESS_AUTO = 0, NF_PROGRESS_QUIET = 1, NF_PROGRESS_FORCE = 2 };
typedef struct nf_progress nf_progress;
nf_progress * nf_progress_begin(const char * what, const char * unit, long long total, int mode);
/* would begin draw? (to skip counting a total otherwise) */
int nf_progress_enabled(int mode);
void nf_progress_update(nf_progress * p, long long done);
/* a text after the counts (e.g. the current losses), drawn from the next update on */
void nf_progress_note(nf_progress * p, const char * note);
void nf_progress_suspend(nf_progress * p);
void nf_progress_end(nf_progress * p);

/* ---- shared by `run` of every model (run-common.c) ------------------------------------ */
/* where things were measured to be, after a forward */
struct nf_run_meas {
    struct nf_placement pl;
    char model_dev[32];
    struct nf_trace_totals tot;
    int fallback;
};
int nf_run_measure(const nf_model * m, const nf_backend * be, struct nf_run_meas * r, nf_err * err);
/* run-tracks.c: --region / --strand's tracks.tsv, acceptor.bedGraph, donor.bedGraph
 * (docs/sequences.md) of every record of seq into dir; strand NULL: '+'; logits: the
 * run's own forward (B x positions x channels), used on '+' (NULL: forwards made here) */
struct nf_seq;
extern const char * const nf_run_track_files[];
int nf_run_tracks(nf_model * m, const struct nf_seq * seq, const float * logits, const char * strand, const char * dir,
                  nf_err * err);
/* a sequence longer than the model's window (positions > max_seq_len): the
 * whole run as tiles, the set being the tracks and report.json (no .npy) */
int nf_run_tiled_needed(const nf_model * m, const struct nf_seq * seq);
/* report.json's "region" (with --region or --strand): the spec, the strand, each record's contig and positions */
struct cJSON;
void nf_run_report_region(struct cJSON * rep, const nf_model * m, const struct nf_seq * seq, const char * region,
                          const char * strand);
struct nf_outset;
struct nf_cli_outfile;
int nf_run_tiled(nf_model * m, const nf_backend * be, const struct nf_seq * seq, const char * region,
                 const char * strand, const char * model_path, const char * trace, const char * trace_in_out,
                 struct nf_cli_outfile * tr, struct nf_outset * os, nf_err * err);
/* report.json's common members (version, model, config, device, precision) */
struct cJSON;
void nf_cli_report_passes(struct cJSON * rep, const nf_model * m);
void nf_run_report_common(struct cJSON * rep, const char * model_path, const nf_model * m, const nf_backend * be);
/* the markers: into report.json's "markers" object, and on stdout */
void nf_run_markers_json(struct cJSON * rep, const struct nf_run_meas * r, const char * shape, const char * classes,
                         int finite, double wall_ms);
void nf_run_markers_print(const struct nf_run_meas * r, const nf_backend * be, const char * shape, const char * classes,
                          int finite, double wall_ms, int assets_verified);
/* --trace must not replace an input, the model, --out or an artifact;
 * in_out: its name when it is inside --out (then part of the set) */
int nf_run_check_trace(const char * trace, const char * model, const char * const * inputs,
                       const char * const * input_flags, int n_inputs, const struct nf_outset * os,
                       const char * const * artifacts, int n_artifacts, char * in_out, size_t n, nf_err * err);
/* write the trace (into the set, or to its own file) */
int nf_run_finish(const nf_backend * be, const char * trace, const char * trace_in_out, struct nf_cli_outfile * tr,
                  struct nf_outset * os, nf_err * err);
/* after the markers: stdout must have taken them; then swap the set in */
int nf_run_commit(struct nf_outset * os, const char * trace, const char * trace_in_out, struct nf_cli_outfile * tr,
                  nf_err * err);
/* the end of a command that prints markers: the error (if any), then
 * EXIT_CODE=0|1; returns the process exit status (1 also when stdout failed) */
int nf_cli_command_exit(int rc, const nf_err * err);
/* `nofall predict` on a TabSTAR model (cmd-predict-tabstar.c); argv as nf_cmd_predict's */
int nf_cmd_predict_tabstar(int argc, char ** argv);
/* `nofall tokenize` (TabSTAR's WordPiece tokenizer, cmd-tokenize.c) */
int nf_cmd_tokenize(int argc, char ** argv);
/* does model type (nf_model_type_of; "" = the default) take the run / bench
 * option key (nf_model_type_run_options)? */
int nf_cli_type_takes(const char * type, const char * key);

/* ---- `annotate` (cmd-annotate.c: a client of nofall-genomics.h) ---------------------------- */
int nf_cmd_annotate(int argc, char ** argv);
/* `nofall finetune` (cmd-finetune.c); the training options of finetune and
 * predict --fine-tune (0 after a message: a usage error), report.json's "options" */
int nf_cmd_finetune(int argc, char ** argv);
struct nf_cli_opts;
struct nf_finetune_opts;
/* the table options (tables-opts.c, docs/tables.md): --sep, --drop */
struct nf_cli_tables {
    int sep;           /* 0: by the file name */
    const char * drop; /* COL[,COL...] or NULL */
    int n_types;       /* --column-type COL=TYPE, each given */
    const char * types[32];
};
typedef struct nf_table nf_table;
int nf_cli_table_opts(const struct nf_cli_opts * v, struct nf_cli_tables * t); /* 0 after a message */
int nf_cli_table_read(const struct nf_cli_tables * t, const char * path, int is_train, nf_table ** out, nf_err * err);
int nf_cli_finetune_opts(const struct nf_cli_opts * v, struct nf_finetune_opts * fo);
void nf_cli_finetune_report(struct cJSON * rep, const struct nf_finetune_opts * fo);

/* ---- MPI: one command sharded over the ranks of an mpirun job (mpi-shard.c) ---------- */
/* Under a launcher (its environment variables) in a build with MPI
 * (NF_HAVE_MPI): MPI initialised, this process's rank. Otherwise rank 0 of 1,
 * active 0, and every function below is a no-op on this one process. */
struct nf_cli_mpi {
    int active;                 /* MPI initialised for this command */
    int owns_init;              /* nf_cli_mpi_init called MPI_Init  */
    int rank, size;             /* in MPI_COMM_WORLD                */
    int local_rank, local_size; /* among the ranks on this node     */
};
int nf_cli_mpi_launched(void); /* started by mpirun / srun / hydra (and built with MPI) */
int nf_cli_mpi_init(int * argc, char *** argv, struct nf_cli_mpi * m, nf_err * err);
void nf_cli_mpi_finalize(struct nf_cli_mpi * m);
/* --device for this rank: "cuda" -> "cuda:<local rank>", "opencl" ->
 * "opencl:<local rank>" under MPI; anything else (cpu, cuda:N) as given */
void nf_cli_mpi_device(const struct nf_cli_mpi * m, const char * device, char * out, size_t n);
/* Collective: did any rank fail? Every rank passes its rc (err holding its
 * message when rc != NF_OK). NF_OK on every rank when none failed; else
 * err = "rank R of N: R's message", R's code returned, *failed_rank = R (may
 * be NULL): R is the rank itself when it failed, else the lowest failing
 * rank (so rank 0 reports the lowest one). */
int nf_cli_mpi_agree(const struct nf_cli_mpi * m, int rc, nf_err * err, int * failed_rank);
/* Collective: v[0..n) summed over the ranks, on every rank */
int nf_cli_mpi_sum_i64(const struct nf_cli_mpi * m, int64_t * v, int n, nf_err * err);
int nf_cli_mpi_sum_f64(const struct nf_cli_mpi * m, double * v, int n, nf_err * err);
/* Collective: every rank's n bytes to rank 0, in rank order: *all (free it)
 * holds them back to back, lens[r] (m->size entries) their lengths; other
 * ranks get *all = NULL. Fails (on every rank) past 2^31-1 bytes in all. */
int nf_cli_mpi_gather(const struct nf_cli_mpi * m, const void * data, int64_t n, char ** all, int64_t * lens,
                      nf_err * err);
/* stderr to /dev/null on ranks other than 0 (what every rank would print
 * alike, e.g. usage errors), and back; begin returns what end takes */
int nf_cli_mpi_quiet_begin(const struct nf_cli_mpi * m);
void nf_cli_mpi_quiet_end(int saved);
/* The end of a sharded command: rank 0 as nf_cli_command_exit; another rank
 * prints nothing, except its own error when it is failed_rank; 1 on failure */
int nf_cli_mpi_command_exit(const struct nf_cli_mpi * m, int rc, const nf_err * err, int failed_rank);

/* the commands */
int nf_cmd_run(int argc, char ** argv);
int nf_cmd_verify(int argc, char ** argv);
int nf_cmd_bench(int argc, char ** argv);
int nf_cmd_convert(int argc, char ** argv); /* cmd-convert.c */
int nf_cmd_predict(int argc, char ** argv); /* cmd-predict.c */

#endif
