/* test-tokenizer.c -- TabSTAR's WordPiece tokenizer (src/text/wordpiece.c)
 * against Hugging Face's BertTokenizerFast (tests/fixtures/tokenizer, made by
 * reference/tokenizer_fixtures.py): every case's ids identical, every code
 * point's normalization and word split identical; then the vocabulary's
 * strict checks and invalid UTF-8 with its byte offset.
 *
 * usage: test-tokenizer FIXTURE_DIR */
#include "io/nf-io.h"
#include "text/nf-text.h"

#include "nf-test.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <unistd.h>
#include <utf8proc.h>
#include <zlib.h>

static int hexval(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* hex -> bytes (malloc'ed, NUL-terminated); NULL on a bad digit */
static char * unhex(const char * h, size_t * n) {
    const size_t l = strlen(h);
    char * o = malloc(l / 2 + 1);
    if (!o || l % 2) {
        free(o);
        return NULL;
    }
    for (size_t i = 0; i < l / 2; i++) {
        const int a = hexval(h[2 * i]), b = hexval(h[2 * i + 1]);
        if (a < 0 || b < 0) {
            free(o);
            return NULL;
        }
        o[i] = (char) (a * 16 + b);
    }
    o[l / 2] = '\0';
    *n = l / 2;
    return o;
}

static void print_ids(const char * what, const struct nf__wordpiece * wp, const int32_t * ids, int n) {
    fprintf(stderr, "  %s (%d):", what, n);
    for (int i = 0; i < n && i < 64; i++) fprintf(stderr, " %d:%s", ids[i], nf__wp_token(wp, ids[i]));
    fprintf(stderr, "%s\n", n > 64 ? " ..." : "");
}

static void test_cases(const struct nf__wordpiece * wp, const char * dir) {
    char path[4096];
    nf__path_join(path, sizeof(path), dir, "cases.jsonl");
    FILE * f = fopen(path, "rb");
    CHECK(f != NULL, "cannot open %s", path);
    if (!f) return;
    char * line = NULL;
    size_t cap = 0;
    ssize_t got;
    int n_cases = 0, n_ok = 0, lineno = 0, n_words = 0;
    int32_t * ids = NULL;
    while ((got = getline(&line, &cap, f)) > 0) {
        lineno++;
        nf_err err = {0};
        cJSON * j = NULL;
        if (nf__json_parse(line, (size_t) got, path, &j, &err) != NF_OK) {
            CHECK(0, "%s line %d: %s", path, lineno, err.msg);
            continue;
        }
        const cJSON * name = cJSON_GetObjectItemCaseSensitive(j, "name");
        const cJSON * text = cJSON_GetObjectItemCaseSensitive(j, "text");
        const cJSON * hex = cJSON_GetObjectItemCaseSensitive(j, "hex");
        const cJSON * ml = cJSON_GetObjectItemCaseSensitive(j, "max_len");
        const cJSON * want = cJSON_GetObjectItemCaseSensitive(j, "ids");
        char * bytes = NULL;
        size_t len = 0;
        if (cJSON_IsString(hex))
            bytes = unhex(hex->valuestring, &len);
        else if (cJSON_IsString(text)) {
            len = strlen(text->valuestring);
            bytes = malloc(len + 1);
            if (bytes) memcpy(bytes, text->valuestring, len + 1);
        }
        if (!cJSON_IsString(name) || !bytes || !cJSON_IsNumber(ml) || !cJSON_IsArray(want)) {
            CHECK(0, "%s line %d: malformed case", path, lineno);
            free(bytes);
            cJSON_Delete(j);
            continue;
        }
        n_cases++;
        const int max_len = ml->valueint;
        ids = realloc(ids, (size_t) max_len * sizeof(*ids));
        int n = -1;
        int rc = nf__wp_encode(wp, bytes, len, max_len, ids, &n, name->valuestring, NULL, &err);
        CHECK(rc == NF_OK, "case %s: %s", name->valuestring, err.msg);
        int same = rc == NF_OK && n == cJSON_GetArraySize(want);
        int32_t * w = malloc(((size_t) cJSON_GetArraySize(want) + 1) * sizeof(*w));
        for (int i = 0; i < cJSON_GetArraySize(want); i++) {
            w[i] = cJSON_GetArrayItem(want, i)->valueint;
            if (same && ids[i] != w[i]) same = 0;
        }
        CHECK(same, "case %s (line %d): ids differ from BertTokenizerFast's", name->valuestring, lineno);
        if (!same && rc == NF_OK) {
            print_ids("nofall", wp, ids, n);
            print_ids("HF    ", wp, w, cJSON_GetArraySize(want));
        }
        n_ok += same;
        const cJSON * words = cJSON_GetObjectItemCaseSensitive(j, "words");
        if (cJSON_IsString(words)) { /* the normalizer + pre-tokenizer's words themselves */
            char * got_w = NULL;
            size_t gl = 0;
            rc = nf__wp_basic_tokenize(bytes, len, &got_w, &gl, name->valuestring, NULL, &err);
            CHECK(rc == NF_OK && strcmp(got_w, words->valuestring) == 0, "case %s: words \"%s\", HF \"%s\"",
                  name->valuestring, got_w ? got_w : err.msg, words->valuestring);
            n_words++;
            free(got_w);
        }
        free(w);
        free(bytes);
        cJSON_Delete(j);
    }
    free(ids);
    free(line);
    fclose(f);
    CHECK(n_cases >= 400 && n_words >= 100, "only %d cases (%d with words) in %s", n_cases, n_words, path);
    printf("cases: %d of %d identical to BertTokenizerFast (%d also word by word)\n", n_ok, n_cases, n_words);
}

/* every code point c: the words of "a" c "a" */
static void test_codepoints(const char * dir) {
    char path[4096];
    nf__path_join(path, sizeof(path), dir, "codepoints.txt.gz");
    gzFile g = gzopen(path, "rb");
    CHECK(g != NULL, "cannot open %s", path);
    if (!g) return;
    char line[1024];
    long n_cp = 0, n_bad = 0;
    int32_t next = 0; /* every code point is covered, in order */
    while (gzgets(g, line, sizeof(line))) {
        if (line[0] == '#') continue;
        line[strcspn(line, "\n")] = '\0';
        char * sp = strchr(line, ' ');
        if (!sp) {
            CHECK(0, "%s: bad line \"%s\"", path, line);
            break;
        }
        const long lo = strtol(line, NULL, 16);
        long hi = lo;
        char kind;
        const char * hex = NULL;
        if (sp[1] == 'X') {
            kind = 'X';
            hex = sp + 3;
        } else {
            char * e = NULL;
            hi = strtol(sp + 1, &e, 16);
            kind = e[1];
        }
        if (next == 0xd800) next = 0xe000;
        CHECK(lo == next, "%s: range starts at %lX, want %X", path, lo, (unsigned) next);
        next = (int32_t) hi + 1;
        for (long c = lo; c <= hi; c++) {
            char in[8], want[256];
            size_t wl = 0;
            in[0] = 'a';
            size_t k = 1 + (size_t) utf8proc_encode_char((utf8proc_int32_t) c, (utf8proc_uint8_t *) in + 1);
            const size_t cl = k - 1;
            in[k++] = 'a';
            switch (kind) {
                case 'T':
                    memcpy(want, in, k);
                    want[k] = ' ';
                    wl = k + 1;
                    break;
                case 'D': memcpy(want, "aa ", wl = 3); break;
                case 'S': memcpy(want, "a a ", wl = 4); break;
                case 'P':
                    want[0] = 'a', want[1] = ' ';
                    memcpy(want + 2, in + 1, cl);
                    memcpy(want + 2 + cl, " a ", 3);
                    wl = cl + 5;
                    break;
                default: {
                    char * b = unhex(hex, &wl);
                    if (!b || wl >= sizeof(want)) {
                        CHECK(0, "%s: bad hex for %lX", path, c);
                        free(b);
                        wl = 0;
                        break;
                    }
                    memcpy(want, b, wl);
                    free(b);
                }
            }
            char * out = NULL;
            size_t ol = 0;
            nf_err err = {0};
            const int rc = nf__wp_basic_tokenize(in, k, &out, &ol, "sweep", NULL, &err);
            n_cp++;
            if (rc != NF_OK || ol != wl || memcmp(out, want, wl) != 0) {
                if (n_bad < 40 || getenv("NF_TOKENIZER_ALL_DIFFS")) {
                    char eo[256], ew[256];
                    want[wl] = '\0';
                    fprintf(stderr, "  U+%04lX (category %s): nofall \"%s\", HF \"%s\"\n", c,
                            utf8proc_category_string((utf8proc_int32_t) c), nf__esc(eo, sizeof(eo), out ? out : "?"),
                            nf__esc(ew, sizeof(ew), want));
                }
                n_bad++;
            }
            free(out);
        }
    }
    gzclose(g);
    CHECK(next == 0x110000, "%s ends at %X", path, (unsigned) next);
    CHECK(n_bad == 0, "%ld of %ld code points split differently from BertTokenizerFast", n_bad, n_cp);
    printf("code points: %ld checked, %ld differ\n", n_cp, n_bad);
}

static void bad_vocab(const char * data, size_t len, int want_rc, const char * needle) {
    struct nf__wordpiece * wp = NULL;
    nf_err err = {0};
    CHECK_RC(nf__wp_load_mem(data, len, "bad/vocab.txt", &wp, &err), want_rc, &err);
    CHECK(wp == NULL, "a refused vocabulary gave an object");
    CHECK_MSG(&err, "bad/vocab.txt");
    CHECK_MSG(&err, needle);
    nf__wp_free(wp);
}

#define SPECIALS "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n"

static void test_vocab_errors(void) {
    bad_vocab("", 0, NF_ERR_FORMAT, "empty vocabulary");
    bad_vocab(SPECIALS "a\nb\na\n", sizeof(SPECIALS "a\nb\na\n") - 1, NF_ERR_FORMAT,
              "line 8: token \"a\" already on line 6");
    bad_vocab(SPECIALS "a\n\nb\n", sizeof(SPECIALS "a\n\nb\n") - 1, NF_ERR_FORMAT, "line 7: empty token");
    bad_vocab(SPECIALS "a\r\nb\n", sizeof(SPECIALS "a\r\nb\n") - 1, NF_ERR_FORMAT, "line 6: carriage return");
    bad_vocab(SPECIALS "ok\nx\xff\n", sizeof(SPECIALS "ok\nx\xff\n") - 1, NF_ERR_FORMAT,
              "line 7: invalid UTF-8 at byte 2");
    bad_vocab(SPECIALS "\xed\xa0\x80\n", sizeof(SPECIALS "\xed\xa0\x80\n") - 1, NF_ERR_FORMAT,
              "line 6: invalid UTF-8"); /* a surrogate */
    bad_vocab(SPECIALS "a\0b\n", sizeof(SPECIALS "a\0b\n") - 1, NF_ERR_FORMAT, "line 6: NUL");
    bad_vocab("[PAD]\n[UNK]\n[CLS]\n[SEP]\nmask\n", 29, NF_ERR_FORMAT, "no [MASK] token");
    bad_vocab("[PAD]\n[UNK]\n[cls]\n[SEP]\n[MASK]\n", 30, NF_ERR_FORMAT, "no [CLS] token");
    bad_vocab("\n", 1, NF_ERR_FORMAT, "line 1: empty token");

    /* good: no final newline; ids are line numbers; specials found where they are */
    struct nf__wordpiece * wp = NULL;
    nf_err err = {0};
    const char v[] = "x\n[MASK]\n[SEP]\n[CLS]\n[UNK]\n[PAD]\nhello\n##lo\nhel";
    CHECK_RC(nf__wp_load_mem(v, sizeof(v) - 1, "mem", &wp, &err), NF_OK, &err);
    if (wp) {
        CHECK(nf__wp_vocab_size(wp) == 9, "size %d", nf__wp_vocab_size(wp));
        CHECK(nf__wp_special_id(wp, NF_WP_MASK) == 1 && nf__wp_special_id(wp, NF_WP_PAD) == 5, "special ids");
        CHECK(nf__wp_token_id(wp, "hel") == 8, "last line without newline: %d", nf__wp_token_id(wp, "hel"));
        int32_t ids[8];
        int n = 0;
        CHECK_RC(nf__wp_encode(wp, "Hello hello", 11, 8, ids, &n, NULL, NULL, &err), NF_OK, &err);
        CHECK(n == 4 && ids[0] == 3 && ids[1] == 6 && ids[2] == 6 && ids[3] == 2, "custom special ids: n %d", n);
        CHECK_RC(nf__wp_encode(wp, "hello", 5, 1, ids, &n, NULL, NULL, &err), NF_ERR_ARG, &err);
        CHECK_MSG(&err, "max_len 1");
        nf__wp_free(wp);
    }
    /* files: a missing one, a directory */
    CHECK_RC(nf__wp_load("/nonexistent/vocab.txt", &wp, &err), NF_ERR_IO, &err);
    CHECK_MSG(&err, "/nonexistent/vocab.txt");
    CHECK(wp == NULL, "object on a missing file");
    CHECK(nf__wp_load("/", &wp, &err) != NF_OK && wp == NULL, "a directory was accepted");
}

static void bad_text(const struct nf__wordpiece * wp, const char * s, size_t len, size_t want_off) {
    int32_t ids[16] = {0};
    int n = 7;
    size_t off = (size_t) -1;
    nf_err err = {0};
    CHECK_RC(nf__wp_encode(wp, s, len, 16, ids, &n, "row 3 column 'City'", &off, &err), NF_ERR_INPUT, &err);
    CHECK(off == want_off, "invalid UTF-8 offset %zu, want %zu", off, want_off);
    CHECK(n == 0, "ids reported on invalid UTF-8");
    char want[128];
    snprintf(want, sizeof(want), "row 3 column 'City': invalid UTF-8 at byte %zu", want_off);
    CHECK_MSG(&err, want);
    char * out = NULL;
    size_t ol = 0;
    off = (size_t) -1;
    CHECK_RC(nf__wp_basic_tokenize(s, len, &out, &ol, NULL, &off, &err), NF_ERR_INPUT, &err);
    CHECK(off == want_off && out == NULL, "basic_tokenize offset %zu", off);
    CHECK_MSG(&err, "text: invalid UTF-8");
}

static void test_invalid_utf8(const struct nf__wordpiece * wp) {
    bad_text(wp, "ab\xff", 3, 2);
    bad_text(wp, "\x80", 1, 0);
    bad_text(wp, "Z\xc3\xbcrich \xc3(", 10, 8); /* a lead byte without its continuation */
    bad_text(wp, "x\xc0\xaf", 3, 1);            /* overlong '/' */
    bad_text(wp, "ok \xe0\x80\xaf", 6, 3);      /* overlong, 3 bytes */
    bad_text(wp, "\xed\xa0\x80", 3, 0);         /* U+D800 */
    bad_text(wp, "a\xf4\x90\x80\x80", 5, 1);    /* past U+10FFFF */
    bad_text(wp, "[CLS]\xe2\x82", 7, 5);        /* truncated at the end */
    bad_text(wp, "hello \xf0\x9f\x98", 9, 6);   /* truncated emoji */
    bad_text(wp, "\xf8\x88\x80\x80\x80", 5, 0); /* 5-byte form */
    bad_text(wp, "a[SEP]b\xfe[SEP]", 13, 7);
    /* the same texts are fine up to the bad byte */
    int32_t ids[16];
    int n = 0;
    nf_err err = {0};
    CHECK_RC(nf__wp_encode(wp, "Z\xc3\xbcrich \xc3(", 8, 16, ids, &n, NULL, NULL, &err), NF_OK, &err);
}

int main(int argc, char ** argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s FIXTURE_DIR\n", argv[0]);
        return 2;
    }
    printf("utf8proc %s (Unicode %s)\n", utf8proc_version(), utf8proc_unicode_version());
    char path[4096];
    nf__path_join(path, sizeof(path), argv[1], "vocab.txt");
    struct nf__wordpiece * wp = NULL;
    nf_err err = {0};
    CHECK_RC(nf__wp_load(path, &wp, &err), NF_OK, &err);
    if (!wp) return nf_test_done("tokenizer");
    CHECK(nf__wp_special_id(wp, NF_WP_PAD) == 0 && nf__wp_special_id(wp, NF_WP_UNK) == 100 &&
              nf__wp_special_id(wp, NF_WP_CLS) == 101 && nf__wp_special_id(wp, NF_WP_SEP) == 102 &&
              nf__wp_special_id(wp, NF_WP_MASK) == 103,
          "e5's special ids");
    test_cases(wp, argv[1]);
    test_codepoints(argv[1]);
    test_vocab_errors();
    test_invalid_utf8(wp);
    nf__wp_free(wp);
    return nf_test_done("tokenizer");
}
