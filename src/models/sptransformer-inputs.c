/* sptransformer-inputs.c -- SpTransformer's own inputs and run outputs
 * (nf_model_i.inputs, inputs_check, write_outputs, check_outputs).
 *
 * Seeded: "batch" (1) sequences of seeds seed, seed+1, ... ("seed", 42) of
 * input length "length" (8201, the variant-scoring window; flanks included)
 * or of "positions" scored (run's --length: length = positions + 2
 * context_len), the context_len positions at each end N. Given: the
 * "tokens" array a caller read (a sequence, a FASTA, a .npy; "source",
 * "context" pad|given|genome and "flank" describe it; genome: a FASTA
 * region flanked by the genome's own bases, read by nf_seq_fasta).
 *
 * A run writes tokens.npy (int8 (B, L), the exact ids the model read),
 * position_logits.npy (float32 (B, L - 2 context, 18)), class_ids.npy (int64
 * argmax over channels 0..2), probabilities.npy (softmax over 0..2, sigmoid
 * on 3..17, as upstream's driver), encoding_metadata.json. */
#include "sptransformer-impl.h"
#include "io/nf-io.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char * const nf__spt_splice_names[3] = {"no_splice", "acceptor", "donor"};

/* what a run reports of its tokens (nf_inputs.priv) */
struct nf__spt_src {
    char source[32];
    char mode[8]; /* pad, given or genome */
    int pad;
    int64_t flank, context;
};

#define NF_SEED_MAX ((int64_t) 9007199254740991) /* 2^53 - 1 */

int nf__spt_inputs_check(int n, const char * const * keys, const char * const * values, nf_err * err);
int nf__spt_inputs_check(int n, const char * const * keys, const char * const * values, nf_err * err) {
    const char * context = nf__inputs_opt(n, keys, values, "context");
    if (context && strcmp(context, "pad") != 0 && strcmp(context, "given") != 0 && strcmp(context, "genome") != 0)
        return nf__err_set(err, NF_ERR_ARG, "--context must be pad, given or genome");
    if (context && strcmp(context, "genome") == 0 &&
        !(nf__inputs_opt(n, keys, values, "fasta") && nf__inputs_opt(n, keys, values, "region")))
        return nf__err_set(err, NF_ERR_ARG,
                           "--context genome takes the flanks from the genome around a region: it goes with --fasta F "
                           "--region chr:start-end");
    const int n_src = (nf__inputs_opt(n, keys, values, "tokens") != NULL) +
                      (nf__inputs_opt(n, keys, values, "sequence") != NULL) +
                      (nf__inputs_opt(n, keys, values, "fasta") != NULL);
    if (n_src > 1) return nf__err_set(err, NF_ERR_ARG, "give one of --tokens, --sequence, --fasta");
    if (n_src == 1 && (nf__inputs_opt(n, keys, values, "positions") || nf__inputs_opt(n, keys, values, "seed")))
        return nf__err_set(err, NF_ERR_ARG,
                           "--seed/--length make a seeded input; they do not go with --tokens/--sequence/--fasta");
    if (nf__inputs_opt(n, keys, values, "region") && !nf__inputs_opt(n, keys, values, "fasta"))
        return nf__err_set(err, NF_ERR_ARG, "--region goes with --fasta");
    if (n_src == 0 && context && strcmp(context, "pad") != 0)
        return nf__err_set(err, NF_ERR_ARG, "a seeded input is always padded (--context pad)");
    return NF_OK;
}

/* tokens a caller made: checked against the model, copied */
static int nf__spt_given(nf_model * model, int n, const char * const * keys, const char * const * values,
                         const struct nf_array * t, int64_t context, struct nf__spt_src * src, struct nf_inputs * out,
                         nf_err * err) {
    if (strcmp(t->name, "tokens") != 0 || t->dtype != NF_ARRAY_I64 || t->ndim != 2)
        return nf__err_set(err, NF_ERR_ARG, "sptransformer takes one given array, tokens int64 (batch, length)");
    const char *source = nf__inputs_opt(n, keys, values, "source"), *ctx = nf__inputs_opt(n, keys, values, "context");
    snprintf(src->source, sizeof(src->source), "%s", source ? source : "given");
    src->pad = ctx && strcmp(ctx, "pad") == 0;
    snprintf(src->mode, sizeof(src->mode), "%s",
             ctx && strcmp(ctx, "genome") == 0 ? "genome"
             : src->pad                        ? "pad"
                                               : "given");
    NF_TRY(nf__inputs_int(n, keys, values, "flank", 0, 1 << 20, 0, &src->flank, err));
    const int64_t B = t->shape[0], L = t->shape[1];
    int ndim = 0;
    int64_t osh[NF_ARRAY_MAX_DIMS];
    if (nf_model_output_shape(model, t, 1, &ndim, osh, err) != NF_OK) {
        if (src->pad)
            nf__err_prefix(err, "%lld nt + %lld N on each side (--context pad)", (long long) (L - 2 * src->flank),
                           (long long) src->flank);
        else if (strcmp(src->mode, "genome") == 0)
            nf__err_prefix(err, "%lld nt of the region + %lld of the genome on each side (--context genome)",
                           (long long) (L - 2 * context), (long long) context);
        else
            nf__err_prefix(err,
                           "%lld nt taken as already flanked (--context given; --context pad adds %lld N on each "
                           "side)",
                           (long long) L, (long long) context);
        return err->code;
    }
    int64_t * tokens = malloc((size_t) (B * L > 0 ? B * L : 1) * sizeof(int64_t));
    if (!tokens) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    memcpy(tokens, t->data, (size_t) (B * L) * sizeof(int64_t));
    nf__inputs_array(out, "tokens", NF_ARRAY_I64, 2, t->shape, tokens, 1);
    nf__inputs_item_str(out, 2, "input_source", src->source);
    nf__inputs_item_str(out, 2, "context", src->mode);
    return NF_OK;
}

int nf__spt_own_inputs(nf_model * model, int n, const char * const * keys, const char * const * values,
                       const struct nf_array * given, int n_given, struct nf_inputs * out, nf_err * err);
int nf__spt_own_inputs(nf_model * model, int n, const char * const * keys, const char * const * values,
                       const struct nf_array * given, int n_given, struct nf_inputs * out, nf_err * err) {
    static const char * const allowed[] = {"seed", "length", "positions", "batch", "source", "context", "flank", NULL};
    NF_TRY(nf__inputs_keys_check("sptransformer", n, keys, allowed, err));
    int64_t seed, length, batch, positions, context = 0;
    struct nf_config_item ci;
    for (int i = 0; nf_model_config_item(model, i, &ci); i++)
        if (strcmp(ci.key, "context_len") == 0) context = ci.num;
    struct nf__spt_src * src = calloc(1, sizeof(*src));
    if (!src) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    out->priv = src;
    out->priv_free = free;
    src->context = context;
    if (n_given) {
        if (n_given != 1) return nf__err_set(err, NF_ERR_ARG, "sptransformer takes one given array, tokens");
        return nf__spt_given(model, n, keys, values, given, context, src, out, err);
    }
    NF_TRY(nf__inputs_int(n, keys, values, "seed", 0, NF_SEED_MAX, 42, &seed, err));
    NF_TRY(nf__inputs_int(n, keys, values, "positions", 1, 1 << 20, 128, &positions, err));
    const int by_positions = nf__inputs_opt(n, keys, values, "length") == NULL;
    NF_TRY(nf__inputs_int(n, keys, values, "length", 1, 1 << 24, by_positions ? positions + 2 * context : 8201, &length,
                          err));
    NF_TRY(nf__inputs_int(n, keys, values, "batch", 1, 1 << 16, 1, &batch, err));
    snprintf(src->source, sizeof(src->source), "seeded");
    src->pad = 1;
    snprintf(src->mode, sizeof(src->mode), "pad");
    src->flank = context;
    int64_t * tokens = malloc((size_t) (batch * length) * sizeof(int64_t));
    int8_t * core = malloc((size_t) length);
    if (!tokens || !core) {
        free(tokens);
        free(core);
        return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    }
    const int64_t nc = length - 2 * context > 0 ? length - 2 * context : 0;
    for (int64_t b = 0; b < batch; b++) {
        nf__spt_seeded_tokens((uint64_t) seed + (uint64_t) b, nc, core);
        for (int64_t i = 0; i < length; i++) {
            const int64_t j = i - context;
            tokens[b * length + i] = j >= 0 && j < nc ? core[j] : 4;
        }
    }
    free(core);
    const int64_t sh[2] = {batch, length};
    nf__inputs_array(out, "tokens", NF_ARRAY_I64, 2, sh, tokens, 1);
    int ndim = 0;
    int64_t osh[NF_ARRAY_MAX_DIMS];
    if (nf_model_output_shape(model, out->a, 1, &ndim, osh, err) != NF_OK) {
        if (by_positions)
            nf__err_prefix(err, "%lld nt + %lld N on each side (--context pad)", (long long) nc, (long long) context);
        return err->code;
    }
    nf__inputs_item_str(out, 2, "input_source", "seeded");
    nf__inputs_item_num(out, 2, "seed", seed);
    nf__inputs_item_num(out, 2, "length", by_positions ? positions : length);
    nf__inputs_item_str(out, 2, "context", "pad");
    char name[96];
    snprintf(name, sizeof(name), "batch=%lld length=%lld", (long long) batch, (long long) length);
    nf__inputs_item_str(out, 0, "case", name);
    nf__inputs_item_num(out, 0, "batch", batch);
    nf__inputs_item_num(out, 0, "length", length);
    nf__inputs_item_num(out, 1, "INPUT_LENGTH", length);
    nf__inputs_item_num(out, 1, "POSITIONS_SCORED", osh[1]);
    return NF_OK;
}

/* ---- run's outputs -------------------------------------------------------------------------- */

static int nf__spt_write_metadata(const char * path, const struct nf__spt_src * s, int64_t B, int64_t L,
                                  int64_t out_len, nf_err * err) {
    cJSON * d = cJSON_CreateObject();
    cJSON * ids = cJSON_AddObjectToObject(d, "ids");
    static const char * const letters[5] = {"A", "C", "G", "T", "N"};
    for (int i = 0; i < 5; i++) cJSON_AddNumberToObject(ids, letters[i], i);
    cJSON_AddStringToObject(d, "alphabet", "A=0 C=1 G=2 T/U=3 N=4; one-hot channels A, C, G, T; N all zero");
    cJSON_AddStringToObject(d, "source", s->source);
    cJSON_AddStringToObject(d, "flank_mode", s->mode);
    cJSON_AddNumberToObject(d, "flank_added_each_side", (double) s->flank);
    cJSON_AddNumberToObject(d, "context_len", (double) s->context);
    cJSON_AddNumberToObject(d, "batch", (double) B);
    cJSON_AddNumberToObject(d, "length", (double) L);
    cJSON_AddNumberToObject(d, "output_length", (double) out_len);
    cJSON_AddNumberToObject(d, "output_offset", (double) s->context);
    cJSON_AddStringToObject(d, "output_offset_meaning", "position_logits[b, i] is tokens[b, output_offset + i]");
    cJSON * ch = cJSON_AddArrayToObject(d, "channels");
    static const char * const tissues[15] = {"Adipose Tissue", "Blood",           "Blood Vessel", "Brain",  "Colon",
                                             "Heart",          "Kidney",          "Liver",        "Lung",   "Muscle",
                                             "Nerve",          "Small Intestine", "Skin",         "Spleen", "Stomach"};
    for (int i = 0; i < 3; i++) cJSON_AddItemToArray(ch, cJSON_CreateString(nf__spt_splice_names[i]));
    for (int i = 0; i < 15; i++) cJSON_AddItemToArray(ch, cJSON_CreateString(tissues[i]));
    const int rc = nf__json_write_file(path, d, err);
    cJSON_Delete(d);
    return rc;
}

static int64_t nf__spt_argmax3(const float * x) {
    int64_t best = 0;
    for (int64_t k = 1; k < 3; k++)
        if (x[k] > x[best]) best = k;
    return best;
}

int nf__spt_write_outputs(nf_model * model, const struct nf_inputs * in, const float * logits, const char * adapter,
                          const char * dir, struct nf_run_outputs * res, nf_err * err);
int nf__spt_write_outputs(nf_model * model, const struct nf_inputs * in, const float * logits, const char * adapter,
                          const char * dir, struct nf_run_outputs * res, nf_err * err) {
    (void) adapter;
    const struct nf__spt_src * src = in->priv;
    int ndim = 0;
    int64_t osh[NF_ARRAY_MAX_DIMS];
    NF_TRY(nf_model_output_shape(model, in->a, 1, &ndim, osh, err));
    const int64_t B = in->a[0].shape[0], L = in->a[0].shape[1], rows = osh[0] * osh[1], C = osh[2];
    int8_t * ids = malloc((size_t) (B * L > 0 ? B * L : 1));
    float * probs = malloc((size_t) (rows * C > 0 ? rows * C : 1) * sizeof(float));
    int64_t * cls = malloc((size_t) (rows > 0 ? rows : 1) * sizeof(int64_t));
    int rc = ids && probs && cls ? NF_OK : nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    int64_t counts[3] = {0, 0, 0};
    if (rc == NF_OK) {
        for (int64_t i = 0; i < B * L; i++) ids[i] = (int8_t) ((const int64_t *) in->a[0].data)[i];
        for (int64_t r = 0; r < rows; r++) counts[cls[r] = nf__spt_argmax3(logits + r * C)]++;
        /* upstream's driver: softmax over channels 0..2, sigmoid on the others */
        for (int64_t r = 0; r < rows; r++) {
            const float * x = logits + r * C;
            float * p = probs + r * C;
            const double mx = fmax(fmax(x[0], x[1]), x[2]);
            double e[3], sum = 0.0;
            for (int c = 0; c < 3; c++) sum += (e[c] = exp((double) x[c] - mx));
            for (int c = 0; c < 3; c++) p[c] = (float) (e[c] / sum);
            for (int64_t c = 3; c < C; c++) p[c] = (float) (1.0 / (1.0 + exp(-(double) x[c])));
        }
    }
    char p[4096];
    const int64_t tsh[2] = {B, L}, csh[2] = {osh[0], osh[1]};
    if (rc == NF_OK) {
        nf__path_join(p, sizeof(p), dir, "tokens.npy");
        rc = nf__npy_write(p, NF_NPY_I1, 2, tsh, ids, err);
    }
    if (rc == NF_OK) {
        nf__path_join(p, sizeof(p), dir, "position_logits.npy");
        rc = nf__npy_write(p, NF_NPY_F4, 3, osh, logits, err);
    }
    if (rc == NF_OK) {
        nf__path_join(p, sizeof(p), dir, "class_ids.npy");
        rc = nf__npy_write(p, NF_NPY_I8, 2, csh, cls, err);
    }
    if (rc == NF_OK) {
        nf__path_join(p, sizeof(p), dir, "probabilities.npy");
        rc = nf__npy_write(p, NF_NPY_F4, 3, osh, probs, err);
    }
    if (rc == NF_OK) {
        nf__path_join(p, sizeof(p), dir, "encoding_metadata.json");
        rc = nf__spt_write_metadata(p, src, B, L, osh[1], err);
    }
    free(ids);
    free(probs);
    free(cls);
    NF_TRY(rc);
    snprintf(res->shape, sizeof(res->shape), "%lldx%lldx%lld", (long long) osh[0], (long long) osh[1],
             (long long) osh[2]);
    snprintf(res->classes, sizeof(res->classes), "%s:%lld,%s:%lld,%s:%lld", nf__spt_splice_names[0],
             (long long) counts[0], nf__spt_splice_names[1], (long long) counts[1], nf__spt_splice_names[2],
             (long long) counts[2]);
    cJSON * o = cJSON_CreateObject();
    for (int i = 0; o && i < in->n_report; i++) {
        const struct nf_inputs_item * it = &in->report[i];
        if (it->is_str)
            cJSON_AddStringToObject(o, it->key, it->str);
        else
            cJSON_AddNumberToObject(o, it->key, (double) it->num);
    }
    cJSON * pc = o ? cJSON_AddObjectToObject(o, "predicted_class_counts") : NULL;
    for (int c = 0; pc && c < 3; c++) cJSON_AddNumberToObject(pc, nf__spt_splice_names[c], (double) counts[c]);
    char * text = pc ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    if (text) {
        res->report = malloc(strlen(text) + 1);
        if (res->report) memcpy(res->report, text, strlen(text) + 1);
        cJSON_free(text);
    }
    return res->report ? NF_OK : nf__err_set(err, NF_ERR_NOMEM, "out of memory");
}

int nf__spt_check_outputs(nf_model * model, const struct nf_inputs * in, const float * logits, const char * dir,
                          nf_err * err);
int nf__spt_check_outputs(nf_model * model, const struct nf_inputs * in, const float * logits, const char * dir,
                          nf_err * err) {
    (void) logits;
    int ndim = 0;
    int64_t osh[NF_ARRAY_MAX_DIMS];
    NF_TRY(nf_model_output_shape(model, in->a, 1, &ndim, osh, err));
    const int64_t B = in->a[0].shape[0], L = in->a[0].shape[1];
    const int64_t * ids = in->a[0].data;
    char p[4096];
    struct {
        const char * f;
        enum nf_npy_dtype dt;
        int nd;
        int64_t a, b, c;
    } want[4] = {
        {"tokens.npy", NF_NPY_I1, 2, B, L, 0},
        {"position_logits.npy", NF_NPY_F4, 3, osh[0], osh[1], osh[2]},
        {"class_ids.npy", NF_NPY_I8, 2, osh[0], osh[1], 0},
        {"probabilities.npy", NF_NPY_F4, 3, osh[0], osh[1], osh[2]},
    };
    for (int i = 0; i < 4; i++) {
        struct nf_npy a;
        nf__path_join(p, sizeof(p), dir, want[i].f);
        NF_TRY(nf__npy_read(p, &a, err));
        int ok = a.dtype == want[i].dt && a.ndim == want[i].nd && a.shape[0] == want[i].a && a.shape[1] == want[i].b &&
                 (a.ndim < 3 || a.shape[2] == want[i].c);
        const size_t n = a.nbytes / nf__npy_dtype_size(a.dtype);
        for (size_t e = 0; ok && i == 0 && e < n; e++) ok = ((const int8_t *) a.data)[e] == ids[e];
        if (ok && a.dtype == NF_NPY_F4)
            for (size_t e = 0; e < n; e++) ok &= isfinite(((const float *) a.data)[e]) != 0;
        if (ok && i == 2)
            for (size_t e = 0; e < n; e++)
                ok &= ((const int64_t *) a.data)[e] >= 0 && ((const int64_t *) a.data)[e] < 3;
        nf__npy_free(&a);
        if (!ok) return nf__err_set(err, NF_ERR_IO, "%s: read back with the wrong shape/dtype/values", p);
    }
    cJSON * doc = NULL;
    nf__path_join(p, sizeof(p), dir, "encoding_metadata.json");
    NF_TRY(nf__json_read_file(p, &doc, err));
    const int ok = cJSON_IsObject(doc);
    cJSON_Delete(doc);
    return ok ? NF_OK : nf__err_set(err, NF_ERR_IO, "%s: read back without its contents", p);
}
