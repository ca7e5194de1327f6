/*
 * opencl-buffers.c -- the OpenCL backend's device buffers: allocation (device
 * memory only), blocking upload / download, where a buffer lives, and the
 * grow-only scratch buffers the ops use.
 */
#define _POSIX_C_SOURCE 200809L
#include "opencl-impl.h"

#include <inttypes.h>
#include <stdio.h>

/* ---- buffers -------------------------------------------------------------------- */

int nf__cl_buffer_alloc(nf_backend * be, size_t size, void ** handle, nf_err * err) {
    struct nf_cl * c = be->ctx;
    *handle = NULL;
    if (size > c->max_alloc) {
        return nf__err_set(err, NF_ERR_NOMEM,
                           "%s: buffer of %zu bytes exceeds CL_DEVICE_MAX_MEM_ALLOC_SIZE "
                           "(%" PRIu64 " bytes)",
                           c->name, size, (uint64_t) c->max_alloc);
    }
    cl_int rc = CL_SUCCESS;
    /* device memory only: never CL_MEM_USE_HOST_PTR / ALLOC_HOST_PTR */
    cl_mem m = clCreateBuffer(c->context, CL_MEM_READ_WRITE, size ? size : 4, NULL, &rc);
    if (rc != CL_SUCCESS) {
        return nf__err_set(err, cl_rc_code(rc), "%s: clCreateBuffer(%zu bytes): %s (%d)", c->name, size,
                           nf__cl_err_name(rc), (int) rc);
    }
    *handle = m;
    return NF_OK;
}

void nf__cl_buffer_free(nf_backend * be, void * handle) {
    if (handle) {
        clReleaseMemObject((cl_mem) handle);
    }
}

int nf__cl_upload(nf_backend * be, void * handle, size_t offs, const void * src, size_t n, nf_err * err) {
    struct nf_cl * c = be->ctx;
    if (n == 0) {
        return NF_OK;
    }
    cl_int rc = clEnqueueWriteBuffer(c->queue, (cl_mem) handle, CL_TRUE, offs, n, src, 0, NULL, NULL);
    if (rc != CL_SUCCESS) {
        return nf__err_set(err, cl_rc_code(rc), "%s: clEnqueueWriteBuffer(%zu bytes at %zu): %s (%d)", c->name, n, offs,
                           nf__cl_err_name(rc), (int) rc);
    }
    return NF_OK;
}

int nf__cl_download(nf_backend * be, void * handle, size_t offs, void * dst, size_t n, nf_err * err) {
    struct nf_cl * c = be->ctx;
    if (n == 0) {
        return NF_OK;
    }
    cl_int rc = clEnqueueReadBuffer(c->queue, (cl_mem) handle, CL_TRUE, offs, n, dst, 0, NULL, NULL);
    if (rc != CL_SUCCESS) {
        return nf__err_set(err, cl_rc_code(rc), "%s: clEnqueueReadBuffer(%zu bytes at %zu): %s (%d)", c->name, n, offs,
                           nf__cl_err_name(rc), (int) rc);
    }
    return NF_OK;
}

int nf__cl_buffer_where(nf_backend * be, void * handle, char * out, size_t n, nf_err * err) {
    struct nf_cl * c = be->ctx;
    cl_context ctx = NULL;
    cl_mem_flags flags = 0;
    CL_CHECK(clGetMemObjectInfo((cl_mem) handle, CL_MEM_CONTEXT, sizeof(ctx), &ctx, NULL), err,
             "clGetMemObjectInfo(CL_MEM_CONTEXT)");
    CL_CHECK(clGetMemObjectInfo((cl_mem) handle, CL_MEM_FLAGS, sizeof(flags), &flags, NULL), err,
             "clGetMemObjectInfo(CL_MEM_FLAGS)");
    if (flags & (CL_MEM_USE_HOST_PTR | CL_MEM_ALLOC_HOST_PTR)) {
        snprintf(out, n, "cpu");
    } else if (ctx == c->context) {
        snprintf(out, n, "%s", c->name);
    } else {
        snprintf(out, n, "opencl:?");
    }
    return NF_OK;
}

/* ---- scratch -------------------------------------------------------------------- */

/* Grow a device buffer to at least size bytes (contents are not kept). */
int nf__cl_reserve_buffer(struct nf_cl * c, cl_mem * buf, size_t * cur, size_t size, const char * what, nf_err * err) {
    if (size == 0) {
        size = 4;
    }
    if (*buf && *cur >= size) {
        return NF_OK;
    }
    if (size > c->max_alloc) {
        return nf__err_set(err, NF_ERR_NOMEM,
                           "%s: %s buffer of %zu bytes exceeds "
                           "CL_DEVICE_MAX_MEM_ALLOC_SIZE (%" PRIu64 " bytes)",
                           c->name, what, size, (uint64_t) c->max_alloc);
    }
    if (*buf) {
        /* the release is deferred by OpenCL until queued kernels using it finish */
        clReleaseMemObject(*buf);
        *buf = NULL;
        *cur = 0;
    }
    cl_int rc = CL_SUCCESS;
    *buf = clCreateBuffer(c->context, CL_MEM_READ_WRITE, size, NULL, &rc);
    if (rc != CL_SUCCESS) {
        *buf = NULL;
        return nf__err_set(err, cl_rc_code(rc), "%s: clCreateBuffer(%s, %zu bytes): %s (%d)", c->name, what, size,
                           nf__cl_err_name(rc), (int) rc);
    }
    *cur = size;
    if (c->be) nf__trace_alloc(c->be, (int64_t) size);
    return NF_OK;
}

int nf__cl_ensure_scratch(struct nf_cl * c, size_t size, nf_err * err) {
    return nf__cl_reserve_buffer(c, &c->scratch, &c->scratch_size, size, "scratch", err);
}
