/* mitra-impl.h -- internals of the Mitra part of the table predictor
 * (nofall-tabular.h, src/tabular/predictor.c): AutoGluon's feature
 * generation and Mitra's Preprocessor (mitra-fit.c), the ensemble's
 * forwards and the outputs (mitra-predict.c) */
#ifndef NF_MITRA_IMPL_H
#define NF_MITRA_IMPL_H

#include "tabular-impl.h"

enum { NF_FEAT_NUM, NF_FEAT_BOOL, NF_FEAT_CAT, NF_FEAT_DATE };

/* one input column and what the feature generation made of it */
struct nf_feat {
    int col;           /* index in the training table */
    int kind;          /* NF_FEAT_*             */
    int is_int;        /* pandas int64 in train */
    double true_num;   /* bool: the value mapped to 1 */
    char true_int[24]; /* bool of an int64 / uint64 column: that value's digits (exact) */
    const char * true_str;
    char ** cats; /* category: sorted categories (count >= 2); bools: False, True, then '' */
    int bools;    /* the training column holds Python bools (and missing values) */
    int nan_cat;  /* a category column given by the user: missing stays NaN (code -1), not '' */
    int64_t n_cats;
    double * xs;          /* generated values (NaN missing; codes -1 for a missing category) */
    const char * dropped; /* why it was dropped, or NULL */
    int kept;             /* index in the model order, or -1 */
    double mean;
    int part;          /* date: 0 the nanoseconds, 1 year, 2 month, 3 day, 4 dayofweek */
    int64_t date_fill; /* date: the value for a missing or unreadable one (UTC ns) */
    char * name;       /* date: the generated feature's name (e.g. "d.year"), else NULL */
};

struct nf_mitra {
    struct nf_csv_table tr; /* the predictor's own copy of the training table */
    int ycol;
    int task; /* NF_PREDICT_CLASSIFICATION / NF_PREDICT_REGRESSION */
    /* classification */
    int64_t n_classes;
    char * class_name[NF_PREDICTOR_MAX_CLASSES];
    char class_num[NF_PREDICTOR_MAX_CLASSES][40]; /* a numeric class as str() prints it */
    int64_t * yc;
    /* regression */
    double *yv, y_min, y_max;
    struct nf_feat * feats;
    int n_feats;
    int * order; /* kept features after Mitra's singular check, in model order */
    int n_order;
    double * mean; /* per kept feature */
    int64_t n_est;
    int * signs;     /* n_est x n_order */
    int * regmirror; /* n_est */
    double forward_ms;
    uint64_t seed;      /* the support subsets' RandomState (AutoGluon's Mitra `seed`) */
    int no_mirror;      /* opts.no_mirror (the report's "mirror")                  */
    char * mirror_file; /* the mirror spec's source, or NULL (the report's "mirror_signs_file") */
    struct nf_predict_stats stats;
    nf_predictor_progress_fn progress; /* nf_predictor_set_progress */
    void * progress_user;
    /* after nf_predictor_finetune (mitra-tune.c): the trainer's RandomState
     * as the fine-tuning left it (each prediction continues it: a support
     * order per 1,024-row test chunk), what the run did; NULL: zero-shot */
    struct nf_np_rng * ft_rng;
    struct nf_finetune_opts ft_opts;
    struct nf_finetune_result ft_res;
    int64_t ft_n_train, ft_n_val; /* the rows trained on and validated on */
    int ft_internal;              /* 1: the validation rows were split off the training table */
    /* n_estimators > 1: each member's run (ft_res is the last one's) and its
     * fine-tuned weights (host copies of ft_n_weights floats), written into
     * the model before that member predicts */
    struct nf_finetune_result * ft_members;
    float ** ft_weights;
    int64_t ft_n_weights;
};

/* shared by the fit and the transform (mitra-fit.c) */
int nf__mitra_is_true_num(const struct nf_feat * f, const struct nf_csv_column * c, int64_t r);
int64_t nf__mitra_find_cat(char ** cats, int64_t n, int bools, const char * s);
double nf__mitra_date_value(int part, int64_t ns);

/* the Mitra part of each nf_predictor_* function (nofall-tabular.h) */
int nf__mitra_fit(const nf_table * train, const char * target, const struct nf_predictor_opts * opts,
                  struct nf_mitra ** out, nf_err * err);
void nf__mitra_free(struct nf_mitra * p);
int nf__mitra_check_table(const struct nf_mitra * p, const nf_table * test, nf_err * err);
int nf__mitra_check_model(const struct nf_mitra * p, const nf_model * m, const char * model_name, nf_err * err);
int nf__mitra_predict_part(struct nf_mitra * p, nf_model * m, const nf_table * test, int64_t begin, int64_t end,
                           double * out, float * logits_out, int64_t * rows_begin, int64_t * rows_end, nf_err * err);
void nf__mitra_last_stats(const struct nf_mitra * p, struct nf_predict_stats * out);
double nf__mitra_forward_ms(const struct nf_mitra * p);
void nf__mitra_set_progress(struct nf_mitra * p, nf_predictor_progress_fn fn, void * user);
int nf__mitra_task(const struct nf_mitra * p);
int64_t nf__mitra_n_train(const struct nf_mitra * p);
int64_t nf__mitra_n_estimators(const struct nf_mitra * p);
int64_t nf__mitra_n_outputs(const struct nf_mitra * p);
const char * nf__mitra_target(const struct nf_mitra * p);
int64_t nf__mitra_n_classes(const struct nf_mitra * p);
const char * nf__mitra_class_name(const struct nf_mitra * p, int64_t k);
void nf__mitra_target_range(const struct nf_mitra * p, double * y_min, double * y_max);
int nf__mitra_n_columns(const struct nf_mitra * p);
int nf__mitra_column(const struct nf_mitra * p, int i, struct nf_column_info * out);
int nf__mitra_n_kept(const struct nf_mitra * p);
int nf__mitra_kept(const struct nf_mitra * p, int j);
const int * nf__mitra_mirror_signs(const struct nf_mitra * p, int64_t e);
int nf__mitra_regression_mirror(const struct nf_mitra * p, int64_t e);
/* Mitra's Preprocessor.fit on the rows `rows` (NULL: every training row;
 * mitra-fit.c), the mirror draws, the kept columns' indices and means */
int nf__mitra_pre_fit(struct nf_mitra * p, const int64_t * rows, int64_t n_rows, nf_err * err);
void nf__mitra_draw_signs(struct nf_mitra * p);
void nf__mitra_set_kept(struct nf_mitra * p);
/* the Preprocessor's float32 matrix of member e's mirror (mitra-predict.c):
 * the training table (n_train x n_kept), or a table with the training
 * columns (checked, transformed as predict transforms test rows) */
int nf__mitra_train_matrix(const struct nf_mitra * p, int64_t e, float * out, nf_err * err);
int nf__mitra_table_matrix(const struct nf_mitra * p, const nf_table * t, int64_t e, float * out, nf_err * err);
/* fine-tuning (mitra-tune.c) */
void nf__mitra_finetune_members_free(struct nf_mitra * p); /* ft_members, ft_weights */
int nf__mitra_finetune(struct nf_mitra * p, nf_model * m, const nf_table * val, const struct nf_finetune_opts * o,
                       struct nf_finetune_result * res, nf_err * err);
struct cJSON;
void nf__mitra_finetune_report(const struct nf_mitra * p, struct cJSON * rep);
/* DropDuplicatesFeatureGenerator (mitra-dedupe.c): duplicates' dropped = "duplicate" */
int nf__mitra_drop_duplicates(struct nf_mitra * p, int64_t ns, nf_err * err);
int nf__mitra_predict_write_outputs(const struct nf_mitra * p, const char * dir, int64_t n_test, const double * out,
                                    const float * logits, int64_t * class_counts, nf_err * err);
int nf__mitra_verify_outputs(const struct nf_mitra * p, const char * dir, int64_t n_test, nf_err * err);
struct cJSON * nf__mitra_report(const struct nf_mitra * p, const nf_model * m, const nf_table * test);

#endif
