/* torch-pickle.c -- the restricted unpickler of the PyTorch checkpoint reader
 * (torch-ckpt.c reads the zip around it), executing nothing. Spec:
 * shared/specs/torch-checkpoint.md.
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
#include "torch-pickle-impl.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

const char * const nf__kind_names[] = {"None",  "bool", "int",  "float",  "str",     "bytes",
                                       "tuple", "list", "dict", "global", "storage", "tensor"};

int nf__pk_err(struct nf__pk * k, int code, const char * fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return nf__err_set(k->err, code, "%s+0x%zx: %s", k->where, k->op_at, msg);
}

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

int nf__pk_is_str(const struct nf__pk * k, uint32_t h, const char * s) {
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
    if (pn->kind != NF__TUPLE || pn->n != 5 || !nf__pk_is_str(k, nf__at(k, pid, 0), "storage")) {
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
            if (s == NF__NIL || k->nodes[s].kind != NF__STR || !nf__pk_is_str(k, nf__at(k, args, 1), "latin1")) {
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
    if (s->kind != NF__DICT || s->n != 1 || !nf__pk_is_str(k, k->items[s->u.c.head].key, "_metadata") ||
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

int nf__pk_run(struct nf__pk * k) {
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
