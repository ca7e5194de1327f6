/* tabstar-verbalize.h -- TabSTAR's per-dataset verbalizer (spec tabstar.md
 * §2; upstream tabstar/tabstar_verbalizer.py and the tabstar/preprocessing/ modules,
 * tabstar 1.2.2): fitted on a training table (pandas.read_csv's typing, the
 * CSV reader of src/tabular), it turns any table with the same columns into
 * the model-level cells ("nofall-tabstar-cells/1", tabstar-cells.c). */
#ifndef NF_TABSTAR_VERBALIZE_H
#define NF_TABSTAR_VERBALIZE_H

#include "nf-impl.h"
#include "nofall-tabular.h"

struct cJSON;

/* a column's dtype as pandas.read_csv gives it (the fixture script converts
 * pandas 3's `str` columns to object first, as upstream needs) */
enum nf_tab_dtype {
    NF_TAB_DT_INT = 0,     /* int64                                            */
    NF_TAB_DT_FLOAT = 1,   /* float64 (NaN where missing)                      */
    NF_TAB_DT_BOOL = 2,    /* bool: only True/TRUE/true/False/FALSE/false       */
    NF_TAB_DT_OBJBOOL = 3, /* object holding Python bools and NaN (the same, some missing) */
    NF_TAB_DT_OBJECT = 4,  /* object holding str and NaN                       */
};

struct nf_tab_vcol {
    char * name;          /* as in the CSV header                                     */
    char * norm;          /* normalize_col_name(name)                                 */
    int src;              /* its index in the training table                          */
    int dtype;            /* enum nf_tab_dtype (training table)                       */
    int numerical;        /* is_numerical_feature                                     */
    const char * dropped; /* why it is not in the cells (constant), or NULL           */
    const char * why;     /* why numerical / text, for report.json                     */
    double mean, scale;   /* StandardScaler (numerical, kept)                          */
    double bounds[11];    /* the QuantileTransformer-derived boundaries                */
    char * labels[12];    /* the 12 bin labels                                        */
    int64_t n_quantiles;
};

struct nf_tab_verbalizer {
    int regression;
    char * target;          /* the target column, as in the CSV         */
    char * y_name;          /* normalized                                */
    int target_dtype;       /* enum nf_tab_dtype                         */
    const char * task_why;  /* how the task was decided                */
    int64_t n_classes;      /* classification: LabelEncoder's classes_   */
    char ** classes;        /* str(v) of each class, sorted as upstream  */
    double y_mean, y_scale; /* regression: StandardScaler on y        */
    int n_cols;             /* the feature columns, training order       */
    struct nf_tab_vcol * cols;
    int n_out; /* kept columns in cell order: text (training order), numerical (sorted by name) */
    int * out; /* n_out indices into cols                   */
};

const char * nf__tab_dtype_name(int dtype);
/* the fit on the whole training table (task: enum nf_predict_task; AUTO:
 * README "TabSTAR" rule). NF_ERR_INPUT naming file / row / column. */
int nf__tab_verbalizer_fit(const nf_table * train, const char * target, int task, struct nf_tab_verbalizer * v,
                           nf_err * err);
void nf__tab_verbalizer_free(struct nf_tab_verbalizer * v);
/* the transform of test (the training columns, the target optional, no
 * others) into a "nofall-tabstar-cells/1" document (*out, cJSON_Delete) */
int nf__tab_verbalize(const struct nf_tab_verbalizer * v, const nf_table * test, struct cJSON ** out, nf_err * err);

/* Python's formatting, exactly: repr(float) (str() of a float: nf__py_float_repr,
 * io/nf-io.h), and upstream's format_float on an np.float64 boundary (numpy's
 * round(x, 4), then int or '.4f' stripped) */
void nf__tab_format_float(double x, char * buf, size_t n);

#endif
