/* cmd-bench.c -- `nofall bench`: synchronized per-forward timings on one
 * device. A benchmark, not a test: it prints figures and asserts nothing.
 * Table models (Mitra): a seeded --support x --query x --features table.
 * SpTransformer: --batch seeded sequences of input length --length L
 * (flanks included: L - 2 context positions scored; default 8201, the
 * variant-scoring window). Also the peak RSS of the process and the bytes
 * the device allocated (weights, workspace, scratch). */
#include "cli.h"
#include "opts.h"
#include "io/nf-io.h"
#include "sptransformer-impl.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

int nf_cmd_bench(int argc, char ** argv) {
    for (int i = 1; i + 1 < argc; i++) {
        if (strcmp(argv[i], "--model") == 0) {
            char type[64];
            nf_cli_model_type(argv[i + 1], type, sizeof(type));
            if (strcmp(type, "tabstar") == 0) return nf_cmd_bench_tabstar(argc, argv);
            break;
        }
    }
    struct nf_cli_opts v;
    if (!nf_cli_opts_parse(NF_M(BENCH_MITRA) | NF_M(BENCH_SPT), argc, argv, 1, NULL, &v)) return 2;
    const char * model = nf_cli_opt_str(&v, NF_O_MODEL, NULL);
    const char * device = nf_cli_opt_str(&v, NF_O_DEVICE, "cpu");
    const char * json = nf_cli_opt_str(&v, NF_O_JSON, NULL);
    const char * trace = nf_cli_opt_str(&v, NF_O_TRACE, NULL);
    const int warmup = v.set[NF_O_WARMUP] ? (int) v.i[NF_O_WARMUP] : 2;
    const int runs = v.set[NF_O_RUNS] ? (int) v.i[NF_O_RUNS] : 10;
    int precision = NF_PRECISION_EXACT;
    nf_cli_parse_precision(nf_cli_opt_str(&v, NF_O_PRECISION, "exact"), &precision);
    const int64_t ns = v.set[NF_O_SUPPORT] ? v.i[NF_O_SUPPORT] : 16;
    const int64_t nq = v.set[NF_O_QUERY] ? v.i[NF_O_QUERY] : 8;
    const int64_t nf = v.set[NF_O_FEATURES] ? v.i[NF_O_FEATURES] : 13;
    const int64_t length = v.set[NF_O_BENCH_LENGTH] ? v.i[NF_O_BENCH_LENGTH] : 8201;
    const int64_t batch = v.set[NF_O_BENCH_BATCH] ? v.i[NF_O_BENCH_BATCH] : 1;
    const int64_t query_chunk = v.i[NF_O_QUERY_CHUNK], kv_cache_mb = v.i[NF_O_KV_CACHE_MB];
    const uint64_t seed = v.set[NF_O_SEED] ? (uint64_t) v.i[NF_O_SEED] : 42;
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
    int cls = 0, width = 0, out_ndim = 0, n_in = NF_CLI_TABLE_INPUTS;
    int64_t n_classes = 0, out_shape[NF_ARRAY_MAX_DIMS], n_out = 0;
    struct nf_array in[NF_CLI_TABLE_INPUTS];
    int64_t * tokens = NULL;
    char case_name[96] = "";
    const int spt = rc == NF_OK && strcmp(nf_model_type(m), "sptransformer") == 0;
    if (spt) {
        /* batch seeded sequences (seeds seed, seed+1, ...), N flanks of context_len */
        int64_t context = 0;
        struct nf_config_item ci;
        for (int i = 0; nf_model_config_item(m, i, &ci); i++)
            if (strcmp(ci.key, "context_len") == 0) context = ci.num;
        tokens = malloc((size_t) (batch * length) * sizeof(int64_t));
        int8_t * core = malloc((size_t) length);
        if (!tokens || !core) rc = nf__err_set(&err, NF_ERR_NOMEM, "out of memory");
        for (int64_t b = 0; rc == NF_OK && b < batch; b++) {
            const int64_t n = length - 2 * context > 0 ? length - 2 * context : 0;
            nf__spt_seeded_tokens(seed + (uint64_t) b, n, core);
            for (int64_t i = 0; i < length; i++) {
                const int64_t j = i - context;
                tokens[b * length + i] = j >= 0 && j < n ? core[j] : 4;
            }
        }
        free(core);
        in[0] = (struct nf_array){"tokens", NF_ARRAY_I64, 2, {batch, length}, tokens};
        n_in = 1;
        if (rc == NF_OK) rc = nf_model_output_shape(m, in, 1, &out_ndim, out_shape, &err);
        n_out = out_shape[0] * out_shape[1] * out_shape[2];
        snprintf(case_name, sizeof(case_name), "batch=%lld length=%lld", (long long) batch, (long long) length);
    } else {
        if (rc == NF_OK) rc = nf_cli_table_model(m, &cls, &n_classes, &err);
        if (rc == NF_OK && query_chunk) rc = nf_model_set_option(m, "query_chunk", query_chunk, &err);
        if (rc == NF_OK && kv_cache_mb) rc = nf_model_set_option(m, "kv_cache_mb", kv_cache_mb, &err);
        if (rc == NF_OK)
            rc = nf_cli_table_generate(seed, ns, nq, nf, cls, cls ? (int) (n_classes < 10 ? n_classes : 10) : 0, &t,
                                       &err);
        if (rc == NF_OK) rc = nf_cli_output_shape(m, &t, &out_ndim, out_shape, &width, &err);
        n_out = nq * width;
        nf_cli_table_arrays(&t, in);
        snprintf(case_name, sizeof(case_name), "%lldx%lldx%lld", (long long) ns, (long long) nq, (long long) nf);
    }
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
    printf("CASE=%s\n", case_name);
    if (spt) printf("INPUT_LENGTH=%lld\nPOSITIONS_SCORED=%lld\n", (long long) length, (long long) out_shape[1]);
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
        if (spt) {
            cJSON_AddNumberToObject(doc, "batch", (double) batch);
            cJSON_AddNumberToObject(doc, "length", (double) length);
        } else {
            cJSON_AddNumberToObject(doc, "n_support", (double) ns);
            cJSON_AddNumberToObject(doc, "n_query", (double) nq);
            cJSON_AddNumberToObject(doc, "n_features", (double) nf);
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
    free(tokens);
    nf_cli_table_free(&t);
    nf_model_free(m);
    nf_backend_free(be);
    return rc == NF_OK ? 0 : 1;
}
