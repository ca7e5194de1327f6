/* verify.h -- what a model type gives `verify` (nofall.h nf_verify_*;
 * nf_model_i.verify) and the pieces the types share (verify.c).
 *
 * The generic part finds the type, resolves the thresholds and seeds,
 * checks the outputs are not inputs through the type and hands over; the
 * type reads its fixture directories, runs its cases on both sides,
 * compares (its own figures: class agreement, bucket choices, ...), prints
 * its case lines and summary and builds the JSON. */
#ifndef NF_VERIFY_H
#define NF_VERIFY_H

#include "nf-impl.h"

#include <stdio.h>

struct cJSON;
struct nf_verify;

struct nf_verify_i {
    double max_abs, mean_abs; /* the thresholds' defaults */
    const uint64_t * seeds;   /* the default seed list (n_seeds of them; 0: takes none) */
    int n_seeds, max_seeds;   /* max_seeds: the longest --seeds list */
    const char * device;      /* the default device, or NULL: one must be given */
    /* the options as this type takes them: the usage errors (NF_ERR_ARG) */
    int (*check_opts)(const struct nf_verify_opts * o, nf_err * err);
    /* before the caller opens its outputs: the fixture's cases, option
     * conflicts found without loading anything (NULL: none) */
    int (*prepare)(struct nf_verify * v, nf_err * err);
    /* is path (an output) one of the files the run reads? (NULL: none checked) */
    int (*check_output)(const struct nf_verify * v, const char * flag, const char * path, nf_err * err);
    /* load, run, compare, report; v->failed, v->json set */
    int (*run)(struct nf_verify * v, FILE * report, nf_err * err);
};

struct nf_verify {
    struct nf_verify_opts o; /* thresholds and device resolved */
    const struct nf_verify_i * vi;
    char type[64];
    int against_cpu;
    uint64_t * seeds; /* o.seeds parsed, or the type's */
    int n_seeds;
    char ** dirs; /* the fixture's case directories (prepare) */
    int n_dirs;
    nf_backend *be, *rbe; /* the device, and the cpu reference (against cpu) */
    nf_model *m, *rm;
    struct cJSON * json; /* the results (run) */
    /* o.stage_errors: {"case": index, "stages": [...]} per bisected case,
     * added to json's cases after run (nf__verify_stages_add) */
    struct cJSON * stages;
    int failed;
    /* --precision bf16-autocast without --max-abs / --mean-abs: the type
     * scales its thresholds per case (mitra-verify.c, docs/precision.md) */
    int bf16_default;
};

/* a backend through o.backend_init (or nf_backend_init) */
int nf__verify_backend(const struct nf_verify * v, const char * device, int precision, nf_backend ** out, nf_err * err);
/* the case directories: against itself if it holds every file of
 * required[], else its subdirectories that do, sorted by name */
int nf__verify_case_dirs(struct nf_verify * v, const char * const * required, int n_required, nf_err * err);
/* "a,b,c": integers in [0, max]; the count, or -1 */
int nf__verify_seed_list(const char * s, uint64_t max, uint64_t * out, int cap);
#define NF_VERIFY_SEED_MAX ((int64_t) 9007199254740991) /* 2^53 - 1 */
/* two models of one type and configuration */
int nf__verify_same_config(const nf_model * a, const nf_model * b);
/* both exist and are one file (device + inode) */
int nf__verify_same_file(const char * a, const char * b);
int64_t nf__verify_argmax(const float * row, int width);
/* --json's head, every model alike: device, device_description, against,
 * precision, precision_detail (when detail), the two thresholds */
void nf__verify_json_head(struct cJSON * doc, const struct nf_verify * v, int detail);
/* the summary's lines: the head (VERIFY_DEVICE .. WORST_MEAN_ABS) and the
 * tail (INPUTS_IDENTICAL, PRECISION, PRECISION_DETAIL, RESULT) */
void nf__verify_summary_head(FILE * f, const struct nf_verify * v, int n_cases, int failed, const char * worst_case,
                             double worst_max, double worst_mean);
void nf__verify_summary_tail(FILE * f, const struct nf_verify * v, int inputs_identical, int failed);

/* The stages one side's forward dumped (nf_model_set_stage_callback):
 * name, shape and a host copy; keep chooses which (all: every one). */
struct nf_stage_rec {
    char name[64];
    int ndim;
    int64_t shape[4], n;
    float * data;
};
struct nf_stage_log {
    struct nf_stage_rec * r;
    int n, cap, all;
    int (*keep)(const char * stage); /* kept when all is 0 */
};
int nf__stage_log_fn(void * user, const char * stage, const float * data, int ndim, const int64_t * shape);
void nf__stage_log_clear(struct nf_stage_log * log);
void nf__stage_log_free(struct nf_stage_log * log);
const struct nf_stage_rec * nf__stage_log_find(const struct nf_stage_log * log, const char * name);
/* o.stage_errors: case k's max / mean |dev - ref| after every stage (but
 * the inputs), in the model's stage order, for the JSON's "stages" */
void nf__verify_stages_add(struct nf_verify * v, int k, const nf_model * m, const struct nf_stage_log * dev,
                           const struct nf_stage_log * ref);

#endif
