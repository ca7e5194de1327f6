/* cmd-bench.c -- `nofall bench`: synchronized per-forward timings on one
 * device. A benchmark, not a test: it prints figures and asserts nothing.
 * The input is the model's own (nofall.h nf_model_inputs), from the options
 * the model takes: Mitra a seeded --support x --query x --features table;
 * SpTransformer --batch seeded sequences of input length --length L (flanks
 * included; default 8201, the variant-scoring window); TabSTAR the seeded
 * row or --cells C.json (--adapter A merged first). Also the peak RSS of the
 * process and the bytes the device allocated (weights, workspace, scratch). */
#include "cli.h"
#include "opts.h"
#include "io/nf-io.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

int nf_cmd_bench(int argc, char ** argv) {
    const char *model = NULL, *device = "cpu", *json = NULL, *trace = NULL, *adapter = NULL;
    int warmup = 2, runs = 10, precision = NF_PRECISION_EXACT;
    int64_t query_chunk = 0, kv_cache_mb = 0;
    /* the model's input options (nf_model_inputs): the flag without "--", its value
     * checked here (the messages name the flag) */
    enum { NF_BENCH_MAX_IN = 16 };
    const char *in_keys[NF_BENCH_MAX_IN], *in_vals[NF_BENCH_MAX_IN];
    int n_in_opts = 0;
    char type[64] = "";
    for (int i = 1; i + 1 < argc; i++) {
        if (strcmp(argv[i], "--model") == 0) {
            nf_model_type_of(argv[i + 1], type, sizeof(type));
            break;
        }
    }
    /* the option table's rows for this model type's bench (options.def) */
    const uint32_t mask = nf_cli_variant_of_type(type, NF_M(BENCH_MITRA), NF_M(BENCH_SPT), NF_M(BENCH_TAB));
    struct nf_cli_opts v;
    if (!nf_cli_opts_parse(mask, argc, argv, 1, NULL, &v)) return 2;
    model = nf_cli_opt_str(&v, NF_O_MODEL, NULL);
    device = nf_cli_opt_str(&v, NF_O_DEVICE, "cpu");
    json = nf_cli_opt_str(&v, NF_O_JSON, NULL);
    trace = nf_cli_opt_str(&v, NF_O_TRACE, NULL);
    const int chrome = strcmp(nf_cli_opt_str(&v, NF_O_TRACE_FORMAT, "json"), "chrome") == 0;
    adapter = nf_cli_opt_str(&v, NF_O_ADAPTER, NULL);
    if (v.set[NF_O_WARMUP]) warmup = (int) v.i[NF_O_WARMUP];
    if (v.set[NF_O_RUNS]) runs = (int) v.i[NF_O_RUNS];
    nf_cli_parse_precision(nf_cli_opt_str(&v, NF_O_PRECISION, "exact"), &precision);
    query_chunk = v.i[NF_O_QUERY_CHUNK];
    kv_cache_mb = v.i[NF_O_KV_CACHE_MB];
    /* the model's input options, by key (nf_model_type_run_options), in the order given */
    static const char * const input_flags[] = {"--support", "--query", "--features", "--length",
                                               "--batch",   "--seed",  "--cells",    NULL};
    for (int f = 0; input_flags[f]; f++) {
        const int id = nf_cli_opt_id_of(input_flags[f], mask);
        if (id >= 0 && v.set[id] && n_in_opts < NF_BENCH_MAX_IN) {
            in_keys[n_in_opts] = input_flags[f] + 2;
            in_vals[n_in_opts++] = v.s[id];
        }
    }
    /* SpTransformer's default input: the variant-scoring window */
    if (nf_cli_type_takes(type, "length") && n_in_opts < NF_BENCH_MAX_IN) {
        int k = 0;
        while (k < n_in_opts && strcmp(in_keys[k], "length") != 0) k++;
        if (k == n_in_opts) {
            in_keys[n_in_opts] = "length";
            in_vals[n_in_opts++] = "8201";
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
    if (json && trace && (strcmp(json, trace) == 0 || nf_out_same_file(json, trace))) {
        fprintf(stderr, "error: --json and --trace name the same file\n");
        return 2;
    }
    nf_out_signals_install();

    nf_err err = {0};
    nf_backend * be = NULL;
    nf_model * m = NULL;
    float * logits = NULL;
    double * ms = calloc((size_t) runs, sizeof(double));
    struct nf_outfile jf, tf;
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
            if (nf_out_same_file(out, p))
                rc = nf__err_set(&err, NF_ERR_ARG, "%s %s is the model's %s: refused (it would be overwritten)", flag,
                                 nf__esc(e, sizeof(e), out), model_files[i]);
        }
        if (out && rc == NF_OK) rc = nf_outfile_open(k ? &tf : &jf, out, flag, &err);
    }
    if (rc == NF_OK) rc = nf_cli_backend_init(device, precision, &be, &err);
    if (rc == NF_OK) rc = nf_model_load(be, model, &m, &err);
    if (rc == NF_OK && adapter) {
        char summary[4400];
        rc = nf_model_apply_adapter(m, adapter, summary, sizeof(summary), &err);
    }
    if (rc == NF_OK && query_chunk) rc = nf_model_set_option(m, "query_chunk", query_chunk, &err);
    if (rc == NF_OK && kv_cache_mb) rc = nf_model_set_option(m, "kv_cache_mb", kv_cache_mb, &err);
    nf_inputs * inputs = NULL;
    if (rc == NF_OK) rc = nf_model_inputs(m, n_in_opts, in_keys, in_vals, &inputs, &err);
    const struct nf_array * in = inputs ? nf_inputs_arrays(inputs) : NULL;
    const int n_in = inputs ? nf_inputs_count(inputs) : 0;
    int out_ndim = 0;
    int64_t out_shape[NF_ARRAY_MAX_DIMS], n_out = 1;
    if (rc == NF_OK) rc = nf_model_output_shape(m, in, n_in, &out_ndim, out_shape, &err);
    for (int d = 0; rc == NF_OK && d < out_ndim; d++) n_out *= out_shape[d];
    struct nf_config_item item;
    const char * case_name = "";
    for (int i = 0; inputs && nf_inputs_item(inputs, i, &item); i++)
        if (strcmp(item.key, "case") == 0 && item.str) case_name = item.str;
    if (rc == NF_OK) {
        logits = malloc((size_t) n_out * sizeof(float));
        if (!logits || !ms) rc = nf__err_set(&err, NF_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; rc == NF_OK && i < warmup; i++) rc = nf_model_forward(m, in, n_in, logits, &err);
    struct nf_trace_totals tot = {0}, setup = {0};
    if (rc == NF_OK) nf_trace_totals_get(be, &setup); /* weights + workspace allocations */
    if (rc == NF_OK) nf_trace_reset(be, 0);
    for (int i = 0; rc == NF_OK && i < runs; i++) {
        /* nf_model_forward returns after the output is downloaded (a device
         * sync); the extra sync makes the end of the run explicit */
        const double t0 = nf_cli_now_ms();
        rc = nf_model_forward(m, in, n_in, logits, &err);
        if (rc == NF_OK) rc = nf_backend_sync(be, &err);
        ms[i] = nf_cli_now_ms() - t0;
    }
    if (rc == NF_OK) nf_trace_totals_get(be, &tot);
    if (rc == NF_OK && trace) {
        /* one more forward with a timed (per-op synchronized) trace */
        nf_trace_reset(be, NF_TRACE_TIMED);
        rc = nf_model_forward(m, in, n_in, logits, &err);
        FILE * f = nf_outfile_fp(&tf);
        if (rc == NF_OK && !f) rc = nf__err_set(&err, NF_ERR_IO, "%s: write failed", trace);
        if (rc == NF_OK) rc = nf_cli_write_trace_as(be, chrome, f, trace, &err);
    }
    if (rc != NF_OK) {
        nf_cli_print_error(&err, rc);
        goto done;
    }
    struct nf_bench_stats st;
    nf_bench_stats(ms, runs, &st);
    const double flops = tot.flops / runs;
    const double gflops = flops / (st.median * 1e6);
    printf("BENCH_DEVICE=%s\n", nf_backend_name(be));
    printf("BENCH_DEVICE_DESC=%s\n", nf_backend_description(be));
    printf("PRECISION=%s\n", nf_precision_name(nf_backend_precision(be)));
    printf("PRECISION_DETAIL=%s\n", nf_backend_precision_detail(be));
    printf("CASE=%s\n", case_name);
    for (int i = 0; nf_inputs_marker(inputs, i, &item); i++) {
        if (item.str)
            printf("%s=%s\n", item.key, item.str);
        else
            printf("%s=%lld\n", item.key, (long long) item.num);
    }
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
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    const double rss_mb = (double) ru.ru_maxrss / 1024.0; /* Linux: KiB */
    printf("DEVICE_ALLOC_MB=%.1f\n", (double) setup.alloc_bytes / 1048576.0);
    printf("PEAK_RSS_MB=%.1f\n", rss_mb);
    int64_t passes = 0, qused = 0;
    nf_err e2 = {0};
    if (nf_model_get_option(m, "support_passes", &passes, &e2) == NF_OK &&
        nf_model_get_option(m, "query_chunk_used", &qused, &e2) == NF_OK)
        printf("QUERY_CHUNK=%lld\nSUPPORT_PASSES=%lld\n", (long long) qused, (long long) passes);
    if (json) {
        cJSON * doc = cJSON_CreateObject();
        cJSON_AddStringToObject(doc, "device", nf_backend_name(be));
        cJSON_AddStringToObject(doc, "device_description", nf_backend_description(be));
        cJSON_AddStringToObject(doc, "precision", nf_precision_name(nf_backend_precision(be)));
        cJSON_AddStringToObject(doc, "precision_detail", nf_backend_precision_detail(be));
        cJSON_AddNumberToObject(doc, "device_allocs_timed", (double) tot.allocs);
        cJSON_AddStringToObject(doc, "case", case_name);
        for (int i = 0; nf_inputs_item(inputs, i, &item); i++) {
            if (strcmp(item.key, "case") == 0) continue;
            if (item.str)
                cJSON_AddStringToObject(doc, item.key, item.str);
            else
                cJSON_AddNumberToObject(doc, item.key, (double) item.num);
        }
        cJSON_AddNumberToObject(doc, "device_alloc_mb", (double) setup.alloc_bytes / 1048576.0);
        cJSON_AddNumberToObject(doc, "peak_rss_mb", rss_mb);
        cJSON_AddNumberToObject(doc, "warmup", warmup);
        cJSON_AddNumberToObject(doc, "runs", runs);
        cJSON_AddNumberToObject(doc, "median_ms", st.median);
        cJSON_AddNumberToObject(doc, "mean_ms", st.mean);
        cJSON_AddNumberToObject(doc, "p90_ms", st.p90);
        cJSON_AddNumberToObject(doc, "min_ms", st.min);
        cJSON_AddNumberToObject(doc, "max_ms", st.max);
        cJSON_AddNumberToObject(doc, "flop_per_forward", flops);
        cJSON_AddNumberToObject(doc, "gflops", gflops);
        FILE * f = nf_outfile_fp(&jf);
        rc = f && nf__json_write_fp(f, doc) ? NF_OK : nf__err_set(&err, NF_ERR_IO, "%s: write failed", json);
        cJSON_Delete(doc);
    }
    if (rc == NF_OK && !nf_cli_stdout_ok())
        rc = nf__err_set(&err, NF_ERR_IO, "standard output: the figures could not be written");
    if (rc == NF_OK && json) rc = nf_outfile_commit(&jf, &err);
    if (rc == NF_OK && trace) rc = nf_outfile_commit(&tf, &err);
    if (rc != NF_OK) nf_cli_print_error(&err, rc);
done:
    nf_outfile_abort(&jf);
    nf_outfile_abort(&tf);
    free(ms);
    free(logits);
    nf_inputs_free(inputs);
    nf_model_free(m);
    nf_backend_free(be);
    return rc == NF_OK ? 0 : 1;
}
