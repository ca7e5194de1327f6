/* seq-track.c -- per-position SpTransformer tracks with coordinates
 * (nofall-genomics.h "tracks"; docs/sequences.md): a sequence of any length
 * scored in tiles of the model's window (max_seq_len positions), each tile
 * given its context_len flanks from the bases around it where the caller has
 * them and N beyond (exactly the N flanks one forward adds at a contig end),
 * the tiles' probabilities stitched in order; on strand '-' the reverse
 * complement is scored and the rows are put back in forward-strand order.
 * Writers: TSV (1-based positions) and bedGraph (0-based, half-open). */
#include "nofall-genomics.h"
#include "annotate-impl.h"
#include "nf-impl.h"
#include "io/nf-io.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void nf_seq_track_free(nf_seq_track * t) {
    free(t->probs);
    memset(t, 0, sizeof(*t));
}

static const char * const nf__track_tissues[NF_ANNOTATE_TISSUES] = {
    "adipose_tissue", "blood",  "blood_vessel", "brain",           "colon", "heart",  "kidney", "liver",
    "lung",           "muscle", "nerve",        "small_intestine", "skin",  "spleen", "stomach"};

const char * nf_seq_track_channel(const nf_seq_track * t, int64_t c) {
    static const char * const splice[3] = {"no_splice", "acceptor", "donor"};
    if (c < 0 || c >= t->channels) return NULL;
    if (c < 3) return splice[c];
    if (c - 3 < NF_ANNOTATE_TISSUES && t->channels == 3 + NF_ANNOTATE_TISSUES) return nf__track_tissues[c - 3];
    return "tissue"; /* a configuration with another tissue count: numbered by the caller (TSV: tissue_K) */
}

static int64_t nf__track_cfg(const nf_model * m, const char * key) {
    struct nf_config_item ci;
    for (int i = 0; nf_model_config_item(m, i, &ci); i++)
        if (strcmp(ci.key, key) == 0) return ci.num;
    return -1;
}

/* upstream's driver: softmax over channels 0..2, sigmoid on the others */
static void nf__track_probs(const float * x, int64_t C, float * p) {
    const double mx = fmax(fmax(x[0], x[1]), x[2]);
    double e[3], sum = 0.0;
    for (int c = 0; c < 3; c++) sum += (e[c] = exp((double) x[c] - mx));
    for (int c = 0; c < 3; c++) p[c] = (float) (e[c] / sum);
    for (int64_t c = 3; c < C; c++) p[c] = (float) (1.0 / (1.0 + exp(-(double) x[c])));
}

int nf_seq_track_from_logits(const float * logits, int64_t n, int64_t channels, const char * contig, int64_t start,
                             nf_seq_track * out, nf_err * err) {
    memset(out, 0, sizeof(*out));
    if (n <= 0 || channels < 3)
        return nf__err_set(err, NF_ERR_ARG, "tracks: %lld rows of %lld channels", (long long) n, (long long) channels);
    if (!(out->probs = malloc((size_t) (n * channels) * sizeof(float))))
        return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    for (int64_t r = 0; r < n; r++) nf__track_probs(logits + r * channels, channels, out->probs + r * channels);
    snprintf(out->contig, sizeof(out->contig), "%s", contig && contig[0] ? contig : "sequence");
    out->start = start > 0 ? start : 1;
    out->n = n;
    out->strand = '+';
    out->channels = channels;
    out->tile = n;
    out->tiles = 1;
    return NF_OK;
}

/* the complement of an id (A<->T, C<->G, N) */
static int8_t nf__comp(int8_t id) { return id == 4 ? 4 : (int8_t) (3 - id); }

int nf_seq_track_score(nf_model * m, const int8_t * ids, int64_t n, int64_t left, int64_t right, char strand,
                       const char * contig, int64_t start, int64_t tile, nf_seq_track * out, nf_err * err) {
    memset(out, 0, sizeof(*out));
    if (strand != '+' && strand != '-')
        return nf__err_set(err, NF_ERR_INPUT, "--strand: '%c' is not + or -", strand ? strand : '?');
    if (n <= 0 || left < 0 || right < 0) return nf__err_set(err, NF_ERR_INPUT, "--region: no positions to score");
    const int64_t ctx = nf__track_cfg(m, "context_len"), win = nf__track_cfg(m, "max_seq_len");
    const int64_t tissues = nf__track_cfg(m, "tissue_num");
    if (ctx < 0 || win <= 0 || tissues < 0)
        return nf__err_set(err, NF_ERR_INPUT, "--model: not a SpTransformer model (no context_len / max_seq_len)");
    if (tile <= 0 || tile > win) tile = win;
    const int64_t C = 3 + tissues, all = left + n + right;
    /* the bases in scoring order: forward, or the reverse complement */
    int8_t * seq = malloc((size_t) all);
    int64_t * tok = malloc((size_t) (tile + 2 * ctx) * sizeof(int64_t));
    float * logits = malloc((size_t) (tile * C) * sizeof(float));
    out->probs = malloc((size_t) (n * C) * sizeof(float));
    int rc = seq && tok && logits && out->probs ? NF_OK : nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    int64_t lf = left, rt = right; /* flanks available in scoring order */
    if (rc == NF_OK) {
        if (strand == '+')
            memcpy(seq, ids, (size_t) all);
        else {
            for (int64_t i = 0; i < all; i++) seq[i] = nf__comp(ids[all - 1 - i]);
            lf = right;
            rt = left;
        }
    }
    for (int64_t t0 = 0; rc == NF_OK && t0 < n; t0 += tile) {
        const int64_t len = n - t0 < tile ? n - t0 : tile, L = len + 2 * ctx;
        /* tile core [t0, t0+len) of the scored sequence; its flanks from
         * [t0-ctx, t0+len+ctx), N outside [-lf, n+rt) */
        for (int64_t j = 0; j < L; j++) {
            const int64_t k = t0 - ctx + j; /* relative to the scored core's first base */
            tok[j] = k >= -lf && k < n + rt ? seq[lf + k] : 4;
        }
        const struct nf_array a = {"tokens", NF_ARRAY_I64, 2, {1, L}, tok};
        rc = nf_model_forward(m, &a, 1, logits, err);
        for (int64_t r = 0; rc == NF_OK && r < len; r++) /* rows in forward-strand order */
            nf__track_probs(logits + r * C, C, out->probs + (strand == '+' ? t0 + r : n - 1 - (t0 + r)) * C);
        out->tiles++;
    }
    free(seq);
    free(tok);
    free(logits);
    if (rc != NF_OK) {
        nf_seq_track_free(out);
        return rc;
    }
    snprintf(out->contig, sizeof(out->contig), "%s", contig && contig[0] ? contig : "sequence");
    out->start = start > 0 ? start : 1;
    out->n = n;
    out->strand = strand;
    out->channels = C;
    out->tile = tile;
    return NF_OK;
}

int nf_seq_track_record(nf_model * m, const nf_seq * seq, int64_t b, const float * logits, char strand,
                        nf_seq_track * out, nf_err * err) {
    memset(out, 0, sizeof(*out));
    if (!m || !seq || !seq->ids || b < 0 || b >= seq->B)
        return nf__err_set(err, NF_ERR_ARG, "tracks: no record %lld", (long long) b);
    if (strand != '+' && strand != '-') return nf__err_set(err, NF_ERR_ARG, "tracks: strand '+' or '-'");
    const int64_t ctx = nf__track_cfg(m, "context_len"), tis = nf__track_cfg(m, "tissue_num");
    if (ctx < 0 || tis < 0) return nf__err_set(err, NF_ERR_ARG, "tracks: not a SpTransformer model");
    const int64_t n = seq->L - 2 * ctx, C = 3 + tis;
    if (n <= 0)
        return nf__err_set(err, NF_ERR_INPUT, "tracks: %lld tokens hold no position past 2 x %lld context",
                           (long long) seq->L, (long long) ctx);
    char name[64];
    snprintf(name, sizeof(name), "sequence%lld", (long long) b + 1);
    const char * contig = seq->names && seq->names[b] ? seq->names[b] : seq->B > 1 ? name : NULL;
    /* ids[0] is at starts[b] in mode given; pad's flanks are not the file's */
    const int64_t first = (seq->starts ? seq->starts[b] : 1) + (seq->pad ? 0 : ctx);
    if (logits && strand == '+') /* the caller's own forward: no second one */
        return nf_seq_track_from_logits(logits, n, C, contig, first, out, err);
    return nf_seq_track_score(m, seq->ids + b * seq->L, n, ctx, ctx, strand, contig, first, 0, out, err);
}

static int nf__track_close(FILE * f, const char * path, nf_err * err) {
    const int bad = ferror(f);
    if (fclose(f) != 0 || bad) return nf__err_set(err, NF_ERR_IO, "%s: write failed: %s", path, strerror(errno));
    return NF_OK;
}

static void nf__track_name(const nf_seq_track * t, int64_t c, char * b, size_t n) {
    const char * s = nf_seq_track_channel(t, c);
    if (strcmp(s, "tissue") == 0)
        snprintf(b, n, "tissue_%lld", (long long) (c - 3));
    else
        snprintf(b, n, "%s", s);
}

int nf_seq_track_write_tsv(const nf_seq_track * t, const char * path, int append, nf_err * err) {
    FILE * f = fopen(path, append ? "a" : "w");
    if (!f) return nf__err_set(err, NF_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
    char nm[64];
    /* acceptor, donor, then the tissues; no_splice (1 - acceptor - donor) left out */
    for (int64_t c = 1; !append && c < t->channels; c++) {
        nf__track_name(t, c, nm, sizeof(nm));
        fprintf(f, "%s\t%s", c == 1 ? "contig\tpos\tstrand" : "", nm);
    }
    if (!append) fputc('\n', f);
    for (int64_t i = 0; i < t->n; i++) {
        fprintf(f, "%s\t%lld\t%c", t->contig, (long long) (t->start + i), t->strand);
        for (int64_t c = 1; c < t->channels; c++) fprintf(f, "\t%.6g", (double) t->probs[i * t->channels + c]);
        fputc('\n', f);
    }
    return nf__track_close(f, path, err);
}

int nf_seq_track_write_bedgraph(const nf_seq_track * t, int64_t channel, const char * path, int append, nf_err * err) {
    if (channel < 0 || channel >= t->channels)
        return nf__err_set(err, NF_ERR_INPUT, "%s: no channel %lld (the model has %lld)", path, (long long) channel,
                           (long long) t->channels);
    FILE * f = fopen(path, append ? "a" : "w");
    if (!f) return nf__err_set(err, NF_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
    char nm[64];
    nf__track_name(t, channel, nm, sizeof(nm));
    if (!append)
        fprintf(f, "track type=bedGraph name=\"%s %c\" description=\"SpTransformer %s probability, strand %c\"\n", nm,
                t->strand, nm, t->strand);
    for (int64_t i = 0; i < t->n; i++)
        fprintf(f, "%s\t%lld\t%lld\t%.6g\n", t->contig, (long long) (t->start + i - 1), (long long) (t->start + i),
                (double) t->probs[i * t->channels + channel]);
    return nf__track_close(f, path, err);
}

const char * const nf_seq_track_files[] = {"tracks.tsv", "acceptor.bedGraph", "donor.bedGraph", NULL};

int nf_seq_tracks_write(nf_model * m, const nf_seq * seq, const float * logits, const char * strand, const char * dir,
                        nf_err * err) {
    return nf__seq_tracks_write_keep(m, seq, logits, strand, dir, NULL, NULL, err);
}

int nf__seq_tracks_write_keep(nf_model * m, const nf_seq * seq, const float * logits, const char * strand,
                              const char * dir, float * keep, int64_t * x0, nf_err * err) {
    const int64_t ctx = nf__track_cfg(m, "context_len"), tis = nf__track_cfg(m, "tissue_num");
    const int64_t n = seq->L - 2 * (ctx > 0 ? ctx : 0), C = 3 + (tis > 0 ? tis : 0);
    char tsv[4096], acc[4096], don[4096];
    nf__path_join(tsv, sizeof(tsv), dir, nf_seq_track_files[0]);
    nf__path_join(acc, sizeof(acc), dir, nf_seq_track_files[1]);
    nf__path_join(don, sizeof(don), dir, nf_seq_track_files[2]);
    int rc = NF_OK;
    for (int64_t b = 0; rc == NF_OK && b < seq->B; b++) { /* the run's own forward on '+': no second one */
        nf_seq_track t;
        rc = nf_seq_track_record(m, seq, b, logits ? logits + b * n * C : NULL, strand ? strand[0] : '+', &t, err);
        if (rc == NF_OK) rc = nf_seq_track_write_tsv(&t, tsv, b > 0, err);
        if (rc == NF_OK) rc = nf_seq_track_write_bedgraph(&t, 1, acc, b > 0, err);
        if (rc == NF_OK) rc = nf_seq_track_write_bedgraph(&t, 2, don, b > 0, err);
        const int64_t kept = seq->B < 8 ? seq->B : 8;
        if (rc == NF_OK && keep && b < kept) { /* the picture's rows: acceptor (channel 1), donor (2) */
            for (int64_t i = 0; i < n; i++) {
                keep[b * n + i] = t.probs[i * t.channels + 1];
                keep[(kept + b) * n + i] = t.probs[i * t.channels + 2];
            }
            if (b == 0 && x0) *x0 = t.start;
        }
        nf_seq_track_free(&t);
    }
    return rc;
}

int nf_seq_tiled_needed(const nf_model * m, const nf_seq * seq) {
    int64_t ctx = -1, win = -1;
    struct nf_config_item ci;
    for (int i = 0; nf_model_config_item(m, i, &ci); i++) {
        if (strcmp(ci.key, "context_len") == 0) ctx = ci.num;
        if (strcmp(ci.key, "max_seq_len") == 0) win = ci.num;
    }
    return ctx >= 0 && win > 0 && seq->L - 2 * ctx > win;
}

int nf_seq_scored_note(const nf_model * m, const nf_seq * seq, const char * region, char * buf, size_t n) {
    if (buf && n) buf[0] = 0;
    if (!m || !seq || !region || !buf || n == 0 || seq->mode != NF_SEQ_GIVEN || seq->pad || seq->B < 1) return 0;
    const int64_t ctx = nf__track_cfg(m, "context_len"), rows = seq->L - 2 * ctx;
    if (ctx <= 0 || rows <= 0) return 0;
    const int64_t first = (seq->starts ? seq->starts[0] : 1) + ctx;
    char er[256], ec[256];
    snprintf(buf, n,
             "--context given: the first and last %lld bases of --region %s are the model's flanks, not scored; "
             "the rows are %s:%lld-%lld (%lld positions); --context genome scores every position of the region, "
             "its flanks read from the FASTA around it",
             (long long) ctx, nf__esc(er, sizeof(er), region),
             nf__esc(ec, sizeof(ec), seq->names && seq->names[0] ? seq->names[0] : "sequence"), (long long) first,
             (long long) (first + rows - 1), (long long) rows);
    return 1;
}
