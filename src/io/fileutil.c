/* fileutil.c -- whole-file reads, JSON files, paths. */
#include "nf-io.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

void nf__path_join(char * out, size_t n, const char * dir, const char * file) {
    size_t l = strlen(dir);
    if (l > 0 && dir[l - 1] == '/') snprintf(out, n, "%s%s", dir, file);
    else                            snprintf(out, n, "%s/%s", dir, file);
}

int nf__file_read_all(const char * path, char ** data, size_t * len, size_t max_len, nf_err * err) {
    *data = NULL;
    *len = 0;
    FILE * f = fopen(path, "rb");
    if (!f) return nf__err_set(err, NF_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    if (fseek(f, 0, SEEK_END) != 0) { fclose(f); return nf__err_set(err, NF_ERR_IO, "%s: cannot seek", path); }
    long sz = ftell(f);
    if (sz < 0) { fclose(f); return nf__err_set(err, NF_ERR_IO, "%s: cannot tell size", path); }
    if ((size_t) sz > max_len) {
        fclose(f);
        return nf__err_set(err, NF_ERR_FORMAT, "%s: file is %ld bytes, more than the %zu allowed", path, sz, max_len);
    }
    rewind(f);
    char * buf = malloc((size_t) sz + 1);
    if (!buf) { fclose(f); return nf__err_set(err, NF_ERR_NOMEM, "%s: out of memory", path); }
    if (sz > 0 && fread(buf, 1, (size_t) sz, f) != (size_t) sz) {
        free(buf);
        fclose(f);
        return nf__err_set(err, NF_ERR_IO, "%s: short read", path);
    }
    fclose(f);
    buf[sz] = '\0';
    *data = buf;
    *len = (size_t) sz;
    return NF_OK;
}

int nf__json_read_file(const char * path, cJSON ** out, nf_err * err) {
    *out = NULL;
    char * txt;
    size_t len;
    NF_TRY(nf__file_read_all(path, &txt, &len, 16u << 20, err));
    cJSON * doc = cJSON_ParseWithLength(txt, len);
    free(txt);
    if (!doc) return nf__err_set(err, NF_ERR_FORMAT, "%s: not valid JSON", path);
    *out = doc;
    return NF_OK;
}

int nf__json_write_file(const char * path, const cJSON * doc, nf_err * err) {
    char tmp[4096];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    char * txt = cJSON_Print(doc);
    if (!txt) return nf__err_set(err, NF_ERR_NOMEM, "%s: cannot serialise JSON", path);
    FILE * f = fopen(tmp, "wb");
    if (!f) { cJSON_free(txt); return nf__err_set(err, NF_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno)); }
    int ok = fputs(txt, f) >= 0 && fputc('\n', f) != EOF;
    ok = (fclose(f) == 0) && ok;
    cJSON_free(txt);
    if (!ok) { remove(tmp); return nf__err_set(err, NF_ERR_IO, "%s: write failed", tmp); }
    if (rename(tmp, path) != 0) { remove(tmp); return nf__err_set(err, NF_ERR_IO, "%s: rename failed: %s", path, strerror(errno)); }
    return NF_OK;
}

int nf__mkdir_p(const char * dir, nf_err * err) {
    char p[4096];
    size_t n = strlen(dir);
    if (n == 0 || n >= sizeof(p)) return nf__err_set(err, NF_ERR_IO, "bad directory name '%s'", dir);
    memcpy(p, dir, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (p[i] != '/' && p[i] != '\0') continue;
        const char c = p[i];
        p[i] = '\0';
        if (mkdir(p, 0777) != 0 && errno != EEXIST) {
            return nf__err_set(err, NF_ERR_IO, "%s: cannot create directory: %s", p, strerror(errno));
        }
        p[i] = c;
    }
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) return nf__err_set(err, NF_ERR_IO, "%s: not a directory", dir);
    return NF_OK;
}
