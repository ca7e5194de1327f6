/* model.c -- the public nf_model_* API over the model vtable, the registry
 * and type detection, config.json helpers. */
#include "model.h"
#include "io/nf-io.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

extern const struct nf_model_i nf__mitra_model;
extern const struct nf_model_i nf__sptransformer_model;
extern const struct nf_model_i nf__tabstar_model;

static const struct nf_model_i * const nf__models[] = {
    &nf__mitra_model,
    &nf__sptransformer_model,
    &nf__tabstar_model,
};
#define NF_N_MODELS ((int) (sizeof(nf__models) / sizeof(nf__models[0])))

int nf_model_type_count(void) { return NF_N_MODELS; }
const char * nf_model_type_name(int i) { return i >= 0 && i < NF_N_MODELS ? nf__models[i]->type : NULL; }

const struct nf_model_i * nf__model_find(const char * type) {
    for (int i = 0; i < NF_N_MODELS; i++)
        if (strcmp(nf__models[i]->type, type) == 0) return nf__models[i];
    return NULL;
}

static void nf__model_types(char * out, size_t n) {
    size_t len = 0;
    out[0] = '\0';
    for (int i = 0; i < NF_N_MODELS; i++) nf__msg_append(out, n, &len, "%s%s", i ? ", " : "", nf__models[i]->type);
}

/* ---- config.json helpers ----------------------------------------------------------- */

int nf__config_int(const cJSON * doc, const char * key, const char * path, int * out, nf_err * err) {
    const cJSON * v = cJSON_GetObjectItemCaseSensitive(doc, key);
    if (!v) return nf__err_set(err, NF_ERR_CHECKPOINT, "%s: missing key \"%s\"", path, key);
    /* range first: (int) of a double outside int's range is undefined */
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= (double) INT_MIN && v->valuedouble <= (double) INT_MAX) ||
        v->valuedouble != floor(v->valuedouble)) {
        char e[1024];
        if (cJSON_IsNumber(v)) {
            return nf__err_set(err, NF_ERR_CHECKPOINT, "%s: \"%s\" must be an integer in [%d, %d], got %.17g",
                               nf__esc(e, sizeof(e), path), key, INT_MIN, INT_MAX, v->valuedouble);
        }
        return nf__err_set(err, NF_ERR_CHECKPOINT, "%s: \"%s\" must be an integer", nf__esc(e, sizeof(e), path), key);
    }
    *out = (int) v->valuedouble;
    return NF_OK;
}

int nf__config_enum(const cJSON * doc, const char * key, const char * path, const char * const * names, int n,
                    int * out, nf_err * err) {
    const cJSON * v = cJSON_GetObjectItemCaseSensitive(doc, key);
    if (!cJSON_IsString(v)) return nf__err_set(err, NF_ERR_CHECKPOINT, "%s: missing string \"%s\"", path, key);
    for (int i = 0; i < n; i++) {
        if (strcmp(v->valuestring, names[i]) == 0) {
            *out = i;
            return NF_OK;
        }
    }
    char alts[512];
    size_t len = 0;
    alts[0] = '\0';
    for (int i = 0; i < n; i++)
        nf__msg_append(alts, sizeof(alts), &len, "%s%s", i == 0 ? "" : i == n - 1 ? " or " : ", ", names[i]);
    char e[512];
    return nf__err_set(err, NF_ERR_CHECKPOINT, "%s: unknown %s \"%s\" (%s)", path, key,
                       nf__esc(e, sizeof(e), v->valuestring), alts);
}

int nf__option_int(const char * key, const char * value, int * out, nf_err * err) {
    char * end = NULL;
    long v = strtol(value, &end, 10);
    if (!*value || *end || v < -2147483647L || v > 2147483647L)
        return nf__err_set(err, NF_ERR_ARG, "--%s takes an integer, got '%s'", key, value);
    *out = (int) v;
    return NF_OK;
}

/* ---- load / free ---------------------------------------------------------------------- */

/* The configuration of a checkpoint FILE (a torch.save .ckpt carries none):
 * config.json beside it if there is one, else the default of the model that
 * has one (the released SpTransformer's: the one model whose official weights
 * are a .ckpt; nf_model_i.config_default). */
static int nf__ckpt_config(const char * file, char * path, size_t n, cJSON ** doc, nf_err * err) {
    char dir[4096];
    snprintf(dir, sizeof(dir), "%s", file);
    char * slash = strrchr(dir, '/');
    if (slash)
        slash[1] = '\0';
    else
        snprintf(dir, sizeof(dir), ".");
    nf__path_join(path, n, dir, "config.json");
    struct stat sb;
    if (stat(path, &sb) == 0) return nf__json_read_file(path, doc, err);
    const struct nf_model_i * m = NULL;
    for (int i = 0; i < NF_N_MODELS && !m; i++)
        if (nf__models[i]->config_default) m = nf__models[i];
    if (!m) return nf__json_read_file(path, doc, err); /* no default: the missing file's error */
    *doc = m->config_default();
    if (!*doc) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    snprintf(path, n, "%s (%s: no config.json beside it)", file, m->config_default_what);
    return NF_OK;
}

int nf_model_load(nf_backend * be, const char * dir, nf_model ** out, nf_err * err) {
    *out = NULL;
    char path[4096], weights[4096];
    cJSON * doc;
    struct stat sb;
    const int is_file = stat(dir, &sb) == 0 && S_ISREG(sb.st_mode);
    if (is_file) {
        /* --model X.ckpt: the file is the weights */
        snprintf(weights, sizeof(weights), "%s", dir);
        NF_TRY(nf__ckpt_config(dir, path, sizeof(path), &doc, err));
    } else {
        nf__path_join(path, sizeof(path), dir, "config.json");
        nf__path_join(weights, sizeof(weights), dir, "model.safetensors");
        NF_TRY(nf__json_read_file(path, &doc, err));
    }
    int rc = NF_OK;
    const struct nf_model_i * iface = NULL;
    if (!cJSON_IsObject(doc)) {
        rc = nf__err_set(err, NF_ERR_CHECKPOINT, "%s: not a JSON object", path);
        goto done;
    }
    const cJSON * type = cJSON_GetObjectItemCaseSensitive(doc, "model_type");
    if (!type) {
        iface = &nf__mitra_model; /* Mitra's official config.json has no model_type */
    } else if (!cJSON_IsString(type)) {
        rc = nf__err_set(err, NF_ERR_CHECKPOINT, "%s: \"model_type\" must be a string", path);
        goto done;
    } else if (!(iface = nf__model_find(type->valuestring)) && strncmp(type->valuestring, "tabstar", 7) == 0) {
        char e[512];
        rc = nf__err_set(err, NF_ERR_CHECKPOINT,
                         "%s: model_type \"%s\": a TabSTAR v1.1 (or later) checkpoint is not supported; nofall runs "
                         "the original TabSTAR (alana89/TabSTAR, model_type \"tabstar\")",
                         path, nf__esc(e, sizeof(e), type->valuestring));
        goto done;
    } else if (!iface) {
        char known[256];
        nf__model_types(known, sizeof(known));
        char e[512];
        rc = nf__err_set(err, NF_ERR_CHECKPOINT, "%s: model_type \"%s\" is not supported (known: %s)", path,
                         nf__esc(e, sizeof(e), type->valuestring), known);
        goto done;
    }
    if (nf_backend_precision(be) == NF_PRECISION_BF16_AUTOCAST && iface != &nf__mitra_model) {
        if (strcmp(iface->type, "tabstar") == 0)
            rc = nf__err_set(err, NF_ERR_UNSUPPORTED,
                             "%s: precision bf16-autocast has no upstream counterpart for TabSTAR: upstream TabSTAR "
                             "never runs under bf16 autocast (on CUDA it uses fp16 autocast, on CPU none); run with "
                             "--precision exact",
                             path);
        else if (strcmp(iface->type, "sptransformer") == 0 &&
                 (strcmp(nf_backend_kind(be), "cpu") == 0 || strcmp(nf_backend_kind(be), "opencl") == 0 ||
                  strcmp(nf_backend_kind(be), "cuda") == 0))
            rc = NF_OK; /* SpTransformer's rules: cpu-bf16-spt.c, kernels-bf16-spt.cl, cuda-kernels-bf16.cu */
        else if (strcmp(iface->type, "sptransformer") == 0)
            rc = nf__err_set(err, NF_ERR_UNSUPPORTED,
                             "%s: precision bf16-autocast for SpTransformer runs on cpu, opencl and cuda only, not "
                             "on %s (docs/precision.md); run with --precision exact",
                             path, nf_backend_name(be));
        else
            rc = nf__err_set(err, NF_ERR_UNSUPPORTED,
                             "%s: precision bf16-autocast is implemented for Mitra only, not for model_type \"%s\" "
                             "(docs/precision.md); run with --precision exact",
                             path, iface->type);
        if (rc != NF_OK) goto done;
    }
    nf_model * m = calloc(1, sizeof(*m));
    if (!m) {
        rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
        goto done;
    }
    m->iface = iface;
    rc = iface->load(be, weights, doc, path, &m->impl, err);
    if (rc != NF_OK) {
        free(m);
        goto done;
    }
    /* the files read: config.json (where there is one), the weights, TabSTAR's vocab.txt */
    if (stat(path, &sb) == 0) snprintf(m->files[m->n_files++], sizeof(m->files[0]), "%s", path);
    snprintf(m->files[m->n_files++], sizeof(m->files[0]), "%s", weights);
    char vocab[4096];
    nf__path_join(vocab, sizeof(vocab), dir, "vocab.txt");
    if (!is_file && strcmp(iface->type, "tabstar") == 0 && stat(vocab, &sb) == 0)
        snprintf(m->files[m->n_files++], sizeof(m->files[0]), "%s", vocab);
    *out = m;
done:
    cJSON_Delete(doc);
    return rc;
}

void nf_model_free(nf_model * m) {
    if (!m) return;
    m->iface->free(m->impl);
    free(m);
}

/* ---- queries ---------------------------------------------------------------------------- */

const char * nf_model_type(const nf_model * m) { return m->iface->type; }
int64_t nf_model_n_params(const nf_model * m) { return m->iface->weights(m->impl)->n_params; }
int nf_model_config_item(const nf_model * m, int i, struct nf_config_item * out) {
    return m->iface->config_item(m->impl, i, out);
}
int nf_model_n_inputs(const nf_model * m) { return m->iface->n_inputs(m->impl); }
const struct nf_input_desc * nf_model_input(const nf_model * m, int i) {
    return i >= 0 && i < m->iface->n_inputs(m->impl) ? m->iface->input(m->impl, i) : NULL;
}
const char * nf_model_output_name(const nf_model * m) { return m->iface->output_name; }
/* Arrays from a caller: a rank in range, non-negative dims whose product
 * (checked before each multiplication) stays under 2^40 elements, data
 * present. Every model indexes its inputs with products of these dims. */
static int nf__arrays_check(const struct nf_array * in, int n_in, int need_data, nf_err * err) {
    if (n_in < 0 || (n_in > 0 && !in)) return nf__err_set(err, NF_ERR_ARG, "bad input array list");
    for (int i = 0; i < n_in; i++) {
        char nm[128];
        nf__esc(nm, sizeof(nm), in[i].name ? in[i].name : "(unnamed)");
        if (in[i].ndim < 0 || in[i].ndim > NF_ARRAY_MAX_DIMS)
            return nf__err_set(err, NF_ERR_SHAPE, "input %s: rank %d is out of range", nm, in[i].ndim);
        uint64_t n = 1;
        for (int d = 0; d < in[i].ndim; d++) {
            const int64_t v = in[i].shape[d];
            if (v < 0)
                return nf__err_set(err, NF_ERR_SHAPE, "input %s: shape[%d] = %lld is negative", nm, d, (long long) v);
            if (v != 0 && n > ((uint64_t) 1 << 40) / (uint64_t) v)
                return nf__err_set(err, NF_ERR_SHAPE, "input %s: more than 2^40 elements", nm);
            n *= (uint64_t) v;
        }
        if (need_data && n > 0 && !in[i].data) return nf__err_set(err, NF_ERR_ARG, "input %s: no data", nm);
    }
    return NF_OK;
}

int nf_model_output_shape(const nf_model * m, const struct nf_array * in, int n_in, int * ndim, int64_t * shape,
                          nf_err * err) {
    NF_TRY(nf__arrays_check(in, n_in, 0, err)); /* a shape query: no data needed */
    return m->iface->output_shape(m->impl, in, n_in, ndim, shape, err);
}

void nf_model_get_placement(const nf_model * m, struct nf_placement * out) {
    memset(out, 0, sizeof(*out));
    m->iface->placement(m->impl, out);
    const struct nf_weights * w = m->iface->weights(m->impl);
    if (w->buf.buf) snprintf(out->weights, sizeof(out->weights), "%s", w->buf.buf->where);
}

int nf_model_weights_device(const nf_model * m, char * out, size_t n, nf_err * err) {
    return nf__weights_where(m->iface->weights(m->impl), out, n, err);
}

int nf_model_set_option(nf_model * m, const char * key, int64_t value, nf_err * err) {
    if (!m->iface->set_option) return nf__err_set(err, NF_ERR_ARG, "%s has no option \"%s\"", m->iface->type, key);
    return m->iface->set_option(m->impl, key, value, err);
}

int nf_model_get_option(const nf_model * m, const char * key, int64_t * value, nf_err * err) {
    if (!m->iface->get_option || !m->iface->get_option(m->impl, key, value))
        return nf__err_set(err, NF_ERR_ARG, "%s has no option or statistic \"%s\"", m->iface->type, key);
    return NF_OK;
}

void nf_model_set_stage_callback(nf_model * m, int stages, nf_stage_fn fn, void * user) {
    m->iface->set_stage_callback(m->impl, fn ? stages : NF_STAGES_NONE, fn, user);
}
int nf_model_stage_count(const nf_model * m) { return m->iface->stage_count(m->impl); }
int nf_model_stage_name(const nf_model * m, int i, char * out, size_t n) {
    return m->iface->stage_name(m->impl, i, out, n);
}

int nf_model_forward(nf_model * m, const struct nf_array * in, int n_in, float * out, nf_err * err) {
    NF_TRY(nf__arrays_check(in, n_in, 1, err));
    return m->iface->forward(m->impl, in, n_in, out, err);
}

void nf_model_release_workspace(nf_model * m) {
    if (m) m->iface->release_workspace(m->impl);
}

/* ---- gen-weights ---------------------------------------------------------------------------- */

int nf__model_gen_weights_ex(const char * type, const char * dir, uint64_t seed, int n, const char * const * keys,
                             const char * const * values, const char * perturb_key, float perturb_delta, char * summary,
                             size_t summary_n, nf_err * err) {
    return nf__model_gen_weights_fmt(type, dir, NULL, seed, n, keys, values, perturb_key, perturb_delta, summary,
                                     summary_n, err);
}

int nf__model_gen_weights_fmt(const char * type, const char * dir, const char * format, uint64_t seed, int n,
                              const char * const * keys, const char * const * values, const char * perturb_key,
                              float perturb_delta, char * summary, size_t summary_n, nf_err * err) {
    const struct nf_model_i * iface = nf__model_find(type);
    if (!iface) {
        char known[256];
        nf__model_types(known, sizeof(known));
        return nf__err_set(err, NF_ERR_ARG, "unknown model type '%s' (known: %s)", type, known);
    }
    for (int i = 0; i < n; i++) {
        int ok = 0;
        for (const struct nf_option_desc * o = iface->gen_options; o && o->name && !ok; o++)
            ok = strcmp(o->name, keys[i]) == 0;
        if (!ok) return nf__err_set(err, NF_ERR_ARG, "%s has no option '%s'", type, keys[i]);
    }
    char ckpt[4096], e[256];
    const int want_ckpt = format && strcmp(format, "ckpt") == 0;
    if (format && !want_ckpt && strcmp(format, "safetensors") != 0)
        return nf__err_set(err, NF_ERR_ARG, "unknown weights format '%s' (safetensors or ckpt)",
                           nf__esc(e, sizeof(e), format));
    if (want_ckpt && !iface->ckpt_name)
        return nf__err_set(err, NF_ERR_ARG, "%s has no torch.save checkpoint form (--format ckpt)", type);
    if (want_ckpt) nf__path_join(ckpt, sizeof(ckpt), dir, iface->ckpt_name);
    char dummy[8];
    return iface->gen_weights(dir, want_ckpt ? ckpt : NULL, seed, n, keys, values, perturb_key, perturb_delta,
                              summary ? summary : dummy, summary ? summary_n : sizeof(dummy), err);
}

int nf_model_gen_weights(const char * type, const char * dir, uint64_t seed, int n, const char * const * keys,
                         const char * const * values, nf_err * err) {
    return nf__model_gen_weights_ex(type, dir, seed, n, keys, values, NULL, 0.0f, NULL, 0, err);
}

/* ---- a model's own inputs (nf_model_i.inputs) ------------------------------------------------ */

void nf__inputs_array(struct nf_inputs * in, const char * name, int dtype, int ndim, const int64_t * shape, void * data,
                      int own) {
    if (in->n >= NF_INPUTS_MAX_ARRAYS) return;
    struct nf_array * a = &in->a[in->n];
    memset(a, 0, sizeof(*a));
    a->name = name;
    a->dtype = dtype;
    a->ndim = ndim;
    for (int d = 0; d < ndim && d < NF_ARRAY_MAX_DIMS; d++) a->shape[d] = shape[d];
    a->data = data;
    in->owned[in->n++] = own ? data : NULL;
}

static struct nf_inputs_item * nf__inputs_next(struct nf_inputs * in, int marker, const char * key) {
    int * n = marker == 2 ? &in->n_report : marker ? &in->n_markers : &in->n_items;
    if (*n >= NF_INPUTS_MAX_ITEMS) return NULL;
    struct nf_inputs_item * it = (marker == 2 ? in->report : marker ? in->markers : in->items) + (*n)++;
    memset(it, 0, sizeof(*it));
    snprintf(it->key, sizeof(it->key), "%s", key);
    return it;
}
void nf__inputs_item_num(struct nf_inputs * in, int marker, const char * key, int64_t num) {
    struct nf_inputs_item * it = nf__inputs_next(in, marker, key);
    if (it) it->num = num;
}
void nf__inputs_item_str(struct nf_inputs * in, int marker, const char * key, const char * str) {
    struct nf_inputs_item * it = nf__inputs_next(in, marker, key);
    if (!it) return;
    snprintf(it->str, sizeof(it->str), "%s", str);
    it->is_str = 1;
}

const char * nf__inputs_opt(int n, const char * const * keys, const char * const * values, const char * key) {
    const char * v = NULL;
    for (int i = 0; i < n; i++)
        if (strcmp(keys[i], key) == 0) v = values[i]; /* the last one given */
    return v;
}

int nf__inputs_keys_check(const char * type, int n, const char * const * keys, const char * const * allowed,
                          nf_err * err) {
    for (int i = 0; i < n; i++) {
        int ok = 0;
        for (const char * const * a = allowed; !ok && *a; a++) ok = strcmp(keys[i], *a) == 0;
        if (!ok) {
            char e[128];
            return nf__err_set(err, NF_ERR_ARG, "input option \"%s\": not one a %s model takes",
                               nf__esc(e, sizeof(e), keys[i]), type);
        }
    }
    return NF_OK;
}

int nf__inputs_int(int n, const char * const * keys, const char * const * values, const char * key, int64_t min,
                   int64_t max, int64_t def, int64_t * out, nf_err * err) {
    const char * v = nf__inputs_opt(n, keys, values, key);
    *out = def;
    if (!v) return NF_OK;
    char * end = NULL;
    errno = 0;
    const long long x = *v >= '0' && *v <= '9' ? strtoll(v, &end, 10) : 0;
    if (!end || *end || errno || x < min || x > max) {
        char e[128];
        return nf__err_set(err, NF_ERR_ARG, "input option \"%s\" takes an integer in [%lld, %lld], got '%s'", key,
                           (long long) min, (long long) max, nf__esc(e, sizeof(e), v));
    }
    *out = x;
    return NF_OK;
}

void nf_inputs_free(nf_inputs * in) {
    if (!in) return;
    for (int i = 0; i < in->n; i++) free(in->owned[i]);
    if (in->priv_free) in->priv_free(in->priv);
    free(in);
}

int nf_model_inputs(nf_model * m, int n, const char * const * keys, const char * const * values, nf_inputs ** out,
                    nf_err * err) {
    return nf_model_inputs_given(m, NULL, 0, n, keys, values, out, err);
}

int nf_model_inputs_given(nf_model * m, const struct nf_array * given, int n_given, int n, const char * const * keys,
                          const char * const * values, nf_inputs ** out, nf_err * err) {
    *out = NULL;
    if (n < 0 || (n > 0 && (!keys || !values))) return nf__err_set(err, NF_ERR_ARG, "bad input option list");
    if (!m->iface->inputs)
        return nf__err_set(err, NF_ERR_UNSUPPORTED, "model type %s makes no inputs of its own", m->iface->type);
    nf_inputs * in = calloc(1, sizeof(*in));
    if (!in) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    int rc = nf__arrays_check(given, n_given, 1, err);
    if (rc == NF_OK) rc = m->iface->inputs(m, n, keys, values, given, n_given, in, err);
    if (rc != NF_OK) {
        nf_inputs_free(in);
        return rc;
    }
    *out = in;
    return NF_OK;
}

int nf_inputs_count(const nf_inputs * in) { return in->n; }
const struct nf_array * nf_inputs_arrays(const nf_inputs * in) { return in->a; }

static int nf__inputs_get(const struct nf_inputs_item * it, int n, int i, struct nf_config_item * out) {
    if (i < 0 || i >= n) return 0;
    out->key = it[i].key;
    out->str = it[i].is_str ? it[i].str : NULL;
    out->num = it[i].num;
    return 1;
}
int nf_inputs_item(const nf_inputs * in, int i, struct nf_config_item * out) {
    return nf__inputs_get(in->items, in->n_items, i, out);
}
int nf_inputs_marker(const nf_inputs * in, int i, struct nf_config_item * out) {
    return nf__inputs_get(in->markers, in->n_markers, i, out);
}

int nf_model_apply_adapter(nf_model * m, const char * dir, char * summary, size_t summary_n, nf_err * err) {
    if (!m->iface->apply_adapter)
        return nf__err_set(err, NF_ERR_UNSUPPORTED, "model type %s takes no adapter", m->iface->type);
    return m->iface->apply_adapter(m, dir, summary, summary_n, err);
}

/* ---- run's outputs (nf_model_i.artifacts, write_outputs, check_outputs) ----------------------- */

const struct nf_model_i * nf__model_type_or_default(const char * type) {
    const struct nf_model_i * i = type && type[0] ? nf__model_find(type) : NULL;
    return i ? i : nf__models[0]; /* a config without "model_type" is Mitra's */
}
const char * nf_model_type_description(const char * type) { return nf__model_type_or_default(type)->description; }
const char * const * nf_model_type_run_options(const char * type) {
    return nf__model_type_or_default(type)->run_options;
}
const char * const * nf_model_type_artifacts(const char * type) { return nf__model_type_or_default(type)->artifacts; }
int nf_model_type_check_inputs(const char * type, int n, const char * const * keys, const char * const * values,
                               nf_err * err) {
    const struct nf_model_i * i = nf__model_type_or_default(type);
    return i->inputs_check ? i->inputs_check(n, keys, values, err) : NF_OK;
}

int nf_model_write_outputs(nf_model * m, const nf_inputs * in, const float * out, const char * adapter,
                           const char * dir, struct nf_run_outputs * res, nf_err * err) {
    memset(res, 0, sizeof(*res));
    if (!m->iface->write_outputs)
        return nf__err_set(err, NF_ERR_UNSUPPORTED, "model type %s writes no run outputs", m->iface->type);
    const int rc = m->iface->write_outputs(m, in, out, adapter, dir, res, err);
    if (rc != NF_OK) {
        free(res->report);
        res->report = NULL;
    }
    return rc;
}

int nf_model_check_outputs(nf_model * m, const nf_inputs * in, const float * out, const char * dir, nf_err * err) {
    if (!m->iface->check_outputs)
        return nf__err_set(err, NF_ERR_UNSUPPORTED, "model type %s writes no run outputs", m->iface->type);
    return m->iface->check_outputs(m, in, out, dir, err);
}

/* ---- gen-weights for the command line -------------------------------------------------------- */

const char * nf_model_type_gen_option(const char * type, int i, const char ** help) {
    const struct nf_model_i * iface = type ? nf__model_find(type) : NULL;
    const struct nf_option_desc * o = iface ? iface->gen_options : NULL;
    for (int k = 0; o && o[k].name; k++) {
        if (k == i) {
            if (help) *help = o[k].help;
            return o[k].name;
        }
    }
    return NULL;
}

const char * nf_model_type_ckpt_name(const char * type) {
    const struct nf_model_i * iface = type ? nf__model_find(type) : NULL;
    return iface ? iface->ckpt_name : NULL;
}

int nf_model_gen_weights_full(const char * type, const char * dir, const char * format, uint64_t seed, int n,
                              const char * const * keys, const char * const * values, const char * perturb_key,
                              float perturb_delta, char * summary, size_t summary_n, nf_err * err) {
    return nf__model_gen_weights_fmt(type, dir, format, seed, n, keys, values, perturb_key, perturb_delta, summary,
                                     summary_n, err);
}

void nf_model_type_of(const char * path, char * out, size_t n) {
    snprintf(out, n, "%s", "");
    struct stat sb;
    /* a .ckpt: SpTransformer's official form; any other non-directory (a FIFO
     * named X.ckpt) too, so that its load names the file */
    if (stat(path, &sb) == 0 && !S_ISDIR(sb.st_mode)) {
        snprintf(out, n, "%s", "sptransformer");
        return;
    }
    char p[4096];
    nf__path_join(p, sizeof(p), path, "config.json");
    cJSON * doc = NULL;
    nf_err e = {0};
    if (nf__json_read_file(p, &doc, &e) != NF_OK) return; /* the load says what is wrong */
    const cJSON * t = cJSON_GetObjectItemCaseSensitive(doc, "model_type");
    snprintf(out, n, "%s", cJSON_IsString(t) ? t->valuestring : t ? "" : "mitra");
    cJSON_Delete(doc);
}
