/*
 * nofall-tabular.h -- tables and the table predictor of libnofall, for the
 * command line (`nofall predict`) and the Python package alike. One
 * pipeline (fit on a training table, predict a test table, the outputs),
 * with a part per model (opts.model_type):
 *
 *   "mitra"    AutoGluon's preprocessing and ensembling as AutoGluon feeds
 *              Mitra (spec shared/specs/mitra.md §5; README "predict";
 *              src/tabular/mitra-*.c)
 *   "tabstar"  TabSTAR's verbalizer, fitted on the whole training table,
 *              the test rows verbalized into cells, one forward (README
 *              "TabSTAR"; src/tabular/tabstar-*.c)
 *
 *   nf_table      columns by name, each numeric (double, NaN = missing; int64
 *                 or float64 as pandas types it) or text (UTF-8, with a
 *                 missing mask); built from a CSV file (pandas.read_csv's
 *                 typing) or column by column (a pandas DataFrame, numpy).
 *   nf_predictor  fitted on a training table and a target column: the task,
 *                 the classes, AutoGluon's feature generation, Mitra's
 *                 Preprocessor, the mirror signs of every ensemble member.
 *                 It keeps its own copy of the training table (the support
 *                 set); the table can be freed after the fit.
 *   nf_predictor_predict  one forward per member on a test table (above
 *                 8,192 training rows one per 1,024 test rows, each with a
 *                 random 8,192-row support subset, as upstream), the
 *                 probabilities (or de-normalised predictions) averaged.
 *
 * Errors as in nofall.h: result codes, messages naming the table (its name,
 * e.g. the CSV path), row and column. A predictor is used by one thread at a
 * time; a model by one forward at a time.
 */
#ifndef NOFALL_TABULAR_H
#define NOFALL_TABULAR_H

#include "nofall.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- tables ---------------------------------------------------------------- */
typedef struct nf_table nf_table;

enum nf_column_type {
    NF_COLUMN_INT64 = 0,   /* every value an integer, none missing */
    NF_COLUMN_FLOAT64 = 1, /* numbers, NaN where missing           */
    NF_COLUMN_TEXT = 2,    /* strings (pandas object), a missing mask */
};
NF_API const char * nf_column_type_name(int type); /* "int64", "float64", "object" */

/* RFC 4180, a header row, columns typed as pandas.read_csv types them */
NF_API int nf_table_read_csv(const char * path, nf_table ** out, nf_err * err);
/* An empty table of n_rows rows; name is used in messages (e.g. "X", "train") */
NF_API int nf_table_new(const char * name, int64_t n_rows, nf_table ** out, nf_err * err);
/* Add a numeric column (copied): n_rows values, NaN = missing. is_int: the
 * values are int64 or uint64 (each must then be an integer and none missing;
 * NF_ERR_INPUT otherwise). */
NF_API int nf_table_add_numeric(nf_table * t, const char * name, const double * values, int is_int, nf_err * err);
/* Add an int64 (is_unsigned 0: values is const int64_t *) or uint64 (1: const
 * uint64_t *) column (copied), exactly: its values compare as integers, also
 * beyond 2^53 where doubles merge them (pandas' int64 / uint64 dtypes). */
NF_API int nf_table_add_int(nf_table * t, const char * name, const void * values, int is_unsigned, nf_err * err);
/* Add a text column (copied): n_rows NUL-terminated UTF-8 strings; a row is
 * missing where missing[r] != 0 (missing may be NULL) or values[r] is NULL. */
NF_API int nf_table_add_text(nf_table * t, const char * name, const char * const * values,
                             const unsigned char * missing, nf_err * err);
/* Add a bool column (copied): values[r] 0 (False), 1 (True) or -1 (missing).
 * Without missing values it is pandas' bool dtype (0/1); with them an object
 * column of bools and NaN, whose categories sort False, True, '' as pandas
 * sorts bools before strings. */
NF_API int nf_table_add_bool(nf_table * t, const char * name, const signed char * values, nf_err * err);
NF_API void nf_table_free(nf_table * t);
NF_API int64_t nf_table_n_rows(const nf_table * t);
NF_API int nf_table_n_cols(const nf_table * t);
NF_API const char * nf_table_col_name(const nf_table * t, int i);
NF_API int nf_table_col_type(const nf_table * t, int i);         /* enum nf_column_type */
NF_API int nf_table_find(const nf_table * t, const char * name); /* column index or -1 */

/* ---- the predictor ---------------------------------------------------------- */
enum nf_predict_task { NF_PREDICT_AUTO = 0, NF_PREDICT_CLASSIFICATION = 1, NF_PREDICT_REGRESSION = 2 };
#define NF_PREDICTOR_MAX_CLASSES 10

/* Mirror signs given explicitly (how a user reproduces a fitted AutoGluon
 * model, or a previous run from its report.json): the kept columns in model
 * order, which must equal the predictor's, and one +-1 sign per kept column
 * per ensemble member (n_estimators rows, row-major); regression_mirror: NULL
 * (none) or one 0/1 per member. */
struct nf_mirror_spec {
    const char * source; /* where the signs come from, for messages (NULL: "mirror signs") */
    int n_columns;
    const char * const * columns;
    int64_t n_estimators;
    const int * signs;             /* n_estimators x n_columns, each -1 or 1 */
    const int * regression_mirror; /* NULL or n_estimators values 0 / 1      */
};
/* Read a mirror-signs JSON file: an object with "columns_kept" (names, or
 * objects with a "name" as report.json writes them), "mirror_signs" (one list
 * of +-1 per member) and optionally "regression_mirror" (one bool per
 * member) -- a report.json is such a file. The returned spec is malloc'ed:
 * release with nf_mirror_spec_free. Every malformed item is named. */
NF_API int nf_mirror_spec_read(const char * path, struct nf_mirror_spec ** out, nf_err * err);
NF_API void nf_mirror_spec_free(struct nf_mirror_spec * s);

struct nf_predictor_opts {
    int task;                             /* enum nf_predict_task; AUTO: AutoGluon's infer_problem_type */
    int64_t n_estimators;                 /* >= 1 (0 = 1; with a mirror spec: its member count) */
    uint64_t seed;                        /* the mirror draws, and (always) the RandomState of the support
                             subsets above 8,192 training rows: AutoGluon's Mitra `seed`
                             hyperparameter (default 0)                            */
    int no_mirror;                        /* 1: every sign +1, no regression mirror               */
    const struct nf_mirror_spec * mirror; /* NULL, or the signs given explicitly (then the mirror draws and
                                             no_mirror are not used; n_estimators must be 0 or
                                             the spec's member count) */
    const char * model_type;              /* the model the tables are prepared for: NULL or "mitra", "tabstar"
                                             (TabSTAR: n_estimators, seed and the mirror are not used) */
};

typedef struct nf_predictor nf_predictor;

/* The fit: target column `target` of train; the preprocessing fitted on the
 * other columns. Bad tables (missing target values, one class, more than 10
 * classes, no feature left, ...) are NF_ERR_INPUT naming the table and column. */
NF_API int nf_predictor_fit(const nf_table * train, const char * target, const struct nf_predictor_opts * opts,
                            nf_predictor ** out, nf_err * err);
NF_API void nf_predictor_free(nf_predictor * p);

/* Predict test (the training table's columns; the target column optional, no
 * others) with model m (a Mitra classifier for a classification task, a
 * regressor for regression). out: classification: n_test x n_classes
 * averaged probabilities, regression: n_test averaged de-normalised
 * predictions. logits: NULL, or n_estimators x n_test x n_outputs (n_outputs =
 * n_classes, 1 for regression) float32, each member's raw outputs.
 * TabSTAR (a TabSTAR model, one member): out the softmax over the target
 * tokens (float32 values) or the inverse-scaled prediction (float32 values),
 * logits the model's n_test x n_outputs; non-finite logits are
 * NF_ERR_MISMATCH; nf_predictor_predict_part predicts every row. */
NF_API int nf_predictor_predict(nf_predictor * p, nf_model * m, const nf_table * test, double * out, float * logits,
                                nf_err * err);
/* Part of a prediction (an MPI shard: README "Running on a cluster with
 * mpirun"): the rows of test whose forward starts in [begin, end) (end 0: the
 * number of test rows), computed exactly as nf_predictor_predict computes
 * them -- the same forwards, the same random support subsets -- so the rows
 * are byte-identical to the whole prediction's, and shards [b_i, b_i+1)
 * covering the test rows predict every row once. A forward is, above
 * NF_PREDICTOR_MAX_SUPPORT training rows, one NF_PREDICTOR_QUERY_CHUNK-row
 * chunk of the test rows; else one of the model's query passes (Mitra's
 * "query_begin" / "query_end" options, nofall.h). out and logits have the
 * whole prediction's layout (n_test rows); *rows_begin, *rows_end (NULL or)
 * get the rows predicted; the other rows are 0. */
NF_API int nf_predictor_predict_part(nf_predictor * p, nf_model * m, const nf_table * test, int64_t begin, int64_t end,
                                     double * out, float * logits, int64_t * rows_begin, int64_t * rows_end,
                                     nf_err * err);
/* How the last prediction formed its forwards (report.json "queries") */
#define NF_PREDICTOR_MAX_SUPPORT 8192 /* upstream's max_samples_support           */
#define NF_PREDICTOR_QUERY_CHUNK 1024 /* upstream's max_samples_query (subsets)   */
struct nf_predict_stats {
    int subsets;                  /* 1: n_train > 8,192, a random subset per query chunk     */
    int64_t support_rows;         /* support rows a forward (n_train, or 8,192)              */
    int64_t query_chunk;          /* test rows a forward with subsets (1,024), else 0        */
    int64_t forwards;             /* forwards run (members x chunks; 1 a member without)     */
    int64_t support_passes;       /* support streams computed, over every forward            */
    int64_t rows_begin, rows_end; /* the test rows predicted                           */
};
NF_API void nf_predictor_last_stats(const nf_predictor * p, struct nf_predict_stats * out);
/* The checks nf_predictor_predict makes of a test table before any forward
 * (its columns, their types), without a model */
NF_API int nf_predictor_check_table(const nf_predictor * p, const nf_table * test, nf_err * err);
/* Progress of nf_predictor_predict (a progress bar, README "Progress"):
 * fn(user, done, total) after each member's forward -- done of total =
 * n_estimators forwards; the query passes inside one forward are not
 * reported separately -- on the thread that calls nf_predictor_predict.
 * fn NULL (the default): none. */
typedef void (*nf_predictor_progress_fn)(void * user, int64_t done, int64_t total);
NF_API void nf_predictor_set_progress(nf_predictor * p, nf_predictor_progress_fn fn, void * user);
/* milliseconds spent in the model's forwards by the last nf_predictor_predict */
NF_API double nf_predictor_forward_ms(const nf_predictor * p);

/* Fine-tune Mitra model m (its weights, in place) for p as AutoGluon's
 * MitraClassifier / MitraRegressor.fit does with fine_tune=True (README
 * "Fine-tuning"; nofall.h nf_finetune): training rows = p's training table;
 * validation rows = val (transformed by p's fitted feature generation and
 * Preprocessor as predict transforms test rows; its target column required,
 * every class one of the training classes), or, val NULL, upstream's internal
 * split of the training rows (classification: stratified, from
 * RandomState(o->seed); regression: 20% of the rows, from
 * RandomState(o->seed) where upstream uses numpy's unseeded global RNG), the
 * Preprocessor then refit on the training part as upstream fits it. With
 * n_estimators > 1 the members are fine-tuned one after another as upstream's
 * ensemble is, each from m's pretrained weights with its own mirror signs,
 * all on one RandomState; res is the last member's run (report.json has each
 * one's), each member's weights are kept as a host copy (4 bytes a
 * parameter) and written into m before it predicts, and o->on_step sees each
 * member's steps in turn (from step 0). After it, each nf_predictor_predict
 * with m continues the trainer's RandomState, as upstream's predict after
 * fit: per member, per 1,024-row test chunk a support order of the whole
 * training table (every call the first prediction after the fine-tuning: the
 * same result each time). On an error m's weights and p's Preprocessor may
 * have changed: free both. */
NF_API int nf_predictor_finetune(nf_predictor * p, nf_model * m, const nf_table * val,
                                 const struct nf_finetune_opts * o, struct nf_finetune_result * res, nf_err * err);

/* ---- the model part and the outputs (every model) ----------------------------- */
/* "mitra" or "tabstar": the model_type of the fit */
NF_API const char * nf_predictor_model_type(const nf_predictor * p);
/* Can model m predict for p (its type; Mitra: a classifier for a
 * classification task, a regressor for regression)? model_name names m in
 * the message (e.g. "--model DIR"). */
NF_API int nf_predictor_check_model(const nf_predictor * p, const nf_model * m, const char * model_name, nf_err * err);
/* TabSTAR: merge the PEFT LoRA adapter in dir into m's weights (once per
 * loaded model; on an error free the model); the report names it. Mitra:
 * NF_ERR_UNSUPPORTED. */
NF_API int nf_predictor_merge_adapter(nf_predictor * p, nf_model * m, const char * dir, nf_err * err);
/* The shape of logits.npy for n_test test rows: its ndim, shape[0..ndim)
 * (Mitra: n_estimators x n_test [x n_classes]; TabSTAR: n_test x n_outputs) */
NF_API int nf_predictor_logits_shape(const nf_predictor * p, int64_t n_test, int64_t shape[3]);
/* The files nf_predictor_write_outputs writes (README "predict"):
 * predictions.csv, probabilities.csv (classification: a column per class,
 * named by the class), logits.npy, and the model's own (TabSTAR:
 * probabilities.npy, class_ids.npy or predictions.npy, cells.json) */
NF_API int nf_predictor_n_artifacts(const nf_predictor * p);
NF_API const char * nf_predictor_artifact(const nf_predictor * p, int i);
/* Write the outputs of a prediction of n_test rows (out, logits as
 * nf_predictor_predict filled them; TabSTAR: the last prediction's) into the
 * existing directory dir; class_counts (NULL, or n_classes values) gets the
 * predicted classes' counts. nf_predictor_verify_outputs reads them back. */
NF_API int nf_predictor_write_outputs(nf_predictor * p, const char * dir, int64_t n_test, const double * out,
                                      const float * logits, int64_t * class_counts, nf_err * err);
NF_API int nf_predictor_verify_outputs(const nf_predictor * p, const char * dir, int64_t n_test, nf_err * err);
/* What the fit decided and the last prediction did, as the items of
 * report.json (README "predict", "TabSTAR"): a JSON object, in order
 * (Mitra: "queries" when m has query passes, then train, test, target, ...);
 * release with nf_free. test: the predicted table (its name, row count). */
NF_API char * nf_predictor_report_json(const nf_predictor * p, const nf_model * m, const nf_table * test, nf_err * err);

NF_API int nf_predictor_task(const nf_predictor * p); /* NF_PREDICT_CLASSIFICATION or _REGRESSION */
NF_API int64_t nf_predictor_n_train(const nf_predictor * p);
NF_API int64_t nf_predictor_n_estimators(const nf_predictor * p);
NF_API int64_t nf_predictor_n_outputs(const nf_predictor * p); /* n_classes, or 1 for regression */
NF_API const char * nf_predictor_target(const nf_predictor * p);
/* classification: the classes in AutoGluon's order (the sorted labels), each as
 * first written in the training table */
NF_API int64_t nf_predictor_n_classes(const nf_predictor * p);
NF_API const char * nf_predictor_class_name(const nf_predictor * p, int64_t k);
/* regression: the target's range (the [0, 1] scaling) */
NF_API void nf_predictor_target_range(const nf_predictor * p, double * y_min, double * y_max);

/* The feature columns (the training table's columns but the target, in
 * training order) and what the preprocessing made of each */
struct nf_column_info {
    const char * name;
    const char * csv_type; /* the column's type: "int64", "float64", "object" */
    const char * kind;     /* "numeric", "bool", "category"                   */
    const char * dropped;  /* why it was dropped, or NULL when kept            */
    int kept;              /* its index among the kept columns, or -1          */
    double mean;           /* kept: the training mean imputed for NaN          */
    int64_t n_categories;  /* category: the categories (codes 0..n-1)          */
    const char * const * categories;
    const char * true_str; /* bool: the value mapped to 1 (text column), or NULL */
    double true_num;       /* bool, numeric column: the value mapped to 1      */
};
NF_API int nf_predictor_n_columns(const nf_predictor * p);
NF_API int nf_predictor_column(const nf_predictor * p, int i, struct nf_column_info * out);
/* the kept columns in model order: column index (nf_predictor_column) of each */
NF_API int nf_predictor_n_kept(const nf_predictor * p);
NF_API int nf_predictor_kept(const nf_predictor * p, int j);
/* member e's signs (n_kept values, -1 / 1) and regression mirror (0 / 1) */
NF_API const int * nf_predictor_mirror_signs(const nf_predictor * p, int64_t e);
NF_API int nf_predictor_regression_mirror(const nf_predictor * p, int64_t e);

/* ---- tables as pandas reads them (docs/tables.md) ----------------------------------
 * nf_table_read: a table file; its name's compression extension (.gz, .bz2,
 * .xz) is undone as pandas infers it, a .tsv name (.tsv.gz, ...) is
 * tab-separated. nf_table_read_csv(path) is nf_table_read(path, NULL). */
struct nf_table_read_opts {
    int sep; /* the field separator (an ASCII byte, not '"' or a line end); 0: by the name */
};
NF_API int nf_table_read(const char * path, const struct nf_table_read_opts * o, nf_table ** out, nf_err * err);
/* A hint for a table read with the wrong separator: its header is one column
 * whose name holds a tab, ';', '|' or ','. 1 and "; the header is one column
 * holding ...: --sep X" in buf; else 0 and "". */
NF_API int nf_table_sep_hint(const nf_table * t, char * buf, size_t n);
/* Drop the columns of a comma-separated list of names. must_exist: a name
 * the table lacks is NF_ERR_INPUT naming it (else skipped). */
NF_API int nf_table_drop(nf_table * t, const char * names, int must_exist, nf_err * err);
/* 1 when the first column looks like the row index df.to_csv() writes: no
 * header name (pandas' "Unnamed: 0") and the integers 0..n-1 in order */
NF_API int nf_table_index_like(const nf_table * t);

/* ---- TabSTAR's fit (docs/finetune-tabstar.md; issue #30) ----------------------------
 * Upstream's TabSTARClassifier / TabSTARRegressor.fit (tabstar 1.1.16): the
 * validation split (split_to_val), the verbalizer fitted on the train part,
 * LoRA (r 32) fine-tuning of text layers >= 6 and the tabular transformer,
 * batches of 64, updates every 2 batches, AdamW + OneCycle per epoch, early
 * stopping on the validation metric (patience 5), the averaged adapter,
 * merged into m's weights. Dropout off (upstream trains with 0.1). out_dir
 * (may be NULL): model.safetensors + config.json + vocab.txt (a TabSTAR
 * model directory), verbalizer.json, split.json, training-log.jsonl.
 * model_dir: the directory m was loaded from (its config.json and vocab.txt
 * are copied). */
/* one epoch as it ends (on_epoch): upstream's per-epoch log */
struct nf_tabstar_epoch {
    int epoch, max_epochs; /* 1-based; the most                                  */
    double lr, beta1;      /* OneCycle's, this epoch                             */
    int updates;           /* optimizer updates this epoch                       */
    double train_loss, val_loss, metric;
    int best;    /* a new best metric                                             */
    int failed;  /* early stopping's counter after it                            */
    int stopped; /* early stopping ended the fit on it                           */
};
/* nonzero stops the fit (NF_ERR_GENERIC, "fine-tuning stopped by the caller at epoch E") */
typedef int (*nf_tabstar_epoch_fn)(void * user, const struct nf_tabstar_epoch * e);
struct nf_tabstar_fit_opts {
    int task;       /* enum nf_predict_task                                  */
    int max_epochs; /* 50 (upstream's MAX_EPOCHS; also OneCycle's length)     */
    int patience;   /* 5                                                     */
    int no_average; /* 1: the best epoch's adapter (upstream's paper version) */
    uint64_t seed;  /* the batches' permutations and the initial LoRA A       */
    /* upstream's fit(X, y, x_val, y_val): a validation table (the training
     * table's columns and its target) used as it is, split_to_val skipped and
     * the verbalizer fitted on the whole training table; NULL: split_to_val */
    const nf_table * val;
    nf_tabstar_epoch_fn on_epoch; /* each epoch's log, or NULL */
    void * user;
    float dropout; /* 0 (off, the default); p in (0, 1): nofall's own dropout
                     * at upstream's points (upstream trains with 0.1), masks
                     * from seed, not upstream-reproducible
                     * (docs/finetune-tabstar.md "Dropout") */
};
NF_API void nf_tabstar_fit_opts_default(struct nf_tabstar_fit_opts * o);
struct nf_tabstar_fit_result {
    int epochs, best_epoch, epochs_averaged;
    double val_loss, metric; /* the final adapter's, on the validation part */
    int stopped_at;          /* the epoch early stopping ended the fit on, or -1 */
    int64_t n_train, n_val;  /* the rows of the two parts                   */
    int val_table;           /* 1: o->val (upstream's x_val); 0: split_to_val */
    double threshold;        /* the averaging's loss threshold (0: no average) */
    double wall_ms;          /* the fit's wall time                         */
    int task;                /* the fit's: NF_PREDICT_CLASSIFICATION / _REGRESSION */
};
NF_API int nf_tabstar_fit(nf_model * m, const char * model_dir, const nf_table * train, const char * target,
                          const struct nf_tabstar_fit_opts * o, const char * out_dir,
                          struct nf_tabstar_fit_result * res, nf_err * err);
/* The same fit inside a TabSTAR predictor made by nf_predictor_fit on train:
 * m's weights become the fitted ones and the predictor's verbalizer the
 * train part's, so the next nf_predictor_predict is upstream's predict after
 * its fit (predict --fine-tune). */
NF_API int nf_predictor_tabstar_fit(nf_predictor * p, nf_model * m, const char * model_dir, const nf_table * train,
                                    const struct nf_tabstar_fit_opts * o, struct nf_tabstar_fit_result * res,
                                    nf_err * err);
/* The fit's summary as JSON (report.json's "fine_tune"): the options, the
 * validation ("internal split" / "table"), the rows, the epochs run, the best
 * epoch, the stop epoch, the averaging, the final loss and metric, and the
 * per-epoch log ep[0..n_ep). Free with nf_free; NULL out of memory. */
NF_API char * nf_tabstar_fit_json(const struct nf_tabstar_fit_opts * o, const struct nf_tabstar_fit_result * r,
                                  const struct nf_tabstar_epoch * ep, int n_ep);
/* A TabSTAR predictor on a model directory nofall's fit wrote (its
 * verbalizer.json and split.json): the verbalizer becomes the one the model
 * was fine-tuned with -- refitted on train's rows of split.json's train part
 * and checked equal to verbalizer.json (NF_ERR_INPUT naming it when train is
 * another table) -- as upstream's predict after fit. *used: 1 when taken; 0
 * (NF_OK) for a directory without verbalizer.json, or a Mitra predictor. */
NF_API int nf_predictor_tabstar_use_fit(nf_predictor * p, const char * model_dir, const nf_table * train, int * used,
                                        nf_err * err);
/* ---- column types given by the user (docs/tables.md "Column types") -------------
 * As AutoGluon's feature types (pandas' read_csv(dtype=...) / astype):
 *   "category"  the values as written, a pandas category: AutoGluon makes it
 *               a category without its date / free-text inference, missing
 *               values stay missing (not ''); TabSTAR verbalizes it as text
 *   "numeric"   ("float") float64: every value a number (True / False 1 / 0)
 *   "text"      free text: TabSTAR verbalizes it as text; Mitra refuses it
 *               (AutoGluon's n-gram features are not computed)
 *   "datetime"  dates: every value ISO 8601 (Mitra's date features);
 *               TabSTAR refuses it (its date encoder is not implemented)
 * origin names the option in messages ("--column-type", "column_types"). */
enum nf_user_type {
    NF_USER_TYPE_NONE = 0,
    NF_USER_TYPE_CATEGORY = 1,
    NF_USER_TYPE_NUMERIC = 2,
    NF_USER_TYPE_TEXT = 3,
    NF_USER_TYPE_DATETIME = 4,
};
/* the type of a name ("category", "numeric", "float", "text", "datetime"); -1 if none */
NF_API int nf_user_type_of(const char * name);
NF_API const char * nf_user_type_name(int type); /* "category", ... ("" for none) */
/* Give column col of t a type (a name as nf_user_type_of reads it). An
 * unknown type, a missing column (NF_ERR_INPUT naming origin, the column and
 * the table) or a value that cannot be of the type (naming the row, column
 * and value) is an error; t is then unchanged. */
NF_API int nf_table_set_type(nf_table * t, const char * col, const char * type, const char * origin, nf_err * err);
/* The same for a "COL=TYPE" item (split at the last '='). must_exist: a
 * column t lacks is an error (else the item is skipped). */
NF_API int nf_table_set_type_spec(nf_table * t, const char * spec, int must_exist, const char * origin, nf_err * err);
NF_API int nf_table_col_user_type(const nf_table * t, int i); /* enum nf_user_type */

/* ---- a prediction scored against the test table's target (docs/tables.md) --------
 * When the test table has the target column: classification accuracy,
 * log-loss and ROC-AUC (binary; multiclass: one-vs-rest, macro), regression
 * R2, RMSE and MAE, as scikit-learn computes them from the written outputs
 * (the probabilities / predictions in out, as nf_predictor_predict filled
 * it). Rows without a target value are not scored; n_rows 0: nothing scored
 * (no target column). A value sklearn leaves undefined is NaN (ROC-AUC with
 * a class absent from the test labels; log-loss and ROC-AUC when a test label
 * is no training class, n_unknown of them; R2 of one row). */
struct nf_predict_metrics {
    int task;          /* NF_PREDICT_CLASSIFICATION or _REGRESSION */
    int64_t n_rows;    /* test rows scored                         */
    int64_t n_unknown; /* classification: labels no training class */
    double accuracy, log_loss, roc_auc;
    double r2, rmse, mae;
};
NF_API int nf_predictor_score(const nf_predictor * p, const nf_table * test, const double * out,
                              struct nf_predict_metrics * m, nf_err * err);
/* report.json's "metrics": a JSON object (NaN as null); release with nf_free */
NF_API char * nf_predict_metrics_json(const struct nf_predict_metrics * m);
/* The one-line summary `predict` prints: rows, task, classes (with
 * class_counts, NULL: without), the output directory and the files in it, and the
 * metrics (m NULL or n_rows 0: none). 1 when written into buf. */
NF_API int nf_predictor_summary(const nf_predictor * p, int64_t n_test, const int64_t * class_counts,
                                const struct nf_predict_metrics * m, const char * dir, char * buf, size_t n);

#ifdef __cplusplus
}
#endif
#endif /* NOFALL_TABULAR_H */
