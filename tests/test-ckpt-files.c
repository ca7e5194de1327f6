/* test-ckpt-files.c -- genuine torch 2.13 files (tests/fixtures/ckpt, made by
 * reference/make_ckpt_fixtures.py) read against the tensors torch.load gave;
 * the weight loader taking a .ckpt where it takes a .safetensors; and the
 * torch.save writer (src/io/torch-ckpt-write.c):
 * its records against the genuine torch files' (tests/fixtures/ckpt: data.pkl
 * byte for byte up to their _metadata, the other records and the
 * serialization id exactly), every dtype and tuple / int / memo encoding read
 * back by the reader, alignment, refusals leaving nothing behind, and
 * `gen-weights sptransformer --format ckpt`: the .ckpt loads as a model and
 * holds model.safetensors's tensors byte for byte, in the table's order.
 * (The reader on generated and hostile input: test-ckpt.c.)
 *
 * usage: test-ckpt-files FIXTURE_DIR [SMALL_MITRA_MODEL_DIR]
 * Leaves bn.safetensors (a conversion) in test-ckpt-files.tmp/ for tests/ckpt-cli.sh. */
#include "test-ckpt.h"

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
        fprintf(stderr, "usage: test-ckpt-files FIXTURE_DIR [SMALL_MITRA_MODEL_DIR]\n");
        return 2;
    }
    fixtures = argv[1];
    snprintf(tmpdir, sizeof(tmpdir), "test-ckpt-files.tmp"); /* test-ckpt runs beside it */
    mkdir(tmpdir, 0777);
    test_genuine();
    test_writer_vs_torch();
    test_serialization_id();
    test_writer();
    test_gen_ckpt();
    if (argc > 2) test_weights_load(argv[2]);
    return nf_test_done("test-ckpt-files");
}
