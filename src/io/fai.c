/* fai.c -- the FASTA index (.fai) beside a FASTA, checked before htslib reads it.
 *
 * A .fai is a file like any other input: htslib's faidx trusts it (a line
 * of 0 bases makes it divide by zero, an offset past the end makes it seek
 * there). Each line is NAME, LENGTH, OFFSET, LINEBASES, LINEWIDTH and, for
 * FASTQ, QUALOFFSET, tab-separated (samtools faidx's format). Checked here:
 * 5 or 6 fields, a name without NUL or white space (htslib ends it
 * there), each number a decimal integer in int64 (LINEBASES, LINEWIDTH in
 * int), LINEBASES > 0 for a non-empty sequence, LINEWIDTH >= LINEBASES, and, for a plain
 * (uncompressed) FASTA, the bytes the record spans within the file. A
 * bgzip-compressed FASTA's offsets count uncompressed bytes: there the
 * fields are checked, the span is htslib's to check through its .gzi. */
#include "nf-io.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* a decimal integer in [0, INT64_MAX], the whole of [s, end) */
static int fai_num(const char * s, const char * end, int64_t * v) {
    if (s == end) return 0;
    int64_t x = 0;
    for (; s < end; s++) {
        if (*s < '0' || *s > '9') return 0;
        if (x > (INT64_MAX - (*s - '0')) / 10) return 0;
        x = x * 10 + (*s - '0');
    }
    *v = x;
    return 1;
}

int nf__fai_check(const char * fasta, nf_err * err) {
    char fai[4200], e[1024];
    if (snprintf(fai, sizeof(fai), "%s.fai", fasta) >= (int) sizeof(fai))
        return nf__err_set(err, NF_ERR_ARG, "%s: path too long", nf__esc(e, sizeof(e), fasta));
    /* the FASTA first: a regular file (faidx seeks in it; htslib would block
     * opening a FIFO with no writer) */
    int fd;
    uint64_t fasta_size;
    NF_TRY(nf__open_regular(fasta, &fd, &fasta_size, err));
    struct stat sb;
    if (stat(fai, &sb) != 0) { /* none: htslib builds it from the FASTA */
        close(fd);
        return NF_OK;
    }
    unsigned char magic[2] = {0, 0};
    const int gz = read(fd, magic, 2) == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
    close(fd);
    char * txt = NULL;
    size_t len = 0;
    NF_TRY(nf__file_read_all(fai, &txt, &len, (size_t) 1 << 30, err));
    const int rc = nf__fai_check_text(txt, len, gz ? UINT64_MAX : fasta_size, fai, fasta, err);
    free(txt);
    return rc;
}

int nf__fai_check_text(const char * txt, size_t len, uint64_t fasta_size, const char * fai, const char * fasta,
                       nf_err * err) {
    char efai[1024], efa[1024];
    nf__esc(efai, sizeof(efai), fai);
    nf__esc(efa, sizeof(efa), fasta);
    int rc = NF_OK;
    int64_t line = 0;
    const char *p = txt, *end = txt + len;
#define FAI_BAD(...)                                                                                               \
    do {                                                                                                           \
        char what_[512];                                                                                           \
        snprintf(what_, sizeof(what_), __VA_ARGS__);                                                               \
        rc = nf__err_set(err, NF_ERR_FORMAT,                                                                       \
                         "%s line %lld: %s (the index does not describe %s: delete it and it is rebuilt from the " \
                         "FASTA)",                                                                                 \
                         efai, (long long) line, what_, efa);                                                      \
        goto done;                                                                                                 \
    } while (0)
    while (p < end) {
        const char * nl = memchr(p, '\n', (size_t) (end - p));
        const char * le = nl ? nl : end;
        line++;
        if (le > p && le[-1] == '\r') le--;
        const char * f[7];
        int nf = 0;
        f[nf++] = p;
        for (const char * q = p; q < le && nf < 7; q++)
            if (*q == '\t') f[nf++] = q + 1;
        if (nf != 5 && nf != 6) FAI_BAD("%d fields, an index line has 5 or 6 (tab-separated)", nf);
        const char * fe[7];
        for (int i = 0; i < nf; i++) fe[i] = i + 1 < nf ? f[i + 1] - 1 : le;
        if (fe[0] == f[0]) FAI_BAD("an empty sequence name");
        /* htslib's name ends at the first NUL or white space and it reads the
         * numbers after it: "c 8<TAB>11<TAB>0..." would be name c, LINEBASES 0 */
        for (const char * q = f[0]; q < fe[0]; q++)
            if (*q == '\0' || *q == ' ' || (*q >= '\t' && *q <= '\r'))
                FAI_BAD("the sequence name has a %s (byte %lld): htslib reads the fields after it",
                        *q == '\0' ? "NUL byte" : "white space", (long long) (q - f[0]) + 1);
        static const char * const names[] = {"", "LENGTH", "OFFSET", "LINEBASES", "LINEWIDTH", "QUALOFFSET"};
        int64_t v[6] = {0};
        for (int i = 1; i < nf; i++)
            if (!fai_num(f[i], fe[i], &v[i])) FAI_BAD("%s is not a non-negative integer", names[i]);
        const int64_t length = v[1], offset = v[2], lbases = v[3], lwidth = v[4];
        if (lbases > INT32_MAX || lwidth > INT32_MAX) /* htslib reads both as int */
            FAI_BAD("LINEBASES %lld / LINEWIDTH %lld: each at most %d", (long long) lbases, (long long) lwidth,
                    INT32_MAX);
        if (length > 0 && lbases == 0) FAI_BAD("LINEBASES is 0 for a sequence of %lld bases", (long long) length);
        if (lwidth < lbases)
            FAI_BAD("LINEWIDTH %lld is less than LINEBASES %lld", (long long) lwidth, (long long) lbases);
        if (fasta_size != UINT64_MAX && length > 0) {
            /* the last base's byte: offset + (length - 1) / lbases lines + the rest */
            const int64_t full = (length - 1) / lbases, rest = (length - 1) % lbases;
            if (lwidth > 0 && full > (INT64_MAX - rest - offset) / lwidth)
                FAI_BAD("the record's %lld bases overflow the file's offsets", (long long) length);
            const int64_t last = offset + full * lwidth + rest;
            if ((uint64_t) last >= fasta_size)
                FAI_BAD("the record ends at byte %lld, past the end of %s (%llu bytes)", (long long) last + 1, efa,
                        (unsigned long long) fasta_size);
        }
        p = nl ? nl + 1 : end;
    }
#undef FAI_BAD
done:
    return rc;
}

/* ---- the raw bytes of a region (htslib drops every byte that is not
 * isgraph() from a sequence line -- a NUL, a control byte, a space -- and
 * reads on, shifting every base after it: checked here on the lines the
 * region spans, read at the index's offsets) --------------------------------- */

int nf__fasta_raw_open(struct nf_fasta_raw * r, const char * fasta, nf_err * err) {
    memset(r, 0, sizeof(*r));
    r->fd = -1;
    r->fasta = fasta;
    NF_TRY(nf__open_regular(fasta, &r->fd, &r->size, err));
    unsigned char magic[2] = {0, 0};
    r->gz = pread(r->fd, magic, 2, 0) == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
    if (r->gz) return NF_OK; /* offsets count uncompressed bytes: not checked here */
    char fai[4200], e[1024];
    if (snprintf(fai, sizeof(fai), "%s.fai", fasta) >= (int) sizeof(fai)) {
        nf__fasta_raw_close(r);
        return nf__err_set(err, NF_ERR_ARG, "%s: path too long", nf__esc(e, sizeof(e), fasta));
    }
    const int rc = nf__file_read_all(fai, &r->fai, &r->fai_len, (size_t) 1 << 30, err);
    if (rc != NF_OK) nf__fasta_raw_close(r);
    return rc;
}

void nf__fasta_raw_close(struct nf_fasta_raw * r) {
    if (r->fd >= 0) close(r->fd);
    free(r->fai);
    free(r->last_name);
    r->fai = r->last_name = NULL;
    r->fd = -1;
}

/* contig's LENGTH, OFFSET, LINEBASES, LINEWIDTH from the (checked) index */
static int fai_find(struct nf_fasta_raw * r, const char * contig, int64_t v[5]) {
    const size_t cl = strlen(contig);
    if (r->last_name && strlen(r->last_name) == cl && memcmp(r->last_name, contig, cl) == 0) {
        memcpy(v, r->last_v, sizeof(r->last_v));
        return 1;
    }
    const char *p = r->fai, *end = r->fai + r->fai_len;
    while (p < end) {
        const char * nl = memchr(p, '\n', (size_t) (end - p));
        const char * le = nl ? nl : end;
        const char * tab = memchr(p, '\t', (size_t) (le - p));
        if (tab && (size_t) (tab - p) == cl && memcmp(p, contig, cl) == 0) {
            const char * q = tab + 1;
            for (int i = 1; i < 5; i++) {
                const char * t = memchr(q, '\t', (size_t) (le - q));
                if (!fai_num(q, t ? t : le, &v[i])) return 0;
                q = t ? t + 1 : le;
            }
            free(r->last_name);
            r->last_name = strndup(contig, cl);
            memcpy(r->last_v, v, sizeof(r->last_v));
            return 1;
        }
        p = nl ? nl + 1 : end;
    }
    return 0;
}

int nf__fasta_raw_check(struct nf_fasta_raw * r, const char * contig, int64_t beg, int64_t end, nf_err * err) {
    if (r->gz || end <= beg) return NF_OK;
    int64_t v[5] = {0};
    char e[1024], ec[512];
    if (!fai_find(r, contig, v)) return NF_OK; /* htslib has said whether the contig is there */
    const int64_t length = v[1], offset = v[2], lb = v[3], lw = v[4];
    if (lb <= 0 || end > length) return NF_OK;
    unsigned char buf[65536];
    for (int64_t line = beg / lb; line <= (end - 1) / lb; line++) {
        const int64_t at = offset + line * lw, nb = length - line * lb < lb ? length - line * lb : lb;
        const int64_t want = (line == (length - 1) / lb) ? nb : lw; /* the record's last line: its bases */
        for (int64_t done = 0; done < want;) {
            const int64_t chunk = want - done < (int64_t) sizeof(buf) ? want - done : (int64_t) sizeof(buf);
            const ssize_t got = pread(r->fd, buf, (size_t) chunk, (off_t) (at + done));
            if (got <= 0)
                return nf__err_set(err, NF_ERR_IO, "%s: cannot read record '%s' line %lld: %s",
                                   nf__esc(e, sizeof(e), r->fasta), nf__esc(ec, sizeof(ec), contig),
                                   (long long) line + 1, got < 0 ? strerror(errno) : "the file ends early");
            for (ssize_t k = 0; k < got; k++) {
                const int64_t col = done + k;
                const int c = buf[k];
                const int ok = col < nb ? (c > 0x20 && c < 0x7f) : (c == '\n' || c == '\r');
                if (!ok)
                    return nf__err_set(err, NF_ERR_FORMAT,
                                       "%s: record '%s' sequence line %lld (byte %lld of the file): %s0x%02x where "
                                       "%s (htslib would drop it and shift every base after it)",
                                       nf__esc(e, sizeof(e), r->fasta), nf__esc(ec, sizeof(ec), contig),
                                       (long long) line + 1, (long long) (at + col), c == 0 ? "a NUL byte " : "byte ",
                                       c, col < nb ? "a sequence letter belongs" : "the line should end");
            }
            done += got;
        }
    }
    return NF_OK;
}
