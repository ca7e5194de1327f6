/* mitra-finetune.c -- AutoGluon's Mitra fine-tuning loop (nofall.h
 * nf_finetune), over the training step of src/models/mitra-train.c.
 * Spec: shared/specs/finetune.md §1.3-§1.8.
 *
 *   rng = RandomState(get_numpy_seed(seed))
 *   step 0: validation of the pretrained weights (a best-weights candidate)
 *   step e = 1..S: episode (rng) -> forward/backward -> AdamW(lr_e) ->
 *                  validation (rng) -> best? -> early stopping -> warmup step
 *   end: the best weights restored (or the last kept: keep_last)
 *
 * Everything that touches the weights runs on the model's device; the
 * host holds the data, draws the episodes and reads back the losses and
 * the validation logits (the boundary). */
#include "tabular-impl.h"
#include "models/mitra-train.h"
#include "model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void nf_finetune_opts_default(struct nf_finetune_opts * o) {
    *o = (struct nf_finetune_opts){
        .steps = 50,
        .lr = 1e-4,
        .weight_decay = 0.1,
        .beta1 = 0.9,
        .beta2 = 0.999,
        .eps = 1e-8,
        .warmup_steps = 1000,
        .patience = 40,
        .max_support = 8192,
        .max_query = 1024,
        .seed = 0,
    };
}

struct nf__ft {
    nf_mitra * m;
    const struct nf_finetune_data * d;
    const struct nf_finetune_opts * o;
    struct nf_np_rng * rng;
    int cls;
    int64_t C, F;
    /* host scratch */
    float *xs, *xq, *ysv, *yqv, *logits;
    int64_t *ysc, *yqc, *perm;
};

static void nf__ft_free(struct nf__ft * f) {
    free(f->xs);
    free(f->xq);
    free(f->ysv);
    free(f->yqv);
    free(f->logits);
    free(f->ysc);
    free(f->yqc);
    free(f->perm);
}

static int nf__ft_alloc(struct nf__ft * f, nf_err * err) {
    const int64_t N = f->d->n_train, ns = N, nq = f->o->max_query > 0 ? f->o->max_query : 1;
    const int64_t nqa = nq > N ? nq : N;
    f->xs = malloc((size_t) (ns * f->F) * sizeof(float));
    f->xq = malloc((size_t) (nqa * f->F) * sizeof(float));
    f->ysv = malloc((size_t) ns * sizeof(float));
    f->yqv = malloc((size_t) nqa * sizeof(float));
    f->logits = malloc((size_t) (nqa * f->C) * sizeof(float));
    f->ysc = malloc((size_t) ns * sizeof(int64_t));
    f->yqc = malloc((size_t) nqa * sizeof(int64_t));
    f->perm = malloc((size_t) N * sizeof(int64_t));
    if (!f->xs || !f->xq || !f->ysv || !f->yqv || !f->logits || !f->ysc || !f->yqc || !f->perm)
        return nf__err_set(err, NF_ERR_NOMEM, "out of memory for the fine-tuning batches");
    return NF_OK;
}

/* rows ids of x (n_features wide) into out, and their targets */
static void nf__ft_gather(const struct nf__ft * f, const int64_t * ids, int64_t n, float * x, int64_t * yc,
                          float * yv) {
    for (int64_t i = 0; i < n; i++) {
        const int64_t r = ids[i];
        memcpy(x + i * f->F, f->d->x_train + r * f->F, (size_t) f->F * sizeof(float));
        if (f->cls)
            yc[i] = f->d->y_train_class[r];
        else
            yv[i] = f->d->y_train_value[r];
    }
}

/* the validation loss: cross-entropy over all C logits (F.cross_entropy of
 * the float32 logits), or the MSE of the un-normalised predictions in the
 * target's units (sklearn mean_squared_error); chunks of max_query rows,
 * each against its own random order of the training rows */
static int nf__ft_validate(struct nf__ft * f, double * out, nf_err * err) {
    const struct nf_finetune_data * d = f->d;
    const int64_t N = d->n_train, mq = f->o->max_query, ms = f->o->max_support;
    double sum = 0.0;
    for (int64_t q0 = 0; q0 < d->n_val; q0 += mq) {
        const int64_t nq = q0 + mq < d->n_val ? mq : d->n_val - q0;
        int64_t k = 0;
        NF_TRY(nf__mitra_eval_support(f->rng, N, ms, f->perm, &k, err));
        nf__ft_gather(f, f->perm, k, f->xs, f->ysc, f->ysv);
        const struct nf_mitra_input in = {
            .n_support = k,
            .n_query = nq,
            .n_features = f->F,
            .x_support = f->xs,
            .x_query = d->x_val + q0 * f->F,
            .y_class = f->cls ? f->ysc : NULL,
            .y_value = f->cls ? NULL : f->ysv,
        };
        NF_TRY(nf_mitra_forward(f->m, &in, f->logits, err));
        for (int64_t i = 0; i < nq; i++) {
            const float * l = f->logits + i * f->C;
            if (f->cls) {
                const int64_t y = d->y_val_class[q0 + i];
                if (y < 0 || y >= f->C) {
                    return nf__err_set(err, NF_ERR_INPUT, "validation label %lld (row %lld) is out of range 0..%lld",
                                       (long long) y, (long long) (q0 + i), (long long) (f->C - 1));
                }
                double mx = l[0], s = 0.0;
                for (int64_t c = 1; c < f->C; c++) mx = l[c] > mx ? l[c] : mx;
                for (int64_t c = 0; c < f->C; c++) s += exp((double) l[c] - mx);
                sum += mx + log(s) - (double) l[y];
            } else {
                double p = (double) l[0];
                if (d->y_mirror) p = 1.0 - p;
                p = p * (d->y_max - d->y_min) + d->y_min;
                const double e = p - d->y_val_value[q0 + i];
                sum += e * e;
            }
        }
    }
    *out = sum / (double) d->n_val;
    return NF_OK;
}

/* PyTorch LinearLR(start_factor = 1/w, end_factor = 1, total_iters = w) after
 * k steps, recursively in doubles as torch computes it; w = 0: ConstantLR(1) */
static double nf__ft_lr(double lr0, int64_t w, int64_t k) {
    if (w <= 0) return lr0;
    const double start = 1.0 / (double) w, end = 1.0;
    double lr = lr0 * start;
    for (int64_t e = 1; e <= k && e <= w; e++)
        lr = lr * (1.0 + (end - start) / ((double) w * start + (double) (e - 1) * (end - start)));
    return lr;
}

static int nf__ft_check(const nf_mitra * m, const struct nf_finetune_data * d, const struct nf_finetune_opts * o,
                        nf_err * err) {
    const int cls = nf__mitra_class_labels(&m->cfg);
    if (d->n_train < 2) return nf__err_set(err, NF_ERR_INPUT, "fine-tuning needs at least 2 training rows");
    if (d->n_val < 1) return nf__err_set(err, NF_ERR_INPUT, "fine-tuning needs at least 1 validation row");
    if (d->n_features < 1) return nf__err_set(err, NF_ERR_INPUT, "fine-tuning needs at least 1 feature");
    if (!d->x_train || !d->x_val) return nf__err_set(err, NF_ERR_ARG, "fine-tuning: no x_train / x_val");
    if (cls && (!d->y_train_class || !d->y_val_class))
        return nf__err_set(err, NF_ERR_INPUT, "this model is a classifier: fine-tuning needs class labels");
    if (!cls && (!d->y_train_value || !d->y_val_value))
        return nf__err_set(err, NF_ERR_INPUT, "this model is a regressor: fine-tuning needs numeric targets");
    if (o->steps < 0) return nf__err_set(err, NF_ERR_ARG, "fine-tuning steps must be >= 0");
    if (o->max_support < 1 || o->max_query < 1)
        return nf__err_set(err, NF_ERR_ARG, "fine-tuning: max_support and max_query must be >= 1");
    if (!(o->lr >= 0) || !(o->weight_decay >= 0) || !(o->beta1 >= 0 && o->beta1 < 1) ||
        !(o->beta2 >= 0 && o->beta2 < 1) || !(o->eps > 0) || o->warmup_steps < 0 || o->patience < 1) {
        return nf__err_set(err, NF_ERR_ARG,
                           "fine-tuning: lr, weight decay >= 0, betas in [0, 1), eps > 0, warmup >= 0, patience >= 1");
    }
    for (int64_t i = 0; cls && i < d->n_train; i++) {
        if (d->y_train_class[i] < 0 || d->y_train_class[i] >= m->cfg.dim_output) {
            return nf__err_set(err, NF_ERR_INPUT, "training label %lld (row %lld) is out of range 0..%d",
                               (long long) d->y_train_class[i], (long long) i, m->cfg.dim_output - 1);
        }
    }
    return NF_OK;
}

/* ---- a run split in two: the state after a step, saved and resumed ------------------------- */

struct nf__ft_state {
    int64_t step, best_step, es_count;
    double best_val, es_best, val;
};
enum {
    NF__S_STEP,
    NF__S_ADAM,
    NF__S_BEST_STEP,
    NF__S_ES_COUNT,
    NF__S_BEST_VAL,
    NF__S_ES_BEST,
    NF__S_VAL,
    NF__S_POS,
    NF__S_FLOATS,
    NF__S_N
};
static const char * const nf__ft_arenas[4] = {"weights", "adam_m", "adam_v", "best_weights"};
static const int nf__ft_arena_id[4] = {0, 2, 3, 4};

static int nf__ft_save(struct nf_mitra_train * t, const struct nf_np_rng * rng, const struct nf__ft_state * s,
                       const char * dir, nf_err * err) {
    const int64_t n = nf__mitra_train_floats(t);
    float * a = malloc((size_t) (4 * n) * sizeof(float));
    if (!a) return nf__err_set(err, NF_ERR_NOMEM, "out of memory for the fine-tuning state");
    int rc = NF_OK;
    for (int i = 0; rc == NF_OK && i < 4; i++) rc = nf__mitra_train_read(t, nf__ft_arena_id[i], a + i * n, err);
    int64_t key[624];
    for (int i = 0; i < 624; i++) key[i] = rng->key[i];
    const double sc[NF__S_N] = {(double) s->step,
                                (double) nf__mitra_train_steps(t),
                                (double) s->best_step,
                                (double) s->es_count,
                                s->best_val,
                                s->es_best,
                                s->val,
                                (double) rng->pos,
                                (double) n};
    struct nf_st_entry e[6] = {
        {.name = "rng_key", .ndim = 1, .shape = {624}, .data = key, .dtype = NF_ST_I64},
        {.name = "scalars", .ndim = 1, .shape = {NF__S_N}, .data = sc, .dtype = NF_ST_F64},
    };
    for (int i = 0; i < 4; i++)
        e[2 + i] = (struct nf_st_entry){
            .name = nf__ft_arenas[i], .ndim = 1, .shape = {n}, .data = a + i * n, .dtype = NF_ST_F32};
    char path[4096];
    nf__path_join(path, sizeof(path), dir, "finetune-state.safetensors");
    if (rc == NF_OK) rc = nf__mkdir_p(dir, err);
    if (rc == NF_OK) rc = nf__st_write(path, e, 6, err);
    free(a);
    return rc;
}

static int nf__ft_resume(struct nf_mitra_train * t, struct nf_np_rng * rng, struct nf__ft_state * s, const char * dir,
                         nf_err * err) {
    char path[4096];
    nf__path_join(path, sizeof(path), dir, "finetune-state.safetensors");
    struct nf_safetensors st;
    NF_TRY(nf__st_open(path, &st, err));
    const int64_t n = nf__mitra_train_floats(t);
    const struct nf_st_tensor * k = nf__st_find(&st, "rng_key");
    const struct nf_st_tensor * c = nf__st_find(&st, "scalars");
    int rc = NF_OK;
    if (!k || k->dtype != NF_ST_I64 || k->ndim != 1 || k->shape[0] != 624 || !c || c->dtype != NF_ST_F64 ||
        c->ndim != 1 || c->shape[0] != NF__S_N) {
        rc = nf__err_set(err, NF_ERR_INPUT, "%s: not a fine-tuning state (rng_key, scalars)", path);
    }
    double sc[NF__S_N] = {0}; /* copied: a safetensors offset need not be 8-aligned */
    if (rc == NF_OK) memcpy(sc, nf__st_data(&st, c), sizeof(sc));
    if (rc == NF_OK && sc[NF__S_FLOATS] != (double) n) {
        rc = nf__err_set(err, NF_ERR_MISMATCH, "%s: saved for a model of %.0f weights, this one has %lld", path,
                         sc[NF__S_FLOATS], (long long) n);
    }
    for (int i = 0; rc == NF_OK && i < 4; i++) {
        const struct nf_st_tensor * a = nf__st_find(&st, nf__ft_arenas[i]);
        if (!a || a->dtype != NF_ST_F32 || a->ndim != 1 || a->shape[0] != n)
            rc = nf__err_set(err, NF_ERR_INPUT, "%s: no %s of %lld floats", path, nf__ft_arenas[i], (long long) n);
        else
            rc = nf__mitra_train_write(t, nf__ft_arena_id[i], nf__st_data(&st, a),
                                       i == 1 ? (int64_t) sc[NF__S_ADAM] : -1, err);
    }
    if (rc == NF_OK) {
        int64_t key[624];
        memcpy(key, nf__st_data(&st, k), sizeof(key));
        for (int i = 0; i < 624; i++) rng->key[i] = (uint32_t) key[i];
        rng->pos = (int) sc[NF__S_POS];
        *s = (struct nf__ft_state){.step = (int64_t) sc[NF__S_STEP],
                                   .best_step = (int64_t) sc[NF__S_BEST_STEP],
                                   .es_count = (int64_t) sc[NF__S_ES_COUNT],
                                   .best_val = sc[NF__S_BEST_VAL],
                                   .es_best = sc[NF__S_ES_BEST],
                                   .val = sc[NF__S_VAL]};
    }
    nf__st_close(&st);
    return rc;
}

static int nf__mitra_finetune(nf_mitra * m, const struct nf_finetune_data * d, const struct nf_finetune_opts * o,
                              struct nf_finetune_result * res, const struct nf_np_rng * rng_in,
                              struct nf_np_rng * rng_out, nf_err * err) {
    NF_TRY(nf__ft_check(m, d, o, err));
    struct nf_np_rng rng;
    if (rng_in)
        rng = *rng_in;
    else
        nf__np_rng_seed(&rng, nf__np_seed(o->seed));
    struct nf__ft f = {.m = m, .d = d, .o = o, .rng = &rng, .cls = nf__mitra_class_labels(&m->cfg)};
    f.C = m->cfg.dim_output;
    f.F = d->n_features;
    struct nf_mitra_train * t = NULL;
    struct nf_mitra_episode ep = {0};
    *res = (struct nf_finetune_result){.stopped_at = -1};
    int rc = nf__ft_alloc(&f, err);
    if (rc == NF_OK) rc = nf__mitra_train_new(m, &t, err);
    struct nf__ft_state s = {0};
    double val = 0.0;
    if (rc == NF_OK && o->resume_dir) {
        rc = nf__ft_resume(t, &rng, &s, o->resume_dir, err);
        val = s.val;
        res->best_step = s.best_step;
        res->best_val_loss = s.best_val;
        res->steps_run = s.step;
    } else {
        if (rc == NF_OK) rc = nf__ft_validate(&f, &val, err);
        if (rc == NF_OK) rc = nf__mitra_train_save_best(t, err);
        res->best_val_loss = val;
        struct nf_finetune_step st = {.step = 0, .lr = 0.0, .train_loss = NAN, .val_loss = val};
        if (rc == NF_OK && o->on_step && o->on_step(o->user, &st) != 0)
            rc = nf__err_set(err, NF_ERR_GENERIC, "fine-tuning stopped by the caller at step 0");
    }
    double es_best = s.es_best;
    int64_t es_count = s.es_count;
    int split = 0;
    for (int64_t e = s.step + 1; rc == NF_OK && e <= o->steps; e++) {
        /* the LR of epoch e: the warmup scheduler stepped after epochs 1 .. min(e-1, w-1) */
        const int64_t k = o->warmup_steps > 0 ? (e - 1 < o->warmup_steps - 1 ? e - 1 : o->warmup_steps - 1) : 0;
        const double lr = nf__ft_lr(o->lr, o->warmup_steps, k);
        nf__mitra_episode_free(&ep);
        rc = nf__mitra_episode(&rng, f.cls ? d->y_train_class : NULL, d->n_train, o->max_support, o->max_query, &ep,
                               err);
        if (rc != NF_OK) break;
        if (o->on_batch && o->on_batch(o->user, e, ep.support, ep.n_support, ep.query, ep.n_query) != 0) {
            rc = nf__err_set(err, NF_ERR_GENERIC, "fine-tuning stopped by the caller at step %lld", (long long) e);
            break;
        }
        nf__ft_gather(&f, ep.support, ep.n_support, f.xs, f.ysc, f.ysv);
        nf__ft_gather(&f, ep.query, ep.n_query, f.xq, f.yqc, f.yqv);
        const struct nf_mitra_input in = {
            .n_support = ep.n_support,
            .n_query = ep.n_query,
            .n_features = f.F,
            .x_support = f.xs,
            .x_query = f.xq,
            .y_class = f.cls ? f.ysc : NULL,
            .y_value = f.cls ? NULL : f.ysv,
        };
        float loss = 0.0f;
        rc = nf__mitra_train_grad(t, &in, f.cls ? f.yqc : NULL, f.cls ? NULL : f.yqv, &loss, NULL, err);
        if (rc == NF_OK) rc = nf__mitra_train_adamw(t, lr, o->beta1, o->beta2, o->eps, o->weight_decay, err);
        if (rc == NF_OK) rc = nf__ft_validate(&f, &val, err);
        if (rc != NF_OK) break;
        res->steps_run = e;
        if (val < res->best_val_loss) {
            res->best_val_loss = val;
            res->best_step = e;
            rc = nf__mitra_train_save_best(t, err);
            if (rc != NF_OK) break;
        }
        /* EarlyStopping(patience), smaller is better, fed epochs >= 1 */
        int stop = 0;
        if (e == 1) {
            es_best = -val;
        } else if (-val < es_best + 1e-4) {
            stop = ++es_count >= o->patience;
        } else {
            es_best = -val;
            es_count = 0;
        }
        const struct nf_finetune_step st = {
            .step = e,
            .lr = lr,
            .train_loss = loss,
            .val_loss = val,
            .best_step = res->best_step,
            .patience_count = es_count,
        };
        if (o->on_step && o->on_step(o->user, &st) != 0) {
            rc = nf__err_set(err, NF_ERR_GENERIC, "fine-tuning stopped by the caller at step %lld", (long long) e);
            break;
        }
        if (stop) {
            res->stopped_at = e;
            break;
        }
        if (o->stop_after > 0 && e == o->stop_after && e < o->steps) {
            const struct nf__ft_state now = {.step = e,
                                             .best_step = res->best_step,
                                             .es_count = es_count,
                                             .best_val = res->best_val_loss,
                                             .es_best = es_best,
                                             .val = val};
            rc = o->state_dir ? nf__ft_save(t, &rng, &now, o->state_dir, err)
                              : nf__err_set(err, NF_ERR_ARG, "fine-tuning: stop_after without a state_dir");
            split = 1;
            break;
        }
    }
    if (rc == NF_OK && split) {
        /* the live weights stay as they are: the run goes on from the state */
    } else if (rc == NF_OK && o->keep_last) {
        res->best_step = res->steps_run;
        res->best_val_loss = val;
    } else if (rc == NF_OK) {
        rc = nf__mitra_train_restore_best(t, err);
    }
    if (rc == NF_OK && rng_out) *rng_out = rng;
    nf__mitra_episode_free(&ep);
    nf__mitra_train_free(t);
    nf__ft_free(&f);
    nf_mitra_release_workspace(m);
    return rc;
}

int nf__finetune_ex(nf_model * model, const struct nf_finetune_data * d, const struct nf_finetune_opts * o,
                    struct nf_finetune_result * res, const struct nf_np_rng * rng_in, struct nf_np_rng * rng_out,
                    nf_err * err) {
    if (!model || !d || !o || !res) return nf__err_set(err, NF_ERR_ARG, "nf_finetune: NULL argument");
    if (strcmp(model->iface->type, "mitra") != 0) {
        return nf__err_set(err, NF_ERR_UNSUPPORTED, "fine-tuning is implemented for mitra models, not %s",
                           model->iface->type);
    }
    return nf__mitra_finetune(model->impl, d, o, res, rng_in, rng_out, err);
}

int nf__finetune_weights_get(nf_model * m, float ** out, int64_t * n, nf_err * err) {
    const nf_tensor * w = &((nf_mitra *) m->impl)->weights.buf;
    *n = nf__tensor_numel(w);
    if (!(*out = malloc((size_t) *n * sizeof(float))))
        return nf__err_set(err, NF_ERR_NOMEM, "out of memory for a copy of the weights (%lld floats)", (long long) *n);
    const int rc = nf__tensor_download(w, *out, err);
    if (rc != NF_OK) {
        free(*out);
        *out = NULL;
    }
    return rc;
}

int nf__finetune_weights_set(nf_model * m, const float * w, int64_t n, nf_err * err) {
    nf_tensor * buf = &((nf_mitra *) m->impl)->weights.buf;
    if (n != nf__tensor_numel(buf))
        return nf__err_set(err, NF_ERR_ARG, "a copy of %lld weights for a model of %lld", (long long) n,
                           (long long) nf__tensor_numel(buf));
    return nf__tensor_upload(buf, w, err);
}

int nf_finetune(nf_model * m, const struct nf_finetune_data * d, const struct nf_finetune_opts * o,
                struct nf_finetune_result * res, nf_err * err) {
    return nf__finetune_ex(m, d, o, res, NULL, NULL, err);
}
