/* fileutil.c -- regular-file opens and whole-file reads, a strict JSON front
 * end over cJSON, JSON files, paths, escaping of untrusted names. */
#include "nf-io.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void nf__path_join(char * out, size_t n, const char * dir, const char * file) {
    size_t l = strlen(dir);
    if (l > 0 && dir[l - 1] == '/')
        snprintf(out, n, "%s%s", dir, file);
    else
        snprintf(out, n, "%s/%s", dir, file);
}

/* ---- escaping ------------------------------------------------------------------ */

/* length of the valid UTF-8 sequence at s (1..4), or 0 */
static size_t nf__utf8_len(const unsigned char * s, size_t avail) {
    const unsigned char c = s[0];
    if (c < 0x80) return 1;
    size_t n;
    unsigned min;
    unsigned cp;
    if ((c & 0xe0) == 0xc0) {
        n = 2;
        cp = c & 0x1f;
        min = 0x80;
    } else if ((c & 0xf0) == 0xe0) {
        n = 3;
        cp = c & 0x0f;
        min = 0x800;
    } else if ((c & 0xf8) == 0xf0) {
        n = 4;
        cp = c & 0x07;
        min = 0x10000;
    } else
        return 0;
    if (n > avail) return 0;
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
    return n;
}

int nf__utf8_valid(const char * s, size_t n) {
    const unsigned char * u = (const unsigned char *) s;
    for (size_t i = 0; i < n;) {
        const size_t k = nf__utf8_len(u + i, n - i);
        if (!k) return 0;
        i += k;
    }
    return 1;
}

const char * nf__esc(char * buf, size_t n, const char * s) {
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    const unsigned char * u = (const unsigned char *) (s ? s : "(null)");
    const size_t len = strlen((const char *) u);
    if (n == 0) return buf;
    for (size_t i = 0; i < len;) {
        size_t k = nf__utf8_len(u + i, len - i);
        /* C0 controls, DEL, C1 controls (U+0080..U+009F) and invalid bytes */
        const int ctl = k == 0 || (k == 1 && (u[i] < 0x20 || u[i] == 0x7f)) ||
                        (k == 2 && u[i] == 0xc2 && u[i + 1] < 0xa0);
        if (!ctl) {
            if (o + k >= n) break;
            memcpy(buf + o, u + i, k);
            o += k;
            i += k;
            continue;
        }
        const size_t m = k ? k : 1;
        for (size_t j = 0; j < m; j++) {
            if (o + 4 >= n) goto out;
            buf[o++] = '\\';
            buf[o++] = 'x';
            buf[o++] = hex[u[i + j] >> 4];
            buf[o++] = hex[u[i + j] & 15];
        }
        i += m;
    }
out:
    buf[o] = '\0';
    return buf;
}

/* ---- files --------------------------------------------------------------------- */

int nf__open_regular(const char * path, int * fd_out, uint64_t * size, nf_err * err) {
    *fd_out = -1;
    char e[1024];
    /* O_NONBLOCK: a FIFO or a device must not block the open; it is refused below */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) return nf__err_set(err, NF_ERR_IO, "%s: cannot open: %s", nf__esc(e, sizeof(e), path), strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        const int en = errno;
        close(fd);
        return nf__err_set(err, NF_ERR_IO, "%s: cannot stat: %s", nf__esc(e, sizeof(e), path), strerror(en));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        const char * what = S_ISDIR(sb.st_mode)    ? "is a directory"
                            : S_ISFIFO(sb.st_mode) ? "is a FIFO"
                            : S_ISCHR(sb.st_mode)  ? "is a character device"
                            : S_ISBLK(sb.st_mode)  ? "is a block device"
                            : S_ISSOCK(sb.st_mode) ? "is a socket"
                                                   : "is not a regular file";
        return nf__err_set(err, NF_ERR_IO, "%s: %s, not a regular file", nf__esc(e, sizeof(e), path), what);
    }
    const int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) (void) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    *fd_out = fd;
    *size = (uint64_t) sb.st_size;
    return NF_OK;
}

int nf__open_regular_flag(const char * flag, const char * path, int * fd, uint64_t * size, nf_err * err) {
    nf_err le = {0};
    const int rc = nf__open_regular(path, fd, size, &le);
    return rc == NF_OK ? NF_OK : nf__err_set(err, rc, "%s %s", flag, le.msg);
}

int nf__file_read_all(const char * path, char ** data, size_t * len, size_t max_len, nf_err * err) {
    *data = NULL;
    *len = 0;
    int fd;
    uint64_t sz;
    char e[1024];
    NF_TRY(nf__open_regular(path, &fd, &sz, err));
    if (sz > max_len) {
        close(fd);
        return nf__err_set(err, NF_ERR_FORMAT, "%s: file is %llu bytes, more than the %zu allowed",
                           nf__esc(e, sizeof(e), path), (unsigned long long) sz, max_len);
    }
    char * buf = malloc((size_t) sz + 1);
    if (!buf) {
        close(fd);
        return nf__err_set(err, NF_ERR_NOMEM, "%s: out of memory", nf__esc(e, sizeof(e), path));
    }
    size_t got = 0;
    while (got < sz) {
        ssize_t r = read(fd, buf + got, (size_t) sz - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            const int en = r < 0 ? errno : 0;
            free(buf);
            close(fd);
            return nf__err_set(err, NF_ERR_IO, "%s: short read%s%s", nf__esc(e, sizeof(e), path),
                               en ? ": " : " (file shrank?)", en ? strerror(en) : "");
        }
        got += (size_t) r;
    }
    close(fd);
    buf[sz] = '\0';
    *data = buf;
    *len = (size_t) sz;
    return NF_OK;
}

/* ---- strict JSON ----------------------------------------------------------------- */

/* What cJSON lets through but JSON (RFC 8259; Python's json and serde_json,
 * which the reference implementations use) does not: invalid UTF-8, raw
 * control characters, a byte-order mark, numbers like +1 / 01 / .5 / 1.;
 * and what a C string cannot hold: \u0000 (unless nul_ok: data files drop it
 * after the check, nf__json_drop_nul). Returns the offset of the first
 * offence, or -1. */
static long nf__json_lint(const unsigned char * s, size_t n, int nul_ok, const char ** why) {
    int in_str = 0;
    if (n >= 3 && s[0] == 0xef && s[1] == 0xbb && s[2] == 0xbf) {
        *why = "a byte-order mark";
        return 0;
    }
    for (size_t i = 0; i < n;) {
        const unsigned char c = s[i];
        if (c >= 0x80) {
            const size_t k = nf__utf8_len(s + i, n - i);
            if (!k) {
                *why = "invalid UTF-8";
                return (long) i;
            }
            if (!in_str) {
                *why = "a character outside a string";
                return (long) i;
            }
            i += k;
            continue;
        }
        if (in_str) {
            if (c < 0x20) {
                *why = "a raw control character in a string";
                return (long) i;
            }
            if (c == '"')
                in_str = 0;
            else if (c == '\\') {
                if (i + 1 < n && s[i + 1] == 'u') {
                    unsigned v = 0;
                    int ok = i + 6 <= n;
                    for (size_t j = i + 2; ok && j < i + 6; j++) {
                        const unsigned char h = s[j];
                        ok = (h >= '0' && h <= '9') || ((h | 0x20) >= 'a' && (h | 0x20) <= 'f');
                        v = v * 16 + (unsigned) (h <= '9' ? h - '0' : (h | 0x20) - 'a' + 10);
                    }
                    if (!ok) {
                        *why = "a malformed \\u escape";
                        return (long) i;
                    }
                    if (v == 0 && !nul_ok) {
                        *why = "\\u0000 (a NUL character) in a string";
                        return (long) i;
                    }
                    i += 6;
                    continue;
                }
                i += 2;
                continue;
            }
            i++;
            continue;
        }
        if (c == '"') {
            in_str = 1;
            i++;
            continue;
        }
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
            i++;
            continue;
        }
        if (c < 0x20 || c == 0x7f) {
            *why = "a control character outside a string";
            return (long) i;
        }
        if (c == '-' || c == '+' || c == '.' || (c >= '0' && c <= '9')) {
            /* a number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? and nothing numeric after it */
            const size_t b = i;
            size_t j = i;
            int ok = 1;
            if (s[j] == '-') j++;
            if (j < n && s[j] == '0')
                j++;
            else if (j < n && s[j] >= '1' && s[j] <= '9')
                while (j < n && s[j] >= '0' && s[j] <= '9') j++;
            else
                ok = 0;
            if (ok && j < n && s[j] == '.') {
                j++;
                if (!(j < n && s[j] >= '0' && s[j] <= '9')) ok = 0;
                while (j < n && s[j] >= '0' && s[j] <= '9') j++;
            }
            if (ok && j < n && (s[j] == 'e' || s[j] == 'E')) {
                j++;
                if (j < n && (s[j] == '+' || s[j] == '-')) j++;
                if (!(j < n && s[j] >= '0' && s[j] <= '9')) ok = 0;
                while (j < n && s[j] >= '0' && s[j] <= '9') j++;
            }
            if (ok && j < n &&
                (s[j] == '.' || s[j] == '+' || s[j] == '-' || s[j] == 'e' || s[j] == 'E' ||
                 (s[j] >= '0' && s[j] <= '9')))
                ok = 0;
            if (!ok) {
                *why = "a malformed number";
                return (long) b;
            }
            i = j;
            continue;
        }
        i++;
    }
    return -1;
}

static int nf__json_cmp_key(const void * a, const void * b) {
    return strcmp((*(const cJSON * const *) a)->string, (*(const cJSON * const *) b)->string);
}

/* the first key that appears twice in one object, anywhere in v */
static const cJSON * nf__json_dup_key(const cJSON * v, int depth) {
    if (depth > 1100) return NULL; /* cJSON's own nesting limit is lower */
    if (cJSON_IsObject(v)) {
        size_t k = 0;
        for (const cJSON * c = v->child; c; c = c->next) k++;
        if (k > 1 && k <= 16) {
            for (const cJSON * a = v->child; a; a = a->next)
                for (const cJSON * b = a->next; b; b = b->next)
                    if (strcmp(a->string, b->string) == 0) return b;
        } else if (k > 16) {
            const cJSON ** idx = malloc(k * sizeof(*idx));
            if (idx) {
                size_t i = 0;
                for (const cJSON * c = v->child; c; c = c->next) idx[i++] = c;
                qsort(idx, k, sizeof(*idx), nf__json_cmp_key);
                const cJSON * d = NULL;
                for (i = 1; i < k && !d; i++)
                    if (strcmp(idx[i - 1]->string, idx[i]->string) == 0) d = idx[i];
                free(idx);
                if (d) return d;
            }
        }
    }
    if (cJSON_IsObject(v) || cJSON_IsArray(v)) {
        for (const cJSON * c = v->child; c; c = c->next) {
            const cJSON * d = nf__json_dup_key(c, depth + 1);
            if (d) return d;
        }
    }
    return NULL;
}

/* A copy of valid JSON (nf__json_lint passed) without its \u0000 escapes: the
 * strings lose their NUL characters, as BERT's normaliser drops U+0000 before
 * tokenising (cJSON would end the string there). *len updated; NULL: no memory. */
static char * nf__json_drop_nul(const char * s, size_t * len) {
    const size_t n = *len;
    char * o = malloc(n + 1);
    if (!o) return NULL;
    size_t k = 0;
    int in_str = 0;
    for (size_t i = 0; i < n;) {
        if (in_str && s[i] == '\\') {
            if (s[i + 1] == 'u' && memcmp(s + i + 2, "0000", 4) == 0) {
                i += 6;
                continue;
            }
            o[k++] = s[i++];
            o[k++] = s[i++];
            continue;
        }
        if (s[i] == '"') in_str = !in_str;
        o[k++] = s[i++];
    }
    o[k] = '\0';
    *len = k;
    return o;
}

static int nf__json_parse_opt(const char * txt, size_t len, const char * what, int data, cJSON ** out, nf_err * err);

int nf__json_parse(const char * txt, size_t len, const char * what, cJSON ** out, nf_err * err) {
    return nf__json_parse_opt(txt, len, what, 0, out, err);
}

int nf__json_parse_data(const char * txt, size_t len, const char * what, cJSON ** out, nf_err * err) {
    return nf__json_parse_opt(txt, len, what, 1, out, err);
}

static int nf__json_parse_opt(const char * txt, size_t len, const char * what, int data, cJSON ** out, nf_err * err) {
    *out = NULL;
    const char * why = NULL;
    char e[1024];
    const long bad = nf__json_lint((const unsigned char *) txt, len, data, &why);
    if (bad >= 0)
        return nf__err_set(err, NF_ERR_FORMAT, "%s: not valid JSON: %s at byte %ld", nf__esc(e, sizeof(e), what), why,
                           bad);
    if (data) {
        char * copy = nf__json_drop_nul(txt, &len);
        if (!copy) return nf__err_set(err, NF_ERR_NOMEM, "out of memory reading %s", nf__esc(e, sizeof(e), what));
        const int rc = nf__json_parse_opt(copy, len, what, 0, out, err);
        free(copy);
        return rc;
    }
    const char * end = NULL;
    cJSON * doc = cJSON_ParseWithLengthOpts(txt, len, &end, 0);
    if (!doc) {
        const long at = end && end >= txt && end <= txt + len ? (long) (end - txt) : -1;
        if (at >= 0)
            return nf__err_set(err, NF_ERR_FORMAT, "%s: not valid JSON (error at byte %ld)",
                               nf__esc(e, sizeof(e), what), at);
        return nf__err_set(err, NF_ERR_FORMAT, "%s: not valid JSON", nf__esc(e, sizeof(e), what));
    }
    /* the whole input is the one value (cJSON stops after it) */
    if (end)
        while (end < txt + len && (*end == ' ' || *end == '\t' || *end == '\n' || *end == '\r')) end++;
    if (!end || end != txt + len) {
        cJSON_Delete(doc);
        return nf__err_set(err, NF_ERR_FORMAT, "%s: not valid JSON: trailing data after the value at byte %ld",
                           nf__esc(e, sizeof(e), what), end ? (long) (end - txt) : -1L);
    }
    const cJSON * d = nf__json_dup_key(doc, 0);
    if (d) {
        char k[512];
        nf__esc(k, sizeof(k), d->string);
        cJSON_Delete(doc);
        return nf__err_set(err, NF_ERR_FORMAT,
                           "%s: key \"%s\" appears twice in one object (refused: readers disagree on which one counts)",
                           nf__esc(e, sizeof(e), what), k);
    }
    *out = doc;
    return NF_OK;
}

static int nf__json_read_opt(const char * path, int data, cJSON ** out, nf_err * err) {
    *out = NULL;
    char * txt;
    size_t len;
    NF_TRY(nf__file_read_all(path, &txt, &len, 16u << 20, err));
    int rc = nf__json_parse_opt(txt, len, path, data, out, err);
    free(txt);
    return rc;
}

int nf__json_read_file(const char * path, cJSON ** out, nf_err * err) { return nf__json_read_opt(path, 0, out, err); }

int nf__json_read_data(const char * path, cJSON ** out, nf_err * err) { return nf__json_read_opt(path, 1, out, err); }

/* ---- writing ---------------------------------------------------------------------- */

int nf__tmp_create(const char * path, char * tmp, size_t n, int * fd_out, nf_err * err) {
    static unsigned counter = 0;
    char e[1024];
    const char * slash = strrchr(path, '/');
    const int dl = slash ? (int) (slash - path + 1) : 0;
    const char * base = slash ? slash + 1 : path;
    for (int attempt = 0; attempt < 100; attempt++) {
        int w = snprintf(tmp, n, "%.*s.%s.%ld.%u.tmp", dl, path, base, (long) getpid(), counter++);
        if (w < 0 || (size_t) w >= n)
            return nf__err_set(err, NF_ERR_IO, "%s: path too long", nf__esc(e, sizeof(e), path));
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd >= 0) {
            *fd_out = fd;
            return NF_OK;
        }
        if (errno != EEXIST)
            return nf__err_set(err, NF_ERR_IO, "%s: cannot create: %s", nf__esc(e, sizeof(e), tmp), strerror(errno));
    }
    return nf__err_set(err, NF_ERR_IO, "%s: cannot find a free temporary name", nf__esc(e, sizeof(e), path));
}

int nf__json_write_fp(FILE * f, const cJSON * doc) {
    char * txt = cJSON_Print(doc);
    if (!txt) return 0;
    int ok = fputs(txt, f) >= 0 && fputc('\n', f) != EOF;
    cJSON_free(txt);
    return ok;
}

int nf__json_write_file(const char * path, const cJSON * doc, nf_err * err) {
    char tmp[4096], e[1024];
    int fd;
    NF_TRY(nf__tmp_create(path, tmp, sizeof(tmp), &fd, err));
    FILE * f = fdopen(fd, "wb");
    if (!f) {
        close(fd);
        remove(tmp);
        return nf__err_set(err, NF_ERR_IO, "%s: cannot open: %s", nf__esc(e, sizeof(e), tmp), strerror(errno));
    }
    int ok = nf__json_write_fp(f, doc);
    ok = fflush(f) == 0 && ok;
    ok = ok && fsync(fileno(f)) == 0;
    const int en = errno;
    ok = (fclose(f) == 0) && ok;
    if (!ok) {
        remove(tmp);
        return nf__err_set(err, NF_ERR_IO, "%s: write failed: %s", nf__esc(e, sizeof(e), path), strerror(en));
    }
    if (rename(tmp, path) != 0) {
        const int en2 = errno;
        remove(tmp);
        return nf__err_set(err, NF_ERR_IO, "%s: rename failed: %s", nf__esc(e, sizeof(e), path), strerror(en2));
    }
    return NF_OK;
}

int nf__mkdir_p(const char * dir, nf_err * err) {
    char p[4096], e[1024];
    size_t n = strlen(dir);
    if (n == 0 || n >= sizeof(p))
        return nf__err_set(err, NF_ERR_IO, "bad directory name '%s'", nf__esc(e, sizeof(e), dir));
    memcpy(p, dir, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (p[i] != '/' && p[i] != '\0') continue;
        const char c = p[i];
        p[i] = '\0';
        if (mkdir(p, 0777) != 0 && errno != EEXIST) {
            return nf__err_set(err, NF_ERR_IO, "%s: cannot create directory: %s", nf__esc(e, sizeof(e), p),
                               strerror(errno));
        }
        p[i] = c;
    }
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return nf__err_set(err, NF_ERR_IO, "%s: not a directory", nf__esc(e, sizeof(e), dir));
    return NF_OK;
}

/* repr(float): the shortest digits that read back (the closest such), in
 * fixed notation when -4 < decpt <= 16, else d.ddde[+-]XX (pystrtod.c 'r') */
void nf__py_float_repr(double v, char * buf, size_t n) {
    if (isnan(v)) {
        snprintf(buf, n, "nan");
        return;
    }
    if (isinf(v)) {
        snprintf(buf, n, v > 0 ? "inf" : "-inf");
        return;
    }
    if (v == 0) {
        snprintf(buf, n, signbit(v) ? "-0.0" : "0.0");
        return;
    }
    char t[64];
    int p;
    for (p = 1; p <= 17; p++) {
        snprintf(t, sizeof(t), "%.*e", p - 1, v);
        if (strtod(t, NULL) == v) break;
    }
    const char * s = t;
    const int neg = *s == '-';
    if (neg) s++;
    char dig[32];
    int nd = 0;
    for (; *s && *s != 'e'; s++)
        if (*s != '.') dig[nd++] = *s;
    while (nd > 1 && dig[nd - 1] == '0') nd--;
    dig[nd] = 0;
    const int decpt = atoi(s + 1) + 1; /* v = 0.d1d2... x 10^decpt */
    char out[400];
    size_t k = 0;
    if (neg) out[k++] = '-';
    if (decpt <= -4 || decpt > 16) {
        out[k++] = dig[0];
        if (nd > 1) {
            out[k++] = '.';
            for (int i = 1; i < nd; i++) out[k++] = dig[i];
        }
        snprintf(out + k, sizeof(out) - k, "e%c%02d", decpt - 1 < 0 ? '-' : '+', abs(decpt - 1));
    } else if (decpt <= 0) {
        out[k++] = '0';
        out[k++] = '.';
        for (int i = 0; i < -decpt; i++) out[k++] = '0';
        for (int i = 0; i < nd; i++) out[k++] = dig[i];
        out[k] = 0;
    } else {
        for (int i = 0; i < decpt; i++) out[k++] = i < nd ? dig[i] : '0';
        out[k++] = '.';
        if (decpt >= nd) out[k++] = '0';
        for (int i = decpt; i < nd; i++) out[k++] = dig[i];
        out[k] = 0;
    }
    snprintf(buf, n, "%s", out);
}
