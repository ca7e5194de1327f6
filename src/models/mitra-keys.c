/* mitra-keys.c -- the Tab2D state_dict key set implied by a config (spec §3). */
#include "mitra-impl.h"

#include <stdio.h>
#include <string.h>

int nf__mitra_class_labels(const struct nf_mitra_config * cfg) {
    return cfg->task == NF_TASK_CLASSIFICATION || cfg->dim_output > 1;
}

int nf__mitra_config_check(const struct nf_mitra_config * cfg, const char * where, nf_err * err) {
    if (cfg->dim < 1 || cfg->n_heads < 1 || cfg->dim % cfg->n_heads != 0) {
        return nf__err_set(err, NF_ERR_CHECKPOINT, "%s: dim %d must be a positive multiple of n_heads %d", where, cfg->dim, cfg->n_heads);
    }
    if (cfg->n_layers < 0 || cfg->n_layers > 4096) return nf__err_set(err, NF_ERR_CHECKPOINT, "%s: bad n_layers %d", where, cfg->n_layers);
    if (cfg->dim_output < 1) return nf__err_set(err, NF_ERR_CHECKPOINT, "%s: bad dim_output %d", where, cfg->dim_output);
    if (cfg->dim > 65536 || cfg->dim_output > 1000000) return nf__err_set(err, NF_ERR_CHECKPOINT, "%s: dim/dim_output too large", where);
    if (cfg->task != NF_TASK_CLASSIFICATION && cfg->task != NF_TASK_REGRESSION) {
        return nf__err_set(err, NF_ERR_CHECKPOINT, "%s: unknown task", where);
    }
    return NF_OK;
}

int nf__mitra_key_count(const struct nf_mitra_config * cfg) {
    return 4 + 32 * cfg->n_layers + 4 + (nf__mitra_class_labels(cfg) ? 0 : 1);
}

static void nf__key(struct nf_mitra_key * out, int * n, const char * name, int ndim, int64_t a, int64_t b, int init, int64_t fan_in) {
    struct nf_mitra_key * k = &out[(*n)++];
    snprintf(k->name, sizeof(k->name), "%s", name);
    k->ndim = ndim;
    k->shape[0] = a;
    k->shape[1] = b;
    k->init = init;
    k->fan_in = fan_in;
}

int nf__mitra_keys(const struct nf_mitra_config * cfg, struct nf_mitra_key * out) {
    const int64_t D = cfg->dim, C = cfg->dim_output;
    int n = 0;
    char nm[64];
    nf__key(out, &n, "x_embedding.x_embedding.weight", 2, D, 1, 0, 1);
    nf__key(out, &n, "x_embedding.x_embedding.bias", 1, D, 0, 0, 1);
    if (nf__mitra_class_labels(cfg)) {
        nf__key(out, &n, "y_embedding.y_embedding.weight", 2, C, D, 1, 0);
    } else {
        nf__key(out, &n, "y_embedding.y_embedding.weight", 2, D, 1, 0, 1);
        nf__key(out, &n, "y_embedding.y_embedding.bias", 1, D, 0, 0, 1);
    }
    nf__key(out, &n, "y_embedding.y_mask.weight", 2, 1, D, 1, 0);
    static const char * const attn[2] = {"attention1", "attention2"};
    static const char * const proj[4] = {"q", "k", "v", "o"};
    for (int l = 0; l < cfg->n_layers; l++) {
        for (int half = 0; half < 2; half++) {
            snprintf(nm, sizeof(nm), "layers.%d.layer_norm%d.weight", l, 1 + 2 * half); nf__key(out, &n, nm, 1, D, 0, 2, 0);
            snprintf(nm, sizeof(nm), "layers.%d.layer_norm%d.bias", l, 1 + 2 * half);   nf__key(out, &n, nm, 1, D, 0, 3, 0);
            for (int p = 0; p < 4; p++) {
                snprintf(nm, sizeof(nm), "layers.%d.%s.%s.weight", l, attn[half], proj[p]); nf__key(out, &n, nm, 2, D, D, 0, D);
                snprintf(nm, sizeof(nm), "layers.%d.%s.%s.bias", l, attn[half], proj[p]);   nf__key(out, &n, nm, 1, D, 0, 0, D);
            }
            snprintf(nm, sizeof(nm), "layers.%d.layer_norm%d.weight", l, 2 + 2 * half); nf__key(out, &n, nm, 1, D, 0, 2, 0);
            snprintf(nm, sizeof(nm), "layers.%d.layer_norm%d.bias", l, 2 + 2 * half);   nf__key(out, &n, nm, 1, D, 0, 3, 0);
            snprintf(nm, sizeof(nm), "layers.%d.linear%d.weight", l, 1 + 2 * half); nf__key(out, &n, nm, 2, 4 * D, D, 0, D);
            snprintf(nm, sizeof(nm), "layers.%d.linear%d.bias", l, 1 + 2 * half);   nf__key(out, &n, nm, 1, 4 * D, 0, 0, D);
            snprintf(nm, sizeof(nm), "layers.%d.linear%d.weight", l, 2 + 2 * half); nf__key(out, &n, nm, 2, D, 4 * D, 0, 4 * D);
            snprintf(nm, sizeof(nm), "layers.%d.linear%d.bias", l, 2 + 2 * half);   nf__key(out, &n, nm, 1, D, 0, 0, 4 * D);
        }
    }
    nf__key(out, &n, "final_layer_norm.weight", 1, D, 0, 2, 0);
    nf__key(out, &n, "final_layer_norm.bias", 1, D, 0, 3, 0);
    nf__key(out, &n, "final_layer.weight", 2, C, D, 0, D);
    nf__key(out, &n, "final_layer.bias", 1, C, 0, 0, D);
    return n;
}
