/* cmd-finetune.c -- `nofall finetune`: fine-tune a Mitra model on a training
 * CSV as AutoGluon's fit does (README "Fine-tuning"), through the library's
 * table predictor (nofall-tabular.h nf_predictor_fit, nf_predictor_finetune):
 * the tables first (every bad one an error naming the file before --out is
 * touched), then --out as one output set (outset.c): the fine-tuned weights
 * (nf_model_save: config.json, model.safetensors), training-log.json and
 * training-log.csv (one row per step, step 0 the pretrained validation),
 * report.json; the markers on stdout. The training options' parsing is
 * shared with `predict --fine-tune` (nf_cli_finetune_opts). A TabSTAR model
 * directory takes upstream's fit instead (nf_tabstar_fit; --val its x_val):
 * --out gets the merged model directory, the verbalizer's state, the split,
 * the training log and report.json (Mitra's keys where they mean the same;
 * the fit's summary under "fine_tune"), a bar of epochs with --progress. */
#include "cli.h"
#include "opts.h"
#include "io/nf-io.h"
#include "nofall-tabular.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int nf_cli_finetune_opts(const struct nf_cli_opts * v, struct nf_finetune_opts * fo) {
    nf_finetune_opts_default(fo);
    if (v->set[NF_O_STEPS] && v->set[NF_O_FT_STEPS] && v->i[NF_O_STEPS] != v->i[NF_O_FT_STEPS]) {
        fprintf(stderr, "error: --steps %lld and --fine-tune-steps %lld differ (they are the same option)\n",
                (long long) v->i[NF_O_STEPS], (long long) v->i[NF_O_FT_STEPS]);
        return 0;
    }
    if (v->set[NF_O_STEPS]) fo->steps = v->i[NF_O_STEPS];
    if (v->set[NF_O_FT_STEPS]) fo->steps = v->i[NF_O_FT_STEPS];
    if (v->set[NF_O_LR]) fo->lr = v->d[NF_O_LR];
    if (v->set[NF_O_WEIGHT_DECAY]) fo->weight_decay = v->d[NF_O_WEIGHT_DECAY];
    if (v->set[NF_O_WARMUP_STEPS]) fo->warmup_steps = v->i[NF_O_WARMUP_STEPS];
    if (v->set[NF_O_PATIENCE]) fo->patience = v->i[NF_O_PATIENCE];
    fo->keep_last = v->set[NF_O_KEEP_LAST];
    fo->seed = (uint64_t) v->i[NF_O_PREDICT_SEED];
    return 1;
}

void nf_cli_finetune_report(cJSON * rep, const struct nf_finetune_opts * fo) {
    cJSON * o = cJSON_AddObjectToObject(rep, "options");
    cJSON_AddNumberToObject(o, "steps", (double) fo->steps);
    cJSON_AddNumberToObject(o, "lr", fo->lr);
    cJSON_AddNumberToObject(o, "weight_decay", fo->weight_decay);
    cJSON_AddNumberToObject(o, "warmup_steps", (double) fo->warmup_steps);
    cJSON_AddNumberToObject(o, "patience", (double) fo->patience);
    cJSON_AddNumberToObject(o, "seed", (double) fo->seed);
    cJSON_AddBoolToObject(o, "keep_last", fo->keep_last);
}

struct nf_ft_cli {
    struct nf_cli_train c;   /* model, tables, TabSTAR's fit options, ... (nf_cli_train_opts) */
    const char * mitra_only; /* a Mitra option given (refused for TabSTAR) */
    struct nf_finetune_opts fo;
};

/* the steps as they come (the log), the bar */
struct nf_ft_log {
    struct nf_finetune_step * s;
    int64_t n, cap;
    nf_progress * bar;
    int mode;
    int64_t total;
};

static int nf_ft_on_step(void * user, const struct nf_finetune_step * st) {
    struct nf_ft_log * l = user;
    if (l->n == l->cap) {
        const int64_t cap = l->cap ? 2 * l->cap : 64;
        struct nf_finetune_step * s = realloc(l->s, (size_t) cap * sizeof(*s));
        if (!s) return 1; /* stops the run: "stopped by the caller" */
        l->s = s;
        l->cap = cap;
    }
    l->s[l->n++] = *st;
    if (!l->bar && st->step == 0) l->bar = nf_progress_begin("finetune", "steps", (long long) l->total, l->mode);
    char note[96];
    snprintf(note, sizeof(note), "val_loss %.6g, best step %lld", st->val_loss, (long long) st->best_step);
    nf_progress_note(l->bar, note);
    nf_progress_update(l->bar, (long long) st->step);
    return 0;
}

static int nf_ft_parse(int argc, char ** argv, struct nf_ft_cli * o) {
    struct nf_cli_opts v;
    memset(o, 0, sizeof(*o));
    if (!nf_cli_opts_parse(NF_M(FINETUNE), argc, argv, 1, NULL, &v)) return 0;
    if (!nf_cli_table_opts(&v, &o->c.tables) || !nf_cli_train_opts(&v, argc, argv, &o->c)) return 0;
    static const struct {
        int id;
        const char * name;
    } mitra[] = {{NF_O_STEPS, "--steps"},
                 {NF_O_FT_STEPS, "--fine-tune-steps"},
                 {NF_O_LR, "--lr"},
                 {NF_O_WEIGHT_DECAY, "--weight-decay"},
                 {NF_O_WARMUP_STEPS, "--warmup-steps"},
                 {NF_O_KEEP_LAST, "--keep-last"},
                 {NF_O_NO_MIRROR, "--no-mirror"},
                 {NF_O_MIRROR_SIGNS, "--mirror-signs"}};
    for (size_t k = 0; k < sizeof(mitra) / sizeof(mitra[0]) && !o->mitra_only; k++)
        if (v.set[mitra[k].id]) o->mitra_only = mitra[k].name;
    if (!o->c.model || !o->c.train || !o->c.target || !o->c.out) {
        fprintf(stderr, "error: finetune needs --model DIR --train TRAIN.csv --target COLUMN --out MODEL_DIR\n");
        return 0;
    }
    return nf_cli_finetune_opts(&v, &o->fo);
}

static int nf_ft_write_logs(const struct nf_outset * os, const struct nf_ft_log * l, nf_err * err) {
    char path[4096];
    nf_outset_path(os, "training-log.csv", path, sizeof(path));
    FILE * f = fopen(path, "w");
    if (!f) return nf__err_set(err, NF_ERR_IO, "%s: cannot create", path);
    int ok = fputs("step,lr,train_loss,val_loss,best_step,patience_count\n", f) >= 0;
    cJSON * doc = cJSON_CreateObject();
    cJSON * arr = cJSON_AddArrayToObject(doc, "steps");
    for (int64_t i = 0; i < l->n; i++) {
        const struct nf_finetune_step * s = &l->s[i];
        char tl[40] = "";
        if (!isnan(s->train_loss)) snprintf(tl, sizeof(tl), "%.17g", s->train_loss);
        ok = ok && fprintf(f, "%lld,%.17g,%s,%.17g,%lld,%lld\n", (long long) s->step, s->lr, tl, s->val_loss,
                           (long long) s->best_step, (long long) s->patience_count) > 0;
        cJSON * o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "step", (double) s->step);
        cJSON_AddNumberToObject(o, "lr", s->lr);
        if (isnan(s->train_loss))
            cJSON_AddNullToObject(o, "train_loss");
        else
            cJSON_AddNumberToObject(o, "train_loss", s->train_loss);
        cJSON_AddNumberToObject(o, "val_loss", s->val_loss);
        cJSON_AddNumberToObject(o, "best_step", (double) s->best_step);
        cJSON_AddNumberToObject(o, "patience_count", (double) s->patience_count);
        cJSON_AddItemToArray(arr, o);
    }
    ok &= fflush(f) == 0;
    ok &= fclose(f) == 0;
    if (!ok) {
        cJSON_Delete(doc);
        return nf__err_set(err, NF_ERR_IO, "%s: write failed", path);
    }
    nf_outset_path(os, "training-log.json", path, sizeof(path));
    const int rc = nf__json_write_file(path, doc, err);
    cJSON_Delete(doc);
    return rc;
}

/* report.json's head, both models: the command line, the common items, the tables */
static cJSON * nf_ft_report_head(const struct nf_ft_cli * o, nf_model * m, const nf_backend * be) {
    cJSON * rep = cJSON_CreateObject();
    cJSON * cl = cJSON_AddArrayToObject(rep, "command_line");
    cJSON_AddItemToArray(cl, cJSON_CreateString("nofall"));
    for (int i = 0; i < o->c.argc; i++) cJSON_AddItemToArray(cl, cJSON_CreateString(o->c.argv[i]));
    nf_run_report_common(rep, o->c.model, m, be);
    cJSON_AddStringToObject(rep, "train", o->c.train);
    if (o->c.val)
        cJSON_AddStringToObject(rep, "val", o->c.val);
    else
        cJSON_AddNullToObject(rep, "val");
    return rep;
}

static int nf_ft_main(const struct nf_ft_cli * o, nf_err * err) {
    nf_table *tr = NULL, *va = NULL;
    nf_predictor * pr = NULL;
    struct nf_mirror_spec * spec = NULL;
    nf_backend * be = NULL;
    nf_model * m = NULL;
    struct nf_outset os;
    struct nf_ft_log log = {.mode = o->c.progress, .total = o->fo.steps};
    memset(&os, 0, sizeof(os));
    os.lock_fd = -1;
    char e1[512], e2[256];
    char hint[160];
    if (o->c.ts_dropout_set)
        return nf__err_set(err, NF_ERR_ARG, "--dropout is a TabSTAR fine-tuning option (--model %s is not TabSTAR)",
                           nf__esc(e1, sizeof(e1), o->c.model));
    int rc = nf_cli_table_read(&o->c.tables, o->c.train, 1, &tr, err);
    if (rc == NF_OK && o->c.val) rc = nf_cli_table_read(&o->c.tables, o->c.val, 0, &va, err);
    if (rc == NF_OK) {
        nf_table_sep_hint(tr, hint, sizeof(hint));
        if (nf_table_find(tr, o->c.target) < 0)
            rc = nf__err_set(err, NF_ERR_INPUT, "%s: no column '%s' (--target)%s", nf__esc(e1, sizeof(e1), o->c.train),
                             nf__esc(e2, sizeof(e2), o->c.target), hint);
        else if (va && nf_table_find(va, o->c.target) < 0)
            rc = nf__err_set(err, NF_ERR_INPUT, "%s: no column '%s' (--target; --val needs it)",
                             nf__esc(e1, sizeof(e1), o->c.val), nf__esc(e2, sizeof(e2), o->c.target));
        else if (va && nf_table_n_rows(va) < 1)
            rc = nf__err_set(err, NF_ERR_INPUT, "%s: no data rows (--val)", nf__esc(e1, sizeof(e1), o->c.val));
    }
    if (rc == NF_OK && o->c.mirror_signs) rc = nf_mirror_spec_read(o->c.mirror_signs, &spec, err);
    if (rc == NF_OK && spec && spec->n_estimators != 1)
        rc = nf__err_set(err, NF_ERR_INPUT,
                         "%s: %lld ensemble members' mirror signs; fine-tuning takes one member (--mirror-signs)",
                         nf__esc(e1, sizeof(e1), o->c.mirror_signs), (long long) spec->n_estimators);
    const struct nf_predictor_opts po = {
        .task = o->c.task, .n_estimators = 1, .seed = o->fo.seed, .no_mirror = !o->c.mirror, .mirror = spec};
    if (rc == NF_OK) rc = nf_predictor_fit(tr, o->c.target, &po, &pr, err);
    if (rc == NF_OK && va) rc = nf_predictor_check_table(pr, va, err);
    if (rc != NF_OK) goto out;
    static const char * const names[] = {"config.json", "model.safetensors", "training-log.json", "training-log.csv",
                                         "report.json"};
    if ((rc = nf_outset_begin(&os, o->c.out, names, 5, err)) != NF_OK) goto out;
    if ((rc = nf_cli_backend_init(o->c.device, 0, &be, err)) != NF_OK) goto out;
    if ((rc = nf_model_load(be, o->c.model, &m, err)) != NF_OK) goto out;
    {
        char name[4200];
        snprintf(name, sizeof(name), "--model %s", o->c.model);
        if ((rc = nf_predictor_check_model(pr, m, name, err)) != NF_OK) goto out;
    }
    struct nf_finetune_opts fo = o->fo;
    fo.on_step = nf_ft_on_step;
    fo.user = &log;
    struct nf_finetune_result res;
    const double t0 = nf_cli_now_ms();
    nf_out_test_delay("forward");
    rc = nf_predictor_finetune(pr, m, va, &fo, &res, err);
    const double wall_ms = nf_cli_now_ms() - t0;
    nf_progress_end(log.bar);
    log.bar = NULL;
    if (rc != NF_OK) goto out;
    if ((rc = nf_model_save(m, os.staging, err)) != NF_OK) goto out;
    if ((rc = nf_ft_write_logs(&os, &log, err)) != NF_OK) goto out;
    {
        /* report.json: the command, the common items, the options, what the run did, the mirror signs */
        cJSON * rep = nf_ft_report_head(o, m, be);
        nf_cli_finetune_report(rep, &o->fo);
        char * js = nf_predictor_report_json(pr, m, tr, err);
        cJSON * items = js ? cJSON_Parse(js) : NULL;
        nf_free(js);
        static const char * const keep[] = {
            "target",       "task",         "n_train",           "seed",     "mirror", "mirror_signs_file",
            "columns_kept", "mirror_signs", "regression_mirror", "fine_tune"};
        for (size_t k = 0; items && k < sizeof(keep) / sizeof(keep[0]); k++) {
            cJSON * it = cJSON_DetachItemFromObjectCaseSensitive(items, keep[k]);
            if (it) cJSON_AddItemToObject(rep, keep[k], it);
        }
        cJSON_Delete(items);
        cJSON_AddNumberToObject(rep, "best_step", (double) res.best_step);
        cJSON_AddNumberToObject(rep, "steps_run", (double) res.steps_run);
        if (res.stopped_at >= 0)
            cJSON_AddNumberToObject(rep, "stopped_at", (double) res.stopped_at);
        else
            cJSON_AddNullToObject(rep, "stopped_at");
        cJSON_AddNumberToObject(rep, "best_val_loss", res.best_val_loss);
        cJSON_AddNumberToObject(rep, "wall_ms", wall_ms);
        char path[4096];
        nf_outset_path(&os, "report.json", path, sizeof(path));
        rc = nf__json_write_file(path, rep, err);
        cJSON_Delete(rep);
        if (rc != NF_OK) goto out;
    }
    /* read back: the weights load strictly */
    {
        nf_model * back = NULL;
        if ((rc = nf_model_load(be, os.staging, &back, err)) != NF_OK) goto out;
        nf_model_free(back);
    }
    printf("BEST_STEP=%lld\n", (long long) res.best_step);
    printf("STEPS_RUN=%lld\n", (long long) res.steps_run);
    printf("STOPPED_AT=%lld\n", (long long) res.stopped_at);
    printf("VAL_LOSS=%.17g\n", res.best_val_loss);
    printf("VALIDATION=%s\n", va ? "table" : "internal-split");
    printf("DEVICE=%s\n", nf_backend_name(be));
    printf("PRECISION=%s\n", nf_precision_name(nf_backend_precision(be)));
    printf("FINETUNE_WALL_MS=%.3f\n", wall_ms);
    rc = nf_run_commit(&os, NULL, "", NULL, err);
out:
    nf_progress_end(log.bar);
    free(log.s);
    nf_outset_end(&os);
    nf_model_free(m);
    nf_backend_free(be);
    nf_predictor_free(pr);
    nf_mirror_spec_free(spec);
    nf_table_free(tr);
    nf_table_free(va);
    return rc;
}

/* a TabSTAR model: upstream's fit (nf_tabstar_fit; docs/finetune-tabstar.md) */

/* the epochs as they end (report.json's log), the bar (epochs) */
int nf_cli_ts_on_epoch(void * user, const struct nf_tabstar_epoch * e) {
    struct nf_cli_ts_log * l = user;
    if (l->n == l->cap) {
        const int cap = l->cap ? 2 * l->cap : 16;
        struct nf_tabstar_epoch * s = realloc(l->e, (size_t) cap * sizeof(*s));
        if (!s) return 1; /* stops the fit: "stopped by the caller" */
        l->e = s;
        l->cap = cap;
    }
    l->e[l->n++] = *e;
    if (!l->bar) l->bar = nf_progress_begin(l->what, "epochs", (long long) e->max_epochs, l->mode);
    char note[96];
    snprintf(note, sizeof(note), "val_loss %.6g, metric %.6g%s", e->val_loss, e->metric, e->best ? ", best" : "");
    nf_progress_note(l->bar, note);
    nf_progress_update(l->bar, (long long) e->epoch);
    return 0;
}

static int nf_ft_tabstar(const struct nf_ft_cli * o, nf_err * err) {
    nf_table *tr = NULL, *va = NULL;
    nf_backend * be = NULL;
    nf_model * m = NULL;
    struct nf_outset os;
    struct nf_cli_ts_log log = {.mode = o->c.progress, .what = "finetune"};
    memset(&os, 0, sizeof(os));
    os.lock_fd = -1;
    char e1[512], e2[256], hint[160];
    if (o->mitra_only)
        return nf__err_set(err, NF_ERR_ARG,
                           "%s is a Mitra fine-tuning option; a TabSTAR model (--model %s) takes "
                           "--val, --max-epochs, --patience, --no-average, --seed",
                           o->mitra_only, nf__esc(e1, sizeof(e1), o->c.model));
    int rc = nf_cli_table_read(&o->c.tables, o->c.train, 1, &tr, err);
    if (rc == NF_OK && o->c.val) rc = nf_cli_table_read(&o->c.tables, o->c.val, 0, &va, err);
    if (rc == NF_OK && nf_table_find(tr, o->c.target) < 0) {
        nf_table_sep_hint(tr, hint, sizeof(hint));
        rc = nf__err_set(err, NF_ERR_INPUT, "%s: no column '%s' (--target)%s", nf__esc(e1, sizeof(e1), o->c.train),
                         nf__esc(e2, sizeof(e2), o->c.target), hint);
    } else if (rc == NF_OK && va && nf_table_find(va, o->c.target) < 0) {
        nf_table_sep_hint(va, hint, sizeof(hint));
        rc = nf__err_set(err, NF_ERR_INPUT, "%s: no column '%s' (--target; --val needs it)%s",
                         nf__esc(e1, sizeof(e1), o->c.val), nf__esc(e2, sizeof(e2), o->c.target), hint);
    } else if (rc == NF_OK && va && nf_table_n_rows(va) < 1)
        rc = nf__err_set(err, NF_ERR_INPUT, "%s: no data rows (--val)", nf__esc(e1, sizeof(e1), o->c.val));
    static const char * const names[] = {"config.json", "model.safetensors",  "vocab.txt",  "verbalizer.json",
                                         "split.json",  "training-log.jsonl", "report.json"};
    if (rc == NF_OK) rc = nf_outset_begin(&os, o->c.out, names, 7, err);
    if (rc == NF_OK) rc = nf_cli_backend_init(o->c.device, 0, &be, err);
    if (rc == NF_OK) rc = nf_model_load(be, o->c.model, &m, err);
    struct nf_tabstar_fit_opts fo;
    nf_tabstar_fit_opts_default(&fo);
    fo.task = o->c.task;
    fo.max_epochs = o->c.ts_max_epochs;
    fo.patience = o->c.ts_patience;
    fo.no_average = o->c.ts_no_average;
    fo.dropout = (float) o->c.ts_dropout;
    fo.seed = o->fo.seed;
    fo.val = va;
    fo.on_epoch = nf_cli_ts_on_epoch;
    fo.user = &log;
    struct nf_tabstar_fit_result res;
    const double t0 = nf_cli_now_ms();
    if (rc == NF_OK) {
        nf_out_test_delay("forward");
        rc = nf_tabstar_fit(m, o->c.model, tr, o->c.target, &fo, os.staging, &res, err);
    }
    const double wall_ms = nf_cli_now_ms() - t0;
    nf_progress_end(log.bar);
    log.bar = NULL;
    if (rc == NF_OK) {
        /* report.json: as Mitra's (the command, the common items, the options, what the run did) */
        cJSON * rep = nf_ft_report_head(o, m, be);
        cJSON * op = cJSON_AddObjectToObject(rep, "options");
        cJSON_AddNumberToObject(op, "max_epochs", fo.max_epochs);
        cJSON_AddNumberToObject(op, "patience", fo.patience);
        cJSON_AddNumberToObject(op, "seed", (double) fo.seed);
        cJSON_AddBoolToObject(op, "no_average", fo.no_average);
        cJSON_AddStringToObject(rep, "target", o->c.target);
        cJSON_AddStringToObject(rep, "task", res.task == NF_PREDICT_REGRESSION ? "regression" : "classification");
        cJSON_AddNumberToObject(rep, "n_train", (double) nf_table_n_rows(tr));
        char * js = nf_tabstar_fit_json(&fo, &res, log.e, log.n);
        cJSON * ft = js ? cJSON_Parse(js) : NULL;
        nf_free(js);
        if (ft) cJSON_AddItemToObject(rep, "fine_tune", ft);
        cJSON_AddNumberToObject(rep, "best_epoch", res.best_epoch);
        cJSON_AddNumberToObject(rep, "epochs_run", res.epochs);
        if (res.stopped_at >= 0)
            cJSON_AddNumberToObject(rep, "stopped_at", res.stopped_at);
        else
            cJSON_AddNullToObject(rep, "stopped_at");
        cJSON_AddNumberToObject(rep, "val_loss", res.val_loss);
        cJSON_AddNumberToObject(rep, "wall_ms", wall_ms);
        char path[4096];
        nf_outset_path(&os, "report.json", path, sizeof(path));
        rc = ft ? nf__json_write_file(path, rep, err) : nf__err_set(err, NF_ERR_NOMEM, "out of memory");
        cJSON_Delete(rep);
    }
    if (rc == NF_OK) {
        printf("EPOCHS=%d\n", res.epochs);
        printf("BEST_EPOCH=%d\n", res.best_epoch);
        printf("EPOCHS_AVERAGED=%d\n", res.epochs_averaged);
        printf("STOPPED_AT=%d\n", res.stopped_at);
        printf("VAL_LOSS=%.17g\n", res.val_loss);
        printf("VAL_METRIC=%.17g\n", res.metric);
        printf("VALIDATION=%s\n", va ? "table" : "internal-split");
        printf("DEVICE=%s\n", nf_backend_name(be));
        printf("PRECISION=%s\n", nf_precision_name(nf_backend_precision(be)));
        printf("FINETUNE_WALL_MS=%.3f\n", wall_ms);
        rc = nf_run_commit(&os, NULL, "", NULL, err);
    }
    nf_progress_end(log.bar);
    free(log.e);
    nf_outset_end(&os);
    nf_model_free(m);
    nf_backend_free(be);
    nf_table_free(tr);
    nf_table_free(va);
    return rc;
}

int nf_cmd_finetune(int argc, char ** argv) {
    struct nf_ft_cli o;
    if (!nf_ft_parse(argc, argv, &o)) return 2;
    nf_err err = {0};
    nf_out_signals_install();
    char type[64];
    nf_model_type_of(o.c.model, type, sizeof(type));
    const int rc = strcmp(type, "tabstar") == 0 ? nf_ft_tabstar(&o, &err) : nf_ft_main(&o, &err);
    return nf_cli_command_exit(rc, &err);
}
