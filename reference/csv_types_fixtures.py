#!/usr/bin/env python3
"""Fixture for nofall's CSV column typing (src/io/csv.c, nf_csv_type_column):
the dtype pandas.read_csv (the pandas AutoGluon 1.6 runs on: pandas < 2.4,
the C parser, its defaults) gives columns of tokens at the edges of its
cast order -- int64 / uint64 limits, signs, blanks, NA strings, overflowing
floats, bools in any case.

This script IMPORTS pandas and records what read_csv makes of each column; it
contains no copy of pandas' code. One line per column, tab-separated:

    dtype <TAB> token <TAB> token ...

dtype: int64, uint64, float64, bool, object (NA strings read as missing),
object_raw (NA strings kept as written: pandas leaves a column "as is" when
uint64 values meet negative or missing ones), object_bool (Python bools and
NaN), object_any (object without any NA token: raw and filtered agree).
Each token is written quoted in the CSV the test builds (quoting does not
change the dtype). Columns of only NA tokens are left out.
A second file, headers.tsv, holds header rows with empty and duplicate names
and the names read_csv gives their columns, tab-separated, "->" between:

    field <TAB> field ... <TAB> -> <TAB> name <TAB> name ...

usage: csv_types_fixtures.py [OUT_DIR]   (default tests/fixtures/csv-types)
"""
import io
import random
import sys
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parent.parent
out_dir = Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "tests/fixtures/csv-types"
out = out_dir / "columns.tsv"
NA = {"", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN", "<NA>", "N/A",
      "NA", "NULL", "NaN", "None", "n/a", "nan", "null"}
TOKENS = ["1", "-1", "0", "+5", " 7 ", "007", "9223372036854775807", "9223372036854775808", "-9223372036854775808",
          "-9223372036854775809", "18446744073709551615", "18446744073709551616", "99999999999999999999",
          "18446744073709551615.5", "1.5", "-1.5", "1e5", "1e400", "-1e400", "1e-400", "inf", "-Infinity", "nan",
          "NA", "", "True", "FALSE", "true", "x", "1.8e308", ".5", "5.", "-0", "0x1", " True", "1_0", "-", "+",
          "1e", "e5", "-inf", "null", "False", "TRUE", " inf", "inf ", "\f1.5", "1\v", "\v2", "+Infinity"]


def dtype_of(tokens):
    csv = "a,b\n" + "".join(f'"{t}",1\n' for t in tokens)
    col = pd.read_csv(io.StringIO(csv))["a"]
    d = str(col.dtype)
    if d != "object":
        return d
    vals = col.tolist()
    if any(isinstance(v, bool) for v in vals):
        return "object_bool"
    if not any(t in NA for t in tokens):
        return "object_any"
    return "object_raw" if any(t in NA and isinstance(v, str) for t, v in zip(tokens, vals)) else "object"


# pools that reach the integer and bool branches more often than the full one
INTS = ["1", "-1", "0", " 7 ", "9223372036854775807", "9223372036854775808", "-9223372036854775809",
        "18446744073709551615", "18446744073709551616", "18446744073709551615.5", "1.5", "NA", "", "-0", "+5"]
BOOLS = ["True", "TRUE", "true", "False", "FALSE", "false", "", "NA", "x", "1", " True"]


def main():
    rng = random.Random(20261203)
    cols, seen = [], set()
    for pool, n in ((TOKENS, 400), (INTS, 250), (BOOLS, 100)):
        k = 0
        while k < n:
            toks = tuple(rng.choice(pool) for _ in range(rng.randint(1, 5)))
            if all(t in NA for t in toks) or toks in seen:
                continue
            seen.add(toks)
            cols.append((dtype_of(list(toks)), toks))
            k += 1
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w") as f:
        f.write(f"# pandas {pd.__version__} read_csv dtypes (reference/csv_types_fixtures.py)\n")
        for d, toks in cols:
            f.write(d + "\t" + "\t".join(toks) + "\n")
    counts = {}
    for d, _ in cols:
        counts[d] = counts.get(d, 0) + 1
    print(out, counts)
    names = ["a", "a", "a.1", "a.2", "", "b", "Unnamed: 1", "Unnamed: 2", "a.1.1", "b.1", "é"]
    rows, seen = [], set()
    while len(rows) < 300:
        h = tuple(rng.choice(names) for _ in range(rng.randint(1, 7)))
        if h in seen or h == ("",):  # a lone "" line: nofall's reader (libcsv) sees a blank line, skipped
            continue
        seen.add(h)
        csv = ",".join(f'"{x}"' for x in h) + "\n" + ",".join("1" for _ in h) + "\n"
        rows.append((h, list(pd.read_csv(io.StringIO(csv)).columns)))
    with open(out_dir / "headers.tsv", "w") as f:
        f.write(f"# pandas {pd.__version__} read_csv column names (reference/csv_types_fixtures.py)\n")
        for h, got in rows:
            f.write("\t".join(h) + "\t->\t" + "\t".join(got) + "\n")
    print(out_dir / "headers.tsv", len(rows), "headers")


if __name__ == "__main__":
    main()
