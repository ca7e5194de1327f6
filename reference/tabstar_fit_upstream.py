"""Upstream's TabSTAR fit, recorded (reference/tabstar_fit_fixtures.py fit; see its
docstring). Imports tabstar 1.1.16 and wraps its functions; contains no copy of them."""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tabstar_fixtures import build_e5, upstream_model, write_csv, read_for_upstream  # noqa: E402

# name -> (gen-weights seed, task, target, rows, max_epochs, patience[, validation rows])
# a case with validation rows passes them to upstream's fit as x_val / y_val (val.csv): no split_to_val
CASES = {
    "bin": (21, "classification", "label", 80, 2, 5),
    "cls3": (22, "classification", "grade", 80, 4, 1),
    "reg": (23, "regression", "price", 60, 2, 5),
    "binval": (24, "classification", "label", 30, 2, 5, 12),
    # the smallest: the device runs (tabstar-fit-parity-opencl)
    "reg-s": (24, "regression", "price", 20, 2, 5),
    # tiny tables (tables_xs: 8 rows of one numerical column of two values, a validation table of 4): the
    # fewest distinct strings and cells, for the device runs (ctest tabstar-fit-parity-opencl, on opencl:0
    # and the cuda emulator); two epochs (OneCycle's schedule is as long as the epochs: a one-epoch fit's
    # only update takes its last, smallest LR, too small a step to compare the final adapters)
    "bin-xs": (25, "classification", "y", 8, 2, 5, 4),
    "cls3-xs": (31, "classification", "y", 8, 2, 5, 4),
    "reg-xs": (27, "regression", "y", 8, 2, 5, 4),
}


def tables_xs(name, rng):
    """8 rows (+ 4 validation rows, + 3 test rows) of n (1 or 2) and the target y"""
    rows, test = [], []
    n_all = CASES[name][3] + CASES[name][6]
    for r in range(n_all + 3):
        n = int(rng.integers(1, 3))
        z = n + rng.normal(0, 0.5)
        if name == "bin-xs":
            y = ("no", "yes")[int(z > 1.5)]
        elif name == "cls3-xs":
            y = ["low", "mid", "high"][0 if z < 1.3 else 1 if z < 1.8 else 2]
        else:
            y = repr(round(float(100 * z), 2))
        (rows if r < n_all else test).append([str(n), y])
    return ["n", CASES[name][2]], rows, test


def tables(name, rng):
    if name.endswith("-xs"):
        return tables_xs(name, rng)

    def f(x, d=3):
        return repr(round(float(x), d))
    hdr = ["size", "rooms", "colour", "const", None]
    rows, test = [], []
    n_val = CASES[name][6] if len(CASES[name]) > 6 else 0
    for r in range(CASES[name][3] + n_val + 6):
        size, rooms = rng.uniform(10, 200), int(rng.integers(1, 6))
        colour = ["red", "green", "blue", "dark red"][int(rng.integers(4))]
        z = size / 50 + rooms + rng.normal(0, 1)
        if name in ("bin", "binval"):
            y = ("no", "yes")[int(z > 4)]
        elif name == "cls3":
            y = ["low", "mid", "high"][0 if z < 3 else 1 if z < 5.5 else 2]
        else:
            y = f(1000 * z, 2)
        row = [f(size, 1), str(rooms), colour, "x", y]
        (rows if r < CASES[name][3] + n_val else test).append(row)
    hdr[-1] = CASES[name][2]
    return hdr, rows, test


def fnv1a32(s):
    h = 2166136261
    for b in s.encode():
        h = ((h ^ b) * 16777619) & 0xFFFFFFFF
    return h


def init_a(module, r, n_in, seed):
    """nofall's initial lora_A (src/tabular/tabstar-fit-run.c): U(-1/sqrt(in), 1/sqrt(in)) -- the bound of
    kaiming_uniform_(a=sqrt(5)) -- from numpy's legacy RandomState(fnv1a32(module) ^ seed), row-major"""
    u = np.random.RandomState(fnv1a32(module) ^ seed).random_sample((r, n_in))
    return ((2.0 * u - 1.0) * (1.0 / np.sqrt(n_in))).astype(np.float32)


def dropout_off(model):
    import torch
    for m in model.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
        if isinstance(m, torch.nn.MultiheadAttention):
            m.dropout = 0.0
        if hasattr(m, "dropout_prob"):
            m.dropout_prob = 0.0
        if hasattr(m, "attention_dropout"):
            m.attention_dropout = 0.0


def run_case(name, nofall, out):
    import torch
    from safetensors.torch import save_file
    import tabstar.tabstar_model as tm
    import tabstar.training.lora as lora
    import tabstar.training.trainer as trainer
    from tabstar.tabstar_model import TabSTARClassifier, TabSTARRegressor

    seed, task, target, n, max_epochs, patience = CASES[name][:6]
    n_val = CASES[name][6] if len(CASES[name]) > 6 else 0
    cdir = os.path.join(out, name)
    os.makedirs(cdir, exist_ok=True)
    hdr, rows, test = tables(name, np.random.default_rng(seed))
    write_csv(os.path.join(cdir, "train.csv"), hdr, rows[:n])
    if n_val:
        write_csv(os.path.join(cdir, "val.csv"), hdr, rows[n:])
    write_csv(os.path.join(cdir, "test.csv"), hdr, test)
    tr, te = read_for_upstream(os.path.join(cdir, "train.csv")), read_for_upstream(os.path.join(cdir, "test.csv"))
    rec = {"perm": [], "train_loss": [], "eval": []}
    tensors, modules = {}, []
    with tempfile.TemporaryDirectory() as tmp:
        mdir, e5 = os.path.join(tmp, "m"), os.path.join(tmp, "e5")
        subprocess.run([nofall, "gen-weights", "tabstar", "--out", mdir, "--seed", str(seed), "--layers", "7",
                        "--vocab", "2000"], check=True, stdout=subprocess.DEVNULL)
        build_e5(e5, 7, os.path.join(mdir, "vocab.txt"), 2000)

        def from_pretrained(*a, **k):
            m = upstream_model(mdir, e5)
            dropout_off(m)
            return m
        lora.TabStarModel.from_pretrained = from_pretrained
        tm.BaseTabSTAR.download_base_model = staticmethod(lambda: None)
        orig_split = tm.split_to_val

        def split(x, y, is_cls, **k):
            r = orig_split(x=x, y=y, is_cls=is_cls, **k)
            tensors["split.train"] = torch.tensor(np.asarray(r[0].index, dtype=np.int64))
            tensors["split.val"] = torch.tensor(np.asarray(r[1].index, dtype=np.int64))
            return r
        tm.split_to_val = split
        orig_lp = trainer.load_pretrained

        def load_pretrained(**k):
            m = orig_lp(**k)
            dropout_off(m)
            with torch.no_grad():  # the initial A replaced by nofall's own generator (init_a below)
                for key, v in m.named_parameters():
                    if "lora_A" in key:
                        mod = key.replace("base_model.model.", "").replace(".lora_A.default.weight", "")
                        v.copy_(torch.tensor(init_a(mod, v.shape[0], v.shape[1], seed)))
                        modules.append(mod)
            return m
        trainer.load_pretrained = load_pretrained
        orig_iter = torch.utils.data.RandomSampler.__iter__

        def sampler_iter(self):
            order = list(orig_iter(self))
            rec["perm"].append(order)
            return iter(order)
        torch.utils.data.RandomSampler.__iter__ = sampler_iter
        orig_te, orig_ev = trainer.TabStarTrainer._train_epoch, trainer.TabStarTrainer._evaluate_epoch

        def train_epoch(self, dl):
            loss = orig_te(self, dl)
            rec["train_loss"].append(float(loss))
            return loss

        def evaluate_epoch(self, dl):
            loss, metric = orig_ev(self, dl)
            rec["eval"].append([float(loss), float(metric)])
            return loss, metric
        trainer.TabStarTrainer._train_epoch, trainer.TabStarTrainer._evaluate_epoch = train_epoch, evaluate_epoch
        cls = TabSTARClassifier if task == "classification" else TabSTARRegressor
        est = cls(lora_dropout=0.0, max_epochs=max_epochs, patience=patience, device="cpu", random_state=0,
                  output_dir=os.path.join(tmp, "ckpt"), keep_model=False)
        X, y = tr.drop(columns=[target]), tr[target]
        if n_val:  # upstream's fit(X, y, x_val, y_val): split_to_val skipped
            va = read_for_upstream(os.path.join(cdir, "val.csv"))
            est.fit(X, y, x_val=va.drop(columns=[target]), y_val=va[target])
        else:
            est.fit(X, y)
        params = dict(est.model_.named_parameters())
        for mod in modules:  # the final adapter, summarised: |A|, |B| and B (A v), v = 1 / sqrt(in)
            if "out_proj" in mod:
                continue
            A = params[f"base_model.model.{mod}.lora_A.default.weight"].detach().double()
            B = params[f"base_model.model.{mod}.lora_B.default.weight"].detach().double()
            v = torch.full((A.shape[1],), 1.0 / np.sqrt(A.shape[1]), dtype=torch.float64)
            tensors[f"final.{mod}.norms"] = torch.tensor([A.norm().item(), B.norm().item()], dtype=torch.float64)
            tensors[f"final.{mod}.BAv"] = (B @ (A @ v)).contiguous()
        Xt = te.drop(columns=[target])
        pred = est.predict_proba(Xt) if task == "classification" else est.predict(Xt)
        tensors["pred"] = torch.tensor(np.asarray(pred, dtype=np.float32))
        for e, p in enumerate(rec["perm"]):
            tensors[f"perm.{e + 1}"] = torch.tensor(np.asarray(p, dtype=np.int64))
        trainer.TabStarTrainer._train_epoch, trainer.TabStarTrainer._evaluate_epoch = orig_te, orig_ev
        torch.utils.data.RandomSampler.__iter__ = orig_iter
        trainer.load_pretrained, tm.split_to_val = orig_lp, orig_split
    save_file({k: v.contiguous() for k, v in tensors.items()}, os.path.join(cdir, "fit.safetensors"))
    import tabstar
    import peft
    case = {"target": target, "task": task, "rows": n, "max_epochs": max_epochs, "patience": patience,
            **({"val": "val.csv", "val_rows": n_val} if n_val else {}),
            "gen_weights": {"seed": seed, "layers": 7, "vocab": 2000},
            "train_loss": rec["train_loss"], "epochs": rec["eval"][:len(rec["train_loss"])],
            "final_eval": rec["eval"][len(rec["train_loss"]):],
            "versions": {"tabstar": getattr(tabstar, "__version__", "1.1.16"), "torch": torch.__version__,
                         "peft": peft.__version__},
            "init_seed": seed,
            "patches": "dropout p=0 everywhere (lora_dropout=0.0, nn.Dropout, MHA, BERT attention); CPU fp32; "
                       "the initial lora_A = init_a(module, seed) (nofall's generator) instead of torch's; "
                       "torch.backends.mha.set_fastpath_enabled(False) (evaluation with every adapter)"}
    with open(os.path.join(cdir, "case.json"), "w") as fh:
        json.dump(case, fh, indent=1)
    print(name, "epochs", len(rec["train_loss"]), "eval", rec["eval"])


def main(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--nofall", required=True)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "tests/fixtures/tabstar-fit"))
    ap.add_argument("--only", default="")
    a = ap.parse_args(argv)
    import torch
    torch.set_num_threads(1)
    torch.set_float32_matmul_precision("highest")
    # the TransformerEncoderLayer fast path off: on the CPU upstream's eval-mode forward (validation, predict)
    # takes it and so reads linear1/linear2's base weights, dropping their LoRA adapters (tabstar.md §10.2);
    # with it off the evaluation applies every adapter, as CUDA's autocast evaluation and nofall's merge do
    torch.backends.mha.set_fastpath_enabled(False)
    for name in CASES:
        if a.only and name not in a.only.split(","):
            continue
        run_case(name, os.path.abspath(a.nofall), a.out)
