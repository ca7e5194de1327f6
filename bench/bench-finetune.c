/* bench-finetune.c -- times nofall's Mitra fine-tuning (nf_finetune) on
 * preprocessed arrays, for bench/finetune-vs-torch.sh (issue #28 item 6). A
 * benchmark, not a test: it asserts nothing.
 *
 * usage: nofall-bench-finetune --model DIR --data DIR --device D [--steps S] [--trace FILE]
 *
 * DATA holds x_train.npy, x_val.npy (float32, (n, F)) and y_train.npy,
 * y_val.npy (int64 class ids), as reference/bench_finetune.py writes them.
 * The arrays go to nf_finetune as they are (no imputation or mirror: the
 * table has no NaN and no constant column, and the mirror signs change no
 * cost). Threads: OMP_NUM_THREADS, as for the CLI. The options are
 * nf_finetune_opts_default's (AutoGluon's) but for the step count.
 * --trace FILE: the fine-tune's timed op trace (nf_trace_json; the first
 * 65,536 ops: a small model or one step), for finding where the time goes.
 *
 * Prints one JSON line: load_s (nf_backend_init + nf_model_load), finetune_s
 * (nf_finetune), fit_s (their sum), eval0_s (the pretrained weights'
 * validation, start of nf_finetune to the step-0 callback), step_s (per step:
 * the episode, forward, backward, AdamW and that step's validation; the
 * previous callback to this one), train_s (step_s minus eval0_s: the
 * validation passes are the same work every step), the losses, fit_cpu_s,
 * eval0_cpu_s and step_cpu_s (the same spans in the process's CPU seconds,
 * every thread: what a shared machine's load does not inflate), and
 * peak_rss_mb (getrusage ru_maxrss). */
#include "nofall.h"
#include "io/nf-io.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#define MAX_STEPS 64

struct clock_log {
    double t0, t[MAX_STEPS + 1], val[MAX_STEPS + 1], train[MAX_STEPS + 1];
    double c0, cpu[MAX_STEPS + 1]; /* the process's CPU seconds, at the start and the callbacks */
    int64_t n;
};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + 1e-9 * (double) ts.tv_nsec;
}

/* CPU seconds of the process, every thread (the machine may be shared:
 * the wall clock then measures the load as much as the work) */
static double cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double) ts.tv_sec + 1e-9 * (double) ts.tv_nsec;
}

static int on_step(void * user, const struct nf_finetune_step * s) {
    struct clock_log * c = user;
    if (s->step >= 0 && s->step <= MAX_STEPS) {
        c->t[s->step] = now_s();
        c->cpu[s->step] = cpu_s();
        c->val[s->step] = s->val_loss;
        c->train[s->step] = s->train_loss;
        if (s->step + 1 > c->n) c->n = s->step + 1;
    }
    return 0;
}

static int read_npy(const char * dir, const char * name, enum nf_npy_dtype dt, int ndim, struct nf_npy * a) {
    char path[4096];
    nf_err err = {0};
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    if (nf__npy_read(path, a, &err) != NF_OK) {
        fprintf(stderr, "bench-finetune: %s\n", err.msg);
        return -1;
    }
    if (a->dtype != dt || a->ndim != ndim) {
        fprintf(stderr, "bench-finetune: %s: expected %s with %d dimension(s), got %s with %d\n", path,
                nf__npy_dtype_name(dt), ndim, nf__npy_dtype_name(a->dtype), a->ndim);
        return -1;
    }
    return 0;
}

static double peak_rss_mb(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double) ru.ru_maxrss / 1024.0; /* KiB on Linux */
}

int main(int argc, char ** argv) {
    const char *model = NULL, *data = NULL, *device = "cpu", *trace = NULL;
    long steps = 1;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--model") == 0)
            model = argv[i + 1];
        else if (strcmp(argv[i], "--data") == 0)
            data = argv[i + 1];
        else if (strcmp(argv[i], "--device") == 0)
            device = argv[i + 1];
        else if (strcmp(argv[i], "--steps") == 0)
            steps = strtol(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--trace") == 0)
            trace = argv[i + 1];
        else {
            fprintf(stderr, "bench-finetune: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (!model || !data || steps < 1 || steps > MAX_STEPS || argc % 2 == 0) {
        fprintf(stderr,
                "usage: nofall-bench-finetune --model DIR --data DIR --device D [--steps 1..%d] [--trace FILE]\n",
                MAX_STEPS);
        return 2;
    }
    struct nf_npy xt = {0}, xv = {0}, yt = {0}, yv = {0};
    if (read_npy(data, "x_train.npy", NF_NPY_F4, 2, &xt) || read_npy(data, "x_val.npy", NF_NPY_F4, 2, &xv) ||
        read_npy(data, "y_train.npy", NF_NPY_I8, 1, &yt) || read_npy(data, "y_val.npy", NF_NPY_I8, 1, &yv))
        return 1;
    if (xv.shape[1] != xt.shape[1] || yt.shape[0] != xt.shape[0] || yv.shape[0] != xv.shape[0]) {
        fprintf(stderr, "bench-finetune: %s: the arrays' shapes disagree\n", data);
        return 1;
    }
    nf_err err = {0};
    nf_backend * be = NULL;
    nf_model * m = NULL;
    double t0 = now_s(), cpu0 = cpu_s();
    struct nf_backend_env env; /* as the CLI: the OpenCL kernel cache, NOFALL_OPENCL_* */
    nf_backend_env_read(&env, NF_PRECISION_EXACT);
    if (nf_backend_init_opts(device, &env.opts, &be, &err) != NF_OK || nf_model_load(be, model, &m, &err) != NF_OK) {
        fprintf(stderr, "bench-finetune: %s\n", err.msg);
        return 1;
    }
    double t1 = now_s();
    struct nf_finetune_data d = {0};
    d.n_train = xt.shape[0];
    d.n_val = xv.shape[0];
    d.n_features = xt.shape[1];
    d.x_train = xt.data;
    d.x_val = xv.data;
    d.y_train_class = yt.data;
    d.y_val_class = yv.data;
    struct nf_finetune_opts o;
    nf_finetune_opts_default(&o);
    o.steps = steps;
    struct clock_log c = {0};
    o.on_step = on_step;
    o.user = &c;
    struct nf_finetune_result res = {0};
    if (trace) nf_trace_reset(be, NF_TRACE_TIMED);
    c.t0 = now_s();
    c.c0 = cpu_s();
    int rc = nf_finetune(m, &d, &o, &res, &err);
    double t2 = now_s(), cpu2 = cpu_s();
    if (rc != NF_OK) {
        fprintf(stderr, "bench-finetune: nf_finetune: %s\n", err.msg);
        return 1;
    }
    if (trace) {
        char * js = nf_trace_json(be, &err);
        FILE * f = js ? fopen(trace, "w") : NULL;
        if (!f || fputs(js, f) < 0 || fclose(f) != 0) fprintf(stderr, "bench-finetune: cannot write %s\n", trace);
        nf_free(js);
    }
    double eval0 = c.n > 0 ? c.t[0] - c.t0 : 0.0;
    printf("{\"side\": \"nofall\", \"device\": \"%s\", \"threads\": \"%s\", \"n_train\": %lld, \"n_val\": %lld, "
           "\"features\": %lld, \"steps\": %lld, \"load_s\": %.3f, \"finetune_s\": %.3f, \"fit_s\": %.3f, "
           "\"eval0_s\": %.3f, \"step_s\": [",
           nf_backend_name(be), getenv("OMP_NUM_THREADS") ? getenv("OMP_NUM_THREADS") : "default",
           (long long) d.n_train, (long long) d.n_val, (long long) d.n_features, (long long) res.steps_run, t1 - t0,
           t2 - t1, t2 - t0, eval0);
    for (int64_t s = 1; s < c.n; s++) printf("%s%.3f", s > 1 ? ", " : "", c.t[s] - c.t[s - 1]);
    printf("], \"train_s\": [");
    for (int64_t s = 1; s < c.n; s++) printf("%s%.3f", s > 1 ? ", " : "", c.t[s] - c.t[s - 1] - eval0);
    printf("], \"train_loss\": [");
    for (int64_t s = 1; s < c.n; s++) printf("%s%.6f", s > 1 ? ", " : "", c.train[s]);
    printf("], \"val_loss\": [");
    for (int64_t s = 0; s < c.n; s++) printf("%s%.6f", s > 0 ? ", " : "", c.val[s]);
    printf("], \"fit_cpu_s\": %.3f, \"eval0_cpu_s\": %.3f, \"step_cpu_s\": [", cpu2 - cpu0,
           c.n > 0 ? c.cpu[0] - c.c0 : 0.0);
    for (int64_t s = 1; s < c.n; s++) printf("%s%.3f", s > 1 ? ", " : "", c.cpu[s] - c.cpu[s - 1]);
    printf("], \"peak_rss_mb\": %.1f}\n", peak_rss_mb());
    nf_model_free(m);
    nf_backend_free(be);
    nf__npy_free(&xt);
    nf__npy_free(&xv);
    nf__npy_free(&yt);
    nf__npy_free(&yv);
    return 0;
}
