/* cmd-predict-tabstar.c -- `nofall predict` on a TabSTAR model directory
 * (README "TabSTAR"): its options; the pipeline is predict's
 * (cmd-predict.c, nf_predict_run) over the library's table predictor, whose
 * TabSTAR part (src/tabular/tabstar-predict.c) fits the verbalizer on the
 * whole --train table, verbalizes the --test table into cells and runs one
 * forward: by default after upstream's fit (nf_predictor_tabstar_fit,
 * docs/finetune-tabstar.md), with --no-fine-tune with the weights as they are
 * (optionally with a PEFT LoRA adapter merged). */
#include "cmd-predict.h"
#include "opts.h"
#include "io/nf-io.h"
#include "nofall-tabular.h"

#include <stdio.h>
#include <string.h>

struct nf_tp_opts {
    const char *model, *adapter, *train, *test, *target, *device, *out;
    int task, fine_tune, max_epochs;
    int progress; /* --quiet / --progress, parsed as Mitra's predict does; no bar is drawn yet */
    struct nf_cli_tables tables;
};

static int nf_tp_parse(int argc, char ** argv, struct nf_tp_opts * o) {
    struct nf_cli_opts v;
    memset(o, 0, sizeof(*o));
    if (!nf_cli_opts_parse(NF_M(PREDICT_TAB), argc, argv, 1, NULL, &v)) return 0;
    o->model = nf_cli_opt_str(&v, NF_O_MODEL, NULL);
    o->adapter = nf_cli_opt_str(&v, NF_O_ADAPTER, NULL);
    o->train = nf_cli_opt_str(&v, NF_O_TRAIN, NULL);
    o->test = nf_cli_opt_str(&v, NF_O_TEST, NULL);
    o->target = nf_cli_opt_str(&v, NF_O_TARGET, NULL);
    o->device = nf_cli_opt_str(&v, NF_O_DEVICE, "cpu");
    o->out = nf_cli_opt_str(&v, NF_O_OUT, NULL);
    o->task = nf_cli_opt_task(&v);
    o->progress = nf_cli_opt_progress(&v);
    /* upstream's fit first by default (upstream has no other mode); --fine-tune says so explicitly */
    o->fine_tune = !v.set[NF_O_NO_FINE_TUNE];
    o->max_epochs = v.set[NF_O_MAX_EPOCHS] ? (int) v.i[NF_O_MAX_EPOCHS] : 50;
    if (v.set[NF_O_NO_FINE_TUNE] && (v.set[NF_O_FINE_TUNE] || v.set[NF_O_MAX_EPOCHS])) {
        fprintf(stderr, "error: --no-fine-tune excludes %s\n", v.set[NF_O_FINE_TUNE] ? "--fine-tune" : "--max-epochs");
        return 0;
    }
    if (!nf_cli_table_opts(&v, &o->tables)) return 0;
    if (!o->model || !o->train || !o->test || !o->target || !o->out) {
        fprintf(stderr,
                "error: predict needs --model DIR --train TRAIN.csv --test TEST.csv --target COLUMN --out OUT\n");
        return 0;
    }
    return 1;
}

int nf_cmd_predict_tabstar(int argc, char ** argv) {
    struct nf_tp_opts t;
    if (!nf_tp_parse(argc, argv, &t)) return 2;
    const struct nf_pred_opts o = {.model = t.model,
                                   .adapter = t.adapter,
                                   .train = t.train,
                                   .test = t.test,
                                   .target = t.target,
                                   .device = t.device,
                                   .out = t.out,
                                   .task = t.task,
                                   .fine_tune = t.fine_tune,
                                   .ts_max_epochs = t.max_epochs,
                                   .model_type = "tabstar",
                                   .tables = t.tables,
                                   .argc = argc,
                                   .argv = argv,
                                   .mirror = 1};
    return nf_predict_run(&o, NULL);
}
