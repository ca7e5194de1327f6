/* decompress.c -- whole-file reads that undo the compression a file's name
 * says, as pandas.read_csv(compression="infer") does: .gz (gzip; zlib),
 * .bz2 (bzip2), .xz (xz / lzma), .zst (Zstandard; libzstd, optional at
 * build time: NF_HAVE_ZSTD); any other name is read as it is. The
 * extension is matched ignoring case (pandas lower-cases the path first).
 * Concatenated streams (`cat a.gz b.gz`) read as one, like gzip/bz2/lzma in
 * Python. A corrupt or truncated stream is an NF_ERR_FORMAT naming the file;
 * the decompressed size is capped like a plain file. */
#include "nf-io.h"

#include <bzlib.h>
#include <lzma.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <zlib.h>
#ifdef NF_HAVE_ZSTD
#include <zstd.h>
#endif

enum nf_comp { NF_COMP_NONE, NF_COMP_GZ, NF_COMP_BZ2, NF_COMP_XZ, NF_COMP_ZST };

static int nf_ends_with(const char * s, const char * suf) {
    const size_t n = strlen(s), m = strlen(suf);
    return n > m && strcasecmp(s + n - m, suf) == 0;
}

static enum nf_comp nf_comp_of(const char * path) {
    if (nf_ends_with(path, ".gz")) return NF_COMP_GZ;
    if (nf_ends_with(path, ".bz2")) return NF_COMP_BZ2;
    if (nf_ends_with(path, ".xz")) return NF_COMP_XZ;
    if (nf_ends_with(path, ".zst")) return NF_COMP_ZST;
    return NF_COMP_NONE;
}

const char * nf__compression_of(const char * path) {
    static const char * const names[] = {NULL, "gzip", "bz2", "xz", "zstd"};
    return names[nf_comp_of(path)];
}

size_t nf__compression_ext_len(const char * path) {
    static const size_t lens[] = {0, 3, 4, 3, 4};
    return lens[nf_comp_of(path)];
}

/* Growable output buffer holding at most max + 1 bytes (one over = too big). */
struct nf_obuf {
    char * p;
    size_t n, cap, max;
};

/* At least one free byte: 0, or 1 (more than max already), or -1 (no memory). */
static int nf_obuf_room(struct nf_obuf * o) {
    if (o->n < o->cap) return 0;
    if (o->cap > o->max) return 1;
    size_t cap = o->cap ? o->cap * 2 : (size_t) 1 << 16;
    if (cap > o->max + 1) cap = o->max + 1;
    char * p = realloc(o->p, cap);
    if (!p) return -1;
    o->p = p;
    o->cap = cap;
    return 0;
}

static int nf_too_big(struct nf_obuf * o, const char * path, char * e, size_t en, nf_err * err) {
    return nf__err_set(err, NF_ERR_FORMAT, "%s: decompresses to more than the %zu bytes allowed", nf__esc(e, en, path),
                       o->max);
}

static int nf_oom(const char * path, char * e, size_t en, nf_err * err) {
    return nf__err_set(err, NF_ERR_NOMEM, "%s: out of memory while decompressing", nf__esc(e, en, path));
}

#define NF_CHUNK ((size_t) 1 << 20)

static int nf_gunzip(const unsigned char * in, size_t len, struct nf_obuf * o, const char * path, nf_err * err) {
    char e[1024];
    size_t pos = 0;
    int members = 0;
    while (pos < len) {
        if (members > 0 && in[pos] == 0) { /* trailing zero padding, as gzip accepts */
            size_t q = pos;
            while (q < len && in[q] == 0) q++;
            if (q == len) break;
        }
        z_stream z;
        memset(&z, 0, sizeof(z));
        if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) return nf_oom(path, e, sizeof(e), err);
        int zr = Z_OK;
        while (zr != Z_STREAM_END) {
            const size_t avail = len - pos;
            z.next_in = (unsigned char *) (in + pos);
            z.avail_in = (uInt) (avail > NF_CHUNK ? NF_CHUNK : avail);
            const uInt given = z.avail_in;
            if (nf_obuf_room(o) != 0) {
                inflateEnd(&z);
                return o->cap > o->max ? nf_too_big(o, path, e, sizeof(e), err) : nf_oom(path, e, sizeof(e), err);
            }
            z.next_out = (unsigned char *) (o->p + o->n);
            z.avail_out = (uInt) (o->cap - o->n);
            const uInt out0 = z.avail_out;
            zr = inflate(&z, Z_NO_FLUSH);
            pos += given - z.avail_in;
            o->n += out0 - z.avail_out;
            if (o->n > o->max) {
                inflateEnd(&z);
                return nf_too_big(o, path, e, sizeof(e), err);
            }
            if (zr == Z_STREAM_END) break;
            if (zr == Z_BUF_ERROR && pos >= len) {
                inflateEnd(&z);
                return nf__err_set(err, NF_ERR_FORMAT, "%s: truncated gzip stream (ends before its trailer)",
                                   nf__esc(e, sizeof(e), path));
            }
            if (zr != Z_OK && zr != Z_BUF_ERROR) {
                const char * m = z.msg ? z.msg : "invalid data";
                char mm[256];
                snprintf(mm, sizeof(mm), "%s", m);
                inflateEnd(&z);
                return nf__err_set(err, NF_ERR_FORMAT, "%s: corrupt gzip stream at compressed byte %zu: %s",
                                   nf__esc(e, sizeof(e), path), pos, mm);
            }
        }
        inflateEnd(&z);
        members++;
    }
    if (members == 0)
        return nf__err_set(err, NF_ERR_FORMAT, "%s: empty file, not a gzip stream", nf__esc(e, sizeof(e), path));
    return NF_OK;
}

static int nf_bunzip2(const unsigned char * in, size_t len, struct nf_obuf * o, const char * path, nf_err * err) {
    char e[1024];
    size_t pos = 0;
    int streams = 0;
    while (pos < len) {
        bz_stream b;
        memset(&b, 0, sizeof(b));
        if (BZ2_bzDecompressInit(&b, 0, 0) != BZ_OK) return nf_oom(path, e, sizeof(e), err);
        int br = BZ_OK;
        for (;;) {
            const size_t avail = len - pos;
            b.next_in = (char *) (in + pos);
            b.avail_in = (unsigned) (avail > NF_CHUNK ? NF_CHUNK : avail);
            const unsigned given = b.avail_in;
            if (nf_obuf_room(o) != 0) {
                BZ2_bzDecompressEnd(&b);
                return o->cap > o->max ? nf_too_big(o, path, e, sizeof(e), err) : nf_oom(path, e, sizeof(e), err);
            }
            b.next_out = o->p + o->n;
            b.avail_out = (unsigned) (o->cap - o->n);
            const unsigned out0 = b.avail_out;
            br = BZ2_bzDecompress(&b);
            pos += given - b.avail_in;
            o->n += out0 - b.avail_out;
            if (o->n > o->max) {
                BZ2_bzDecompressEnd(&b);
                return nf_too_big(o, path, e, sizeof(e), err);
            }
            if (br == BZ_STREAM_END) break;
            if (br != BZ_OK) {
                BZ2_bzDecompressEnd(&b);
                return nf__err_set(err, NF_ERR_FORMAT, "%s: corrupt bzip2 stream (libbz2 error %d)",
                                   nf__esc(e, sizeof(e), path), br);
            }
            if (pos >= len && out0 == b.avail_out) {
                BZ2_bzDecompressEnd(&b);
                return nf__err_set(err, NF_ERR_FORMAT, "%s: truncated bzip2 stream (ends before its end marker)",
                                   nf__esc(e, sizeof(e), path));
            }
        }
        BZ2_bzDecompressEnd(&b);
        streams++;
    }
    if (streams == 0)
        return nf__err_set(err, NF_ERR_FORMAT, "%s: empty file, not a bzip2 stream", nf__esc(e, sizeof(e), path));
    return NF_OK;
}

static int nf_unxz(const unsigned char * in, size_t len, struct nf_obuf * o, const char * path, nf_err * err) {
    char e[1024];
    lzma_stream x = LZMA_STREAM_INIT;
    /* LZMA_CONCATENATED: several .xz streams in a row, as Python's lzma reads them */
    if (lzma_stream_decoder(&x, UINT64_MAX, LZMA_CONCATENATED) != LZMA_OK) return nf_oom(path, e, sizeof(e), err);
    x.next_in = in;
    x.avail_in = len;
    lzma_action act = LZMA_RUN;
    for (;;) {
        if (x.avail_in == 0) act = LZMA_FINISH;
        if (nf_obuf_room(o) != 0) {
            lzma_end(&x);
            return o->cap > o->max ? nf_too_big(o, path, e, sizeof(e), err) : nf_oom(path, e, sizeof(e), err);
        }
        x.next_out = (uint8_t *) (o->p + o->n);
        x.avail_out = o->cap - o->n;
        const size_t out0 = x.avail_out;
        const lzma_ret r = lzma_code(&x, act);
        o->n += out0 - x.avail_out;
        if (o->n > o->max) {
            lzma_end(&x);
            return nf_too_big(o, path, e, sizeof(e), err);
        }
        if (r == LZMA_STREAM_END) break;
        if (r == LZMA_OK) continue;
        lzma_end(&x);
        if (r == LZMA_MEM_ERROR) return nf_oom(path, e, sizeof(e), err);
        if (r == LZMA_BUF_ERROR)
            return nf__err_set(err, NF_ERR_FORMAT, "%s: truncated xz stream", nf__esc(e, sizeof(e), path));
        return nf__err_set(err, NF_ERR_FORMAT, "%s: corrupt xz stream (%s)", nf__esc(e, sizeof(e), path),
                           r == LZMA_FORMAT_ERROR    ? "not in the .xz format"
                           : r == LZMA_DATA_ERROR    ? "data error"
                           : r == LZMA_OPTIONS_ERROR ? "unsupported options"
                                                     : "liblzma error");
    }
    lzma_end(&x);
    return NF_OK;
}

/* Zstandard: every frame in a row (ZSTD_decompressStream starts the next
 * one after a frame's end, skippable frames skipped), as Python's zstandard
 * reads a file; input that ends inside a frame is truncated */
static int nf_unzstd(const unsigned char * in, size_t len, struct nf_obuf * o, const char * path, nf_err * err) {
    char e[1024];
#ifdef NF_HAVE_ZSTD
    if (len == 0)
        return nf__err_set(err, NF_ERR_FORMAT, "%s: empty file, not a zstd stream", nf__esc(e, sizeof(e), path));
    ZSTD_DStream * z = ZSTD_createDStream();
    if (!z) return nf_oom(path, e, sizeof(e), err);
    ZSTD_inBuffer ib = {in, len, 0};
    size_t r = 1;
    while (ib.pos < ib.size) {
        if (nf_obuf_room(o) != 0) {
            ZSTD_freeDStream(z);
            return o->cap > o->max ? nf_too_big(o, path, e, sizeof(e), err) : nf_oom(path, e, sizeof(e), err);
        }
        ZSTD_outBuffer ob = {o->p + o->n, o->cap - o->n, 0};
        r = ZSTD_decompressStream(z, &ob, &ib);
        if (ZSTD_isError(r)) {
            char mm[256];
            snprintf(mm, sizeof(mm), "%s", ZSTD_getErrorName(r));
            ZSTD_freeDStream(z);
            return nf__err_set(err, NF_ERR_FORMAT, "%s: corrupt zstd stream at compressed byte %zu: %s",
                               nf__esc(e, sizeof(e), path), ib.pos, mm);
        }
        o->n += ob.pos;
        if (o->n > o->max) {
            ZSTD_freeDStream(z);
            return nf_too_big(o, path, e, sizeof(e), err);
        }
    }
    /* all input taken: a frame's end (r == 0), or output still held inside */
    while (r != 0) {
        if (nf_obuf_room(o) != 0) {
            ZSTD_freeDStream(z);
            return o->cap > o->max ? nf_too_big(o, path, e, sizeof(e), err) : nf_oom(path, e, sizeof(e), err);
        }
        ZSTD_outBuffer ob = {o->p + o->n, o->cap - o->n, 0};
        r = ZSTD_decompressStream(z, &ob, &ib);
        if (ZSTD_isError(r) || ob.pos == 0) {
            ZSTD_freeDStream(z);
            if (ZSTD_isError(r))
                return nf__err_set(err, NF_ERR_FORMAT, "%s: corrupt zstd stream: %s", nf__esc(e, sizeof(e), path),
                                   ZSTD_getErrorName(r));
            return nf__err_set(err, NF_ERR_FORMAT, "%s: truncated zstd stream (ends inside a frame)",
                               nf__esc(e, sizeof(e), path));
        }
        o->n += ob.pos;
        if (o->n > o->max) {
            ZSTD_freeDStream(z);
            return nf_too_big(o, path, e, sizeof(e), err);
        }
    }
    ZSTD_freeDStream(z);
    return NF_OK;
#else
    (void) in;
    (void) len;
    (void) o;
    return nf__err_set(err, NF_ERR_UNSUPPORTED,
                       "%s: a .zst table, and this nofall was built without libzstd (apt-get install libzstd-dev, "
                       "then rebuild; or decompress it: zstd -d)",
                       nf__esc(e, sizeof(e), path));
#endif
}

int nf__file_read_decompressed(const char * path, char ** data, size_t * len, size_t max_len, nf_err * err) {
    const enum nf_comp c = nf_comp_of(path);
    if (c == NF_COMP_NONE) return nf__file_read_all(path, data, len, max_len, err);
    char * raw = NULL;
    size_t rlen = 0;
    *data = NULL;
    *len = 0;
    NF_TRY(nf__file_read_all(path, &raw, &rlen, max_len, err));
    struct nf_obuf o = {NULL, 0, 0, max_len};
    const unsigned char * in = (const unsigned char *) raw;
    const int rc = c == NF_COMP_GZ    ? nf_gunzip(in, rlen, &o, path, err)
                   : c == NF_COMP_BZ2 ? nf_bunzip2(in, rlen, &o, path, err)
                   : c == NF_COMP_ZST ? nf_unzstd(in, rlen, &o, path, err)
                                      : nf_unxz(in, rlen, &o, path, err);
    free(raw);
    if (rc != NF_OK) {
        free(o.p);
        return rc;
    }
    char * p = realloc(o.p, o.n + 1);
    if (!p) {
        free(o.p);
        char e[1024];
        return nf_oom(path, e, sizeof(e), err);
    }
    p[o.n] = '\0';
    *data = p;
    *len = o.n;
    return NF_OK;
}
