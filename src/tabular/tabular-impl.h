/* tabular-impl.h -- internals of the tables and the predictor (nofall-tabular.h) */
#ifndef NF_TABULAR_IMPL_H
#define NF_TABULAR_IMPL_H

#include "nofall-tabular.h"
#include "io/nf-io.h"

/* a table is the CSV reader's table: columns with the fields as written (raw),
 * the numbers (num, NaN where missing or text) and the missing mask */
struct nf_table {
    struct nf_csv_table csv;
};

/* a deep copy of a table (the predictor's support set) */
int nf__csv_clone(const struct nf_csv_table * src, struct nf_csv_table * dst, nf_err * err);

#endif /* NF_TABULAR_IMPL_H */
