/* main.c -- `nofall`: the commands (their options: options.def, opts.c). */
#include "cli.h"
#include "opts.h"
#include "io/nf-io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* gen-weights TYPE --out DIR [--seed N] [--perturb KEY:DELTA] [--format safetensors|ckpt] [--OPTION VALUE ...]:
 * the options are the model type's (nf_model_type_gen_option); --format ckpt
 * also writes the model's torch.save checkpoint (nf_model_type_ckpt_name) */
static int nf_cmd_gen_weights(int argc, char ** argv) {
    const char * type = NULL;
    for (int i = 0; argc >= 2 && i < nf_model_type_count(); i++)
        if (strcmp(argv[1], nf_model_type_name(i)) == 0) type = nf_model_type_name(i);
    if (!type) {
        char known[256] = "";
        size_t len = 0;
        for (int i = 0; i < nf_model_type_count(); i++)
            if (len < sizeof(known))
                len += (size_t) snprintf(known + len, sizeof(known) - len, "%s'%s'", i ? ", " : "",
                                         nf_model_type_name(i));
        if (nf_model_type_count() == 1)
            fprintf(stderr, "error: gen-weights needs a model name (only %s is available)\n", known);
        else
            fprintf(stderr, "error: gen-weights needs a model name (one of %s)\n", known);
        return 2;
    }
    struct nf_cli_opts v;
    if (!nf_cli_opts_parse(NF_M(GEN), argc, argv, 2, type, &v)) return 2;
    const char * out = nf_cli_opt_str(&v, NF_O_OUT_DIR, NULL);
    const char * perturb = NULL;
    const char * format = nf_cli_opt_str(&v, NF_O_FORMAT, "safetensors");
    static char key[128];
    float delta = 0.0f;
    const uint64_t seed = (uint64_t) v.i[NF_O_GEN_SEED];
    if (strcmp(format, "ckpt") == 0 && !nf_model_type_ckpt_name(type)) {
        fprintf(stderr, "error: --format ckpt: %s has no torch.save checkpoint form\n", type);
        return 2;
    }
    if (v.set[NF_O_PERTURB]) {
        /* KEY:DELTA -- add DELTA to every element of KEY (bisect tests) */
        const char * pv = v.s[NF_O_PERTURB];
        const char * colon = strrchr(pv, ':');
        if (!colon || colon == pv || (size_t) (colon - pv) >= sizeof(key)) {
            fprintf(stderr, "error: --perturb takes KEY:DELTA\n");
            return 2;
        }
        memcpy(key, pv, (size_t) (colon - pv));
        key[colon - pv] = '\0';
        perturb = key;
        double d;
        if (!nf_cli_parse_double("--perturb DELTA", colon + 1, -1e30, 1e30, &d)) return 2;
        delta = (float) d;
    }
    if (!out) {
        fprintf(stderr, "error: gen-weights needs --out DIR\n");
        return 2;
    }
    nf_err err = {0};
    char summary[256] = "";
    int rc = nf_model_gen_weights_full(type, out, format, seed, v.n_extra, v.extra_key, v.extra_val, perturb, delta,
                                       summary, sizeof(summary), &err);
    if (rc != NF_OK) {
        nf_cli_print_error(&err, rc);
        return 1;
    }
    if (strcmp(format, "ckpt") == 0)
        printf("wrote %s/config.json, %s/model.safetensors and %s/%s (%s, seed %llu)\n", out, out, out,
               nf_model_type_ckpt_name(type), summary, (unsigned long long) seed);
    else
        printf("wrote %s/config.json and %s/model.safetensors (%s, seed %llu)\n", out, out, summary,
               (unsigned long long) seed);
    return 0;
}

/* a library text (text NULL: err's failure) to stdout; the exit status */
static int nf_main_print(char * text, const nf_err * err) {
    if (!text) {
        fprintf(stderr, "error: %s\n", err->msg);
        return 1;
    }
    const int ok = fputs(text, stdout) >= 0 && fflush(stdout) == 0;
    nf_free(text);
    if (!ok) {
        fprintf(stderr, "error: writing to stdout failed\n");
        return 1;
    }
    return 0;
}

static int nf_main(int argc, char ** argv) {
    if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        nf_cli_usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    const char * cmd = argv[1];
    if (strcmp(cmd, "help") == 0) return nf_cmd_help(argc - 1, argv + 1);
    if (strcmp(cmd, "completion") == 0) return nf_cmd_completion(argc - 1, argv + 1);
    /* nofall CMD ... --help ...: the command's help, whatever else is there */
    if (nf_cli_opts_wants_help(cmd, argc - 1, argv + 1)) return nf_cli_help(stdout, cmd) ? 0 : 2;
    if (strcmp(cmd, "run") == 0) return nf_cmd_run(argc - 1, argv + 1);
    if (strcmp(cmd, "verify") == 0) return nf_cmd_verify(argc - 1, argv + 1);
    if (strcmp(cmd, "bench") == 0) return nf_cmd_bench(argc - 1, argv + 1);
    if (strcmp(cmd, "gen-weights") == 0) return nf_cmd_gen_weights(argc - 1, argv + 1);
    if (strcmp(cmd, "convert") == 0) return nf_cmd_convert(argc - 1, argv + 1);
    if (strcmp(cmd, "predict") == 0) return nf_cmd_predict(argc - 1, argv + 1);
    if (strcmp(cmd, "finetune") == 0) return nf_cmd_finetune(argc - 1, argv + 1);
    if (strcmp(cmd, "annotate") == 0) return nf_cmd_annotate(argc - 1, argv + 1);
    if (strcmp(cmd, "tokenize") == 0) return nf_cmd_tokenize(argc - 1, argv + 1);
    if (strcmp(cmd, "devices") == 0) {
        struct nf_cli_opts v;
        if (!nf_cli_opts_parse(NF_M(DEVICES), argc - 1, argv + 1, 1, NULL, &v)) return 2;
        nf_err err = {0};
        return nf_main_print(nf_devices_describe(&err), &err);
    }
    if (strcmp(cmd, "--version") == 0) {
        /* the version with its git commit, the backends built in, their GEMM libraries */
        nf_err err = {0};
        return nf_main_print(nf_build_info(&err), &err);
    }
    char e[256];
    fprintf(stderr, "error: unknown command '%s'\n\n", nf__esc(e, sizeof(e), cmd));
    nf_cli_usage(stderr);
    return 2;
}

/* A standard descriptor the caller closed (`>&-`) is held by /dev/null opened
 * read-only, so that no file the run opens becomes "stdout" (its markers
 * written into an output or a lock), and writing to it fails: a run whose
 * stdout is closed fails before it commits, as with a full one. */
static void nf_hold_std_fds(void) {
    for (int fd = 0; fd <= 2; fd++) {
        if (fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
        const int h = open("/dev/null", O_RDONLY);
        if (h >= 0 && h != fd) { /* a lower one was closed too: it took that; dup onto fd */
            dup2(h, fd);
            if (h > 2) close(h);
        }
    }
}

int main(int argc, char ** argv) {
    nf_hold_std_fds();
    const int rc = nf_main(argc, argv);
    /* everything a command printed must have reached stdout (a full disk,
     * /dev/full, a closed pipe: an error, not a silent success) */
    if (!nf_cli_stdout_ok()) return rc ? rc : 1;
    return rc;
}
