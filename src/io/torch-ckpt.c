/* torch-ckpt.c -- a restricted reader for PyTorch checkpoints (torch.save's zip
 * format), in C, executing nothing. Spec: shared/specs/torch-checkpoint.md.
 *
 * Container: a zip (read with libzip, ZIP_CHECKCONS) whose entries all sit in
 * one folder, the prefix: <prefix>/data.pkl is the pickled object,
 * <prefix>/data/<key> the raw little-endian bytes of each storage. Refused:
 * encrypted or oddly compressed entries, duplicate names, entries outside the
 * prefix or with "..", TorchScript archives, a byteorder record other than
 * "little", the legacy (non-zip) format.
 *
 * data.pkl: protocol 2 only, and only the opcodes a protocol-2 torch.save
 * emits (spec §3.2; not NEWOBJ, not the protocol-4 ones). Values are handles
 * into an arena; the memo holds handles (append-only); every stack access
 * stays above the innermost MARK; containers are sealed when they become a
 * child (so no cycles) and nest at most NF_CKPT_MAX_DEPTH deep; dict keys are
 * scalars or tuples of scalars; STOP leaves exactly one value, no MARK, and
 * no trailing byte. Globals are an allow-list:
 *   collections.OrderedDict             REDUCE with () only; BUILD only with
 *                                       {'_metadata': dict} (kept aside)
 *   torch._utils._rebuild_tensor_v2     (storage, offset, size, stride,
 *                                       requires_grad, OrderedDict() [, {}])
 *   torch._utils._rebuild_parameter     (tensor, requires_grad, OrderedDict())
 *   _codecs.encode                      (str, 'latin1') -> bytes
 *   torch.{Float,Double,Half,BFloat16,Long,Int,Short,Char,Byte,Bool}Storage
 *                                       only as the class in a persistent id
 *                                       ('storage', class, key, location, numel)
 * anything else is an error naming it. Arithmetic on sizes, strides, offsets
 * and byte counts is overflow-checked; no recursion. */
#include "nf-io.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>
#include <zip.h>

#define NF__NIL     UINT32_MAX
#define NF__MAX_VAL ((uint64_t) 1 << 62) /* sizes, strides, offsets, numels */
#define NF__MAX_STR (16u << 20)

/* ---- a small string -> index hash (open addressing; keys borrowed) ------------- */

struct nf__smap {
    const char ** k;
    size_t * kl;
    int * v;
    size_t cap, n;
};

static uint64_t nf__hash(const char * s, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char) s[i]) * 0x100000001b3ull;
    return h;
}

static void nf__smap_free(struct nf__smap * m) {
    free(m->k);
    free(m->kl);
    free(m->v);
    memset(m, 0, sizeof(*m));
}

static int nf__smap_grow(struct nf__smap * m) {
    size_t cap = m->cap ? 2 * m->cap : 64;
    struct nf__smap n = {calloc(cap, sizeof(char *)), calloc(cap, sizeof(size_t)), calloc(cap, sizeof(int)), cap, 0};
    if (!n.k || !n.kl || !n.v) {
        nf__smap_free(&n);
        return -1;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->k[i]) continue;
        size_t j = nf__hash(m->k[i], m->kl[i]) & (cap - 1);
        while (n.k[j]) j = (j + 1) & (cap - 1);
        n.k[j] = m->k[i];
        n.kl[j] = m->kl[i];
        n.v[j] = m->v[i];
        n.n++;
    }
    nf__smap_free(m);
    *m = n;
    return 0;
}

/* -1 absent */
static int nf__smap_get(const struct nf__smap * m, const char * s, size_t n) {
    if (!m->cap) return -1;
    for (size_t j = nf__hash(s, n) & (m->cap - 1); m->k[j]; j = (j + 1) & (m->cap - 1)) {
        if (m->kl[j] == n && memcmp(m->k[j], s, n) == 0) return m->v[j];
    }
    return -1;
}

/* 0 added, 1 duplicate, -1 out of memory */
static int nf__smap_put(struct nf__smap * m, const char * s, size_t n, int v) {
    if (nf__smap_get(m, s, n) >= 0) return 1;
    if (2 * (m->n + 1) > m->cap && nf__smap_grow(m) != 0) return -1;
    size_t j = nf__hash(s, n) & (m->cap - 1);
    while (m->k[j]) j = (j + 1) & (m->cap - 1);
    m->k[j] = s;
    m->kl[j] = n;
    m->v[j] = v;
    m->n++;
    return 0;
}

/* ---- the allow-list ----------------------------------------------------------------- */

enum nf__g {
    NF__G_ODICT = 1,
    NF__G_REBUILD_V2,
    NF__G_REBUILD_PARAM,
    NF__G_ENCODE,
    NF__G_STORAGE, /* + dtype */
};

static const struct {
    const char *mod, *name;
    int id;
    enum nf_st_dtype dt;
} nf__globals[] = {
    {"collections", "OrderedDict", NF__G_ODICT, NF_ST_OTHER},
    {"torch._utils", "_rebuild_tensor_v2", NF__G_REBUILD_V2, NF_ST_OTHER},
    {"torch._utils", "_rebuild_parameter", NF__G_REBUILD_PARAM, NF_ST_OTHER},
    {"_codecs", "encode", NF__G_ENCODE, NF_ST_OTHER},
    {"torch", "FloatStorage", NF__G_STORAGE, NF_ST_F32},
    {"torch", "DoubleStorage", NF__G_STORAGE, NF_ST_F64},
    {"torch", "HalfStorage", NF__G_STORAGE, NF_ST_F16},
    {"torch", "BFloat16Storage", NF__G_STORAGE, NF_ST_BF16},
    {"torch", "LongStorage", NF__G_STORAGE, NF_ST_I64},
    {"torch", "IntStorage", NF__G_STORAGE, NF_ST_I32},
    {"torch", "ShortStorage", NF__G_STORAGE, NF_ST_I16},
    {"torch", "CharStorage", NF__G_STORAGE, NF_ST_I8},
    {"torch", "ByteStorage", NF__G_STORAGE, NF_ST_U8},
    {"torch", "BoolStorage", NF__G_STORAGE, NF_ST_BOOL},
};

/* torch globals that are legal in torch files but that nofall does not read:
 * refused like any other, with the reason */
static const struct {
    const char *mod, *name, *why;
} nf__known_unsupported[] = {
    {"torch._utils", "_rebuild_tensor_v3",
     "torch writes it for dtypes nofall does not implement (float8, uint16/32/64, complex32, bits)"},
    {"torch.storage", "UntypedStorage",
     "torch writes it for dtypes nofall does not implement (float8, uint16/32/64, complex32, bits)"},
    {"torch._utils", "_rebuild_qtensor", "quantized tensors are not supported"},
    {"torch._utils", "_rebuild_sparse_tensor", "sparse tensors are not supported"},
    {"torch._utils", "_rebuild_parameter_with_state",
     "parameters with Python state are not supported; save model.state_dict()"},
    {"torch._tensor", "_rebuild_from_type_v2",
     "tensor subclasses / tensors with Python state are not supported; save model.state_dict()"},
    {"torch", "ComplexFloatStorage", "complex tensors are not supported"},
    {"torch", "ComplexDoubleStorage", "complex tensors are not supported"},
};

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
static const char * const nf__kind_names[] = {"None",  "bool", "int",  "float",  "str",     "bytes",
                                              "tuple", "list", "dict", "global", "storage", "tensor"};

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

static int nf__pk_err(struct nf__pk * k, int code, const char * fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static int nf__pk_err(struct nf__pk * k, int code, const char * fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return nf__err_set(k->err, code, "%s+0x%zx: %s", k->where, k->op_at, msg);
}
#define NF__BAD(...) nf__pk_err(k, NF_ERR_FORMAT, __VA_ARGS__)

static int nf__grow(void ** p, uint32_t * cap, size_t elem, uint32_t need, uint32_t limit) {
    if (need <= *cap) return 0;
    if (need > limit) return -1;
    uint64_t c = *cap ? (uint64_t) *cap * 2 : 256;
    while (c < need) c *= 2;
    if (c > limit) c = limit;
    void * q = realloc(*p, (size_t) c * elem);
    if (!q) return -2;
    *p = q;
    *cap = (uint32_t) c;
    return 0;
}

static int nf__node_new(struct nf__pk * k, int kind, uint32_t * h) {
    int g = nf__grow((void **) &k->nodes, &k->cap_nodes, sizeof(struct nf__node), k->n_nodes + 1, UINT32_MAX - 1);
    if (g) return nf__pk_err(k, g == -2 ? NF_ERR_NOMEM : NF_ERR_FORMAT, "too many values");
    struct nf__node * n = &k->nodes[k->n_nodes];
    memset(n, 0, sizeof(*n));
    n->kind = (uint8_t) kind;
    n->u.c.head = n->u.c.tail = NF__NIL;
    if (kind != NF__TUPLE && kind != NF__LIST && kind != NF__DICT) n->u.i = 0;
    *h = k->n_nodes++;
    return NF_OK;
}

static int nf__push(struct nf__pk * k, uint32_t h) {
    int g = nf__grow((void **) &k->stack, &k->cap_stack, sizeof(uint32_t), k->sp + 1, NF_CKPT_MAX_STACK);
    if (g)
        return nf__pk_err(k, g == -2 ? NF_ERR_NOMEM : NF_ERR_FORMAT, "stack deeper than %u values", NF_CKPT_MAX_STACK);
    k->stack[k->sp++] = h;
    return NF_OK;
}

static uint32_t nf__base(const struct nf__pk * k) { return k->n_marks ? k->marks[k->n_marks - 1] : 0; }

/* need n values above the innermost mark */
static int nf__need(struct nf__pk * k, uint32_t n, const char * op) {
    if (k->sp - nf__base(k) < n) return NF__BAD("%s needs %u value(s) on the stack above the last MARK", op, n);
    return NF_OK;
}

static int nf__pop_mark(struct nf__pk * k, const char * op, uint32_t * mark) {
    if (!k->n_marks) return NF__BAD("%s without a MARK", op);
    *mark = k->marks[--k->n_marks];
    return NF_OK;
}

/* Add child (key may be NIL) to container c: seals the children, checks the
 * target, tracks depth. */
static int nf__add(struct nf__pk * k, uint32_t c, uint32_t key, uint32_t val, const char * op) {
    struct nf__node * kn = key != NF__NIL ? &k->nodes[key] : NULL;
    struct nf__node * vn = &k->nodes[val];
    if (kn) kn->flags |= NF__F_SEALED;
    vn->flags |= NF__F_SEALED; /* before checking the target: d[k] = d fails */
    struct nf__node * cn = &k->nodes[c];
    if (cn->flags & NF__F_SEALED && cn->kind != NF__TUPLE)
        return NF__BAD("%s into a %s that is already in use elsewhere", op, nf__kind_names[cn->kind]);
    if (kn) {
        int ok = kn->kind <= NF__STR; /* None, bool, int, float, str */
        if (kn->kind == NF__TUPLE) {
            ok = 1;
            for (uint32_t it = kn->u.c.head; it != NF__NIL && ok; it = k->items[it].next)
                ok = k->nodes[k->items[it].val].kind <= NF__STR;
        }
        if (!ok) return NF__BAD("%s: a %s as a dict key", op, nf__kind_names[kn->kind]);
    }
    uint32_t d = vn->depth;
    if (kn && kn->depth > d) d = kn->depth;
    if (d + 1u > NF_CKPT_MAX_DEPTH) return NF__BAD("containers nested deeper than %d", NF_CKPT_MAX_DEPTH);
    if (d + 1u > cn->depth) cn->depth = (uint16_t) (d + 1u);
    int g = nf__grow((void **) &k->items, &k->cap_items, sizeof(struct nf__item), k->n_items + 1, UINT32_MAX - 1);
    if (g) return nf__pk_err(k, g == -2 ? NF_ERR_NOMEM : NF_ERR_FORMAT, "too many items");
    cn = &k->nodes[c];
    const uint32_t it = k->n_items++;
    k->items[it] = (struct nf__item){key, val, NF__NIL};
    if (cn->u.c.tail == NF__NIL)
        cn->u.c.head = it;
    else
        k->items[cn->u.c.tail].next = it;
    cn->u.c.tail = it;
    cn->n++;
    return NF_OK;
}

/* the i-th item's value of a tuple / list (small i only) */
static uint32_t nf__at(const struct nf__pk * k, uint32_t c, uint32_t i) {
    uint32_t it = k->nodes[c].u.c.head;
    while (i-- && it != NF__NIL) it = k->items[it].next;
    return it == NF__NIL ? NF__NIL : k->items[it].val;
}

static int nf__is_str(const struct nf__pk * k, uint32_t h, const char * s) {
    const struct nf__node * n = &k->nodes[h];
    return n->kind == NF__STR && n->u.s.len == strlen(s) && memcmp(k->p + n->u.s.off, s, n->u.s.len) == 0;
}

/* an empty dict made by OrderedDict() (or {}) */
static int nf__is_empty_dict(const struct nf__pk * k, uint32_t h) {
    return k->nodes[h].kind == NF__DICT && k->nodes[h].n == 0;
}

static int nf__get_int(struct nf__pk * k, uint32_t h, const char * what, uint64_t * out) {
    const struct nf__node * n = &k->nodes[h];
    if (n->kind != NF__INT) return NF__BAD("%s is a %s, not an int", what, nf__kind_names[n->kind]);
    if (n->u.i < 0 || (uint64_t) n->u.i >= NF__MAX_VAL)
        return NF__BAD("%s %lld is out of range [0, 2^62)", what, (long long) n->u.i);
    *out = (uint64_t) n->u.i;
    return NF_OK;
}

/* ---- reading operands ------------------------------------------------------------------ */

static int nf__rd(struct nf__pk * k, size_t n, const unsigned char ** out) {
    if (n > k->len - k->pos)
        return nf__pk_err(k, NF_ERR_FORMAT, "truncated: the operand needs %zu byte(s), %zu left", n, k->len - k->pos);
    *out = k->p + k->pos;
    k->pos += n;
    return NF_OK;
}

static uint64_t nf__le(const unsigned char * b, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = (v << 8) | b[i];
    return v;
}

/* strict UTF-8: no overlongs, no surrogates, <= U+10FFFF */
static int nf__utf8_ok(const unsigned char * s, size_t n) {
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        int len;
        unsigned cp;
        if ((c & 0xe0) == 0xc0) {
            len = 2;
            cp = c & 0x1f;
        } else if ((c & 0xf0) == 0xe0) {
            len = 3;
            cp = c & 0x0f;
        } else if ((c & 0xf8) == 0xf0) {
            len = 4;
            cp = c & 0x07;
        } else
            return 0;
        if ((size_t) len > n - i) return 0;
        for (int j = 1; j < len; j++) {
            if ((s[i + j] & 0xc0) != 0x80) return 0;
            cp = (cp << 6) | (s[i + j] & 0x3f);
        }
        if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000)) return 0;
        if (cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
        i += (size_t) len;
    }
    return 1;
}

/* one GLOBAL line: [A-Za-z0-9_.]{1,256} then '\n' */
static int nf__global_line(struct nf__pk * k, const char ** s, size_t * n) {
    size_t i = k->pos;
    while (i < k->len && i - k->pos <= 256 && k->p[i] != '\n') {
        const unsigned char c = k->p[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.')) {
            return NF__BAD("GLOBAL: byte 0x%02x in a module or class name", c);
        }
        i++;
    }
    if (i >= k->len || k->p[i] != '\n' || i == k->pos)
        return NF__BAD("GLOBAL: a name must be 1..256 characters and end with a newline");
    *s = (const char *) k->p + k->pos;
    *n = i - k->pos;
    k->pos = i + 1;
    return NF_OK;
}

static int nf__eq(const char * a, size_t an, const char * b) { return an == strlen(b) && memcmp(a, b, an) == 0; }

static int nf__op_global(struct nf__pk * k) {
    const char *m, *c;
    size_t mn, cn;
    NF_TRY(nf__global_line(k, &m, &mn));
    NF_TRY(nf__global_line(k, &c, &cn));
    for (size_t i = 0; i < sizeof(nf__globals) / sizeof(nf__globals[0]); i++) {
        if (nf__eq(m, mn, nf__globals[i].mod) && nf__eq(c, cn, nf__globals[i].name)) {
            uint32_t h;
            NF_TRY(nf__node_new(k, NF__GLOBAL, &h));
            k->nodes[h].u.i = (int64_t) i;
            return nf__push(k, h);
        }
    }
    for (size_t i = 0; i < sizeof(nf__known_unsupported) / sizeof(nf__known_unsupported[0]); i++) {
        if (nf__eq(m, mn, nf__known_unsupported[i].mod) && nf__eq(c, cn, nf__known_unsupported[i].name)) {
            return nf__pk_err(k, NF_ERR_UNSUPPORTED, "global '%.*s.%.*s' is not supported: %s", (int) mn, m, (int) cn,
                              c, nf__known_unsupported[i].why);
        }
    }
    return NF__BAD("global '%.*s.%.*s' is not allowed (nofall reads tensors and plain containers only; "
                   "a checkpoint that pickles Python objects must be re-saved as a state_dict)",
                   (int) mn, m, (int) cn, c);
}

/* ('storage', class, key, location, numel) -> STORAGE */
static int nf__op_persid(struct nf__pk * k) {
    NF_TRY(nf__need(k, 1, "BINPERSID"));
    const uint32_t pid = k->stack[--k->sp];
    const struct nf__node * pn = &k->nodes[pid];
    if (pn->kind != NF__TUPLE || pn->n != 5 || !nf__is_str(k, nf__at(k, pid, 0), "storage")) {
        return NF__BAD("BINPERSID: a persistent id must be ('storage', class, key, location, numel)");
    }
    const uint32_t cls = nf__at(k, pid, 1), key = nf__at(k, pid, 2), loc = nf__at(k, pid, 3), num = nf__at(k, pid, 4);
    if (k->nodes[cls].kind != NF__GLOBAL || nf__globals[k->nodes[cls].u.i].id != NF__G_STORAGE) {
        return NF__BAD("BINPERSID: the storage class is not a torch.<X>Storage");
    }
    const enum nf_st_dtype dt = nf__globals[k->nodes[cls].u.i].dt;
    const struct nf__node *kn = &k->nodes[key], *ln = &k->nodes[loc];
    if (kn->kind != NF__STR || kn->u.s.len == 0 || kn->u.s.len > 64)
        return NF__BAD("BINPERSID: the storage key must be a string of 1..64 bytes");
    const char * ks = (const char *) k->p + kn->u.s.off;
    for (uint32_t i = 0; i < kn->u.s.len; i++) {
        if (ks[i] <= 0x20 || ks[i] >= 0x7f || ks[i] == '/' || ks[i] == '\\')
            return NF__BAD("BINPERSID: storage key with byte 0x%02x", (unsigned char) ks[i]);
    }
    if (ln->kind != NF__STR || ln->u.s.len > 64)
        return NF__BAD("BINPERSID: the storage location must be a short string");
    uint64_t numel = 0;
    NF_TRY(nf__get_int(k, num, "BINPERSID: the storage numel", &numel));
    const size_t es = nf__st_dtype_size(dt);
    uint64_t nbytes;
    if (__builtin_mul_overflow(numel, (uint64_t) es, &nbytes))
        return NF__BAD("storage '%.*s': numel %llu overflows", (int) kn->u.s.len, ks, (unsigned long long) numel);
    struct nf_ckpt * ck = k->ck;
    int si = nf__smap_get(&k->stor_map, ks, kn->u.s.len);
    if (si >= 0) {
        const struct nf_ckpt_storage * s = &ck->storages[si];
        if (s->dtype != dt || s->numel != numel) {
            return NF__BAD("storage '%s' is used as %s x %llu and as %s x %llu (torch never writes that)", s->key,
                           nf__st_dtype_str(s->dtype), (unsigned long long) s->numel, nf__st_dtype_str(dt),
                           (unsigned long long) numel);
        }
    } else {
        char kbuf[65];
        memcpy(kbuf, ks, kn->u.s.len);
        kbuf[kn->u.s.len] = '\0';
        int64_t entry = -1;
        const int64_t have = k->record_size(k->ctx, kbuf, &entry);
        if (have < 0) return NF__BAD("storage '%s': the archive has no record data/%s", kbuf, kbuf);
        if ((uint64_t) have != nbytes) {
            return NF__BAD("storage '%s' (%s, numel %llu) needs %llu bytes but its record data/%s holds %lld", kbuf,
                           nf__st_dtype_str(dt), (unsigned long long) numel, (unsigned long long) nbytes, kbuf,
                           (long long) have);
        }
        if (ck->n_storages == INT32_MAX / 2) return NF__BAD("too many storages");
        if (ck->n_storages == k->cap_stor) {
            const int cap = k->cap_stor ? 2 * k->cap_stor : 64;
            void * q = realloc(ck->storages, (size_t) cap * sizeof(*ck->storages));
            if (!q) return nf__pk_err(k, NF_ERR_NOMEM, "out of memory");
            ck->storages = q;
            k->cap_stor = cap;
        }
        struct nf_ckpt_storage * s = &ck->storages[ck->n_storages];
        s->key = strdup(kbuf);
        if (!s->key) return nf__pk_err(k, NF_ERR_NOMEM, "out of memory");
        s->dtype = dt;
        s->elsize = es;
        s->numel = numel;
        s->entry = entry;
        si = ck->n_storages++;
        const int pr = nf__smap_put(&k->stor_map, s->key, kn->u.s.len, si);
        if (pr < 0) return nf__pk_err(k, NF_ERR_NOMEM, "out of memory");
    }
    uint32_t h;
    NF_TRY(nf__node_new(k, NF__STORAGE, &h));
    k->nodes[h].u.i = si;
    return nf__push(k, h);
}

static int nf__rebuild_v2(struct nf__pk * k, uint32_t args, uint32_t * out) {
    const uint32_t n = k->nodes[args].n;
    if (n != 6 && n != 7) return NF__BAD("_rebuild_tensor_v2 takes 6 or 7 arguments, got %u", n);
    const uint32_t st = nf__at(k, args, 0), off = nf__at(k, args, 1), size = nf__at(k, args, 2),
                   stride = nf__at(k, args, 3), rg = nf__at(k, args, 4), hooks = nf__at(k, args, 5);
    if (k->nodes[st].kind != NF__STORAGE)
        return NF__BAD("_rebuild_tensor_v2: argument 1 is a %s, not a storage", nf__kind_names[k->nodes[st].kind]);
    const struct nf_ckpt_storage * s = &k->ck->storages[k->nodes[st].u.i];
    uint64_t offset = 0;
    NF_TRY(nf__get_int(k, off, "_rebuild_tensor_v2: storage_offset", &offset));
    if (k->nodes[size].kind != NF__TUPLE || k->nodes[stride].kind != NF__TUPLE)
        return NF__BAD("_rebuild_tensor_v2: size and stride must be tuples");
    const uint32_t nd = k->nodes[size].n;
    if (nd > NF_ST_MAX_DIMS) return NF__BAD("_rebuild_tensor_v2: %u dimensions (at most %d)", nd, NF_ST_MAX_DIMS);
    if (k->nodes[stride].n != nd) return NF__BAD("_rebuild_tensor_v2: %u sizes but %u strides", nd, k->nodes[stride].n);
    if (k->nodes[rg].kind != NF__BOOL) return NF__BAD("_rebuild_tensor_v2: requires_grad is not a bool");
    if (!nf__is_empty_dict(k, hooks)) return NF__BAD("_rebuild_tensor_v2: backward_hooks must be an empty OrderedDict");
    if (n == 7) {
        const uint32_t md = nf__at(k, args, 6);
        if (k->nodes[md].kind != NF__DICT) return NF__BAD("_rebuild_tensor_v2: metadata is not a dict");
        for (uint32_t it = k->nodes[md].u.c.head; it != NF__NIL; it = k->items[it].next) {
            const struct nf__node * v = &k->nodes[k->items[it].val];
            if (v->kind != NF__BOOL || v->u.i)
                return NF__BAD("_rebuild_tensor_v2: tensor metadata (conj/neg bits) is not supported");
        }
    }
    struct nf_ckpt_tensor t;
    memset(&t, 0, sizeof(t));
    t.dtype = s->dtype;
    t.ndim = (int) nd;
    t.storage = (int) k->nodes[st].u.i;
    t.offset = offset;
    uint64_t numel = 1, last = offset; /* last: the highest element index touched */
    uint32_t it1 = k->nodes[size].u.c.head, it2 = k->nodes[stride].u.c.head;
    for (uint32_t d = 0; d < nd; d++, it1 = k->items[it1].next, it2 = k->items[it2].next) {
        uint64_t sz = 0, sd = 0, span = 0;
        NF_TRY(nf__get_int(k, k->items[it1].val, "_rebuild_tensor_v2: a size", &sz));
        NF_TRY(nf__get_int(k, k->items[it2].val, "_rebuild_tensor_v2: a stride", &sd));
        t.shape[d] = (int64_t) sz;
        t.stride[d] = (int64_t) sd;
        if (__builtin_mul_overflow(numel, sz, &numel) || numel >= NF__MAX_VAL)
            return NF__BAD("_rebuild_tensor_v2: the shape's element count overflows");
        if (sz > 0 && (__builtin_mul_overflow(sz - 1, sd, &span) || __builtin_add_overflow(last, span, &last))) {
            return NF__BAD("_rebuild_tensor_v2: the view's extent overflows");
        }
    }
    t.numel = numel;
    if (numel > 0 && last >= s->numel) {
        return NF__BAD("_rebuild_tensor_v2: the view reaches element %llu of storage '%s', which has %llu",
                       (unsigned long long) last, s->key, (unsigned long long) s->numel);
    }
    if (k->n_tens == k->cap_tens) {
        if (k->n_tens >= INT32_MAX / 4) return NF__BAD("too many tensors");
        const int cap = k->cap_tens ? 2 * k->cap_tens : 64;
        void * q = realloc(k->tens, (size_t) cap * sizeof(*k->tens));
        if (!q) return nf__pk_err(k, NF_ERR_NOMEM, "out of memory");
        k->tens = q;
        k->cap_tens = cap;
    }
    k->tens[k->n_tens] = t;
    NF_TRY(nf__node_new(k, NF__TENSOR, out));
    k->nodes[*out].u.i = k->n_tens++;
    return NF_OK;
}

static int nf__op_reduce(struct nf__pk * k) {
    NF_TRY(nf__need(k, 2, "REDUCE"));
    const uint32_t args = k->stack[--k->sp], fn = k->stack[--k->sp];
    if (k->nodes[fn].kind != NF__GLOBAL) return NF__BAD("REDUCE: calling a %s", nf__kind_names[k->nodes[fn].kind]);
    if (k->nodes[args].kind != NF__TUPLE)
        return NF__BAD("REDUCE: the arguments are a %s, not a tuple", nf__kind_names[k->nodes[args].kind]);
    k->nodes[args].flags |= NF__F_SEALED;
    const int gi = (int) k->nodes[fn].u.i;
    const uint32_t na = k->nodes[args].n;
    uint32_t h = NF__NIL;
    switch (nf__globals[gi].id) {
        case NF__G_ODICT:
            if (na) return NF__BAD("REDUCE: collections.OrderedDict with arguments");
            NF_TRY(nf__node_new(k, NF__DICT, &h));
            k->nodes[h].flags |= NF__F_ORDERED;
            break;
        case NF__G_REBUILD_V2: NF_TRY(nf__rebuild_v2(k, args, &h)); break;
        case NF__G_REBUILD_PARAM: {
            const uint32_t t = na == 3 ? nf__at(k, args, 0) : NF__NIL;
            if (t == NF__NIL || k->nodes[t].kind != NF__TENSOR || k->nodes[nf__at(k, args, 1)].kind != NF__BOOL ||
                !nf__is_empty_dict(k, nf__at(k, args, 2))) {
                return NF__BAD("_rebuild_parameter takes (tensor, requires_grad, an empty OrderedDict)");
            }
            h = t;
            break;
        }
        case NF__G_ENCODE: {
            const uint32_t s = na == 2 ? nf__at(k, args, 0) : NF__NIL;
            if (s == NF__NIL || k->nodes[s].kind != NF__STR || !nf__is_str(k, nf__at(k, args, 1), "latin1")) {
                return NF__BAD("_codecs.encode takes (str, 'latin1') only");
            }
            NF_TRY(nf__node_new(k, NF__BYTES, &h));
            k->nodes[h].u.s = k->nodes[s].u.s;
            break;
        }
        default: return NF__BAD("REDUCE: '%s.%s' cannot be called", nf__globals[gi].mod, nf__globals[gi].name);
    }
    return nf__push(k, h);
}

/* BUILD: only OrderedDict with {'_metadata': dict}; the state is kept aside */
static int nf__op_build(struct nf__pk * k) {
    NF_TRY(nf__need(k, 2, "BUILD"));
    const uint32_t state = k->stack[--k->sp], target = k->stack[k->sp - 1];
    struct nf__node * t = &k->nodes[target];
    if (t->kind != NF__DICT || !(t->flags & NF__F_ORDERED))
        return NF__BAD("BUILD on a %s (allowed only on an OrderedDict)", nf__kind_names[t->kind]);
    if (t->flags & (NF__F_BUILT | NF__F_SEALED)) return NF__BAD("BUILD twice, or on an OrderedDict already in use");
    const struct nf__node * s = &k->nodes[state];
    if (s->kind != NF__DICT || s->n != 1 || !nf__is_str(k, k->items[s->u.c.head].key, "_metadata") ||
        k->nodes[k->items[s->u.c.head].val].kind != NF__DICT) {
        return NF__BAD("BUILD: an OrderedDict's state must be {'_metadata': dict}");
    }
    k->nodes[state].flags |= NF__F_SEALED;
    t->flags |= NF__F_BUILT;
    return NF_OK;
}

static const char * nf__opname(unsigned char op) {
    switch (op) {
        case 0x95: return "FRAME (protocol 4)";
        case 0x8c: return "SHORT_BINUNICODE (protocol 4)";
        case 0x94: return "MEMOIZE (protocol 4)";
        case 0x93: return "STACK_GLOBAL (protocol 4)";
        case 0x81: return "NEWOBJ";
        case 0x92: return "NEWOBJ_EX";
        case 0x8b: return "LONG4";
        case 0x8f: return "EMPTY_SET";
        case 0x55: return "SHORT_BINSTRING";
        case 0x54: return "BINSTRING";
        case 0x50: return "PERSID";
        case 0x69: return "INST";
        case 0x6f: return "OBJ";
        case 0x30: return "POP";
        case 0x31: return "POP_MARK";
        case 0x32: return "DUP";
        case 0x42:
        case 0x43:
        case 0x8e:
        case 0x96: return "a bytes opcode (protocol 3+)";
        default: return NULL;
    }
}

static int nf__run(struct nf__pk * k) {
    const unsigned char * b = NULL;
    if (k->len < 2 || k->p[0] != 0x80)
        return nf__pk_err(k, NF_ERR_FORMAT, "not a protocol-2 pickle (no PROTO opcode at the start)");
    if (k->p[1] != 2) {
        return nf__pk_err(k, NF_ERR_UNSUPPORTED,
                          "pickle protocol %u (nofall reads protocol 2, what torch.save writes by default; "
                          "re-save without pickle_protocol)",
                          k->p[1]);
    }
    k->pos = 2;
    for (;;) {
        k->op_at = k->pos;
        if (k->pos >= k->len) return NF__BAD("truncated: no STOP");
        const unsigned char op = k->p[k->pos++];
        uint32_t h;
        switch (op) {
            case 0x2e: { /* STOP */
                if (k->n_marks) return NF__BAD("STOP with %d MARK(s) open", k->n_marks);
                if (k->sp != 1) return NF__BAD("STOP with %u values on the stack (must be exactly 1)", k->sp);
                if (k->pos != k->len) return NF__BAD("%zu byte(s) after STOP", k->len - k->pos);
                return NF_OK;
            }
            case 0x28: /* MARK */
                if (k->n_marks == NF_CKPT_MAX_MARKS) return NF__BAD("more than %d MARKs open", NF_CKPT_MAX_MARKS);
                k->marks[k->n_marks++] = k->sp;
                break;
            case 0x7d:
            case 0x5d:
            case 0x29: /* EMPTY_DICT / EMPTY_LIST / EMPTY_TUPLE */
                NF_TRY(nf__node_new(k, op == 0x7d ? NF__DICT : op == 0x5d ? NF__LIST : NF__TUPLE, &h));
                NF_TRY(nf__push(k, h));
                break;
            case 0x74: { /* TUPLE */
                uint32_t m = 0;
                NF_TRY(nf__pop_mark(k, "TUPLE", &m));
                NF_TRY(nf__node_new(k, NF__TUPLE, &h));
                for (uint32_t i = m; i < k->sp; i++) NF_TRY(nf__add(k, h, NF__NIL, k->stack[i], "TUPLE"));
                k->sp = m;
                NF_TRY(nf__push(k, h));
                break;
            }
            case 0x85:
            case 0x86:
            case 0x87: { /* TUPLE1/2/3 */
                const uint32_t n = (uint32_t) (op - 0x84);
                NF_TRY(nf__need(k, n, "TUPLEn"));
                NF_TRY(nf__node_new(k, NF__TUPLE, &h));
                for (uint32_t i = k->sp - n; i < k->sp; i++) NF_TRY(nf__add(k, h, NF__NIL, k->stack[i], "TUPLEn"));
                k->sp -= n;
                NF_TRY(nf__push(k, h));
                break;
            }
            case 0x4e:
                NF_TRY(nf__node_new(k, NF__NONE, &h));
                NF_TRY(nf__push(k, h));
                break; /* NONE */
            case 0x88:
            case 0x89: /* NEWTRUE / NEWFALSE */
                NF_TRY(nf__node_new(k, NF__BOOL, &h));
                k->nodes[h].u.i = op == 0x88;
                NF_TRY(nf__push(k, h));
                break;
            case 0x4b:
            case 0x4d:
            case 0x4a: { /* BININT1 / BININT2 / BININT */
                const int n = op == 0x4b ? 1 : op == 0x4d ? 2 : 4;
                NF_TRY(nf__rd(k, (size_t) n, &b));
                NF_TRY(nf__node_new(k, NF__INT, &h));
                const uint64_t v = nf__le(b, n);
                k->nodes[h].u.i = n == 4 ? (int64_t) (int32_t) (uint32_t) v : (int64_t) v;
                NF_TRY(nf__push(k, h));
                break;
            }
            case 0x8a: { /* LONG1 */
                NF_TRY(nf__rd(k, 1, &b));
                const unsigned n = b[0];
                if (n > 8) return NF__BAD("LONG1 of %u bytes (ints beyond 64 bits are not supported)", n);
                NF_TRY(nf__rd(k, n, &b));
                uint64_t v = nf__le(b, (int) n);
                if (n > 0 && n < 8 && (b[n - 1] & 0x80)) v |= ~(uint64_t) 0 << (8 * n); /* sign-extend */
                NF_TRY(nf__node_new(k, NF__INT, &h));
                k->nodes[h].u.i = (int64_t) v;
                NF_TRY(nf__push(k, h));
                break;
            }
            case 0x47: { /* BINFLOAT (big-endian) */
                NF_TRY(nf__rd(k, 8, &b));
                uint64_t v = 0;
                for (int i = 0; i < 8; i++) v = (v << 8) | b[i];
                NF_TRY(nf__node_new(k, NF__FLOAT, &h));
                memcpy(&k->nodes[h].u.f, &v, sizeof(v));
                NF_TRY(nf__push(k, h));
                break;
            }
            case 0x58: { /* BINUNICODE */
                NF_TRY(nf__rd(k, 4, &b));
                const uint64_t n = nf__le(b, 4);
                if (n > NF__MAX_STR)
                    return NF__BAD("string of %llu bytes (at most %u)", (unsigned long long) n, NF__MAX_STR);
                const size_t at = k->pos;
                NF_TRY(nf__rd(k, (size_t) n, &b));
                if (!nf__utf8_ok(b, (size_t) n)) return NF__BAD("string is not valid UTF-8");
                NF_TRY(nf__node_new(k, NF__STR, &h));
                k->nodes[h].u.s.off = (uint32_t) at;
                k->nodes[h].u.s.len = (uint32_t) n;
                NF_TRY(nf__push(k, h));
                break;
            }
            case 0x63: NF_TRY(nf__op_global(k)); break; /* GLOBAL */
            case 0x71:
            case 0x72: { /* BINPUT / LONG_BINPUT */
                NF_TRY(nf__rd(k, op == 0x71 ? 1 : 4, &b));
                const uint64_t i = nf__le(b, op == 0x71 ? 1 : 4);
                NF_TRY(nf__need(k, 1, "BINPUT"));
                if (i > k->n_memo)
                    return NF__BAD("BINPUT %llu skips memo slots (the memo holds %u)", (unsigned long long) i,
                                   k->n_memo);
                if (i == k->n_memo) {
                    int g = nf__grow((void **) &k->memo, &k->cap_memo, sizeof(uint32_t), k->n_memo + 1, UINT32_MAX - 1);
                    if (g) return nf__pk_err(k, g == -2 ? NF_ERR_NOMEM : NF_ERR_FORMAT, "memo too large");
                    k->n_memo++;
                }
                k->memo[i] = k->stack[k->sp - 1];
                break;
            }
            case 0x68:
            case 0x6a: { /* BINGET / LONG_BINGET */
                NF_TRY(nf__rd(k, op == 0x68 ? 1 : 4, &b));
                const uint64_t i = nf__le(b, op == 0x68 ? 1 : 4);
                if (i >= k->n_memo)
                    return NF__BAD("BINGET %llu: the memo holds %u value(s)", (unsigned long long) i, k->n_memo);
                NF_TRY(nf__push(k, k->memo[i]));
                break;
            }
            case 0x51: NF_TRY(nf__op_persid(k)); break; /* BINPERSID */
            case 0x52: NF_TRY(nf__op_reduce(k)); break; /* REDUCE */
            case 0x62: NF_TRY(nf__op_build(k)); break;  /* BUILD */
            case 0x73: {                                /* SETITEM */
                NF_TRY(nf__need(k, 3, "SETITEM"));
                const uint32_t v = k->stack[k->sp - 1], key = k->stack[k->sp - 2], t = k->stack[k->sp - 3];
                k->sp -= 2;
                if (k->nodes[t].kind != NF__DICT) return NF__BAD("SETITEM on a %s", nf__kind_names[k->nodes[t].kind]);
                NF_TRY(nf__add(k, t, key, v, "SETITEM"));
                break;
            }
            case 0x75:
            case 0x65: { /* SETITEMS / APPENDS */
                const char * nm = op == 0x75 ? "SETITEMS" : "APPENDS";
                uint32_t m = 0;
                NF_TRY(nf__pop_mark(k, nm, &m));
                if (m == 0 || m - 1 < nf__base(k)) return NF__BAD("%s without a target below its MARK", nm);
                const uint32_t t = k->stack[m - 1];
                if (k->nodes[t].kind != (op == 0x75 ? NF__DICT : NF__LIST))
                    return NF__BAD("%s on a %s", nm, nf__kind_names[k->nodes[t].kind]);
                if (op == 0x75 && (k->sp - m) % 2) return NF__BAD("SETITEMS with an odd number of values");
                for (uint32_t i = m; i < k->sp; i += op == 0x75 ? 2 : 1) {
                    NF_TRY(nf__add(k, t, op == 0x75 ? k->stack[i] : NF__NIL, op == 0x75 ? k->stack[i + 1] : k->stack[i],
                                   nm));
                }
                k->sp = m;
                break;
            }
            case 0x61: { /* APPEND */
                NF_TRY(nf__need(k, 2, "APPEND"));
                const uint32_t v = k->stack[k->sp - 1], t = k->stack[k->sp - 2];
                k->sp--;
                if (k->nodes[t].kind != NF__LIST) return NF__BAD("APPEND on a %s", nf__kind_names[k->nodes[t].kind]);
                NF_TRY(nf__add(k, t, NF__NIL, v, "APPEND"));
                break;
            }
            case 0x80: return NF__BAD("a second PROTO opcode");
            default: {
                const char * nm = nf__opname(op);
                if (nm) return NF__BAD("opcode 0x%02x (%s) is not allowed", op, nm);
                return NF__BAD("opcode 0x%02x is not allowed (not one torch.save's protocol-2 pickles use)", op);
            }
        }
    }
}

/* Pick the dict and turn its entries into ck->tensors. */
static int nf__select(struct nf__pk * k) {
    struct nf_ckpt * ck = k->ck;
    k->op_at = k->len;
    const uint32_t root = k->stack[0];
    if (k->nodes[root].kind != NF__DICT)
        return NF__BAD("the checkpoint is a %s, not a dict (a state_dict, or a dict holding one)",
                       nf__kind_names[k->nodes[root].kind]);
    uint32_t sel = root;
    int seen = 0;
    for (uint32_t it = k->nodes[root].u.c.head; it != NF__NIL; it = k->items[it].next) {
        if (!nf__is_str(k, k->items[it].key, "state_dict")) continue;
        if (seen++) return NF__BAD("the key 'state_dict' appears twice");
        if (k->nodes[k->items[it].val].kind == NF__DICT) sel = k->items[it].val;
    }
    snprintf(ck->dict, sizeof(ck->dict), "%s", sel == root ? "" : "state_dict");
    const char * in = sel == root ? "the checkpoint" : "the state_dict";
    const uint32_t n = k->nodes[sel].n;
    ck->tensors = calloc(n ? n : 1, sizeof(*ck->tensors));
    if (!ck->tensors) return nf__pk_err(k, NF_ERR_NOMEM, "out of memory");
    struct nf__smap names = {0};
    int rc = NF_OK;
    for (uint32_t it = k->nodes[sel].u.c.head; it != NF__NIL && rc == NF_OK; it = k->items[it].next) {
        const struct nf__node *kn = &k->nodes[k->items[it].key], *vn = &k->nodes[k->items[it].val];
        if (kn->kind != NF__STR) {
            rc = NF__BAD("%s has a key of type %s (tensor names are strings)", in, nf__kind_names[kn->kind]);
            break;
        }
        const char * nm = (const char *) k->p + kn->u.s.off;
        const int nl = (int) kn->u.s.len;
        if (kn->u.s.len == 0 || kn->u.s.len > 1024 || memchr(nm, 0, kn->u.s.len)) {
            rc = NF__BAD("%s has an empty, over-long or NUL-holding key", in);
            break;
        }
        if (vn->kind != NF__TENSOR) {
            rc = NF__BAD("%s entry '%.*s' is not a tensor (a value of type %s)", in, nl, nm, nf__kind_names[vn->kind]);
            break;
        }
        const int pr = nf__smap_put(&names, nm, kn->u.s.len, 0);
        if (pr < 0) {
            rc = nf__pk_err(k, NF_ERR_NOMEM, "out of memory");
            break;
        }
        if (pr > 0) {
            rc = NF__BAD("%s entry '%.*s' appears twice", in, nl, nm);
            break;
        }
        const struct nf_ckpt_tensor * src = &k->tens[vn->u.i];
        /* row-major contiguous: dims of size 1 may carry any stride */
        int64_t want = 1;
        int contig = 1;
        for (int d = src->ndim - 1; d >= 0; d--) {
            if (src->shape[d] != 1 && src->stride[d] != want) contig = 0;
            want *= src->shape[d];
        }
        if (!contig && src->numel > 1) {
            char sh[160], sd[160];
            size_t a = 0, c = 0;
            sh[0] = sd[0] = '\0';
            for (int d = 0; d < src->ndim; d++) {
                a += (size_t) snprintf(sh + a, a < sizeof(sh) ? sizeof(sh) - a : 0, d ? ", %lld" : "%lld",
                                       (long long) src->shape[d]);
                c += (size_t) snprintf(sd + c, c < sizeof(sd) ? sizeof(sd) - c : 0, d ? ", %lld" : "%lld",
                                       (long long) src->stride[d]);
                if (a >= sizeof(sh) || c >= sizeof(sd)) break;
            }
            rc = NF__BAD("tensor '%.*s' is not contiguous (shape [%s], strides (%s)); re-save it with .contiguous()",
                         nl, nm, sh, sd);
            break;
        }
        struct nf_ckpt_tensor * t = &ck->tensors[ck->n_tensors];
        *t = *src;
        t->name = malloc(kn->u.s.len + 1);
        if (!t->name) {
            rc = nf__pk_err(k, NF_ERR_NOMEM, "out of memory");
            break;
        }
        memcpy(t->name, nm, kn->u.s.len);
        t->name[kn->u.s.len] = '\0';
        ck->n_tensors++;
    }
    nf__smap_free(&names);
    return rc;
}

int nf__ckpt_parse_pickle(const unsigned char * pkl, size_t len, const char * where, nf_ckpt_record_fn record_size,
                          void * ctx, struct nf_ckpt * ck, nf_err * err) {
    if (len > NF_CKPT_MAX_PKL)
        return nf__err_set(err, NF_ERR_FORMAT, "%s: %zu bytes (at most %u)", where, len, NF_CKPT_MAX_PKL);
    struct nf__pk k = {
        .p = pkl, .len = len, .where = where, .err = err, .ck = ck, .record_size = record_size, .ctx = ctx};
    int rc = nf__run(&k);
    if (rc == NF_OK) rc = nf__select(&k);
    free(k.nodes);
    free(k.items);
    free(k.stack);
    free(k.memo);
    free(k.tens);
    nf__smap_free(&k.stor_map);
    if (rc != NF_OK) { /* no partial result */
        for (int i = 0; i < ck->n_tensors; i++) free(ck->tensors[i].name);
        free(ck->tensors);
        for (int i = 0; i < ck->n_storages; i++) free(ck->storages[i].key);
        free(ck->storages);
        ck->tensors = NULL;
        ck->storages = NULL;
        ck->n_tensors = ck->n_storages = 0;
    }
    return rc;
}

/* ---- the zip layer ------------------------------------------------------------------------ */

void nf__ckpt_close(struct nf_ckpt * ck) {
    if (!ck) return;
    for (int i = 0; i < ck->n_tensors; i++) free(ck->tensors[i].name);
    free(ck->tensors);
    for (int i = 0; i < ck->n_storages; i++) free(ck->storages[i].key);
    free(ck->storages);
    if (ck->za)
        zip_discard(ck->za);
    else if (ck->src)
        zip_source_free(ck->src);
    free(ck->prefix);
    free(ck->path);
    memset(ck, 0, sizeof(*ck));
}

struct nf__zctx {
    struct nf_ckpt * ck;
    struct nf__smap names;
    char buf[4200];
};

static int64_t nf__zrecord(void * ctx, const char * key, int64_t * entry) {
    struct nf__zctx * z = ctx;
    int n = snprintf(z->buf, sizeof(z->buf), "%s/data/%s", z->ck->prefix, key);
    if (n < 0 || (size_t) n >= sizeof(z->buf)) return -1;
    const int i = nf__smap_get(&z->names, z->buf, (size_t) n);
    if (i < 0) return -1;
    zip_stat_t st;
    if (zip_stat_index(z->ck->za, (zip_uint64_t) i, 0, &st) != 0 || !(st.valid & ZIP_STAT_SIZE) ||
        st.size > (zip_uint64_t) INT64_MAX)
        return -1;
    *entry = i;
    return (int64_t) st.size;
}

/* Read entry i, exactly size bytes, then once more to reach the end: at the
 * end libzip checks the CRC. A CRC of 0 means "not computed" (torch's
 * compute_crc32=False writes that), so for those the final read is skipped
 * (libzip checks the CRC only when a read reaches the end of the entry). */
static int nf__zread(const struct nf_ckpt * ck, int64_t i, void * dst, uint64_t size, nf_err * err) {
    const char * nm = zip_get_name(ck->za, (zip_uint64_t) i, ZIP_FL_ENC_RAW);
    if (!nm) nm = "?";
    zip_stat_t zs;
    const int no_crc = size > 0 && zip_stat_index(ck->za, (zip_uint64_t) i, 0, &zs) == 0 && (zs.valid & ZIP_STAT_CRC) &&
                       zs.crc == 0;
    zip_file_t * f = zip_fopen_index(ck->za, (zip_uint64_t) i, 0);
    if (!f)
        return nf__err_set(err, NF_ERR_FORMAT, "%s: cannot open entry '%s': %s", ck->path, nm, zip_strerror(ck->za));
    uint64_t got = 0;
    int rc = NF_OK;
    while (got < size) {
        const zip_int64_t r = zip_fread(f, (char *) dst + got, size - got);
        if (r < 0) {
            rc = nf__err_set(err, NF_ERR_FORMAT, "%s: entry '%s': %s", ck->path, nm, zip_file_strerror(f));
            break;
        }
        if (r == 0) {
            rc = nf__err_set(err, NF_ERR_FORMAT, "%s: entry '%s' ends after %llu of %llu bytes (truncated?)", ck->path,
                             nm, (unsigned long long) got, (unsigned long long) size);
            break;
        }
        got += (uint64_t) r;
    }
    if (rc == NF_OK && !no_crc) {
        char extra;
        const zip_int64_t r = zip_fread(f, &extra, 1);
        if (r < 0)
            rc = nf__err_set(err, NF_ERR_FORMAT, "%s: entry '%s': %s", ck->path, nm, zip_file_strerror(f));
        else if (r > 0)
            rc = nf__err_set(err, NF_ERR_FORMAT, "%s: entry '%s' is longer than its declared %llu bytes", ck->path, nm,
                             (unsigned long long) size);
    }
    zip_fclose(f);
    return rc;
}

static int nf__ckpt_init(struct nf_ckpt * ck, nf_err * err) {
    const char * path = ck->path;
    zip_t * za = ck->za;
    const zip_int64_t n = zip_get_num_entries(za, 0);
    if (n <= 0) return nf__err_set(err, NF_ERR_FORMAT, "%s: the zip archive is empty", path);
    if (n > NF_CKPT_MAX_ENTRIES)
        return nf__err_set(err, NF_ERR_FORMAT, "%s: %lld zip entries (at most %d)", path, (long long) n,
                           NF_CKPT_MAX_ENTRIES);
    struct nf__zctx * z = calloc(1, sizeof(*z));
    if (!z) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    z->ck = ck;
    int rc = NF_OK;
    size_t plen = 0;
    int64_t pkl = -1, bo = -1;
    for (zip_int64_t i = 0; i < n && rc == NF_OK; i++) {
        zip_stat_t st;
        const char * nm = zip_get_name(za, (zip_uint64_t) i, ZIP_FL_ENC_RAW);
        if (!nm || zip_stat_index(za, (zip_uint64_t) i, ZIP_FL_ENC_RAW, &st) != 0) {
            rc = nf__err_set(err, NF_ERR_FORMAT, "%s: zip entry %lld: %s", path, (long long) i, zip_strerror(za));
            break;
        }
        const size_t L = strlen(nm);
        if (i == 0) {
            const char * sl = strchr(nm, '/');
            if (!sl || sl == nm) {
                rc = nf__err_set(err, NF_ERR_FORMAT,
                                 "%s: zip entry '%s' is not inside a folder (not a torch.save archive)", path, nm);
                break;
            }
            plen = (size_t) (sl - nm);
            ck->prefix = malloc(plen + 1);
            if (!ck->prefix) {
                rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
                break;
            }
            memcpy(ck->prefix, nm, plen);
            ck->prefix[plen] = '\0';
        }
        if (L == plen + 1 && nm[plen] == '/' && memcmp(nm, ck->prefix, plen) == 0)
            continue; /* "prefix/" (re-zipped files) */
        if (L > 4096 || L <= plen + 1 || memcmp(nm, ck->prefix, plen) != 0 || nm[plen] != '/') {
            rc = nf__err_set(err, NF_ERR_FORMAT, "%s: zip entry '%.200s' is outside the archive's folder '%s/'", path,
                             nm, ck->prefix);
            break;
        }
        if (strstr(nm, "..") || strchr(nm, '\\')) {
            rc = nf__err_set(err, NF_ERR_FORMAT, "%s: zip entry name '%.200s' holds '..' or '\\'", path, nm);
            break;
        }
        const char * rest = nm + plen + 1;
        if (strcmp(rest, "constants.pkl") == 0 || strncmp(rest, "code/", 5) == 0) {
            rc = nf__err_set(
                err, NF_ERR_UNSUPPORTED,
                "%s: a TorchScript archive (torch.jit.save, entry '%s'); nofall reads torch.save state_dicts", path,
                nm);
            break;
        }
        if ((st.valid & ZIP_STAT_ENCRYPTION_METHOD) && st.encryption_method != ZIP_EM_NONE) {
            rc = nf__err_set(err, NF_ERR_FORMAT, "%s: zip entry '%s' is encrypted", path, nm);
            break;
        }
        if (!(st.valid & ZIP_STAT_COMP_METHOD) || !(st.valid & ZIP_STAT_SIZE) || !(st.valid & ZIP_STAT_COMP_SIZE)) {
            rc = nf__err_set(err, NF_ERR_FORMAT, "%s: zip entry '%s': no size or method", path, nm);
            break;
        }
        if (st.comp_size > ck->file_size) {
            rc = nf__err_set(err, NF_ERR_FORMAT, "%s: zip entry '%s' claims %llu bytes, more than the %llu-byte file",
                             path, nm, (unsigned long long) st.comp_size, (unsigned long long) ck->file_size);
            break;
        }
        if (st.comp_method == ZIP_CM_STORE) {
            if (st.comp_size != st.size) {
                rc = nf__err_set(err, NF_ERR_FORMAT, "%s: stored zip entry '%s' has compressed size %llu != size %llu",
                                 path, nm, (unsigned long long) st.comp_size, (unsigned long long) st.size);
                break;
            }
        } else if (st.comp_method == ZIP_CM_DEFLATE) {
            /* deflate expands at most ~1032:1: a larger claim is a lie (and an allocation we refuse) */
            if (st.size / 1032u > st.comp_size + 1) {
                rc = nf__err_set(err, NF_ERR_FORMAT, "%s: deflated zip entry '%s' claims %llu bytes from %llu", path,
                                 nm, (unsigned long long) st.size, (unsigned long long) st.comp_size);
                break;
            }
        } else {
            rc = nf__err_set(err, NF_ERR_UNSUPPORTED,
                             "%s: zip entry '%s' uses compression method %u (stored or deflated only)", path, nm,
                             st.comp_method);
            break;
        }
        const int pr = nf__smap_put(&z->names, nm, L, (int) i);
        if (pr < 0) {
            rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
            break;
        }
        if (pr > 0) {
            rc = nf__err_set(err, NF_ERR_FORMAT, "%s: zip entry '%s' appears twice", path, nm);
            break;
        }
        if (strcmp(rest, "data.pkl") == 0) pkl = i;
        if (strcmp(rest, "byteorder") == 0) bo = i;
    }
    unsigned char * buf = NULL;
    if (rc == NF_OK && pkl < 0)
        rc = nf__err_set(err, NF_ERR_FORMAT, "%s: no '%s/data.pkl' in the archive (not a torch.save checkpoint)", path,
                         ck->prefix);
    if (rc == NF_OK && bo >= 0) {
        zip_stat_t st;
        char v[17] = {0};
        if (zip_stat_index(za, (zip_uint64_t) bo, 0, &st) != 0 || st.size > 16)
            rc = nf__err_set(err, NF_ERR_FORMAT, "%s: bad '%s/byteorder' record", path, ck->prefix);
        else if ((rc = nf__zread(ck, bo, v, st.size, err)) == NF_OK && strcmp(v, "little") != 0 &&
                 strcmp(v, "little\n") != 0) {
            rc = nf__err_set(err, NF_ERR_UNSUPPORTED, "%s: byteorder '%.16s' (nofall reads little-endian checkpoints)",
                             path, v);
        }
    }
    if (rc == NF_OK) {
        zip_stat_t st;
        char where[4300];
        snprintf(where, sizeof(where), "%s: %s/data.pkl", path, ck->prefix);
        if (zip_stat_index(za, (zip_uint64_t) pkl, 0, &st) != 0)
            rc = nf__err_set(err, NF_ERR_FORMAT, "%s: %s", where, zip_strerror(za));
        else if (st.size > NF_CKPT_MAX_PKL)
            rc = nf__err_set(err, NF_ERR_FORMAT, "%s: %llu bytes (at most %u)", where, (unsigned long long) st.size,
                             NF_CKPT_MAX_PKL);
        else if (!(buf = malloc(st.size ? (size_t) st.size : 1)))
            rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
        else if ((rc = nf__zread(ck, pkl, buf, st.size, err)) == NF_OK) {
            rc = nf__ckpt_parse_pickle(buf, (size_t) st.size, where, nf__zrecord, z, ck, err);
        }
    }
    free(buf);
    nf__smap_free(&z->names);
    free(z);
    return rc;
}

static int nf__ckpt_legacy_check(const unsigned char * head, size_t n, const char * path, nf_err * err) {
    static const unsigned char legacy[] = {0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46,
                                           0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19, 0x2e};
    if (n >= 4 && memcmp(head, "PK\3\4", 4) == 0) return NF_OK;
    if (n >= sizeof(legacy) && memcmp(head, legacy, sizeof(legacy)) == 0) {
        return nf__err_set(err, NF_ERR_UNSUPPORTED,
                           "%s: the legacy torch.save format (_use_new_zipfile_serialization=False) is not supported; "
                           "re-save it with a current torch.save",
                           path);
    }
    if (n >= 8 && memcmp(head, "PYTORCH1", 8) == 0)
        return nf__err_set(err, NF_ERR_UNSUPPORTED, "%s: a TorchScript container, not a torch.save checkpoint", path);
    return nf__err_set(err, NF_ERR_FORMAT, "%s: not a torch.save checkpoint (no zip signature at the start)", path);
}

int nf__ckpt_open(const char * path, struct nf_ckpt * ck, nf_err * err) {
    memset(ck, 0, sizeof(*ck));
    /* a regular file only (a FIFO or a directory is refused, never waited on) */
    int fd = -1;
    uint64_t fsize = 0;
    NF_TRY(nf__open_regular(path, &fd, &fsize, err));
    unsigned char head[16];
    const ssize_t hr = read(fd, head, sizeof(head));
    const size_t hn = hr > 0 ? (size_t) hr : 0;
    ck->file_size = fsize;
    int rc = nf__ckpt_legacy_check(head, hn, path, err);
    if (rc == NF_OK && lseek(fd, 0, SEEK_SET) != 0)
        rc = nf__err_set(err, NF_ERR_IO, "%s: cannot seek: %s", path, strerror(errno));
    if (rc == NF_OK && !(ck->path = strdup(path))) rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    if (rc != NF_OK) {
        close(fd);
        return rc;
    }
    int zerr = 0;
    ck->za = zip_fdopen(fd, ZIP_RDONLY | ZIP_CHECKCONS, &zerr); /* owns fd from here on */
    if (!ck->za) close(fd);
    if (!ck->za) {
        zip_error_t ze;
        zip_error_init_with_code(&ze, zerr);
        rc = nf__err_set(err, zerr == ZIP_ER_OPEN || zerr == ZIP_ER_READ ? NF_ERR_IO : NF_ERR_FORMAT,
                         "%s: not a readable zip archive: %s", path, zip_error_strerror(&ze));
        zip_error_fini(&ze);
        nf__ckpt_close(ck);
        return rc;
    }
    rc = nf__ckpt_init(ck, err);
    if (rc != NF_OK) nf__ckpt_close(ck);
    return rc;
}

int nf__ckpt_open_mem(const void * buf, size_t len, const char * name, struct nf_ckpt * ck, nf_err * err) {
    memset(ck, 0, sizeof(*ck));
    NF_TRY(nf__ckpt_legacy_check(buf, len, name, err));
    ck->file_size = len;
    ck->path = strdup(name);
    if (!ck->path) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    zip_error_t ze;
    zip_error_init(&ze);
    zip_source_t * src = zip_source_buffer_create(buf, len, 0, &ze);
    if (src) {
        ck->src = src;
        ck->za = zip_open_from_source(src, ZIP_RDONLY | ZIP_CHECKCONS, &ze);
    }
    if (!ck->za) {
        int rc = nf__err_set(err, NF_ERR_FORMAT, "%s: not a readable zip archive: %s", name, zip_error_strerror(&ze));
        zip_error_fini(&ze);
        nf__ckpt_close(ck);
        return rc;
    }
    zip_error_fini(&ze);
    int rc = nf__ckpt_init(ck, err);
    if (rc != NF_OK) nf__ckpt_close(ck);
    return rc;
}

int nf__ckpt_read_storage(const struct nf_ckpt * ck, int i, void * dst, nf_err * err) {
    if (i < 0 || i >= ck->n_storages || ck->storages[i].entry < 0)
        return nf__err_set(err, NF_ERR_ARG, "%s: no storage %d", ck->path, i);
    const struct nf_ckpt_storage * s = &ck->storages[i];
    return nf__zread(ck, s->entry, dst, s->numel * s->elsize, err); /* == the record size (checked) */
}

int nf__ckpt_to_st(struct nf_ckpt * ck, struct nf_safetensors * st, nf_err * err) {
    memset(st, 0, sizeof(*st));
    /* the storages the selected tensors use, each once, 64-byte aligned */
    uint64_t * at = malloc((size_t) (ck->n_storages ? ck->n_storages : 1) * sizeof(uint64_t));
    if (!at) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    for (int i = 0; i < ck->n_storages; i++) at[i] = UINT64_MAX;
    uint64_t total = 0;
    int rc = NF_OK;
    for (int t = 0; t < ck->n_tensors; t++) {
        const int s = ck->tensors[t].storage;
        if (at[s] != UINT64_MAX) continue;
        at[s] = total;
        const uint64_t nb = ck->storages[s].numel * ck->storages[s].elsize;
        if (__builtin_add_overflow(total, nb + 63, &total) || total > (uint64_t) SIZE_MAX / 2) {
            rc = nf__err_set(err, NF_ERR_FORMAT, "%s: storages too large", ck->path);
            break;
        }
        total &= ~(uint64_t) 63;
    }
    if (rc == NF_OK) {
        st->path = strdup(ck->path);
        st->tensors = calloc((size_t) (ck->n_tensors ? ck->n_tensors : 1), sizeof(*st->tensors));
        st->heap = malloc(total ? (size_t) total : 1);
        if (!st->path || !st->tensors || !st->heap)
            rc = nf__err_set(err, NF_ERR_NOMEM, "%s: out of memory (%llu bytes of tensors)", ck->path,
                             (unsigned long long) total);
    }
    for (int s = 0; s < ck->n_storages && rc == NF_OK; s++) {
        if (at[s] != UINT64_MAX) rc = nf__ckpt_read_storage(ck, s, (char *) st->heap + at[s], err);
    }
    for (int t = 0; t < ck->n_tensors && rc == NF_OK; t++) {
        const struct nf_ckpt_tensor * c = &ck->tensors[t];
        struct nf_st_tensor * o = &st->tensors[st->n_tensors];
        o->name = strdup(c->name);
        if (!o->name) {
            rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
            break;
        }
        st->n_tensors++;
        o->dtype = c->dtype;
        snprintf(o->dtype_str, sizeof(o->dtype_str), "%s", nf__st_dtype_str(c->dtype));
        o->ndim = c->ndim;
        for (int d = 0; d < c->ndim; d++) o->shape[d] = c->shape[d];
        const size_t es = ck->storages[c->storage].elsize;
        /* inside the storage: offset + numel <= storage numel (contiguous, checked) */
        o->begin = at[c->storage] + (c->numel ? c->offset * es : 0);
        o->end = o->begin + c->numel * es;
    }
    free(at);
    if (rc == NF_OK) {
        st->data = st->heap;
        st->data_size = total;
    } else {
        nf__st_close(st);
    }
    return rc;
}

int nf__ckpt_load(const char * path, struct nf_safetensors * st, nf_err * err) {
    struct nf_ckpt ck;
    memset(st, 0, sizeof(*st));
    NF_TRY(nf__ckpt_open(path, &ck, err));
    const int rc = nf__ckpt_to_st(&ck, st, err);
    nf__ckpt_close(&ck);
    return rc;
}

int nf__tensors_open(const char * path, struct nf_safetensors * st, nf_err * err) {
    memset(st, 0, sizeof(*st));
    int fd = -1;
    uint64_t size = 0;
    NF_TRY(nf__open_regular(path, &fd, &size, err)); /* never blocks on a FIFO */
    unsigned char head[4] = {0};
    const ssize_t n = read(fd, head, sizeof(head));
    close(fd);
    if (n == 4 && memcmp(head, "PK\3\4", 4) == 0) return nf__ckpt_load(path, st, err);
    return nf__st_open(path, st, err);
}

int nf__ckpt_to_safetensors(const char * ckpt_path, const char * out_path, int * n_out, nf_err * err) {
    struct nf_safetensors st;
    NF_TRY(nf__ckpt_load(ckpt_path, &st, err));
    const int rc = nf__st_write_view(out_path, &st, err);
    if (rc == NF_OK && n_out) *n_out = st.n_tensors;
    nf__st_close(&st);
    return rc;
}
