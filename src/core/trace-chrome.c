/* trace-chrome.c -- a backend's op records as Chrome trace-event JSON
 * (nofall-plot.h nf_trace_chrome_json; the format Perfetto and
 * chrome://tracing open). The ops of a timed trace run synchronised one by
 * one, so each is laid from where the previous ended: ts is the sum of the
 * earlier ops' times, in microseconds. */
#include "nf-impl.h"
#include "nofall-plot.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* the stage an op belongs to: its label's first component, with the next
 * when that is a number ("layers.3.attention1.q" -> "layers.3"), or the
 * op's name when it has no label */
static void nf__chrome_stage(const struct nf_trace_op * r, char * out, size_t n) {
    const char * l = r->label[0] ? r->label : nf__op_name(r->type);
    const char * end = strchr(l, '.');
    if (end && end[1] >= '0' && end[1] <= '9') {
        const char * p = end + 1;
        while (*p >= '0' && *p <= '9') p++;
        if (*p == '.' || *p == '\0') end = p;
    }
    snprintf(out, n, "%.*s", end ? (int) (end - l) : (int) strlen(l), l);
}

/* microseconds, to the nanosecond (short, exact decimal text) */
static double nf__us(double us) { return floor(us * 1000.0 + 0.5) / 1000.0; }

static cJSON * nf__chrome_event(const char * name, const char * cat, double ts, double dur, int tid) {
    cJSON * e = cJSON_CreateObject();
    if (!e) return NULL;
    cJSON_AddStringToObject(e, "name", name);
    cJSON_AddStringToObject(e, "cat", cat);
    cJSON_AddStringToObject(e, "ph", "X");
    cJSON_AddNumberToObject(e, "ts", nf__us(ts));
    cJSON_AddNumberToObject(e, "dur", nf__us(dur));
    cJSON_AddNumberToObject(e, "pid", 1);
    cJSON_AddNumberToObject(e, "tid", tid);
    return e;
}

static void nf__chrome_meta(cJSON * evs, const char * what, int tid, const char * name) {
    cJSON * e = cJSON_CreateObject();
    if (!e) return;
    cJSON_AddStringToObject(e, "name", what);
    cJSON_AddStringToObject(e, "ph", "M");
    cJSON_AddNumberToObject(e, "pid", 1);
    cJSON_AddNumberToObject(e, "tid", tid);
    cJSON * a = cJSON_AddObjectToObject(e, "args");
    if (a) cJSON_AddStringToObject(a, "name", name);
    cJSON_AddItemToArray(evs, e);
}

char * nf_trace_chrome_json(const nf_backend * be, nf_err * err) {
    cJSON * root = cJSON_CreateObject();
    cJSON * evs = root ? cJSON_AddArrayToObject(root, "traceEvents") : NULL;
    if (evs) {
        char pname[320];
        snprintf(pname, sizeof(pname), "nofall %s (%s)", be->name, be->desc);
        nf__chrome_meta(evs, "process_name", 0, pname);
        nf__chrome_meta(evs, "thread_name", 1, "stages (op labels)");
        nf__chrome_meta(evs, "thread_name", 2, "ops");
    }
    double t = 0.0, stage_t0 = 0.0; /* microseconds */
    char stage[64] = "", cur[64];
    for (int64_t i = 0; evs && i < be->n_ops; i++) {
        const struct nf_trace_op * r = &be->ops[i];
        const double dur = r->ms > 0 ? r->ms * 1000.0 : 0.0;
        nf__chrome_stage(r, cur, sizeof(cur));
        if (i > 0 && strcmp(cur, stage) != 0) { /* a stage ends: one span over its ops */
            cJSON_AddItemToArray(evs, nf__chrome_event(stage, "stage", stage_t0, t - stage_t0, 1));
            stage_t0 = t;
        }
        snprintf(stage, sizeof(stage), "%s", cur);
        cJSON * e = nf__chrome_event(nf__op_name(r->type), "op", t, dur, 2);
        if (!e) break;
        cJSON * a = cJSON_AddObjectToObject(e, "args");
        if (a) {
            cJSON_AddStringToObject(a, "label", r->label);
            cJSON_AddStringToObject(a, "shapes", r->shapes);
            cJSON_AddNumberToObject(a, "flops", r->flops);
            cJSON_AddStringToObject(a, "operands_on", r->where);
            if (r->ms < 0) cJSON_AddBoolToObject(a, "untimed", 1);
        }
        cJSON_AddItemToArray(evs, e);
        t += dur;
    }
    if (evs && be->n_ops > 0) cJSON_AddItemToArray(evs, nf__chrome_event(stage, "stage", stage_t0, t - stage_t0, 1));
    cJSON * meta = root ? cJSON_AddObjectToObject(root, "otherData") : NULL;
    if (meta) {
        const struct nf_trace_totals * tt = &be->totals;
        cJSON_AddStringToObject(meta, "device", be->name);
        cJSON_AddStringToObject(meta, "precision", nf_precision_name(be->precision));
        cJSON_AddStringToObject(meta, "timing", "ops synchronised one by one, laid end to end");
        cJSON_AddNumberToObject(meta, "ops", (double) tt->ops);
        cJSON_AddNumberToObject(meta, "op_ms", tt->op_ms);
        cJSON_AddNumberToObject(meta, "flops", tt->flops);
        cJSON_AddNumberToObject(meta, "h2d_copies", (double) tt->h2d_copies);
        cJSON_AddNumberToObject(meta, "h2d_bytes", (double) tt->h2d_bytes);
        cJSON_AddNumberToObject(meta, "d2h_copies", (double) tt->d2h_copies);
        cJSON_AddNumberToObject(meta, "d2h_bytes", (double) tt->d2h_bytes);
        cJSON_AddNumberToObject(meta, "records_dropped", (double) tt->records_dropped);
    }
    if (root) cJSON_AddStringToObject(root, "displayTimeUnit", "ms");
    if (!meta) { /* out of memory: the document is incomplete */
        cJSON_Delete(root);
        root = NULL;
    }
    return nf__trace_text(root, 0, be, err);
}
