#!/usr/bin/env python3
"""hostile-files.py MODEL SUPPORT_X OUT -- the malformed files of the
hostile-input corpus (tests/hostile.sh): model directories OUT/m-NAME
(config.json + model.safetensors, one thing wrong in each) and .npy files
OUT/x-NAME.npy. Each is the good file with one defect."""
import json, os, shutil, struct, sys

model, sx, out = sys.argv[1:4]
os.makedirs(out, exist_ok=True)
cfg_text = open(os.path.join(model, "config.json"), "rb").read()
st = open(os.path.join(model, "model.safetensors"), "rb").read()
hlen = struct.unpack("<Q", st[:8])[0]
header = json.loads(st[8:8 + hlen])
data = st[8 + hlen:]

def model_dir(name, cfg=None, st_bytes=None):
    d = os.path.join(out, "m-" + name)
    os.makedirs(d, exist_ok=True)
    open(os.path.join(d, "config.json"), "wb").write(cfg_text if cfg is None else cfg)
    open(os.path.join(d, "model.safetensors"), "wb").write(st if st_bytes is None else st_bytes)

def st_file(hdr_bytes, body=data):
    return struct.pack("<Q", len(hdr_bytes)) + hdr_bytes + body

def hdr(h):
    return json.dumps(h, separators=(",", ":")).encode()

tensors = sorted((k for k in header if k != "__metadata__"), key=lambda k: header[k]["data_offsets"][0])
last = tensors[-1]

# ---- safetensors ----
model_dir("st-trailing-json", st_bytes=st_file(hdr(header) + b"xyz"))
model_dir("st-nul-padding", st_bytes=st_file(hdr(header) + b"\0" * 8))
h = dict(header); h["final_layer.bias\u0000shadow"] = h.pop("final_layer.bias")
model_dir("st-nul-key", st_bytes=st_file(json.dumps(h, separators=(",", ":")).encode()))
h = dict(header); h["__metadata__"] = "pt"
model_dir("st-metadata-string", st_bytes=st_file(hdr(h)))
h = dict(header); h["__metadata__"] = {"format": 1}
model_dir("st-metadata-number", st_bytes=st_file(hdr(h)))
h = json.loads(json.dumps(header)); b, e = h[last]["data_offsets"]; h[last]["data_offsets"] = [b + 4, e + 4]
model_dir("st-gap", st_bytes=st_file(hdr(h), data[:b] + b"\0" * 4 + data[b:]))
model_dir("st-trailing-bytes", st_bytes=st + b"\0" * 4)
h = json.loads(json.dumps(header)); b, e = h[last]["data_offsets"]; h[last]["data_offsets"] = [b - 4, e - 4]
model_dir("st-overlap", st_bytes=st_file(hdr(h), data[:-4]))
raw = hdr(header).replace(b'"final_layer.bias"', b'"final_layer.bias\xff"')
model_dir("st-non-utf8-key", st_bytes=st_file(raw))
h = dict(header); h["final_layer.bias\u001b[31m"] = h.pop("final_layer.bias")
model_dir("st-control-key", st_bytes=st_file(json.dumps(h, separators=(",", ":")).encode()))
raw = hdr(header)
first = '"%s":%s' % (tensors[0], json.dumps(header[tensors[0]], separators=(",", ":")))
model_dir("st-duplicate-key", st_bytes=st_file(raw[:-1] + b"," + first.encode() + b"}"))
model_dir("st-header-length", st_bytes=struct.pack("<Q", len(st) * 2) + st[8:])
model_dir("st-tiny", st_bytes=b"abc")
model_dir("st-empty", st_bytes=b"")
model_dir("st-leading-space", st_bytes=st_file(b" " + hdr(header)))
h = json.loads(json.dumps(header)); h[last]["shape"] = [s + 1 for s in h[last]["shape"]]
model_dir("st-span", st_bytes=st_file(hdr(h)))
h = json.loads(json.dumps(header)); h[tensors[0]]["shape"] = [-1]
model_dir("st-negative-shape", st_bytes=st_file(hdr(h)))
h = json.loads(json.dumps(header)); h[tensors[0]]["data_offsets"] = [0.5, 4]
model_dir("st-fraction-offset", st_bytes=st_file(hdr(h)))

# ---- config.json ----
cfg = json.loads(cfg_text)
def cfg_dir(name, text):
    model_dir(name, cfg=text if isinstance(text, bytes) else text.encode())
def with_(k, v):
    c = dict(cfg); c[k] = v; return json.dumps(c)
cfg_dir("cfg-int-overflow", json.dumps(cfg).replace('"dim": %d' % cfg["dim"], '"dim": 2147483648'))
cfg_dir("cfg-1e300", json.dumps(cfg).replace('"n_heads": %d' % cfg["n_heads"], '"n_heads": 1e300'))
cfg_dir("cfg-1e400", json.dumps(cfg).replace('"n_layers": %d' % cfg["n_layers"], '"n_layers": -1e400'))
cfg_dir("cfg-fraction", with_("dim", 16.5))
cfg_dir("cfg-negative", with_("dim_output", -3))
cfg_dir("cfg-duplicate-key", json.dumps(cfg)[:-1] + ', "dim": 64}')
cfg_dir("cfg-trailing", json.dumps(cfg) + " {}")
cfg_dir("cfg-array", "[" + json.dumps(cfg) + "]")
cfg_dir("cfg-bom", b"\xef\xbb\xbf" + json.dumps(cfg).encode())
cfg_dir("cfg-non-utf8", json.dumps(cfg).encode().replace(b"CLASSIFICATION", b"CLASSIFICATION\xff"))
cfg_dir("cfg-model-type-control", with_("model_type", "\u001b[2Jmitra"))
cfg_dir("cfg-task", with_("task", "CLUSTERING"))
cfg_dir("cfg-string-dim", with_("dim", "16"))
cfg_dir("cfg-plus-number", json.dumps(cfg).replace('"dim": %d' % cfg["dim"], '"dim": +%d' % cfg["dim"]))

# ---- .npy ----
good = open(sx, "rb").read()
def npy(name, dict_text, body):
    d = dict_text.encode()
    open(os.path.join(out, "x-%s.npy" % name), "wb").write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(d)) + d + body)
ver, hl = good[6], struct.unpack("<H", good[8:10])[0]
body = good[10 + hl:]
npy("wrap", "{'descr': '<f4', 'fortran_order': False, 'shape': (16777216, 1099511627776), }\n", b"")
npy("no-braces", "'descr': '<f4', 'fortran_order': False, 'shape': (16, 13), \n", body)
npy("keys-in-string", "{'x': \"'descr': '<f4', 'fortran_order': False, 'shape': (16, 13)\"}\n", body)
npy("int-not-tuple", "{'descr': '<f4', 'fortran_order': False, 'shape': (208), }\n", body)
npy("duplicate-key", "{'descr': '<f4', 'fortran_order': False, 'shape': (16, 13), 'shape': (16, 13), }\n", body)
npy("after-dict", "{'descr': '<f4', 'fortran_order': False, 'shape': (16, 13), } x\n", body)
npy("fortran", "{'descr': '<f4', 'fortran_order': True, 'shape': (16, 13), }\n", body)
npy("big-endian", "{'descr': '>f4', 'fortran_order': False, 'shape': (16, 13), }\n", body)
npy("truncated", "{'descr': '<f4', 'fortran_order': False, 'shape': (16, 13), }\n", body[:-4])
npy("three-d", "{'descr': '<f4', 'fortran_order': False, 'shape': (4, 4, 13), }\n", body)
open(os.path.join(out, "x-magic.npy"), "wb").write(b"NOTNUMPY" + good[8:])
open(os.path.join(out, "x-header-length.npy"), "wb").write(good[:8] + b"\xff\xff" + good[10:])
