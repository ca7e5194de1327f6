/* trace.c -- what a backend ran and copied: running totals (always), and
 * per-op / per-transfer records (bounded, only in NF_TRACE_RECORDS mode),
 * and their JSON form. */
#include "nf-impl.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

void nf__trace_alloc(nf_backend * be, int64_t bytes) {
    be->totals.allocs++;
    be->totals.alloc_bytes += bytes;
}

/* A free record slot in *recs (grown up to NF_TRACE_MAX_RECORDS), or NULL
 * when records are off, at the cap, or memory is short: the totals stay
 * exact either way, and a record not kept is counted. */
static void * nf__record_slot(nf_backend * be, void ** recs, int64_t * n, int64_t * cap, size_t size) {
    if (!(be->trace_mode & NF_TRACE_RECORDS)) return NULL;
    if (*n == *cap) {
        const int64_t want = *cap ? *cap * 2 : 256;
        const int64_t ncap = want < NF_TRACE_MAX_RECORDS ? want : NF_TRACE_MAX_RECORDS;
        void * r = ncap > *cap ? realloc(*recs, (size_t) ncap * size) : NULL;
        if (!r) {
            be->totals.records_dropped++;
            return NULL;
        }
        *recs = r;
        *cap = ncap;
    }
    return (char *) *recs + (size_t) (*n)++ * size;
}

/* where the op's operands were measured to live: the run device, or the
 * first operand found elsewhere */
static const char * nf__op_operands_where(const nf_backend * be, const nf_op * op) {
    for (int i = 0; i < op->n_src + op->n_dst; i++) {
        const nf_tensor * t = i < op->n_src ? &op->src[i] : &op->dst[i - op->n_src];
        if (t->buf && strcmp(t->buf->where, be->name) != 0) return t->buf->where;
    }
    return be->name;
}

void nf__trace_where_reset(nf_backend * be) { be->n_op_where = 0; }

void nf__trace_where(const nf_backend * be, char * out, size_t n) {
    size_t len = 0;
    out[0] = '\0';
    for (int i = 0; i < be->n_op_where && len + 1 < n; i++) {
        const int w = snprintf(out + len, n - len, "%s%s", i ? "," : "", be->op_where[i]);
        len = w > 0 && len + (size_t) w < n ? len + (size_t) w : n - 1;
    }
}

static void nf__where_add(nf_backend * be, const char * where) {
    const int cap = (int) (sizeof(be->op_where) / sizeof(be->op_where[0]));
    for (int i = 0; i < be->n_op_where; i++) {
        if (strcmp(be->op_where[i], where) == 0) return;
    }
    if (be->n_op_where == cap) { /* more distinct places than slots: say so */
        snprintf(be->op_where[cap - 1], sizeof(be->op_where[cap - 1]), "(more)");
        return;
    }
    snprintf(be->op_where[be->n_op_where++], sizeof(be->op_where[0]), "%s", where);
}

void nf__trace_op(nf_backend * be, const nf_op * op, double ms) {
    const char * where = nf__op_operands_where(be, op);
    const double flops = nf__op_flops(op);
    be->totals.ops++;
    be->totals.flops += flops;
    if (ms > 0) be->totals.op_ms += ms;
    if (strcmp(where, be->name) != 0) be->totals.ops_off_device++;
    nf__where_add(be, where);
    struct nf_trace_op * r = nf__record_slot(be, (void **) &be->ops, &be->n_ops, &be->cap_ops, sizeof(*r));
    if (!r) return;
    memset(r, 0, sizeof(*r));
    r->type = op->type;
    snprintf(r->label, sizeof(r->label), "%s", op->label ? op->label : "");
    snprintf(r->device, sizeof(r->device), "%s", be->name);
    snprintf(r->where, sizeof(r->where), "%s", where);
    int off = 0;
    for (int i = 0; i < op->n_src + op->n_dst && off < (int) sizeof(r->shapes) - 24; i++) {
        const nf_tensor * t = i < op->n_src ? &op->src[i] : &op->dst[i - op->n_src];
        if (i == op->n_src)
            off += snprintf(r->shapes + off, sizeof(r->shapes) - off, "->");
        else if (i)
            off += snprintf(r->shapes + off, sizeof(r->shapes) - off, ",");
        if (!t->buf) {
            off += snprintf(r->shapes + off, sizeof(r->shapes) - off, "_");
            continue;
        }
        for (int dd = 0; dd < t->ndim && off < (int) sizeof(r->shapes) - 12; dd++) {
            off += snprintf(r->shapes + off, sizeof(r->shapes) - off, dd ? "x%lld" : "%lld", (long long) t->ne[dd]);
        }
    }
    r->ms = ms;
    r->flops = flops;
}

void nf__trace_xfer(nf_backend * be, int h2d, int64_t bytes, const char * what) {
    if (h2d) {
        be->totals.h2d_copies++;
        be->totals.h2d_bytes += bytes;
    } else {
        be->totals.d2h_copies++;
        be->totals.d2h_bytes += bytes;
    }
    struct nf_trace_xfer * r = nf__record_slot(be, (void **) &be->xfers, &be->n_xfers, &be->cap_xfers, sizeof(*r));
    if (!r) return;
    r->h2d = h2d;
    r->bytes = bytes;
    snprintf(r->what, sizeof(r->what), "%s", what);
}

void nf_trace_reset(nf_backend * be, int mode) {
    /* the record arrays stay allocated for reuse: resets do not grow memory */
    be->n_ops = 0;
    be->n_xfers = 0;
    memset(&be->totals, 0, sizeof(be->totals));
    be->trace_mode = mode == NF_TRACE_TIMED     ? NF_TRACE_TIMED
                     : mode == NF_TRACE_RECORDS ? NF_TRACE_RECORDS
                                                : NF_TRACE_TOTALS;
}

void nf_trace_totals_get(const nf_backend * be, struct nf_trace_totals * out) { *out = be->totals; }

void nf_free(void * p) { free(p); }

static cJSON * nf__trace_doc(const nf_backend * be) {
    cJSON * root = cJSON_CreateObject();
    if (!root) return NULL;
    cJSON_AddStringToObject(root, "device", be->name);
    cJSON_AddStringToObject(root, "description", be->desc);
    cJSON_AddStringToObject(root, "precision", nf_precision_name(be->precision));
    cJSON_AddStringToObject(root, "mode",
                            be->trace_mode == NF_TRACE_TIMED     ? "timed"
                            : be->trace_mode == NF_TRACE_RECORDS ? "records"
                                                                 : "totals");
    cJSON * ops = cJSON_AddArrayToObject(root, "ops");
    for (int64_t i = 0; ops && i < be->n_ops; i++) {
        const struct nf_trace_op * r = &be->ops[i];
        cJSON * o = cJSON_CreateObject();
        if (!o) break;
        cJSON_AddStringToObject(o, "op", nf__op_name(r->type));
        cJSON_AddStringToObject(o, "label", r->label);
        cJSON_AddStringToObject(o, "device", r->device);
        cJSON_AddStringToObject(o, "operands_on", r->where);
        cJSON_AddStringToObject(o, "shapes", r->shapes);
        if (r->ms >= 0)
            cJSON_AddNumberToObject(o, "ms", r->ms);
        else
            cJSON_AddNullToObject(o, "ms");
        cJSON_AddNumberToObject(o, "flops", r->flops);
        cJSON_AddItemToArray(ops, o);
    }
    cJSON * xs = cJSON_AddArrayToObject(root, "transfers");
    for (int64_t i = 0; xs && i < be->n_xfers; i++) {
        const struct nf_trace_xfer * r = &be->xfers[i];
        cJSON * o = cJSON_CreateObject();
        if (!o) break;
        cJSON_AddStringToObject(o, "direction", r->h2d ? "h2d" : "d2h");
        cJSON_AddNumberToObject(o, "bytes", (double) r->bytes);
        cJSON_AddStringToObject(o, "what", r->what);
        cJSON_AddItemToArray(xs, o);
    }
    const struct nf_trace_totals * t = &be->totals;
    cJSON * tot = cJSON_AddObjectToObject(root, "totals");
    if (tot) {
        cJSON_AddNumberToObject(tot, "ops", (double) t->ops);
        cJSON_AddNumberToObject(tot, "ops_off_device", (double) t->ops_off_device);
        cJSON_AddNumberToObject(tot, "h2d_copies", (double) t->h2d_copies);
        cJSON_AddNumberToObject(tot, "d2h_copies", (double) t->d2h_copies);
        cJSON_AddNumberToObject(tot, "h2d_bytes", (double) t->h2d_bytes);
        cJSON_AddNumberToObject(tot, "d2h_bytes", (double) t->d2h_bytes);
        cJSON_AddNumberToObject(tot, "device_allocs", (double) t->allocs);
        cJSON_AddNumberToObject(tot, "device_alloc_bytes", (double) t->alloc_bytes);
        cJSON_AddNumberToObject(tot, "records_dropped", (double) t->records_dropped);
        cJSON_AddNumberToObject(tot, "flops", t->flops);
        cJSON_AddNumberToObject(tot, "op_ms", t->op_ms);
    }
    return root;
}

char * nf_trace_json(const nf_backend * be, nf_err * err) { return nf__trace_text(nf__trace_doc(be), 1, be, err); }

char * nf__trace_text(struct cJSON * root, int pretty, const nf_backend * be, nf_err * err) {
    char * txt = root ? (pretty ? cJSON_Print(root) : cJSON_PrintUnformatted(root)) : NULL;
    cJSON_Delete(root);
    if (!txt) {
        nf__err_set(err, NF_ERR_NOMEM, "%s: out of memory writing the trace", be->name);
        return NULL;
    }
    /* hand out memory that nf_free (free) releases, whatever cJSON's hooks are */
    const size_t n = strlen(txt);
    char * out = malloc(n + 2);
    if (out) {
        memcpy(out, txt, n);
        out[n] = '\n';
        out[n + 1] = '\0';
    } else {
        nf__err_set(err, NF_ERR_NOMEM, "%s: out of memory writing the trace", be->name);
    }
    cJSON_free(txt);
    return out;
}
