/* main.c -- `nofall`: run / verify / bench / devices / gen-weights / convert. */
#include "cli.h"
#include "io/nf-io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void nf_usage(FILE * f) {
    fprintf(
        f,
        "nofall %s -- strict-device inference for tabular foundation models\n"
        "\n"
        "usage:\n"
        "  nofall run --model DIR --out OUTDIR [--device cpu|opencl:N|cuda:N] [--seed 42]\n"
        "             [--support-x S.npy --support-y Y.npy --query-x Q.npy] [--precision exact|tf32]\n"
        "             [--trace FILE] [--chunk-rows ROWS] [--query-chunk ROWS]\n"
        "  nofall verify --model DIR --device DEV --against cpu|FIXTURE_DIR [--seeds 42,100,...]\n"
        "             [--samples N] [--max-abs 1e-3] [--mean-abs 1e-4] [--bisect[=always]] [--json FILE] [--trace FILE]\n"
        "  nofall bench --model DIR --device DEV [--warmup 2] [--runs 10] [--support N --query M --features F]\n"
        "             [--precision exact|tf32] [--json FILE] [--trace FILE] [--query-chunk ROWS --kv-cache-mb MB]\n"
        "  nofall predict --model DIR --train TRAIN.csv --test TEST.csv --target COL --out OUTDIR\n"
        "             [--task auto|classification|regression] [--n-estimators 1] [--seed 0] [--no-mirror] [--device D]\n"
        "             [--mirror-signs FILE (a report.json, or {columns_kept, mirror_signs[, regression_mirror]})]\n"
        "             [--query-chunk ROWS]\n"
        "  nofall predict --model TABSTAR_DIR [--adapter DIR] --train TRAIN.csv --test TEST.csv --target COL --out OUTDIR\n"
        "             [--task auto|classification|regression] [--device D]\n"
        "  nofall devices\n"
        "  nofall gen-weights mitra --out DIR [--seed N] [--dim D --layers L --heads H --outputs C\n"
        "             --task classification|regression] [--perturb KEY:DELTA]\n"
        "  nofall gen-weights sptransformer --out DIR [--seed N] [--dim D --depth L --tissues T --context C\n"
        "             --window W] [--format safetensors|ckpt] [--perturb KEY:DELTA]\n"
        "  SpTransformer (M = DIR or X.ckpt):\n"
        "  nofall run --model M --out OUTDIR [--device D] [--seed 42 --length 128 | --tokens T.npy\n"
        "             | --sequence ACGU... | --fasta F.fa [--region chr:start-end]] [--context pad|given] [--trace FILE]\n"
        "  nofall verify --model M --device DEV --against cpu|FIXTURE_DIR [--seeds 42,100,101] [--samples N]\n"
        "             [--max-abs 1e-4] [--mean-abs 1e-5] [--bisect[=always]] [--json FILE]\n"
        "  nofall bench --model M --device DEV [--length 8201] [--batch 1] [--warmup 2] [--runs 10]\n"
        "  nofall convert --model X.ckpt --out DIR [--config FILE]   (torch.save checkpoint -> DIR/model.safetensors)\n"
        "  nofall annotate --model M --vcf IN.vcf[.gz]|.bcf --fasta REF.fa[.gz] --genes GENES.gtf[.gz]\n"
        "             --out OUT.vcf|OUT.tsv|OUT.csv [--raw-score] [--protein-coding] [--batch 16] [--no-reuse] [--device D]\n"
        "  TabSTAR (DIR with config.json, model.safetensors, vocab.txt):\n"
        "  nofall gen-weights tabstar --out DIR [--seed N] [--layers 12] [--vocab 30522]\n"
        "  nofall run --model DIR --out OUTDIR [--device D] [--adapter LORA_DIR] [--cells CELLS.json | --seed 42]\n"
        "  nofall verify --model DIR --device DEV --against cpu|CASE_DIR [--adapter A] [--cells C.json]\n"
        "  nofall bench --model DIR --device DEV [--cells C.json] [--adapter A] [--warmup 2] [--runs 10]\n"
        "  nofall tokenize --model DIR --strings S.json --out OUT   (OUT/token_ids.json)\n",
        NF_VERSION);
}

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
    enum { NF_GEN_MAX_OPTS = 32 };
    const char *keys[NF_GEN_MAX_OPTS], *values[NF_GEN_MAX_OPTS];
    int n = 0;
    const char *out = NULL, *perturb = NULL, *format = "safetensors";
    static char key[128];
    float delta = 0.0f;
    uint64_t seed = 0;
    int64_t n64;
    for (int i = 2; i < argc; i++) {
        const char * a = argv[i];
        int known = strcmp(a, "--out") == 0 || strcmp(a, "--seed") == 0 || strcmp(a, "--perturb") == 0 ||
                    strcmp(a, "--format") == 0;
        for (int k = 0; !known && nf_model_type_gen_option(type, k, NULL); k++) {
            known = strncmp(a, "--", 2) == 0 && strcmp(a + 2, nf_model_type_gen_option(type, k, NULL)) == 0;
        }
        if (!known) {
            char e[256];
            fprintf(stderr, "error: unknown option %s\n", nf__esc(e, sizeof(e), a));
            return 2;
        }
        const char * v = nf_cli_need_value(argc, argv, &i);
        if (!v) return 2;
        if (strcmp(a, "--out") == 0)
            out = v;
        else if (strcmp(a, "--format") == 0) {
            if (strcmp(v, "safetensors") != 0 && strcmp(v, "ckpt") != 0) {
                char e[256];
                fprintf(stderr, "error: --format takes safetensors or ckpt, not '%s'\n", nf__esc(e, sizeof(e), v));
                return 2;
            }
            if (strcmp(v, "ckpt") == 0 && !nf_model_type_ckpt_name(type)) {
                fprintf(stderr, "error: --format ckpt: %s has no torch.save checkpoint form\n", type);
                return 2;
            }
            format = v;
        } else if (strcmp(a, "--seed") == 0) {
            if (!nf_cli_parse_int(a, v, 0, NF_CLI_SEED_MAX, &n64)) return 2;
            seed = (uint64_t) n64;
        } else if (strcmp(a, "--perturb") == 0) {
            /* KEY:DELTA -- add DELTA to every element of KEY (bisect tests) */
            const char * colon = strrchr(v, ':');
            if (!colon || colon == v || (size_t) (colon - v) >= sizeof(key)) {
                fprintf(stderr, "error: --perturb takes KEY:DELTA\n");
                return 2;
            }
            memcpy(key, v, (size_t) (colon - v));
            key[colon - v] = '\0';
            perturb = key;
            double d;
            if (!nf_cli_parse_double("--perturb DELTA", colon + 1, -1e30, 1e30, &d)) return 2;
            delta = (float) d;
        } else {
            if (n == NF_GEN_MAX_OPTS) {
                fprintf(stderr, "error: too many options\n");
                return 2;
            }
            keys[n] = a + 2;
            values[n++] = v;
        }
    }
    if (!out) {
        fprintf(stderr, "error: gen-weights needs --out DIR\n");
        return 2;
    }
    nf_err err = {0};
    char summary[256] = "";
    int rc = nf_model_gen_weights_full(type, out, format, seed, n, keys, values, perturb, delta, summary,
                                       sizeof(summary), &err);
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

static int nf_main(int argc, char ** argv) {
    if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        nf_usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    const char * cmd = argv[1];
    if (strcmp(cmd, "run") == 0) return nf_cmd_run(argc - 1, argv + 1);
    if (strcmp(cmd, "verify") == 0) return nf_cmd_verify(argc - 1, argv + 1);
    if (strcmp(cmd, "bench") == 0) return nf_cmd_bench(argc - 1, argv + 1);
    if (strcmp(cmd, "gen-weights") == 0) return nf_cmd_gen_weights(argc - 1, argv + 1);
    if (strcmp(cmd, "convert") == 0) return nf_cmd_convert(argc - 1, argv + 1);
    if (strcmp(cmd, "predict") == 0) return nf_cmd_predict(argc - 1, argv + 1);
    if (strcmp(cmd, "annotate") == 0) return nf_cmd_annotate(argc - 1, argv + 1);
    if (strcmp(cmd, "tokenize") == 0) return nf_cmd_tokenize(argc - 1, argv + 1);
    if (strcmp(cmd, "devices") == 0) {
        nf_err err = {0};
        char * text = nf_devices_describe(&err);
        if (!text) {
            fprintf(stderr, "error: %s\n", err.msg);
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
    if (strcmp(cmd, "--version") == 0) {
        printf("nofall %s\n", NF_VERSION);
        return 0;
    }
    fprintf(stderr, "error: unknown command '%s'\n\n", cmd);
    nf_usage(stderr);
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
