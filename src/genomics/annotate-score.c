/* annotate-score.c -- annotate's scoring (nofall-genomics.h; README
 * "annotate"), as upstream SpliceTransformer's `sptransformer.py`
 * (Annotator.annotate_variant_table / query_scores; spec
 * shared/specs/sptransformer.md §5):
 *
 *   - SNVs only (REF and ALT one base); a contig name over 6 characters is
 *     skipped; multi-allelic records are scored per ALT;
 *   - strands: those of the genes (GTF `gene` rows) overlapping POS; none:
 *     score 0 and no forward;
 *   - per strand: the window POS-(C+100) .. POS+(C+100) (C = context_len,
 *     4000: L = 8201), ALT at offset C+100, minus strand reverse-complemented,
 *     ref and alt through the model; probabilities as upstream's driver;
 *     a[i] = max(acceptor, donor); dsplice = max |a_alt - a_ref| over the
 *     central 201 positions; tissue usage masked at a >= 0.09 (each allele by
 *     its own a), dtissue = max |U_alt - U_ref|; both maximised over strands;
 *   - tissue flags: z = ((d_t - mean(d)) - mu_t) / sd_t, 'Y' if z > thr95_t
 *     (Appendix B), or the raw d_t with raw_score.
 *
 * Batching: the windows of many variants in one forward (runs of one L, up
 * to `batch` windows), the model reusing encoder rows between them. */
#ifdef NF_HAVE_HTSLIB
#include "annotate-impl.h"
#include "io/nf-io.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* upstream sptransformer.py, Annotator._threshold (spec Appendix B) */
static const double nf_ann_mu[NF_ANNOTATE_TISSUES] = {
    0.016170055925538048, -0.1466492029720345, -0.004814086515620099, 0.017831358519558433, 0.03297392759250731,
    -0.0238562463866956,  0.03762999484050797, -0.057356272980532315, 0.04777555561381407,  -0.04901297259546376,
    0.03865417911254773,  0.05855564392852844, 0.008105610846240991,  0.001179770193512726, 0.022812684877590292};
static const double nf_ann_sd[NF_ANNOTATE_TISSUES] = {
    0.015315100552740593, 0.07765363341706003,  0.02180354730921543,  0.03280497132872753,  0.018426896200775304,
    0.02340998308282473,  0.022809397819461737, 0.037399009450944404, 0.02457642947897365,  0.03512151853661846,
    0.025045859953448327, 0.03187442362925183,  0.015884291924608274, 0.022923747771506405, 0.01608487821592824};
static const double nf_ann_thr95[NF_ANNOTATE_TISSUES] = {
    1.8050256807163338, 1.2976271940160122, 1.7301640366913926, 1.5711727792118446, 1.6529818774325018,
    1.5579432960092778, 1.9147687989032427, 1.4824945358487465, 1.7212837086526112, 1.4469248306980924,
    1.5899046195758109, 1.8459915073972142, 1.838922268820402,  1.709814212823414,  1.8189643807065778};

/* numpy's float64 sum of 15 values (pairwise_sum: 8 partial sums, then the rest) */
static double nf_ann_np_mean15(const double * a) {
    double r[8];
    for (int j = 0; j < 8; j++) r[j] = a[j];
    double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (int i = 8; i < NF_ANNOTATE_TISSUES; i++) res += a[i];
    return res / NF_ANNOTATE_TISSUES;
}

/* upstream's normalise_chrom(c, 'chr'): "Chr" -> "chr", a missing "chr" added */
static void nf_ann_chr_name(const char * c, char * out, size_t n) {
    if (strncmp(c, "Chr", 3) == 0)
        snprintf(out, n, "chr%s", c + 3);
    else if (strncmp(c, "chr", 3) == 0)
        snprintf(out, n, "%s", c);
    else
        snprintf(out, n, "chr%s", c);
}

const char * nf__ann_gene_contig(const nf_annotator * a, const char * chrom, char * cn, size_t n) {
    nf_ann_chr_name(chrom, cn, n);
    return nf_genes_has_contig(a->genes, cn) ? cn : chrom;
}

static int nf_ann_id(int c) {
    switch (c) {
        case 'A':
        case 'a': return 0;
        case 'C':
        case 'c': return 1;
        case 'G':
        case 'g': return 2;
        case 'T':
        case 't': return 3;
        case 'N':
        case 'n': return 4;
        default: return -1;
    }
}

static void nf_ann_probs(const float * lg, float * pr, int64_t rows) {
    for (int64_t r = 0; r < rows; r++) {
        const float * x = lg + r * 18;
        float * p = pr + r * 18;
        const double mx = fmax(fmax(x[0], x[1]), x[2]);
        double e[3], sum = 0.0;
        for (int c = 0; c < 3; c++) sum += (e[c] = exp((double) x[c] - mx));
        for (int c = 0; c < 3; c++) p[c] = (float) (e[c] / sum);
        for (int c = 3; c < 18; c++) p[c] = (float) (1.0 / (1.0 + exp(-(double) x[c])));
    }
}

/* SpliceAI's deltas of one strand (its definitions, spec sptransformer.md;
 * SpliceAI's spliceai/utils.py get_delta_scores): over the output positions
 * in genomic order, DS_AG = max(alt - ref) of the acceptor probability,
 * DS_AL = max(ref - alt), DS_DG / DS_DL the same of the donor's, each DP the
 * position of its maximum relative to POS (the first one in genomic order on
 * a tie, numpy's argmax). Row i of a '+' window is position beg + C + i; of a
 * '-' window (reverse-complemented) beg + L - 1 - C - i. */
static void nf_ann_score_sai(const float * pr, const float * pa, int64_t rows, int64_t context,
                             const struct nf_ann_job * jb, struct nf_ann_alt * out) {
    float * ds = out->sai_ds[jb->strand];
    int32_t * dp = out->sai_dp[jb->strand];
    for (int k = 0; k < 4; k++) ds[k] = -INFINITY, dp[k] = 0;
    for (int64_t n = 0; n < rows; n++) {
        const int64_t i = jb->strand ? rows - 1 - n : n; /* genomic order */
        const int64_t gpos = jb->strand ? jb->beg + jb->L - 1 - context - i : jb->beg + context + i;
        const float * r = pr + i * 18;
        const float * x = pa + i * 18;
        const float d[4] = {x[1] - r[1], r[1] - x[1], x[2] - r[2], r[2] - x[2]};
        for (int k = 0; k < 4; k++)
            if (d[k] > ds[k]) ds[k] = d[k], dp[k] = (int32_t) (gpos - jb->pos);
    }
}

/* the scores of one job from its two probability tracks (rows x 18) */
static void nf_ann_score(const float * pr, const float * pa, int64_t rows, struct nf_ann_alt * out) {
    float ds = 0.0f, dt[NF_ANNOTATE_TISSUES] = {0};
    for (int64_t i = 0; i < rows; i++) {
        const float * r = pr + i * 18;
        const float * x = pa + i * 18;
        const float ar = r[1] > r[2] ? r[1] : r[2];
        const float aa = x[1] > x[2] ? x[1] : x[2];
        const float d = fabsf(aa - ar);
        if (d > ds) ds = d;
        const float mr = ar >= 0.09f ? 1.0f : 0.0f, ma = aa >= 0.09f ? 1.0f : 0.0f;
        for (int t = 0; t < NF_ANNOTATE_TISSUES; t++) {
            const float u = fabsf(x[3 + t] * ma - r[3 + t] * mr);
            if (u > dt[t]) dt[t] = u;
        }
    }
    if (ds > out->dsplice) out->dsplice = ds;
    for (int t = 0; t < NF_ANNOTATE_TISSUES; t++)
        if (dt[t] > out->dtissue[t]) out->dtissue[t] = dt[t];
}

int nf__ann_grow(void ** p, int64_t * cap, int64_t need, size_t elem) {
    if (need <= *cap) return 0;
    int64_t nc = *cap ? *cap : 64;
    while (nc < need) nc *= 2;
    void * q = realloc(*p, (size_t) nc * elem);
    if (!q) return -1;
    *p = q;
    *cap = nc;
    return 0;
}

/* run the queued jobs: consecutive jobs of one L, up to --batch windows a forward */
int nf__ann_run_jobs(nf_annotator * a, nf_err * err) {
    const int64_t per = a->o.batch / 2 > 0 ? a->o.batch / 2 : 1;
    for (int64_t j0 = 0; j0 < a->n_jobs;) {
        const int64_t L = a->jobs[j0].L;
        int64_t j1 = j0;
        while (j1 < a->n_jobs && j1 - j0 < per && a->jobs[j1].L == L) j1++;
        const int64_t B = 2 * (j1 - j0), rows = L - 2 * a->context;
        if (B > a->buf_seqs || L > a->buf_L) {
            free(a->tok);
            free(a->logits);
            free(a->probs);
            const int64_t bs = B > a->buf_seqs ? B : a->buf_seqs, bl = L > a->buf_L ? L : a->buf_L;
            a->tok = malloc((size_t) (bs * bl) * sizeof(int64_t));
            a->logits = malloc((size_t) (bs * (bl - 2 * a->context) * 18) * sizeof(float));
            a->probs = malloc((size_t) (bs * (bl - 2 * a->context) * 18) * sizeof(float));
            if (!a->tok || !a->logits || !a->probs) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
            a->buf_seqs = bs;
            a->buf_L = bl;
        }
        for (int64_t j = j0; j < j1; j++) {
            int64_t * t = a->tok + (2 * (j - j0)) * L;
            for (int64_t i = 0; i < L; i++) t[i] = a->jobs[j].ref[i];
            for (int64_t i = 0; i < L; i++) t[L + i] = a->jobs[j].alt_ids[i];
        }
        struct nf_array in = {"tokens", NF_ARRAY_I64, 2, {B, L}, a->tok};
        const double t0 = nf__ann_now_ms();
        NF_TRY(nf_model_forward(a->m, &in, 1, a->logits, err));
        a->st.forward_ms += nf__ann_now_ms() - t0;
        a->st.forwards++;
        a->st.windows += B;
        int64_t v = 0;
        if (nf_model_get_option(a->m, "distinct", &v, err) == NF_OK) a->st.windows_computed += v;
        if (nf_model_get_option(a->m, "reused", &v, err) == NF_OK) a->st.windows_reused += v;
        for (int64_t i = 0; i < B * rows * 18; i++)
            if (!isfinite(a->logits[i])) return nf__err_set(err, NF_ERR_MISMATCH, "forward produced non-finite logits");
        nf_ann_probs(a->logits, a->probs, B * rows);
        for (int64_t j = j0; j < j1; j++) {
            struct nf_ann_job * jb = &a->jobs[j];
            struct nf_ann_alt * al = &a->recs[jb->rec].alt[jb->alt];
            const float * pr = a->probs + (2 * (j - j0)) * rows * 18;
            nf_ann_score(pr, pr + rows * 18, rows, al);
            nf_ann_score_sai(pr, pr + rows * 18, rows, a->context, jb, al);
            if (a->plot) nf__ann_plot_capture(a->plot, jb->ref, jb->alt_ids, L, pr, pr + rows * 18);
            al->pending--;
            free(jb->ref);
            free(jb->alt_ids);
            jb->ref = jb->alt_ids = NULL;
        }
        j0 = j1;
    }
    a->n_jobs = 0;
    return NF_OK;
}

/* the 15 tissue values of one ALT (flags or raw) into vals */
void nf__ann_tissue_values(const nf_annotator * a, const struct nf_ann_alt * al, char vals[][40]) {
    double d[NF_ANNOTATE_TISSUES];
    for (int t = 0; t < NF_ANNOTATE_TISSUES; t++) d[t] = (double) al->dtissue[t];
    const double mean = nf_ann_np_mean15(d);
    for (int t = 0; t < NF_ANNOTATE_TISSUES; t++) {
        if (a->o.raw_score)
            nf__py_float_repr(d[t], vals[t], 40);
        else {
            const double z = ((d[t] - mean) - nf_ann_mu[t]) / nf_ann_sd[t];
            snprintf(vals[t], 40, "%s", z > nf_ann_thr95[t] ? "Y" : "N");
        }
    }
}

/* one input record: its ALTs, their strands, the jobs */
int nf__ann_record(nf_annotator * a, bcf1_t * b, int64_t index, nf_err * err) {
    char e[1024], where[1024];
    if (nf__ann_grow((void **) &a->recs, &a->cap_recs, a->n_recs + 1, sizeof(*a->recs)))
        return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    struct nf_ann_rec * rc = &a->recs[a->n_recs];
    memset(rc, 0, sizeof(*rc));
    rc->b = b;
    rc->index = index;
    const int64_t ri = a->n_recs++;
    nf__ann_where(a, rc, where, sizeof(where));
    const char * chrom = bcf_seqname(a->hdr, b);
    const int n_alt = b->n_allele > 1 ? b->n_allele - 1 : 1;
    rc->n_alt = n_alt;
    if (!(rc->alt = calloc((size_t) n_alt, sizeof(*rc->alt)))) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    a->st.records++;
    a->st.alts += n_alt;
    const char * ref = b->d.allele[0];
    int fetched = 0;
    char * seq = NULL;
    int64_t L = 0;
    char contig[1024] = "";
    for (int i = 0; i < n_alt; i++) {
        struct nf_ann_alt * al = &rc->alt[i];
        al->skip = -1;
        const char * alt = b->n_allele > 1 ? b->d.allele[i + 1] : NULL;
        if (strlen(chrom) > 6)
            al->skip = NF_ANNOTATE_SKIP_CONTIG_NAME;
        else if (!alt)
            al->skip = NF_ANNOTATE_SKIP_NO_ALT;
        else if (strlen(ref) > 1 || strlen(alt) > 1)
            al->skip = NF_ANNOTATE_SKIP_NOT_SNV;
        else if (strcmp(alt, "*") == 0 || strcmp(alt, ".") == 0)
            al->skip = NF_ANNOTATE_SKIP_STAR;
        if (al->skip >= 0) {
            a->st.skipped[al->skip]++;
            continue;
        }
        a->st.scored++;
        const int64_t pos = b->pos + 1;
        /* the strands: upstream looks the genes up under the "chr" name; the
         * name as written when the GTF has no contig of that name */
        char cn[1024];
        const char * gname = nf__ann_gene_contig(a, chrom, cn, sizeof(cn));
        al->strands = nf_genes_strands(a->genes, gname, pos, a->o.protein_coding);
        if (!al->strands) {
            a->st.scored_no_gene++;
            continue;
        }
        if (nf_ann_id(alt[0]) < 0) {
            free(seq);
            return nf__err_set(err, NF_ERR_FORMAT, "%s: ALT '%s' is not one of A, C, G, T, N", where,
                               nf__esc(e, sizeof(e), alt));
        }
        if (!fetched) {
            fetched = 1;
            snprintf(contig, sizeof(contig), "%s", faidx_has_seq(a->fai, cn) ? cn : chrom);
            if (!faidx_has_seq(a->fai, contig)) {
                if (strcmp(cn, chrom) == 0)
                    return nf__err_set(err, NF_ERR_ARG, "%s: contig %s is not in --fasta %s (a gene overlaps it)",
                                       where, nf__esc(e, sizeof(e), cn), a->o.fasta);
                return nf__err_set(err, NF_ERR_ARG, "%s: contig %s (or %s) is not in --fasta %s (a gene overlaps it)",
                                   where, nf__esc(e, sizeof(e), cn), chrom, a->o.fasta);
            }
            const int64_t clen = faidx_seq_len(a->fai, contig);
            const int64_t beg = pos - a->flank, end = pos + a->flank;
            if (pos > clen)
                return nf__err_set(err, NF_ERR_ARG, "%s: POS is past the end of contig %s (length %lld)", where, contig,
                                   (long long) clen);
            if (beg < 1)
                return nf__err_set(err, NF_ERR_ARG,
                                   "%s: the window %lld..%lld starts before contig %s (upstream's pyfaidx refuses "
                                   "it; POS must be > %lld)",
                                   where, (long long) beg, (long long) end, contig, (long long) a->flank);
            const int64_t e2 = end > clen ? clen : end;
            L = e2 - beg + 1;
            if (L < 2 * a->context + 1)
                return nf__err_set(err, NF_ERR_ARG,
                                   "%s: the window %lld..%lld runs %lld nt past the end of contig %s (length %lld); "
                                   "upstream scores a window cut by at most %lld nt, this one leaves no output "
                                   "position",
                                   where, (long long) beg, (long long) end, (long long) (end - clen), contig,
                                   (long long) clen, (long long) (2 * (a->flank - a->context)));
            if (L != 2 * a->flank + 1) a->st.window_cut++;
            hts_pos_t got = 0;
            seq = faidx_fetch_seq64(a->fai, contig, beg - 1, e2 - 1, &got);
            if (!seq || got != L) {
                free(seq);
                return nf__err_set(err, NF_ERR_IO, "%s: --fasta %s: cannot read %s:%lld-%lld", where, a->o.fasta,
                                   contig, (long long) beg, (long long) e2);
            }
            if (a->raw_open) {
                nf_err le = {0};
                const int rrc = nf__fasta_raw_check(&a->raw, contig, beg - 1, e2, &le);
                if (rrc != NF_OK) {
                    free(seq);
                    return nf__err_set(err, rrc, "%s: --fasta %s", where, le.msg);
                }
            }
            for (int64_t k = 0; k < L; k++)
                if (nf_ann_id(seq[k]) < 0) {
                    const int c = (unsigned char) seq[k];
                    free(seq);
                    return nf__err_set(err, NF_ERR_FORMAT,
                                       "%s: --fasta %s:%lld holds '%c' (0x%02x), not one of A, C, G, T, N", where,
                                       contig, (long long) (beg + k), isprint(c) ? c : '?', c);
                }
            if (toupper((unsigned char) seq[a->flank]) != toupper((unsigned char) ref[0])) {
                a->st.scored_ref_mismatch++;
                if (a->h.warning) {
                    char w[2200];
                    snprintf(w, sizeof(w), "%s: REF %s but the genome has %c there; scored anyway, as upstream does",
                             where, nf__esc(e, sizeof(e), ref), seq[a->flank]);
                    a->h.warning(a->h.ctx, w);
                }
            }
        }
        for (int s = 1; s <= 2; s++) {
            if (!(al->strands & s)) continue;
            if (nf__ann_grow((void **) &a->jobs, &a->cap_jobs, a->n_jobs + 1, sizeof(*a->jobs))) {
                free(seq);
                return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
            }
            struct nf_ann_job * jb = &a->jobs[a->n_jobs++];
            jb->rec = ri;
            jb->alt = i;
            jb->L = L;
            jb->strand = s - 1;
            jb->beg = pos - a->flank;
            jb->pos = pos;
            jb->ref = malloc((size_t) L);
            jb->alt_ids = malloc((size_t) L);
            if (!jb->ref || !jb->alt_ids) {
                free(seq);
                return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
            }
            for (int64_t k = 0; k < L; k++) jb->ref[k] = (int8_t) nf_ann_id(seq[k]);
            memcpy(jb->alt_ids, jb->ref, (size_t) L);
            jb->alt_ids[a->flank] = (int8_t) nf_ann_id(alt[0]);
            if (s == 2) /* reverse complement: positions and A<->T, C<->G; N stays */
                for (int w = 0; w < 2; w++) {
                    int8_t * t = w ? jb->alt_ids : jb->ref;
                    for (int64_t x = 0, y = L - 1; x <= y; x++, y--) {
                        const int8_t tx = t[x], ty = t[y];
                        t[x] = ty == 4 ? 4 : (int8_t) (3 - ty);
                        t[y] = tx == 4 ? 4 : (int8_t) (3 - tx);
                    }
                }
            al->pending++;
        }
    }
    free(seq);
    return NF_OK;
}
#endif
