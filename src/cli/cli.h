/* cli.h -- shared pieces of the nofall command-line tool. */
#ifndef NF_CLI_H
#define NF_CLI_H

#include "nofall.h"
#include "nf-impl.h"

#include <stdbool.h>

/* A host-side table (support rows with labels, query rows), owning its
 * arrays: the inputs of the table models (Mitra). */
struct nf_cli_table {
    int64_t   n_support, n_query, n_features;
    float   * xs, * xq;
    int64_t * yc;        /* classification labels, or NULL */
    float   * yv;        /* regression targets, or NULL    */
};
void nf_cli_table_free(struct nf_cli_table * t);
/* The table as the model inputs support_x, support_y, query_x (3 arrays) */
#define NF_CLI_TABLE_INPUTS 3
void nf_cli_table_arrays(const struct nf_cli_table * t, struct nf_array out[NF_CLI_TABLE_INPUTS]);
/* Does m take a table (the inputs above)? Its labels: class_labels (i64,
 * n_classes of them) or float targets. NF_ERR_UNSUPPORTED otherwise. */
int nf_cli_table_model(const nf_model * m, int * class_labels, int64_t * n_classes, nf_err * err);
/* The output shape for table t; width = elements per query row. */
int nf_cli_output_shape(const nf_model * m, const struct nf_cli_table * t, int * ndim, int64_t * shape, int * width, nf_err * err);
/* config items as equal as two models' configurations */
int nf_cli_same_config(const nf_model * a, const nf_model * b);

/* Deterministic synthetic table from seed (host only, byte-identical on every
 * machine): x ~ rounded normal, labels in 0..n_classes-1 (class_labels) or
 * targets in [0, 1). */
int nf_cli_table_generate(uint64_t seed, int64_t ns, int64_t nq, int64_t nf, int class_labels, int n_classes,
                          struct nf_cli_table * t, nf_err * err);
/* support_x / support_y / query_x .npy files */
int nf_cli_table_load(const char * sx, const char * sy, const char * qx, int class_labels,
                      struct nf_cli_table * t, nf_err * err);
/* Writes support_x.npy, support_y.npy, query_x.npy into dir as tmp names
 * (".<name>.tmp"); nf_cli_commit renames them. */
int nf_cli_table_write_tmp(const char * dir, const struct nf_cli_table * t, nf_err * err);

/* Parse "a,b,c" into a list of unsigned integers; returns count or -1. */
int nf_cli_parse_u64_list(const char * s, uint64_t * out, int cap);
/* Parse "--flag value" style: returns the value or NULL (and prints usage). */
const char * nf_cli_need_value(int argc, char ** argv, int * i);
int nf_cli_parse_precision(const char * s, int * out);

double nf_cli_now_ms(void);
/* Print the backend's warning (nf_backend_warning), if any, to stderr. */
void nf_cli_backend_warn(const nf_backend * be);
/* nf_backend_init_opts with the options the environment gives
 * (nf_backend_env_read: the CLI's NOFALL_* / NF_CUDA_* conveniences), then
 * the backend's warning, if any, on stderr. */
int nf_cli_backend_init(const char * device, int precision, nf_backend ** out, nf_err * err);
/* Write be's trace as JSON to path (temp name + rename). */
int nf_cli_write_trace(const nf_backend * be, const char * path, nf_err * err);

struct nf_cli_diff {
    double max_abs, mean_abs;
    int64_t n, n_rows, class_disagree;
    bool   finite;
};
/* Compare two (rows, width) arrays; class agreement uses argmax when width > 1 */
void nf_cli_diff(const float * a, const float * b, int64_t rows, int width, struct nf_cli_diff * d);
int64_t nf_cli_argmax(const float * row, int width);

/* Fail-fast check of a directory and its file names */
void nf_cli_tmp_name(char * out, size_t n, const char * dir, const char * file);
void nf_cli_final_name(char * out, size_t n, const char * dir, const char * file);

/* statistics of n timings (sorted in place) */
struct nf_cli_stats { double median, mean, p90, min, max; };
void nf_cli_stats(double * v, int n, struct nf_cli_stats * s);

/* the commands */
int nf_cmd_run(int argc, char ** argv);
int nf_cmd_verify(int argc, char ** argv);
int nf_cmd_bench(int argc, char ** argv);
int nf_cmd_convert(int argc, char ** argv);   /* cmd-convert.c */

#endif
