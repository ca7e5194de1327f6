#!/usr/bin/env python3
"""npy-close.py A.npy B.npy [--max-abs 1e-5] [--mean-abs 1e-6]

Two float32 .npy results of the same forward computed along two different
code paths (another --chunk-rows, another thread count, another CPU or GEMM
kernel) agree within fp32 rounding: same shape, both finite where the other
is, max |a - b| <= MAX_ABS * max(1, max |b|) and mean |a - b| <= MEAN_ABS *
max(1, max |b|). The defaults are the bounds the fixtures hold a backend to
against upstream PyTorch, i.e. what a different summation order may cost
(see docs/numerics.md, "Determinism"). Prints the figures; exit 1 if not within.
Standard library only (CI has no numpy)."""
import ast
import math
import struct
import sys


def read_npy_f32(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:6] != b"\x93NUMPY":
        raise SystemExit("%s: not a .npy file" % path)
    major = data[6]
    if major == 1:
        hlen = struct.unpack("<H", data[8:10])[0]
        off = 10
    else:
        hlen = struct.unpack("<I", data[8:12])[0]
        off = 12
    hdr = ast.literal_eval(data[off:off + hlen].decode("latin1"))
    if hdr["descr"] != "<f4" or hdr["fortran_order"]:
        raise SystemExit("%s: want little-endian float32 in C order, got %r" % (path, hdr))
    shape = tuple(hdr["shape"])
    n = 1
    for d in shape:
        n *= d
    body = data[off + hlen:]
    if len(body) != 4 * n:
        raise SystemExit("%s: %d data bytes for shape %r" % (path, len(body), shape))
    return shape, struct.unpack("<%df" % n, body)


def main(argv):
    args = argv[1:]
    max_abs, mean_abs = 1e-5, 1e-6
    pos = []
    i = 0
    while i < len(args):
        if args[i] == "--max-abs":
            max_abs = float(args[i + 1]); i += 2
        elif args[i] == "--mean-abs":
            mean_abs = float(args[i + 1]); i += 2
        else:
            pos.append(args[i]); i += 1
    if len(pos) != 2:
        print(__doc__)
        return 2
    sa, a = read_npy_f32(pos[0])
    sb, b = read_npy_f32(pos[1])
    if sa != sb:
        print("shape %r vs %r" % (sa, sb))
        return 1
    worst, total, scale, nonfinite = 0.0, 0.0, 1.0, 0
    for x, y in zip(a, b):
        if math.isfinite(x) != math.isfinite(y):
            nonfinite += 1
            continue
        if not math.isfinite(y):
            continue
        d = abs(x - y)
        worst = max(worst, d)
        total += d
        scale = max(scale, abs(y))
    mean = total / max(1, len(a))
    ok = nonfinite == 0 and worst <= max_abs * scale and mean <= mean_abs * scale
    differ = sum(1 for x, y in zip(a, b) if struct.pack("<f", x) != struct.pack("<f", y))
    print("npy-close: %d values, %d differ in bits, max_abs %.3g (bound %.3g), mean_abs %.3g (bound %.3g)%s: %s"
          % (len(a), differ, worst, max_abs * scale, mean, mean_abs * scale,
             ", %d finite/non-finite mismatches" % nonfinite if nonfinite else "",
             "within rounding" if ok else "NOT within rounding"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
