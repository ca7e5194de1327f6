/* test-finetune-parity.c -- Mitra fine-tuning against upstream's own trainer
 * (tests/fixtures/finetune/<case>, made by reference/finetune_fixtures.py:
 * AutoGluon's MitraClassifier / MitraRegressor.fit in fp32, autocast off, on
 * tiny gen-weights checkpoints). Per case, on DEVICE (finetune.md §4.4-§4.5):
 *
 *   step 1, replayed on the fixture's own batch: the training logits and
 *     loss, every parameter's gradient, Adam's m and v, and the update
 *     w1 - w0 (the rounding-level exemption of §4.5 counted, < 0.1 %);
 *   the whole run through nf_finetune: every episode's support and query row
 *     ids identical to upstream's, the LR sequence bit-exact, each training
 *     loss and validation loss, the best and the early-stop epochs, the
 *     final weights (upstream's CPU result = the last step's: keep_last) and,
 *     where the fixture has them, the true best weights (nofall's default);
 *   then the prediction as upstream makes it after fit: the support order
 *     the trainer's RandomState continues with (ids identical), and the
 *     probabilities (or the regression values) of the test rows;
 *   determinism (cls_lr): two runs, and a run split at step 2 (its state
 *     saved and resumed), end with bitwise identical weights and losses;
 *   AutoGluon's default 50-step run (cls_50; not on opencl unless named);
 *   an ensemble (the case "ensemble"): two members trained one after the
 *     other on one RandomState, each on its own mirrored arrays, and the
 *     averaged probabilities of the prediction that continues the stream.
 *
 * Tolerances (§4.5, tiny checkpoints): a tensor passes when either the fixed
 * bound holds (relative L2 <= 1e-5 and max |d| <= 1e-5 max |ref|) or the
 * calibrated one does (relative L2 <= 5 e_pt + 1e-7, e_pt = PyTorch fp32's
 * own relative error against its float64 twin, stored in case.json); the
 * tensors upstream marks as rounding noise only (the attention key biases,
 * whose exact gradient is 0) are bounded in absolute terms instead.
 *
 * usage: test-finetune-parity FIXTURE_ROOT DEVICE [CASE...] [--step1]  (exit 77: DEVICE not available;
 *   --step1: part 1 only) */
#include "nf-test.h"
#include "io/nf-io.h"
#include "model.h"
#include "models/mitra-train.h"
#include "tabular/tabular-impl.h"
#include "weights.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char * const g_cases[] = {"cls", "cls_small", "reg", "cls_bigval", "cls_lr", "cls_50", "ensemble", NULL};
static int g_step1_only; /* --step1: part 1 only (the cuda emulator) */

struct fx {
    const char * name;
    cJSON * js;
    struct nf_safetensors in, ex;
    int cls, K;
    int64_t N, F, n_val, n_test, steps;
};

/* the tensors read, as aligned copies (safetensors data offsets need not be
 * multiples of 8), freed at the end of each case */
static void ** g_copies;
static int g_n_copies;

static void copies_free(void) {
    for (int i = 0; i < g_n_copies; i++) free(g_copies[i]);
    free(g_copies);
    g_copies = NULL;
    g_n_copies = 0;
}

static const void * tens(const struct nf_safetensors * st, const char * name, enum nf_st_dtype dt, int64_t * numel) {
    const struct nf_st_tensor * t = nf__st_find(st, name);
    if (!t || t->dtype != dt) return NULL;
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
    if (numel) *numel = n;
    const size_t bytes = (size_t) (t->end - t->begin);
    void * c = malloc(bytes ? bytes : 1);
    void ** grown = realloc(g_copies, (size_t) (g_n_copies + 1) * sizeof(void *));
    if (!c || !grown) {
        free(c);
        if (grown) g_copies = grown;
        return NULL;
    }
    g_copies = grown;
    memcpy(c, nf__st_data(st, t), bytes);
    g_copies[g_n_copies++] = c;
    return c;
}

static const void * need(const struct fx * f, int expected, const char * name, enum nf_st_dtype dt, int64_t * numel) {
    const void * p = tens(expected ? &f->ex : &f->in, name, dt, numel);
    CHECK(p != NULL, "%s: %s.safetensors has no %s of the expected dtype", f->name, expected ? "expected" : "inputs",
          name);
    return p;
}

static double jnum(const cJSON * o, const char * k, double def) {
    const cJSON * v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : def;
}

/* ---- tensor comparison ---------------------------------------------------------------- */

static double e_pt_of(const struct fx * f, const char * key) {
    const cJSON * e = cJSON_GetObjectItemCaseSensitive(f->js, "e_pt");
    return jnum(e, key, -1.0);
}

static int noise_only(const struct fx * f, const char * key) {
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(f->js, "grads_rounding_noise_only"), *it;
    cJSON_ArrayForEach(it, a) if (cJSON_IsString(it) && strcmp(it->valuestring, key) == 0) return 1;
    return 0;
}

/* got vs ref (n floats): the fixed bound or the calibrated one */
static void compare(const struct fx * f, const char * dev, const char * key, const float * got, const float * ref,
                    int64_t n, double * worst) {
    double d2 = 0, r2 = 0, dmax = 0, rmax = 0;
    for (int64_t i = 0; i < n; i++) {
        const double d = (double) got[i] - (double) ref[i];
        d2 += d * d;
        r2 += (double) ref[i] * ref[i];
        dmax = fabs(d) > dmax ? fabs(d) : dmax;
        rmax = fabs((double) ref[i]) > rmax ? fabs((double) ref[i]) : rmax;
    }
    const double rel = r2 > 0 ? sqrt(d2 / r2) : sqrt(d2);
    if (noise_only(f, key)) {
        CHECK(dmax <= 1e-6, "%s on %s: %s (rounding noise upstream): max |d| %.3g", f->name, dev, key, dmax);
        return;
    }
    const double ept = e_pt_of(f, key);
    const int fixed = rel <= 1e-5 && dmax <= 1e-5 * rmax;
    const int calibrated = ept >= 0 && rel <= 5.0 * ept + 1e-7;
    if (worst && rel > *worst) *worst = rel;
    CHECK(fixed || calibrated, "%s on %s: %s: relative L2 %.3g, max |d| %.3g (max |ref| %.3g, e_pt %.3g)", f->name, dev,
          key, rel, dmax, rmax, ept);
}

/* ---- the case's model and data ------------------------------------------------------------ */

static nf_model * make_model(const struct fx * f, nf_backend * be, const char * dir) {
    nf_err err = {0};
    const cJSON * args = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(f->js, "weights"), "args");
    const char * keys[16];
    const char * vals[16];
    int n = 0;
    uint64_t seed = 0;
    for (int i = 0; i + 1 < cJSON_GetArraySize(args) && n < 16; i += 2) {
        const char *k = cJSON_GetArrayItem(args, i)->valuestring + 2, *v = cJSON_GetArrayItem(args, i + 1)->valuestring;
        if (strcmp(k, "seed") == 0) {
            seed = strtoull(v, NULL, 10);
            continue;
        }
        keys[n] = k;
        vals[n++] = v;
    }
    CHECK_RC(nf__model_gen_weights_ex("mitra", dir, seed, n, keys, vals, NULL, 0.0f, NULL, 0, &err), NF_OK, &err);
    nf_model * m = NULL;
    CHECK_RC(nf_model_load(be, dir, &m, &err), NF_OK, &err);
    return m;
}

struct data {
    const float *x, *xv, *xt;
    const int64_t *yc, *yvc;
    float * yv;  /* regression: pre.y_train */
    double * yr; /* regression: y_val in its units */
};

static int load_data(const struct fx * f, struct data * d) {
    int64_t n;
    d->x = need(f, 0, "pre.x_train", NF_ST_F32, &n);
    d->xv = need(f, 0, "pre.x_val", NF_ST_F32, NULL);
    d->xt = need(f, 0, "pre.x_test", NF_ST_F32, NULL);
    if (f->cls) {
        d->yc = need(f, 0, "pre.y_train", NF_ST_I64, NULL);
        d->yvc = need(f, 0, "pre.y_val", NF_ST_I64, NULL);
    } else {
        const float * y = need(f, 0, "pre.y_train", NF_ST_F32, NULL);
        const float * yv = need(f, 0, "y_val", NF_ST_F32, NULL);
        d->yv = malloc((size_t) f->N * sizeof(float));
        d->yr = malloc((size_t) f->n_val * sizeof(double));
        for (int64_t i = 0; y && i < f->N; i++) d->yv[i] = y[i];
        for (int64_t i = 0; yv && i < f->n_val; i++) d->yr[i] = yv[i];
    }
    return d->x && d->xv && d->xt && (f->cls ? d->yc && d->yvc : 1) ? 0 : -1;
}

/* ---- part 1: step 1 replayed on the fixture's batch --------------------------------------- */

static void step1(const struct fx * f, nf_backend * be, const char * dev, const struct data * d, const char * dir) {
    nf_err err = {0};
    nf_model * model = make_model(f, be, dir);
    if (!model) return;
    nf_mitra * m = model->impl;
    int64_t ns = 0, nq = 0;
    const int64_t * sid = need(f, 1, "batch.1.support_idx", NF_ST_I64, &ns);
    const int64_t * qid = need(f, 1, "batch.1.query_idx", NF_ST_I64, &nq);
    const double * lr = need(f, 1, "lr", NF_ST_F64, NULL);
    struct nf_mitra_train * t = NULL;
    if (!sid || !qid || !lr || nf__mitra_train_new(m, &t, &err) != NF_OK) {
        CHECK(0, "%s: step 1: %s", f->name, err.msg);
        nf_model_free(model);
        return;
    }
    const int64_t C = m->cfg.dim_output, nw = nf__mitra_train_floats(t);
    float *xs = malloc((size_t) (ns * f->F) * sizeof(float)), *xq = malloc((size_t) (nq * f->F) * sizeof(float));
    float *ysv = malloc((size_t) ns * sizeof(float)), *yqv = malloc((size_t) nq * sizeof(float));
    int64_t *ysc = malloc((size_t) ns * sizeof(int64_t)), *yqc = malloc((size_t) nq * sizeof(int64_t));
    float *logits = malloc((size_t) (nq * C) * sizeof(float)), *buf = malloc((size_t) nw * sizeof(float));
    float * w0 = malloc((size_t) nw * sizeof(float));
    for (int64_t i = 0; i < ns; i++) {
        memcpy(xs + i * f->F, d->x + sid[i] * f->F, (size_t) f->F * sizeof(float));
        if (f->cls)
            ysc[i] = d->yc[sid[i]];
        else
            ysv[i] = d->yv[sid[i]];
    }
    for (int64_t i = 0; i < nq; i++) {
        memcpy(xq + i * f->F, d->x + qid[i] * f->F, (size_t) f->F * sizeof(float));
        if (f->cls)
            yqc[i] = d->yc[qid[i]];
        else
            yqv[i] = d->yv[qid[i]];
    }
    const struct nf_mitra_input in = {.n_support = ns,
                                      .n_query = nq,
                                      .n_features = f->F,
                                      .x_support = xs,
                                      .x_query = xq,
                                      .y_class = f->cls ? ysc : NULL,
                                      .y_value = f->cls ? NULL : ysv};
    float loss = 0;
    CHECK_RC(nf__mitra_train_read(t, 0, w0, &err), NF_OK, &err);
    CHECK_RC(nf__mitra_train_grad(t, &in, f->cls ? yqc : NULL, f->cls ? NULL : yqv, &loss, logits, &err), NF_OK, &err);
    const float * l0 = need(f, 1, "logits0", NF_ST_F32, NULL);
    const float * L0 = need(f, 1, "loss0", NF_ST_F32, NULL);
    if (l0) compare(f, dev, "logits0", logits, l0, nq * C, NULL);
    if (L0) {
        CHECK(fabs((double) loss - L0[0]) <= 2e-6 * fmax(1.0, fabs(L0[0])), "%s on %s: step-1 loss %.9g, upstream %.9g",
              f->name, dev, loss, L0[0]);
    }
    /* the gradients, Adam's moments and the update, where the fixture has them */
    const struct nf_weights * W = &m->weights;
    char key[160];
    double worst = 0;
    int n_grad = 0;
    int64_t exempt = 0, total = 0;
    CHECK_RC(nf__mitra_train_read(t, 1, buf, &err), NF_OK, &err);
    for (int k = 0; k < W->n_keys; k++) {
        snprintf(key, sizeof(key), "grad.%s", W->keys[k].name);
        const float * g = tens(&f->ex, key, NF_ST_F32, NULL);
        const int64_t off = nf__weights_key_offset(W, k);
        if (g && off >= 0) {
            compare(f, dev, key, buf + off, g, nf__wkey_numel(&W->keys[k]), &worst);
            n_grad++;
        }
    }
    if (tens(&f->ex, "grad.x_embedding.x_embedding.weight", NF_ST_F32, NULL))
        CHECK(n_grad == W->n_keys, "%s: %d of %d gradients compared", f->name, n_grad, W->n_keys);
    CHECK_RC(nf__mitra_train_adamw(t, lr[0], 0.9, 0.999, 1e-8,
                                   jnum(cJSON_GetObjectItemCaseSensitive(f->js, "hyperparams"), "weight_decay", 0.1),
                                   &err),
             NF_OK, &err);
    for (int what = 2; what <= 3; what++) {
        CHECK_RC(nf__mitra_train_read(t, what, buf, &err), NF_OK, &err);
        for (int k = 0; k < W->n_keys; k++) {
            snprintf(key, sizeof(key), "%s.%s", what == 2 ? "adam_m" : "adam_v", W->keys[k].name);
            const float * r = tens(&f->ex, key, NF_ST_F32, NULL);
            char gkey[160];
            snprintf(gkey, sizeof(gkey), "grad.%s", W->keys[k].name);
            /* m = 0.1 g and v = 0.001 g^2: the gradient's bound (v doubles the relative error) */
            if (r && !noise_only(f, gkey)) {
                compare(f, dev, what == 2 ? gkey : key, buf + nf__weights_key_offset(W, k), r,
                        nf__wkey_numel(&W->keys[k]), NULL);
            }
        }
    }
    CHECK_RC(nf__mitra_train_read(t, 0, buf, &err), NF_OK, &err);
    for (int k = 0; k < W->n_keys; k++) {
        snprintf(key, sizeof(key), "w1.%s", W->keys[k].name);
        const float * w1 = tens(&f->ex, key, NF_ST_F32, NULL);
        snprintf(key, sizeof(key), "grad.%s", W->keys[k].name);
        const float * g = tens(&f->ex, key, NF_ST_F32, NULL);
        const int64_t off = nf__weights_key_offset(W, k), len = nf__wkey_numel(&W->keys[k]);
        if (!w1 || !g) continue;
        float gmax = 0;
        for (int64_t i = 0; i < len; i++) gmax = fabsf(g[i]) > gmax ? fabsf(g[i]) : gmax;
        for (int64_t i = 0; i < len; i++) {
            const double du = fabs(((double) buf[off + i] - w0[off + i]) - ((double) w1[i] - w0[off + i]));
            total++;
            if (fabsf(g[i]) <= 1e-5f * gmax || noise_only(f, key)) {
                exempt += du > 1e-4 * lr[0];
                CHECK(du <= 2.0 * lr[0] * 1.001, "%s on %s: update of %s[%lld]: %.3g", f->name, dev, W->keys[k].name,
                      (long long) i, du);
            } else {
                CHECK(du <= 1e-4 * lr[0], "%s on %s: update of %s[%lld] differs by %.3g (lr %.3g)", f->name, dev,
                      W->keys[k].name, (long long) i, du, lr[0]);
            }
        }
    }
    CHECK(exempt * 1000 <= total, "%s on %s: %lld of %lld updates differ at rounding level", f->name, dev,
          (long long) exempt, (long long) total);
    printf("%s on %s: step 1: loss %.8g (upstream %.8g), %d gradients (worst relative L2 %.3g), %lld/%lld updates "
           "differ at rounding level\n",
           f->name, dev, loss, L0 ? L0[0] : NAN, n_grad, worst, (long long) exempt, (long long) total);
    nf__mitra_train_free(t);
    free(xs), free(xq), free(ysv), free(yqv), free(ysc), free(yqc), free(logits), free(buf), free(w0);
    nf_model_free(model);
}

/* ---- part 2: the whole run ------------------------------------------------------------------- */

struct log {
    const struct fx * f;
    const char * dev;
    int64_t n_steps;
    double lr[64], train_loss[64], val_loss[65];
    int64_t best[65];
};

static int on_batch(void * user, int64_t step, const int64_t * s, int64_t ns, const int64_t * q, int64_t nq) {
    struct log * lg = user;
    char key[64];
    int64_t n1 = -1, n2 = -1;
    snprintf(key, sizeof(key), "batch.%lld.support_idx", (long long) step);
    const int64_t * rs = tens(&lg->f->ex, key, NF_ST_I64, &n1);
    snprintf(key, sizeof(key), "batch.%lld.query_idx", (long long) step);
    const int64_t * rq = tens(&lg->f->ex, key, NF_ST_I64, &n2);
    CHECK(rs && rq && n1 == ns && n2 == nq && memcmp(rs, s, (size_t) ns * 8) == 0 &&
              memcmp(rq, q, (size_t) nq * 8) == 0,
          "%s on %s: step %lld's episode differs from upstream's (support %lld/%lld rows, query %lld/%lld)",
          lg->f->name, lg->dev, (long long) step, (long long) ns, (long long) n1, (long long) nq, (long long) n2);
    return 0;
}

static int on_step(void * user, const struct nf_finetune_step * s) {
    struct log * lg = user;
    if (s->step >= 64) return 0;
    if (s->step > 0) {
        lg->lr[s->step - 1] = s->lr;
        lg->train_loss[s->step - 1] = s->train_loss;
    }
    lg->val_loss[s->step] = s->val_loss;
    lg->best[s->step] = s->best_step;
    lg->n_steps = s->step;
    return 0;
}

/* the case's options (upstream's hyperparameters) and data */
static void setup(const struct fx * f, const struct data * d, struct nf_finetune_opts * o,
                  struct nf_finetune_data * fd) {
    const cJSON * hp = cJSON_GetObjectItemCaseSensitive(f->js, "hyperparams");
    nf_finetune_opts_default(o);
    o->steps = f->steps;
    o->lr = jnum(hp, "lr", o->lr);
    o->weight_decay = jnum(hp, "weight_decay", o->weight_decay);
    o->warmup_steps = (int64_t) jnum(hp, "warmup_steps", (double) o->warmup_steps);
    o->patience = (int64_t) jnum(hp, "early_stopping_patience", (double) o->patience);
    o->seed = (uint64_t) jnum(f->js, "seed", 0);
    const cJSON * pre = cJSON_GetObjectItemCaseSensitive(f->js, "preprocessor");
    *fd = (struct nf_finetune_data){
        .n_train = f->N,
        .n_val = f->n_val,
        .n_features = f->F,
        .x_train = d->x,
        .x_val = d->xv,
        .y_train_class = d->yc,
        .y_val_class = d->yvc,
        .y_train_value = d->yv,
        .y_val_value = d->yr,
        .y_min = jnum(pre, "y_min", 0),
        .y_max = jnum(pre, "y_max", 1),
        .y_mirror = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(pre, "regression_mirror")),
    };
}

static void run(const struct fx * f, nf_backend * be, const char * dev, const struct data * d, const char * dir,
                int keep_last) {
    nf_err err = {0};
    nf_model * model = make_model(f, be, dir);
    if (!model) return;
    struct nf_finetune_opts o;
    struct nf_finetune_data fd;
    setup(f, d, &o, &fd);
    o.keep_last = keep_last;
    struct log lg = {.f = f, .dev = dev};
    o.on_step = on_step;
    o.on_batch = keep_last ? on_batch : NULL;
    o.user = &lg;
    struct nf_finetune_result res;
    struct nf_np_rng rng;
    int rc = nf__finetune_ex(model, &fd, &o, &res, NULL, &rng, &err);
    CHECK(rc == NF_OK, "%s on %s: fine-tune: %s", f->name, dev, err.msg);
    if (rc != NF_OK) goto done;
    const double *lr = need(f, 1, "lr", NF_ST_F64, NULL), *tl = need(f, 1, "train_loss", NF_ST_F64, NULL),
                 *vl = need(f, 1, "val_loss", NF_ST_F64, NULL);
    CHECK(lg.n_steps == f->steps && res.steps_run == f->steps, "%s: %lld steps run, upstream %lld", f->name,
          (long long) res.steps_run, (long long) f->steps);
    double wt = 0, wv = 0;
    for (int64_t e = 0; lr && tl && vl && e <= f->steps && e < 64; e++) {
        if (e > 0) {
            CHECK(lg.lr[e - 1] == lr[e - 1], "%s: step %lld's lr %.17g, upstream %.17g", f->name, (long long) e,
                  lg.lr[e - 1], lr[e - 1]);
            const double r = fabs(lg.train_loss[e - 1] - tl[e - 1]) / fmax(1.0, fabs(tl[e - 1]));
            wt = r > wt ? r : wt;
            CHECK(r <= 1e-5, "%s on %s: step %lld's training loss %.9g, upstream %.9g", f->name, dev, (long long) e,
                  lg.train_loss[e - 1], tl[e - 1]);
        }
        const double r = fabs(lg.val_loss[e] - vl[e]) / fmax(1e-30, fabs(vl[e]));
        wv = r > wv ? r : wv;
        CHECK(r <= 1e-5, "%s on %s: epoch %lld's validation loss %.9g, upstream %.9g", f->name, dev, (long long) e,
              lg.val_loss[e], vl[e]);
    }
    const int64_t best = (int64_t) jnum(f->js, "best_epoch", -1);
    const cJSON * stop = cJSON_GetObjectItemCaseSensitive(f->js, "early_stop_epoch");
    if (!keep_last) {
        CHECK(res.best_step == best, "%s on %s: best epoch %lld, upstream's intended %lld", f->name, dev,
              (long long) res.best_step, (long long) best);
    }
    CHECK(res.stopped_at == (cJSON_IsNumber(stop) ? (int64_t) stop->valuedouble : -1), "%s on %s: early stop at %lld",
          f->name, dev, (long long) res.stopped_at);
    /* the weights: upstream's final (= the last step's on CPU) or the intended best */
    nf_mitra * m = model->impl;
    const struct nf_weights * W = &m->weights;
    const int64_t nw = nf__tensor_numel(&W->buf);
    float * w = malloc((size_t) nw * sizeof(float));
    CHECK_RC(nf__tensor_download(&W->buf, w, &err), NF_OK, &err);
    nf_model * fresh = make_model(f, be, dir);
    float * w0 = malloc((size_t) nw * sizeof(float));
    if (fresh) CHECK_RC(nf__tensor_download(&((nf_mitra *) fresh->impl)->weights.buf, w0, &err), NF_OK, &err);
    nf_model_free(fresh);
    const char * pfx = keep_last ? "wS" : "best";
    double num = 0, den = 0;
    int found = 0;
    char key[160];
    for (int k = 0; k < W->n_keys; k++) {
        snprintf(key, sizeof(key), "%s.%s", pfx, W->keys[k].name);
        const float * r = tens(&f->ex, key, NF_ST_F32, NULL);
        const int64_t off = nf__weights_key_offset(W, k), len = nf__wkey_numel(&W->keys[k]);
        if (!r || off < 0) continue;
        found++;
        /* the attention key biases' exact gradient is 0 (softmax ignores a
         * shift common to a row's scores): both sides move them by noise-signed
         * Adam steps of up to lr each; bounded, not compared */
        if (strstr(W->keys[k].name, ".k.bias")) {
            double lr_sum = 0;
            for (int64_t e = 0; e < f->steps && e < 64; e++) lr_sum += lg.lr[e];
            for (int64_t i = 0; i < len; i++) {
                CHECK(fabs((double) w[off + i] - r[i]) <= 2.0 * lr_sum * 1.001 + 1e-6 * fabs(r[i]),
                      "%s on %s: %s[%lld] moved %.3g from upstream's", f->name, dev, W->keys[k].name, (long long) i,
                      fabs((double) w[off + i] - r[i]));
            }
            continue;
        }
        for (int64_t i = 0; i < len; i++) {
            const double a = (double) w[off + i] - w0[off + i], b = (double) r[i] - w0[off + i];
            num += (a - b) * (a - b);
            den += b * b;
        }
    }
    const double drift = den > 0 ? sqrt(num / den) : sqrt(num);
    if (found) {
        CHECK(found == W->n_keys, "%s: %d of %d %s tensors", f->name, found, W->n_keys, pfx);
        CHECK(drift <= 1e-4, "%s on %s: weights after %lld steps (%s): |(w - w0) - (w_ref - w0)| / |w_ref - w0| = %.3g",
              f->name, dev, (long long) f->steps, pfx, drift);
    }
    /* the prediction after fit: the support order the RandomState continues with */
    const int cls = f->cls;
    const int64_t C = m->cfg.dim_output;
    int64_t np = 0, k = 0;
    const int64_t * rp = need(f, 1, "predict.0.support_perm", NF_ST_I64, &np);
    int64_t * perm = malloc((size_t) f->N * sizeof(int64_t));
    CHECK_RC(nf__mitra_eval_support(&rng, f->N, 8192, perm, &k, &err), NF_OK, &err);
    CHECK(rp && np == k && memcmp(rp, perm, (size_t) k * 8) == 0, "%s on %s: the prediction's support order differs",
          f->name, dev);
    float * xs = malloc((size_t) (k * f->F) * sizeof(float));
    int64_t * ys = malloc((size_t) k * sizeof(int64_t));
    float * yv = malloc((size_t) k * sizeof(float));
    float * logits = malloc((size_t) (f->n_test * C) * sizeof(float));
    for (int64_t i = 0; i < k; i++) {
        memcpy(xs + i * f->F, d->x + perm[i] * f->F, (size_t) f->F * sizeof(float));
        if (cls)
            ys[i] = d->yc[perm[i]];
        else
            yv[i] = d->yv[perm[i]];
    }
    const struct nf_mitra_input in = {.n_support = k,
                                      .n_query = f->n_test,
                                      .n_features = f->F,
                                      .x_support = xs,
                                      .x_query = d->xt,
                                      .y_class = cls ? ys : NULL,
                                      .y_value = cls ? NULL : yv};
    CHECK_RC(nf_mitra_forward(m, &in, logits, &err), NF_OK, &err);
    double pmax = 0;
    if (cls) {
        const float * pp = need(f, 1, keep_last ? "pred_proba" : "pred_proba_best", NF_ST_F32, NULL);
        for (int64_t i = 0; pp && i < f->n_test; i++) {
            float e[64], s = 0;
            for (int c = 0; c < f->K; c++) s += e[c] = expf(logits[i * C + c]);
            for (int c = 0; c < f->K; c++) {
                const double dd = fabs((double) (e[c] / s) - pp[i * f->K + c]);
                pmax = dd > pmax ? dd : pmax;
            }
        }
        if (pp) CHECK(pmax <= 1e-5, "%s on %s: predict_proba after fit: max |d| %.3g", f->name, dev, pmax);
    } else {
        const double * pr = need(f, 1, "pred", NF_ST_F64, NULL);
        for (int64_t i = 0; pr && i < f->n_test; i++) {
            double p = logits[i];
            if (fd.y_mirror) p = 1.0 - p;
            p = p * (fd.y_max - fd.y_min) + fd.y_min;
            const double dd = fabs(p - pr[i]) / fmax(1.0, fabs(pr[i]));
            pmax = dd > pmax ? dd : pmax;
        }
        if (pr) CHECK(pmax <= 1e-5, "%s on %s: predict after fit: max relative |d| %.3g", f->name, dev, pmax);
    }
    printf(
        "%s on %s (%s weights): %lld steps, worst training-loss %.2g / validation-loss %.2g relative, best epoch %lld, "
        "weights drift %.2g, prediction max |d| %.2g\n",
        f->name, dev, keep_last ? "last-step" : "best", (long long) res.steps_run, wt, wv, (long long) res.best_step,
        drift, pmax);
    free(w), free(w0), free(perm), free(xs), free(ys), free(yv), free(logits);
done:
    nf_model_free(model);
}

/* ---- part 3: determinism (llm.c's): two runs, and a run split at step 2
 * with its state saved and resumed, agree bit for bit ------------------------------------ */

static float * tuned(const struct fx * f, nf_backend * be, const struct data * d, const char * dir,
                     const struct nf_finetune_opts * o, struct log * lg, int64_t * n) {
    nf_err err = {0};
    nf_model * model = make_model(f, be, dir);
    if (!model) return NULL;
    struct nf_finetune_opts oo = *o;
    oo.user = lg;
    struct nf_finetune_data fd;
    struct nf_finetune_opts unused;
    setup(f, d, &unused, &fd);
    struct nf_finetune_result res;
    float * w = NULL;
    CHECK_RC(nf_finetune(model, &fd, &oo, &res, &err), NF_OK, &err);
    const struct nf_weights * W = &((nf_mitra *) model->impl)->weights;
    *n = nf__tensor_numel(&W->buf);
    w = malloc((size_t) *n * sizeof(float));
    CHECK_RC(nf__tensor_download(&W->buf, w, &err), NF_OK, &err);
    nf_model_free(model);
    return w;
}

static void split_run(const struct fx * f, nf_backend * be, const char * dev, const struct data * d, const char * dir) {
    struct nf_finetune_opts o;
    struct nf_finetune_data fd;
    setup(f, d, &o, &fd);
    o.on_step = on_step;
    char state[300];
    snprintf(state, sizeof(state), "%s.state", dir);
    struct log a = {.f = f, .dev = dev}, b = a, c1 = a, c2 = a;
    int64_t n = 0;
    float * wa = tuned(f, be, d, dir, &o, &a, &n);
    float * wb = tuned(f, be, d, dir, &o, &b, &n);
    o.stop_after = 2;
    o.state_dir = state;
    free(tuned(f, be, d, dir, &o, &c1, &n));
    o.stop_after = 0;
    o.state_dir = NULL;
    o.resume_dir = state;
    float * wc = tuned(f, be, d, dir, &o, &c2, &n);
    if (wa && wb && wc) {
        CHECK(memcmp(wa, wb, (size_t) n * sizeof(float)) == 0 &&
                  memcmp(a.val_loss, b.val_loss, sizeof(a.val_loss)) == 0,
              "%s on %s: two fine-tuning runs differ", f->name, dev);
        CHECK(c1.n_steps == 2 && c2.n_steps == f->steps, "%s on %s: split run: %lld + %lld steps", f->name, dev,
              (long long) c1.n_steps, (long long) c2.n_steps);
        CHECK(memcmp(wa, wc, (size_t) n * sizeof(float)) == 0, "%s on %s: the run split at step 2 ends elsewhere",
              f->name, dev);
        for (int64_t e = 1; e <= f->steps; e++) {
            const struct log * part = e <= 2 ? &c1 : &c2;
            CHECK(part->val_loss[e] == a.val_loss[e] && part->train_loss[e - 1] == a.train_loss[e - 1],
                  "%s on %s: split run's step %lld: losses %.9g / %.9g, one run %.9g / %.9g", f->name, dev,
                  (long long) e, part->train_loss[e - 1], part->val_loss[e], a.train_loss[e - 1], a.val_loss[e]);
        }
        printf("%s on %s: two runs and a run split at step 2 (state saved, resumed) agree bit for bit\n", f->name, dev);
    }
    char p[400];
    snprintf(p, sizeof(p), "%s/finetune-state.safetensors", state);
    remove(p);
    remove(state);
    free(wa), free(wb), free(wc);
}

/* ---- part 4: an ensemble (tests/fixtures/finetune/ensemble, reference/finetune_ensemble.py):
 * upstream's n_estimators = 2, the members fine-tuned one after another on one RandomState, each
 * from the pretrained weights on its own mirrored arrays (upstream's CPU result: keep_last), then
 * the prediction continuing the stream member by member, the probabilities averaged ---------- */

static void ensemble(const struct fx * f, nf_backend * be, const char * dev, const char * dir) {
    nf_err err = {0};
    const int E = (int) jnum(f->js, "n_estimators", 0);
    struct nf_finetune_opts o;
    nf_finetune_opts_default(&o);
    o.steps = f->steps;
    o.lr = jnum(f->js, "lr", o.lr);
    o.warmup_steps = (int64_t) jnum(f->js, "warmup_steps", (double) o.warmup_steps);
    o.seed = (uint64_t) jnum(f->js, "seed", 0);
    o.keep_last = 1;
    const int64_t *yc = need(f, 0, "y_train", NF_ST_I64, NULL), *yvc = need(f, 0, "y_val", NF_ST_I64, NULL);
    const float * pp = need(f, 1, "pred_proba", NF_ST_F32, NULL);
    CHECK(E >= 2 && E <= 4 && f->n_test <= 1024, "%s: %d members, %lld test rows", f->name, E, (long long) f->n_test);
    if (!yc || !yvc || !pp || E < 2 || E > 4 || f->n_test > 1024) return;
    nf_model * m[4] = {0};
    const float *x[4] = {0}, *xt[4] = {0};
    struct nf_np_rng rng;
    struct nf_finetune_result res[4];
    int ok = 1;
    for (int e = 0; ok && e < E; e++) {
        char k[3][32];
        snprintf(k[0], sizeof(k[0]), "x_train.%d", e);
        snprintf(k[1], sizeof(k[1]), "x_val.%d", e);
        snprintf(k[2], sizeof(k[2]), "x_test.%d", e);
        x[e] = need(f, 0, k[0], NF_ST_F32, NULL);
        const float * xv = need(f, 0, k[1], NF_ST_F32, NULL);
        xt[e] = need(f, 0, k[2], NF_ST_F32, NULL);
        m[e] = make_model(f, be, dir);
        ok = x[e] && xv && xt[e] && m[e];
        const struct nf_finetune_data fd = {.n_train = f->N,
                                            .n_val = f->n_val,
                                            .n_features = f->F,
                                            .x_train = x[e],
                                            .x_val = xv,
                                            .y_train_class = yc,
                                            .y_val_class = yvc};
        if (ok) ok = nf__finetune_ex(m[e], &fd, &o, &res[e], e ? &rng : NULL, &rng, &err) == NF_OK;
        CHECK(ok, "%s on %s: member %d: %s", f->name, dev, e, err.msg);
    }
    double pmax = 0;
    const int64_t C = 10, nt = f->n_test;
    double * acc = calloc((size_t) (nt * f->K), sizeof(double));
    int64_t * perm = malloc((size_t) f->N * sizeof(int64_t));
    float * xs = malloc((size_t) (f->N * f->F) * sizeof(float));
    int64_t * ys = malloc((size_t) f->N * sizeof(int64_t));
    float * logits = malloc((size_t) (nt * C) * sizeof(float));
    for (int e = 0; ok && acc && perm && xs && ys && logits && e < E; e++) {
        int64_t k = 0;
        CHECK_RC(nf__mitra_eval_support(&rng, f->N, 8192, perm, &k, &err), NF_OK, &err);
        for (int64_t i = 0; i < k; i++) {
            memcpy(xs + i * f->F, x[e] + perm[i] * f->F, (size_t) f->F * sizeof(float));
            ys[i] = yc[perm[i]];
        }
        const struct nf_mitra_input in = {
            .n_support = k, .n_query = nt, .n_features = f->F, .x_support = xs, .x_query = xt[e], .y_class = ys};
        CHECK_RC(nf_mitra_forward(m[e]->impl, &in, logits, &err), NF_OK, &err);
        for (int64_t i = 0; i < nt; i++) {
            float ex[64], s = 0;
            for (int c = 0; c < f->K; c++) s += ex[c] = expf(logits[i * C + c]);
            for (int c = 0; c < f->K; c++) acc[i * f->K + c] += (double) (ex[c] / s);
        }
    }
    for (int64_t i = 0; ok && acc && i < nt * f->K; i++) pmax = fmax(pmax, fabs(acc[i] / E - pp[i]));
    if (ok) CHECK(pmax <= 1e-5, "%s on %s: predict_proba of the ensemble: max |d| %.3g", f->name, dev, pmax);
    if (ok)
        printf("%s on %s: %d members (best epochs %lld, %lld; validation losses %.6g, %.6g), prediction max |d| %.2g\n",
               f->name, dev, E, (long long) res[0].best_step, (long long) res[1].best_step, res[0].best_val_loss,
               res[1].best_val_loss, pmax);
    free(acc), free(perm), free(xs), free(ys), free(logits);
    for (int e = 0; e < E; e++) nf_model_free(m[e]);
}

static void test_case(const char * root, const char * name, nf_backend * be, const char * dev) {
    nf_err err = {0};
    char path[1024], dir[256];
    struct fx f = {.name = name};
    snprintf(path, sizeof(path), "%s/%s/case.json", root, name);
    CHECK_RC(nf__json_read_file(path, &f.js, &err), NF_OK, &err);
    snprintf(path, sizeof(path), "%s/%s/inputs.safetensors", root, name);
    CHECK_RC(nf__st_open(path, &f.in, &err), NF_OK, &err);
    snprintf(path, sizeof(path), "%s/%s/expected.safetensors", root, name);
    CHECK_RC(nf__st_open(path, &f.ex, &err), NF_OK, &err);
    if (!f.js || !f.in.tensors || !f.ex.tensors) goto done;
    const cJSON * task = cJSON_GetObjectItemCaseSensitive(f.js, "task");
    f.cls = cJSON_IsString(task) && strcmp(task->valuestring, "classification") == 0;
    f.K = (int) jnum(f.js, "K", 1);
    f.N = (int64_t) jnum(f.js, "n_train", 0);
    f.F = (int64_t) jnum(f.js, "n_kept", 0);
    f.n_val = (int64_t) jnum(f.js, "n_val", 0);
    f.n_test = (int64_t) jnum(f.js, "n_test", 0);
    f.steps = (int64_t) jnum(f.js, "steps", 0);
    snprintf(dir, sizeof(dir), "test-finetune-parity.tmp/%s", name);
    struct data d = {0};
    if (strcmp(name, "ensemble") == 0) {
        if (!g_step1_only) ensemble(&f, be, dev, dir);
    } else if (load_data(&f, &d) == 0) {
        step1(&f, be, dev, &d, dir);
        if (g_step1_only) goto free;
        run(&f, be, dev, &d, dir, 1);
        if (tens(&f.ex, "pred_proba_best", NF_ST_F32, NULL)) run(&f, be, dev, &d, dir, 0);
        if (strcmp(name, "cls_lr") == 0) split_run(&f, be, dev, &d, dir);
    }
free:
    free(d.yv);
    free(d.yr);
    nf_test_rm_model(dir);
done:
    copies_free();
    cJSON_Delete(f.js);
    nf__st_close(&f.in);
    nf__st_close(&f.ex);
}

int main(int argc, char ** argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: test-finetune-parity FIXTURE_ROOT DEVICE [CASE...]\n");
        return 2;
    }
    nf_err err = {0};
    nf_backend * be = NULL;
    if (nf_backend_init(argv[2], NF_PRECISION_EXACT, &be, &err) != NF_OK) {
        printf("not available: %s: %s\n", argv[2], err.msg);
        return 77;
    }
    int named = 0;
    for (int i = 3; i < argc; i++) {
        if (strcmp(argv[i], "--step1") == 0)
            g_step1_only = 1;
        else
            named++;
    }
    if (named) {
        for (int i = 3; i < argc; i++)
            if (strcmp(argv[i], "--step1") != 0) test_case(argv[1], argv[i], be, argv[2]);
    } else {
        for (int i = 0; g_cases[i]; i++) {
            /* AutoGluon's 50-step default not on PoCL (a minute on one thread); its per-step
             * agreement is the other cases' */
            if (strcmp(g_cases[i], "cls_50") == 0 && strncmp(argv[2], "opencl", 6) == 0) {
                printf("cls_50: cpu only (named, it runs on %s too)\n", argv[2]);
                continue;
            }
            test_case(argv[1], g_cases[i], be, argv[2]);
        }
    }
    nf_backend_free(be);
    remove("test-finetune-parity.tmp");
    return nf_test_done("test-finetune-parity");
}
