#!/usr/bin/env python3
"""Upstream's side of bench/tabstar-fit-vs-upstream.sh: TabSTAR's `fit` (tabstar 1.1.16,
CPU, fp32, every dropout as upstream: lora_dropout 0.1, the modules' own 0.1) on a
nofall gen-weights TabSTAR checkpoint (upstream's model built on it as in
reference/tabstar_fixtures.py: the e5-small-shaped BERT from the same weights).
Imports tabstar and calls its fit; contains no copy of its code. Run with
/work/.venv-tab/bin/python.

  bench_tabstar_fit.py --write-data DIR        sklearn's wine table (178 x 13, 3 classes)
                                               as DIR/wine.csv, target "cultivar"
  bench_tabstar_fit.py --model DIR --train CSV --target COL --epochs E [--threads 1] [--layers 12 --vocab 30522]
      one fit; prints one JSON line: fit_cpu_s (process CPU seconds of fit()),
      fit_wall_s, process_cpu_s (the whole process: imports, model build, fit),
      peak_rss_mb, epochs run."""
import argparse
import json
import os
import resource
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def cpu_s():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def write_data(d):
    from sklearn.datasets import load_wine
    from tabstar_fixtures import write_csv
    w = load_wine(as_frame=True)
    df = w.frame.rename(columns={"target": "cultivar"})
    df["cultivar"] = [f"cultivar_{int(v)}" for v in df["cultivar"]]
    hdr = list(df.columns)
    rows = [[repr(float(x)) if isinstance(x, float) else str(x) for x in r] for r in df.itertuples(index=False)]
    os.makedirs(d, exist_ok=True)
    write_csv(os.path.join(d, "wine.csv"), hdr, rows)


def fit(a):
    import torch
    torch.set_num_threads(a.threads)
    import tabstar.tabstar_model as tm
    import tabstar.training.lora as lora
    import tabstar.training.trainer as trainer
    from tabstar.tabstar_model import TabSTARClassifier
    from tabstar_fixtures import build_e5, upstream_model, read_for_upstream
    layers, vocab = a.layers, a.vocab
    epochs = []
    with tempfile.TemporaryDirectory() as tmp:
        e5 = os.path.join(tmp, "e5")
        build_e5(e5, layers, os.path.join(a.model, "vocab.txt"), vocab)
        lora.TabStarModel.from_pretrained = lambda *x, **k: upstream_model(a.model, e5)
        tm.BaseTabSTAR.download_base_model = staticmethod(lambda: None)
        orig_ev = trainer.TabStarTrainer._evaluate_epoch

        def evaluate_epoch(self, dl):
            r = orig_ev(self, dl)
            epochs.append([float(r[0]), float(r[1])])
            return r
        trainer.TabStarTrainer._evaluate_epoch = evaluate_epoch
        tr = read_for_upstream(a.train)
        est = TabSTARClassifier(max_epochs=a.epochs, device="cpu", random_state=0, keep_model=False,
                                output_dir=os.path.join(tmp, "ckpt"), verbose=False)
        c0, w0 = cpu_s(), time.perf_counter()
        est.fit(tr.drop(columns=[a.target]), tr[a.target])
        c1, w1 = cpu_s(), time.perf_counter()
    print(json.dumps({"side": "upstream", "threads": a.threads, "fit_cpu_s": round(c1 - c0, 3),
                      "fit_wall_s": round(w1 - w0, 3), "process_cpu_s": round(c1, 3),
                      "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
                      "evaluations": len(epochs), "text_layers": layers, "vocab": vocab,
                      "torch": torch.__version__}))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--write-data")
    ap.add_argument("--model")
    ap.add_argument("--train")
    ap.add_argument("--target", default="cultivar")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--layers", type=int, default=12)  # gen-weights tabstar's defaults
    ap.add_argument("--vocab", type=int, default=30522)
    a = ap.parse_args()
    if a.write_data:
        write_data(a.write_data)
    else:
        fit(a)


if __name__ == "__main__":
    main()
