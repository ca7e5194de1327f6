/* mitra-weights.c -- deterministic synthetic Mitra checkpoints with the
 * official layout (config.json + model.safetensors, spec §2-§3).
 *
 * Values follow the upstream init scales so activations look realistic:
 * nn.Linear weights/biases U(-1/sqrt(fan_in), +1/sqrt(fan_in)) (PyTorch's
 * default), the x/y embeddings and y_mask N(0, 1) (Tab2D.init_weights), and
 * LayerNorm gamma = 1 + U(-0.1, 0.1), beta = U(-0.1, 0.1) (perturbed from
 * PyTorch's 1/0 so a swapped gamma/beta is caught by the tests). Only integer
 * arithmetic, IEEE sqrt and exact float ops are used: the same seed gives the
 * same bytes on every machine. */
#include "mitra-impl.h"
#include "io/nf-io.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* approximately N(0, 1): Irwin-Hall sum of 12 uniforms minus 6 */
static float nf__normal(uint64_t * s) {
    float acc = 0.0f;
    for (int i = 0; i < 12; i++) acc += nf__rng_unif(s);
    return acc - 6.0f;
}

static int nf__write_config(const char * dir, const struct nf_mitra_config * cfg, nf_err * err) {
    char path[4096];
    nf__path_join(path, sizeof(path), dir, "config.json");
    cJSON * doc = cJSON_CreateObject();
    if (!doc) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    cJSON_AddNumberToObject(doc, "dim", cfg->dim);
    cJSON_AddNumberToObject(doc, "dim_output", cfg->dim_output);
    cJSON_AddNumberToObject(doc, "n_layers", cfg->n_layers);
    cJSON_AddNumberToObject(doc, "n_heads", cfg->n_heads);
    cJSON_AddStringToObject(doc, "task", cfg->task == NF_TASK_CLASSIFICATION ? "CLASSIFICATION" : "REGRESSION");
    int rc = nf__json_write_file(path, doc, err);
    cJSON_Delete(doc);
    return rc;
}

int nf_mitra_gen_weights(const char * dir, const struct nf_mitra_config * cfg, uint64_t seed, nf_err * err) {
    return nf__mitra_gen_weights_ex(dir, cfg, seed, NULL, 0.0f, err);
}

int nf__mitra_gen_weights_ex(const char * dir, const struct nf_mitra_config * cfg, uint64_t seed,
                             const char * perturb_key, float perturb_delta, nf_err * err) {
    NF_TRY(nf__mitra_config_check(cfg, "gen-weights", err));
    NF_TRY(nf__mkdir_p(dir, err));
    const int n = nf__mitra_key_count(cfg);
    struct nf_mitra_key * keys = calloc((size_t) n, sizeof(*keys));
    struct nf_st_entry * ents = calloc((size_t) n, sizeof(*ents));
    float ** data = calloc((size_t) n, sizeof(*data));
    int rc = NF_OK;
    if (!keys || !ents || !data) { rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory"); goto done; }
    nf__mitra_keys(cfg, keys);
    for (int i = 0; i < n && rc == NF_OK; i++) {
        const struct nf_mitra_key * k = &keys[i];
        const int64_t numel = k->shape[0] * (k->ndim == 2 ? k->shape[1] : 1);
        float * d = malloc((size_t) (numel ? numel : 1) * sizeof(float));
        if (!d) { rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory for %s", k->name); break; }
        data[i] = d;
        uint64_t s = seed * 0x100000001B3ull + (uint64_t) i * 0x9E3779B97F4A7C15ull + 1;
        const int embedding = strncmp(k->name, "x_embedding.", 12) == 0 || strncmp(k->name, "y_embedding.", 12) == 0;
        const float bound = k->fan_in > 0 ? 1.0f / sqrtf((float) k->fan_in) : 0.0f;
        for (int64_t e = 0; e < numel; e++) {
            float v;
            if (embedding || k->init == 1) v = nf__normal(&s);
            else if (k->init == 2)         v = 1.0f + 0.1f * (2.0f * nf__rng_unif(&s) - 1.0f);
            else if (k->init == 3)         v = 0.1f * (2.0f * nf__rng_unif(&s) - 1.0f);
            else                           v = bound * (2.0f * nf__rng_unif(&s) - 1.0f);
            d[e] = v;
        }
        if (perturb_key && strcmp(perturb_key, k->name) == 0) {
            for (int64_t e = 0; e < numel; e++) d[e] += perturb_delta;
            perturb_key = NULL;   /* found */
        }
        ents[i].name = k->name;
        ents[i].ndim = k->ndim;
        ents[i].shape[0] = k->shape[0];
        ents[i].shape[1] = k->shape[1];
        ents[i].data = d;
    }
    if (rc == NF_OK && perturb_key) rc = nf__err_set(err, NF_ERR_ARG, "--perturb: no tensor named '%s' in this config", perturb_key);
    if (rc == NF_OK) {
        char path[4096];
        nf__path_join(path, sizeof(path), dir, "model.safetensors");
        rc = nf__st_write(path, ents, n, err);
    }
    if (rc == NF_OK) rc = nf__write_config(dir, cfg, err);
done:
    if (data) for (int i = 0; i < n; i++) free(data[i]);
    free(data);
    free(ents);
    free(keys);
    return rc;
}
