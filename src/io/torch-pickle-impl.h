/* torch-pickle-impl.h -- private to the restricted unpickler: the value
 * arena and the machine's state, shared by torch-pickle.c (the opcodes) and
 * torch-pickle-select.c (the state_dict it yields). */
#ifndef NF_TORCH_PICKLE_IMPL_H
#define NF_TORCH_PICKLE_IMPL_H

#include "nf-io.h"

#include <stdint.h>

#define NF__NIL     UINT32_MAX
#define NF__MAX_VAL ((uint64_t) 1 << 62) /* sizes, strides, offsets, numels */
#define NF__MAX_STR (16u << 20)

/* ---- the value arena ------------------------------------------------------------------ */

enum nf__k {
    NF__NONE,
    NF__BOOL,
    NF__INT,
    NF__FLOAT,
    NF__STR,
    NF__BYTES,
    NF__TUPLE,
    NF__LIST,
    NF__DICT,
    NF__GLOBAL,
    NF__STORAGE,
    NF__TENSOR
};
extern const char * const nf__kind_names[];

enum { NF__F_SEALED = 1, NF__F_ORDERED = 2, NF__F_BUILT = 4 };

struct nf__node {
    uint8_t kind, flags;
    uint16_t depth;
    uint32_t n; /* items */
    union {
        int64_t i; /* INT, BOOL; GLOBAL: table index; STORAGE/TENSOR: index */
        double f;
        struct {
            uint32_t off, len;
        } s; /* STR/BYTES: bytes in the pickle */
        struct {
            uint32_t head, tail;
        } c; /* TUPLE/LIST/DICT: item list */
    } u;
};

struct nf__item {
    uint32_t key, val, next;
};

struct nf__pk {
    const unsigned char * p;
    size_t len, pos, op_at;
    const char * where; /* "PATH: PREFIX/data.pkl" */
    nf_err * err;
    struct nf__node * nodes;
    uint32_t n_nodes, cap_nodes;
    struct nf__item * items;
    uint32_t n_items, cap_items;
    uint32_t * stack;
    uint32_t sp, cap_stack;
    uint32_t marks[NF_CKPT_MAX_MARKS];
    int n_marks;
    uint32_t * memo;
    uint32_t n_memo, cap_memo;
    struct nf_ckpt_tensor * tens;
    int n_tens, cap_tens;
    struct nf_ckpt * ck; /* storages accumulate here */
    int cap_stor;
    struct nf__smap stor_map;
    nf_ckpt_record_fn record_size;
    void * ctx;
};

int nf__pk_err(struct nf__pk * k, int code, const char * fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
#define NF__BAD(...) nf__pk_err(k, NF_ERR_FORMAT, __VA_ARGS__)
/* is handle h the string s */
int nf__pk_is_str(const struct nf__pk * k, uint32_t h, const char * s);
/* runs data.pkl to STOP: one value left on k->stack */
int nf__pk_run(struct nf__pk * k);
/* picks the dict (the root, or its 'state_dict') and turns its entries into k->ck->tensors */
int nf__pk_select(struct nf__pk * k);

#endif
