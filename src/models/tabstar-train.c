/* tabstar-train.c -- TabSTAR's LoRA arenas, the optimizer update (global-norm
 * clipping + AdamW), the merge into the loaded weights and the device check
 * (tabstar-train.h; spec shared/specs/finetune.md §3.2-§3.3). The training
 * forward and backward are in tabstar-train-step.c.
 *
 * The arena: for every adapted module, in the order of nf__tab_train_module,
 * A (r, in) then B (out, r), row-major; four arenas of the same layout on
 * the model's device: the parameters, the gradient, Adam's m and v. */
#include "tabstar-train-impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

nf_tensor nf__tt_a(const struct nf_tab_train * t, int a, int i) {
    const struct nf_tab_lora_module * md = &t->mod[i];
    const int64_t ne[2] = {NF_TAB_LORA_R, md->in};
    return nf__tensor_view(&t->arena[a], md->off_a, 2, ne);
}

nf_tensor nf__tt_b(const struct nf_tab_train * t, int a, int i) {
    const struct nf_tab_lora_module * md = &t->mod[i];
    const int64_t ne[2] = {md->out, NF_TAB_LORA_R};
    return nf__tensor_view(&t->arena[a], md->off_b, 2, ne);
}

static void nf__tt_add(struct nf_tab_train * t, const char * name, int64_t in, int64_t out, int64_t * off) {
    struct nf_tab_lora_module * md = &t->mod[t->n_mod++];
    snprintf(md->name, sizeof(md->name), "%s", name);
    md->in = in;
    md->out = out;
    md->off_a = *off;
    md->off_b = *off + NF_TAB_LORA_R * in;
    *off = md->off_b + out * NF_TAB_LORA_R;
}

void nf__tab_train_free(struct nf_tab_train * t) {
    if (!t) return;
    nf__tt_cache_free(t);
    nf__workspace_release(&t->mem);
    nf__workspace_release(&t->arenas);
    free(t->mod);
    free(t);
}

int nf__tab_train_new(nf_tab * m, int64_t C, struct nf_tab_train ** out, nf_err * err) {
    *out = NULL;
    if (C < 1) return nf__err_set(err, NF_ERR_ARG, "tabstar training: %lld targets (need >= 1)", (long long) C);
    NF_TRY(nf__tab_train_check_device(m, err));
    struct nf_tab_train * t = calloc(1, sizeof(*t));
    if (!t) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    t->m = m;
    t->C = C;
    t->n_text = m->cfg.text_layers > NF_TAB_TRAIN_BERT ? m->cfg.text_layers - NF_TAB_TRAIN_BERT : 0;
    t->mod = calloc((size_t) (3 * t->n_text + 2 * (1 + NF_TAB_LAYERS) + 1), sizeof(*t->mod));
    if (!t->mod) {
        free(t);
        return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    }
    const int64_t D = NF_TAB_D, FF = NF_TAB_FF;
    int64_t off = 0;
    char name[96];
    static const char * const qkv[3] = {"query", "key", "value"};
    for (int j = 0; j < t->n_text; j++) {
        for (int c = 0; c < 3; c++) {
            snprintf(name, sizeof(name), "text_encoder.encoder.layer.%d.attention.self.%s", NF_TAB_TRAIN_BERT + j,
                     qkv[c]);
            nf__tt_add(t, name, D, D, &off);
        }
    }
    nf__tt_add(t, "numerical_fusion.fusion_block.linear1", D, FF, &off);
    nf__tt_add(t, "numerical_fusion.fusion_block.linear2", FF, D, &off);
    for (int l = 0; l < NF_TAB_LAYERS; l++) {
        snprintf(name, sizeof(name), "tabular_encoder.encoder.layers.%d.linear1", l);
        nf__tt_add(t, name, D, FF, &off);
        snprintf(name, sizeof(name), "tabular_encoder.encoder.layers.%d.linear2", l);
        nf__tt_add(t, name, FF, D, &off);
    }
    nf__tt_add(t, C == 1 ? "reg_head.layers.0" : "cls_head.layers.0", D, FF, &off);
    t->n = off;
    static const char * const names[NF__TT_N] = {"lora", "lora.grad", "lora.adam_m", "lora.adam_v"};
    nf_graph g;
    nf_graph_init(&g, m->be, err);
    int rc = NF_OK;
    for (int a = 0; a < NF__TT_N && rc == NF_OK; a++) {
        rc = nf__workspace_tensor(&t->arenas, m->be, &t->arena[a], NF_F32, 1, &t->n, names[a], err);
        if (rc == NF_OK) rc = nf_fill(&g, names[a], t->arena[a], 1, t->n, t->n, 0.0f);
    }
    const int64_t one = 1, sc = FF * NF_TAB_LORA_R;
    if (rc == NF_OK) rc = nf__workspace_tensor(&t->arenas, m->be, &t->norm, NF_F32, 1, &one, "lora.norm", err);
    if (rc == NF_OK) rc = nf__workspace_tensor(&t->arenas, m->be, &t->scratch, NF_F32, 1, &sc, "lora.merge", err);
    if (rc != NF_OK) {
        nf__tab_train_free(t);
        return rc;
    }
    *out = t;
    return NF_OK;
}

int nf__tab_train_modules(const struct nf_tab_train * t) { return t->n_mod; }
const struct nf_tab_lora_module * nf__tab_train_module(const struct nf_tab_train * t, int i) {
    return i >= 0 && i < t->n_mod ? &t->mod[i] : NULL;
}
int64_t nf__tab_train_floats(const struct nf_tab_train * t) { return t->n; }
int64_t nf__tab_train_steps(const struct nf_tab_train * t) { return t->step; }

int nf__tab_train_read(const struct nf_tab_train * t, int what, float * out, nf_err * err) {
    if (what < 0 || what >= NF__TT_N) return nf__err_set(err, NF_ERR_ARG, "no LoRA arena %d (0..3)", what);
    return nf__tensor_download(&t->arena[what], out, err);
}

int nf__tab_train_write(struct nf_tab_train * t, int what, const float * in, nf_err * err) {
    if (what < 0 || what >= NF__TT_N) return nf__err_set(err, NF_ERR_ARG, "no LoRA arena %d (0..3)", what);
    return nf__tensor_upload(&t->arena[what], in, err);
}

int nf__tab_train_update(struct nf_tab_train * t, double lr, double beta1, double beta2, double eps, double wd,
                         float max_norm, float * norm, nf_err * err) {
    if (!(max_norm > 0)) return nf__err_set(err, NF_ERR_ARG, "tabstar training: max_norm %g", (double) max_norm);
    nf_graph g;
    nf_graph_init(&g, t->m->be, err);
    NF_TRY(nf_clip_grad_norm(&g, "lora.clip_grad_norm", t->arena[NF__TT_G], t->n, max_norm, t->norm));
    struct nf_adamw_step st;
    nf_adamw_scalars(lr, beta1, beta2, eps, wd, t->step + 1, &st);
    NF_TRY(nf_adamw(&g, "lora.adamw", t->arena[NF__TT_G], t->arena[NF__TT_P], t->arena[NF__TT_M], t->arena[NF__TT_V],
                    t->n, &st));
    t->step++;
    NF_TRY(nf_fill(&g, "lora.zero_grad", t->arena[NF__TT_G], 1, t->n, t->n, 0.0f));
    if (norm) NF_TRY(nf__tensor_download(&t->norm, norm, err));
    return NF_OK;
}

/* the loaded base weight (out, in) of module i */
static const nf_tensor * nf__tt_base(const struct nf_tab_train * t, int i) {
    nf_tab * m = t->m;
    if (i < 3 * t->n_text) {
        const struct nf_tab_bert_layer * L = &m->bert[NF_TAB_TRAIN_BERT + i / 3];
        return i % 3 == 0 ? &L->q_w : i % 3 == 1 ? &L->k_w : &L->v_w;
    }
    i -= 3 * t->n_text;
    if (i < 2 * (1 + NF_TAB_LAYERS)) {
        const struct nf_tab_tel * L = i < 2 ? &m->fusion : &m->tab[i / 2 - 1];
        return i % 2 == 0 ? &L->l1_w : &L->l2_w;
    }
    return t->C == 1 ? &m->reg_w0 : &m->cls_w0;
}

int nf__tab_train_merge(struct nf_tab_train * t, nf_err * err) {
    nf_graph g;
    nf_graph_init(&g, t->m->be, err);
    for (int i = 0; i < t->n_mod; i++) {
        const struct nf_tab_lora_module * md = &t->mod[i];
        const nf_tensor * W = nf__tt_base(t, i);
        /* W += (2 B) A: the doubling is exact, so this is peft's W + (B A) * scaling */
        nf_tensor b2 = nf_view1(&t->scratch, 0, md->out * NF_TAB_LORA_R);
        NF_TRY(nf_scale(&g, nf_label(&g, "%s.merge.scale", md->name),
                        nf_view1(&t->arena[NF__TT_P], md->off_b, md->out * NF_TAB_LORA_R), b2, md->out * NF_TAB_LORA_R,
                        NF_TAB_LORA_SCALE, 0));
        NF_TRY(nf_gemm(&g, nf_label(&g, "%s.merge", md->name), b2, 0, NF_TAB_LORA_R, nf__tt_a(t, NF__TT_P, i), 0,
                       md->in, *W, md->in, md->out, md->in, NF_TAB_LORA_R, 1));
    }
    t->m->adapter_modules += t->n_mod;
    return NF_OK;
}

int nf__tab_train_check_device(nf_tab * m, nf_err * err) {
    static const enum nf_op_type need[] = {
        NF_OP_GATHER_ROWS,
        NF_OP_LAYER_NORM,
        NF_OP_LINEAR,
        NF_OP_ATTENTION,
        NF_OP_FILL,
        NF_OP_GEMM,
        NF_OP_ACT,
        NF_OP_ACT_BACKWARD,
        NF_OP_COPY,
        NF_OP_LAYER_NORM_BACKWARD,
        NF_OP_ATTENTION_BACKWARD,
        NF_OP_DROPOUT,
        NF_OP_SCATTER_ADD_ROWS,
        NF_OP_SCALE,
        NF_OP_CLIP_GRAD_NORM,
        NF_OP_ADAMW,
        NF_OP_CROSS_ENTROPY,
        NF_OP_MSE_LOSS,
    };
    const struct nf_kernel * k = m->be->iface->kernels;
    for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++) {
        if (!k || !k[need[i]].run) {
            return nf__err_set(err, NF_ERR_UNSUPPORTED,
                               "op %s: not supported by the %s backend (%s), which TabSTAR's fine-tuning needs; "
                               "nofall does not fall back to another device",
                               nf__op_name(need[i]), m->be->iface->kind, m->be->name);
        }
    }
    return NF_OK;
}

int nf__tab_train_dropout(struct nf_tab_train * t, float p, uint64_t seed, nf_err * err) {
    if (!(p >= 0.0f && p < 1.0f))
        return nf__err_set(err, NF_ERR_ARG, "tabstar training: dropout %g (0 <= p < 1)", (double) p);
    t->drop = p;
    t->drop_seed = seed;
    t->drop_calls = 0;
    return NF_OK;
}
