/* test-predictor-finetune.c -- nf_predictor_finetune (src/tabular/mitra-tune.c)
 * on tiny gen-weights Mitra models: the table predictor's fine-tuning equals
 * nf_finetune on the arrays the Preprocessor gives (a validation table; the
 * internal split with the Preprocessor refit on the training part), and the
 * prediction afterwards continues the trainer's RandomState (a support order
 * per 1,024-row chunk of the whole training table) with the fine-tuned
 * weights, computed here by hand with nf_model_forward; a two-member
 * ensemble the same way; the refusals. */
#include "nf-test.h"
#include "nofall-tabular.h"
#include "tabular/tabular-impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N  40
#define NV 10
#define NT 5

static double x1v(int i) { return fmod(i * 0.37 + 0.11, 3.3) - 1.2; }
static double x2v(int i) { return fmod(i * 1.13 + 0.5, 2.1); }
static double yreg(int i) { return 2.0 * x1v(i) + x2v(i) * x2v(i); }

/* rows [off, off + n): x1, x2 and (with_y) y */
static nf_table * table(const char * name, int off, int n, int cls, int with_y, int bad_class) {
    nf_err err = {0};
    nf_table * t = NULL;
    double a[64], b[64], y[64];
    for (int i = 0; i < n; i++) {
        a[i] = x1v(off + i);
        b[i] = x2v(off + i);
        y[i] = cls ? (double) ((off + i) % 2) : yreg(off + i);
    }
    if (bad_class) y[n - 1] = 7;
    CHECK_RC(nf_table_new(name, n, &t, &err), NF_OK, &err);
    CHECK_RC(nf_table_add_numeric(t, "x1", a, 0, &err), NF_OK, &err);
    CHECK_RC(nf_table_add_numeric(t, "x2", b, 0, &err), NF_OK, &err);
    if (with_y) CHECK_RC(nf_table_add_numeric(t, "y", y, cls, &err), NF_OK, &err);
    return t;
}

static nf_model * model(nf_backend * be, int cls) {
    nf_err err = {0};
    char dir[64];
    snprintf(dir, sizeof(dir), "test-predictor-finetune.tmp/%s", cls ? "cls" : "reg");
    const char * keys[] = {"dim", "layers", "heads", "outputs", "task"};
    const char * vals[] = {"16", "2", "2", cls ? "10" : "1", cls ? "classification" : "regression"};
    CHECK_RC(nf_model_gen_weights("mitra", dir, 7, 5, keys, vals, &err), NF_OK, &err);
    nf_model * m = NULL;
    CHECK_RC(nf_model_load(be, dir, &m, &err), NF_OK, &err);
    return m;
}

/* the predictor fitted on tr (task, members, mirror) */
static nf_predictor * fit(const nf_table * tr, int task, int n_est, int no_mirror) {
    nf_err err = {0};
    struct nf_predictor_opts po = {.task = task, .n_estimators = n_est, .no_mirror = no_mirror};
    nf_predictor * p = NULL;
    CHECK_RC(nf_predictor_fit(tr, "y", &po, &p, &err), NF_OK, &err);
    return p;
}

/* the defaults, then steps, lr, warm-up and seed */
static struct nf_finetune_opts ft_opts(int64_t steps, double lr, int64_t warmup, uint64_t seed) {
    struct nf_finetune_opts o;
    nf_finetune_opts_default(&o);
    o.steps = steps;
    o.lr = lr;
    o.warmup_steps = warmup;
    o.seed = seed;
    return o;
}

static void case_task(nf_backend * be, int cls, int with_val) {
    nf_err err = {0};
    const char * what = cls ? "classification" : "regression";
    nf_table *tr = table("train", 0, N, cls, 1, 0), *va = with_val ? table("val", N, NV, cls, 1, 0) : NULL;
    nf_table * te = table("test", N + NV, NT, cls, 0, 0);
    nf_predictor * p = fit(tr, cls ? NF_PREDICT_CLASSIFICATION : NF_PREDICT_REGRESSION, 1, 1);
    nf_model *ma = model(be, cls), *mb = model(be, cls);
    if (!p || !ma || !mb) goto done;
    const struct nf_finetune_opts o = ft_opts(3, 1e-3, 2, 3);
    struct nf_finetune_result ra, rb;
    CHECK_RC(nf_predictor_finetune(p, ma, va, &o, &ra, &err), NF_OK, &err);
    /* by hand: the arrays (no mirror, no missing values: the values as float32) */
    int64_t tr_rows[N], n_tr = N, n_val = with_val ? NV : 0;
    float xtr[N * 2], xval[N * 2], ytr[N];
    int64_t ytrc[N], yvalc[N];
    double yval[N], lo = INFINITY, hi = -INFINITY;
    struct nf_mitra_split sp = {0};
    if (with_val) {
        for (int i = 0; i < N; i++) tr_rows[i] = i;
        for (int i = 0; i < NV; i++) {
            xval[i * 2] = (float) x1v(N + i);
            xval[i * 2 + 1] = (float) x2v(N + i);
            yvalc[i] = (N + i) % 2;
            yval[i] = yreg(N + i);
        }
    } else {
        int64_t yall[N];
        for (int i = 0; i < N; i++) yall[i] = i % 2;
        CHECK_RC(nf__mitra_split_internal(o.seed, cls ? yall : NULL, N, &sp, &err), NF_OK, &err);
        n_tr = sp.n_train;
        n_val = sp.n_val;
        for (int64_t i = 0; i < n_tr; i++) tr_rows[i] = sp.train[i];
        for (int64_t i = 0; i < n_val; i++) {
            const int r = (int) sp.val[i];
            xval[i * 2] = (float) x1v(r);
            xval[i * 2 + 1] = (float) x2v(r);
            yvalc[i] = r % 2;
            yval[i] = yreg(r);
        }
    }
    for (int64_t i = 0; i < n_tr; i++) {
        const double y = yreg((int) tr_rows[i]);
        lo = y < lo ? y : lo;
        hi = y > hi ? y : hi;
    }
    for (int64_t i = 0; i < n_tr; i++) {
        const int r = (int) tr_rows[i];
        xtr[i * 2] = (float) x1v(r);
        xtr[i * 2 + 1] = (float) x2v(r);
        ytrc[i] = r % 2;
        ytr[i] = (float) ((yreg(r) - lo) / (hi - lo));
    }
    const struct nf_finetune_data d = {.n_train = n_tr,
                                       .n_val = n_val,
                                       .n_features = 2,
                                       .x_train = xtr,
                                       .x_val = xval,
                                       .y_train_class = cls ? ytrc : NULL,
                                       .y_val_class = cls ? yvalc : NULL,
                                       .y_train_value = cls ? NULL : ytr,
                                       .y_val_value = cls ? NULL : yval,
                                       .y_min = lo,
                                       .y_max = hi};
    struct nf_np_rng rng;
    CHECK_RC(nf__finetune_ex(mb, &d, &o, &rb, NULL, &rng, &err), NF_OK, &err);
    CHECK(ra.steps_run == rb.steps_run && ra.best_step == rb.best_step && ra.best_val_loss == rb.best_val_loss,
          "%s (%s): predictor run %lld steps, best %lld (%.17g); by hand %lld, %lld (%.17g)", what,
          with_val ? "val table" : "internal split", (long long) ra.steps_run, (long long) ra.best_step,
          ra.best_val_loss, (long long) rb.steps_run, (long long) rb.best_step, rb.best_val_loss);
    CHECK(ra.steps_run == 3, "%s: %lld steps run", what, (long long) ra.steps_run);
    if (!cls) {
        double a, b;
        nf_predictor_target_range(p, &a, &b);
        CHECK(a == lo && b == hi, "%s: the target range [%g, %g], the training part's [%g, %g]", what, a, b, lo, hi);
    }
    /* the prediction: support = the whole table in the order the stream continues with */
    const int K = cls ? 2 : 1;
    double out[NT * 2];
    CHECK_RC(nf_predictor_predict(p, ma, te, out, NULL, &err), NF_OK, &err);
    int64_t perm[N], k = 0;
    CHECK_RC(nf__mitra_eval_support(&rng, N, 8192, perm, &k, &err), NF_OK, &err);
    float xs[N * 2], ys[N], xq[NT * 2], logits[NT * 10];
    int64_t ysc[N];
    for (int64_t i = 0; i < k; i++) {
        const int r = (int) perm[i];
        xs[i * 2] = (float) x1v(r);
        xs[i * 2 + 1] = (float) x2v(r);
        ysc[i] = r % 2;
        ys[i] = (float) ((yreg(r) - lo) / (hi - lo));
    }
    for (int i = 0; i < NT; i++) {
        xq[i * 2] = (float) x1v(N + NV + i);
        xq[i * 2 + 1] = (float) x2v(N + NV + i);
    }
    const struct nf_array in[3] = {
        {.name = "support_x", .dtype = NF_ARRAY_F32, .ndim = 2, .shape = {k, 2}, .data = xs},
        {.name = "support_y",
         .dtype = cls ? NF_ARRAY_I64 : NF_ARRAY_F32,
         .ndim = 1,
         .shape = {k},
         .data = cls ? (const void *) ysc : (const void *) ys},
        {.name = "query_x", .dtype = NF_ARRAY_F32, .ndim = 2, .shape = {NT, 2}, .data = xq},
    };
    CHECK_RC(nf_model_forward(mb, in, 3, logits, &err), NF_OK, &err);
    double worst = 0;
    for (int i = 0; i < NT; i++) {
        const float * l = logits + i * (cls ? 10 : 1);
        if (cls) {
            const double mx = l[0] > l[1] ? l[0] : l[1], s = exp(l[0] - mx) + exp(l[1] - mx);
            for (int c = 0; c < K; c++) worst = fmax(worst, fabs(out[i * K + c] - exp(l[c] - mx) / s));
        } else {
            worst = fmax(worst, fabs(out[i] - ((double) l[0] * (hi - lo) + lo)));
        }
    }
    CHECK(worst == 0.0, "%s: the prediction after fine-tuning differs from the hand-made one by %.3g", what, worst);
    /* a second prediction is the first after the fine-tuning again */
    double out2[NT * 2];
    CHECK_RC(nf_predictor_predict(p, ma, te, out2, NULL, &err), NF_OK, &err);
    CHECK(memcmp(out, out2, sizeof(double) * NT * K) == 0, "%s: a second prediction differs", what);
    struct nf_predict_stats st;
    nf_predictor_last_stats(p, &st);
    CHECK(st.subsets == 1 && st.support_rows == N && st.query_chunk == 1024, "%s: stats %d %lld %lld", what, st.subsets,
          (long long) st.support_rows, (long long) st.query_chunk);
    char * rep = nf_predictor_report_json(p, ma, te, &err);
    CHECK(rep && strstr(rep, "\"fine_tune\"") && strstr(rep, with_val ? "\"table\"" : "\"internal split\""),
          "%s: report.json without its fine_tune item: %s", what, rep ? rep : err.msg);
    nf_free(rep);
    nf__mitra_split_free(&sp);
done:
    nf_model_free(ma);
    nf_model_free(mb);
    nf_predictor_free(p);
    nf_table_free(tr);
    nf_table_free(va);
    nf_table_free(te);
}

/* two members (upstream's ensemble, finetune.md §1.8), by hand: member 0
 * fine-tuned from RandomState(seed), member 1 from the pretrained weights
 * continuing the stream; the prediction continues it again, member 0's
 * chunk first, with each member's own weights; the probabilities averaged */
static void case_ensemble(nf_backend * be) {
    nf_err err = {0};
    nf_table *tr = table("train", 0, N, 1, 1, 0), *va = table("val", N, NV, 1, 1, 0),
             *te = table("test", N + NV, NT, 1, 0, 0);
    nf_predictor * p = fit(tr, NF_PREDICT_CLASSIFICATION, 2, 1);
    nf_model *ma = model(be, 1), *mb = model(be, 1), *mc = model(be, 1);
    if (!p || !ma || !mb || !mc) goto done;
    const struct nf_finetune_opts o = ft_opts(2, 1e-2, 1, 5);
    struct nf_finetune_result ra, r0, r1;
    CHECK_RC(nf_predictor_finetune(p, ma, va, &o, &ra, &err), NF_OK, &err);
    float xtr[N * 2], xval[NV * 2], xq[NT * 2];
    int64_t ytrc[N], yvalc[NV];
    for (int i = 0; i < N; i++) {
        xtr[i * 2] = (float) x1v(i);
        xtr[i * 2 + 1] = (float) x2v(i);
        ytrc[i] = i % 2;
    }
    for (int i = 0; i < NV; i++) {
        xval[i * 2] = (float) x1v(N + i);
        xval[i * 2 + 1] = (float) x2v(N + i);
        yvalc[i] = (N + i) % 2;
    }
    for (int i = 0; i < NT; i++) {
        xq[i * 2] = (float) x1v(N + NV + i);
        xq[i * 2 + 1] = (float) x2v(N + NV + i);
    }
    const struct nf_finetune_data d = {.n_train = N,
                                       .n_val = NV,
                                       .n_features = 2,
                                       .x_train = xtr,
                                       .x_val = xval,
                                       .y_train_class = ytrc,
                                       .y_val_class = yvalc};
    struct nf_np_rng rng1, rng2;
    CHECK_RC(nf__finetune_ex(mb, &d, &o, &r0, NULL, &rng1, &err), NF_OK, &err);
    CHECK_RC(nf__finetune_ex(mc, &d, &o, &r1, &rng1, &rng2, &err), NF_OK, &err);
    CHECK(ra.steps_run == r1.steps_run && ra.best_step == r1.best_step && ra.best_val_loss == r1.best_val_loss,
          "ensemble: the result is not the last member's: best %lld (%.17g), by hand %lld (%.17g)",
          (long long) ra.best_step, ra.best_val_loss, (long long) r1.best_step, r1.best_val_loss);
    CHECK(r0.best_val_loss != r1.best_val_loss, "ensemble: the members' runs are the same (%.17g): no stream continued",
          r0.best_val_loss);
    double out[NT * 2], want[NT * 2] = {0};
    CHECK_RC(nf_predictor_predict(p, ma, te, out, NULL, &err), NF_OK, &err);
    nf_model * mem[2] = {mb, mc};
    for (int e = 0; e < 2; e++) {
        int64_t perm[N], k = 0;
        CHECK_RC(nf__mitra_eval_support(&rng2, N, 8192, perm, &k, &err), NF_OK, &err);
        float xs[N * 2], logits[NT * 10];
        int64_t ysc[N];
        for (int64_t i = 0; i < k; i++) {
            xs[i * 2] = (float) x1v((int) perm[i]);
            xs[i * 2 + 1] = (float) x2v((int) perm[i]);
            ysc[i] = perm[i] % 2;
        }
        const struct nf_array in[3] = {
            {.name = "support_x", .dtype = NF_ARRAY_F32, .ndim = 2, .shape = {k, 2}, .data = xs},
            {.name = "support_y", .dtype = NF_ARRAY_I64, .ndim = 1, .shape = {k}, .data = ysc},
            {.name = "query_x", .dtype = NF_ARRAY_F32, .ndim = 2, .shape = {NT, 2}, .data = xq},
        };
        CHECK_RC(nf_model_forward(mem[e], in, 3, logits, &err), NF_OK, &err);
        for (int i = 0; i < NT; i++) {
            const float * l = logits + i * 10;
            const double mx = l[0] > l[1] ? l[0] : l[1], s = exp(l[0] - mx) + exp(l[1] - mx);
            for (int c = 0; c < 2; c++) want[i * 2 + c] += exp(l[c] - mx) / s;
        }
    }
    double worst = 0;
    for (int i = 0; i < NT * 2; i++) worst = fmax(worst, fabs(out[i] - want[i] / 2));
    CHECK(worst == 0.0, "ensemble: the prediction differs from the hand-made one by %.3g", worst);
    double out2[NT * 2];
    CHECK_RC(nf_predictor_predict(p, ma, te, out2, NULL, &err), NF_OK, &err);
    CHECK(memcmp(out, out2, sizeof(out)) == 0, "ensemble: a second prediction differs");
    char * rep = nf_predictor_report_json(p, ma, te, &err);
    CHECK(rep && strstr(rep, "\"members\""), "ensemble: report.json without the members' runs: %s",
          rep ? rep : err.msg);
    nf_free(rep);
done:
    nf_model_free(ma);
    nf_model_free(mb);
    nf_model_free(mc);
    nf_predictor_free(p);
    nf_table_free(tr);
    nf_table_free(va);
    nf_table_free(te);
}

static void refusals(nf_backend * be) {
    nf_err err = {0};
    nf_table *tr = table("train", 0, N, 1, 1, 0), *nov = table("noy", N, NV, 1, 0, 0),
             *bad = table("badclass", N, NV, 1, 1, 1);
    struct nf_predictor_opts po = {.task = NF_PREDICT_CLASSIFICATION, .n_estimators = 1};
    nf_predictor * p1 = NULL;
    nf_model * m = model(be, 1);
    struct nf_finetune_opts o;
    nf_finetune_opts_default(&o);
    o.steps = 1;
    struct nf_finetune_result r;
    CHECK_RC(nf_predictor_fit(tr, "y", &po, &p1, &err), NF_OK, &err);
    CHECK_RC(nf_predictor_finetune(p1, m, nov, &o, &r, &err), NF_ERR_INPUT, &err);
    CHECK_MSG(&err, "noy: no column 'y'");
    CHECK_RC(nf_predictor_finetune(p1, m, bad, &o, &r, &err), NF_ERR_INPUT, &err);
    CHECK_MSG(&err, "badclass: row 10, column 'y' (the target): '7' is not a class");
    nf_model_free(m);
    nf_predictor_free(p1);
    nf_table_free(tr);
    nf_table_free(nov);
    nf_table_free(bad);
}

int main(void) {
    nf_err err = {0};
    nf_backend * be = NULL;
    CHECK_RC(nf_backend_init("cpu", 0, &be, &err), NF_OK, &err);
    if (!be) return 1;
    case_task(be, 1, 1);
    case_task(be, 1, 0);
    case_task(be, 0, 1);
    case_task(be, 0, 0);
    case_ensemble(be);
    refusals(be);
    nf_backend_free(be);
    return nf_test_done("test-predictor-finetune");
}
