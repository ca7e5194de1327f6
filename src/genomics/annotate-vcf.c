/* annotate-vcf.c -- annotate's output (nofall-genomics.h; README "annotate"):
 * .csv / .tsv with upstream's columns and formatting (a pandas index column,
 * '%.2f' score, Python float repr for raw values), or .vcf: every input
 * record, INFO/SPT=ALT|DSPLICE|<15 tissue values> per scored ALT; .vcf.gz /
 * .tsv.gz / .csv.gz: the same bytes, BGZF-compressed; .bcf: the .vcf's
 * header and records as BCF (htslib "wb"). Written to the path the caller
 * gives (the CLI's temporary name); the report's content as JSON. */
#ifdef NF_HAVE_HTSLIB
#include "annotate-impl.h"
#include "io/nf-io.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <htslib/hfile.h>
#include <htslib/tbx.h>
#include <unistd.h>

/* the writer on path (the format from the output's name, opened by name:
 * htslib writes the caller's file by its name, the same inode) */
int nf__ann_open_writer(nf_annotator * a, const char * path, nf_err * err) {
    char e[1024];
    if (!(a->out_path = strdup(path))) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    const char * hmode = a->bcf_u ? "wbu" : "wb";
    if (strcmp(path, "-") == 0) {
        /* standard output, through a duplicate of fd 1: closing the writer
         * leaves fd 1 open (no later file of this process can take it) */
        const int fd = dup(STDOUT_FILENO);
        if (fd < 0)
            return nf__err_set(err, NF_ERR_IO, "--out -: standard output cannot be written: %s", strerror(errno));
        if (a->enc == NF_ANN_PLAIN)
            a->out = fdopen(fd, "wb");
        else if (a->enc == NF_ANN_BGZF)
            a->bgz = bgzf_dopen(fd, "w");
        else {
            hFILE * hf = hdopen(fd, "w");
            if (hf && !(a->hout = hts_hopen(hf, "-", hmode))) hclose_abruptly(hf);
        }
        if (!a->out && !a->bgz && !a->hout) {
            close(fd);
            return nf__err_set(err, NF_ERR_IO, "--out -: standard output cannot be written");
        }
        return NF_OK;
    }
    if (a->enc == NF_ANN_PLAIN)
        a->out = fopen(path, "wb");
    else if (a->enc == NF_ANN_BGZF)
        a->bgz = bgzf_open(path, "w");
    else
        a->hout = hts_open(path, hmode);
    if (!a->out && !a->bgz && !a->hout)
        return nf__err_set(err, NF_ERR_IO, "--out %s: cannot write", nf__esc(e, sizeof(e), a->o.out));
    return NF_OK;
}

static void nf_ann_field(kstring_t * ks, const char * s, char sep) {
    /* pandas' QUOTE_MINIMAL */
    if (strchr(s, sep) || strchr(s, '"') || strchr(s, '\n') || strchr(s, '\r')) {
        kputc('"', ks);
        for (const char * p = s; *p; p++) {
            if (*p == '"') kputc('"', ks);
            kputc(*p, ks);
        }
        kputc('"', ks);
    } else
        kputs(s, ks);
}

/* a->ks to --out */
static int nf_ann_put(nf_annotator * a, nf_err * err) {
    char e[1024];
    if (!a->ks.l) return NF_OK;
    const int ok = a->enc == NF_ANN_BGZF ? bgzf_write(a->bgz, a->ks.s, a->ks.l) == (ssize_t) a->ks.l
                                         : fwrite(a->ks.s, 1, a->ks.l, a->out) == a->ks.l;
    if (!ok) return nf__err_set(err, NF_ERR_IO, "--out %s: write failed", nf__esc(e, sizeof(e), a->o.out));
    return NF_OK;
}

/* SpliceAI's layout (NF_ANNOTATE_FORMAT_SPLICEAI): INFO/SpliceAI, one
 * ALLELE|SYMBOL|DS_AG|DS_AL|DS_DG|DS_DL|DP_AG|DP_AL|DP_DG|DP_DL|Consequence
 * entry per scored ALT and overlapping gene (the gene's strand's deltas,
 * '%.2f' as SpliceAI writes them; SpliceAI's ten fields first, in its order,
 * then Consequence, always '.', which bcftools +split-vep before 1.17
 * requires); INFO/SPT_DS and SPT_TISSUES per ALT (Number=A: '.'
 * for an ALT not scored; SPT_TISSUES '.' too for one in no gene). Nothing
 * when no ALT is scored. */
static int nf_ann_info_spliceai(nf_annotator * a, const struct nf_ann_rec * rc, bcf1_t * b, nf_err * err) {
    char e[1024];
    int any = 0;
    for (int i = 0; i < rc->n_alt; i++) any |= rc->alt[i].skip < 0;
    if (!any) return NF_OK;
    kstring_t sai = {0, 0, NULL}, tis = {0, 0, NULL};
    float * ds = malloc((size_t) rc->n_alt * sizeof(float));
    if (!ds) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    char cn[1024];
    const char * gcontig = nf__ann_gene_contig(a, bcf_seqname(a->hdr, b), cn, sizeof(cn));
    for (int i = 0; i < rc->n_alt; i++) {
        const struct nf_ann_alt * al = &rc->alt[i];
        if (i) kputc(',', &tis);
        if (al->skip >= 0) {
            bcf_float_set_missing(ds[i]);
            kputc('.', &tis);
            continue;
        }
        ds[i] = a->o.raw_score ? al->dsplice : roundf(al->dsplice * 100.0f) / 100.0f;
        if (!al->strands) {
            kputc('.', &tis);
            continue;
        }
        char vals[NF_ANNOTATE_TISSUES][40];
        nf__ann_tissue_values(a, al, vals);
        for (int t = 0; t < NF_ANNOTATE_TISSUES; t++) {
            if (t) kputc('|', &tis);
            if (a->o.raw_score)
                ksprintf(&tis, "%.6g", (double) al->dtissue[t]);
            else
                kputs(vals[t], &tis);
        }
        const char * names[64];
        char strands[64];
        const int ng = nf_genes_at(a->genes, gcontig, b->pos + 1, a->o.protein_coding, names, strands, 64);
        for (int k = 0; k < ng && k < 64; k++) {
            const int s = strands[k] == '-';
            if (!(al->strands & (1 << s))) continue;
            if (sai.l) kputc(',', &sai);
            ksprintf(&sai, "%s|%s", b->d.allele[i + 1], names[k]);
            for (int d = 0; d < 4; d++) ksprintf(&sai, "|%.2f", (double) al->sai_ds[s][d] + 0.0);
            for (int d = 0; d < 4; d++) ksprintf(&sai, "|%d", (int) al->sai_dp[s][d]);
            kputs("|.", &sai); /* Consequence: none predicted */
        }
    }
    int bad = bcf_update_info_float(a->hdr, b, "SPT_DS", ds, rc->n_alt) < 0 ||
              bcf_update_info_string(a->hdr, b, "SPT_TISSUES", tis.s) < 0 ||
              (sai.l && bcf_update_info_string(a->hdr, b, "SpliceAI", sai.s) < 0);
    free(ds);
    free(sai.s);
    free(tis.s);
    if (bad) return nf__err_set(err, NF_ERR_IO, "%s: cannot set its INFO", nf__ann_where(a, rc, e, sizeof(e)));
    return NF_OK;
}

/* write the pending records (all their jobs done), in input order */
int nf__ann_flush(nf_annotator * a, nf_err * err) {
    char e[1024];
    for (int64_t r = 0; r < a->n_recs; r++) {
        struct nf_ann_rec * rc = &a->recs[r];
        bcf1_t * b = rc->b;
        a->ks.l = 0;
        char vals[NF_ANNOTATE_TISSUES][40], score[32];
        if (a->fmt == NF_ANN_VCF) {
            kstring_t info = {0, 0, NULL};
            if (a->o.format == NF_ANNOTATE_FORMAT_SPLICEAI) NF_TRY(nf_ann_info_spliceai(a, rc, b, err));
            for (int i = 0; a->o.format == NF_ANNOTATE_FORMAT_SPTRANSFORMER && i < rc->n_alt; i++) {
                const struct nf_ann_alt * al = &rc->alt[i];
                if (al->skip >= 0) continue;
                nf__ann_tissue_values(a, al, vals);
                snprintf(score, sizeof(score), "%.2f", (double) al->dsplice);
                if (info.l) kputc(',', &info);
                kputs(b->d.allele[i + 1], &info);
                kputc('|', &info);
                if (a->o.raw_score) {
                    char raw[40];
                    nf__py_float_repr((double) al->dsplice, raw, sizeof(raw));
                    kputs(raw, &info);
                } else
                    kputs(score, &info);
                for (int t = 0; t < NF_ANNOTATE_TISSUES; t++) {
                    kputc('|', &info);
                    kputs(vals[t], &info);
                }
            }
            if (info.l && bcf_update_info_string(a->hdr, b, "SPT", info.s) < 0) {
                free(info.s);
                return nf__err_set(err, NF_ERR_IO, "%s: cannot set INFO/SPT", nf__ann_where(a, rc, e, sizeof(e)));
            }
            free(info.s);
            if (a->enc == NF_ANN_BCF) {
                /* htslib refuses a record whose contig or tag the header
                 * lacks (the header is written: it would make a broken BCF) */
                if (b->errcode & (BCF_ERR_CTG_UNDEF | BCF_ERR_TAG_UNDEF))
                    return nf__err_set(err, NF_ERR_FORMAT,
                                       "%s: its %s is not declared in the --vcf header; a .bcf --out needs every "
                                       "contig and INFO / FORMAT field declared (declare it, or write .vcf / "
                                       ".vcf.gz)",
                                       nf__ann_where(a, rc, e, sizeof(e)),
                                       b->errcode & BCF_ERR_CTG_UNDEF ? "contig" : "INFO or FORMAT field");
                if (bcf_write(a->hout, a->hdr, b) < 0)
                    return nf__err_set(err, NF_ERR_IO,
                                       "%s: cannot write it as BCF to --out %s (a full disk, or a contig, INFO or "
                                       "FORMAT field the --vcf header does not declare: declare it, or write .vcf / "
                                       ".vcf.gz)",
                                       nf__ann_where(a, rc, e, sizeof(e)), a->o.out);
            } else if (vcf_format(a->hdr, b, &a->ks) < 0)
                return nf__err_set(err, NF_ERR_IO, "%s: cannot format the output line",
                                   nf__ann_where(a, rc, e, sizeof(e)));
            a->st.rows_written++;
        } else {
            const char sep = a->fmt == NF_ANN_CSV ? ',' : '\t';
            for (int i = 0; i < rc->n_alt; i++) {
                const struct nf_ann_alt * al = &rc->alt[i];
                if (al->skip >= 0) continue;
                nf__ann_tissue_values(a, al, vals);
                snprintf(score, sizeof(score), "%.2f", (double) al->dsplice);
                char idx[32], pos[32];
                snprintf(idx, sizeof(idx), "%lld", (long long) a->st.rows_written++);
                snprintf(pos, sizeof(pos), "%lld", (long long) b->pos + 1);
                const char * id = b->d.id && strcmp(b->d.id, ".") != 0 ? b->d.id : "";
                const char * cols[6] = {idx, bcf_seqname(a->hdr, b), pos, id, b->d.allele[0], b->d.allele[i + 1]};
                for (int c = 0; c < 6; c++) {
                    if (c) kputc(sep, &a->ks);
                    nf_ann_field(&a->ks, cols[c], sep);
                }
                kputc(sep, &a->ks);
                kputs(score, &a->ks);
                for (int t = 0; t < NF_ANNOTATE_TISSUES; t++) {
                    kputc(sep, &a->ks);
                    nf_ann_field(&a->ks, vals[t], sep);
                }
                kputc('\n', &a->ks);
            }
        }
        NF_TRY(nf_ann_put(a, err));
        bcf_destroy(b);
        free(rc->alt);
        rc->b = NULL;
        rc->alt = NULL;
        a->written++;
    }
    a->n_recs = 0;
    if (a->h.progress) a->h.progress(a->h.ctx, a->written);
    return NF_OK;
}

/* SpliceAI's header lines, and one saying what made the file: nofall's
 * version, the options that change values, the model and its files' SHA-256 */
static int nf_ann_header_spliceai(nf_annotator * a, nf_err * err) {
    char e[1024];
    static const char * const ids[3] = {"SpliceAI", "SPT_DS", "SPT_TISSUES"};
    for (int i = 0; i < 3; i++)
        if (bcf_hdr_get_hrec(a->hdr, BCF_HL_INFO, "ID", ids[i], NULL))
            return nf__err_set(err, NF_ERR_ARG,
                               "--vcf %s: already has an INFO/%s field; annotate writes it (or use --format "
                               "sptransformer)",
                               nf__esc(e, sizeof(e), a->o.vcf), ids[i]);
    kstring_t l[4] = {{0, 0, NULL}, {0, 0, NULL}, {0, 0, NULL}, {0, 0, NULL}};
    ksprintf(&l[0], "##nofall_annotate=<Version=\"%s\",Format=\"spliceai\",Options=\"%s%s\",Model=\"%s\",Files=\"",
             nf_version(), a->o.raw_score ? " --raw-score" : "", a->o.protein_coding ? " --protein-coding" : "",
             a->o.model);
    for (int i = 0; i < nf_model_file_count(a->m); i++) {
        char hex[65];
        NF_TRY(nf_model_file_sha256(a->m, i, hex, err));
        const char *path = nf_model_file_path(a->m, i), *base = strrchr(path, '/');
        ksprintf(&l[0], "%s%s:sha256:%s", i ? " " : "", base ? base + 1 : path, hex);
    }
    kputs("\">", &l[0]);
    ksprintf(&l[1],
             "##INFO=<ID=SpliceAI,Number=.,Type=String,Description=\"SpliceAI-layout annotation by nofall from "
             "SpTransformer's acceptor and donor probabilities: delta scores (DS) and delta positions (DP) for "
             "acceptor gain (AG), acceptor loss (AL), donor gain (DG) and donor loss (DL), one entry per ALT and "
             "overlapping gene, over the %lld positions around the variant; Consequence is always . (for "
             "bcftools +split-vep before 1.17, which needs the field). Format: "
             "ALLELE|SYMBOL|DS_AG|DS_AL|DS_DG|DS_DL|DP_AG|DP_AL|DP_DG|DP_DL|Consequence\">",
             (long long) (2 * (a->flank - a->context) + 1));
    ksprintf(&l[2],
             "##INFO=<ID=SPT_DS,Number=A,Type=Float,Description=\"SpTransformer's DELTA_SPLICE per ALT (%s): max "
             "|a_alt - a_ref| over the central positions, a = max(acceptor, donor), both strands of the overlapping "
             "genes; . for an ALT not scored\">",
             a->o.raw_score ? "unrounded" : "rounded to 2 decimals, as upstream");
    ksprintf(&l[3],
             "##INFO=<ID=SPT_TISSUES,Number=A,Type=String,Description=\"SpTransformer's tissue usage per ALT, %s in "
             "the order ",
             a->o.raw_score ? "the raw deltas (%.6g)" : "Y/N: the tissue z-score over its 95% threshold");
    for (int t = 0; t < NF_ANNOTATE_TISSUES; t++) ksprintf(&l[3], "%s%s", t ? "|" : "", nf__ann_tissues[t]);
    kputs("; . for an ALT not scored or in no gene\">", &l[3]);
    int r = 0;
    for (int i = 0; i < 4; i++) {
        r |= bcf_hdr_append(a->hdr, l[i].s) < 0;
        free(l[i].s);
    }
    if (r || bcf_hdr_sync(a->hdr) < 0) return nf__err_set(err, NF_ERR_IO, "cannot add the annotation's header lines");
    return NF_OK;
}

int nf__ann_write_header(nf_annotator * a, nf_err * err) {
    char e[1024];
    a->ks.l = 0;
    if (a->fmt == NF_ANN_VCF && a->o.format == NF_ANNOTATE_FORMAT_SPLICEAI) {
        NF_TRY(nf_ann_header_spliceai(a, err));
        if (a->enc == NF_ANN_BCF) {
            if (bcf_hdr_write(a->hout, a->hdr) < 0)
                return nf__err_set(err, NF_ERR_IO, "--out %s: write failed", nf__esc(e, sizeof(e), a->o.out));
            return NF_OK;
        }
        if (bcf_hdr_format(a->hdr, 0, &a->ks) < 0) return nf__err_set(err, NF_ERR_IO, "cannot format the header");
    } else if (a->fmt == NF_ANN_VCF) {
        if (bcf_hdr_get_hrec(a->hdr, BCF_HL_INFO, "ID", "SPT", NULL))
            return nf__err_set(err, NF_ERR_ARG, "--vcf %s: already has an INFO/SPT field; annotate writes it",
                               nf__esc(e, sizeof(e), a->o.vcf));
        kstring_t line = {0, 0, NULL};
        ksprintf(&line,
                 "##INFO=<ID=SPT,Number=.,Type=String,Description=\"SpTransformer (nofall annotate%s): per scored "
                 "ALT, ALT|DELTA_SPLICE|",
                 a->o.raw_score ? " --raw-score" : "");
        for (int t = 0; t < NF_ANNOTATE_TISSUES; t++) ksprintf(&line, "%s%s", t ? "|" : "", nf__ann_tissues[t]);
        ksprintf(&line,
                 "; DELTA_SPLICE = max |a_alt - a_ref| over the 201 central positions, a = max(acceptor, "
                 "donor), both strands of the overlapping genes; the tissue values are %s\">",
                 a->o.raw_score ? "the raw tissue-usage deltas" : "Y/N: the tissue z-score over its 95% threshold");
        const int r = bcf_hdr_append(a->hdr, line.s);
        free(line.s);
        if (r < 0 || bcf_hdr_sync(a->hdr) < 0) return nf__err_set(err, NF_ERR_IO, "cannot add the INFO/SPT header");
        if (a->enc == NF_ANN_BCF) {
            if (bcf_hdr_write(a->hout, a->hdr) < 0)
                return nf__err_set(err, NF_ERR_IO, "--out %s: write failed", nf__esc(e, sizeof(e), a->o.out));
            return NF_OK;
        }
        if (bcf_hdr_format(a->hdr, 0, &a->ks) < 0) return nf__err_set(err, NF_ERR_IO, "cannot format the header");
    } else {
        const char sep = a->fmt == NF_ANN_CSV ? ',' : '\t';
        static const char * const cols[6] = {"#CHROM", "POS", "ID", "REF", "ALT", "score"};
        for (int c = 0; c < 6; c++) {
            kputc(sep, &a->ks);
            kputs(cols[c], &a->ks);
        }
        for (int t = 0; t < NF_ANNOTATE_TISSUES; t++) {
            kputc(sep, &a->ks);
            kputs(nf__ann_tissues[t], &a->ks);
        }
        kputc('\n', &a->ks);
    }
    return nf_ann_put(a, err);
}

/* the output ended (the last blocks of a compressed / BCF one, the BGZF EOF block);
 * NF_OK, or the error when it is still NF_OK */
int nf__ann_close_out(nf_annotator * a, int rc, nf_err * err) {
    char e[1024];
    int bad = 0;
    if (a->bgz) bad |= bgzf_close(a->bgz) < 0;
    if (a->hout) bad |= hts_close(a->hout) != 0;
    a->bgz = NULL;
    a->hout = NULL;
    if (bad && rc == NF_OK)
        return nf__err_set(err, NF_ERR_IO, "--out %s: write failed", nf__esc(e, sizeof(e), a->o.out));
    if (a->out) { /* a plain output: its buffer (the caller syncs the file) */
        int ok = fflush(a->out) == 0 && !ferror(a->out);
        const int en = errno;
        ok = fclose(a->out) == 0 && ok;
        a->out = NULL;
        if (!ok && rc == NF_OK)
            return nf__err_set(err, NF_ERR_IO, "%s: write failed: %s", nf__esc(e, sizeof(e), a->o.out),
                               strerror(en ? en : EIO));
    }
    return rc;
}

/* --write-index: only a bgzipped VCF (CSI, TBI) or a compressed BCF (CSI) file */
int nf__ann_check_index(const nf_annotator * a, nf_err * err) {
    const nf_annotate_opts * o = &a->o;
    char e[1024];
    if (!o->write_index) return NF_OK;
    const char * f = o->write_index == NF_ANNOTATE_INDEX_TBI ? "--write-index=tbi" : "--write-index";
    if (strcmp(o->out, "-") == 0)
        return nf__err_set(err, NF_ERR_ARG,
                           "%s: --out - (standard output) cannot be indexed; write a file (--out OUT.vcf.gz or "
                           "OUT.bcf)",
                           f);
    nf__esc(e, sizeof(e), o->out);
    if (a->fmt != NF_ANN_VCF)
        return nf__err_set(err, NF_ERR_ARG, "%s: --out %s is a table, not a VCF or BCF; write OUT.vcf.gz or OUT.bcf", f,
                           e);
    if (a->enc == NF_ANN_PLAIN)
        return nf__err_set(err, NF_ERR_ARG,
                           "%s: --out %s is an uncompressed VCF (%s), which cannot be indexed; write a bgzipped VCF "
                           "(-O z, OUT.vcf.gz) or a BCF (-O b, OUT.bcf)",
                           f, e, o->out_type ? "-O v" : "by its name");
    if (a->enc == NF_ANN_BCF && a->bcf_u)
        return nf__err_set(err, NF_ERR_ARG,
                           "%s: --out %s is an uncompressed BCF (-O u), which cannot be indexed; write a compressed "
                           "one (-O b)",
                           f, e);
    if (a->enc == NF_ANN_BCF && o->write_index == NF_ANNOTATE_INDEX_TBI)
        return nf__err_set(err, NF_ERR_ARG,
                           "%s: --out %s is a BCF, which takes a CSI index only (--write-index or --write-index=csi)",
                           f, e);
    return NF_OK;
}

/* the closed output indexed by htslib into index_path: CSI with bcftools'
 * min_shift 14, or TBI (min_shift 0); re-read from the file just written */
int nf_annotate_write_index(nf_annotator * a, const char * index_path, nf_err * err) {
    char e[1024];
    if (!a->o.write_index)
        return nf__err_set(err, NF_ERR_ARG, "annotate: nf_annotate_write_index without the options' write_index");
    if (!a->out_path) return NF_OK; /* not the writer */
    if (a->out || a->bgz || a->hout)
        return nf__err_set(err, NF_ERR_ARG, "annotate: nf_annotate_write_index before nf_annotate_close");
    if (!index_path || !index_path[0]) return nf__err_set(err, NF_ERR_ARG, "--write-index: no index path");
    const int tbi = a->o.write_index == NF_ANNOTATE_INDEX_TBI;
    errno = 0;
    const int r = bcf_index_build3(a->out_path, index_path, tbi ? 0 : 14, 0);
    if (r == 0) return NF_OK;
    nf__esc(e, sizeof(e), a->o.out);
    if (r == -1)
        return nf__err_set(err, NF_ERR_FORMAT,
                           "--write-index: --out %s cannot be indexed: its records (in the --vcf's order) are not "
                           "sorted by position within each contig, or a contig's records are not together%s; sort "
                           "the --vcf first (bcftools sort)",
                           e, tbi ? ", or a position is past what TBI holds (2^29; --write-index=csi)" : "");
    if (r == -4)
        return nf__err_set(err, NF_ERR_IO, "--write-index: the index of --out %s: write failed: %s", e,
                           strerror(errno ? errno : EIO));
    return nf__err_set(err, NF_ERR_IO, "--write-index: --out %s: htslib could not read it back to index it", e);
}

const char * nf__ann_where(const nf_annotator * a, const struct nf_ann_rec * r, char * buf, size_t n) {
    char e[256];
    snprintf(buf, n, "--vcf record %lld (%s:%lld %s)", (long long) r->index,
             nf__esc(e, sizeof(e), bcf_seqname(a->hdr, r->b)), (long long) r->b->pos + 1,
             r->b->d.id ? r->b->d.id : ".");
    return buf;
}

/* the malformed-record message (the same on every rank: all read the VCF) */
static int nf_ann_malformed(const nf_annotator * a, int64_t bad, nf_err * err) {
    char e[1024];
    return nf__err_set(err, NF_ERR_FORMAT,
                       "--vcf %s: data record %lld is malformed (htslib could not parse it, or POS is not a positive "
                       "integer)",
                       nf__esc(e, sizeof(e), a->o.vcf), (long long) bad);
}

/* read one record into *b (annotate.c's loops; tests/fuzz/fuzz-vcf.c): *got 1, or 0 at the end; NF_OK or the error */
int nf__ann_read(nf_annotator * a, bcf1_t ** b, int64_t * index, int * got, nf_err * err) {
    *got = 0;
    if (!*b && !(*b = bcf_init())) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    const int r = bcf_read(a->in, a->hdr, *b);
    if (r == -1) return NF_OK;
    if (r < -1) return nf_ann_malformed(a, *index + 1, err);
    ++*index;
    if (((*b)->errcode & ~(BCF_ERR_CTG_UNDEF | BCF_ERR_TAG_UNDEF)) || bcf_unpack(*b, BCF_UN_STR) < 0 || (*b)->pos < 0 ||
        (*b)->n_allele < 1)
        return nf_ann_malformed(a, *index, err);
    *got = 1;
    return NF_OK;
}

/* the data records of a VCF for a progress bar, 0 when not cheaply known:
 * its index's counts (.tbi / .csi next to it), else one pass over it when it
 * is a regular file (never a pipe or a FIFO: that would consume it) */
long long nf_annotate_count_records(const char * path) {
    /* htslib's own log echoes names and regions raw (an ESC reaches the
     * terminal) and this htslib has no log callback: silenced, nofall reports
     * every failure itself, escaped (README "Hostile input") */
    hts_set_log_level(HTS_LOG_OFF);
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) return 0;
    htsFile * f = hts_open(path, "r");
    if (!f) return 0;
    bcf_hdr_t * h = f->format.category == variant_data ? bcf_hdr_read(f) : NULL;
    long long n = 0;
    if (h) {
        hts_idx_t * idx = NULL;
        tbx_t * tbx = NULL;
        if (f->format.format == bcf)
            idx = bcf_index_load3(path, NULL, HTS_IDX_SILENT_FAIL);
        else if (f->format.compression == bgzf && (tbx = tbx_index_load3(path, NULL, HTS_IDX_SILENT_FAIL)))
            idx = tbx->idx;
        if (idx) {
            for (int i = 0; i < hts_idx_nseq(idx); i++) {
                uint64_t m = 0, u = 0;
                if (hts_idx_get_stat(idx, i, &m, &u) == 0) n += (long long) (m + u);
            }
            if (tbx)
                tbx_destroy(tbx);
            else
                hts_idx_destroy(idx);
        }
        if (n == 0 && f->format.format == bcf) {
            bcf1_t * b = bcf_init();
            while (b && bcf_read(f, h, b) == 0) n++;
            if (b) bcf_destroy(b);
        } else if (n == 0) {
            kstring_t ks = {0, 0, NULL};
            while (hts_getline(f, 2 /* KS_SEP_LINE */, &ks) >= 0)
                if (ks.l && ks.s[0] != '#') n++;
            free(ks.s);
        }
        bcf_hdr_destroy(h);
    }
    hts_close(f);
    return n;
}

char * nf_annotate_report_json(const nf_annotator * a, nf_err * err) {
    cJSON * d = cJSON_CreateObject();
    cJSON_AddStringToObject(d, "command", "annotate");
    cJSON_AddStringToObject(d, "version", NF_VERSION);
    cJSON_AddStringToObject(d, "model", a->o.model);
    cJSON_AddStringToObject(d, "vcf", a->o.vcf);
    cJSON_AddStringToObject(d, "fasta", a->o.fasta);
    cJSON_AddStringToObject(d, "genes", a->o.genes);
    cJSON_AddStringToObject(d, "out", a->o.out);
    if (a->o.write_index) { /* the index's name (bcftools': OUT.csi / OUT.tbi) */
        kstring_t ix = {0, 0, NULL};
        ksprintf(&ix, "%s%s", a->o.out, nf_annotate_index_suffix(&a->o));
        cJSON_AddStringToObject(d, "index", ix.s ? ix.s : "");
        free(ix.s);
    }
    cJSON_AddStringToObject(d, "device", a->o.device);
    cJSON_AddBoolToObject(d, "raw_score", a->o.raw_score);
    cJSON_AddBoolToObject(d, "protein_coding_only", a->o.protein_coding);
    cJSON_AddNumberToObject(d, "batch", (double) a->o.batch);
    if (a->h.size > 1) cJSON_AddNumberToObject(d, "ranks", (double) a->h.size); /* the counts are totals */
    const nf_annotate_stats * s = &a->st;
    cJSON_AddNumberToObject(d, "records", (double) s->records);
    cJSON_AddNumberToObject(d, "alts", (double) s->alts);
    cJSON_AddNumberToObject(d, "scored", (double) s->scored);
    cJSON_AddNumberToObject(d, "scored_no_gene", (double) s->scored_no_gene);
    cJSON_AddNumberToObject(d, "scored_ref_mismatch", (double) s->scored_ref_mismatch);
    cJSON_AddNumberToObject(d, "records_window_cut_at_contig_end", (double) s->window_cut);
    cJSON * sk = cJSON_AddObjectToObject(d, "skipped");
    for (int i = 0; i < NF_ANNOTATE_SKIP_N; i++)
        cJSON_AddNumberToObject(sk, nf_annotate_skip_name(i), (double) s->skipped[i]);
    cJSON_AddNumberToObject(d, "rows_written", (double) s->rows_written);
    cJSON_AddNumberToObject(d, "forwards", (double) s->forwards);
    cJSON_AddNumberToObject(d, "windows", (double) s->windows);
    cJSON_AddBoolToObject(d, "batch_reuse", !a->o.no_reuse);
    cJSON_AddNumberToObject(d, "windows_computed", (double) s->windows_computed);
    cJSON_AddNumberToObject(d, "windows_reusing_encoder_rows", (double) s->windows_reused);
    cJSON_AddNumberToObject(d, "forward_ms", s->forward_ms);
    cJSON_AddNumberToObject(d, "wall_ms", nf__ann_now_ms() - a->t_start);
    char * text = cJSON_Print(d);
    cJSON_Delete(d);
    if (!text) nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    return text;
}
#endif
