/* cmd-verify.c -- `nofall verify`: a device against the CPU backend or stored
 * expected logits, per case max/mean abs error and class agreement against
 * thresholds, and (--bisect) the first stage where the two sides part. */
#include "cli.h"
#include "opts.h"
#include "io/nf-io.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define NF_VERIFY_MAX_SEEDS 256

struct nf_verify_opts {
    const char *model, *ref_model, *device, *against, *json, *trace;
    uint64_t seeds[NF_VERIFY_MAX_SEEDS];
    int n_seeds, samples, precision;
    double max_abs, mean_abs;
    int bisect; /* 0 off, 1 on failure, 2 always */
};

/* One stage of one side: name + a host copy of its array. */
struct nf_stage_rec {
    char name[64];
    float * data;
    int64_t n;
};
struct nf_stage_log {
    struct nf_stage_rec * r;
    int n, cap;
    int keep_all;
};

static int nf_stage_copy(void * user, const char * stage, const float * data, int ndim, const int64_t * shape) {
    struct nf_stage_log * log = user;
    if (!log->keep_all && strncmp(stage, "inputs.", 7) != 0 && strcmp(stage, "head") != 0) return 0;
    if (log->n == log->cap) {
        int cap = log->cap ? log->cap * 2 : 64;
        struct nf_stage_rec * r = realloc(log->r, (size_t) cap * sizeof(*r));
        if (!r) return 1;
        log->r = r;
        log->cap = cap;
    }
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) n *= shape[d];
    struct nf_stage_rec * r = &log->r[log->n];
    memset(r, 0, sizeof(*r));
    snprintf(r->name, sizeof(r->name), "%s", stage);
    if (n > 0) {
        r->data = malloc((size_t) n * sizeof(float));
        if (!r->data) return 1;
        memcpy(r->data, data, (size_t) n * sizeof(float));
    }
    r->n = n;
    log->n++;
    return 0;
}

static void nf_stage_log_clear(struct nf_stage_log * log) {
    for (int i = 0; i < log->n; i++) free(log->r[i].data);
    log->n = 0;
}

static const struct nf_stage_rec * nf_stage_find(const struct nf_stage_log * log, const char * name) {
    for (int i = 0; i < log->n; i++)
        if (strcmp(log->r[i].name, name) == 0) return &log->r[i];
    return NULL;
}

struct nf_verify_case {
    char name[256];
    int64_t ns, nq, nf;
    struct nf_cli_diff d;
    int pass, inputs_identical;
    char bisect_stage[64];
    double bisect_max, bisect_mean;
    int bisect_ran;
};

static int nf_verify_parse(int argc, char ** argv, struct nf_verify_opts * o) {
    struct nf_cli_opts v;
    memset(o, 0, sizeof(*o));
    if (!nf_cli_opts_parse(NF_M(VERIFY_MITRA), argc, argv, 1, NULL, &v)) return 0;
    o->model = nf_cli_opt_str(&v, NF_O_MODEL, NULL);
    o->ref_model = nf_cli_opt_str(&v, NF_O_REFERENCE_MODEL, NULL);
    o->device = nf_cli_opt_str(&v, NF_O_DEVICE, NULL);
    o->against = nf_cli_opt_str(&v, NF_O_AGAINST, NULL);
    o->json = nf_cli_opt_str(&v, NF_O_JSON, NULL);
    o->trace = nf_cli_opt_str(&v, NF_O_TRACE, NULL);
    o->samples = (int) v.i[NF_O_SAMPLES];
    o->max_abs = v.set[NF_O_MAX_ABS] ? v.d[NF_O_MAX_ABS] : 1e-3;
    o->mean_abs = v.set[NF_O_MEAN_ABS] ? v.d[NF_O_MEAN_ABS] : 1e-4;
    /* --bisect, --bisect=always: the last one given */
    o->bisect = v.set[NF_O_BISECT_ALWAYS] && v.pos[NF_O_BISECT_ALWAYS] > v.pos[NF_O_BISECT] ? 2 : v.set[NF_O_BISECT];
    nf_cli_parse_precision(nf_cli_opt_str(&v, NF_O_PRECISION, "exact"), &o->precision);
    static const uint64_t def_seeds[] = {42, 100, 101, 102, 105, 110, 111};
    o->n_seeds = 7;
    memcpy(o->seeds, def_seeds, sizeof(def_seeds));
    if (v.set[NF_O_SEEDS]) {
        const char * s = v.s[NF_O_SEEDS];
        o->n_seeds = nf_cli_parse_u64_list(s, (uint64_t) NF_CLI_SEED_MAX, o->seeds, NF_VERIFY_MAX_SEEDS);
        if (o->n_seeds < 1) {
            char e[256];
            fprintf(stderr, "error: --seeds takes a comma list of 1..%d integers in [0, %lld], got '%s'\n",
                    NF_VERIFY_MAX_SEEDS, (long long) NF_CLI_SEED_MAX, nf__esc(e, sizeof(e), s));
            return 0;
        }
    }
    if (!o->model || !o->device || !o->against) {
        fprintf(stderr, "error: verify needs --model DIR --device DEV --against cpu|FIXTURE_DIR\n");
        return 0;
    }
    if (!o->model[0]) {
        fprintf(stderr, "error: --model needs a directory, got ''\n");
        return 0;
    }
    if (o->json && o->trace && (strcmp(o->json, o->trace) == 0 || nf_cli_same_file(o->json, o->trace))) {
        fprintf(stderr, "error: --json and --trace name the same file\n");
        return 0;
    }
    return 1;
}

/* An output file of verify must not be a file the run reads: the models'
 * config.json / model.safetensors, a fixture's files. */
static int nf_verify_check_output(const struct nf_verify_opts * o, const char * flag, const char * out, char ** dirs,
                                  int n_dirs, nf_err * err) {
    static const char * const model_files[] = {"config.json", "model.safetensors"};
    static const char * const case_files[] = {"support_x.npy", "support_y.npy", "query_x.npy", "expected_logits.npy"};
    char p[4096], e[1024];
    nf__esc(e, sizeof(e), out);
    const char * models[2] = {o->model, o->ref_model};
    for (int m = 0; m < 2; m++) {
        for (int i = 0; models[m] && i < 2; i++) {
            nf__path_join(p, sizeof(p), models[m], model_files[i]);
            if (nf_cli_same_file(out, p))
                return nf__err_set(err, NF_ERR_ARG, "%s %s is the %smodel's %s: refused (it would be overwritten)",
                                   flag, e, m ? "reference " : "", model_files[i]);
        }
    }
    for (int d = 0; d < n_dirs; d++) {
        for (int i = 0; i < 4; i++) {
            nf__path_join(p, sizeof(p), dirs[d], case_files[i]);
            if (nf_cli_same_file(out, p))
                return nf__err_set(err, NF_ERR_ARG, "%s %s is the fixture file %s: refused (it would be overwritten)",
                                   flag, e, p);
        }
    }
    return NF_OK;
}

/* Compare the two sides' stages, in the model's stage order; the first one
 * over a threshold. */
static void nf_verify_bisect(const nf_model * m, const struct nf_stage_log * dev, const struct nf_stage_log * ref,
                             const struct nf_verify_opts * o, struct nf_verify_case * c) {
    c->bisect_ran = 1;
    snprintf(c->bisect_stage, sizeof(c->bisect_stage), "none");
    char name[64];
    for (int i = 0; nf_model_stage_name(m, i, name, sizeof(name)); i++) {
        if (strncmp(name, "inputs.", 7) == 0) continue;
        const struct nf_stage_rec *a = nf_stage_find(dev, name), *b = nf_stage_find(ref, name);
        if (!a || !b || b->n != a->n) continue;
        struct nf_cli_diff d;
        nf_cli_diff(a->data, b->data, a->n, 1, &d);
        if (!(d.max_abs <= o->max_abs) || !(d.mean_abs <= o->mean_abs)) {
            snprintf(c->bisect_stage, sizeof(c->bisect_stage), "%s", a->name);
            c->bisect_max = d.max_abs;
            c->bisect_mean = d.mean_abs;
            return;
        }
    }
}

/* The input a stage "inputs.<name>" reads back, or NULL */
static const struct nf_array * nf_verify_stage_input(const char * stage, const struct nf_array * in, int n_in) {
    if (strncmp(stage, "inputs.", 7) != 0) return NULL;
    for (int i = 0; i < n_in; i++)
        if (strcmp(in[i].name, stage + 7) == 0 && in[i].dtype == NF_ARRAY_F32) return &in[i];
    return NULL;
}

/* Every input the model reads back ("inputs.<name>" stages) is in log and
 * equals the given input, byte for byte. */
static int nf_verify_inputs_identical(const nf_model * m, const struct nf_stage_log * log, const struct nf_array * in,
                                      int n_in) {
    int seen = 0;
    char name[64];
    for (int s = 0; nf_model_stage_name(m, s, name, sizeof(name)); s++) {
        const struct nf_array * a = nf_verify_stage_input(name, in, n_in);
        if (!a) continue;
        const struct nf_stage_rec * r = nf_stage_find(log, name);
        int64_t n = 1;
        for (int d = 0; d < a->ndim; d++) n *= a->shape[d];
        if (!r || r->n != n || memcmp(r->data, a->data, (size_t) n * sizeof(float)) != 0) return 0;
        seen++;
    }
    return seen > 0;
}

/* the inputs with the data the reference side read back from its device */
static int nf_verify_inputs_of(const nf_model * m, const struct nf_stage_log * log, const struct nf_array * in,
                               int n_in, struct nf_array * out) {
    for (int i = 0; i < n_in; i++) out[i] = in[i];
    char name[64];
    for (int s = 0; nf_model_stage_name(m, s, name, sizeof(name)); s++) {
        const struct nf_array * a = nf_verify_stage_input(name, in, n_in);
        if (!a) continue;
        const struct nf_stage_rec * r = nf_stage_find(log, name);
        if (!r) return 0;
        out[a - in].data = r->data;
    }
    return 1;
}

static void nf_verify_print_case(const struct nf_verify_case * c, int width) {
    printf(
        "case %-28s n_s=%-5lld n_q=%-5lld F=%-4lld max_abs=%.3e mean_abs=%.3e classes_agree=%lld/%lld inputs_identical=%s %s\n",
        c->name, (long long) c->ns, (long long) c->nq, (long long) c->nf, c->d.max_abs, c->d.mean_abs,
        (long long) (width > 1 ? c->d.n_rows - c->d.class_disagree : c->d.n_rows), (long long) c->d.n_rows,
        c->inputs_identical ? "true" : "false", c->pass ? "PASS" : "FAIL");
    if (c->bisect_ran) {
        if (strcmp(c->bisect_stage, "none") == 0)
            printf("  bisect: no stage exceeds the thresholds\n");
        else
            printf("  bisect: first stage over threshold: %s (max_abs=%.3e mean_abs=%.3e)\n", c->bisect_stage,
                   c->bisect_max, c->bisect_mean);
    }
}

static int nf_verify_main(const struct nf_verify_opts * o, int * n_failed, nf_err * err) {
    const int against_cpu = strcmp(o->against, "cpu") == 0;
    nf_backend *be = NULL, *rbe = NULL;
    nf_model *m = NULL, *rm = NULL;
    char ** dirs = NULL;
    int n_dirs = 0, rc;
    struct nf_verify_case * cases = NULL;
    int n_cases = 0;
    struct nf_stage_log dlog = {0}, rlog = {0};
    float *l_dev = NULL, *l_ref = NULL;

    struct nf_cli_outfile jf, tf;
    memset(&jf, 0, sizeof(jf));
    jf.fd = jf.slot = -1;
    memset(&tf, 0, sizeof(tf));
    tf.fd = tf.slot = -1;
    /* the outputs: not what this run reads, and writable, before any work */
    if (!against_cpu && (rc = nf_cli_case_dirs(o->against, (const char * const[]){"expected_logits.npy"}, 1, &dirs,
                                               &n_dirs, err)) != NF_OK)
        goto done;
    for (int k = 0; k < 2; k++) {
        const char *out = k ? o->trace : o->json, *flag = k ? "--trace" : "--json";
        if (!out) continue;
        if ((rc = nf_verify_check_output(o, flag, out, dirs, n_dirs, err)) != NF_OK) goto done;
        if ((rc = nf_cli_outfile_open(k ? &tf : &jf, out, flag, err)) != NF_OK) goto done;
    }
    if ((rc = nf_cli_backend_init(o->device, o->precision, &be, err)) != NF_OK) goto done;
    nf_trace_reset(be, o->trace ? NF_TRACE_TIMED : NF_TRACE_TOTALS);
    if ((rc = nf_model_load(be, o->model, &m, err)) != NF_OK) goto done;
    int cls = 0, width = 0;
    int64_t n_classes = 0;
    if ((rc = nf_cli_table_model(m, &cls, &n_classes, err)) != NF_OK) goto done;
    if (against_cpu) {
        if ((rc = nf_cli_backend_init("cpu", NF_PRECISION_EXACT, &rbe, err)) != NF_OK) goto done;
        if ((rc = nf_model_load(rbe, o->ref_model ? o->ref_model : o->model, &rm, err)) != NF_OK) goto done;
        if (!nf_cli_same_config(m, rm)) {
            rc = nf__err_set(err, NF_ERR_ARG, "--reference-model has a different config");
            goto done;
        }
    } else {
        if (o->bisect) {
            rc = nf__err_set(err, NF_ERR_ARG, "--bisect needs --against cpu (fixtures hold no intermediate stages)");
            goto done;
        }
    }
    dlog.keep_all = rlog.keep_all = o->bisect != 0;
    nf_model_set_stage_callback(m, o->bisect ? NF_STAGES_ALL : NF_STAGES_INPUTS, nf_stage_copy, &dlog);
    if (rm) nf_model_set_stage_callback(rm, o->bisect ? NF_STAGES_ALL : NF_STAGES_INPUTS, nf_stage_copy, &rlog);

    const int total = against_cpu ? o->n_seeds * (1 + o->samples) : n_dirs;
    cases = calloc((size_t) total, sizeof(*cases));
    if (!cases) {
        rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
        goto done;
    }
    printf("verify: %s (%s) against %s; thresholds max_abs<=%.1e mean_abs<=%.1e, identical classes; precision %s\n",
           nf_backend_name(be), nf_backend_description(be), against_cpu ? "cpu (fp32 reference backend)" : o->against,
           o->max_abs, o->mean_abs, nf_precision_name(o->precision));
    if (!against_cpu && o->n_seeds) printf("verify: fixtures carry their own inputs; --seeds/--samples do not apply\n");

    for (int ci = 0; ci < total; ci++) {
        struct nf_verify_case * c = &cases[ci];
        struct nf_cli_table t = {0};
        float * expected = NULL;
        if (against_cpu) {
            const uint64_t seed = o->seeds[ci / (1 + o->samples)];
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
            rc = nf_cli_table_generate(s, ns, nq, nf, cls, cls ? (int) (n_classes < 10 ? n_classes : 10) : 0, &t, err);
        } else {
            char a[4096], b[4096], q[4096], e[4096];
            nf__path_join(a, sizeof(a), dirs[ci], "support_x.npy");
            nf__path_join(b, sizeof(b), dirs[ci], "support_y.npy");
            nf__path_join(q, sizeof(q), dirs[ci], "query_x.npy");
            nf__path_join(e, sizeof(e), dirs[ci], "expected_logits.npy");
            const char * base = strrchr(dirs[ci], '/');
            snprintf(c->name, sizeof(c->name), "%s", base ? base + 1 : dirs[ci]);
            rc = nf_cli_table_load(a, b, q, cls, &t, err);
            struct nf_npy ex = {0};
            int out_ndim = 0;
            int64_t out_shape[NF_ARRAY_MAX_DIMS];
            if (rc == NF_OK) rc = nf_cli_output_shape(m, &t, &out_ndim, out_shape, &width, err);
            if (rc == NF_OK) rc = nf__npy_read(e, &ex, err);
            if (rc == NF_OK) {
                int ok = ex.dtype == NF_NPY_F4 && ex.ndim == out_ndim;
                for (int d = 0; ok && d < out_ndim; d++) ok = ex.shape[d] == out_shape[d];
                if (!ok)
                    rc = nf__err_set(err, NF_ERR_SHAPE, "%s: expected float32 shape (%lld%s) for this model", e,
                                     (long long) t.n_query, width > 1 ? ", C" : ",");
                else {
                    expected = ex.data;
                    ex.data = NULL;
                }
            }
            nf__npy_free(&ex);
        }
        if (rc == NF_OK && !expected) {
            int out_ndim = 0;
            int64_t out_shape[NF_ARRAY_MAX_DIMS];
            rc = nf_cli_output_shape(m, &t, &out_ndim, out_shape, &width, err);
        }
        if (rc != NF_OK) {
            nf_cli_table_free(&t);
            free(expected);
            goto done;
        }
        c->ns = t.n_support;
        c->nq = t.n_query;
        c->nf = t.n_features;
        free(l_dev);
        free(l_ref);
        l_dev = malloc((size_t) (t.n_query * width) * sizeof(float));
        l_ref = expected ? expected : malloc((size_t) (t.n_query * width) * sizeof(float));
        if (!l_dev || !l_ref) {
            nf_cli_table_free(&t);
            rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
            goto done;
        }
        struct nf_array in[NF_CLI_TABLE_INPUTS];
        nf_cli_table_arrays(&t, in);
        nf_stage_log_clear(&dlog);
        nf_stage_log_clear(&rlog);
        rc = nf_model_forward(m, in, NF_CLI_TABLE_INPUTS, l_dev, err);
        if (rc == NF_OK && rm) rc = nf_model_forward(rm, in, NF_CLI_TABLE_INPUTS, l_ref, err);
        if (rc != NF_OK) {
            nf_cli_table_free(&t);
            nf__err_prefix(err, "case %s", c->name);
            goto done;
        }
        nf_cli_diff(l_dev, l_ref, t.n_query, width, &c->d);
        /* byte-identical inputs: each side's device copy, read back, against
         * the other side's (cpu reference) or against the fixture's file */
        if (rm) {
            struct nf_array rin[NF_CLI_TABLE_INPUTS];
            c->inputs_identical = nf_verify_inputs_of(rm, &rlog, in, NF_CLI_TABLE_INPUTS, rin) &&
                                  nf_verify_inputs_identical(m, &dlog, rin, NF_CLI_TABLE_INPUTS) &&
                                  nf_verify_inputs_identical(rm, &rlog, in, NF_CLI_TABLE_INPUTS);
        } else {
            c->inputs_identical = nf_verify_inputs_identical(m, &dlog, in, NF_CLI_TABLE_INPUTS);
        }
        c->pass = c->d.finite && c->d.max_abs <= o->max_abs && c->d.mean_abs <= o->mean_abs &&
                  c->d.class_disagree == 0 && c->inputs_identical;
        if (o->bisect == 2 || (o->bisect == 1 && !c->pass)) nf_verify_bisect(m, &dlog, &rlog, o, c);
        nf_verify_print_case(c, width);
        n_cases++;
        nf_cli_table_free(&t);
    }

    int failed = 0, all_inputs = 1, worst = 0;
    for (int i = 0; i < n_cases; i++) {
        failed += !cases[i].pass;
        all_inputs &= cases[i].inputs_identical;
        if (cases[i].d.max_abs > cases[worst].d.max_abs) worst = i;
    }
    double worst_mean = 0;
    for (int i = 0; i < n_cases; i++)
        if (cases[i].d.mean_abs > worst_mean) worst_mean = cases[i].d.mean_abs;
    *n_failed = failed;
    printf("VERIFY_DEVICE=%s\n", nf_backend_name(be));
    printf("VERIFY_AGAINST=%s\n", o->against);
    printf("VERIFY_CASES=%d\n", n_cases);
    printf("VERIFY_FAILED=%d\n", failed);
    printf("WORST_CASE=%s\n", n_cases ? cases[worst].name : "none");
    printf("WORST_MAX_ABS=%.3e\n", n_cases ? cases[worst].d.max_abs : 0.0);
    printf("WORST_MEAN_ABS=%.3e\n", worst_mean);
    printf("INPUTS_IDENTICAL=%s\n", all_inputs ? "true" : "false");
    printf("PRECISION=%s\n", nf_precision_name(nf_backend_precision(be)));
    printf("PRECISION_DETAIL=%s\n", nf_backend_precision_detail(be));
    printf("RESULT=%s\n", failed ? "FAIL" : "PASS");

    if (o->json) {
        cJSON * doc = cJSON_CreateObject();
        cJSON_AddStringToObject(doc, "device", nf_backend_name(be));
        cJSON_AddStringToObject(doc, "device_description", nf_backend_description(be));
        cJSON_AddStringToObject(doc, "against", o->against);
        cJSON_AddStringToObject(doc, "precision", nf_precision_name(nf_backend_precision(be)));
        cJSON_AddStringToObject(doc, "precision_detail", nf_backend_precision_detail(be));
        cJSON_AddNumberToObject(doc, "max_abs_threshold", o->max_abs);
        cJSON_AddNumberToObject(doc, "mean_abs_threshold", o->mean_abs);
        cJSON * arr = cJSON_AddArrayToObject(doc, "cases");
        for (int i = 0; i < n_cases; i++) {
            const struct nf_verify_case * c = &cases[i];
            cJSON * j = cJSON_CreateObject();
            cJSON_AddStringToObject(j, "case", c->name);
            cJSON_AddNumberToObject(j, "n_support", (double) c->ns);
            cJSON_AddNumberToObject(j, "n_query", (double) c->nq);
            cJSON_AddNumberToObject(j, "n_features", (double) c->nf);
            cJSON_AddNumberToObject(j, "max_abs_error", isfinite(c->d.max_abs) ? c->d.max_abs : -1);
            cJSON_AddNumberToObject(j, "mean_abs_error", c->d.mean_abs);
            cJSON_AddNumberToObject(j, "class_disagreements", (double) c->d.class_disagree);
            cJSON_AddBoolToObject(j, "inputs_identical", c->inputs_identical);
            cJSON_AddBoolToObject(j, "pass", c->pass);
            if (c->bisect_ran) cJSON_AddStringToObject(j, "bisect_first_stage", c->bisect_stage);
            cJSON_AddItemToArray(arr, j);
        }
        cJSON_AddNumberToObject(doc, "failed", failed);
        cJSON_AddBoolToObject(doc, "pass", failed == 0);
        FILE * f = nf_cli_outfile_fp(&jf);
        rc = f && nf__json_write_fp(f, doc) ? NF_OK : nf__err_set(err, NF_ERR_IO, "%s: write failed", o->json);
        cJSON_Delete(doc);
        if (rc != NF_OK) goto done;
    }
    if (o->trace) {
        FILE * f = nf_cli_outfile_fp(&tf);
        if (!f) {
            rc = nf__err_set(err, NF_ERR_IO, "%s: write failed", o->trace);
            goto done;
        }
        if ((rc = nf_cli_write_trace(be, f, o->trace, err)) != NF_OK) goto done;
    }
    /* stdout first: a lost report is a failed run, and then no file is replaced */
    if (!nf_cli_stdout_ok()) {
        rc = nf__err_set(err, NF_ERR_IO, "standard output: the report could not be written");
        goto done;
    }
    if (o->json && (rc = nf_cli_outfile_commit(&jf, err)) != NF_OK) goto done;
    if (o->trace && (rc = nf_cli_outfile_commit(&tf, err)) != NF_OK) goto done;
done:
    nf_cli_outfile_abort(&jf);
    nf_cli_outfile_abort(&tf);
    nf_stage_log_clear(&dlog);
    free(dlog.r);
    nf_stage_log_clear(&rlog);
    free(rlog.r);
    free(l_dev);
    free(l_ref);
    for (int i = 0; i < n_dirs; i++) free(dirs[i]);
    free(dirs);
    free(cases);
    nf_model_free(m);
    nf_model_free(rm);
    nf_backend_free(be);
    nf_backend_free(rbe);
    return rc;
}

int nf_cmd_verify(int argc, char ** argv) {
    for (int i = 1; i + 1 < argc; i++) {
        if (strcmp(argv[i], "--model") == 0) {
            char type[64];
            nf_cli_model_type(argv[i + 1], type, sizeof(type));
            if (strcmp(type, "sptransformer") == 0) return nf_cmd_verify_spt(argc, argv);
            if (strcmp(type, "tabstar") == 0) return nf_cmd_verify_tabstar(argc, argv);
            break;
        }
    }
    struct nf_verify_opts o;
    if (!nf_verify_parse(argc, argv, &o)) return 2;
    nf_cli_signals_install();
    nf_err err = {0};
    int failed = 0;
    int rc = nf_verify_main(&o, &failed, &err);
    if (rc != NF_OK) {
        nf_cli_print_error(&err, rc);
        return 1;
    }
    return failed ? 3 : 0;
}
