/* tabular-impl.h -- internals of the tables and the predictor (nofall-tabular.h) */
#ifndef NF_TABULAR_IMPL_H
#define NF_TABULAR_IMPL_H

#include "nofall-tabular.h"
#include "io/nf-io.h"

#include <stdio.h>

/* a table is the CSV reader's table: columns with the fields as written (raw),
 * the numbers (num, NaN where missing or text) and the missing mask */
struct nf_table {
    struct nf_csv_table csv;
};

/* a deep copy of a table (the predictor's support set) */
int nf__csv_clone(const struct nf_csv_table * src, struct nf_csv_table * dst, nf_err * err);

/* AutoGluon's special types of a text column (ag-types.c). NF_AG_DATETIME:
 * a date column; *bad_row >= 0 names a value whose reading nofall cannot
 * vouch for. NF_AG_DATE_UNSURE: whether it is a date column depends on such
 * a value (*bad_row). NF_AG_TEXT: free text. */
enum { NF_AG_PLAIN, NF_AG_DATETIME, NF_AG_DATE_UNSURE, NF_AG_TEXT };
int nf__ag_special_type(const struct nf_csv_column * c, int64_t n, int64_t * bad_row, nf_err * err);
int nf__iso_datetime_ns(const char * s, int64_t * ns); /* 1: an ISO 8601 date/time, as UTC ns */
int nf__date_maybe(const char * s);                    /* not ISO: might pandas read it as a date? */
void nf__civil_from_ns(int64_t ns, int64_t * year, int * month, int * day, int * dayofweek);
/* numpy's legacy RandomState, what Mitra's support subsets draw (np-random.c) */
struct nf_np_rng {
    uint32_t key[624];
    int pos;
};
uint32_t nf__np_seed(uint64_t seed);                       /* AutoGluon's get_numpy_seed */
void nf__np_rng_seed(struct nf_np_rng * r, uint32_t seed); /* np.random.RandomState(seed) */
uint32_t nf__np_rng_u32(struct nf_np_rng * r);             /* one MT19937 output          */
/* rng.choice(n, k, replace=False): perm (n values) gets permutation(n), out
 * (NULL, perm, or k values) its first k; 0 when not 1 <= n, 0 <= k <= n */
int nf__np_choice(struct nf_np_rng * r, int64_t n, int64_t k, int64_t * perm, int64_t * out);
/* random_interval(max): a uniform value in [0, max] (masked rejection) */
uint64_t nf__np_interval(struct nf_np_rng * r, uint64_t max);
/* np.add.reduce of n contiguous float64 (numpy's pairwise summation) */
double nf__np_sum(const double * a, int64_t n);

/* Mitra fine-tuning's episodes and splits, draw for draw as AutoGluon 1.6
 * (mitra-episode.c; spec finetune.md §1.2-§1.4). Row ids index the training
 * rows; y_class: the class label ids (>= 0) of the n rows, NULL for
 * regression. Everything returned is allocated by the call and released by
 * the matching _free (also after a failure: then it is empty). */
void nf__np_shuffle_i64(struct nf_np_rng * r, int64_t * a, int64_t n);   /* legacy rng.shuffle of a 1-D array */
void nf__np_permutation(struct nf_np_rng * r, int64_t n, int64_t * out); /* rng.permutation(n), n values  */
/* sklearn StratifiedKFold(n_splits, shuffle=True, random_state=r).split(y):
 * fold 0's test mask (test[i] = 1: row i is in it); NF_ERR_ARG where sklearn
 * raises (n_splits < 2 or > n, or above every class count) */
int nf__sk_stratified_fold0(struct nf_np_rng * r, const int64_t * y, int64_t n, int64_t n_splits, unsigned char * test,
                            nf_err * err);
/* sklearn train_test_split(test_size=0.2, random_state=r) of n rows: perm (n
 * values) = permutation(n); test = perm[0, *n_test), train = the rest, in
 * that order. NF_ERR_ARG (no draw) when the train part would be empty */
int nf__sk_train_test_split(struct nf_np_rng * r, int64_t n, int64_t * perm, int64_t * n_test, nf_err * err);
/* one training step's batch: support = the rows in the order upstream feeds
 * them (after DatasetFinetune's rng.choice reorder), query = the query pool's
 * first max_query rows in pool order */
struct nf_mitra_episode {
    int64_t n_support, n_query;
    int64_t *support, *query;
};
int nf__mitra_episode(struct nf_np_rng * rng, const int64_t * y_class, int64_t n, int64_t max_support,
                      int64_t max_query, struct nf_mitra_episode * out, nf_err * err);
void nf__mitra_episode_free(struct nf_mitra_episode * e);
/* the validation split fit makes when no X_val is given: classification =
 * make_stratified_dataset_split(X, y, seed) (a fresh
 * RandomState(get_numpy_seed(seed))); regression = upstream's
 * np.random.choice(range(n), int(0.2 n), replace=False) drawn from
 * RandomState(get_numpy_seed(seed)) (upstream: the unseeded global RNG).
 * train / val in upstream's order */
struct nf_mitra_split {
    int64_t n_train, n_val;
    int64_t *train, *val;
};
int nf__mitra_split_internal(uint64_t seed, const int64_t * y_class, int64_t n, struct nf_mitra_split * out,
                             nf_err * err);
void nf__mitra_split_free(struct nf_mitra_split * s);
/* nf_finetune from the RandomState rng_in (NULL: RandomState(o->seed); an
 * ensemble's later members continue the stream, as upstream's do), and the
 * trainer's RandomState afterwards (a prediction continues its stream, as
 * upstream's predict does); rng_out may be NULL (mitra-finetune.c) */
int nf__finetune_ex(nf_model * m, const struct nf_finetune_data * d, const struct nf_finetune_opts * o,
                    struct nf_finetune_result * res, const struct nf_np_rng * rng_in, struct nf_np_rng * rng_out,
                    nf_err * err);
/* Mitra model m's weights: a host copy (*out malloc'ed, *n floats), or
 * written back from one (an ensemble member's fine-tuned weights) */
int nf__finetune_weights_get(nf_model * m, float ** out, int64_t * n, nf_err * err);
int nf__finetune_weights_set(nf_model * m, const float * w, int64_t n, nf_err * err);
/* evaluate / predict: one query chunk's support, rng.choice(n_support,
 * min(n_support, max_support), replace=False): perm (n_support values) gets
 * permutation(n_support), the support is perm[0, *k) */
int nf__mitra_eval_support(struct nf_np_rng * rng, int64_t n_support, int64_t max_support, int64_t * perm, int64_t * k,
                           nf_err * err);
int64_t nf__mitra_eval_chunks(int64_t n_query, int64_t max_query); /* ceil(n_query / max_query) */

/* the outputs both model parts write (predictor.c): a CSV field (quoted as
 * pandas' to_csv quotes), a written file flushed, synced and closed (ok: the
 * writes so far succeeded; 1 when all did), probabilities.csv (a header of
 * the class names, then %.17g values, one row per test row) */
struct nf_mitra;
struct nf_tabstar;
int nf__tab_csv_field(FILE * f, const char * s);
int nf__tab_file_close(FILE * f, int ok);
int nf__tab_write_probabilities(const char * dir, const char * const * classes, int K, int64_t n, const double * p,
                                nf_err * err);

/* the metrics of nf_predictor_score on n scored rows (metrics.c): y the class
 * ids (-1: no training class), P n x K probabilities; y, yhat the values */
int nf__metrics_classification(const int64_t * y, const double * P, int64_t n, int K, double * acc, double * ll,
                               double * auc, nf_err * err);
int nf__metrics_regression(const double * y, const double * yhat, int64_t n, double * r2, double * rmse, double * mae,
                           nf_err * err);

#endif /* NF_TABULAR_IMPL_H */
