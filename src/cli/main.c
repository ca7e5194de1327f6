/* main.c -- `nofall`: run / verify / bench / devices / gen-weights. */
#include "cli.h"
#include "models/mitra-impl.h"

#include <stdlib.h>
#include <string.h>

static void nf_usage(FILE * f) {
    fprintf(f,
        "nofall %s -- strict-device inference for tabular foundation models\n"
        "\n"
        "usage:\n"
        "  nofall run --model DIR --out OUTDIR [--device cpu|opencl:N|cuda:N] [--seed 42]\n"
        "             [--support-x S.npy --support-y Y.npy --query-x Q.npy] [--precision exact|tf32]\n"
        "             [--trace FILE] [--chunk-rows ROWS]\n"
        "  nofall verify --model DIR --device DEV --against cpu|FIXTURE_DIR [--seeds 42,100,...]\n"
        "             [--samples N] [--max-abs 1e-3] [--mean-abs 1e-4] [--bisect[=always]] [--json FILE] [--trace FILE]\n"
        "  nofall bench --model DIR --device DEV [--warmup 2] [--runs 10] [--support N --query M --features F]\n"
        "             [--precision exact|tf32] [--json FILE] [--trace FILE]\n"
        "  nofall devices\n"
        "  nofall gen-weights mitra --out DIR [--seed N] [--dim D --layers L --heads H --outputs C\n"
        "             --task classification|regression] [--perturb KEY:DELTA]\n", NF_VERSION);
}

static int nf_cmd_gen_weights(int argc, char ** argv) {
    if (argc < 2 || strcmp(argv[1], "mitra") != 0) {
        fprintf(stderr, "error: gen-weights needs a model name (only 'mitra' is available)\n");
        return 2;
    }
    struct nf_mitra_config cfg = {.dim = 512, .dim_output = 10, .n_layers = 12, .n_heads = 4, .task = NF_TASK_CLASSIFICATION};
    int outputs_given = 0;
    const char * out = NULL, * perturb = NULL;
    float delta = 0.0f;
    uint64_t seed = 0;
    for (int i = 2; i < argc; i++) {
        const char * a = argv[i];
        const char * v = NULL;
        if (strcmp(a, "--out") == 0 || strcmp(a, "--seed") == 0 || strcmp(a, "--dim") == 0 || strcmp(a, "--layers") == 0 ||
            strcmp(a, "--heads") == 0 || strcmp(a, "--outputs") == 0 || strcmp(a, "--task") == 0 || strcmp(a, "--perturb") == 0) {
            if (!(v = nf_cli_need_value(argc, argv, &i))) return 2;
        } else {
            fprintf(stderr, "error: unknown option %s\n", a);
            return 2;
        }
        if      (strcmp(a, "--out") == 0)     out = v;
        else if (strcmp(a, "--seed") == 0)    seed = strtoull(v, NULL, 10);
        else if (strcmp(a, "--dim") == 0)     cfg.dim = atoi(v);
        else if (strcmp(a, "--layers") == 0)  cfg.n_layers = atoi(v);
        else if (strcmp(a, "--heads") == 0)   cfg.n_heads = atoi(v);
        else if (strcmp(a, "--outputs") == 0) { cfg.dim_output = atoi(v); outputs_given = 1; }
        else if (strcmp(a, "--perturb") == 0) {
            /* KEY:DELTA -- add DELTA to every element of KEY (bisect tests) */
            static char key[128];
            const char * colon = strrchr(v, ':');
            if (!colon || colon == v || (size_t) (colon - v) >= sizeof(key)) { fprintf(stderr, "error: --perturb takes KEY:DELTA\n"); return 2; }
            memcpy(key, v, (size_t) (colon - v));
            key[colon - v] = '\0';
            perturb = key;
            delta = strtof(colon + 1, NULL);
        }
        else if (strcmp(a, "--task") == 0) {
            if (strcmp(v, "classification") == 0) cfg.task = NF_TASK_CLASSIFICATION;
            else if (strcmp(v, "regression") == 0) cfg.task = NF_TASK_REGRESSION;
            else { fprintf(stderr, "error: --task must be classification or regression\n"); return 2; }
        }
    }
    if (!out) { fprintf(stderr, "error: gen-weights needs --out DIR\n"); return 2; }
    if (cfg.task == NF_TASK_REGRESSION && !outputs_given) cfg.dim_output = 1;
    nf_err err = {0};
    int rc = nf__mitra_gen_weights_ex(out, &cfg, seed, perturb, delta, &err);
    if (rc != NF_OK) {
        fprintf(stderr, "error: %s (%s)\n", err.msg, nf_result_name(rc));
        return 1;
    }
    printf("wrote %s/config.json and %s/model.safetensors (dim %d, layers %d, heads %d, outputs %d, %s, seed %llu)\n",
           out, out, cfg.dim, cfg.n_layers, cfg.n_heads, cfg.dim_output,
           cfg.task == NF_TASK_CLASSIFICATION ? "CLASSIFICATION" : "REGRESSION", (unsigned long long) seed);
    return 0;
}

int main(int argc, char ** argv) {
    if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        nf_usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    const char * cmd = argv[1];
    if (strcmp(cmd, "run") == 0)         return nf_cmd_run(argc - 1, argv + 1);
    if (strcmp(cmd, "verify") == 0)      return nf_cmd_verify(argc - 1, argv + 1);
    if (strcmp(cmd, "bench") == 0)       return nf_cmd_bench(argc - 1, argv + 1);
    if (strcmp(cmd, "gen-weights") == 0) return nf_cmd_gen_weights(argc - 1, argv + 1);
    if (strcmp(cmd, "devices") == 0)     { nf_devices_print(stdout); return 0; }
    if (strcmp(cmd, "--version") == 0)   { printf("nofall %s\n", NF_VERSION); return 0; }
    fprintf(stderr, "error: unknown command '%s'\n\n", cmd);
    nf_usage(stderr);
    return 2;
}
