/*
 * nofall-outputs.h -- how libnofall's front ends write their outputs (docs/outputs.md,
 * README "Output sets"): whole or not at all, and never over an input.
 *
 *   nf_outset            an output directory replaced as a set: a lock per
 *                        directory, a staging directory, one atomic swap
 *   nf_outfile           one output file under a private temporary name,
 *                        renamed into place
 *   the path guard       the inputs a command reads (nf_out_input_add); an
 *                        output that would replace one is refused
 *   signals              SIGINT/SIGTERM/SIGHUP/SIGQUIT remove what is staged
 *
 * src/io/outset.c and src/io/path-guard.c. Used by the command-line tool;
 * the state (staged paths, registered inputs) is per process. Errors as in
 * nofall.h.
 */
#ifndef NOFALL_OUTPUTS_H
#define NOFALL_OUTPUTS_H

#include "nofall.h"

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* SIGINT/SIGTERM/SIGHUP/SIGQUIT remove registered staging directories and
 * temporary files, then end the process by the signal; SIGPIPE is ignored. */
NF_API void nf_out_signals_install(void);
/* Test builds (-DNOFALL_TEST_HOOKS=ON): NOFALL_TEST_DELAY=PHASE:MS sleeps there. */
NF_API void nf_out_test_delay(const char * phase);
/* canonical absolute path (the last component may be missing); 0 on success */
NF_API int nf_out_canonical(const char * path, char * out, size_t n);
/* both exist and are the same file (device + inode) */
NF_API int nf_out_same_file(const char * a, const char * b);

/* ---- the path guard (path-guard.c): no file a command writes is one it reads ---- */
/* Register an input: a file (and what is read beside it: .fai, .gzi, .tbi,
 * .csi, a .ckpt's config.json) or a directory (the files in it). */
NF_API void nf_out_input_add(const char * flag, const char * path);
NF_API void nf_out_inputs_clear(void);
/* NF_ERR_ARG naming both when path is a registered input: the same device
 * and inode, or, not existing yet, the same canonical name. */
NF_API int nf_out_check(const char * path, const char * flag, nf_err * err);
/* the same, ending the message with why (what happens, what to do) */
NF_API int nf_out_check_why(const char * path, const char * flag, const char * why, nf_err * err);

/* One output file written under a private temporary name next to it
 * (created at open, so an unwritable place fails before any work) and
 * renamed into place by commit. */
struct nf_outfile {
    char path[4096], tmp[4096];
    int fd, slot, closed;
    FILE * f;
};
NF_API int nf_outfile_open(struct nf_outfile * o, const char * path, const char * flag, nf_err * err);
NF_API FILE * nf_outfile_fp(struct nf_outfile * o);
NF_API int nf_outfile_close(struct nf_outfile * o, nf_err * err);  /* flush + fsync + close */
NF_API int nf_outfile_commit(struct nf_outfile * o, nf_err * err); /* close if open, rename */
NF_API void nf_outfile_abort(struct nf_outfile * o);
/* commit each in turn with SIGINT/SIGTERM/SIGHUP/SIGQUIT deferred until all
 * are renamed (a signal then ends the process with the new files in place) */
NF_API int nf_outfiles_commit(struct nf_outfile * const * files, int n, nf_err * err);

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
NF_API int nf_outset_begin(struct nf_outset * s, const char * out, const char * const * names, int n_names,
                           nf_err * err);
/* staging/file */
NF_API void nf_outset_path(const struct nf_outset * s, const char * file, char * out, size_t n);
/* Is path directly inside --out? Its name there in name. */
NF_API int nf_outset_inside(const struct nf_outset * s, const char * path, char * name, size_t n);
/* Carry over the other files, swap the staging directory in, remove the
 * previous set; then commit extra (may be NULL). Signals blocked throughout. */
NF_API int nf_outset_commit(struct nf_outset * s, struct nf_outfile * extra, nf_err * err);
/* Remove the staging directory if still there, release the lock; without a
 * commit, remove the parents begin created (each only if empty). */
NF_API void nf_outset_end(struct nf_outset * s);

/* ---- a run's report.json (src/core/run-report.c) -------------------------------- */
/* where things were measured to be, after a forward */
struct nf_run_meas {
    struct nf_placement pl;
    char model_dev[32];
    struct nf_trace_totals tot;
    int fallback;
};
NF_API int nf_run_measure(const nf_model * m, const nf_backend * be, struct nf_run_meas * r, nf_err * err);
/* report.json's common members (version, model, files with their SHA-256 --
 * nf_model_file_sha256, hashed once a model --, config, device, precision) */
struct cJSON;
NF_API void nf_run_report_common(struct cJSON * rep, const char * model_path, nf_model * m, const nf_backend * be);
/* how the last Mitra forward took its queries: "queries" (nothing for other models) */
NF_API void nf_run_report_passes(struct cJSON * rep, const nf_model * m);
/* the markers into report.json's "markers" object */
NF_API void nf_run_markers_json(struct cJSON * rep, const struct nf_run_meas * r, const char * shape,
                                const char * classes, int finite, double wall_ms);
/* --trace must not replace an input, the model, --out or an artifact;
 * in_out: its name when it is inside --out (then part of the set) (path-guard.c) */
NF_API int nf_run_check_trace(const char * trace, const char * model, const char * const * inputs,
                              const char * const * input_flags, int n_inputs, const struct nf_outset * os,
                              const char * const * artifacts, int n_artifacts, char * in_out, size_t n, nf_err * err);
/* bench: statistics of n timings (v sorted in place) */
struct nf_bench_stats {
    double median, mean, p90, min, max;
};
NF_API void nf_bench_stats(double * v, int n, struct nf_bench_stats * s);

#ifdef __cplusplus
}
#endif

#endif
