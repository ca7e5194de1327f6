#!/usr/bin/env python3
"""Variants/s of `nofall annotate` (cpu) against upstream's own annotator, in
one run on the same variants (issue #15; a benchmark: it asserts nothing).

    .venv-ref/bin/python reference/bench_annotate.py --upstream CLONE [--nofall build/nofall] [--n 50]
        [--threads 2] [--batch 16]

The variants: N SNVs drawn (random.Random(7)) inside the genes of the
annotate fixture's synthetic genome (tests/fixtures/annotate: genes on both
strands, some overlapping), at least 4,100 nt from the contig ends. The
model: `nofall gen-weights sptransformer --seed 0` (the released size),
the same weights for both (upstream loads the .ckpt form).

  nofall     `nofall annotate --vcf V --fasta genome.fa --genes genes.gtf
             --out out.csv --device cpu --batch B` (the whole process: FASTA
             index, weights, every forward, the output), OMP threads = --threads
  no-reuse   the same with --no-reuse (every window computed in full)
  upstream   sptransformer.py's `Annotator.annotate_variant_table` (as in
             reference/annotate_fixtures.py: upstream's code unchanged,
             stand-ins for pyensembl and PyVCF), torch threads = --threads;
             the model and FASTA loaded before the clock starts

Every output is compared with upstream's (byte-identical on the parity
fixture); the lines printed say whether they are here too.
"""
import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import annotate_fixtures as af  # noqa: E402

FX = os.path.join(HERE, "..", "tests", "fixtures", "annotate")


def read_fasta(path):
    seqs, name = {}, None
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith(">"):
                name = line[1:].split()[0]
                seqs[name] = []
            elif name:
                seqs[name].append(line)
    return {k: "".join(v) for k, v in seqs.items()}


def make_vcf(path, n, seqs):
    rng = random.Random(7)
    genes = [g for g in af.GENES if g[0] in seqs]
    rows = []
    while len(rows) < n:
        c, s, e, _, _, _ = rng.choice(genes)
        lo, hi = max(s, 4101), min(e, len(seqs[c]) - 4101)
        if lo > hi:
            continue
        p = rng.randint(lo, hi)
        ref = seqs[c][p - 1].upper()
        if ref not in "ACGT":
            continue
        rows.append((c, p, ref, af.other(ref, rng.randint(1, 3))))
    rows.sort(key=lambda r: (r[0], r[1]))
    with open(path, "w") as f:
        f.write("##fileformat=VCFv4.2\n")
        for c in seqs:
            f.write(f"##contig=<ID={c},length={len(seqs[c])}>\n")
        f.write("#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\n")
        for c, p, ref, alt in rows:
            f.write(f"{c}\t{p}\t.\t{ref}\t{alt}\t.\t.\t.\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--upstream", required=True, help="git clone of ShenLab-Genomics/SpliceTransformer")
    ap.add_argument("--nofall", default="build/nofall")
    ap.add_argument("--n", type=int, default=50)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=16)
    a = ap.parse_args()
    nofall = os.path.abspath(a.nofall)
    t = tempfile.mkdtemp(prefix="nf-bench-annotate-")
    fasta, genes = os.path.join(t, "genome.fa"), os.path.join(t, "genes.gtf")  # copies: the .fai goes beside them
    for src, dst in ((os.path.join(FX, "genome.fa"), fasta), (os.path.join(FX, "genes.gtf"), genes)):
        shutil.copyfile(src, dst)
    vcf = os.path.join(t, "bench.vcf")
    make_vcf(vcf, a.n, read_fasta(fasta))
    model = os.path.join(t, "m")
    subprocess.run([nofall, "gen-weights", "sptransformer", "--out", model, "--seed", "0"], check=True,
                   stdout=subprocess.DEVNULL)
    with open("/proc/cpuinfo") as f:
        cpu = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "?")
    print(f"CPU: {cpu}, {os.cpu_count()} cores; load average: {os.getloadavg()[0]:.2f}; {a.n} SNVs, "
          f"{a.threads} threads", flush=True)

    env = dict(os.environ, OMP_NUM_THREADS=str(a.threads))

    def run_nofall(name, extra):
        out = os.path.join(t, name + ".csv")
        t0 = time.perf_counter()
        r = subprocess.run([nofall, "annotate", "--model", model, "--vcf", vcf, "--fasta", fasta, "--genes", genes,
                            "--out", out, "--device", "cpu", "--batch", str(a.batch)] + extra, env=env,
                           capture_output=True, text=True)
        dt = time.perf_counter() - t0
        if r.returncode != 0:
            sys.exit("nofall annotate failed: " + r.stderr.strip().splitlines()[-1])
        fwd = next((l.split("=", 1)[1] for l in r.stdout.splitlines() if l.startswith("FORWARDS=")), "?")
        return out, dt, fwd

    runs = [("nofall",) + run_nofall("nofall", []), ("no-reuse",) + run_nofall("noreuse", ["--no-reuse"])]

    ann, commit, work = af.upstream_annotator(os.path.abspath(a.upstream), nofall, genes, fasta, a.threads)
    drv = ann.model
    orig = drv.calc_single_sequence
    n_fwd = [0]

    def counted(seq, encode=False):
        n_fwd[0] += 1
        return orig(seq, encode)

    drv.calc_single_sequence = counted
    out_u = os.path.join(t, "upstream.csv")
    t0 = time.perf_counter()
    ann.annotate_variant_table(fname=vcf, foutput_name=out_u, ref_genome="hg38", input_CSV=False, output_raw=False)
    tu = time.perf_counter() - t0
    up = open(out_u, "rb").read()
    print(f"{'run':10s} {'seconds':>9s} {'variants/s':>11s} {'forwards':>9s} {'upstream/this':>14s}")
    for name, out, dt, fwd in runs:
        note = "(--batch %d, whole process%s)" % (a.batch, ", --no-reuse" if name == "no-reuse" else "")
        print(f"{name:10s} {dt:9.2f} {a.n / dt:11.3f} {fwd:>9s} {tu / dt:13.2f}x   {note}; "
              f"output byte-identical to upstream's: {open(out, 'rb').read() == up}")
    print(f"{'upstream':10s} {tu:9.2f} {a.n / tu:11.3f} {n_fwd[0]:>9d}   (upstream commit {commit[:7]})")
    print(f"nofall / upstream: {tu / runs[0][2]:.2f}x variants/s; reuse on / off: {runs[1][2] / runs[0][2]:.2f}x")
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
