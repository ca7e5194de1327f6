/* mitra-verify.c -- `verify` of a table model (Mitra; nf_model_i.verify,
 * core/verify.h): a device against the CPU backend (the seeded tables: per
 * seed the 16 x 8 x 13 one and --samples more of varied size) or against
 * stored expected logits (a fixture: support_x.npy, support_y.npy,
 * query_x.npy, expected_logits.npy per case). Per case max/mean abs error
 * and class agreement against thresholds (1e-3 / 1e-4), whether both sides
 * read byte-identical inputs, and (--bisect) the first stage where the two
 * sides part. */
#include "mitra-impl.h"
#include "verify.h"
#include "io/nf-io.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define NF_MV_MAX_SEEDS 256
#define NF_MV_INPUTS    3 /* support_x, support_y, query_x */

static const uint64_t nf__mv_seeds[] = {42, 100, 101, 102, 105, 110, 111};

/* --precision bf16-autocast: a fixture's upstream logits under its own
 * autocast (reference/mitra_bf16_fixtures.py), and the default thresholds,
 * in units of bf16's unit roundoff u = 2^-8 times the case's logit scale
 * S = max(1, max |reference logit|) (docs/precision.md "Bounds"): against
 * upstream's autocast max 4 u S (2 ulps at S), mean u S; against the exact
 * fp32 cpu backend (the whole bf16 error) max 8 u S, mean 2 u S. */
#define NF_MV_BF16_U         (1.0 / 256.0)
#define NF_MV_BF16_UP_MAX    4.0
#define NF_MV_BF16_UP_MEAN   1.0
#define NF_MV_BF16_FP32_MAX  8.0
#define NF_MV_BF16_FP32_MEAN 2.0
static const char * nf__mv_expected_file(const struct nf_verify_opts * o) {
    return o->precision == NF_PRECISION_BF16_AUTOCAST ? "expected_logits_bf16.npy" : "expected_logits.npy";
}

struct nf__mv_diff {
    double max_abs, mean_abs;
    int64_t n, n_rows, class_disagree;
    bool finite;
};

/* two (rows, width) arrays; class agreement by argmax when width > 1 */
static void nf__mv_diff(const float * a, const float * b, int64_t rows, int width, double tie, struct nf__mv_diff * d) {
    memset(d, 0, sizeof(*d));
    d->finite = true;
    d->n_rows = rows;
    double sum = 0.0;
    for (int64_t i = 0; i < rows * width; i++) {
        if (!isfinite(a[i]) || !isfinite(b[i])) {
            d->finite = false;
            continue;
        }
        const double e = fabs((double) a[i] - (double) b[i]);
        if (e > d->max_abs) d->max_abs = e;
        sum += e;
        d->n++;
    }
    if (!d->finite) d->max_abs = INFINITY;
    d->mean_abs = d->n ? sum / (double) d->n : 0.0;
    /* a class disagreement counts unless b (the reference) has the two
     * classes within tie of each other (0 in exact modes: every one counts) */
    if (width > 1)
        for (int64_t r = 0; r < rows; r++) {
            const int64_t ka = nf__verify_argmax(a + r * width, width), kb = nf__verify_argmax(b + r * width, width);
            d->class_disagree += ka != kb && !((double) b[r * width + kb] - (double) b[r * width + ka] <= tie);
        }
}

struct nf__mv_case {
    char name[256];
    int64_t ns, nq, nf;
    struct nf__mv_diff d;
    double thr_max, thr_mean; /* this case's thresholds */
    int pass, inputs_identical;
    char bisect_stage[64];
    double bisect_max, bisect_mean;
    int bisect_ran;
};

/* what a forward keeps without --bisect: the inputs read back and the head */
static int nf__mv_keep(const char * stage) { return strncmp(stage, "inputs.", 7) == 0 || strcmp(stage, "head") == 0; }

static int nf__mv_check_opts(const struct nf_verify_opts * o, nf_err * err) {
    if (o->seeds) {
        uint64_t s[NF_MV_MAX_SEEDS];
        if (nf__verify_seed_list(o->seeds, (uint64_t) NF_VERIFY_SEED_MAX, s, NF_MV_MAX_SEEDS) < 1) {
            char e[256];
            return nf__err_set(err, NF_ERR_ARG, "--seeds takes a comma list of 1..%d integers in [0, %lld], got '%s'",
                               NF_MV_MAX_SEEDS, (long long) NF_VERIFY_SEED_MAX, nf__esc(e, sizeof(e), o->seeds));
        }
    }
    if (!o->model || !o->device || !o->against)
        return nf__err_set(err, NF_ERR_ARG, "verify needs --model DIR --device DEV --against cpu|FIXTURE_DIR");
    if (!o->model[0]) return nf__err_set(err, NF_ERR_ARG, "--model needs a directory, got ''");
    return NF_OK;
}

static int nf__mv_prepare(struct nf_verify * v, nf_err * err) {
    if (v->against_cpu) return NF_OK;
    return nf__verify_case_dirs(v, (const char * const[]){nf__mv_expected_file(&v->o)}, 1, err);
}

/* An output file of verify must not be a file the run reads: the models'
 * config.json / model.safetensors, a fixture's files. */
static int nf__mv_check_output(const struct nf_verify * v, const char * flag, const char * out, nf_err * err) {
    static const char * const model_files[] = {"config.json", "model.safetensors"};
    const char * const case_files[] = {"support_x.npy", "support_y.npy", "query_x.npy", nf__mv_expected_file(&v->o)};
    char p[4096], e[1024];
    nf__esc(e, sizeof(e), out);
    const char * models[2] = {v->o.model, v->o.reference_model};
    for (int m = 0; m < 2; m++) {
        for (int i = 0; models[m] && i < 2; i++) {
            nf__path_join(p, sizeof(p), models[m], model_files[i]);
            if (nf__verify_same_file(out, p))
                return nf__err_set(err, NF_ERR_ARG, "%s %s is the %smodel's %s: refused (it would be overwritten)",
                                   flag, e, m ? "reference " : "", model_files[i]);
        }
    }
    for (int d = 0; d < v->n_dirs; d++) {
        for (int i = 0; i < 4; i++) {
            nf__path_join(p, sizeof(p), v->dirs[d], case_files[i]);
            if (nf__verify_same_file(out, p))
                return nf__err_set(err, NF_ERR_ARG, "%s %s is the fixture file %s: refused (it would be overwritten)",
                                   flag, e, p);
        }
    }
    return NF_OK;
}

/* Does m take a table? Its labels: class labels (n_classes) or targets. */
static int nf__mv_table_model(const nf_model * m, int * class_labels, nf_err * err) {
    static const char * const names[NF_MV_INPUTS] = {"support_x", "support_y", "query_x"};
    int ok = nf_model_n_inputs(m) == NF_MV_INPUTS;
    for (int i = 0; ok && i < NF_MV_INPUTS; i++) {
        const struct nf_input_desc * d = nf_model_input(m, i);
        ok = strcmp(d->name, names[i]) == 0 && d->ndim == (i == 1 ? 1 : 2) && (i == 1 || d->dtype == NF_ARRAY_F32);
        if (ok && i == 1) *class_labels = d->dtype == NF_ARRAY_I64;
    }
    if (!ok)
        return nf__err_set(err, NF_ERR_UNSUPPORTED,
                           "model type %s does not take a table (support_x, support_y, query_x): "
                           "the command line cannot feed it yet",
                           nf_model_type(m));
    return NF_OK;
}

/* Compare the two sides' stages, in the model's stage order; the first one
 * over a threshold. */
static void nf__mv_bisect(const nf_model * m, const struct nf_stage_log * dev, const struct nf_stage_log * ref,
                          const struct nf_verify_opts * o, struct nf__mv_case * c) {
    c->bisect_ran = 1;
    snprintf(c->bisect_stage, sizeof(c->bisect_stage), "none");
    char name[64];
    for (int i = 0; nf_model_stage_name(m, i, name, sizeof(name)); i++) {
        if (strncmp(name, "inputs.", 7) == 0) continue;
        const struct nf_stage_rec *a = nf__stage_log_find(dev, name), *b = nf__stage_log_find(ref, name);
        if (!a || !b || b->n != a->n) continue;
        struct nf__mv_diff d;
        nf__mv_diff(a->data, b->data, a->n, 1, 0.0, &d);
        if (!(d.max_abs <= o->max_abs) || !(d.mean_abs <= o->mean_abs)) {
            snprintf(c->bisect_stage, sizeof(c->bisect_stage), "%s", a->name);
            c->bisect_max = d.max_abs;
            c->bisect_mean = d.mean_abs;
            return;
        }
    }
}

/* The input a stage "inputs.<name>" reads back, or NULL */
static const struct nf_array * nf__mv_stage_input(const char * stage, const struct nf_array * in, int n_in) {
    if (strncmp(stage, "inputs.", 7) != 0) return NULL;
    for (int i = 0; i < n_in; i++)
        if (strcmp(in[i].name, stage + 7) == 0 && in[i].dtype == NF_ARRAY_F32) return &in[i];
    return NULL;
}

/* Every input the model reads back ("inputs.<name>" stages) is in log and
 * equals the given input, byte for byte. */
static int nf__mv_inputs_identical(const nf_model * m, const struct nf_stage_log * log, const struct nf_array * in,
                                   int n_in) {
    int seen = 0;
    char name[64];
    for (int s = 0; nf_model_stage_name(m, s, name, sizeof(name)); s++) {
        const struct nf_array * a = nf__mv_stage_input(name, in, n_in);
        if (!a) continue;
        const struct nf_stage_rec * r = nf__stage_log_find(log, name);
        int64_t n = 1;
        for (int d = 0; d < a->ndim; d++) n *= a->shape[d];
        if (!r || r->n != n || memcmp(r->data, a->data, (size_t) n * sizeof(float)) != 0) return 0;
        seen++;
    }
    return seen > 0;
}

/* the inputs with the data the reference side read back from its device */
static int nf__mv_inputs_of(const nf_model * m, const struct nf_stage_log * log, const struct nf_array * in, int n_in,
                            struct nf_array * out) {
    for (int i = 0; i < n_in; i++) out[i] = in[i];
    char name[64];
    for (int s = 0; nf_model_stage_name(m, s, name, sizeof(name)); s++) {
        const struct nf_array * a = nf__mv_stage_input(name, in, n_in);
        if (!a) continue;
        const struct nf_stage_rec * r = nf__stage_log_find(log, name);
        if (!r) return 0;
        out[a - in].data = r->data;
    }
    return 1;
}

static void nf__mv_print_case(FILE * f, const struct nf__mv_case * c, int width, int bf16) {
    fprintf(
        f,
        "case %-28s n_s=%-5lld n_q=%-5lld F=%-4lld max_abs=%.3e mean_abs=%.3e classes_agree=%lld/%lld inputs_identical=%s %s\n",
        c->name, (long long) c->ns, (long long) c->nq, (long long) c->nf, c->d.max_abs, c->d.mean_abs,
        (long long) (width > 1 ? c->d.n_rows - c->d.class_disagree : c->d.n_rows), (long long) c->d.n_rows,
        c->inputs_identical ? "true" : "false", c->pass ? "PASS" : "FAIL");
    if (bf16) fprintf(f, "  bf16 bounds for this case: max_abs<=%.3e mean_abs<=%.3e\n", c->thr_max, c->thr_mean);
    if (c->bisect_ran) {
        if (strcmp(c->bisect_stage, "none") == 0)
            fprintf(f, "  bisect: no stage exceeds the thresholds\n");
        else
            fprintf(f, "  bisect: first stage over threshold: %s (max_abs=%.3e mean_abs=%.3e)\n", c->bisect_stage,
                    c->bisect_max, c->bisect_mean);
    }
}

/* case ci's table (seeded, or the fixture's files) into in; expected: the
 * fixture's logits (NULL against cpu) */
static int nf__mv_case_inputs(struct nf_verify * v, int ci, int cls, struct nf__mv_case * c, struct nf_inputs * in,
                              float ** expected, int * width, nf_err * err) {
    const struct nf_verify_opts * o = &v->o;
    int out_ndim = 0;
    int64_t out_shape[NF_ARRAY_MAX_DIMS];
    if (v->against_cpu) {
        const uint64_t seed = v->seeds[ci / (1 + o->samples)];
        const int sample = ci % (1 + o->samples);
        int64_t ns = 16, nq = 8, nf = 13;
        uint64_t s = seed;
        if (sample > 0) {
            /* extra seeded samples of varied size */
            s = seed * 1000003ull + (uint64_t) sample;
            uint64_t h = s * 0x9E3779B97F4A7C15ull;
            ns = 1 + (int64_t) ((h >> 8) % 64);
            nq = 1 + (int64_t) ((h >> 24) % 16);
            nf = 1 + (int64_t) ((h >> 40) % 24);
            snprintf(c->name, sizeof(c->name), "seed=%llu/sample=%d", (unsigned long long) seed, sample);
        } else {
            snprintf(c->name, sizeof(c->name), "seed=%llu", (unsigned long long) seed);
        }
        NF_TRY(nf__mitra_seeded(v->m, s, ns, nq, nf, in, err));
    } else {
        const char * dir = v->dirs[ci];
        char a[4096], b[4096], q[4096], e[4096];
        nf__path_join(a, sizeof(a), dir, "support_x.npy");
        nf__path_join(b, sizeof(b), dir, "support_y.npy");
        nf__path_join(q, sizeof(q), dir, "query_x.npy");
        nf__path_join(e, sizeof(e), dir, nf__mv_expected_file(o));
        const char * base = strrchr(dir, '/');
        snprintf(c->name, sizeof(c->name), "%s", base ? base + 1 : dir);
        NF_TRY(nf__mitra_files(a, b, q, cls, in, err));
        NF_TRY(nf_model_output_shape(v->m, in->a, in->n, &out_ndim, out_shape, err));
        struct nf_npy ex = {0};
        NF_TRY(nf__npy_read(e, &ex, err));
        int ok = ex.dtype == NF_NPY_F4 && ex.ndim == out_ndim;
        for (int d = 0; ok && d < out_ndim; d++) ok = ex.shape[d] == out_shape[d];
        int64_t w = 1;
        for (int d = 1; d < out_ndim; d++) w *= out_shape[d];
        if (!ok) {
            nf__npy_free(&ex);
            return nf__err_set(err, NF_ERR_SHAPE, "%s: expected float32 shape (%lld%s) for this model", e,
                               (long long) in->a[2].shape[0], w > 1 ? ", C" : ",");
        }
        *expected = ex.data;
        ex.data = NULL;
        nf__npy_free(&ex);
    }
    NF_TRY(nf_model_output_shape(v->m, in->a, in->n, &out_ndim, out_shape, err));
    int64_t w = 1;
    for (int d = 1; d < out_ndim; d++) w *= out_shape[d];
    *width = (int) w;
    return NF_OK;
}

static cJSON * nf__mv_json(const struct nf_verify * v, const struct nf__mv_case * cases, int n_cases, int failed) {
    cJSON * doc = cJSON_CreateObject();
    nf__verify_json_head(doc, v, 1);
    cJSON * arr = cJSON_AddArrayToObject(doc, "cases");
    for (int i = 0; i < n_cases; i++) {
        const struct nf__mv_case * c = &cases[i];
        cJSON * j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "case", c->name);
        cJSON_AddNumberToObject(j, "n_support", (double) c->ns);
        cJSON_AddNumberToObject(j, "n_query", (double) c->nq);
        cJSON_AddNumberToObject(j, "n_features", (double) c->nf);
        cJSON_AddNumberToObject(j, "max_abs_error", isfinite(c->d.max_abs) ? c->d.max_abs : -1);
        cJSON_AddNumberToObject(j, "mean_abs_error", c->d.mean_abs);
        if (v->bf16_default) {
            cJSON_AddNumberToObject(j, "max_abs_threshold", c->thr_max);
            cJSON_AddNumberToObject(j, "mean_abs_threshold", c->thr_mean);
        }
        cJSON_AddNumberToObject(j, "class_disagreements", (double) c->d.class_disagree);
        cJSON_AddBoolToObject(j, "inputs_identical", c->inputs_identical);
        cJSON_AddBoolToObject(j, "pass", c->pass);
        if (c->bisect_ran) cJSON_AddStringToObject(j, "bisect_first_stage", c->bisect_stage);
        cJSON_AddItemToArray(arr, j);
    }
    cJSON_AddNumberToObject(doc, "failed", failed);
    cJSON_AddBoolToObject(doc, "pass", failed == 0);
    return doc;
}

static void nf__mv_summary(FILE * f, const struct nf_verify * v, const struct nf__mv_case * cases, int n_cases,
                           int failed) {
    int all_inputs = 1, worst = 0;
    double worst_mean = 0;
    for (int i = 0; i < n_cases; i++) {
        all_inputs &= cases[i].inputs_identical;
        if (cases[i].d.max_abs > cases[worst].d.max_abs) worst = i;
        if (cases[i].d.mean_abs > worst_mean) worst_mean = cases[i].d.mean_abs;
    }
    nf__verify_summary_head(f, v, n_cases, failed, n_cases ? cases[worst].name : "none",
                            n_cases ? cases[worst].d.max_abs : 0.0, worst_mean);
    nf__verify_summary_tail(f, v, all_inputs, failed);
}

static int nf__mv_run(struct nf_verify * v, FILE * f, nf_err * err) {
    const struct nf_verify_opts * o = &v->o;
    struct nf__mv_case * cases = NULL;
    int n_cases = 0, rc, cls = 0, width = 0;
    struct nf_stage_log dlog = {.keep = nf__mv_keep}, rlog = {.keep = nf__mv_keep};
    float *l_dev = NULL, *l_ref = NULL;
    struct nf_inputs * in = NULL;

    if ((rc = nf__verify_backend(v, o->device, o->precision, &v->be, err)) != NF_OK) goto done;
    nf_trace_reset(v->be, o->trace ? NF_TRACE_TIMED : NF_TRACE_TOTALS);
    if ((rc = nf_model_load(v->be, o->model, &v->m, err)) != NF_OK) goto done;
    if ((rc = nf__mv_table_model(v->m, &cls, err)) != NF_OK) goto done;
    if (v->against_cpu) {
        if ((rc = nf__verify_backend(v, "cpu", NF_PRECISION_EXACT, &v->rbe, err)) != NF_OK) goto done;
        if ((rc = nf_model_load(v->rbe, o->reference_model ? o->reference_model : o->model, &v->rm, err)) != NF_OK)
            goto done;
        if (!nf__verify_same_config(v->m, v->rm)) {
            rc = nf__err_set(err, NF_ERR_ARG, "--reference-model has a different config");
            goto done;
        }
    } else if (o->bisect) {
        rc = nf__err_set(err, NF_ERR_ARG, "--bisect needs --against cpu (fixtures hold no intermediate stages)");
        goto done;
    }
    nf_model * m = v->m;
    nf_model * rm = v->rm;
    dlog.all = rlog.all = o->bisect != 0;
    nf_model_set_stage_callback(m, o->bisect ? NF_STAGES_ALL : NF_STAGES_INPUTS, nf__stage_log_fn, &dlog);
    if (rm) nf_model_set_stage_callback(rm, o->bisect ? NF_STAGES_ALL : NF_STAGES_INPUTS, nf__stage_log_fn, &rlog);

    const int total = v->against_cpu ? v->n_seeds * (1 + o->samples) : v->n_dirs;
    cases = calloc((size_t) total, sizeof(*cases));
    if (!cases) {
        rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
        goto done;
    }
    if (v->bf16_default)
        fprintf(f,
                "verify: %s (%s) against %s; precision %s: thresholds per case, max_abs<=%g u S, mean_abs<=%g u S "
                "(u = 2^-8, S = max(1, max |reference logit|)), identical classes except near-ties (reference "
                "margin <= 2 max_abs)\n",
                nf_backend_name(v->be), nf_backend_description(v->be),
                v->against_cpu ? "cpu (fp32 reference backend)" : o->against, nf_precision_name(o->precision),
                v->against_cpu ? NF_MV_BF16_FP32_MAX : NF_MV_BF16_UP_MAX,
                v->against_cpu ? NF_MV_BF16_FP32_MEAN : NF_MV_BF16_UP_MEAN);
    else
        fprintf(
            f, "verify: %s (%s) against %s; thresholds max_abs<=%.1e mean_abs<=%.1e, identical classes; precision %s\n",
            nf_backend_name(v->be), nf_backend_description(v->be),
            v->against_cpu ? "cpu (fp32 reference backend)" : o->against, o->max_abs, o->mean_abs,
            nf_precision_name(o->precision));
    if (!v->against_cpu && v->n_seeds)
        fprintf(f, "verify: fixtures carry their own inputs; --seeds/--samples do not apply\n");

    for (int ci = 0; ci < total; ci++) {
        struct nf__mv_case * c = &cases[ci];
        float * expected = NULL;
        nf_inputs_free(in);
        in = calloc(1, sizeof(*in));
        if (!in) {
            rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
            goto done;
        }
        if ((rc = nf__mv_case_inputs(v, ci, cls, c, in, &expected, &width, err)) != NF_OK) {
            free(expected);
            goto done;
        }
        c->ns = in->a[0].shape[0];
        c->nq = in->a[2].shape[0];
        c->nf = in->a[0].shape[1];
        free(l_dev);
        free(l_ref);
        l_dev = malloc((size_t) (c->nq * width) * sizeof(float));
        l_ref = expected ? expected : malloc((size_t) (c->nq * width) * sizeof(float));
        if (!l_dev || !l_ref) {
            rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
            goto done;
        }
        nf__stage_log_clear(&dlog);
        nf__stage_log_clear(&rlog);
        rc = nf_model_forward(m, in->a, in->n, l_dev, err);
        if (rc == NF_OK && rm) rc = nf_model_forward(rm, in->a, in->n, l_ref, err);
        if (rc != NF_OK) {
            nf__err_prefix(err, "case %s", c->name);
            goto done;
        }
        c->thr_max = o->max_abs;
        c->thr_mean = o->mean_abs;
        double tie = 0.0;
        if (v->bf16_default) {
            double s = 1.0;
            for (int64_t i = 0; i < c->nq * width; i++)
                if (fabs((double) l_ref[i]) > s) s = fabs((double) l_ref[i]);
            const double kmax = v->against_cpu ? NF_MV_BF16_FP32_MAX : NF_MV_BF16_UP_MAX;
            const double kmean = v->against_cpu ? NF_MV_BF16_FP32_MEAN : NF_MV_BF16_UP_MEAN;
            c->thr_max = kmax * NF_MV_BF16_U * s;
            c->thr_mean = kmean * NF_MV_BF16_U * s;
            tie = 2.0 * c->thr_max;
        }
        nf__mv_diff(l_dev, l_ref, c->nq, width, tie, &c->d);
        /* byte-identical inputs: each side's device copy, read back, against
         * the other side's (cpu reference) or against the fixture's file */
        if (rm) {
            struct nf_array rin[NF_MV_INPUTS];
            c->inputs_identical = nf__mv_inputs_of(rm, &rlog, in->a, in->n, rin) &&
                                  nf__mv_inputs_identical(m, &dlog, rin, in->n) &&
                                  nf__mv_inputs_identical(rm, &rlog, in->a, in->n);
        } else {
            c->inputs_identical = nf__mv_inputs_identical(m, &dlog, in->a, in->n);
        }
        c->pass = c->d.finite && c->d.max_abs <= c->thr_max && c->d.mean_abs <= c->thr_mean &&
                  c->d.class_disagree == 0 && c->inputs_identical;
        if (o->bisect == 2 || (o->bisect == 1 && !c->pass)) {
            nf__mv_bisect(m, &dlog, &rlog, o, c);
            if (o->stage_errors) nf__verify_stages_add(v, n_cases, m, &dlog, &rlog);
        }
        nf__mv_print_case(f, c, width, v->bf16_default);
        n_cases++;
    }
    for (int i = 0; i < n_cases; i++) v->failed += !cases[i].pass;
    nf__mv_summary(f, v, cases, n_cases, v->failed);
    v->json = nf__mv_json(v, cases, n_cases, v->failed);
done:
    nf_inputs_free(in);
    nf__stage_log_free(&dlog);
    nf__stage_log_free(&rlog);
    free(l_dev);
    free(l_ref);
    free(cases);
    return rc;
}

const struct nf_verify_i nf__mitra_verify = {
    .max_abs = 1e-3,
    .mean_abs = 1e-4,
    .seeds = nf__mv_seeds,
    .n_seeds = (int) (sizeof(nf__mv_seeds) / sizeof(nf__mv_seeds[0])),
    .max_seeds = NF_MV_MAX_SEEDS,
    .check_opts = nf__mv_check_opts,
    .prepare = nf__mv_prepare,
    .check_output = nf__mv_check_output,
    .run = nf__mv_run,
};
