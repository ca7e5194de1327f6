/* mitra-weights.c -- the Tab2D state_dict as a weight table (spec §3), its
 * config.json, and deterministic synthetic checkpoints (spec §2-§3).
 *
 * Synthetic values follow the upstream init scales so activations look
 * realistic: nn.Linear weights/biases U(-1/sqrt(fan_in), +1/sqrt(fan_in))
 * (PyTorch's default), the x/y embeddings and y_mask N(0, 1)
 * (Tab2D.init_weights), and LayerNorm gamma = 1 + U(-0.1, 0.1),
 * beta = U(-0.1, 0.1) (perturbed from PyTorch's 1/0 so a swapped gamma/beta
 * is caught by the tests). */
#include "mitra-impl.h"
#include "model.h"
#include "io/nf-io.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int nf__mitra_class_labels(const struct nf_mitra_config * cfg) {
    return cfg->task == NF_TASK_CLASSIFICATION || cfg->dim_output > 1;
}

/* ---- the weight table ------------------------------------------------------------ */

static int64_t nf__mitra_dim(const void * c, char sym, const int * idx, int depth) {
    const struct nf_mitra_config * cfg = c;
    switch (sym) {
        case 'D': return cfg->dim;
        case 'C': return cfg->dim_output;
        case 'L': return cfg->n_layers;
        case 'K': return nf__mitra_class_labels(cfg);
        case 'V': return !nf__mitra_class_labels(cfg);
        default: return -1;
    }
}

#define M_(f) NF_WSLOT(struct nf_mitra, f)
#define L_(f) NF_WSLOT(struct nf_mitra_layer, f)
#define LN(n)                                                                                           \
    {"layers.%d.layer_norm" #n ".weight", "D", .init = NF_INIT_NORM_WEIGHT, .slot = L_(ln_w[n - 1])}, { \
        "layers.%d.layer_norm" #n ".bias", "D", .init = NF_INIT_NORM_BIAS, .slot = L_(ln_b[n - 1])      \
    }
/* projection p (0..3 = q, k, v, o) of attention a; q, k, v weights share
 * pack group 2a-1 and their biases 2a: [q; k; v] is one matrix */
#define PROJ(a, p, name, pk)                                                                           \
    {"layers.%d.attention" #a "." name ".weight", "D D", .fan_in = "D", .pack = (pk) ? 2 * (a) -1 : 0, \
     .slot = L_(aw[a - 1][p])},                                                                        \
    {                                                                                                  \
        "layers.%d.attention" #a "." name ".bias", "D", .fan_in = "D", .pack = (pk) ? 2 * (a) : 0,     \
                                                        .slot = L_(ab[a - 1][p])                       \
    }
#define LINEAR(n, out, in)                                                                \
    {"layers.%d.linear" #n ".weight", out " " in, .fan_in = in, .slot = L_(lw[n - 1])}, { \
        "layers.%d.linear" #n ".bias", out, .fan_in = in, .slot = L_(lb[n - 1])           \
    }
/* half h of a layer: (a)+(b) for h = 0, (c)+(d) for h = 1 */
#define HALF(a, ln_pre, ln_mlp, lin_up, lin_down)                                                           \
    LN(ln_pre), PROJ(a, 0, "q", 1), PROJ(a, 1, "k", 1), PROJ(a, 2, "v", 1), PROJ(a, 3, "o", 0), LN(ln_mlp), \
        LINEAR(lin_up, "4D", "D"), LINEAR(lin_down, "D", "4D")

static const struct nf_wentry nf__mitra_entries[] = {
    {"x_embedding.x_embedding.weight", "D 1", .init = NF_INIT_NORMAL, .slot = M_(x_w)},
    {"x_embedding.x_embedding.bias", "D", .init = NF_INIT_NORMAL, .slot = M_(x_b)},
    {"y_embedding.y_embedding.weight", "C D", .when = 'K', .init = NF_INIT_NORMAL, .slot = M_(y_w)},
    {"y_embedding.y_embedding.weight", "D 1", .when = 'V', .init = NF_INIT_NORMAL, .slot = M_(y_w)},
    {"y_embedding.y_embedding.bias", "D", .when = 'V', .init = NF_INIT_NORMAL, .slot = M_(y_b)},
    {"y_embedding.y_mask.weight", "1 D", .init = NF_INIT_NORMAL, .slot = M_(y_mask)},
    NF_WREPEAT('L', struct nf_mitra, layers, struct nf_mitra_layer),
    HALF(1, 1, 2, 1, 2),
    HALF(2, 3, 4, 3, 4),
    NF_WEND,
    {"final_layer_norm.weight", "D", .init = NF_INIT_NORM_WEIGHT, .slot = M_(fln_w)},
    {"final_layer_norm.bias", "D", .init = NF_INIT_NORM_BIAS, .slot = M_(fln_b)},
    {"final_layer.weight", "C D", .fan_in = "D", .slot = M_(f_w)},
    {"final_layer.bias", "C", .fan_in = "D", .slot = M_(f_b)},
};

const struct nf_wtable nf__mitra_wtable = {
    .model = "mitra",
    .entries = nf__mitra_entries,
    .n_entries = (int) (sizeof(nf__mitra_entries) / sizeof(nf__mitra_entries[0])),
    .dim = nf__mitra_dim,
};

/* ---- config.json -------------------------------------------------------------------- */

static const char * const nf__mitra_tasks[2] = {"CLASSIFICATION", "REGRESSION"};

int nf__mitra_config_check(const struct nf_mitra_config * cfg, const char * where, nf_err * err) {
    if (cfg->dim < 1 || cfg->n_heads < 1 || cfg->dim % cfg->n_heads != 0) {
        return nf__err_set(err, NF_ERR_CHECKPOINT, "%s: dim %d must be a positive multiple of n_heads %d", where,
                           cfg->dim, cfg->n_heads);
    }
    if (cfg->n_layers < 0 || cfg->n_layers > 4096)
        return nf__err_set(err, NF_ERR_CHECKPOINT, "%s: bad n_layers %d", where, cfg->n_layers);
    if (cfg->dim_output < 1)
        return nf__err_set(err, NF_ERR_CHECKPOINT, "%s: bad dim_output %d", where, cfg->dim_output);
    if (cfg->dim > 65536 || cfg->dim_output > 1000000)
        return nf__err_set(err, NF_ERR_CHECKPOINT, "%s: dim/dim_output too large", where);
    if (cfg->task != NF_TASK_CLASSIFICATION && cfg->task != NF_TASK_REGRESSION) {
        return nf__err_set(err, NF_ERR_CHECKPOINT, "%s: unknown task", where);
    }
    return NF_OK;
}

int nf__mitra_config_parse(const cJSON * doc, const char * path, struct nf_mitra_config * cfg, nf_err * err) {
    NF_TRY(nf__config_int(doc, "dim", path, &cfg->dim, err));
    NF_TRY(nf__config_int(doc, "dim_output", path, &cfg->dim_output, err));
    NF_TRY(nf__config_int(doc, "n_layers", path, &cfg->n_layers, err));
    NF_TRY(nf__config_int(doc, "n_heads", path, &cfg->n_heads, err));
    /* upstream looks the task up by enum member name: Task[cfg["task"]] */
    NF_TRY(nf__config_enum(doc, "task", path, nf__mitra_tasks, 2, &cfg->task, err));
    return nf__mitra_config_check(cfg, path, err);
}

int nf__mitra_config_write(const char * dir, const struct nf_mitra_config * cfg, nf_err * err) {
    char path[4096];
    nf__path_join(path, sizeof(path), dir, "config.json");
    cJSON * doc = cJSON_CreateObject();
    if (!doc) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    cJSON_AddNumberToObject(doc, "dim", cfg->dim);
    cJSON_AddNumberToObject(doc, "dim_output", cfg->dim_output);
    cJSON_AddNumberToObject(doc, "n_layers", cfg->n_layers);
    cJSON_AddNumberToObject(doc, "n_heads", cfg->n_heads);
    cJSON_AddStringToObject(doc, "task", nf__mitra_tasks[cfg->task]);
    int rc = nf__json_write_file(path, doc, err);
    cJSON_Delete(doc);
    return rc;
}

/* ---- gen-weights ------------------------------------------------------------------------ */

const struct nf_option_desc nf__mitra_gen_options[] = {
    {"dim", "model width (512)"},
    {"layers", "layers (12)"},
    {"heads", "attention heads (4)"},
    {"outputs", "classes, or regression outputs (10; 1 for --task regression)"},
    {"task", "classification|regression (classification)"},
    {NULL, NULL},
};

int nf__mitra_gen_weights(const char * dir, const char * ckpt_path, uint64_t seed, int n, const char * const * keys,
                          const char * const * values, const char * perturb_key, float perturb_delta, char * summary,
                          size_t summary_n, nf_err * err) {
    /* the official classifier's configuration unless told otherwise */
    struct nf_mitra_config cfg = {
        .dim = 512, .dim_output = 10, .n_layers = 12, .n_heads = 4, .task = NF_TASK_CLASSIFICATION};
    int outputs_given = 0;
    for (int i = 0; i < n; i++) {
        const char *k = keys[i], *v = values[i];
        if (strcmp(k, "dim") == 0)
            NF_TRY(nf__option_int(k, v, &cfg.dim, err));
        else if (strcmp(k, "layers") == 0)
            NF_TRY(nf__option_int(k, v, &cfg.n_layers, err));
        else if (strcmp(k, "heads") == 0)
            NF_TRY(nf__option_int(k, v, &cfg.n_heads, err));
        else if (strcmp(k, "outputs") == 0) {
            NF_TRY(nf__option_int(k, v, &cfg.dim_output, err));
            outputs_given = 1;
        } else if (strcmp(k, "task") == 0) {
            if (strcmp(v, "classification") == 0)
                cfg.task = NF_TASK_CLASSIFICATION;
            else if (strcmp(v, "regression") == 0)
                cfg.task = NF_TASK_REGRESSION;
            else
                return nf__err_set(err, NF_ERR_ARG, "--task must be classification or regression");
        } else {
            return nf__err_set(err, NF_ERR_ARG, "mitra has no option '%s'", k);
        }
    }
    if (cfg.task == NF_TASK_REGRESSION && !outputs_given) cfg.dim_output = 1;
    NF_TRY(nf__mitra_config_check(&cfg, "gen-weights", err));
    NF_TRY(nf__mkdir_p(dir, err));
    char path[4096];
    nf__path_join(path, sizeof(path), dir, "model.safetensors");
    NF_TRY(nf__weights_generate_ckpt(path, ckpt_path, &nf__mitra_wtable, &cfg, seed, perturb_key, perturb_delta, err));
    NF_TRY(nf__mitra_config_write(dir, &cfg, err));
    snprintf(summary, summary_n, "dim %d, layers %d, heads %d, outputs %d, %s", cfg.dim, cfg.n_layers, cfg.n_heads,
             cfg.dim_output, nf__mitra_tasks[cfg.task]);
    return NF_OK;
}
