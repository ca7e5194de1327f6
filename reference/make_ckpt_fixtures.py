#!/usr/bin/env python3
"""Genuine torch.save checkpoints for the C .ckpt reader (src/io/torch-ckpt.c).

Run once where torch is installed (e.g. .venv-ref/bin/python); the outputs are
committed under tests/fixtures/ckpt/ and CI never needs torch:

    .venv-ref/bin/python reference/make_ckpt_fixtures.py [--out tests/fixtures/ckpt]

A second mode checks nofall's .ckpt writer (src/io/torch-ckpt-write.c,
`nofall gen-weights sptransformer --format ckpt`) against torch.save itself:

    .venv-ref/bin/python reference/make_ckpt_fixtures.py resave FILE.ckpt

torch.load(FILE, weights_only=True), torch.save of the result under the same
file name (in a temporary directory: the same zip folder name), then the two
zips record by record: the same names in the same order, every record's
bytes identical (data.pkl included: the pickle opcodes, memo indices,
storage keys, tensor order; .data/serialization_id included), every
record's data 64-byte aligned in both. Exit 0 when all are. (The zip
framing around the records is libzip's, not miniz's: not compared.)

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
import tempfile
import zipfile
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


def zip_records(path: str):
    """[(name, data offset, method, bytes)] in central-directory order; the
    offset from the local header, as torch's reader computes it."""
    out = []
    with open(path, "rb") as raw, zipfile.ZipFile(path) as z:
        for info in z.infolist():
            raw.seek(info.header_offset)
            hdr = raw.read(30)
            n, m = struct.unpack("<HH", hdr[26:30])
            out.append((info.filename, info.header_offset + 30 + n + m, info.compress_type, z.read(info)))
    return out


def resave(path: str) -> int:
    obj = torch.load(path, map_location="cpu", weights_only=True)
    with tempfile.TemporaryDirectory() as d:
        again = os.path.join(d, os.path.basename(path))
        torch.save(obj, again)
        a, b = zip_records(path), zip_records(again)
    bad = []
    if [r[0] for r in a] != [r[0] for r in b]:
        bad.append(f"record names differ: {[r[0] for r in a][:8]}... vs {[r[0] for r in b][:8]}...")
    same = 0
    for ra, rb in zip(a, b):
        if ra[0] != rb[0]:
            continue
        if ra[3] != rb[3]:
            bad.append(f"{ra[0]}: {len(ra[3])} vs {len(rb[3])} bytes, first difference at "
                       f"{next((i for i, (x, y) in enumerate(zip(ra[3], rb[3])) if x != y), min(len(ra[3]), len(rb[3])))}")
        elif ra[2] != 0 or ra[1] % 64 or rb[1] % 64:
            bad.append(f"{ra[0]}: method {ra[2]}, data at {ra[1]} (ours) / {rb[1]} (torch)")
        else:
            same += 1
    n_tensors = len(obj["state_dict"]) if isinstance(obj, dict) and "state_dict" in obj else len(obj)
    print(f"resave {path}: torch {torch.__version__}, {n_tensors} tensors, {len(a)} records; "
          f"{same} identical and 64-byte aligned in both")
    for m in bad:
        print("  DIFFERENT:", m)
    return 1 if bad else 0


def main() -> int:
    if len(sys.argv) >= 2 and sys.argv[1] == "resave":
        if len(sys.argv) != 3:
            sys.exit("usage: make_ckpt_fixtures.py resave FILE.ckpt")
        return resave(sys.argv[2])
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
