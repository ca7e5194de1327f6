/* run-report.c -- what a run's report.json says the same for every model
 * and command (README "Markers", "Output sets"): where things were measured
 * to be after a forward, the markers, the model's provenance (version,
 * files and their SHA-256, config), the device and precision, how the
 * last forward took its queries, and bench's timing statistics. Public: include/nofall-outputs.h. */
#include "nofall-outputs.h"
#include "nf-impl.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

int nf_run_measure(const nf_model * m, const nf_backend * be, struct nf_run_meas * r, nf_err * err) {
    nf_model_get_placement(m, &r->pl);
    NF_TRY(nf_model_weights_device(m, r->model_dev, sizeof(r->model_dev), err));
    nf_trace_totals_get(be, &r->tot);
    const char * dev = nf_backend_name(be);
    r->fallback = r->tot.ops_off_device > 0 || strcmp(r->model_dev, dev) != 0 || strcmp(r->pl.inputs, dev) != 0 ||
                  strcmp(r->pl.outputs, dev) != 0 || strcmp(r->pl.ops, dev) != 0;
    return NF_OK;
}

void nf_run_report_common(cJSON * rep, const char * model_path, nf_model * m, const nf_backend * be) {
    cJSON_AddStringToObject(rep, "nofall_version", NF_VERSION);
    cJSON_AddStringToObject(rep, "model_dir", model_path);
    cJSON_AddStringToObject(rep, "model_type", nf_model_type(m));
    cJSON * files = cJSON_AddArrayToObject(rep, "model_files"); /* what ties the result to its weights */
    for (int i = 0; i < nf_model_file_count(m); i++) {
        cJSON * f = cJSON_CreateObject();
        cJSON_AddItemToArray(files, f);
        cJSON_AddStringToObject(f, "path", nf_model_file_path(m, i));
        char hex[65];
        nf_err e = {0};
        if (nf_model_file_sha256(m, i, hex, &e) == NF_OK) /* hashed once a model */
            cJSON_AddStringToObject(f, "sha256", hex);
        else
            cJSON_AddStringToObject(f, "sha256_error", e.msg);
    }
    cJSON * c = cJSON_AddObjectToObject(rep, "config");
    struct nf_config_item ci;
    for (int i = 0; nf_model_config_item(m, i, &ci); i++) {
        if (ci.str)
            cJSON_AddStringToObject(c, ci.key, ci.str);
        else
            cJSON_AddNumberToObject(c, ci.key, (double) ci.num);
    }
    cJSON_AddNumberToObject(c, "n_params", (double) nf_model_n_params(m));
    cJSON_AddStringToObject(rep, "device", nf_backend_name(be));
    cJSON_AddStringToObject(rep, "device_description", nf_backend_description(be));
    cJSON_AddStringToObject(rep, "precision", nf_precision_name(nf_backend_precision(be)));
    cJSON_AddStringToObject(rep, "precision_detail", nf_backend_precision_detail(be));
    const char * tf32env = getenv("NVIDIA_TF32_OVERRIDE");
    cJSON_AddStringToObject(rep, "NVIDIA_TF32_OVERRIDE", tf32env ? tf32env : "unset");
}

/* how the last Mitra forward took its queries (nofall.h "query_chunk"):
 * {"query_chunk": rows a pass, "support_passes": N, "kv_cache_bytes": B};
 * nothing for a model without these statistics */
void nf_run_report_passes(cJSON * rep, const nf_model * m) {
    static const char * const keys[3] = {"query_chunk_used", "support_passes", "kv_cache_bytes"};
    static const char * const names[3] = {"query_chunk", "support_passes", "kv_cache_bytes"};
    cJSON * p = NULL;
    for (int i = 0; i < 3; i++) {
        int64_t v = 0;
        nf_err e = {0};
        if (nf_model_get_option(m, keys[i], &v, &e) != NF_OK) return;
        if (!p) p = cJSON_AddObjectToObject(rep, "queries");
        cJSON_AddNumberToObject(p, names[i], (double) v);
    }
}

void nf_run_markers_json(cJSON * rep, const struct nf_run_meas * r, const char * shape, const char * classes,
                         int finite, double wall_ms) {
    cJSON * mk = cJSON_AddObjectToObject(rep, "markers");
    cJSON_AddStringToObject(mk, "INPUT_DEVICE", r->pl.inputs);
    cJSON_AddStringToObject(mk, "MODEL_DEVICE", r->model_dev);
    cJSON_AddStringToObject(mk, "LOGITS_DEVICE", r->pl.outputs);
    cJSON_AddStringToObject(mk, "OUTPUT_DEVICE", r->pl.ops);
    cJSON_AddBoolToObject(mk, "CPU_FALLBACK", r->fallback);
    cJSON_AddStringToObject(mk, "LOGITS_SHAPE", shape);
    cJSON_AddStringToObject(mk, "PREDICTED_CLASS", classes);
    cJSON_AddBoolToObject(mk, "LOGITS_FINITE", finite);
    cJSON_AddNumberToObject(mk, "INFERENCE_WALL_MS", wall_ms);
    cJSON_AddBoolToObject(mk, "ASSETS_VERIFIED", 1); /* or no report: the set is read back before the swap */
    cJSON_AddNumberToObject(mk, "OPS_TOTAL", (double) r->tot.ops);
    cJSON_AddNumberToObject(mk, "OPS_OFF_DEVICE", (double) r->tot.ops_off_device);
    cJSON_AddNumberToObject(mk, "H2D_COPIES", (double) r->tot.h2d_copies);
    cJSON_AddNumberToObject(mk, "D2H_COPIES", (double) r->tot.d2h_copies);
    cJSON_AddNumberToObject(mk, "H2D_BYTES", (double) r->tot.h2d_bytes);
    cJSON_AddNumberToObject(mk, "D2H_BYTES", (double) r->tot.d2h_bytes);
    cJSON_AddNumberToObject(mk, "EXIT_CODE", 0);
}

static int nf_cli_cmp_double(const void * a, const void * b) {
    double x = *(const double *) a, y = *(const double *) b;
    return (x > y) - (x < y);
}

void nf_bench_stats(double * v, int n, struct nf_bench_stats * s) {
    memset(s, 0, sizeof(*s));
    if (n <= 0) return;
    qsort(v, (size_t) n, sizeof(double), nf_cli_cmp_double);
    double sum = 0;
    for (int i = 0; i < n; i++) sum += v[i];
    s->mean = sum / n;
    s->min = v[0];
    s->max = v[n - 1];
    s->median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    /* p90: linear interpolation between closest ranks (numpy's default) */
    double pos = 0.9 * (n - 1);
    int lo = (int) pos;
    int hi = lo + 1 < n ? lo + 1 : lo;
    s->p90 = v[lo] + (pos - lo) * (v[hi] - v[lo]);
}

/* the trace JSON to f (the caller's output file) */
