"""SpTransformer from Python: scoring of sequences and FASTA regions, and annotate.

All of it over the public C API (include/nofall.h, include/nofall-genomics.h):
the sequence inputs are ``nf_seq_string`` / ``nf_seq_fasta``, the forward
``nf_model_forward``, ``annotate`` is ``nf_annotate_file`` -- the code paths of
``nofall run`` and ``nofall annotate``, so on one device the results are
theirs byte for byte.
"""
import json
import os
import tempfile
from typing import NamedTuple

import numpy as np

from . import _nofall
from ._estimators import _check_model_type
from ._model import Model

SPLICE_CHANNELS = ("no_splice", "acceptor", "donor")


class SpliceScores(NamedTuple):
    """One forward's results, as ``nofall run`` writes them (B sequences, n = L - 2 * context outputs each).

    - ``tokens``: int8 (B, L), the ids the model read (A=0 C=1 G=2 T/U=3 N=4), flanks included
      (``tokens.npy``).
    - ``logits``: float32 (B, n, C), C = 3 + tissues = 18 (``position_logits.npy``).
    - ``probabilities``: float32 (B, n, C): softmax over channels 0..2 (no_splice, acceptor,
      donor), the sigmoid on the tissue channels, as upstream's driver (``probabilities.npy``).
    - ``class_ids``: int64 (B, n), the argmax over channels 0..2 (``class_ids.npy``).
    - ``offset``: ``logits[b, i]`` is the position ``tokens[b, offset + i]`` (the context length).
    - ``channels``: the C channel names.
    """

    tokens: np.ndarray
    logits: np.ndarray
    probabilities: np.ndarray
    class_ids: np.ndarray
    offset: int
    channels: tuple


def _config_model_type(path):
    """the model type a model directory's config.json names (none named: Mitra's, as the library
    reads it), or None (a file such as the official .ckpt, no readable config.json)"""
    cfg = os.path.join(os.fspath(path), "config.json")
    if not os.path.isdir(os.fspath(path)) or not os.path.isfile(cfg):
        return None
    try:
        with open(cfg) as f:
            doc = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict):
        return None
    t = doc.get("model_type", "mitra")
    return t if isinstance(t, str) else None


class SpTransformer:
    """A SpTransformer model (SpliceTransformer) loaded once onto one device.

    ``model_path``: a model directory (``config.json`` with ``"model_type": "sptransformer"`` +
    ``model.safetensors``) or the official ``SpTransformer_pytorch.ckpt``. ``device``: ``"cpu"``,
    ``"opencl[:N]"``, ``"cuda[:N]"``. A directory of another model type (Mitra, TabSTAR) is a
    ValueError naming the type found.

    ``score`` / ``score_fasta`` run one forward over B sequences of one length and return a
    :class:`SpliceScores` (numpy arrays: the logits, probabilities and classes ``nofall run`` writes
    for the same input). Valid lengths (flanks included) are ``2 * context + 1`` ...
    ``2 * context + max_seq_len`` (8001 ... 16192 for the released model). The GIL is released
    during the forward; one forward at a time per model.
    """

    def __init__(self, model_path, device="cpu", precision="exact"):
        self.model_path = os.fspath(model_path)
        self.model = Model(self.model_path, device, precision)
        _check_model_type(self.model, self.model_path, "sptransformer", None, "SpTransformer")
        self.device = device
        cfg = self.model.config
        self.context = int(cfg["context_len"])
        self.max_seq_len = int(cfg["max_seq_len"])
        self.channels = SPLICE_CHANNELS + tuple(_nofall.annotate_tissues())[: int(cfg["tissue_num"])]

    def tokens(self, sequences, context="pad"):
        """The token ids (int8 (B, L)) of one sequence or a list of sequences of one length, as
        ``nofall run --sequence S`` reads them: A, C, G, T/U, N in any case (anything else is an
        error naming the position); ``context="pad"`` adds ``self.context`` N on each side,
        ``"given"`` takes the sequences as already flanked."""
        pad = _pad_flag(context, genome=False)
        seqs = [sequences] if isinstance(sequences, str) else list(sequences)
        if not seqs:
            raise ValueError("sequences: none given")
        rows = []
        for i, s in enumerate(seqs):
            if not isinstance(s, str):
                raise TypeError(f"sequences[{i}]: a str, not {type(s).__name__}")
            ids, B, L, *_ = _nofall.seq_tokens("sequence", s, None, pad, self.context)
            if rows and L != rows[0].shape[0]:
                raise ValueError(f"sequences[{i}]: {len(s)} nt, sequences[0] {len(seqs[0])}: "
                                 "one forward takes sequences of one length")
            rows.append(np.frombuffer(ids, dtype=np.int8))
        return np.stack(rows)

    def score(self, sequences, context="pad"):
        """Score one sequence (str) or a list of sequences of one length: as ``nofall run --model M
        --sequence S [--context pad|given]``. Returns a :class:`SpliceScores`."""
        return self.score_tokens(self.tokens(sequences, context), _note=_context_note(context, self.context))

    def score_fasta(self, fasta, region=None, context="given"):
        """Score a FASTA file: every record (all of one length) or one region ``"chr:start-end"``
        (1-based, inclusive), as ``nofall run --fasta F [--region R] [--context given|pad|genome]``
        (read through htslib's faidx; a missing ``.fai`` is built beside the file). The default
        ``context="given"``: the region carries its own flanks (its first and last ``self.context``
        bases are not scored); ``"genome"`` (with a region): every position of the region is scored,
        its flanks the FASTA's ``self.context`` bases beyond it (N past the contig's ends).
        Returns a :class:`SpliceScores`."""
        pad = _pad_flag(context)
        ids, B, L, *_ = _nofall.seq_tokens("fasta", os.fspath(fasta), region, pad, self.context)
        tokens = np.frombuffer(ids, dtype=np.int8).reshape(B, L)
        return self.score_tokens(tokens, _note=_context_note(context, self.context))

    def score_tokens(self, tokens, *, _note=None):
        """Score token ids (int (L,) or (B, L), flanks included). Returns a :class:`SpliceScores`."""
        tokens = np.asarray(tokens)
        if tokens.ndim == 1:
            tokens = tokens[None, :]
        if tokens.ndim != 2 or tokens.dtype.kind not in "iu":
            raise ValueError(f"tokens: integer ids (L,) or (B, L), not {tokens.dtype} {tokens.shape}")
        ids = np.ascontiguousarray(tokens, dtype=np.int64)
        ins = [("tokens", ids, tuple(int(s) for s in ids.shape))]
        m = self.model
        with m._lock:
            try:
                shape = m._m.output_shape(ins)
            except _nofall.NofallInputError as e:
                if _note is None:
                    raise
                raise _nofall.NofallInputError(_note(ids.shape[1]) + ": " + str(e)) from e
            logits = np.empty(shape, dtype=np.float32)
            m._m.forward(ins, logits)
        if not np.isfinite(logits).all():
            raise _nofall.NofallError("forward produced non-finite logits")
        probs = np.empty_like(logits)
        cls = np.empty(shape[:2], dtype=np.int64)
        _nofall.spt_post(logits, probs, cls, int(shape[2]))
        return SpliceScores(ids.astype(np.int8), logits, probs, cls, self.context, self.channels)

    def tracks(self, fasta, region=None, strand="+", context="given", as_frame=True):
        """Per-position tracks with coordinates: the rows ``nofall run --model M --fasta F
        [--region R] [--strand S] [--context given|pad|genome]`` writes as ``tracks.tsv`` (same values:
        the library's ``nf_seq_track_record``; a sequence longer than the window is tiled as the
        CLI tiles it; ``strand="-"`` scores the reverse complement, rows in forward order).

        Returns a pandas DataFrame with the TSV's columns ``contig``, ``pos`` (1-based),
        ``strand``, ``acceptor``, ``donor`` and one per tissue (float32), every record of the
        FASTA (or the region) one after another; ``as_frame=False`` (or no pandas): a dict of
        those columns as numpy arrays."""
        pad = _pad_flag(context)
        if strand not in ("+", "-"):
            raise ValueError(f"strand: '+' or '-', not {strand!r}")
        m = self.model
        with m._lock:
            recs = _nofall.seq_track(m._m, "fasta", os.fspath(fasta), region, pad, strand)
        names = None
        cols = {"contig": [], "pos": [], "strand": [], "probs": []}
        for contig, start, st, C, raw, chans in recs:
            p = np.frombuffer(raw, dtype=np.float32).reshape(-1, C)
            n = p.shape[0]
            names = chans[1:]  # tracks.tsv's columns: no_splice left out
            cols["contig"].append(np.full(n, contig, dtype=object))
            cols["pos"].append(np.arange(start, start + n, dtype=np.int64))
            cols["strand"].append(np.full(n, st, dtype=object))
            cols["probs"].append(p[:, 1:])
        probs = np.concatenate(cols["probs"]) if recs else np.empty((0, 2), np.float32)
        out = {k: np.concatenate(cols[k]) for k in ("contig", "pos", "strand")}
        for j, nm in enumerate(names or ["acceptor", "donor"]):
            out[nm] = np.ascontiguousarray(probs[:, j])
        if as_frame:
            try:
                import pandas as pd
            except ImportError:
                return out
            return pd.DataFrame(out)
        return out

    def __repr__(self):
        return f"nofall.SpTransformer({self.model_path!r}, device={self.device!r})"


def _pad_flag(context, genome=True):
    """the library's mode (nofall-genomics.h NF_SEQ_*): given 0, pad 1, genome 2 (a FASTA region's)"""
    if context == "genome" and not genome:
        raise ValueError("context='genome' takes the flanks from the genome around a region: "
                         "score_fasta / tracks with a FASTA and a region")
    if context not in ("given", "pad", "genome"):
        also = " or 'genome'" if genome else ""
        raise ValueError(f"context: 'pad' or 'given'{also}, not {context!r}")
    return ("given", "pad", "genome").index(context)


def _context_note(context, ctx):
    """the refusal's prefix, as the CLI words it"""
    if context == "pad":
        return lambda L: f"{L - 2 * ctx} nt + {ctx} N on each side (context='pad')"
    if context == "genome":
        return lambda L: f"{L - 2 * ctx} nt of the region + {ctx} of the genome on each side (context='genome')"
    return lambda L: (f"{L} nt taken as already flanked (context='given'; context='pad' adds {ctx} N on each side)")


def _model_arg(model):
    """a model path (an SpTransformer object gives its own); another model type's directory: a ValueError"""
    if isinstance(model, SpTransformer):
        return model.model_path
    path = os.fspath(model)
    found = _config_model_type(path)
    if found is not None and found != "sptransformer":
        names = {"mitra": "Mitra", "tabstar": "TabSTAR"}
        raise ValueError(f"model {path}: a {names.get(found, found)} model (config.json model_type {found!r}), "
                         "not a SpTransformer model; annotate takes a SpTransformer checkpoint")
    return path


def annotate(vcf, fasta, genes, model, out, device="cpu", raw_score=False, protein_coding=False, reuse=True,
             batch=16, report=None, format="spliceai", write_index=None):
    """Score the SNVs of a VCF/BCF with a SpTransformer model and write them to ``out``: what
    ``nofall annotate --vcf VCF --fasta FASTA --genes GTF --model M --out OUT`` writes, byte for
    byte (``nf_annotate_file``, one call, the GIL released).

    - ``vcf``: .vcf, .vcf.gz or .bcf; ``fasta``: the reference genome (its ``.fai`` is built beside
      it when missing); ``genes``: a GTF (plain, gzip or bgzip) whose ``gene`` rows give the strands.
    - ``model``: a SpTransformer model directory or .ckpt (or a :class:`SpTransformer`, for its
      path); another model type's directory is a ValueError naming it.
    - ``out``: the format is its name's: ``.vcf``, ``.vcf.gz``, ``.bcf`` (every record; INFO in
      ``format``'s layout), ``.tsv[.gz]``, ``.csv[.gz]`` (upstream's table, one row per scored ALT;
      see :func:`annotate_frame`). Written in place.
    - ``format`` (VCF/BCF): ``"spliceai"`` (INFO/SpliceAI
      ALLELE|SYMBOL|DS_AG|DS_AL|DS_DG|DS_DL|DP_AG|DP_AL|DP_DG|DP_DL|Consequence per ALT and gene,
      INFO/SPT_DS and SPT_TISSUES per ALT) or ``"sptransformer"`` (upstream's INFO/SPT).
    - ``raw_score``: the raw tissue deltas, not the Y/N flags; ``protein_coding``: only protein-coding
      genes give strands; ``reuse=False``: every window computed in full (the same scores);
      ``batch``: windows per forward (2..4096).
    - ``report``: None (none), True (``OUT.report.json``, as the CLI) or a path: the report's JSON.
    - ``write_index`` (``nofall annotate --write-index[=FMT]``): None (none), ``"csi"`` (or True)
      or ``"tbi"``: ``out`` indexed once written, ``out + ".csi"`` / ``".tbi"``; a ``.vcf.gz``
      (CSI or TBI) or ``.bcf`` (CSI) only, else a :class:`NofallInputError`.

    Returns the counts as a dict: records, alts, scored, scored_no_gene, scored_ref_mismatch,
    window_cut, rows_written, forwards, windows, windows_computed, windows_reused, forward_ms, ranks,
    and ``skipped`` (by reason: contig_name_over_6_characters, not_snv, no_alt, alt_star). Errors:
    :class:`NofallInputError` (a ValueError) for bad input, naming the file and record.
    """
    out = os.fspath(out)
    if report is True:
        report = out + ".report.json"
    elif report is not None and report is not False:
        report = os.fspath(report)
    else:
        report = None
    if write_index is True:
        write_index = "csi"
    elif write_index is False:
        write_index = None
    return _nofall.annotate_file(_model_arg(model), device, os.fspath(vcf), os.fspath(fasta), os.fspath(genes), out,
                                 report, bool(raw_score), bool(protein_coding), not reuse, int(batch), str(format),
                                 None if write_index is None else str(write_index))


def annotate_frame(vcf, fasta, genes, model, device="cpu", raw_score=False, protein_coding=False, reuse=True,
                   batch=16):
    """:func:`annotate` into a pandas DataFrame: one row per scored ALT, in the VCF's order, the
    columns of upstream's table (``nofall annotate --out X.tsv``, written to a temporary file and
    read back):

    - ``CHROM`` (str; the file's ``#CHROM``), ``POS`` (int, 1-based), ``ID`` (str, ``""`` for
      ``.``), ``REF``, ``ALT`` (str),
    - ``score`` (float): Δsplice, max |a_alt - a_ref| over the 201 central positions (a = max of
      acceptor and donor), both strands of the overlapping genes, rounded to 2 decimals,
    - one column per tissue (Adipose Tissue ... Stomach): ``"Y"`` / ``"N"`` (the tissue's z-score
      over its 95 % threshold), or with ``raw_score=True`` the raw tissue-usage delta (float).

    The index is upstream's (0, 1, ... over the scored ALTs). The counts of the run are in
    ``frame.attrs["stats"]`` (see :func:`annotate`).
    """
    import pandas as pd

    with tempfile.TemporaryDirectory(prefix="nofall-annotate-") as d:
        path = os.path.join(d, "out.tsv")
        stats = annotate(vcf, fasta, genes, model, path, device=device, raw_score=raw_score,
                         protein_coding=protein_coding, reuse=reuse, batch=batch)
        text = {c: str for c in ("#CHROM", "ID", "REF", "ALT")}
        if not raw_score:
            text.update({t: str for t in _nofall.annotate_tissues()})
        frame = pd.read_csv(path, sep="\t", index_col=0, dtype=text, keep_default_na=False)
    frame = frame.rename(columns={"#CHROM": "CHROM"})
    frame.index.name = None
    frame.attrs["stats"] = stats
    return frame
