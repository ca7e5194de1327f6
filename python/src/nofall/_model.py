"""nofall.Model: a checkpoint loaded once, forwards on numpy arrays."""
import json
import threading

import numpy as np

from . import _nofall

TRACE_TOTALS, TRACE_RECORDS, TRACE_TIMED = 0, 1, 3


class Model:
    """A model checkpoint (DIR/config.json + DIR/model.safetensors) on one device.

    ``forward(**inputs)`` runs one forward: Mitra takes ``support_x``
    (n_support, n_features) float32, ``support_y`` (n_support,) int64 labels
    (classifier) or float32 targets (regressor), ``query_x`` (n_query,
    n_features) float32, and returns the logits. C-contiguous arrays of the
    right dtype are passed without a copy; the GIL is released during the
    forward; one forward at a time per model (other threads wait).
    """

    def __init__(self, model_dir, device="cpu", precision="exact"):
        self._m = _nofall.Model(str(model_dir), device, precision)
        self._lock = threading.Lock()
        self.model_dir = str(model_dir)
        self.device = device
        self.inputs = self._m.inputs()
        self.config = self._m.config()

    @property
    def info(self):
        """type, parameter count, device, placement of the last forward"""
        return self._m.info()

    @property
    def n_classes(self):
        for d in self.inputs:
            if d["name"] == "support_y" and d["dtype"] == "int64":
                return d["n_classes"]
        return 0

    def forward(self, out=None, **arrays):
        ins = []
        by_name = {d["name"]: d for d in self.inputs}
        for name, a in arrays.items():
            if name not in by_name:
                raise ValueError(f"the model has no input {name!r}; its inputs: {list(by_name)}")
            dt = np.int64 if by_name[name]["dtype"] == "int64" else np.float32
            a = np.ascontiguousarray(a, dtype=dt)
            ins.append((name, a, tuple(int(s) for s in a.shape)))
        shape = self.output_shape(**arrays)
        if out is None:
            out = np.empty(shape, dtype=np.float32)
        elif out.dtype != np.float32 or tuple(out.shape) != shape or not out.flags.c_contiguous:
            raise ValueError(f"out: a C-contiguous float32 array of shape {shape}")
        with self._lock:
            self._m.forward(ins, out)
        return out

    def output_shape(self, **arrays):
        n_q = np.shape(arrays["query_x"])[0] if "query_x" in arrays else 0
        k = self.n_classes
        if k:
            return (n_q, k)
        outs = int(self.config.get("outputs", self.config.get("dim_output", 1)) or 1)
        return (n_q,) if outs == 1 else (n_q, outs)

    def trace_reset(self, mode=TRACE_TOTALS):
        with self._lock:
            self._m.trace_reset(mode)

    def trace_totals(self):
        return self._m.trace_totals()

    def trace(self):
        """the op trace (records when trace_reset(TRACE_RECORDS) was asked) as a dict"""
        return json.loads(self._m.trace_json())

    def markers(self):
        """the run markers of the command line, as a dict: device, placement, trace totals"""
        d = dict(self.info)
        d.update(self.trace_totals())
        return d

    def set_option(self, key, value):
        with self._lock:
            self._m.set_option(key, int(value))

    def release_workspace(self):
        with self._lock:
            self._m.release_workspace()

    def __repr__(self):
        return f"nofall.Model({self.model_dir!r}, device={self.device!r})"
