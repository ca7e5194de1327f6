#!/usr/bin/env python3
"""Parity fixtures for `nofall annotate` (tests/fixtures/annotate/), made by
UPSTREAM's own variant scoring: SpliceTransformer's `sptransformer.py`
(`Annotator.annotate_variant_table` -> `query_scores` -> the driver's
`SNPInterval.parse` / `calc_snp_misaligned` / `post_decorate`, pandas
`to_csv`), run on a small synthetic genome with our synthetic checkpoint
(`nofall gen-weights sptransformer --seed 0 --format ckpt`).

    python reference/annotate_fixtures.py --upstream CLONE --nofall build/nofall \
        [--out tests/fixtures/annotate]

CLONE is a git clone of ShenLab-Genomics/SpliceTransformer; the files are
taken from its HEAD with `git show` (a checkout is not needed) into a
temporary directory, which is also upstream's working directory (it loads
./model/weights/SpTransformer_pytorch.ckpt).

What is upstream's and what is not:
  - upstream's, unchanged: sptransformer.py (Annotator: the record filters,
    the strand logic, the window, the scores, the z-score flags, the output
    frame and its to_csv), tasks_annotate_mutations.py (SNPInterval, the
    one-hot, the driver, softmax/sigmoid), model/model.py (the model), real
    pyfaidx for the FASTA, pandas, torch.
  - stand-ins, because they cannot run offline or are not installable:
      * pyensembl.Genome: `genes_at_locus(contig, pos)` over the GTF's `gene`
        rows (start <= pos <= end, in file order), each with .strand and
        .biotype (gene_type) -- what pyensembl returns for those rows;
      * vcf (PyVCF, unmaintained, does not install on Python 3.12): a reader
        giving records with CHROM, POS, ID (None for '.'), REF and ALT as
        PyVCF does; a multi-allelic line is given as one record per ALT,
        because upstream scores ALT[0] only and nofall scores every ALT.
  - calc_single_sequence is memoised on its input bytes so the raw-score pass
    reuses the forwards of the flag pass (the same inputs give the same
    outputs; nothing else changes).

Writes genome.fa, genes.gtf, input.vcf, expected.csv (flags), expected_raw.csv
(--raw-score), expected_report.json (the skip counts nofall must report),
the bad-input files, and MANIFEST.json (versions, hashes, upstream commit).
"""
import argparse
import hashlib
import importlib.metadata as md
import json
import os
import random
import subprocess
import sys
import tempfile
import types

CONTIGS = {"chr1": 30000, "chr2": 24000, "chr3": 12000}

# seqname, start, end, strand, gene_type, name
GENES = [
    ("chr1", 5000, 15000, "+", "protein_coding", "GA"),
    ("chr1", 12000, 22000, "-", "protein_coding", "GB"),
    ("chr2", 4000, 20000, "-", "lncRNA", "GD"),
    ("chr3", 1, 12000, "+", "protein_coding", "GE"),
    ("chr5", 1000, 50000, "+", "protein_coding", "GF"),  # chr5 is not in genome.fa (bad-input case)
]


def make_genome(seed=20241122):
    rng = random.Random(seed)
    seqs = {}
    for name, n in CONTIGS.items():
        s = [rng.choice("ACGT") for _ in range(n)]
        if name == "chr1":
            for i in range(16000, 16300):  # soft-masked stretch
                s[i] = s[i].lower()
            for i in range(23000, 23200):  # an N run
                s[i] = "N"
        seqs[name] = "".join(s)
    return seqs


def other(b, k=1):
    bases = "ACGT"
    return bases[(bases.index(b.upper()) + k) % 4]


def make_vcf(seqs):
    """(chrom as written, pos, id, ref, alt, note) -- ref taken from the genome unless noted"""
    def g(c, p):
        return seqs[c][p - 1].upper()

    rows = []

    def snv(c, p, note, vid=".", k=1, chrom=None):
        rows.append((chrom or c, p, vid, g(c, p), other(g(c, p), k), note))

    snv("chr1", 6000, "plus strand", "rs1")
    snv("chr1", 8000, "plus strand", k=2)
    snv("chr1", 13000, "both strands")
    rows.append(("chr1", 14000, "multi", g("chr1", 14000),
                 other(g("chr1", 14000), 1) + "," + other(g("chr1", 14000), 2), "both strands, two ALTs"))
    rows.append(("chr1", 7000, ".", g("chr1", 7000), other(g("chr1", 7000)) + "," + other(g("chr1", 7000)) + "T",
                 "multi-allelic: an SNV ALT and an insertion ALT"))
    snv("chr1", 16100, "soft-masked (lower-case) window centre")
    snv("chr1", 18000, "minus strand")
    snv("chr1", 20000, "minus strand", "rs20;rs21", k=3)
    snv("chr1", 25000, "no gene: score 0")
    snv("chr1", 26000, "no gene: score 0", k=2)
    rows.append(("chr1", 9000, ".", g("chr1", 9000) + g("chr1", 9001), g("chr1", 9000), "deletion: skipped"))
    rows.append(("chr1", 10000, ".", g("chr1", 10000), g("chr1", 10000) + "A", "insertion: skipped"))
    rows.append(("chr1", 11000, "refmm", other(g("chr1", 11000)), other(g("chr1", 11000), 2),
                 "REF differs from the genome: upstream warns and scores"))
    snv("chr2", 5000, "minus-strand lncRNA, VCF contig '2' (upstream adds 'chr')", chrom="2")
    snv("chr2", 15000, "minus-strand lncRNA", chrom="2", k=2)
    snv("chr3", 8050, "window cut 150 nt by the contig end (L = 8051)")
    snv("chr3", 7950, "window cut 50 nt by the contig end (L = 8151)", k=3)
    rows.append(("chrUn_test1", 500, ".", "A", "G", "contig name over 6 characters: skipped"))
    rows.append(("chr4", 100, ".", "A", "C", "contig in neither the GTF nor the FASTA: no gene, score 0"))
    return rows


def write_inputs(out, seqs, rows):
    with open(os.path.join(out, "genome.fa"), "w") as f:
        for name, s in seqs.items():
            f.write(f">{name} synthetic\n")
            for i in range(0, len(s), 60):
                f.write(s[i:i + 60] + "\n")
    with open(os.path.join(out, "genes.gtf"), "w") as f:
        f.write("##description: synthetic genes for nofall annotate fixtures\n")
        for c, s, e, st, gt, nm in GENES:
            attrs = f'gene_id "{nm}.1"; gene_type "{gt}"; gene_name "{nm}";'
            f.write(f"{c}\tSYN\tgene\t{s}\t{e}\t.\t{st}\t.\t{attrs}\n")
            tattrs = f'gene_id "{nm}.1"; transcript_id "{nm}-T1"; gene_type "{gt}";'
            f.write(f"{c}\tSYN\ttranscript\t{s}\t{e}\t.\t{st}\t.\t{tattrs}\n")
    with open(os.path.join(out, "input.vcf"), "w") as f:
        f.write("##fileformat=VCFv4.2\n")
        for name, n in CONTIGS.items():
            f.write(f"##contig=<ID={name},length={n}>\n")
        f.write("##contig=<ID=2,length=24000>\n##contig=<ID=chrUn_test1,length=1000>\n")
        f.write("##contig=<ID=chr4,length=1000>\n")
        f.write("#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\n")
        for c, p, vid, ref, alt, note in rows:
            f.write(f"{c}\t{p}\t{vid}\t{ref}\t{alt}\t.\t.\t.\n")
    # bad inputs: each must end the run with exit != 0, naming the record
    bad = {
        "bad-window-start.vcf": ("chr3", 4000, "window starts before the contig (pyfaidx FetchError upstream)"),
        "bad-window-end.vcf": ("chr3", 11000, "window cut 3100 nt by the contig end: no output position"),
        "bad-contig.vcf": ("chr5", 2000, "a gene on chr5, but chr5 is not in genome.fa (pyfaidx FetchError)"),
    }
    for fn, (c, p, why) in bad.items():
        with open(os.path.join(out, fn), "w") as f:
            f.write("##fileformat=VCFv4.2\n")
            f.write(f"##contig=<ID={c}>\n#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\n")
            ref = seqs[c][p - 1].upper() if c in seqs else "A"
            f.write(f"{c}\t{p}\tbad1\t{ref}\t{other(ref)}\t.\t.\t.\n")
    with open(os.path.join(out, "bad-malformed.vcf"), "w") as f:
        f.write("##fileformat=VCFv4.2\n##contig=<ID=chr1>\n#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\n")
        f.write("chr1\t25000\t.\tA\tC\t.\t.\t.\n")
        f.write("chr1\tnot_a_number\t.\tA\tC\t.\t.\t.\n")
    return bad


# ---- stand-ins for pyensembl and PyVCF ----------------------------------------------------

class _Gene:
    def __init__(self, strand, biotype):
        self.strand = strand
        self.biotype = biotype


class StubGenome:
    def __init__(self, gtf):
        self.genes = []
        with open(gtf) as f:
            for line in f:
                if line.startswith("#"):
                    continue
                c = line.rstrip("\n").split("\t")
                if c[2] != "gene":
                    continue
                bt = c[8].split('gene_type "')[1].split('"')[0]
                self.genes.append((c[0], int(c[3]), int(c[4]), c[6], bt))

    def genes_at_locus(self, contig, position):
        return [_Gene(st, bt) for c, s, e, st, bt in self.genes if c == contig and s <= position <= e]


class _Rec:
    pass


class StubReader:
    def __init__(self, filename=None, strict_whitespace=True):
        self.records = []
        with open(filename) as f:
            for line in f:
                if line.startswith("#"):
                    continue
                c = line.rstrip("\n").split("\t")
                alts = [None] if c[4] == "." else c[4].split(",")
                for a in alts:  # one record per ALT (upstream scores ALT[0])
                    r = _Rec()
                    r.CHROM, r.POS, r.ID, r.REF, r.ALT = c[0], int(c[1]), None if c[2] == "." else c[2], c[3], [a]
                    self.records.append(r)

    def __iter__(self):
        return iter(self.records)


def expected_report(rows):
    """the counts nofall reports, by the same predicates upstream applies"""
    sk = {"contig_name_over_6_characters": 0, "not_snv": 0, "no_alt": 0, "alt_star": 0}
    scored = no_gene = mism = alts = 0
    genome = StubGenome(os.path.join(OUT, "genes.gtf"))
    for c, p, vid, ref, alt, note in rows:
        for a in alt.split(","):
            alts += 1
            if len(c) > 6:
                sk["contig_name_over_6_characters"] += 1
            elif len(ref) > 1 or len(a) > 1:
                sk["not_snv"] += 1
            else:
                scored += 1
                cn = c if c.startswith("chr") else "chr" + c
                if not genome.genes_at_locus(cn, p):
                    no_gene += 1
                elif "REF differs" in note:
                    mism += 1
    return dict(records=len(rows), alts=alts, scored=scored, scored_no_gene=no_gene, scored_ref_mismatch=mism,
                skipped=sk)


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def upstream_annotator(clone, nofall, genes, fasta, threads=2):
    """upstream's Annotator (sptransformer.py from CLONE's HEAD, in a temporary
    working directory with the synthetic checkpoint), with the stand-ins for
    pyensembl and PyVCF, on GENES / FASTA: (annotator, commit, workdir)"""
    work = tempfile.mkdtemp(prefix="nf-annotate-up-")
    commit = subprocess.run(["git", "-C", clone, "rev-parse", "HEAD"], check=True, capture_output=True,
                            text=True).stdout.strip()
    for p in ["sptransformer.py", "tasks_annotate_mutations.py", "model/model.py", "model/SpliceAI.py"]:
        os.makedirs(os.path.join(work, os.path.dirname(p)), exist_ok=True)
        data = subprocess.run(["git", "-C", clone, "show", f"HEAD:{p}"], check=True, capture_output=True).stdout
        with open(os.path.join(work, p), "wb") as f:
            f.write(data)
    os.makedirs(os.path.join(work, "model", "weights"))
    subprocess.run([nofall, "gen-weights", "sptransformer", "--out", os.path.join(work, "w"), "--seed", "0",
                    "--format", "ckpt"], check=True, stdout=subprocess.DEVNULL)
    os.rename(os.path.join(work, "w", "SpTransformer_pytorch.ckpt"),
              os.path.join(work, "model", "weights", "SpTransformer_pytorch.ckpt"))

    sys.modules["pyensembl"] = types.SimpleNamespace(Genome=StubGenome)
    sys.modules["vcf"] = types.SimpleNamespace(Reader=StubReader)
    os.chdir(work)
    sys.path.insert(0, work)
    import torch
    torch.set_num_threads(threads)
    from pyfaidx import Fasta
    import sptransformer as up  # upstream's own module

    ann = up.Annotator()
    ann.gtf["hg38"] = StubGenome(genes)
    ann.ref_fasta["hg38"] = Fasta(fasta)
    return ann, commit, work


def main():
    global OUT
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--upstream", required=True, help="git clone of ShenLab-Genomics/SpliceTransformer")
    ap.add_argument("--nofall", default="build/nofall")
    ap.add_argument("--out", default="tests/fixtures/annotate")
    a = ap.parse_args()
    OUT = os.path.abspath(a.out)
    os.makedirs(OUT, exist_ok=True)
    seqs = make_genome()
    rows = make_vcf(seqs)
    bad = write_inputs(OUT, seqs, rows)

    ann, commit, work = upstream_annotator(a.upstream, a.nofall, os.path.join(OUT, "genes.gtf"),
                                           os.path.join(OUT, "genome.fa"))
    import numpy as np
    drv = ann.model
    orig = drv.calc_single_sequence
    cache = {}
    n_fwd = [0]

    def memo(seq, encode=False):
        k = (seq.shape, np.ascontiguousarray(seq).tobytes())
        if k not in cache:
            n_fwd[0] += 1
            cache[k] = orig(seq, encode)
        return cache[k].copy()

    drv.calc_single_sequence = memo
    ann.annotate_variant_table(fname=os.path.join(OUT, "input.vcf"), foutput_name=os.path.join(OUT, "expected.csv"),
                               ref_genome="hg38", input_CSV=False, output_raw=False)
    ann.annotate_variant_table(fname=os.path.join(OUT, "input.vcf"),
                               foutput_name=os.path.join(OUT, "expected_raw.csv"), ref_genome="hg38",
                               input_CSV=False, output_raw=True)
    # what upstream does with the bad inputs (no forward is needed to see it for the start/contig cases)
    upstream_bad = {}
    for fn, (c, p, why) in bad.items():
        try:
            ann.annotate_variant_table(fname=os.path.join(OUT, fn), foutput_name=os.path.join(work, fn + ".csv"),
                                       ref_genome="hg38", input_CSV=False, output_raw=False)
            res = "completed: " + open(os.path.join(work, fn + ".csv")).read().strip().splitlines()[-1]
        except BaseException as e:  # noqa: BLE001 -- recording upstream's failure is the point
            res = f"raised {type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"
        upstream_bad[fn] = dict(case=why, upstream=res)
    fai = os.path.join(OUT, "genome.fa.fai")  # pyfaidx's index: not a fixture (nofall builds its own)
    if os.path.exists(fai):
        os.remove(fai)
    rep = expected_report(rows)
    with open(os.path.join(OUT, "expected_report.json"), "w") as f:
        json.dump(rep, f, indent=1)
        f.write("\n")
    man = dict(
        made_by="reference/annotate_fixtures.py",
        upstream="ShenLab-Genomics/SpliceTransformer", upstream_commit=commit,
        upstream_code="sptransformer.py Annotator.annotate_variant_table (unchanged); stand-ins: pyensembl.Genome "
                      "(genes_at_locus over the GTF gene rows), vcf.Reader (PyVCF fields; one record per ALT)",
        weights="nofall gen-weights sptransformer --seed 0 --format ckpt",
        forwards=n_fwd[0],
        versions={p: md.version(p) for p in ["torch", "numpy", "pandas", "pyfaidx", "sinkhorn-transformer",
                                              "local-attention", "axial-positional-embedding"]},
        rows=[dict(chrom=c, pos=p, id=vid, ref=ref, alt=alt, note=n) for c, p, vid, ref, alt, n in rows],
        bad_inputs=upstream_bad,
        sha256={f: sha(os.path.join(OUT, f)) for f in sorted(os.listdir(OUT)) if f != "MANIFEST.json"},
    )
    with open(os.path.join(OUT, "MANIFEST.json"), "w") as f:
        json.dump(man, f, indent=1)
        f.write("\n")
    print(f"wrote {OUT}: {n_fwd[0]} upstream forwards")


if __name__ == "__main__":
    main()
