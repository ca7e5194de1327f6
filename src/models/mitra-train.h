/* mitra-train.h -- one training step of Mitra (Tab2D) on the run's device:
 * the forward keeping the layer-boundary residual streams, the loss, the
 * backward of every op into one gradient arena laid out like the weights,
 * AdamW over the whole arena, and the best-weights snapshot. The trainer
 * (src/tabular/mitra-finetune.c) drives it. Spec: shared/specs/finetune.md
 * §1.5, §1.7, §2, §5.3. */
#ifndef NF_MITRA_TRAIN_H
#define NF_MITRA_TRAIN_H

#include "mitra-impl.h"

struct nf_mitra_train;

/* The arenas (gradient, Adam m and v, best weights: each the size of the
 * weights) on the model's device. */
int nf__mitra_train_new(nf_mitra * m, struct nf_mitra_train ** out, nf_err * err);
void nf__mitra_train_free(struct nf_mitra_train * t);

/* One episode: in->x_support / y_* are the support rows, in->x_query the
 * query rows; y_query the query targets (class ids, or the normalised
 * value). Zeroes the gradient, runs forward + loss + backward; *loss gets
 * the mean loss, logits (n_query x dim_output, may be NULL) the training
 * forward's logits. */
int nf__mitra_train_grad(struct nf_mitra_train * t, const struct nf_mitra_input * in, const int64_t * y_query_class,
                         const float * y_query_value, float * loss, float * logits, nf_err * err);

/* AdamW with PyTorch's scalar arithmetic (finetune.md §1.7); step t counts
 * from 1 and is kept by the trainer. */
int nf__mitra_train_adamw(struct nf_mitra_train * t, double lr, double beta1, double beta2, double eps, double wd,
                          nf_err * err);
int64_t nf__mitra_train_steps(const struct nf_mitra_train * t);

/* The forward saves the inputs of every layer's sub-blocks (3 residual
 * streams a layer) for the top layers that fit in a fixed budget (2 GiB), so
 * backward runs those layers' forward only once; the others are run again
 * from their input stream (§5.3). This caps the saved layers at `layers`
 * (-1: the budget decides); the results are the same bit for bit. */
void nf__mitra_train_keep_layers(struct nf_mitra_train * t, int64_t layers);

/* best weights: save the live ones, or restore the saved ones (device copies) */
int nf__mitra_train_save_best(struct nf_mitra_train * t, nf_err * err);
int nf__mitra_train_restore_best(struct nf_mitra_train * t, nf_err * err);

/* Read an arena back (host, n_floats of the weight buffer): what 0 weights,
 * 1 gradient, 2 Adam m, 3 Adam v, 4 best. Restore the optimizer state
 * (what 2 or 3, and the step count) for a resumed run. */
int64_t nf__mitra_train_floats(const struct nf_mitra_train * t);
int nf__mitra_train_read(const struct nf_mitra_train * t, int what, float * out, nf_err * err);
int nf__mitra_train_write(struct nf_mitra_train * t, int what, const float * in, int64_t steps, nf_err * err);

/* Every op a training step runs, checked against the device's kernel table
 * before anything runs: a device lacking one fails at once, naming it. */
int nf__mitra_train_check_device(nf_mitra * m, nf_err * err);

#endif
