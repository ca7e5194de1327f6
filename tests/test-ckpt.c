/* test-ckpt.c -- the torch.save (.ckpt) reader: genuine torch 2.13 files
 * (tests/fixtures/ckpt, made by reference/make_ckpt_fixtures.py) against the
 * tensors torch.load gave; checkpoints written here without torch
 * (tests/ckpt-gen.h); hostile pickles and archives, each refused with its
 * reason; truncation and bit-flip sweeps; the conversion to safetensors; and
 * the weight loader taking a .ckpt where it takes a .safetensors. (The
 * writer: test-ckpt-write.c.)
 *
 * usage: test-ckpt FIXTURE_DIR
 * Leaves evil-os-system.ckpt, evil-eval.ckpt and good.ckpt in test-ckpt.tmp/
 * for the CLI test (tests/ckpt-cli.sh). */
#include "test-ckpt.h"

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

int main(int argc, char ** argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test-ckpt FIXTURE_DIR\n");
        return 2;
    }
    fixtures = argv[1];
    mkdir(tmpdir, 0777);
    test_pickle_ok();
    test_pickle_hostile();
    test_archives();
    return nf_test_done("test-ckpt");
}
