#!/usr/bin/env bash
# seq-tracks.sh BIN FIXTURES TMP -- `run --fasta --region [--strand]` on a small
# SpTransformer (docs/sequences.md): tracks.tsv (1-based) and acceptor/donor
# .bedGraph (0-based, half-open) name the region's contig and positions, their
# values are probabilities.npy's of the same forward; --strand - equals '+' on
# the reverse-complemented region with the rows reversed; the .npy set is the
# one a run without --strand writes, byte for byte.
set -u
BIN=$1; FIX=$2; T=$3
rm -rf "$T"; mkdir -p "$T"
fails=0
ok()  { echo "ok   $*"; }
bad() { echo "FAIL $*"; fails=$((fails + 1)); }
export OMP_NUM_THREADS=1
cp "$FIX/tiny.fa" "$T/tiny.fa"
"$BIN" gen-weights sptransformer --out "$T/m" --seed 0 --dim 8 --depth 1 --context 10 --window 64 > "$T/gen.out" 2>&1 \
  || { bad "gen-weights"; cat "$T/gen.out"; }
run() { local out=$1; shift; "$BIN" run --model "$T/m" --out "$T/$out" "$@" > "$T/$out.log" 2>&1 || { bad "run $*"; cat "$T/$out.log"; }; }
run plus --fasta "$T/tiny.fa" --region chrT:101-150
run minus --fasta "$T/tiny.fa" --region chrT:101-150 --strand -
run pad --fasta "$T/tiny.fa" --region chrT:101-150 --context pad
# the region reverse-complemented, as its own record
python3 - "$T" <<'PY'
import sys
t = sys.argv[1]
seq = ''.join(l.strip() for l in open(t + '/tiny.fa').read().split('>chrT\n')[1].split('>')[0].splitlines())
reg = seq[100:150]
rc = reg[::-1].translate(str.maketrans('ACGT', 'TGCA'))
open(t + '/rc.fa', 'w').write('>rc\n' + rc + '\n')
PY
run rc --fasta "$T/rc.fa" --strand +
python3 - "$T" <<'PY' && ok "coordinates, values, strand" || bad "coordinates, values, strand"
import ast, struct, sys
t = sys.argv[1]
def npy(path):  # float32 (B, L, C), no numpy needed
    b = open(path, 'rb').read()
    n = struct.unpack('<H', b[8:10])[0]
    h = ast.literal_eval(b[10:10 + n].decode())
    assert h['descr'] == '<f4' and not h['fortran_order'], h
    B, L, C = h['shape']
    v = struct.unpack('<%df' % (B * L * C), b[10 + n:])
    return [[v[(i * C):(i + 1) * C] for i in range(L)]]
def close(a, b):
    return abs(a - b) <= 1e-5 * max(1.0, abs(b))
def tsv(d):
    rows = [l.rstrip('\n').split('\t') for l in open(f'{t}/{d}/tracks.tsv')]
    return rows[0], rows[1:]
def bg(d, ch):
    lines = open(f'{t}/{d}/{ch}.bedGraph').read().splitlines()
    assert lines[0].startswith('track type=bedGraph'), lines[0]
    return [l.split('\t') for l in lines[1:]]
h, r = tsv('plus')
assert h[:5] == ['contig', 'pos', 'strand', 'acceptor', 'donor'] and h[5] == 'adipose_tissue' and len(h) == 20, h
p = npy(f'{t}/plus/probabilities.npy')[0]
assert len(r) == 30 == len(p), (len(r), len(p))  # 101-150 minus 10 of context each side (mode given)
for i, row in enumerate(r):
    assert row[0] == 'chrT' and int(row[1]) == 111 + i and row[2] == '+', row
    assert all(close(float(v), w) for v, w in zip(row[3:], p[i][1:])), (i, row[3:6], p[i][1:4])
for ch, c in (('acceptor', 1), ('donor', 2)):
    b = bg('plus', ch)
    assert len(b) == 30
    for i, row in enumerate(b):
        assert row[0] == 'chrT' and int(row[1]) == 110 + i and int(row[2]) == 111 + i, row
        assert close(float(row[3]), p[i][c]), (ch, i)
# pad: the whole region scored, N flanks
h, r = tsv('pad')
assert [int(x[1]) for x in r] == list(range(101, 151)), [x[1] for x in r][:3]
# '-': the reverse complement's rows, reversed, at the forward positions
_, m = tsv('minus')
_, rc = tsv('rc')
assert len(m) == len(rc) == 30
for i, row in enumerate(m):
    assert row[0] == 'chrT' and int(row[1]) == 111 + i and row[2] == '-', row
    assert row[3:] == rc[29 - i][3:], (i, row[3:6], rc[29 - i][3:6])
PY
# longer than the window (64): chrT:1-300 in mode given scores 11..290 in 5 tiles; a tile's rows are those of
# one run on that tile's span with its flanks (chrT:65-148: 75..138), and the last, short tile's too
run long --fasta "$T/tiny.fa" --region chrT:1-300
run tile1 --fasta "$T/tiny.fa" --region chrT:65-148
run tile4 --fasta "$T/tiny.fa" --region chrT:257-300
[ ! -e "$T/long/probabilities.npy" ] && grep -q '"tiles_each":[[:space:]]*5' "$T/long/report.json" \
  && ok "tiled: 5 tiles, no .npy" || bad "tiled: report or .npy"
[ "$(wc -l < "$T/long/tracks.tsv")" -eq 281 ] && ok "tiled: 280 rows" || bad "tiled: $(wc -l < "$T/long/tracks.tsv") lines"
cmp -s <(sed -n '66,129p' "$T/long/tracks.tsv") <(tail -n +2 "$T/tile1/tracks.tsv") && ok "tile 2 == one run on its span" \
  || bad "tile 2 differs from one run on chrT:65-148"
cmp -s <(tail -n 24 "$T/long/tracks.tsv") <(tail -n +2 "$T/tile4/tracks.tsv") && ok "last tile == one run on its span" \
  || bad "last tile differs from one run on chrT:257-300"
head -2 "$T/long/tracks.tsv" | tail -1 | grep -q "^chrT	11	+	" && ok "tiled: first row chrT 11" || bad "tiled: first row"
for f in tokens.npy position_logits.npy class_ids.npy probabilities.npy encoding_metadata.json; do
  cmp -s "$T/plus/$f" "$T/minus/$f" && ok "$f: --strand changes nothing in the .npy set" || bad "$f differs with --strand"
done
# report.json records the region, the strand and each record's contig and positions (those of tracks.tsv)
python3 - "$T" <<'PY' && ok "report.json: region, strand, contig and the rows' positions" || bad "report.json region"
import json, sys
t = sys.argv[1]
want = {"plus": ("chrT:101-150", "+", "chrT", 111, 140), "minus": ("chrT:101-150", "-", "chrT", 111, 140),
        "pad": ("chrT:101-150", "+", "chrT", 101, 150), "long": ("chrT:1-300", "+", "chrT", 11, 290),
        "rc": (None, "+", "rc", 11, 40)}
for d, (spec, strand, contig, a, b) in want.items():
    r = json.load(open(f"{t}/{d}/report.json"))["region"]
    assert r.get("spec") == spec and r["strand"] == strand, (d, r)
    assert r["records"] == [{"contig": contig, "start": a, "end": b}], (d, r)
    rows = [l.split("\t") for l in open(f"{t}/{d}/tracks.tsv").read().splitlines()[1:]]
    assert (rows[0][0], int(rows[0][1]), int(rows[-1][1])) == (contig, a, b), (d, rows[0][:3], rows[-1][:3])
PY
# --plot into a folder that cannot take it: refused before any work (no --out made)
"$BIN" run --model "$T/m" --out "$T/noplot" --fasta "$T/tiny.fa" --region chrT:101-150 --plot "$T/nodir/p.svg" \
  > "$T/noplot.log" 2>&1; rc=$?
[ $rc -ne 0 ] && grep -q "error: --plot (its folder cannot be written)" "$T/noplot.log" && [ ! -e "$T/noplot" ] &&
  ! grep -q '^FORWARD' "$T/noplot.log" && ok "--plot in a missing folder: exit $rc before any work, no --out" ||
  { bad "--plot in a missing folder: exit $rc"; cat "$T/noplot.log"; }
[ $fails -eq 0 ] && echo "seq-tracks: all ok" || echo "seq-tracks: $fails failed"
exit $((fails > 0))
