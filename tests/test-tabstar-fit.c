/* test-tabstar-fit.c FIXTURES -- TabSTAR's fit (src/tabular/tabstar-fit*.c;
 * spec finetune.md §3):
 *
 *   pieces   FIXTURES/pieces.txt (reference/tabstar_fit_fixtures.py: tabstar
 *            1.1.16's split_to_val, sklearn's roc_auc_score / r2_score,
 *            torch's stack().mean(0) and float32 loss sum): the split's row
 *            ids equal, the refusals where upstream raises, metrics within
 *            1e-15 (the same double arithmetic), the float32 mean and loss and
 *            the threshold bit for bit;
 *   loop     a fake training step (no model): the batches each epoch feeds
 *            (replayed permutations, or numpy's RandomState(seed) ones), loss
 *            scale 1/2, the updates grouped by the global batch count (an odd
 *            count of batches per epoch alternates [2,2,1] / [1,2,2]), the
 *            OneCycle lr and beta1 of each epoch (the spec's closed forms),
 *            early stopping on a scripted metric (strict >, patience 5, the
 *            stopping epoch not checkpointed), the epochs averaged within the
 *            loss threshold and their float32 mean written back, the best
 *            epoch's adapter without averaging. */
#include "tabular/tabstar-fit.h"
#include "tabular/tabstar-verbalize.h"
#include "models/tabstar-cells.h"
#include "core/model.h"
#include "core/nf-ops.h"
#include "io/nf-io.h"
#include "nf-test.h"
#include "nofall.h"

#include <cjson/cJSON.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- pieces.txt ------------------------------------------------------------ */

/* the numbers of one " | "-separated field */
static int64_t nums(char * f, double * out, int64_t cap) {
    int64_t n = 0;
    char * e;
    for (;;) {
        while (*f == ' ') f++;
        if (!*f) break;
        const double v = strtod(f, &e);
        if (e == f) break;
        if (n < cap) out[n] = v;
        n++;
        f = e;
    }
    return n;
}

static int split_fields(char * line, char ** f, int cap) {
    int n = 0;
    f[n++] = line;
    for (char * p = line; (p = strstr(p, " | ")) && n < cap; p += 3) {
        *p = 0;
        f[n++] = p + 3;
    }
    return n;
}

enum { CAP = 40000 };
static double a[CAP], b[CAP], c[CAP];

static void check_split(char ** f) {
    char name[64], kind[8];
    long long n, val;
    sscanf(f[0], "split %63s %7s %lld %lld", name, kind, &n, &val);
    const int64_t ny = nums(f[1], a, CAP);
    int64_t * y = malloc((size_t) n * sizeof(int64_t));
    for (int64_t i = 0; i < ny && i < n; i++) y[i] = (int64_t) a[i];
    const int cls = strcmp(kind, "cls") == 0;
    CHECK(!cls || ny == n, "%s: %lld class ids for %lld rows", name, (long long) ny, n);
    struct nf_tsf_split s;
    nf_err err = {0};
    const int rc = nf__tsf_split_to_val(cls ? y : NULL, n, &s, &err);
    if (strncmp(f[2], "error", 5) == 0) {
        CHECK(rc == NF_ERR_INPUT, "%s: upstream raises, nofall returned %s", name, nf_result_name(rc));
        printf("split %s: refused as upstream: %s\n", name, err.msg);
        free(y);
        return;
    }
    CHECK_RC(rc, NF_OK, &err);
    const int64_t nt = nums(f[2], b, CAP), nv = nums(f[3], c, CAP);
    int same = rc == NF_OK && s.n_train == nt && s.n_val == nv;
    for (int64_t i = 0; same && i < nt; i++) same = s.train[i] == (int64_t) b[i];
    for (int64_t i = 0; same && i < nv; i++) same = s.val[i] == (int64_t) c[i];
    CHECK(same, "%s: split differs (train %lld / %lld rows, val %lld / %lld)", name, (long long) s.n_train,
          (long long) nt, (long long) s.n_val, (long long) nv);
    printf("split %s (%s, %lld rows): train %lld, val %lld row ids identical: %s\n", name, kind, n, (long long) nt,
           (long long) nv, same ? "yes" : "NO");
    nf__tsf_split_free(&s);
    free(y);
}

static void pieces(const char * dir) {
    char path[1024];
    snprintf(path, sizeof(path), "%s/pieces.txt", dir);
    FILE * fp = fopen(path, "r");
    CHECK(fp != NULL, "cannot open %s", path);
    if (!fp) return;
    static char line[1 << 20];
    int n_auc = 0, n_r2 = 0, n_avg = 0, n_loss = 0, n_th = 0, n_init = 0;
    double worst_auc = 0, worst_r2 = 0;
    while (fgets(line, sizeof(line), fp)) {
        line[strcspn(line, "\n")] = 0;
        if (line[0] == '#' || !line[0]) continue;
        char * f[8] = {0};
        const int nf = split_fields(line, f, 8);
        if (strncmp(line, "split ", 6) == 0 && nf == 4) {
            check_split(f);
        } else if (strncmp(line, "auc ", 4) == 0 && nf == 4) {
            long long C, n;
            sscanf(f[0], "auc %lld %lld", &C, &n);
            nums(f[1], a, CAP);
            const int64_t np = nums(f[2], b, CAP);
            const double want = strtod(f[3], NULL);
            int64_t * y = malloc((size_t) n * sizeof(int64_t));
            float * p = malloc((size_t) (n * C) * sizeof(float));
            for (int64_t i = 0; i < n; i++) y[i] = (int64_t) a[i];
            for (int64_t i = 0; i < n * C; i++) p[i] = 0.0f;
            if (C == 2) /* the class-1 column only: column 0 its complement */
                for (int64_t i = 0; i < n && i < np; i++) p[i * 2 + 1] = (float) b[i], p[i * 2] = 1.0f - (float) b[i];
            else
                for (int64_t i = 0; i < n * C && i < np; i++) p[i] = (float) b[i];
            const double got = nf__tsf_metric(C, n, y, NULL, p), dd = fabs(got - want);
            worst_auc = dd > worst_auc ? dd : worst_auc;
            CHECK(dd <= 1e-15, "auc C=%lld n=%lld: %.17g, sklearn %.17g", C, n, got, want);
            n_auc++;
            free(y), free(p);
        } else if (strncmp(line, "r2 ", 3) == 0 && nf == 4) {
            long long n;
            sscanf(f[0], "r2 %lld", &n);
            nums(f[1], a, CAP);
            nums(f[2], b, CAP);
            float * p = malloc((size_t) n * sizeof(float));
            for (int64_t i = 0; i < n; i++) p[i] = (float) b[i];
            const double want = strtod(f[3], NULL), got = nf__tsf_metric(1, n, NULL, a, p);
            const double dd = fabs(got - want) / fmax(1.0, fabs(want));
            worst_r2 = dd > worst_r2 ? dd : worst_r2;
            CHECK(dd <= 1e-15, "r2 n=%lld: %.17g, sklearn %.17g", n, got, want);
            n_r2++;
            free(p);
        } else if (strncmp(line, "avgf32 ", 7) == 0 && nf == 3) {
            long long k, m;
            sscanf(f[0], "avgf32 %lld %lld", &k, &m);
            nums(f[1], a, CAP);
            nums(f[2], b, CAP);
            float * x = malloc((size_t) (k * m) * sizeof(float));
            float * got = malloc((size_t) m * sizeof(float));
            const float ** xs = malloc((size_t) k * sizeof(float *));
            for (int64_t i = 0; i < k * m; i++) x[i] = (float) a[i];
            for (int64_t i = 0; i < k; i++) xs[i] = x + i * m;
            nf__tsf_mean_f32(xs, (int) k, m, got);
            int64_t bad = 0;
            for (int64_t j = 0; j < m; j++) bad += got[j] != (float) b[j];
            CHECK(bad == 0, "stack().mean(0) of %lld x %lld: %lld values differ in bits", k, m, (long long) bad);
            n_avg++;
            free(x), free(got), free(xs);
        } else if (strncmp(line, "valloss ", 8) == 0 && nf == 4) {
            const int64_t nb = nums(f[1], a, CAP);
            nums(f[2], b, CAP);
            float l[64];
            int64_t r[64];
            for (int64_t i = 0; i < nb && i < 64; i++) l[i] = (float) a[i], r[i] = (int64_t) b[i];
            const float got = nf__tsf_val_loss(l, r, (int) nb), want = (float) strtod(f[3], NULL);
            CHECK(got == want, "validation loss of %lld batches: %.9g, upstream %.9g", (long long) nb, got, want);
            n_loss++;
        } else if (strncmp(line, "thresh ", 7) == 0 && nf == 2) {
            const double bl = strtod(line + 7, NULL), want = strtod(f[1], NULL);
            CHECK(nf__tsf_threshold(bl) == want, "threshold of %.17g: %.17g, upstream %.17g", bl, nf__tsf_threshold(bl),
                  want);
            n_th++;
        } else if (strncmp(line, "inita ", 6) == 0 && nf == 2) {
            char mod[128];
            long long r, in;
            unsigned long long seed;
            sscanf(line, "inita %127s %lld %lld %llu", mod, &r, &in, &seed);
            const int64_t nv = nums(f[1], a, CAP);
            float * got = malloc((size_t) (r * in) * sizeof(float));
            nf__tsf_init_a(mod, r, in, seed, got);
            int64_t bad = nv != r * in;
            for (int64_t i = 0; i < nv && i < r * in; i++) bad += got[i] != (float) a[i];
            CHECK(bad == 0, "initial A of %s: %lld of %lld values differ", mod, (long long) bad, r * in);
            n_init++;
            free(got);
        } else {
            CHECK(0, "unreadable record: %.60s", line);
        }
    }
    fclose(fp);
    CHECK(n_auc >= 10 && n_r2 >= 3 && n_avg >= 4 && n_loss >= 3 && n_th >= 5 && n_init >= 3, "records missing");
    printf("metrics: %d ROC-AUC (max |diff| %.3g), %d R2 (max rel diff %.3g); %d float32 means, %d validation "
           "losses, %d thresholds, %d initial A bit for bit\n",
           n_auc, worst_auc, n_r2, worst_r2, n_avg, n_loss, n_th, n_init);
}

/* ---- the loop on a fake step ----------------------------------------------------- */

enum { FP = 6, MAXB = 4096, MAXE = 64 };
struct fake {
    float w[FP];
    int64_t n_val;
    const double * yv;
    int n_grad, n_upd, epoch_pass;
    int64_t seen[MAXB]; /* the train rows fed, in order */
    int64_t n_seen;
    int upd_after[MAXB]; /* number of grad calls before each update */
    float scale_seen;
    double lr_seen[MAXB], b1_seen[MAXB];
    float w_at_eval[MAXE][FP]; /* the adapter at each validation pass */
    const double * noise;      /* per pass: prediction = y + noise * (-1)^i */
    const float * vloss;       /* per pass: each batch's loss */
    float written[FP];
    int n_write;
};

static int f_grad(void * u, const int64_t * rows, int64_t nb, float scale, float * loss, nf_err * err) {
    (void) err;
    struct fake * f = u;
    for (int64_t i = 0; i < nb && f->n_seen < MAXB; i++) f->seen[f->n_seen++] = rows[i];
    f->scale_seen = scale;
    *loss = 0.25f * (float) (f->n_grad % 7);
    f->n_grad++;
    return NF_OK;
}
static int f_update(void * u, double lr, double b1, nf_err * err) {
    (void) err;
    struct fake * f = u;
    if (f->n_upd < MAXB) {
        f->upd_after[f->n_upd] = f->n_grad;
        f->lr_seen[f->n_upd] = lr, f->b1_seen[f->n_upd] = b1;
    }
    f->n_upd++;
    for (int j = 0; j < FP; j++) f->w[j] += (float) (lr * 1000.0) * (float) (j + 1) - 0.01f * (float) f->n_upd;
    return NF_OK;
}
static int f_eval(void * u, int64_t b, int64_t e, float * logits, float * loss, nf_err * err) {
    (void) err;
    struct fake * f = u;
    if (b == 0) {
        memcpy(f->w_at_eval[f->epoch_pass < MAXE ? f->epoch_pass : MAXE - 1], f->w, sizeof(f->w));
        f->epoch_pass++;
    }
    const int p = f->epoch_pass - 1;
    for (int64_t i = b; i < e; i++) logits[i - b] = (float) (f->yv[i] + f->noise[p] * ((i % 2) ? -1.0 : 1.0));
    *loss = f->vloss[p];
    return NF_OK;
}
static int f_read(void * u, float * w, nf_err * err) {
    (void) err;
    memcpy(w, ((struct fake *) u)->w, sizeof(float) * FP);
    return NF_OK;
}
static int f_write(void * u, const float * w, nf_err * err) {
    (void) err;
    struct fake * f = u;
    memcpy(f->w, w, sizeof(float) * FP);
    memcpy(f->written, w, sizeof(float) * FP);
    f->n_write++;
    return NF_OK;
}

static void loop(void) {
    enum { NT = 300, NV = 200 }; /* 5 batches per epoch (odd), 2 validation batches */
    double yv[NV];
    for (int i = 0; i < NV; i++) yv[i] = sin(0.37 * i) * 2.0;
    /* epochs 1..10 and the final pass: metric = R2, falling with the noise */
    const double noise[] = {0.5, 0.3, 0.3, 0.4, 0.2, 0.25, 0.25, 0.21, 0.22, 0.9, 0.1};
    const float vloss[] = {1.0f, 0.8f, 0.9f, 0.81f, 0.7f, 0.75f, 0.9f, 0.71f, 0.72f, 0.6f, 0.5f};
    struct fake f;
    memset(&f, 0, sizeof(f));
    f.n_val = NV, f.yv = yv, f.noise = noise, f.vloss = vloss;
    struct nf_tsf_step s = {&f, FP, 1, f_grad, f_update, f_eval, f_read, f_write};
    struct nf_tsf_opts o;
    nf__tsf_opts_default(&o);
    CHECK(o.max_epochs == 50 && o.patience == 5 && o.batch == 64 && o.accumulation == 2 && o.val_batch == 128,
          "defaults");
    static int64_t pm[50][NT];
    const int64_t * pp[50];
    for (int e = 0; e < 50; e++) { /* each epoch's order: a rotation, reversed on odd epochs */
        for (int i = 0; i < NT; i++) pm[e][i] = (e % 2 ? NT - 1 - i + 17 * e : i + 17 * e) % NT;
        pp[e] = pm[e];
    }
    o.perms = pp;
    struct nf_tsf_result r;
    nf_err err = {0};
    CHECK_RC(nf__tsf_run(&s, NT, NV, NULL, yv, &o, &r, &err), NF_OK, &err);
    /* early stopping: bests at 1, 2, 5 (3 ties 2: not strictly better); 6..10 fail, 10 stops */
    CHECK(r.n_epochs == 10 && r.best_epoch == 5, "ran %d epochs, best %d (want 10, 5)", r.n_epochs, r.best_epoch);
    for (int e = 0; e < r.n_epochs; e++) {
        const struct nf_tsf_epoch * ep = &r.epochs[e];
        const int best = e == 0 || e == 1 || e == 4;
        CHECK(ep->best == best, "epoch %d best %d", e + 1, ep->best);
        CHECK(ep->stopped == (e == 9), "epoch %d stopped %d", e + 1, ep->stopped);
        CHECK(ep->val_loss == (double) vloss[e], "epoch %d val loss %.9g", e + 1, ep->val_loss);
        /* OneCycle, total_steps 50 (spec §3.3's closed forms, 1e-15 relative) */
        const int sst = e;
        double lr, b1;
        if (sst <= 4) {
            const double c = cos(3.141592653589793 * sst / 4.0) + 1.0;
            lr = 1e-3 + (4e-5 - 1e-3) / 2.0 * c;
            b1 = 0.85 + 0.05 * c;
        } else {
            const double c = cos(3.141592653589793 * (sst - 4) / 45.0) + 1.0;
            lr = 4e-9 + (1e-3 - 4e-9) / 2.0 * c;
            b1 = 0.95 - 0.05 * c;
        }
        CHECK(fabs(ep->lr - lr) <= 1e-15 * lr && fabs(ep->beta1 - b1) <= 1e-15, "epoch %d lr %.17g beta1 %.17g", e + 1,
              ep->lr, ep->beta1);
        /* the updates: 5 batches per epoch, steps counted globally: [2,2,1] on odd epochs, [1,2,2] on even */
        CHECK(ep->updates == 3, "epoch %d: %d updates", e + 1, ep->updates);
    }
    CHECK(fabs(r.epochs[0].lr - 4e-5) < 1e-19 && fabs(r.epochs[0].beta1 - 0.95) < 1e-16,
          "epoch 1: lr %.17g beta1 %.17g", r.epochs[0].lr, r.epochs[0].beta1);
    CHECK(fabs(r.epochs[4].lr - 1e-3) < 1e-18 && fabs(r.epochs[4].beta1 - 0.85) < 1e-16, "epoch 5 peak");
    const int want_after[6] = {2, 4, 5, 6, 8, 10}; /* grad calls before each of the first 6 updates */
    for (int i = 0; i < 6; i++)
        CHECK(f.upd_after[i] == want_after[i], "update %d after %d batches (want %d)", i + 1, f.upd_after[i],
              want_after[i]);
    CHECK(f.n_upd == 30 && f.n_grad == 50, "%d updates, %d batches", f.n_upd, f.n_grad);
    CHECK(f.lr_seen[3] == r.epochs[1].lr && f.b1_seen[3] == r.epochs[1].beta1, "update 4 used epoch 2's schedule");
    CHECK(f.scale_seen == 0.5f, "loss scale %g", f.scale_seen);
    int fed = f.n_seen == 10 * NT;
    for (int e = 0; e < 10 && fed; e++)
        for (int i = 0; i < NT && fed; i++) fed = f.seen[e * NT + i] == pm[e][i];
    CHECK(fed, "the replayed permutations are the batches fed");
    /* train loss: batch losses 0.25 (k % 7) weighted by rows (64,64,64,64,44) */
    {
        const int64_t rows[5] = {64, 64, 64, 64, 44};
        double t = 0;
        for (int k = 0; k < 5; k++) t += 0.25 * (double) ((5 + k) % 7) * (double) rows[k];
        CHECK(fabs(r.epochs[1].train_loss - t / NT) < 1e-15, "epoch 2 train loss %.17g, want %.17g",
              r.epochs[1].train_loss, t / NT);
    }
    /* averaging: min loss 0.7 (epoch 5; epoch 10 stopped, not a checkpoint):
     * threshold 0.7 + 0.02 + 0.03 * 0.7 / 1.0 = 0.741 -> epochs 5, 8, 9 */
    CHECK(r.n_averaged == 3, "%d epochs averaged (want 3)", r.n_averaged);
    for (int e = 0; e < r.n_epochs; e++)
        CHECK(r.epochs[e].averaged == (e == 4 || e == 7 || e == 8), "epoch %d averaged %d", e + 1,
              r.epochs[e].averaged);
    int mean_ok = f.n_write == 1;
    for (int j = 0; j < FP; j++) {
        const double m = ((double) f.w_at_eval[4][j] + f.w_at_eval[7][j] + f.w_at_eval[8][j]) / 3.0;
        mean_ok = mean_ok && fabs(f.written[j] - m) <= 1e-6 * fmax(1.0, fabs(m));
    }
    CHECK(mean_ok, "the averaged adapter written back (%d writes)", f.n_write);
    CHECK(f.epoch_pass == 11 && r.final_val_loss == (double) vloss[10], "the final adapter validated (%d passes)",
          f.epoch_pass);
    nf__tsf_result_free(&r);

    /* no averaging (the paper version): the best epoch's adapter */
    memset(&f, 0, sizeof(f));
    f.n_val = NV, f.yv = yv, f.noise = noise, f.vloss = vloss;
    o.average = 0;
    CHECK_RC(nf__tsf_run(&s, NT, NV, NULL, yv, &o, &r, &err), NF_OK, &err);
    CHECK(f.n_write == 1 && memcmp(f.written, f.w_at_eval[4], sizeof(f.written)) == 0,
          "the best epoch's adapter written back");
    nf__tsf_result_free(&r);

    /* a cap of 3 epochs (OneCycle total_steps 3), 6 batches (even), own generator */
    memset(&f, 0, sizeof(f));
    f.n_val = NV, f.yv = yv, f.noise = noise, f.vloss = vloss;
    o.average = 1, o.max_epochs = 3, o.perms = NULL, o.seed = 5;
    CHECK_RC(nf__tsf_run(&s, 320, NV, NULL, yv, &o, &r, &err), NF_OK, &err);
    CHECK(r.n_epochs == 3 && f.n_upd == 9 && f.n_seen == 960, "3 epochs, %d updates, %d rows", f.n_upd, (int) f.n_seen);
    {
        struct nf_onecycle oc;
        nf_onecycle_defaults(&oc, 1e-3, 3);
        oc.pct_start = 0.1;
        double lr;
        CHECK(nf_onecycle_at(&oc, 2, &lr, NULL, NULL) == NF_OK && lr == r.epochs[2].lr, "cap: schedule of 3 steps");
        struct nf_np_rng g;
        nf__np_rng_seed(&g, 5);
        int64_t p[320];
        int same = 1;
        for (int e = 0; e < 3; e++) {
            nf__np_permutation(&g, 320, p);
            for (int i = 0; i < 320; i++) same = same && f.seen[e * 320 + i] == p[i];
        }
        CHECK(same, "own generator: RandomState(seed).permutation per epoch");
    }
    nf__tsf_result_free(&r);
    /* max_epochs 10: torch's empty first phase, total_steps 11 as upstream's retry */
    memset(&f, 0, sizeof(f));
    f.n_val = NV, f.yv = yv, f.noise = noise, f.vloss = vloss;
    o.max_epochs = 10;
    CHECK_RC(nf__tsf_run(&s, NT, NV, NULL, yv, &o, &r, &err), NF_OK, &err);
    {
        struct nf_onecycle oc;
        nf_onecycle_defaults(&oc, 1e-3, 11);
        oc.pct_start = 0.1;
        double lr;
        CHECK(nf_onecycle_at(&oc, 3, &lr, NULL, NULL) == NF_OK && lr == r.epochs[3].lr, "10 epochs: 11 steps");
    }
    nf__tsf_result_free(&r);
    CHECK_RC(nf__tsf_run(&s, 0, NV, NULL, yv, &o, &r, &err), NF_ERR_ARG, &err);
}

/* ---- parity with upstream's fit (FIXTURES/CASE, reference/tabstar_fit_fixtures.py fit) ---- */

static double jnum(const cJSON * o, const char * k) {
    const cJSON * it = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(it) ? it->valuedouble : NAN;
}

static int64_t st_numel(const struct nf_st_tensor * t) {
    int64_t n = 1;
    for (int d = 0; d < t->ndim; d++) n *= t->shape[d];
    return n;
}

static const int64_t * st_i64(const struct nf_safetensors * st, const char * name, int64_t * n) {
    const struct nf_st_tensor * t = nf__st_find(st, name);
    *n = 0;
    if (!t || t->dtype != NF_ST_I64) return NULL;
    *n = st_numel(t);
    return nf__st_data(st, t);
}

/* the fitted model's predictions on test (upstream's predict_proba / predict) */
static int predict(nf_model * m, const struct nf_tab_verbalizer * v, const nf_table * test, float * out, int64_t * n,
                   nf_err * err) {
    cJSON * doc = NULL;
    struct nf_tab_cells c;
    memset(&c, 0, sizeof(c));
    int rc = nf__tab_verbalize(v, test, &doc, err);
    if (rc == NF_OK) rc = nf__tab_cells_build(doc, "test.csv", nf__tab_vocab(m), &c, err);
    cJSON_Delete(doc);
    if (rc != NF_OK) return rc;
    const int64_t B = c.n_rows, S = c.n_cells, C = c.n_targets, U = c.n_strings;
    int32_t *ids = malloc((size_t) (U * c.max_len) * sizeof(int32_t)), *lens = malloc((size_t) U * sizeof(int32_t)),
            *cell = malloc((size_t) (B * S) * sizeof(int32_t));
    int64_t o = 0;
    for (int64_t u = 0; u < U; u++) {
        lens[u] = (int32_t) c.token_lengths[u];
        for (int64_t q = 0; q < c.token_lengths[u]; q++) ids[o++] = (int32_t) c.token_ids[u * c.max_len + q];
    }
    for (int64_t i = 0; i < B * S; i++) cell[i] = (int32_t) c.cells[i];
    rc = nf__tab_forward_tokens(m->impl, ids, lens, U, cell, c.x_num, B, S, C, out, err);
    for (int64_t i = 0; rc == NF_OK && i < B; i++) {
        float * l = out + i * C;
        if (C == 1) { /* the scaler's inverse_transform */
            l[0] = (float) ((double) l[0] * v->y_scale + v->y_mean);
            continue;
        }
        float mx = l[0], sum = 0.0f;
        for (int64_t k = 1; k < C; k++) mx = l[k] > mx ? l[k] : mx;
        for (int64_t k = 0; k < C; k++) sum += (l[k] = expf(l[k] - mx));
        for (int64_t k = 0; k < C; k++) l[k] /= sum;
    }
    *n = B * C;
    free(ids), free(lens), free(cell);
    nf__tab_cells_free(&c);
    return rc;
}

/* The final adapter of every module upstream recorded (final.MODULE.BAv: B (A v), v = 1/sqrt(in), in
 * double) against nofall's, from the merged weights the fit wrote (odir/model.safetensors) minus the base
 * (mdir's): (W' - W) v / 2 (peft's scaling 2). Returns the relative L2 difference of all modules' vectors
 * together; *worst the largest of one module's (its name in worst_name). The subtraction costs about
 * ulp(W) / |W' - W| relative per element (~1e-4 here); modules whose |B (A v)| is under 1e-6 (no update
 * above that resolution) are skipped. */
static double adapter_diff(const struct nf_safetensors * fx, const char * mdir, const char * odir, int * n_mod,
                           double * worst, char * worst_name, size_t wn) {
    char p[1200];
    nf_err err = {0};
    struct nf_safetensors b, m;
    memset(&b, 0, sizeof(b)), memset(&m, 0, sizeof(m));
    snprintf(p, sizeof(p), "%s/model.safetensors", mdir);
    CHECK_RC(nf__st_open(p, &b, &err), NF_OK, &err);
    snprintf(p, sizeof(p), "%s/model.safetensors", odir);
    CHECK_RC(nf__st_open(p, &m, &err), NF_OK, &err);
    double all_d = 0.0, all_r = 0.0;
    *worst = b.tensors && m.tensors ? 0.0 : INFINITY;
    *n_mod = 0;
    snprintf(worst_name, wn, "-");
    for (int t = 0; b.tensors && m.tensors && t < fx->n_tensors; t++) {
        const char * k = fx->tensors[t].name;
        const size_t kl = strlen(k);
        if (strncmp(k, "final.", 6) != 0 || kl < 10 || strcmp(k + kl - 4, ".BAv") != 0) continue;
        char w[256];
        snprintf(w, sizeof(w), "%.*s.weight", (int) (kl - 10), k + 6);
        const struct nf_st_tensor *tb = nf__st_find(&b, w), *tm = nf__st_find(&m, w);
        const int64_t out = fx->tensors[t].shape[0];
        CHECK(tb && tm && tb->ndim == 2 && tb->shape[0] == out && tm->shape[1] == tb->shape[1] &&
                  fx->tensors[t].dtype == NF_ST_F64,
              "%s: no base / merged %s", k, w);
        if (!tb || !tm || tb->ndim != 2 || tb->shape[0] != out || fx->tensors[t].dtype != NF_ST_F64) {
            *worst = INFINITY;
            continue;
        }
        const int64_t in = tb->shape[1];
        const float *wb = nf__st_data(&b, tb), *wm = nf__st_data(&m, tm);
        const double * ref = nf__st_data(fx, &fx->tensors[t]);
        double dd = 0.0, rr = 0.0;
        for (int64_t o = 0; o < out; o++) {
            double a = 0.0;
            for (int64_t i = 0; i < in; i++) a += ((double) wm[o * in + i] - wb[o * in + i]) / sqrt((double) in);
            dd += (a / 2.0 - ref[o]) * (a / 2.0 - ref[o]);
            rr += ref[o] * ref[o];
        }
        if (sqrt(rr) < 1e-6) continue;
        const double r = sqrt(dd / rr);
        if (r > *worst) *worst = r, snprintf(worst_name, wn, "%.*s", (int) (kl - 10), k + 6);
        all_d += dd, all_r += rr;
        (*n_mod)++;
    }
    nf__st_close(&b);
    nf__st_close(&m);
    return *n_mod ? sqrt(all_d / all_r) : INFINITY;
}

static void parity(const char * fixtures, const char * name, const char * device) {
    char dir[1024], p[1200], mdir[1200];
    snprintf(dir, sizeof(dir), "%s/%s", fixtures, name);
    snprintf(mdir, sizeof(mdir), "tabstar-fit-%s-%.*s.tmp", name, (int) strcspn(device, ":"), device);
    char odir[1300]; /* the fit's output directory: its merged weights */
    snprintf(odir, sizeof(odir), "%s.out", mdir);
    nf_err err = {0};
    cJSON * cs = NULL;
    snprintf(p, sizeof(p), "%s/case.json", dir);
    CHECK_RC(nf__json_read_file(p, &cs, &err), NF_OK, &err);
    struct nf_safetensors st;
    memset(&st, 0, sizeof(st));
    snprintf(p, sizeof(p), "%s/fit.safetensors", dir);
    CHECK_RC(nf__st_open(p, &st, &err), NF_OK, &err);
    nf_table *tr = NULL, *te = NULL, *tv = NULL;
    snprintf(p, sizeof(p), "%s/train.csv", dir);
    CHECK_RC(nf_table_read_csv(p, &tr, &err), NF_OK, &err);
    snprintf(p, sizeof(p), "%s/test.csv", dir);
    CHECK_RC(nf_table_read_csv(p, &te, &err), NF_OK, &err);
    /* upstream's fit(X, y, x_val, y_val): the validation table as it is */
    const cJSON * vname = cs ? cJSON_GetObjectItemCaseSensitive(cs, "val") : NULL;
    if (cJSON_IsString(vname)) {
        snprintf(p, sizeof(p), "%s/%s", dir, vname->valuestring);
        CHECK_RC(nf_table_read_csv(p, &tv, &err), NF_OK, &err);
        if (!tv) goto out0;
    }
    if (!cs || !tr || !te || !st.tensors) goto out0;
    const cJSON * gw = cJSON_GetObjectItemCaseSensitive(cs, "gen_weights");
    const char * target = cJSON_GetObjectItemCaseSensitive(cs, "target")->valuestring;
    const int reg = strcmp(cJSON_GetObjectItemCaseSensitive(cs, "task")->valuestring, "regression") == 0;
    const uint64_t seed = (uint64_t) jnum(gw, "seed");
    /* the split, from the table's classes: the row ids upstream's split_to_val gives */
    struct nf_tab_verbalizer va;
    memset(&va, 0, sizeof(va));
    CHECK_RC(nf__tab_verbalizer_fit(tr, target, reg ? NF_PREDICT_REGRESSION : NF_PREDICT_CLASSIFICATION, &va, &err),
             NF_OK, &err);
    const int64_t n = nf_table_n_rows(tr);
    int64_t * y = calloc((size_t) n, sizeof(int64_t));
    if (!reg) CHECK_RC(nf__tsf_targets(&va, tr, y, NULL, &err), NF_OK, &err);
    int64_t ntr = n, nva = 0;
    if (!tv) {
        struct nf_tsf_split sp;
        CHECK_RC(nf__tsf_split_to_val(reg ? NULL : y, n, &sp, &err), NF_OK, &err);
        const int64_t *ftr = st_i64(&st, "split.train", &ntr), *fva = st_i64(&st, "split.val", &nva);
        int same = ftr && fva && ntr == sp.n_train && nva == sp.n_val;
        for (int64_t i = 0; same && i < ntr; i++) same = ftr[i] == sp.train[i];
        for (int64_t i = 0; same && i < nva; i++) same = fva[i] == sp.val[i];
        CHECK(same, "%s: the split differs from upstream's", name);
        nf__tsf_split_free(&sp);
    } else /* no split: upstream never called split_to_val */
        CHECK(!nf__st_find(&st, "split.train"), "%s: a split recorded with x_val given", name);
    nf__tab_verbalizer_free(&va);
    free(y);
    /* the fit, upstream's permutations replayed */
    const char * keys[2] = {"layers", "vocab"};
    char l[16], vv[16];
    snprintf(l, sizeof(l), "%d", (int) jnum(gw, "layers"));
    snprintf(vv, sizeof(vv), "%d", (int) jnum(gw, "vocab"));
    const char * vals[2] = {l, vv};
    nf_backend * be = NULL;
    nf_model * m = NULL;
    CHECK_RC(nf_model_gen_weights("tabstar", mdir, seed, 2, keys, vals, &err), NF_OK, &err);
    CHECK_RC(nf_backend_init(device, 0, &be, &err), NF_OK, &err);
    if (be) CHECK_RC(nf_model_load(be, mdir, &m, &err), NF_OK, &err);
    struct nf_tsf_fit_opts fo;
    nf__tsf_fit_opts_default(&fo);
    fo.task = reg ? NF_PREDICT_REGRESSION : NF_PREDICT_CLASSIFICATION;
    fo.loop.max_epochs = (int) jnum(cs, "max_epochs");
    fo.loop.patience = (int) jnum(cs, "patience");
    fo.loop.seed = (uint64_t) jnum(cs, "init_seed");
    fo.val = tv;
    fo.out_dir = odir;
    const int64_t ** perms = calloc((size_t) fo.loop.max_epochs, sizeof(int64_t *));
    const int64_t * last = NULL;
    for (int e = 0; e < fo.loop.max_epochs; e++) {
        char k[32];
        int64_t np;
        snprintf(k, sizeof(k), "perm.%d", e + 1);
        const int64_t * q = st_i64(&st, k, &np);
        if (q && np == ntr) last = q;
        perms[e] = last; /* past upstream's epochs: a repeat (the epoch count is checked) */
    }
    CHECK(perms[0] != NULL, "%s: no perm.1", name);
    fo.loop.perms = (const int64_t * const *) perms;
    struct nf_tab_verbalizer v;
    struct nf_tsf_result res;
    memset(&v, 0, sizeof(v));
    const int rc = m && perms[0] ? nf__tsf_fit(m, mdir, tr, target, &fo, &v, &res, &err) : NF_ERR_ARG;
    if (rc == NF_ERR_UNSUPPORTED) {
        CHECK_MSG(&err, "training step");
        printf("parity %s: the split identical; the fit not run: no training step in this build\n", name);
        goto out;
    }
    CHECK_RC(rc, NF_OK, &err);
    if (rc != NF_OK) goto out;
    const cJSON *tl = cJSON_GetObjectItemCaseSensitive(cs, "train_loss"),
                *ev = cJSON_GetObjectItemCaseSensitive(cs, "epochs");
    CHECK(res.n_epochs == cJSON_GetArraySize(tl), "%s: %d epochs, upstream %d", name, res.n_epochs,
          cJSON_GetArraySize(tl));
    /* tolerances (docs/finetune-tabstar.md "Parity"): epoch 1 is one or two updates from the same start,
     * its losses within 1e-4 relative (finetune.md §4.5's real-checkpoint column; this one has 7 text
     * layers of D 384); later epochs carry Adam's sign flips of noise-level gradients (§4.5's update
     * exemption: 2 lr per such element) and drift: 1e-3. The metric: R2 within 1e-3 relative; ROC-AUC
     * on 10-16 validation rows of a near-random model moves by 1/(P N) per pair of nearly tied
     * probabilities that swap: within 0.1. The epochs run and the best epoch: identical. */
    double wl = 0, wv = 0, wm = 0, wl1 = 0, wv1 = 0;
    int up_best = 0;
    double up_bm = -INFINITY;
    for (int e = 0; e < res.n_epochs && e < cJSON_GetArraySize(tl); e++) {
        const double t = cJSON_GetArrayItem(tl, e)->valuedouble;
        const cJSON * pe = cJSON_GetArrayItem(ev, e);
        const double vl = cJSON_GetArrayItem(pe, 0)->valuedouble, mt = cJSON_GetArrayItem(pe, 1)->valuedouble;
        const double dl = fabs(res.epochs[e].train_loss - t) / fmax(1.0, fabs(t)),
                     dv = fabs(res.epochs[e].val_loss - vl) / fmax(1.0, fabs(vl)),
                     dm = fabs(res.epochs[e].metric - mt) / (reg ? fmax(1.0, fabs(mt)) : 1.0);
        if (e == 0) wl1 = dl, wv1 = dv;
        wl = fmax(wl, dl), wv = fmax(wv, dv), wm = fmax(wm, dm);
        if (mt > up_bm) up_bm = mt, up_best = e + 1;
        printf("  %s epoch %d: train %.9g (upstream %.9g), val %.9g (%.9g), metric %.9g (%.9g)\n", name, e + 1,
               res.epochs[e].train_loss, t, res.epochs[e].val_loss, vl, res.epochs[e].metric, mt);
    }
    printf("parity %s: %d epochs, best %d (upstream %d); losses rel diff epoch 1 %.3g / %.3g, all %.3g / %.3g; "
           "metric %.3g\n",
           name, res.n_epochs, res.best_epoch, up_best, wl1, wv1, wl, wv, wm);
    CHECK(wl1 <= 1e-4 && wv1 <= 1e-4, "%s: epoch 1 losses differ: %.3g %.3g", name, wl1, wv1);
    CHECK(wl <= 1e-3 && wv <= 1e-3, "%s: per-epoch losses differ: %.3g %.3g", name, wl, wv);
    CHECK(wm <= (reg ? 1e-3 : 0.1), "%s: per-epoch metric differs by %.3g", name, wm);
    CHECK(res.best_epoch == up_best, "%s: best epoch %d, upstream %d", name, res.best_epoch, up_best);
    /* the final (averaged) adapter: all modules' B (A v) together within 1e-2 relative (the merge's
     * cancellation ~1e-4, the later epochs' drift as the losses'), each within 0.1 (a module of near-zero
     * gradients gets Adam's sign flips, finetune.md §4.5's update exemption: reg's text key 3.7e-2) */
    int n_mod = 0;
    double aw = 0;
    char wname[128];
    const double ad = adapter_diff(&st, mdir, odir, &n_mod, &aw, wname, sizeof(wname));
    printf("parity %s: the final adapter (%d modules): B (A v) within %.3g relative, the worst module %.3g (%s)\n",
           name, n_mod, ad, aw, wname);
    CHECK(n_mod > 0 && ad <= 1e-2 && aw <= 0.1, "%s: the final adapter differs from upstream's by %.3g (%s: %.3g)",
          name, ad, wname, aw);
    float pred[4096];
    int64_t np = 0, nref = 0;
    const struct nf_st_tensor * pt = nf__st_find(&st, "pred");
    CHECK_RC(predict(m, &v, te, pred, &np, &err), NF_OK, &err);
    const float * ref = pt ? nf__st_data(&st, pt) : NULL;
    nref = pt ? st_numel(pt) : 0;
    CHECK(ref && np == nref, "%s: %lld predictions, upstream %lld", name, (long long) np, (long long) nref);
    if (ref && np == nref)
        CHECK(nf_test_close("predictions after the fit", pred, ref, (size_t) np, 1e-3, 1e-3), "%s", name);
    nf__tsf_result_free(&res);
out:
    nf__tab_verbalizer_free(&v);
    free(perms);
    nf_model_free(m);
    nf_backend_free(be);
    nf_test_rm_model(mdir);
    snprintf(p, sizeof(p), "%s/vocab.txt", mdir);
    remove(p);
    remove(mdir);
    static const char * const outs[] = {"vocab.txt", "verbalizer.json", "split.json", "training-log.jsonl"};
    for (int i = 0; i < 4; i++) {
        snprintf(p, sizeof(p), "%s/%s", odir, outs[i]);
        remove(p);
    }
    nf_test_rm_model(odir);
out0:
    nf__st_close(&st);
    cJSON_Delete(cs);
    nf_table_free(tr);
    nf_table_free(te);
    nf_table_free(tv);
}

int main(int argc, char ** argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test-tabstar-fit FIXTURES [parity [CASE[,CASE...] [DEVICE]]]\n");
        return 2;
    }
    if (argc > 2 && strcmp(argv[2], "parity") == 0) { /* ctest tabstar-fit-parity: the model runs */
        static const char * const cases[] = {"bin", "cls3", "reg", "binval"};
        const char * device = argc > 4 ? argv[4] : "cpu"; /* argv[4]: the device (default cpu) */
        if (argc > 4) {
            nf_err err = {0};
            nf_backend * be = NULL;
            if (nf_backend_init(device, 0, &be, &err) != NF_OK) {
                printf("SKIP: %s: %s\n", device, err.msg);
                return 77;
            }
            nf_backend_free(be);
        }
        if (argc < 4) /* all four; argv[3]: CASE[,CASE...] (the sanitizer stage: cls3; the devices: the -xs ones) */
            for (int k = 0; k < 4; k++) parity(argv[1], cases[k], device);
        else
            for (const char * c = argv[3]; *c;) {
                const size_t n = strcspn(c, ",");
                char one[64];
                snprintf(one, sizeof(one), "%.*s", (int) (n < sizeof(one) ? n : sizeof(one) - 1), c);
                parity(argv[1], one, device);
                c += n + (c[n] == ',');
            }
    } else {
        pieces(argv[1]);
        loop();
    }
    return nf_test_done("test-tabstar-fit");
}
