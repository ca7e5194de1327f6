/* cmd-verify-spt.c -- `nofall verify` on a SpTransformer model: a device
 * against the cpu backend (seeded sequences: per seed the 128-nt seeds'
 * case and --samples more of varied length) or against stored upstream
 * outputs (a fixture directory: tokens.npy, expected_logits.npy and, when
 * present, expected_buckets.npy / expected_bucket_margin.npy).
 *
 * Per case: max/mean |logit difference| against thresholds (default 1e-4 /
 * 1e-5), the splice class (argmax over channels 0..2) at every position,
 * the top-1 bucket choice of every sinkhorn head, query bucket and layer
 * (a discrete choice: a flip is reported as a flip; one where the
 * reference's top-two probabilities are within 1e-6 is a near-tie, counted
 * apart and not a failure), and whether both sides read byte-identical
 * one-hot inputs. --bisect names the first stage (README "SpTransformer:
 * verify") where the two sides part. */
#include "cli.h"
#include "nofall-genomics.h"
#include "opts.h"
#include "io/nf-io.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define NF_VSPT_MAX_SEEDS 64
#define NF_VSPT_NEAR_TIE  1e-6

struct nf_vspt_opts {
    const char *model, *ref_model, *device, *against, *json;
    uint64_t seeds[NF_VSPT_MAX_SEEDS];
    int n_seeds, samples, precision, bisect;
    double max_abs, mean_abs;
};

/* every stage of one forward: name + a host copy */
struct nf_vspt_stage {
    char name[64];
    int ndim;
    int64_t shape[4], n;
    float * data;
};
struct nf_vspt_log {
    struct nf_vspt_stage * s;
    int n, cap, all;
};

static int nf_vspt_keep(void * user, const char * stage, const float * data, int ndim, const int64_t * shape) {
    struct nf_vspt_log * log = user;
    const char * dot = strrchr(stage, '.');
    const int wanted = log->all || strncmp(stage, "inputs.", 7) == 0 ||
                       (dot && (strcmp(dot, ".buckets") == 0 || strcmp(dot, ".bucket_prob") == 0));
    if (!wanted) return 0;
    if (log->n == log->cap) {
        const int cap = log->cap ? 2 * log->cap : 64;
        struct nf_vspt_stage * s = realloc(log->s, (size_t) cap * sizeof(*s));
        if (!s) return 1;
        log->s = s;
        log->cap = cap;
    }
    struct nf_vspt_stage * r = &log->s[log->n];
    snprintf(r->name, sizeof(r->name), "%s", stage);
    r->ndim = ndim;
    r->n = 1;
    for (int i = 0; i < ndim && i < 4; i++) r->n *= (r->shape[i] = shape[i]);
    r->data = malloc((size_t) r->n * sizeof(float));
    if (!r->data) return 1;
    memcpy(r->data, data, (size_t) r->n * sizeof(float));
    log->n++;
    return 0;
}

static void nf_vspt_log_clear(struct nf_vspt_log * log) {
    for (int i = 0; i < log->n; i++) free(log->s[i].data);
    log->n = 0;
}

static const struct nf_vspt_stage * nf_vspt_find(const struct nf_vspt_log * log, const char * name) {
    for (int i = 0; i < log->n; i++)
        if (strcmp(log->s[i].name, name) == 0) return &log->s[i];
    return NULL;
}

struct nf_vspt_case {
    char name[64];
    int64_t B, L;
    double max_abs, mean_abs;
    int64_t positions, splice_agree;
    int64_t buckets, buckets_agree, tie_flips, flips;
    double min_margin;
    int finite, inputs_identical, have_buckets, pass;
    char bisect[64];
};

/* bucket choices of both sides: ours from the stage log, the reference's
 * either from its log or from the fixture (layout (B, layers, heads, nb)) */
static void nf_vspt_buckets(const nf_model * m, const struct nf_vspt_log * dev, const struct nf_vspt_log * ref,
                            const struct nf_npy * fx_sel, const struct nf_npy * fx_margin, struct nf_vspt_case * c) {
    c->min_margin = 1.0;
    char name[64];
    int layers = 0;
    for (int i = 0; nf_model_stage_name(m, i, name, sizeof(name)); i++)
        if (strstr(name, ".buckets")) layers++;
    for (int l = 0; l < layers; l++) {
        snprintf(name, sizeof(name), "layers.%d.buckets", l);
        const struct nf_vspt_stage * d = nf_vspt_find(dev, name);
        const struct nf_vspt_stage *r = ref ? nf_vspt_find(ref, name) : NULL, *rp = NULL;
        snprintf(name, sizeof(name), "layers.%d.bucket_prob", l);
        if (ref) rp = nf_vspt_find(ref, name);
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

static void nf_vspt_bisect(const nf_model * m, const struct nf_vspt_log * dev, const struct nf_vspt_log * ref,
                           const struct nf_vspt_opts * o, struct nf_vspt_case * c) {
    snprintf(c->bisect, sizeof(c->bisect), "none");
    char name[64];
    for (int i = 0; nf_model_stage_name(m, i, name, sizeof(name)); i++) {
        const struct nf_vspt_stage *a = nf_vspt_find(dev, name), *b = nf_vspt_find(ref, name);
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

static int nf_vspt_parse(int argc, char ** argv, struct nf_vspt_opts * o) {
    struct nf_cli_opts v;
    memset(o, 0, sizeof(*o));
    if (!nf_cli_opts_parse(NF_M(VERIFY_SPT), argc, argv, 1, NULL, &v)) return 0;
    o->model = nf_cli_opt_str(&v, NF_O_MODEL, NULL);
    o->ref_model = nf_cli_opt_str(&v, NF_O_REFERENCE_MODEL, NULL);
    o->device = nf_cli_opt_str(&v, NF_O_DEVICE, NULL);
    o->against = nf_cli_opt_str(&v, NF_O_AGAINST, NULL);
    o->json = nf_cli_opt_str(&v, NF_O_JSON, NULL);
    o->samples = (int) v.i[NF_O_SAMPLES];
    o->max_abs = v.set[NF_O_MAX_ABS] ? v.d[NF_O_MAX_ABS] : 1e-4;
    o->mean_abs = v.set[NF_O_MEAN_ABS] ? v.d[NF_O_MEAN_ABS] : 1e-5;
    /* --bisect, --bisect=always: the last one given */
    o->bisect = v.set[NF_O_BISECT_ALWAYS] && v.pos[NF_O_BISECT_ALWAYS] > v.pos[NF_O_BISECT] ? 2 : v.set[NF_O_BISECT];
    nf_cli_parse_precision(nf_cli_opt_str(&v, NF_O_PRECISION, "exact"), &o->precision);
    static const uint64_t def_seeds[] = {42, 100, 101};
    o->n_seeds = 3;
    memcpy(o->seeds, def_seeds, sizeof(def_seeds));
    if (v.set[NF_O_SEEDS]) {
        o->n_seeds = nf_cli_parse_u64_list(v.s[NF_O_SEEDS], (uint64_t) NF_CLI_SEED_MAX, o->seeds, NF_VSPT_MAX_SEEDS);
        if (o->n_seeds < 1) {
            fprintf(stderr, "error: --seeds takes a comma list of 1..%d integers\n", NF_VSPT_MAX_SEEDS);
            return 0;
        }
    }
    if (!o->model || !o->device || !o->against) {
        fprintf(stderr, "error: verify needs --model M --device DEV --against cpu|FIXTURE_DIR\n");
        return 0;
    }
    return 1;
}

static void nf_vspt_compare(const float * a, const float * b, int64_t rows, int C, struct nf_vspt_case * c) {
    double mx = 0, sum = 0;
    c->finite = 1;
    c->positions = rows;
    for (int64_t i = 0; i < rows * C; i++) {
        if (!isfinite(a[i]) || !isfinite(b[i])) c->finite = 0;
        const double d = fabs((double) a[i] - (double) b[i]);
        mx = d > mx ? d : mx;
        sum += d;
    }
    for (int64_t r = 0; r < rows; r++) c->splice_agree += nf_cli_argmax(a + r * C, 3) == nf_cli_argmax(b + r * C, 3);
    c->max_abs = mx;
    c->mean_abs = rows ? sum / (double) (rows * C) : 0;
}

static int nf_vspt_main(const struct nf_vspt_opts * o, int * n_failed, nf_err * err) {
    const int against_cpu = strcmp(o->against, "cpu") == 0;
    nf_backend *be = NULL, *rbe = NULL;
    nf_model *m = NULL, *rm = NULL;
    char ** dirs = NULL;
    int n_dirs = 0, rc, n_cases = 0;
    struct nf_vspt_case * cases = NULL;
    struct nf_vspt_log dlog = {0}, rlog = {0};
    nf_seq s = {0};
    float *l_dev = NULL, *l_ref = NULL, *oh = NULL;
    int64_t * ids = NULL;
    struct nf_npy fx_sel = {0}, fx_margin = {0}, fx_exp = {0};
    struct nf_cli_outfile jf;
    memset(&jf, 0, sizeof(jf));
    jf.fd = jf.slot = -1;
    if (!against_cpu && (rc = nf_cli_case_dirs(o->against, (const char * const[]){"tokens.npy", "expected_logits.npy"},
                                               2, &dirs, &n_dirs, err)) != NF_OK)
        goto done;
    if (!against_cpu && o->bisect) {
        rc = nf__err_set(err, NF_ERR_ARG, "--bisect needs --against cpu (fixtures hold no intermediate stages)");
        goto done;
    }
    if (o->json) {
        if (nf_cli_same_file(o->json, o->model)) {
            rc = nf__err_set(err, NF_ERR_ARG, "--json is the model: refused (it would be overwritten)");
            goto done;
        }
        if ((rc = nf_cli_outfile_open(&jf, o->json, "--json", err)) != NF_OK) goto done;
    }
    if ((rc = nf_cli_backend_init(o->device, o->precision, &be, err)) != NF_OK) goto done;
    if ((rc = nf_model_load(be, o->model, &m, err)) != NF_OK) goto done;
    if (against_cpu) {
        if ((rc = nf_cli_backend_init("cpu", NF_PRECISION_EXACT, &rbe, err)) != NF_OK) goto done;
        if ((rc = nf_model_load(rbe, o->ref_model ? o->ref_model : o->model, &rm, err)) != NF_OK) goto done;
        if (!nf_cli_same_config(m, rm)) {
            rc = nf__err_set(err, NF_ERR_ARG, "--reference-model has a different config");
            goto done;
        }
    }
    int64_t context = 0, window = 0;
    struct nf_config_item ci;
    for (int i = 0; nf_model_config_item(m, i, &ci); i++) {
        if (strcmp(ci.key, "context_len") == 0) context = ci.num;
        if (strcmp(ci.key, "max_seq_len") == 0) window = ci.num;
    }
    dlog.all = rlog.all = o->bisect != 0;
    nf_model_set_stage_callback(m, o->bisect ? NF_STAGES_ALL : NF_STAGES_INPUTS, nf_vspt_keep, &dlog);
    if (rm) nf_model_set_stage_callback(rm, o->bisect ? NF_STAGES_ALL : NF_STAGES_INPUTS, nf_vspt_keep, &rlog);
    const int total = against_cpu ? o->n_seeds * (1 + o->samples) : n_dirs;
    cases = calloc((size_t) (total ? total : 1), sizeof(*cases));
    if (!cases) {
        rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
        goto done;
    }
    printf("verify: %s (%s) against %s; thresholds max_abs<=%.1e mean_abs<=%.1e, identical splice classes and "
           "bucket choices (near-ties, reference margin < %.0e, reported apart); precision %s\n",
           nf_backend_name(be), nf_backend_description(be), against_cpu ? "cpu (fp32 reference backend)" : o->against,
           o->max_abs, o->mean_abs, NF_VSPT_NEAR_TIE, nf_precision_name(o->precision));
    for (int k = 0; k < total; k++) {
        struct nf_vspt_case * c = &cases[k];
        nf_seq_free(&s);
        nf__npy_free(&fx_sel);
        nf__npy_free(&fx_margin);
        nf__npy_free(&fx_exp);
        if (against_cpu) {
            const uint64_t seed = o->seeds[k / (1 + o->samples)];
            const int sample = k % (1 + o->samples);
            int64_t n = 128;
            uint64_t sd = seed;
            if (sample > 0) { /* varied lengths over the whole valid range */
                sd = seed * 1000003ull + (uint64_t) sample;
                n = 1 + (int64_t) ((sd * 0x9E3779B97F4A7C15ull >> 11) % (uint64_t) window);
                snprintf(c->name, sizeof(c->name), "seed=%llu/sample=%d", (unsigned long long) seed, sample);
            } else {
                snprintf(c->name, sizeof(c->name), "seed=%llu", (unsigned long long) seed);
            }
            rc = nf_seq_seeded(&s, sd, n, context, err);
        } else {
            char p[4096];
            const char * base = strrchr(dirs[k], '/');
            snprintf(c->name, sizeof(c->name), "%s", base ? base + 1 : dirs[k]);
            nf__path_join(p, sizeof(p), dirs[k], "tokens.npy");
            rc = nf_seq_npy(&s, p, 0, context, err);
            nf__path_join(p, sizeof(p), dirs[k], "expected_logits.npy");
            if (rc == NF_OK) rc = nf__npy_read(p, &fx_exp, err);
            nf_err ignore = {0};
            nf__path_join(p, sizeof(p), dirs[k], "expected_buckets.npy");
            if (rc == NF_OK && nf__npy_read(p, &fx_sel, &ignore) == NF_OK && fx_sel.dtype != NF_NPY_I1)
                nf__npy_free(&fx_sel);
            nf__path_join(p, sizeof(p), dirs[k], "expected_bucket_margin.npy");
            if (rc == NF_OK && nf__npy_read(p, &fx_margin, &ignore) == NF_OK && fx_margin.dtype != NF_NPY_F4)
                nf__npy_free(&fx_margin);
        }
        if (rc != NF_OK) goto done;
        c->B = s.B;
        c->L = s.L;
        free(ids);
        ids = malloc((size_t) (s.B * s.L) * sizeof(int64_t));
        if (!ids) {
            rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
            goto done;
        }
        for (int64_t i = 0; i < s.B * s.L; i++) ids[i] = s.ids[i];
        struct nf_array in = {"tokens", NF_ARRAY_I64, 2, {s.B, s.L}, ids};
        int ndim;
        int64_t osh[NF_ARRAY_MAX_DIMS];
        if ((rc = nf_model_output_shape(m, &in, 1, &ndim, osh, err)) != NF_OK) goto done;
        const int64_t rows = osh[0] * osh[1];
        const int C = (int) osh[2];
        if (!against_cpu && (fx_exp.dtype != NF_NPY_F4 || fx_exp.ndim != 3 || fx_exp.shape[0] != osh[0] ||
                             fx_exp.shape[1] != osh[1] || fx_exp.shape[2] != osh[2])) {
            rc = nf__err_set(err, NF_ERR_SHAPE, "%s: expected_logits.npy must be float32 (%lld, %lld, %lld)", dirs[k],
                             (long long) osh[0], (long long) osh[1], (long long) osh[2]);
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
        nf_vspt_log_clear(&dlog);
        nf_vspt_log_clear(&rlog);
        rc = nf_model_forward(m, &in, 1, l_dev, err);
        if (rc == NF_OK && rm) rc = nf_model_forward(rm, &in, 1, l_ref, err);
        if (rc != NF_OK) {
            nf__err_prefix(err, "case %s", c->name);
            goto done;
        }
        nf_vspt_compare(l_dev, rm ? l_ref : fx_exp.data, rows, C, c);
        nf_vspt_buckets(m, &dlog, rm ? &rlog : NULL, &fx_sel, &fx_margin, c);
        /* the one-hot each side computed on, read back from its device */
        const struct nf_vspt_stage *d1 = nf_vspt_find(&dlog, "inputs.one_hot"),
                                   *r1 = rm ? nf_vspt_find(&rlog, "inputs.one_hot") : NULL;
        if (rm) {
            c->inputs_identical = d1 && r1 && d1->n == r1->n && memcmp(d1->data, r1->data, (size_t) d1->n * 4) == 0;
        } else {
            free(oh);
            oh = calloc((size_t) (s.B * s.L * 4), sizeof(float));
            if (oh)
                for (int64_t i = 0; i < s.B * s.L; i++)
                    if (s.ids[i] < 4) oh[i * 4 + s.ids[i]] = 1.0f;
            c->inputs_identical = oh && d1 && d1->n == s.B * s.L * 4 && memcmp(d1->data, oh, (size_t) d1->n * 4) == 0;
        }
        c->pass = c->finite && c->max_abs <= o->max_abs && c->mean_abs <= o->mean_abs &&
                  c->splice_agree == c->positions && c->flips == 0 && c->inputs_identical;
        c->bisect[0] = '\0';
        if (rm && (o->bisect == 2 || (o->bisect == 1 && !c->pass))) nf_vspt_bisect(m, &dlog, &rlog, o, c);
        char bk[96] = "buckets=n/a";
        if (c->have_buckets)
            snprintf(bk, sizeof(bk), "buckets_agree=%lld/%lld near_tie_flips=%lld min_margin=%.2e",
                     (long long) c->buckets_agree, (long long) c->buckets, (long long) c->tie_flips, c->min_margin);
        printf("case %-22s B=%lld L=%-5lld max_abs=%.3e mean_abs=%.3e splice_agree=%lld/%lld %s inputs_identical=%s "
               "%s\n",
               c->name, (long long) c->B, (long long) c->L, c->max_abs, c->mean_abs, (long long) c->splice_agree,
               (long long) c->positions, bk, c->inputs_identical ? "true" : "false", c->pass ? "PASS" : "FAIL");
        if (c->bisect[0]) {
            if (strcmp(c->bisect, "none") == 0)
                printf("  bisect: no stage exceeds the thresholds\n");
            else
                printf("  bisect: first stage over threshold: %s\n", c->bisect);
        }
        n_cases++;
    }
    int failed = 0, all_inputs = 1, worst = 0;
    int64_t bt = 0, ba = 0, ties = 0;
    double worst_mean = 0;
    for (int i = 0; i < n_cases; i++) {
        failed += !cases[i].pass;
        all_inputs &= cases[i].inputs_identical;
        if (cases[i].max_abs > cases[worst].max_abs) worst = i;
        worst_mean = cases[i].mean_abs > worst_mean ? cases[i].mean_abs : worst_mean;
        bt += cases[i].buckets;
        ba += cases[i].buckets_agree;
        ties += cases[i].tie_flips;
    }
    *n_failed = failed;
    printf("VERIFY_DEVICE=%s\nVERIFY_AGAINST=%s\nVERIFY_CASES=%d\nVERIFY_FAILED=%d\n", nf_backend_name(be), o->against,
           n_cases, failed);
    printf("WORST_CASE=%s\nWORST_MAX_ABS=%.3e\nWORST_MEAN_ABS=%.3e\n", n_cases ? cases[worst].name : "none",
           n_cases ? cases[worst].max_abs : 0.0, worst_mean);
    printf("BUCKETS_AGREE=%lld/%lld\nBUCKET_NEAR_TIE_FLIPS=%lld\n", (long long) ba, (long long) bt, (long long) ties);
    printf("INPUTS_IDENTICAL=%s\n", all_inputs ? "true" : "false");
    printf("PRECISION=%s\nPRECISION_DETAIL=%s\n", nf_precision_name(nf_backend_precision(be)),
           nf_backend_precision_detail(be));
    printf("RESULT=%s\n", failed ? "FAIL" : "PASS");
    if (o->json) {
        cJSON * doc = cJSON_CreateObject();
        cJSON_AddStringToObject(doc, "model_type", "sptransformer");
        cJSON_AddStringToObject(doc, "device", nf_backend_name(be));
        cJSON_AddStringToObject(doc, "device_description", nf_backend_description(be));
        cJSON_AddStringToObject(doc, "against", o->against);
        cJSON_AddStringToObject(doc, "precision", nf_precision_name(nf_backend_precision(be)));
        cJSON_AddNumberToObject(doc, "max_abs_threshold", o->max_abs);
        cJSON_AddNumberToObject(doc, "mean_abs_threshold", o->mean_abs);
        cJSON_AddNumberToObject(doc, "near_tie_margin", NF_VSPT_NEAR_TIE);
        cJSON * arr = cJSON_AddArrayToObject(doc, "cases");
        for (int i = 0; i < n_cases; i++) {
            const struct nf_vspt_case * c = &cases[i];
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
        FILE * f = nf_cli_outfile_fp(&jf);
        rc = f && nf__json_write_fp(f, doc) ? NF_OK : nf__err_set(err, NF_ERR_IO, "%s: write failed", o->json);
        cJSON_Delete(doc);
        if (rc != NF_OK) goto done;
    }
    if (!nf_cli_stdout_ok()) {
        rc = nf__err_set(err, NF_ERR_IO, "standard output: the report could not be written");
        goto done;
    }
    if (o->json) rc = nf_cli_outfile_commit(&jf, err);
done:
    nf_cli_outfile_abort(&jf);
    nf_vspt_log_clear(&dlog);
    free(dlog.s);
    nf_vspt_log_clear(&rlog);
    free(rlog.s);
    nf_seq_free(&s);
    nf__npy_free(&fx_sel);
    nf__npy_free(&fx_margin);
    nf__npy_free(&fx_exp);
    free(l_dev);
    free(l_ref);
    free(oh);
    free(ids);
    for (int i = 0; i < n_dirs; i++) free(dirs[i]);
    free(dirs);
    free(cases);
    nf_model_free(m);
    nf_model_free(rm);
    nf_backend_free(be);
    nf_backend_free(rbe);
    return rc;
}

int nf_cmd_verify_spt(int argc, char ** argv) {
    struct nf_vspt_opts o;
    if (!nf_vspt_parse(argc, argv, &o)) return 2;
    nf_cli_signals_install();
    nf_err err = {0};
    int failed = 0;
    int rc = nf_vspt_main(&o, &failed, &err);
    if (rc != NF_OK) {
        nf_cli_print_error(&err, rc);
        return 1;
    }
    return failed ? 3 : 0;
}
