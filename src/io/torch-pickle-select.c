/* torch-pickle-select.c -- the restricted unpickler's result (torch-pickle.c
 * runs the opcodes): the dict it selects (the root, or the dict under the key
 * 'state_dict') turned into the checkpoint's tensors, each name a non-empty
 * string seen once, each value a row-major contiguous tensor; and the entry
 * point, which frees the machine and leaves no partial result. */
#include "torch-pickle-impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int nf__pk_select(struct nf__pk * k) {
    struct nf_ckpt * ck = k->ck;
    k->op_at = k->len;
    const uint32_t root = k->stack[0];
    if (k->nodes[root].kind != NF__DICT)
        return NF__BAD("the checkpoint is a %s, not a dict (a state_dict, or a dict holding one)",
                       nf__kind_names[k->nodes[root].kind]);
    uint32_t sel = root;
    int seen = 0;
    for (uint32_t it = k->nodes[root].u.c.head; it != NF__NIL; it = k->items[it].next) {
        if (!nf__pk_is_str(k, k->items[it].key, "state_dict")) continue;
        if (seen++) return NF__BAD("the key 'state_dict' appears twice");
        if (k->nodes[k->items[it].val].kind == NF__DICT) sel = k->items[it].val;
    }
    snprintf(ck->dict, sizeof(ck->dict), "%s", sel == root ? "" : "state_dict");
    const char * in = sel == root ? "the checkpoint" : "the state_dict";
    const uint32_t n = k->nodes[sel].n;
    ck->tensors = calloc(n ? n : 1, sizeof(*ck->tensors));
    if (!ck->tensors) return nf__pk_err(k, NF_ERR_NOMEM, "out of memory");
    struct nf__smap names = {0};
    int rc = NF_OK;
    for (uint32_t it = k->nodes[sel].u.c.head; it != NF__NIL && rc == NF_OK; it = k->items[it].next) {
        const struct nf__node *kn = &k->nodes[k->items[it].key], *vn = &k->nodes[k->items[it].val];
        if (kn->kind != NF__STR) {
            rc = NF__BAD("%s has a key of type %s (tensor names are strings)", in, nf__kind_names[kn->kind]);
            break;
        }
        const char * nm = (const char *) k->p + kn->u.s.off;
        const int nl = (int) kn->u.s.len;
        if (kn->u.s.len == 0 || kn->u.s.len > 1024 || memchr(nm, 0, kn->u.s.len)) {
            rc = NF__BAD("%s has an empty, over-long or NUL-holding key", in);
            break;
        }
        if (vn->kind != NF__TENSOR) {
            rc = NF__BAD("%s entry '%.*s' is not a tensor (a value of type %s)", in, nl, nm, nf__kind_names[vn->kind]);
            break;
        }
        const int pr = nf__smap_put(&names, nm, kn->u.s.len, 0);
        if (pr < 0) {
            rc = nf__pk_err(k, NF_ERR_NOMEM, "out of memory");
            break;
        }
        if (pr > 0) {
            rc = NF__BAD("%s entry '%.*s' appears twice", in, nl, nm);
            break;
        }
        const struct nf_ckpt_tensor * src = &k->tens[vn->u.i];
        /* row-major contiguous: dims of size 1 may carry any stride */
        int64_t want = 1;
        int contig = 1;
        for (int d = src->ndim - 1; d >= 0; d--) {
            if (src->shape[d] != 1 && src->stride[d] != want) contig = 0;
            want *= src->shape[d];
        }
        if (!contig && src->numel > 1) {
            char sh[160], sd[160];
            size_t a = 0, c = 0;
            sh[0] = sd[0] = '\0';
            for (int d = 0; d < src->ndim; d++) {
                a += (size_t) snprintf(sh + a, a < sizeof(sh) ? sizeof(sh) - a : 0, d ? ", %lld" : "%lld",
                                       (long long) src->shape[d]);
                c += (size_t) snprintf(sd + c, c < sizeof(sd) ? sizeof(sd) - c : 0, d ? ", %lld" : "%lld",
                                       (long long) src->stride[d]);
                if (a >= sizeof(sh) || c >= sizeof(sd)) break;
            }
            rc = NF__BAD("tensor '%.*s' is not contiguous (shape [%s], strides (%s)); re-save it with .contiguous()",
                         nl, nm, sh, sd);
            break;
        }
        struct nf_ckpt_tensor * t = &ck->tensors[ck->n_tensors];
        *t = *src;
        t->name = malloc(kn->u.s.len + 1);
        if (!t->name) {
            rc = nf__pk_err(k, NF_ERR_NOMEM, "out of memory");
            break;
        }
        memcpy(t->name, nm, kn->u.s.len);
        t->name[kn->u.s.len] = '\0';
        ck->n_tensors++;
    }
    nf__smap_free(&names);
    return rc;
}

int nf__ckpt_parse_pickle(const unsigned char * pkl, size_t len, const char * where, nf_ckpt_record_fn record_size,
                          void * ctx, struct nf_ckpt * ck, nf_err * err) {
    if (len > NF_CKPT_MAX_PKL)
        return nf__err_set(err, NF_ERR_FORMAT, "%s: %zu bytes (at most %u)", where, len, NF_CKPT_MAX_PKL);
    struct nf__pk k = {
        .p = pkl, .len = len, .where = where, .err = err, .ck = ck, .record_size = record_size, .ctx = ctx};
    int rc = nf__pk_run(&k);
    if (rc == NF_OK) rc = nf__pk_select(&k);
    free(k.nodes);
    free(k.items);
    free(k.stack);
    free(k.memo);
    free(k.tens);
    nf__smap_free(&k.stor_map);
    if (rc != NF_OK) { /* no partial result */
        for (int i = 0; i < ck->n_tensors; i++) free(ck->tensors[i].name);
        free(ck->tensors);
        for (int i = 0; i < ck->n_storages; i++) free(ck->storages[i].key);
        free(ck->storages);
        ck->tensors = NULL;
        ck->storages = NULL;
        ck->n_tensors = ck->n_storages = 0;
    }
    return rc;
}
