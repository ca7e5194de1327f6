/* seq-input.c -- SpTransformer's inputs (nofall-genomics.h; README
 * "SpTransformer inputs"): token ids A=0, C=1, G=2, T/U=3, N=4 from
 *   a seeded generator (--seed, --length),
 *   a .npy of ids (--tokens: int8/int32/int64, (L,) or (B, L)),
 *   a string (--sequence ACGU...),
 *   a FASTA file, whole or one region (--fasta F [--region chr:start-end],
 *     read with htslib's faidx; the .fai is built beside F when missing),
 * and the flank mode: `given` (the input already carries `context` nt on each
 * side), `pad` (nofall adds `context` N on each side) or `genome` (a FASTA
 * region: its flanks are the `context` bases of the FASTA beyond it, N past
 * the contig's ends, as SpliceAI pads there). Lower case is accepted, T and U
 * alike; any other letter is an error naming where. */
#include "nofall-genomics.h"
#include "nf-impl.h"
#include "io/nf-io.h"
#include "sptransformer-impl.h"

#ifdef NF_HAVE_HTSLIB
#include <htslib/faidx.h>
#include <htslib/hts_log.h>
#endif
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void nf_seq_free(nf_seq * s) {
    free(s->ids);
    for (int64_t b = 0; s->names && b < s->B; b++) free(s->names[b]);
    free(s->names);
    free(s->starts);
    memset(s, 0, sizeof(*s));
}

int nf_seq_id(int c) {
    switch (c) {
        case 'A':
        case 'a': return 0;
        case 'C':
        case 'c': return 1;
        case 'G':
        case 'g': return 2;
        case 'T':
        case 't':
        case 'U':
        case 'u': return 3;
        case 'N':
        case 'n': return 4;
        default: return -1;
    }
}

/* B sequences of n core ids each (in core, B * n), flanked per mode */
static int nf__seq_make(nf_seq * s, const int8_t * core, int64_t B, int64_t n, int pad, int64_t context,
                        const char * flag, const char * path, nf_err * err) {
    int64_t L = 0;
    NF_TRY(nf__spt_tokens_make(core, B, n, pad, context, flag, path, &s->ids, &L, err));
    s->B = B;
    s->L = L;
    s->pad = pad ? 1 : 0;
    s->flank = pad ? context : 0;
    s->mode = pad ? NF_SEQ_PAD : NF_SEQ_GIVEN;
    return NF_OK;
}

const char * nf_seq_mode_name(const nf_seq * s) {
    return s->mode == NF_SEQ_GENOME ? "genome" : s->mode == NF_SEQ_PAD || s->pad ? "pad" : "given";
}

/* mode genome outside a FASTA region */
static int nf__seq_no_genome(const char * flag, nf_err * err) {
    return nf__err_set(err, NF_ERR_ARG,
                       "--context genome takes the flanks from the genome around a region: --fasta F --region "
                       "chr:start-end, not %s",
                       flag);
}

int nf_seq_seeded(nf_seq * s, uint64_t seed, int64_t n, int64_t context, nf_err * err) {
    memset(s, 0, sizeof(*s));
    int8_t * core = malloc((size_t) (n > 0 ? n : 1));
    if (!core) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    nf__spt_seeded_tokens(seed, n, core);
    int rc = nf__seq_make(s, core, 1, n, 1, context, "--length", NULL, err);
    free(core);
    snprintf(s->source, sizeof(s->source), "seeded");
    return rc;
}

int nf_seq_string(nf_seq * s, const char * text, int pad, int64_t context, nf_err * err) {
    memset(s, 0, sizeof(*s));
    if (pad == NF_SEQ_GENOME) return nf__seq_no_genome("--sequence", err);
    const int64_t n = (int64_t) strlen(text);
    int8_t * core = malloc((size_t) (n > 0 ? n : 1));
    if (!core) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < n; i++) {
        const int id = nf_seq_id((unsigned char) text[i]);
        if (id < 0) {
            free(core);
            char e[16];
            return nf__err_set(err, NF_ERR_INPUT,
                               "--sequence: position %lld is '%s', not a nucleotide (A, C, G, T, U or N, any case)",
                               (long long) i + 1, nf__esc(e, sizeof(e), (char[]){text[i], 0}));
        }
        core[i] = (int8_t) id;
    }
    int rc = nf__seq_make(s, core, 1, n, pad, context, "--sequence", NULL, err);
    free(core);
    snprintf(s->source, sizeof(s->source), "sequence");
    return rc;
}

int nf_seq_npy(nf_seq * s, const char * path, int pad, int64_t context, nf_err * err) {
    memset(s, 0, sizeof(*s));
    if (pad == NF_SEQ_GENOME) return nf__seq_no_genome("--tokens", err);
    int64_t B = 0, L = 0;
    NF_TRY(nf__spt_tokens_npy(path, pad, context, &s->ids, &B, &L, err));
    s->B = B;
    s->L = L;
    s->pad = pad ? 1 : 0;
    s->flank = pad ? context : 0;
    s->mode = pad ? NF_SEQ_PAD : NF_SEQ_GIVEN;
    snprintf(s->source, sizeof(s->source), "tokens file");
    return NF_OK;
}

#ifndef NF_HAVE_HTSLIB
int nf_seq_fasta(nf_seq * s, const char * path, const char * region, int pad, int64_t context, nf_err * err) {
    (void) region;
    (void) pad;
    (void) context;
    memset(s, 0, sizeof(*s));
    return nf__err_set(err, NF_ERR_UNSUPPORTED,
                       "%s: this build has no FASTA input (configure it with htslib: "
                       "apt-get install libhts-dev)",
                       path);
}
#else
/* ids of text (len n) into out; an unknown letter names record and position */
static int nf__seq_map(const char * path, const char * name, int64_t first, const char * text, int64_t n, int8_t * out,
                       nf_err * err) {
    for (int64_t i = 0; i < n; i++) {
        const int id = nf_seq_id((unsigned char) text[i]);
        if (id < 0) {
            char e[16];
            return nf__err_set(err, NF_ERR_INPUT,
                               "%s: %s position %lld is '%s', not a nucleotide (A, C, G, T, U or N, any case)", path,
                               name, (long long) (first + i), nf__esc(e, sizeof(e), (char[]){text[i], 0}));
        }
        out[i] = (int8_t) id;
    }
    return NF_OK;
}

/* mode genome: core (the n ids of the region at 0-based rbeg of contig tid)
 * widened by context bases on each side, read from the FASTA, N past the
 * contig's ends (past: how many on each side) */
static int nf__seq_genome_flanks(faidx_t * fai, struct nf_fasta_raw * raw, const char * path, int tid, int64_t rbeg,
                                 int64_t context, int8_t ** core, int64_t * n, int64_t past[2], nf_err * err) {
    const char * nm = faidx_iseq(fai, tid);
    const int64_t clen = faidx_seq_len(fai, nm), end = rbeg + *n, L = *n + 2 * context;
    const int64_t wb = rbeg - context > 0 ? rbeg - context : 0, we = end + context < clen ? end + context : clen;
    past[0] = context - (rbeg - wb);
    past[1] = context - (we - end);
    int8_t * w = malloc((size_t) L);
    if (!w) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    memset(w, 4, (size_t) L);
    memcpy(w + context, *core, (size_t) *n);
    int rc = NF_OK;
    const int64_t span[2][2] = {{wb, rbeg}, {end, we}}; /* the left flank, the right, 0-based half-open */
    for (int k = 0; k < 2 && rc == NF_OK; k++) {
        const int64_t a = span[k][0], b = span[k][1];
        if (b <= a) continue;
        hts_pos_t got = 0;
        char * seq = faidx_fetch_seq64(fai, nm, (hts_pos_t) a, (hts_pos_t) b - 1, &got);
        if (seq && got == b - a) rc = nf__fasta_raw_check(raw, nm, a, b, err);
        if (rc != NF_OK) {
        } else if (!seq || got != b - a)
            rc = nf__err_set(err, NF_ERR_IO, "%s: record '%s' could not be read (the flanks of --context genome)", path,
                             nm);
        else
            rc = nf__seq_map(path, nm, a + 1, seq, b - a, w + (k == 0 ? past[0] : context + *n), err);
        free(seq);
    }
    if (rc != NF_OK) {
        free(w);
        return rc;
    }
    free(*core);
    *core = w;
    *n = L;
    return NF_OK;
}

int nf_seq_fasta(nf_seq * s, const char * path, const char * region, int pad, int64_t context, nf_err * err) {
    memset(s, 0, sizeof(*s));
    const int genome = pad == NF_SEQ_GENOME;
    if (genome && !region)
        return nf__seq_no_genome("a whole FASTA (no --region; --context pad scores every record whole)", err);
    if (genome && context < 0)
        return nf__err_set(err, NF_ERR_ARG, "--context genome: context %lld", (long long) context);
    /* htslib's own log echoes names and regions raw (an ESC reaches the
     * terminal) and this htslib has no log callback: silenced, nofall reports
     * every failure itself, escaped (README "Hostile input") */
    hts_set_log_level(HTS_LOG_OFF);
    int fd;
    uint64_t size;
    NF_TRY(nf__open_regular(path, &fd, &size, err)); /* a clear message for a missing file or a directory */
    close(fd);
    NF_TRY(nf__fai_check(path, err)); /* htslib trusts the .fai: a line of 0 bases divides by zero */
    faidx_t * fai = fai_load3(path, NULL, NULL, FAI_CREATE);
    if (!fai)
        return nf__err_set(err, NF_ERR_IO,
                           "%s: not a FASTA file htslib can index (faidx needs the lines of a record, all "
                           "but its last, to have one length)",
                           path);
    /* the index htslib just built is checked too: from a line with no bases
     * it writes LINEBASES 0, and then divides by it (fuzz-region) */
    const int crc = nf__fai_check(path, err);
    if (crc != NF_OK) {
        fai_destroy(fai);
        return crc;
    }
    struct nf_fasta_raw raw;
    const int orc = nf__fasta_raw_open(&raw, path, err);
    if (orc != NF_OK) {
        fai_destroy(fai);
        return orc;
    }
    int rc = NF_OK;
    int8_t * core = NULL;
    int64_t B = 0, n = 0, region_beg = 0;
    int region_tid = 0;
    if (region) {
        hts_pos_t len = 0, rbeg = 0, rend = 0;
        int tid = -1;
        char * seq = NULL;
        /* parsed first: htslib divides by a record's bases per line, 0 for a
         * record with no bases (fuzz-region) */
        if (fai_parse_region(fai, region, &tid, &rbeg, &rend, 0) && tid >= 0 &&
            faidx_seq_len(fai, faidx_iseq(fai, tid)) > 0 && (seq = fai_fetch64(fai, region, &len)) && len > 0)
            rc = nf__fasta_raw_check(&raw, faidx_iseq(fai, tid), rbeg, rbeg + len, err);
        region_tid = tid;
        region_beg = rbeg;
        if (rc != NF_OK) {
        } else if (!seq || len <= 0) {
            rc = nf__err_set(err, NF_ERR_INPUT,
                             "%s: region '%s' is not in the file (chr:start-end, 1-based, inclusive)", path, region);
        } else {
            B = 1;
            n = len;
            core = malloc((size_t) n);
            if (!core)
                rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
            else
                rc = nf__seq_map(path, region, 1, seq, n, core, err);
            if (rc == NF_OK && genome)
                rc = nf__seq_genome_flanks(fai, &raw, path, tid, rbeg, context, &core, &n, s->past_ends, err);
        }
        free(seq);
    } else {
        B = faidx_nseq(fai);
        for (int64_t r = 0; r < B && rc == NF_OK; r++) {
            const char * nm = faidx_iseq(fai, (int) r);
            const int64_t len = faidx_seq_len(fai, nm);
            if (r == 0) {
                n = len;
                core = malloc((size_t) (B * n > 0 ? B * n : 1));
                if (!core) rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
            } else if (len != n) {
                rc = nf__err_set(err, NF_ERR_INPUT,
                                 "%s: record '%s' has %lld nt, the first has %lld: one forward takes sequences of one "
                                 "length (use --region)",
                                 path, nm, (long long) len, (long long) n);
            }
            if (rc == NF_OK && n <= 0) rc = nf__err_set(err, NF_ERR_INPUT, "%s: record '%s' has no bases", path, nm);
            if (rc != NF_OK) break;
            hts_pos_t got = 0;
            char * seq = faidx_fetch_seq64(fai, nm, 0, (hts_pos_t) n - 1, &got);
            if (seq && got == n) rc = nf__fasta_raw_check(&raw, nm, 0, n, err);
            if (rc != NF_OK) {
            } else if (!seq || got != n)
                rc = nf__err_set(err, NF_ERR_IO, "%s: record '%s' could not be read", path, nm);
            else
                rc = nf__seq_map(path, nm, 1, seq, n, core + r * n, err);
            free(seq);
        }
        if (rc == NF_OK && B == 0) rc = nf__err_set(err, NF_ERR_INPUT, "%s: no FASTA records", path);
    }
    char ** names = rc == NF_OK ? calloc((size_t) (B > 0 ? B : 1), sizeof(char *)) : NULL;
    int64_t * starts = rc == NF_OK ? calloc((size_t) (B > 0 ? B : 1), sizeof(int64_t)) : NULL;
    if (rc == NF_OK && (!names || !starts)) rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    for (int64_t r = 0; rc == NF_OK && r < B; r++) {
        const char * nm = region ? faidx_iseq(fai, region_tid) : faidx_iseq(fai, (int) r);
        starts[r] = region ? region_beg + 1 - (genome ? context : 0) : 1;
        if (!(names[r] = strdup(nm))) rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    }
    fai_destroy(fai);
    nf__fasta_raw_close(&raw);
    if (rc == NF_OK) rc = nf__seq_make(s, core, B, n, genome ? 0 : pad, context, "--fasta", path, err);
    if (rc == NF_OK) {
        s->names = names;
        s->starts = starts;
        if (genome) s->mode = NF_SEQ_GENOME; /* past_ends: nf__seq_genome_flanks' */
    } else {
        for (int64_t r = 0; names && r < B; r++) free(names[r]);
        free(names);
        free(starts);
    }
    free(core);
    snprintf(s->source, sizeof(s->source), "fasta");
    return rc;
}
#endif
