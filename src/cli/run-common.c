/* run-common.c -- what `nofall run` does the same for every model: the
 * markers on stdout (README "Markers") and the end of a run (trace, stdout
 * check, the swap of the output set). The --trace checks, the measured
 * placement and report.json's members are libnofall's (nofall-outputs.h). */
#include "cli.h"
#include "io/nf-io.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <string.h>

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

int nf_run_finish(const nf_backend * be, const char * trace, const char * trace_in_out, struct nf_outfile * tr,
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
        FILE * f = nf_outfile_fp(tr);
        if (!f) return nf__err_set(err, NF_ERR_IO, "%s: cannot write", trace);
        NF_TRY(nf_cli_write_trace(be, f, trace, err));
        NF_TRY(nf_outfile_close(tr, err));
    }
    return NF_OK;
}

int nf_run_commit(struct nf_outset * os, const char * trace, const char * trace_in_out, struct nf_outfile * tr,
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
