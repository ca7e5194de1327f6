/* weights.h -- declarative weight tables: one static table per model drives
 * the strict checkpoint check, the packing into one device buffer (one
 * upload), the binding of views to the model's tensor slots, and the
 * synthetic checkpoints of `gen-weights`.
 *
 * A table is a sequence of entries in PyTorch registration order:
 *
 *   {"final_layer.weight", "C D", .fan_in = "D", .slot = NF_WSLOT(struct m, f_w)},
 *   NF_WREPEAT('L', struct m, layers, struct m_layer),     once per layer l:
 *     {"layers.%d.linear1.weight", "4D D", ...},          %d = l
 *   NF_WEND,
 *
 * name   printf pattern, one %d per enclosing NF_WREPEAT (outermost first);
 * alias  another accepted spelling (same %d's), or NULL;
 * shape  dims separated by spaces, each an optional integer factor times
 *        upper-case symbols resolved by the table's dim() callback ("4D",
 *        "D", "HW", "1"; "" = a 0-d scalar);
 * dtype  the safetensors dtype required (default F32; only F32 entries are
 *        loaded onto the device, others are only checked; gen-weights
 *        writes F32 and I64 entries, I64 with NF_INIT_COUNT values);
 * flags  NF_W_OPTIONAL (may be absent; its slot then stays unbound, buf NULL),
 *        NF_W_IGNORED (accepted when present, whatever its dtype/shape; never
 *        loaded, never written), NF_W_BUFFER (loaded, not counted as a
 *        parameter: BatchNorm running statistics);
 * when   a symbol: the entry exists iff dim(when) != 0 (0 = always);
 * pack   load-time transform: entries with the same nonzero pack id in one
 *        repeat iteration sit back to back in one 64-float-aligned slot, in
 *        table order (q, k, v -> one [q; k; v] matrix);
 * init, fan_in  gen-weights distribution (enum nf_winit; fan_in a dim);
 * slot   NF_WSLOT(type, member): the nf_tensor that receives the view, in the
 *        model struct, or in the element struct of the enclosing repeat.
 *
 * NF_WREPEAT(sym, T, member, E) repeats the entries up to its NF_WEND
 * dim(sym) times; T.member is an E * array (allocated by the model) whose
 * i-th element holds the slots of iteration i. Repeats nest. */
#ifndef NF_WEIGHTS_H
#define NF_WEIGHTS_H

#include "nf-impl.h"
#include "io/nf-io.h"

#include <stddef.h>
#include <string.h>

enum nf_wflag { NF_W_OPTIONAL = 1, NF_W_IGNORED = 2, NF_W_BUFFER = 4 };
enum nf_wkind { NF_WE_TENSOR = 0, NF_WE_REPEAT, NF_WE_END };

/* gen-weights value distributions (PyTorch-like default scales) */
enum nf_winit {
    NF_INIT_UNIFORM = 0, /* U(-1/sqrt(fan_in), +1/sqrt(fan_in)): nn.Linear / Conv default */
    NF_INIT_NORMAL,      /* ~N(0, 1) (Irwin-Hall of 12): embeddings                        */
    NF_INIT_NORM_WEIGHT, /* 1 + U(-0.1, 0.1): LayerNorm / BatchNorm gamma                 */
    NF_INIT_NORM_BIAS,   /* U(-0.1, 0.1): LayerNorm / BatchNorm beta (and running_mean)     */
    NF_INIT_VARIANCE,    /* 0.5 + U(0, 1): BatchNorm running_var (positive, not 1)         */
    NF_INIT_COUNT,       /* I64 entries: an integer in [1000, 1000 + 2^20): num_batches_tracked */
};

#define NF_W_MAX_DEPTH 4
#define NF_W_NAME      96
#define NF_W_MAX_PACK  64 /* pack ids per repeat iteration: 1..63 */

struct nf_wentry {
    const char * name;
    const char * shape;
    enum nf_st_dtype dtype;
    unsigned flags;
    char when;
    int pack;
    int init;
    const char * fan_in;
    const char * alias;
    size_t slot; /* NF_WSLOT(...) = offset + 1; 0 = no slot */
    /* NF_WE_REPEAT only: */
    int kind;
    size_t stride; /* sizeof the element struct */
};

#define NF_WSLOT(T, member) (offsetof(T, member) + 1)
#define NF_WREPEAT(sym, T, member, E) \
    { .kind = NF_WE_REPEAT, .when = (sym), .slot = NF_WSLOT(T, member), .stride = sizeof(E) }
#define NF_WEND \
    { .kind = NF_WE_END }

struct nf_wtable {
    const char * model; /* for messages: "mitra" */
    const struct nf_wentry * entries;
    int n_entries;
    /* value of a shape / repeat / condition symbol for this config; idx are
     * the enclosing repeat indices (depth of them). Returns < 0 if unknown. */
    int64_t (*dim)(const void * cfg, char sym, const int * idx, int depth);
};

/* One entry of the expanded table (a concrete key). */
struct nf_wkey {
    char name[NF_W_NAME];
    char alias[NF_W_NAME]; /* "" when none */
    enum nf_st_dtype dtype;
    int ndim;
    int64_t shape[NF_MAX_DIMS];
    unsigned flags;
    int init;
    int64_t fan_in;
    int pack;         /* unique over the expansion; 0 none */
    nf_tensor * slot; /* NULL when none (or no model given) */
};

/* Expand the table for cfg. model (may be NULL) resolves the slots. *out is
 * malloc'd (free it). */
int nf__wtable_expand(const struct nf_wtable * t, const void * cfg, void * model, struct nf_wkey ** out, int * n,
                      nf_err * err);
int64_t nf__wkey_numel(const struct nf_wkey * k);
/* Keys that a strict load loads onto the device (F32, not ignored) */
int nf__wkey_loaded(const struct nf_wkey * k);
/* Keys that gen-weights writes: the loaded ones and the I64 ones (BatchNorm
 * num_batches_tracked), not ignored */
int nf__wkey_written(const struct nf_wkey * k);

/* A model's weights: one device buffer, the views live in the model's slots. */
struct nf_weights {
    struct nf_wkey * keys; /* the views' names point here */
    int n_keys;
    nf_tensor buf;    /* all weights, one device buffer */
    int64_t n_params; /* elements of loaded, non-buffer keys */
};

/* Strict load of path (a .safetensors file, or a torch.save .ckpt told apart
 * by content: nf__tensors_open) against the table: every missing / unexpected / wrong
 * dtype / wrong shape tensor is listed in one NF_ERR_CHECKPOINT message;
 * values must be finite. Then pack, upload once, bind the slots. */
int nf__weights_load(nf_backend * be, const char * path, const struct nf_wtable * t, const void * cfg, void * model,
                     struct nf_weights * w, nf_err * err);
void nf__weights_free(struct nf_weights * w);
/* element offset of key i's values in the buffer, or -1 (not loaded) */
int64_t nf__weights_key_offset(const struct nf_weights * w, int i);
/* the loaded keys, their values from host (the buffer read back), as a
 * safetensors file at path */
int nf__weights_save(const struct nf_weights * w, const float * host, const char * path, nf_err * err);
/* where the buffer lives, asked of the driver now */
int nf__weights_where(const struct nf_weights * w, char * out, size_t n, nf_err * err);

/* Write DIR/model.safetensors from the table, values drawn deterministically
 * from seed per written key (its stream: seed and its index among the
 * written keys); perturb_key (may be NULL, an F32 key) gets delta added. */
int nf__weights_generate(const char * path, const struct nf_wtable * t, const void * cfg, uint64_t seed,
                         const char * perturb_key, float perturb_delta, nf_err * err);
/* The same, and when ckpt_path is not NULL the same tensors (in table order)
 * as a torch.save checkpoint {"state_dict": OrderedDict(...)} too (io/nf-io.h
 * nf__ckpt_write). */
int nf__weights_generate_ckpt(const char * path, const char * ckpt_path, const struct nf_wtable * t, const void * cfg,
                              uint64_t seed, const char * perturb_key, float perturb_delta, nf_err * err);

/* ---- small helpers shared by the core and the models -------------------------- */
/* Append to a bounded message (never overflows; stops when full). */
void nf__msg_append(char * msg, size_t cap, size_t * len, const char * fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
/* "[a, b]" */
void nf__shape_str(char * out, size_t n, int ndim, const int64_t * shape);

/* Name -> index map of NUL-terminated names (borrowed): io/strmap.c's nf__smap,
 * sized up front for n names. */
struct nf_namemap {
    struct nf__smap m;
};
static inline int nf__namemap_init(struct nf_namemap * m, size_t n, nf_err * err) {
    memset(m, 0, sizeof(*m));
    if (nf__smap_reserve(&m->m, n) != 0) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    return NF_OK;
}
static inline void nf__namemap_free(struct nf_namemap * m) { nf__smap_free(&m->m); }
/* 0 ok, -1 duplicate (or out of memory past the n names of init) */
static inline int nf__namemap_put(struct nf_namemap * m, const char * name, int idx) {
    return nf__smap_put(&m->m, name, strlen(name), idx) == 0 ? 0 : -1;
}
/* -1 absent */
static inline int nf__namemap_get(const struct nf_namemap * m, const char * name) {
    return nf__smap_get(&m->m, name, strlen(name));
}

#endif
