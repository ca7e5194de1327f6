/* sptransformer-verify.c -- `verify` of a SpTransformer model
 * (nf_model_i.verify, core/verify.h): a device against the cpu backend
 * (seeded sequences: per seed the 128-nt seeds' case and --samples more of
 * varied length) or against stored upstream outputs (a fixture directory:
 * tokens.npy, expected_logits.npy and, when present, expected_buckets.npy /
 * expected_bucket_margin.npy).
 *
 * Per case: max/mean |logit difference| against thresholds (default 1e-4 /
 * 1e-5), the splice class (argmax over channels 0..2) at every position
 * (under bf16-autocast counted, not a failure: the logit bounds imply it),
 * the top-1 bucket choice of every sinkhorn head, query bucket and layer
 * (a discrete choice: a flip is reported as a flip; one where the
 * reference's top-two probabilities are within 1e-6 is a near-tie, counted
 * apart and not a failure), and whether both sides read byte-identical
 * one-hot inputs. --bisect names the first stage (README "SpTransformer:
 * verify") where the two sides part. */
#include "sptransformer-impl.h"
#include "verify.h"
#include "io/nf-io.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define NF_VSPT_MAX_SEEDS 64
#define NF_VSPT_NEAR_TIE  1e-6

static const uint64_t nf__vspt_seeds[] = {42, 100, 101};

/* what a forward keeps without --bisect: the inputs read back, the bucket choices */
static int nf__vspt_keep(const char * stage) {
    const char * dot = strrchr(stage, '.');
    return strncmp(stage, "inputs.", 7) == 0 ||
           (dot && (strcmp(dot, ".buckets") == 0 || strcmp(dot, ".bucket_prob") == 0));
}

struct nf__vspt_case {
    char name[64];
    int64_t B, L;
    double max_abs, mean_abs;
    int64_t positions, splice_agree;
    int64_t buckets, buckets_agree, tie_flips, flips;
    double min_margin;
    int finite, inputs_identical, have_buckets, pass;
    int sel_bf16; /* the bucket choices compared are upstream's under autocast (expected_buckets_bf16.npy) */
    char bisect[64];
};

/* one case's input and the fixture's outputs */
struct nf__vspt_in {
    int8_t * ids;
    int64_t B, L;
    struct nf_npy sel, margin, exp;
};

static void nf__vspt_in_clear(struct nf__vspt_in * x) {
    free(x->ids);
    nf__npy_free(&x->sel);
    nf__npy_free(&x->margin);
    nf__npy_free(&x->exp);
    memset(x, 0, sizeof(*x));
}

/* bucket choices of both sides: ours from the stage log, the reference's
 * either from its log or from the fixture (layout (B, layers, heads, nb)) */
static void nf__vspt_buckets(const nf_model * m, const struct nf_stage_log * dev, const struct nf_stage_log * ref,
                             const struct nf_npy * fx_sel, const struct nf_npy * fx_margin, struct nf__vspt_case * c) {
    c->min_margin = 1.0;
    char name[64];
    int layers = 0;
    for (int i = 0; nf_model_stage_name(m, i, name, sizeof(name)); i++)
        if (strstr(name, ".buckets")) layers++;
    for (int l = 0; l < layers; l++) {
        snprintf(name, sizeof(name), "layers.%d.buckets", l);
        const struct nf_stage_rec * d = nf__stage_log_find(dev, name);
        const struct nf_stage_rec *r = ref ? nf__stage_log_find(ref, name) : NULL, *rp = NULL;
        snprintf(name, sizeof(name), "layers.%d.bucket_prob", l);
        if (ref) rp = nf__stage_log_find(ref, name);
        if (!d || (ref && (!r || !rp || r->n != d->n))) return;
        const int64_t B = d->shape[0], H = d->shape[1], nb = d->shape[2];
        if (!ref && (!fx_sel->data || fx_sel->ndim != 4 || fx_sel->shape[0] != B || fx_sel->shape[1] != layers ||
                     fx_sel->shape[2] != H || fx_sel->shape[3] != nb || !fx_margin->data))
            return;
        for (int64_t b = 0; b < B; b++)
            for (int64_t h = 0; h < H; h++)
                for (int64_t u = 0; u < nb; u++) {
                    const int64_t i = (b * H + h) * nb + u, fi = ((b * layers + l) * H + h) * nb + u;
                    const int want = ref ? (int) r->data[i] : ((const int8_t *) fx_sel->data)[fi];
                    const double margin = ref ? rp->data[2 * i + 1] : ((const float *) fx_margin->data)[fi];
                    c->min_margin = margin < c->min_margin ? margin : c->min_margin;
                    c->buckets++;
                    if ((int) d->data[i] == want)
                        c->buckets_agree++;
                    else if (margin < NF_VSPT_NEAR_TIE)
                        c->tie_flips++;
                    else
                        c->flips++;
                }
    }
    c->have_buckets = c->buckets > 0;
}

static void nf__vspt_bisect(const nf_model * m, const struct nf_stage_log * dev, const struct nf_stage_log * ref,
                            const struct nf_verify_opts * o, struct nf__vspt_case * c) {
    snprintf(c->bisect, sizeof(c->bisect), "none");
    char name[64];
    for (int i = 0; nf_model_stage_name(m, i, name, sizeof(name)); i++) {
        const struct nf_stage_rec *a = nf__stage_log_find(dev, name), *b = nf__stage_log_find(ref, name);
        if (!a || !b || a->n != b->n) continue;
        double mx = 0, sum = 0;
        for (int64_t e = 0; e < a->n; e++) {
            const double d = fabs((double) a->data[e] - (double) b->data[e]);
            mx = d > mx || isnan(d) ? d : mx;
            sum += d;
        }
        if (!(mx <= o->max_abs) || sum / (double) a->n > o->mean_abs) {
            snprintf(c->bisect, sizeof(c->bisect), "%s", name);
            return;
        }
    }
}

static int nf__vspt_check_opts(const struct nf_verify_opts * o, nf_err * err) {
    uint64_t s[NF_VSPT_MAX_SEEDS];
    if (o->seeds && nf__verify_seed_list(o->seeds, (uint64_t) NF_VERIFY_SEED_MAX, s, NF_VSPT_MAX_SEEDS) < 1)
        return nf__err_set(err, NF_ERR_ARG, "--seeds takes a comma list of 1..%d integers", NF_VSPT_MAX_SEEDS);
    if (!o->model || !o->device || !o->against)
        return nf__err_set(err, NF_ERR_ARG, "verify needs --model M --device DEV --against cpu|FIXTURE_DIR");
    return NF_OK;
}

/* --precision bf16-autocast: upstream's logits under its own autocast
 * (reference/sptransformer_bf16_fixtures.py) and Mitra's default bounds
 * (docs/precision.md "Bounds"): in units of u = 2^-8 times S = max(1, max
 * |reference logit|), max 4 u S / mean u S against the fixture, 8 u S / 2 u S
 * against the exact fp32 cpu backend. Bucket choices: against upstream's
 * autocast ones (expected_buckets_bf16.npy) where the fixture has them, else
 * fp32's; a flip is reported, not a failure (docs/precision.md). */
#define NF_VSPT_BF16_U (1.0 / 256.0)
static const char * nf__vspt_expected_file(const struct nf_verify_opts * o) {
    return o->precision == NF_PRECISION_BF16_AUTOCAST ? "expected_logits_bf16.npy" : "expected_logits.npy";
}

static int nf__vspt_prepare(struct nf_verify * v, nf_err * err) {
    if (v->against_cpu) return NF_OK;
    NF_TRY(nf__verify_case_dirs(v, (const char * const[]){"tokens.npy", nf__vspt_expected_file(&v->o)}, 2, err));
    if (v->o.bisect)
        return nf__err_set(err, NF_ERR_ARG, "--bisect needs --against cpu (fixtures hold no intermediate stages)");
    return NF_OK;
}

static int nf__vspt_check_output(const struct nf_verify * v, const char * flag, const char * path, nf_err * err) {
    if (nf__verify_same_file(path, v->o.model))
        return nf__err_set(err, NF_ERR_ARG, "%s is the model: refused (it would be overwritten)", flag);
    return NF_OK;
}

static void nf__vspt_compare(const float * a, const float * b, int64_t rows, int C, struct nf__vspt_case * c) {
    double mx = 0, sum = 0;
    c->finite = 1;
    c->positions = rows;
    for (int64_t i = 0; i < rows * C; i++) {
        if (!isfinite(a[i]) || !isfinite(b[i])) c->finite = 0;
        const double d = fabs((double) a[i] - (double) b[i]);
        mx = d > mx ? d : mx;
        sum += d;
    }
    for (int64_t r = 0; r < rows; r++)
        c->splice_agree += nf__verify_argmax(a + r * C, 3) == nf__verify_argmax(b + r * C, 3);
    c->max_abs = mx;
    c->mean_abs = rows ? sum / (double) (rows * C) : 0;
}

/* case k's tokens (seeded, or the fixture's with its outputs) */
static int nf__vspt_case_input(const struct nf_verify * v, int k, int64_t context, int64_t window,
                               struct nf__vspt_case * c, struct nf__vspt_in * x, nf_err * err) {
    if (v->against_cpu) {
        const uint64_t seed = v->seeds[k / (1 + v->o.samples)];
        const int sample = k % (1 + v->o.samples);
        int64_t n = 128;
        uint64_t sd = seed;
        if (sample > 0) { /* varied lengths over the whole valid range */
            sd = seed * 1000003ull + (uint64_t) sample;
            n = 1 + (int64_t) ((sd * 0x9E3779B97F4A7C15ull >> 11) % (uint64_t) window);
            snprintf(c->name, sizeof(c->name), "seed=%llu/sample=%d", (unsigned long long) seed, sample);
        } else {
            snprintf(c->name, sizeof(c->name), "seed=%llu", (unsigned long long) seed);
        }
        int8_t * core = malloc((size_t) (n > 0 ? n : 1));
        if (!core) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
        nf__spt_seeded_tokens(sd, n, core);
        const int rc = nf__spt_tokens_make(core, 1, n, 1, context, "--length", NULL, &x->ids, &x->L, err);
        free(core);
        x->B = 1;
        return rc;
    }
    const char * dir = v->dirs[k];
    char p[4096];
    const char * base = strrchr(dir, '/');
    snprintf(c->name, sizeof(c->name), "%s", base ? base + 1 : dir);
    nf__path_join(p, sizeof(p), dir, "tokens.npy");
    NF_TRY(nf__spt_tokens_npy(p, 0, context, &x->ids, &x->B, &x->L, err));
    nf__path_join(p, sizeof(p), dir, nf__vspt_expected_file(&v->o));
    NF_TRY(nf__npy_read(p, &x->exp, err));
    nf_err ignore = {0};
    /* under bf16-autocast upstream's own autocast choices where the fixture has them */
    const int bf16 = v->o.precision == NF_PRECISION_BF16_AUTOCAST;
    nf__path_join(p, sizeof(p), dir, "expected_buckets_bf16.npy");
    c->sel_bf16 = bf16 && nf__npy_read(p, &x->sel, &ignore) == NF_OK;
    if (c->sel_bf16 && x->sel.dtype != NF_NPY_I1) {
        nf__npy_free(&x->sel);
        c->sel_bf16 = 0;
    }
    nf__path_join(p, sizeof(p), dir, "expected_buckets.npy");
    if (!c->sel_bf16 && nf__npy_read(p, &x->sel, &ignore) == NF_OK && x->sel.dtype != NF_NPY_I1) nf__npy_free(&x->sel);
    nf__path_join(p, sizeof(p), dir, "expected_bucket_margin.npy");
    if (nf__npy_read(p, &x->margin, &ignore) == NF_OK && x->margin.dtype != NF_NPY_F4) nf__npy_free(&x->margin);
    return NF_OK;
}

static void nf__vspt_print_case(FILE * f, const struct nf__vspt_case * c) {
    char bk[96] = "buckets=n/a";
    if (c->have_buckets)
        snprintf(bk, sizeof(bk), "buckets_agree=%lld/%lld near_tie_flips=%lld min_margin=%.2e",
                 (long long) c->buckets_agree, (long long) c->buckets, (long long) c->tie_flips, c->min_margin);
    fprintf(f,
            "case %-22s B=%lld L=%-5lld max_abs=%.3e mean_abs=%.3e splice_agree=%lld/%lld %s inputs_identical=%s "
            "%s\n",
            c->name, (long long) c->B, (long long) c->L, c->max_abs, c->mean_abs, (long long) c->splice_agree,
            (long long) c->positions, bk, c->inputs_identical ? "true" : "false", c->pass ? "PASS" : "FAIL");
    if (c->bisect[0]) {
        if (strcmp(c->bisect, "none") == 0)
            fprintf(f, "  bisect: no stage exceeds the thresholds\n");
        else
            fprintf(f, "  bisect: first stage over threshold: %s\n", c->bisect);
    }
}

static cJSON * nf__vspt_json(const struct nf_verify * v, const struct nf__vspt_case * cases, int n_cases, int failed) {
    cJSON * doc = cJSON_CreateObject();
    cJSON_AddStringToObject(doc, "model_type", "sptransformer");
    nf__verify_json_head(doc, v, 0);
    cJSON_AddNumberToObject(doc, "near_tie_margin", NF_VSPT_NEAR_TIE);
    cJSON * arr = cJSON_AddArrayToObject(doc, "cases");
    for (int i = 0; i < n_cases; i++) {
        const struct nf__vspt_case * c = &cases[i];
        cJSON * j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "case", c->name);
        cJSON_AddNumberToObject(j, "batch", (double) c->B);
        cJSON_AddNumberToObject(j, "length", (double) c->L);
        cJSON_AddNumberToObject(j, "max_abs_error", isfinite(c->max_abs) ? c->max_abs : -1);
        cJSON_AddNumberToObject(j, "mean_abs_error", c->mean_abs);
        cJSON_AddNumberToObject(j, "positions", (double) c->positions);
        cJSON_AddNumberToObject(j, "splice_class_agreements", (double) c->splice_agree);
        cJSON_AddNumberToObject(j, "bucket_choices", (double) c->buckets);
        cJSON_AddNumberToObject(j, "bucket_choices_agree", (double) c->buckets_agree);
        cJSON_AddNumberToObject(j, "bucket_near_tie_flips", (double) c->tie_flips);
        cJSON_AddNumberToObject(j, "bucket_other_flips", (double) c->flips);
        if (c->have_buckets) cJSON_AddNumberToObject(j, "min_reference_margin", c->min_margin);
        cJSON_AddBoolToObject(j, "inputs_identical", c->inputs_identical);
        cJSON_AddBoolToObject(j, "pass", c->pass);
        if (c->bisect[0]) cJSON_AddStringToObject(j, "bisect_first_stage", c->bisect);
        cJSON_AddItemToArray(arr, j);
    }
    cJSON_AddNumberToObject(doc, "failed", failed);
    cJSON_AddBoolToObject(doc, "pass", failed == 0);
    return doc;
}

static void nf__vspt_summary(FILE * f, const struct nf_verify * v, const struct nf__vspt_case * cases, int n_cases,
                             int failed) {
    int all_inputs = 1, worst = 0;
    int64_t bt = 0, ba = 0, ties = 0;
    double worst_mean = 0;
    for (int i = 0; i < n_cases; i++) {
        all_inputs &= cases[i].inputs_identical;
        if (cases[i].max_abs > cases[worst].max_abs) worst = i;
        worst_mean = cases[i].mean_abs > worst_mean ? cases[i].mean_abs : worst_mean;
        bt += cases[i].buckets;
        ba += cases[i].buckets_agree;
        ties += cases[i].tie_flips;
    }
    nf__verify_summary_head(f, v, n_cases, failed, n_cases ? cases[worst].name : "none",
                            n_cases ? cases[worst].max_abs : 0.0, worst_mean);
    fprintf(f, "BUCKETS_AGREE=%lld/%lld\nBUCKET_NEAR_TIE_FLIPS=%lld\n", (long long) ba, (long long) bt,
            (long long) ties);
    nf__verify_summary_tail(f, v, all_inputs, failed);
}

/* the one-hot each side computed on, read back from its device: against
 * each other, or ours against the one-hot of the fixture's tokens */
static int nf__vspt_inputs_identical(const struct nf_stage_log * dlog, const struct nf_stage_log * rlog, int ref,
                                     const struct nf__vspt_in * x) {
    const struct nf_stage_rec *d1 = nf__stage_log_find(dlog, "inputs.one_hot"),
                              *r1 = ref ? nf__stage_log_find(rlog, "inputs.one_hot") : NULL;
    if (ref) return d1 && r1 && d1->n == r1->n && memcmp(d1->data, r1->data, (size_t) d1->n * 4) == 0;
    float * oh = calloc((size_t) (x->B * x->L * 4), sizeof(float));
    if (oh)
        for (int64_t i = 0; i < x->B * x->L; i++)
            if (x->ids[i] < 4) oh[i * 4 + x->ids[i]] = 1.0f;
    const int same = oh && d1 && d1->n == x->B * x->L * 4 && memcmp(d1->data, oh, (size_t) d1->n * 4) == 0;
    free(oh);
    return same;
}

static int nf__vspt_run(struct nf_verify * v, FILE * f, nf_err * err) {
    const struct nf_verify_opts * o = &v->o;
    int rc, n_cases = 0;
    struct nf__vspt_case * cases = NULL;
    struct nf_stage_log dlog = {.keep = nf__vspt_keep}, rlog = {.keep = nf__vspt_keep};
    struct nf__vspt_in x = {0};
    float *l_dev = NULL, *l_ref = NULL;
    int64_t * ids = NULL;
    if ((rc = nf__verify_backend(v, o->device, o->precision, &v->be, err)) != NF_OK) goto done;
    if ((rc = nf_model_load(v->be, o->model, &v->m, err)) != NF_OK) goto done;
    if (v->against_cpu) {
        if ((rc = nf__verify_backend(v, "cpu", NF_PRECISION_EXACT, &v->rbe, err)) != NF_OK) goto done;
        if ((rc = nf_model_load(v->rbe, o->reference_model ? o->reference_model : o->model, &v->rm, err)) != NF_OK)
            goto done;
        if (!nf__verify_same_config(v->m, v->rm)) {
            rc = nf__err_set(err, NF_ERR_ARG, "--reference-model has a different config");
            goto done;
        }
    }
    nf_model *m = v->m, *rm = v->rm;
    int64_t context = 0, window = 0;
    struct nf_config_item ci;
    for (int i = 0; nf_model_config_item(m, i, &ci); i++) {
        if (strcmp(ci.key, "context_len") == 0) context = ci.num;
        if (strcmp(ci.key, "max_seq_len") == 0) window = ci.num;
    }
    dlog.all = rlog.all = o->bisect != 0;
    nf_model_set_stage_callback(m, o->bisect ? NF_STAGES_ALL : NF_STAGES_INPUTS, nf__stage_log_fn, &dlog);
    if (rm) nf_model_set_stage_callback(rm, o->bisect ? NF_STAGES_ALL : NF_STAGES_INPUTS, nf__stage_log_fn, &rlog);
    const int total = v->against_cpu ? v->n_seeds * (1 + o->samples) : v->n_dirs;
    cases = calloc((size_t) (total ? total : 1), sizeof(*cases));
    if (!cases) {
        rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
        goto done;
    }
    fprintf(f,
            "verify: %s (%s) against %s; thresholds max_abs<=%.1e mean_abs<=%.1e, identical splice classes and "
            "bucket choices (near-ties, reference margin < %.0e, reported apart); precision %s\n",
            nf_backend_name(v->be), nf_backend_description(v->be),
            v->against_cpu ? "cpu (fp32 reference backend)" : o->against, o->max_abs, o->mean_abs, NF_VSPT_NEAR_TIE,
            nf_precision_name(o->precision));
    for (int k = 0; k < total; k++) {
        struct nf__vspt_case * c = &cases[k];
        nf__vspt_in_clear(&x);
        if ((rc = nf__vspt_case_input(v, k, context, window, c, &x, err)) != NF_OK) goto done;
        c->B = x.B;
        c->L = x.L;
        free(ids);
        ids = malloc((size_t) (x.B * x.L) * sizeof(int64_t));
        if (!ids) {
            rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
            goto done;
        }
        for (int64_t i = 0; i < x.B * x.L; i++) ids[i] = x.ids[i];
        struct nf_array in = {"tokens", NF_ARRAY_I64, 2, {x.B, x.L}, ids};
        int ndim;
        int64_t osh[NF_ARRAY_MAX_DIMS];
        if ((rc = nf_model_output_shape(m, &in, 1, &ndim, osh, err)) != NF_OK) goto done;
        const int64_t rows = osh[0] * osh[1];
        const int C = (int) osh[2];
        const struct nf_npy * fx = &x.exp;
        if (!v->against_cpu && (fx->dtype != NF_NPY_F4 || fx->ndim != 3 || fx->shape[0] != osh[0] ||
                                fx->shape[1] != osh[1] || fx->shape[2] != osh[2])) {
            rc = nf__err_set(err, NF_ERR_SHAPE, "%s: expected_logits.npy must be float32 (%lld, %lld, %lld)",
                             v->dirs[k], (long long) osh[0], (long long) osh[1], (long long) osh[2]);
            goto done;
        }
        free(l_dev);
        free(l_ref);
        l_ref = NULL;
        l_dev = malloc((size_t) (rows * C) * sizeof(float));
        if (rm) l_ref = malloc((size_t) (rows * C) * sizeof(float));
        if (!l_dev || (rm && !l_ref)) {
            rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
            goto done;
        }
        nf__stage_log_clear(&dlog);
        nf__stage_log_clear(&rlog);
        rc = nf_model_forward(m, &in, 1, l_dev, err);
        if (rc == NF_OK && rm) rc = nf_model_forward(rm, &in, 1, l_ref, err);
        if (rc != NF_OK) {
            nf__err_prefix(err, "case %s", c->name);
            goto done;
        }
        double thr_max = o->max_abs, thr_mean = o->mean_abs;
        const int bf16 = o->precision == NF_PRECISION_BF16_AUTOCAST;
        if (v->bf16_default) {
            const float * r = rm ? l_ref : fx->data;
            double S = 1.0;
            for (int64_t i = 0; i < rows * C; i++) S = fabs((double) r[i]) > S ? fabs((double) r[i]) : S;
            thr_max = (v->against_cpu ? 8.0 : 4.0) * NF_VSPT_BF16_U * S;
            thr_mean = (v->against_cpu ? 2.0 : 1.0) * NF_VSPT_BF16_U * S;
        }
        nf__vspt_compare(l_dev, rm ? l_ref : fx->data, rows, C, c);
        nf__vspt_buckets(m, &dlog, rm ? &rlog : NULL, &x.sel, &x.margin, c);
        c->inputs_identical = nf__vspt_inputs_identical(&dlog, &rlog, rm != NULL, &x);
        /* under bf16-autocast a splice class may differ where the logits do within the
         * bounds (two classes whose reference logits lie within twice the max bound):
         * counted, not a failure -- one further apart cannot differ without exceeding it */
        c->pass = c->finite && c->max_abs <= thr_max && c->mean_abs <= thr_mean &&
                  (bf16 || c->splice_agree == c->positions) && (bf16 || c->flips == 0) && c->inputs_identical;
        c->bisect[0] = '\0';
        if (rm && (o->bisect == 2 || (o->bisect == 1 && !c->pass))) {
            nf__vspt_bisect(m, &dlog, &rlog, o, c);
            if (o->stage_errors) nf__verify_stages_add(v, n_cases, m, &dlog, &rlog);
        }
        nf__vspt_print_case(f, c);
        if (bf16)
            fprintf(
                f,
                "  bf16 bounds for this case: max_abs<=%.3e mean_abs<=%.3e (bucket choices against %s: %lld of %lld "
                "differ; splice classes: %lld of %lld differ, within the logit bounds)\n",
                thr_max, thr_mean,
                rm            ? "the reference backend's"
                : c->sel_bf16 ? "upstream's autocast"
                              : "fp32's",
                (long long) (c->buckets - c->buckets_agree), (long long) c->buckets,
                (long long) (c->positions - c->splice_agree), (long long) c->positions);
        n_cases++;
    }
    for (int i = 0; i < n_cases; i++) v->failed += !cases[i].pass;
    nf__vspt_summary(f, v, cases, n_cases, v->failed);
    v->json = nf__vspt_json(v, cases, n_cases, v->failed);
done:
    nf__stage_log_free(&dlog);
    nf__stage_log_free(&rlog);
    nf__vspt_in_clear(&x);
    free(l_dev);
    free(l_ref);
    free(ids);
    free(cases);
    return rc;
}

const struct nf_verify_i nf__spt_verify = {
    .max_abs = 1e-4,
    .mean_abs = 1e-5,
    .seeds = nf__vspt_seeds,
    .n_seeds = (int) (sizeof(nf__vspt_seeds) / sizeof(nf__vspt_seeds[0])),
    .max_seeds = NF_VSPT_MAX_SEEDS,
    .check_opts = nf__vspt_check_opts,
    .prepare = nf__vspt_prepare,
    .check_output = nf__vspt_check_output,
    .run = nf__vspt_run,
};
