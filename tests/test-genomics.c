/* test-genomics.c -- the public genomics API (include/nofall-genomics.h) on
 * its own, not through the CLI: on the annotate fixtures (tests/fixtures/
 * annotate: a synthetic genome, GTF and VCF) and a small SpTransformer model
 * (gen-weights: dim 16, depth 1, context 100),
 *   - nf_annotate_file writes the same bytes as `nofall annotate` (.vcf, a
 *     --raw-score .tsv.gz), and its report the same content but the timings
 *     and the output's name;
 *   - the staged API with hooks: the progress reaches every record, one
 *     warning per REF mismatch, the counts as the report's;
 *   - refusals with result codes and messages, nothing printed;
 *   - nf_seq_fasta / nf_seq_string against the FASTA's own letters, nf_genes
 *     against the GTF's gene rows.
 *
 * usage: test-genomics NOFALL_BIN FIXTURES_DIR TMP_DIR */
#define _DEFAULT_SOURCE /* realpath */
#include "nofall-genomics.h"
#include "nf-test.h"

#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *bin, *fx, *tmp;

static int sh(const char * fmt, ...) {
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    return system(cmd);
}

/* the whole file, its length in *n (NULL if unreadable) */
static char * slurp(const char * p, size_t * n) {
    FILE * f = fopen(p, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, len = 0;
    char * s = malloc(cap + 1);
    size_t r;
    while (s && (r = fread(s + len, 1, cap - len, f)) > 0) {
        len += r;
        if (len == cap) {
            char * q = realloc(s, 2 * cap + 1);
            if (!q) {
                free(s);
                s = NULL;
                break;
            }
            s = q;
            cap *= 2;
        }
    }
    fclose(f);
    if (s) s[len] = '\0';
    if (n) *n = len;
    return s;
}

static int same_bytes(const char * a, const char * b) {
    size_t na = 0, nb = 0;
    char *x = slurp(a, &na), *y = slurp(b, &nb);
    const int same = x && y && na == nb && na > 0 && memcmp(x, y, na) == 0;
    free(x);
    free(y);
    return same;
}

/* the two reports' members equal but the timings and "out" */
static void same_report(const char * lib, const char * cli) {
    char *a = slurp(lib, NULL), *b = slurp(cli, NULL);
    cJSON *x = a ? cJSON_Parse(a) : NULL, *y = b ? cJSON_Parse(b) : NULL;
    CHECK(x && y, "reports %s, %s not read", lib, cli);
    int n = 0;
    for (const cJSON * m = x ? x->child : NULL; y && m; m = m->next, n++) {
        if (!strcmp(m->string, "wall_ms") || !strcmp(m->string, "forward_ms") || !strcmp(m->string, "out")) continue;
        const cJSON * o = cJSON_GetObjectItemCaseSensitive(y, m->string);
        CHECK(o && cJSON_Compare(m, o, 1), "report member %s differs from the CLI's", m->string);
    }
    CHECK(x && y && n == cJSON_GetArraySize(y), "%d report members, the CLI's %d", n, y ? cJSON_GetArraySize(y) : -1);
    cJSON_Delete(x);
    cJSON_Delete(y);
    free(a);
    free(b);
}

static void opts(nf_annotate_opts * o, const char * out) {
    nf_annotate_opts_init(o);
    o->model = "ms";
    o->vcf = "input.vcf";
    o->fasta = "genome.fa";
    o->genes = "genes.gtf";
    o->out = out;
}

/* the library's output vs the CLI's for one output name (and flags) */
static void vs_cli(const char * name, int raw) {
    char lib[4096], cli[4096], rep[4200], crep[4200];
    snprintf(lib, sizeof(lib), "lib-%s", name);
    snprintf(cli, sizeof(cli), "cli-%s", name);
    snprintf(rep, sizeof(rep), "%s.report.json", lib);
    snprintf(crep, sizeof(crep), "%s.report.json", cli);
    const int crc = sh("'%s' annotate --model ms --vcf input.vcf --fasta genome.fa --genes genes.gtf --out '%s' "
                       "--quiet %s > /dev/null 2>&1",
                       bin, cli, raw ? "--raw-score" : "");
    CHECK(crc == 0, "nofall annotate --out %s: exit %d", cli, crc);
    nf_annotate_opts o;
    opts(&o, lib);
    o.raw_score = raw;
    nf_annotate_stats st;
    nf_err err = {0};
    CHECK_RC(nf_annotate_file(&o, rep, &st, &err), NF_OK, &err);
    CHECK(same_bytes(lib, cli), "%s: the library's bytes differ from the CLI's", name);
    same_report(rep, crep);
    CHECK(st.records == 19 && st.alts == 21 && st.scored == 17 && st.scored_no_gene == 3 &&
              st.scored_ref_mismatch == 1 && st.skipped[NF_ANNOTATE_SKIP_NOT_SNV] == 3 &&
              st.skipped[NF_ANNOTATE_SKIP_CONTIG_NAME] == 1 && st.ranks == 1,
          "%s: counts %lld records %lld alts %lld scored", name, (long long) st.records, (long long) st.alts,
          (long long) st.scored);
    printf("%s: the library's output = the CLI's (%lld rows), the report's content too\n", name,
           (long long) st.rows_written);
}

struct seen {
    int64_t last, calls;
    int warnings;
    char warning[512], first[512];
};
static void on_progress(void * ctx, int64_t written) {
    struct seen * s = ctx;
    s->last = written;
    s->calls++;
}
static void on_warning(void * ctx, const char * msg) {
    struct seen * s = ctx;
    if (!s->warnings++) snprintf(s->first, sizeof(s->first), "%s", msg);
    snprintf(s->warning, sizeof(s->warning), "%s", msg);
}

static void staged(void) {
    struct seen s = {0};
    nf_annotate_hooks h = {0};
    h.ctx = &s;
    h.progress = on_progress;
    h.warning = on_warning;
    nf_annotate_opts o;
    opts(&o, "staged.csv"); /* the format from o.out, the bytes to the path open is given */
    nf_annotator * a = NULL;
    nf_err err = {0};
    CHECK_RC(nf_annotate_new(&o, &h, &a, &err), NF_OK, &err);
    CHECK_RC(nf_annotate_open(a, "staged.tmp", &err), NF_OK, &err);
    CHECK_RC(nf_annotate_load(a, &err), NF_OK, &err);
    CHECK_RC(nf_annotate_run(a, &err), NF_OK, &err);
    CHECK_RC(nf_annotate_close(a, &err), NF_OK, &err);
    nf_annotate_stats st;
    nf_annotate_get_stats(a, &st);
    char * js = nf_annotate_report_json(a, &err);
    cJSON * r = js ? cJSON_Parse(js) : NULL;
    const cJSON * rw = cJSON_GetObjectItemCaseSensitive(r, "rows_written");
    CHECK(cJSON_IsNumber(rw) && (int64_t) rw->valuedouble == st.rows_written && st.rows_written == 17,
          "report rows_written vs the counts' %lld", (long long) st.rows_written);
    cJSON_Delete(r);
    free(js);
    nf_annotate_free(a);
    CHECK(s.last == 19 && s.calls >= 1, "progress: last %lld after %lld calls, want 19", (long long) s.last,
          (long long) s.calls);
    /* the REF mismatch, then (after the run) the skip reason over 10 % of the ALTs: 3 of 21 not SNVs */
    CHECK(s.warnings == 2 && strstr(s.first, "--vcf record 13 (chr1:11000 refmm): REF C but the genome has") &&
              !strstr(s.first, "warning") && strstr(s.warning, "3 of 21 ALTs (14%) not scored (not_snv)"),
          "warnings: %d, first '%s', last '%s'", s.warnings, s.first, s.warning);
    /* a .csv through the CLI: the same bytes as the staged run wrote */
    const int crc = sh("'%s' annotate --model ms --vcf input.vcf --fasta genome.fa --genes genes.gtf --out "
                       "cli-staged.csv --quiet > /dev/null 2>&1",
                       bin);
    CHECK(crc == 0 && same_bytes("staged.tmp", "cli-staged.csv"), "staged .csv differs from the CLI's");
    printf("staged API with hooks: progress to 19 records, 1 REF-mismatch warning, the CLI's .csv\n");
}

static void refusals(void) {
    nf_annotate_opts o;
    nf_annotator * a = (nf_annotator *) 1;
    nf_err err = {0};
    opts(&o, "x.txt");
    CHECK_RC(nf_annotate_new(&o, NULL, &a, &err), NF_ERR_ARG, &err);
    CHECK_MSG(&err, "the name must end in .vcf, .vcf.gz, .bcf, .tsv, .tsv.gz, .csv or .csv.gz");
    CHECK(a == NULL, "no annotator after a refusal");
    opts(&o, "input.vcf");
    CHECK_RC(nf_annotate_new(&o, NULL, &a, &err), NF_ERR_ARG, &err);
    CHECK_MSG(&err, "is an input");
    opts(&o, "y.vcf");
    o.model = fx; /* no config.json: not a SpTransformer model */
    CHECK_RC(nf_annotate_new(&o, NULL, &a, &err), NF_ERR_ARG, &err);
    CHECK_MSG(&err, "not a SpTransformer model");
    opts(&o, "y.vcf");
    o.genes = "missing.gtf";
    CHECK_RC(nf_annotate_file(&o, NULL, NULL, &err), NF_ERR_IO, &err);
    CHECK_MSG(&err, "missing.gtf: cannot open");
    opts(&o, "y.vcf"); /* the stages out of order, no output */
    CHECK_RC(nf_annotate_new(&o, NULL, &a, &err), NF_OK, &err);
    if (a) {
        CHECK_RC(nf_annotate_open(a, NULL, &err), NF_OK, &err);
        CHECK_RC(nf_annotate_run(a, &err), NF_ERR_ARG, &err);
        CHECK_MSG(&err, "before nf_annotate_load");
        CHECK_RC(nf_annotate_load(a, &err), NF_OK, &err);
        CHECK_RC(nf_annotate_run(a, &err), NF_ERR_ARG, &err);
        CHECK_MSG(&err, "needs its output path");
        nf_annotate_free(a);
    }
    nf_annotate_hooks h = {0};
    h.size = 2; /* sharded without the hooks */
    CHECK_RC(nf_annotate_new(&o, &h, &a, &err), NF_ERR_ARG, &err);
    printf("refusals: result codes and messages\n");
}

/* chr1's letters from the FASTA itself */
static char * chr1_text(int64_t * n) {
    char * s = slurp("genome.fa", NULL);
    char * out = s ? malloc(strlen(s) + 1) : NULL;
    *n = 0;
    if (!out) return NULL;
    const char * p = strstr(s, ">chr1");
    p = p ? strchr(p, '\n') : NULL;
    for (; p && *p && *p != '>'; p++)
        if (*p != '\n' && *p != '\r') out[(*n)++] = *p;
    out[*n] = '\0';
    free(s);
    return out;
}

static void seq_and_genes(void) {
    nf_err err = {0};
    int64_t n = 0;
    char * text = chr1_text(&n);
    CHECK(text && n > 20000, "chr1: %lld letters", (long long) n);
    nf_seq s = {0}, t = {0};
    CHECK_RC(nf_seq_fasta(&s, "genome.fa", "chr1:10001-10300", 1, 100, &err), NF_OK, &err);
    CHECK(s.B == 1 && s.L == 500 && s.flank == 100 && s.pad == 1, "region: B %lld L %lld", (long long) s.B,
          (long long) s.L);
    int ok = s.ids != NULL;
    for (int64_t i = 0; ok && i < 500; i++) {
        const int want = i < 100 || i >= 400 ? 4 : nf_seq_id((unsigned char) text[10000 + i - 100]);
        ok = s.ids[i] == want;
    }
    CHECK(ok, "region ids differ from the FASTA's letters");
    char sub[301];
    memcpy(sub, text ? text + 10000 : "", 300);
    sub[300] = '\0';
    CHECK_RC(nf_seq_string(&t, sub, 1, 100, &err), NF_OK, &err);
    CHECK(t.L == s.L && t.ids && s.ids && memcmp(t.ids, s.ids, (size_t) s.L) == 0, "string != region");
    nf_seq_free(&t);
    CHECK_RC(nf_seq_string(&t, "ACGX", 0, 100, &err), NF_ERR_INPUT, &err);
    CHECK_MSG(&err, "position 4 is 'X'");
    CHECK_RC(nf_seq_fasta(&t, "genome.fa", "chr9:1-10", 0, 100, &err), NF_ERR_INPUT, &err);
    nf_seq_free(&s);
    nf_seq_free(&t);
    /* mode genome: the region and 100 bases of the FASTA beyond it on each side, N before position 1 and
     * after the contig's last */
    static const struct {
        const char * region;
        int64_t beg, len, past0, past1; /* beg: 0-based */
    } gm[3] = {{"chr1:10001-10300", 10000, 300, 0, 0}, {"chr1:51-60", 50, 10, 50, 0}, {"chr1:1-20", 0, 20, 100, 0}};
    for (int k = 0; k < 3; k++) {
        CHECK_RC(nf_seq_fasta(&s, "genome.fa", gm[k].region, NF_SEQ_GENOME, 100, &err), NF_OK, &err);
        CHECK(s.L == gm[k].len + 200 && s.pad == 0 && s.mode == NF_SEQ_GENOME && s.starts &&
                  s.starts[0] == gm[k].beg + 1 - 100 && s.past_ends[0] == gm[k].past0 &&
                  s.past_ends[1] == gm[k].past1 && strcmp(nf_seq_mode_name(&s), "genome") == 0,
              "genome %s: L %lld past %lld/%lld", gm[k].region, (long long) s.L, (long long) s.past_ends[0],
              (long long) s.past_ends[1]);
        ok = s.ids != NULL && s.L == gm[k].len + 200;
        for (int64_t i = 0; ok && i < s.L; i++) {
            const int64_t at = gm[k].beg - 100 + i; /* 0-based position in chr1 */
            ok = s.ids[i] == (at < 0 || at >= n ? 4 : nf_seq_id((unsigned char) text[at]));
        }
        CHECK(ok, "genome %s: ids differ from the FASTA's letters with N past its ends", gm[k].region);
        nf_seq_free(&s);
    }
    char end_region[64]; /* the contig's last 20 bases: 100 N after them */
    snprintf(end_region, sizeof(end_region), "chr1:%lld-%lld", (long long) n - 19, (long long) n);
    CHECK_RC(nf_seq_fasta(&s, "genome.fa", end_region, NF_SEQ_GENOME, 100, &err), NF_OK, &err);
    CHECK(s.L == 220 && s.past_ends[0] == 0 && s.past_ends[1] == 100 && s.ids && s.ids[219] == 4 && s.ids[120] == 4 &&
              s.ids[100] == nf_seq_id((unsigned char) text[n - 20]),
          "genome %s: L %lld past %lld", end_region, (long long) s.L, (long long) s.past_ends[1]);
    nf_seq_free(&s);
    CHECK_RC(nf_seq_fasta(&s, "genome.fa", NULL, NF_SEQ_GENOME, 100, &err), NF_ERR_ARG, &err);
    CHECK_MSG(&err, "--context genome takes the flanks from the genome around a region");
    CHECK_RC(nf_seq_string(&t, "ACGT", NF_SEQ_GENOME, 100, &err), NF_ERR_ARG, &err);
    nf_seq_free(&s);
    nf_seq_free(&t);
    free(text);

    nf_genes * g = NULL;
    CHECK_RC(nf_genes_load("genes.gtf", &g, &err), NF_OK, &err);
    if (g) {
        CHECK(nf_genes_count(g) == 5, "%lld genes, want 5", (long long) nf_genes_count(g));
        CHECK(nf_genes_strands(g, "chr1", 6000, 0) == 1 && nf_genes_strands(g, "chr1", 13000, 0) == 3 &&
                  nf_genes_strands(g, "chr1", 20000, 0) == 2 && nf_genes_strands(g, "chr1", 25000, 0) == 0 &&
                  nf_genes_strands(g, "chr1", 15000, 0) == 3 && nf_genes_strands(g, "chr1", 4999, 0) == 0,
              "chr1 strands");
        CHECK(nf_genes_strands(g, "chr2", 5000, 0) == 2 && nf_genes_strands(g, "chr2", 5000, 1) == 0,
              "chr2: a lncRNA gene, not protein coding");
        CHECK(nf_genes_has_contig(g, "chr5") && !nf_genes_has_contig(g, "chr4"), "contigs");
        nf_genes_free(g);
    }
    printf("nf_seq: a FASTA region = its letters = the string; nf_genes: the GTF's strands\n");
}

int main(int argc, char ** argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: test-genomics NOFALL_BIN FIXTURES_DIR TMP_DIR\n");
        return 2;
    }
    /* the test runs in TMP_DIR: the CLI and the library are given the same names */
    static char rb[4096], rf[4096];
    bin = realpath(argv[1], rb) ? rb : argv[1];
    fx = realpath(argv[2], rf) ? rf : argv[2];
    tmp = argv[3];
    if (!nf_genomics_has_htslib()) {
        printf("skip: built without htslib\n");
        return 77;
    }
    if (sh("rm -rf '%s' && mkdir -p '%s' && cp '%s'/genome.fa '%s'/genes.gtf '%s'/input.vcf '%s'/", tmp, tmp, fx, fx,
           fx, tmp) != 0 ||
        chdir(tmp) != 0 ||
        sh("'%s' gen-weights sptransformer --out ms --seed 0 --dim 16 --depth 1 --context 100 --window 512 > /dev/null",
           bin) != 0) {
        fprintf(stderr, "setup failed\n");
        return 1;
    }
    seq_and_genes();
    vs_cli("a.vcf", 0);
    vs_cli("b.tsv.gz", 1);
    staged();
    refusals();
    return nf_test_done("genomics");
}
