/* mitra-impl.h -- Mitra (Tab2D) internals shared by the loader, the forward
 * and the synthetic-weight generator. Spec: shared/specs/mitra.md §2-§4. */
#ifndef NF_MITRA_IMPL_H
#define NF_MITRA_IMPL_H

#include "nf-impl.h"

#define NF_MITRA_N_QUANTILES 999     /* q = 1/1000 .. 999/1000 */
#define NF_MITRA_Q_DENOM     1000
#define NF_MITRA_LN_EPS      1e-5f

/* One parameter tensor of the state_dict, in PyTorch registration order. */
struct nf_mitra_key {
    char    name[64];
    int     ndim;
    int64_t shape[2];
    /* init for synthetic weights: 0 linear weight/bias U(+-1/sqrt(fan_in)),
     * 1 embedding N(0,1), 2 layernorm weight (~1), 3 layernorm bias (~0) */
    int     init;
    int64_t fan_in;
};

/* Label tokens come from an embedding table (classification, and binned
 * regression with dim_output > 1) or from Linear(1, D) (regression, C == 1). */
int nf__mitra_class_labels(const struct nf_mitra_config * cfg);

/* Number of keys, and the keys themselves into out (capacity >= count). */
int nf__mitra_key_count(const struct nf_mitra_config * cfg);
int nf__mitra_keys(const struct nf_mitra_config * cfg, struct nf_mitra_key * out);

/* Validate a configuration the way upstream would accept it. */
int nf__mitra_config_check(const struct nf_mitra_config * cfg, const char * where, nf_err * err);

/* gen-weights with one tensor shifted by delta (for bisect tests); key may be NULL */
int nf__mitra_gen_weights_ex(const char * dir, const struct nf_mitra_config * cfg, uint64_t seed,
                             const char * perturb_key, float perturb_delta, nf_err * err);

#endif
