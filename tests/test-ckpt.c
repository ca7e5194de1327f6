/* test-ckpt.c -- the torch.save (.ckpt) reader: genuine torch 2.13 files
 * (tests/fixtures/ckpt, made by reference/make_ckpt_fixtures.py) against the
 * tensors torch.load gave; checkpoints written here without torch
 * (tests/ckpt-gen.h); hostile pickles and archives, each refused with its
 * reason; truncation and bit-flip sweeps; the conversion to safetensors; and
 * the weight loader taking a .ckpt where it takes a .safetensors. The
 * writer (src/io/torch-ckpt-write.c): its records against the genuine
 * files' (data.pkl byte for byte up to their _metadata, the other records
 * and the serialization id exactly), every dtype and tuple / int / memo
 * encoding read back, alignment, refusals leaving nothing behind, and
 * `gen-weights sptransformer --format ckpt`: the .ckpt loads as a model and
 * holds model.safetensors's tensors byte for byte, in the table's order.
 *
 * usage: test-ckpt FIXTURE_DIR [SMALL_MITRA_MODEL_DIR]
 * Leaves evil-os-system.ckpt, evil-eval.ckpt and good.ckpt in test-ckpt.tmp/
 * for the CLI test (tests/ckpt-cli.sh). */
#include "nf-test.h"
#include "ckpt-gen.h"
#include "io/nf-io.h"
#include "weights.h"
#include "models/mitra-impl.h"
#include "models/sptransformer-impl.h"
#include "model.h"

#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdlib.h>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zip.h>

static char tmpdir[512] = "test-ckpt.tmp";
static const char * fixtures;

static void tpath(char * out, size_t n, const char * name) { snprintf(out, n, "%s/%s", tmpdir, name); }

static unsigned char * slurp(const char * path, size_t * len) {
    FILE * f = fopen(path, "rb");
    if (!f) {
        *len = 0;
        return NULL;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char * b = malloc((size_t) n + 1);
    *len = fread(b, 1, (size_t) n, f);
    fclose(f);
    return b;
}

static void spit(const char * path, const void * b, size_t n) {
    FILE * f = fopen(path, "wb");
    if (f) {
        fwrite(b, 1, n, f);
        fclose(f);
    }
}

/* ---- the unpickler alone, with fake records ------------------------------------- */

/* records "0".."3": 24, 8, 40 and 4096 bytes */
static int64_t fake_record(void * ctx, const char * key, int64_t * entry) {
    (void) ctx;
    static const int64_t sizes[] = {24, 8, 40, 4096};
    if (key[0] >= '0' && key[0] <= '3' && key[1] == '\0') {
        *entry = key[0] - '0';
        return sizes[key[0] - '0'];
    }
    return -1;
}

static int parse(const void * b, size_t n, struct nf_ckpt * ck, nf_err * err) {
    memset(ck, 0, sizeof(*ck));
    int rc = nf__ckpt_parse_pickle(b, n, "t/data.pkl", fake_record, NULL, ck, err);
    return rc;
}

static void free_parsed(struct nf_ckpt * ck) {
    for (int i = 0; i < ck->n_tensors; i++) free(ck->tensors[i].name);
    free(ck->tensors);
    for (int i = 0; i < ck->n_storages; i++) free(ck->storages[i].key);
    free(ck->storages);
    memset(ck, 0, sizeof(*ck));
}

static void expect_pkl(const char * what, const void * b, size_t n, int code, const char * needle) {
    nf_err err = {0};
    struct nf_ckpt ck;
    int rc = parse(b, n, &ck, &err);
    CHECK(rc == code, "%s: got %s (want %s): %s", what, nf_result_name(rc), nf_result_name(code), err.msg);
    if (rc != NF_OK && needle)
        CHECK(strstr(err.msg, needle) != NULL, "%s: message \"%s\" lacks \"%s\"", what, err.msg, needle);
    free_parsed(&ck);
}
#define EXPECT_RAW(what, lit, code, needle) expect_pkl(what, lit, sizeof(lit) - 1, code, needle)

/* one tensor "w" in a wrapped state_dict; tweak through the spec */
static void one_tensor(struct pkw * w, const struct gen_tensor * t) {
    memset(w, 0, sizeof(*w));
    pk_state_dict(w, t, 1, 1);
}

static void test_pickle_ok(void) {
    nf_err err = {0};
    struct nf_ckpt ck;
    struct gen_tensor t[] = {
        {"w", "FloatStorage", "0", 6, 0, 2, {2, 3}, {-1}},
        {"tail", "FloatStorage", "0", 6, 2, 1, {4}, {-1}},
        {"tied", "FloatStorage", "0", 6, 0, 2, {3, 2}, {-1}},
        {"bn.num_batches_tracked", "LongStorage", "1", 1, 0, 0, {0}, {-1}},
        {"scalar_view", "FloatStorage", "2", 10, 9, 0, {0}, {-1}},
        {"empty", "FloatStorage", "2", 10, 0, 2, {0, 3}, {-1}},
        {"ones", "FloatStorage", "2", 10, 3, 3, {1, 2, 1}, {7, 1, 99}}, /* size-1 dims: any stride */
    };
    const int nt = (int) (sizeof(t) / sizeof(t[0]));
    for (int wrapped = 0; wrapped < 2; wrapped++) {
        struct pkw w = {0};
        pk_state_dict(&w, t, nt, wrapped);
        CHECK_RC(parse(w.b, w.n, &ck, &err), NF_OK, &err);
        CHECK(ck.n_tensors == nt && ck.n_storages == 3, "tensors %d storages %d", ck.n_tensors, ck.n_storages);
        CHECK(strcmp(ck.dict, wrapped ? "state_dict" : "") == 0, "dict '%s'", ck.dict);
        if (ck.n_tensors == nt) {
            CHECK(strcmp(ck.tensors[1].name, "tail") == 0 && ck.tensors[1].offset == 2 && ck.tensors[1].numel == 4,
                  "offset view");
            CHECK(ck.tensors[0].storage == ck.tensors[2].storage, "shared storage: one record");
            CHECK(ck.tensors[3].dtype == NF_ST_I64 && ck.tensors[3].ndim == 0 && ck.tensors[3].numel == 1,
                  "I64 scalar");
            CHECK(ck.tensors[5].numel == 0, "empty tensor");
        }
        free_parsed(&ck);
        /* every strict prefix is an error, never a crash */
        int bad = 0;
        for (size_t n = 0; n < w.n; n++) {
            if (parse(w.b, n, &ck, &err) == NF_OK) bad++;
            free_parsed(&ck);
        }
        CHECK(bad == 0, "%d truncations of data.pkl were accepted", bad);
        /* every single-byte flip: any result, no crash (the fuzz target does this under ASan) */
        for (size_t i = 0; i < w.n; i++) {
            w.b[i] ^= 0xff;
            parse(w.b, w.n, &ck, &err);
            free_parsed(&ck);
            w.b[i] ^= 0xff;
        }
        pkw_free(&w);
    }
    /* LONG_BINPUT / LONG_BINGET and two SETITEMS batches: 1,500 tensors in one storage */
    {
        static struct gen_tensor many[1500];
        static char names[1500][24];
        for (int i = 0; i < 1500; i++) {
            snprintf(names[i], sizeof(names[i]), "layer.%d.weight", i);
            many[i] = (struct gen_tensor){names[i], "FloatStorage", "3", 1024, (int64_t) i % 1000, 1, {24}, {-1}};
        }
        struct pkw w = {0};
        pk_state_dict(&w, many, 1500, 1);
        CHECK(w.memo > 256, "memo %u > 256", w.memo);
        CHECK_RC(parse(w.b, w.n, &ck, &err), NF_OK, &err);
        CHECK(ck.n_tensors == 1500 && ck.n_storages == 1, "1500 tensors (%d)", ck.n_tensors);
        CHECK(ck.n_tensors == 1500 && strcmp(ck.tensors[1499].name, "layer.1499.weight") == 0 &&
                  ck.tensors[1499].offset == 499,
              "last tensor");
        free_parsed(&ck);
        pkw_free(&w);
    }
    /* Lightning-like: other keys and values around the state_dict */
    {
        struct pkw w = {0};
        pk_proto(&w);
        pk_op(&w, '}');
        pk_put(&w);
        pk_op(&w, '(');
        pk_str(&w, "epoch");
        pk_int(&w, 3);
        pk_str(&w, "big");
        pk_int(&w, (int64_t) 1 << 40);
        pk_str(&w, "neg");
        pk_int(&w, -5);
        pk_str(&w, "lr");
        pk_float(&w, 1e-3);
        pk_str(&w, "none");
        pk_op(&w, 'N');
        pk_str(&w, "flags");
        pk_op(&w, ']');
        pk_put(&w);
        pk_op(&w, '(');
        pk_op(&w, 0x88);
        pk_op(&w, 0x89);
        pk_op(&w, 'e');
        pk_str(&w, "raw");
        pk_global(&w, "_codecs", "encode");
        pk_str(&w, "ab");
        pk_str(&w, "latin1");
        pk_op(&w, 0x86);
        pk_put(&w);
        pk_op(&w, 'R');
        pk_put(&w);
        pk_str(&w, "intkeys");
        pk_op(&w, '}');
        pk_put(&w);
        pk_int(&w, 0);
        pk_str(&w, "x");
        pk_op(&w, 's');
        pk_str(&w, "tuplekey");
        pk_op(&w, '}');
        pk_put(&w);
        pk_int(&w, 1);
        pk_int(&w, 2);
        pk_op(&w, 0x86);
        pk_int(&w, 0);
        pk_op(&w, 's');
        pk_str(&w, "state_dict");
        pk_odict(&w);
        pk_op(&w, '(');
        pk_str(&w, "p");
        /* _rebuild_parameter(_rebuild_tensor_v2(...), True, OrderedDict()) */
        pk_global(&w, "torch._utils", "_rebuild_parameter");
        pk_tensor(&w, &t[0]);
        pk_op(&w, 0x88);
        pk_odict(&w);
        pk_op(&w, 0x87);
        pk_put(&w);
        pk_op(&w, 'R');
        pk_put(&w);
        pk_op(&w, 'u');
        pk_op(&w, 'u');
        pk_op(&w, '.');
        CHECK_RC(parse(w.b, w.n, &ck, &err), NF_OK, &err);
        CHECK(ck.n_tensors == 1 && strcmp(ck.dict, "state_dict") == 0 && strcmp(ck.tensors[0].name, "p") == 0,
              "Lightning-like: the state_dict selected");
        free_parsed(&ck);
        pkw_free(&w);
    }
}

static void test_pickle_hostile(void) {
    /* globals: an allow-list; every other one is named */
    EXPECT_RAW("os.system",
               "\x80\x02"
               "cos\nsystem\nq\x00X\x02\x00\x00\x00lsq\x01\x85q\x02Rq\x03.",
               NF_ERR_FORMAT, "global 'os.system' is not allowed");
    EXPECT_RAW("posix.system",
               "\x80\x02"
               "cposix\nsystem\n",
               NF_ERR_FORMAT, "global 'posix.system' is not allowed");
    EXPECT_RAW("builtins.eval",
               "\x80\x02"
               "cbuiltins\neval\n",
               NF_ERR_FORMAT, "global 'builtins.eval' is not allowed");
    EXPECT_RAW("__builtin__.eval",
               "\x80\x02"
               "c__builtin__\neval\n",
               NF_ERR_FORMAT, "global '__builtin__.eval' is not allowed");
    EXPECT_RAW("a module class",
               "\x80\x02"
               "ctorch.nn.modules.linear\nLinear\n",
               NF_ERR_FORMAT, "global 'torch.nn.modules.linear.Linear' is not allowed");
    EXPECT_RAW("Counter",
               "\x80\x02"
               "ccollections\nCounter\n",
               NF_ERR_FORMAT, "global 'collections.Counter' is not allowed");
    EXPECT_RAW("numpy scalar",
               "\x80\x02"
               "cnumpy.core.multiarray\nscalar\n",
               NF_ERR_FORMAT, "'numpy.core.multiarray.scalar' is not allowed");
    EXPECT_RAW("_rebuild_tensor_v3",
               "\x80\x02"
               "ctorch._utils\n_rebuild_tensor_v3\n",
               NF_ERR_UNSUPPORTED, "_rebuild_tensor_v3' is not supported");
    EXPECT_RAW("QInt8Storage",
               "\x80\x02"
               "ctorch\nQInt8Storage\n",
               NF_ERR_FORMAT, "'torch.QInt8Storage' is not allowed");
    EXPECT_RAW("GLOBAL name charset",
               "\x80\x02"
               "cos system\nx\n",
               NF_ERR_FORMAT, "GLOBAL: byte 0x20");
    EXPECT_RAW("GLOBAL without newline",
               "\x80\x02"
               "cos",
               NF_ERR_FORMAT, "end with a newline");
    EXPECT_RAW("storage class called",
               "\x80\x02"
               "ctorch\nFloatStorage\n)R.",
               NF_ERR_FORMAT, "'torch.FloatStorage' cannot be called");
    EXPECT_RAW("OrderedDict(args)",
               "\x80\x02"
               "ccollections\nOrderedDict\nK\x01\x85R.",
               NF_ERR_FORMAT, "OrderedDict with arguments");
    EXPECT_RAW("encode not latin1",
               "\x80\x02"
               "c_codecs\nencode\nX\x01\x00\x00\x00"
               "aX\x04\x00\x00\x00utf8\x86R.",
               NF_ERR_FORMAT, "'latin1'");
    EXPECT_RAW("calling a dict",
               "\x80\x02"
               "})R.",
               NF_ERR_FORMAT, "REDUCE: calling a dict");
    /* protocol and opcodes */
    EXPECT_RAW("protocol 4", "\x80\x04\x95\x10\x00\x00\x00\x00\x00\x00\x00}.", NF_ERR_UNSUPPORTED, "pickle protocol 4");
    EXPECT_RAW("protocol 0", "(dp0\n.", NF_ERR_FORMAT, "not a protocol-2 pickle");
    EXPECT_RAW("empty", "", NF_ERR_FORMAT, "not a protocol-2 pickle");
    EXPECT_RAW("FRAME", "\x80\x02\x95\x01\x00\x00\x00\x00\x00\x00\x00}.", NF_ERR_FORMAT, "FRAME");
    EXPECT_RAW("NEWOBJ",
               "\x80\x02"
               "ccollections\nOrderedDict\n)\x81.",
               NF_ERR_FORMAT, "NEWOBJ");
    EXPECT_RAW("STACK_GLOBAL", "\x80\x02\x93.", NF_ERR_FORMAT, "STACK_GLOBAL");
    EXPECT_RAW("text INT", "\x80\x02I1\n.", NF_ERR_FORMAT, "opcode 0x49 is not allowed");
    EXPECT_RAW("second PROTO", "\x80\x02\x80\x02}.", NF_ERR_FORMAT, "second PROTO");
    EXPECT_RAW("LONG1 of 9 bytes", "\x80\x02\x8a\x09\x01\x02\x03\x04\x05\x06\x07\x08\x09.", NF_ERR_FORMAT,
               "LONG1 of 9 bytes");
    EXPECT_RAW("LONG4", "\x80\x02\x8b\x01\x00\x00\x00\x01.", NF_ERR_FORMAT, "LONG4");
    /* STOP */
    EXPECT_RAW("bytes after STOP", "\x80\x02}.\x00\x00\x00\x00", NF_ERR_FORMAT, "4 byte(s) after STOP");
    EXPECT_RAW("MARK open at STOP", "\x80\x02}(.", NF_ERR_FORMAT, "MARK(s) open");
    EXPECT_RAW("two values at STOP", "\x80\x02}}.", NF_ERR_FORMAT, "2 values on the stack");
    EXPECT_RAW("nothing at STOP", "\x80\x02.", NF_ERR_FORMAT, "0 values on the stack");
    EXPECT_RAW("no STOP", "\x80\x02}", NF_ERR_FORMAT, "no STOP");
    /* memo */
    EXPECT_RAW("BINGET out of range", "\x80\x02h\x05.", NF_ERR_FORMAT, "BINGET 5: the memo holds 0");
    EXPECT_RAW("LONG_BINGET out of range", "\x80\x02}q\x00j\x01\x00\x00\x00.", NF_ERR_FORMAT,
               "BINGET 1: the memo holds 1");
    EXPECT_RAW("LONG_BINPUT 0xFFFFFFFF", "\x80\x02}r\xff\xff\xff\xff.", NF_ERR_FORMAT,
               "BINPUT 4294967295 skips memo slots");
    EXPECT_RAW("BINPUT on an empty stack", "\x80\x02q\x00}.", NF_ERR_FORMAT, "BINPUT needs 1 value");
    EXPECT_RAW("BINPUT overwrite (legal)", "\x80\x02}q\x00q\x00.", NF_OK, NULL);
    /* the stack and the marks */
    EXPECT_RAW("TUPLE without MARK", "\x80\x02K\x01t.", NF_ERR_FORMAT, "TUPLE without a MARK");
    EXPECT_RAW("below the MARK", "\x80\x02}(\x85.", NF_ERR_FORMAT, "above the last MARK");
    EXPECT_RAW("SETITEMS target below the MARK", "\x80\x02}((u.", NF_ERR_FORMAT, "without a target below its MARK");
    EXPECT_RAW("SETITEM on a list", "\x80\x02]K\x01K\x02s.", NF_ERR_FORMAT, "SETITEM on a list");
    EXPECT_RAW("SETITEM on a tensor-like int", "\x80\x02K\x01K\x01K\x02s.", NF_ERR_FORMAT, "SETITEM on a int");
    EXPECT_RAW("SETITEMS odd", "\x80\x02}(K\x01u.", NF_ERR_FORMAT, "odd number");
    EXPECT_RAW("APPEND on a dict",
               "\x80\x02}K\x01"
               "a.",
               NF_ERR_FORMAT, "APPEND on a dict");
    EXPECT_RAW("APPENDS on a tuple",
               "\x80\x02)(K\x01"
               "e.",
               NF_ERR_FORMAT, "APPENDS on a tuple");
    EXPECT_RAW("BUILD on a plain dict", "\x80\x02}}X\x09\x00\x00\x00_metadata}sb.", NF_ERR_FORMAT, "BUILD on a dict");
    EXPECT_RAW("BUILD with other state",
               "\x80\x02"
               "ccollections\nOrderedDict\n)R}X\x01\x00\x00\x00xK\x01sb.",
               NF_ERR_FORMAT, "{'_metadata': dict}");
    EXPECT_RAW("d[k] = d",
               "\x80\x02}q\x00X\x01\x00\x00\x00"
               "ah\x00s.",
               NF_ERR_FORMAT, "already in use");
    EXPECT_RAW("mutating a sealed list",
               "\x80\x02]q\x00\x85h\x00K\x01"
               "a.",
               NF_ERR_FORMAT, "already in use");
    EXPECT_RAW("a list as a dict key", "\x80\x02}]K\x01s.", NF_ERR_FORMAT, "a list as a dict key");
    /* strings */
    EXPECT_RAW("overlong UTF-8", "\x80\x02X\x02\x00\x00\x00\xc0\x80.", NF_ERR_FORMAT, "not valid UTF-8");
    EXPECT_RAW("surrogate", "\x80\x02X\x03\x00\x00\x00\xed\xa0\x80.", NF_ERR_FORMAT, "not valid UTF-8");
    EXPECT_RAW("string past the end", "\x80\x02X\xff\xff\xff\x00", NF_ERR_FORMAT, "truncated");
    EXPECT_RAW("string over the cap", "\x80\x02X\xff\xff\xff\xff", NF_ERR_FORMAT, "string of 4294967295 bytes");
    /* the root and the selection */
    EXPECT_RAW("a list root", "\x80\x02].", NF_ERR_FORMAT, "is a list, not a dict");
    EXPECT_RAW("non-tensor value",
               "\x80\x02}X\x01\x00\x00\x00"
               "aK\x01s.",
               NF_ERR_FORMAT, "entry 'a' is not a tensor (a value of type int)");
    EXPECT_RAW("int key", "\x80\x02}K\x01K\x01s.", NF_ERR_FORMAT, "key of type int");
    EXPECT_RAW("state_dict twice", "\x80\x02}(X\x0a\x00\x00\x00state_dict}X\x0a\x00\x00\x00state_dict}u.",
               NF_ERR_FORMAT, "'state_dict' appears twice");
    EXPECT_RAW("empty state_dict", "\x80\x02}X\x0a\x00\x00\x00state_dict}s.", NF_OK, NULL);

    /* nesting: 100,000 lists inside each other (no MARKs needed) */
    {
        const size_t n = 100000;
        unsigned char * b = malloc(2 * n + 4);
        size_t at = 0;
        b[at++] = 0x80;
        b[at++] = 2;
        for (size_t i = 0; i < n; i++) b[at++] = ']';
        for (size_t i = 1; i < n; i++) b[at++] = 'a';
        b[at++] = '.';
        expect_pkl("100,000 nested lists", b, at, NF_ERR_FORMAT, "nested deeper than 100");
        /* 2 million values on the stack */
        unsigned char * c = malloc(2100000 + 3);
        at = 0;
        c[at++] = 0x80;
        c[at++] = 2;
        for (size_t i = 0; i < 2100000; i++) c[at++] = 'N';
        c[at++] = '.';
        expect_pkl("2M stack values", c, at, NF_ERR_FORMAT, "stack deeper than");
        free(c);
        /* 65 MARKs */
        at = 2;
        for (int i = 0; i < 65; i++) b[at++] = '(';
        expect_pkl("65 MARKs", b, at, NF_ERR_FORMAT, "more than 64 MARKs");
        free(b);
    }

    /* tensors and storages */
    struct pkw w;
    const struct gen_tensor base = {"w", "FloatStorage", "0", 6, 0, 2, {2, 3}, {-1}};
    struct gen_tensor t;
#define TENSOR_CASE(what, code, needle, ...)      \
    do {                                          \
        t = base;                                 \
        __VA_ARGS__;                              \
        one_tensor(&w, &t);                       \
        expect_pkl(what, w.b, w.n, code, needle); \
        pkw_free(&w);                             \
    } while (0)
    TENSOR_CASE("the base case", NF_OK, NULL, (void) 0);
    TENSOR_CASE("storage shorter than numel", NF_ERR_FORMAT,
                "storage '0' (F32, numel 7) needs 28 bytes but its record data/0 holds 24", t.numel = 7);
    TENSOR_CASE("storage longer than numel", NF_ERR_FORMAT, "needs 20 bytes but its record data/0 holds 24",
                t.numel = 5, t.shape[1] = 2);
    TENSOR_CASE("wrong dtype storage", NF_ERR_FORMAT, "storage '0' (I64, numel 6) needs 48 bytes",
                t.cls = "LongStorage");
    TENSOR_CASE("missing record", NF_ERR_FORMAT, "storage '9': the archive has no record data/9", t.key = "9");
    TENSOR_CASE("key with a slash", NF_ERR_FORMAT, "storage key with byte 0x2f", t.key = "../0");
    TENSOR_CASE("view past the storage", NF_ERR_FORMAT, "reaches element 6 of storage '0', which has 6", t.offset = 1);
    TENSOR_CASE("huge shape (overflow)", NF_ERR_FORMAT, "overflows", t.shape[0] = (int64_t) 1 << 40,
                t.shape[1] = (int64_t) 1 << 40);
    TENSOR_CASE("element count overflow", NF_ERR_FORMAT, "element count overflows", t.shape[0] = (int64_t) 1 << 40,
                t.shape[1] = (int64_t) 1 << 40, t.stride[0] = 0, t.stride[1] = 0);
    TENSOR_CASE("extent overflow", NF_ERR_FORMAT, "out of range", t.shape[0] = 2, t.stride[0] = (int64_t) 1 << 62,
                t.stride[1] = 1);
    TENSOR_CASE("extent overflow 2", NF_ERR_FORMAT, "extent overflows", t.ndim = 3, t.shape[0] = 3, t.shape[1] = 3,
                t.shape[2] = 3, t.stride[0] = ((int64_t) 1 << 62) - 1, t.stride[1] = ((int64_t) 1 << 62) - 1,
                t.stride[2] = ((int64_t) 1 << 62) - 1);
    TENSOR_CASE("size 2^62", NF_ERR_FORMAT, "a size 4611686018427387904 is out of range",
                t.shape[0] = (int64_t) 1 << 62);
    TENSOR_CASE("negative stride", NF_ERR_FORMAT, "a stride -1 is out of range", t.stride[0] = 3, t.stride[1] = -1);
    TENSOR_CASE("negative offset", NF_ERR_FORMAT, "storage_offset -2 is out of range", t.offset = -2);
    TENSOR_CASE("negative numel", NF_ERR_FORMAT, "numel -6 is out of range", t.numel = -6);
    TENSOR_CASE("9 dimensions", NF_ERR_FORMAT, "9 dimensions", t.ndim = 9,
                t.shape[2] = t.shape[3] = t.shape[4] = t.shape[5] = t.shape[6] = t.shape[7] = 1);
    TENSOR_CASE("not contiguous", NF_ERR_FORMAT, "tensor 'w' is not contiguous (shape [2, 3], strides (1, 2))",
                t.stride[0] = 1, t.stride[1] = 2);
    TENSOR_CASE("expand (stride 0)", NF_ERR_FORMAT, "not contiguous", t.stride[0] = 0, t.stride[1] = 1);
    TENSOR_CASE("an empty view past the storage (legal)", NF_OK, NULL, t.shape[0] = 0, t.offset = 100);
#undef TENSOR_CASE
    /* one key used with two classes */
    {
        struct gen_tensor two[2] = {base, {"n", "LongStorage", "0", 3, 0, 1, {3}, {-1}}};
        memset(&w, 0, sizeof(w));
        pk_state_dict(&w, two, 2, 1);
        expect_pkl("one key, two classes", w.b, w.n, NF_ERR_FORMAT, "storage '0' is used as F32 x 6 and as I64 x 3");
        pkw_free(&w);
        two[1] = base;
        memset(&w, 0, sizeof(w));
        pk_state_dict(&w, two, 2, 1);
        expect_pkl("a name twice", w.b, w.n, NF_ERR_FORMAT, "entry 'w' appears twice");
        pkw_free(&w);
    }
    /* _rebuild_tensor_v2's other arguments, written by hand */
    {
        static const char pre[] = "\x80\x02}X\x01\x00\x00\x00w"
                                  "ctorch._utils\n_rebuild_tensor_v2\n("
                                  "(X\x07\x00\x00\x00storagectorch\nFloatStorage\nX\x01\x00\x00\x00"
                                  "0X\x03\x00\x00\x00"
                                  "cpuK\x06tQ"
                                  "K\x00K\x06\x85K\x01\x85";
        char buf[512];
#define TAIL(lit, code, needle) \
    { lit, sizeof(lit) - 1, code, needle }
        static const struct {
            const char * s;
            size_t n;
            int code;
            const char * needle;
        } tails[] = {
            TAIL("\x89}tRs.", NF_OK, NULL), /* {} as hooks */
            TAIL("K\x01}tRs.", NF_ERR_FORMAT, "requires_grad is not a bool"),
            TAIL("\x89}X\x01\x00\x00\x00hK\x01stRs.", NF_ERR_FORMAT, "backward_hooks must be an empty"),
            TAIL("\x89}}X\x03\x00\x00\x00negK\x01stRs.", NF_ERR_FORMAT, "conj/neg bits"), /* not a bool */
            TAIL("\x89}}X\x03\x00\x00\x00neg\x88stRs.", NF_ERR_FORMAT, "conj/neg bits"),
            TAIL("\x89}}X\x03\x00\x00\x00neg\x89stRs.", NF_OK, NULL), /* all-false metadata */
            TAIL("\x89}K\x01tRs.", NF_ERR_FORMAT, "metadata is not a dict"),
            TAIL("\x89tRs.", NF_ERR_FORMAT, "takes 6 or 7 arguments, got 5"),
        };
#undef TAIL
        for (size_t i = 0; i < sizeof(tails) / sizeof(tails[0]); i++) {
            const size_t pn = sizeof(pre) - 1;
            memcpy(buf, pre, pn);
            memcpy(buf + pn, tails[i].s, tails[i].n);
            char what[32];
            snprintf(what, sizeof(what), "rebuild args %zu", i);
            expect_pkl(what, buf, pn + tails[i].n, tails[i].code, tails[i].needle);
        }
        /* a persistent id that is not ('storage', ...) */
        EXPECT_RAW("pid kind", "\x80\x02(X\x05\x00\x00\x00otherK\x00tQ.", NF_ERR_FORMAT,
                   "persistent id must be ('storage'");
        EXPECT_RAW("pid class",
                   "\x80\x02(X\x07\x00\x00\x00storage"
                   "ccollections\nOrderedDict\nX\x01\x00\x00\x00"
                   "0X\x03\x00\x00\x00"
                   "cpuK\x06tQ.",
                   NF_ERR_FORMAT, "not a torch.<X>Storage");
    }
}

/* ---- archives ---------------------------------------------------------------------- */

static int load(const char * path, struct nf_safetensors * st, nf_err * err) { return nf__ckpt_load(path, st, err); }

static void expect_file(const char * what, const char * path, int code, const char * needle) {
    nf_err err = {0};
    struct nf_safetensors st;
    int rc = load(path, &st, &err);
    CHECK(rc == code, "%s: got %s (want %s): %s", what, nf_result_name(rc), nf_result_name(code), err.msg);
    if (rc != NF_OK && needle)
        CHECK(strstr(err.msg, needle) != NULL, "%s: message \"%s\" lacks \"%s\"", what, err.msg, needle);
    if (rc != NF_OK) CHECK(strstr(err.msg, path) != NULL, "%s: the message names the file: %s", what, err.msg);
    if (rc == NF_OK) nf__st_close(&st);
}

/* the standard small checkpoint: w (2x3 F32), b (3 F32), n (I64 scalar) */
static float sw[6] = {1, 2, 3, 4, 5, 6}, sb[3] = {-1, -2, -3};
static int64_t sn[1] = {42};
static const struct gen_tensor small_t[] = {
    {"w", "FloatStorage", "0", 6, 0, 2, {2, 3}, {-1}},
    {"b", "FloatStorage", "1", 3, 0, 1, {3}, {-1}},
    {"bn.num_batches_tracked", "LongStorage", "2", 1, 0, 0, {0}, {-1}},
    {"w_tail", "FloatStorage", "0", 6, 2, 1, {4}, {-1}},
};
static const struct gen_storage small_s[] = {{"0", sw, sizeof(sw)}, {"1", sb, sizeof(sb)}, {"2", sn, sizeof(sn)}};

static void write_small(const char * path, const char * prefix, int wrapped, int deflate) {
    struct pkw w = {0};
    pk_state_dict(&w, small_t, 4, wrapped);
    if (!deflate) {
        CHECK(gen_ckpt(path, prefix, &w, small_s, 3) == 0, "write %s", path);
    } else {
        struct gen_rec r[] = {{"data.pkl", w.b, w.n, 1},
                              {"data/0", sw, sizeof(sw), 1},
                              {"data/1", sb, sizeof(sb), 1},
                              {"data/2", sn, sizeof(sn), 1},
                              {"version", "3\n", 2, 1}};
        CHECK(gen_zip(path, prefix, r, 5) == 0, "write %s", path);
    }
    pkw_free(&w);
}

static void check_small(const char * what, const char * path) {
    nf_err err = {0};
    struct nf_safetensors st;
    CHECK_RC(load(path, &st, &err), NF_OK, &err);
    if (st.n_tensors != 4) {
        CHECK(0, "%s: %d tensors", what, st.n_tensors);
        nf__st_close(&st);
        return;
    }
    const struct nf_st_tensor *w = nf__st_find(&st, "w"), *b = nf__st_find(&st, "b"),
                              *n = nf__st_find(&st, "bn.num_batches_tracked"), *tail = nf__st_find(&st, "w_tail");
    CHECK(w && w->dtype == NF_ST_F32 && w->ndim == 2 && w->shape[0] == 2 && w->shape[1] == 3 &&
              memcmp(nf__st_data(&st, w), sw, 24) == 0,
          "%s: w", what);
    CHECK(b && memcmp(nf__st_data(&st, b), sb, 12) == 0, "%s: b", what);
    CHECK(n && n->dtype == NF_ST_I64 && n->ndim == 0 && strcmp(n->dtype_str, "I64") == 0 &&
              memcmp(nf__st_data(&st, n), sn, 8) == 0,
          "%s: I64 scalar", what);
    CHECK(tail && tail->end - tail->begin == 16 && memcmp(nf__st_data(&st, tail), sw + 2, 16) == 0, "%s: offset view",
          what);
    nf__st_close(&st);
}

/* data offset of the first local header named `name` */
static long local_data_at(const unsigned char * b, size_t n, const char * name) {
    const size_t L = strlen(name);
    for (size_t i = 0; i + 30 + L <= n; i++) {
        if (memcmp(b + i, "PK\3\4", 4) == 0 && (size_t) (b[i + 26] | b[i + 27] << 8) == L &&
            memcmp(b + i + 30, name, L) == 0) {
            return (long) (i + 30 + L + (size_t) (b[i + 28] | b[i + 29] << 8));
        }
    }
    return -1;
}

static void replace_all(unsigned char * b, size_t n, const char * from, const char * to) {
    const size_t L = strlen(from);
    for (size_t i = 0; i + L <= n; i++)
        if (memcmp(b + i, from, L) == 0) memcpy(b + i, to, L);
}

static void test_archives(void) {
    char p[1024], q[1024];
    nf_err err = {0};
    tpath(p, sizeof(p), "good.ckpt");
    write_small(p, "good", 1, 0);
    check_small("wrapped, stored", p);
    tpath(p, sizeof(p), "bare.ckpt");
    write_small(p, "archive", 0, 0);
    check_small("bare, prefix archive/", p);
    tpath(p, sizeof(p), "deflated.ckpt");
    write_small(p, "deflated", 1, 1);
    check_small("deflated entries", p);
    /* the weight loader's entry point takes either format */
    {
        struct nf_safetensors st;
        tpath(p, sizeof(p), "good.ckpt");
        CHECK_RC(nf__tensors_open(p, &st, &err), NF_OK, &err);
        CHECK(st.n_tensors == 4 && st.map == NULL && st.heap != NULL, "nf__tensors_open: a .ckpt");
        nf__st_close(&st);
        tpath(q, sizeof(q), "good.safetensors");
        int n = 0;
        CHECK_RC(nf__ckpt_to_safetensors(p, q, &n, &err), NF_OK, &err);
        CHECK(n == 4, "converted %d", n);
        CHECK_RC(nf__tensors_open(q, &st, &err), NF_OK, &err);
        CHECK(st.n_tensors == 4 && st.map != NULL, "nf__tensors_open: a .safetensors");
        const struct nf_st_tensor * t = nf__st_find(&st, "bn.num_batches_tracked");
        CHECK(t && t->dtype == NF_ST_I64 && t->ndim == 0 && memcmp(nf__st_data(&st, t), sn, 8) == 0,
              "converted I64 scalar");
        t = nf__st_find(&st, "w_tail");
        CHECK(t && t->ndim == 1 && memcmp(nf__st_data(&st, t), sw + 2, 16) == 0, "converted offset view: own bytes");
        nf__st_close(&st);
    }

    /* hostile archives */
    tpath(p, sizeof(p), "evil-os-system.ckpt");
    {
        static const char pkl[] = "\x80\x02"
                                  "cos\nsystem\nq\x00X\x0b\x00\x00\x00touch pwnedq\x01\x85q\x02Rq\x03.";
        struct pkw w = {0};
        pk_raw(&w, pkl, sizeof(pkl) - 1);
        CHECK(gen_ckpt(p, "evil", &w, NULL, 0) == 0, "write");
        pkw_free(&w);
        expect_file("os.system in a .ckpt", p, NF_ERR_FORMAT, "evil/data.pkl+0x2: global 'os.system' is not allowed");
    }
    tpath(p, sizeof(p), "evil-eval.ckpt");
    {
        static const char pkl[] = "\x80\x02"
                                  "c__builtin__\neval\nq\x00X\x04\x00\x00\x00"
                                  "1+1q\x01\x85q\x02Rq\x03.";
        struct pkw w = {0};
        pk_raw(&w, pkl, sizeof(pkl) - 1);
        CHECK(gen_ckpt(p, "evil", &w, NULL, 0) == 0, "write");
        pkw_free(&w);
        expect_file("eval in a .ckpt", p, NF_ERR_FORMAT, "global '__builtin__.eval' is not allowed");
    }
    struct pkw w = {0};
    pk_state_dict(&w, small_t, 4, 1);
    tpath(p, sizeof(p), "missing-record.ckpt");
    CHECK(gen_ckpt(p, "x", &w, small_s, 2) == 0, "write");
    expect_file("missing data/2", p, NF_ERR_FORMAT, "storage '2': the archive has no record data/2");
    tpath(p, sizeof(p), "short-record.ckpt");
    {
        struct gen_storage s2[3] = {small_s[0], small_s[1], {"2", sn, 4}};
        CHECK(gen_ckpt(p, "x", &w, s2, 3) == 0, "write");
        expect_file("a short record", p, NF_ERR_FORMAT,
                    "storage '2' (I64, numel 1) needs 8 bytes but its record data/2 holds 4");
    }
    tpath(p, sizeof(p), "two-folders.ckpt");
    {
        struct gen_rec r[] = {{"a/data.pkl", w.b, w.n, 0}, {"b/data/0", sw, sizeof(sw), 0}};
        CHECK(gen_zip(p, "", r, 2) == 0, "write");
        expect_file("two folders", p, NF_ERR_FORMAT, "'b/data/0' is outside the archive's folder 'a/'");
    }
    tpath(p, sizeof(p), "no-folder.ckpt");
    {
        struct gen_rec r[] = {{"data.pkl", w.b, w.n, 0}};
        CHECK(gen_zip(p, "", r, 1) == 0, "write");
        expect_file("no folder", p, NF_ERR_FORMAT, "is not inside a folder");
    }
    tpath(p, sizeof(p), "dotdot.ckpt");
    {
        struct gen_rec r[] = {{"x/data.pkl", w.b, w.n, 0}, {"x/../data/0", sw, sizeof(sw), 0}};
        CHECK(gen_zip(p, "", r, 2) == 0, "write");
        expect_file("'..' in a name", p, NF_ERR_FORMAT, "holds '..'");
    }
    tpath(p, sizeof(p), "no-pkl.ckpt");
    {
        struct gen_rec r[] = {{"data/0", sw, sizeof(sw), 0}};
        CHECK(gen_zip(p, "x", r, 1) == 0, "write");
        expect_file("no data.pkl", p, NF_ERR_FORMAT, "no 'x/data.pkl'");
    }
    tpath(p, sizeof(p), "torchscript.ckpt");
    {
        struct gen_rec r[] = {{"data.pkl", w.b, w.n, 0}, {"constants.pkl", "\x80\x02).", 4, 0}};
        CHECK(gen_zip(p, "x", r, 2) == 0, "write");
        expect_file("TorchScript", p, NF_ERR_UNSUPPORTED, "a TorchScript archive");
    }
    tpath(p, sizeof(p), "bigendian.ckpt");
    {
        struct gen_rec r[] = {{"data.pkl", w.b, w.n, 0},
                              {"byteorder", "big", 3, 0},
                              {"data/0", sw, sizeof(sw), 0},
                              {"data/1", sb, sizeof(sb), 0},
                              {"data/2", sn, sizeof(sn), 0}};
        CHECK(gen_zip(p, "x", r, 5) == 0, "write");
        expect_file("big-endian", p, NF_ERR_UNSUPPORTED, "byteorder 'big'");
        r[1].data = "little";
        r[1].len = 6;
        CHECK(gen_zip(p, "x", r, 5) == 0, "write");
        expect_file("byteorder little", p, NF_OK, NULL);
    }
    tpath(p, sizeof(p), "rezipped.ckpt");
    {
        /* as `zip -r` would: folder entries, deflated data */
        struct gen_rec r[] = {{"", "", 0, 0},
                              {"data/", "", 0, 0},
                              {"data.pkl", w.b, w.n, 1},
                              {"data/0", sw, sizeof(sw), 1},
                              {"data/1", sb, sizeof(sb), 1},
                              {"data/2", sn, sizeof(sn), 1}};
        CHECK(gen_zip(p, "x", r, 6) == 0, "write");
        check_small("re-zipped with folder entries", p);
    }
    tpath(p, sizeof(p), "duplicate.ckpt");
    {
        struct gen_rec r[] = {{"data.pkl", w.b, w.n, 0},
                              {"data/0", sw, sizeof(sw), 0},
                              {"data/1", sb, sizeof(sb), 0},
                              {"data/2", sn, sizeof(sn), 0},
                              {"data/9", sw, sizeof(sw), 0}};
        CHECK(gen_zip(p, "x", r, 5) == 0, "write");
        size_t n;
        unsigned char * b = slurp(p, &n);
        replace_all(b, n, "x/data/9", "x/data/0"); /* local and central names alike */
        spit(p, b, n);
        free(b);
        nf_err e2 = {0};
        struct nf_safetensors st;
        const int rc = load(p, &st, &e2);
        CHECK(rc != NF_OK, "a duplicate entry must be refused");
        if (rc == NF_OK)
            nf__st_close(&st);
        else
            printf("duplicate entry: %s\n", e2.msg);
    }
    pkw_free(&w);
    /* a corrupted storage byte: the CRC catches it */
    tpath(p, sizeof(p), "good.ckpt");
    {
        size_t n;
        unsigned char * b = slurp(p, &n);
        const long at = local_data_at(b, n, "good/data/1");
        CHECK(at > 0, "found data/1");
        if (at > 0) {
            b[at] ^= 0x01;
            tpath(q, sizeof(q), "crc.ckpt");
            spit(q, b, n);
            expect_file("a flipped storage byte", q, NF_ERR_FORMAT, "CRC");
        }
        /* every truncation of the file is refused, never a crash */
        int accepted = 0;
        tpath(q, sizeof(q), "trunc.ckpt");
        for (size_t L = 0; L < n; L++) {
            spit(q, b, L);
            struct nf_safetensors st;
            if (load(q, &st, &err) == NF_OK) {
                accepted++;
                nf__st_close(&st);
            }
        }
        CHECK(accepted == 0, "%d truncations of a .ckpt were accepted", accepted);
        free(b);
    }
    tpath(p, sizeof(p), "text.ckpt");
    spit(p, "hello, world\n", 13);
    expect_file("not a zip", p, NF_ERR_FORMAT, "not a torch.save checkpoint");
    tpath(p, sizeof(p), "empty.ckpt");
    spit(p, "", 0);
    expect_file("an empty file", p, NF_ERR_FORMAT, "not a torch.save checkpoint");
    tpath(p, sizeof(p), "absent.ckpt");
    expect_file("an absent file", p, NF_ERR_IO, "cannot open");
    /* the in-memory entry point */
    {
        tpath(p, sizeof(p), "good.ckpt");
        size_t n;
        unsigned char * b = slurp(p, &n);
        struct nf_ckpt ck;
        CHECK_RC(nf__ckpt_open_mem(b, n, "mem.ckpt", &ck, &err), NF_OK, &err);
        CHECK(ck.n_tensors == 4 && strcmp(ck.prefix, "good") == 0, "in memory");
        float got[6] = {0};
        CHECK_RC(nf__ckpt_read_storage(&ck, ck.tensors[0].storage, got, &err), NF_OK, &err);
        CHECK(memcmp(got, sw, sizeof(sw)) == 0, "read_storage");
        nf__ckpt_close(&ck);
        free(b);
    }
}

/* ---- genuine torch.save files ---------------------------------------------------------- */

static void test_genuine(void) {
    static const char * const accept[] = {"bn_wrapped", "bn_bare", "views", "lightning", "nocrc"};
    static const struct {
        const char * name;
        int code;
        const char * needle;
    } refuse[] = {
        {"noncontig", NF_ERR_FORMAT, "tensor 'wt' is not contiguous (shape [6, 4], strides (1, 6))"},
        {"module", NF_ERR_FORMAT, "global 'torch.nn.modules.linear.Linear' is not allowed"},
        {"proto4", NF_ERR_UNSUPPORTED, "pickle protocol 4"},
        {"legacy", NF_ERR_UNSUPPORTED, "legacy torch.save format"},
        {"float8", NF_ERR_UNSUPPORTED, "'torch._utils._rebuild_tensor_v3' is not supported"},
    };
    char p[1024], e[1024];
    nf_err err = {0};
    for (size_t i = 0; i < sizeof(accept) / sizeof(accept[0]); i++) {
        snprintf(p, sizeof(p), "%s/%s.ckpt", fixtures, accept[i]);
        snprintf(e, sizeof(e), "%s/%s.expected.safetensors", fixtures, accept[i]);
        struct nf_safetensors got, want;
        int rc = nf__tensors_open(p, &got, &err);
        CHECK(rc == NF_OK, "%s: %s", accept[i], err.msg);
        if (rc != NF_OK) continue;
        CHECK_RC(nf__st_open(e, &want, &err), NF_OK, &err);
        CHECK(got.n_tensors == want.n_tensors, "%s: %d tensors, torch.load gave %d", accept[i], got.n_tensors,
              want.n_tensors);
        int same = 0;
        for (int j = 0; j < want.n_tensors; j++) {
            const struct nf_st_tensor *w = &want.tensors[j], *g = nf__st_find(&got, w->name);
            int ok = g && g->dtype == w->dtype && g->ndim == w->ndim && g->end - g->begin == w->end - w->begin;
            for (int d = 0; ok && d < w->ndim; d++) ok = g->shape[d] == w->shape[d];
            ok = ok && memcmp(nf__st_data(&got, g), nf__st_data(&want, w), (size_t) (w->end - w->begin)) == 0;
            CHECK(ok, "%s: tensor '%s' differs from torch.load's", accept[i], w->name);
            same += ok;
        }
        printf("%s.ckpt: %d/%d tensors equal to torch.load's (names, dtypes, shapes, bytes)\n", accept[i], same,
               want.n_tensors);
        nf__st_close(&want);
        nf__st_close(&got);
    }
    for (size_t i = 0; i < sizeof(refuse) / sizeof(refuse[0]); i++) {
        snprintf(p, sizeof(p), "%s/%s.ckpt", fixtures, refuse[i].name);
        expect_file(refuse[i].name, p, refuse[i].code, refuse[i].needle);
    }
    /* the I64 num_batches_tracked of a genuine file survives the conversion */
    snprintf(p, sizeof(p), "%s/bn_wrapped.ckpt", fixtures);
    char q[1024];
    tpath(q, sizeof(q), "bn.safetensors");
    CHECK_RC(nf__ckpt_to_safetensors(p, q, NULL, &err), NF_OK, &err);
    struct nf_safetensors st;
    CHECK_RC(nf__st_open(q, &st, &err), NF_OK, &err);
    const struct nf_st_tensor * t = nf__st_find(&st, "1.num_batches_tracked");
    CHECK(t && t->dtype == NF_ST_I64 && t->ndim == 0 && *(const int64_t *) nf__st_data(&st, t) == 2,
          "num_batches_tracked == 2, I64");
    nf__st_close(&st);
}

/* ---- the weight loader: a Mitra model from a .ckpt and from its safetensors ------------- */

static void test_weights_load(const char * model_dir) {
    nf_err err = {0};
    char cfgp[1024], stp[1024], ckp[1024];
    snprintf(cfgp, sizeof(cfgp), "%s/config.json", model_dir);
    snprintf(stp, sizeof(stp), "%s/model.safetensors", model_dir);
    tpath(ckp, sizeof(ckp), "mitra.ckpt");
    cJSON * doc = NULL;
    CHECK_RC(nf__json_read_file(cfgp, &doc, &err), NF_OK, &err);
    if (!doc) return;
    struct nf_mitra_config cfg;
    CHECK_RC(nf__mitra_config_parse(doc, cfgp, &cfg, &err), NF_OK, &err);
    cJSON_Delete(doc);
    /* the same tensors as a torch.save file: one storage per tensor */
    struct nf_safetensors st;
    CHECK_RC(nf__st_open(stp, &st, &err), NF_OK, &err);
    struct gen_tensor * gt = calloc((size_t) st.n_tensors, sizeof(*gt));
    struct gen_storage * gs = calloc((size_t) st.n_tensors, sizeof(*gs));
    char(*keys)[16] = calloc((size_t) st.n_tensors, sizeof(*keys));
    for (int i = 0; i < st.n_tensors; i++) {
        const struct nf_st_tensor * t = &st.tensors[i];
        snprintf(keys[i], sizeof(keys[i]), "%d", i);
        int64_t numel = 1;
        for (int d = 0; d < t->ndim; d++) numel *= t->shape[d];
        gt[i] = (struct gen_tensor){
            t->name, t->dtype == NF_ST_I64 ? "LongStorage" : "FloatStorage", keys[i], numel, 0, t->ndim, {0}, {-1}};
        for (int d = 0; d < t->ndim; d++) gt[i].shape[d] = t->shape[d];
        gs[i] = (struct gen_storage){keys[i], nf__st_data(&st, t), (size_t) (t->end - t->begin)};
    }
    struct pkw w = {0};
    pk_state_dict(&w, gt, st.n_tensors, 1);
    CHECK(gen_ckpt(ckp, "mitra", &w, gs, st.n_tensors) == 0, "write mitra.ckpt");
    pkw_free(&w);

    nf_backend * be = NULL;
    CHECK_RC(nf_backend_init("cpu", NF_PRECISION_EXACT, &be, &err), NF_OK, &err);
    struct nf_weights a, b;
    CHECK_RC(nf__weights_load(be, stp, &nf__mitra_wtable, &cfg, NULL, &a, &err), NF_OK, &err);
    CHECK_RC(nf__weights_load(be, ckp, &nf__mitra_wtable, &cfg, NULL, &b, &err), NF_OK, &err);
    if (a.buf.buf && b.buf.buf) {
        const int64_t n = a.buf.ne[0];
        CHECK(b.buf.ne[0] == n && a.n_params == b.n_params, "same packing: %lld vs %lld", (long long) n,
              (long long) b.buf.ne[0]);
        float *x = malloc((size_t) n * sizeof(float)), *y = malloc((size_t) n * sizeof(float));
        CHECK_RC(nf__tensor_download(&a.buf, x, &err), NF_OK, &err);
        CHECK_RC(nf__tensor_download(&b.buf, y, &err), NF_OK, &err);
        CHECK(b.buf.ne[0] == n && memcmp(x, y, (size_t) n * sizeof(float)) == 0,
              "the .ckpt and the .safetensors load byte-identical weights");
        printf("mitra: %d tensors, %lld parameters loaded from a .ckpt, identical to the safetensors\n", st.n_tensors,
               (long long) b.n_params);
        free(x);
        free(y);
    }
    nf__weights_free(&a);
    nf__weights_free(&b);
    /* the strict check names a renamed key in a .ckpt too */
    if (st.n_tensors > 1) {
        gt[1].name = "renamed.weight";
        memset(&w, 0, sizeof(w));
        pk_state_dict(&w, gt, st.n_tensors, 1);
        CHECK(gen_ckpt(ckp, "mitra", &w, gs, st.n_tensors) == 0, "write mitra.ckpt");
        pkw_free(&w);
        CHECK_RC(nf__weights_load(be, ckp, &nf__mitra_wtable, &cfg, NULL, &b, &err), NF_ERR_CHECKPOINT, &err);
        CHECK_MSG(&err, "unexpected 'renamed.weight'");
        CHECK_MSG(&err, st.tensors[1].name);
    }
    nf_backend_free(be);
    free(gt);
    free(gs);
    free(keys);
    nf__st_close(&st);
}

/* ---- the writer ----------------------------------------------------------------------------- */

/* the bytes of record <prefix>/<name> of a zip (malloc'ed), NULL if absent */
static unsigned char * zrecord(const char * path, const char * name, size_t * len) {
    int ze = 0;
    zip_t * za = zip_open(path, ZIP_RDONLY, &ze);
    *len = 0;
    if (!za) return NULL;
    unsigned char * out = NULL;
    const char * first = zip_get_name(za, 0, 0);
    const char * slash = first ? strchr(first, '/') : NULL;
    char full[1024];
    if (slash) snprintf(full, sizeof(full), "%.*s/%s", (int) (slash - first), first, name);
    zip_stat_t st;
    if (slash && zip_stat(za, full, 0, &st) == 0 && (st.valid & ZIP_STAT_SIZE)) {
        zip_file_t * f = zip_fopen(za, full, 0);
        out = malloc((size_t) st.size + 1);
        if (f && out && zip_fread(f, out, st.size) == (zip_int64_t) st.size)
            *len = (size_t) st.size;
        else {
            free(out);
            out = NULL;
        }
        if (f) zip_fclose(f);
    }
    zip_discard(za);
    return out;
}

/* entry names of a zip in central-directory order, without the folder, ';'-joined */
static void znames(const char * path, char * out, size_t n) {
    int ze = 0;
    zip_t * za = zip_open(path, ZIP_RDONLY, &ze);
    size_t len = 0;
    out[0] = '\0';
    if (!za) return;
    for (zip_int64_t i = 0; i < zip_get_num_entries(za, 0); i++) {
        const char * nm = zip_get_name(za, (zip_uint64_t) i, 0);
        const char * sl = nm ? strchr(nm, '/') : NULL;
        nf__msg_append(out, n, &len, "%s%s", i ? ";" : "", sl ? sl + 1 : "?");
    }
    zip_discard(za);
}

/* every entry stored, its data (from the local header) 64-byte aligned, and the folder */
static void check_layout(const char * what, const char * path, const char * prefix) {
    size_t n = 0;
    unsigned char * b = slurp(path, &n);
    int ze = 0, entries = 0, aligned = 0, stored = 0, in_prefix = 0;
    zip_t * za = zip_open(path, ZIP_RDONLY | ZIP_CHECKCONS, &ze);
    CHECK(za != NULL, "%s: libzip opens it with ZIP_CHECKCONS (error %d)", what, ze);
    for (zip_int64_t i = 0; za && b && i < zip_get_num_entries(za, 0); i++) {
        const char * nm = zip_get_name(za, (zip_uint64_t) i, 0);
        zip_stat_t st;
        if (!nm || zip_stat_index(za, (zip_uint64_t) i, 0, &st) != 0) continue;
        entries++;
        stored += st.comp_method == ZIP_CM_STORE;
        in_prefix += strncmp(nm, prefix, strlen(prefix)) == 0 && nm[strlen(prefix)] == '/';
        const long at = local_data_at(b, n, nm);
        aligned += at >= 0 && at % 64 == 0;
    }
    CHECK(entries > 0 && aligned == entries && stored == entries && in_prefix == entries,
          "%s: %d entries, %d stored, %d with 64-byte aligned data, %d in %s/", what, entries, stored, aligned,
          in_prefix, prefix);
    if (za) zip_discard(za);
    free(b);
}

/* files in tmpdir whose names contain `needle` (temporaries left behind) */
static int count_files(const char * needle) {
    DIR * d = opendir(tmpdir);
    int c = 0;
    for (struct dirent * e = d ? readdir(d) : NULL; e; e = readdir(d)) c += strstr(e->d_name, needle) != NULL;
    if (d) closedir(d);
    return c;
}

/* The genuine bn_wrapped / bn_bare files' tensors, written again: every
 * record as torch wrote it except that torch's state_dict() carries a
 * _metadata attribute (BUILD at the end of data.pkl) and an OrderedDict
 * built from scratch does not: data.pkl equal up to there. */
static void test_writer_vs_torch(void) {
    static const struct {
        const char *name, *wrap, *out;
    } cases[] = {{"bn_wrapped", "state_dict", "bn_wrapped.ckpt"}, {"bn_bare", NULL, "archive.ckpt"}};
    nf_err err = {0};
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        char src[1024], out[1024];
        snprintf(src, sizeof(src), "%s/%s.ckpt", fixtures, cases[c].name);
        tpath(out, sizeof(out), cases[c].out);
        struct nf_ckpt ck;
        struct nf_safetensors st;
        CHECK_RC(nf__ckpt_open(src, &ck, &err), NF_OK, &err);
        CHECK_RC(nf__ckpt_to_st(&ck, &st, &err), NF_OK, &err);
        struct nf_st_entry * e = calloc((size_t) ck.n_tensors, sizeof(*e));
        for (int i = 0; i < ck.n_tensors; i++) { /* the file's order */
            const struct nf_st_tensor * t = nf__st_find(&st, ck.tensors[i].name);
            if (!t) continue;
            e[i] = (struct nf_st_entry){t->name, t->ndim, {0}, nf__st_data(&st, t), t->dtype};
            memcpy(e[i].shape, t->shape, sizeof(e[i].shape));
        }
        CHECK_RC(nf__ckpt_write(out, e, ck.n_tensors, cases[c].wrap, &err), NF_OK, &err);
        char na[2048], nb[2048];
        znames(src, na, sizeof(na));
        znames(out, nb, sizeof(nb));
        CHECK(strcmp(na, nb) == 0, "%s: records [%s], torch's [%s]", cases[c].name, nb, na);
        size_t la, lb;
        unsigned char *a = zrecord(src, "data.pkl", &la), *b = zrecord(out, "data.pkl", &lb);
        /* ours: P + (wrapped ? "s." : "."), P ending with the items' SETITEMS; torch's: P + the _metadata BUILD ... */
        const size_t tail = cases[c].wrap ? 2 : 1;
        CHECK(a && b && lb > tail && lb - tail < la && memcmp(a, b, lb - tail) == 0 && b[lb - tail - 1] == 'u' &&
                  b[lb - 1] == '.',
              "%s: data.pkl (%zu bytes) is torch's (%zu bytes) up to its _metadata", cases[c].name, lb, la);
        printf("%s: data.pkl = torch's first %zu bytes (then torch's _metadata BUILD, %zu bytes)\n", cases[c].name,
               lb - tail, la - (lb - tail));
        free(a);
        free(b);
        /* every other record byte for byte, the serialization id included */
        int same = 0, total = 0;
        for (char * tok = strtok(na, ";"); tok; tok = strtok(NULL, ";")) {
            if (strcmp(tok, "data.pkl") == 0) continue;
            a = zrecord(src, tok, &la);
            b = zrecord(out, tok, &lb);
            /* the id: its names half (its CRC half follows data.pkl, which differs) */
            const size_t cmp = strcmp(tok, ".data/serialization_id") == 0 ? 20 : la;
            const int ok = a && b && la == lb && memcmp(a, b, cmp) == 0;
            CHECK(ok, "%s: record %s differs from torch's", cases[c].name, tok);
            same += ok;
            total++;
            free(a);
            free(b);
        }
        printf("%s: %d of %d other records identical to torch's (of .data/serialization_id the names half)\n",
               cases[c].name, same, total);
        check_layout(cases[c].name, out, cases[c].wrap ? "bn_wrapped" : "archive");
        free(e);
        nf__st_close(&st);
        nf__ckpt_close(&ck);
    }
}

/* torch's serialization id, recomputed from the records of every genuine file that has one */
static void test_serialization_id(void) {
    static const char * const files[] = {"bn_wrapped", "bn_bare", "views", "lightning", "module", "float8", "proto4"};
    int matched = 0;
    for (size_t f = 0; f < sizeof(files) / sizeof(files[0]); f++) {
        char p[1024];
        snprintf(p, sizeof(p), "%s/%s.ckpt", fixtures, files[f]);
        int ze = 0;
        zip_t * za = zip_open(p, ZIP_RDONLY, &ze);
        if (!za) continue;
        const zip_int64_t n = zip_get_num_entries(za, 0);
        const char ** names = calloc((size_t) n, sizeof(*names));
        uint32_t * crc = calloc((size_t) n, sizeof(*crc));
        uint64_t * sizes = calloc((size_t) n, sizeof(*sizes));
        int k = 0, has = 0;
        for (zip_int64_t i = 0; i < n; i++) {
            zip_stat_t st;
            const char * nm = zip_get_name(za, (zip_uint64_t) i, 0);
            const char * sl = nm ? strchr(nm, '/') : NULL;
            if (!sl || zip_stat_index(za, (zip_uint64_t) i, 0, &st) != 0) continue;
            if (strcmp(sl + 1, ".data/serialization_id") == 0) {
                has = 1;
                continue;
            }
            names[k] = sl + 1;
            sizes[k] = st.size;
            crc[k++] = st.crc;
        }
        char want[48] = "", got[48] = "";
        if (has) {
            char full[512];
            snprintf(full, sizeof(full), "%.*s/.data/serialization_id", (int) (names[0] - 1 - zip_get_name(za, 0, 0)),
                     zip_get_name(za, 0, 0));
            zip_file_t * zf = zip_fopen(za, full, 0);
            if (!zf || zip_fread(zf, want, 40) != 40) want[0] = '\0';
            want[40] = '\0';
            if (zf) zip_fclose(zf);
            nf_err err = {0};
            CHECK_RC(nf__ckpt_serialization_id(names, crc, sizes, k, got, &err), NF_OK, &err);
            CHECK(strcmp(got, want) == 0, "%s: serialization id %s, torch wrote %s", files[f], got, want);
            matched += strcmp(got, want) == 0;
        }
        if (za) zip_discard(za);
        free(names);
        free(crc);
        free(sizes);
    }
    CHECK(matched >= 7, "torch's serialization id reproduced for %d genuine files", matched);
    printf("serialization id: torch's reproduced for %d genuine torch 2.13 files\n", matched);
}

static void test_writer(void) {
    nf_err err = {0};
    char p[1024];
    /* every dtype, 0-d, empty, 5-d (MARK ... TUPLE), sizes through BININT1 / BININT2 / BININT */
    static const enum nf_st_dtype dt[] = {NF_ST_F32, NF_ST_F16, NF_ST_BF16, NF_ST_F64, NF_ST_I64,
                                          NF_ST_I32, NF_ST_I16, NF_ST_I8,   NF_ST_U8,  NF_ST_BOOL};
    enum { NT = 14 };
    struct nf_st_entry e[NT];
    unsigned char * data[NT];
    const char * names[NT] = {"f32", "f16", "bf16", "f64",    "i64",   "i32",    "i16",
                              "i8",  "u8",  "bool", "scalar", "empty", "five.d", "long.row"};
    memset(e, 0, sizeof(e));
    for (int i = 0; i < NT; i++) {
        e[i].name = names[i];
        e[i].dtype = i < 10 ? dt[i] : NF_ST_F32;
        e[i].ndim = 2;
        e[i].shape[0] = 3;
        e[i].shape[1] = 300; /* BININT2 */
    }
    e[10].ndim = 0;
    e[11].shape[0] = 0;
    e[11].shape[1] = 3;
    e[12].ndim = 5;
    for (int d = 0; d < 5; d++) e[12].shape[d] = d + 1;
    e[13].dtype = NF_ST_U8;
    e[13].ndim = 1;
    e[13].shape[0] = 70000; /* BININT */
    uint64_t s = 7;
    for (int i = 0; i < NT; i++) {
        int64_t ne = 1;
        for (int d = 0; d < e[i].ndim; d++) ne *= e[i].shape[d];
        const size_t nb = (size_t) ne * nf__st_dtype_size(e[i].dtype);
        data[i] = malloc(nb ? nb : 1);
        for (size_t j = 0; j < nb; j++) data[i][j] = (unsigned char) (nf__rng_next(&s) >> 56);
        if (e[i].dtype == NF_ST_BOOL)
            for (size_t j = 0; j < nb; j++) data[i][j] &= 1;
        e[i].data = data[i];
    }
    tpath(p, sizeof(p), "w.all.ckpt"); /* the folder: "w.all" */
    CHECK_RC(nf__ckpt_write(p, e, NT, "state_dict", &err), NF_OK, &err);
    struct nf_ckpt ck;
    struct nf_safetensors st;
    int rc = nf__ckpt_open(p, &ck, &err);
    CHECK(rc == NF_OK, "written .ckpt opens: %s", err.msg);
    if (rc == NF_OK) {
        CHECK(strcmp(ck.prefix, "w.all") == 0 && strcmp(ck.dict, "state_dict") == 0 && ck.n_tensors == NT &&
                  ck.n_storages == NT,
              "folder '%s', dict '%s', %d tensors, %d storages", ck.prefix, ck.dict, ck.n_tensors, ck.n_storages);
        CHECK_RC(nf__ckpt_to_st(&ck, &st, &err), NF_OK, &err);
        int same = 0;
        for (int i = 0; i < NT && i < ck.n_tensors; i++) {
            const struct nf_st_tensor * t = nf__st_find(&st, e[i].name);
            int ok = strcmp(ck.tensors[i].name, e[i].name) == 0 && t && t->dtype == e[i].dtype && t->ndim == e[i].ndim;
            for (int d = 0; ok && d < e[i].ndim; d++) ok = t->shape[d] == e[i].shape[d];
            ok = ok && memcmp(nf__st_data(&st, t), data[i], (size_t) (t->end - t->begin)) == 0;
            CHECK(ok, "tensor %d '%s' read back", i, e[i].name);
            same += ok;
        }
        printf("writer: %d of %d tensors (10 dtypes, 0-d, empty, 5-d, 70000-long) read back identical\n", same, NT);
        nf__st_close(&st);
        nf__ckpt_close(&ck);
    }
    check_layout("w.all", p, "w.all");

    /* 1001 tensors: a SETITEMS batch of 1000, then one SETITEM; memo indices past 255 (LONG_BINPUT / _BINGET) */
    enum { NM = 1001 };
    struct nf_st_entry * many = calloc(NM, sizeof(*many));
    char(*mn)[16] = calloc(NM, sizeof(*mn));
    float * mv = calloc(NM, sizeof(float));
    for (int i = 0; i < NM; i++) {
        snprintf(mn[i], sizeof(mn[i]), "t%04d", NM - i); /* not in sorted order */
        mv[i] = (float) i;
        many[i] = (struct nf_st_entry){mn[i], 1, {1}, &mv[i], NF_ST_F32};
    }
    tpath(p, sizeof(p), "many.ckpt");
    CHECK_RC(nf__ckpt_write(p, many, NM, NULL, &err), NF_OK, &err);
    rc = nf__ckpt_open(p, &ck, &err);
    CHECK(rc == NF_OK, "1001 tensors: %s", err.msg);
    if (rc == NF_OK) {
        int order = ck.n_tensors == NM && strcmp(ck.dict, "") == 0;
        for (int i = 0; order && i < NM; i++) order = strcmp(ck.tensors[i].name, mn[i]) == 0;
        CHECK(order, "1001 tensors in the given order, a bare OrderedDict");
        CHECK_RC(nf__ckpt_to_st(&ck, &st, &err), NF_OK, &err);
        const struct nf_st_tensor * t = nf__st_find(&st, "t0001");
        CHECK(t && *(const float *) nf__st_data(&st, t) == 1000.0f, "the last (SETITEM) tensor's value");
        nf__st_close(&st);
        nf__ckpt_close(&ck);
    }
    size_t len = 0;
    unsigned char * pkl = zrecord(p, "data.pkl", &len);
    int long_put = 0, setitems = 0;
    for (size_t i = 0; pkl && i + 5 <= len; i++) long_put += memcmp(pkl + i, "r\x00\x01\x00\x00", 5) == 0;
    for (size_t i = 0; pkl && i < len; i++) setitems += pkl[i] == 'u';
    CHECK(pkl && len > 3 && pkl[len - 1] == '.' && pkl[len - 2] == 's' && long_put > 0 && setitems >= 1,
          "data.pkl: a SETITEMS batch, then SETITEM, STOP; LONG_BINPUT 256 used");
    free(pkl);

    /* an empty state_dict */
    tpath(p, sizeof(p), "empty.ckpt");
    CHECK_RC(nf__ckpt_write(p, NULL, 0, "state_dict", &err), NF_OK, &err);
    pkl = zrecord(p, "data.pkl", &len);
    static const unsigned char want_empty[] = "\x80\x02}q\x00X\x0a\x00\x00\x00state_dictq\x01"
                                              "ccollections\nOrderedDict\nq\x02)Rq\x03s.";
    CHECK(pkl && len == sizeof(want_empty) - 1 && memcmp(pkl, want_empty, len) == 0,
          "{'state_dict': OrderedDict()} pickled as CPython does (%zu bytes)", len);
    free(pkl);

    /* refusals: the target untouched, nothing left behind */
    tpath(p, sizeof(p), "keep.ckpt");
    CHECK_RC(nf__ckpt_write(p, e, 2, "state_dict", &err), NF_OK, &err);
    size_t before_n = 0;
    unsigned char * before = slurp(p, &before_n);
    struct nf_st_entry bad[2] = {e[0], e[0]};
    CHECK_RC(nf__ckpt_write(p, bad, 2, "state_dict", &err), NF_ERR_ARG, &err);
    CHECK_MSG(&err, "'f32' twice");
    bad[1] = e[1];
    bad[1].dtype = NF_ST_OTHER;
    CHECK_RC(nf__ckpt_write(p, bad, 2, "state_dict", &err), NF_ERR_ARG, &err);
    CHECK_MSG(&err, "has no torch storage class");
    bad[1] = e[1];
    bad[1].name = "bad\xff";
    CHECK_RC(nf__ckpt_write(p, bad, 2, "state_dict", &err), NF_ERR_ARG, &err);
    CHECK_MSG(&err, "is not a UTF-8 string");
    bad[1] = e[1];
    bad[1].data = NULL;
    CHECK_RC(nf__ckpt_write(p, bad, 2, "state_dict", &err), NF_ERR_ARG, &err);
    CHECK_MSG(&err, "f16: no data");
    size_t after_n = 0;
    unsigned char * after = slurp(p, &after_n);
    CHECK(before && after && before_n == after_n && memcmp(before, after, before_n) == 0,
          "refused writes leave the existing file as it was");
    free(before);
    free(after);
    char q[1024];
    tpath(q, sizeof(q), ".ckpt");
    CHECK_RC(nf__ckpt_write(q, e, 1, NULL, &err), NF_ERR_ARG, &err);
    CHECK_MSG(&err, "gives no archive name");
    tpath(q, sizeof(q), "no-such-dir/x.ckpt");
    CHECK_RC(nf__ckpt_write(q, e, 1, NULL, &err), NF_ERR_IO, &err);
    CHECK(count_files(".tmp") == 0, "no temporary file left behind (%d)", count_files(".tmp"));
    for (int i = 0; i < NT; i++) free(data[i]);
    free(many);
    free(mn);
    free(mv);
}

/* gen-weights sptransformer --format ckpt (a small configuration): the .ckpt
 * loads as the model, holds model.safetensors's tensors byte for byte in the
 * table's (upstream's registration) order, and gives the same logits */
static void test_gen_ckpt(void) {
    nf_err err = {0};
    char dir[1024], ckp[1024], stp[1024];
    tpath(dir, sizeof(dir), "spt-gen-ckpt");
    snprintf(ckp, sizeof(ckp), "%s/SpTransformer_pytorch.ckpt", dir);
    snprintf(stp, sizeof(stp), "%s/model.safetensors", dir);
    const char *keys[] = {"dim", "depth", "context", "window", "tissues"}, *vals[] = {"16", "2", "50", "128", "4"};
    CHECK_RC(nf__model_gen_weights_fmt("sptransformer", dir, "ckpt", 11, 5, keys, vals, NULL, 0.0f, NULL, 0, &err),
             NF_OK, &err);
    CHECK_RC(nf__model_gen_weights_fmt("mitra", dir, "ckpt", 11, 0, NULL, NULL, NULL, 0.0f, NULL, 0, &err), NF_ERR_ARG,
             &err);
    CHECK_MSG(&err, "mitra has no torch.save checkpoint form");
    CHECK_RC(nf__model_gen_weights_fmt("sptransformer", dir, "zip", 11, 0, NULL, NULL, NULL, 0.0f, NULL, 0, &err),
             NF_ERR_ARG, &err);
    struct nf_ckpt ck;
    struct nf_safetensors a, b;
    CHECK_RC(nf__st_open(stp, &a, &err), NF_OK, &err);
    int rc = nf__ckpt_open(ckp, &ck, &err);
    CHECK(rc == NF_OK, "%s opens: %s", ckp, err.msg);
    if (rc == NF_OK) {
        CHECK(strcmp(ck.prefix, "SpTransformer_pytorch") == 0 && strcmp(ck.dict, "state_dict") == 0,
              "folder %s, dict '%s'", ck.prefix, ck.dict);
        CHECK_RC(nf__ckpt_to_st(&ck, &b, &err), NF_OK, &err);
        CHECK(a.n_tensors == ck.n_tensors && b.n_tensors == ck.n_tensors, "%d tensors in both (%d)", ck.n_tensors,
              a.n_tensors);
        int same = 0;
        for (int i = 0; i < a.n_tensors; i++) {
            const struct nf_st_tensor *x = &a.tensors[i], *y = nf__st_find(&b, x->name);
            int ok = y && x->dtype == y->dtype && x->ndim == y->ndim && x->end - x->begin == y->end - y->begin;
            for (int d = 0; ok && d < x->ndim; d++) ok = x->shape[d] == y->shape[d];
            ok = ok && memcmp(nf__st_data(&a, x), nf__st_data(&b, y), (size_t) (x->end - x->begin)) == 0;
            CHECK(ok, "'%s' differs between the .ckpt and model.safetensors", x->name);
            same += ok;
        }
        /* the table's order: upstream's state_dict() order */
        struct nf_spt_config cfg;
        nf__spt_config_default(&cfg);
        cfg.dim = 16;
        cfg.attn_depth = 2;
        cfg.context_len = 50;
        cfg.max_seq_len = 128;
        cfg.tissue_num = 4;
        cfg.attn_dim = 32;
        cfg.dim_head = 4;
        struct nf_wkey * wk = NULL;
        int nk = 0, in_order = 0;
        CHECK_RC(nf__wtable_expand(&nf__spt_wtable, &cfg, NULL, &wk, &nk, &err), NF_OK, &err);
        for (int i = 0, j = 0; i < nk && j < ck.n_tensors; i++) {
            if (!nf__wkey_written(&wk[i])) continue;
            in_order += strcmp(wk[i].name, ck.tensors[j++].name) == 0;
        }
        free(wk);
        CHECK(in_order == ck.n_tensors && in_order > 0, "the .ckpt's %d tensors in the table's order (%d)",
              ck.n_tensors, in_order);
        printf("gen-weights --format ckpt: %d of %d tensors byte-identical to model.safetensors, in table order\n",
               same, a.n_tensors);
        nf__st_close(&b);
        nf__ckpt_close(&ck);
    }
    nf__st_close(&a);
    check_layout("SpTransformer_pytorch.ckpt", ckp, "SpTransformer_pytorch");
    /* the model from either file: the same logits */
    nf_backend * be = NULL;
    CHECK_RC(nf_backend_init("cpu", NF_PRECISION_EXACT, &be, &err), NF_OK, &err);
    nf_model *m1 = NULL, *m2 = NULL;
    CHECK_RC(nf_model_load(be, dir, &m1, &err), NF_OK, &err);
    CHECK_RC(nf_model_load(be, ckp, &m2, &err), NF_OK, &err);
    if (m1 && m2) {
        enum { L = 150 };
        int64_t ids[2 * L];
        int8_t t8[2 * L];
        nf__spt_seeded_tokens(5, 2 * L, t8);
        for (int i = 0; i < 2 * L; i++) ids[i] = t8[i];
        struct nf_array in = {"tokens", NF_ARRAY_I64, 2, {2, L}, ids};
        float o1[2 * 50 * 7], o2[2 * 50 * 7];
        memset(o2, 0, sizeof(o2));
        CHECK_RC(nf_model_forward(m1, &in, 1, o1, &err), NF_OK, &err);
        CHECK_RC(nf_model_forward(m2, &in, 1, o2, &err), NF_OK, &err);
        CHECK(memcmp(o1, o2, sizeof(o1)) == 0, "--model %s: logits byte-identical to the safetensors'", ckp);
    }
    nf_model_free(m1);
    nf_model_free(m2);
    nf_backend_free(be);
}

int main(int argc, char ** argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test-ckpt FIXTURE_DIR [SMALL_MITRA_MODEL_DIR]\n");
        return 2;
    }
    fixtures = argv[1];
    mkdir(tmpdir, 0777);
    test_pickle_ok();
    test_pickle_hostile();
    test_archives();
    test_genuine();
    test_writer_vs_torch();
    test_serialization_id();
    test_writer();
    test_gen_ckpt();
    if (argc > 2) test_weights_load(argv[2]);
    return nf_test_done("test-ckpt");
}
