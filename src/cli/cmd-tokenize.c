/* cmd-tokenize.c -- `nofall tokenize` (TabSTAR's WordPiece tokenizer). */
#include "cli.h"
#include "opts.h"
#include "io/nf-io.h"
#include "text/nf-text.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* `nofall tokenize --model DIR --strings S.json --out OUT`: a JSON list of
 * strings -> OUT/token_ids.json, a list of id lists ([CLS] ... [SEP],
 * truncated at 512), as BertTokenizerFast with e5-small-v2's settings gives
 * them; the vocabulary is DIR/vocab.txt. Nothing is written on an error. */
static int nf_tokenize_main(const char * model, const char * strings, const char * out, nf_err * err) {
    char vpath[4096], p[4096];
    nf__path_join(vpath, sizeof(vpath), model, "vocab.txt");
    struct nf__wordpiece * wp = NULL;
    cJSON *doc = NULL, *res = NULL;
    int32_t ids[NF_TABSTAR_MAX_TOKENS];
    int rc = nf__wp_load(vpath, &wp, err);
    if (rc == NF_OK) rc = nf__json_read_data(strings, &doc, err);
    if (rc == NF_OK && !cJSON_IsArray(doc))
        rc = nf__err_set(err, NF_ERR_INPUT, "%s: must be a JSON list of strings", strings);
    if (rc == NF_OK && !(res = cJSON_CreateArray())) rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    int i = 0;
    for (const cJSON * s = doc ? doc->child : NULL; rc == NF_OK && s; s = s->next, i++) {
        if (!cJSON_IsString(s)) {
            rc = nf__err_set(err, NF_ERR_INPUT, "%s: item %d is not a string", strings, i);
            break;
        }
        char ctx[4200];
        snprintf(ctx, sizeof(ctx), "%s: item %d", strings, i);
        int n = 0;
        rc = nf__wp_encode(wp, s->valuestring, strlen(s->valuestring), NF_TABSTAR_MAX_TOKENS, ids, &n, ctx, NULL, err);
        if (rc != NF_OK) break;
        cJSON * row = cJSON_CreateArray();
        for (int j = 0; row && j < n; j++) cJSON_AddItemToArray(row, cJSON_CreateNumber(ids[j]));
        if (!row)
            rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
        else
            cJSON_AddItemToArray(res, row);
    }
    if (rc == NF_OK) rc = nf__mkdir_p(out, err);
    if (rc == NF_OK) {
        nf__path_join(p, sizeof(p), out, "token_ids.json");
        rc = nf__json_write_file(p, res, err); /* atomic: temp name, fsync, rename */
        if (rc == NF_OK) printf("TOKENIZED=%d\n", i);
    }
    cJSON_Delete(res);
    cJSON_Delete(doc);
    nf__wp_free(wp);
    return rc;
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
    return nf_cli_command_exit(nf_tokenize_main(model, strings, out, &err), &err);
}
