/* cmd-run-tabstar.c -- `nofall run` on a TabSTAR model (README "TabSTAR"):
 * one forward over rows of already verbalized cells, the artifacts as one
 * verified output set, the markers of every run.
 *
 * Inputs (one of): --cells CELLS.json ("nofall-tabstar-cells/1": what
 * upstream's TabStarModel.forward(x_txt, x_num, d_output) consumes), or the
 * seeded input (--seed S, default 42): one row, 2 target tokens and 6
 * numerical feature cells drawn from splitmix64. --adapter DIR merges a PEFT
 * LoRA adapter into the weights first (tabstar-lora.c).
 *
 * Artifacts: logits.npy (float32 (B, C)); classification: probabilities.npy
 * (softmax over the C target tokens), class_ids.npy (int64 argmax);
 * regression: predictions.npy (the z-scaled prediction: the cells carry no
 * target scaler, so this is the logit; `predict` inverse-scales);
 * report.json. */
#include "cli.h"
#include "opts.h"
#include "core/model.h"
#include "io/nf-io.h"
#include "models/tabstar-cells.h"
#include "text/nf-text.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char * const nf_tab_artifacts[] = {
    "logits.npy", "probabilities.npy", "class_ids.npy", "predictions.npy", "report.json",
};
#define NF_TAB_N_ARTIFACTS ((int) (sizeof(nf_tab_artifacts) / sizeof(nf_tab_artifacts[0])))

struct nf_tab_opts {
    const char *model, *device, *out, *trace, *cells, *adapter;
    uint64_t seed;
    int have_seed, precision;
};

static int nf_tab_parse(int argc, char ** argv, struct nf_tab_opts * o) {
    struct nf_cli_opts v;
    memset(o, 0, sizeof(*o));
    if (!nf_cli_opts_parse(NF_M(RUN_TAB), argc, argv, 1, NULL, &v)) return 0;
    o->model = nf_cli_opt_str(&v, NF_O_MODEL, NULL);
    o->device = nf_cli_opt_str(&v, NF_O_DEVICE, "cpu");
    o->out = nf_cli_opt_str(&v, NF_O_OUT, NULL);
    o->have_seed = v.set[NF_O_SEED];
    o->seed = o->have_seed ? (uint64_t) v.i[NF_O_SEED] : 42;
    o->cells = nf_cli_opt_str(&v, NF_O_CELLS, NULL);
    o->adapter = nf_cli_opt_str(&v, NF_O_ADAPTER, NULL);
    o->trace = nf_cli_opt_str(&v, NF_O_TRACE, NULL);
    nf_cli_parse_precision(nf_cli_opt_str(&v, NF_O_PRECISION, "exact"), &o->precision);
    if (!o->model || !o->out) {
        fprintf(stderr, "error: run needs --model and --out OUTDIR\n");
        return 0;
    }
    if (o->cells && o->have_seed) {
        fprintf(stderr, "error: --seed makes a seeded input; it does not go with --cells\n");
        return 0;
    }
    return 1;
}

/* the seeded input: 1 row; targets "no"/"yes" of "target"; features f0..f5
 * with a bin label and a z-score from splitmix64 (nf__rng_next) at seed */
cJSON * nf_tab_seeded_cells(uint64_t seed);
cJSON * nf_tab_seeded_cells(uint64_t seed) {
    uint64_t s = seed;
    cJSON * d = cJSON_CreateObject();
    cJSON_AddStringToObject(d, "format", "nofall-tabstar-cells/1");
    cJSON_AddStringToObject(d, "task", "classification");
    cJSON_AddNumberToObject(d, "n_target_tokens", 2);
    cJSON_AddNumberToObject(d, "n_rows", 1);
    cJSON_AddNumberToObject(d, "n_cells", 8);
    cJSON * xt = cJSON_AddArrayToObject(d, "x_txt");
    cJSON * xn = cJSON_AddArrayToObject(d, "x_num");
    cJSON *rt = cJSON_CreateArray(), *rn = cJSON_CreateArray();
    cJSON_AddItemToArray(xt, rt);
    cJSON_AddItemToArray(xn, rn);
    cJSON * cl = cJSON_AddArrayToObject(d, "classes");
    static const char * const cls[2] = {"no", "yes"};
    char buf[160];
    for (int c = 0; c < 2; c++) {
        cJSON_AddItemToArray(cl, cJSON_CreateString(cls[c]));
        snprintf(buf, sizeof(buf), "Target Feature: target\nFeature Value: %s", cls[c]);
        cJSON_AddItemToArray(rt, cJSON_CreateString(buf));
        cJSON_AddItemToArray(rn, cJSON_CreateNumber(0));
    }
    for (int j = 0; j < 6; j++) {
        const int bin = (int) (nf__rng_next(&s) % 12);
        const double z = (double) ((int) (nf__rng_next(&s) >> 40) - (1 << 23)) / (double) (1 << 23) * 3.0;
        if (bin == 0)
            snprintf(buf, sizeof(buf), "Predictive Feature: f%d\nFeature Value: Lower than 10 (Quantile 0%%)", j);
        else if (bin == 11)
            snprintf(buf, sizeof(buf), "Predictive Feature: f%d\nFeature Value: Higher than 100 (Quantile 100%%)", j);
        else
            snprintf(buf, sizeof(buf), "Predictive Feature: f%d\nFeature Value: %d to %d (Quantile %d - %d%%)", j,
                     10 * bin, 10 * bin + 10, 10 * (bin - 1), 10 * bin);
        cJSON_AddItemToArray(rt, cJSON_CreateString(buf));
        cJSON_AddItemToArray(rn, cJSON_CreateNumber((double) (float) z));
    }
    return d;
}

/* the arrays of a TabSTAR output set read back (logits.npy, probabilities.npy
 * and class_ids.npy or predictions.npy: dtype, shape, finite, class ids in
 * range; logits.npy equal to `logits` unless NULL) and report.json with its
 * markers; run's and predict's (cmd-predict-tabstar.c) */
int nf_tab_verify_outputs(const char * dir, const struct nf_tab_cells * c, const float * logits, nf_err * err) {
    char p[4096];
    const int64_t B = c->n_rows, C = c->n_targets;
    const char * files[3] = {"logits.npy", c->regression ? "predictions.npy" : "probabilities.npy",
                             c->regression ? NULL : "class_ids.npy"};
    for (int i = 0; i < 3 && files[i]; i++) {
        struct nf_npy a;
        nf__path_join(p, sizeof(p), dir, files[i]);
        NF_TRY(nf__npy_read(p, &a, err));
        const int want_i8 = i == 2;
        const int64_t w = (i == 1 && c->regression) || i == 2 ? 1 : C;
        int ok = a.dtype == (want_i8 ? NF_NPY_I8 : NF_NPY_F4) && a.shape[0] == B &&
                 (w == 1 && i > 0 ? a.ndim == 1 : a.ndim == 2 && a.shape[1] == C);
        const size_t n = a.nbytes / nf__npy_dtype_size(a.dtype);
        for (size_t e = 0; ok && e < n; e++)
            ok = want_i8 ? ((const int64_t *) a.data)[e] >= 0 && ((const int64_t *) a.data)[e] < C
                         : isfinite(((const float *) a.data)[e]) != 0;
        if (ok && i == 0 && logits) ok = memcmp(a.data, logits, (size_t) (B * C) * sizeof(float)) == 0;
        nf__npy_free(&a);
        if (!ok) return nf__err_set(err, NF_ERR_IO, "%s: read back with the wrong shape/dtype/values", p);
    }
    cJSON * doc = NULL;
    nf__path_join(p, sizeof(p), dir, "report.json");
    NF_TRY(nf__json_read_file(p, &doc, err));
    const int ok = cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(doc, "markers"));
    cJSON_Delete(doc);
    return ok ? NF_OK : nf__err_set(err, NF_ERR_IO, "%s: read back without its markers", p);
}

static int nf_tab_main(const struct nf_tab_opts * o, nf_err * err) {
    nf_backend * be = NULL;
    nf_model * m = NULL;
    struct nf_tab_cells c;
    memset(&c, 0, sizeof(c));
    float *logits = NULL, *probs = NULL;
    int64_t * cls = NULL;
    struct nf_outset os;
    struct nf_cli_outfile tr;
    memset(&tr, 0, sizeof(tr));
    tr.fd = tr.slot = -1;
    char trace_in_out[4096] = "", p[4096];
    int rc;
    NF_TRY(nf_outset_begin(&os, o->out, nf_tab_artifacts, NF_TAB_N_ARTIFACTS, err));
    const char * inputs[1] = {o->cells};
    static const char * const input_flags[1] = {"--cells"};
    if ((rc = nf_run_check_trace(o->trace, o->model, inputs, input_flags, 1, &os, nf_tab_artifacts, NF_TAB_N_ARTIFACTS,
                                 trace_in_out, sizeof(trace_in_out), err)) != NF_OK)
        goto done;
    if (o->trace && !trace_in_out[0] && (rc = nf_cli_outfile_open(&tr, o->trace, "--trace", err)) != NF_OK) goto done;
    if ((rc = nf_cli_backend_init(o->device, o->precision, &be, err)) != NF_OK) goto done;
    nf_trace_reset(be, o->trace ? NF_TRACE_TIMED : NF_TRACE_TOTALS);
    if ((rc = nf_model_load(be, o->model, &m, err)) != NF_OK) goto done;
    char adapter[4400] = "none";
    if (o->adapter && (rc = nf__tab_merge_adapter(m, o->adapter, adapter, sizeof(adapter), err)) != NF_OK) goto done;
    const struct nf__wordpiece * wp = nf__tab_vocab(m);
    if (o->cells) {
        rc = nf__tab_cells_load(o->cells, wp, &c, err);
    } else {
        cJSON * d = nf_tab_seeded_cells(o->seed);
        rc = d ? nf__tab_cells_build(d, "the seeded input", wp, &c, err) : nf__err_set(err, NF_ERR_NOMEM, "no memory");
        cJSON_Delete(d);
    }
    if (rc != NF_OK) goto done;
    const int64_t B = c.n_rows, C = c.n_targets;
    logits = malloc((size_t) (B * C) * sizeof(float));
    probs = malloc((size_t) (B * C) * sizeof(float));
    cls = malloc((size_t) B * sizeof(int64_t));
    if (!logits || !probs || !cls) {
        rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
        goto done;
    }
    struct nf_array in[5];
    nf__tab_cells_arrays(&c, in);
    nf_cli_test_delay("forward");
    const double t0 = nf_cli_now_ms();
    if ((rc = nf_model_forward(m, in, 5, logits, err)) != NF_OK) goto done;
    const double wall_ms = nf_cli_now_ms() - t0;
    int finite = 1;
    for (int64_t i = 0; i < B * C; i++) finite &= isfinite(logits[i]) != 0;
    if (!finite) {
        rc = nf__err_set(err, NF_ERR_MISMATCH, "forward produced non-finite logits");
        goto done;
    }
    /* softmax over the target tokens in fp32 (upstream: torch.softmax(logits.float(), dim=1)) */
    int64_t counts[64] = {0};
    for (int64_t r = 0; r < B && !c.regression; r++) {
        const float * x = logits + r * C;
        float mx = x[0];
        for (int64_t k = 1; k < C; k++) mx = x[k] > mx ? x[k] : mx;
        double sum = 0;
        for (int64_t k = 0; k < C; k++) sum += exp((double) x[k] - mx);
        for (int64_t k = 0; k < C; k++) probs[r * C + k] = (float) (exp((double) x[k] - mx) / sum);
        cls[r] = nf_cli_argmax(x, (int) C);
        if (cls[r] < 64) counts[cls[r]]++;
    }
    const int64_t lsh[2] = {B, C}, vsh[1] = {B};
    nf_outset_path(&os, "logits.npy", p, sizeof(p));
    if ((rc = nf__npy_write(p, NF_NPY_F4, 2, lsh, logits, err)) != NF_OK) goto done;
    if (c.regression) {
        nf_outset_path(&os, "predictions.npy", p, sizeof(p));
        if ((rc = nf__npy_write(p, NF_NPY_F4, 1, vsh, logits, err)) != NF_OK) goto done;
    } else {
        nf_outset_path(&os, "probabilities.npy", p, sizeof(p));
        if ((rc = nf__npy_write(p, NF_NPY_F4, 2, lsh, probs, err)) != NF_OK) goto done;
        nf_outset_path(&os, "class_ids.npy", p, sizeof(p));
        if ((rc = nf__npy_write(p, NF_NPY_I8, 1, vsh, cls, err)) != NF_OK) goto done;
    }
    struct nf_run_meas meas;
    if ((rc = nf_run_measure(m, be, &meas, err)) != NF_OK) goto done;
    char shape[64], classes[512] = "";
    size_t len = 0;
    snprintf(shape, sizeof(shape), "%lldx%lld", (long long) B, (long long) C);
    for (int64_t k = 0; k < C && k < 64 && !c.regression; k++)
        nf__msg_append(classes, sizeof(classes), &len, "%s%lld:%lld", k ? "," : "", (long long) k,
                       (long long) counts[k]);
    cJSON * rep = cJSON_CreateObject();
    nf_run_report_common(rep, o->model, m, be);
    cJSON_AddStringToObject(rep, "input_source", o->cells ? o->cells : "seeded");
    if (!o->cells) cJSON_AddNumberToObject(rep, "seed", (double) o->seed);
    cJSON_AddStringToObject(rep, "task", c.regression ? "regression" : "classification");
    cJSON_AddNumberToObject(rep, "n_rows", (double) B);
    cJSON_AddNumberToObject(rep, "n_cells", (double) c.n_cells);
    cJSON_AddNumberToObject(rep, "n_target_tokens", (double) C);
    cJSON_AddNumberToObject(rep, "distinct_strings", (double) c.n_strings);
    int64_t ntok = 0;
    for (int64_t u = 0; u < c.n_strings; u++) ntok += c.token_lengths[u];
    cJSON_AddNumberToObject(rep, "text_tokens", (double) ntok);
    cJSON_AddStringToObject(rep, "adapter", adapter);
    if (c.classes) cJSON_AddItemToObject(rep, "classes", cJSON_Duplicate(c.classes, 1));
    if (c.regression)
        cJSON_AddStringToObject(rep, "predictions",
                                "z-scaled (the cells carry no target scaler): predictions.npy = logits[:, 0]");
    nf_run_markers_json(rep, &meas, shape, classes, finite, wall_ms);
    nf_outset_path(&os, "report.json", p, sizeof(p));
    rc = nf__json_write_file(p, rep, err);
    cJSON_Delete(rep);
    if (rc != NF_OK) goto done;
    rc = nf_tab_verify_outputs(os.staging, &c, NULL, err);
    const int assets_verified = rc == NF_OK;
    if (!assets_verified) goto done;
    if ((rc = nf_run_finish(be, o->trace, trace_in_out, &tr, &os, err)) != NF_OK) goto done;
    nf_run_markers_print(&meas, be, shape, classes, finite, wall_ms, assets_verified);
    rc = nf_run_commit(&os, o->trace, trace_in_out, &tr, err);
done:
    nf_cli_outfile_abort(&tr);
    nf_outset_end(&os);
    free(logits);
    free(probs);
    free(cls);
    nf__tab_cells_free(&c);
    nf_model_free(m);
    nf_backend_free(be);
    return rc;
}

int nf_cmd_run_tabstar(int argc, char ** argv) {
    struct nf_tab_opts o;
    if (!nf_tab_parse(argc, argv, &o)) return 2;
    nf_cli_signals_install();
    nf_err err = {0};
    return nf_cli_command_exit(nf_tab_main(&o, &err), &err);
}

/* `nofall tokenize --model DIR --strings S.json --out OUT`: a JSON list of
 * strings -> OUT/token_ids.json, a list of id lists ([CLS] ... [SEP],
 * truncated at 512), as BertTokenizerFast with e5-small-v2's settings gives
 * them; the vocabulary is DIR/vocab.txt. Nothing is written on an error. */
static int nf_tokenize_main(const char * model, const char * strings, const char * out, nf_err * err) {
    char vpath[4096], p[4096];
    nf__path_join(vpath, sizeof(vpath), model, "vocab.txt");
    struct nf__wordpiece * wp = NULL;
    cJSON *doc = NULL, *res = NULL;
    int32_t ids[NF_TAB_MAX_TOKENS];
    int rc = nf__wp_load(vpath, &wp, err);
    if (rc == NF_OK) rc = nf__json_read_file(strings, &doc, err);
    if (rc == NF_OK && !cJSON_IsArray(doc))
        rc = nf__err_set(err, NF_ERR_INPUT, "%s: must be a JSON list of strings", strings);
    if (rc == NF_OK && !(res = cJSON_CreateArray())) rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    int i = 0;
    for (const cJSON * s = doc ? doc->child : NULL; rc == NF_OK && s; s = s->next, i++) {
        if (!cJSON_IsString(s)) {
            rc = nf__err_set(err, NF_ERR_INPUT, "%s: item %d is not a string", strings, i);
            break;
        }
        char ctx[4200];
        snprintf(ctx, sizeof(ctx), "%s: item %d", strings, i);
        int n = 0;
        rc = nf__wp_encode(wp, s->valuestring, strlen(s->valuestring), NF_TAB_MAX_TOKENS, ids, &n, ctx, NULL, err);
        if (rc != NF_OK) break;
        cJSON * row = cJSON_CreateArray();
        for (int j = 0; row && j < n; j++) cJSON_AddItemToArray(row, cJSON_CreateNumber(ids[j]));
        if (!row)
            rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
        else
            cJSON_AddItemToArray(res, row);
    }
    if (rc == NF_OK) rc = nf__mkdir_p(out, err);
    if (rc == NF_OK) {
        nf__path_join(p, sizeof(p), out, "token_ids.json");
        rc = nf__json_write_file(p, res, err); /* atomic: temp name, fsync, rename */
        if (rc == NF_OK) printf("TOKENIZED=%d\n", i);
    }
    cJSON_Delete(res);
    cJSON_Delete(doc);
    nf__wp_free(wp);
    return rc;
}

int nf_cmd_tokenize(int argc, char ** argv) {
    struct nf_cli_opts v;
    if (!nf_cli_opts_parse(NF_M(TOKENIZE), argc, argv, 1, NULL, &v)) return 2;
    const char * model = nf_cli_opt_str(&v, NF_O_MODEL, NULL);
    const char * strings = nf_cli_opt_str(&v, NF_O_STRINGS, NULL);
    const char * out = nf_cli_opt_str(&v, NF_O_OUT_DIR, NULL);
    if (!model || !strings || !out) {
        fprintf(stderr, "error: tokenize needs --model DIR --strings S.json --out OUT\n");
        return 2;
    }
    nf_err err = {0};
    return nf_cli_command_exit(nf_tokenize_main(model, strings, out, &err), &err);
}
