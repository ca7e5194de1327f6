#!/usr/bin/env python3
"""Reference fixtures for SpTransformer (SpliceTransformer) from the upstream
PyTorch code.

Upstream is NOT vendored: pass --upstream DIR, a clone of
ShenLab-Genomics/SpliceTransformer (only DIR/model/model.py is imported).
The model is built exactly as upstream's driver builds it
(tasks_annotate_mutations.py, SpTransformerDriver):

    SpTransformer(128, context_len=4000, tissue_num=15, max_seq_len=8192,
                  attn_depth=8, training=False)

on sinkhorn-transformer 0.11.4, local-attention 1.4.4 and
axial-positional-embedding 0.2.1 (spec sptransformer.md §4.3 / §6.3: the
versions that match the released checkpoint's key names and edge masking).
The script refuses other versions.

Modes
  make      gen-weights with `nofall` (--nofall BIN), strict load into
            upstream, write every case under tests/fixtures/sptransformer/
  keys      print upstream's state_dict as "name dtype shape" lines
            (tests/fixtures/sptransformer/state_dict_keys.txt)
  expected  expected logits for one model dir + tokens .npy

Forward settings: CPU, fp32, model.eval(), torch.no_grad(), autocast off,
float32_matmul_precision("highest"), TF32 off, oneDNN default (CPU).

Token ids: A=0, C=1, G=2, T/U=3, N=4; upstream's one-hot has channels
A, C, G, T and N all-zero.

The seeded token generator (integer-only; nofall's nf__spt_seeded_tokens is
the same): splitmix64 started at state = seed; for each token
    state = (state + 0x9E3779B97F4A7C15) mod 2^64
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) mod 2^64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) mod 2^64
    z = z ^ (z >> 31)
    token = z >> 62            (0..3 = A, C, G, T)
The seeded run input (`nofall run --seed S --length N`) is 4000 N, then the
N seeded tokens, then 4000 N.
"""
import argparse
import hashlib
import importlib.metadata as md
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

PINS = {"sinkhorn-transformer": "0.11.4", "local-attention": "1.4.4", "axial-positional-embedding": "0.2.1"}
CONFIG = dict(dim=128, context_len=4000, tissue_num=15, max_seq_len=8192, attn_depth=8)
CONTEXT = 4000
WEIGHTS_SEED = 0
M64 = (1 << 64) - 1

# name -> (list of (seed or None for all-N, length) per batch row, N runs, description)
CASES = {
    "L8001":  dict(rows=[("seeded", 1, 8001)], desc="shortest valid length: 1 output, feature zero-pad 95/96 (odd)"),
    "L8128":  dict(rows=[("padded", 20240816, 128)], desc="the seeded run case: --seed 20240816 --length 128, 4000 N each side"),
    "L8194":  dict(rows=[("seeded", 2, 8194)], desc="even crop by 1/1 of the 8192 window"),
    "L8201":  dict(rows=[("seeded", 3, 8201)], desc="the variant-scoring length (4100 each side of a SNV): odd crop 5/4"),
    "L9000":  dict(rows=[("seeded", 4, 9000)], nruns=[(4400, 4450), (8700, 9000)],
                   desc="even crop 404/404, an N run inside the output window and N at the 3' end"),
    "L16192": dict(rows=[("seeded", 5, 16192)], desc="longest valid length: 8192 outputs, no crop of the window"),
    "allN":   dict(rows=[("allN", 0, 8201)], desc="all N (all-zero one-hot) at L = 8201"),
    "batch2": dict(rows=[("seeded", 6, 8200), ("seeded", 7, 8200)], desc="a batch of 2 at L = 8200 (even crop 4/4)"),
}


def seeded_tokens(seed, n):
    s = seed & M64
    out = np.empty(n, dtype=np.int8)
    for i in range(n):
        s = (s + 0x9E3779B97F4A7C15) & M64
        z = s
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
        z ^= z >> 31
        out[i] = z >> 62
    return out


def case_tokens(c):
    rows = []
    for kind, seed, n in c["rows"]:
        if kind == "seeded":
            t = seeded_tokens(seed, n)
        elif kind == "padded":
            t = np.concatenate([np.full(CONTEXT, 4, np.int8), seeded_tokens(seed, n), np.full(CONTEXT, 4, np.int8)])
        else:
            t = np.full(n, 4, np.int8)
        for a, b in c.get("nruns", []):
            t[a:b] = 4
        rows.append(t)
    return np.stack(rows)


def one_hot(tokens):
    """(B, L) ids -> (B, 4, L) float32, N (4) all-zero: upstream's IN_MAP."""
    eye = np.concatenate([np.eye(4, dtype=np.float32), np.zeros((1, 4), np.float32)])
    return np.ascontiguousarray(eye[tokens.astype(np.int64)].transpose(0, 2, 1))


def check_versions():
    got = {p: md.version(p) for p in PINS}
    bad = {p: v for p, v in got.items() if v != PINS[p]}
    if bad:
        sys.exit(f"error: need {PINS}, found {got} (spec sptransformer.md §4.3/§6.3; see reference/README.md)")
    return got


def build_upstream(upstream):
    import torch
    mp = os.path.join(upstream, "model", "model.py")
    if not os.path.isfile(mp):
        sys.exit(f"error: {mp} not found: --upstream must be a clone of ShenLab-Genomics/SpliceTransformer")
    sys.path.insert(0, os.path.abspath(upstream))
    from model.model import SpTransformer  # noqa: E402  (upstream's own module)
    torch.manual_seed(0)
    return SpTransformer(CONFIG["dim"], context_len=CONFIG["context_len"], tissue_num=CONFIG["tissue_num"],
                         max_seq_len=CONFIG["max_seq_len"], attn_depth=CONFIG["attn_depth"], training=False)


def load_strict(model, model_dir):
    """Strict load of OUR checkpoint into upstream: names, shapes and dtypes."""
    import torch
    from safetensors.torch import load_file
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    assert cfg.get("model_type") == "sptransformer", cfg
    for k, v in CONFIG.items():
        assert cfg[k] == v, f"config.json {k} = {cfg[k]}, the released model has {v}"
    sd = load_file(os.path.join(model_dir, "model.safetensors"))
    ref = model.state_dict()
    bad = [f"{k}: {tuple(sd[k].shape)} {sd[k].dtype} vs {tuple(v.shape)} {v.dtype}"
           for k, v in ref.items() if k in sd and (sd[k].shape != v.shape or sd[k].dtype != v.dtype)]
    if bad:
        sys.exit("error: shape/dtype mismatch: " + "; ".join(bad[:20]))
    res = model.load_state_dict(sd, strict=True)   # raises on any missing / unexpected key
    n_f = sum(v.numel() for v in sd.values() if v.dtype == torch.float32)
    n_i = sum(1 for v in sd.values() if v.dtype == torch.int64)
    n_train = sum(p.numel() for p in model.parameters())
    return dict(result=f"load_state_dict(strict=True): {res}", entries=len(sd), float_elements=n_f, int64_scalars=n_i,
                trainable_parameters=n_train, upstream_entries=len(ref))


class BucketRecorder:
    """Forward hooks on every layer's AttentionSortNet: the top-1 bucket per
    (row, sinkhorn head, query bucket) and the margin between the best two
    bucket probabilities (recomputed in fp32 with the same ops)."""

    def __init__(self, model):
        import torch
        self.torch = torch
        self.rec = {}
        layers = model.attn.attn.layers.layers
        self.handles = [layer[0].fn.sinkhorn_attention.sort_net.register_forward_hook(self._hook(l))
                        for l, layer in enumerate(layers)]
        self.heads = layers[0][0].fn.sinkhorn_attention.heads

    def _hook(self, l):
        def hook(mod, inputs, R):
            torch = self.torch
            q, k = inputs[0], inputs[1]
            bh, t, d = q.shape
            nb = t // mod.bucket_size
            sq = q.reshape(bh, nb, -1, d).mean(dim=2)
            sk = k.reshape(bh, k.shape[1] // mod.kv_bucket_size, -1, d).mean(dim=2)
            P = (torch.einsum('bie,bje->bij', sq, sk) * (d ** -0.5)).softmax(dim=-1)
            top = P.topk(2, dim=-1).values
            idx = R.argmax(dim=-1)
            b = bh // self.heads
            self.rec[l] = (idx.reshape(b, self.heads, nb).to(torch.int16).numpy(),
                           (top[..., 0] - top[..., 1]).reshape(b, self.heads, nb).float().numpy())
        return hook

    def arrays(self):
        L = len(self.rec)
        idx = np.stack([self.rec[l][0] for l in range(L)], axis=1)     # (B, layers, heads, buckets)
        mar = np.stack([self.rec[l][1] for l in range(L)], axis=1)
        return idx.astype(np.int8), mar.astype(np.float32)


def forward(model, tokens, dtype="float32", record=False):
    import torch
    x = torch.from_numpy(one_hot(tokens))
    if dtype == "float64":
        x = x.double()
    rec = BucketRecorder(model) if record else None
    try:
        with torch.no_grad(), torch.autocast("cpu", enabled=False):
            y = model(x)
    finally:
        if rec:
            for h in rec.handles:
                h.remove()
    out = y.permute(0, 2, 1).contiguous().numpy()   # (B, L - 8000, 18): channel axis last
    return out, rec.arrays() if rec else None


# ---- an independent float64 oracle: the spec's Appendix A (NumPy) ----------------------

W_ = [11] * 8 + [21] * 8
AR_ = [1, 1, 1, 1, 4, 4, 4, 4, 10, 10, 10, 10, 20, 20, 20, 20]


def np_reference(sd, x):
    """x (4, L) float64 one-hot -> (18, L - 8000) logits; spec Appendix A,
    local-attention edges masked (variant (a), local-attention 1.4.4)."""
    P = {k: v.double().numpy() if v.is_floating_point() else v.numpy() for k, v in sd.items()}

    def conv1d(x, w, b, dil=1, pad=0):
        xp = np.pad(x, ((0, 0), (pad, pad)))
        Lo = x.shape[1] + 2 * pad - dil * (w.shape[2] - 1)
        return sum(w[:, :, k] @ xp[:, k * dil:k * dil + Lo] for k in range(w.shape[2])) + b[:, None]

    def bn(x, p):
        return (x - P[p + ".running_mean"][:, None]) / np.sqrt(P[p + ".running_var"][:, None] + 1e-5) \
            * P[p + ".weight"][:, None] + P[p + ".bias"][:, None]

    def encoder(x, e):
        pre = f"encoder.{e}."
        conv = conv1d(x, P[pre + "conv1.weight"], P[pre + "conv1.bias"])
        skip = conv1d(conv, P[pre + "skip.weight"], P[pre + "skip.bias"])
        j = 0
        for i in range(16):
            r, pad = f"{pre}resblocks.{i}.", AR_[i] * (W_[i] - 1) // 2
            h = conv1d(np.maximum(bn(conv, r + "bn1"), 0), P[r + "conv1.weight"], P[r + "conv1.bias"], AR_[i], pad)
            h = conv1d(np.maximum(bn(h, r + "bn2"), 0), P[r + "conv2.weight"], P[r + "conv2.bias"], AR_[i], pad)
            conv = conv + h
            if (i + 1) % 4 == 0:
                skip = skip + conv1d(conv, P[f"{pre}convs.{j}.weight"], P[f"{pre}convs.{j}.bias"])
                j += 1
        return skip

    def pad_or_crop(x, left, right):
        L = x.shape[1]
        x = x[:, max(0, -left):L - max(0, -right)]
        return np.pad(x, ((0, 0), (max(0, left), max(0, right))))

    def softmax(s, axis=-1):
        s = s - s.max(axis=axis, keepdims=True)
        e = np.exp(s)
        return e / e.sum(axis=axis, keepdims=True)

    def layernorm(x, p, eps=1e-5):
        m = x.mean(-1, keepdims=True)
        v = ((x - m) ** 2).mean(-1, keepdims=True)
        return (x - m) / np.sqrt(v + eps) * P[p + ".weight"] + P[p + ".bias"]

    def blocks(a):
        return a.reshape(-1, 64, a.shape[1])

    def local_attn(q, k, v):
        bq, bk, bv = blocks(q), blocks(k), blocks(v)
        pad = np.full((1, 64, q.shape[1]), -1.0)
        bkp, bvp = np.concatenate([pad, bk, pad]), np.concatenate([pad, bv, pad])
        K = np.concatenate([bkp[:-2], bkp[1:-1], bkp[2:]], axis=1)
        V = np.concatenate([bvp[:-2], bvp[1:-1], bvp[2:]], axis=1)
        S = np.einsum('wid,wjd->wij', bq, K) / np.sqrt(q.shape[1])
        S[0, :, 0:64] = -np.inf
        S[-1, :, 128:192] = -np.inf
        return (softmax(S) @ V).reshape(-1, q.shape[1])

    def sinkhorn_attn(q, k, v):
        bq, bk, bv = blocks(q), blocks(k), blocks(v)
        R = (bq.mean(1) @ bk.mean(1).T) / np.sqrt(q.shape[1])
        Pr = softmax(R)
        idx = Pr.argmax(-1)
        p = Pr[np.arange(len(idx)), idx]
        ksel = p[:, None, None] * bk[idx]
        vsel = ksel                                   # upstream's value-reuses-key behaviour (spec §3.6)
        K = np.concatenate([ksel, bk], axis=1)
        V = np.concatenate([vsel, bv], axis=1)
        S = np.einsum('uid,ujd->uij', bq, K) / np.sqrt(q.shape[1])
        return (softmax(S) @ V).reshape(-1, q.shape[1])

    def gelu(x):
        from scipy.special import erf
        return 0.5 * x * (1 + erf(x / np.sqrt(2)))

    L = x.shape[1]
    odd = L & 1
    f1 = np.concatenate([encoder(x, 0), encoder(x, 1)], 0)
    f2 = conv1d(conv1d(x, P["conv1.0.weight"], P["conv1.0.bias"]), P["conv1.1.weight"], P["conv1.1.bias"])
    a = (-(L - 8192)) // 2
    f1, f2 = pad_or_crop(f1, a, a + odd), pad_or_crop(f2, a, a + odd)
    X = conv1d(np.concatenate([f1, f2], 0), P["conv2.weight"], P["conv2.bias"]).T
    t = np.arange(8192)
    X = X + P["attn.pos_emb.weights_0"][0, t // 64, 0, :] + P["attn.pos_emb.weights_1"][0, 0, t % 64, :]
    for l in range(CONFIG["attn_depth"]):
        pre = f"attn.attn.layers.layers.{l}."
        Y = layernorm(X, pre + "0.norm")
        Q = Y @ P[pre + "0.fn.to_q.weight"].T
        KV = Y @ P[pre + "0.fn.to_kv.weight"].T
        K, V = KV[:, :256], KV[:, 256:]
        O = np.concatenate([(local_attn if h < 2 else sinkhorn_attn)(Q[:, 32 * h:32 * h + 32], K[:, 32 * h:32 * h + 32],
                                                                       V[:, 32 * h:32 * h + 32]) for h in range(8)], axis=1)
        X = X + O @ P[pre + "0.fn.to_out.weight"].T + P[pre + "0.fn.to_out.bias"]
        Y = layernorm(X, pre + "1.norm")
        X = X + gelu(Y @ P[pre + "1.fn.fn.w1.weight"].T + P[pre + "1.fn.fn.w1.bias"]) @ P[pre + "1.fn.fn.w2.weight"].T \
            + P[pre + "1.fn.fn.w2.bias"]
    A = layernorm(X, "attn.norm").T
    out = np.concatenate([conv1d(A, P["splice.weight"], P["splice.bias"]), conv1d(A, P["usage.weight"], P["usage.bias"])], 0)
    b = (-(8192 - (L - 8000))) // 2
    return pad_or_crop(out, b + odd, b)


# ---- modes -------------------------------------------------------------------------------

def settings():
    import torch
    torch.set_float32_matmul_precision("highest")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    return {"torch": torch.__version__, "numpy": np.__version__, "threads": torch.get_num_threads(),
            "device": "cpu", "dtype": "float32", "eval": True, "no_grad": True, "autocast": False,
            "float32_matmul_precision": "highest", "tf32": False}


def cmd_keys(args):
    check_versions()
    model = build_upstream(args.upstream)
    for k, v in model.state_dict().items():
        print(k, str(v.dtype).replace("torch.", ""), "x".join(str(s) for s in v.shape) or "scalar")


def cmd_expected(args):
    versions = check_versions()
    st = settings()
    model = build_upstream(args.upstream)
    load = load_strict(model, args.model)
    model.eval()
    t = np.load(args.tokens)
    t = t.reshape(1, -1) if t.ndim == 1 else t
    out, (idx, mar) = forward(model, t, record=True)
    os.makedirs(args.out, exist_ok=True)
    np.save(os.path.join(args.out, "expected_logits.npy"), out.astype(np.float32))
    np.save(os.path.join(args.out, "expected_buckets.npy"), idx)
    np.save(os.path.join(args.out, "expected_bucket_margin.npy"), mar)
    print(json.dumps({"strict_load": load, "versions": versions, "settings": st, "shape": list(out.shape)}))


def cmd_make(args):
    import torch
    versions = check_versions()
    st = settings()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    outdir = args.out or os.path.join(root, "tests", "fixtures", "sptransformer")
    os.makedirs(outdir, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="spt-ref-")
    mdir = os.path.join(tmp, "model")
    gen = [args.nofall, "gen-weights", "sptransformer", "--out", mdir, "--seed", str(WEIGHTS_SEED)]
    subprocess.run(gen, check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(mdir, "model.safetensors"), "rb") as f:
        weights_sha256 = hashlib.sha256(f.read()).hexdigest()
    model = build_upstream(args.upstream)
    load = load_strict(model, mdir)
    model.eval()
    print("strict load:", json.dumps(load), flush=True)
    with open(os.path.join(outdir, "state_dict_keys.txt"), "w") as f:
        for k, v in model.state_dict().items():
            f.write(f"{k} {str(v.dtype).replace('torch.', '')} {'x'.join(str(s) for s in v.shape) or 'scalar'}\n")
    only = set(args.only.split(",")) if args.only else None
    check64 = set(args.check_f64.split(",")) if args.check_f64 else set()
    model64 = None
    summary = {}
    for name, c in CASES.items():
        if only and name not in only:
            continue
        tokens = case_tokens(c)
        out, (idx, mar) = forward(model, tokens, record=True)
        B, L = tokens.shape
        assert out.shape == (B, L - 2 * CONTEXT, 18), out.shape
        d = os.path.join(outdir, name)
        os.makedirs(d, exist_ok=True)
        np.save(os.path.join(d, "tokens.npy"), tokens[0] if B == 1 else tokens)
        np.save(os.path.join(d, "expected_logits.npy"), out.astype(np.float32))
        np.save(os.path.join(d, "expected_buckets.npy"), idx)
        np.save(os.path.join(d, "expected_bucket_margin.npy"), mar)
        case = {
            "name": name, "description": c["desc"],
            "weights": {"gen_weights": "nofall gen-weights sptransformer --out DIR --seed %d" % WEIGHTS_SEED,
                        "seed": WEIGHTS_SEED, "config": CONFIG, "model_safetensors_sha256": weights_sha256},
            "tokens": {"file": "tokens.npy", "dtype": "int8", "shape": list(tokens[0].shape if B == 1 else tokens.shape),
                       "ids": {"A": 0, "C": 1, "G": 2, "T": 3, "N": 4},
                       "rows": [{"kind": k, "seed": s, "length": n} for k, s, n in c["rows"]],
                       "n_runs": [list(r) for r in c.get("nruns", [])],
                       "generator": "splitmix64 from state = seed, token = next() >> 62 (reference/sptransformer_fixtures.py)"},
            "context": "given", "length": L, "batch": B, "output_offset": CONTEXT,
            "expected": {"logits": "expected_logits.npy", "shape": list(out.shape), "dtype": "float32",
                         "channels": "0 no_splice, 1 acceptor, 2 donor, 3..17 tissues (spec §1)",
                         "buckets": "expected_buckets.npy int8 (batch, layer, sinkhorn head 0..5 = head 2..7, query bucket): top-1 key bucket",
                         "bucket_margin": "expected_bucket_margin.npy float32, same shape: p(top1) - p(top2) of the bucket softmax",
                         "min_bucket_margin": float(mar.min()),
                         "n_bucket_margin_below_1e-6": int((mar < 1e-6).sum()), "n_bucket_choices": int(mar.size)},
            "strict_load": load, "versions": versions, "settings": st,
        }
        if name in check64:
            if model64 is None:
                model64 = build_upstream(args.upstream).double()
                model64.load_state_dict({k: v.double() if v.is_floating_point() else v for k, v in model.state_dict().items()})
                model64.eval()
            o64, _ = forward(model64, tokens, dtype="float64")
            sd = model.state_dict()
            ref = np.stack([np_reference(sd, one_hot(tokens[i:i + 1])[0].astype(np.float64)).T for i in range(B)])
            case["float64_check"] = {
                "numpy_appendix_a_vs_torch_float64_max_abs": float(np.abs(ref - o64).max()),
                "torch_float32_vs_float64_max_abs": float(np.abs(out.astype(np.float64) - o64).max()),
                "torch_float32_vs_float64_mean_abs": float(np.abs(out.astype(np.float64) - o64).mean()),
            }
        with open(os.path.join(d, "case.json"), "w") as f:
            json.dump(case, f, indent=1)
            f.write("\n")
        summary[name] = {"shape": list(out.shape), "min_bucket_margin": float(mar.min()),
                         "n_bucket_margin_below_1e-6": int((mar < 1e-6).sum()),
                         **({"float64_check": case["float64_check"]} if "float64_check" in case else {})}
        print(name, json.dumps(summary[name]), flush=True)
    print(json.dumps({"strict_load": load, "cases": summary}, indent=1))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="mode", required=True)
    a = sub.add_parser("make")
    a.add_argument("--upstream", required=True)
    a.add_argument("--nofall", required=True)
    a.add_argument("--out")
    a.add_argument("--only")
    a.add_argument("--check-f64", default="L8001,L8201", help="cases also checked in float64 (torch) and against the spec's NumPy reference")
    a = sub.add_parser("keys")
    a.add_argument("--upstream", required=True)
    a = sub.add_parser("expected")
    a.add_argument("--upstream", required=True)
    a.add_argument("--model", required=True)
    a.add_argument("--tokens", required=True)
    a.add_argument("--out", required=True)
    args = ap.parse_args()
    {"make": cmd_make, "keys": cmd_keys, "expected": cmd_expected}[args.mode](args)


if __name__ == "__main__":
    main()
