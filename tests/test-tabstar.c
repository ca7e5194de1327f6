/* test-tabstar.c -- TabSTAR: the weight table (295 keys of spec Appendix A),
 * strict loading, gen-weights, the cells input, and the forward against
 * upstream's fp32 logits (tests/fixtures/tabstar, reference/tabstar_fixtures.py).
 *
 *   test-tabstar FIXTURES [DEVICE]
 * Without DEVICE: the table, loading and input checks (cpu). With DEVICE:
 * every fixture case on it: max_abs <= 1e-4, mean_abs <= 1e-5, same argmax. */
#include "nofall.h"
#include "nf-test.h"
#include "core/model.h"
#include "io/nf-io.h"
#include "models/tabstar-cells.h"
#include "models/tabstar-impl.h"
#include "text/nf-text.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char * g_tmp = "tabstar-test.tmp";

static int gen(const char * dir, uint64_t seed, int layers, int vocab, nf_err * err) {
    char l[16], v[16];
    snprintf(l, sizeof(l), "%d", layers);
    snprintf(v, sizeof(v), "%d", vocab);
    const char * keys[2] = {"layers", "vocab"};
    const char * vals[2] = {l, v};
    return nf_model_gen_weights("tabstar", dir, seed, 2, keys, vals, err);
}

/* the full-size table: 295 keys (+ the ignored position_ids), 47,263,874 parameters */
static void test_table(const char * fixtures) {
    struct nf_tab_config cfg;
    nf__tab_config_default(&cfg);
    struct nf_wkey * keys = NULL;
    int n = 0;
    nf_err err = {0};
    CHECK_RC(nf__wtable_expand(&nf__tab_wtable, &cfg, NULL, &keys, &n, &err), NF_OK, &err);
    int loaded = 0;
    int64_t params = 0;
    for (int i = 0; i < n; i++) {
        if (!nf__wkey_loaded(&keys[i])) continue;
        loaded++;
        params += nf__wkey_numel(&keys[i]);
    }
    CHECK(loaded == 295, "%d loaded keys", loaded);
    CHECK(params == 47263874, "%lld parameters", (long long) params);
    CHECK(n == 296 && strcmp(keys[5].name, "text_encoder.embeddings.position_ids") == 0, "ignored buffer");
    CHECK(strcmp(keys[6].name, "text_encoder.encoder.layer.0.attention.self.query.weight") == 0, "%s", keys[6].name);
    CHECK(strcmp(keys[n - 1].name, "reg_head.layers.2.bias") == 0, "%s", keys[n - 1].name);
    /* upstream's state_dict, in order (reference/tabstar_fixtures.py keys) */
    char p[1024], line[256];
    snprintf(p, sizeof(p), "%s/state_dict_keys.txt", fixtures);
    FILE * f = fopen(p, "r");
    CHECK(f != NULL, "%s", p);
    int j = 0, same = 0;
    for (int i = 0; f && i < n; i++) {
        if (!nf__wkey_loaded(&keys[i])) continue;
        if (!fgets(line, sizeof(line), f)) break;
        char want[256], shape[64];
        nf__shape_str(shape, sizeof(shape), keys[i].ndim, keys[i].shape);
        /* "[a, b]" -> "[a,b]" */
        char * w = shape;
        for (char * r = shape; *r; r++)
            if (*r != ' ') *w++ = *r;
        *w = '\0';
        snprintf(want, sizeof(want), "%s float32 %s\n", keys[i].name, shape);
        const int ok = strcmp(want, line) == 0;
        CHECK(ok, "key %d: nofall '%s', upstream '%s'", j, want, line);
        same += ok;
        j++;
    }
    if (f) {
        CHECK(!fgets(line, sizeof(line), f), "upstream has more keys: %s", line);
        fclose(f);
    }
    printf("weight table vs upstream's state_dict: %d/%d keys identical (name, dtype, shape, order)\n", same, j);
    free(keys);
}

static void write_text(const char * path, const char * s) {
    FILE * f = fopen(path, "wb");
    if (f) {
        fputs(s, f);
        fclose(f);
    }
}

/* loading: a small generated model, its vocabulary, v1.1 refused, bad cells */
static void test_load(void) {
    nf_err err = {0};
    char dir[512], p[600];
    snprintf(dir, sizeof(dir), "%s/small", g_tmp);
    CHECK_RC(gen(dir, 3, 1, 1000, &err), NF_OK, &err);
    nf_backend * be = NULL;
    CHECK_RC(nf_backend_init("cpu", NF_PRECISION_EXACT, &be, &err), NF_OK, &err);
    nf_model * m = NULL;
    CHECK_RC(nf_model_load(be, dir, &m, &err), NF_OK, &err);
    if (m) {
        CHECK(strcmp(nf_model_type(m), "tabstar") == 0, "type %s", nf_model_type(m));
        CHECK(nf_model_n_params(m) == 47263874 - 11 * 1774464 - (30522 - 1000) * 384, "params %lld",
              (long long) nf_model_n_params(m));
        const struct nf__wordpiece * wp = nf__tab_vocab(m);
        CHECK(wp != NULL, "vocab");
        /* cells: invalid UTF-8 names the cell; ragged rows; class count */
        const char * bad[] = {
            "{\"format\":\"nofall-tabstar-cells/1\",\"task\":\"classification\",\"n_target_tokens\":2,\"n_rows\":1,"
            "\"n_cells\":3,\"x_txt\":[[\"a\",\"b\",\"c\\u00e9\"]],\"x_num\":[[0,0]],\"classes\":[\"x\",\"y\"]}",
            "{\"format\":\"nofall-tabstar-cells/1\",\"task\":\"regression\",\"n_target_tokens\":2,\"n_rows\":1,"
            "\"n_cells\":3,\"x_txt\":[[\"a\",\"b\",\"c\"]],\"x_num\":[[0,0,0]]}",
        };
        const char * want[] = {"does not have n_cells", "regression task has 1 target"};
        for (int i = 0; i < 2; i++) {
            snprintf(p, sizeof(p), "%s/bad%d.json", g_tmp, i);
            write_text(p, bad[i]);
            struct nf_tab_cells c;
            CHECK_RC(nf__tab_cells_load(p, wp, &c, &err), NF_ERR_INPUT, &err);
            CHECK_MSG(&err, want[i]);
        }
        snprintf(p, sizeof(p), "%s/bad2.json", g_tmp);
        FILE * f = fopen(p, "wb");
        if (f) {
            fputs("{\"format\":\"nofall-tabstar-cells/1\",\"task\":\"regression\",\"n_target_tokens\":1,\"n_rows\":1,"
                  "\"n_cells\":2,\"x_txt\":[[\"t\",\"ok \xff\"]],\"x_num\":[[0,1.5]]}",
                  f);
            fclose(f);
        }
        struct nf_tab_cells c;
        /* refused with the cell (row, index) and the byte offset */
        CHECK_RC(nf__tab_cells_load(p, wp, &c, &err), NF_ERR_FORMAT, &err);
        CHECK_MSG(&err, "x_txt[0][1] (row 0, cell 1): invalid UTF-8 at byte");
        /* U+0000 in a cell string: dropped as BERT's normaliser drops it ("o\u0000k" is "ok") */
        snprintf(p, sizeof(p), "%s/nul.json", g_tmp);
        write_text(p, "{\"format\":\"nofall-tabstar-cells/1\",\"task\":\"regression\",\"n_target_tokens\":1,"
                      "\"n_rows\":1,\"n_cells\":2,\"x_txt\":[[\"t\",\"o\\u0000k\"]],\"x_num\":[[0,1.5]]}");
        const int nul_rc = nf__tab_cells_load(p, wp, &c, &err);
        CHECK_RC(nul_rc, NF_OK, &err);
        if (nul_rc == NF_OK) {
            int found = 0;
            for (int64_t i = 0; i < c.n_strings; i++) found |= strcmp(c.strings[i], "ok") == 0;
            CHECK(found, "the cell string \"o\\u0000k\" is not \"ok\"");
            nf__tab_cells_free(&c);
        }
        /* adapters: another model's key; a shape that does not fit; another peft type */
        char adir[600], sp[700];
        snprintf(adir, sizeof(adir), "%s/adapter", g_tmp);
        nf__mkdir_p(adir, NULL);
        snprintf(sp, sizeof(sp), "%s/adapter_config.json", adir);
        write_text(sp, "{\"peft_type\": \"LORA\", \"r\": 2, \"lora_alpha\": 4, \"bias\": \"none\", "
                       "\"target_modules\": [\"query\", \"dense\", \"linear1\"]}");
        static float za[2 * 384], zb[1536 * 2];
        struct nf_st_entry ents[2] = {
            {"base_model.model.encoder.layers.0.self_attn.q_proj.lora_A.weight", 2, {2, 384}, za, NF_ST_F32},
            {"base_model.model.encoder.layers.0.self_attn.q_proj.lora_B.weight", 2, {384, 2}, zb, NF_ST_F32},
        };
        snprintf(sp, sizeof(sp), "%s/adapter_model.safetensors", adir);
        CHECK_RC(nf__st_write(sp, ents, 2, &err), NF_OK, &err);
        char sum[256];
        CHECK_RC(nf__tab_merge_adapter(m, adir, sum, sizeof(sum), &err), NF_ERR_CHECKPOINT, &err);
        CHECK_MSG(&err, "matches no Linear of TabSTAR");
        ents[0].name = "base_model.model.tabular_encoder.encoder.layers.0.linear1.lora_A.weight";
        ents[1].name = "base_model.model.tabular_encoder.encoder.layers.0.linear1.lora_B.weight";
        CHECK_RC(nf__st_write(sp, ents, 2, &err), NF_OK, &err); /* B is (384, 2): linear1 is (1536, 384) */
        CHECK_RC(nf__tab_merge_adapter(m, adir, sum, sizeof(sum), &err), NF_ERR_CHECKPOINT, &err);
        CHECK_MSG(&err, "lora_B [1536, 2]");
        ents[1].shape[0] = 1536;
        CHECK_RC(nf__st_write(sp, ents, 2, &err), NF_OK, &err);
        CHECK_RC(nf__tab_merge_adapter(m, adir, sum, sizeof(sum), &err), NF_OK, &err);
        CHECK(strstr(sum, "1 modules") != NULL, "%s", sum);
        /* lora_A/B on an Embedding: refused (peft's Embedding adapter is lora_embedding_A/B) */
        snprintf(sp, sizeof(sp), "%s/adapter_config.json", adir);
        write_text(sp, "{\"peft_type\": \"LORA\", \"r\": 2, \"lora_alpha\": 4, \"bias\": \"none\", "
                       "\"target_modules\": [\"word_embeddings\"]}");
        ents[0].name = "base_model.model.text_encoder.embeddings.word_embeddings.lora_A.weight";
        ents[1].name = "base_model.model.text_encoder.embeddings.word_embeddings.lora_B.weight";
        ents[1].shape[0] = 1000; /* shapes that fit the (1000, 384) table, as if it were a Linear */
        snprintf(sp, sizeof(sp), "%s/adapter_model.safetensors", adir);
        CHECK_RC(nf__st_write(sp, ents, 2, &err), NF_OK, &err);
        CHECK_RC(nf__tab_merge_adapter(m, adir, sum, sizeof(sum), &err), NF_ERR_CHECKPOINT, &err);
        CHECK_MSG(&err, "word_embeddings is an Embedding, not a Linear");
        snprintf(sp, sizeof(sp), "%s/adapter_config.json", adir);
        write_text(sp, "{\"peft_type\": \"IA3\", \"r\": 2, \"lora_alpha\": 4, \"target_modules\": [\"linear1\"]}");
        CHECK_RC(nf__tab_merge_adapter(m, adir, sum, sizeof(sum), &err), NF_ERR_CHECKPOINT, &err);
        CHECK_MSG(&err, "LORA");
        nf_model_free(m);
    }
    /* a vocabulary of another size */
    snprintf(p, sizeof(p), "%s/vocab.txt", dir);
    CHECK_RC(nf__tab_write_vocab(p, 1001, &err), NF_OK, &err);
    CHECK_RC(nf_model_load(be, dir, &m, &err), NF_ERR_CHECKPOINT, &err);
    CHECK_MSG(&err, "1001 tokens");
    CHECK_RC(nf__tab_write_vocab(p, 1000, &err), NF_OK, &err);
    /* v1.1 */
    snprintf(p, sizeof(p), "%s/config.json", dir);
    char * text = NULL;
    size_t len = 0;
    CHECK_RC(nf__file_read_all(p, &text, &len, 1 << 20, &err), NF_OK, &err);
    write_text(p, "{\"model_type\": \"tabstarv1p1\", \"d_model\": 384}");
    CHECK_RC(nf_model_load(be, dir, &m, &err), NF_ERR_CHECKPOINT, &err);
    CHECK_MSG(&err, "v1.1");
    /* as tabstar 1.2's v1.1 TabStarConfig writes it: model_type "tabstar" */
    write_text(p, "{\"architectures\": [\"TabSTARModel\"], \"model_type\": \"tabstar\", \"d_model\": 384, "
                  "\"d_num\": 6, \"reg_dist_bins\": 200, \"interaction_layers\": 6}");
    CHECK_RC(nf_model_load(be, dir, &m, &err), NF_ERR_CHECKPOINT, &err);
    CHECK_MSG(&err, "v1.1");
    /* a mis-shaped / missing key: another model's weights (2 text layers vs config's 1) */
    char dir2[512];
    snprintf(dir2, sizeof(dir2), "%s/small2", g_tmp);
    CHECK_RC(gen(dir2, 3, 2, 1000, &err), NF_OK, &err);
    if (text) write_text(p, text); /* config of dir (1 layer) */
    char src[600], dst[600];
    snprintf(src, sizeof(src), "%s/model.safetensors", dir2);
    snprintf(dst, sizeof(dst), "%s/model.safetensors", dir);
    CHECK(rename(src, dst) == 0, "rename");
    CHECK_RC(nf_model_load(be, dir, &m, &err), NF_ERR_CHECKPOINT, &err);
    CHECK_MSG(&err, "unexpected");
    CHECK_MSG(&err, "text_encoder.encoder.layer.1.");
    /* missing: 1-layer weights under a 2-layer config */
    char dir3[512];
    snprintf(dir3, sizeof(dir3), "%s/small3", g_tmp);
    CHECK_RC(gen(dir3, 3, 1, 1000, &err), NF_OK, &err);
    snprintf(src, sizeof(src), "%s/model.safetensors", dir3);
    snprintf(dst, sizeof(dst), "%s/model.safetensors", dir2);
    CHECK(rename(src, dst) == 0, "rename");
    CHECK_RC(nf_model_load(be, dir2, &m, &err), NF_ERR_CHECKPOINT, &err);
    CHECK_MSG(&err, "missing 'text_encoder.encoder.layer.1.attention.self.query.weight'");
    /* mis-shaped: a 1001-token embedding under a 1000-token config (vocab.txt of 1001 to pass that check) */
    CHECK_RC(gen(dir3, 3, 1, 1001, &err), NF_OK, &err);
    snprintf(dst, sizeof(dst), "%s/config.json", dir3);
    if (text) write_text(dst, text);
    snprintf(dst, sizeof(dst), "%s/vocab.txt", dir3);
    CHECK_RC(nf__tab_write_vocab(dst, 1000, &err), NF_OK, &err);
    CHECK_RC(nf_model_load(be, dir3, &m, &err), NF_ERR_CHECKPOINT, &err);
    CHECK_MSG(&err, "'text_encoder.embeddings.word_embeddings.weight' has shape [1001, 384]");
    /* an old transformers' position_ids buffer (I64 [1, 512]) is accepted and ignored */
    CHECK_RC(gen(dir3, 3, 1, 1000, &err), NF_OK, &err);
    snprintf(src, sizeof(src), "%s/model.safetensors", dir3);
    struct nf_safetensors st;
    if (nf__st_open(src, &st, &err) == NF_OK) {
        struct nf_st_entry * ents = calloc((size_t) st.n_tensors + 1, sizeof(*ents));
        static int64_t pos_ids[512];
        for (int i = 0; i < 512; i++) pos_ids[i] = i;
        for (int i = 0; ents && i < st.n_tensors; i++) {
            ents[i].name = st.tensors[i].name;
            ents[i].ndim = st.tensors[i].ndim;
            for (int d = 0; d < st.tensors[i].ndim; d++) ents[i].shape[d] = st.tensors[i].shape[d];
            ents[i].data = nf__st_data(&st, &st.tensors[i]);
            ents[i].dtype = st.tensors[i].dtype;
        }
        if (ents) {
            ents[st.n_tensors] = (struct nf_st_entry){
                "text_encoder.embeddings.position_ids", 2, {1, 512}, pos_ids, NF_ST_I64};
            snprintf(dst, sizeof(dst), "%s/with-pos.safetensors", dir3);
            CHECK_RC(nf__st_write(dst, ents, st.n_tensors + 1, &err), NF_OK, &err);
        }
        free(ents);
        nf__st_close(&st);
        CHECK(rename(dst, src) == 0, "rename");
        CHECK_RC(nf_model_load(be, dir3, &m, &err), NF_OK, &err);
        if (m) CHECK(nf_model_n_params(m) == 47263874 - 11 * 1774464 - (30522 - 1000) * 384, "params");
        nf_model_free(m);
        m = NULL;
    }
    free(text);
    nf_backend_free(be);
}

/* one fixture case: case.json {seed, layers, vocab}, cells.json, logits.npy */
static void run_case(const char * cdir, const char * name, const char * device) {
    nf_err err = {0};
    char p[1024], wdir[600];
    snprintf(p, sizeof(p), "%s/case.json", cdir);
    cJSON * cj = NULL;
    CHECK_RC(nf__json_read_file(p, &cj, &err), NF_OK, &err);
    if (!cj) return;
    const int seed = cJSON_GetObjectItem(cj, "seed")->valueint, layers = cJSON_GetObjectItem(cj, "layers")->valueint,
              vocab = cJSON_GetObjectItem(cj, "vocab")->valueint;
    char adir[1100] = "";
    if (cJSON_IsString(cJSON_GetObjectItem(cj, "adapter")))
        snprintf(adir, sizeof(adir), "%s/%s", cdir, cJSON_GetObjectItem(cj, "adapter")->valuestring);
    cJSON_Delete(cj);
    snprintf(wdir, sizeof(wdir), "%s/w-%d-%d-%d", g_tmp, seed, layers, vocab);
    struct stat sb;
    if (stat(wdir, &sb) != 0) CHECK_RC(gen(wdir, (uint64_t) seed, layers, vocab, &err), NF_OK, &err);
    nf_backend * be = NULL;
    int rc = nf_backend_init(device, NF_PRECISION_EXACT, &be, &err);
    CHECK_RC(rc, NF_OK, &err);
    if (rc != NF_OK) return;
    nf_model * m = NULL;
    CHECK_RC(nf_model_load(be, wdir, &m, &err), NF_OK, &err);
    if (m && adir[0]) {
        char summary[1024];
        CHECK_RC(nf__tab_merge_adapter(m, adir, summary, sizeof(summary), &err), NF_OK, &err);
        printf("%s: merged %s\n", name, summary);
    }
    struct nf_tab_cells c;
    snprintf(p, sizeof(p), "%s/cells.json", cdir);
    if (m) CHECK_RC(nf__tab_cells_load(p, nf__tab_vocab(m), &c, &err), NF_OK, &err);
    /* upstream's tokenizer ids of every distinct string */
    snprintf(p, sizeof(p), "%s/token_ids.json", cdir);
    cJSON * tj = NULL;
    if (m && nf__json_read_file(p, &tj, &err) == NF_OK) {
        const cJSON * strs = cJSON_GetObjectItem(tj, "strings");
        const cJSON * idl = cJSON_GetObjectItem(tj, "ids");
        int32_t ids[NF_TAB_MAX_TOKENS];
        int n_same = 0, n_str = cJSON_GetArraySize(strs), longest = 0;
        for (int i = 0; i < n_str; i++) {
            const char * t = cJSON_GetArrayItem(strs, i)->valuestring;
            const cJSON * want_ids = cJSON_GetArrayItem(idl, i);
            int n = 0, same;
            CHECK_RC(nf__wp_encode(nf__tab_vocab(m), t, strlen(t), NF_TAB_MAX_TOKENS, ids, &n, "t", NULL, &err), NF_OK,
                     &err);
            same = n == cJSON_GetArraySize(want_ids);
            for (int j = 0; same && j < n; j++) same = ids[j] == cJSON_GetArrayItem(want_ids, j)->valueint;
            CHECK(same, "%s: string %d tokenized differently from upstream", name, i);
            n_same += same;
            longest = n > longest ? n : longest;
        }
        printf("%s: %d/%d strings tokenized as upstream (longest %d ids)\n", name, n_same, n_str, longest);
    }
    cJSON_Delete(tj);
    struct nf_npy want;
    snprintf(p, sizeof(p), "%s/logits.npy", cdir);
    CHECK_RC(nf__npy_read(p, &want, &err), NF_OK, &err);
    if (m && c.cells) {
        struct nf_array in[5];
        nf__tab_cells_arrays(&c, in);
        const int64_t n = c.n_rows * c.n_targets;
        float * got = calloc((size_t) n, sizeof(float));
        CHECK_RC(nf_model_forward(m, in, 5, got, &err), NF_OK, &err);
        CHECK(want.dtype == NF_NPY_F4 && (int64_t) (want.nbytes / 4) == n, "logits.npy shape");
        if ((int64_t) (want.nbytes / 4) == n) {
            const float * w = want.data;
            double mx = 0, sum = 0;
            int same = 1;
            for (int64_t i = 0; i < n; i++) {
                const double d = fabs((double) got[i] - w[i]);
                mx = d > mx ? d : mx;
                sum += d;
            }
            for (int64_t r = 0; r < c.n_rows && c.n_targets > 1; r++) {
                int64_t a = 0, b = 0;
                for (int64_t k = 1; k < c.n_targets; k++) {
                    if (got[r * c.n_targets + k] > got[r * c.n_targets + a]) a = k;
                    if (w[r * c.n_targets + k] > w[r * c.n_targets + b]) b = k;
                }
                same &= a == b;
            }
            const double mean = sum / (double) n;
            printf("%s on %s: %lld rows x %lld targets, %lld distinct strings: max_abs %.3g mean_abs %.3g argmax %s\n",
                   name, device, (long long) c.n_rows, (long long) c.n_targets, (long long) c.n_strings, mx, mean,
                   same ? "same" : "DIFFERS");
            CHECK(mx <= 1e-4 && mean <= 1e-5 && same, "%s: max_abs %g mean_abs %g argmax %d", name, mx, mean, same);
        }
        free(got);
        nf__tab_cells_free(&c);
    }
    nf__npy_free(&want);
    nf_model_free(m);
    nf_backend_free(be);
}

int main(int argc, char ** argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test-tabstar FIXTURES [DEVICE [CASE...]]\n");
        return 2;
    }
    nf__mkdir_p(g_tmp, NULL);
    if (argc == 2) {
        test_table(argv[1]);
        test_load();
    } else {
        nf_err err = {0};
        nf_backend * be = NULL;
        if (nf_backend_init(argv[2], NF_PRECISION_EXACT, &be, &err) != NF_OK) {
            printf("SKIP: %s: %s\n", argv[2], err.msg);
            return 77;
        }
        nf_backend_free(be);
        /* CASE...: these fixtures only (the cuda emulator skips the full-size one) */
        char * names[64];
        int n = 0;
        for (int i = 3; i < argc && n < 64; i++) names[n++] = strdup(argv[i]);
        DIR * d = n ? NULL : opendir(argv[1]);
        CHECK(n || d != NULL, "%s", argv[1]);
        for (struct dirent * e; d && (e = readdir(d)) && n < 64;) {
            char p[1024];
            struct stat sb;
            snprintf(p, sizeof(p), "%s/%s/case.json", argv[1], e->d_name);
            if (e->d_name[0] != '.' && stat(p, &sb) == 0) names[n++] = strdup(e->d_name);
        }
        if (d) closedir(d);
        CHECK(n > 0, "no cases in %s", argv[1]);
        for (int i = 0; i < n; i++) {
            char p[1024];
            snprintf(p, sizeof(p), "%s/%s", argv[1], names[i]);
            run_case(p, names[i], argv[2]);
            free(names[i]);
        }
    }
    return nf_test_done("test-tabstar");
}
