#!/usr/bin/env python3
"""Coefficients of the cpu backend's erf (src/backends/cpu/cpu-kernels.c).

erf(z) = z * g(z^2) with g(u) = erf(sqrt(u)) / sqrt(u), interpolated by a
degree-20 Chebyshev series on u in [0, 16] (z in [-4, 4]) at the Chebyshev
nodes, in double precision with math.erf as the reference. Prints the
coefficients and the measured max relative error of erf on a dense grid.
Needs numpy (e.g. .venv-ref/bin/python tools/erf-coefficients.py).
"""
import math

import numpy as np
from numpy.polynomial import chebyshev as C

DEG = 20


def g(u):
    return np.array([math.erf(math.sqrt(x)) / math.sqrt(x) if x > 0 else 2 / math.sqrt(math.pi) for x in u])


k = np.arange(DEG + 1)
nodes = np.cos(np.pi * (k + 0.5) / (DEG + 1))
coef = C.chebfit(nodes, g(8 * nodes + 8), DEG)
for v in coef:
    print("    %.17g," % v)
z = np.linspace(0, 4, 400001)
approx = z * C.chebval(z * z / 8 - 1, coef)
exact = np.array([math.erf(x) for x in z])
rel = np.max(np.abs(approx - exact) / np.maximum(np.abs(exact), 1e-300))
print("max relative error on [0, 4]: %.3e" % rel)
