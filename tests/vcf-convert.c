/* vcf-convert.c -- a test helper (tests/annotate.sh; not installed): copy a
 * VCF/BCF through htslib into another encoding, so the tests need no
 * bcftools.
 *
 *   vcf-convert IN OUT MODE [index]
 *        MODE: htslib's write mode: "w" VCF, "wz" VCF + BGZF (.vcf.gz), "wb"
 *        BCF; index: then index OUT (.vcf.gz: OUT.tbi, BCF: OUT.csi)
 *
 * The header and every record as htslib reads them; exit 0, or 1 with a
 * message on stderr. */
#include <htslib/tbx.h>
#include <htslib/vcf.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char ** argv) {
    const int index = argc == 5 && strcmp(argv[4], "index") == 0;
    if ((argc != 4 && !index) || (strcmp(argv[3], "w") && strcmp(argv[3], "wz") && strcmp(argv[3], "wb")) ||
        (index && strcmp(argv[3], "w") == 0)) {
        fprintf(stderr, "usage: vcf-convert IN OUT w|wz|wb [index] (index: wz or wb)\n");
        return 2;
    }
    htsFile * in = hts_open(argv[1], "r");
    bcf_hdr_t * h = in ? bcf_hdr_read(in) : NULL;
    if (!h) {
        fprintf(stderr, "vcf-convert: %s: cannot read a VCF/BCF header\n", argv[1]);
        if (in) hts_close(in);
        return 1;
    }
    htsFile * out = hts_open(argv[2], argv[3]);
    int ok = out && bcf_hdr_write(out, h) == 0;
    bcf1_t * b = bcf_init();
    long long n = 0;
    int r = 0;
    while (ok && b && (r = bcf_read(in, h, b)) == 0) {
        ok = bcf_write(out, h, b) == 0;
        n++;
    }
    if (ok && (!b || r < -1)) ok = 0; /* < -1: a malformed record */
    if (b) bcf_destroy(b);
    if (out && hts_close(out) != 0) ok = 0;
    bcf_hdr_destroy(h);
    hts_close(in);
    if (!ok) {
        fprintf(stderr, "vcf-convert: %s -> %s (%s): failed after %lld records\n", argv[1], argv[2], argv[3], n);
        return 1;
    }
    if (index &&
        (strcmp(argv[3], "wb") == 0 ? bcf_index_build(argv[2], 14) : tbx_index_build(argv[2], 0, &tbx_conf_vcf)) != 0) {
        fprintf(stderr, "vcf-convert: %s: cannot index it\n", argv[2]);
        return 1;
    }
    return 0;
}
