/* cmd-predict.c -- `nofall predict`: Mitra on CSV tables, preprocessed and
 * ensembled as AutoGluon feeds Mitra by the library's predictor
 * (include/nofall-tabular.h, src/tabular/predictor.c; README "predict"):
 * read the two tables, fit the predictor on the training one, predict the
 * test one, write the outputs.
 *
 * Outputs (one set, outset.c): predictions.csv, probabilities.csv
 * (classification), logits.npy, report.json. Every bad table (and a bad
 * --mirror-signs file) is an error naming file / row / column, before --out
 * is touched or the model is loaded. */
#include "cli.h"
#include "weights.h"
#include "io/nf-io.h"
#include "nofall-tabular.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char * const nf_pred_artifacts[] = {"predictions.csv", "probabilities.csv", "logits.npy", "report.json"};
#define NF_PRED_N_ARTIFACTS 4

struct nf_pred_opts {
    const char *model, *train, *test, *target, *device, *out, *mirror_signs;
    int task, mirror;
    int64_t n_est; /* 0: not given (1, or the --mirror-signs file's members) */
    int64_t query_chunk;
    uint64_t seed;
};

static int nf_csv_write_field(FILE * f, const char * s) {
    int q = s[0] == 0 || strpbrk(s, ",\"\r\n") != NULL || s[0] == ' ' || s[strlen(s) - 1] == ' ';
    if (!q) return fputs(s, f) >= 0;
    if (fputc('"', f) == EOF) return 0;
    for (const char * c = s; *c; c++) {
        if (*c == '"' && fputc('"', f) == EOF) return 0;
        if (fputc(*c, f) == EOF) return 0;
    }
    return fputc('"', f) != EOF;
}

static int nf_pred_parse(int argc, char ** argv, struct nf_pred_opts * o) {
    static const char * const flags[] = {"--model", "--train",  "--test", "--target",    "--task", "--n-estimators",
                                         "--seed",  "--device", "--out",  "--no-mirror", "--mirror-signs",
                                         "--query-chunk", NULL};
    memset(o, 0, sizeof(*o));
    o->device = "cpu";
        o->mirror = 1;
    for (int i = 1; i < argc; i++) {
        const char * a = argv[i];
        char e[256];
        if (!nf_cli_is_flag(a, flags)) {
            fprintf(stderr, "error: unknown option %s\n", nf__esc(e, sizeof(e), a));
            return 0;
        }
        if (strcmp(a, "--no-mirror") == 0) {
            o->mirror = 0;
            continue;
        }
        const char * v = nf_cli_need_value(argc, argv, &i);
        int64_t n;
        if (!v) return 0;
        if (strcmp(a, "--model") == 0)
            o->model = v;
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
        else if (strcmp(a, "--mirror-signs") == 0)
            o->mirror_signs = v;
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
        } else if (strcmp(a, "--n-estimators") == 0) {
            if (!nf_cli_parse_int(a, v, 1, 1000, &o->n_est)) return 0;
        } else if (strcmp(a, "--query-chunk") == 0) {
            if (!nf_cli_parse_int(a, v, 1, INT32_MAX, &o->query_chunk)) return 0;
        } else if (strcmp(a, "--seed") == 0) {
            if (!nf_cli_parse_int(a, v, 0, NF_CLI_SEED_MAX, &n)) return 0;
            o->seed = (uint64_t) n;
        }
    }
    if (o->mirror_signs && !o->mirror) {
        fprintf(stderr, "error: --mirror-signs and --no-mirror exclude each other\n");
        return 0;
    }
    if (!o->model || !o->train || !o->test || !o->target || !o->out) {
        fprintf(stderr,
                "error: predict needs --model DIR --train TRAIN.csv --test TEST.csv --target COLUMN --out OUT\n");
        return 0;
    }
    return 1;
}

static int nf_predict_main(const struct nf_pred_opts * o, nf_err * err) {
    nf_table *tr = NULL, *te = NULL;
    nf_predictor * pr = NULL;
    struct nf_mirror_spec * spec = NULL;
    nf_backend * be = NULL;
    nf_model * m = NULL;
    struct nf_outset os;
    float * all_logits = NULL;
    double * acc = NULL;
    int rc;
    memset(&os, 0, sizeof(os));
    os.lock_fd = -1;
    /* the tables first: every bad table fails before --out is touched */
    if ((rc = nf_table_read_csv(o->train, &tr, err)) != NF_OK) goto out_nolock;
    if ((rc = nf_table_read_csv(o->test, &te, err)) != NF_OK) goto out_nolock;
    {
        char e1[512], e2[256];
        if (nf_table_find(tr, o->target) < 0) {
            rc = nf__err_set(err, NF_ERR_INPUT, "%s: no column '%s' (--target)", nf__esc(e1, sizeof(e1), o->train),
                             nf__esc(e2, sizeof(e2), o->target));
            goto out_nolock;
        }
        if (nf_table_n_rows(tr) < 2) {
            rc = nf__err_set(err, NF_ERR_INPUT, "%s: %lld data rows; need at least 2",
                             nf__esc(e1, sizeof(e1), o->train), (long long) nf_table_n_rows(tr));
            goto out_nolock;
        }
        if (nf_table_n_rows(te) < 1) {
            rc = nf__err_set(err, NF_ERR_INPUT, "%s: no data rows", nf__esc(e1, sizeof(e1), o->test));
            goto out_nolock;
        }
    }
    if (o->mirror_signs && (rc = nf_mirror_spec_read(o->mirror_signs, &spec, err)) != NF_OK) goto out_nolock;
    struct nf_predictor_opts po = {
        .task = o->task, .n_estimators = o->n_est, .seed = o->seed, .no_mirror = !o->mirror, .mirror = spec};
    if ((rc = nf_predictor_fit(tr, o->target, &po, &pr, err)) != NF_OK) goto out_nolock;
    if ((rc = nf_predictor_check_table(pr, te, err)) != NF_OK) goto out_nolock;
    const int is_cls = nf_predictor_task(pr) == NF_PREDICT_CLASSIFICATION;

    if ((rc = nf_outset_begin(&os, o->out, nf_pred_artifacts, NF_PRED_N_ARTIFACTS, err)) != NF_OK) goto out_nolock;
    if ((rc = nf_cli_backend_init(o->device, 0, &be, err)) != NF_OK) goto done;
    nf_trace_reset(be, NF_TRACE_TOTALS);
    if ((rc = nf_model_load(be, o->model, &m, err)) != NF_OK) goto done;
    if (o->query_chunk > 0 && (rc = nf_model_set_option(m, "query_chunk", o->query_chunk, err)) != NF_OK) goto done;
    int class_labels = 0;
    int64_t model_classes = 0;
    if ((rc = nf_cli_table_model(m, &class_labels, &model_classes, err)) != NF_OK) goto done;
    if (class_labels != is_cls) {
        rc = nf__err_set(err, NF_ERR_ARG, "the target is a %s task but --model %s is a %s",
                         is_cls ? "classification" : "regression", o->model,
                         class_labels ? "classifier" : "regressor");
        goto done;
    }
    const int64_t ns = nf_predictor_n_train(pr), nq = nf_table_n_rows(te), n_est = nf_predictor_n_estimators(pr);
    const int F = nf_predictor_n_kept(pr);
    if (ns > 8192)
        fprintf(stderr,
                "warning: %lld training rows: AutoGluon's Mitra draws a random 8192-row support per 1024 queries; "
                "nofall uses all of them\n",
                (long long) ns);
    const int K = (int) nf_predictor_n_outputs(pr);
    all_logits = malloc((size_t) (n_est * nq * K) * sizeof(float));
    acc = malloc((size_t) (nq * K) * sizeof(double));
    if (!all_logits || !acc) {
        rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
        goto done;
    }
    if ((rc = nf_predictor_predict(pr, m, te, acc, all_logits, err)) != NF_OK) goto done;
    const double wall_ms = nf_predictor_forward_ms(pr);

    /* predictions.csv, probabilities.csv, logits.npy */
    char path[4096];
    const char * target = nf_predictor_target(pr);
    char classes_marker[4096] = "";
    size_t cml = 0;
    {
        nf_outset_path(&os, "predictions.csv", path, sizeof(path));
        FILE * f = fopen(path, "w");
        if (!f) {
            rc = nf__err_set(err, NF_ERR_IO, "%s: cannot create", path);
            goto done;
        }
        int ok = nf_csv_write_field(f, target) && fputc('\n', f) != EOF;
        int64_t counts[NF_PREDICTOR_MAX_CLASSES] = {0};
        for (int64_t r = 0; ok && r < nq; r++) {
            if (is_cls) {
                int best = 0;
                for (int k = 1; k < K; k++)
                    if (acc[r * K + k] > acc[r * K + best]) best = k;
                counts[best]++;
                ok = nf_csv_write_field(f, nf_predictor_class_name(pr, best)) && fputc('\n', f) != EOF;
            } else {
                ok = fprintf(f, "%.17g\n", acc[r]) > 0;
            }
        }
        if (is_cls) {
            for (int k = 0; k < K; k++) {
                char en[128];
                nf__msg_append(classes_marker, sizeof(classes_marker), &cml, "%s%s:%lld", k ? "," : "",
                               nf__esc(en, sizeof(en), nf_predictor_class_name(pr, k)), (long long) counts[k]);
            }
        } else
            snprintf(classes_marker, sizeof(classes_marker), "none");
        ok &= fflush(f) == 0 && fsync(fileno(f)) == 0;
        ok &= fclose(f) == 0;
        if (!ok) {
            rc = nf__err_set(err, NF_ERR_IO, "%s: write failed", path);
            goto done;
        }
    }
    if (is_cls) {
        nf_outset_path(&os, "probabilities.csv", path, sizeof(path));
        FILE * f = fopen(path, "w");
        if (!f) {
            rc = nf__err_set(err, NF_ERR_IO, "%s: cannot create", path);
            goto done;
        }
        int ok = 1;
        for (int k = 0; ok && k < K; k++)
            ok = (!k || fputc(',', f) != EOF) && nf_csv_write_field(f, nf_predictor_class_name(pr, k));
        ok = ok && fputc('\n', f) != EOF;
        for (int64_t r = 0; ok && r < nq; r++)
            for (int k = 0; ok && k < K; k++) ok = fprintf(f, k + 1 < K ? "%.17g," : "%.17g\n", acc[r * K + k]) > 0;
        ok &= fflush(f) == 0 && fsync(fileno(f)) == 0;
        ok &= fclose(f) == 0;
        if (!ok) {
            rc = nf__err_set(err, NF_ERR_IO, "%s: write failed", path);
            goto done;
        }
    }
    {
        int64_t sh[3] = {n_est, nq, K};
        nf_outset_path(&os, "logits.npy", path, sizeof(path));
        if ((rc = nf__npy_write(path, NF_NPY_F4, is_cls ? 3 : 2, sh, all_logits, err)) != NF_OK) goto done;
    }
    struct nf_run_meas meas;
    if ((rc = nf_run_measure(m, be, &meas, err)) != NF_OK) goto done;
    char shape[64];
    if (is_cls)
        snprintf(shape, sizeof(shape), "%lldx%lldx%d", (long long) n_est, (long long) nq, K);
    else
        snprintf(shape, sizeof(shape), "%lldx%lld", (long long) n_est, (long long) nq);

    /* report.json */
    {
        cJSON * rep = cJSON_CreateObject();
        nf_run_report_common(rep, o->model, m, be);
        nf_cli_report_passes(rep, m);
        cJSON_AddStringToObject(rep, "train", o->train);
        cJSON_AddStringToObject(rep, "test", o->test);
        cJSON_AddStringToObject(rep, "target", target);
        cJSON_AddStringToObject(rep, "task", is_cls ? "classification" : "regression");
        cJSON_AddNumberToObject(rep, "n_train", (double) ns);
        cJSON_AddNumberToObject(rep, "n_test", (double) nq);
        cJSON_AddNumberToObject(rep, "n_estimators", (double) n_est);
        cJSON_AddNumberToObject(rep, "seed", (double) o->seed);
        cJSON_AddBoolToObject(rep, "mirror", o->mirror);
        if (o->mirror_signs) cJSON_AddStringToObject(rep, "mirror_signs_file", o->mirror_signs);
        cJSON * kept = cJSON_AddArrayToObject(rep, "columns_kept");
        cJSON * dropped = cJSON_AddArrayToObject(rep, "columns_dropped");
        for (int j = 0; j < F + nf_predictor_n_columns(pr); j++) {
            /* the kept columns in model order, then the dropped ones in training order */
            struct nf_column_info ci;
            nf_predictor_column(pr, j < F ? nf_predictor_kept(pr, j) : j - F, &ci);
            if (j >= F && !ci.dropped) continue;
            cJSON * c = cJSON_CreateObject();
            cJSON_AddStringToObject(c, "name", ci.name);
            cJSON_AddStringToObject(c, "type", ci.kind);
            cJSON_AddStringToObject(c, "csv_type", ci.csv_type);
            if (j < F) {
                if (strcmp(ci.kind, "category") == 0) {
                    cJSON * cats = cJSON_AddArrayToObject(c, "categories");
                    for (int64_t k = 0; k < ci.n_categories; k++)
                        cJSON_AddItemToArray(cats, cJSON_CreateString(ci.categories[k]));
                } else if (strcmp(ci.kind, "bool") == 0) {
                    if (ci.true_str)
                        cJSON_AddStringToObject(c, "true_value", ci.true_str);
                    else
                        cJSON_AddNumberToObject(c, "true_value", ci.true_num);
                }
                cJSON_AddNumberToObject(c, "mean", isfinite(ci.mean) ? ci.mean : 0);
                cJSON_AddItemToArray(kept, c);
            } else {
                cJSON_AddStringToObject(c, "reason", ci.dropped);
                cJSON_AddItemToArray(dropped, c);
            }
        }
        if (is_cls) {
            cJSON * cl = cJSON_AddArrayToObject(rep, "classes");
            for (int k = 0; k < K; k++) cJSON_AddItemToArray(cl, cJSON_CreateString(nf_predictor_class_name(pr, k)));
        } else {
            double y_min, y_max;
            nf_predictor_target_range(pr, &y_min, &y_max);
            cJSON_AddNumberToObject(rep, "y_min", y_min);
            cJSON_AddNumberToObject(rep, "y_max", y_max);
            cJSON * rm = cJSON_AddArrayToObject(rep, "regression_mirror");
            for (int64_t e = 0; e < n_est; e++)
                cJSON_AddItemToArray(rm, cJSON_CreateBool(nf_predictor_regression_mirror(pr, e)));
        }
        cJSON * mi = cJSON_AddArrayToObject(rep, "mirror_signs");
        for (int64_t e = 0; e < n_est; e++) {
            cJSON * row = cJSON_CreateArray();
            const int * sg = nf_predictor_mirror_signs(pr, e);
            for (int j = 0; j < F; j++) cJSON_AddItemToArray(row, cJSON_CreateNumber(sg[j]));
            cJSON_AddItemToArray(mi, row);
        }
        nf_run_markers_json(rep, &meas, shape, classes_marker, 1, wall_ms);
        nf_outset_path(&os, "report.json", path, sizeof(path));
        rc = nf__json_write_file(path, rep, err);
        cJSON_Delete(rep);
        if (rc != NF_OK) goto done;
    }
    /* read back */
    int assets_verified = 0;
    {
        struct nf_npy a;
        nf_outset_path(&os, "logits.npy", path, sizeof(path));
        if ((rc = nf__npy_read(path, &a, err)) != NF_OK) goto done;
        const int ok = a.dtype == NF_NPY_F4 && a.shape[0] == n_est && a.shape[1] == nq;
        nf__npy_free(&a);
        struct nf_csv_table back;
        nf_outset_path(&os, "predictions.csv", path, sizeof(path));
        if ((rc = nf__csv_read(path, &back, err)) != NF_OK) goto done;
        const int ok2 = back.n_rows == nq && back.n_cols == 1;
        nf__csv_free(&back);
        cJSON * doc = NULL;
        nf_outset_path(&os, "report.json", path, sizeof(path));
        if ((rc = nf__json_read_file(path, &doc, err)) != NF_OK) goto done;
        cJSON_Delete(doc);
        assets_verified = ok && ok2;
        if (!assets_verified) {
            rc = nf__err_set(err, NF_ERR_IO, "%s: artifacts read back wrong", os.staging);
            goto done;
        }
    }
    nf_run_markers_print(&meas, be, shape, classes_marker, 1, wall_ms, assets_verified);
    rc = nf_run_commit(&os, NULL, "", NULL, err);
done:
    nf_outset_end(&os);
out_nolock:
    free(all_logits);
    free(acc);
    nf_model_free(m);
    nf_backend_free(be);
    nf_predictor_free(pr);
    nf_mirror_spec_free(spec);
    nf_table_free(tr);
    nf_table_free(te);
    return rc;
}

int nf_cmd_predict(int argc, char ** argv) {
    for (int i = 1; i + 1 < argc; i++) /* a TabSTAR model directory: its own predict */
        if (strcmp(argv[i], "--model") == 0) {
            char type[64];
            nf_cli_model_type(argv[i + 1], type, sizeof(type));
            if (strcmp(type, "tabstar") == 0) return nf_cmd_predict_tabstar(argc, argv);
            break;
        }
    struct nf_pred_opts o;
    if (!nf_pred_parse(argc, argv, &o)) return 2;
    nf_cli_signals_install();
    nf_err err = {0};
    return nf_cli_command_exit(nf_predict_main(&o, &err), &err);
}
