/* test-verify.c -- `verify` through the public API (nofall.h nf_verify_*),
 * for every model type on tiny seeded weights: against the cpu the same
 * weights pass (the report's lines, the JSON's cases), other weights of the
 * same configuration fail (Mitra, SpTransformer: --reference-model; with
 * --bisect the first stage is named), the usage errors are NF_ERR_ARG
 * before anything is read, and an output that is the model's config.json is
 * refused. */
#include "nofall.h"
#include "tiny-models.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* one verify: its report (malloc'ed), failed cases, JSON (or NULL) */
static int run(const struct nf_verify_opts * o, char ** report, int * failed, cJSON ** json, nf_err * err) {
    nf_verify * v = NULL;
    *report = NULL;
    *json = NULL;
    int rc = nf_verify_new(o, &v, err);
    FILE * f = tmpfile();
    if (rc == NF_OK && !f) rc = NF_ERR_IO;
    if (rc == NF_OK) rc = nf_verify_run(v, f, err);
    if (rc == NF_OK) {
        *failed = nf_verify_failed(v);
        const long n = ftell(f);
        *report = calloc((size_t) n + 1, 1);
        rewind(f);
        if (!*report || fread(*report, 1, (size_t) n, f) != (size_t) n) rc = NF_ERR_IO;
        char * txt = nf_verify_json(v, err);
        if (txt) *json = cJSON_Parse(txt);
        nf_free(txt);
    }
    if (f) fclose(f);
    nf_verify_free(v);
    return rc;
}

static int json_cases(const cJSON * j, int * pass) {
    const cJSON * p = cJSON_GetObjectItemCaseSensitive(j, "pass");
    *pass = cJSON_IsTrue(p);
    return cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(j, "cases"));
}

int main(int argc, char ** argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test-verify TMPDIR\n");
        return 2;
    }
    for (int t = 0; t < nf_model_type_count(); t++) {
        const char * type = nf_model_type_name(t);
        const char *keys[8], *values[8];
        const int n = tiny(type, keys, values);
        char dir[4096], other[4096], cfg[4200], got[64];
        snprintf(dir, sizeof(dir), "%s/verify-%s", argv[1], type);
        snprintf(other, sizeof(other), "%s/verify-%s-other", argv[1], type);
        snprintf(cfg, sizeof(cfg), "%s/config.json", dir);
        nf_err err = {0};
        CHECK(nf_model_gen_weights(type, dir, 3, n, keys, values, &err) == NF_OK, "%s: %s", type, err.msg);
        CHECK(nf_model_gen_weights(type, other, 4, n, keys, values, &err) == NF_OK, "%s: %s", type, err.msg);
        nf_model_type_of(dir, got, sizeof(got));
        CHECK(strcmp(got, type) == 0, "nf_model_type_of(%s) = '%s'", dir, got);
        const int tab = strcmp(type, "tabstar") == 0;
        struct nf_verify_opts o = {.model = dir, .device = "cpu", .against = "cpu", .max_abs = -1, .mean_abs = -1};
        if (!tab) o.seeds = "1,2", o.samples = 1;

        /* the same weights: every case passes */
        char * rep = NULL;
        int failed = -1, pass = 0;
        cJSON * j = NULL;
        int rc = run(&o, &rep, &failed, &j, &err);
        CHECK(rc == NF_OK && failed == 0, "%s: cpu vs cpu: rc %d failed %d: %s", type, rc, failed, err.msg);
        CHECK(rep && strstr(rep, "RESULT=PASS\n"), "%s: no RESULT=PASS in:\n%s", type, rep ? rep : "");
        if (!tab) {
            CHECK(rep && strstr(rep, "VERIFY_CASES=4\n") && strstr(rep, "INPUTS_IDENTICAL=true\n"),
                  "%s: 2 seeds x (1 + 1 sample), inputs identical:\n%s", type, rep ? rep : "");
            CHECK(j && json_cases(j, &pass) == 4 && pass, "%s: JSON: 4 cases, pass", type);
        }
        free(rep);
        cJSON_Delete(j);

        /* other weights of the same configuration: cases fail (exit 3's figure) */
        if (!tab) {
            o.reference_model = other;
            o.seeds = "5";
            o.samples = 0;
            o.bisect = 1;
            rc = run(&o, &rep, &failed, &j, &err);
            CHECK(rc == NF_OK && failed == 1, "%s: other weights: rc %d failed %d: %s", type, rc, failed, err.msg);
            CHECK(rep && strstr(rep, "RESULT=FAIL\n") && strstr(rep, "bisect: first stage over threshold: "),
                  "%s: a FAIL and a bisected stage in:\n%s", type, rep ? rep : "");
            CHECK(j && json_cases(j, &pass) == 1 && !pass, "%s: JSON: 1 case, failed", type);
            free(rep);
            cJSON_Delete(j);
            o.reference_model = NULL;
            o.bisect = 0;
        }

        /* usage errors, before anything is read */
        struct nf_verify_opts bad = o;
        bad.against = NULL;
        CHECK(nf_verify_check_opts(&bad, &err) == NF_ERR_ARG, "%s: no --against accepted", type);
        if (!tab) {
            bad = o;
            bad.seeds = "1,,2";
            CHECK(nf_verify_check_opts(&bad, &err) == NF_ERR_ARG && strstr(err.msg, "--seeds"),
                  "%s: --seeds 1,,2 accepted", type);
        }
        /* an output that is a file the run reads */
        nf_verify * v = NULL;
        CHECK(nf_verify_new(&o, &v, &err) == NF_OK, "%s: %s", type, err.msg);
        if (v && strcmp(type, "mitra") == 0)
            CHECK(nf_verify_check_output(v, "--json", cfg, &err) == NF_ERR_ARG && strstr(err.msg, "config.json"),
                  "%s: --json config.json not refused", type);
        if (v) CHECK(nf_verify_check_output(v, "--json", other, &err) == NF_OK, "%s: %s", type, err.msg);
        nf_verify_free(v);
    }
    printf("%s\n", fails ? "FAILED" : "all verify checks passed");
    return fails ? 1 : 0;
}
