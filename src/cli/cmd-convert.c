/* cmd-convert.c -- `nofall convert --model X.ckpt --out DIR [--config FILE]`:
 * a PyTorch torch.save checkpoint (read by the restricted unpickler of
 * src/io/torch-ckpt.c; nothing in it is executed) to DIR/model.safetensors
 * with the same names, dtypes, shapes and bytes. The whole checkpoint is read
 * and checked before anything is written; DIR is an output set (staging
 * directory, lock, swap: nothing is left of a failed run). A .ckpt holds no config.json: --config FILE copies one
 * (parsed first, so it must be JSON), otherwise a note says to supply it.
 * And `nofall tokenize --model DIR --strings S.json --out OUT`: TabSTAR's
 * WordPiece tokenizer over a JSON list of strings (nofall-text.h
 * nf_tokenize_json: OUT/token_ids.json); TOKENIZED=N and EXIT_CODE on stdout. */
#include "cli.h"
#include "opts.h"
#include "io/nf-io.h"
#include "nofall-text.h"

#include <cjson/cJSON.h>
#include <string.h>

int nf_cmd_convert(int argc, char ** argv) {
    struct nf_cli_opts v;
    if (!nf_cli_opts_parse(NF_M(CONVERT), argc, argv, 1, NULL, &v)) return 2;
    const char * model = nf_cli_opt_str(&v, NF_O_MODEL, NULL);
    const char * out = nf_cli_opt_str(&v, NF_O_OUT_DIR, NULL);
    const char * config = nf_cli_opt_str(&v, NF_O_CONFIG, NULL);
    if (!model || !out) {
        fprintf(stderr, "error: convert needs --model X.ckpt and --out DIR\n");
        return 2;
    }

    /* SIGINT/SIGTERM/SIGHUP/SIGQUIT remove the staging directory and the lock,
     * and wait while the swap runs (without it a signal left both behind) */
    nf_out_signals_install();
    nf_err err = {0};
    struct nf_ckpt ck;
    struct nf_safetensors st;
    memset(&st, 0, sizeof(st));
    cJSON * cfg = NULL;
    char path[4096], stage[4096];
    int rc = nf__ckpt_open(model, &ck, &err);
    if (rc != NF_OK) {
        fprintf(stderr, "error: %s (%s)\n", err.msg, nf_result_name(rc));
        return 1;
    }
    /* DIR is one output set (README "Output sets"): both files are written in
     * a staging directory and swapped in together, so a failure (a full disk,
     * config.json unwritable, a signal) leaves the previous DIR -- or none. */
    static const char * const names[] = {"model.safetensors", "config.json"};
    struct nf_outset os;
    int began = 0;
    rc = nf__ckpt_to_st(&ck, &st, &err); /* every byte read and CRC-checked */
    if (rc == NF_OK && config) rc = nf__json_read_file(config, &cfg, &err);
    if (rc == NF_OK) {
        rc = nf_outset_begin(&os, out, names, cfg ? 2 : 1, &err);
        began = 1;
    }
    nf__path_join(path, sizeof(path), out, "model.safetensors");
    if (rc == NF_OK) {
        nf_outset_path(&os, "model.safetensors", stage, sizeof(stage));
        rc = nf__st_write_view(stage, &st, &err);
    }
    if (rc == NF_OK && cfg) {
        nf_outset_path(&os, "config.json", stage, sizeof(stage));
        rc = nf__json_write_file(stage, cfg, &err);
    }
    nf_out_test_delay("write");
    if (rc == NF_OK) {
        int64_t bytes = 0;
        for (int i = 0; i < st.n_tensors; i++) bytes += (int64_t) (st.tensors[i].end - st.tensors[i].begin);
        printf("wrote %s (%d tensors, %lld bytes, from %s%s; zip folder '%s/')\n", path, st.n_tensors,
               (long long) bytes, ck.dict[0] ? "the checkpoint's " : "the checkpoint's root dict", ck.dict, ck.prefix);
        if (cfg)
            printf("wrote %s/config.json (from %s)\n", out, config);
        else
            printf("note: a .ckpt carries no config.json: put the model's config.json in %s (or pass --config FILE)\n",
                   out);
        /* what stdout says reaches it before the new files replace the old */
        if (!nf_cli_stdout_ok())
            rc = nf__err_set(&err, NF_ERR_IO, "standard output could not be written; %s is left as it was", out);
    }
    if (rc == NF_OK) rc = nf_outset_commit(&os, NULL, &err);
    if (rc != NF_OK) fprintf(stderr, "error: %s (%s)\n", err.msg, nf_result_name(rc));
    if (began) nf_outset_end(&os);
    cJSON_Delete(cfg);
    nf__st_close(&st);
    nf__ckpt_close(&ck);
    return rc == NF_OK ? 0 : 1;
}

int nf_cmd_tokenize(int argc, char ** argv) {
    struct nf_cli_opts v;
    if (!nf_cli_opts_parse(NF_M(TOKENIZE), argc, argv, 1, NULL, &v)) return 2;
    const char * model = nf_cli_opt_str(&v, NF_O_MODEL, NULL);
    const char * strings = nf_cli_opt_str(&v, NF_O_STRINGS, NULL);
    const char * out = nf_cli_opt_str(&v, NF_O_OUT_DIR, NULL);
    if (!model || !strings || !out) {
        fprintf(stderr, "error: tokenize needs --model DIR --strings S.json --out OUT\n");
        return 2;
    }
    nf_err err = {0};
    int n = 0;
    const int rc = nf_tokenize_json(model, strings, out, &n, &err);
    if (rc == NF_OK) printf("TOKENIZED=%d\n", n);
    return nf_cli_command_exit(rc, &err);
}
