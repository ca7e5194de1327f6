/* tokenize-json.c -- nofall-text.h's nf_tokenize_json: a JSON list of strings
 * through the WordPiece tokenizer (wordpiece.c) to token_ids.json. */
#include "nofall-text.h"
#include "nf-text.h"
#include "io/nf-io.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

int nf_tokenize_json(const char * model_dir, const char * strings_json, const char * out_dir, int * n_strings,
                     nf_err * err) {
    char vpath[4096], p[4096];
    nf__path_join(vpath, sizeof(vpath), model_dir, "vocab.txt");
    struct nf__wordpiece * wp = NULL;
    cJSON *doc = NULL, *res = NULL;
    int32_t ids[NF_TABSTAR_MAX_TOKENS];
    int rc = nf__wp_load(vpath, &wp, err);
    if (rc == NF_OK) rc = nf__json_read_data(strings_json, &doc, err);
    if (rc == NF_OK && !cJSON_IsArray(doc))
        rc = nf__err_set(err, NF_ERR_INPUT, "%s: must be a JSON list of strings", strings_json);
    if (rc == NF_OK && !(res = cJSON_CreateArray())) rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    int i = 0;
    for (const cJSON * s = doc ? doc->child : NULL; rc == NF_OK && s; s = s->next, i++) {
        if (!cJSON_IsString(s)) {
            rc = nf__err_set(err, NF_ERR_INPUT, "%s: item %d is not a string", strings_json, i);
            break;
        }
        char ctx[4200];
        snprintf(ctx, sizeof(ctx), "%s: item %d", strings_json, i);
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
    if (rc == NF_OK) rc = nf__mkdir_p(out_dir, err);
    if (rc == NF_OK) {
        nf__path_join(p, sizeof(p), out_dir, "token_ids.json");
        rc = nf__json_write_file(p, res, err); /* atomic: temp name, fsync, rename */
    }
    if (rc == NF_OK && n_strings) *n_strings = i;
    cJSON_Delete(res);
    cJSON_Delete(doc);
    nf__wp_free(wp);
    return rc;
}
