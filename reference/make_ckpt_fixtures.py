#!/usr/bin/env python3
"""Genuine torch.save checkpoints for the C .ckpt reader (src/io/torch-ckpt.c).

Run once where torch is installed (e.g. .venv-ref/bin/python); the outputs are
committed under tests/fixtures/ckpt/ and CI never needs torch:

    .venv-ref/bin/python reference/make_ckpt_fixtures.py [--out tests/fixtures/ckpt]

Every accepted checkpoint NAME.ckpt comes with NAME.expected.safetensors: the
tensors of the selected state_dict as torch.load (weights_only=True) sees them,
written contiguously by this script with the standard library only (no
safetensors package), so the C test compares names, dtypes, shapes and bytes.
Checkpoints the reader must refuse have no .expected file; manifest.json says
what each file is and what the reader must do with it. Values are seeded.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import struct
import sys
from collections import OrderedDict

import torch

ST_DTYPE = {torch.float32: "F32", torch.float64: "F64", torch.float16: "F16", torch.bfloat16: "BF16",
            torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8",
            torch.uint8: "U8", torch.bool: "BOOL"}


def write_safetensors(path: str, tensors: "OrderedDict[str, torch.Tensor]") -> None:
    header, blobs, off = {}, [], 0
    for name in sorted(tensors):
        t = tensors[name].detach().contiguous()
        b = t.numpy().tobytes() if t.dtype != torch.bfloat16 else t.view(torch.int16).numpy().tobytes()
        header[name] = {"dtype": ST_DTYPE[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def bn_model() -> torch.nn.Module:
    torch.manual_seed(20240816)
    m = torch.nn.Sequential(torch.nn.Conv1d(4, 8, 3), torch.nn.BatchNorm1d(8), torch.nn.Linear(8, 2))
    m.train()
    # give the BatchNorm real running statistics and a non-zero num_batches_tracked
    with torch.no_grad():
        x = torch.randn(3, 4, 12)
        bn = m[1]
        y = m[0](x)
        bn(y)
        bn(y * 2.0)
    m.eval()
    return m


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "ckpt"))
    args = ap.parse_args()
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    manifest = {"torch": torch.__version__, "files": {}}

    def accept(name: str, obj, selected, note: str, buffer: bool = False, **kw) -> None:
        path = os.path.join(out, name + ".ckpt")
        if buffer:   # saved to a stream: the zip prefix is "archive/"
            bio = io.BytesIO()
            torch.save(obj, bio, **kw)
            with open(path, "wb") as f:
                f.write(bio.getvalue())
        else:        # saved to a path: the prefix is the basename
            torch.save(obj, path, **kw)
        back = torch.load(path, weights_only=True)
        sd = back["state_dict"] if "state_dict" in back else back
        assert set(sd) == set(selected)
        write_safetensors(os.path.join(out, name + ".expected.safetensors"), OrderedDict(sd))
        manifest["files"][name + ".ckpt"] = {"expect": "accept", "tensors": len(sd), "note": note}

    def refuse(name: str, obj, must_contain: str, note: str, **kw) -> None:
        path = os.path.join(out, name + ".ckpt")
        torch.save(obj, path, **kw)
        manifest["files"][name + ".ckpt"] = {"expect": "refuse", "message": must_contain, "note": note}

    m = bn_model()
    sd = m.state_dict()
    assert sd["1.num_batches_tracked"].dtype == torch.int64 and sd["1.num_batches_tracked"].dim() == 0
    accept("bn_wrapped", {"state_dict": sd}, sd, "{'state_dict': OrderedDict} of Conv1d+BatchNorm1d+Linear, saved to a path")
    accept("bn_bare", sd, sd, "a bare state_dict saved to a BytesIO (prefix archive/)", buffer=True)

    torch.manual_seed(7)
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6) * 0.5
    w = torch.randn(3, 5)
    views = OrderedDict([
        ("base", base),
        ("tail", base.view(-1)[5:]),          # offset 5 into the shared storage
        ("rows", base[1:3]),                  # offset 6, contiguous
        ("row2", base[2]),                    # offset 12
        ("scalar", base[3, 4]),               # 0-d view, offset 22
        ("tied.a", w), ("tied.b", w),         # one storage, two names
        ("steps", torch.tensor(5, dtype=torch.int64)),
        ("empty", torch.zeros(0, 3)),
    ])
    accept("views", {"state_dict": views}, views, "views with storage offsets and several tensors sharing one storage")

    lightning = {
        "epoch": 3, "global_step": 1234, "pytorch-lightning_version": "2.1.0",
        "state_dict": sd,
        "optimizer_states": [{"state": {0: {"step": torch.tensor(4.0), "exp_avg": torch.zeros(2, 8)}},
                              "param_groups": [{"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.0,
                                                "amsgrad": False, "params": [0, 1, 2]}]}],
        "lr_schedulers": [],
        "callbacks": {"ModelCheckpoint{'monitor': 'val'}": {"best_model_score": torch.tensor(0.25)}},
        "hyper_parameters": {"lr": 0.001, "dims": [128, 64], "none": None, "flag": True, "name": "sp",
                             "raw": b"\x00\x01ab", "big": 2 ** 40, "neg": -5, "nested": {"a": (1, 2.5, "x")}},
    }
    accept("lightning", lightning, sd, "a Lightning-like checkpoint: the state_dict is selected, the rest only checked")

    import torch.utils.serialization as ser
    ser.config.save.compute_crc32 = False
    try:
        nocrc = OrderedDict([("x", torch.arange(6, dtype=torch.float32).reshape(2, 3)), ("flag", torch.tensor([True]))])
        accept("nocrc", {"state_dict": nocrc}, nocrc, "compute_crc32=False: every CRC is 0 (read as 'not computed')")
    finally:
        ser.config.save.compute_crc32 = True

    # the reader must refuse these
    refuse("noncontig", {"state_dict": {"wt": base.t()}}, "not contiguous", "a transposed view (strides (1, 6))")
    refuse("module", torch.nn.Linear(2, 2), "is not allowed", "a whole nn.Module (pickles its class)", )
    refuse("proto4", {"state_dict": {"x": torch.ones(2)}}, "protocol 4", "pickle_protocol=4", pickle_protocol=4)
    refuse("legacy", {"state_dict": {"x": torch.ones(2)}}, "legacy", "_use_new_zipfile_serialization=False",
           _use_new_zipfile_serialization=False)
    refuse("float8", {"state_dict": {"h": torch.ones(2, dtype=torch.float8_e4m3fn)}}, "_rebuild_tensor_v3",
           "float8 (UntypedStorage + _rebuild_tensor_v3)")

    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
        f.write("\n")
    print(json.dumps(manifest, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
