/* cmd-bench.c -- `nofall bench`: synchronized per-forward timings on one
 * device. A benchmark, not a test: it prints figures and asserts nothing. */
#include "cli.h"
#include "io/nf-io.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

int nf_cmd_bench(int argc, char ** argv) {
    const char *model = NULL, *device = "cpu", *json = NULL, *trace = NULL;
    int warmup = 2, runs = 10, precision = NF_PRECISION_EXACT;
    int64_t ns = 16, nq = 8, nf = 13;
    uint64_t seed = 42;
    static const char * const flags[] = {"--model",   "--device", "--json",     "--trace", "--warmup",    "--runs",
                                         "--support", "--query",  "--features", "--seed",  "--precision", NULL};
    for (int i = 1; i < argc; i++) {
        const char * a = argv[i];
        const char * v;
        int64_t n = 0;
        if (!nf_cli_is_flag(a, flags)) {
            char e[256];
            fprintf(stderr, "error: unknown option %s\n", nf__esc(e, sizeof(e), a));
            return 2;
        }
        if (!(v = nf_cli_need_value(argc, argv, &i))) return 2;
        if (strcmp(a, "--model") == 0)
            model = v;
        else if (strcmp(a, "--device") == 0)
            device = v;
        else if (strcmp(a, "--json") == 0)
            json = v;
        else if (strcmp(a, "--trace") == 0)
            trace = v;
        else if (strcmp(a, "--warmup") == 0) {
            if (!nf_cli_parse_int(a, v, 0, 1000000, &n)) return 2;
            warmup = (int) n;
        } else if (strcmp(a, "--runs") == 0) {
            if (!nf_cli_parse_int(a, v, 1, 1000000, &n)) return 2;
            runs = (int) n;
        } else if (strcmp(a, "--support") == 0) {
            if (!nf_cli_parse_int(a, v, 1, 1 << 24, &ns)) return 2;
        } else if (strcmp(a, "--query") == 0) {
            if (!nf_cli_parse_int(a, v, 1, 1 << 24, &nq)) return 2;
        } else if (strcmp(a, "--features") == 0) {
            if (!nf_cli_parse_int(a, v, 1, 1 << 20, &nf)) return 2;
        } else if (strcmp(a, "--seed") == 0) {
            if (!nf_cli_parse_int(a, v, 0, NF_CLI_SEED_MAX, &n)) return 2;
            seed = (uint64_t) n;
        } else if (strcmp(a, "--precision") == 0) {
            if (!nf_cli_parse_precision(v, &precision)) {
                fprintf(stderr, "error: --precision must be exact or tf32\n");
                return 2;
            }
        }
    }
    if (!model) {
        fprintf(stderr, "error: bench needs --model DIR\n");
        return 2;
    }
    if (!model[0]) {
        fprintf(stderr, "error: --model needs a directory, got ''\n");
        return 2;
    }
    if (json && trace && (strcmp(json, trace) == 0 || nf_cli_same_file(json, trace))) {
        fprintf(stderr, "error: --json and --trace name the same file\n");
        return 2;
    }
    nf_cli_signals_install();

    nf_err err = {0};
    nf_backend * be = NULL;
    nf_model * m = NULL;
    struct nf_cli_table t = {0};
    float * logits = NULL;
    double * ms = calloc((size_t) runs, sizeof(double));
    struct nf_cli_outfile jf, tf;
    memset(&jf, 0, sizeof(jf));
    jf.fd = jf.slot = -1;
    memset(&tf, 0, sizeof(tf));
    tf.fd = tf.slot = -1;
    int rc = NF_OK;
    /* the outputs: not the model's files, and writable, before any work */
    for (int k = 0; k < 2 && rc == NF_OK; k++) {
        const char *out = k ? trace : json, *flag = k ? "--trace" : "--json";
        static const char * const model_files[] = {"config.json", "model.safetensors"};
        char p[4096], e[1024];
        for (int i = 0; out && rc == NF_OK && i < 2; i++) {
            nf__path_join(p, sizeof(p), model, model_files[i]);
            if (nf_cli_same_file(out, p))
                rc = nf__err_set(&err, NF_ERR_ARG, "%s %s is the model's %s: refused (it would be overwritten)", flag,
                                 nf__esc(e, sizeof(e), out), model_files[i]);
        }
        if (out && rc == NF_OK) rc = nf_cli_outfile_open(k ? &tf : &jf, out, flag, &err);
    }
    if (rc == NF_OK) rc = nf_cli_backend_init(device, precision, &be, &err);
    if (rc == NF_OK) rc = nf_model_load(be, model, &m, &err);
    int cls = 0, width = 0, out_ndim = 0;
    int64_t n_classes = 0, out_shape[NF_ARRAY_MAX_DIMS];
    if (rc == NF_OK) rc = nf_cli_table_model(m, &cls, &n_classes, &err);
    if (rc == NF_OK)
        rc = nf_cli_table_generate(seed, ns, nq, nf, cls, cls ? (int) (n_classes < 10 ? n_classes : 10) : 0, &t, &err);
    if (rc == NF_OK) rc = nf_cli_output_shape(m, &t, &out_ndim, out_shape, &width, &err);
    if (rc == NF_OK) {
        logits = malloc((size_t) (nq * width) * sizeof(float));
        if (!logits || !ms) rc = nf__err_set(&err, NF_ERR_NOMEM, "out of memory");
    }
    struct nf_array in[NF_CLI_TABLE_INPUTS];
    nf_cli_table_arrays(&t, in);
    for (int i = 0; rc == NF_OK && i < warmup; i++) rc = nf_model_forward(m, in, NF_CLI_TABLE_INPUTS, logits, &err);
    struct nf_trace_totals tot = {0};
    if (rc == NF_OK) nf_trace_reset(be, 0);
    for (int i = 0; rc == NF_OK && i < runs; i++) {
        /* nf_model_forward returns after the output is downloaded (a device
         * sync); the extra sync makes the end of the run explicit */
        const double t0 = nf_cli_now_ms();
        rc = nf_model_forward(m, in, NF_CLI_TABLE_INPUTS, logits, &err);
        if (rc == NF_OK) rc = nf_backend_sync(be, &err);
        ms[i] = nf_cli_now_ms() - t0;
    }
    if (rc == NF_OK) nf_trace_totals_get(be, &tot);
    if (rc == NF_OK && trace) {
        /* one more forward with a timed (per-op synchronized) trace */
        nf_trace_reset(be, NF_TRACE_TIMED);
        rc = nf_model_forward(m, in, NF_CLI_TABLE_INPUTS, logits, &err);
        FILE * f = nf_cli_outfile_fp(&tf);
        if (rc == NF_OK && !f) rc = nf__err_set(&err, NF_ERR_IO, "%s: write failed", trace);
        if (rc == NF_OK) rc = nf_cli_write_trace(be, f, trace, &err);
    }
    if (rc != NF_OK) {
        nf_cli_print_error(&err, rc);
        goto done;
    }
    struct nf_cli_stats st;
    nf_cli_stats(ms, runs, &st);
    const double flops = tot.flops / runs;
    const double gflops = flops / (st.median * 1e6);
    printf("BENCH_DEVICE=%s\n", nf_backend_name(be));
    printf("BENCH_DEVICE_DESC=%s\n", nf_backend_description(be));
    printf("PRECISION=%s\n", nf_precision_name(nf_backend_precision(be)));
    printf("PRECISION_DETAIL=%s\n", nf_backend_precision_detail(be));
    printf("CASE=%lldx%lldx%lld\n", (long long) ns, (long long) nq, (long long) nf);
    printf("WARMUP=%d\nRUNS=%d\n", warmup, runs);
    printf("MEDIAN_MS=%.3f\nMEAN_MS=%.3f\nP90_MS=%.3f\nMIN_MS=%.3f\nMAX_MS=%.3f\n", st.median, st.mean, st.p90, st.min,
           st.max);
    printf("FLOP_PER_FORWARD=%.6e\n", flops);
    printf("GFLOPS=%.2f\n", gflops);
    printf("OPS_PER_FORWARD=%lld\n", (long long) (tot.ops / runs));
    printf("H2D_COPIES_PER_FORWARD=%lld\nD2H_COPIES_PER_FORWARD=%lld\n", (long long) (tot.h2d_copies / runs),
           (long long) (tot.d2h_copies / runs));
    /* after the warm-up forwards the workspace is reused: expected 0 */
    printf("DEVICE_ALLOCS_TIMED=%lld\n", (long long) tot.allocs);
    if (json) {
        cJSON * doc = cJSON_CreateObject();
        cJSON_AddStringToObject(doc, "device", nf_backend_name(be));
        cJSON_AddStringToObject(doc, "device_description", nf_backend_description(be));
        cJSON_AddStringToObject(doc, "precision", nf_precision_name(nf_backend_precision(be)));
        cJSON_AddStringToObject(doc, "precision_detail", nf_backend_precision_detail(be));
        cJSON_AddNumberToObject(doc, "device_allocs_timed", (double) tot.allocs);
        cJSON_AddNumberToObject(doc, "n_support", (double) ns);
        cJSON_AddNumberToObject(doc, "n_query", (double) nq);
        cJSON_AddNumberToObject(doc, "n_features", (double) nf);
        cJSON_AddNumberToObject(doc, "warmup", warmup);
        cJSON_AddNumberToObject(doc, "runs", runs);
        cJSON_AddNumberToObject(doc, "median_ms", st.median);
        cJSON_AddNumberToObject(doc, "mean_ms", st.mean);
        cJSON_AddNumberToObject(doc, "p90_ms", st.p90);
        cJSON_AddNumberToObject(doc, "min_ms", st.min);
        cJSON_AddNumberToObject(doc, "max_ms", st.max);
        cJSON_AddNumberToObject(doc, "flop_per_forward", flops);
        cJSON_AddNumberToObject(doc, "gflops", gflops);
        FILE * f = nf_cli_outfile_fp(&jf);
        rc = f && nf__json_write_fp(f, doc) ? NF_OK : nf__err_set(&err, NF_ERR_IO, "%s: write failed", json);
        cJSON_Delete(doc);
    }
    if (rc == NF_OK && !nf_cli_stdout_ok())
        rc = nf__err_set(&err, NF_ERR_IO, "standard output: the figures could not be written");
    if (rc == NF_OK && json) rc = nf_cli_outfile_commit(&jf, &err);
    if (rc == NF_OK && trace) rc = nf_cli_outfile_commit(&tf, &err);
    if (rc != NF_OK) nf_cli_print_error(&err, rc);
done:
    nf_cli_outfile_abort(&jf);
    nf_cli_outfile_abort(&tf);
    free(ms);
    free(logits);
    nf_cli_table_free(&t);
    nf_model_free(m);
    nf_backend_free(be);
    return rc == NF_OK ? 0 : 1;
}
