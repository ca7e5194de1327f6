/* torch-ckpt.c -- a restricted reader for PyTorch checkpoints (torch.save's zip
 * format), in C, executing nothing: the zip layer (libzip, ZIP_CHECKCONS) and
 * the storages; data.pkl goes to the restricted unpickler in torch-pickle.c
 * (its allow-list and limits are described there). Spec:
 * shared/specs/torch-checkpoint.md.
 *
 * Container: a zip whose entries all sit in one folder, the prefix:
 * <prefix>/data.pkl is the pickled object, <prefix>/data/<key> the raw
 * little-endian bytes of each storage. Refused: encrypted or oddly compressed
 * entries, duplicate names, entries outside the prefix or with "..",
 * TorchScript archives, a byteorder record other than "little", the legacy
 * (non-zip) format. Sizes are overflow-checked; no recursion. */
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
