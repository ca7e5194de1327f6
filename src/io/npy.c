/* npy.c -- NumPy .npy v1/v2/v3 reader and v1 writer (little-endian, C order).
 * Supported dtypes: <f4 <f8 <i4 <i8. The data size must equal the header's
 * shape x dtype exactly. */
#include "nf-io.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct { const char * descr; enum nf_npy_dtype t; size_t size; const char * name; } nf__npy_types[] = {
    {"<f4", NF_NPY_F4, 4, "float32"}, {"<f8", NF_NPY_F8, 8, "float64"},
    {"<i4", NF_NPY_I4, 4, "int32"},   {"<i8", NF_NPY_I8, 8, "int64"},
};

const char * nf__npy_dtype_name(enum nf_npy_dtype t) { return nf__npy_types[t].name; }
size_t       nf__npy_dtype_size(enum nf_npy_dtype t) { return nf__npy_types[t].size; }

void nf__npy_free(struct nf_npy * a) {
    if (!a) return;
    free(a->data);
    memset(a, 0, sizeof(*a));
}

/* find 'key': in the header dict; returns pointer after the colon */
static const char * nf__npy_key(const char * h, const char * key) {
    char pat[32];
    snprintf(pat, sizeof(pat), "'%s'", key);
    const char * p = strstr(h, pat);
    if (!p) return NULL;
    p += strlen(pat);
    while (*p == ' ') p++;
    if (*p != ':') return NULL;
    p++;
    while (*p == ' ') p++;
    return p;
}

int nf__npy_read(const char * path, struct nf_npy * out, nf_err * err) {
    memset(out, 0, sizeof(*out));
    char * buf;
    size_t len;
    NF_TRY(nf__file_read_all(path, &buf, &len, (size_t) 8 << 30, err));
    int rc = NF_OK;
    const unsigned char * u = (const unsigned char *) buf;
    if (len < 10 || memcmp(buf, "\x93NUMPY", 6) != 0) {
        rc = nf__err_set(err, NF_ERR_FORMAT, "%s: not a .npy file (bad magic)", path);
        goto done;
    }
    size_t hlen, hoff;
    if (u[6] == 1) { hlen = (size_t) u[8] | ((size_t) u[9] << 8); hoff = 10; }
    else if (u[6] == 2 || u[6] == 3) {
        if (len < 12) { rc = nf__err_set(err, NF_ERR_FORMAT, "%s: truncated .npy header", path); goto done; }
        hlen = (size_t) u[8] | ((size_t) u[9] << 8) | ((size_t) u[10] << 16) | ((size_t) u[11] << 24);
        hoff = 12;
    } else {
        rc = nf__err_set(err, NF_ERR_FORMAT, "%s: unsupported .npy version %d.%d", path, u[6], u[7]);
        goto done;
    }
    if (hlen > len - hoff || hlen > 65536) {
        rc = nf__err_set(err, NF_ERR_FORMAT, "%s: .npy header length %zu runs past the file (truncated?)", path, hlen);
        goto done;
    }
    char hdr[65537];
    memcpy(hdr, buf + hoff, hlen);
    hdr[hlen] = '\0';
    const char * d = nf__npy_key(hdr, "descr");
    const char * fo = nf__npy_key(hdr, "fortran_order");
    const char * sh = nf__npy_key(hdr, "shape");
    if (!d || !fo || !sh) { rc = nf__err_set(err, NF_ERR_FORMAT, "%s: .npy header lacks descr/fortran_order/shape", path); goto done; }
    int found = 0;
    size_t esize = 0;
    for (size_t i = 0; i < sizeof(nf__npy_types) / sizeof(nf__npy_types[0]); i++) {
        char q[16];
        snprintf(q, sizeof(q), "'%s'", nf__npy_types[i].descr);
        if (strncmp(d, q, strlen(q)) == 0) { out->dtype = nf__npy_types[i].t; esize = nf__npy_types[i].size; found = 1; }
    }
    if (!found) {
        char shown[24] = {0};
        for (int i = 0; i < 20 && d[i] && d[i] != ','; i++) shown[i] = d[i];
        rc = nf__err_set(err, NF_ERR_FORMAT, "%s: unsupported dtype %s (expected '<f4', '<f8', '<i4' or '<i8')", path, shown);
        goto done;
    }
    if (strncmp(fo, "False", 5) != 0) { rc = nf__err_set(err, NF_ERR_FORMAT, "%s: fortran_order arrays are not supported", path); goto done; }
    if (*sh != '(') { rc = nf__err_set(err, NF_ERR_FORMAT, "%s: malformed shape in .npy header", path); goto done; }
    sh++;
    uint64_t numel = 1;
    while (1) {
        while (*sh == ' ' || *sh == ',') sh++;
        if (*sh == ')') break;
        if (!isdigit((unsigned char) *sh)) { rc = nf__err_set(err, NF_ERR_FORMAT, "%s: malformed shape in .npy header", path); goto done; }
        char * end;
        errno = 0;
        unsigned long long v = strtoull(sh, &end, 10);
        if (errno || v > (1ull << 40)) { rc = nf__err_set(err, NF_ERR_FORMAT, "%s: dimension too large", path); goto done; }
        if (out->ndim == NF_NPY_MAX_DIMS) { rc = nf__err_set(err, NF_ERR_FORMAT, "%s: too many dimensions", path); goto done; }
        out->shape[out->ndim++] = (int64_t) v;
        numel *= v;
        if (numel > (1ull << 40)) { rc = nf__err_set(err, NF_ERR_FORMAT, "%s: array too large", path); goto done; }
        sh = end;
    }
    size_t need = (size_t) numel * esize;
    size_t have = len - hoff - hlen;
    if (have != need) {
        rc = nf__err_set(err, NF_ERR_FORMAT, "%s: data is %zu bytes but the header's shape and dtype need %zu (truncated?)", path, have, need);
        goto done;
    }
    out->data = malloc(need ? need : 1);
    if (!out->data) { rc = nf__err_set(err, NF_ERR_NOMEM, "%s: out of memory", path); goto done; }
    memcpy(out->data, buf + hoff + hlen, need);
    out->nbytes = need;
done:
    free(buf);
    if (rc != NF_OK) nf__npy_free(out);
    return rc;
}

int nf__npy_write(const char * path, enum nf_npy_dtype dtype, int ndim, const int64_t * shape,
                  const void * data, nf_err * err) {
    char dict[512];
    int off = snprintf(dict, sizeof(dict), "{'descr': '%s', 'fortran_order': False, 'shape': (", nf__npy_types[dtype].descr);
    uint64_t numel = 1;
    for (int i = 0; i < ndim; i++) {
        off += snprintf(dict + off, sizeof(dict) - (size_t) off, "%lld,%s", (long long) shape[i], (ndim > 1 && i < ndim - 1) ? " " : "");
        numel *= (uint64_t) shape[i];
    }
    if (ndim > 1) off--;   /* "(2, 3)" rather than "(2, 3,)" */
    off += snprintf(dict + off, sizeof(dict) - (size_t) off, "), }");
    /* total header (10 + dict + padding + '\n') is a multiple of 64 */
    size_t total = 10 + (size_t) off + 1;
    size_t padded = (total + 63) & ~(size_t) 63;
    size_t hlen = padded - 10;
    FILE * f = fopen(path, "wb");
    if (!f) return nf__err_set(err, NF_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char) (hlen & 0xff), (unsigned char) (hlen >> 8)};
    int ok = fwrite(pre, 1, 10, f) == 10 && fwrite(dict, 1, (size_t) off, f) == (size_t) off;
    for (size_t i = (size_t) off; i < hlen - 1 && ok; i++) ok = fputc(' ', f) != EOF;
    ok = ok && fputc('\n', f) != EOF;
    size_t nb = (size_t) numel * nf__npy_types[dtype].size;
    ok = ok && (nb == 0 || fwrite(data, 1, nb, f) == nb);
    ok = (fclose(f) == 0) && ok;
    if (!ok) { remove(path); return nf__err_set(err, NF_ERR_IO, "%s: write failed", path); }
    return NF_OK;
}
