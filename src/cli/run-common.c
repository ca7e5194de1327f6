/* run-common.c -- what `nofall run` does the same for every model: the
 * --trace checks, the measured placement and markers (README "Markers"),
 * report.json's common members, and the end of a run (trace, stdout check,
 * the swap of the output set). */
#include "cli.h"
#include "io/nf-io.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int nf_run_check_trace(const char * trace, const char * model, const char * const * inputs,
                       const char * const * input_flags, int n_inputs, const struct nf_outset * os,
                       const char * const * artifacts, int n_artifacts, char * in_out, size_t n, nf_err * err) {
    char e[1024], p[4096];
    in_out[0] = '\0';
    if (!trace) return NF_OK;
    if (!trace[0]) return nf__err_set(err, NF_ERR_ARG, "--trace needs a file name, got ''");
    nf__esc(e, sizeof(e), trace);
    for (int i = 0; i < n_inputs; i++) {
        if (inputs[i] && nf_cli_same_file(trace, inputs[i])) {
            return nf__err_set(err, NF_ERR_ARG, "--trace %s is the input %s: refused (it would be overwritten)", e,
                               input_flags[i]);
        }
    }
    if (nf_cli_same_file(trace, model))
        return nf__err_set(err, NF_ERR_ARG, "--trace %s is the model: refused (it would be overwritten)", e);
    static const char * const model_files[] = {"config.json", "model.safetensors"};
    for (int i = 0; i < 2; i++) {
        nf__path_join(p, sizeof(p), model, model_files[i]);
        if (nf_cli_same_file(trace, p)) {
            return nf__err_set(err, NF_ERR_ARG, "--trace %s is the model's %s: refused (it would be overwritten)", e,
                               model_files[i]);
        }
    }
    char c[4096];
    if (nf_cli_canonical(trace, c, sizeof(c)) == 0 && (strcmp(c, os->out) == 0 || strcmp(c, os->lock) == 0)) {
        return nf__err_set(err, NF_ERR_ARG, "--trace %s is --out or its lock: refused", e);
    }
    char name[4096];
    if (nf_outset_inside(os, trace, name, sizeof(name))) {
        for (int i = 0; i < n_artifacts; i++) {
            if (strcmp(name, artifacts[i]) == 0) {
                return nf__err_set(err, NF_ERR_ARG,
                                   "--trace %s is the artifact %s of --out: refused (the trace would replace it)", e,
                                   artifacts[i]);
            }
        }
        if (strchr(name, '/'))
            return nf__err_set(err, NF_ERR_ARG, "--trace %s: inside a subdirectory of --out, which holds only files",
                               e);
        snprintf(in_out, n, "%s", name); /* part of the new set */
    }
    return NF_OK;
}

int nf_run_measure(const nf_model * m, const nf_backend * be, struct nf_run_meas * r, nf_err * err) {
    nf_model_get_placement(m, &r->pl);
    NF_TRY(nf_model_weights_device(m, r->model_dev, sizeof(r->model_dev), err));
    nf_trace_totals_get(be, &r->tot);
    const char * dev = nf_backend_name(be);
    r->fallback = r->tot.ops_off_device > 0 || strcmp(r->model_dev, dev) != 0 || strcmp(r->pl.inputs, dev) != 0 ||
                  strcmp(r->pl.outputs, dev) != 0 || strcmp(r->pl.ops, dev) != 0;
    return NF_OK;
}

void nf_run_report_common(cJSON * rep, const char * model_path, const nf_model * m, const nf_backend * be) {
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
        if (nf_sha256_file(nf_model_file_path(m, i), hex, &e) == NF_OK)
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
void nf_cli_report_passes(cJSON * rep, const nf_model * m) {
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

void nf_run_markers_print(const struct nf_run_meas * r, const nf_backend * be, const char * shape, const char * classes,
                          int finite, double wall_ms, int assets_verified) {
    printf("INPUT_DEVICE=%s\n", r->pl.inputs);
    printf("MODEL_DEVICE=%s\n", r->model_dev);
    printf("LOGITS_DEVICE=%s\n", r->pl.outputs);
    printf("OUTPUT_DEVICE=%s\n", r->pl.ops);
    printf("CPU_FALLBACK=%s\n", r->fallback ? "true" : "false");
    printf("LOGITS_SHAPE=%s\n", shape);
    printf("PREDICTED_CLASS=%s\n", classes);
    printf("LOGITS_FINITE=%s\n", finite ? "true" : "false");
    printf("INFERENCE_WALL_MS=%.3f\n", wall_ms);
    printf("ASSETS_VERIFIED=%s\n", assets_verified ? "true" : "false");
    printf("OPS_TOTAL=%lld\n", (long long) r->tot.ops);
    printf("OPS_OFF_DEVICE=%lld\n", (long long) r->tot.ops_off_device);
    printf("H2D_COPIES=%lld\n", (long long) r->tot.h2d_copies);
    printf("D2H_COPIES=%lld\n", (long long) r->tot.d2h_copies);
    printf("PRECISION=%s\n", nf_precision_name(nf_backend_precision(be)));
}

int nf_run_finish(const nf_backend * be, const char * trace, const char * trace_in_out, struct nf_cli_outfile * tr,
                  struct nf_outset * os, nf_err * err) {
    char p[4096];
    if (trace_in_out[0]) {
        /* a trace inside --out is a member of the new set */
        nf_outset_path(os, trace_in_out, p, sizeof(p));
        FILE * f = fopen(p, "wbx");
        if (!f) return nf__err_set(err, NF_ERR_IO, "%s: cannot create: %s", p, strerror(errno));
        int rc = nf_cli_write_trace(be, f, trace, err);
        if (fclose(f) != 0 && rc == NF_OK) rc = nf__err_set(err, NF_ERR_IO, "%s: write failed", trace);
        NF_TRY(rc);
    } else if (trace) {
        FILE * f = nf_cli_outfile_fp(tr);
        if (!f) return nf__err_set(err, NF_ERR_IO, "%s: cannot write", trace);
        NF_TRY(nf_cli_write_trace(be, f, trace, err));
        NF_TRY(nf_cli_outfile_close(tr, err));
    }
    return NF_OK;
}

int nf_run_commit(struct nf_outset * os, const char * trace, const char * trace_in_out, struct nf_cli_outfile * tr,
                  nf_err * err) {
    /* the markers must reach stdout before the new set replaces the old */
    if (!nf_cli_stdout_ok())
        return nf__err_set(err, NF_ERR_IO,
                           "standard output: the markers could not be written; the previous results are kept");
    return nf_outset_commit(os, trace && !trace_in_out[0] ? tr : NULL, err);
}

int nf_cli_command_exit(int rc, const nf_err * err) {
    if (rc != NF_OK) {
        nf_cli_print_error(err, rc);
        printf("EXIT_CODE=1\n");
        return 1;
    }
    printf("EXIT_CODE=0\n");
    return nf_cli_stdout_ok() ? 0 : 1;
}

int nf_cli_type_takes(const char * type, const char * key) {
    const char * const * ks = nf_model_type_run_options(type);
    for (int i = 0; ks && ks[i]; i++)
        if (strcmp(ks[i], key) == 0) return 1;
    return 0;
}
