"""SpTransformer from Python (nofall.SpTransformer, annotate, annotate_frame) against the command line
on a small model (gen-weights sptransformer: dim 16, depth 1, context 100, as tests/test-genomics.c):
scores byte-identical to the .npy files `nofall run` writes for the same sequence / FASTA region,
`annotate` byte-identical to `nofall annotate` on the annotate fixtures (tests/fixtures/annotate),
its SpliceAI-layout deltas and positions recomputed in NumPy from the model's per-position probabilities,
the DataFrame's rows the records and ALTs of upstream's table, and wrong model directories refused
naming the type found.

The CLI: $NOFALL_BIN, else the release build's build/nofall (tools/test.sh runs the Python stage
after it); the tests comparing against it are skipped without one."""
import csv
import gzip
import json
import os
import random
import shutil
import subprocess

import numpy as np
import pytest

import nofall
from conftest import _DIR, ROOT, model_dir

ANNOTATE_FX = ROOT / "tests" / "fixtures" / "annotate"
needs_htslib = pytest.mark.skipif(not nofall._nofall.genomics_has_htslib(),
                                  reason="built without htslib: no FASTA, GTF or VCF input")


@pytest.fixture(scope="module")
def nofall_bin():
    b = os.environ.get("NOFALL_BIN") or str(ROOT / "build" / "nofall")
    if not os.access(b, os.X_OK):
        pytest.skip(f"no nofall binary at {b} (build the CLI, or set NOFALL_BIN)")
    return b


@pytest.fixture(scope="module")
def spt_model():
    d = _DIR / "spt-small"
    if not d.exists():
        nofall.gen_weights("sptransformer", str(d), 0, {"dim": 16, "depth": 1, "context": 100, "window": 512})
    return str(d)


@pytest.fixture(scope="module")
def spt(spt_model):
    return nofall.SpTransformer(spt_model)


@pytest.fixture(scope="module")
def fx_dir():
    """the annotate fixtures copied (the FASTA's .fai is built beside it)"""
    d = _DIR / "annotate-fx"
    if not d.exists():
        d.mkdir()
        for f in ("genome.fa", "genes.gtf", "input.vcf"):
            shutil.copy(ANNOTATE_FX / f, d / f)
    return d


def _sequence(n, seed):
    r = random.Random(seed)
    return "".join(r.choice("ACGTUNacgtun") for _ in range(n))


def _run(bin_, *args):
    p = subprocess.run([bin_, *args], capture_output=True, text=True)
    assert p.returncode == 0, f"{' '.join(args)}: exit {p.returncode}\n{p.stderr}"
    return p


def _same_as_run(scores, out_dir):
    """every array equals the .npy `nofall run` wrote: dtype, shape and bytes"""
    for name, got in (("tokens.npy", scores.tokens), ("position_logits.npy", scores.logits),
                      ("probabilities.npy", scores.probabilities), ("class_ids.npy", scores.class_ids)):
        want = np.load(os.path.join(out_dir, name))
        assert got.dtype == want.dtype and got.shape == want.shape, f"{name}: {got.dtype} {got.shape} vs {want.dtype} {want.shape}"
        assert got.tobytes() == want.tobytes(), f"{name}: the bytes differ from nofall run's"
    meta = json.load(open(os.path.join(out_dir, "encoding_metadata.json")))
    assert scores.offset == meta["output_offset"]
    assert list(scores.channels) == meta["channels"]


def test_score_equals_run(spt, spt_model, nofall_bin, tmp_path):
    seq = _sequence(150, 1)
    _run(nofall_bin, "run", "--model", spt_model, "--device", "cpu", "--out", str(tmp_path / "run"), "--sequence", seq)
    s = spt.score(seq)
    assert s.logits.shape == (1, 150, 18) and s.tokens.shape == (1, 350)
    _same_as_run(s, tmp_path / "run")


@needs_htslib
def test_score_fasta_equals_run(spt, spt_model, nofall_bin, tmp_path):
    seq = _sequence(120, 2)
    fa = tmp_path / "in.fa"
    fa.write_text(">other\nACGT\n>chrT test\n" + "\n".join(("NNNNN" + seq + "NNN")[i:i + 60] for i in range(0, 128, 60)) + "\n")
    _run(nofall_bin, "run", "--model", spt_model, "--out", str(tmp_path / "run"), "--fasta", str(fa),
         "--region", "chrT:6-125", "--context", "pad")
    s = spt.score_fasta(fa, "chrT:6-125", context="pad")
    _same_as_run(s, tmp_path / "run")
    # the same 120 nt as a string: the same tokens and logits
    assert spt.score(seq.upper()).logits.tobytes() == s.logits.tobytes()


def test_score_batch_and_refusals(spt):
    a, b = _sequence(90, 3), _sequence(90, 4)
    s = spt.score([a, b])
    assert s.logits.shape == (2, 90, 18)
    for i, x in enumerate((a, b)):
        np.testing.assert_allclose(s.logits[i], spt.score(x).logits[0], rtol=0, atol=1e-5)
    with pytest.raises(ValueError, match="one length"):
        spt.score([a, a[:-1]])
    with pytest.raises(nofall.NofallInputError, match="position 3 is 'R'"):
        spt.score("ACRT")
    with pytest.raises(ValueError, match="already flanked"):
        spt.score("ACGT", context="given")
    with pytest.raises(ValueError, match="context: 'pad' or 'given'"):
        spt.score("ACGT", context="both")


def _annotate_cli(bin_, fx, model, out, *flags):
    _run(bin_, "annotate", "--model", model, "--vcf", str(fx / "input.vcf"), "--fasta", str(fx / "genome.fa"),
         "--genes", str(fx / "genes.gtf"), "--out", str(out), "--quiet", *flags)


@needs_htslib
def test_annotate_equals_cli(spt_model, nofall_bin, fx_dir, tmp_path):
    _annotate_cli(nofall_bin, fx_dir, spt_model, tmp_path / "cli.vcf")
    st = nofall.annotate(fx_dir / "input.vcf", fx_dir / "genome.fa", fx_dir / "genes.gtf", spt_model,
                         out=tmp_path / "py.vcf", device="cpu", report=True)
    got, want = (tmp_path / "py.vcf").read_bytes(), (tmp_path / "cli.vcf").read_bytes()
    assert got and got == want, "annotate from Python: the .vcf differs from nofall annotate's"
    assert (st["records"], st["alts"], st["scored"], st["skipped"]["not_snv"]) == (19, 21, 17, 3)
    rep = json.load(open(tmp_path / "py.vcf.report.json"))
    cli = json.load(open(tmp_path / "cli.vcf.report.json"))
    for k in cli:
        if k not in ("wall_ms", "forward_ms", "out"):
            assert rep.get(k) == cli[k], f"report {k}: {rep.get(k)} vs the CLI's {cli[k]}"


@needs_htslib
def test_annotate_write_index(spt_model, fx_dir, tmp_path):
    """write_index (nofall annotate --write-index[=FMT]): the index beside out, named as bcftools names it,
    TBI or CSI; a plain .vcf, a TBI of a BCF or an unknown format refused"""
    lines = (fx_dir / "input.vcf").read_text().splitlines()
    head = [l for l in lines if l.startswith("#")]
    order = [l.split("ID=")[1].split(",")[0] for l in head if l.startswith("##contig")]
    body = [l for l in lines if not l.startswith("#") and l.split("\t")[1] in ("13000", "25000", "8050", "100")]
    body.sort(key=lambda l: (order.index(l.split("\t")[0]), int(l.split("\t")[1])))
    vcf = tmp_path / "sorted.vcf"
    vcf.write_text("\n".join(head + body) + "\n")
    args = (vcf, fx_dir / "genome.fa", fx_dir / "genes.gtf", spt_model)
    nofall.annotate(*args, out=tmp_path / "a.vcf.gz", write_index="tbi")
    nofall.annotate(*args, out=tmp_path / "a.bcf", write_index=True)
    assert gzip.open(tmp_path / "a.vcf.gz.tbi").read(4) == b"TBI\1"
    assert gzip.open(tmp_path / "a.bcf.csi").read(4) == b"CSI\1"
    assert not (tmp_path / "a.vcf.gz.csi").exists()
    with pytest.raises(nofall.NofallInputError, match="uncompressed VCF"):
        nofall.annotate(*args, out=tmp_path / "b.vcf", write_index="csi")
    with pytest.raises(nofall.NofallInputError, match="CSI index only"):
        nofall.annotate(*args, out=tmp_path / "b.bcf", write_index="tbi")
    with pytest.raises(ValueError, match="write_index"):
        nofall.annotate(*args, out=tmp_path / "b.vcf.gz", write_index="bai")
    assert not any(tmp_path.glob("b.*"))


@needs_htslib
def test_annotate_frame(spt, fx_dir):
    f = nofall.annotate_frame(fx_dir / "input.vcf", fx_dir / "genome.fa", fx_dir / "genes.gtf", spt)
    # one row per scored ALT: the records and ALTs of upstream's own table (expected.csv)
    want = list(csv.reader(open(ANNOTATE_FX / "expected.csv")))
    assert len(f) == f.attrs["stats"]["scored"] == len(want) - 1
    assert list(f.columns) == ["CHROM"] + want[0][2:]
    assert [[str(i), r.CHROM, str(r.POS), r.ID, r.REF, r.ALT] for i, r in zip(f.index, f.itertuples())] == \
        [w[:6] for w in want[1:]]
    assert f["score"].dtype == np.float64 and set(f["Blood"]) <= {"Y", "N"}


def test_wrong_model():
    mitra = model_dir("small_cls")
    with pytest.raises(ValueError, match=r"a Mitra classifier model .*not a SpTransformer model"):
        nofall.SpTransformer(mitra)
    with pytest.raises(ValueError, match=r"a Mitra model .*not a SpTransformer model"):
        nofall.annotate("x.vcf", "x.fa", "x.gtf", mitra, out=str(_DIR / "never.vcf"))
    assert not (_DIR / "never.vcf").exists()
    tabstar = _DIR / "spt-wrong-tabstar"
    nofall.gen_weights("tabstar", str(tabstar), 0, {"layers": 1, "vocab": 2000})
    with pytest.raises(ValueError, match=r"a TabSTAR model .*not a SpTransformer model"):
        nofall.SpTransformer(tabstar)
    with pytest.raises(ValueError, match=r"a TabSTAR model .*not a SpTransformer model"):
        nofall.annotate("x.vcf", "x.fa", "x.gtf", tabstar, out=str(_DIR / "never.vcf"))


@needs_htslib
def test_spliceai_deltas_numpy(spt, spt_model, fx_dir, tmp_path):
    """annotate's SpliceAI entries recomputed in NumPy from the per-position probabilities of the same
    model (nofall.SpTransformer on the ref and alt windows, minus-strand genes reverse-complemented and
    flipped back to genomic order): DS_AG = max(alt - ref) of the acceptor, DS_AL = max(ref - alt),
    DS_DG / DS_DL the donor's, each DP the offset of the first maximum in genomic order from POS."""
    nofall.annotate(fx_dir / "input.vcf", fx_dir / "genome.fa", fx_dir / "genes.gtf", spt_model,
                    out=tmp_path / "s.vcf")
    seqs, name = {}, None
    for line in open(fx_dir / "genome.fa"):
        if line.startswith(">"):
            name = line[1:].split()[0]
            seqs[name] = []
        else:
            seqs[name].append(line.strip())
    seqs = {k: "".join(v) for k, v in seqs.items()}
    strand = {}
    for line in open(fx_dir / "genes.gtf"):
        f = line.rstrip("\n").split("\t")
        if len(f) > 8 and f[2] == "gene":
            strand[f[8].split('gene_name "')[1].split('"')[0]] = f[6]
    flank = spt.context + 100
    cases, windows = [], []  # every entry's ref and alt windows, scored in one forward
    for line in open(tmp_path / "s.vcf"):
        if line.startswith("#"):
            continue
        f = line.rstrip("\n").split("\t")
        info = dict(kv.split("=", 1) for kv in f[7].split(";") if "=" in kv)
        pos, seq = int(f[1]), seqs.get(f[0]) or seqs.get("chr" + f[0], "")  # upstream's "chr" name
        if "SpliceAI" not in info or pos + flank > len(seq):
            continue
        ref = seq[pos - 1 - flank:pos + flank]
        for e in info["SpliceAI"].split(","):
            v = e.split("|")
            ids = spt.tokens([ref, ref[:flank] + v[0] + ref[flank + 1:]], context="given").astype(np.int64)
            minus = strand[v[1]] == "-"
            windows.append(np.where(ids == 4, 4, 3 - ids)[:, ::-1] if minus else ids)
            cases.append((e, v, minus))
    probs = spt.score_tokens(np.concatenate(windows)).probabilities
    checked = 0
    for c, (e, v, minus) in enumerate(cases):
        p = probs[2 * c:2 * c + 2]
        if minus:
            p = p[:, ::-1]
        d = [p[1, :, 1] - p[0, :, 1], p[0, :, 1] - p[1, :, 1], p[1, :, 2] - p[0, :, 2], p[0, :, 2] - p[1, :, 2]]
        for k in range(4):
            ds, dp = float(v[2 + k]), int(v[6 + k])
            assert abs(ds - float(d[k].max())) <= 0.005 + 1e-6, (e, k, float(d[k].max()))
            assert dp == int(d[k].argmax()) - 100 or d[k][dp + 100] >= d[k].max() - 1e-6, (e, k, dp)
        checked += 1
    assert checked >= 10, checked


@needs_htslib
@pytest.mark.parametrize("region,strand", [("chr1:5001-5400", "+"), ("chr1:5001-5900", "-")])
def test_tracks_equal_run_tsv(spt, spt_model, nofall_bin, fx_dir, tmp_path, region, strand):
    """SpTransformer.tracks = the tracks.tsv `nofall run --fasta --region --strand` writes: the same rows
    and columns, every value printed as the TSV prints it ('%.6g' of the float32); '-' and a region longer
    than the window (512: 700 positions, two tiles) included"""
    out = tmp_path / "run"
    _run(nofall_bin, "run", "--model", spt_model, "--out", str(out), "--fasta", str(fx_dir / "genome.fa"),
         "--region", region, "--strand", strand)
    want = (out / "tracks.tsv").read_text().splitlines()
    df = spt.tracks(fx_dir / "genome.fa", region, strand=strand)
    assert list(df.columns) == want[0].split("\t")
    assert df["pos"].dtype == np.int64 and df["acceptor"].dtype == np.float32
    got = ["\t".join([r[0], str(r[1]), r[2]] + ["%.6g" % v for v in r[3:]]) for r in df.itertuples(index=False)]
    assert len(got) == len(want) - 1 and got == want[1:]
    arrays = spt.tracks(fx_dir / "genome.fa", region, strand=strand, as_frame=False)
    assert isinstance(arrays["donor"], np.ndarray) and arrays["donor"].tobytes() == df["donor"].to_numpy().tobytes()


@needs_htslib
def test_context_genome(spt, spt_model, nofall_bin, fx_dir, tmp_path):
    """context='genome' scores every position of the region, its flanks the genome's: the forward of mode
    given on the region widened by the context (100) on each side, bitwise; tracks as `run --context genome
    --strand -` writes them (700 positions: two tiles)"""
    fa = fx_dir / "genome.fa"
    g = spt.score_fasta(fa, "chr1:5101-5300", context="genome")
    w = spt.score_fasta(fa, "chr1:5001-5400")
    assert g.logits.shape == (1, 200, 18) and g.tokens.tobytes() == w.tokens.tobytes()
    assert g.logits.tobytes() == w.logits.tobytes()
    out = tmp_path / "run"
    _run(nofall_bin, "run", "--model", spt_model, "--out", str(out), "--fasta", str(fa), "--region", "chr1:5101-5800",
         "--context", "genome", "--strand", "-")
    want = (out / "tracks.tsv").read_text().splitlines()
    df = spt.tracks(fa, "chr1:5101-5800", strand="-", context="genome")
    got = ["\t".join([r[0], str(r[1]), r[2]] + ["%.6g" % v for v in r[3:]]) for r in df.itertuples(index=False)]
    assert df["pos"].iloc[0] == 5101 and df["pos"].iloc[-1] == 5800 and got == want[1:]
    with pytest.raises(ValueError, match="context='genome' takes the flanks from the genome"):
        spt.score("ACGT", context="genome")
    with pytest.raises(nofall.NofallInputError, match="--context genome takes the flanks"):
        spt.score_fasta(fa, None, context="genome")
