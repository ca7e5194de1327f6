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
/* np.add.reduce of n contiguous float64 (numpy's pairwise summation) */
double nf__np_sum(const double * a, int64_t n);

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

#endif /* NF_TABULAR_IMPL_H */
