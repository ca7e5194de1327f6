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
# --context genome: the region scored whole, its flanks the FASTA's 10 bases beyond it; the same forward as mode
# given on the region widened by 10 on each side (every data file byte-identical), N past the contig's ends
run g --fasta "$T/tiny.fa" --region chrT:101-150 --context genome
run gw --fasta "$T/tiny.fa" --region chrT:91-160
run gm --fasta "$T/tiny.fa" --region chrT:101-150 --context genome --strand -
run gwm --fasta "$T/tiny.fa" --region chrT:91-160 --strand -
run gs --fasta "$T/tiny.fa" --region chrT:5-40 --context genome
run gu --fasta "$T/tiny.fa" --region chrU:1-120 --context genome
run pu --fasta "$T/tiny.fa" --region chrU:1-120 --context pad
run glong --fasta "$T/tiny.fa" --region chrT:11-290 --context genome
run gall --fasta "$T/tiny.fa" --region chrT:1-300 --context genome
grep -q "^note: --context given: .* chrT:101-150 .* the rows are chrT:111-140 (30 positions); --context genome" \
  "$T/plus.log" && ! grep -q "^note:" "$T/g.log" "$T/pad.log" && ok "given on a region: a note names the rows" \
  || bad "given's note on stderr"
# the expected inputs, written as FASTA records: the region with its flanks, N where they pass the contig's ends
python3 - "$T" <<'PY'
import sys
t = sys.argv[1]
recs, name = {}, None
for l in open(t + '/tiny.fa').read().splitlines():
    if l.startswith('>'):
        name = l[1:].split()[0]; recs[name] = ''
    else:
        recs[name] += l.strip()
T = recs['chrT']
w = T[90:160]
rc = w[::-1].translate(str.maketrans('ACGT', 'TGCA'))
open(t + '/gx.fa', 'w').write('>rcw\n' + rc + '\n>s\n' + 'N' * 6 + T[:50] + '\n>all\n' + 'N' * 10 + T + 'N' * 10 + '\n')
PY
run grc --fasta "$T/gx.fa" --region rcw
run gsx --fasta "$T/gx.fa" --region s
run gallx --fasta "$T/gx.fa" --region all
for f in tokens.npy position_logits.npy class_ids.npy probabilities.npy tracks.tsv acceptor.bedGraph donor.bedGraph; do
  cmp -s "$T/g/$f" "$T/gw/$f" || bad "genome chrT:101-150: $f differs from given on chrT:91-160"
done
cmp -s "$T/gm/tracks.tsv" "$T/gwm/tracks.tsv" || bad "genome --strand -: tracks differ from given on chrT:91-160"
cmp -s "$T/glong/tracks.tsv" "$T/long/tracks.tsv" || bad "genome tiled chrT:11-290: tracks differ from given chrT:1-300"
for f in tracks.tsv acceptor.bedGraph donor.bedGraph; do  # chrU: 120 positions, 2 tiles, no .npy
  cmp -s "$T/gu/$f" "$T/pu/$f" || bad "genome on the whole chrU: $f differs from pad"
done
python3 - "$T" <<'PY' && ok "--context genome: rows, values, strand, contig ends, tiles, report" || bad "--context genome"
import json, sys
t = sys.argv[1]
def tsv(d):
    return [l.split('\t') for l in open(f'{t}/{d}/tracks.tsv').read().splitlines()[1:]]
def rep(d):
    return json.load(open(f'{t}/{d}/report.json'))
g = tsv('g')
assert [int(r[1]) for r in g] == list(range(101, 151)) and all(r[0] == 'chrT' and r[2] == '+' for r in g), g[0]
m, rc = tsv('gm'), tsv('grc')  # '-': the reverse complement of chrT:91-160, its 50 inner rows reversed
assert [int(r[1]) for r in m] == list(range(101, 151)) and all(r[2] == '-' for r in m) and len(rc) == 50
assert all(r[3:] == rc[49 - i][3:] for i, r in enumerate(m)), 'strand -'
s, sx = tsv('gs'), tsv('gsx')  # chrT:5-40: 6 N, then chrT:1-50
assert [int(r[1]) for r in s] == list(range(5, 41)) and [r[3:] for r in s] == [r[3:] for r in sx], 'contig start'
a, ax = tsv('gall'), tsv('gallx')  # the whole chrT, tiled, 10 N at both ends
assert [int(r[1]) for r in a] == list(range(1, 301)) and [r[3:] for r in a] == [r[3:] for r in ax], 'tiled, both ends'
for d, spec, past, first, last in (('g', 'chrT:101-150', [0, 0], 101, 150), ('gs', 'chrT:5-40', [6, 0], 5, 40),
                                   ('gu', 'chrU:1-120', [10, 10], 1, 120), ('gall', 'chrT:1-300', [10, 10], 1, 300)):
    r = rep(d)['region']
    assert r['spec'] == spec and r['context'] == 'genome' and r['n_past_contig_ends'] == past and 'note' not in r, r
    assert r['records'] == [{'contig': spec.split(':')[0], 'start': first, 'end': last}], r
assert rep('gall')['tracks']['flank_mode'] == 'genome' and rep('gall')['tracks']['tiles_each'] == 5
assert json.load(open(f'{t}/g/encoding_metadata.json'))['flank_mode'] == 'genome'
r = rep('plus')['region']
assert r['context'] == 'given' and 'chrT:111-140' in r['note'] and '--context genome' in r['note'], r
PY
# --context genome without a FASTA region: refused, naming what it takes
"$BIN" run --model "$T/m" --out "$T/gbad" --sequence ACGTACGTACGTACGTACGTACGT --context genome > "$T/gbad.log" 2>&1; rc=$?
[ $rc -eq 2 ] && grep -q "error: --context genome takes the flanks from the genome around a region" "$T/gbad.log" \
  && ok "--context genome with --sequence: exit 2, says why" || { bad "--context genome with --sequence: exit $rc"; cat "$T/gbad.log"; }
# --plot into a folder that cannot take it: refused before any work (no --out made)
"$BIN" run --model "$T/m" --out "$T/noplot" --fasta "$T/tiny.fa" --region chrT:101-150 --plot "$T/nodir/p.svg" \
  > "$T/noplot.log" 2>&1; rc=$?
[ $rc -ne 0 ] && grep -q "error: --plot (its folder cannot be written)" "$T/noplot.log" && [ ! -e "$T/noplot" ] &&
  ! grep -q '^FORWARD' "$T/noplot.log" && ok "--plot in a missing folder: exit $rc before any work, no --out" ||
  { bad "--plot in a missing folder: exit $rc"; cat "$T/noplot.log"; }
[ $fails -eq 0 ] && echo "seq-tracks: all ok" || echo "seq-tracks: $fails failed"
exit $((fails > 0))
