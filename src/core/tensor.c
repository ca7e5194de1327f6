/* tensor.c -- tensors are views (buffer + offset + shape); buffers belong to one device. */
#include "nf-impl.h"
#include "model.h"
#include "nf-ops.h"

#include <stdlib.h>
#include <string.h>

size_t nf__dtype_size(enum nf_dtype t) {
    switch (t) {
        case NF_F32: return 4;
        case NF_I32: return 4;
    }
    return 0;
}

int64_t nf__tensor_numel(const nf_tensor * t) {
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->ne[i];
    return n;
}

size_t nf__tensor_nbytes(const nf_tensor * t) { return (size_t) nf__tensor_numel(t) * nf__dtype_size(t->type); }

int nf__tensor_alloc(nf_backend * be, nf_tensor * t, enum nf_dtype type, int ndim, const int64_t * ne,
                     const char * name, nf_err * err) {
    memset(t, 0, sizeof(*t));
    if (ndim < 1 || ndim > NF_MAX_DIMS) {
        return nf__err_set(err, NF_ERR_ARG, "tensor %s: bad rank %d", name ? name : "?", ndim);
    }
    t->type = type;
    t->ndim = ndim;
    t->name = name;
    for (int i = 0; i < ndim; i++) {
        if (ne[i] < 0) return nf__err_set(err, NF_ERR_SHAPE, "tensor %s: negative dimension", name ? name : "?");
        t->ne[i] = ne[i];
    }
    size_t nbytes = nf__tensor_nbytes(t);
    struct nf_buffer * buf = calloc(1, sizeof(*buf));
    if (!buf) return nf__err_set(err, NF_ERR_NOMEM, "tensor %s: out of host memory", name ? name : "?");
    buf->be = be;
    buf->size = nbytes;
    /* zero-sized tensors still get a (1-byte) allocation so handles are valid */
    int rc = be->iface->buffer_alloc(be, nbytes ? nbytes : 1, &buf->handle, err);
    if (rc != NF_OK) {
        free(buf);
        return nf__err_prefix(err, "%s: allocating tensor %s (%zu bytes)", be->name, name ? name : "?", nbytes);
    }
    /* ask the driver where the memory actually is; an op whose operands are
     * found anywhere but on the run's device is counted off-device */
    rc = be->iface->buffer_where(be, buf->handle, buf->where, sizeof(buf->where), err);
    if (rc != NF_OK) {
        be->iface->buffer_free(be, buf->handle);
        free(buf);
        return nf__err_prefix(err, "%s: locating tensor %s", be->name, name ? name : "?");
    }
    t->buf = buf;
    t->owner = true;
    nf__trace_alloc(be, (int64_t) nbytes);
    return NF_OK;
}

void nf__tensor_free(nf_tensor * t) {
    if (!t || !t->buf || !t->owner) return;
    nf_backend * be = t->buf->be;
    if (t->buf->handle) be->iface->buffer_free(be, t->buf->handle);
    free(t->buf);
    t->buf = NULL;
    t->owner = false;
}

nf_tensor nf__tensor_view(const nf_tensor * t, int64_t elem_offs, int ndim, const int64_t * ne) {
    nf_tensor v = *t;
    v.owner = false;
    v.offs = t->offs + (size_t) elem_offs * nf__dtype_size(t->type);
    v.ndim = ndim;
    for (int i = 0; i < NF_MAX_DIMS; i++) v.ne[i] = i < ndim ? ne[i] : 0;
    return v;
}

int nf__tensor_upload(nf_tensor * t, const void * src, nf_err * err) {
    size_t n = nf__tensor_nbytes(t);
    nf_backend * be = t->buf->be;
    if (t->offs + n > t->buf->size) {
        return nf__err_set(err, NF_ERR_ARG, "upload %s: %zu bytes past the end of its buffer", t->name ? t->name : "?",
                           n);
    }
    if (n == 0) return NF_OK;
    int rc = be->iface->upload(be, t->buf->handle, t->offs, src, n, err);
    if (rc != NF_OK) return nf__err_prefix(err, "%s: upload of %s", be->name, t->name ? t->name : "?");
    nf__trace_xfer(be, 1, (int64_t) n, t->name ? t->name : "?");
    return NF_OK;
}

int nf__tensor_download(const nf_tensor * t, void * dst, nf_err * err) {
    size_t n = nf__tensor_nbytes(t);
    nf_backend * be = t->buf->be;
    if (t->offs + n > t->buf->size) {
        return nf__err_set(err, NF_ERR_ARG, "download %s: %zu bytes past the end of its buffer",
                           t->name ? t->name : "?", n);
    }
    if (n == 0) return NF_OK;
    int rc = be->iface->download(be, t->buf->handle, t->offs, dst, n, err);
    if (rc != NF_OK) return nf__err_prefix(err, "%s: download of %s", be->name, t->name ? t->name : "?");
    nf__trace_xfer(be, 0, (int64_t) n, t->name ? t->name : "?");
    return NF_OK;
}

/* ---- stage dumps ---------------------------------------------------------------- */
int nf__stage_emit(nf_stage_fn fn, void * user, struct nf_stage_buf * buf, const char * name, const nf_tensor * t,
                   int ndim, const int64_t * shape, nf_err * err) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    if ((size_t) n > buf->n) {
        float * h = realloc(buf->host, (size_t) n * sizeof(float));
        if (!h) return nf__err_set(err, NF_ERR_NOMEM, "out of memory for the stage %s", name);
        buf->host = h;
        buf->n = (size_t) n;
    }
    nf_tensor v = nf_view1(t, 0, n);
    v.type = t->type;
    NF_TRY(nf__tensor_download(&v, buf->host, err));
    if (t->type == NF_I32) {
        const int32_t * iv = (const int32_t *) (const void *) buf->host;
        for (int64_t i = 0; i < n; i++) buf->host[i] = (float) iv[i];
    }
    if (fn(user, name, buf->host, ndim, shape) != 0)
        return nf__err_set(err, NF_ERR_GENERIC, "stage callback stopped the forward at %s", name);
    return NF_OK;
}
