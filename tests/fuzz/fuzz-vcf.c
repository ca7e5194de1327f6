/* fuzz-vcf.c -- libFuzzer target: annotate's VCF record path up to the
 * model (src/genomics/annotate-vcf.c, annotate-score.c): arbitrary bytes as
 * the VCF (plain, gzip, bgzip or BCF: htslib detects), its header and
 * records through htslib's parser (hts_open, bcf_hdr_read, bcf_read, unpack)
 * and annotate's acceptance of a record (nf__ann_read), then the record's
 * handling (nf__ann_record: skip classes, the genes' strands from a fixed
 * GTF, the window fetched from a fixed FASTA through faidx and its raw-byte
 * check, the genome and ALT base checks, the windows built for the forward),
 * and nf_annotate_count_records. The forward itself needs a model: not here.
 * Every window built must be L ids in 0..4 with ALT at the centre. */
#include "annotate-impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size);

static char dir[64], vcf_path[128], fa[128], gtf[128];
static nf_genes * genes;
static faidx_t * fai;
static struct nf_fasta_raw raw;

static int put(const char * path, const void * p, size_t n) {
    FILE * f = fopen(path, "wb");
    if (!f) return -1;
    const int ok = fwrite(p, 1, n, f) == n;
    return fclose(f) == 0 && ok ? 0 : -1;
}

static void setup(void) {
    snprintf(dir, sizeof(dir), "/tmp/fuzz-vcf-XXXXXX");
    if (!mkdtemp(dir)) abort();
    snprintf(vcf_path, sizeof(vcf_path), "%s/in.vcf", dir);
    snprintf(fa, sizeof(fa), "%s/genome.fa", dir);
    snprintf(gtf, sizeof(gtf), "%s/genes.gtf", dir);
    /* chr1: 600 nt in lines of 60; chr2: 70 nt (a window runs past its end) */
    char g[2048];
    size_t n = 0;
    n += (size_t) snprintf(g + n, sizeof(g) - n, ">chr1\n");
    uint64_t x = 7;
    for (int i = 0; i < 600; i++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        g[n++] = "ACGT"[(x >> 33) & 3];
        if (i % 60 == 59) g[n++] = '\n';
    }
    n += (size_t) snprintf(g + n, sizeof(g) - n, ">chr2\n");
    for (int i = 0; i < 70; i++) g[n++] = "ACGTN"[i % 5];
    g[n++] = '\n';
    static const char genes_txt[] = "chr1\tt\tgene\t100\t400\t.\t+\t.\tgene_id \"g1\"; gene_type \"protein_coding\";\n"
                                    "chr1\tt\tgene\t300\t580\t.\t-\t.\tgene_id \"g2\"; gene_type \"lncRNA\";\n"
                                    "chr2\tt\tgene\t1\t70\t.\t+\t.\tgene_id \"g3\"; gene_type \"protein_coding\";\n"
                                    "chr3\tt\tgene\t1\t70\t.\t+\t.\tgene_id \"g4\"; gene_type \"protein_coding\";\n";
    nf_err err;
    if (put(fa, g, n) || put(gtf, genes_txt, sizeof(genes_txt) - 1)) abort();
    if (nf_genes_load(gtf, &genes, &err) != NF_OK) abort();
    if (!(fai = fai_load3(fa, NULL, NULL, FAI_CREATE))) abort();
    if (nf__fasta_raw_open(&raw, fa, &err) != NF_OK) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    if (!dir[0]) setup();
    if (put(vcf_path, data, size)) return 0;
    (void) nf_annotate_count_records(vcf_path);
    nf_annotator a;
    memset(&a, 0, sizeof(a));
    a.o.vcf = vcf_path;
    a.o.fasta = fa;
    a.o.genes = gtf;
    a.o.batch = 64;
    a.o.protein_coding = size > 0 && (data[size - 1] & 1);
    a.context = 20;
    a.flank = a.context + 100;
    a.fai = fai;
    a.raw = raw;
    a.raw_open = 1;
    a.genes = genes;
    a.h.size = 1;
    nf_err err;
    if ((a.in = hts_open(vcf_path, "r")) && a.in->format.category == variant_data && (a.hdr = bcf_hdr_read(a.in))) {
        int64_t index = 0;
        bcf1_t * b = NULL;
        int got;
        while (nf__ann_read(&a, &b, &index, &got, &err) == NF_OK && got) {
            bcf1_t * kept = b;
            b = NULL;
            if (nf__ann_record(&a, kept, index, &err) != NF_OK) break;
        }
        if (b) bcf_destroy(b);
    }
    for (int64_t j = 0; j < a.n_jobs; j++) {
        const struct nf_ann_job * jb = &a.jobs[j];
        if (jb->L < 2 * a.context + 1 || jb->L > 2 * a.flank + 1 || !jb->ref || !jb->alt_ids) __builtin_trap();
        for (int64_t i = 0; i < jb->L; i++)
            if (jb->ref[i] < 0 || jb->ref[i] > 4 || jb->alt_ids[i] < 0 || jb->alt_ids[i] > 4) __builtin_trap();
        free(jb->ref);
        free(jb->alt_ids);
    }
    for (int64_t i = 0; i < a.n_recs; i++) {
        if (a.recs[i].b) bcf_destroy(a.recs[i].b);
        free(a.recs[i].alt);
    }
    free(a.recs);
    free(a.jobs);
    if (a.hdr) bcf_hdr_destroy(a.hdr);
    if (a.in) hts_close(a.in);
    raw = a.raw; /* its contig cache moved on */
    return 0;
}
