/* test-mitra-train.c -- Mitra's training step (src/models/mitra-train.c) on
 * tiny synthetic checkpoints (dim 16, 2 layers, 2 heads; a classifier with
 * 10 outputs and a regressor), independent of any fixture:
 *
 *   cpu:    the training forward's logits equal the inference forward's
 *           (within fp32 rounding), the loss equals the cross-entropy / MSE
 *           of those logits computed here in double, and every weight
 *           tensor's gradient passes a finite-difference check of the whole
 *           model (central differences of the loss through the inference
 *           forward, at the tensor's largest-|g| element and one more);
 *   DEVICE: the loss and every gradient tensor against the cpu's (relative
 *           L2 <= 1e-5), two steps bitwise identical, the AdamW update
 *           against the cpu's (finetune.md §4.5's rule);
 *   every device: the step's trace (every op on the device, only the
 *           inputs in and the loss / logits out); on cpu, a device lacking
 *           ATTENTION_BACKWARD is refused before anything runs, naming it.
 *
 * usage: test-mitra-train DEVICE   (exit 77: DEVICE not available) */
#include "nf-test.h"
#include "models/mitra-train.h"
#include "weights.h"
#include "nf-impl.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define NS 13
#define NQ 6
#define NF 4
#define LR 1e-3

static uint64_t g_s = 0x9e3779b97f4a7c15ull;
static double urand(void) {
    g_s ^= g_s << 13;
    g_s ^= g_s >> 7;
    g_s ^= g_s << 17;
    return (double) (g_s >> 11) / 9007199254740992.0;
}

struct data {
    float xs[NS * NF], xq[NQ * NF], ysv[NS], yqv[NQ];
    int64_t ysc[NS], yqc[NQ];
};

static void make_data(struct data * d) {
    for (int i = 0; i < NS * NF; i++) d->xs[i] = (float) (urand() * 4.0 - 2.0);
    for (int i = 0; i < NQ * NF; i++) d->xq[i] = (float) (urand() * 4.0 - 2.0);
    d->xs[3 * NF + 1] = d->xs[5 * NF + 1]; /* a tie */
    for (int i = 0; i < NS; i++) {
        d->ysc[i] = i % 3;
        d->ysv[i] = (float) urand();
    }
    for (int i = 0; i < NQ; i++) {
        d->yqc[i] = (i + 1) % 3;
        d->yqv[i] = (float) urand();
    }
}

static struct nf_mitra_input input_of(const struct data * d, int cls) {
    return (struct nf_mitra_input){
        .n_support = NS,
        .n_query = NQ,
        .n_features = NF,
        .x_support = d->xs,
        .x_query = d->xq,
        .y_class = cls ? d->ysc : NULL,
        .y_value = cls ? NULL : d->ysv,
    };
}

/* the loss of the inference forward's logits, in double */
static double loss_of(nf_mitra * m, const struct data * d, int cls, float * logits) {
    nf_err err = {0};
    const struct nf_mitra_input in = input_of(d, cls);
    int rc = nf_mitra_forward(m, &in, logits, &err);
    CHECK(rc == NF_OK, "inference forward: %s", err.msg);
    const int C = m->cfg.dim_output;
    double s = 0.0;
    for (int i = 0; i < NQ; i++) {
        const float * l = logits + i * C;
        if (cls) {
            double mx = l[0], z = 0.0;
            for (int c = 1; c < C; c++) mx = l[c] > mx ? l[c] : mx;
            for (int c = 0; c < C; c++) z += exp((double) l[c] - mx);
            s += mx + log(z) - (double) l[d->yqc[i]];
        } else {
            const double e = (double) l[0] - (double) d->yqv[i];
            s += e * e;
        }
    }
    return s / NQ;
}

static nf_model * load(nf_backend * be, const char * dir) {
    nf_err err = {0};
    nf_model * m = NULL;
    CHECK_RC(nf_model_load(be, dir, &m, &err), NF_OK, &err);
    return m;
}

struct step {
    float loss;
    float * grad; /* the gradient arena */
    float * upd;  /* the weights after one AdamW step */
};

/* keep: nf__mitra_train_keep_layers (-1: the default) */
static int one_step(nf_mitra * m, const struct data * d, int cls, struct step * out, float * logits, int64_t keep) {
    nf_err err = {0};
    struct nf_mitra_train * t = NULL;
    CHECK_RC(nf__mitra_train_new(m, &t, &err), NF_OK, &err);
    if (!t) return -1;
    nf__mitra_train_keep_layers(t, keep);
    const int64_t n = nf__mitra_train_floats(t);
    out->grad = malloc((size_t) n * sizeof(float));
    out->upd = malloc((size_t) n * sizeof(float));
    const struct nf_mitra_input in = input_of(d, cls);
    nf_trace_reset(m->be, NF_TRACE_TOTALS);
    int rc = nf__mitra_train_grad(t, &in, cls ? d->yqc : NULL, cls ? NULL : d->yqv, &out->loss, logits, &err);
    CHECK(rc == NF_OK, "training step: %s", err.msg);
    /* every op of the step on the device; transfers only at the boundary:
     * the inputs in (x_support, x_query, y_support, y_query), the loss and
     * the logits out */
    struct nf_trace_totals tot;
    nf_trace_totals_get(m->be, &tot);
    CHECK(tot.ops > 100 && tot.ops_off_device == 0 && tot.h2d_copies == 4 && tot.d2h_copies == (logits ? 2 : 1),
          "%s: training step trace: %lld ops, %lld off the device, %lld host->device and %lld device->host copies",
          m->be->name, (long long) tot.ops, (long long) tot.ops_off_device, (long long) tot.h2d_copies,
          (long long) tot.d2h_copies);
    if (rc == NF_OK) rc = nf__mitra_train_read(t, 1, out->grad, &err);
    /* one AdamW step; out->upd = the update w1 - w0 */
    float * w0 = malloc((size_t) n * sizeof(float));
    if (rc == NF_OK) rc = nf__mitra_train_read(t, 0, w0, &err);
    if (rc == NF_OK) rc = nf__mitra_train_adamw(t, LR, 0.9, 0.999, 1e-8, 0.1, &err);
    if (rc == NF_OK) rc = nf__mitra_train_read(t, 0, out->upd, &err);
    CHECK(rc == NF_OK, "adamw: %s", err.msg);
    for (int64_t i = 0; rc == NF_OK && i < n; i++) out->upd[i] -= w0[i];
    /* put the weights back */
    if (rc == NF_OK) rc = nf__mitra_train_write(t, 0, w0, -1, &err);
    free(w0);
    nf__mitra_train_free(t);
    return rc;
}

/* finite differences of the whole model, per weight tensor */
static void fd_check(nf_mitra * m, const struct data * d, int cls, const float * grad, const char * what) {
    nf_err err = {0};
    struct nf_weights * W = &m->weights;
    const int64_t n = nf__tensor_numel(&W->buf);
    float * w = malloc((size_t) n * sizeof(float));
    float * logits = malloc((size_t) NQ * (size_t) m->cfg.dim_output * sizeof(float));
    CHECK_RC(nf__tensor_download(&W->buf, w, &err), NF_OK, &err);
    int checked = 0, bad = 0;
    for (int k = 0; k < W->n_keys; k++) {
        const int64_t off = nf__weights_key_offset(W, k), len = nf__wkey_numel(&W->keys[k]);
        if (off < 0) continue;
        int64_t at[2] = {0, (int64_t) (urand() * (double) len)};
        for (int64_t i = 1; i < len; i++)
            if (fabsf(grad[off + i]) > fabsf(grad[off + at[0]])) at[0] = i;
        for (int j = 0; j < 2; j++) {
            const int64_t e = off + at[j];
            const float w0 = w[e];
            const float h = 1e-2f * (fabsf(w0) > 1.0f ? fabsf(w0) : 1.0f);
            w[e] = w0 + h;
            CHECK_RC(nf__tensor_upload(&W->buf, w, &err), NF_OK, &err);
            const double lp = loss_of(m, d, cls, logits);
            w[e] = w0 - h;
            CHECK_RC(nf__tensor_upload(&W->buf, w, &err), NF_OK, &err);
            const double lm = loss_of(m, d, cls, logits);
            w[e] = w0;
            const double fd = (lp - lm) / (2.0 * (double) h), g = grad[e];
            /* fp32 forward noise ~1e-7 / h, plus the O(h^2) curvature term */
            const double tol = 0.03 * fabs(fd) + 3e-4;
            checked++;
            if (fabs(fd - g) > tol) {
                bad++;
                CHECK(0, "%s: d loss / d %s[%lld]: backward %.6g, finite difference %.6g", what, W->keys[k].name,
                      (long long) at[j], g, fd);
            }
        }
    }
    CHECK_RC(nf__tensor_upload(&W->buf, w, &err), NF_OK, &err);
    printf("%s: finite differences: %d elements of %d tensors, %d off\n", what, checked, W->n_keys, bad);
    free(w);
    free(logits);
}

static double l2(const float * a, const float * b, int64_t n) {
    double d = 0.0;
    for (int64_t i = 0; i < n; i++) d += ((double) a[i] - (b ? b[i] : 0.0)) * ((double) a[i] - (b ? b[i] : 0.0));
    return sqrt(d);
}

static void test_task(const char * dev, nf_backend * be, nf_backend * cpu, int cls) {
    nf_err err = {0};
    const char * what = cls ? "classifier" : "regressor";
    char dir[128];
    snprintf(dir, sizeof(dir), "test-mitra-train.tmp/%s", what);
    const char * keys[] = {"dim", "layers", "heads", "outputs", "task"};
    const char * vals[] = {"16", "2", "2", cls ? "10" : "1", cls ? "classification" : "regression"};
    CHECK_RC(nf__model_gen_weights_ex("mitra", dir, 20261204, 5, keys, vals, NULL, 0.0f, NULL, 0, &err), NF_OK, &err);
    nf_model *mc = load(cpu, dir), *md = load(be, dir);
    if (!mc || !md) goto done;
    struct data d;
    make_data(&d);
    nf_mitra *c = mc->impl, *dv = md->impl;
    const int C = c->cfg.dim_output;
    float *lt = malloc((size_t) (NQ * C) * sizeof(float)), *li = malloc((size_t) (NQ * C) * sizeof(float));
    struct step sc = {0}, sd = {0}, sd2 = {0}, sd3 = {0};
    if (one_step(c, &d, cls, &sc, lt, -1) != 0) goto free;
    const double L = loss_of(c, &d, cls, li);
    CHECK(nf_test_close("training vs inference logits", lt, li, (size_t) (NQ * C), 1e-5, 1e-6), "%s", what);
    CHECK(fabs((double) sc.loss - L) <= 2e-6 * (1.0 + fabs(L)), "%s: loss %.9g, from the logits %.9g", what, sc.loss,
          L);
    if (strcmp(dev, "cpu") == 0) fd_check(c, &d, cls, sc.grad, what);
    /* the device against the cpu, and against itself with the top layer's
     * sub-block inputs saved by the forward and the other layer run again in
     * backward, and with both run again (by default both are saved): bit for
     * bit */
    const int64_t n = nf__tensor_numel(&c->weights.buf);
    if (one_step(dv, &d, cls, &sd, NULL, -1) != 0 || one_step(dv, &d, cls, &sd2, NULL, 1) != 0 ||
        one_step(dv, &d, cls, &sd3, NULL, 0) != 0)
        goto free;
    CHECK(fabsf(sd.loss - sc.loss) <= 2e-6f * (1.0f + fabsf(sc.loss)), "%s on %s: loss %.9g, cpu %.9g", what, dev,
          sd.loss, sc.loss);
    CHECK(memcmp(sd.grad, sd2.grad, (size_t) n * sizeof(float)) == 0 && sd.loss == sd2.loss,
          "%s on %s: two steps differ", what, dev);
    CHECK(memcmp(sd.upd, sd2.upd, (size_t) n * sizeof(float)) == 0, "%s on %s: two AdamW updates differ", what, dev);
    CHECK(memcmp(sd.grad, sd3.grad, (size_t) n * sizeof(float)) == 0 && sd.loss == sd3.loss,
          "%s on %s: a step running both layers again in backward differs", what, dev);
    /* each gradient tensor: relative L2 <= 1e-5, relative to the larger of its
     * own norm and 1e-3 of the whole gradient's (the attention key biases'
     * true gradient is exactly 0: both sides hold rounding noise there);
     * the update (finetune.md §4.5): |du - du_cpu| <= 1e-4 lr, except where
     * |g_cpu| <= 1e-5 max |g_cpu| of the tensor (a sign at rounding level),
     * which may differ by up to 2 lr and must stay under 0.1 % */
    const struct nf_weights * W = &c->weights;
    const double gnorm = l2(sc.grad, NULL, n);
    double worst = 0.0;
    int64_t exempt = 0;
    int zero_tensors = 0;
    for (int k = 0; k < W->n_keys; k++) {
        const int64_t off = nf__weights_key_offset(W, k), len = nf__wkey_numel(&W->keys[k]);
        if (off < 0) continue;
        const double ref = l2(sc.grad + off, NULL, len);
        const double e = l2(sd.grad + off, sc.grad + off, len) / (ref > 1e-3 * gnorm ? ref : 1e-3 * gnorm);
        worst = e > worst ? e : worst;
        CHECK(e <= 1e-5, "%s on %s: gradient of %s: relative L2 %.3g vs cpu", what, dev, W->keys[k].name, e);
        float gmax = 0.0f;
        for (int64_t i = 0; i < len; i++) gmax = fabsf(sc.grad[off + i]) > gmax ? fabsf(sc.grad[off + i]) : gmax;
        /* a gradient that is exactly 0 in exact arithmetic (the attention key
         * biases: softmax ignores a shift common to a row's scores) holds
         * rounding noise: its update is a sign of noise on both sides */
        if (ref <= 1e-5 * gnorm) {
            zero_tensors++;
            for (int64_t i = off; i < off + len; i++) {
                CHECK(fabs((double) sd.upd[i] - (double) sc.upd[i]) <= 2.0 * LR * 1.001, "%s on %s: update of %s", what,
                      dev, W->keys[k].name);
            }
            continue;
        }
        for (int64_t i = off; i < off + len; i++) {
            const double du = fabs((double) sd.upd[i] - (double) sc.upd[i]);
            if (fabsf(sc.grad[i]) <= 1e-5f * gmax) {
                exempt += du > 1e-4 * LR;
                CHECK(du <= 2.0 * LR * 1.001, "%s on %s: update of %s[%lld]: %.3g", what, dev, W->keys[k].name,
                      (long long) (i - off), du);
            } else {
                CHECK(du <= 1e-4 * LR, "%s on %s: update of %s[%lld] differs by %.3g (lr %g)", what, dev,
                      W->keys[k].name, (long long) (i - off), du, LR);
            }
        }
    }
    CHECK(exempt * 1000 < n, "%s on %s: %lld of %lld updates differ at rounding level", what, dev, (long long) exempt,
          (long long) n);
    printf("%s on %s: loss %.7g (cpu %.7g), worst gradient tensor %.3g relative L2 vs cpu, %lld updates differ "
           "at rounding level, %d tensors with a zero gradient\n",
           what, dev, sd.loss, sc.loss, worst, (long long) exempt, zero_tensors);
    CHECK(zero_tensors <= 2 * c->cfg.n_layers, "%s: %d gradient tensors near 0 (only the %d key biases should be)",
          what, zero_tensors, 2 * c->cfg.n_layers);
free:
    free(lt);
    free(li);
    free(sc.grad);
    free(sc.upd);
    free(sd.grad);
    free(sd.upd);
    free(sd2.grad);
    free(sd2.upd);
    free(sd3.grad);
    free(sd3.upd);
done:
    nf_model_free(mc);
    nf_model_free(md);
    nf_test_rm_model(dir);
}

/* a device with the cpu's kernels but ATTENTION_BACKWARD: training is refused
 * before anything runs, naming the op (inference still works there) */
static struct nf_backend_i lacking_iface;
static struct nf_kernel lacking_kernels[NF_OP_COUNT];
static int lacking_where(nf_backend * be, void * h, char * out, size_t n, nf_err * err) {
    snprintf(out, n, "%s", be->name);
    return NF_OK;
}

/* a tiny model at dir on be: training refused at once, the message naming each of want
 * (NULL-terminated), nothing run or allocated */
static void refused_at_once(nf_backend * be, const char * dir, const char * const * want) {
    nf_err err = {0};
    const char * keys[] = {"dim", "layers", "heads"};
    const char * vals[] = {"16", "1", "2"};
    CHECK_RC(nf__model_gen_weights_ex("mitra", dir, 7, 3, keys, vals, NULL, 0.0f, NULL, 0, &err), NF_OK, &err);
    nf_model * m = load(be, dir);
    if (m) {
        struct nf_mitra_train * t = NULL;
        nf_trace_reset(be, NF_TRACE_TOTALS);
        CHECK_RC(nf__mitra_train_new(m->impl, &t, &err), NF_ERR_UNSUPPORTED, &err);
        for (; *want; want++) CHECK_MSG(&err, *want);
        struct nf_trace_totals tot;
        nf_trace_totals_get(be, &tot);
        CHECK(t == NULL && tot.ops == 0 && tot.allocs == 0, "nothing ran or was allocated (%lld ops)",
              (long long) tot.ops);
        nf_model_free(m);
    }
    nf_test_rm_model(dir);
}

static void test_lacking(nf_backend * cpu) {
    lacking_iface = *cpu->iface;
    lacking_iface.kind = "lacks-attention-backward";
    lacking_iface.buffer_where = lacking_where;
    memcpy(lacking_kernels, cpu->iface->kernels, sizeof(lacking_kernels));
    lacking_kernels[NF_OP_ATTENTION_BACKWARD] = (struct nf_kernel){0};
    lacking_iface.kernels = lacking_kernels;
    nf_backend * be = nf__backend_new(&lacking_iface, NULL, "lacks-backward:0");
    static const char * const want[] = {"op ATTENTION_BACKWARD", "lacks-backward:0", "does not fall back", NULL};
    refused_at_once(be, "test-mitra-train.tmp/lacking", want);
    nf_backend_free(be);
}

/* the cpu under bf16-autocast (where the CPU has its kernels): the backward ops have no
 * bf16 rule, so training is refused at once, naming the mode */
static void test_bf16_refused(void) {
    nf_err err = {0};
    nf_backend * be = NULL;
    if (nf_backend_init("cpu", NF_PRECISION_BF16_AUTOCAST, &be, &err) != NF_OK) {
        printf("skip: no bf16-autocast on this cpu: %s\n", err.msg);
        return;
    }
    static const char * const want[] = {"fine-tuning under --precision bf16-autocast", NULL};
    refused_at_once(be, "test-mitra-train.tmp/bf16", want);
    nf_backend_free(be);
}

int main(int argc, char ** argv) {
    const char * dev = argc > 1 ? argv[1] : "cpu";
    nf_err err = {0};
    nf_backend *be = NULL, *cpu = NULL;
    if (nf_backend_init(dev, NF_PRECISION_EXACT, &be, &err) != NF_OK) {
        printf("not available: %s: %s\n", dev, err.msg);
        return 77;
    }
    CHECK_RC(nf_backend_init("cpu", NF_PRECISION_EXACT, &cpu, &err), NF_OK, &err);
    test_task(dev, be, cpu, 1);
    test_task(dev, be, cpu, 0);
    if (strcmp(dev, "cpu") == 0) {
        test_lacking(cpu);
        test_bf16_refused();
    }
    nf_backend_free(be);
    nf_backend_free(cpu);
    return nf_test_done("test-mitra-train");
}
