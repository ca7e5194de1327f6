/* fuzz-config.c -- libFuzzer target: config.json as nf_model_load reads it:
 * the strict JSON front end, the model_type lookup, Mitra's config parser
 * and checks, and the weight-table expansion a valid config drives (the
 * names and shapes of the checkpoint it would demand). */
#include "io/nf-io.h"
#include "model.h"
#include "models/mitra-impl.h"

#include <cjson/cJSON.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    nf_err err;
    cJSON * doc = NULL;
    if (nf__json_parse((const char *) data, size, "config.json", &doc, &err) != NF_OK) return 0;
    const cJSON * type = cJSON_GetObjectItemCaseSensitive(doc, "model_type");
    if (cJSON_IsObject(doc) && (!type || (cJSON_IsString(type) && nf__model_find(type->valuestring)))) {
        struct nf_mitra_config cfg;
        if (nf__mitra_config_parse(doc, "config.json", &cfg, &err) == NF_OK && cfg.n_layers <= 64 && cfg.dim <= 4096) {
            struct nf_wkey * keys = NULL;
            int n = 0;
            if (nf__wtable_expand(&nf__mitra_wtable, &cfg, NULL, &keys, &n, &err) == NF_OK) free(keys);
        }
    }
    cJSON_Delete(doc);
    return 0;
}
