/* test-hostile-io.c -- regression tests for the hostile-input findings of
 * issue #11, at the reader level: each case failed (was accepted, hung,
 * read out of bounds or cast out of range) before the fix. Files, not
 * in-memory buffers, so the whole open path is under test. alarm() turns a
 * hang (a FIFO opened blocking) into a failure. */
#include "nf-test.h"
#include "io/nf-io.h"
#include "models/mitra-impl.h"

#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static char tmpdir[512];

static void path_of(char * out, size_t n, const char * name) { snprintf(out, n, "%s/%s", tmpdir, name); }

static void write_bytes(const char * name, const void * data, size_t n) {
    char p[1024];
    path_of(p, sizeof(p), name);
    FILE * f = fopen(p, "wb");
    if (n) fwrite(data, 1, n, f);
    fclose(f);
}

/* a safetensors file: 8-byte length of hdr (hlen bytes, may hold NULs), then data_bytes */
static int st_case(const char * name, const char * hdr, size_t hlen, size_t data_bytes, nf_err * err) {
    unsigned char * b = calloc(1, 8 + hlen + data_bytes + 1);
    for (int i = 0; i < 8; i++) b[i] = (unsigned char) ((uint64_t) hlen >> (8 * i));
    memcpy(b + 8, hdr, hlen);
    write_bytes(name, b, 8 + hlen + data_bytes);
    free(b);
    char p[1024];
    path_of(p, sizeof(p), name);
    struct nf_safetensors st;
    memset(err, 0, sizeof(*err));
    int rc = nf__st_open(p, &st, err);
    if (rc == NF_OK) nf__st_close(&st);
    return rc;
}
#define ST(name, hdr, data) st_case(name, hdr, strlen(hdr), data, &err)

static int npy_case(const char * name, const char * dict, const void * data, size_t n, nf_err * err) {
    size_t dl = strlen(dict);
    unsigned char * b = calloc(1, 10 + dl + n + 1);
    memcpy(b, "\x93NUMPY\x01\x00", 8);
    b[8] = (unsigned char) (dl & 0xff);
    b[9] = (unsigned char) (dl >> 8);
    memcpy(b + 10, dict, dl);
    if (n) memcpy(b + 10 + dl, data, n);
    write_bytes(name, b, 10 + dl + n);
    free(b);
    char p[1024];
    path_of(p, sizeof(p), name);
    struct nf_npy a;
    memset(err, 0, sizeof(*err));
    int rc = nf__npy_read(p, &a, err);
    if (rc == NF_OK) nf__npy_free(&a);
    return rc;
}

static const char * T1 = "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}";

static void test_safetensors(void) {
    nf_err err;
    char h[1024];
    snprintf(h, sizeof(h), "{%s}", T1);
    CHECK_RC(ST("good.st", h, 8), NF_OK, &err);
    /* trailing garbage after the header's object */
    snprintf(h, sizeof(h), "{%s}xyz", T1);
    CHECK_RC(ST("trailing.st", h, 8), NF_ERR_FORMAT, &err);
    CHECK_MSG(&err, "trailing");
    /* trailing spaces are the format's own padding: fine */
    snprintf(h, sizeof(h), "{%s}     ", T1);
    CHECK_RC(ST("spaces.st", h, 8), NF_OK, &err);
    /* NUL padding inside the header */
    {
        char nul[256];
        int n = snprintf(nul, sizeof(nul), "{%s}", T1);
        memset(nul + n, 0, 5);
        CHECK_RC(st_case("nulpad.st", nul, (size_t) n + 5, 8, &err), NF_ERR_FORMAT, &err);
        CHECK_MSG(&err, "control character");
    }
    /* a key with \u0000 would load under its prefix */
    CHECK_RC(ST("nulkey.st", "{\"a\\u0000shadow\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8),
             NF_ERR_FORMAT, &err);
    CHECK_MSG(&err, "u0000");
    /* __metadata__: an object of strings, nothing else */
    snprintf(h, sizeof(h), "{\"__metadata__\":\"pt\",%s}", T1);
    CHECK_RC(ST("meta-str.st", h, 8), NF_ERR_FORMAT, &err);
    CHECK_MSG(&err, "__metadata__");
    snprintf(h, sizeof(h), "{\"__metadata__\":{\"format\":1},%s}", T1);
    CHECK_RC(ST("meta-num.st", h, 8), NF_ERR_FORMAT, &err);
    CHECK_MSG(&err, "\"format\" is not a string");
    snprintf(h, sizeof(h), "{\"__metadata__\":{\"format\":\"pt\"},%s}", T1);
    CHECK_RC(ST("meta-ok.st", h, 8), NF_OK, &err);
    /* a gap between tensors, bytes after the last, a gap before the first */
    CHECK_RC(
        ST("gap.st",
           "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}",
           12),
        NF_ERR_FORMAT, &err);
    CHECK_MSG(&err, "gap");
    CHECK_MSG(&err, "'b'");
    snprintf(h, sizeof(h), "{%s}", T1);
    CHECK_RC(ST("trailing-data.st", h, 12), NF_ERR_FORMAT, &err);
    CHECK_MSG(&err, "after the last tensor");
    CHECK_RC(ST("gap-first.st", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8), NF_ERR_FORMAT,
             &err);
    CHECK_MSG(&err, "gap");
    /* not starting with '{' */
    snprintf(h, sizeof(h), " {%s}", T1);
    CHECK_RC(ST("leading-space.st", h, 8), NF_ERR_FORMAT, &err);
    CHECK_MSG(&err, "start with '{'");
    /* invalid UTF-8 in a key; a control character in a key (raw) */
    CHECK_RC(ST("utf8.st", "{\"a\xff\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8), NF_ERR_FORMAT,
             &err);
    CHECK_MSG(&err, "UTF-8");
    CHECK_RC(ST("rawctl.st", "{\"a\x1b[31m\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8),
             NF_ERR_FORMAT, &err);
    /* an escaped control character is valid JSON: the name is escaped in messages */
    CHECK_RC(ST("escctl.st", "{\"a\\u001b[31m\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8),
             NF_ERR_FORMAT, &err);
    CHECK_MSG(&err, "a\\x1b[31m");
    CHECK(strchr(err.msg, 0x1b) == NULL, "raw ESC in the message: %s", err.msg);
    /* numbers JSON does not have */
    CHECK_RC(ST("plus.st", "{\"a\":{\"dtype\":\"F32\",\"shape\":[+2],\"data_offsets\":[0,8]}}", 8), NF_ERR_FORMAT,
             &err);
    CHECK_MSG(&err, "number");
    CHECK_RC(ST("lead0.st", "{\"a\":{\"dtype\":\"F32\",\"shape\":[02],\"data_offsets\":[0,8]}}", 8), NF_ERR_FORMAT,
             &err);
    /* the header is a directory / a FIFO: no hang, a message naming it */
    char p[1024];
    struct nf_safetensors st;
    path_of(p, sizeof(p), "dir.st");
    mkdir(p, 0777);
    CHECK_RC(nf__st_open(p, &st, &err), NF_ERR_IO, &err);
    CHECK_MSG(&err, "dir.st: is a directory");
    path_of(p, sizeof(p), "fifo.st");
    unlink(p);
    CHECK(mkfifo(p, 0666) == 0, "mkfifo");
    CHECK_RC(nf__st_open(p, &st, &err), NF_ERR_IO, &err);
    CHECK_MSG(&err, "fifo.st: is a FIFO");
    CHECK_RC(nf__st_open("/dev/null", &st, &err), NF_ERR_IO, &err);
    CHECK_MSG(&err, "/dev/null: is a character device");
}

static void test_npy(void) {
    nf_err err;
    float f[6] = {1, 2, 3, 4, 5, 6};
    CHECK_RC(npy_case("ok.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", f, 24, &err), NF_OK,
             &err);
    CHECK_RC(npy_case("ok2.npy", "{\"descr\":\"<f4\",\"fortran_order\":False,\"shape\":(6,)}\n", f, 24, &err), NF_OK,
             &err);
    CHECK_RC(npy_case("empty-shape.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (), }", f, 4, &err), NF_OK,
             &err);
    /* 2^24 x 2^40 with no data: the product wrapped to 0 and was accepted */
    CHECK_RC(npy_case("wrap.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (16777216, 1099511627776), }",
                      NULL, 0, &err),
             NF_ERR_FORMAT, &err);
    CHECK_MSG(&err, "too large");
    CHECK_RC(npy_case("wrap3.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (65536, 65536, 65536, 65536), }",
                      NULL, 0, &err),
             NF_ERR_FORMAT, &err);
    CHECK_RC(npy_case("nobraces.npy", "'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), ", f, 24, &err),
             NF_ERR_FORMAT, &err);
    CHECK_MSG(&err, "dict");
    CHECK_RC(
        npy_case("instring.npy", "{'x': \"'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)\"}", f, 24, &err),
        NF_ERR_FORMAT, &err);
    CHECK_MSG(&err, "unexpected key 'x'");
    CHECK_RC(npy_case("notuple.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (6), }", f, 24, &err),
             NF_ERR_FORMAT, &err);
    CHECK_MSG(&err, "shape");
    CHECK_RC(npy_case("dupkey.npy", "{'descr': '<f4', 'descr': '<i4', 'fortran_order': False, 'shape': (6,), }", f, 24,
                      &err),
             NF_ERR_FORMAT, &err);
    CHECK_MSG(&err, "twice");
    CHECK_RC(npy_case("after.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (6,), } junk", f, 24, &err),
             NF_ERR_FORMAT, &err);
    CHECK_MSG(&err, "trailing");
    CHECK_RC(npy_case("fo-str.npy", "{'descr': '<f4', 'fortran_order': 'False', 'shape': (6,), }", f, 24, &err),
             NF_ERR_FORMAT, &err);
    CHECK_RC(npy_case("descr-prefix.npy", "{'descr': '<f4x', 'fortran_order': False, 'shape': (6,), }", f, 24, &err),
             NF_ERR_FORMAT, &err);
    CHECK_MSG(&err, "unsupported dtype");
    CHECK_RC(npy_case("neg.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (-6,), }", f, 24, &err),
             NF_ERR_FORMAT, &err);
    CHECK_RC(npy_case("nested.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': ((6,),), }", f, 24, &err),
             NF_ERR_FORMAT, &err);
    CHECK_RC(npy_case("missing.npy", "{'descr': '<f4', 'shape': (6,), }", f, 24, &err), NF_ERR_FORMAT, &err);
    CHECK_MSG(&err, "lacks");
    char p[1024];
    struct nf_npy a;
    path_of(p, sizeof(p), "fifo.npy");
    unlink(p);
    CHECK(mkfifo(p, 0666) == 0, "mkfifo");
    CHECK_RC(nf__npy_read(p, &a, &err), NF_ERR_IO, &err);
    CHECK_MSG(&err, "fifo.npy: is a FIFO");
    path_of(p, sizeof(p), "dir.npy");
    mkdir(p, 0777);
    CHECK_RC(nf__npy_read(p, &a, &err), NF_ERR_IO, &err);
    CHECK_MSG(&err, "dir.npy: is a directory");
}

static int cfg_case(const char * name, const char * text, struct nf_mitra_config * cfg, nf_err * err) {
    write_bytes(name, text, strlen(text));
    char p[1024];
    path_of(p, sizeof(p), name);
    cJSON * doc = NULL;
    memset(err, 0, sizeof(*err));
    int rc = nf__json_read_file(p, &doc, err);
    if (rc == NF_OK) rc = nf__mitra_config_parse(doc, p, cfg, err);
    cJSON_Delete(doc);
    return rc;
}

static void test_config(void) {
    nf_err err;
    struct nf_mitra_config c;
    CHECK_RC(
        cfg_case("ok.json",
                 "{\"dim\": 32, \"dim_output\": 10, \"n_layers\": 2, \"n_heads\": 4, \"task\": \"CLASSIFICATION\"}\n",
                 &c, &err),
        NF_OK, &err);
    CHECK(c.dim == 32 && c.n_heads == 4, "parsed");
    /* out of int range: the (int) cast was undefined */
    CHECK_RC(
        cfg_case(
            "big.json",
            "{\"dim\": 2147483648, \"dim_output\": 10, \"n_layers\": 2, \"n_heads\": 4, \"task\": \"CLASSIFICATION\"}",
            &c, &err),
        NF_ERR_CHECKPOINT, &err);
    CHECK_MSG(&err, "\"dim\" must be an integer");
    CHECK_RC(
        cfg_case("huge.json",
                 "{\"dim\": 32, \"dim_output\": 1e300, \"n_layers\": 2, \"n_heads\": 4, \"task\": \"CLASSIFICATION\"}",
                 &c, &err),
        NF_ERR_CHECKPOINT, &err);
    CHECK_MSG(&err, "\"dim_output\"");
    CHECK_RC(
        cfg_case(
            "inf.json",
            "{\"dim\": 32, \"dim_output\": 10, \"n_layers\": -1e400, \"n_heads\": 4, \"task\": \"CLASSIFICATION\"}", &c,
            &err),
        NF_ERR_CHECKPOINT, &err);
    CHECK_MSG(&err, "\"n_layers\"");
    /* trailing garbage, duplicate keys (Python keeps the last, cJSON the first) */
    CHECK_RC(
        cfg_case("trail.json",
                 "{\"dim\": 32, \"dim_output\": 10, \"n_layers\": 2, \"n_heads\": 4, \"task\": \"CLASSIFICATION\"} {",
                 &c, &err),
        NF_ERR_FORMAT, &err);
    CHECK_MSG(&err, "trail.json");
    CHECK_MSG(&err, "trailing");
    CHECK_RC(
        cfg_case(
            "dup.json",
            "{\"dim\": 32, \"dim\": 64, \"dim_output\": 10, \"n_layers\": 2, \"n_heads\": 4, \"task\": \"CLASSIFICATION\"}",
            &c, &err),
        NF_ERR_FORMAT, &err);
    CHECK_MSG(&err, "\"dim\" appears twice");
    CHECK_RC(cfg_case("bom.json", "\xef\xbb\xbf{\"dim\": 32}", &c, &err), NF_ERR_FORMAT, &err);
    /* config.json as a FIFO or a directory */
    char p[1024];
    cJSON * doc;
    path_of(p, sizeof(p), "fifo.json");
    unlink(p);
    CHECK(mkfifo(p, 0666) == 0, "mkfifo");
    CHECK_RC(nf__json_read_file(p, &doc, &err), NF_ERR_IO, &err);
    CHECK_MSG(&err, "is a FIFO");
    path_of(p, sizeof(p), "dir.json");
    mkdir(p, 0777);
    CHECK_RC(nf__json_read_file(p, &doc, &err), NF_ERR_IO, &err);
    CHECK_MSG(&err, "is a directory");
}

static void test_escape(void) {
    char b[64];
    CHECK(strcmp(nf__esc(b, sizeof(b), "plain.name"), "plain.name") == 0, "plain");
    CHECK(strcmp(nf__esc(b, sizeof(b), "a\x1b[2Jb"), "a\\x1b[2Jb") == 0, "ESC: %s", b);
    CHECK(strcmp(nf__esc(b, sizeof(b), "x\xff\xfey"), "x\\xff\\xfey") == 0, "invalid UTF-8: %s", b);
    CHECK(strcmp(nf__esc(b, sizeof(b), "caf\xc3\xa9"), "caf\xc3\xa9") == 0, "valid UTF-8 kept: %s", b);
    CHECK(strcmp(nf__esc(b, sizeof(b), "c1\xc2\x9b"), "c1\\xc2\\x9b") == 0, "C1 control (CSI): %s", b);
    CHECK(strcmp(nf__esc(b, sizeof(b), "nl\n"), "nl\\x0a") == 0, "newline: %s", b);
    char small[6];
    nf__esc(small, sizeof(small), "\x01\x02\x03");
    CHECK(strlen(small) < sizeof(small), "truncation stays in bounds");
}

int main(void) {
    alarm(60);
    snprintf(tmpdir, sizeof(tmpdir), "%s", "test-hostile-io.tmp");
    mkdir(tmpdir, 0777);
    test_safetensors();
    test_npy();
    test_config();
    test_escape();
    return nf_test_done("test-hostile-io");
}
