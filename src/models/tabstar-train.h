/* tabstar-train.h -- one training step of TabSTAR's LoRA fine-tuning on the
 * run's device (spec shared/specs/finetune.md §3.2, §3.3, §3.5): the LoRA
 * arena, the training forward keeping what the backward needs, the loss, the
 * backward of every op into the LoRA gradients, clipping + AdamW, and the
 * merge into the 295-key weights. The fit loop (src/tabular/tabstar-fit.c)
 * drives it; this file is the contract between the two.
 *
 * Dropout is off (eval-mode numerics) by default: upstream trains with dropout
 * on, which no other engine can reproduce bit for bit; nf__tab_train_dropout
 * turns nofall's own dropout on (docs/train-tabstar-step.md).
 *
 * The adapters (r = 32, alpha 64, scaling 2): q/k/v of the BERT layers whose
 * index is >= NF_TAB_TRAIN_BERT (upstream excludes layers 0..5 by name: 6..11
 * of the released 12; a synthetic checkpoint needs >= 7 text layers to train
 * any), linear1/linear2 of the 7 TransformerEncoderLayers
 * (fusion + 6 interaction), the first linear of the head for the task. The 7
 * out_proj adapters never receive a gradient upstream (their B stays 0): they
 * are not in the arena. */
#ifndef NF_TABSTAR_TRAIN_H
#define NF_TABSTAR_TRAIN_H

#include "tabstar-impl.h"

#define NF_TAB_LORA_R     32
#define NF_TAB_LORA_SCALE 2.0f /* lora_alpha / r = 64 / 32 */
#define NF_TAB_TRAIN_BERT 6    /* text layers 0..5 run forward only */

struct nf_tab_train;

/* One batch, already verbalized and tokenized, exactly the inputs of
 * nf__tab_forward_tokens (tabstar-impl.h): n_str distinct strings (ids/lens),
 * cell (B, S) string index per cell, x_num (B, S), C target tokens. */
struct nf_tab_batch {
    const int32_t * ids;
    const int32_t * lens;
    int64_t n_str;
    const int32_t * cell;
    const float * x_num;
    int64_t B, S, C;
};

/* One adapted module of the arena, in the arena's order. A is (r, in) and
 * B is (out, r), row-major, at float offsets off_a / off_b of the arena. */
struct nf_tab_lora_module {
    char name[96]; /* upstream's module name, e.g. "text_encoder.encoder.layer.6.attention.self.query" */
    int64_t in, out;
    int64_t off_a, off_b;
};

/* The arenas (LoRA parameters, gradients, Adam m and v) on the model's
 * device; A and B start at 0 (write the initial A with ..._write). C is the
 * task's target count (> 1 classification: cls head; 1 regression). */
int nf__tab_train_new(nf_tab * m, int64_t C, struct nf_tab_train ** out, nf_err * err);
void nf__tab_train_free(struct nf_tab_train * t);

int nf__tab_train_modules(const struct nf_tab_train * t);
const struct nf_tab_lora_module * nf__tab_train_module(const struct nf_tab_train * t, int i);
int64_t nf__tab_train_floats(const struct nf_tab_train * t);

/* Read / write an arena (host, nf__tab_train_floats floats): what 0 the
 * LoRA parameters, 1 the gradient, 2 Adam m, 3 Adam v. */
int nf__tab_train_read(const struct nf_tab_train * t, int what, float * out, nf_err * err);
int nf__tab_train_write(struct nf_tab_train * t, int what, const float * in, nf_err * err);

/* Forward + loss + backward of one batch, ADDING loss_scale * d(loss) to
 * the gradient arena (upstream backpropagates loss / 2). y_class (B) for
 * classification, y_value (B) the (clipped, standardised) target for
 * regression. *loss gets the batch's mean loss (unscaled); logits (B x C,
 * may be NULL) the training forward's logits. */
int nf__tab_train_grad(struct nf_tab_train * t, const struct nf_tab_batch * b, const int64_t * y_class,
                       const float * y_value, float loss_scale, float * loss, float * logits, nf_err * err);

/* The forward with the current (unmerged) adapters, no gradient: logits
 * (B x C); *loss (may be NULL) the mean loss when y_class / y_value given. */
int nf__tab_train_eval(struct nf_tab_train * t, const struct nf_tab_batch * b, const int64_t * y_class,
                       const float * y_value, float * logits, float * loss, nf_err * err);

/* One optimizer update, as upstream's (finetune.md §3.3): clip_grad_norm_
 * (max_norm) over the whole gradient arena (*norm gets the total before
 * clipping, may be NULL), AdamW (lr, beta1 of the OneCycle schedule, beta2,
 * eps, weight decay; the step count is kept here and starts at 1), then the
 * gradient is zeroed. */
int nf__tab_train_update(struct nf_tab_train * t, double lr, double beta1, double beta2, double eps, double wd,
                         float max_norm, float * norm, nf_err * err);
int64_t nf__tab_train_steps(const struct nf_tab_train * t);

/* W <- W + scaling * B A for every module of the arena, in the model's
 * loaded weights (then the model predicts as the fine-tuned one). */
int nf__tab_train_merge(struct nf_tab_train * t, nf_err * err);

/* Every op a training step runs, checked against the device's kernel table
 * before anything runs: a device lacking one fails at once, naming it. */
int nf__tab_train_check_device(nf_tab * m, nf_err * err);

/* The text cache (additive): with dropout off, text layers
 * 0..NF_TAB_TRAIN_BERT-1 are a fixed function of a string's tokens, so their
 * output for every token of every distinct string is computed once and kept
 * on the device (max_bytes of it; 0, the default, keeps nothing) for every
 * later _grad / _eval. Forgets what it held. Weights of those layers must
 * not change while it is on (the merge does not touch them). */
int nf__tab_train_text_cache(struct nf_tab_train * t, int64_t max_bytes, nf_err * err);
/* distinct strings the cache holds */
int64_t nf__tab_train_text_cached(const struct nf_tab_train * t);

/* The fewest rows a GEMM of the step may have where a shortcut changes its row count (additive; 0, the
 * default, no limit): a batch of fewer than min_rows tokens runs layers 0..5 itself and caches nothing;
 * one whose uncached strings have fewer than min_rows tokens runs layers 0..5 over all its tokens and
 * stores the new strings' rows from there; the top text layer runs on the [CLS] rows only
 * (tabstar-train-top.c) when there are >= min_rows strings.
 * Below 16 rows oneDNN's f32 GEMM takes another kernel whose rows differ in the last bits from the same
 * rows of a larger GEMM (libdnnl 2.6, AVX-512, measured); above it a row's result does not depend on the
 * row count, so with NF_TAB_TRAIN_MIN_ROWS the fit's results are those of the plain step, bit for bit. */
#define NF_TAB_TRAIN_MIN_ROWS 64
void nf__tab_train_text_cache_rows(struct nf_tab_train * t, int64_t min_rows);

/* Dropout (additive; off by default): drop probability p (0 <= p < 1; 0 off)
 * in every _grad at upstream's elementwise dropout points -- the BERT
 * embeddings and every text layer's two hidden dropouts (frozen layers too),
 * lora_dropout on each adapter's input, the scalar embedder's, the
 * TransformerEncoderLayers' dropout1 / dropout / dropout2 -- with inverted
 * masks from DROPOUT (nf-ops.def: a counter-based hash of seed, the _grad
 * calls since this call and the site), and on the attention probabilities
 * (BERT's attention_probs_dropout_prob, MultiheadAttention's dropout: ATTENTION's
 * mask, the same hash) in every text layer and TransformerEncoderLayer, the
 * backward reading the same masks. _eval runs
 * without dropout (upstream's model.eval()). While p > 0, _grad runs text
 * layers 0..NF_TAB_TRAIN_BERT-1 itself (they are stochastic: the text cache
 * is only read and filled by _eval). Calling it again with the same seed
 * replays the same masks. Not upstream-reproducible: torch's generator is not
 * reproduced. */
int nf__tab_train_dropout(struct nf_tab_train * t, float p, uint64_t seed, nf_err * err);

#endif
