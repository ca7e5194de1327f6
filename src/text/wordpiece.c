/* wordpiece.c -- TabSTAR's BERT WordPiece tokenizer: vocab.txt loading and
 * encoding exactly as Hugging Face's BertTokenizerFast (nf-text.h). Unicode
 * categories, NFD and case mapping come from utf8proc. */
#include "nf-text.h"

#include "io/nf-io.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

static const char * const nf__wp_special_names[NF_WP_N_SPECIAL] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};

struct nf__wordpiece {
    char * buf;        /* the file image; each line NUL-terminated in place */
    const char ** tok; /* id -> token (into buf) */
    size_t * tok_len;
    int n;
    struct nf__smap map; /* token -> id */
    int special[NF_WP_N_SPECIAL];
};

/* ---- UTF-8 ----------------------------------------------------------------- */
int32_t nf__utf8_next(const unsigned char * s, size_t n, size_t * i) {
    size_t p = *i;
    const unsigned char c = s[p];
    if (c < 0x80) {
        *i = p + 1;
        return c;
    }
    size_t k;
    int32_t cp, min;
    if ((c & 0xe0) == 0xc0) {
        k = 2, cp = c & 0x1f, min = 0x80;
    } else if ((c & 0xf0) == 0xe0) {
        k = 3, cp = c & 0x0f, min = 0x800;
    } else if ((c & 0xf8) == 0xf0) {
        k = 4, cp = c & 0x07, min = 0x10000;
    } else
        return -1;
    if (k > n - p) return -1;
    for (size_t j = 1; j < k; j++) {
        if ((s[p + j] & 0xc0) != 0x80) return -1;
        cp = (cp << 6) | (s[p + j] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return -1;
    *i = p + k;
    return cp;
}

static size_t nf__utf8_put(char * o, int32_t cp) {
    if (cp < 0x80) {
        o[0] = (char) cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char) (0xc0 | (cp >> 6));
        o[1] = (char) (0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char) (0xe0 | (cp >> 12));
        o[1] = (char) (0x80 | ((cp >> 6) & 0x3f));
        o[2] = (char) (0x80 | (cp & 0x3f));
        return 3;
    }
    o[0] = (char) (0xf0 | (cp >> 18));
    o[1] = (char) (0x80 | ((cp >> 12) & 0x3f));
    o[2] = (char) (0x80 | ((cp >> 6) & 0x3f));
    o[3] = (char) (0x80 | (cp & 0x3f));
    return 4;
}

/* the first invalid sequence's offset, or len when all of s is valid */
static size_t nf__utf8_check(const char * s, size_t len) {
    const unsigned char * u = (const unsigned char *) s;
    for (size_t i = 0; i < len;) {
        if (u[i] < 0x80) {
            i++;
            continue;
        }
        if (nf__utf8_next(u, len, &i) < 0) return i;
    }
    return len;
}

static int nf__utf8_error(const char * ctx, size_t off, size_t * bad_offset, nf_err * err) {
    if (bad_offset) *bad_offset = off;
    return nf__err_set(err, NF_ERR_INPUT, "%s: invalid UTF-8 at byte %zu", ctx ? ctx : "text", off);
}

/* ---- the character classes of BERT's normalizer and pre-tokenizer ------------ */
#include "hf-unicode-compat.h"

/* the general category as Hugging Face's tokenizer sees it: utf8proc's, except
 * the code points where HF's older tables differ (hf-unicode-compat.h); *frozen
 * = 1 for those it treats as unassigned (no decomposition, combining class 0) */
static utf8proc_category_t nf__hf_cat(int32_t c, int * frozen) {
    size_t lo = 0, hi = sizeof(nf__hf_compat) / sizeof(nf__hf_compat[0]);
    while (lo < hi) {
        const size_t m = lo + (hi - lo) / 2;
        if (c < nf__hf_compat[m].lo)
            hi = m;
        else if (c > nf__hf_compat[m].hi)
            lo = m + 1;
        else {
            if (frozen) *frozen = nf__hf_compat[m].cat == UTF8PROC_CATEGORY_CN;
            return nf__hf_compat[m].cat;
        }
    }
    if (frozen) *frozen = 0;
    return utf8proc_category(c);
}

/* Rust's char::is_whitespace (the White_Space property) */
static int nf__is_ws(int32_t c) {
    if ((c >= 0x09 && c <= 0x0d) || c == 0x20 || c == 0x85) return 1;
    if (c < 0x80) return 0;
    const utf8proc_category_t k = utf8proc_category(c);
    return k == UTF8PROC_CATEGORY_ZS || k == UTF8PROC_CATEGORY_ZL || k == UTF8PROC_CATEGORY_ZP;
}

/* dropped by clean_text: NUL, U+FFFD, Cc / Cf / Co except \t \n \r */
static int nf__is_dropped(int32_t c) {
    if (c == '\t' || c == '\n' || c == '\r') return 0;
    if (c == 0 || c == 0xfffd) return 1;
    const utf8proc_category_t k = nf__hf_cat(c, NULL);
    return k == UTF8PROC_CATEGORY_CC || k == UTF8PROC_CATEGORY_CF || k == UTF8PROC_CATEGORY_CO;
}

/* BERT's "Chinese character" blocks (tokenizers normalizers/bert.rs) */
static int nf__is_cjk(int32_t c) {
    return (c >= 0x4e00 && c <= 0x9fff) || (c >= 0x3400 && c <= 0x4dbf) || (c >= 0x20000 && c <= 0x2a6df) ||
           (c >= 0x2a700 && c <= 0x2b73f) || (c >= 0x2b740 && c <= 0x2b81f) || (c >= 0x2b920 && c <= 0x2ceaf) ||
           (c >= 0xf900 && c <= 0xfaff) || (c >= 0x2f800 && c <= 0x2fa1f);
}

static int nf__is_punct(int32_t c) {
    if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126)) return 1;
    if (c < 0x80) return 0;
    const utf8proc_category_t k = nf__hf_cat(c, NULL);
    return k >= UTF8PROC_CATEGORY_PC && k <= UTF8PROC_CATEGORY_PO;
}

/* ---- code point buffers ------------------------------------------------------ */
struct nf__cps {
    int32_t * v;
    size_t n, cap;
};

static int nf__cps_push(struct nf__cps * b, int32_t c) {
    if (b->n == b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 64;
        int32_t * v = realloc(b->v, cap * sizeof(*v));
        if (!v) return -1;
        b->v = v;
        b->cap = cap;
    }
    b->v[b->n++] = c;
    return 0;
}

/* BERT's normalizer on valid UTF-8 s[0, len): clean, CJK spacing, NFD, drop
 * Mn, lower-case; into out (reset first). */
static int nf__normalize(const char * s, size_t len, struct nf__cps * out, struct nf__cps * tmp, nf_err * err) {
    const unsigned char * u = (const unsigned char *) s;
    out->n = tmp->n = 0;
    /* clean + CJK spacing, into tmp */
    for (size_t i = 0; i < len;) {
        const int32_t c = nf__utf8_next(u, len, &i);
        if (c < 0) return nf__err_set(err, NF_ERR_INPUT, "invalid UTF-8"); /* checked by the callers */
        if (nf__is_dropped(c)) continue;
        if (nf__is_ws(c)) {
            if (nf__cps_push(tmp, ' ')) goto oom;
        } else if (nf__is_cjk(c)) {
            if (nf__cps_push(tmp, ' ') || nf__cps_push(tmp, c) || nf__cps_push(tmp, ' ')) goto oom;
        } else if (nf__cps_push(tmp, c))
            goto oom;
    }
    /* NFD: full canonical decomposition, then the canonical ordering of
     * each run of non-starters (a stable sort by combining class) */
    for (size_t i = 0; i < tmp->n; i++) {
        utf8proc_int32_t d[32];
        int lbc = 0, frozen = 0;
        utf8proc_ssize_t k = 1;
        d[0] = tmp->v[i];
        if (d[0] >= 0x80) (void) nf__hf_cat(d[0], &frozen);
        if (d[0] >= 0x80 && !frozen) k = utf8proc_decompose_char(tmp->v[i], d, 32, UTF8PROC_DECOMPOSE, &lbc);
        if (k < 0 || k > 32) return nf__err_set(err, NF_ERR_GENERIC, "NFD of U+%04X failed", (unsigned) tmp->v[i]);
        for (utf8proc_ssize_t j = 0; j < k; j++) {
            const int32_t c = d[j];
            const int cc = c < 0x80 || frozen ? 0 : utf8proc_get_property(c)->combining_class;
            if (nf__cps_push(out, c)) goto oom;
            /* insertion: move c before the preceding non-starters of higher class */
            if (cc) {
                size_t p = out->n - 1;
                while (p > 0) {
                    const int32_t q = out->v[p - 1];
                    int qf = 0;
                    if (q >= 0x80) (void) nf__hf_cat(q, &qf);
                    const int pc = q < 0x80 || qf ? 0 : utf8proc_get_property(q)->combining_class;
                    if (pc <= cc) break;
                    out->v[p] = out->v[p - 1];
                    p--;
                }
                out->v[p] = c;
            }
        }
    }
    /* drop Mn, lower-case (Rust's char::to_lowercase: the simple mapping
     * except U+0130, which NFD has already decomposed) */
    size_t w = 0;
    for (size_t i = 0; i < out->n; i++) {
        const int32_t c = out->v[i];
        if (c >= 0x80 && nf__hf_cat(c, NULL) == UTF8PROC_CATEGORY_MN) continue;
        out->v[w++] = utf8proc_tolower(c);
    }
    out->n = w;
    return NF_OK;
oom:
    return nf__err_set(err, NF_ERR_NOMEM, "tokenizer: out of memory");
}

/* ---- words ------------------------------------------------------------------ */
struct nf__words {
    char * s; /* words, each followed by ' ' */
    size_t n, cap;
};

static int nf__words_reserve(struct nf__words * w, size_t more) {
    if (w->n + more + 1 <= w->cap) return 0;
    size_t cap = w->cap ? w->cap : 256;
    while (cap < w->n + more + 1) cap *= 2;
    char * s = realloc(w->s, cap);
    if (!s) return -1;
    w->s = s;
    w->cap = cap;
    return 0;
}

/* the pre-tokenizer: whitespace splits (removed), punctuation isolated */
static int nf__split_words(const struct nf__cps * c, struct nf__words * w, nf_err * err) {
    if (nf__words_reserve(w, 5 * c->n + 1)) return nf__err_set(err, NF_ERR_NOMEM, "tokenizer: out of memory");
    int open = 0; /* inside a word */
    for (size_t i = 0; i < c->n; i++) {
        const int32_t x = c->v[i];
        if (nf__is_ws(x)) {
            if (open) w->s[w->n++] = ' ';
            open = 0;
        } else if (nf__is_punct(x)) {
            if (open) w->s[w->n++] = ' ';
            w->n += nf__utf8_put(w->s + w->n, x);
            w->s[w->n++] = ' ';
            open = 0;
        } else {
            w->n += nf__utf8_put(w->s + w->n, x);
            open = 1;
        }
    }
    if (open) w->s[w->n++] = ' ';
    w->s[w->n] = '\0';
    return NF_OK;
}

int nf__wp_basic_tokenize(const char * text, size_t len, char ** out, size_t * out_len, const char * ctx,
                          size_t * bad_offset, nf_err * err) {
    *out = NULL;
    *out_len = 0;
    const size_t bad = nf__utf8_check(text, len);
    if (bad < len) return nf__utf8_error(ctx, bad, bad_offset, err);
    struct nf__cps a = {0}, b = {0};
    struct nf__words w = {0};
    int rc = nf__normalize(text, len, &a, &b, err);
    if (rc == NF_OK) rc = nf__split_words(&a, &w, err);
    free(a.v);
    free(b.v);
    if (rc != NF_OK) {
        free(w.s);
        return rc;
    }
    if (!w.s && !(w.s = calloc(1, 1))) return nf__err_set(err, NF_ERR_NOMEM, "tokenizer: out of memory");
    *out = w.s;
    *out_len = w.n;
    return NF_OK;
}

/* ---- vocabulary ---------------------------------------------------------------- */
void nf__wp_free(struct nf__wordpiece * wp) {
    if (!wp) return;
    nf__smap_free(&wp->map);
    free(wp->tok);
    free(wp->tok_len);
    free(wp->buf);
    free(wp);
}

int nf__wp_vocab_size(const struct nf__wordpiece * wp) { return wp->n; }

int nf__wp_token_id(const struct nf__wordpiece * wp, const char * s) { return nf__smap_get(&wp->map, s, strlen(s)); }

const char * nf__wp_token(const struct nf__wordpiece * wp, int id) {
    return id >= 0 && id < wp->n ? wp->tok[id] : NULL;
}

int nf__wp_special_id(const struct nf__wordpiece * wp, enum nf_wp_special s) {
    return (int) s >= 0 && s < NF_WP_N_SPECIAL ? wp->special[s] : -1;
}

int nf__wp_load_mem(const char * data, size_t len, const char * name, struct nf__wordpiece ** out, nf_err * err) {
    *out = NULL;
    char nb[512];
    nf__esc(nb, sizeof(nb), name ? name : "vocab");
    if (len == 0) return nf__err_set(err, NF_ERR_FORMAT, "%s: empty vocabulary file", nb);
    if (len > NF_WP_MAX_VOCAB_BYTES)
        return nf__err_set(err, NF_ERR_FORMAT, "%s: vocabulary file of %zu bytes (at most %u)", nb, len,
                           NF_WP_MAX_VOCAB_BYTES);
    struct nf__wordpiece * wp = calloc(1, sizeof(*wp));
    if (!wp || !(wp->buf = malloc(len + 1))) {
        free(wp);
        return nf__err_set(err, NF_ERR_NOMEM, "%s: out of memory", nb);
    }
    memcpy(wp->buf, data, len);
    wp->buf[len] = '\0';
    size_t lines = 0;
    for (size_t i = 0; i < len; i++) lines += wp->buf[i] == '\n';
    if (wp->buf[len - 1] != '\n') lines++;
    int rc = NF_OK;
    if (lines > (size_t) INT32_MAX) {
        rc = nf__err_set(err, NF_ERR_FORMAT, "%s: %zu lines (at most %d tokens)", nb, lines, INT32_MAX);
        goto fail;
    }
    wp->tok = malloc(lines * sizeof(*wp->tok));
    wp->tok_len = malloc(lines * sizeof(*wp->tok_len));
    if (!wp->tok || !wp->tok_len) goto oom;
    size_t p = 0;
    while (p < len) {
        const int line = wp->n + 1; /* 1-based, for messages */
        char * s = wp->buf + p;
        char * nl = memchr(s, '\n', len - p);
        const size_t n = nl ? (size_t) (nl - s) : len - p;
        if (n == 0) {
            rc = nf__err_set(err, NF_ERR_FORMAT, "%s: line %d: empty token", nb, line);
            goto fail;
        }
        if (memchr(s, '\r', n)) {
            rc = nf__err_set(err, NF_ERR_FORMAT, "%s: line %d: carriage return in a token (CRLF line ends?)", nb, line);
            goto fail;
        }
        if (memchr(s, '\0', n)) {
            rc = nf__err_set(err, NF_ERR_FORMAT, "%s: line %d: NUL byte in a token", nb, line);
            goto fail;
        }
        const size_t bad = nf__utf8_check(s, n);
        if (bad < n) {
            rc = nf__err_set(err, NF_ERR_FORMAT, "%s: line %d: invalid UTF-8 at byte %zu of the line", nb, line,
                             bad + 1);
            goto fail;
        }
        s[n] = '\0';
        const int put = nf__smap_put(&wp->map, s, n, wp->n);
        if (put < 0) goto oom;
        if (put > 0) {
            char tb[256];
            rc = nf__err_set(err, NF_ERR_FORMAT, "%s: line %d: token \"%s\" already on line %d", nb, line,
                             nf__esc(tb, sizeof(tb), s), nf__smap_get(&wp->map, s, n) + 1);
            goto fail;
        }
        wp->tok[wp->n] = s;
        wp->tok_len[wp->n] = n;
        wp->n++;
        p += n + 1;
    }
    for (int k = 0; k < NF_WP_N_SPECIAL; k++) {
        wp->special[k] = nf__smap_get(&wp->map, nf__wp_special_names[k], strlen(nf__wp_special_names[k]));
        if (wp->special[k] < 0) {
            rc = nf__err_set(err, NF_ERR_FORMAT, "%s: no %s token (%d lines)", nb, nf__wp_special_names[k], wp->n);
            goto fail;
        }
    }
    *out = wp;
    return NF_OK;
oom:
    rc = nf__err_set(err, NF_ERR_NOMEM, "%s: out of memory", nb);
fail:
    nf__wp_free(wp);
    return rc;
}

int nf__wp_load(const char * path, struct nf__wordpiece ** out, nf_err * err) {
    *out = NULL;
    char * data = NULL;
    size_t len = 0;
    NF_TRY(nf__file_read_all(path, &data, &len, NF_WP_MAX_VOCAB_BYTES, err));
    const int rc = nf__wp_load_mem(data, len, path, out, err);
    free(data);
    return rc;
}

/* ---- encoding ------------------------------------------------------------------ */
struct nf__ids {
    int32_t * v;
    int n, cap; /* cap = max_len - 2 pieces */
};

/* greedy longest-match-first WordPiece of one word w[0, n) (valid UTF-8) */
static int nf__wordpiece_word(const struct nf__wordpiece * wp, const char * w, size_t n, struct nf__ids * ids,
                              char * key, nf_err * err) {
    size_t chars = 0;
    for (size_t i = 0; i < n; i++) chars += ((unsigned char) w[i] & 0xc0) != 0x80;
    const int unk = wp->special[NF_WP_UNK];
    if (chars > NF_WP_MAX_WORD_CHARS) {
        if (ids->n < ids->cap) ids->v[ids->n++] = unk;
        return NF_OK;
    }
    const int first = ids->n;
    size_t start = 0;
    while (start < n) {
        size_t end = n;
        int id = -1;
        while (start < end) {
            size_t kl = 0;
            if (start > 0) key[kl++] = '#', key[kl++] = '#';
            memcpy(key + kl, w + start, end - start);
            kl += end - start;
            id = nf__smap_get(&wp->map, key, kl);
            if (id >= 0) break;
            do end--; /* back one code point */
            while (end > start && ((unsigned char) w[end] & 0xc0) == 0x80);
        }
        if (id < 0) {
            ids->n = first; /* the whole word is [UNK] */
            if (ids->n < ids->cap) ids->v[ids->n++] = unk;
            return NF_OK;
        }
        if (ids->n < ids->cap) ids->v[ids->n++] = id;
        start = end;
    }
    (void) err;
    return NF_OK;
}

/* the pieces of one segment without special tokens */
static int nf__encode_segment(const struct nf__wordpiece * wp, const char * s, size_t len, struct nf__ids * ids,
                              struct nf__cps * a, struct nf__cps * b, struct nf__words * w, char ** key,
                              size_t * key_cap, nf_err * err) {
    NF_TRY(nf__normalize(s, len, a, b, err));
    w->n = 0;
    NF_TRY(nf__split_words(a, w, err));
    if (*key_cap < w->n + 3) {
        char * k = realloc(*key, w->n + 3);
        if (!k) return nf__err_set(err, NF_ERR_NOMEM, "tokenizer: out of memory");
        *key = k;
        *key_cap = w->n + 3;
    }
    for (size_t p = 0; p < w->n && ids->n < ids->cap;) {
        const char * sp = memchr(w->s + p, ' ', w->n - p);
        const size_t n = (size_t) (sp - (w->s + p));
        NF_TRY(nf__wordpiece_word(wp, w->s + p, n, ids, *key, err));
        p += n + 1;
    }
    return NF_OK;
}

/* the special token starting at s[0, n), or -1 */
static int nf__special_at(const char * s, size_t n, size_t * tl) {
    if (s[0] != '[') return -1;
    for (int k = 0; k < NF_WP_N_SPECIAL; k++) {
        const size_t l = strlen(nf__wp_special_names[k]);
        if (l <= n && memcmp(s, nf__wp_special_names[k], l) == 0) {
            *tl = l;
            return k;
        }
    }
    return -1;
}

int nf__wp_encode(const struct nf__wordpiece * wp, const char * text, size_t len, int max_len, int32_t * ids,
                  int * n_ids, const char * ctx, size_t * bad_offset, nf_err * err) {
    *n_ids = 0;
    if (max_len < 2)
        return nf__err_set(err, NF_ERR_ARG, "tokenizer: max_len %d (at least 2: [CLS] and [SEP])", max_len);
    const size_t bad = nf__utf8_check(text, len);
    if (bad < len) return nf__utf8_error(ctx, bad, bad_offset, err);
    struct nf__ids out = {ids + 1, 0, max_len - 2};
    struct nf__cps a = {0}, b = {0};
    struct nf__words w = {0};
    char * key = NULL;
    size_t key_cap = 0;
    int rc = NF_OK;
    size_t seg = 0; /* start of the current non-special segment */
    for (size_t i = 0; i <= len && out.n < out.cap;) {
        size_t tl = 0;
        const int k = i < len ? nf__special_at(text + i, len - i, &tl) : -1;
        if (i < len && k < 0) {
            i++;
            continue;
        }
        if (i > seg) {
            rc = nf__encode_segment(wp, text + seg, i - seg, &out, &a, &b, &w, &key, &key_cap, err);
            if (rc != NF_OK) break;
        }
        if (k < 0) break; /* the end */
        if (out.n < out.cap) out.v[out.n++] = wp->special[k];
        i += tl;
        seg = i;
    }
    free(a.v);
    free(b.v);
    free(w.s);
    free(key);
    if (rc != NF_OK) return rc;
    ids[0] = wp->special[NF_WP_CLS];
    ids[out.n + 1] = wp->special[NF_WP_SEP];
    *n_ids = out.n + 2;
    return NF_OK;
}
