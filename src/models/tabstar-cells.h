/* tabstar-cells.h -- TabSTAR's model-level input, CELLS.json
 * ("nofall-tabstar-cells/1", README "TabSTAR"), as the model's arrays. */
#ifndef NF_TABSTAR_CELLS_H
#define NF_TABSTAR_CELLS_H

#include "tabstar-impl.h"

struct cJSON;

struct nf_tab_cells {
    int regression;
    int64_t n_rows, n_cells, n_targets, n_strings, max_len;
    int64_t * token_ids;     /* (n_strings, max_len), 0-padded   */
    int64_t * token_lengths; /* (n_strings)                      */
    int64_t * cells;         /* (n_rows, n_cells): string index  */
    float * x_num;           /* (n_rows, n_cells)                */
    int64_t * targets;       /* 0 .. n_targets-1                 */
    char ** strings;         /* the distinct strings             */
    struct cJSON * classes;  /* the "classes" array, or NULL     */
};

int nf__tab_cells_load(const char * path, const struct nf__wordpiece * vocab, struct nf_tab_cells * c, nf_err * err);
int nf__tab_cells_build(const struct cJSON * doc, const char * path, const struct nf__wordpiece * vocab,
                        struct nf_tab_cells * c, nf_err * err);
void nf__tab_cells_free(struct nf_tab_cells * c);
/* the five input arrays of the model (views of c) */
void nf__tab_cells_arrays(const struct nf_tab_cells * c, struct nf_array out[5]);
/* the seeded input (tabstar-inputs.c): 1 row; targets "no"/"yes" of
 * "target"; features f0..f5 with a bin label and a z-score from splitmix64
 * (nf__rng_next) at seed, as a CELLS.json document */
struct cJSON * nf__tab_seeded_cells(uint64_t seed);
/* nf_model_i.inputs and .apply_adapter */
int nf__tab_own_inputs(nf_model * model, int n, const char * const * keys, const char * const * values,
                       const struct nf_array * given, int n_given, struct nf_inputs * out, nf_err * err);
int nf__tab_inputs_check(int n, const char * const * keys, const char * const * values, nf_err * err);
int nf__tab_write_outputs(nf_model * model, const struct nf_inputs * in, const float * logits, const char * adapter,
                          const char * dir, struct nf_run_outputs * res, nf_err * err);
/* a TabSTAR output set's arrays read back (logits.npy, probabilities.npy and
 * class_ids.npy or predictions.npy: dtype, shape, finite, class ids in range;
 * logits.npy equal to logits unless NULL): run's check_outputs and predict's */
int nf__tab_check_arrays(const struct nf_tab_cells * c, const float * logits, const char * dir, nf_err * err);
int nf__tab_check_outputs(nf_model * model, const struct nf_inputs * in, const float * logits, const char * dir,
                          nf_err * err);
int nf__tab_apply_adapter(nf_model * model, const char * dir, char * summary, size_t summary_n, nf_err * err);

#endif
