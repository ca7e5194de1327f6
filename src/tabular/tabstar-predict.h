/* tabstar-predict.h -- internals of the TabSTAR part of the table
 * predictor (nofall-tabular.h, predictor.c; tabstar-predict.c) */
#ifndef NF_TABSTAR_PREDICT_H
#define NF_TABSTAR_PREDICT_H

#include "tabular-impl.h"
#include "tabstar-verbalize.h"
#include "models/tabstar-cells.h"

struct nf_tabstar {
    struct nf_tab_verbalizer v; /* fitted on the whole training table */
    char * train;               /* the training table's name          */
    int64_t n_train;
    char adapter[4400]; /* what nf_predictor_merge_adapter merged, or "none" */
    /* the last prediction */
    struct cJSON * doc;    /* its cells ("nofall-tabstar-cells/1") */
    struct nf_tab_cells c; /* the model's arrays of doc            */
    float * logits;        /* n_test x C                           */
    const struct nf__wordpiece * wp;
    double forward_ms;
    struct nf_predict_stats stats;
    nf_predictor_progress_fn progress;
    void * progress_user;
    char verbalizer_fit[96]; /* what the verbalizer was fitted on (report.json)  */
    char * fit_json;         /* the fit's summary (nf_tabstar_fit_json), or NULL */
};

int nf__tsp_n_artifacts(void);
const char * nf__tsp_artifact(int i);
int nf__tsp_fit(const nf_table * train, const char * target, const struct nf_predictor_opts * o,
                struct nf_tabstar ** out, nf_err * err);
void nf__tsp_free(struct nf_tabstar * p);
int nf__tsp_check_table(const struct nf_tabstar * p, const nf_table * test, nf_err * err);
int nf__tsp_check_model(const nf_model * m, const char * model_name, nf_err * err);
int nf__tsp_tabstar_fit(struct nf_tabstar * p, nf_model * m, const char * model_dir, const nf_table * train,
                        const struct nf_tabstar_fit_opts * o, struct nf_tabstar_fit_result * res, nf_err * err);
int nf__tsp_use_fit(struct nf_tabstar * p, const char * model_dir, const nf_table * train, int * used, nf_err * err);
int nf__tsp_merge_adapter(struct nf_tabstar * p, nf_model * m, const char * dir, nf_err * err);
int nf__tsp_predict(struct nf_tabstar * p, nf_model * m, const nf_table * test, double * out, float * logits_out,
                    nf_err * err);
int nf__tsp_write_outputs(const struct nf_tabstar * p, const char * dir, int64_t nq, const double * out,
                          const float * logits, int64_t * class_counts, nf_err * err);
int nf__tsp_verify_outputs(const struct nf_tabstar * p, const char * dir, int64_t nq, nf_err * err);
struct cJSON * nf__tsp_report(const struct nf_tabstar * p, const nf_table * test);
int nf__tsp_column(const struct nf_tabstar * p, int i, struct nf_column_info * out);

#endif
