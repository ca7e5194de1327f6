/* tabstar-fit.h -- TabSTAR's fit as upstream's (tabstar 1.1.16's
 * TabSTARClassifier/Regressor.fit; spec shared/specs/finetune.md §3.1,
 * §3.3, §3.4): the validation split, the epoch loop around a training step
 * (the contract of src/models/tabstar-train.h, reached through struct
 * nf_tsf_step so that the loop is tested without a model), the metric, early
 * stopping and the averaged adapter.
 *
 *   tabstar-fit-pieces.c  split_to_val, ROC-AUC / R², the float32 validation
 *                         loss, the averaging threshold and the float32 mean;
 *   tabstar-fit.c         the loop. */
#ifndef NF_TABSTAR_FIT_H
#define NF_TABSTAR_FIT_H

#include "tabular-impl.h"

/* ---- split_to_val (preprocessing/splits.py; finetune.md §3.1) -------------------- */

/* Row ids (0..n-1, the table's rows) of the train and validation parts, in
 * the order upstream's DataFrames hold them. */
struct nf_tsf_split {
    int64_t n_train, n_val;
    int64_t *train, *val;
};

/* y: the class id of every row (classes numbered in sorted order of the raw
 * values, as sorted(set(y)) / np.unique), NULL for regression. val_size =
 * min(int(0.1 n), 1000), random_state 41. NF_ERR_INPUT with sklearn's reason
 * where upstream raises (a validation part smaller than the class count, a
 * class with one row left for the stratified split, ...). */
int nf__tsf_split_to_val(const int64_t * y, int64_t n, struct nf_tsf_split * out, nf_err * err);
void nf__tsf_split_free(struct nf_tsf_split * s);

/* ---- the metric (training/metrics.py) -------------------------------------------- */

/* sklearn roc_auc_score of the binary truth pos[i] (0/1) against score[i]
 * (float32), its arithmetic (the distinct thresholds, drop_intermediate, the
 * trapezoid with numpy's pairwise sum); NAN when pos holds one class only
 * (sklearn raises). */
double nf__tsf_roc_auc(const unsigned char * pos, const float * score, int64_t n);
/* upstream's calculate_metric: C == 1 R² (y_value, pred n x 1), C == 2 the
 * ROC-AUC of class 1 (prob n x 2), C > 2 the OVR macro ROC-AUC over the
 * classes present in y_class (prob n x C). NAN when undefined. */
double nf__tsf_metric(int64_t C, int64_t n, const int64_t * y_class, const double * y_value, const float * pred);
/* sklearn r2_score of float64 truth against float32 predictions */
double nf__tsf_r2(const double * y, const float * p, int64_t n);

/* ---- checkpoint averaging (training/checkpoint_averaging.py) --------------------- */

/* adam_smooth_minmax: best + 0.02 + 0.03 best / (best + 0.3) */
double nf__tsf_threshold(double best_loss);
/* torch.stack(x_0..x_{k-1}).mean(0) in float32: torch's cascaded sum of
 * the k values of each element, divided by k (bit for bit) */
void nf__tsf_mean_f32(const float * const * x, int k, int64_t m, float * out);
/* _evaluate_epoch's loss: a float32 running sum of loss_b * rows_b, divided
 * by the rows in float32 */
float nf__tsf_val_loss(const float * loss, const int64_t * rows, int n_batches);

/* ---- the loop ------------------------------------------------------------------ */

/* A training step as the loop sees it (the real one wraps tabstar-train.h;
 * the test's is a fake). Rows index the train part (grad) or the validation
 * part (eval), as the split orders them. */
struct nf_tsf_step {
    void * user;
    int64_t n_params; /* floats of the LoRA arena (A and B of every module) */
    int64_t C;        /* logits per row: classes, 1 for regression */
    /* forward + backward of the rows, ADDING loss_scale * d(mean loss) to the
     * gradient; *loss the batch's mean loss */
    int (*grad)(void * user, const int64_t * rows, int64_t nb, float loss_scale, float * loss, nf_err * err);
    /* clip (max_norm), AdamW, zero the gradient */
    int (*update)(void * user, double lr, double beta1, nf_err * err);
    /* eval-mode forward of validation rows [begin, end): logits
     * ((end - begin) x C) and the batch's mean loss */
    int (*eval)(void * user, int64_t begin, int64_t end, float * logits, float * loss, nf_err * err);
    int (*read)(void * user, float * params, nf_err * err);
    int (*write)(void * user, const float * params, nf_err * err);
};

struct nf_tsf_epoch;
struct nf_tsf_opts {
    int max_epochs;    /* MAX_EPOCHS 50 (also OneCycle's total_steps, as upstream) */
    int patience;      /* 5 */
    int64_t batch;     /* LORA_BATCH 64 */
    int accumulation;  /* GLOBAL_BATCH / LORA_BATCH = 2 */
    int64_t val_batch; /* 128 */
    double lr;         /* 1e-3 */
    int average;       /* 1: checkpoint averaging (upstream's default); 0: the paper version's best epoch */
    /* the epochs' permutations of the train rows: perms[e] (n_train ids),
     * e.g. replayed from upstream's torch generator; NULL: numpy's legacy
     * RandomState(seed).permutation(n_train) per epoch, in sequence */
    const int64_t * const * perms;
    uint64_t seed;
    /* each epoch as it ends (its `averaged` not yet known); nonzero stops the fit */
    int (*on_epoch)(void * user, const struct nf_tsf_epoch * ep);
    void * user;
};
void nf__tsf_opts_default(struct nf_tsf_opts * o);

struct nf_tsf_epoch {
    int epoch; /* 1-based */
    double lr, beta1;
    int updates;       /* optimizer updates this epoch */
    double train_loss; /* the mean of the batch losses weighted by rows (double, as upstream) */
    double val_loss;   /* float32 arithmetic, as upstream */
    double metric;
    int best;     /* a new best metric (strict >) */
    int failed;   /* early stopping's counter after this epoch */
    int stopped;  /* early stopping ended the fit here */
    int averaged; /* its adapter is in the average */
};

struct nf_tsf_result {
    int n_epochs; /* epochs run */
    struct nf_tsf_epoch * epochs;
    int best_epoch;        /* the best metric's epoch */
    int n_averaged;        /* epochs averaged (0: the best epoch's adapter is the final one) */
    double threshold;      /* the loss threshold (averaging) */
    double final_val_loss; /* the final adapter's validation loss and metric */
    double final_metric;
    int64_t n_train, n_val; /* the rows of the two parts */
    int regression;         /* the fit's task (nf__tsf_fit) */
};
void nf__tsf_result_free(struct nf_tsf_result * r);

/* The fit: every epoch as upstream's trainer; the final adapter (averaged, or
 * the best epoch's) written back into the step. y_val_class (classification)
 * or y_val_value (regression): the validation targets, n_val rows. */
int nf__tsf_run(const struct nf_tsf_step * s, int64_t n_train, int64_t n_val, const int64_t * y_val_class,
                const double * y_val_value, const struct nf_tsf_opts * o, struct nf_tsf_result * res, nf_err * err);

/* ---- the fit on a table (tabstar-fit-run.c) -------------------------------------- */

struct nf_tab_verbalizer;
/* rows of t (borrowed strings; free with nf__tsf_subset_free) */
int nf__tsf_subset(const nf_table * t, const int64_t * rows, int64_t n, nf_table * out, nf_err * err);
void nf__tsf_subset_free(nf_table * t);
/* upstream's transform_target on the table's target column: y_class the
 * LabelEncoder ids (classification), y_value the clipped z-scores
 * (regression); NF_ERR_INPUT for a missing value or an unknown class */
int nf__tsf_targets(const struct nf_tab_verbalizer * v, const nf_table * table, int64_t * y_class, double * y_value,
                    nf_err * err);

/* the initial lora_A (r x in, row-major) of a module: U(-1/sqrt(in), 1/sqrt(in))
 * (kaiming_uniform_(a=sqrt(5))'s distribution) from numpy's legacy
 * RandomState(fnv1a32(module) ^ seed).random_sample -- nofall's generator,
 * also what reference/tabstar_fit_upstream.py writes into upstream's model */
void nf__tsf_init_a(const char * module, int64_t r, int64_t in, uint64_t seed, float * a);

struct nf_tsf_fit_opts {
    struct nf_tsf_opts loop;
    int task;             /* enum nf_predict_task (AUTO: the README "TabSTAR" rule) */
    const char * out_dir; /* the output directory, or NULL */
    const float * init;   /* the initial LoRA arena (replay), or NULL: A ~ U(+-1/sqrt(in)) from RandomState(seed) */
    /* upstream's x_val / y_val: the validation table as it is (split_to_val
     * skipped, the train part the whole table, the verbalizer fitted on it);
     * NULL: split_to_val */
    const nf_table * val;
    float dropout; /* 0: off; else nf__tab_train_dropout(p, masks from loop.seed) */
};
void nf__tsf_fit_opts_default(struct nf_tsf_fit_opts * o);
/* fit model (loaded from model_dir) on table's target; the merged weights
 * stay in the model; v_out (may be NULL) gets the train part's verbalizer */
int nf__tsf_fit(nf_model * model, const char * model_dir, const nf_table * table, const char * target,
                const struct nf_tsf_fit_opts * o, struct nf_tab_verbalizer * v_out, struct nf_tsf_result * res,
                nf_err * err);

#endif
