/*
 * provenance.c -- what ties a result to its inputs: the files a model was
 * read from and their SHA-256 (OpenSSL's libcrypto, Debian libssl-dev).
 */
#include "model.h"
#include "nf-impl.h"

#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int nf_sha256_file(const char * path, char hex[65], nf_err * err) {
    hex[0] = '\0';
    FILE * f = fopen(path, "rb");
    if (!f) return nf__err_set(err, NF_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    EVP_MD_CTX * ctx = EVP_MD_CTX_new();
    if (!ctx || EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1) {
        EVP_MD_CTX_free(ctx);
        fclose(f);
        return nf__err_set(err, NF_ERR_GENERIC, "%s: SHA-256 unavailable (libcrypto)", path);
    }
    enum { CHUNK = 1 << 20 };
    unsigned char * buf = malloc(CHUNK);
    size_t got;
    int rc = buf ? NF_OK : nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    while (rc == NF_OK && (got = fread(buf, 1, CHUNK, f)) > 0)
        if (EVP_DigestUpdate(ctx, buf, got) != 1) break;
    free(buf);
    if (rc == NF_OK && ferror(f)) rc = nf__err_set(err, NF_ERR_IO, "%s: read error: %s", path, strerror(errno));
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    if (rc == NF_OK && (EVP_DigestFinal_ex(ctx, md, &n) != 1 || n != 32))
        rc = nf__err_set(err, NF_ERR_GENERIC, "%s: SHA-256 failed (libcrypto)", path);
    EVP_MD_CTX_free(ctx);
    fclose(f);
    if (rc != NF_OK) return rc;
    for (unsigned i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", md[i]);
    return NF_OK;
}

int nf_model_file_count(const nf_model * m) { return m->n_files; }

const char * nf_model_file_path(const nf_model * m, int i) { return i >= 0 && i < m->n_files ? m->files[i] : NULL; }

int nf_model_file_sha256(nf_model * m, int i, char hex[65], nf_err * err) {
    if (i < 0 || i >= m->n_files) return nf__err_set(err, NF_ERR_ARG, "model file %d: out of range", i);
    if (!m->sha256[i][0]) NF_TRY(nf_sha256_file(m->files[i], m->sha256[i], err));
    memcpy(hex, m->sha256[i], 65);
    return NF_OK;
}
