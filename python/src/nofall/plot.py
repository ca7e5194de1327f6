"""nofall.plot: the pictures of ``nofall ... --plot`` drawn with matplotlib (docs/plots.md).

matplotlib is optional: it is imported when a picture is drawn, and its absence is an
ImportError that says how to install it. Each function returns a matplotlib Figure and,
given ``path``, saves it there (the format by the extension: .png, .svg, .pdf).

- ``splice``: acceptor and donor probability along positions (``nofall run --plot``).
- ``variant``: ref vs alt acceptor and donor probability around one variant
  (``nofall annotate --plot-variant``).
- ``verify``: verify's error per case against its bound, and per stage when the results
  carry stages (``nofall verify --plot``; the JSON of ``--json`` with ``--plot``).
- ``trace``: where a forward spends its time, per stage, from an op trace
  (``Model.trace_json()``, ``nofall run|bench --trace``).

The CLI writes the same pictures as SVG without matplotlib (nofall-plot.h).
"""
import json
import os

import numpy as np

_BLUE, _RED, _GREY = "#1f77b4", "#d62728", "#555555"


def _pyplot():
    try:
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise ImportError("nofall.plot needs matplotlib (pip install matplotlib); "
                          "the nofall command line draws the same pictures as SVG with --plot") from e
    return plt


def _done(fig, path):
    if path is not None:
        fig.savefig(os.fspath(path), dpi=100)
    return fig


def _doc(doc):
    """a JSON document given as a dict, JSON text or a path"""
    if isinstance(doc, dict):
        return doc
    if isinstance(doc, (str, os.PathLike)) and os.path.exists(os.fspath(doc)):
        with open(os.fspath(doc)) as f:
            return json.load(f)
    if isinstance(doc, str):
        return json.loads(doc)
    raise TypeError("a JSON document: a dict, JSON text or a path")


def _tracks(probabilities):
    """acceptor and donor of a (n, C >= 3) probability array, a SpliceScores' first sequence,
    or an (acceptor, donor) pair"""
    if hasattr(probabilities, "probabilities"):
        probabilities = probabilities.probabilities[0]
    if isinstance(probabilities, (tuple, list)) and len(probabilities) == 2:
        a, d = (np.asarray(x, dtype=np.float64).ravel() for x in probabilities)
    else:
        p = np.asarray(probabilities, dtype=np.float64)
        if p.ndim != 2 or p.shape[1] < 3:
            raise ValueError(f"probabilities of shape (n, C >= 3) expected, got {p.shape}")
        a, d = p[:, 1], p[:, 2]
    if a.shape != d.shape or a.size == 0:
        raise ValueError("acceptor and donor tracks of one non-zero length expected")
    return a, d


def splice(probabilities, start=1, contig=None, title=None, path=None):
    """Acceptor and donor probability along positions start, start + 1, ...

    probabilities: a (n, C) array (channels no_splice, acceptor, donor, ...), a SpliceScores
    (its first sequence) or an (acceptor, donor) pair. start: the position of the first
    output (a padded sequence, ``context="pad"``: 1; flanks given: 1 + the context length;
    a region: its start on the contig, plus the context length with ``context="given"``, not
    with ``context="genome"``)."""
    plt = _pyplot()
    a, d = _tracks(probabilities)
    x = start + np.arange(a.size)
    fig, ax = plt.subplots(figsize=(9.6, 3.2))
    ax.plot(x, a, color=_BLUE, lw=1.2, label="acceptor")
    ax.plot(x, d, color=_RED, lw=1.2, label="donor")
    ax.set_ylim(0, 1)
    ax.set_xlim(x[0], x[-1])
    ax.set_xlabel(f"{contig} position (1-based)" if contig else "position (1-based)")
    ax.set_ylabel("probability")
    ax.set_title(title or "SpTransformer splice-site probability")
    ax.grid(axis="y", color="#e6e6e6")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.tight_layout()
    return _done(fig, path)


def variant(ref, alt, start, position, contig=None, title=None, path=None):
    """Ref (solid) vs alt (dashed) acceptor and donor probability at positions start, ...,
    the variant at ``position`` marked. ref, alt: as ``splice`` takes them."""
    plt = _pyplot()
    ra, rd = _tracks(ref)
    aa, ad = _tracks(alt)
    if ra.shape != aa.shape:
        raise ValueError(f"ref and alt of different lengths: {ra.size} and {aa.size}")
    x = start + np.arange(ra.size)
    fig, axes = plt.subplots(2, 1, figsize=(9.6, 5.6), sharex=True)
    for ax, name, r, a in ((axes[0], "acceptor", ra, aa), (axes[1], "donor", rd, ad)):
        ax.plot(x, r, color=_BLUE, lw=1.2, label="ref")
        ax.plot(x, a, color=_RED, lw=1.2, ls="--", label="alt")
        ax.axvline(position, color="#888888", lw=1, ls=":")
        ax.text(position, 0.97, f" variant {position}", fontsize=8, va="top")
        ax.set_ylim(0, 1)
        ax.set_ylabel("probability")
        ax.set_title(f"{name} probability", loc="left", fontsize=10)
        ax.grid(axis="y", color="#e6e6e6")
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    axes[1].set_xlim(x[0], x[-1])
    axes[1].set_xlabel(f"{contig} position (1-based)" if contig else "position (1-based)")
    fig.suptitle(title or (f"{contig}:{position}" if contig else f"variant at {position}"))
    fig.tight_layout()
    return _done(fig, path)


def _bars(ax, names, values, bound, floor):
    v = np.array([x if x is not None and x > 0 else np.nan for x in values], dtype=np.float64)
    colors = [_RED if bound is not None and x > bound else _BLUE for x in np.nan_to_num(v)]
    ax.bar(range(len(names)), np.nan_to_num(v, nan=floor), color=colors, bottom=0)
    ax.set_yscale("log")
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names, rotation=35 if len(names) > 8 else 0, ha="right" if len(names) > 8 else "center",
                       fontsize=8)
    if bound is not None:
        ax.axhline(bound, color=_GREY, ls="--", lw=1.2, label="bound (max_abs)")
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    ax.set_ylabel("max |device - reference|")


def verify(results, path=None):
    """verify's results (the ``--json`` document: a dict, text or path): each case's max_abs
    error against the threshold on a log axis, and a panel per case that carries "stages"
    (``nofall verify --bisect=always --plot``)."""
    plt = _pyplot()
    d = _doc(results)
    cases = d.get("cases") or []
    if not cases:
        raise ValueError("verify results without cases")
    bound = d.get("max_abs_threshold")
    staged = [c for c in cases if c.get("stages")][:8]
    vals = [c.get("max_abs_error") for c in cases] + [s.get("max_abs_error") for c in staged for s in c["stages"]]
    pos = [x for x in vals + [bound] if x is not None and x > 0]
    floor = min(pos) / 10 if pos else 1e-8
    fig, axes = plt.subplots(1 + len(staged), 1, figsize=(9.6, 3.2 + 3.4 * len(staged)), squeeze=False)
    _bars(axes[0][0], [c.get("case", "?") for c in cases], [c.get("max_abs_error") for c in cases], bound, floor)
    axes[0][0].set_title("max |error| per case", loc="left", fontsize=10)
    for k, c in enumerate(staged):
        ax = axes[k + 1][0]
        _bars(ax, [s.get("stage", "?") for s in c["stages"]], [s.get("max_abs_error") for s in c["stages"]], bound,
              floor)
        ax.set_title(f"case {c.get('case', '?')}: max |error| after each stage "
                     f"(first over: {c.get('bisect_first_stage', 'none')})", loc="left", fontsize=10)
    fig.suptitle(f"nofall verify: {d.get('device', '?')} against {d.get('against', '?')}")
    fig.tight_layout()
    return _done(fig, path)


def _stage(label, op):
    parts = (label or op).split(".")
    return ".".join(parts[:2]) if len(parts) > 1 and parts[1].isdigit() else parts[0]


def trace(trace_doc, top=25, path=None):
    """Where a forward spends its time: the op time per stage (the op labels' first
    component, "layers.N" for a layer), largest first, from an op trace (``Model.trace_json()``,
    ``--trace``; a timed trace: ops without a time count 0)."""
    plt = _pyplot()
    d = _doc(trace_doc)
    ms = {}
    for o in d.get("ops") or []:
        k = _stage(o.get("label"), o.get("op", "?"))
        ms[k] = ms.get(k, 0.0) + (o.get("ms") or 0.0)
    if not ms:
        raise ValueError("the trace has no op records (a timed trace: --trace, or trace mode timed)")
    items = sorted(ms.items(), key=lambda kv: (-kv[1], kv[0]))[:top]
    fig, ax = plt.subplots(figsize=(9.6, 1.2 + 0.28 * len(items)))
    ax.barh(range(len(items)), [v for _, v in items], color=_BLUE)
    ax.set_yticks(range(len(items)))
    ax.set_yticklabels([k for k, _ in items], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("ms (ops synchronised one by one)")
    ax.set_title(f"where a forward spends its time: {d.get('device', '?')}, {sum(ms.values()):.1f} ms in ops")
    fig.tight_layout()
    return _done(fig, path)
