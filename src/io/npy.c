/* npy.c -- NumPy .npy v1/v2/v3 reader and v1 writer (little-endian, C order).
 * Supported dtypes: <f4 <f8 <i4 <i8 |i1. The data size must equal the header's
 * shape x dtype exactly. */
#include "nf-io.h"

#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const struct {
    const char * descr;
    enum nf_npy_dtype t;
    size_t size;
    const char * name;
} nf__npy_types[] = {
    {"<f4", NF_NPY_F4, 4, "float32"}, {"<f8", NF_NPY_F8, 8, "float64"}, {"<i4", NF_NPY_I4, 4, "int32"},
    {"<i8", NF_NPY_I8, 8, "int64"},   {"|i1", NF_NPY_I1, 1, "int8"},
};

const char * nf__npy_dtype_name(enum nf_npy_dtype t) { return nf__npy_types[t].name; }
size_t nf__npy_dtype_size(enum nf_npy_dtype t) { return nf__npy_types[t].size; }

void nf__npy_free(struct nf_npy * a) {
    if (!a) return;
    free(a->data);
    memset(a, 0, sizeof(*a));
}

/* The header is a Python dict literal (numpy reads it with
 * ast.literal_eval): {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
 * Parsed as exactly that: string keys in ' or ", the three keys once each
 * and no others, a str / bool / tuple of non-negative ints as their values
 * (a 1-tuple needs its comma: (5) is an int), only whitespace after the
 * closing brace. */
struct nf__npy_hdr {
    const char *s, *end;
    char descr[32];
    int have_descr, have_fo, have_shape, fortran;
    int ndim;
    uint64_t shape[NF_NPY_MAX_DIMS];
};

static void nf__npy_ws(struct nf__npy_hdr * h) {
    while (h->s < h->end && (*h->s == ' ' || *h->s == '\t' || *h->s == '\n' || *h->s == '\r')) h->s++;
}

/* a plain Python string literal (no escapes, no prefixes) into out */
static int nf__npy_str(struct nf__npy_hdr * h, char * out, size_t n) {
    if (h->s >= h->end || (*h->s != '\'' && *h->s != '"')) return 0;
    const char q = *h->s++;
    size_t k = 0;
    while (h->s < h->end && *h->s != q) {
        const unsigned char c = (unsigned char) *h->s;
        if (c == '\\' || c < 0x20 || c >= 0x7f || k + 1 >= n) return 0;
        out[k++] = (char) c;
        h->s++;
    }
    if (h->s >= h->end) return 0;
    h->s++;
    out[k] = '\0';
    return 1;
}

static int nf__npy_word(struct nf__npy_hdr * h, const char * w) {
    const size_t n = strlen(w);
    if ((size_t) (h->end - h->s) < n || memcmp(h->s, w, n) != 0) return 0;
    const char * after = h->s + n;
    if (after < h->end && (isalnum((unsigned char) *after) || *after == '_')) return 0;
    h->s = after;
    return 1;
}

/* (d0, d1, ...) ; 0 on a syntax error, -1 on too many dims, -2 on a dim too large */
static int nf__npy_tuple(struct nf__npy_hdr * h) {
    if (h->s >= h->end || *h->s != '(') return 0;
    h->s++;
    int n = 0, commas = 0;
    for (;;) {
        nf__npy_ws(h);
        if (h->s < h->end && *h->s == ')') {
            h->s++;
            break;
        }
        if (h->s >= h->end || !isdigit((unsigned char) *h->s)) return 0;
        uint64_t v = 0;
        const char * b = h->s;
        while (h->s < h->end && isdigit((unsigned char) *h->s)) {
            if (v > ((uint64_t) 1 << 40)) return -2;
            v = v * 10 + (uint64_t) (*h->s - '0');
            h->s++;
        }
        if (h->s - b > 1 && *b == '0') return 0; /* Python 3 has no 012 */
        if (v > ((uint64_t) 1 << 40)) return -2;
        if (n == NF_NPY_MAX_DIMS) return -1;
        h->shape[n++] = v;
        nf__npy_ws(h);
        if (h->s < h->end && *h->s == ',') {
            h->s++;
            commas++;
            continue;
        }
        if (h->s < h->end && *h->s == ')') {
            h->s++;
            break;
        }
        return 0;
    }
    if (n == 1 && commas == 0) return 0; /* (5) is 5, not a tuple */
    if (commas > n) return 0;            /* (,) or (1,,) */
    h->ndim = n;
    return 1;
}

static int nf__npy_header(const char * path, const char * txt, size_t len, struct nf__npy_hdr * h, nf_err * err) {
    memset(h, 0, sizeof(*h));
    h->s = txt;
    h->end = txt + len;
    nf__npy_ws(h);
    if (h->s >= h->end || *h->s != '{')
        return nf__err_set(err, NF_ERR_FORMAT, "%s: .npy header is not a dict literal (no '{')", path);
    h->s++;
    for (;;) {
        nf__npy_ws(h);
        if (h->s < h->end && *h->s == '}') {
            h->s++;
            break;
        }
        char key[32];
        if (!nf__npy_str(h, key, sizeof(key)))
            return nf__err_set(err, NF_ERR_FORMAT, "%s: malformed .npy header (expected a quoted key)", path);
        nf__npy_ws(h);
        if (h->s >= h->end || *h->s != ':')
            return nf__err_set(err, NF_ERR_FORMAT, "%s: malformed .npy header (expected ':' after '%s')", path, key);
        h->s++;
        nf__npy_ws(h);
        int * seen;
        if (strcmp(key, "descr") == 0) {
            seen = &h->have_descr;
            if (!nf__npy_str(h, h->descr, sizeof(h->descr))) {
                return nf__err_set(err, NF_ERR_FORMAT,
                                   "%s: 'descr' is not a simple dtype string (structured dtypes are not supported)",
                                   path);
            }
        } else if (strcmp(key, "fortran_order") == 0) {
            seen = &h->have_fo;
            if (nf__npy_word(h, "False"))
                h->fortran = 0;
            else if (nf__npy_word(h, "True"))
                h->fortran = 1;
            else
                return nf__err_set(err, NF_ERR_FORMAT, "%s: 'fortran_order' must be True or False", path);
        } else if (strcmp(key, "shape") == 0) {
            seen = &h->have_shape;
            const int r = nf__npy_tuple(h);
            if (r == -1)
                return nf__err_set(err, NF_ERR_FORMAT, "%s: too many dimensions (at most %d)", path, NF_NPY_MAX_DIMS);
            if (r == -2) return nf__err_set(err, NF_ERR_FORMAT, "%s: dimension too large", path);
            if (r == 0)
                return nf__err_set(err, NF_ERR_FORMAT,
                                   "%s: malformed shape in .npy header (expected a tuple of integers)", path);
        } else {
            char k[128];
            return nf__err_set(err, NF_ERR_FORMAT, "%s: unexpected key '%s' in the .npy header", path,
                               nf__esc(k, sizeof(k), key));
        }
        if (*seen) return nf__err_set(err, NF_ERR_FORMAT, "%s: key '%s' appears twice in the .npy header", path, key);
        *seen = 1;
        nf__npy_ws(h);
        if (h->s < h->end && *h->s == ',') {
            h->s++;
            continue;
        }
        nf__npy_ws(h);
        if (h->s < h->end && *h->s == '}') {
            h->s++;
            break;
        }
        return nf__err_set(err, NF_ERR_FORMAT, "%s: malformed .npy header (expected ',' or '}')", path);
    }
    nf__npy_ws(h);
    if (h->s != h->end) return nf__err_set(err, NF_ERR_FORMAT, "%s: trailing bytes after the .npy header's dict", path);
    if (!h->have_descr || !h->have_fo || !h->have_shape) {
        return nf__err_set(err, NF_ERR_FORMAT, "%s: .npy header lacks descr/fortran_order/shape", path);
    }
    return NF_OK;
}

int nf__npy_parse(const void * data, size_t len, const char * path_raw, struct nf_npy * out, nf_err * err) {
    memset(out, 0, sizeof(*out));
    char path[1024];
    nf__esc(path, sizeof(path), path_raw);
    const unsigned char * u = data;
    if (len < 10 || memcmp(u, "\x93NUMPY", 6) != 0)
        return nf__err_set(err, NF_ERR_FORMAT, "%s: not a .npy file (bad magic)", path);
    size_t hlen, hoff;
    if (u[6] == 1 && u[7] == 0) {
        hlen = (size_t) u[8] | ((size_t) u[9] << 8);
        hoff = 10;
    } else if ((u[6] == 2 || u[6] == 3) && u[7] == 0) {
        if (len < 12) return nf__err_set(err, NF_ERR_FORMAT, "%s: truncated .npy header", path);
        hlen = (size_t) u[8] | ((size_t) u[9] << 8) | ((size_t) u[10] << 16) | ((size_t) u[11] << 24);
        hoff = 12;
    } else {
        return nf__err_set(err, NF_ERR_FORMAT, "%s: unsupported .npy version %d.%d", path, u[6], u[7]);
    }
    if (hlen > len - hoff || hlen > 65536) {
        return nf__err_set(err, NF_ERR_FORMAT, "%s: .npy header length %zu runs past the file (truncated?)", path,
                           hlen);
    }
    struct nf__npy_hdr h;
    NF_TRY(nf__npy_header(path, (const char *) u + hoff, hlen, &h, err));
    int found = 0;
    size_t esize = 0;
    for (size_t i = 0; i < sizeof(nf__npy_types) / sizeof(nf__npy_types[0]); i++) {
        if (strcmp(h.descr, nf__npy_types[i].descr) == 0) {
            out->dtype = nf__npy_types[i].t;
            esize = nf__npy_types[i].size;
            found = 1;
        }
    }
    if (!found) {
        char shown[64];
        return nf__err_set(err, NF_ERR_FORMAT,
                           "%s: unsupported dtype '%s' (expected '<f4', '<f8', '<i4', '<i8' or '|i1')", path,
                           nf__esc(shown, sizeof(shown), h.descr));
    }
    if (h.fortran) return nf__err_set(err, NF_ERR_FORMAT, "%s: fortran_order arrays are not supported", path);
    /* the element count, overflow-checked before every multiplication */
    const uint64_t max_numel = (uint64_t) 1 << 40;
    uint64_t numel = 1;
    for (int i = 0; i < h.ndim; i++) {
        out->shape[i] = (int64_t) h.shape[i];
        if (h.shape[i] != 0 && numel > max_numel / h.shape[i])
            return nf__err_set(err, NF_ERR_FORMAT, "%s: array too large (more than 2^40 elements)", path);
        numel *= h.shape[i];
    }
    out->ndim = h.ndim;
    const size_t need = (size_t) numel * esize;
    const size_t have = len - hoff - hlen;
    if (have != need) {
        const int rc = nf__err_set(err, NF_ERR_FORMAT,
                                   "%s: data is %zu bytes but the header's shape and dtype need %zu (truncated?)", path,
                                   have, need);
        nf__npy_free(out);
        return rc;
    }
    out->data = malloc(need ? need : 1);
    if (!out->data) {
        nf__npy_free(out);
        return nf__err_set(err, NF_ERR_NOMEM, "%s: out of memory", path);
    }
    memcpy(out->data, u + hoff + hlen, need);
    out->nbytes = need;
    return NF_OK;
}

int nf__npy_read(const char * path, struct nf_npy * out, nf_err * err) {
    memset(out, 0, sizeof(*out));
    char * buf;
    size_t len;
    NF_TRY(nf__file_read_all(path, &buf, &len, (size_t) 8 << 30, err));
    const int rc = nf__npy_parse(buf, len, path, out, err);
    free(buf);
    return rc;
}

int nf__npy_write(const char * path, enum nf_npy_dtype dtype, int ndim, const int64_t * shape, const void * data,
                  nf_err * err) {
    char dict[512];
    int off = snprintf(dict, sizeof(dict), "{'descr': '%s', 'fortran_order': False, 'shape': (",
                       nf__npy_types[dtype].descr);
    uint64_t numel = 1;
    for (int i = 0; i < ndim; i++) {
        off += snprintf(dict + off, sizeof(dict) - (size_t) off, "%lld,%s", (long long) shape[i],
                        (ndim > 1 && i < ndim - 1) ? " " : "");
        numel *= (uint64_t) shape[i];
    }
    if (ndim > 1) off--; /* "(2, 3)" rather than "(2, 3,)" */
    off += snprintf(dict + off, sizeof(dict) - (size_t) off, "), }");
    /* total header (10 + dict + padding + '\n') is a multiple of 64 */
    size_t total = 10 + (size_t) off + 1;
    size_t padded = (total + 63) & ~(size_t) 63;
    size_t hlen = padded - 10;
    FILE * f = fopen(path, "wb");
    if (!f) return nf__err_set(err, NF_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
    unsigned char pre[10] = {
        0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char) (hlen & 0xff), (unsigned char) (hlen >> 8)};
    int ok = fwrite(pre, 1, 10, f) == 10 && fwrite(dict, 1, (size_t) off, f) == (size_t) off;
    for (size_t i = (size_t) off; i < hlen - 1 && ok; i++) ok = fputc(' ', f) != EOF;
    ok = ok && fputc('\n', f) != EOF;
    size_t nb = (size_t) numel * nf__npy_types[dtype].size;
    ok = ok && (nb == 0 || fwrite(data, 1, nb, f) == nb);
    ok = ok && fflush(f) == 0 && fsync(fileno(f)) == 0;
    ok = (fclose(f) == 0) && ok;
    if (!ok) {
        remove(path);
        return nf__err_set(err, NF_ERR_IO, "%s: write failed", path);
    }
    return NF_OK;
}
