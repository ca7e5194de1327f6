/* weights.c -- the generic machinery behind the models' weight tables
 * (weights.h): expansion, strict check, packing + one upload + binding, and
 * synthetic checkpoints. */
#include "weights.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- helpers ------------------------------------------------------------------ */

void nf__msg_append(char * msg, size_t cap, size_t * len, const char * fmt, ...) {
    if (*len + 1 >= cap) return;
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(msg + *len, cap - *len, fmt, ap);
    va_end(ap);
    if (w > 0) *len = *len + (size_t) w < cap ? *len + (size_t) w : cap - 1;
}

void nf__shape_str(char * out, size_t n, int ndim, const int64_t * shape) {
    size_t len = 0;
    out[0] = '\0';
    nf__msg_append(out, n, &len, "[");
    for (int i = 0; i < ndim; i++) nf__msg_append(out, n, &len, i ? ", %lld" : "%lld", (long long) shape[i]);
    nf__msg_append(out, n, &len, "]");
}

static const char * nf__st_dtype_name(enum nf_st_dtype t) {
    static const char * const names[] = {"F32", "F16", "BF16", "F64", "I64", "I32", "I16", "I8", "U8", "BOOL", "other"};
    return (unsigned) t < sizeof(names) / sizeof(names[0]) ? names[t] : "other";
}

/* ---- expansion ------------------------------------------------------------------- */

struct nf__wx {
    const struct nf_wtable * t;
    const void * cfg;
    struct nf_wkey * keys;
    int n, cap;
    int idx[NF_W_MAX_DEPTH];
    int pack_base; /* pack ids of the current iteration start here */
    int pack_next; /* first id of the next iteration's range */
    nf_err * err;
};

static int nf__wdim(struct nf__wx * x, const char * expr, int depth, int64_t * out, const char * what) {
    const char * s = expr;
    int64_t f = 0;
    int digits = 0;
    while (*s >= '0' && *s <= '9') {
        f = f * 10 + (*s++ - '0');
        digits = 1;
    }
    if (!digits) f = 1;
    int64_t v = f;
    for (; *s >= 'A' && *s <= 'Z'; s++) { /* a product of symbols: "4D", "HW" */
        const int64_t d = x->t->dim(x->cfg, *s, x->idx, depth);
        if (d < 0)
            return nf__err_set(x->err, NF_ERR_GENERIC, "internal: %s table, %s: unknown symbol '%c'", x->t->model, what,
                               *s);
        v *= d;
    }
    if (*s) return nf__err_set(x->err, NF_ERR_GENERIC, "internal: %s table, %s: bad dim '%s'", x->t->model, what, expr);
    *out = v;
    return NF_OK;
}

static void nf__wformat(char * out, size_t n, const char * pat, const int * idx, int depth) {
    /* one %d per enclosing repeat, outermost first (at most NF_W_MAX_DEPTH) */
    int a[NF_W_MAX_DEPTH] = {0};
    for (int i = 0; i < depth; i++) a[i] = idx[i];
    snprintf(out, n, pat, a[0], a[1], a[2], a[3]);
}

/* Expand entries [*pos, END) at depth, with the slot base `base`. */
static int nf__wexpand(struct nf__wx * x, int * pos, int depth, char * base) {
    const struct nf_wtable * t = x->t;
    while (*pos < t->n_entries) {
        const struct nf_wentry * e = &t->entries[*pos];
        if (e->kind == NF_WE_END) {
            (*pos)++;
            return NF_OK;
        }
        if (e->kind == NF_WE_REPEAT) {
            if (depth >= NF_W_MAX_DEPTH)
                return nf__err_set(x->err, NF_ERR_GENERIC, "internal: %s table: repeats nest too deep", t->model);
            const int64_t count = t->dim(x->cfg, e->when, x->idx, depth);
            if (count < 0)
                return nf__err_set(x->err, NF_ERR_GENERIC, "internal: %s table: unknown repeat '%c'", t->model,
                                   e->when);
            char * arr = base ? *(char **) (base + e->slot - 1) : NULL;
            const int body = *pos + 1;
            int end = body;
            if (count == 0) {
                /* skip the body: find the matching END */
                int lvl = 1;
                for (end = body; end < t->n_entries && lvl > 0; end++) {
                    lvl += t->entries[end].kind == NF_WE_REPEAT ? 1 : t->entries[end].kind == NF_WE_END ? -1 : 0;
                }
            }
            const int saved = x->pack_base;
            for (int64_t i = 0; i < count; i++) {
                x->idx[depth] = (int) i;
                x->pack_base = x->pack_next; /* a fresh range of pack ids per iteration */
                x->pack_next += NF_W_MAX_PACK;
                end = body;
                NF_TRY(nf__wexpand(x, &end, depth + 1, arr ? arr + (size_t) i * e->stride : NULL));
            }
            x->pack_base = saved;
            *pos = end;
            continue;
        }
        (*pos)++;
        if (e->when && t->dim(x->cfg, e->when, x->idx, depth) == 0) continue;
        if (x->n == x->cap) {
            int cap = x->cap ? 2 * x->cap : 256;
            struct nf_wkey * k = realloc(x->keys, (size_t) cap * sizeof(*k));
            if (!k) return nf__err_set(x->err, NF_ERR_NOMEM, "out of memory");
            x->keys = k;
            x->cap = cap;
        }
        struct nf_wkey * k = &x->keys[x->n++];
        memset(k, 0, sizeof(*k));
        nf__wformat(k->name, sizeof(k->name), e->name, x->idx, depth);
        if (e->alias) nf__wformat(k->alias, sizeof(k->alias), e->alias, x->idx, depth);
        k->dtype = e->dtype;
        k->flags = e->flags;
        k->init = e->init;
        if (e->pack) {
            if (e->pack < 0 || e->pack >= NF_W_MAX_PACK)
                return nf__err_set(x->err, NF_ERR_GENERIC, "internal: %s table: bad pack id", t->model);
            k->pack = x->pack_base + e->pack;
        }
        /* the shape: space-separated dims */
        const char * s = e->shape ? e->shape : "";
        while (*s) {
            while (*s == ' ') s++;
            if (!*s) break;
            char tok[16];
            size_t L = strcspn(s, " ");
            if (L >= sizeof(tok) || k->ndim == NF_MAX_DIMS) {
                return nf__err_set(x->err, NF_ERR_GENERIC, "internal: %s table: bad shape '%s' of %s", t->model,
                                   e->shape, k->name);
            }
            memcpy(tok, s, L);
            tok[L] = '\0';
            NF_TRY(nf__wdim(x, tok, depth, &k->shape[k->ndim++], k->name));
            s += L;
        }
        if (e->fan_in) NF_TRY(nf__wdim(x, e->fan_in, depth, &k->fan_in, k->name));
        k->slot = base && e->slot ? (nf_tensor *) (base + e->slot - 1) : NULL;
    }
    if (depth > 0)
        return nf__err_set(x->err, NF_ERR_GENERIC, "internal: %s table: NF_WREPEAT without NF_WEND", t->model);
    return NF_OK;
}

int nf__wtable_expand(const struct nf_wtable * t, const void * cfg, void * model, struct nf_wkey ** out, int * n,
                      nf_err * err) {
    struct nf__wx x = {.t = t, .cfg = cfg, .pack_next = NF_W_MAX_PACK, .err = err};
    int pos = 0;
    int rc = nf__wexpand(&x, &pos, 0, model);
    if (rc != NF_OK) {
        free(x.keys);
        return rc;
    }
    *out = x.keys;
    *n = x.n;
    return NF_OK;
}

int64_t nf__wkey_numel(const struct nf_wkey * k) {
    int64_t n = 1;
    for (int d = 0; d < k->ndim; d++) n *= k->shape[d];
    return n;
}

int nf__wkey_loaded(const struct nf_wkey * k) { return k->dtype == NF_ST_F32 && !(k->flags & NF_W_IGNORED); }

int nf__wkey_written(const struct nf_wkey * k) {
    return (k->dtype == NF_ST_F32 || k->dtype == NF_ST_I64) && !(k->flags & NF_W_IGNORED);
}

/* ---- strict check ------------------------------------------------------------------ */

/* found[i]: the checkpoint tensor of key i, or -1 */
static int nf__weights_check(const struct nf_safetensors * st, const struct nf_wkey * keys, int n_keys, int * found,
                             const char * path, nf_err * err) {
    struct nf_namemap map;
    NF_TRY(nf__namemap_init(&map, (size_t) st->n_tensors, err));
    for (int j = 0; j < st->n_tensors; j++)
        nf__namemap_put(&map, st->tensors[j].name, j); /* names are unique (reader) */
    char * claimed = calloc((size_t) (st->n_tensors ? st->n_tensors : 1), 1);
    if (!claimed) {
        nf__namemap_free(&map);
        return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    }
    char msg[3500];
    size_t len = 0;
    int bad = 0;
    msg[0] = '\0';
    for (int i = 0; i < n_keys; i++) {
        const struct nf_wkey * k = &keys[i];
        int j = nf__namemap_get(&map, k->name);
        if (j < 0 && k->alias[0]) j = nf__namemap_get(&map, k->alias);
        found[i] = j;
        if (j >= 0) claimed[j] = 1;
        if (k->flags & NF_W_IGNORED) {
            found[i] = -1;
            continue;
        }
        if (j < 0) {
            if (!(k->flags & NF_W_OPTIONAL))
                nf__msg_append(msg, sizeof(msg), &len, "%smissing '%s'", bad++ ? "; " : "", k->name);
            continue;
        }
        const struct nf_st_tensor * t = &st->tensors[j];
        if (t->dtype != k->dtype) {
            nf__msg_append(msg, sizeof(msg), &len, "%s'%s' has dtype %s (expected %s)", bad++ ? "; " : "", t->name,
                           t->dtype_str, nf__st_dtype_name(k->dtype));
            continue;
        }
        int same = t->ndim == k->ndim;
        for (int d = 0; same && d < t->ndim; d++) same = t->shape[d] == k->shape[d];
        if (!same) {
            char got[96], want[96];
            nf__shape_str(got, sizeof(got), t->ndim, t->shape);
            nf__shape_str(want, sizeof(want), k->ndim, k->shape);
            nf__msg_append(msg, sizeof(msg), &len, "%s'%s' has shape %s (expected %s)", bad++ ? "; " : "", t->name, got,
                           want);
        }
    }
    for (int j = 0; j < st->n_tensors; j++) {
        char e[512]; /* a name from the file: control characters escaped */
        if (!claimed[j])
            nf__msg_append(msg, sizeof(msg), &len, "%sunexpected '%s'", bad++ ? "; " : "",
                           nf__esc(e, sizeof(e), st->tensors[j].name));
    }
    free(claimed);
    nf__namemap_free(&map);
    if (bad) return nf__err_set(err, NF_ERR_CHECKPOINT, "%s: %d tensor(s) do not match the model: %s", path, bad, msg);
    return NF_OK;
}

/* ---- packing ------------------------------------------------------------------------- */

/* Element offsets in the device buffer: 64-float aligned slots in key order;
 * the members of a pack group share the slot of its first member, back to
 * back in key order. offs[i] = -1 for keys not loaded. */
static int64_t nf__weights_pack(const struct nf_wkey * keys, int n, const int * found, int64_t * offs) {
    int64_t at = 0;
    for (int i = 0; i < n; i++) offs[i] = -1;
    for (int i = 0; i < n; i++) {
        if (offs[i] >= 0 || found[i] < 0 || !nf__wkey_loaded(&keys[i])) continue;
        int64_t len = 0;
        if (keys[i].pack) {
            for (int j = i; j < n; j++) {
                if (keys[j].pack != keys[i].pack || found[j] < 0 || !nf__wkey_loaded(&keys[j])) continue;
                offs[j] = at + len;
                len += nf__wkey_numel(&keys[j]);
            }
        } else {
            offs[i] = at;
            len = nf__wkey_numel(&keys[i]);
        }
        at += (len + 63) & ~(int64_t) 63;
    }
    return at;
}

void nf__weights_free(struct nf_weights * w) {
    if (!w) return;
    nf__tensor_free(&w->buf);
    free(w->keys);
    memset(w, 0, sizeof(*w));
}

int64_t nf__weights_key_offset(const struct nf_weights * w, int i) {
    if (i < 0 || i >= w->n_keys || !w->keys[i].slot || !w->keys[i].slot->buf) return -1;
    return (int64_t) ((w->keys[i].slot->offs - w->buf.offs) / sizeof(float));
}

int nf__weights_save(const struct nf_weights * w, const float * host, const char * path, nf_err * err) {
    struct nf_st_entry * e = calloc((size_t) (w->n_keys > 0 ? w->n_keys : 1), sizeof(*e));
    if (!e) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    int n = 0;
    for (int i = 0; i < w->n_keys; i++) {
        const int64_t off = nf__weights_key_offset(w, i);
        if (off < 0) continue;
        e[n].name = w->keys[i].name;
        e[n].ndim = w->keys[i].ndim;
        memcpy(e[n].shape, w->keys[i].shape, sizeof(int64_t) * (size_t) w->keys[i].ndim);
        e[n].data = host + off;
        e[n].dtype = NF_ST_F32;
        n++;
    }
    int rc = nf__st_write(path, e, n, err);
    free(e);
    return rc;
}

int nf__weights_where(const struct nf_weights * w, char * out, size_t n, nf_err * err) {
    if (!w->buf.buf) return nf__err_set(err, NF_ERR_ARG, "the model holds no weights");
    nf_backend * be = w->buf.buf->be;
    return be->iface->buffer_where(be, w->buf.buf->handle, out, n, err);
}

int nf__weights_load(nf_backend * be, const char * path, const struct nf_wtable * t, const void * cfg, void * model,
                     struct nf_weights * w, nf_err * err) {
    memset(w, 0, sizeof(*w));
    NF_TRY(nf__wtable_expand(t, cfg, model, &w->keys, &w->n_keys, err));
    struct nf_safetensors st;
    int rc = nf__tensors_open(path, &st, err); /* safetensors, or a torch.save .ckpt */
    if (rc != NF_OK) {
        nf__weights_free(w);
        return rc;
    }
    const int n = w->n_keys;
    int * found = malloc((size_t) (n ? n : 1) * sizeof(int));
    int64_t * offs = malloc((size_t) (n ? n : 1) * sizeof(int64_t));
    float * host = NULL;
    if (!found || !offs) {
        rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
        goto done;
    }
    if ((rc = nf__weights_check(&st, w->keys, n, found, path, err)) != NF_OK) goto done;

    /* pack every tensor into one host staging area, check it is finite,
     * then upload it to the device in one copy */
    for (int i = 0; i < n; i++) {
        if (found[i] >= 0 && nf__wkey_loaded(&w->keys[i]) && !(w->keys[i].flags & NF_W_BUFFER))
            w->n_params += nf__wkey_numel(&w->keys[i]);
    }
    const int64_t total = nf__weights_pack(w->keys, n, found, offs);
    host = calloc((size_t) (total ? total : 1), sizeof(float));
    if (!host) {
        rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory (%lld weights)", (long long) total);
        goto done;
    }
    for (int i = 0; i < n && rc == NF_OK; i++) {
        if (offs[i] < 0) continue;
        const struct nf_st_tensor * s = &st.tensors[found[i]];
        size_t nb = (size_t) (s->end - s->begin);
        memcpy(host + offs[i], nf__st_data(&st, s), nb);
        for (size_t e = 0; e < nb / sizeof(float); e++) {
            if (!isfinite(host[offs[i] + (int64_t) e])) {
                rc = nf__err_set(err, NF_ERR_CHECKPOINT, "%s: tensor '%s' has a non-finite value at element %zu", path,
                                 w->keys[i].name, e);
                break;
            }
        }
    }
    if (rc != NF_OK) goto done;
    int64_t ne[1] = {total > 0 ? total : 1};
    if ((rc = nf__tensor_alloc(be, &w->buf, NF_F32, 1, ne, "weights", err)) != NF_OK) goto done;
    if ((rc = nf__tensor_upload(&w->buf, host, err)) != NF_OK) goto done;
    /* bind: a view per loaded key, into the model's slot */
    for (int i = 0; i < n; i++) {
        if (offs[i] < 0 || !w->keys[i].slot) continue;
        *w->keys[i].slot = nf__tensor_view(&w->buf, offs[i], w->keys[i].ndim, w->keys[i].shape);
        w->keys[i].slot->name = w->keys[i].name;
    }
done:
    free(host);
    free(offs);
    free(found);
    nf__st_close(&st);
    if (rc != NF_OK) nf__weights_free(w);
    return rc;
}

/* ---- synthetic checkpoints ------------------------------------------------------------ */

/* approximately N(0, 1): Irwin-Hall sum of 12 uniforms minus 6 */
static float nf__normal(uint64_t * s) {
    float acc = 0.0f;
    for (int i = 0; i < 12; i++) acc += nf__rng_unif(s);
    return acc - 6.0f;
}

/* Only integer arithmetic, IEEE sqrt and exact float ops: the same seed gives
 * the same bytes on every machine. Key i's stream depends on (seed, i) only,
 * i counting the written keys. */
int nf__weights_generate(const char * path, const struct nf_wtable * t, const void * cfg, uint64_t seed,
                         const char * perturb_key, float perturb_delta, nf_err * err) {
    return nf__weights_generate_ckpt(path, NULL, t, cfg, seed, perturb_key, perturb_delta, err);
}

int nf__weights_generate_ckpt(const char * path, const char * ckpt_path, const struct nf_wtable * t, const void * cfg,
                              uint64_t seed, const char * perturb_key, float perturb_delta, nf_err * err) {
    struct nf_wkey * keys = NULL;
    int n = 0;
    NF_TRY(nf__wtable_expand(t, cfg, NULL, &keys, &n, err));
    struct nf_st_entry * ents = calloc((size_t) (n ? n : 1), sizeof(*ents));
    void ** data = calloc((size_t) (n ? n : 1), sizeof(*data));
    int rc = NF_OK, n_ents = 0;
    if (!ents || !data) {
        rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int i = 0; i < n && rc == NF_OK; i++) {
        const struct nf_wkey * k = &keys[i];
        if (!nf__wkey_written(k)) continue;
        const int64_t numel = nf__wkey_numel(k);
        const int i64 = k->dtype == NF_ST_I64;
        void * buf = malloc((size_t) (numel ? numel : 1) * (i64 ? sizeof(int64_t) : sizeof(float)));
        if (!buf) {
            rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory for %s", k->name);
            break;
        }
        data[n_ents] = buf;
        uint64_t s = seed * 0x100000001B3ull + (uint64_t) n_ents * 0x9E3779B97F4A7C15ull + 1;
        if (i64) {
            int64_t * d = buf;
            for (int64_t e = 0; e < numel; e++) d[e] = 1000 + (int64_t) (nf__rng_next(&s) >> 44);
        } else {
            float * d = buf;
            const float bound = k->fan_in > 0 ? 1.0f / sqrtf((float) k->fan_in) : 0.0f;
            for (int64_t e = 0; e < numel; e++) {
                float v;
                if (k->init == NF_INIT_NORMAL)
                    v = nf__normal(&s);
                else if (k->init == NF_INIT_NORM_WEIGHT)
                    v = 1.0f + 0.1f * (2.0f * nf__rng_unif(&s) - 1.0f);
                else if (k->init == NF_INIT_NORM_BIAS)
                    v = 0.1f * (2.0f * nf__rng_unif(&s) - 1.0f);
                else if (k->init == NF_INIT_VARIANCE)
                    v = 0.5f + nf__rng_unif(&s);
                else
                    v = bound * (2.0f * nf__rng_unif(&s) - 1.0f);
                d[e] = v;
            }
            if (perturb_key && strcmp(perturb_key, k->name) == 0) {
                for (int64_t e = 0; e < numel; e++) d[e] += perturb_delta;
                perturb_key = NULL; /* found */
            }
        }
        struct nf_st_entry * en = &ents[n_ents++];
        en->name = k->name;
        en->ndim = k->ndim;
        for (int dd = 0; dd < k->ndim; dd++) en->shape[dd] = k->shape[dd];
        en->dtype = i64 ? NF_ST_I64 : NF_ST_F32;
        en->data = buf;
    }
    if (rc == NF_OK && perturb_key)
        rc = nf__err_set(err, NF_ERR_ARG, "--perturb: no tensor named '%s' in this config", perturb_key);
    if (rc == NF_OK) rc = nf__st_write(path, ents, n_ents, err);
    /* the same tensors as torch.save({"state_dict": OrderedDict}) writes them, in the table's order */
    if (rc == NF_OK && ckpt_path) rc = nf__ckpt_write(ckpt_path, ents, n_ents, "state_dict", err);
done:
    if (data)
        for (int i = 0; i < n_ents; i++) free(data[i]);
    free(data);
    free(ents);
    free(keys);
    return rc;
}
