#!/usr/bin/env python3
"""Coefficients of the cpu backend's erf (src/backends/cpu/cpu-kernels.c).

erf(z) = z * g(z^2) with g(u) = erf(sqrt(u)) / sqrt(u), interpolated by a
degree-20 Chebyshev series on u in [0, 16] (z in [-4, 4]) at the Chebyshev
nodes, in double precision with math.erf as the reference. The C code
evaluates the series in the monomial basis of t = u/8 - 1 (Estrin's scheme,
a short dependency chain); the monomial coefficients are the committed
Chebyshev ones (CHEB below) converted exactly (rational arithmetic) and
rounded once to double.

  tools/erf-coefficients.py            fit the series again (needs numpy, e.g.
                                       .venv-ref/bin/python), print it, its max
                                       relative error, and the monomials
  tools/erf-coefficients.py --mono     the monomial coefficients of CHEB
  tools/erf-coefficients.py --check [CC]
                                       compile the committed Clenshaw
                                       evaluation of CHEB and the C source's
                                       Estrin one (nf__erf_mono, which must be
                                       the conversion of CHEB), compare them on
                                       all 2^32 float inputs (-O2
                                       -ffp-contract=off, as the library; about
                                       a minute on 2 cores); exit 1 on any
                                       difference
"""
import os
import re
import subprocess
import sys
import tempfile
from fractions import Fraction

DEG = 20
HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(HERE, "..", "src", "backends", "cpu", "cpu-kernels.c")

# the series as committed (the fit below printed these; numpy's least squares
# may differ in the last bits from one build to another, so they are fixed here)
CHEB = [0.4859129569028629, -0.34540785500494958, 0.16182910121364591, -0.076482756105509017,
        0.034669936800507353, -0.014811864147814944, 0.0059229379562319396, -0.0022118406588099489,
        0.00077141542784014982, -0.00025159658780960409, 7.6886582210565317e-05, -2.2065495938679114e-05,
        5.9612740414178254e-06, -1.5197750712689064e-06, 3.6649304308537687e-07, -8.3789983548301701e-08,
        1.8201448523121952e-08, -3.7644753450782034e-09, 7.4271890169888294e-10, -1.399370997097968e-10,
        2.4555464048345297e-11]


def monomials(cheb):
    """sum_k c_k T_k(t) as sum_j a_j t^j, exactly, then each a_j rounded to double"""
    T = [[Fraction(1)], [Fraction(0), Fraction(1)]]
    for k in range(2, len(cheb)):
        a = [Fraction(0)] * (k + 1)
        for j, v in enumerate(T[k - 1]):
            a[j + 1] += 2 * v
        for j, v in enumerate(T[k - 2]):
            a[j] -= v
        T.append(a)
    mono = [Fraction(0)] * len(cheb)
    for k, c in enumerate(cheb):
        for j, v in enumerate(T[k]):
            mono[j] += Fraction(c) * v
    return [float(x) for x in mono]


def fit():
    import math

    import numpy as np
    from numpy.polynomial import chebyshev as C

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


BODY = r"""
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
static const double cheb[21] = {%(cheb)s};
static const double nf__erf_mono[21] = {%(mono)s};
/* the range handling of both, as the library's nf__erf_inline */
#define PRE                                                                         \
    uint32_t bits;                                                                  \
    memcpy(&bits, &x, sizeof(bits));                                                \
    const uint32_t mag = bits & 0x7fffffffu, sign = bits & 0x80000000u;             \
    const uint32_t big = (uint32_t) 0 - (uint32_t) (mag >= 0x40800000u);            \
    const uint32_t nan = (uint32_t) 0 - (uint32_t) (mag > 0x7f800000u);             \
    const uint32_t cbits = (bits & ~big) | ((sign | 0x40800000u) & big);            \
    float xc;                                                                       \
    memcpy(&xc, &cbits, sizeof(xc));                                                \
    const double z = (double) xc, u = z * z;                                        \
    const double t = u * 0.125 - 1.0;
#define POST                                                                        \
    uint32_t rbits;                                                                 \
    memcpy(&rbits, &r, sizeof(rbits));                                              \
    rbits = (rbits & ~big) | ((sign | 0x3f800000u) & big);                          \
    rbits = (rbits & ~nan) | ((bits | 0x00400000u) & nan);                          \
    float out;                                                                      \
    memcpy(&out, &rbits, sizeof(out));                                              \
    return out;
static float erf_clenshaw(float x) {
    PRE
    const double t2 = 2.0 * t;
    double b1 = cheb[20], b2 = 0.0, b0;
    for (int k = 19; k >= 1; k--) { b0 = t2 * b1 - b2 + cheb[k]; b2 = b1; b1 = b0; }
    const float r = (float) (z * (t * b1 - b2 + cheb[0]));
    POST
}
static float erf_estrin(float x) {
    PRE
%(estrin)s
    POST
}
int main(void) {
    long long differ = 0;
    uint32_t first = 0;
#pragma omp parallel for reduction(+ : differ) schedule(static)
    for (long long b = 0; b < (1LL << 32); b++) {
        const uint32_t v = (uint32_t) b;
        float x;
        memcpy(&x, &v, 4);
        const float p = erf_clenshaw(x), q = erf_estrin(x);
        if (memcmp(&p, &q, 4) != 0) {
            differ++;
#pragma omp critical
            if (!first) first = v;
        }
    }
    printf("erf: Estrin vs Clenshaw on all 2^32 floats: %%lld differ (first 0x%%08x)\n", differ, first);
    return differ != 0;
}
"""


def check(cc):
    src = open(SRC).read()
    m = re.search(r"nf__erf_mono\[21\] = \{([^}]*)\}", src)
    if not m:
        sys.exit("erf-coefficients: no nf__erf_mono in " + SRC)
    mono_src = [float(x) for x in m.group(1).replace("\n", " ").split(",") if x.strip()]
    if mono_src != monomials(CHEB):
        sys.exit("erf-coefficients: nf__erf_mono is not the monomial form of CHEB (run --mono)")
    i = src.index("const double t2 = t * t", src.index("static inline float nf__erf_inline"))
    j = src.index("uint32_t rbits;", i)
    body = BODY % {"cheb": ", ".join(repr(c) for c in CHEB), "mono": m.group(1), "estrin": src[i:j]}
    with tempfile.TemporaryDirectory() as d:
        c, exe = os.path.join(d, "erf.c"), os.path.join(d, "erf")
        open(c, "w").write(body)
        subprocess.run([cc, "-O2", "-ffp-contract=off", "-fopenmp", "-o", exe, c, "-lm"], check=True)
        sys.exit(subprocess.run([exe]).returncode)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--check":
        check(sys.argv[2] if len(sys.argv) > 2 else "cc")
    elif len(sys.argv) > 1 and sys.argv[1] == "--mono":
        for v in monomials(CHEB):
            print("    %.17g," % v)
    else:
        fit()
        print("monomials of the committed series:")
        for v in monomials(CHEB):
            print("    %.17g," % v)
