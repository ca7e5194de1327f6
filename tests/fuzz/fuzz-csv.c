/* fuzz-csv.c -- libFuzzer target: the CSV reader (nf__csv_parse, behind
 * nf__csv_read, `nofall predict` and nf_table_read_csv) on arbitrary bytes.
 * An accepted table must be self-consistent: every column named, names
 * distinct and found by nf__csv_find, n_rows fields per column, the missing
 * mask and its count agreeing, int64 columns without missing values and with
 * integral values, float64 values NaN exactly where missing. */
#include "io/nf-io.h"

#include <math.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    nf_err err;
    struct nf_csv_table t;
    memset(&t, 0, sizeof(t));
    if (nf__csv_parse((const char *) data, size, "fuzz.csv", &t, &err) != NF_OK) {
        if (err.code == NF_OK || err.msg[0] == 0) __builtin_trap(); /* a refusal carries a code and a message */
        return 0;
    }
    if (t.n_cols < 1 || t.n_rows < 0) __builtin_trap();
    for (int c = 0; c < t.n_cols; c++) {
        const struct nf_csv_column * col = &t.cols[c];
        if (!col->name || nf__csv_find(&t, col->name) != c) __builtin_trap();
        int64_t missing = 0;
        for (int64_t r = 0; r < t.n_rows; r++) {
            if (!col->raw || !col->raw[r] || !col->missing) __builtin_trap();
            volatile size_t len = strlen(col->raw[r]);
            (void) len;
            if (col->missing[r] != 0 && col->missing[r] != 1) __builtin_trap();
            missing += col->missing[r];
            if (col->type == NF_CSV_TEXT) continue;
            if (!col->num) __builtin_trap();
            const double v = col->num[r];
            if (col->missing[r] != (isnan(v) != 0)) {
                /* a numeric field that reads as NaN ("nan" is an NA string; a literal NaN must be missing) */
                if (!col->missing[r]) __builtin_trap();
            }
            if (col->type == NF_CSV_INT && (col->missing[r] || v != floor(v))) __builtin_trap();
        }
        if (missing != col->n_missing) __builtin_trap();
    }
    nf__csv_free(&t);
    return 0;
}
