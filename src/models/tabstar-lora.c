/* tabstar-lora.c -- a PEFT LoRA adapter merged into TabSTAR's loaded
 * weights, as peft's merge (LoraLayer.merge / merge_and_unload) computes it
 * (spec §8-§9): for every adapted Linear <module>,
 *     W <- W + scaling * (B · A),  scaling = lora_alpha / r
 * (lora_alpha / sqrt(r) with use_rslora), A = <module>.lora_A.weight (r, in),
 * B = <module>.lora_B.weight (out, r), read from DIR/adapter_model.safetensors
 * under "base_model.model.<module>.lora_{A,B}.weight"; DIR/adapter_config.json
 * gives r, lora_alpha and target_modules. Note: this is the merged model's
 * forward; upstream's unmerged CPU inference skips the out_proj adapters
 * (MultiheadAttention reads out_proj.weight) and, on the fused fast path, the
 * linear1/linear2 ones (spec §10.2). Refused: another peft_type, DoRA, a bias
 * other than "none", per-module rank/alpha patterns, modules_to_save, an
 * adapter key that matches no base Linear of TabSTAR, a module not among the
 * config's target_modules, lora_A/B on an Embedding (peft's Embedding
 * adapter is lora_embedding_A/B; it would not merge these). */
#include "tabstar-impl.h"
#include "io/nf-io.h"
#include "weights.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NF_LORA_PREFIX "base_model.model."

/* peft's target matching for a list: the module name equals a target or ends with "." + target */
static int nf__lora_matches(const cJSON * list, const char * module) {
    if (cJSON_IsString(list)) return -1; /* a regex: not supported */
    const cJSON * e;
    const size_t n = strlen(module);
    cJSON_ArrayForEach(e, list) {
        if (!cJSON_IsString(e)) continue;
        const size_t k = strlen(e->valuestring);
        if (strcmp(module, e->valuestring) == 0) return 1;
        if (n > k && module[n - k - 1] == '.' && strcmp(module + n - k, e->valuestring) == 0) return 1;
    }
    return 0;
}

static const struct nf_wkey * nf__lora_base(const struct nf_weights * w, const char * module) {
    char want[NF_W_NAME + 16];
    snprintf(want, sizeof(want), "%s.weight", module);
    for (int i = 0; i < w->n_keys; i++)
        if (strcmp(w->keys[i].name, want) == 0 && w->keys[i].slot && w->keys[i].ndim == 2) return &w->keys[i];
    return NULL;
}

int nf__tab_merge_adapter(nf_model * model, const char * dir, char * summary, size_t summary_n, nf_err * err) {
    if (!model || strcmp(model->iface->type, "tabstar") != 0)
        return nf__err_set(err, NF_ERR_ARG, "--adapter: only a TabSTAR model takes a LoRA adapter");
    nf_tab * m = model->impl;
    char cpath[4096], wpath[4096], e[512];
    nf__path_join(cpath, sizeof(cpath), dir, "adapter_config.json");
    nf__path_join(wpath, sizeof(wpath), dir, "adapter_model.safetensors");
    cJSON * cfg = NULL;
    NF_TRY(nf__json_read_file(cpath, &cfg, err));
    int rc = NF_OK;
    struct nf_safetensors st;
    memset(&st, 0, sizeof(st));
    float * W = NULL;
    const cJSON * pt = cJSON_GetObjectItemCaseSensitive(cfg, "peft_type");
    const cJSON * r_ = cJSON_GetObjectItemCaseSensitive(cfg, "r");
    const cJSON * al = cJSON_GetObjectItemCaseSensitive(cfg, "lora_alpha");
    const cJSON * tm = cJSON_GetObjectItemCaseSensitive(cfg, "target_modules");
    const cJSON * ex = cJSON_GetObjectItemCaseSensitive(cfg, "exclude_modules");
    const cJSON * bias = cJSON_GetObjectItemCaseSensitive(cfg, "bias");
    const cJSON * base = cJSON_GetObjectItemCaseSensitive(cfg, "base_model_name_or_path");
    if (!cJSON_IsString(pt) || strcmp(pt->valuestring, "LORA") != 0) {
        rc = nf__err_set(err, NF_ERR_CHECKPOINT, "%s: peft_type must be \"LORA\"", cpath);
        goto done;
    }
    if (!cJSON_IsNumber(r_) || r_->valueint < 1 || !cJSON_IsNumber(al)) {
        rc = nf__err_set(err, NF_ERR_CHECKPOINT, "%s: needs an integer r >= 1 and lora_alpha", cpath);
        goto done;
    }
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cfg, "use_dora")) ||
        (bias && !(cJSON_IsString(bias) && strcmp(bias->valuestring, "none") == 0)) ||
        cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(cfg, "rank_pattern")) > 0 ||
        cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(cfg, "alpha_pattern")) > 0 ||
        cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(cfg, "modules_to_save")) > 0 ||
        cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cfg, "fan_in_fan_out"))) {
        rc = nf__err_set(err, NF_ERR_CHECKPOINT,
                         "%s: only plain LoRA is supported (no DoRA, bias \"none\", no rank/alpha patterns, no "
                         "modules_to_save, fan_in_fan_out false)",
                         cpath);
        goto done;
    }
    if (!cJSON_IsArray(tm)) {
        rc = nf__err_set(err, NF_ERR_CHECKPOINT, "%s: target_modules must be a list (a regex is not supported)", cpath);
        goto done;
    }
    const int r = r_->valueint;
    const double scaling = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cfg, "use_rslora"))
                               ? al->valuedouble / sqrt((double) r)
                               : al->valuedouble / (double) r;
    if ((rc = nf__st_open(wpath, &st, err)) != NF_OK) goto done;
    const struct nf_weights * w = &m->weights;
    int merged = 0;
    for (int i = 0; i < st.n_tensors && rc == NF_OK; i++) {
        const struct nf_st_tensor * ta = &st.tensors[i];
        const char * nm = ta->name;
        const size_t n = strlen(nm), pl = strlen(NF_LORA_PREFIX), sl = strlen(".lora_A.weight");
        if (n > pl + sl && strcmp(nm + n - strlen(".lora_B.weight"), ".lora_B.weight") == 0 &&
            strncmp(nm, NF_LORA_PREFIX, pl) == 0)
            continue; /* taken with its A */
        if (!(n > pl + sl && strncmp(nm, NF_LORA_PREFIX, pl) == 0 && strcmp(nm + n - sl, ".lora_A.weight") == 0)) {
            rc = nf__err_set(err, NF_ERR_CHECKPOINT,
                             "%s: tensor '%s' is not a LoRA weight (base_model.model.<module>.lora_A/B.weight)", wpath,
                             nf__esc(e, sizeof(e), nm));
            break;
        }
        char module[NF_W_NAME + 1];
        const size_t ml = n - pl - sl;
        if (ml >= sizeof(module)) {
            rc = nf__err_set(err, NF_ERR_CHECKPOINT, "%s: '%s': no such module in TabSTAR", wpath,
                             nf__esc(e, sizeof(e), nm));
            break;
        }
        memcpy(module, nm + pl, ml);
        module[ml] = '\0';
        const struct nf_wkey * k = nf__lora_base(w, module);
        if (k && k->init != NF_INIT_UNIFORM) { /* an nn.Embedding: peft adapts it with lora_embedding_A/B */
            rc = nf__err_set(err, NF_ERR_CHECKPOINT,
                             "%s: '%s': %s is an Embedding, not a Linear (peft does not merge lora_A/B into it)", wpath,
                             nf__esc(e, sizeof(e), nm), module);
            break;
        }
        if (!k) {
            rc = nf__err_set(err, NF_ERR_CHECKPOINT,
                             "%s: '%s' matches no Linear of TabSTAR (an adapter for another model?)", wpath,
                             nf__esc(e, sizeof(e), nm));
            break;
        }
        if (nf__lora_matches(tm, module) != 1 || (ex && nf__lora_matches(ex, module) == 1)) {
            rc = nf__err_set(err, NF_ERR_CHECKPOINT, "%s: module '%s' is not among the config's target_modules", wpath,
                             module);
            break;
        }
        char bname[NF_W_NAME + 64];
        snprintf(bname, sizeof(bname), NF_LORA_PREFIX "%s.lora_B.weight", module);
        const struct nf_st_tensor * tb = nf__st_find(&st, bname);
        const int64_t out = k->shape[0], in = k->shape[1];
        if (!tb || ta->dtype != NF_ST_F32 || tb->dtype != NF_ST_F32 || ta->ndim != 2 || tb->ndim != 2 ||
            ta->shape[0] != r || ta->shape[1] != in || tb->shape[0] != out || tb->shape[1] != r) {
            rc = nf__err_set(err, NF_ERR_CHECKPOINT,
                             "%s: %s: needs F32 lora_A [%d, %lld] and lora_B [%lld, %d] (r = %d, %s is [%lld, %lld])",
                             wpath, module, r, (long long) in, (long long) out, r, r, k->name, (long long) out,
                             (long long) in);
            break;
        }
        const float * A = nf__st_data(&st, ta);
        const float * Bm = nf__st_data(&st, tb);
        W = realloc(W, (size_t) (out * in) * sizeof(float));
        if (!W) {
            rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
            break;
        }
        if ((rc = nf__tensor_download(k->slot, W, err)) != NF_OK) break;
        for (int64_t o = 0; o < out; o++) {
            for (int64_t c = 0; c < in; c++) {
                float ba = 0.0f; /* (B · A)[o][c] in fp32, then * scaling, then added: peft's order */
                for (int j = 0; j < r; j++) ba += Bm[o * r + j] * A[(int64_t) j * in + c];
                W[o * in + c] = W[o * in + c] + ba * (float) scaling;
            }
        }
        for (int64_t q = 0; q < out * in; q++) {
            if (!isfinite(W[q])) {
                rc = nf__err_set(err, NF_ERR_CHECKPOINT, "%s: merging %s gives non-finite weights", wpath, module);
                break;
            }
        }
        if (rc == NF_OK) rc = nf__tensor_upload(k->slot, W, err);
        merged++;
    }
    if (rc == NF_OK && merged == 0) rc = nf__err_set(err, NF_ERR_CHECKPOINT, "%s: no LoRA weights", wpath);
    if (rc == NF_OK) {
        snprintf(summary, summary_n, "%s: %d modules, r %d, lora_alpha %g, scaling %g%s%s", dir, merged, r,
                 al->valuedouble, scaling, cJSON_IsString(base) ? ", base " : "",
                 cJSON_IsString(base) ? base->valuestring : "");
        m->adapter_modules = merged;
    }
done:
    free(W);
    nf__st_close(&st);
    cJSON_Delete(cfg);
    return rc;
}
