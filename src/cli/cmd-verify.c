/* cmd-verify.c -- `nofall verify`: a device against the CPU backend or a
 * fixture, for any model (nofall.h nf_verify_*: the model type reads its
 * fixtures, compares and prints its case lines and summary). This file
 * parses the options (the model type's variant of the table), opens --json
 * and --trace under temporary names before any work, and commits them after
 * the report reached stdout. Exit 0, 3 on a failed comparison, 1 on an
 * error, 2 on a usage error. */
#include "cli.h"
#include "opts.h"
#include "nofall-plot.h"

#include <stdlib.h>
#include <string.h>

static int nf_verify_write(struct nf_outfile * of, const char * text, const char * path, nf_err * err) {
    FILE * f = nf_outfile_fp(of);
    if (!f || fputs(text, f) < 0) return nf__err_set(err, NF_ERR_IO, "%s: write failed", path);
    return NF_OK;
}

static int nf_verify_main(const struct nf_verify_opts * o, const char * json, const char * trace, const char * plot,
                          int * n_failed, nf_err * err) {
    nf_verify * v = NULL;
    struct nf_outfile jf, tf;
    memset(&jf, 0, sizeof(jf));
    jf.fd = jf.slot = -1;
    memset(&tf, 0, sizeof(tf));
    tf.fd = tf.slot = -1;
    int rc = nf_verify_new(o, &v, err);
    /* the outputs: not what this run reads, and writable, before any work */
    for (int k = 0; rc == NF_OK && k < 2; k++) {
        const char *out = k ? trace : json, *flag = k ? "--trace" : "--json";
        if (!out) continue;
        if ((rc = nf_verify_check_output(v, flag, out, err)) == NF_OK)
            rc = nf_outfile_open(k ? &tf : &jf, out, flag, err);
    }
    if (rc == NF_OK && plot) rc = nf_verify_check_output(v, "--plot", plot, err);
    if (rc == NF_OK && plot) rc = nf_out_check(plot, "--plot", err);
    if (rc == NF_OK && plot) rc = nf_plot_check_writable(plot, "--plot", err);
    if (rc == NF_OK) rc = nf_verify_run(v, stdout, err);
    if (rc == NF_OK) *n_failed = nf_verify_failed(v);
    if (rc == NF_OK && json) {
        char * text = nf_verify_json(v, err);
        rc = text ? nf_verify_write(&jf, text, json, err) : err->code;
        nf_free(text);
    }
    if (rc == NF_OK && trace) {
        FILE * f = nf_outfile_fp(&tf);
        rc = f ? nf_cli_write_trace(nf_verify_backend(v), f, trace, err)
               : nf__err_set(err, NF_ERR_IO, "%s: write failed", trace);
    }
    /* stdout first: a lost report is a failed run, and then no file is replaced */
    if (rc == NF_OK && !nf_cli_stdout_ok())
        rc = nf__err_set(err, NF_ERR_IO, "standard output: the report could not be written");
    if (rc == NF_OK && json) rc = nf_outfile_commit(&jf, err);
    if (rc == NF_OK && trace) rc = nf_outfile_commit(&tf, err);
    if (rc == NF_OK && plot) { /* --plot FILE.svg: from the results' JSON (docs/plots.md) */
        char * text = nf_verify_json(v, err);
        char * svg = text ? nf_plot_verify_svg(text, err) : NULL;
        rc = svg ? nf_plot_write(plot, "--plot", svg, err) : err->code;
        nf_free(svg);
        nf_free(text);
    }
    nf_outfile_abort(&jf);
    nf_outfile_abort(&tf);
    nf_verify_free(v);
    return rc;
}

int nf_cmd_verify(int argc, char ** argv) {
    char type[64] = "";
    for (int i = 1; i + 1 < argc; i++) {
        if (strcmp(argv[i], "--model") == 0) {
            nf_model_type_of(argv[i + 1], type, sizeof(type));
            break;
        }
    }
    /* the option table's rows for this model type's verify (options.def) */
    const uint32_t mask = nf_cli_variant_of_type(type, NF_M(VERIFY_MITRA), NF_M(VERIFY_SPT), NF_M(VERIFY_TAB));
    struct nf_cli_opts v;
    if (!nf_cli_opts_parse(mask, argc, argv, 1, NULL, &v)) return 2;
    struct nf_verify_opts o = {
        .type = type,
        .model = nf_cli_opt_str(&v, NF_O_MODEL, NULL),
        .reference_model = nf_cli_opt_str(&v, NF_O_REFERENCE_MODEL, NULL),
        .device = nf_cli_opt_str(&v, NF_O_DEVICE, NULL),
        .against = nf_cli_opt_str(&v, NF_O_AGAINST, NULL),
        .seeds = nf_cli_opt_str(&v, NF_O_SEEDS, NULL),
        .samples = (int) v.i[NF_O_SAMPLES],
        .precision = NF_PRECISION_EXACT,
        .max_abs = v.set[NF_O_MAX_ABS] ? v.d[NF_O_MAX_ABS] : -1,
        .mean_abs = v.set[NF_O_MEAN_ABS] ? v.d[NF_O_MEAN_ABS] : -1,
        /* --bisect, --bisect=always: the last one given */
        .bisect = v.set[NF_O_BISECT_ALWAYS] && v.pos[NF_O_BISECT_ALWAYS] > v.pos[NF_O_BISECT] ? 2 : v.set[NF_O_BISECT],
        .adapter = nf_cli_opt_str(&v, NF_O_ADAPTER, NULL),
        .cells = nf_cli_opt_str(&v, NF_O_CELLS, NULL),
        .backend_init = nf_cli_backend_init,
    };
    const char *json = nf_cli_opt_str(&v, NF_O_JSON, NULL), *trace = nf_cli_opt_str(&v, NF_O_TRACE, NULL);
    const char * plot = nf_cli_opt_str(&v, NF_O_PLOT, NULL);
    o.stage_errors = plot != NULL;
    o.trace = trace != NULL;
    nf_cli_parse_precision(nf_cli_opt_str(&v, NF_O_PRECISION, "exact"), &o.precision);
    nf_err err = {0};
    if (nf_verify_check_opts(&o, &err) != NF_OK) {
        fprintf(stderr, "error: %s\n", err.msg);
        return 2;
    }
    if (plot && ((json && (strcmp(json, plot) == 0 || nf_out_same_file(json, plot))) ||
                 (trace && (strcmp(trace, plot) == 0 || nf_out_same_file(trace, plot))))) {
        fprintf(stderr, "error: --plot names the file of --json or --trace\n");
        return 2;
    }
    if (json && trace && (strcmp(json, trace) == 0 || nf_out_same_file(json, trace))) {
        fprintf(stderr, "error: --json and --trace name the same file\n");
        return 2;
    }
    nf_out_signals_install();
    int failed = 0;
    const int rc = nf_verify_main(&o, json, trace, plot, &failed, &err);
    if (rc != NF_OK) {
        nf_cli_print_error(&err, rc);
        return 1;
    }
    return failed ? 3 : 0;
}
