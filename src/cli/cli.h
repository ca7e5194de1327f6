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

/* output files and output sets, the path guard (src/io/outset.c, path-guard.c) */
#include "nofall-outputs.h"
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
/* the markers on stdout (report.json's: nf_run_markers_json) */
void nf_run_markers_print(const struct nf_run_meas * r, const nf_backend * be, const char * shape, const char * classes,
                          int finite, double wall_ms, int assets_verified);
/* write the trace (into the set, or to its own file) */
int nf_run_finish(const nf_backend * be, const char * trace, const char * trace_in_out, struct nf_outfile * tr,
                  struct nf_outset * os, nf_err * err);
/* after the markers: stdout must have taken them; then swap the set in */
int nf_run_commit(struct nf_outset * os, const char * trace, const char * trace_in_out, struct nf_outfile * tr,
                  nf_err * err);
/* the end of a command that prints markers: the error (if any), then
 * EXIT_CODE=0|1; returns the process exit status (1 also when stdout failed) */
int nf_cli_command_exit(int rc, const nf_err * err);
/* `nofall tokenize` (TabSTAR's WordPiece tokenizer, nofall-text.h; cmd-convert.c) */
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
/* the options predict and finetune read alike (tables-opts.c): filled from v
 * (c->tables left to nf_cli_table_opts, which each command calls in its own
 * order); 0 after a message (--mirror-signs with --no-mirror) */
struct nf_cli_train {
    const char *model, *train, *val, *target, *device, *out, *mirror_signs;
    int task, mirror, progress; /* progress: NF_PROGRESS_AUTO, _QUIET (--quiet), _FORCE (--progress) */
    /* TabSTAR's fit (finetune, predict): --max-epochs (50), --patience (epochs, 5), --no-average,
     * --dropout (0: off; ts_dropout_set: given) */
    int ts_max_epochs, ts_patience, ts_no_average, ts_dropout_set;
    double ts_dropout;
    struct nf_cli_tables tables;
    int argc; /* the command line, for report.json */
    char ** argv;
};
int nf_cli_train_opts(const struct nf_cli_opts * v, int argc, char ** argv, struct nf_cli_train * c);
int nf_cli_table_read(const struct nf_cli_tables * t, const char * path, int is_train, nf_table ** out, nf_err * err);
int nf_cli_finetune_opts(const struct nf_cli_opts * v, struct nf_finetune_opts * fo);
void nf_cli_finetune_report(struct cJSON * rep, const struct nf_finetune_opts * fo);
/* TabSTAR's fit: the epochs as they end and a bar of them (cmd-finetune.c; nf_tabstar_fit_opts.on_epoch) */
struct nf_tabstar_epoch;
struct nf_cli_ts_log {
    struct nf_tabstar_epoch * e;
    int n, cap;
    struct nf_progress * bar;
    int mode;
    const char * what; /* the bar's name */
};
int nf_cli_ts_on_epoch(void * user, const struct nf_tabstar_epoch * e);

/* MPI: one command sharded over the ranks of an mpirun job (src/mpi/mpi-shard.c) */
#include "nofall-mpi.h"
/* The end of a sharded command: rank 0 as nf_cli_command_exit; another rank
 * prints nothing, except its own error when it is failed_rank; 1 on failure */
int nf_cli_mpi_command_exit(const struct nf_mpi * m, int rc, const nf_err * err, int failed_rank);

/* the commands */
int nf_cmd_run(int argc, char ** argv);
int nf_cmd_verify(int argc, char ** argv);
int nf_cmd_bench(int argc, char ** argv);
int nf_cmd_convert(int argc, char ** argv); /* cmd-convert.c */
int nf_cmd_predict(int argc, char ** argv); /* cmd-predict.c */

#endif
