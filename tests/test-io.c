/* test-io.c -- safetensors / npy readers on valid and malformed files, the
 * weight-table machinery (optional / ignored / alias / non-F32 / packed
 * keys), and the strict Mitra key check. */
#include "nf-test.h"
#include "io/nf-io.h"
#include "models/mitra-impl.h"

#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>

static char tmpdir[512];

static void path_of(char * out, size_t n, const char * name) { snprintf(out, n, "%s/%s", tmpdir, name); }

/* write a safetensors file with an explicit header text and data bytes */
static void write_st(const char * name, const char * header, uint64_t declared_len, size_t data_bytes) {
    char p[1024];
    path_of(p, sizeof(p), name);
    FILE * f = fopen(p, "wb");
    unsigned char lb[8];
    for (int i = 0; i < 8; i++) lb[i] = (unsigned char) (declared_len >> (8 * i));
    fwrite(lb, 1, 8, f);
    fwrite(header, 1, strlen(header), f);
    for (size_t i = 0; i < data_bytes; i++) fputc((int) (i & 0xff), f);
    fclose(f);
}

static int open_st(const char * name, nf_err * err) {
    char p[1024];
    path_of(p, sizeof(p), name);
    struct nf_safetensors st;
    int rc = nf__st_open(p, &st, err);
    if (rc == NF_OK) nf__st_close(&st);
    return rc;
}

static void test_safetensors(void) {
    nf_err err = {0};
    const char * ok =
        "{\"__metadata__\":{\"format\":\"pt\"},\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]},"
        "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
    write_st("ok.st", ok, strlen(ok), 16);
    CHECK_RC(open_st("ok.st", &err), NF_OK, &err);
    {
        char p[1024];
        path_of(p, sizeof(p), "ok.st");
        struct nf_safetensors st;
        CHECK_RC(nf__st_open(p, &st, &err), NF_OK, &err);
        CHECK(st.n_tensors == 2, "metadata must be skipped, got %d tensors", st.n_tensors);
        const struct nf_st_tensor * a = nf__st_find(&st, "a");
        CHECK(a && a->begin == 0 && a->end == 8 && a->dtype == NF_ST_F32, "tensor a");
        CHECK(nf__st_find(&st, "c") == NULL, "no tensor c");
        nf__st_close(&st);
    }
    write_st("short.st", "", 3, 0); /* 8-byte length + nothing: too short handled below */
    {
        char p[1024];
        path_of(p, sizeof(p), "tiny.st");
        FILE * f = fopen(p, "wb");
        fwrite("abc", 1, 3, f);
        fclose(f);
        CHECK_RC(open_st("tiny.st", &err), NF_ERR_FORMAT, &err);
        CHECK_MSG(&err, "too short");
    }
    write_st("hdr-past-eof.st", ok, 100000, 16);
    CHECK_RC(open_st("hdr-past-eof.st", &err), NF_ERR_FORMAT, &err);
    CHECK_MSG(&err, "past the end");
    write_st("hdr-cap.st", ok, (uint64_t) 1 << 40, 16);
    CHECK_RC(open_st("hdr-cap.st", &err), NF_ERR_FORMAT, &err);
    CHECK_MSG(&err, "cap");
    write_st("truncated.st", ok, strlen(ok), 12); /* data section 4 bytes short */
    CHECK_RC(open_st("truncated.st", &err), NF_ERR_FORMAT, &err);
    CHECK_MSG(&err, "'b'");
    const char * overlap =
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}";
    write_st("overlap.st", overlap, strlen(overlap), 16);
    CHECK_RC(open_st("overlap.st", &err), NF_ERR_FORMAT, &err);
    CHECK_MSG(&err, "overlap");
    const char * badsize = "{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}";
    write_st("badsize.st", badsize, strlen(badsize), 16);
    CHECK_RC(open_st("badsize.st", &err), NF_ERR_FORMAT, &err);
    CHECK_MSG(&err, "needs 12");
    const char * inverted = "{\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,0]}}";
    write_st("inverted.st", inverted, strlen(inverted), 16);
    CHECK_RC(open_st("inverted.st", &err), NF_ERR_FORMAT, &err);
    const char * notjson = "{\"a\":{\"dtype\":";
    write_st("notjson.st", notjson, strlen(notjson), 0);
    CHECK_RC(open_st("notjson.st", &err), NF_ERR_FORMAT, &err);
    CHECK_MSG(&err, "JSON");
    const char * dup =
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}";
    write_st("dup.st", dup, strlen(dup), 8);
    CHECK_RC(open_st("dup.st", &err), NF_ERR_FORMAT, &err);
    CHECK_MSG(&err, "twice");
    const char * negshape = "{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}";
    write_st("negshape.st", negshape, strlen(negshape), 4);
    CHECK_RC(open_st("negshape.st", &err), NF_ERR_FORMAT, &err);
    const char * nooffs = "{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}";
    write_st("nooffs.st", nooffs, strlen(nooffs), 4);
    CHECK_RC(open_st("nooffs.st", &err), NF_ERR_FORMAT, &err);
    CHECK_MSG(&err, "data_offsets");
    char missing[1024];
    path_of(missing, sizeof(missing), "does-not-exist.st");
    struct nf_safetensors st;
    CHECK_RC(nf__st_open(missing, &st, &err), NF_ERR_IO, &err);
    CHECK_MSG(&err, "does-not-exist.st");
}

static void test_npy(void) {
    nf_err err = {0};
    char p[1024];
    float f[6] = {1, 2, 3, 4, 5, 6};
    int64_t sh[2] = {2, 3};
    path_of(p, sizeof(p), "a.npy");
    CHECK_RC(nf__npy_write(p, NF_NPY_F4, 2, sh, f, &err), NF_OK, &err);
    struct nf_npy a;
    CHECK_RC(nf__npy_read(p, &a, &err), NF_OK, &err);
    CHECK(a.dtype == NF_NPY_F4 && a.ndim == 2 && a.shape[0] == 2 && a.shape[1] == 3, "shape round trip");
    CHECK(a.data && memcmp(a.data, f, sizeof(f)) == 0, "data round trip");
    nf__npy_free(&a);
    int64_t y[3] = {0, 9, 4};
    int64_t s1[1] = {3};
    path_of(p, sizeof(p), "y.npy");
    CHECK_RC(nf__npy_write(p, NF_NPY_I8, 1, s1, y, &err), NF_OK, &err);
    CHECK_RC(nf__npy_read(p, &a, &err), NF_OK, &err);
    CHECK(a.dtype == NF_NPY_I8 && a.ndim == 1 && a.shape[0] == 3 && ((int64_t *) a.data)[1] == 9, "int64 round trip");
    nf__npy_free(&a);
    /* header check: numpy's format is 64-byte aligned */
    FILE * fp = fopen(p, "rb");
    unsigned char hdr[10];
    CHECK(fread(hdr, 1, 10, fp) == 10, "read header");
    fclose(fp);
    CHECK((10 + (hdr[8] | (hdr[9] << 8))) % 64 == 0, "npy header aligned to 64");

    /* malformed */
    path_of(p, sizeof(p), "bad-magic.npy");
    fp = fopen(p, "wb");
    fwrite("NOTNUMPYxxxxxxxx", 1, 16, fp);
    fclose(fp);
    CHECK_RC(nf__npy_read(p, &a, &err), NF_ERR_FORMAT, &err);
    CHECK_MSG(&err, "magic");
    const char * h = "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }";
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char) strlen(h), 0};
    path_of(p, sizeof(p), "trunc.npy");
    fp = fopen(p, "wb");
    fwrite(pre, 1, 10, fp);
    fwrite(h, 1, strlen(h), fp);
    fwrite(f, 4, 3, fp);
    fclose(fp);
    CHECK_RC(nf__npy_read(p, &a, &err), NF_ERR_FORMAT, &err);
    CHECK_MSG(&err, "truncated");
    const char * h2 = "{'descr': '<f2', 'fortran_order': False, 'shape': (2,), }";
    pre[8] = (unsigned char) strlen(h2);
    path_of(p, sizeof(p), "f16.npy");
    fp = fopen(p, "wb");
    fwrite(pre, 1, 10, fp);
    fwrite(h2, 1, strlen(h2), fp);
    fwrite(f, 2, 2, fp);
    fclose(fp);
    CHECK_RC(nf__npy_read(p, &a, &err), NF_ERR_FORMAT, &err);
    CHECK_MSG(&err, "unsupported dtype");
    const char * h3 = "{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }";
    pre[8] = (unsigned char) strlen(h3);
    path_of(p, sizeof(p), "fortran.npy");
    fp = fopen(p, "wb");
    fwrite(pre, 1, 10, fp);
    fwrite(h3, 1, strlen(h3), fp);
    fwrite(f, 4, 2, fp);
    fclose(fp);
    CHECK_RC(nf__npy_read(p, &a, &err), NF_ERR_FORMAT, &err);
    CHECK_MSG(&err, "fortran");
    pre[8] = 200; /* header length past the end */
    path_of(p, sizeof(p), "hlen.npy");
    fp = fopen(p, "wb");
    fwrite(pre, 1, 10, fp);
    fwrite(h3, 1, strlen(h3), fp);
    fclose(fp);
    CHECK_RC(nf__npy_read(p, &a, &err), NF_ERR_FORMAT, &err);
}

/* Write a Mitra checkpoint from the generator, optionally editing one entry. */
enum edit { E_NONE, E_MISSING, E_EXTRA, E_SHAPE, E_DTYPE };

static void write_mitra(const char * dir, const struct nf_mitra_config * cfg, enum edit e, const char * target) {
    mkdir(dir, 0777);
    struct nf_wkey * keys = NULL;
    int n = 0;
    nf_err err = {0};
    CHECK_RC(nf__wtable_expand(&nf__mitra_wtable, cfg, NULL, &keys, &n, &err), NF_OK, &err);
    /* header in REVERSE order: key order must not matter */
    char * hdr = malloc(1 << 20);
    size_t len = 0;
    uint64_t off = 0;
    len += (size_t) sprintf(hdr + len, "{");
    int first = 1;
    for (int i = n - 1 + (e == E_EXTRA); i >= 0; i--) {
        const char * name = i == n ? "layers.0.extra.weight" : keys[i].name;
        int64_t s0 = i == n ? 2 : keys[i].shape[0], s1 = i == n ? 0 : keys[i].shape[1];
        int nd = i == n ? 1 : keys[i].ndim;
        const char * dt = "F32";
        size_t es = 4;
        if (e == E_MISSING && strcmp(name, target) == 0) continue;
        if (e == E_SHAPE && strcmp(name, target) == 0) s0 += 1;
        if (e == E_DTYPE && strcmp(name, target) == 0) {
            dt = "F16";
            es = 2;
        }
        uint64_t nb = (uint64_t) s0 * (uint64_t) (nd == 2 ? s1 : 1) * es;
        if (nd == 2)
            len += (size_t) sprintf(hdr + len,
                                    "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[%lld,%lld],\"data_offsets\":[%llu,%llu]}",
                                    first ? "" : ",", name, dt, (long long) s0, (long long) s1,
                                    (unsigned long long) off, (unsigned long long) (off + nb));
        else
            len += (size_t) sprintf(
                hdr + len, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[%lld],\"data_offsets\":[%llu,%llu]}",
                first ? "" : ",", name, dt, (long long) s0, (unsigned long long) off, (unsigned long long) (off + nb));
        first = 0;
        off += nb;
    }
    len += (size_t) sprintf(hdr + len, "}");
    char p[1024];
    snprintf(p, sizeof(p), "%s/model.safetensors", dir);
    FILE * f = fopen(p, "wb");
    unsigned char lb[8];
    for (int i = 0; i < 8; i++) lb[i] = (unsigned char) ((uint64_t) len >> (8 * i));
    fwrite(lb, 1, 8, f);
    fwrite(hdr, 1, len, f);
    float v = 0.01f;
    for (uint64_t i = 0; i < off / 2; i++) fwrite(&v, 1, 2, f); /* any finite-ish bytes */
    fclose(f);
    snprintf(p, sizeof(p), "%s/config.json", dir);
    f = fopen(p, "wb");
    fprintf(f, "{\"dim\": %d, \"dim_output\": %d, \"n_layers\": %d, \"n_heads\": %d, \"task\": \"%s\"}", cfg->dim,
            cfg->dim_output, cfg->n_layers, cfg->n_heads,
            cfg->task == NF_TASK_CLASSIFICATION ? "CLASSIFICATION" : "REGRESSION");
    fclose(f);
    free(hdr);
    free(keys);
}

static void test_mitra_keys(void) {
    nf_err err = {0};
    struct nf_mitra_config cls = {
        .dim = 512, .dim_output = 10, .n_layers = 12, .n_heads = 4, .task = NF_TASK_CLASSIFICATION};
    struct nf_mitra_config reg = {
        .dim = 512, .dim_output = 1, .n_layers = 12, .n_heads = 4, .task = NF_TASK_REGRESSION};
    struct nf_wkey * k = NULL;
    for (int t = 0; t < 2; t++) {
        const struct nf_mitra_config * c = t ? &reg : &cls;
        int n = 0;
        free(k);
        k = NULL;
        CHECK_RC(nf__wtable_expand(&nf__mitra_wtable, c, NULL, &k, &n, &err), NF_OK, &err);
        CHECK(n == (t ? 393 : 392), "%s has %d keys", t ? "regressor (393)" : "classifier (392)", n);
        int64_t params = 0;
        for (int i = 0; i < n; i++) params += nf__wkey_numel(&k[i]);
        CHECK(params == (t ? 75661313 : 75670026), "parameter count %lld", (long long) params);
    }
    CHECK(k && strcmp(k[0].name, "x_embedding.x_embedding.weight") == 0, "first key");
    free(k);

    /* strict load on a small config, header in reverse order */
    nf_backend * be;
    CHECK_RC(nf_backend_init("cpu", NF_PRECISION_EXACT, &be, &err), NF_OK, &err);
    struct nf_mitra_config small = {
        .dim = 8, .dim_output = 3, .n_layers = 2, .n_heads = 2, .task = NF_TASK_CLASSIFICATION};
    char dir[1024];
    nf_model * m = NULL;
    snprintf(dir, sizeof(dir), "%s/m-ok", tmpdir);
    write_mitra(dir, &small, E_NONE, NULL);
    CHECK_RC(nf_model_load(be, dir, &m, &err), NF_OK, &err);
    CHECK(m && strcmp(nf_model_type(m), "mitra") == 0, "a config without model_type is Mitra");
    nf_model_free(m);
    struct {
        enum edit e;
        const char * target;
        const char * needle;
    } cases[] = {
        {E_MISSING, "layers.1.attention2.k.bias", "missing 'layers.1.attention2.k.bias'"},
        {E_EXTRA, NULL, "unexpected 'layers.0.extra.weight'"},
        {E_SHAPE, "layers.0.linear1.weight", "'layers.0.linear1.weight' has shape [33, 8] (expected [32, 8])"},
        {E_DTYPE, "final_layer.bias", "'final_layer.bias' has dtype F16"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        snprintf(dir, sizeof(dir), "%s/m-bad%zu", tmpdir, i);
        write_mitra(dir, &small, cases[i].e, cases[i].target);
        m = NULL;
        CHECK_RC(nf_model_load(be, dir, &m, &err), NF_ERR_CHECKPOINT, &err);
        CHECK_MSG(&err, cases[i].needle);
        CHECK(m == NULL, "no model on failure");
    }
    /* config errors */
    snprintf(dir, sizeof(dir), "%s/m-cfg", tmpdir);
    write_mitra(dir, &small, E_NONE, NULL);
    char p[1024];
    snprintf(p, sizeof(p), "%s/config.json", dir);
    FILE * f = fopen(p, "wb");
    fprintf(f, "{\"dim\": 8, \"dim_output\": 3, \"n_layers\": 2, \"n_heads\": 3, \"task\": \"CLASSIFICATION\"}");
    fclose(f);
    CHECK_RC(nf_model_load(be, dir, &m, &err), NF_ERR_CHECKPOINT, &err);
    CHECK_MSG(&err, "multiple of n_heads");
    f = fopen(p, "wb");
    fprintf(f, "{\"dim\": 8, \"dim_output\": 3, \"n_layers\": 2, \"n_heads\": 2, \"task\": \"classification\"}");
    fclose(f);
    CHECK_RC(nf_model_load(be, dir, &m, &err), NF_ERR_CHECKPOINT, &err);
    CHECK_MSG(&err, "unknown task");
    f = fopen(p, "wb");
    fprintf(f, "{\"dim\": 8, \"n_layers\": 2, \"n_heads\": 2, \"task\": \"CLASSIFICATION\"}");
    fclose(f);
    CHECK_RC(nf_model_load(be, dir, &m, &err), NF_ERR_CHECKPOINT, &err);
    CHECK_MSG(&err, "dim_output");
    /* model type detection */
    f = fopen(p, "wb");
    fprintf(f, "{\"model_type\": \"sptransformer-x\", \"dim\": 8}");
    fclose(f);
    CHECK_RC(nf_model_load(be, dir, &m, &err), NF_ERR_CHECKPOINT, &err);
    CHECK_MSG(&err, "model_type \"sptransformer-x\" is not supported (known: mitra");
    f = fopen(p, "wb");
    fprintf(
        f,
        "{\"model_type\": \"mitra\", \"dim\": 8, \"dim_output\": 3, \"n_layers\": 2, \"n_heads\": 2, \"task\": \"CLASSIFICATION\"}");
    fclose(f);
    CHECK_RC(nf_model_load(be, dir, &m, &err), NF_OK, &err);
    nf_model_free(m);
    nf_backend_free(be);
}

/* ---- the weight-table machinery on a toy model ------------------------------------ */
struct toy_block {
    nf_tensor w, b, mean, q, k, v;
};
struct toy {
    nf_tensor emb, pos, opt, skip;
    struct toy_block * blocks;
};
static int64_t toy_dim(const void * cfg, char sym, const int * idx, int depth) {
    switch (sym) {
        case 'H': return 4;
        case 'N': return 3;                                /* blocks */
        case 'W': return depth > 0 && idx[0] >= 2 ? 5 : 3; /* per-block kernel width */
        default: return -1;
    }
}
#define TB_(f) NF_WSLOT(struct toy_block, f)
static const struct nf_wentry toy_entries[] = {
    {"emb.weight", "2H H", .init = NF_INIT_NORMAL, .slot = NF_WSLOT(struct toy, emb)},
    {"pos.weights_0", "1 H", .alias = "pos.weights.0", .slot = NF_WSLOT(struct toy, pos)},
    {"opt.weight", "H", .flags = NF_W_OPTIONAL, .slot = NF_WSLOT(struct toy, opt)},
    {"position_ids", "1 H", .dtype = NF_ST_I64, .flags = NF_W_IGNORED},
    NF_WREPEAT('N', struct toy, blocks, struct toy_block),
    {"blocks.%d.conv.weight", "H H W", .fan_in = "HW", .slot = TB_(w)},
    {"blocks.%d.conv.bias", "H", .fan_in = "HW", .slot = TB_(b)},
    {"blocks.%d.bn.running_mean", "H", .flags = NF_W_BUFFER, .slot = TB_(mean)},
    {"blocks.%d.bn.num_batches_tracked", "", .dtype = NF_ST_I64, .flags = NF_W_OPTIONAL},
    {"blocks.%d.q", "H", .pack = 1, .slot = TB_(q)},
    {"blocks.%d.k", "H", .pack = 1, .slot = TB_(k)},
    {"blocks.%d.v", "H", .pack = 1, .slot = TB_(v)},
    NF_WEND,
};
static const struct nf_wtable toy_table = {"toy", toy_entries, (int) (sizeof(toy_entries) / sizeof(toy_entries[0])),
                                           toy_dim};

/* a toy checkpoint: every key the table writes, plus extras by flag */
static void write_toy(const char * path, int alias, int with_opt, int with_ignored, int with_nbt, int bad_nbt) {
    nf_err err = {0};
    CHECK_RC(nf__weights_generate(path, &toy_table, NULL, 5, NULL, 0.0f, &err), NF_OK, &err);
    /* rewrite the header: rename / add entries (the data stays valid) */
    struct nf_safetensors st;
    CHECK_RC(nf__st_open(path, &st, &err), NF_OK, &err);
    struct nf_st_entry e[64];
    static float zeros[64];
    int n = 0;
    const struct nf_st_tensor * nbt = nf__st_find(&st, "blocks.0.bn.num_batches_tracked");
    CHECK(nbt && nbt->dtype == NF_ST_I64 && nbt->ndim == 0 && nbt->end - nbt->begin == 8,
          "gen-weights writes I64 entries as I64 scalars");
    for (int i = 0; i < st.n_tensors && n < 60; i++) {
        const struct nf_st_tensor * t = &st.tensors[i];
        if (!with_opt && strcmp(t->name, "opt.weight") == 0) continue;
        if (t->dtype == NF_ST_I64)
            continue; /* the (optional) int64 keys: re-added below by flag, the writer writes F32 only */
        e[n].name = strdup(alias && strcmp(t->name, "pos.weights_0") == 0 ? "pos.weights.0" : t->name);
        e[n].ndim = t->ndim;
        e[n].dtype = t->dtype;
        for (int d = 0; d < t->ndim; d++) e[n].shape[d] = t->shape[d];
        float * copy = malloc((size_t) (t->end - t->begin) + 4);
        memcpy(copy, nf__st_data(&st, t), (size_t) (t->end - t->begin));
        e[n++].data = copy;
    }
    nf__st_close(&st);
    /* F32 stand-ins for the ignored / int64 keys */
    if (with_ignored) e[n++] = (struct nf_st_entry){strdup("position_ids"), 2, {1, 4}, zeros, NF_ST_F32};
    if (with_nbt)
        e[n++] = (struct nf_st_entry){
            strdup("blocks.1.bn.num_batches_tracked"), bad_nbt ? 1 : 0, {1}, zeros, NF_ST_F32};
    CHECK_RC(nf__st_write(path, e, n, &err), NF_OK, &err);
    for (int i = 0; i < n; i++) {
        free((char *) e[i].name);
        if (e[i].data != zeros) free((float *) e[i].data);
    }
}

static void test_weight_table(void) {
    nf_err err = {0};
    struct nf_wkey * k = NULL;
    int n = 0;
    CHECK_RC(nf__wtable_expand(&toy_table, NULL, NULL, &k, &n, &err), NF_OK, &err);
    CHECK(n == 4 + 3 * 7, "toy keys %d", n);
    CHECK(n > 10 && strcmp(k[4].name, "blocks.0.conv.weight") == 0 && k[4].shape[2] == 3 && k[4].fan_in == 12,
          "block 0 conv");
    CHECK(n > 20 && strcmp(k[18].name, "blocks.2.conv.weight") == 0 && k[18].shape[2] == 5 && k[18].fan_in == 20,
          "block 2 conv: W by index");
    CHECK(n > 10 && k[7].ndim == 0 && nf__wkey_numel(&k[7]) == 1, "scalar key");
    CHECK(n > 10 && k[8].pack && k[8].pack == k[10].pack && k[8].pack != k[15].pack, "pack ids per iteration");
    free(k);

    /* hash map: many names */
    struct nf_namemap map;
    CHECK_RC(nf__namemap_init(&map, 1000, &err), NF_OK, &err);
    static char names[1000][16];
    for (int i = 0; i < 1000; i++) {
        snprintf(names[i], sizeof(names[i]), "t.%d", i);
        CHECK(nf__namemap_put(&map, names[i], i) == 0, "put");
    }
    int ok = 1;
    for (int i = 0; i < 1000; i++) ok &= nf__namemap_get(&map, names[i]) == i;
    CHECK(ok && nf__namemap_get(&map, "t.1000") == -1 && nf__namemap_put(&map, names[3], 9) == -1, "namemap");
    nf__namemap_free(&map);

    nf_backend * be;
    CHECK_RC(nf_backend_init("cpu", NF_PRECISION_EXACT, &be, &err), NF_OK, &err);
    char p[1024];
    struct toy toy = {0};
    struct toy_block blocks[3];
    struct nf_weights w;
    /* 0. the generated file as it is: the optional int64 keys present, as I64 */
    path_of(p, sizeof(p), "toy0.safetensors");
    CHECK_RC(nf__weights_generate(p, &toy_table, NULL, 5, NULL, 0.0f, &err), NF_OK, &err);
    memset(blocks, 0, sizeof(blocks));
    toy.blocks = blocks;
    CHECK_RC(nf__weights_load(be, p, &toy_table, NULL, &toy, &w, &err), NF_OK, &err);
    CHECK(toy.opt.buf != NULL && blocks[2].w.buf != NULL, "generated checkpoint loads");
    nf__weights_free(&w);
    memset(&toy, 0, sizeof(toy));
    /* 1. optional absent, alias spelling, ignored present, optional int64 absent */
    path_of(p, sizeof(p), "toy1.safetensors");
    write_toy(p, 1, 0, 1, 0, 0);
    memset(blocks, 0, sizeof(blocks));
    toy.blocks = blocks;
    CHECK_RC(nf__weights_load(be, p, &toy_table, NULL, &toy, &w, &err), NF_OK, &err);
    CHECK(toy.opt.buf == NULL, "absent optional key: slot unbound");
    CHECK(toy.pos.buf != NULL && toy.pos.ndim == 2, "alias spelling bound");
    CHECK(blocks[2].w.buf && blocks[2].w.ne[2] == 5, "block 2 slot bound");
    /* q, k, v back to back */
    CHECK(blocks[1].k.offs == blocks[1].q.offs + 16 && blocks[1].v.offs == blocks[1].k.offs + 16,
          "q, k, v packed back to back");
    CHECK(w.n_params == 32 + 4 + 3 * (4 * 4 * 3 + 4 + 3 * 4) + 4 * 4 * 2, "n_params excludes buffers: %lld",
          (long long) w.n_params);
    nf__weights_free(&w);
    /* 2. optional present and loaded */
    path_of(p, sizeof(p), "toy2.safetensors");
    write_toy(p, 0, 1, 0, 0, 0);
    memset(blocks, 0, sizeof(blocks));
    CHECK_RC(nf__weights_load(be, p, &toy_table, NULL, &toy, &w, &err), NF_OK, &err);
    CHECK(toy.opt.buf != NULL, "present optional key bound");
    nf__weights_free(&w);
    /* 3. optional int64 key present with the wrong dtype: named */
    path_of(p, sizeof(p), "toy3.safetensors");
    write_toy(p, 0, 1, 0, 1, 1);
    CHECK_RC(nf__weights_load(be, p, &toy_table, NULL, &toy, &w, &err), NF_ERR_CHECKPOINT, &err);
    CHECK_MSG(&err, "'blocks.1.bn.num_batches_tracked' has dtype F32 (expected I64)");
    CHECK(w.keys == NULL && w.buf.buf == NULL, "nothing kept on failure");
    nf_backend_free(be);
}

int main(void) {
    snprintf(tmpdir, sizeof(tmpdir), "%s", "test-io.tmp");
    mkdir(tmpdir, 0777);
    test_safetensors();
    test_npy();
    test_mitra_keys();
    test_weight_table();
    return nf_test_done("test-io");
}
