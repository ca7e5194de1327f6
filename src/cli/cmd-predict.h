/* cmd-predict.h -- `nofall predict`'s options and its one pipeline
 * (cmd-predict.c) over the library's table predictor (nofall-tabular.h),
 * whichever the model (Mitra, TabSTAR), its options parsed there too */
#ifndef NF_CMD_PREDICT_H
#define NF_CMD_PREDICT_H

#include "cli.h"

struct nf_pred_opts {
    struct nf_cli_train c; /* model, train, val, tables, TabSTAR's fit options, ... (nf_cli_train_opts) */
    const char * test;
    const char * model_type; /* NULL (Mitra) or "tabstar": nf_predictor_opts.model_type */
    const char * adapter;    /* TabSTAR: a PEFT LoRA adapter directory, or NULL */
    int64_t n_est;           /* 0: not given (1, or the --mirror-signs file's members) */
    int64_t query_chunk;
    uint64_t seed;
    int fine_tune;              /* --fine-tune: AutoGluon's fit with fine-tuning first */
    struct nf_finetune_opts fo; /* the training options (nf_cli_finetune_opts)          */
};

/* the pipeline on parsed options: one process (mp NULL) or one MPI rank;
 * returns the process exit status */
int nf_predict_run(const struct nf_pred_opts * o, const struct nf_mpi * mp);

#endif
