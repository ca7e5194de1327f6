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
            adir = None
            if name in LORA:
                from peft import LoraConfig, get_peft_model
                lc = LORA[name]
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
    ks = sub.add_parser("keys")
    ks.add_argument("--out", required=True)
    args = ap.parse_args()
    if args.cmd == "make":
        cmd_make(args)
    elif args.cmd == "keys":
        cmd_keys(args)


if __name__ == "__main__":
    sys.exit(main())
