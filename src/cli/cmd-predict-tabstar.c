/* cmd-predict-tabstar.c -- `nofall predict` on a TabSTAR model directory
 * (README "TabSTAR"): its options; the pipeline is predict's
 * (cmd-predict.c, nf_predict_run) over the library's table predictor, whose
 * TabSTAR part (src/tabular/tabstar-predict.c) fits the verbalizer on the
 * whole --train table, verbalizes the --test table into cells and runs one
 * forward (optionally with a PEFT LoRA adapter merged). */
#include "cmd-predict.h"
#include "io/nf-io.h"
#include "nofall-tabular.h"

#include <stdio.h>
#include <string.h>

struct nf_tp_opts {
    const char *model, *adapter, *train, *test, *target, *device, *out;
    int task;
};

static int nf_tp_parse(int argc, char ** argv, struct nf_tp_opts * o) {
    static const char * const flags[] = {"--model", "--adapter", "--train", "--test", "--target",
                                         "--task",  "--device",  "--out",   NULL};
    memset(o, 0, sizeof(*o));
    o->device = "cpu";
    for (int i = 1; i < argc; i++) {
        const char * a = argv[i];
        char e[256];
        if (!nf_cli_is_flag(a, flags)) {
            fprintf(stderr, "error: unknown option %s (predict, for a TabSTAR model)\n", nf__esc(e, sizeof(e), a));
            return 0;
        }
        const char * v = nf_cli_need_value(argc, argv, &i);
        if (!v) return 0;
        if (strcmp(a, "--model") == 0)
            o->model = v;
        else if (strcmp(a, "--adapter") == 0)
            o->adapter = v;
        else if (strcmp(a, "--train") == 0)
            o->train = v;
        else if (strcmp(a, "--test") == 0)
            o->test = v;
        else if (strcmp(a, "--target") == 0)
            o->target = v;
        else if (strcmp(a, "--device") == 0)
            o->device = v;
        else if (strcmp(a, "--out") == 0)
            o->out = v;
        else if (strcmp(a, "--task") == 0) {
            if (strcmp(v, "auto") == 0)
                o->task = NF_PREDICT_AUTO;
            else if (strcmp(v, "classification") == 0)
                o->task = NF_PREDICT_CLASSIFICATION;
            else if (strcmp(v, "regression") == 0)
                o->task = NF_PREDICT_REGRESSION;
            else {
                fprintf(stderr, "error: --task takes auto, classification or regression, not '%s'\n",
                        nf__esc(e, sizeof(e), v));
                return 0;
            }
        }
    }
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
                                   .model_type = "tabstar",
                                   .mirror = 1};
    return nf_predict_run(&o, NULL);
}
