/* verify.c -- nofall.h nf_verify_*: `verify` for any model type. The type
 * (nf_model_i.verify, core/verify.h) reads its fixtures and compares; this
 * file resolves the options, and holds what the types share: the fixture's
 * case directories, the seed list, the stage log, the configuration check. */
#include "verify.h"
#include "model.h"
#include "io/nf-io.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const struct nf_verify_i * nf__verify_type(const struct nf_verify_opts * o, char * type, size_t n) {
    if (o->type)
        snprintf(type, n, "%s", o->type);
    else
        nf_model_type_of(o->model ? o->model : "", type, n);
    const struct nf_model_i * mi = nf__model_type_or_default(type);
    return mi->verify ? mi->verify : nf__model_type_or_default(NULL)->verify;
}

int nf_verify_check_opts(const struct nf_verify_opts * o, nf_err * err) {
    char type[64];
    const struct nf_verify_i * vi = nf__verify_type(o, type, sizeof(type));
    if (!vi) return nf__err_set(err, NF_ERR_UNSUPPORTED, "no verify for model type %s", type);
    return vi->check_opts(o, err);
}

int nf_verify_new(const struct nf_verify_opts * o, nf_verify ** out, nf_err * err) {
    *out = NULL;
    nf_verify * v = calloc(1, sizeof(*v));
    if (!v) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    v->o = *o;
    v->vi = nf__verify_type(o, v->type, sizeof(v->type));
    int rc = NF_OK;
    if (!v->vi) rc = nf__err_set(err, NF_ERR_UNSUPPORTED, "no verify for model type %s", v->type);
    if (rc == NF_OK) rc = v->vi->check_opts(o, err);
    if (rc == NF_OK) {
        const struct nf_verify_i * vi = v->vi;
        v->bf16_default = o->precision == NF_PRECISION_BF16_AUTOCAST && o->max_abs < 0 && o->mean_abs < 0;
        if (v->o.max_abs < 0) v->o.max_abs = vi->max_abs;
        if (v->o.mean_abs < 0) v->o.mean_abs = vi->mean_abs;
        if (!v->o.device) v->o.device = vi->device;
        v->against_cpu = strcmp(o->against, "cpu") == 0;
        v->seeds = malloc((size_t) (vi->max_seeds > 0 ? vi->max_seeds : 1) * sizeof(uint64_t));
        if (!v->seeds) rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    }
    if (rc == NF_OK && v->vi->n_seeds) {
        if (o->seeds)
            v->n_seeds = nf__verify_seed_list(o->seeds, (uint64_t) NF_VERIFY_SEED_MAX, v->seeds, v->vi->max_seeds);
        else {
            v->n_seeds = v->vi->n_seeds;
            memcpy(v->seeds, v->vi->seeds, (size_t) v->n_seeds * sizeof(uint64_t));
        }
    }
    if (rc == NF_OK && v->vi->prepare) rc = v->vi->prepare(v, err);
    if (rc != NF_OK) {
        nf_verify_free(v);
        return rc;
    }
    *out = v;
    return NF_OK;
}

int nf_verify_check_output(const nf_verify * v, const char * flag, const char * path, nf_err * err) {
    return v->vi->check_output ? v->vi->check_output(v, flag, path, err) : NF_OK;
}

void nf__verify_stages_add(struct nf_verify * v, int k, const nf_model * m, const struct nf_stage_log * dev,
                           const struct nf_stage_log * ref) {
    if (!v->stages && !(v->stages = cJSON_CreateArray())) return;
    cJSON * e = cJSON_CreateObject();
    cJSON * arr = e ? cJSON_AddArrayToObject(e, "stages") : NULL;
    if (!arr) {
        cJSON_Delete(e);
        return;
    }
    cJSON_AddNumberToObject(e, "case", k);
    char name[64];
    for (int i = 0; nf_model_stage_name(m, i, name, sizeof(name)); i++) {
        if (strncmp(name, "inputs.", 7) == 0) continue;
        const struct nf_stage_rec *a = nf__stage_log_find(dev, name), *b = nf__stage_log_find(ref, name);
        if (!a || !b || a->n != b->n || a->n < 1) continue;
        double mx = 0, sum = 0;
        for (int64_t j = 0; j < a->n; j++) {
            const double d = fabs((double) a->data[j] - (double) b->data[j]);
            mx = d > mx || isnan(d) ? d : mx;
            sum += d;
        }
        cJSON * s = cJSON_CreateObject();
        if (!s) break;
        cJSON_AddStringToObject(s, "stage", name);
        cJSON_AddNumberToObject(s, "max_abs_error", isfinite(mx) ? mx : -1);
        cJSON_AddNumberToObject(s, "mean_abs_error", isfinite(sum) ? sum / (double) a->n : -1);
        cJSON_AddItemToArray(arr, s);
    }
    cJSON_AddItemToArray(v->stages, e);
}

int nf_verify_run(nf_verify * v, FILE * report, nf_err * err) {
    const int rc = v->vi->run(v, report, err);
    /* the stages each bisected case recorded, into its entry of "cases" */
    cJSON * cases = v->json ? cJSON_GetObjectItemCaseSensitive(v->json, "cases") : NULL;
    const cJSON * e;
    cJSON_ArrayForEach(e, v->stages) {
        const cJSON * k = cJSON_GetObjectItemCaseSensitive(e, "case");
        cJSON * c = cJSON_IsNumber(k) ? cJSON_GetArrayItem(cases, k->valueint) : NULL;
        cJSON * st = cJSON_GetObjectItemCaseSensitive(e, "stages");
        if (c && st) cJSON_AddItemToObject(c, "stages", cJSON_Duplicate(st, 1));
    }
    return rc;
}

int nf_verify_failed(const nf_verify * v) { return v->failed; }

char * nf_verify_json(const nf_verify * v, nf_err * err) {
    if (!v->json) {
        nf__err_set(err, NF_ERR_ARG, "this verify made no JSON");
        return NULL;
    }
    char * txt = cJSON_Print(v->json);
    const size_t n = txt ? strlen(txt) : 0;
    char * out = txt ? malloc(n + 2) : NULL;
    if (out) {
        memcpy(out, txt, n);
        out[n] = '\n';
        out[n + 1] = '\0';
    } else {
        nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    }
    cJSON_free(txt);
    return out;
}

const nf_backend * nf_verify_backend(const nf_verify * v) { return v->be; }

void nf_verify_free(nf_verify * v) {
    if (!v) return;
    for (int i = 0; i < v->n_dirs; i++) free(v->dirs[i]);
    free(v->dirs);
    free(v->seeds);
    cJSON_Delete(v->json);
    cJSON_Delete(v->stages);
    nf_model_free(v->m);
    nf_model_free(v->rm);
    nf_backend_free(v->be);
    nf_backend_free(v->rbe);
    free(v);
}

/* ---- shared by the types ------------------------------------------------------------------ */

int nf__verify_backend(const struct nf_verify * v, const char * device, int precision, nf_backend ** out,
                       nf_err * err) {
    if (v->o.backend_init) return v->o.backend_init(device, precision, out, err);
    return nf_backend_init(device, precision, out, err);
}

/* all of required[] present in dir */
static int nf__case_has(const char * dir, const char * const * required, int n_required) {
    char p[4096];
    struct stat sb;
    for (int i = 0; i < n_required; i++) {
        nf__path_join(p, sizeof(p), dir, required[i]);
        if (stat(p, &sb) != 0) return 0; /* opened (and checked to be a regular file) by the readers */
    }
    return 1;
}

int nf__verify_case_dirs(struct nf_verify * v, const char * const * required, int n_required, nf_err * err) {
    const char * against = v->o.against;
    char *** out = &v->dirs;
    int * n = &v->n_dirs;
    if (nf__case_has(against, required, n_required)) {
        *out = malloc(sizeof(char *));
        if (!*out || !((*out)[0] = strdup(against))) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
        *n = 1;
        return NF_OK;
    }
    DIR * d = opendir(against);
    if (!d) {
        char e[1024];
        return nf__err_set(err, NF_ERR_IO, "%s: not a fixture directory: %s", nf__esc(e, sizeof(e), against),
                           strerror(errno));
    }
    struct dirent * e;
    int cap = 0, rc = NF_OK;
    while (rc == NF_OK && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char sub[4096];
        nf__path_join(sub, sizeof(sub), against, e->d_name);
        if (!nf__case_has(sub, required, n_required)) continue;
        if (*n == cap) {
            cap = cap ? cap * 2 : 16;
            char ** t = realloc(*out, (size_t) cap * sizeof(char *));
            if (!t) {
                rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
                break;
            }
            *out = t;
        }
        if (!((*out)[*n] = strdup(sub)))
            rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
        else
            (*n)++;
    }
    closedir(d);
    if (rc != NF_OK) return rc;
    for (int i = 0; i < *n; i++)
        for (int j = i + 1; j < *n; j++)
            if (strcmp((*out)[i], (*out)[j]) > 0) {
                char * t = (*out)[i];
                (*out)[i] = (*out)[j];
                (*out)[j] = t;
            }
    if (*n == 0) {
        char want[512] = "";
        size_t len = 0;
        for (int i = 0; i < n_required; i++)
            nf__msg_append(want, sizeof(want), &len, "%s%s", i ? " + " : "", required[i]);
        return nf__err_set(err, NF_ERR_IO, "%s: no case directory with %s", against, want);
    }
    return NF_OK;
}

int nf__verify_seed_list(const char * s, uint64_t max, uint64_t * out, int cap) {
    int n = 0;
    if (!*s) return -1;
    while (*s) {
        if (*s < '0' || *s > '9') return -1;
        uint64_t v = 0;
        while (*s >= '0' && *s <= '9') {
            const uint64_t d = (uint64_t) (*s++ - '0');
            if (v > (max - d) / 10) return -1;
            v = v * 10 + d;
        }
        if (n == cap) return -1;
        out[n++] = v;
        if (*s == ',') {
            s++;
            if (!*s) return -1;
        } else if (*s) {
            return -1;
        }
    }
    return n;
}

int nf__verify_same_config(const nf_model * a, const nf_model * b) {
    if (strcmp(nf_model_type(a), nf_model_type(b)) != 0) return 0;
    struct nf_config_item x, y;
    for (int i = 0;; i++) {
        const int ha = nf_model_config_item(a, i, &x), hb = nf_model_config_item(b, i, &y);
        if (ha != hb) return 0;
        if (!ha) return 1;
        if (strcmp(x.key, y.key) != 0 || x.num != y.num || (!x.str) != (!y.str) || (x.str && strcmp(x.str, y.str) != 0))
            return 0;
    }
}

int nf__verify_same_file(const char * a, const char * b) {
    struct stat x, y;
    if (stat(a, &x) != 0 || stat(b, &y) != 0) return 0;
    return x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

int64_t nf__verify_argmax(const float * row, int width) {
    int64_t best = 0;
    for (int c = 1; c < width; c++)
        if (row[c] > row[best]) best = c;
    return best;
}

int nf__stage_log_fn(void * user, const char * stage, const float * data, int ndim, const int64_t * shape) {
    struct nf_stage_log * log = user;
    if (!log->all && !(log->keep && log->keep(stage))) return 0;
    if (log->n == log->cap) {
        const int cap = log->cap ? log->cap * 2 : 64;
        struct nf_stage_rec * r = realloc(log->r, (size_t) cap * sizeof(*r));
        if (!r) return 1;
        log->r = r;
        log->cap = cap;
    }
    struct nf_stage_rec * r = &log->r[log->n];
    memset(r, 0, sizeof(*r));
    snprintf(r->name, sizeof(r->name), "%s", stage);
    r->ndim = ndim;
    r->n = 1;
    for (int d = 0; d < ndim; d++) {
        r->n *= shape[d];
        if (d < 4) r->shape[d] = shape[d];
    }
    if (r->n > 0) {
        r->data = malloc((size_t) r->n * sizeof(float));
        if (!r->data) return 1;
        memcpy(r->data, data, (size_t) r->n * sizeof(float));
    }
    log->n++;
    return 0;
}

void nf__stage_log_clear(struct nf_stage_log * log) {
    for (int i = 0; i < log->n; i++) free(log->r[i].data);
    log->n = 0;
}

void nf__stage_log_free(struct nf_stage_log * log) {
    nf__stage_log_clear(log);
    free(log->r);
    log->r = NULL;
    log->cap = 0;
}

const struct nf_stage_rec * nf__stage_log_find(const struct nf_stage_log * log, const char * name) {
    for (int i = 0; i < log->n; i++)
        if (strcmp(log->r[i].name, name) == 0) return &log->r[i];
    return NULL;
}

void nf__verify_json_head(cJSON * doc, const struct nf_verify * v, int detail) {
    cJSON_AddStringToObject(doc, "device", nf_backend_name(v->be));
    cJSON_AddStringToObject(doc, "device_description", nf_backend_description(v->be));
    cJSON_AddStringToObject(doc, "against", v->o.against);
    cJSON_AddStringToObject(doc, "precision", nf_precision_name(nf_backend_precision(v->be)));
    if (detail) cJSON_AddStringToObject(doc, "precision_detail", nf_backend_precision_detail(v->be));
    cJSON_AddNumberToObject(doc, "max_abs_threshold", v->o.max_abs);
    cJSON_AddNumberToObject(doc, "mean_abs_threshold", v->o.mean_abs);
}

void nf__verify_summary_head(FILE * f, const struct nf_verify * v, int n_cases, int failed, const char * worst_case,
                             double worst_max, double worst_mean) {
    fprintf(f, "VERIFY_DEVICE=%s\nVERIFY_AGAINST=%s\nVERIFY_CASES=%d\nVERIFY_FAILED=%d\n", nf_backend_name(v->be),
            v->o.against, n_cases, failed);
    fprintf(f, "WORST_CASE=%s\nWORST_MAX_ABS=%.3e\nWORST_MEAN_ABS=%.3e\n", worst_case, worst_max, worst_mean);
}

void nf__verify_summary_tail(FILE * f, const struct nf_verify * v, int inputs_identical, int failed) {
    fprintf(f, "INPUTS_IDENTICAL=%s\n", inputs_identical ? "true" : "false");
    fprintf(f, "PRECISION=%s\nPRECISION_DETAIL=%s\n", nf_precision_name(nf_backend_precision(v->be)),
            nf_backend_precision_detail(v->be));
    fprintf(f, "RESULT=%s\n", failed ? "FAIL" : "PASS");
}
