/* train-host.c -- host helpers of the training ops, set C (TabSTAR's LoRA
 * fine-tuning, issue #30; docs/train-ops-tabstar.md): the plan of
 * SCATTER_ADD_ROWS and PyTorch's OneCycleLR schedule. */
#include "nf-ops.h"

#include <math.h>

#define NF__PI 3.141592653589793 /* math.pi, M_PI: the double nearest pi */

/* ---- SCATTER_ADD_ROWS' plan: a stable counting sort of the rows by index ------------------ */

int nf_scatter_plan(const int32_t * idx, int64_t m, int64_t n_table, int32_t * order, int32_t * start, nf_err * err) {
    if (m < 0 || n_table < 0 || m > INT32_MAX || n_table >= INT32_MAX)
        return nf__err_set(err, NF_ERR_ARG, "scatter plan: bad m %lld / n_table %lld", (long long) m,
                           (long long) n_table);
    for (int64_t i = 0; i <= n_table; i++) start[i] = 0;
    for (int64_t r = 0; r < m; r++)
        if (idx[r] >= 0 && idx[r] < n_table) start[idx[r] + 1]++;
    for (int64_t i = 0; i < n_table; i++) start[i + 1] += start[i];
    for (int64_t r = start[n_table]; r < m; r++) order[r] = -1; /* the rows out of range: none */
    /* place the rows in row order: start[i] serves as the next free slot of
     * i, then is restored from its successor's count */
    for (int64_t r = 0; r < m; r++)
        if (idx[r] >= 0 && idx[r] < n_table) order[start[idx[r]]++] = (int32_t) r;
    for (int64_t i = n_table; i > 0; i--) start[i] = start[i - 1];
    start[0] = 0;
    return NF_OK;
}

/* ---- OneCycleLR ---------------------------------------------------------------------------- */

void nf_onecycle_defaults(struct nf_onecycle * oc, double max_lr, int64_t total_steps) {
    oc->max_lr = max_lr;
    oc->total_steps = total_steps;
    oc->pct_start = 0.3;
    oc->anneal_linear = 0;
    oc->div_factor = 25.0;
    oc->final_div_factor = 1e4;
    oc->cycle_momentum = 1;
    oc->base_momentum = 0.85;
    oc->max_momentum = 0.95;
    oc->beta1 = 0.9;
}

/* OneCycleLR._annealing_cos / _annealing_linear, term for term */
static double nf__anneal(int linear, double start, double end, double pct) {
    if (linear) return (end - start) * pct + start;
    const double cos_out = cos(NF__PI * pct) + 1.0; /* math.cos(math.pi * pct) + 1 */
    return end + (start - end) / 2.0 * cos_out;
}

/* torch/optim/lr_scheduler.py OneCycleLR (checked on torch 2.13): in
 * __init__, initial_lr = max_lr / div_factor, min_lr = initial_lr /
 * final_div_factor; phase 1 ends at end1 = float(pct_start * total_steps) - 1
 * (lr initial -> max, momentum max -> base), phase 2 at total_steps - 1 (lr
 * max -> min, momentum base -> max); get_lr with step_num = last_epoch
 * (= the steps taken: the constructor's own step makes it 0) takes the first
 * phase with step_num <= end_step, or the last one, pct = (step_num -
 * start_step) / (end_step - start_step) with start_step = 0.0 or end1;
 * step_num > total_steps raises. beta1 is betas[0] of the group: max_momentum
 * set in __init__, then the annealed momentum at every step. All in Python
 * doubles, as here (math.cos is libm's cos, math.pi M_PI). */
int nf_onecycle_at(const struct nf_onecycle * oc, int64_t s, double * lr, double * beta1, nf_err * err) {
    if (oc->total_steps < 1 || !(oc->pct_start >= 0.0 && oc->pct_start <= 1.0))
        return nf__err_set(err, NF_ERR_ARG, "OneCycle: bad total_steps %lld / pct_start %g",
                           (long long) oc->total_steps, oc->pct_start);
    if (s < 0 || s > oc->total_steps)
        return nf__err_set(err, NF_ERR_ARG, "OneCycle: step %lld outside 0..%lld", (long long) s,
                           (long long) oc->total_steps);
    const double initial_lr = oc->max_lr / oc->div_factor;
    const double min_lr = initial_lr / oc->final_div_factor;
    const double end1 = oc->pct_start * (double) oc->total_steps - 1.0;
    const double end2 = (double) (oc->total_steps - 1);
    const double step = (double) s;
    double start_step, end_step, lr0, lr1, m0, m1;
    if (step <= end1) {
        start_step = 0.0, end_step = end1;
        lr0 = initial_lr, lr1 = oc->max_lr, m0 = oc->max_momentum, m1 = oc->base_momentum;
    } else {
        start_step = end1, end_step = end2;
        lr0 = oc->max_lr, lr1 = min_lr, m0 = oc->base_momentum, m1 = oc->max_momentum;
    }
    if (end_step - start_step == 0.0)
        return nf__err_set(err, NF_ERR_ARG, "OneCycle: a phase of zero steps at step %lld (torch divides by zero)",
                           (long long) s);
    const double pct = (step - start_step) / (end_step - start_step);
    if (lr) *lr = nf__anneal(oc->anneal_linear, lr0, lr1, pct);
    if (beta1) *beta1 = oc->cycle_momentum ? nf__anneal(oc->anneal_linear, m0, m1, pct) : oc->beta1;
    return NF_OK;
}
