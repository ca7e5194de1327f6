"""nofall.plot (docs/plots.md): the CLI's pictures drawn with matplotlib. Without matplotlib
the pictures are skipped and only the error a user gets is checked."""
import builtins
import json
import pathlib
import tempfile

import numpy as np
import pytest

import nofall
import nofall.plot as nplot

_DIR = pathlib.Path(tempfile.mkdtemp(prefix="nofall-plot-"))


def test_without_matplotlib_says_how_to_get_it(monkeypatch):
    real = builtins.__import__

    def no_mpl(name, *a, **k):
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ImportError("No module named 'matplotlib'")
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_mpl)
    with pytest.raises(ImportError, match="pip install matplotlib"):
        nplot.splice((np.zeros(5), np.zeros(5)))


def _ink(path):
    """the share of pixels that are not white in a saved PNG"""
    import matplotlib.image

    img = matplotlib.image.imread(str(path))[..., :3]
    return float((img.min(axis=2) < 0.8).mean())


@pytest.fixture(scope="module")
def spt():
    pytest.importorskip("matplotlib")
    d = _DIR / "spt"
    nofall.gen_weights("sptransformer", str(d), 0, {"dim": 16, "depth": 1, "context": 100, "window": 512})
    return nofall.SpTransformer(str(d))


def test_splice_and_variant_from_scores(spt):
    rng = np.random.default_rng(0)
    seq = "".join(rng.choice(list("ACGT"), 301))
    ref = spt.score(seq)
    alt_seq = seq[:150] + ("A" if seq[150] != "A" else "C") + seq[151:]
    alt = spt.score(alt_seq)
    n = ref.probabilities.shape[1]
    fig = nplot.splice(ref, start=1001, contig="chr1", path=_DIR / "splice.png")
    ax = fig.axes[0]
    assert [line.get_label() for line in ax.lines] == ["acceptor", "donor"]
    np.testing.assert_array_equal(ax.lines[0].get_xdata(), 1001 + np.arange(n))
    np.testing.assert_allclose(ax.lines[1].get_ydata(), ref.probabilities[0, :, 2])
    assert ax.get_xlabel() == "chr1 position (1-based)"
    assert _ink(_DIR / "splice.png") > 0.01
    fig = nplot.variant(ref, alt, start=1001, position=1151, contig="chr1", path=_DIR / "variant.png")
    assert [a.get_title(loc="left") for a in fig.axes] == ["acceptor probability", "donor probability"]
    np.testing.assert_allclose(fig.axes[0].lines[1].get_ydata(), alt.probabilities[0, :, 1])
    assert fig.axes[0].lines[1].get_linestyle() == "--"
    assert _ink(_DIR / "variant.png") > 0.01
    with pytest.raises(ValueError, match="different lengths"):
        nplot.variant(ref, (np.zeros(3), np.zeros(3)), 1, 2)


def test_verify_stages_coloured_by_the_bound():
    pytest.importorskip("matplotlib")
    doc = {"device": "cpu", "against": "cpu", "max_abs_threshold": 1e-3,
           "cases": [{"case": "seed=42", "max_abs_error": 2e-7, "bisect_first_stage": "layers.1.mlp1",
                      "stages": [{"stage": "embedding", "max_abs_error": 0.0},
                                 {"stage": "layers.0.mlp1", "max_abs_error": 1e-6},
                                 {"stage": "layers.1.mlp1", "max_abs_error": 3e-3}]},
                     {"case": "seed=100", "max_abs_error": 3e-7}]}
    p = _DIR / "verify.json"
    p.write_text(json.dumps(doc))
    fig = nplot.verify(str(p), path=_DIR / "verify.png")
    assert len(fig.axes) == 2  # the cases, one staged case
    bars = fig.axes[1].patches
    assert len(bars) == 3
    red = [b.get_facecolor()[0] > 0.7 and b.get_facecolor()[2] < 0.3 for b in bars]
    assert red == [False, False, True]
    assert fig.axes[1].get_yscale() == "log"
    assert _ink(_DIR / "verify.png") > 0.01


def test_trace_time_per_stage():
    pytest.importorskip("matplotlib")
    m = nofall.Model(_small_mitra())
    m.trace_reset(3)  # timed
    rng = np.random.default_rng(0)
    m.forward(support_x=rng.normal(size=(16, 5)).astype(np.float32), support_y=np.arange(16) % 3,
              query_x=rng.normal(size=(4, 5)).astype(np.float32))
    t = m.trace()
    fig = nplot.trace(t, path=_DIR / "trace.png")
    labels = [x.get_text() for x in fig.axes[0].get_yticklabels()]
    assert "layers.0" in labels and not any(lab.startswith("layers.0.") for lab in labels)
    total = sum(b.get_width() for b in fig.axes[0].patches)
    assert abs(total - sum(o["ms"] or 0 for o in t["ops"])) < 1e-6 * max(total, 1)
    assert _ink(_DIR / "trace.png") > 0.005


def _small_mitra():
    d = _DIR / "mitra"
    if not d.exists():
        nofall.gen_weights("mitra", str(d), 0, {"dim": 32, "layers": 1, "heads": 4})
    return str(d)


def test_import_nofall_does_not_import_matplotlib():
    import subprocess
    import sys

    code = "import sys, nofall, nofall.plot; print('matplotlib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
