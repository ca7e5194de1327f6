/* safetensors.c -- a strict reader and a small writer for .safetensors files.
 *
 * Layout: u64 little-endian header length N, N bytes of JSON, then the data.
 * The JSON maps names to {"dtype","shape","data_offsets":[begin,end]}
 * (offsets relative to the data section); "__metadata__" is an optional
 * object of strings. Refused, as the reference implementation (the
 * safetensors crate) refuses it: a header length past the file or over
 * NF_ST_MAX_HEADER; a header that does not start with '{', is not exactly one
 * JSON object (trailing bytes other than spaces, NUL padding), is not UTF-8 or
 * has a key twice; "__metadata__" that is not an object of strings; a
 * malformed entry; end - begin != numel * dtype size; tensors that overlap,
 * leave a gap between them, or leave bytes after the last one. Also refused:
 * names with \u0000 (a C string cannot hold them). */
#include "nf-io.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static const struct {
    const char * s;
    enum nf_st_dtype t;
    size_t size;
} nf__st_dtypes[] = {
    {"F32", NF_ST_F32, 4}, {"F16", NF_ST_F16, 2},   {"BF16", NF_ST_BF16, 2}, {"F64", NF_ST_F64, 8},
    {"I64", NF_ST_I64, 8}, {"I32", NF_ST_I32, 4},   {"I16", NF_ST_I16, 2},   {"I8", NF_ST_I8, 1},
    {"U8", NF_ST_U8, 1},   {"BOOL", NF_ST_BOOL, 1},
};

static int nf__st_dtype_parse(const char * s, enum nf_st_dtype * t, size_t * size) {
    for (size_t i = 0; i < sizeof(nf__st_dtypes) / sizeof(nf__st_dtypes[0]); i++) {
        if (strcmp(s, nf__st_dtypes[i].s) == 0) {
            *t = nf__st_dtypes[i].t;
            *size = nf__st_dtypes[i].size;
            return 1;
        }
    }
    return 0;
}

const char * nf__st_dtype_str(enum nf_st_dtype t) {
    for (size_t i = 0; i < sizeof(nf__st_dtypes) / sizeof(nf__st_dtypes[0]); i++) {
        if (nf__st_dtypes[i].t == t) return nf__st_dtypes[i].s;
    }
    return "other";
}

size_t nf__st_dtype_size(enum nf_st_dtype t) {
    for (size_t i = 0; i < sizeof(nf__st_dtypes) / sizeof(nf__st_dtypes[0]); i++) {
        if (nf__st_dtypes[i].t == t) return nf__st_dtypes[i].size;
    }
    return 0;
}

static int nf__st_cmp_begin(const void * a, const void * b) {
    const struct nf_st_tensor * x = *(const struct nf_st_tensor * const *) a;
    const struct nf_st_tensor * y = *(const struct nf_st_tensor * const *) b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : (x->end > y->end);
}

static int nf__st_cmp_name(const void * a, const void * b) {
    const struct nf_st_tensor * x = *(const struct nf_st_tensor * const *) a;
    const struct nf_st_tensor * y = *(const struct nf_st_tensor * const *) b;
    return strcmp(x->name, y->name);
}

void nf__st_close(struct nf_safetensors * st) {
    if (!st) return;
    for (int i = 0; i < st->n_tensors; i++) free(st->tensors[i].name);
    free(st->tensors);
    if (st->map && st->mapped) munmap((void *) st->map, st->map_size);
    free(st->heap);
    free(st->path);
    memset(st, 0, sizeof(*st));
}

static int nf__st_parse_entry(const char * path, const cJSON * e, struct nf_st_tensor * t, uint64_t data_size,
                              nf_err * err) {
    char nm[512];
    nf__esc(nm, sizeof(nm), e->string);
    if (!cJSON_IsObject(e))
        return nf__err_set(err, NF_ERR_FORMAT, "%s: tensor '%s': header entry is not an object", path, nm);
    const cJSON * dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    const cJSON * sh = cJSON_GetObjectItemCaseSensitive(e, "shape");
    const cJSON * of = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    if (!cJSON_IsString(dt))
        return nf__err_set(err, NF_ERR_FORMAT, "%s: tensor '%s': missing or non-string \"dtype\"", path, nm);
    if (!cJSON_IsArray(sh))
        return nf__err_set(err, NF_ERR_FORMAT, "%s: tensor '%s': missing or non-array \"shape\"", path, nm);
    if (!cJSON_IsArray(of) || cJSON_GetArraySize(of) != 2) {
        return nf__err_set(err, NF_ERR_FORMAT, "%s: tensor '%s': \"data_offsets\" must be [begin, end]", path, nm);
    }
    size_t esize;
    nf__esc(t->dtype_str, sizeof(t->dtype_str), dt->valuestring);
    if (!nf__st_dtype_parse(dt->valuestring, &t->dtype, &esize)) {
        t->dtype = NF_ST_OTHER;
        esize = 0;
    }
    int nd = cJSON_GetArraySize(sh);
    if (nd > NF_ST_MAX_DIMS)
        return nf__err_set(err, NF_ERR_FORMAT, "%s: tensor '%s': rank %d is too large", path, nm, nd);
    t->ndim = nd;
    /* numel with overflow checks */
    uint64_t numel = 1;
    for (int i = 0; i < nd; i++) {
        const cJSON * d = cJSON_GetArrayItem(sh, i);
        if (!cJSON_IsNumber(d) || !(d->valuedouble >= 0) || d->valuedouble > 9.0e15 ||
            d->valuedouble != (double) (int64_t) d->valuedouble) {
            return nf__err_set(err, NF_ERR_FORMAT, "%s: tensor '%s': shape[%d] is not a non-negative integer", path, nm,
                               i);
        }
        t->shape[i] = (int64_t) d->valuedouble;
        if (t->shape[i] != 0 && numel > UINT64_MAX / (uint64_t) t->shape[i]) {
            return nf__err_set(err, NF_ERR_FORMAT, "%s: tensor '%s': shape overflows", path, nm);
        }
        numel *= (uint64_t) t->shape[i];
    }
    for (int i = 0; i < 2; i++) {
        const cJSON * d = cJSON_GetArrayItem(of, i);
        if (!cJSON_IsNumber(d) || !(d->valuedouble >= 0) || d->valuedouble > 1.8e19 ||
            d->valuedouble != (double) (uint64_t) d->valuedouble) {
            return nf__err_set(err, NF_ERR_FORMAT, "%s: tensor '%s': data_offsets[%d] is not a non-negative integer",
                               path, nm, i);
        }
    }
    t->begin = (uint64_t) cJSON_GetArrayItem(of, 0)->valuedouble;
    t->end = (uint64_t) cJSON_GetArrayItem(of, 1)->valuedouble;
    if (t->begin > t->end) {
        return nf__err_set(err, NF_ERR_FORMAT, "%s: tensor '%s': data_offsets begin %llu > end %llu", path, nm,
                           (unsigned long long) t->begin, (unsigned long long) t->end);
    }
    if (t->end > data_size) {
        return nf__err_set(
            err, NF_ERR_FORMAT,
            "%s: tensor '%s': data_offsets end %llu is past the data section (%llu bytes; file truncated?)", path, nm,
            (unsigned long long) t->end, (unsigned long long) data_size);
    }
    if (esize && numel > UINT64_MAX / esize)
        return nf__err_set(err, NF_ERR_FORMAT, "%s: tensor '%s': size overflows", path, nm);
    if (esize && t->end - t->begin != numel * esize) {
        return nf__err_set(
            err, NF_ERR_FORMAT, "%s: tensor '%s': data_offsets span %llu bytes but dtype %s x shape needs %llu", path,
            nm, (unsigned long long) (t->end - t->begin), t->dtype_str, (unsigned long long) (numel * esize));
    }
    return NF_OK;
}

/* "__metadata__": an object whose values are strings (the reference reads it
 * as HashMap<String, String>) */
static int nf__st_check_metadata(const char * path, const cJSON * md, nf_err * err) {
    if (!cJSON_IsObject(md))
        return nf__err_set(err, NF_ERR_FORMAT, "%s: \"__metadata__\" must be an object of strings", path);
    for (const cJSON * c = md->child; c; c = c->next) {
        if (!cJSON_IsString(c)) {
            char k[512];
            return nf__err_set(err, NF_ERR_FORMAT,
                               "%s: \"__metadata__\" must be an object of strings; \"%s\" is not a string", path,
                               nf__esc(k, sizeof(k), c->string));
        }
    }
    return NF_OK;
}

int nf__st_parse(const void * buf, size_t fsize, const char * path_raw, struct nf_safetensors * st, nf_err * err) {
    memset(st, 0, sizeof(*st));
    char path[1024];
    nf__esc(path, sizeof(path), path_raw);
    if (fsize < 8)
        return nf__err_set(err, NF_ERR_FORMAT, "%s: %zu bytes is too short for a safetensors file (truncated?)", path,
                           fsize);
    st->map = buf;
    st->map_size = fsize;
    st->path = strdup(path_raw);
    const unsigned char * m = buf;
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | m[i];
    int rc = NF_OK;
    cJSON * doc = NULL;
    struct nf_st_tensor ** idx = NULL;
    if (!st->path) {
        rc = nf__err_set(err, NF_ERR_NOMEM, "%s: out of memory", path);
        goto fail;
    }
    if (hlen > NF_ST_MAX_HEADER) {
        rc = nf__err_set(err, NF_ERR_FORMAT, "%s: header length %llu exceeds the %u-byte cap", path,
                         (unsigned long long) hlen, NF_ST_MAX_HEADER);
        goto fail;
    }
    if (hlen > fsize - 8) {
        rc = nf__err_set(err, NF_ERR_FORMAT,
                         "%s: header length %llu runs past the end of the %zu-byte file (truncated?)", path,
                         (unsigned long long) hlen, fsize);
        goto fail;
    }
    if (hlen == 0 || m[8] != '{') {
        rc = nf__err_set(err, NF_ERR_FORMAT, "%s: header does not start with '{' (not a safetensors header)", path);
        goto fail;
    }
    {
        char what[1100];
        snprintf(what, sizeof(what), "%s: header", path_raw);
        if ((rc = nf__json_parse((const char *) m + 8, (size_t) hlen, what, &doc, err)) != NF_OK) goto fail;
    }
    if (!cJSON_IsObject(doc)) {
        rc = nf__err_set(err, NF_ERR_FORMAT, "%s: header is not a JSON object", path);
        goto fail;
    }
    st->data = m + 8 + hlen;
    st->data_size = fsize - 8 - hlen;
    int n = 0;
    for (const cJSON * e = doc->child; e; e = e->next) {
        if (strcmp(e->string, "__metadata__") != 0)
            n++;
        else if ((rc = nf__st_check_metadata(path, e, err)) != NF_OK)
            goto fail;
    }
    st->tensors = calloc((size_t) (n ? n : 1), sizeof(*st->tensors));
    if (!st->tensors) {
        rc = nf__err_set(err, NF_ERR_NOMEM, "%s: out of memory", path);
        goto fail;
    }
    for (const cJSON * e = doc->child; e; e = e->next) {
        if (strcmp(e->string, "__metadata__") == 0) continue;
        struct nf_st_tensor * t = &st->tensors[st->n_tensors];
        t->name = strdup(e->string);
        st->n_tensors++;
        if (!t->name) {
            rc = nf__err_set(err, NF_ERR_NOMEM, "%s: out of memory", path);
            goto fail;
        }
        rc = nf__st_parse_entry(path, e, t, st->data_size, err);
        if (rc != NF_OK) goto fail;
    }
    idx = malloc((size_t) (n ? n : 1) * sizeof(*idx));
    if (!idx) {
        rc = nf__err_set(err, NF_ERR_NOMEM, "%s: out of memory", path);
        goto fail;
    }
    for (int i = 0; i < n; i++) idx[i] = &st->tensors[i];
    qsort(idx, (size_t) n, sizeof(*idx), nf__st_cmp_name);
    for (int i = 1; i < n; i++) {
        if (strcmp(idx[i - 1]->name, idx[i]->name) == 0) {
            char a[512];
            rc = nf__err_set(err, NF_ERR_FORMAT, "%s: tensor '%s' appears twice in the header", path,
                             nf__esc(a, sizeof(a), idx[i]->name));
            goto fail;
        }
    }
    /* the data section is exactly the tensors, back to back, in offset order */
    qsort(idx, (size_t) n, sizeof(*idx), nf__st_cmp_begin);
    uint64_t at = 0;
    for (int i = 0; i < n; i++) {
        char a[512], b[512];
        if (idx[i]->begin < at) {
            const struct nf_st_tensor * p = idx[i - 1];
            rc = nf__err_set(err, NF_ERR_FORMAT, "%s: tensors '%s' [%llu,%llu) and '%s' [%llu,%llu) overlap", path,
                             nf__esc(a, sizeof(a), p->name), (unsigned long long) p->begin, (unsigned long long) p->end,
                             nf__esc(b, sizeof(b), idx[i]->name), (unsigned long long) idx[i]->begin,
                             (unsigned long long) idx[i]->end);
            goto fail;
        }
        if (idx[i]->begin > at) {
            rc = nf__err_set(
                err, NF_ERR_FORMAT,
                "%s: data bytes [%llu,%llu) before tensor '%s' belong to no tensor (a gap in the data section)", path,
                (unsigned long long) at, (unsigned long long) idx[i]->begin, nf__esc(a, sizeof(a), idx[i]->name));
            goto fail;
        }
        at = idx[i]->end;
    }
    if (at != st->data_size) {
        rc = nf__err_set(
            err, NF_ERR_FORMAT,
            "%s: %llu bytes after the last tensor's data belong to no tensor (the data section is %llu bytes)", path,
            (unsigned long long) (st->data_size - at), (unsigned long long) st->data_size);
        goto fail;
    }
    free(idx);
    cJSON_Delete(doc);
    return NF_OK;
fail:
    free(idx);
    cJSON_Delete(doc);
    nf__st_close(st);
    return rc;
}

int nf__st_open(const char * path, struct nf_safetensors * st, nf_err * err) {
    memset(st, 0, sizeof(*st));
    int fd;
    uint64_t size;
    char pe[1024];
    NF_TRY(nf__open_regular(path, &fd, &size, err));
    if (size > (uint64_t) SIZE_MAX) {
        close(fd);
        return nf__err_set(err, NF_ERR_FORMAT, "%s: file too large", nf__esc(pe, sizeof(pe), path));
    }
    const size_t fsize = (size_t) size;
    if (fsize < 8) {
        close(fd);
        return nf__err_set(err, NF_ERR_FORMAT, "%s: %zu bytes is too short for a safetensors file (truncated?)",
                           nf__esc(pe, sizeof(pe), path), fsize);
    }
    void * map = mmap(NULL, fsize, PROT_READ, MAP_PRIVATE, fd, 0);
    const int en = errno;
    close(fd);
    if (map == MAP_FAILED)
        return nf__err_set(err, NF_ERR_IO, "%s: cannot mmap: %s", nf__esc(pe, sizeof(pe), path), strerror(en));
    int rc = nf__st_parse(map, fsize, path, st, err);
    if (rc != NF_OK) {
        munmap(map, fsize);
        return rc;
    }
    st->mapped = 1;
    return NF_OK;
}

const struct nf_st_tensor * nf__st_find(const struct nf_safetensors * st, const char * name) {
    for (int i = 0; i < st->n_tensors; i++) {
        if (strcmp(st->tensors[i].name, name) == 0) return &st->tensors[i];
    }
    return NULL;
}

const void * nf__st_data(const struct nf_safetensors * st, const struct nf_st_tensor * t) {
    return st->data + t->begin;
}

/* ---- writer ------------------------------------------------------------------ */

static int nf__st_cmp_entry(const void * a, const void * b) {
    const struct nf_st_entry * x = *(const struct nf_st_entry * const *) a;
    const struct nf_st_entry * y = *(const struct nf_st_entry * const *) b;
    return strcmp(x->name, y->name);
}

static uint64_t nf__st_entry_bytes(const struct nf_st_entry * e) {
    uint64_t n = nf__st_dtype_size(e->dtype);
    for (int d = 0; d < e->ndim; d++) n *= (uint64_t) e->shape[d];
    return n;
}

int nf__st_write(const char * path, const struct nf_st_entry * entries, int n, nf_err * err) {
    if (n < 0) return nf__err_set(err, NF_ERR_ARG, "%s: %d tensors", path, n);
    for (int i = 0; i < n; i++) {
        if (!nf__st_dtype_size(entries[i].dtype))
            return nf__err_set(err, NF_ERR_ARG, "%s: tensor '%s': unknown dtype", path, entries[i].name);
    }
    const struct nf_st_entry ** idx = malloc((size_t) (n ? n : 1) * sizeof(*idx));
    if (!idx) return nf__err_set(err, NF_ERR_NOMEM, "%s: out of memory", path);
    for (int i = 0; i < n; i++) idx[i] = &entries[i];
    qsort(idx, (size_t) n, sizeof(*idx), nf__st_cmp_entry);
    cJSON * hdr = cJSON_CreateObject();
    cJSON * meta = cJSON_AddObjectToObject(hdr, "__metadata__");
    cJSON_AddStringToObject(meta, "format", "pt");
    uint64_t off = 0;
    for (int i = 0; i < n; i++) {
        cJSON * e = cJSON_AddObjectToObject(hdr, idx[i]->name);
        cJSON_AddStringToObject(e, "dtype", nf__st_dtype_str(idx[i]->dtype));
        cJSON * sh = cJSON_AddArrayToObject(e, "shape");
        for (int d = 0; d < idx[i]->ndim; d++) cJSON_AddItemToArray(sh, cJSON_CreateNumber((double) idx[i]->shape[d]));
        cJSON * of = cJSON_AddArrayToObject(e, "data_offsets");
        uint64_t nb = nf__st_entry_bytes(idx[i]);
        cJSON_AddItemToArray(of, cJSON_CreateNumber((double) off));
        cJSON_AddItemToArray(of, cJSON_CreateNumber((double) (off + nb)));
        off += nb;
    }
    char * txt = cJSON_PrintUnformatted(hdr);
    cJSON_Delete(hdr);
    if (!txt) {
        free(idx);
        return nf__err_set(err, NF_ERR_NOMEM, "%s: out of memory", path);
    }
    size_t tl = strlen(txt);
    size_t hl = (tl + 7) & ~(size_t) 7; /* pad the header with spaces to 8 bytes */
    char tmp[4096];
    int fd = -1;
    int rc = nf__tmp_create(path, tmp, sizeof(tmp), &fd, err);
    if (rc != NF_OK) goto done;
    FILE * f = fdopen(fd, "wb");
    if (!f) {
        close(fd);
        remove(tmp);
        rc = nf__err_set(err, NF_ERR_IO, "%s: cannot open: %s", tmp, strerror(errno));
        goto done;
    }
    unsigned char lenb[8];
    for (int i = 0; i < 8; i++) lenb[i] = (unsigned char) (((uint64_t) hl >> (8 * i)) & 0xff);
    int ok = fwrite(lenb, 1, 8, f) == 8 && fwrite(txt, 1, tl, f) == tl;
    for (size_t i = tl; i < hl && ok; i++) ok = fputc(' ', f) != EOF;
    for (int i = 0; i < n && ok; i++) {
        size_t nb = (size_t) nf__st_entry_bytes(idx[i]);
        ok = fwrite(idx[i]->data, 1, nb, f) == nb; /* little-endian hosts only (x86-64, arm64) */
    }
    ok = ok && fflush(f) == 0 && fsync(fileno(f)) == 0;
    ok = (fclose(f) == 0) && ok;
    if (!ok) {
        remove(tmp);
        rc = nf__err_set(err, NF_ERR_IO, "%s: write failed", tmp);
        goto done;
    }
    if (rename(tmp, path) != 0) {
        remove(tmp);
        rc = nf__err_set(err, NF_ERR_IO, "%s: rename failed: %s", path, strerror(errno));
    }
done:
    cJSON_free(txt);
    free(idx);
    return rc;
}

int nf__st_write_view(const char * path, const struct nf_safetensors * st, nf_err * err) {
    struct nf_st_entry * e = calloc((size_t) (st->n_tensors ? st->n_tensors : 1), sizeof(*e));
    if (!e) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    for (int i = 0; i < st->n_tensors; i++) {
        const struct nf_st_tensor * t = &st->tensors[i];
        e[i].name = t->name;
        e[i].ndim = t->ndim;
        for (int d = 0; d < t->ndim; d++) e[i].shape[d] = t->shape[d];
        e[i].data = nf__st_data(st, t);
        e[i].dtype = t->dtype;
    }
    const int rc = nf__st_write(path, e, st->n_tensors, err);
    free(e);
    return rc;
}
