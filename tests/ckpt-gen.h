/* ckpt-gen.h -- test helper: writes torch.save-style checkpoints without torch.
 *
 * A protocol-2 pickle emitted byte by byte, making the choices CPython's
 * pickler makes for what torch.save pickles (shared/specs/torch-checkpoint.md
 * §3.1, §3.5): ints as K / M / J / LONG1, str as BINUNICODE + BINPUT, memo
 * indices 0, 1, 2, ... (BINPUT/BINGET below 256, LONG_ below that), strings
 * and globals fetched from the memo when seen again (so the 'storage' / 'cpu'
 * strings and the class globals of later pids are BINGETs), tuples of 1-3
 * items as TUPLEn, OrderedDict as GLOBAL + () + REDUCE, items in SETITEMS
 * batches of 1000, then BUILD {'_metadata': OrderedDict()}; each tensor as
 * _rebuild_tensor_v2(pid, offset, size, stride, False, OrderedDict()) with
 * pid ('storage', torch.<X>Storage, key, 'cpu', numel) + BINPERSID. The zip:
 * stored entries <prefix>/data.pkl, <prefix>/data/<key>, <prefix>/version,
 * written with libzip. */
#ifndef NF_CKPT_GEN_H
#define NF_CKPT_GEN_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zip.h>

struct pkw {
    unsigned char * b;
    size_t n, cap;
    uint32_t memo;
    /* memoized strings / globals: text -> memo index */
    char (*seen)[96];
    uint32_t * seen_idx;
    int n_seen, cap_seen;
};

static inline void pkw_free(struct pkw * w) {
    free(w->b);
    free(w->seen);
    free(w->seen_idx);
    memset(w, 0, sizeof(*w));
}

static inline void pk_raw(struct pkw * w, const void * p, size_t n) {
    if (w->n + n > w->cap) {
        size_t c = w->cap ? w->cap : 256;
        while (c < w->n + n) c *= 2;
        w->b = realloc(w->b, c);
        w->cap = c;
    }
    memcpy(w->b + w->n, p, n);
    w->n += n;
}
static inline void pk_op(struct pkw * w, unsigned c) {
    unsigned char b = (unsigned char) c;
    pk_raw(w, &b, 1);
}
static inline void pk_u32(struct pkw * w, uint32_t v) {
    unsigned char b[4] = {(unsigned char) v, (unsigned char) (v >> 8), (unsigned char) (v >> 16),
                          (unsigned char) (v >> 24)};
    pk_raw(w, b, 4);
}
static inline void pk_proto(struct pkw * w) {
    pk_op(w, 0x80);
    pk_op(w, 2);
}
static uint32_t pk_put(struct pkw * w) {
    if (w->memo < 256) {
        pk_op(w, 'q');
        pk_op(w, w->memo);
    } else {
        pk_op(w, 'r');
        pk_u32(w, w->memo);
    }
    return w->memo++;
}
static inline void pk_get(struct pkw * w, uint32_t i) {
    if (i < 256) {
        pk_op(w, 'h');
        pk_op(w, i);
    } else {
        pk_op(w, 'j');
        pk_u32(w, i);
    }
}
static inline void pk_int(struct pkw * w, int64_t v) {
    if (v >= 0 && v < 256) {
        pk_op(w, 'K');
        pk_op(w, (unsigned) v);
    } else if (v >= 0 && v < 65536) {
        pk_op(w, 'M');
        pk_op(w, (unsigned) (v & 0xff));
        pk_op(w, (unsigned) (v >> 8));
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
        pk_op(w, 'J');
        pk_u32(w, (uint32_t) (int32_t) v);
    } else {
        /* LONG1: minimal two's complement, little-endian */
        unsigned char b[9];
        int n = 0;
        uint64_t u = (uint64_t) v;
        for (n = 1; n <= 8; n++) {
            const int64_t lo = n == 8 ? INT64_MIN : -((int64_t) 1 << (8 * n - 1)),
                          hi = n == 8 ? INT64_MAX : ((int64_t) 1 << (8 * n - 1)) - 1;
            if (v >= lo && v <= hi) break;
        }
        for (int i = 0; i < n; i++) b[i] = (unsigned char) (u >> (8 * i));
        pk_op(w, 0x8a);
        pk_op(w, (unsigned) n);
        pk_raw(w, b, (size_t) n);
    }
}
static inline void pk_float(struct pkw * w, double d) {
    uint64_t u;
    memcpy(&u, &d, 8);
    pk_op(w, 'G');
    for (int i = 7; i >= 0; i--) pk_op(w, (unsigned) (u >> (8 * i)) & 0xff);
}
static inline int pk_seen(struct pkw * w, const char * text) {
    for (int i = 0; i < w->n_seen; i++)
        if (strcmp(w->seen[i], text) == 0) return i;
    return -1;
}
static inline void pk_remember(struct pkw * w, const char * text, uint32_t idx) {
    if (w->n_seen == w->cap_seen) {
        w->cap_seen = w->cap_seen ? 2 * w->cap_seen : 64;
        w->seen = realloc(w->seen, (size_t) w->cap_seen * sizeof(*w->seen));
        w->seen_idx = realloc(w->seen_idx, (size_t) w->cap_seen * sizeof(*w->seen_idx));
    }
    snprintf(w->seen[w->n_seen], sizeof(w->seen[0]), "%s", text);
    w->seen_idx[w->n_seen++] = idx;
}
/* a fresh string (always emitted) */
static inline void pk_str(struct pkw * w, const char * s) {
    pk_op(w, 'X');
    pk_u32(w, (uint32_t) strlen(s));
    pk_raw(w, s, strlen(s));
    pk_put(w);
}
/* a string that the pickler would find in its memo when seen again */
static inline void pk_str_memo(struct pkw * w, const char * s) {
    char key[96];
    snprintf(key, sizeof(key), "s:%s", s);
    int i = pk_seen(w, key);
    if (i >= 0) {
        pk_get(w, w->seen_idx[i]);
        return;
    }
    pk_op(w, 'X');
    pk_u32(w, (uint32_t) strlen(s));
    pk_raw(w, s, strlen(s));
    pk_remember(w, key, pk_put(w));
}
static inline void pk_global(struct pkw * w, const char * mod, const char * name) {
    char key[96];
    snprintf(key, sizeof(key), "g:%s.%s", mod, name);
    int i = pk_seen(w, key);
    if (i >= 0) {
        pk_get(w, w->seen_idx[i]);
        return;
    }
    pk_op(w, 'c');
    pk_raw(w, mod, strlen(mod));
    pk_op(w, '\n');
    pk_raw(w, name, strlen(name));
    pk_op(w, '\n');
    pk_remember(w, key, pk_put(w));
}
static inline void pk_tuple_of(struct pkw * w, int n, const int64_t * v) {
    if (n == 0) {
        pk_op(w, ')');
        return;
    }
    if (n > 3) pk_op(w, '(');
    for (int i = 0; i < n; i++) pk_int(w, v[i]);
    pk_op(w, n > 3 ? 't' : (unsigned) (0x84 + n));
    pk_put(w);
}
static inline void pk_odict(struct pkw * w) {
    pk_global(w, "collections", "OrderedDict");
    pk_op(w, ')');
    pk_op(w, 'R');
    pk_put(w);
}

struct gen_tensor {
    const char * name;
    const char * cls; /* "FloatStorage", "LongStorage", ... */
    const char * key; /* storage key */
    int64_t numel;    /* the storage's numel (pid) */
    int64_t offset;
    int ndim;
    int64_t shape[10], stride[10]; /* stride[0] == -1: row-major from shape */
};

static inline void pk_tensor(struct pkw * w, const struct gen_tensor * t) {
    int64_t stride[10];
    uint64_t acc = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        stride[d] = t->stride[0] == -1 ? (int64_t) acc : t->stride[d];
        acc *= (uint64_t) t->shape[d];
    }
    pk_global(w, "torch._utils", "_rebuild_tensor_v2");
    pk_op(w, '(');
    pk_op(w, '(');
    pk_str_memo(w, "storage");
    pk_global(w, "torch", t->cls);
    pk_str_memo(w, t->key);
    pk_str_memo(w, "cpu");
    pk_int(w, t->numel);
    pk_op(w, 't');
    pk_put(w);
    pk_op(w, 'Q');
    pk_int(w, t->offset);
    pk_tuple_of(w, t->ndim, t->shape);
    pk_tuple_of(w, t->ndim, stride);
    pk_op(w, 0x89);
    pk_odict(w);
    pk_op(w, 't');
    pk_put(w);
    pk_op(w, 'R');
    pk_put(w);
}

/* The whole data.pkl: {"state_dict": OrderedDict(...)} when wrapped, else the OrderedDict. */
static inline void pk_state_dict(struct pkw * w, const struct gen_tensor * t, int n, int wrapped) {
    pk_proto(w);
    if (wrapped) {
        pk_op(w, '}');
        pk_put(w);
        pk_str(w, "state_dict");
    }
    pk_odict(w);
    for (int i = 0; i < n; i += 1000) {
        pk_op(w, '(');
        for (int j = i; j < n && j < i + 1000; j++) {
            pk_str(w, t[j].name);
            pk_tensor(w, &t[j]);
        }
        pk_op(w, 'u');
    }
    pk_op(w, '}');
    pk_put(w);
    pk_str(w, "_metadata");
    pk_odict(w);
    pk_op(w, 's');
    pk_op(w, 'b');
    if (wrapped) pk_op(w, 's');
    pk_op(w, '.');
}

struct gen_rec {
    const char * name;
    const void * data;
    size_t len;
    int deflate;
};

/* Write a zip with entries <prefix>/<rec.name>; 0 on success. */
static inline int gen_zip(const char * path, const char * prefix, const struct gen_rec * r, int n) {
    int ze = 0;
    zip_t * za = zip_open(path, ZIP_CREATE | ZIP_TRUNCATE, &ze);
    if (!za) return -1;
    for (int i = 0; i < n; i++) {
        char nm[512];
        snprintf(nm, sizeof(nm), "%s%s%s", prefix, prefix[0] ? "/" : "", r[i].name);
        zip_source_t * s = zip_source_buffer(za, r[i].data, r[i].len, 0);
        zip_int64_t idx = s ? zip_file_add(za, nm, s, ZIP_FL_ENC_UTF_8) : -1;
        if (idx < 0) {
            if (s) zip_source_free(s);
            zip_discard(za);
            return -1;
        }
        zip_set_file_compression(za, (zip_uint64_t) idx, r[i].deflate ? ZIP_CM_DEFLATE : ZIP_CM_STORE, 0);
    }
    return zip_close(za) == 0 ? 0 : -1;
}

/* data.pkl + data/<key> records (storage bytes given) + version */
struct gen_storage {
    const char * key;
    const void * data;
    size_t len;
};
static inline int gen_ckpt(const char * path, const char * prefix, const struct pkw * w, const struct gen_storage * s,
                           int ns) {
    struct gen_rec * r = calloc((size_t) ns + 2, sizeof(*r));
    char(*names)[80] = calloc((size_t) ns + 1, sizeof(*names));
    int n = 0;
    r[n++] = (struct gen_rec){"data.pkl", w->b, w->n, 0};
    for (int i = 0; i < ns; i++) {
        snprintf(names[i], sizeof(names[i]), "data/%s", s[i].key);
        r[n++] = (struct gen_rec){names[i], s[i].data, s[i].len, 0};
    }
    r[n++] = (struct gen_rec){"version", "3\n", 2, 0};
    const int rc = gen_zip(path, prefix, r, n);
    free(r);
    free(names);
    return rc;
}

#endif
