/* test-tabstar-train.c -- TabSTAR's training step (src/models/tabstar-train.h)
 * against upstream's own (tests/fixtures/tabstar-train, made by
 * reference/tabstar_train_fixtures.py: tabstar's TabStarModel + PEFT LoRA as
 * training/lora.py sets it up, dropouts 0, fp32 and a float64 twin):
 *
 *   - loss and logits of the training forward;
 *   - every adapter's gradient: the full tensor's norm, and every 53rd element
 *     of each A and B: relative L2 error against the float64 twin
 *     e_c <= 4 e_pt + 1e-7 (spec finetune.md §4.5, the calibrated rule; e_pt
 *     = upstream fp32's own error), and the fixed fallback e_c <= 2e-4;
 *   - clip_grad_norm_'s total, the parameters after AdamW step 1 (element
 *     rule of §4.5) and after step 2 (relative, with the second step's clip
 *     active) and the loss between them;
 *   - the merge: nf__tab_forward_tokens after nf__tab_train_merge == the
 *     unmerged nf__tab_train_eval, within fp32 rounding.
 *
 *   test-tabstar-train FIXTURES DEVICE [--first] [CASE...]
 *
 * --first (the cuda emulator's stage): the first step only -- loss, logits,
 * every adapter's gradient, the placement; no updates, merge, small model,
 * dropout (DROPOUT itself: tests/backend-ops). */
#include "nofall.h"
#include "nf-test.h"
#include "core/model.h"
#include "io/nf-io.h"
#include "models/tabstar-train.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

/* per device: the cpu and opencl tests may run at once, each generating its checkpoints */
static char g_tmp[128] = "tabstar-train-test.tmp";
static int g_first; /* --first */

/* the fixture's initial A / B: 24-bit splitmix64 values * 2^-23 * scale (as the python script) */
static float hash_init(uint64_t seed, uint64_t mi, uint64_t w, uint64_t i, double scale) {
    uint64_t z = (((mi * 2 + w) << 32) | i) ^ (seed * 0x9E3779B97F4A7C15ull);
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    const int64_t v = (int64_t) (z >> 40) - (1 << 23);
    return (float) ((double) v * ldexp(1.0, -23) * scale);
}

static double num(const cJSON * o, const char * k) { return cJSON_GetObjectItem(o, k)->valuedouble; }

struct bound_stats {
    double worst_ratio; /* max e_c / bound */
    double worst_e;
};

/* a checkpoint without trainable text layers (2 of them): 15 adapters, the gradient stops at the fusion; a
 * smaller batch first, then the whole one (the work area grows); merged forward == unmerged eval */
static void small_model(const char * device, const struct nf_tab_batch * batch, const int64_t * yc, uint64_t hseed) {
    nf_err err = {0};
    char wdir[700];
    snprintf(wdir, sizeof(wdir), "%s/w-small", g_tmp);
    struct stat sb;
    if (stat(wdir, &sb) != 0) {
        const char * keys[2] = {"layers", "vocab"};
        const char * vals[2] = {"2", "1000"};
        CHECK_RC(nf_model_gen_weights("tabstar", wdir, 5, 2, keys, vals, &err), NF_OK, &err);
    }
    nf_backend * be = NULL;
    nf_model * model = NULL;
    struct nf_tab_train * t = NULL;
    CHECK_RC(nf_backend_init(device, NF_PRECISION_EXACT, &be, &err), NF_OK, &err);
    if (be) CHECK_RC(nf_model_load(be, wdir, &model, &err), NF_OK, &err);
    if (model) CHECK_RC(nf__tab_train_new(model->impl, batch->C, &t, &err), NF_OK, &err);
    if (!t) goto out;
    CHECK(nf__tab_train_modules(t) == 15, "%d modules", nf__tab_train_modules(t));
    const int64_t n = nf__tab_train_floats(t), BC = batch->B * batch->C;
    float *p = malloc((size_t) n * 4), *le = malloc((size_t) BC * 4), *lm = malloc((size_t) BC * 4), loss = NAN;
    for (int i = 0; i < nf__tab_train_modules(t); i++) {
        const struct nf_tab_lora_module * md = nf__tab_train_module(t, i);
        for (int64_t e = 0; e < NF_TAB_LORA_R * md->in; e++) p[md->off_a + e] = hash_init(hseed, i, 0, e, 0.0625);
        for (int64_t e = 0; e < NF_TAB_LORA_R * md->out; e++) p[md->off_b + e] = hash_init(hseed, i, 1, e, 0.015625);
    }
    CHECK_RC(nf__tab_train_write(t, 0, p, &err), NF_OK, &err);
    struct nf_tab_batch half = *batch;
    half.B = batch->B / 2;
    /* a text cache too small for the batch: nothing cached, the step runs the text layers */
    int64_t T = 0;
    for (int64_t u = 0; u < batch->n_str; u++) T += batch->lens[u];
    CHECK_RC(nf__tab_train_text_cache(t, (T - 1) * NF_TAB_D * 4, &err), NF_OK, &err);
    CHECK_RC(nf__tab_train_grad(t, &half, yc, NULL, 0.5f, &loss, NULL, &err), NF_OK, &err);
    CHECK(nf__tab_train_text_cached(t) == 0, "small model: %lld cached", (long long) nf__tab_train_text_cached(t));
    /* one large enough (all text layers frozen here: it holds their output): the eval below reads it */
    CHECK_RC(nf__tab_train_text_cache(t, T * NF_TAB_D * 4, &err), NF_OK, &err);
    CHECK_RC(nf__tab_train_read(t, 1, p, &err), NF_OK, &err);
    double g2 = 0;
    int finite = 1;
    for (int64_t i = 0; i < n; i++) {
        finite &= isfinite(p[i]) != 0;
        g2 += (double) p[i] * p[i];
    }
    CHECK(finite && g2 > 0 && isfinite(loss), "small model: gradient finite %d, |g|^2 %g, loss %g", finite, g2, loss);
    CHECK_RC(nf__tab_train_update(t, 1e-3, 0.9, 0.999, 1e-8, 0.01, 1.0f, NULL, &err), NF_OK, &err);
    CHECK_RC(nf__tab_train_eval(t, batch, NULL, NULL, le, NULL, &err), NF_OK, &err);
    CHECK(nf__tab_train_text_cached(t) == batch->n_str, "small model: %lld cached",
          (long long) nf__tab_train_text_cached(t));
    CHECK_RC(nf__tab_train_eval(t, batch, NULL, NULL, lm, NULL, &err), NF_OK, &err);
    CHECK(memcmp(le, lm, (size_t) BC * 4) == 0, "small model: the eval from the cache differs from the first");
    CHECK_RC(nf__tab_train_merge(t, &err), NF_OK, &err);
    CHECK_RC(nf__tab_forward_tokens(model->impl, batch->ids, batch->lens, batch->n_str, batch->cell, batch->x_num,
                                    batch->B, batch->S, batch->C, lm, &err),
             NF_OK, &err);
    double md = 0;
    for (int64_t i = 0; i < BC; i++) md = fmax(md, fabs((double) le[i] - lm[i]));
    printf("small model (2 text layers) on %s: 15 adapters, |g| %.4g, merged vs unmerged max |d| %.3g\n", device,
           sqrt(g2), md);
    CHECK(md <= 1e-5 * fmax(1, fabs(le[0])), "small model: merged forward differs by %g", md);
    /* the fit's min_rows: a batch with one new string (fewer tokens than min_rows) runs it padded with
     * cached strings, and its logits are the uncached step's bit for bit (>= 16 rows a GEMM's rows do not
     * depend on the row count) */
    const int64_t last = batch->lens[batch->n_str - 1], mr = last + 1 > 16 ? last + 1 : 16;
    if (batch->n_str > 1 && T - last >= mr) {
        int32_t * cellA = malloc((size_t) (batch->B * batch->S) * sizeof(int32_t));
        for (int64_t i = 0; i < batch->B * batch->S; i++)
            cellA[i] = batch->cell[i] == batch->n_str - 1 ? 0 : batch->cell[i];
        struct nf_tab_batch A = *batch;
        A.n_str = batch->n_str - 1;
        A.cell = cellA;
        CHECK_RC(nf__tab_train_text_cache(t, 0, &err), NF_OK, &err);
        CHECK_RC(nf__tab_train_eval(t, batch, NULL, NULL, le, NULL, &err), NF_OK, &err);
        CHECK_RC(nf__tab_train_text_cache(t, T * NF_TAB_D * 4, &err), NF_OK, &err);
        nf__tab_train_text_cache_rows(t, mr);
        CHECK_RC(nf__tab_train_eval(t, &A, NULL, NULL, lm, NULL, &err), NF_OK, &err);
        CHECK(nf__tab_train_text_cached(t) == A.n_str, "min_rows: %lld cached",
              (long long) nf__tab_train_text_cached(t));
        CHECK_RC(nf__tab_train_eval(t, batch, NULL, NULL, lm, NULL, &err), NF_OK, &err);
        CHECK(nf__tab_train_text_cached(t) == batch->n_str, "min_rows: %lld cached after the padded run",
              (long long) nf__tab_train_text_cached(t));
        CHECK(memcmp(le, lm, (size_t) BC * 4) == 0, "min_rows: the padded run's logits differ from the uncached step");
        free(cellA);
    } else {
        CHECK(0, "min_rows: the batch is too small for the padded-run check (%lld tokens)", (long long) T);
    }
    free(p);
    free(le);
    free(lm);
out:
    nf__tab_train_free(t);
    nf_model_free(model);
    nf_backend_free(be);
}

/* DROPOUT's mask (the function every backend's kernel matches exactly: tests/backend-ops): the kept
 * fraction within 5 binomial standard deviations of 1 - p, two seeds' masks independent */
static void mask_rate(void) {
    static const float ps[3] = {0.1f, 0.3f, 0.5f};
    const int64_t n = 1 << 20;
    for (int k = 0; k < 3; k++) {
        const double p = ps[k], sd = sqrt((double) n * p * (1 - p));
        const int32_t thr = (int32_t) floor(p * 16777216.0 + 0.5);
        int64_t kept = 0, both = 0;
        for (int64_t i = 0; i < n; i++) {
            const int a = nf__dropout_keep(0x1234u + (uint64_t) k, (uint64_t) i, thr);
            kept += a;
            both += a && nf__dropout_keep(0x9876u + (uint64_t) k, (uint64_t) i, thr);
        }
        const double q = 1 - p, sdb = sqrt((double) n * q * q * (1 - q * q));
        printf(
            "dropout mask p=%.1f: kept %lld of %lld (expected %.0f +- %.0f), kept by two seeds %lld (%.0f +- %.0f)\n",
            p, (long long) kept, (long long) n, q * n, sd, (long long) both, q * q * n, sdb);
        CHECK(fabs((double) kept - q * n) <= 5 * sd, "p=%g: kept %lld of %lld", p, (long long) kept, (long long) n);
        CHECK(fabs((double) both - q * q * n) <= 5 * sdb, "p=%g: two seeds keep %lld together", p, (long long) both);
    }
}

/* the step with dropout on (nf__tab_train_dropout) on the case's model and batch: the masks replay with the
 * seed and change from call to call, _grad with dropout leaves the text cache alone, the gradient is the
 * derivative of the dropped-out loss (central differences along it, the same masks replayed), and p = 0
 * again gives the no-dropout gradient bit for bit. On other devices: one step (finite, on the device, the
 * cache untouched), to keep the test's time */
static void dropout_checks(nf_tab * m, const struct nf_tab_batch * b, const int64_t * yc, const float * yv,
                           const float * p0, const float * g_off, float ls, const char * device) {
    nf_err err = {0};
    struct nf_tab_train * t = NULL;
    const clock_t c0 = clock();
    CHECK_RC(nf__tab_train_new(m, b->C, &t, &err), NF_OK, &err);
    if (!t) return;
    const int64_t n = nf__tab_train_floats(t);
    float *g1 = calloc((size_t) n, 4), *g2 = calloc((size_t) n, 4), *zero = calloc((size_t) n, 4);
    float *pp = calloc((size_t) n, 4), l1 = NAN, l2 = NAN, lp = NAN, lm = NAN;
    CHECK_RC(nf__tab_train_text_cache(t, 64 << 20, &err), NF_OK, &err);
    CHECK_RC(nf__tab_train_write(t, 0, p0, &err), NF_OK, &err);
    CHECK(nf__tab_train_dropout(t, 1.0f, 7, &err) == NF_ERR_ARG, "dropout 1 accepted");
    CHECK_RC(nf__tab_train_dropout(t, 0.1f, 7, &err), NF_OK, &err);
    CHECK_RC(nf__tab_train_grad(t, b, yc, yv, ls, &l1, NULL, &err), NF_OK, &err);
    CHECK_RC(nf__tab_train_read(t, 1, g1, &err), NF_OK, &err);
    CHECK(strncmp(m->placement.ops, device, strcspn(device, ":")) == 0 && !strchr(m->placement.ops, ','),
          "dropout: ops ran on \"%s\"", m->placement.ops);
    CHECK(nf__tab_train_text_cached(t) == 0, "dropout: _grad cached %lld strings",
          (long long) nf__tab_train_text_cached(t));
    if (strcmp(device, "cpu") != 0) { /* elsewhere one step (its DROPOUT kernels: tests/backend-ops) */
        double gn = 0;
        for (int64_t i = 0; i < n; i++) gn += (double) g1[i] * g1[i];
        CHECK(isfinite(l1) && isfinite(gn) && gn > 0, "dropout: loss %g, |g|^2 %g", l1, gn);
        printf("dropout 0.1 on %s: loss %.7g, |g| %.6g; %.2f CPU s\n", device, l1, sqrt(gn),
               (double) (clock() - c0) / CLOCKS_PER_SEC);
        goto done;
    }
    /* the same seed: the same masks */
    CHECK_RC(nf__tab_train_write(t, 1, zero, &err), NF_OK, &err);
    CHECK_RC(nf__tab_train_dropout(t, 0.1f, 7, &err), NF_OK, &err);
    CHECK_RC(nf__tab_train_grad(t, b, yc, yv, ls, &l2, NULL, &err), NF_OK, &err);
    CHECK_RC(nf__tab_train_read(t, 1, g2, &err), NF_OK, &err);
    CHECK(l1 == l2 && memcmp(g1, g2, (size_t) n * 4) == 0, "dropout: the same seed gives another step");
    /* the next call: new masks */
    CHECK_RC(nf__tab_train_write(t, 1, zero, &err), NF_OK, &err);
    CHECK_RC(nf__tab_train_grad(t, b, yc, yv, ls, &l2, NULL, &err), NF_OK, &err);
    CHECK_RC(nf__tab_train_read(t, 1, g2, &err), NF_OK, &err);
    double n1 = 0, n0 = 0, d0 = 0, d2 = 0, dot0 = 0;
    for (int64_t i = 0; i < n; i++) {
        n1 += (double) g1[i] * g1[i];
        n0 += (double) g_off[i] * g_off[i];
        d0 += ((double) g1[i] - g_off[i]) * ((double) g1[i] - g_off[i]);
        d2 += ((double) g1[i] - g2[i]) * ((double) g1[i] - g2[i]);
        dot0 += (double) g1[i] * g_off[i];
    }
    n1 = sqrt(n1);
    CHECK(isfinite(n1) && n1 > 0 && isfinite(l1), "dropout: |g| %g, loss %g", n1, l1);
    CHECK(sqrt(d0) > 1e-2 * sqrt(n0) && sqrt(d2) > 1e-2 * n1,
          "dropout: the masks hardly act (|g - g_nodrop| %g, |g - g_next| %g, |g| %g)", sqrt(d0), sqrt(d2), n1);
    /* central differences of the dropped-out loss along d = g / |g| (same masks: the seed again) */
    const double eps = 1e-2;
    for (int s = 0; s < 2; s++) {
        for (int64_t i = 0; i < n; i++) pp[i] = (float) ((double) p0[i] + (s ? -eps : eps) * g1[i] / n1);
        CHECK_RC(nf__tab_train_write(t, 0, pp, &err), NF_OK, &err);
        CHECK_RC(nf__tab_train_dropout(t, 0.1f, 7, &err), NF_OK, &err);
        CHECK_RC(nf__tab_train_grad(t, b, yc, yv, 0.0f, s ? &lm : &lp, NULL, &err), NF_OK, &err);
    }
    double h2 = 0; /* the step actually taken (fp32 parameters) */
    for (int64_t i = 0; i < n; i++) {
        const double a = (float) ((double) p0[i] + eps * g1[i] / n1), c = (float) ((double) p0[i] - eps * g1[i] / n1);
        h2 += (a - c) * (double) g1[i] / n1;
    }
    const double fd = ((double) lp - lm) / h2, an = n1 / ls, an0 = dot0 / n1 / ls;
    printf("dropout 0.1 on %s: loss %.7g; |g - g_nodrop| / |g| %.3g, next call's masks %.3g; d(loss) along g: "
           "central differences %.6g, the gradient %.6g (no-dropout gradient's %.6g)\n",
           device, l1, sqrt(d0) / n1, sqrt(d2) / n1, fd, an, an0);
    CHECK(fabs(fd - an) <= 2e-2 * an, "dropout: central differences %g vs the gradient %g", fd, an);
    CHECK(fabs(fd - an) < fabs(fd - an0), "dropout: the no-dropout gradient fits the differences better");
    /* ... and along the text layers' query / key adapters alone: their gradient reaches them only through
     * the attention probabilities, so through ATTENTION_BACKWARD's dropout mask */
    double nq = 0, dq0 = 0;
    float * gq = calloc((size_t) n, 4);
    for (int i = 0; gq && i < nf__tab_train_modules(t); i++) {
        const struct nf_tab_lora_module * md = nf__tab_train_module(t, i);
        if (!strstr(md->name, "attention.self.query") && !strstr(md->name, "attention.self.key")) continue;
        for (int64_t e = 0; e < NF_TAB_LORA_R * md->in; e++) gq[md->off_a + e] = g1[md->off_a + e];
        for (int64_t e = 0; e < md->out * NF_TAB_LORA_R; e++) gq[md->off_b + e] = g1[md->off_b + e];
    }
    for (int64_t i = 0; gq && i < n; i++) nq += (double) gq[i] * gq[i], dq0 += (double) gq[i] * g_off[i];
    nq = sqrt(nq);
    CHECK(gq && nq > 0, "dropout: no query / key adapter gradient");
    for (int s = 0; gq && nq > 0 && s < 2; s++) {
        for (int64_t i = 0; i < n; i++) pp[i] = (float) ((double) p0[i] + (s ? -eps : eps) * gq[i] / nq);
        CHECK_RC(nf__tab_train_write(t, 0, pp, &err), NF_OK, &err);
        CHECK_RC(nf__tab_train_dropout(t, 0.1f, 7, &err), NF_OK, &err);
        CHECK_RC(nf__tab_train_grad(t, b, yc, yv, 0.0f, s ? &lm : &lp, NULL, &err), NF_OK, &err);
    }
    h2 = 0;
    for (int64_t i = 0; gq && i < n; i++) {
        const double a = (float) ((double) p0[i] + eps * gq[i] / nq), c = (float) ((double) p0[i] - eps * gq[i] / nq);
        h2 += (a - c) * (double) gq[i] / nq;
    }
    const double fdq = ((double) lp - lm) / h2, anq = nq / ls, anq0 = dq0 / nq / ls;
    printf("dropout 0.1 on %s: d(loss) along the query / key adapters' gradient: central differences %.6g, the "
           "gradient %.6g (no-dropout gradient's %.6g)\n",
           device, fdq, anq, anq0);
    CHECK(fabs(fdq - anq) <= 2e-2 * anq, "dropout: q/k central differences %g vs the gradient %g", fdq, anq);
    CHECK(fabs(fdq - anq) < fabs(fdq - anq0), "dropout: q/k: the no-dropout gradient fits the differences better");
    free(gq);
    /* off again: the no-dropout step, bit for bit */
    CHECK_RC(nf__tab_train_dropout(t, 0.0f, 7, &err), NF_OK, &err);
    CHECK_RC(nf__tab_train_write(t, 0, p0, &err), NF_OK, &err);
    CHECK_RC(nf__tab_train_write(t, 1, zero, &err), NF_OK, &err);
    CHECK_RC(nf__tab_train_grad(t, b, yc, yv, ls, &l2, NULL, &err), NF_OK, &err);
    CHECK_RC(nf__tab_train_read(t, 1, g2, &err), NF_OK, &err);
    CHECK(memcmp(g2, g_off, (size_t) n * 4) == 0, "dropout 0: the gradient differs from the no-dropout one");
    printf("dropout checks on %s: %.2f CPU s\n", device, (double) (clock() - c0) / CLOCKS_PER_SEC);
done:
    free(g1);
    free(g2);
    free(zero);
    free(pp);
    nf__tab_train_free(t);
}

static void run_case(const char * cdir, const char * name, const char * device) {
    nf_err err = {0};
    char p[1024], wdir[700];
    snprintf(p, sizeof(p), "%s/case.json", cdir);
    cJSON * cj = NULL;
    CHECK_RC(nf__json_read_file(p, &cj, &err), NF_OK, &err);
    if (!cj) return;
    struct nf_npy sub;
    snprintf(p, sizeof(p), "%s/sub.npy", cdir);
    CHECK_RC(nf__npy_read(p, &sub, &err), NF_OK, &err);
    const int seed = (int) num(cj, "seed"), layers = (int) num(cj, "layers"), vocab = (int) num(cj, "vocab");
    const int64_t C = (int64_t) num(cj, "C"), B = (int64_t) num(cj, "n_rows"), S = (int64_t) num(cj, "n_cells");
    const int64_t stride = (int64_t) num(cj, "stride");
    const uint64_t hseed = (uint64_t) num(cj, "hash_seed");
    snprintf(wdir, sizeof(wdir), "%s/w-%d-%d-%d", g_tmp, seed, layers, vocab);
    struct stat sb;
    if (stat(wdir, &sb) != 0) {
        char l[16], v[16];
        snprintf(l, sizeof(l), "%d", layers);
        snprintf(v, sizeof(v), "%d", vocab);
        const char * keys[2] = {"layers", "vocab"};
        const char * vals[2] = {l, v};
        CHECK_RC(nf_model_gen_weights("tabstar", wdir, (uint64_t) seed, 2, keys, vals, &err), NF_OK, &err);
    }
    nf_backend * be = NULL;
    CHECK_RC(nf_backend_init(device, NF_PRECISION_EXACT, &be, &err), NF_OK, &err);
    nf_model * model = NULL;
    if (be) CHECK_RC(nf_model_load(be, wdir, &model, &err), NF_OK, &err);
    if (!model) {
        nf_backend_free(be);
        cJSON_Delete(cj);
        nf__npy_free(&sub);
        return;
    }
    nf_tab * m = model->impl;
    /* the batch */
    const cJSON * jids = cJSON_GetObjectItem(cj, "ids");
    const int64_t U = cJSON_GetArraySize(jids);
    int64_t T = 0;
    for (int64_t u = 0; u < U; u++) T += cJSON_GetArraySize(cJSON_GetArrayItem(jids, (int) u));
    int32_t *ids = malloc((size_t) T * 4), *lens = malloc((size_t) U * 4), *cell = malloc((size_t) (B * S) * 4);
    float *x_num = malloc((size_t) (B * S) * 4), *y_value = malloc((size_t) B * 4);
    int64_t * y_class = malloc((size_t) B * 8);
    for (int64_t u = 0, k = 0; u < U; u++) {
        const cJSON * l = cJSON_GetArrayItem(jids, (int) u);
        lens[u] = cJSON_GetArraySize(l);
        for (int j = 0; j < lens[u]; j++) ids[k++] = cJSON_GetArrayItem(l, j)->valueint;
    }
    for (int64_t i = 0; i < B * S; i++) {
        cell[i] = cJSON_GetArrayItem(cJSON_GetObjectItem(cj, "cell"), (int) i)->valueint;
        x_num[i] = (float) cJSON_GetArrayItem(cJSON_GetObjectItem(cj, "x_num"), (int) i)->valuedouble;
    }
    for (int64_t r = 0; r < B; r++) {
        const double v = cJSON_GetArrayItem(cJSON_GetObjectItem(cj, "y"), (int) r)->valuedouble;
        y_value[r] = (float) v;
        y_class[r] = (int64_t) v;
    }
    const struct nf_tab_batch batch = {ids, lens, U, cell, x_num, B, S, C};
    const int64_t * yc = C > 1 ? y_class : NULL;
    const float * yv = C > 1 ? NULL : y_value;

    struct nf_tab_train * t = NULL;
    CHECK_RC(nf__tab_train_new(m, C, &t, &err), NF_OK, &err);
    /* the classification case runs with the text cache (layers 0..5 once per string), the regression one
     * without */
    if (t && C > 1) CHECK_RC(nf__tab_train_text_cache(t, 64 << 20, &err), NF_OK, &err);
    const cJSON * jm = cJSON_GetObjectItem(cj, "modules");
    const int nm = t ? nf__tab_train_modules(t) : 0;
    CHECK(nm == cJSON_GetArraySize(jm), "%s: %d modules, fixture %d", name, nm, cJSON_GetArraySize(jm));
    const int64_t n = t ? nf__tab_train_floats(t) : 0;
    float *p0 = calloc((size_t) n, 4), *gc = calloc((size_t) n, 4), *pc = calloc((size_t) n, 4);
    int64_t n_sub = 0;
    for (int i = 0; t && i < nm && i < cJSON_GetArraySize(jm); i++) {
        const struct nf_tab_lora_module * md = nf__tab_train_module(t, i);
        CHECK(strcmp(md->name, cJSON_GetObjectItem(cJSON_GetArrayItem(jm, i), "name")->valuestring) == 0,
              "module %d: %s", i, md->name);
        for (int64_t e = 0; e < NF_TAB_LORA_R * md->in; e++)
            p0[md->off_a + e] = hash_init(hseed, (uint64_t) i, 0, (uint64_t) e, num(cj, "scale_a"));
        for (int64_t e = 0; e < NF_TAB_LORA_R * md->out; e++)
            p0[md->off_b + e] = hash_init(hseed, (uint64_t) i, 1, (uint64_t) e, num(cj, "scale_b"));
        n_sub += (NF_TAB_LORA_R * md->in + stride - 1) / stride + (NF_TAB_LORA_R * md->out + stride - 1) / stride;
    }
    CHECK(sub.ndim == 2 && sub.shape[0] == 4 && sub.shape[1] == n_sub, "%s: sub.npy is not (4, %lld)", name,
          (long long) n_sub);
    if (!t || nm != cJSON_GetArraySize(jm) || sub.shape[1] != n_sub) goto out;
    const float *g32 = (const float *) sub.data, *g64 = g32 + n_sub, *p1r = g32 + 2 * n_sub, *p2r = g32 + 3 * n_sub;
    CHECK_RC(nf__tab_train_write(t, 0, p0, &err), NF_OK, &err);

    /* the training forward + backward */
    float loss = NAN, *logits = calloc((size_t) (B * C), 4);
    clock_t c0 = clock();
    CHECK_RC(nf__tab_train_grad(t, &batch, yc, yv, (float) num(cj, "loss_scale"), &loss, logits, &err), NF_OK, &err);
    const double t_grad = (double) (clock() - c0) / CLOCKS_PER_SEC;
    CHECK(nf__tab_train_text_cached(t) == (C > 1 ? U : 0), "%s: %lld strings cached", name,
          (long long) nf__tab_train_text_cached(t));
    /* every op of the step ran where the model is (no host fallback) */
    printf("%s on %s: the step's ops ran on %s\n", name, device, m->placement.ops);
    CHECK(m->placement.ops[0] && !strchr(m->placement.ops, ',') &&
              strncmp(m->placement.ops, device, strcspn(device, ":")) == 0,
          "%s: ops ran on \"%s\"", name, m->placement.ops);
    const double L64 = num(cj, "loss64");
    double lmax = 0, lref = 0;
    for (int64_t i = 0; i < B * C; i++) {
        const double r = cJSON_GetArrayItem(cJSON_GetObjectItem(cj, "logits64"), (int) i)->valuedouble;
        lmax = fmax(lmax, fabs(logits[i] - r));
        lref = fmax(lref, fabs(r));
    }
    printf("%s on %s: loss %.8g (upstream f64 %.8g, f32 %.8g), logits max |d| %.3g; grad step %.2f s\n", name, device,
           loss, L64, num(cj, "loss"), lmax, t_grad);
    CHECK(fabs(loss - L64) <= 2e-5 * fmax(1, fabs(L64)), "%s: loss %.9g vs %.9g", name, loss, L64);
    CHECK(lmax <= 1e-4 * fmax(1, lref), "%s: logits max |d| %g", name, lmax);

    /* every gradient */
    CHECK_RC(nf__tab_train_read(t, 1, gc, &err), NF_OK, &err);
    if (!g_first) {
        /* the step adds to the gradient, bitwise the same run to run: a second call gives 2 g exactly */
        float l_again = NAN;
        CHECK_RC(nf__tab_train_grad(t, &batch, yc, yv, (float) num(cj, "loss_scale"), &l_again, NULL, &err), NF_OK,
                 &err);
        CHECK_RC(nf__tab_train_read(t, 1, pc, &err), NF_OK, &err);
        int64_t differ = 0;
        for (int64_t i = 0; i < n; i++) differ += pc[i] != 2 * gc[i];
        CHECK(differ == 0 && memcmp(&l_again, &loss, 4) == 0,
              "%s: a second step: %lld gradients not 2 g, loss %.9g %.9g", name, (long long) differ, l_again, loss);
        CHECK_RC(nf__tab_train_write(t, 1, gc, &err), NF_OK, &err);
        /* refusals */
        int64_t bad[64];
        for (int64_t r = 0; r < B && r < 64; r++) bad[r] = C > 1 ? C : 0;
        if (C > 1) {
            CHECK_RC(nf__tab_train_grad(t, &batch, bad, NULL, 1.0f, &l_again, NULL, &err), NF_ERR_INPUT, &err);
            CHECK_MSG(&err, "out of range");
        }
        struct nf_tab_batch other = batch;
        other.C = C > 1 ? 1 : 2;
        CHECK_RC(nf__tab_train_eval(t, &other, NULL, NULL, pc, NULL, &err), NF_ERR_ARG, &err);
        CHECK_RC(nf__tab_train_read(t, 4, pc, &err), NF_ERR_ARG, &err);
    }
    double worst = 0, worst_ratio = 0, worst_norm = 0;
    int worst_i = 0;
    for (int i = 0, k = 0; i < nm; i++) {
        const struct nf_tab_lora_module * md = nf__tab_train_module(t, i);
        const cJSON * jo = cJSON_GetArrayItem(jm, i);
        double nrm = 0, d2 = 0, r2 = 0, mx = 0, mref = 0;
        for (int ab = 0; ab < 2; ab++) {
            const int64_t off = ab ? md->off_b : md->off_a, cnt = NF_TAB_LORA_R * (ab ? md->out : md->in);
            for (int64_t e = 0; e < cnt; e++) nrm += (double) gc[off + e] * gc[off + e];
            for (int64_t e = 0; e < cnt; e += stride, k++) {
                const double d = (double) gc[off + e] - g64[k];
                d2 += d * d;
                r2 += (double) g64[k] * g64[k];
                mx = fmax(mx, fabs(d));
                mref = fmax(mref, fabs(g64[k]));
            }
        }
        const double e_c = sqrt(d2 / r2), bound = 4 * num(jo, "e_pt_sub") + 1e-7;
        const double e_norm = fabs(sqrt(nrm) - num(jo, "g64_norm")) / num(jo, "g64_norm");
        CHECK(e_c <= bound && e_c <= 2e-4 && mx <= 1e-3 * mref, "%s %s: e_c %.3g (bound %.3g), max |d| %.3g of %.3g",
              name, md->name, e_c, bound, mx, mref);
        CHECK(e_norm <= 4 * num(jo, "e_pt") + 1e-7, "%s %s: |g| %.9g vs %.9g", name, md->name, sqrt(nrm),
              num(jo, "g64_norm"));
        if (e_c / bound > worst_ratio) {
            worst_ratio = e_c / bound;
            worst_i = i;
        }
        worst = fmax(worst, e_c);
        worst_norm = fmax(worst_norm, e_norm);
        (void) g32;
    }
    printf("%s on %s: %d adapters: gradient rel. L2 vs float64 at most %.3g (worst e_c / (4 e_pt + 1e-7) = %.3g, %s); "
           "full-tensor norms within %.3g\n",
           name, device, nm, worst, worst_ratio, nf__tab_train_module(t, worst_i)->name, worst_norm);
    if (g_first) goto out;

    /* update 1, the loss after it, update 2 */
    const cJSON * steps = cJSON_GetObjectItem(cj, "steps");
    for (int s = 0; s < 2; s++) {
        const cJSON * js = cJSON_GetArrayItem(steps, s);
        float norm = NAN;
        CHECK_RC(nf__tab_train_update(t, num(js, "lr"), num(js, "beta1"), num(js, "beta2"), num(js, "eps"),
                                      num(js, "weight_decay"), (float) num(js, "max_norm"), &norm, &err),
                 NF_OK, &err);
        CHECK(fabs(norm - num(js, "norm")) <= 1e-4 * num(js, "norm"), "%s: step %d norm %.9g vs %.9g", name, s + 1,
              norm, num(js, "norm"));
        CHECK_RC(nf__tab_train_read(t, 0, pc, &err), NF_OK, &err);
        const double lr = num(js, "lr");
        double d2 = 0, r2 = 0, worst_el = 0;
        int64_t sensitive = 0, n_el = 0;
        /* Adam's first step is lr c g / (|c g| + eps) (c the clip coefficient): where |c g| is not far above
         * eps it moves with the gradient's last digits; allowed: 1e-4 lr (spec §4.5) + that derivative times
         * the difference between the two fp32 gradients */
        const double eps = num(js, "eps"), coef = fmin(1.0, num(js, "max_norm") / (num(js, "norm") + 1e-6));
        for (int i = 0, k = 0; i < nm; i++) {
            const struct nf_tab_lora_module * md = nf__tab_train_module(t, i);
            for (int ab = 0; ab < 2; ab++) {
                const int64_t off = ab ? md->off_b : md->off_a, cnt = NF_TAB_LORA_R * (ab ? md->out : md->in);
                for (int64_t e = 0; e < cnt; e += stride, k++, n_el++) {
                    const double ref = (double) (s ? p2r : p1r)[k] - p0[off + e],
                                 got = (double) pc[off + e] - p0[off + e];
                    d2 += (got - ref) * (got - ref);
                    r2 += ref * ref;
                    if (s == 0) {
                        const double d = fabs(got - ref), gmin = coef * fmin(fabs(gc[off + e]), fabs(g32[k]));
                        const double sens = lr * eps * coef * fabs((double) gc[off + e] - g32[k]) /
                                            ((gmin + eps) * (gmin + eps));
                        sensitive += sens > 1e-4 * lr;
                        CHECK(d <= 1e-4 * lr + 1.01 * sens && d <= 2 * lr, "%s %s: update 1 element %lld: |d| %.3g lr",
                              name, md->name, (long long) e, d / lr);
                        if (sens <= 1e-4 * lr) worst_el = fmax(worst_el, d / lr);
                    }
                }
            }
        }
        if (s == 0) {
            CHECK(sensitive * 50 < n_el, "%s: update 1: %lld of %lld elements eps-sensitive", name,
                  (long long) sensitive, (long long) n_el);
            printf("%s on %s: update 1 (lr %.3g, norm %.6g, max_norm %.3g): max |dw - dw_ref| / lr %.3g where "
                   "|g| >> eps; %lld of %lld elements within Adam's eps-sensitivity bound instead\n",
                   name, device, lr, norm, num(js, "max_norm"), worst_el, (long long) sensitive, (long long) n_el);
        }
        const double rel = sqrt(d2 / r2);
        CHECK(rel <= 1e-3, "%s: update %d: relative %.3g", name, s + 1, rel);
        printf("%s on %s: after update %d: |(w - w0) - (w_ref - w0)| / |w_ref - w0| = %.3g\n", name, device, s + 1,
               rel);
        if (s == 0) {
            float l2 = NAN;
            CHECK_RC(nf__tab_train_grad(t, &batch, yc, yv, (float) num(cj, "loss_scale"), &l2, NULL, &err), NF_OK,
                     &err);
            CHECK(fabs(l2 - num(js, "loss_after")) <= 2e-5 * fmax(1, fabs(num(js, "loss_after"))),
                  "%s: loss after update 1 %.9g vs %.9g", name, l2, num(js, "loss_after"));
        }
    }
    CHECK(nf__tab_train_steps(t) == 2, "steps %lld", (long long) nf__tab_train_steps(t));

    if (C > 1) dropout_checks(m, &batch, yc, yv, p0, gc, (float) num(cj, "loss_scale"), device);

    /* merge: the merged model's forward == the unmerged eval forward */
    float *le = calloc((size_t) (B * C), 4), *lm = calloc((size_t) (B * C), 4);
    float le_loss = NAN;
    CHECK_RC(nf__tab_train_eval(t, &batch, yc, yv, le, &le_loss, &err), NF_OK, &err);
    CHECK(isfinite(le_loss), "eval loss %g", le_loss);
    CHECK_RC(nf__tab_train_merge(t, &err), NF_OK, &err);
    CHECK_RC(nf__tab_forward_tokens(m, ids, lens, U, cell, x_num, B, S, C, lm, &err), NF_OK, &err);
    double md = 0, mref2 = 0, moved = 0;
    for (int64_t i = 0; i < B * C; i++) {
        md = fmax(md, fabs((double) lm[i] - le[i]));
        mref2 = fmax(mref2, fabs(le[i]));
        moved = fmax(moved, fabs((double) le[i] - logits[i]));
    }
    printf("%s on %s: merged forward vs unmerged eval: max |d| %.3g (the updates moved the logits by %.3g)\n", name,
           device, md, moved);
    CHECK(md <= 1e-5 * fmax(1, mref2), "%s: merged forward differs by %g", name, md);
    free(le);
    free(lm);
    free(logits);
    if (C > 1) small_model(device, &batch, yc, hseed);
out:
    free(p0);
    free(gc);
    free(pc);
    nf__tab_train_free(t);
    free(ids);
    free(lens);
    free(cell);
    free(x_num);
    free(y_value);
    free(y_class);
    nf__npy_free(&sub);
    cJSON_Delete(cj);
    nf_model_free(model);
    nf_backend_free(be);
}

int main(int argc, char ** argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: test-tabstar-train FIXTURES DEVICE [CASE...]\n");
        return 2;
    }
    nf_err err = {0};
    nf_backend * be = NULL;
    if (nf_backend_init(argv[2], NF_PRECISION_EXACT, &be, &err) != NF_OK) {
        printf("SKIP: %s: %s\n", argv[2], err.msg);
        return 77;
    }
    nf_backend_free(be);
    snprintf(g_tmp, sizeof(g_tmp), "tabstar-train-test-%.*s.tmp", (int) strcspn(argv[2], ":"), argv[2]);
    nf__mkdir_p(g_tmp, NULL);
    mask_rate();
    static const char * const all[] = {"cls3", "reg"};
    int a0 = 3;
    if (argc > 3 && strcmp(argv[3], "--first") == 0) g_first = 1, a0 = 4;
    const int n = argc > a0 ? argc - a0 : 2;
    for (int i = 0; i < n; i++) {
        const char * name = argc > a0 ? argv[a0 + i] : all[i];
        char p[1024];
        snprintf(p, sizeof(p), "%s/%s", argv[1], name);
        run_case(p, name, argv[2]);
    }
    return nf_test_done("test-tabstar-train");
}
