/* cmd-bench.c -- `nofall bench`: synchronized per-forward timings on one
 * device. A benchmark, not a test: it prints figures and asserts nothing. */
#include "cli.h"
#include "io/nf-io.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

int nf_cmd_bench(int argc, char ** argv) {
    const char * model = NULL, * device = "cpu", * json = NULL, * trace = NULL;
    int warmup = 2, runs = 10, precision = NF_PRECISION_EXACT;
    int64_t ns = 16, nq = 8, nf = 13;
    uint64_t seed = 42;
    for (int i = 1; i < argc; i++) {
        const char * a = argv[i];
        const char * v;
        if (!(v = nf_cli_need_value(argc, argv, &i))) return 2;
        if      (strcmp(a, "--model") == 0)    model = v;
        else if (strcmp(a, "--device") == 0)   device = v;
        else if (strcmp(a, "--json") == 0)     json = v;
        else if (strcmp(a, "--trace") == 0)    trace = v;
        else if (strcmp(a, "--warmup") == 0)   warmup = atoi(v);
        else if (strcmp(a, "--runs") == 0)     runs = atoi(v);
        else if (strcmp(a, "--support") == 0)  ns = atoll(v);
        else if (strcmp(a, "--query") == 0)    nq = atoll(v);
        else if (strcmp(a, "--features") == 0) nf = atoll(v);
        else if (strcmp(a, "--seed") == 0)     seed = strtoull(v, NULL, 10);
        else if (strcmp(a, "--precision") == 0) {
            if (!nf_cli_parse_precision(v, &precision)) { fprintf(stderr, "error: --precision must be exact or tf32\n"); return 2; }
        } else { fprintf(stderr, "error: unknown option %s\n", a); return 2; }
    }
    if (!model) { fprintf(stderr, "error: bench needs --model DIR\n"); return 2; }
    if (runs < 1 || warmup < 0) { fprintf(stderr, "error: --runs must be >= 1 and --warmup >= 0\n"); return 2; }

    nf_err err = {0};
    nf_backend * be = NULL;
    nf_model * m = NULL;
    struct nf_cli_table t = {0};
    float * logits = NULL;
    double * ms = calloc((size_t) runs, sizeof(double));
    int rc = nf_cli_backend_init(device, precision, &be, &err);
    if (rc == NF_OK) rc = nf_model_load(be, model, &m, &err);
    int cls = 0, width = 0, out_ndim = 0;
    int64_t n_classes = 0, out_shape[NF_ARRAY_MAX_DIMS];
    if (rc == NF_OK) rc = nf_cli_table_model(m, &cls, &n_classes, &err);
    if (rc == NF_OK) rc = nf_cli_table_generate(seed, ns, nq, nf, cls, cls ? (int) (n_classes < 10 ? n_classes : 10) : 0, &t, &err);
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
        if (rc == NF_OK) rc = nf_cli_write_trace(be, trace, &err);
    }
    if (rc != NF_OK) {
        fprintf(stderr, "error: %s (%s)\n", err.msg, nf_result_name(rc));
        free(ms); free(logits); nf_cli_table_free(&t); nf_model_free(m); nf_backend_free(be);
        return 1;
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
    printf("MEDIAN_MS=%.3f\nMEAN_MS=%.3f\nP90_MS=%.3f\nMIN_MS=%.3f\nMAX_MS=%.3f\n", st.median, st.mean, st.p90, st.min, st.max);
    printf("FLOP_PER_FORWARD=%.6e\n", flops);
    printf("GFLOPS=%.2f\n", gflops);
    printf("OPS_PER_FORWARD=%lld\n", (long long) (tot.ops / runs));
    printf("H2D_COPIES_PER_FORWARD=%lld\nD2H_COPIES_PER_FORWARD=%lld\n", (long long) (tot.h2d_copies / runs), (long long) (tot.d2h_copies / runs));
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
        rc = nf__json_write_file(json, doc, &err);
        cJSON_Delete(doc);
        if (rc != NF_OK) fprintf(stderr, "error: %s\n", err.msg);
    }
    free(ms); free(logits); nf_cli_table_free(&t); nf_model_free(m); nf_backend_free(be);
    return rc == NF_OK ? 0 : 1;
}
