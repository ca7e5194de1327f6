/* mitra-inputs.c -- Mitra's own inputs and run outputs (nf_model_i.inputs,
 * write_outputs, check_outputs; nofall.h nf_model_inputs).
 *
 * The seeded table, byte-identical on every machine: "seed" (42), "support"
 * (16), "query" (8), "features" (13). Labels 0 .. min(n_classes, 10)-1 for
 * a classifier, targets in [0, 1) for a regressor; features are noisy
 * class-dependent means on a 1/64 grid (exact in float; ties are realistic).
 * Or the table from .npy files: "support_x", "support_y", "query_x" (all
 * three): float32/float64 (rows, features), int64/int32 labels or float
 * targets.
 *
 * A run writes support_x.npy, support_y.npy, query_x.npy (the exact
 * inputs), logits.npy and class_ids.npy (argmax; a classifier's). */
#include "mitra-impl.h"
#include "io/nf-io.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define NF_SEED_MAX ((int64_t) 9007199254740991) /* 2^53 - 1 */

static int nf__mitra_npy_matrix(const char * path, struct nf_npy * a, float ** out, nf_err * err) {
    if (a->ndim != 2)
        return nf__err_set(err, NF_ERR_SHAPE, "%s: expected a 2-D array (rows, features), got %d-D", path, a->ndim);
    const int64_t n = a->shape[0] * a->shape[1];
    float * f = malloc((size_t) (n ? n : 1) * sizeof(float));
    if (!f) return nf__err_set(err, NF_ERR_NOMEM, "%s: out of memory", path);
    if (a->dtype == NF_NPY_F4)
        memcpy(f, a->data, (size_t) n * sizeof(float));
    else if (a->dtype == NF_NPY_F8)
        for (int64_t i = 0; i < n; i++) f[i] = (float) ((const double *) a->data)[i];
    else {
        free(f);
        return nf__err_set(err, NF_ERR_FORMAT, "%s: dtype %s, expected float32 or float64", path,
                           nf__npy_dtype_name(a->dtype));
    }
    *out = f;
    return NF_OK;
}

/* the table from its three files */
int nf__mitra_files(const char * sx, const char * sy, const char * qx, int class_labels, struct nf_inputs * out,
                    nf_err * err) {
    struct nf_npy a = {0}, b = {0}, c = {0};
    float *xs = NULL, *xq = NULL;
    void * y = NULL;
    int rc = nf__npy_read(sx, &a, err);
    if (rc == NF_OK) rc = nf__npy_read(sy, &b, err);
    if (rc == NF_OK) rc = nf__npy_read(qx, &c, err);
    if (rc == NF_OK) rc = nf__mitra_npy_matrix(sx, &a, &xs, err);
    if (rc == NF_OK) rc = nf__mitra_npy_matrix(qx, &c, &xq, err);
    if (rc == NF_OK) {
        if (c.shape[1] != a.shape[1]) {
            rc = nf__err_set(err, NF_ERR_SHAPE, "%s has %lld features but %s has %lld", qx, (long long) c.shape[1], sx,
                             (long long) a.shape[1]);
        } else if (b.ndim != 1 || b.shape[0] != a.shape[0]) {
            rc = nf__err_set(err, NF_ERR_SHAPE, "%s: expected shape (%lld,) to match %s", sy, (long long) a.shape[0],
                             sx);
        }
    }
    if (rc == NF_OK) {
        const int64_t n = b.shape[0];
        y = malloc((size_t) (n ? n : 1) * (class_labels ? sizeof(int64_t) : sizeof(float)));
        if (!y)
            rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
        else if (class_labels && b.dtype == NF_NPY_I8)
            memcpy(y, b.data, (size_t) n * sizeof(int64_t));
        else if (class_labels && b.dtype == NF_NPY_I4)
            for (int64_t i = 0; i < n; i++) ((int64_t *) y)[i] = ((const int32_t *) b.data)[i];
        else if (class_labels)
            rc = nf__err_set(err, NF_ERR_FORMAT, "%s: dtype %s, expected int64 or int32 class labels", sy,
                             nf__npy_dtype_name(b.dtype));
        else if (b.dtype == NF_NPY_F4)
            memcpy(y, b.data, (size_t) n * sizeof(float));
        else if (b.dtype == NF_NPY_F8)
            for (int64_t i = 0; i < n; i++) ((float *) y)[i] = (float) ((const double *) b.data)[i];
        else
            rc = nf__err_set(err, NF_ERR_FORMAT, "%s: dtype %s, expected float32 regression targets", sy,
                             nf__npy_dtype_name(b.dtype));
    }
    if (rc == NF_OK) {
        const int64_t ssx[2] = {a.shape[0], a.shape[1]}, ssy[1] = {a.shape[0]}, sqx[2] = {c.shape[0], c.shape[1]};
        nf__inputs_array(out, "support_x", NF_ARRAY_F32, 2, ssx, xs, 1);
        nf__inputs_array(out, "support_y", class_labels ? NF_ARRAY_I64 : NF_ARRAY_F32, 1, ssy, y, 1);
        nf__inputs_array(out, "query_x", NF_ARRAY_F32, 2, sqx, xq, 1);
        nf__inputs_item_str(out, 2, "input_source", "files");
    } else {
        free(xs);
        free(xq);
        free(y);
    }
    nf__npy_free(&a);
    nf__npy_free(&b);
    nf__npy_free(&c);
    return rc;
}

/* the seeded table into out (its three arrays) */
int nf__mitra_seeded(nf_model * model, uint64_t seed, int64_t ns, int64_t nq, int64_t nf, struct nf_inputs * out,
                     nf_err * err) {
    const struct nf_input_desc * yd = nf_model_input(model, 1);
    const int class_labels = yd->dtype == NF_ARRAY_I64;
    const int n_classes = class_labels ? (int) (yd->n_classes < 10 ? yd->n_classes : 10) : 0;
    float * xs = malloc((size_t) (ns * nf) * sizeof(float));
    float * xq = malloc((size_t) (nq * nf) * sizeof(float));
    void * y = malloc((size_t) ns * (class_labels ? sizeof(int64_t) : sizeof(float)));
    if (!xs || !xq || !y) {
        free(xs);
        free(xq);
        free(y);
        return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    }
    uint64_t s = seed ^ 0xD1B54A32D192ED03ull;
    for (int64_t r = 0; r < ns + nq; r++) {
        const float c = (float) (nf__rng_next(&s) % (uint64_t) (n_classes > 0 ? n_classes : 1));
        float * row = r < ns ? xs + r * nf : xq + (r - ns) * nf;
        for (int64_t j = 0; j < nf; j++) {
            float g = 0.0f;
            for (int i = 0; i < 4; i++) g += nf__rng_unif(&s);
            const float v = (g - 2.0f) * 2.0f + 0.25f * c * (float) ((j % 3) - 1);
            row[j] = roundf(v * 64.0f) / 64.0f;
        }
        if (r < ns) {
            if (class_labels)
                ((int64_t *) y)[r] = (int64_t) c;
            else
                ((float *) y)[r] = nf__rng_unif(&s);
        }
    }
    const int64_t sx[2] = {ns, nf}, sy[1] = {ns}, qx[2] = {nq, nf};
    nf__inputs_array(out, "support_x", NF_ARRAY_F32, 2, sx, xs, 1);
    nf__inputs_array(out, "support_y", class_labels ? NF_ARRAY_I64 : NF_ARRAY_F32, 1, sy, y, 1);
    nf__inputs_array(out, "query_x", NF_ARRAY_F32, 2, qx, xq, 1);
    return NF_OK;
}

int nf__mitra_inputs_check(int n, const char * const * keys, const char * const * values, nf_err * err);
int nf__mitra_inputs_check(int n, const char * const * keys, const char * const * values, nf_err * err) {
    const int nfiles = (nf__inputs_opt(n, keys, values, "support_x") != NULL) +
                       (nf__inputs_opt(n, keys, values, "support_y") != NULL) +
                       (nf__inputs_opt(n, keys, values, "query_x") != NULL);
    if (nfiles != 0 && nfiles != 3)
        return nf__err_set(err, NF_ERR_ARG, "give all of --support-x, --support-y, --query-x, or none");
    return NF_OK;
}

int nf__mitra_own_inputs(nf_model * model, int n, const char * const * keys, const char * const * values,
                         const struct nf_array * given, int n_given, struct nf_inputs * out, nf_err * err);
int nf__mitra_own_inputs(nf_model * model, int n, const char * const * keys, const char * const * values,
                         const struct nf_array * given, int n_given, struct nf_inputs * out, nf_err * err) {
    (void) given;
    static const char * const allowed[] = {"seed",      "support",   "query",   "features",
                                           "support_x", "support_y", "query_x", NULL};
    NF_TRY(nf__inputs_keys_check("mitra", n, keys, allowed, err));
    if (n_given) return nf__err_set(err, NF_ERR_ARG, "mitra makes its inputs from files or a seed, not given arrays");
    NF_TRY(nf__mitra_inputs_check(n, keys, values, err));
    int64_t seed, ns, nq, nf;
    NF_TRY(nf__inputs_int(n, keys, values, "seed", 0, NF_SEED_MAX, 42, &seed, err));
    NF_TRY(nf__inputs_int(n, keys, values, "support", 1, 1 << 24, 16, &ns, err));
    NF_TRY(nf__inputs_int(n, keys, values, "query", 1, 1 << 24, 8, &nq, err));
    NF_TRY(nf__inputs_int(n, keys, values, "features", 1, 1 << 20, 13, &nf, err));
    const struct nf_input_desc * yd = nf_model_input(model, 1);
    const int class_labels = yd->dtype == NF_ARRAY_I64;
    const char * sx_path = nf__inputs_opt(n, keys, values, "support_x");
    if (sx_path)
        return nf__mitra_files(sx_path, nf__inputs_opt(n, keys, values, "support_y"),
                               nf__inputs_opt(n, keys, values, "query_x"), class_labels, out, err);
    NF_TRY(nf__mitra_seeded(model, (uint64_t) seed, ns, nq, nf, out, err));
    char name[96];
    snprintf(name, sizeof(name), "%lldx%lldx%lld", (long long) ns, (long long) nq, (long long) nf);
    nf__inputs_item_str(out, 0, "case", name);
    nf__inputs_item_num(out, 0, "n_support", ns);
    nf__inputs_item_num(out, 0, "n_query", nq);
    nf__inputs_item_num(out, 0, "n_features", nf);
    nf__inputs_item_str(out, 2, "input_source", "generated");
    nf__inputs_item_num(out, 2, "seed", seed);
    return NF_OK;
}

/* ---- run's outputs -------------------------------------------------------------------------- */

/* logits (n_q, C) or (n_q): the output's shape and width per query row */
static int nf__mitra_out_shape(nf_model * model, const struct nf_inputs * in, int * ndim, int64_t * shape,
                               int64_t * width, nf_err * err) {
    NF_TRY(nf_model_output_shape(model, in->a, in->n, ndim, shape, err));
    *width = *ndim > 1 ? shape[1] : 1;
    return NF_OK;
}

/* the report members of an nf_inputs' report list, as a JSON object */
static char * nf__report_json(const struct nf_inputs * in, cJSON * extra) {
    cJSON * o = cJSON_CreateObject();
    for (int i = 0; o && i < in->n_report; i++) {
        const struct nf_inputs_item * it = &in->report[i];
        if (it->is_str)
            cJSON_AddStringToObject(o, it->key, it->str);
        else
            cJSON_AddNumberToObject(o, it->key, (double) it->num);
    }
    for (cJSON * c = extra ? extra->child : NULL; o && c; c = c->next)
        cJSON_AddItemToObject(o, c->string, cJSON_Duplicate(c, 1));
    char * text = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    if (!text) return NULL;
    char * copy = malloc(strlen(text) + 1); /* released with nf_free (free) */
    if (copy) memcpy(copy, text, strlen(text) + 1);
    cJSON_free(text);
    return copy;
}

int nf__mitra_write_outputs(nf_model * model, const struct nf_inputs * in, const float * logits, const char * adapter,
                            const char * dir, struct nf_run_outputs * res, nf_err * err);
int nf__mitra_write_outputs(nf_model * model, const struct nf_inputs * in, const float * logits, const char * adapter,
                            const char * dir, struct nf_run_outputs * res, nf_err * err) {
    (void) adapter;
    int ndim = 0;
    int64_t shape[NF_ARRAY_MAX_DIMS], width = 1;
    NF_TRY(nf__mitra_out_shape(model, in, &ndim, shape, &width, err));
    const int64_t nq = in->a[2].shape[0];
    char p[4096];
    static const char * const files[3] = {"support_x.npy", "support_y.npy", "query_x.npy"};
    for (int i = 0; i < 3; i++) {
        nf__path_join(p, sizeof(p), dir, files[i]);
        NF_TRY(nf__npy_write(p, in->a[i].dtype == NF_ARRAY_I64 ? NF_NPY_I8 : NF_NPY_F4, in->a[i].ndim, in->a[i].shape,
                             in->a[i].data, err));
    }
    nf__path_join(p, sizeof(p), dir, "logits.npy");
    NF_TRY(nf__npy_write(p, NF_NPY_F4, ndim, shape, logits, err));
    size_t cl = 1;
    snprintf(res->shape, sizeof(res->shape), "1");
    for (int d = 0; d < ndim; d++) nf__msg_append(res->shape, sizeof(res->shape), &cl, "x%lld", (long long) shape[d]);
    if (width > 1) {
        int64_t * cls = malloc((size_t) (nq ? nq : 1) * sizeof(int64_t));
        if (!cls) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
        cl = 0;
        for (int64_t r = 0; r < nq; r++) {
            const float * row = logits + r * width;
            int64_t best = 0;
            for (int64_t k = 1; k < width; k++)
                if (row[k] > row[best]) best = k;
            cls[r] = best;
            if (cl + 24 < sizeof(res->classes))
                cl += (size_t) snprintf(res->classes + cl, sizeof(res->classes) - cl, r ? ",%lld" : "%lld",
                                        (long long) best);
        }
        const int64_t sh[1] = {nq};
        nf__path_join(p, sizeof(p), dir, "class_ids.npy");
        const int rc = nf__npy_write(p, NF_NPY_I8, 1, sh, cls, err);
        free(cls);
        NF_TRY(rc);
    } else {
        snprintf(res->classes, sizeof(res->classes), "none");
    }
    res->report = nf__report_json(in, NULL);
    if (!res->report) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    return NF_OK;
}

int nf__mitra_check_outputs(nf_model * model, const struct nf_inputs * in, const float * logits, const char * dir,
                            nf_err * err);
int nf__mitra_check_outputs(nf_model * model, const struct nf_inputs * in, const float * logits, const char * dir,
                            nf_err * err) {
    (void) logits;
    int ndim = 0;
    int64_t shape[NF_ARRAY_MAX_DIMS], width = 1;
    NF_TRY(nf__mitra_out_shape(model, in, &ndim, shape, &width, err));
    const struct nf_array *sx = &in->a[0], *sy = &in->a[1], *qx = &in->a[2];
    struct {
        const char * f;
        enum nf_npy_dtype dt;
        int nd;
        int64_t s0, s1;
    } want[5] = {
        {"support_x.npy", NF_NPY_F4, 2, sx->shape[0], sx->shape[1]},
        {"support_y.npy", sy->dtype == NF_ARRAY_I64 ? NF_NPY_I8 : NF_NPY_F4, 1, sy->shape[0], 0},
        {"query_x.npy", NF_NPY_F4, 2, qx->shape[0], qx->shape[1]},
        {"logits.npy", NF_NPY_F4, ndim, shape[0], ndim > 1 ? shape[1] : 0},
        {"class_ids.npy", NF_NPY_I8, 1, qx->shape[0], 0},
    };
    char p[4096];
    for (int i = 0; i < (width > 1 ? 5 : 4); i++) {
        struct nf_npy a;
        nf__path_join(p, sizeof(p), dir, want[i].f);
        NF_TRY(nf__npy_read(p, &a, err));
        int ok = a.dtype == want[i].dt && a.ndim == want[i].nd && a.shape[0] == want[i].s0 &&
                 (a.ndim < 2 || a.shape[1] == want[i].s1);
        if (ok && a.dtype == NF_NPY_F4) {
            for (size_t e = 0; e < a.nbytes / 4; e++) ok &= isfinite(((const float *) a.data)[e]) != 0;
        }
        if (ok && i == 4) {
            for (int64_t e = 0; e < a.shape[0]; e++) {
                const int64_t c = ((const int64_t *) a.data)[e];
                ok &= c >= 0 && c < width;
            }
        }
        nf__npy_free(&a);
        if (!ok) return nf__err_set(err, NF_ERR_IO, "%s: read back with the wrong shape/dtype or non-finite values", p);
    }
    return NF_OK;
}
