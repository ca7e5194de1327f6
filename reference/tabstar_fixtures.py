#!/usr/bin/env python3
"""Reference fixtures for TabSTAR (the original model, alana89/TabSTAR) from
the upstream `tabstar` package (PyPI).

This script installs nothing. Set up a venv of your own (gitignored), e.g.

    python3 -m venv .venv-tab && .venv-tab/bin/pip install tabstar

(tabstar 1.2.2 was used: torch 2.15, transformers 4.57, peft 0.21; plain
`pip install` pulls CUDA torch wheels, the forward here runs on the CPU.)

No hub access: the e5-small-v2 BertModel that TabStarModel.__init__ loads
with AutoModel.from_pretrained is built locally (a BertConfig with
e5-small-v2's settings, spec tabstar.md §4, and the synthetic vocab.txt that
`nofall gen-weights tabstar` writes) and pointed to through
tabstar.arch.arch.E5_SMALL_LOCAL_PATH (upstream's own no-internet switch);
all its weights are then replaced by the checkpoint's (load_state_dict,
strict). Settings: CPU, fp32, model.eval(), torch.no_grad(), autocast off --
upstream's CPU inference (the TELs take PyTorch's fused fast path).

    .venv-tab/bin/python reference/tabstar_fixtures.py make --nofall build/nofall \
        --out tests/fixtures/tabstar

Each case directory: case.json (gen-weights seed / layers / vocab), cells.json
(the model-level input, "nofall-tabstar-cells/1", README "TabSTAR"),
logits.npy (float32 (n_rows, C), upstream's TabStarModel.forward), and
token_ids.json (upstream's tokenizer ids of every distinct string, in
np.unique order, for debugging).

    .venv-tab/bin/python reference/tabstar_fixtures.py e2e --nofall build/nofall \
        --out tests/fixtures/tabstar-predict

writes the `nofall predict` cases (E2E below): train.csv / test.csv (written
here), upstream's TabSTARVerbalizer fitted on the whole training table
(pd.read_csv, pandas 3's `str` columns converted to object first) and
applied to the test table -> expected_cells.json (x_txt / x_num in the cells
schema), TabStarModel.forward on them -> logits.npy, case.json (target,
task, numerical / constant columns, boundaries, upstream's predictions,
regression: the target scaler and predictions.npy). e2e-lora uses
lora-cls3's weights and adapter (the same seed and shapes give the same
adapter; referenced, not copied).

    .venv-tab/bin/python reference/tabstar_fixtures.py keys --out tests/fixtures/tabstar/state_dict_keys.txt

writes upstream's state_dict listing at the released size, which
tests/test-tabstar.c compares with nofall's weight table.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

# name -> (seed, text layers, vocab, task, classes or None, rows)
CASES = {
    "cls2": (11, 2, 2000, "classification", ["no", "yes"], 4),
    "cls5": (12, 3, 3000, "classification", ["red", "green", "blue", "dark red", "Lower than 5"], 3),
    "reg": (13, 2, 2000, "regression", None, 5),
    "full-cls3": (14, 12, 30522, "classification", ["cat", "dog", "bird"], 2),
    "lora-cls3": (15, 2, 2000, "classification", ["low", "medium", "high"], 3),
}
# LoRA cases: a random PEFT adapter (upstream's target modules, training/lora.py; the
# text layers below LORA_FROZEN excluded as upstream excludes 0..5 of 12), merged by
# PEFT (merge_and_unload): the expected logits are the merged model's
LORA = {"lora-cls3": dict(r=2, alpha=4, frozen=1)}
LORA_TARGETS = ["query", "key", "value", "out_proj", "linear1", "linear2", "cls_head.layers.0", "reg_head.layers.0"]


def bins(col, b):
    """upstream's 12 bin labels for boundaries b (format_float, lexicographic min/max, spec §2.2)."""
    def ff(x):
        r = round(x, 4)
        return str(int(r)) if r == int(r) else f"{r:.4f}".rstrip("0").rstrip(".")
    B = [ff(x) for x in b]
    labels = [f"Lower than {min(B)} (Quantile 0%)"]
    labels += [f"{B[i - 1]} to {B[i]} (Quantile {10 * (i - 1)} - {10 * i}%)" for i in range(1, 11)]
    labels.append(f"Higher than {max(B)} (Quantile 100%)")
    return labels


def make_rows(name, task, classes, n_rows, rng):
    """verbalized rows as upstream's verbalizer writes them: target tokens, text features, numerical features."""
    y = "Outcome Score" if task == "regression" else "Species"
    if task == "regression":
        targets = [f"Numerical Target Feature: {y}"]
    else:
        targets = [f"Target Feature: {y}\nFeature Value: {v}" for v in classes]
    texts = ["Paris", "Tokyo", "café crème", "Ünïcödé ÀÉÎ", "东京 tower", "emoji 🙂 here", "tab\there",
             "a" * 120, "MiXeD CaSe Words", "[CLS] literal [SEP]", "Unknown Value", "state-of-the-art!!",
             " ".join(["feature value"] * 300)]  # > 512 tokens: truncated
    b = sorted(rng.normal(50, 20, 11).round(3))
    labels = bins("Age", b)
    x_txt, x_num = [], []
    for r in range(n_rows):
        row_t = list(targets)
        row_n = [0.0] * len(targets)
        row_t.append(f"Predictive Feature: City\nFeature Value: {texts[rng.integers(len(texts))]}")
        row_n.append(0.0)
        note = (12, 7, 9)[r] if r < 3 else (r * 5 + len(name)) % len(texts)  # > 512 tokens, a 120-char word, [CLS]
        row_t.append(f"Predictive Feature: Note\nFeature Value: {texts[note]}")
        row_n.append(0.0)
        for col in ("Age", "Income"):
            if rng.random() < 0.15:
                row_t.append(f"Predictive Feature: {col}\nFeature Value: Unknown Value")
                row_n.append(0.0)
            else:
                i = int(rng.integers(12))
                row_t.append(f"Predictive Feature: {col}\nFeature Value: {labels[i]}")
                row_n.append(float(np.clip(rng.normal(0, 1.5), -3, 3)))
        x_txt.append(row_t)
        x_num.append(row_n)
    return targets, x_txt, x_num


def build_e5(dirname, layers, vocab_file, vocab):
    from transformers import BertConfig, BertModel
    cfg = BertConfig(vocab_size=vocab, hidden_size=384, num_hidden_layers=layers, num_attention_heads=12,
                     intermediate_size=1536, hidden_act="gelu", hidden_dropout_prob=0.1,
                     attention_probs_dropout_prob=0.1, max_position_embeddings=512, type_vocab_size=2,
                     layer_norm_eps=1e-12, pad_token_id=0, position_embedding_type="absolute")
    BertModel(cfg).save_pretrained(dirname)
    shutil.copy(vocab_file, os.path.join(dirname, "vocab.txt"))
    # e5-small-v2's tokenizer_config.json settings (spec §3)
    with open(os.path.join(dirname, "tokenizer_config.json"), "w") as f:
        json.dump({"do_lower_case": True, "strip_accents": None, "tokenize_chinese_chars": True,
                   "model_max_length": 512, "tokenizer_class": "BertTokenizer", "clean_up_tokenization_spaces": True,
                   "cls_token": "[CLS]", "sep_token": "[SEP]", "pad_token": "[PAD]", "unk_token": "[UNK]",
                   "mask_token": "[MASK]"}, f)


def upstream_model(mdir, e5dir):
    import torch
    from safetensors.torch import load_file
    import tabstar.arch.arch as arch
    from tabstar.arch.config import TabStarConfig
    arch.E5_SMALL_LOCAL_PATH = e5dir
    model = arch.TabStarModel(TabStarConfig())
    sd = load_file(os.path.join(mdir, "model.safetensors"))
    model.load_state_dict(sd, strict=True)
    model.eval()
    return model


def upstream_forward(model, xt, xn, C, lc, seed, tmp, name):
    """TabStarModel.forward(xt, xn, C), cpu fp32 eval no_grad; lc: a LoRA case (dict r / alpha / frozen):
    a random PEFT adapter saved to tmp/adapter and merged (merge_and_unload) first. -> (logits, adapter dir)"""
    import torch
    adir = None
    if lc:
        from peft import LoraConfig, get_peft_model
        with torch.no_grad():
            base_logits = model(xt, xn, C).float().numpy()
        prefixes = tuple(f"text_encoder.encoder.layer.{i}." for i in range(lc["frozen"]))
        excl = [n for n, _ in model.named_modules() if n.startswith(prefixes)]
        peft_model = get_peft_model(model, LoraConfig(r=lc["r"], lora_alpha=lc["alpha"],
                                                      target_modules=LORA_TARGETS, exclude_modules=excl,
                                                      lora_dropout=0.1, bias="none"))
        g = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for n, p in peft_model.named_parameters():
                if "lora_A" in n or "lora_B" in n:
                    p.copy_(torch.randn(p.shape, generator=g) * 0.05)
        adir = os.path.join(tmp, "adapter")
        peft_model.save_pretrained(adir)
        model = peft_model.merge_and_unload()
        model.eval()
    with torch.no_grad(), torch.autocast(device_type="cpu", enabled=False):
        logits = model(xt, xn, C).float().numpy()
    if adir:
        print(f"{name}: the adapter moves the logits by up to {np.abs(logits - base_logits).max():.3g}")
    return logits, adir


def cmd_make(args):
    import torch
    torch.set_num_threads(2)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    os.makedirs(args.out, exist_ok=True)
    for name, (seed, layers, vocab, task, classes, n_rows) in CASES.items():
        if args.only and name not in args.only.split(","):
            continue
        with tempfile.TemporaryDirectory() as tmp:
            mdir, e5 = os.path.join(tmp, "m"), os.path.join(tmp, "e5")
            subprocess.run([args.nofall, "gen-weights", "tabstar", "--out", mdir, "--seed", str(seed), "--layers",
                            str(layers), "--vocab", str(vocab)], check=True, stdout=subprocess.DEVNULL)
            build_e5(e5, layers, os.path.join(mdir, "vocab.txt"), vocab)
            model = upstream_model(mdir, e5)
            rng = np.random.default_rng(seed)
            targets, x_txt, x_num = make_rows(name, task, classes, n_rows, rng)
            C = len(targets)
            xt = np.array(x_txt, dtype=object)
            xn = np.array(x_num, dtype=np.float32)
            logits, adir = upstream_forward(model, xt, xn, C, LORA.get(name), seed, tmp, name)
            uniq = np.unique(xt)
            ids = [model.tokenizer(str(s), truncation=True)["input_ids"] for s in uniq]
            cdir = os.path.join(args.out, name)
            os.makedirs(cdir, exist_ok=True)
            if adir:
                shutil.rmtree(os.path.join(cdir, "adapter"), ignore_errors=True)
                shutil.copytree(adir, os.path.join(cdir, "adapter"), ignore=shutil.ignore_patterns("README.md"))
        with open(os.path.join(cdir, "case.json"), "w") as f:
            json.dump({"seed": seed, "layers": layers, "vocab": vocab, **({"adapter": "adapter"} if name in LORA else {}),
                       "upstream": "tabstar TabStarModel.forward(x_txt, x_num, d_output), cpu fp32 eval no_grad"}, f,
                      indent=1)
        cells = {"format": "nofall-tabstar-cells/1", "task": task, "n_target_tokens": C, "n_rows": n_rows,
                 "n_cells": len(x_txt[0]), "x_txt": x_txt, "x_num": [[float(v) for v in r] for r in x_num],
                 "classes": classes if classes else []}
        with open(os.path.join(cdir, "cells.json"), "w", encoding="utf-8") as f:
            json.dump(cells, f, ensure_ascii=False, indent=1)
        np.save(os.path.join(cdir, "logits.npy"), logits.astype(np.float32))
        with open(os.path.join(cdir, "token_ids.json"), "w", encoding="utf-8") as f:
            json.dump({"strings": [str(s) for s in uniq], "ids": ids}, f, ensure_ascii=False)
        print(f"{name}: logits {logits.shape}, {len(uniq)} distinct strings, max |logit| {np.abs(logits).max():.4g}")


# ---- e2e: `nofall predict` on CSV tables against upstream's TabSTARVerbalizer ----------------------
# name -> (seed, text layers, vocab, target, task, LoRA case or None); the tables come from e2e_tables
E2E = {
    "e2e-multi": (21, 2, 2000, "Species", "classification", None),
    "e2e-binary": (22, 2, 2000, "label", "classification", None),
    "e2e-reg": (23, 2, 2000, "sale_price usd", "regression", None),
    "e2e-objnum": (24, 2, 2000, "outcome", "classification", None),
    "e2e-lora": (15, 2, 2000, "grade", "classification", LORA["lora-cls3"]),  # lora-cls3's weights and adapter
}


def e2e_tables(name, rng):
    """(header, train rows, test rows) of a case, as CSV fields (strings; "" = missing)."""
    def f(x, d=3):
        return "" if x is None else repr(round(float(x), d))
    if name == "e2e-multi":
        # multi-class string labels; a name that normalizes ("my feature_one"), one that does not ("a:b");
        # NaN, negative and large values; a tied int column; bool (True/False) and bool-with-missing
        # columns; a constant column; multi-line / tab / BEL cells, unquoted leading / trailing blanks (kept,
        # as pandas keeps them); a date-like column
        hdr = ["my feature_one", "a:b", "city", "flag", "maybe", "const", "date", "ratio", "Species"]
        cities = ["Paris", "Tel Aviv", "New\nYork", "tab\there", "", "café crème", "bell\x07ring", " lead", "trail "]
        rows = []
        for r in range(30):
            v = rng.normal(0, 1000)
            if r == 3:
                v = 1.5e20
            if r == 7:
                v = -2.75e7
            rows.append([f(v) if r % 9 != 4 else "", str(int(rng.integers(0, 4))), cities[r % len(cities)],
                         ("True", "False")[int(rng.integers(2))], ("True", "False", "")[r % 3], "7",
                         f"2024-01-{1 + r % 28:02d}", f(rng.uniform(-0.001, 0.001), 6),
                         ["setosa", "versicolor", "virginica"][int(rng.integers(3))]])
        test = [["-5000", "0", "Paris", "True", "", "7", "2025-06-01", "-0.0005", "setosa"],
                ["1.5e20", "3", " Rome ", "False", "True", "7", "2024-01-01", "-0.00004", "virginica"],
                ["", "2", "", "True", "False", "8", "", "0.0005", "setosa"],
                ["12.25", "", "New\nYork", "False", "", "7", "2024-02-30", "0.001", "versicolor"],
                ["3e21", "1", "tab\there", "True", "True", "7", "x", "-1", "setosa"]]
        return hdr, rows, test
    if name == "e2e-binary":
        # binary int labels; tiny values around +-0.00005 (round half-even, -0.0 -> "0"); big ints; negatives
        hdr = ["x y-z", "col.with.dots", "note", "neg", "label"]
        rows = []
        for r in range(32):
            rows.append([f(rng.normal(0, 0.0002), 7), str(int(rng.integers(10**11, 10**13))),
                         ["alpha", "Béta", "gamma ray", "δέλτα", "emoji 🙂"][r % 5], f(-rng.uniform(1, 1000), 2),
                         str(r % 2 if r < 30 else 1)])
        test = [[f(1e-5, 7), "99", "alpha", "-0.5", "0"], ["-0.00005", "10000000000000", "zeta", "-2000", "1"],
                ["0.00015", "5", "emoji 🙂", "", "1"], ["0.00025", "123456789012", "gamma ray", "-1", "0"]]
        return hdr, rows, test
    if name == "e2e-reg":
        # regression; a constant text column; an int and a float feature
        hdr = ["rooms", "area_m2", "zone", "country", "sale_price usd"]
        rows = []
        for r in range(28):
            rooms = int(rng.integers(1, 7))
            area = rng.uniform(30, 250)
            rows.append([str(rooms), f(area, 1), ["north", "south", "east", "west"][r % 4], "IL",
                         f(50000 + 2000 * area + 10000 * rooms + rng.normal(0, 5000), 2)])
        test = [["3", "100.0", "north", "IL", ""], ["6", "260.5", "center", "IL", ""],
                ["1", "29.9", "west", "IL", ""], ["4", "", "south", "", ""]]
        return hdr, rows, test
    if name == "e2e-objnum":
        # "zip": 58 distinct digit strings and one non-numeric token ("?") -> numerical, "?" read as NaN;
        # "code": 55 digit strings and two tokens ("n/k", "tbd") -> text (upstream: not is_mostly_numerical)
        hdr = ["zip", "code", "score", "outcome"]
        rows = []
        for r in range(62):
            z = "?" if r % 15 == 7 else f"{10000 + r * 37:05d}"
            c = ("n/k", "tbd")[r % 2] if r % 10 in (5, 6) else str(500 + r)
            rows.append([z, c, f(rng.normal(5, 2), 2), ("yes", "no")[int(rng.integers(2))]])
        test = [["10037", "501", "5.5", "yes"], ["?", "n/k", "1", "no"], ["99999", "tbd", "", "no"],
                ["00001", "7", "12", "yes"]]
        return hdr, rows, test
    if name == "e2e-lora":
        # int labels 1..3 (str() "1", not "1.0"); the LoRA adapter
        hdr = ["height", "colour", "grade"]
        rows = [[f(rng.normal(170, 10), 1), ["red", "green", "blue"][r % 3], str(1 + r % 3)] for r in range(24)]
        test = [["150.0", "red", "1"], ["171.2", "green", "2"], ["200.0", "violet", "3"]]
        return hdr, rows, test
    raise KeyError(name)


def write_csv(path, hdr, rows):
    import csv
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(hdr)
        w.writerows(rows)


def read_for_upstream(path):
    """pd.read_csv with its defaults, then pandas 3's `str` columns as object (upstream's
    is_numerical_feature raises on the str dtype; a user converts, e.g. df.astype({c: object}))"""
    import pandas as pd
    df = pd.read_csv(path)
    for c in df.columns:
        if pd.api.types.is_string_dtype(df[c].dtype) and not pd.api.types.is_object_dtype(df[c].dtype):
            df[c] = df[c].astype(object)
    return df


def cmd_e2e(args):
    import torch
    from tabstar.tabstar_verbalizer import TabSTARVerbalizer
    torch.set_num_threads(2)
    torch.set_float32_matmul_precision("highest")
    os.makedirs(args.out, exist_ok=True)
    for name, (seed, layers, vocab, target, task, lc) in E2E.items():
        if args.only and name not in args.only.split(","):
            continue
        cdir = os.path.join(args.out, name)
        os.makedirs(cdir, exist_ok=True)
        hdr, train, test = e2e_tables(name, np.random.default_rng(seed))
        write_csv(os.path.join(cdir, "train.csv"), hdr, train)
        write_csv(os.path.join(cdir, "test.csv"), hdr, test)
        tr, te = read_for_upstream(os.path.join(cdir, "train.csv")), read_for_upstream(os.path.join(cdir, "test.csv"))
        verb = TabSTARVerbalizer(is_cls=task == "classification")
        verb.fit(tr.drop(columns=[target]), tr[target])  # the whole training table (nofall's rule)
        data = verb.transform(te.drop(columns=[target]), y=None)
        xt, xn, C = data.x_txt, data.x_num.astype(np.float32), data.d_output
        with tempfile.TemporaryDirectory() as tmp:
            mdir, e5 = os.path.join(tmp, "m"), os.path.join(tmp, "e5")
            subprocess.run([args.nofall, "gen-weights", "tabstar", "--out", mdir, "--seed", str(seed), "--layers",
                            str(layers), "--vocab", str(vocab)], check=True, stdout=subprocess.DEVNULL)
            build_e5(e5, layers, os.path.join(mdir, "vocab.txt"), vocab)
            model = upstream_model(mdir, e5)
            logits, adir = upstream_forward(model, xt, xn, C, lc, seed, tmp, name)
            adapter = None
            if adir:  # the same seed and shapes as lora-cls3: the same adapter, referenced, not copied
                shared = os.path.join(args.out, "..", "tabstar", "lora-cls3", "adapter")
                with open(os.path.join(adir, "adapter_model.safetensors"), "rb") as a, \
                        open(os.path.join(shared, "adapter_model.safetensors"), "rb") as b:
                    same = a.read() == b.read()
                if same:
                    adapter = "../../tabstar/lora-cls3/adapter"
                else:
                    adapter = "adapter"
                    shutil.rmtree(os.path.join(cdir, "adapter"), ignore_errors=True)
                    shutil.copytree(adir, os.path.join(cdir, "adapter"), ignore=shutil.ignore_patterns("README.md"))
        classes = [str(v) for v in verb.y_values] if task == "classification" else []
        if task == "classification":
            preds = [classes[i] for i in np.argmax(logits, axis=1)]
        else:
            preds = [float(v) for v in verb.inverse_transform_target(logits).flatten()]
        num_cols = sorted(verb.numerical_transformers)
        case = {"seed": seed, "layers": layers, "vocab": vocab, "target": target, "task": task,
                **({"adapter": adapter} if adapter else {}),
                "numerical": num_cols, "constant": list(verb.constant_columns),
                "boundaries": {c: [float(b) for b in verb.semantic_transformers[c].inverse_transform(
                    np.linspace(0, 1, 11).reshape(-1, 1)).flatten()] for c in num_cols},
                "predictions": preds,
                "upstream": "tabstar 1.2.2 TabSTARVerbalizer fit(train minus target) / transform(test), "
                            "TabStarModel.forward, cpu fp32 eval no_grad; pandas read_csv, str columns as object"}
        if task == "regression":
            sc = verb.target_transformer
            case["target_mean"], case["target_scale"] = float(sc.mean_[0]), float(sc.scale_[0])
            np.save(os.path.join(cdir, "predictions.npy"),
                    verb.inverse_transform_target(logits).flatten().astype(np.float32))
        with open(os.path.join(cdir, "case.json"), "w", encoding="utf-8") as fh:
            json.dump(case, fh, ensure_ascii=False, indent=1)
        cells = {"format": "nofall-tabstar-cells/1", "task": task, "n_target_tokens": int(C), "n_rows": len(xt),
                 "n_cells": int(xt.shape[1]), "x_txt": [[str(v) for v in r] for r in xt],
                 "x_num": [[float(v) for v in r] for r in xn], "classes": classes}
        with open(os.path.join(cdir, "expected_cells.json"), "w", encoding="utf-8") as fh:
            json.dump(cells, fh, ensure_ascii=False, indent=1)
        np.save(os.path.join(cdir, "logits.npy"), logits.astype(np.float32))
        print(f"{name}: {len(train)} train / {len(test)} test rows, cells {xt.shape}, numerical {num_cols}, "
              f"constant {verb.constant_columns}")
    # upstream's refusals the bad-input tests mirror
    if not args.only or "e2e-objnum" in args.only:
        d = os.path.join(args.out, "e2e-objnum")
        tr = read_for_upstream(os.path.join(d, "train.csv"))
        verb = TabSTARVerbalizer(is_cls=True)
        verb.fit(tr.drop(columns=["outcome"]), tr["outcome"])
        bad = tr.drop(columns=["outcome"]).head(3).copy()
        bad["zip"] = ["?", "unknown", "10037"]
        try:
            verb.transform(bad, y=None)
            print("e2e-objnum: upstream accepted two non-numeric tokens in 'zip' (unexpected)")
        except ValueError as e:
            print(f"e2e-objnum: upstream refuses two non-numeric tokens in a numerical column: {e}")


def cmd_keys(args):
    """upstream's state_dict at the released size (12 text layers, vocabulary 30522): "name dtype shape" lines."""
    import torch
    with tempfile.TemporaryDirectory() as tmp:
        vocab = os.path.join(tmp, "vocab.txt")
        with open(vocab, "w") as f:
            f.write("".join(f"[unused{i}]\n" for i in range(30522)))
        e5 = os.path.join(tmp, "e5")
        build_e5(e5, 12, vocab, 30522)
        import tabstar.arch.arch as arch
        from tabstar.arch.config import TabStarConfig
        arch.E5_SMALL_LOCAL_PATH = e5
        sd = arch.TabStarModel(TabStarConfig()).state_dict()
    with open(args.out, "w") as f:
        for k, v in sd.items():
            f.write(f"{k} {str(v.dtype).replace('torch.', '')} {list(v.shape)}\n".replace(", ", ","))
    print(f"{len(sd)} keys, {sum(v.numel() for v in sd.values())} values -> {args.out}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    mk = sub.add_parser("make")
    mk.add_argument("--nofall", required=True)
    mk.add_argument("--out", required=True)
    mk.add_argument("--only", default="")
    e2 = sub.add_parser("e2e")
    e2.add_argument("--nofall", required=True)
    e2.add_argument("--out", required=True)
    e2.add_argument("--only", default="")
    ks = sub.add_parser("keys")
    ks.add_argument("--out", required=True)
    args = ap.parse_args()
    if args.cmd == "make":
        cmd_make(args)
    elif args.cmd == "e2e":
        cmd_e2e(args)
    elif args.cmd == "keys":
        cmd_keys(args)


if __name__ == "__main__":
    sys.exit(main())
