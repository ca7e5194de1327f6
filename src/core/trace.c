/* trace.c -- op and transfer records of a backend, and their JSON form. */
#include "nf-impl.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

void nf__trace_alloc(nf_backend * be, int64_t bytes) {
    be->totals.allocs++;
    be->totals.alloc_bytes += bytes;
}

void nf__trace_xfer(nf_backend * be, int h2d, int64_t bytes, const char * what) {
    if (h2d) { be->totals.h2d_copies++; be->totals.h2d_bytes += bytes; }
    else     { be->totals.d2h_copies++; be->totals.d2h_bytes += bytes; }
    if (be->n_xfers == be->cap_xfers) {
        int64_t cap = be->cap_xfers ? be->cap_xfers * 2 : 256;
        struct nf_trace_xfer * r = realloc(be->xfers, (size_t) cap * sizeof(*r));
        if (!r) return;   /* totals stay exact; only the per-record list is short */
        be->xfers = r;
        be->cap_xfers = cap;
    }
    struct nf_trace_xfer * r = &be->xfers[be->n_xfers++];
    r->h2d = h2d;
    r->bytes = bytes;
    snprintf(r->what, sizeof(r->what), "%s", what);
}

void nf_trace_reset(nf_backend * be, int timed) {
    be->n_ops = 0;
    be->n_xfers = 0;
    memset(&be->totals, 0, sizeof(be->totals));
    be->trace_timed = timed;
}

void nf_trace_totals_get(const nf_backend * be, struct nf_trace_totals * out) {
    *out = be->totals;
}

int nf_trace_write_json(const nf_backend * be, FILE * f) {
    cJSON * root = cJSON_CreateObject();
    if (!root) return NF_ERR_NOMEM;
    cJSON_AddStringToObject(root, "device", be->name);
    cJSON_AddStringToObject(root, "description", be->desc);
    cJSON_AddStringToObject(root, "precision", nf_precision_name(be->precision));
    cJSON * ops = cJSON_AddArrayToObject(root, "ops");
    for (int64_t i = 0; i < be->n_ops; i++) {
        const struct nf_trace_op * r = &be->ops[i];
        cJSON * o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "op", nf__op_name(r->type));
        cJSON_AddStringToObject(o, "label", r->label);
        cJSON_AddStringToObject(o, "device", r->device);
        cJSON_AddStringToObject(o, "operands_on", r->where);
        cJSON_AddStringToObject(o, "shapes", r->shapes);
        if (r->ms >= 0) cJSON_AddNumberToObject(o, "ms", r->ms);
        else            cJSON_AddNullToObject(o, "ms");
        cJSON_AddNumberToObject(o, "flops", r->flops);
        cJSON_AddItemToArray(ops, o);
    }
    cJSON * xs = cJSON_AddArrayToObject(root, "transfers");
    for (int64_t i = 0; i < be->n_xfers; i++) {
        const struct nf_trace_xfer * r = &be->xfers[i];
        cJSON * o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "direction", r->h2d ? "h2d" : "d2h");
        cJSON_AddNumberToObject(o, "bytes", (double) r->bytes);
        cJSON_AddStringToObject(o, "what", r->what);
        cJSON_AddItemToArray(xs, o);
    }
    const struct nf_trace_totals * t = &be->totals;
    cJSON * tot = cJSON_AddObjectToObject(root, "totals");
    cJSON_AddNumberToObject(tot, "ops", (double) t->ops);
    cJSON_AddNumberToObject(tot, "ops_off_device", (double) t->ops_off_device);
    cJSON_AddNumberToObject(tot, "h2d_copies", (double) t->h2d_copies);
    cJSON_AddNumberToObject(tot, "d2h_copies", (double) t->d2h_copies);
    cJSON_AddNumberToObject(tot, "h2d_bytes", (double) t->h2d_bytes);
    cJSON_AddNumberToObject(tot, "d2h_bytes", (double) t->d2h_bytes);
    cJSON_AddNumberToObject(tot, "device_allocs", (double) t->allocs);
    cJSON_AddNumberToObject(tot, "device_alloc_bytes", (double) t->alloc_bytes);
    cJSON_AddNumberToObject(tot, "flops", t->flops);
    cJSON_AddNumberToObject(tot, "op_ms", t->op_ms);
    char * txt = cJSON_Print(root);
    cJSON_Delete(root);
    if (!txt) return NF_ERR_NOMEM;
    int ok = fputs(txt, f) >= 0 && fputc('\n', f) != EOF;
    cJSON_free(txt);
    return ok ? NF_OK : NF_ERR_IO;
}
