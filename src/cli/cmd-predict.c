/* cmd-predict.c -- `nofall predict`: a model on CSV tables through the
 * library's table predictor (include/nofall-tabular.h, src/tabular/; README
 * "predict", "TabSTAR"): read the two tables, fit the predictor on the
 * training one (Mitra: AutoGluon's preprocessing and ensembling; TabSTAR:
 * its verbalizer), predict the test one, write the predictor's outputs and
 * report.json as one set (outset.c). Both models' options are parsed here
 * (TabSTAR's: its subset); both run nf_predict_run. Every bad
 * table (and a bad --mirror-signs file) is an error naming file / row /
 * column, before --out is touched or the model is loaded. */
#include "cmd-predict.h"
#include "opts.h"
#include "weights.h"
#include "io/nf-io.h"
#include "nofall-tabular.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* tabstar: the options of predict on a TabSTAR model (those of Mitra's
 * alone are refused by the parser, so they keep their defaults here) */
static int nf_pred_parse(int argc, char ** argv, int tabstar, struct nf_pred_opts * o) {
    struct nf_cli_opts v;
    memset(o, 0, sizeof(*o));
    if (!nf_cli_opts_parse(tabstar ? NF_M(PREDICT_TAB) : NF_M(PREDICT_MITRA), argc, argv, 1, NULL, &v)) return 0;
    o->model_type = tabstar ? "tabstar" : NULL;
    o->adapter = nf_cli_opt_str(&v, NF_O_ADAPTER, NULL);
    o->test = nf_cli_opt_str(&v, NF_O_TEST, NULL);
    o->n_est = v.set[NF_O_N_ESTIMATORS] ? v.i[NF_O_N_ESTIMATORS] : 0;
    o->query_chunk = v.set[NF_O_QUERY_CHUNK] ? v.i[NF_O_QUERY_CHUNK] : 0;
    o->seed = (uint64_t) v.i[NF_O_PREDICT_SEED];
    if (!nf_cli_train_opts(&v, argc, argv, &o->c)) return 0;
    /* TabSTAR: upstream's fit first by default (upstream has no other mode); --fine-tune says so explicitly */
    o->fine_tune = tabstar ? !v.set[NF_O_NO_FINE_TUNE] : v.set[NF_O_FINE_TUNE];
    /* TabSTAR's fit options without its fit (Mitra's parser refuses --max-epochs, --no-average, --dropout;
     * its --patience is the ft_only check's below) */
    if (v.set[NF_O_NO_FINE_TUNE] &&
        (v.set[NF_O_FINE_TUNE] || v.set[NF_O_MAX_EPOCHS] || v.set[NF_O_VAL] || v.set[NF_O_DROPOUT] ||
         (tabstar && v.set[NF_O_PATIENCE]) || v.set[NF_O_NO_AVERAGE])) {
        fprintf(stderr, "error: --no-fine-tune excludes %s\n",
                v.set[NF_O_FINE_TUNE]    ? "--fine-tune"
                : v.set[NF_O_MAX_EPOCHS] ? "--max-epochs"
                : v.set[NF_O_VAL]        ? "--val"
                : v.set[NF_O_DROPOUT]    ? "--dropout"
                : v.set[NF_O_PATIENCE]   ? "--patience"
                                         : "--no-average");
        return 0;
    }
    static const enum nf_cli_opt_id ft_only[] = {NF_O_VAL,          NF_O_FT_STEPS, NF_O_LR,       NF_O_WEIGHT_DECAY,
                                                 NF_O_WARMUP_STEPS, NF_O_PATIENCE, NF_O_KEEP_LAST};
    for (size_t k = 0; !o->fine_tune && k < sizeof(ft_only) / sizeof(ft_only[0]); k++)
        if (v.set[ft_only[k]]) {
            fprintf(stderr, "error: %s is a fine-tuning option: it needs --fine-tune\n",
                    nf_cli_opt_table[ft_only[k]].name);
            return 0;
        }
    if (!nf_cli_finetune_opts(&v, &o->fo)) return 0;
    if (!nf_cli_table_opts(&v, &o->c.tables)) return 0;
    if (!o->c.model || !o->c.train || !o->test || !o->c.target || !o->c.out) {
        fprintf(stderr,
                "error: predict needs --model DIR --train TRAIN.csv --test TEST.csv --target COLUMN --out OUT\n");
        return 0;
    }
    return 1;
}

/* MPI (README "Running on a cluster with mpirun"): every rank reads the
 * tables, fits the predictor and loads the model on its own device; the test
 * rows are split in contiguous blocks, one a rank, on the forwards' own
 * boundaries (nf_predictor_predict_part: above 8,192 training rows the
 * 1,024-row chunks, each rank drawing -- and skipping -- the other ranks'
 * support subsets, so every chunk gets the subset of the plain run; else the
 * model's query passes, each rank computing the support stream itself);
 * rank 0 gathers the rows and writes the outputs, byte-identical to the
 * plain run's. The blob of a rank: rows_begin, rows_end (int64), the rows'
 * averaged outputs (double, K each), then per member their logits (float). */
static int nf_pred_gather(const struct nf_mpi * mp, int64_t r0, int64_t r1, int64_t nq, int64_t n_est, int K,
                          double * acc, float * logits, int64_t * lens, nf_err * err) {
    const int64_t nr = r1 - r0;
    const int64_t n = 16 + nr * K * (int64_t) sizeof(double) + n_est * nr * K * (int64_t) sizeof(float);
    char * blob = malloc((size_t) n);
    char * all = NULL;
    int rc = NF_OK;
    if (!blob) {
        /* out of memory: still take part in the gather (the collectives
         * would hang otherwise), sending rows [-1, -1) that rank 0 refuses */
        static const int64_t none[2] = {-1, -1};
        nf_err e2 = {0};
        nf_mpi_gather(mp, none, 16, &all, lens, &e2);
        free(all);
        return nf__err_set(err, NF_ERR_NOMEM, "rank %d: out of memory for its %lld test rows", mp->rank,
                           (long long) nr);
    }
    memcpy(blob, &r0, 8);
    memcpy(blob + 8, &r1, 8);
    memcpy(blob + 16, acc + r0 * K, (size_t) (nr * K) * sizeof(double));
    for (int64_t e = 0; e < n_est; e++)
        memcpy(blob + 16 + nr * K * (int64_t) sizeof(double) + e * nr * K * (int64_t) sizeof(float),
               logits + (e * nq + r0) * K, (size_t) (nr * K) * sizeof(float));
    rc = nf_mpi_gather(mp, blob, n, &all, lens, err);
    free(blob);
    if (rc == NF_OK && mp->rank == 0) {
        /* every row once: the ranks' row blocks in rank order, end to end */
        int64_t off = 0, next = 0;
        for (int r = 0; rc == NF_OK && r < mp->size; r++) {
            int64_t b0, b1;
            memcpy(&b0, all + off, 8);
            memcpy(&b1, all + off + 8, 8);
            const int64_t m = b1 - b0;
            if (b0 != next || b1 < b0 || b1 > nq ||
                lens[r] != 16 + m * K * (int64_t) sizeof(double) + n_est * m * K * (int64_t) sizeof(float)) {
                rc = nf__err_set(err, NF_ERR_GENERIC,
                                 "rank %d sent test rows [%lld, %lld); expected them from row %lld", r, (long long) b0,
                                 (long long) b1, (long long) next);
                break;
            }
            memcpy(acc + b0 * K, all + off + 16, (size_t) (m * K) * sizeof(double));
            for (int64_t e = 0; e < n_est; e++)
                memcpy(logits + (e * nq + b0) * K,
                       all + off + 16 + m * K * (int64_t) sizeof(double) + e * m * K * (int64_t) sizeof(float),
                       (size_t) (m * K) * sizeof(float));
            next = b1;
            off += lens[r];
        }
        if (rc == NF_OK && next != nq)
            rc = nf__err_set(err, NF_ERR_GENERIC, "the ranks predicted test rows [0, %lld) of %lld", (long long) next,
                             (long long) nq);
    }
    free(all);
    return rc;
}

/* the predictor's progress (a forward done) to the bar, begun at the first
 * forward, when the total (the forwards of this rank's rows) is known; only
 * rank 0 draws under mpirun */
struct nf_pred_bar {
    nf_progress * bar;
    int mode;
};
static void nf_pred_progress(void * user, int64_t done, int64_t total) {
    struct nf_pred_bar * b = user;
    if (!b->bar) b->bar = nf_progress_begin("predict", "forwards", (long long) total, b->mode);
    nf_progress_update(b->bar, (long long) done);
}

/* report.json: the common items, the predictor's (nofall-tabular.h: under
 * MPI its "queries" get every rank's forwards and rows, then "ranks"), the
 * markers */
static int nf_pred_report(const struct nf_pred_opts * o, const struct nf_mpi * mp, const char * model, nf_model * m,
                          const nf_backend * be, const nf_predictor * pr, const nf_table * te, const int64_t tot[2],
                          const int64_t * rows, cJSON ** out, nf_err * err) {
    char * js = nf_predictor_report_json(pr, m, te, err);
    if (!js) return err->code ? err->code : NF_ERR_NOMEM;
    cJSON * items = cJSON_Parse(js);
    nf_free(js);
    if (!items) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    cJSON * rep = cJSON_CreateObject();
    /* the command line and when it ran (UTC), then the common items (version, weights' SHA-256) */
    cJSON * cl = cJSON_AddArrayToObject(rep, "command_line");
    cJSON_AddItemToArray(cl, cJSON_CreateString("nofall"));
    for (int i = 0; i < o->c.argc; i++) cJSON_AddItemToArray(cl, cJSON_CreateString(o->c.argv[i]));
    {
        char when[32];
        const time_t now = time(NULL);
        struct tm tm;
        strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&now, &tm));
        cJSON_AddStringToObject(rep, "time_utc", when);
    }
    nf_run_report_common(rep, model, m, be);
    while (items->child) {
        cJSON * it = cJSON_DetachItemViaPointer(items, items->child);
        const int queries = strcmp(it->string, "queries") == 0;
        if (queries && mp->size > 1) {
            cJSON_ReplaceItemInObjectCaseSensitive(it, "forwards", cJSON_CreateNumber((double) tot[0]));
            cJSON_ReplaceItemInObjectCaseSensitive(it, "support_passes_total", cJSON_CreateNumber((double) tot[1]));
            cJSON * rr = cJSON_AddArrayToObject(it, "rank_rows");
            for (int r = 0; r < mp->size; r++) {
                cJSON * a = cJSON_CreateArray();
                cJSON_AddItemToArray(a, cJSON_CreateNumber((double) rows[2 * r]));
                cJSON_AddItemToArray(a, cJSON_CreateNumber((double) rows[2 * r + 1]));
                cJSON_AddItemToArray(rr, a);
            }
        }
        cJSON_AddItemToObject(rep, it->string, it);
        if (queries && mp->size > 1) cJSON_AddNumberToObject(rep, "ranks", mp->size);
    }
    cJSON_Delete(items);
    *out = rep;
    return NF_OK;
}

static int nf_predict_main(const struct nf_pred_opts * o, const struct nf_mpi * mp, int * failed_rank, nf_err * err) {
    nf_table *tr = NULL, *te = NULL, *va = NULL;
    nf_predictor * pr = NULL;
    struct nf_mirror_spec * spec = NULL;
    nf_backend * be = NULL;
    nf_model * m = NULL;
    struct nf_outset os;
    float * all_logits = NULL;
    double * acc = NULL;
    int rc;
    int64_t *rows = NULL, *counts = NULL;
    char device[64];
    nf_mpi_device(mp, o->c.device, device, sizeof(device));
    memset(&os, 0, sizeof(os));
    os.lock_fd = -1;
    /* the tables first: every bad table fails before --out is touched (under
     * MPI every rank's; the ranks agree before anything else) */
    rc = o->fine_tune && mp->size > 1
             ? nf__err_set(err, NF_ERR_UNSUPPORTED, "predict --fine-tune runs as one process, not as %d MPI ranks",
                           mp->size)
             : nf_cli_table_read(&o->c.tables, o->c.train, 1, &tr, err);
    if (rc == NF_OK) rc = nf_cli_table_read(&o->c.tables, o->test, 0, &te, err);
    if (rc == NF_OK && o->c.val) rc = nf_cli_table_read(&o->c.tables, o->c.val, 0, &va, err);
    char hint[160];
    if (rc == NF_OK && va && nf_table_find(va, o->c.target) < 0) {
        char e1[512], e2[256];
        nf_table_sep_hint(va, hint, sizeof(hint));
        rc = nf__err_set(err, NF_ERR_INPUT, "%s: no column '%s' (--target; --val needs it)%s",
                         nf__esc(e1, sizeof(e1), o->c.val), nf__esc(e2, sizeof(e2), o->c.target), hint);
    }
    if (rc == NF_OK) {
        char e1[512], e2[256];
        nf_table_sep_hint(tr, hint, sizeof(hint));
        if (nf_table_find(tr, o->c.target) < 0)
            rc = nf__err_set(err, NF_ERR_INPUT, "%s: no column '%s' (--target)%s", nf__esc(e1, sizeof(e1), o->c.train),
                             nf__esc(e2, sizeof(e2), o->c.target), hint);
        else if (nf_table_n_rows(tr) < 2)
            rc = nf__err_set(err, NF_ERR_INPUT, "%s: %lld data rows; need at least 2",
                             nf__esc(e1, sizeof(e1), o->c.train), (long long) nf_table_n_rows(tr));
        else if (nf_table_n_rows(te) < 1)
            rc = nf__err_set(err, NF_ERR_INPUT, "%s: no data rows", nf__esc(e1, sizeof(e1), o->test));
    }
    if (rc == NF_OK && o->c.mirror_signs) rc = nf_mirror_spec_read(o->c.mirror_signs, &spec, err);
    struct nf_predictor_opts po = {.task = o->c.task,
                                   .n_estimators = o->n_est,
                                   .seed = o->seed,
                                   .no_mirror = !o->c.mirror,
                                   .mirror = spec,
                                   .model_type = o->model_type};
    if (rc == NF_OK) rc = nf_predictor_fit(tr, o->c.target, &po, &pr, err);
    /* TabSTAR --no-fine-tune on a directory nofall's fit wrote: the verbalizer it was trained with */
    const int tabstar = o->model_type && strcmp(o->model_type, "tabstar") == 0;
    if (rc == NF_OK && tabstar && !o->fine_tune) rc = nf_predictor_tabstar_use_fit(pr, o->c.model, tr, NULL, err);
    if (rc == NF_OK) rc = nf_predictor_check_table(pr, te, err);
    if (rc == NF_OK && va) rc = nf_predictor_check_table(pr, va, err);
    if ((rc = nf_mpi_agree(mp, rc, err, failed_rank)) != NF_OK) goto out_nolock;
    const int is_cls = nf_predictor_task(pr) == NF_PREDICT_CLASSIFICATION;

    /* --out: rank 0's; the predictor's files and report.json */
    const char * names[16];
    int n_names = 0;
    for (int i = 0; i < nf_predictor_n_artifacts(pr) && n_names < 15; i++)
        names[n_names++] = nf_predictor_artifact(pr, i);
    names[n_names++] = "report.json";
    if (mp->rank == 0) rc = nf_outset_begin(&os, o->c.out, names, n_names, err);
    if ((rc = nf_mpi_agree(mp, rc, err, failed_rank)) != NF_OK) goto done;
    if ((rc = nf_cli_backend_init(device, 0, &be, err)) != NF_OK) goto done_agree;
    nf_trace_reset(be, NF_TRACE_TOTALS);
    if ((rc = nf_cli_model_load(be, o->c.model, &m, err)) != NF_OK) goto done_agree;
    if (o->adapter && (rc = nf_predictor_merge_adapter(pr, m, o->adapter, err)) != NF_OK) goto done_agree;
    if (o->query_chunk > 0 && (rc = nf_model_set_option(m, "query_chunk", o->query_chunk, err)) != NF_OK)
        goto done_agree;
    {
        char name[4200];
        snprintf(name, sizeof(name), "--model %s", o->c.model);
        if ((rc = nf_predictor_check_model(pr, m, name, err)) != NF_OK) goto done_agree;
    }
    if (o->fine_tune && tabstar) { /* upstream TabSTAR's fit (report.json: its summary, "fine_tune") */
        struct nf_tabstar_fit_opts tfo;
        struct nf_tabstar_fit_result tres;
        struct nf_cli_ts_log log = {.mode = o->c.progress, .what = "fit"};
        nf_tabstar_fit_opts_default(&tfo);
        tfo.task = o->c.task;
        tfo.seed = o->seed;
        tfo.val = va;
        tfo.max_epochs = o->c.ts_max_epochs;
        tfo.patience = o->c.ts_patience;
        tfo.no_average = o->c.ts_no_average;
        tfo.dropout = (float) o->c.ts_dropout;
        if (nf_progress_enabled(o->c.progress)) tfo.on_epoch = nf_cli_ts_on_epoch, tfo.user = &log;
        rc = nf_predictor_tabstar_fit(pr, m, o->c.model, tr, &tfo, &tres, err);
        nf_progress_end(log.bar);
        free(log.e);
        if (rc != NF_OK) goto done_agree;
    } else if (o->fine_tune) { /* AutoGluon's fit with fine-tuning (one process) */
        struct nf_finetune_opts fo = o->fo;
        struct nf_finetune_result res;
        fo.seed = o->seed;
        if ((rc = nf_predictor_finetune(pr, m, va, &fo, &res, err)) != NF_OK) goto done_agree;
    }
    const int64_t ns = nf_predictor_n_train(pr), nq = nf_table_n_rows(te), n_est = nf_predictor_n_estimators(pr);
    const int K = (int) nf_predictor_n_outputs(pr);
    all_logits = malloc((size_t) (n_est * nq * K) * sizeof(float));
    acc = malloc((size_t) (nq * K) * sizeof(double));
    counts = calloc((size_t) K, sizeof(int64_t));
    /* each rank's rows [begin, end), then the gather's blob lengths */
    rows = calloc((size_t) 3 * (size_t) mp->size, sizeof(int64_t));
    if (!all_logits || !acc || !rows || !counts) {
        rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
        goto done_agree;
    }
    /* this rank's block of the test rows: above 8,192 training rows whole
     * 1,024-row chunks, else rows (the predictor moves the ends to its
     * forwards' boundaries) */
    int64_t begin = 0, end = nq;
    if (mp->size > 1) {
        const int64_t unit = ns > NF_PREDICTOR_MAX_SUPPORT ? NF_PREDICTOR_QUERY_CHUNK : 1;
        const int64_t units = (nq + unit - 1) / unit;
        begin = units * mp->rank / mp->size * unit;
        end = units * (mp->rank + 1) / mp->size * unit;
        begin = begin < nq ? begin : nq;
        end = end < nq ? end : nq;
    }
    int64_t r0 = 0, r1 = nq;
    if (mp->size > 1 && end == 0) /* fewer units than ranks: nothing here ([0, 0) would read "all") */
        r1 = 0;
    else {
        struct nf_pred_bar bar = {NULL, mp->rank == 0 ? o->c.progress : NF_PROGRESS_QUIET};
        if (nf_progress_enabled(bar.mode)) nf_predictor_set_progress(pr, nf_pred_progress, &bar);
        nf_out_test_delay("forward");
        rc = nf_predictor_predict_part(pr, m, te, begin, mp->size > 1 ? end : 0, acc, all_logits, &r0, &r1, err);
        nf_predictor_set_progress(pr, NULL, NULL);
        nf_progress_end(bar.bar);
    }
#ifdef NF_TEST_HOOKS
    {
        /* tests: NOFALL_TEST_PREDICT_FAIL_RANK=N fails rank N after its forwards */
        const char * t = getenv("NOFALL_TEST_PREDICT_FAIL_RANK");
        if (rc == NF_OK && t && atoi(t) == mp->rank)
            rc = nf__err_set(err, NF_ERR_GENERIC, "test hook: rank %d fails its test rows [%lld, %lld)", mp->rank,
                             (long long) r0, (long long) r1);
    }
#endif
    if ((rc = nf_mpi_agree(mp, rc, err, failed_rank)) != NF_OK) goto done;
    struct nf_predict_stats st;
    nf_predictor_last_stats(pr, &st);
    int64_t tot[2] = {st.forwards, st.support_passes};
    double wall_ms = nf_predictor_forward_ms(pr);
    if (mp->size > 1) {
        int64_t * mine = rows + 2 * mp->rank;
        mine[0] = r0;
        mine[1] = r1;
        nf_mpi_sum_i64(mp, tot, 2, err);
        nf_mpi_sum_i64(mp, rows, 2 * mp->size, err);
        nf_mpi_sum_f64(mp, &wall_ms, 1, err);
        rc = nf_pred_gather(mp, r0, r1, nq, n_est, K, acc, all_logits, rows + 2 * mp->size, err);
        if ((rc = nf_mpi_agree(mp, rc, err, failed_rank)) != NF_OK) goto done;
        if (mp->rank != 0) goto write_end;
    }

    /* the outputs (the predictor's files), the markers, report.json */
    char path[4096];
    if ((rc = nf_predictor_write_outputs(pr, os.staging, nq, acc, all_logits, counts, err)) != NF_OK) goto write_end;
    nf_out_test_delay("write");
    char classes_marker[4096] = "none";
    size_t cml = 0;
    for (int k = 0; is_cls && k < K; k++) {
        char en[128];
        if (!k) classes_marker[0] = 0;
        nf__msg_append(classes_marker, sizeof(classes_marker), &cml, "%s%s:%lld", k ? "," : "",
                       nf__esc(en, sizeof(en), nf_predictor_class_name(pr, k)), (long long) counts[k]);
    }
    char shape[64];
    {
        int64_t sh[3];
        const int nd = nf_predictor_logits_shape(pr, nq, sh);
        size_t sl = 0;
        shape[0] = 0;
        for (int d = 0; d < nd; d++)
            nf__msg_append(shape, sizeof(shape), &sl, "%s%lld", d ? "x" : "", (long long) sh[d]);
    }
    struct nf_run_meas meas;
    if ((rc = nf_run_measure(m, be, &meas, err)) != NF_OK) goto write_end;
    /* the test table's target, when it has it: the metrics (library: nf_predictor_score) */
    struct nf_predict_metrics met;
    if ((rc = nf_predictor_score(pr, te, acc, &met, err)) != NF_OK) goto write_end;
    {
        cJSON * rep = NULL;
        if ((rc = nf_pred_report(o, mp, o->c.model, m, be, pr, te, tot, rows, &rep, err)) != NF_OK) goto write_end;
        char * mj = met.n_rows > 0 ? nf_predict_metrics_json(&met) : NULL;
        if (mj) cJSON_AddItemToObject(rep, "metrics", cJSON_Parse(mj));
        nf_free(mj);
        nf_run_markers_json(rep, &meas, shape, classes_marker, 1, wall_ms);
        nf_outset_path(&os, "report.json", path, sizeof(path));
        rc = nf__json_write_file(path, rep, err);
        cJSON_Delete(rep);
        if (rc != NF_OK) goto write_end;
    }
    /* read back */
    {
        if ((rc = nf_predictor_verify_outputs(pr, os.staging, nq, err)) != NF_OK) goto write_end;
        cJSON * doc = NULL;
        nf_outset_path(&os, "report.json", path, sizeof(path));
        if ((rc = nf__json_read_file(path, &doc, err)) != NF_OK) goto write_end;
        const int ok = cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(doc, "markers"));
        cJSON_Delete(doc);
        if (!ok) {
            rc = nf__err_set(err, NF_ERR_IO, "%s: read back without its markers", path);
            goto write_end;
        }
    }
    nf_run_markers_print(&meas, be, shape, classes_marker, 1, wall_ms, 1);
    rc = nf_run_commit(&os, NULL, "", NULL, err);
    if (rc == NF_OK && o->c.progress != NF_PROGRESS_QUIET) { /* one line of what was written */
        char line[2048];
        nf_predictor_summary(pr, nq, is_cls ? counts : NULL, &met, o->c.out, line, sizeof(line));
        fprintf(stderr, "predict: %s\n", line);
    }
write_end:
    /* rank 0's writing failed: every rank fails */
    if (mp->size > 1) rc = nf_mpi_agree(mp, rc, err, failed_rank);
    goto done;
done_agree:
    /* a failure before the forwards: every rank learns it */
    rc = nf_mpi_agree(mp, rc, err, failed_rank);
done:
    nf_outset_end(&os);
out_nolock:
    free(rows);
    free(counts);
    free(all_logits);
    free(acc);
    nf_model_free(m);
    nf_backend_free(be);
    nf_predictor_free(pr);
    nf_mirror_spec_free(spec);
    nf_table_free(tr);
    nf_table_free(te);
    nf_table_free(va);
    return rc;
}

int nf_predict_run(const struct nf_pred_opts * o, const struct nf_mpi * mp) {
    static const struct nf_mpi one = {0, 0, 0, 1, 0, 1};
    nf_err err = {0};
    int failed_rank = -1;
    nf_out_signals_install();
    const int rc = nf_predict_main(o, mp ? mp : &one, &failed_rank, &err);
    return nf_cli_mpi_command_exit(mp ? mp : &one, rc, &err, failed_rank);
}

int nf_cmd_predict(int argc, char ** argv) {
    /* under mpirun: one rank of the job (all ranks parse the same argv) */
    struct nf_mpi mp;
    nf_err err = {0};
    if (nf_mpi_init(&argc, &argv, &mp, &err) != NF_OK) {
        nf_cli_print_error(&err, err.code);
        return 1;
    }
    int tabstar = 0;
    for (int i = 1; i + 1 < argc; i++) /* a TabSTAR model directory: its options, one process */
        if (strcmp(argv[i], "--model") == 0) {
            char type[64];
            nf_model_type_of(argv[i + 1], type, sizeof(type));
            if (strcmp(type, "tabstar") != 0) break;
            const int size = mp.size, rank = mp.rank;
            tabstar = 1;
            if (size == 1) break;
            nf_mpi_finalize(&mp);
            if (rank == 0)
                fprintf(stderr,
                        "error: predict of a TabSTAR model runs as one process, not as %d MPI ranks "
                        "(README \"Running on a cluster with mpirun\": annotate and Mitra's predict)\n",
                        size);
            return 1;
        }
    struct nf_pred_opts o;
    int ret = 2;
    /* a usage error is every rank's: rank 0 prints it */
    const int quiet = nf_mpi_quiet_begin(&mp);
    const int parsed = nf_pred_parse(argc, argv, tabstar, &o);
    nf_mpi_quiet_end(quiet);
    if (parsed) ret = nf_predict_run(&o, &mp);
    nf_mpi_finalize(&mp);
    return ret;
}
