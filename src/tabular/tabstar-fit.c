/* tabstar-fit.c -- TabSTAR's fine-tuning loop as upstream's TabStarTrainer
 * (tabstar 1.1.16 training/trainer.py; spec finetune.md §3.3-§3.4), around a
 * training step (struct nf_tsf_step; the real one is tabstar-train.h's):
 *
 *   epochs 1..max_epochs; epoch e runs with OneCycle's lr and beta1 after
 *     e - 1 scheduler steps (total_steps = max_epochs, pct_start 0.1, cos,
 *     beta1 cycling 0.95 -> 0.85 -> 0.95; total_steps + 1 where torch's
 *     first phase would be empty, as upstream's ZeroDivisionError retry);
 *   batches of 64 rows of the epoch's permutation, the last one short; each
 *     backpropagates loss / 2; `steps` counts batches across epochs, an
 *     update (clip 1.0, AdamW wd 0.01) when steps % 2 == 0 and one more at
 *     an epoch's end when steps is odd;
 *   the train loss: sum of batch loss x rows / rows, in double;
 *   validation in batches of 128 in order: the float32 loss of
 *     _evaluate_epoch, the metric on float32 softmax probabilities (or the
 *     regression outputs);
 *   early stopping on the metric, strict >, patience 5: a new best keeps the
 *     adapter; a failing epoch with failed >= patience ends the fit before
 *     its scheduler step and checkpoint; every other epoch steps the
 *     scheduler and keeps (adapter, val loss) as a checkpoint;
 *   with >= 2 checkpoints, those whose loss <= best + 0.02 + 0.03 best /
 *     (best + 0.3) are averaged element-wise (A and B separately) in float32
 *     and become the final adapter; otherwise the best epoch's.
 *
 * Checkpoints are kept in memory; one whose loss is above the threshold of
 * the lowest loss so far can never be selected (the threshold only falls
 * with the minimum) and is dropped at once. */
#include "tabstar-fit.h"
#include "core/nf-ops.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void nf__tsf_opts_default(struct nf_tsf_opts * o) {
    memset(o, 0, sizeof(*o));
    o->max_epochs = 50;
    o->patience = 5;
    o->batch = 64;
    o->accumulation = 2;
    o->val_batch = 128;
    o->lr = 1e-3;
    o->average = 1;
    o->perms = NULL;
    o->seed = 0;
    o->on_epoch = NULL;
    o->user = NULL;
}

void nf__tsf_result_free(struct nf_tsf_result * r) {
    free(r->epochs);
    memset(r, 0, sizeof(*r));
}

struct nf_tsf_ckpt {
    int epoch;
    double loss;
    float * w;
};

/* validation: *loss (float32 arithmetic) and the metric */
static int nf_tsf_validate(const struct nf_tsf_step * s, int64_t n_val, const int64_t * yc, const double * yv,
                           int64_t vb, float * logits, float * loss_b, int64_t * rows_b, double * loss, double * metric,
                           nf_err * err) {
    const int64_t C = s->C;
    int nb = 0;
    for (int64_t b = 0; b < n_val; b += vb, nb++) {
        const int64_t e = b + vb < n_val ? b + vb : n_val;
        NF_TRY(s->eval(s->user, b, e, logits + b * C, &loss_b[nb], err));
        rows_b[nb] = e - b;
    }
    *loss = (double) nf__tsf_val_loss(loss_b, rows_b, nb);
    if (C > 1) /* apply_loss_fn: float32 softmax */
        for (int64_t i = 0; i < n_val; i++) {
            float *l = logits + i * C, mx = l[0], sum = 0.0f;
            for (int64_t c = 1; c < C; c++) mx = l[c] > mx ? l[c] : mx;
            for (int64_t c = 0; c < C; c++) sum += (l[c] = expf(l[c] - mx));
            for (int64_t c = 0; c < C; c++) l[c] /= sum;
        }
    *metric = nf__tsf_metric(C, n_val, yc, yv, logits);
    return NF_OK;
}

static int nf_tsf_tell(const struct nf_tsf_opts * o, const struct nf_tsf_epoch * ep, nf_err * err) {
    if (o->on_epoch && o->on_epoch(o->user, ep) != 0)
        return nf__err_set(err, NF_ERR_GENERIC, "fine-tuning stopped by the caller at epoch %d", ep->epoch);
    return NF_OK;
}

int nf__tsf_run(const struct nf_tsf_step * s, int64_t n_train, int64_t n_val, const int64_t * y_val_class,
                const double * y_val_value, const struct nf_tsf_opts * o, struct nf_tsf_result * res, nf_err * err) {
    memset(res, 0, sizeof(*res));
    if (n_train < 1 || n_val < 1 || o->max_epochs < 1 || o->batch < 1 || o->accumulation < 1 || o->val_batch < 1 ||
        o->patience < 1 || s->C < 1 || s->n_params < 1)
        return nf__err_set(err, NF_ERR_ARG,
                           "TabSTAR fit: %lld train / %lld validation rows, max_epochs %d, batch %lld, "
                           "accumulation %d, validation batch %lld, patience %d",
                           (long long) n_train, (long long) n_val, o->max_epochs, (long long) o->batch, o->accumulation,
                           (long long) o->val_batch, o->patience);
    if (s->C == 1 ? !y_val_value : !y_val_class)
        return nf__err_set(err, NF_ERR_ARG, "TabSTAR fit: no validation targets");
    struct nf_onecycle oc;
    nf_onecycle_defaults(&oc, o->lr, o->max_epochs);
    oc.pct_start = 0.1;
    oc.beta1 = 0.9;
    if (nf_onecycle_at(&oc, 0, NULL, NULL, NULL) != NF_OK) oc.total_steps = o->max_epochs + 1;
    const int64_t P = s->n_params, C = s->C, nvb = (n_val + o->val_batch - 1) / o->val_batch;
    int64_t * perm = malloc((size_t) n_train * sizeof(int64_t));
    float *logits = malloc((size_t) (n_val * C) * sizeof(float)), *loss_b = malloc((size_t) nvb * sizeof(float));
    int64_t * rows_b = malloc((size_t) nvb * sizeof(int64_t));
    float *cur = malloc((size_t) P * sizeof(float)), *best = malloc((size_t) P * sizeof(float));
    struct nf_tsf_ckpt * ck = calloc((size_t) o->max_epochs, sizeof(*ck));
    res->epochs = calloc((size_t) o->max_epochs, sizeof(*res->epochs));
    res->n_train = n_train, res->n_val = n_val;
    int rc = NF_OK, n_ck = 0, failed = 0, have_best = 0;
    double best_metric = -INFINITY, min_loss = INFINITY;
    int64_t steps = 0;
    struct nf_np_rng rng;
    nf__np_rng_seed(&rng, nf__np_seed(o->seed));
    if (!perm || !logits || !loss_b || !rows_b || !cur || !best || !ck || !res->epochs) {
        rc = nf__err_set(err, NF_ERR_NOMEM, "TabSTAR fit: out of memory");
        goto out;
    }
    for (int e = 1; e <= o->max_epochs; e++) {
        struct nf_tsf_epoch * ep = &res->epochs[e - 1];
        ep->epoch = e;
        if ((rc = nf_onecycle_at(&oc, e - 1, &ep->lr, &ep->beta1, err)) != NF_OK) goto out;
        if (o->perms)
            memcpy(perm, o->perms[e - 1], (size_t) n_train * sizeof(int64_t));
        else
            nf__np_permutation(&rng, n_train, perm);
        double total = 0.0;
        for (int64_t b = 0; b < n_train; b += o->batch) {
            const int64_t nb = b + o->batch < n_train ? o->batch : n_train - b;
            float l = 0.0f;
            if ((rc = s->grad(s->user, perm + b, nb, 1.0f / (float) o->accumulation, &l, err)) != NF_OK) goto out;
            total += (double) l * (double) nb;
            if (++steps % o->accumulation == 0) {
                if ((rc = s->update(s->user, ep->lr, ep->beta1, err)) != NF_OK) goto out;
                ep->updates++;
            }
        }
        if (steps % o->accumulation != 0) {
            if ((rc = s->update(s->user, ep->lr, ep->beta1, err)) != NF_OK) goto out;
            ep->updates++;
        }
        ep->train_loss = total / (double) n_train;
        rc = nf_tsf_validate(s, n_val, y_val_class, y_val_value, o->val_batch, logits, loss_b, rows_b, &ep->val_loss,
                             &ep->metric, err);
        if (rc != NF_OK) goto out;
        res->n_epochs = e;
        if (ep->metric > best_metric) {
            best_metric = ep->metric;
            failed = 0;
            ep->best = 1;
            res->best_epoch = e;
            if ((rc = s->read(s->user, best, err)) != NF_OK) goto out;
            have_best = 1;
        } else if (++failed >= o->patience) {
            ep->failed = failed;
            ep->stopped = 1;
            if ((rc = nf_tsf_tell(o, ep, err)) != NF_OK) goto out;
            break;
        }
        ep->failed = failed;
        if ((rc = nf_tsf_tell(o, ep, err)) != NF_OK) goto out;
        if (!o->average) continue;
        /* the checkpoint (after the scheduler step, which only moves the lr) */
        if (ep->val_loss < min_loss) min_loss = ep->val_loss;
        const double th = nf__tsf_threshold(min_loss);
        int w = 0;
        for (int i = 0; i < n_ck; i++)
            if (ck[i].loss <= th)
                ck[w++] = ck[i];
            else
                free(ck[i].w);
        n_ck = w;
        if (ep->val_loss <= th) {
            ck[n_ck].epoch = e;
            ck[n_ck].loss = ep->val_loss;
            if (!(ck[n_ck].w = malloc((size_t) P * sizeof(float)))) {
                rc = nf__err_set(err, NF_ERR_NOMEM, "TabSTAR fit: out of memory for a checkpoint");
                goto out;
            }
            if ((rc = s->read(s->user, ck[n_ck].w, err)) != NF_OK) goto out;
            n_ck++;
        }
    }
    /* the checkpoints saved (every non-stopping epoch) number >= 2 ? */
    int saved = 0;
    for (int i = 0; i < res->n_epochs; i++) saved += !res->epochs[i].stopped;
    if (o->average && saved >= 2) {
        res->threshold = nf__tsf_threshold(min_loss);
        const float ** xs = malloc((size_t) n_ck * sizeof(float *));
        if (!xs) {
            rc = nf__err_set(err, NF_ERR_NOMEM, "TabSTAR fit: out of memory");
            goto out;
        }
        for (int i = 0; i < n_ck; i++) {
            xs[i] = ck[i].w;
            res->epochs[ck[i].epoch - 1].averaged = 1;
        }
        nf__tsf_mean_f32(xs, n_ck, P, cur);
        free(xs);
        res->n_averaged = n_ck;
        rc = s->write(s->user, cur, err);
    } else if (have_best) {
        rc = s->write(s->user, best, err);
    }
    if (rc != NF_OK) goto out;
    rc = nf_tsf_validate(s, n_val, y_val_class, y_val_value, o->val_batch, logits, loss_b, rows_b, &res->final_val_loss,
                         &res->final_metric, err);
out:
    for (int i = 0; i < n_ck; i++) free(ck[i].w);
    free(ck), free(perm), free(logits), free(loss_b), free(rows_b), free(cur), free(best);
    if (rc != NF_OK) nf__tsf_result_free(res);
    return rc;
}
