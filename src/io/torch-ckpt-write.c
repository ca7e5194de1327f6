/* torch-ckpt-write.c -- a torch.save checkpoint writer: the file that
 * torch.save(obj, path) writes for obj = {wrap: OrderedDict(name -> tensor)}
 * (or the bare OrderedDict), laid out as torch 2.x lays it out. Spec:
 * shared/specs/torch-checkpoint.md (§2.2 the zip, §3.1 the pickler's
 * choices, §3.5 a tensor's opcodes, §4.1 the persistent id).
 *
 * data.pkl is the protocol-2 pickle CPython's pickler emits for that object,
 * byte for byte: ints as BININT1 / BININT2 / BININT / LONG1, every str a
 * fresh BINUNICODE + BINPUT except 'storage' and 'cpu' (one object each in
 * torch, fetched with BINGET when seen again), every GLOBAL memoized on first
 * use, tuples of 1-3 items as TUPLE1-3 and longer ones as MARK ... TUPLE (the
 * empty tuple not memoized), the OrderedDict as GLOBAL + () + REDUCE with its
 * items in SETITEMS batches of 1000 (a batch of one: SETITEM), no BUILD (a
 * plain OrderedDict has no _metadata attribute); each tensor
 *     _rebuild_tensor_v2(pid, 0, size, stride, False, OrderedDict())
 * with pid ('storage', torch.<X>Storage, key, 'cpu', numel) + BINPERSID,
 * storage keys "0", "1", ... in order, one storage per tensor, contiguous.
 *
 * The zip: entries <prefix>/data.pkl, .format_version ("1"),
 * .storage_alignment ("64"), byteorder ("little"), data/<key>..., version
 * ("3\n"), .data/serialization_id, in that order (torch 2.x's), all stored;
 * <prefix> is the file's basename without its last extension, as torch
 * names it. Each entry's data starts at a multiple of 64 bytes: the local
 * header carries torch's padding extra field (id 0x4246 "FB", 'Z' bytes).
 * The zip framing itself is libzip's (CRC and sizes in the local header, no
 * data descriptors, entry time 1980-01-01 00:00) where torch's miniz writes
 * zeros there and a data descriptor after each entry; readers (torch's, this
 * project's) take sizes and CRCs from the central directory either way.
 * .data/serialization_id is computed as torch computes it (no reader uses
 * it): 20 digits of c10::hash_combine over std::hash of the record names,
 * in the iteration order of the libstdc++ unordered_set torch keeps them in
 * (reproduced below), then 20 digits of hash_combine over the CRC-32s of
 * the non-empty records in write order (checked against genuine torch 2.13
 * files in tests/test-ckpt.c, and by reference/make_ckpt_fixtures.py resave).
 *
 * Written to a fresh temporary name beside path (libzip), synced, renamed
 * over path; any failure leaves path untouched and returns an error code. */
#include "nf-io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zip.h>

#define NF_CKPT_ALIGN 64 /* torch's kFieldAlignment / .storage_alignment */

/* ---- the pickle --------------------------------------------------------------------------- */

struct nf__pkw {
    unsigned char * b;
    size_t n, cap;
    uint32_t memo; /* the next memo index */
    int oom;
};

static void nf__pw_raw(struct nf__pkw * w, const void * p, size_t n) {
    if (w->oom || n == 0) return;
    if (n > w->cap - w->n) {
        size_t c = w->cap ? w->cap : 4096;
        while (c - w->n < n) {
            if (c > SIZE_MAX / 2) {
                w->oom = 1;
                return;
            }
            c *= 2;
        }
        unsigned char * nb = realloc(w->b, c);
        if (!nb) {
            w->oom = 1;
            return;
        }
        w->b = nb;
        w->cap = c;
    }
    memcpy(w->b + w->n, p, n);
    w->n += n;
}

static void nf__pw_op(struct nf__pkw * w, unsigned op) {
    const unsigned char c = (unsigned char) op;
    nf__pw_raw(w, &c, 1);
}

static void nf__pw_u32(struct nf__pkw * w, uint32_t v) {
    const unsigned char b[4] = {(unsigned char) v, (unsigned char) (v >> 8), (unsigned char) (v >> 16),
                                (unsigned char) (v >> 24)};
    nf__pw_raw(w, b, 4);
}

/* memoize the top of the stack: BINPUT below 256, else LONG_BINPUT */
static uint32_t nf__pw_put(struct nf__pkw * w) {
    if (w->memo < 256) {
        nf__pw_op(w, 'q');
        nf__pw_op(w, w->memo);
    } else {
        nf__pw_op(w, 'r');
        nf__pw_u32(w, w->memo);
    }
    return w->memo++;
}

static void nf__pw_get(struct nf__pkw * w, uint32_t i) {
    if (i < 256) {
        nf__pw_op(w, 'h');
        nf__pw_op(w, i);
    } else {
        nf__pw_op(w, 'j');
        nf__pw_u32(w, i);
    }
}

/* CPython's save_long at protocol 2 */
static void nf__pw_int(struct nf__pkw * w, int64_t v) {
    if (v >= 0 && v <= 0xff) {
        nf__pw_op(w, 'K');
        nf__pw_op(w, (unsigned) v);
    } else if (v >= 0 && v <= 0xffff) {
        nf__pw_op(w, 'M');
        nf__pw_op(w, (unsigned) (v & 0xff));
        nf__pw_op(w, (unsigned) (v >> 8));
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
        nf__pw_op(w, 'J');
        nf__pw_u32(w, (uint32_t) (int32_t) v);
    } else { /* LONG1: the shortest little-endian two's complement */
        int n = 1;
        while (n < 8) {
            const int64_t lim = (int64_t) 1 << (8 * n - 1);
            if (v >= -lim && v < lim) break;
            n++;
        }
        unsigned char b[8];
        for (int i = 0; i < n; i++) b[i] = (unsigned char) ((uint64_t) v >> (8 * i));
        nf__pw_op(w, 0x8a);
        nf__pw_op(w, (unsigned) n);
        nf__pw_raw(w, b, (size_t) n);
    }
}

/* a str object: BINUNICODE + BINPUT; its memo index */
static uint32_t nf__pw_str(struct nf__pkw * w, const char * s) {
    const size_t n = strlen(s);
    nf__pw_op(w, 'X');
    nf__pw_u32(w, (uint32_t) n);
    nf__pw_raw(w, s, n);
    return nf__pw_put(w);
}

/* a memoized object (a GLOBAL, or a str torch holds once): emitted the first
 * time (*idx < 0), fetched after */
static void nf__pw_once(struct nf__pkw * w, int64_t * idx, const char * mod, const char * name) {
    if (*idx >= 0) {
        nf__pw_get(w, (uint32_t) *idx);
        return;
    }
    if (mod) {
        nf__pw_op(w, 'c');
        nf__pw_raw(w, mod, strlen(mod));
        nf__pw_op(w, '\n');
        nf__pw_raw(w, name, strlen(name));
        nf__pw_op(w, '\n');
        *idx = nf__pw_put(w);
    } else
        *idx = nf__pw_str(w, name);
}

/* a tuple of ints (a size or a stride) */
static void nf__pw_tuple(struct nf__pkw * w, int n, const int64_t * v) {
    if (n == 0) {
        nf__pw_op(w, ')');
        return;
    }
    if (n > 3) nf__pw_op(w, '(');
    for (int i = 0; i < n; i++) nf__pw_int(w, v[i]);
    nf__pw_op(w, n > 3 ? 't' : 0x84u + (unsigned) n);
    nf__pw_put(w);
}

static const char * nf__storage_class(enum nf_st_dtype t) {
    switch (t) {
        case NF_ST_F32: return "FloatStorage";
        case NF_ST_F16: return "HalfStorage";
        case NF_ST_BF16: return "BFloat16Storage";
        case NF_ST_F64: return "DoubleStorage";
        case NF_ST_I64: return "LongStorage";
        case NF_ST_I32: return "IntStorage";
        case NF_ST_I16: return "ShortStorage";
        case NF_ST_I8: return "CharStorage";
        case NF_ST_U8: return "ByteStorage";
        case NF_ST_BOOL: return "BoolStorage";
        default: return NULL;
    }
}

struct nf__pmemo {
    int64_t od, rebuild, s_storage, s_cpu, cls[NF_ST_OTHER];
};

static void nf__pw_tensor(struct nf__pkw * w, struct nf__pmemo * mm, const struct nf_st_entry * e, const char * key,
                          int64_t numel) {
    int64_t stride[NF_ST_MAX_DIMS];
    int64_t acc = 1;
    for (int d = e->ndim - 1; d >= 0; d--) {
        stride[d] = acc;
        acc *= e->shape[d];
    }
    nf__pw_once(w, &mm->rebuild, "torch._utils", "_rebuild_tensor_v2");
    nf__pw_op(w, '(');
    nf__pw_op(w, '('); /* the persistent id */
    nf__pw_once(w, &mm->s_storage, NULL, "storage");
    nf__pw_once(w, &mm->cls[e->dtype], "torch", nf__storage_class(e->dtype));
    nf__pw_str(w, key);
    nf__pw_once(w, &mm->s_cpu, NULL, "cpu");
    nf__pw_int(w, numel);
    nf__pw_op(w, 't');
    nf__pw_put(w);
    nf__pw_op(w, 'Q'); /* BINPERSID */
    nf__pw_int(w, 0);  /* storage_offset */
    nf__pw_tuple(w, e->ndim, e->shape);
    nf__pw_tuple(w, e->ndim, stride);
    nf__pw_op(w, 0x89); /* requires_grad False */
    nf__pw_once(w, &mm->od, "collections", "OrderedDict");
    nf__pw_op(w, ')'); /* backward_hooks = OrderedDict() */
    nf__pw_op(w, 'R');
    nf__pw_put(w);
    nf__pw_op(w, 't');
    nf__pw_put(w);
    nf__pw_op(w, 'R');
    nf__pw_put(w);
}

/* ---- hashes: CRC-32 (zip), torch's serialization id ------------------------------------------- */

static void nf__crc_table(uint32_t t[256]) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        t[i] = c;
    }
}

static uint32_t nf__crc32(const uint32_t t[256], const void * p, size_t n) {
    const unsigned char * b = p;
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) c = t[(c ^ b[i]) & 0xff] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

/* std::hash<std::string> of libstdc++ (64-bit): _Hash_bytes, seed 0xc70f6907 */
static uint64_t nf__hash_bytes(const void * p, size_t len) {
    const uint64_t mul = ((uint64_t) 0xc6a4a793u << 32) + 0x5bd1e995u;
    const unsigned char * b = p;
    uint64_t h = 0xc70f6907u ^ ((uint64_t) len * mul);
    const size_t aligned = len & ~(size_t) 7;
    for (size_t i = 0; i < aligned; i += 8) {
        uint64_t d = 0;
        for (int k = 7; k >= 0; k--) d = (d << 8) | b[i + (size_t) k];
        d *= mul;
        d ^= d >> 47;
        d *= mul;
        h ^= d;
        h *= mul;
    }
    if (len & 7) {
        uint64_t d = 0;
        for (size_t k = len; k > aligned; k--) d = (d << 8) | b[k - 1];
        h ^= d;
        h *= mul;
    }
    h ^= h >> 47;
    h *= mul;
    h ^= h >> 47;
    return h;
}

/* c10::hash_combine */
static uint64_t nf__hash_combine(uint64_t seed, uint64_t v) {
    return seed ^ (v + 0x9e3779b9u + (seed << 6) + (seed >> 2));
}

/* The order in which a libstdc++ std::unordered_set<std::string> (torch's
 * PyTorchStreamWriter::files_written_) holding h[0..n) (the names' hashes,
 * inserted in that order) iterates: order[0..n). Its singly linked list with
 * per-bucket "node before the bucket's first" pointers, exactly: a node of
 * a new bucket goes to the front of the list, one of an occupied bucket to
 * the front of that bucket's run; the table rehashes before the insertion
 * that would exceed one node per bucket, to the bucket counts below (the
 * prime rehash policy, growth factor 2, starting at 13), relinking the old
 * list front to back by the same two rules. 0 on out of memory. */
static int nf__uset_order(const uint64_t * h, int n, int * order) {
    static const int64_t grow[] = {13,    29,    59,    127,   257,    541,    1109,   2357,   5087,
                                   10273, 20753, 42043, 85229, 172933, 351061, 712697, 1447153};
    const int ng = (int) (sizeof(grow) / sizeof(grow[0]));
    if (n <= 0) return 1;
    if (n > grow[ng - 1]) return 0;
    int * nx = malloc(((size_t) n + 1) * sizeof(int)); /* node n: the list head (before begin) */
    int * bk = malloc((size_t) grow[ng - 1] * sizeof(int));
    int * nbk = malloc((size_t) grow[ng - 1] * sizeof(int));
    if (!nx || !bk || !nbk) {
        free(nx);
        free(bk);
        free(nbk);
        return 0;
    }
    const int BB = n;
    int64_t nb = 1;
    int g = 0;
    nx[BB] = -1;
    bk[0] = -1;
    for (int x = 0; x < n; x++) {
        if (x + 1 > nb) { /* rehash to the next size */
            const int64_t m = grow[g++];
            for (int64_t b = 0; b < m; b++) nbk[b] = -1;
            int p = nx[BB], bbegin = 0;
            nx[BB] = -1;
            while (p != -1) {
                const int next = nx[p];
                const int b = (int) (h[p] % (uint64_t) m);
                if (nbk[b] == -1) {
                    nx[p] = nx[BB];
                    nx[BB] = p;
                    nbk[b] = BB;
                    if (nx[p] != -1) nbk[bbegin] = p;
                    bbegin = b;
                } else {
                    nx[p] = nx[nbk[b]];
                    nx[nbk[b]] = p;
                }
                p = next;
            }
            memcpy(bk, nbk, (size_t) m * sizeof(int));
            nb = m;
        }
        const int b = (int) (h[x] % (uint64_t) nb);
        if (bk[b] != -1) {
            nx[x] = nx[bk[b]];
            nx[bk[b]] = x;
        } else {
            nx[x] = nx[BB];
            nx[BB] = x;
            if (nx[x] != -1) bk[h[nx[x]] % (uint64_t) nb] = x;
            bk[b] = BB;
        }
    }
    int k = 0;
    for (int p = nx[BB]; p != -1 && k < n; p = nx[p]) order[k++] = p;
    free(nx);
    free(bk);
    free(nbk);
    return k == n;
}

int nf__ckpt_serialization_id(const char * const * names, const uint32_t * crcs, const uint64_t * sizes, int n,
                              char out[41], nf_err * err) {
    uint64_t hn = 0, hc = 0;
    uint64_t * nh = malloc((size_t) (n > 0 ? n : 1) * sizeof(*nh));
    int * order = malloc((size_t) (n > 0 ? n : 1) * sizeof(*order));
    int ok = nh && order;
    for (int i = 0; ok && i < n; i++) {
        nh[i] = nf__hash_bytes(names[i], strlen(names[i]));
        if (sizes[i] > 0) hc = nf__hash_combine(hc, crcs[i]); /* torch's running CRC skips empty records */
    }
    ok = ok && nf__uset_order(nh, n, order);
    for (int i = 0; ok && i < n; i++) hn = nf__hash_combine(hn, nh[order[i]]);
    free(nh);
    free(order);
    if (!ok) return nf__err_set(err, NF_ERR_NOMEM, "out of memory for the serialization id");
    snprintf(out, 41, "%020llu%020llu", (unsigned long long) hn, (unsigned long long) hc);
    return NF_OK;
}

/* ---- the writer ------------------------------------------------------------------------------- */

struct nf__rec {
    const char * name; /* without the prefix */
    const void * data;
    size_t len;
};

int nf__ckpt_write(const char * path, const struct nf_st_entry * entries, int n, const char * wrap, nf_err * err) {
    char e1[512], e2[512];
    if (!path || n < 0 || n > NF_CKPT_MAX_ENTRIES - 8 || (n > 0 && !entries))
        return nf__err_set(err, NF_ERR_ARG, "nf__ckpt_write: bad arguments");
    /* the archive's folder: the basename without its last extension (torch's rule) */
    const char * base = path;
    for (const char * c = path; *c; c++)
        if (*c == '/' || *c == '\\') base = c + 1;
    const char * dot = strrchr(base, '.');
    const size_t plen = dot ? (size_t) (dot - base) : strlen(base);
    if (plen == 0 || plen > 1024)
        return nf__err_set(err, NF_ERR_ARG,
                           "%s: the file name gives no archive name (torch uses the basename up to its "
                           "last '.')",
                           nf__esc(e1, sizeof(e1), path));
    char prefix[1025];
    memcpy(prefix, base, plen);
    prefix[plen] = '\0';
    if (!nf__utf8_valid(prefix, plen))
        return nf__err_set(err, NF_ERR_ARG, "%s: the archive name is not UTF-8", nf__esc(e1, sizeof(e1), path));
    if (wrap && (!*wrap || !nf__utf8_valid(wrap, strlen(wrap))))
        return nf__err_set(err, NF_ERR_ARG, "nf__ckpt_write: the wrapping key must be a non-empty UTF-8 string");

    /* the entries: known dtypes, sane shapes, UTF-8 names, each once */
    int64_t * numel = calloc((size_t) (n ? n : 1), sizeof(*numel));
    if (!numel) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    struct nf__smap seen = {0};
    int rc = NF_OK;
    for (int i = 0; i < n && rc == NF_OK; i++) {
        const struct nf_st_entry * e = &entries[i];
        const char * nm = e->name ? e->name : "";
        if (!e->name || !nf__utf8_valid(e->name, strlen(e->name))) {
            rc = nf__err_set(err, NF_ERR_ARG, "tensor %d: the name '%s' is not a UTF-8 string", i,
                             nf__esc(e1, sizeof(e1), nm));
            break;
        }
        if (!nf__storage_class(e->dtype)) {
            rc = nf__err_set(err, NF_ERR_ARG, "%s: dtype %s has no torch storage class", nf__esc(e1, sizeof(e1), nm),
                             nf__st_dtype_str(e->dtype));
            break;
        }
        if (e->ndim < 0 || e->ndim > NF_ST_MAX_DIMS) {
            rc = nf__err_set(err, NF_ERR_ARG, "%s: %d dimensions", nf__esc(e1, sizeof(e1), nm), e->ndim);
            break;
        }
        uint64_t ne = 1;
        for (int d = 0; d < e->ndim && rc == NF_OK; d++) {
            if (e->shape[d] < 0 || (e->shape[d] > 0 && ne > ((uint64_t) 1 << 62) / (uint64_t) e->shape[d]))
                rc = nf__err_set(err, NF_ERR_ARG, "%s: bad shape", nf__esc(e1, sizeof(e1), nm));
            else
                ne *= (uint64_t) e->shape[d];
        }
        if (rc != NF_OK) break;
        if (ne > SIZE_MAX / 8 / nf__st_dtype_size(e->dtype)) {
            rc = nf__err_set(err, NF_ERR_ARG, "%s: too large", nf__esc(e1, sizeof(e1), nm));
            break;
        }
        if (ne > 0 && !e->data) {
            rc = nf__err_set(err, NF_ERR_ARG, "%s: no data", nf__esc(e1, sizeof(e1), nm));
            break;
        }
        numel[i] = (int64_t) ne;
        const int put = nf__smap_put(&seen, e->name, strlen(e->name), i);
        if (put < 0)
            rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
        else if (put == 1)
            rc = nf__err_set(err, NF_ERR_ARG, "'%s' twice (an OrderedDict has each key once)",
                             nf__esc(e1, sizeof(e1), e->name));
    }
    nf__smap_free(&seen);
    if (rc != NF_OK) {
        free(numel);
        return rc;
    }

    /* data.pkl */
    struct nf__pkw w = {0};
    struct nf__pmemo mm;
    mm.od = mm.rebuild = mm.s_storage = mm.s_cpu = -1;
    for (int t = 0; t < NF_ST_OTHER; t++) mm.cls[t] = -1;
    char key[16];
    nf__pw_op(&w, 0x80); /* PROTO 2 */
    nf__pw_op(&w, 2);
    if (wrap) {
        nf__pw_op(&w, '}');
        nf__pw_put(&w);
        nf__pw_str(&w, wrap);
    }
    nf__pw_once(&w, &mm.od, "collections", "OrderedDict");
    nf__pw_op(&w, ')');
    nf__pw_op(&w, 'R');
    nf__pw_put(&w);
    for (int i0 = 0; i0 < n; i0 += 1000) {
        const int i1 = n - i0 > 1000 ? i0 + 1000 : n;
        if (i1 - i0 > 1) nf__pw_op(&w, '(');
        for (int i = i0; i < i1; i++) {
            snprintf(key, sizeof(key), "%d", i);
            nf__pw_str(&w, entries[i].name);
            nf__pw_tensor(&w, &mm, &entries[i], key, numel[i]);
        }
        nf__pw_op(&w, i1 - i0 > 1 ? 'u' : 's');
    }
    if (wrap) nf__pw_op(&w, 's');
    nf__pw_op(&w, '.');
    if (w.oom) {
        free(w.b);
        free(numel);
        return nf__err_set(err, NF_ERR_NOMEM, "out of memory for data.pkl");
    }
    if (w.n > NF_CKPT_MAX_PKL) {
        free(w.b);
        free(numel);
        return nf__err_set(err, NF_ERR_ARG, "%s: data.pkl would be %zu bytes, over the reader's cap of %u",
                           nf__esc(e1, sizeof(e1), path), w.n, (unsigned) NF_CKPT_MAX_PKL);
    }

    /* the records, in torch 2.x's order */
    const int nr = n + 7;
    struct nf__rec * r = calloc((size_t) nr, sizeof(*r));
    char(*dnames)[24] = calloc((size_t) (n ? n : 1), sizeof(*dnames)); /* "data/<key>" */
    char sid[48];
    if (!r || !dnames) {
        free(r);
        free(dnames);
        free(w.b);
        free(numel);
        return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    }
    int k = 0;
    r[k++] = (struct nf__rec){"data.pkl", w.b, w.n};
    r[k++] = (struct nf__rec){".format_version", "1", 1};
    r[k++] = (struct nf__rec){".storage_alignment", "64", 2};
    r[k++] = (struct nf__rec){"byteorder", "little", 6};
    for (int i = 0; i < n; i++) {
        snprintf(dnames[i], sizeof(dnames[i]), "data/%d", i);
        r[k++] = (struct nf__rec){dnames[i], entries[i].data, (size_t) numel[i] * nf__st_dtype_size(entries[i].dtype)};
    }
    {
        r[k++] = (struct nf__rec){"version", "3\n", 2};
        uint32_t tab[256];
        nf__crc_table(tab);
        const char ** names = malloc((size_t) k * sizeof(*names));
        uint32_t * crc = malloc((size_t) k * sizeof(*crc));
        uint64_t * sizes = malloc((size_t) k * sizeof(*sizes));
        if (names && crc && sizes) {
            for (int i = 0; i < k; i++) {
                names[i] = r[i].name;
                crc[i] = nf__crc32(tab, r[i].data, r[i].len);
                sizes[i] = r[i].len;
            }
            rc = nf__ckpt_serialization_id(names, crc, sizes, k, sid, err);
        } else
            rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
        free(names);
        free(crc);
        free(sizes);
        r[k++] = (struct nf__rec){".data/serialization_id", sid, 40};
    }

    /* the zip, to a temporary name */
    char tmp[4096];
    int fd = -1, tmp_made = 0;
    zip_t * za = NULL;
    if (rc == NF_OK) rc = nf__tmp_create(path, tmp, sizeof(tmp), &fd, err);
    if (rc == NF_OK) {
        tmp_made = 1;
        close(fd);
        int ze = 0;
        za = zip_open(tmp, ZIP_CREATE | ZIP_TRUNCATE, &ze);
        if (!za) {
            zip_error_t zerr;
            zip_error_init_with_code(&zerr, ze);
            rc = nf__err_set(err, NF_ERR_IO, "%s: cannot create the zip: %s", nf__esc(e1, sizeof(e1), tmp),
                             nf__esc(e2, sizeof(e2), zip_error_strerror(&zerr)));
            zip_error_fini(&zerr);
        }
    }
    uint64_t cursor = 0;
    unsigned char zs[NF_CKPT_ALIGN];
    memset(zs, 'Z', sizeof(zs));
    for (int i = 0; rc == NF_OK && i < k; i++) {
        char full[1100 + 32];
        snprintf(full, sizeof(full), "%s/%s", prefix, r[i].name);
        const size_t fl = strlen(full);
        /* the local header: 30 bytes, the name, the 4-byte "FB" field header, the padding */
        const uint64_t start = cursor + 30 + fl + 4;
        const size_t pad = (size_t) ((NF_CKPT_ALIGN - start % NF_CKPT_ALIGN) % NF_CKPT_ALIGN);
        zip_source_t * s = zip_source_buffer(za, r[i].data, r[i].len, 0);
        const zip_int64_t idx = s ? zip_file_add(za, full, s, ZIP_FL_ENC_UTF_8) : -1;
        if (idx < 0) {
            if (s) zip_source_free(s);
        }
        if (idx < 0 || zip_set_file_compression(za, (zip_uint64_t) idx, ZIP_CM_STORE, 0) != 0 ||
            zip_file_set_dostime(za, (zip_uint64_t) idx, 0, (1 << 5) | 1, 0) != 0 ||
            zip_file_extra_field_set(za, (zip_uint64_t) idx, 0x4246, ZIP_EXTRA_FIELD_NEW, zs, (zip_uint16_t) pad,
                                     ZIP_FL_LOCAL) != 0) {
            rc = nf__err_set(err, NF_ERR_IO, "%s: cannot add %s: %s", nf__esc(e1, sizeof(e1), tmp),
                             nf__esc(e2, sizeof(e2), full), zip_strerror(za));
            break;
        }
        cursor = start + pad + r[i].len;
    }
    if (za) {
        if (rc == NF_OK) {
            if (zip_close(za) != 0) {
                rc = nf__err_set(err, NF_ERR_IO, "%s: writing the zip failed: %s", nf__esc(e1, sizeof(e1), tmp),
                                 nf__esc(e2, sizeof(e2), zip_strerror(za)));
                zip_discard(za);
            }
        } else
            zip_discard(za);
    }
    if (rc == NF_OK) { /* the data on disk before the name */
        const int sfd = open(tmp, O_RDONLY | O_CLOEXEC);
        const int ok = sfd >= 0 && fsync(sfd) == 0;
        const int en = errno;
        if (sfd >= 0) close(sfd);
        if (!ok) rc = nf__err_set(err, NF_ERR_IO, "%s: sync failed: %s", nf__esc(e1, sizeof(e1), tmp), strerror(en));
    }
    if (rc == NF_OK && rename(tmp, path) != 0)
        rc = nf__err_set(err, NF_ERR_IO, "%s: rename failed: %s", nf__esc(e1, sizeof(e1), path), strerror(errno));
    if (rc != NF_OK && tmp_made) remove(tmp);
    free(dnames);
    free(r);
    free(w.b);
    free(numel);
    return rc;
}
