#!/usr/bin/env bash
# hostile.sh BIN TMP -- the hostile-input corpus (issue #11): malformed
# checkpoints, configs, inputs, arguments and filesystem situations. Every
# case must: exit non-zero (not by a signal, not by hanging), print a message
# naming the file / tensor / argument at fault, print no sanitizer report,
# and leave the previous contents of --out byte for byte as they were, with
# no staging directory left behind.
set -u
BIN=$(readlink -f "$1"); T=$2
HERE=$(cd "$(dirname "$0")" && pwd)
rm -rf "$T"; mkdir -p "$T"; T=$(cd "$T" && pwd)
fails=0; cases=0
ok()  { echo "ok   $*"; }
bad() { echo "FAIL $*"; fails=$((fails + 1)); }

"$BIN" gen-weights mitra --out "$T/m" --dim 16 --layers 1 --heads 2 --outputs 4 --seed 1 > /dev/null || { echo "gen-weights failed"; exit 1; }
"$BIN" run --model "$T/m" --out "$T/golden" > /dev/null 2>&1 || { echo "golden run failed"; exit 1; }
python3 "$HERE/hostile-files.py" "$T/m" "$T/golden/support_x.npy" "$T/f" || { echo "hostile-files.py failed"; exit 1; }
G=$T/golden
INPUTS=(--support-x "$G/support_x.npy" --support-y "$G/support_y.npy" --query-x "$G/query_x.npy")

snapshot() { (cd "$1" 2>/dev/null && ls -A | LC_ALL=C sort && find . -type f -exec sha256sum {} + | LC_ALL=C sort) 2>/dev/null; }

# hc NAME NEEDLE CMD... : @OUT@ in CMD is the case's --out, pre-filled with a previous good result set
hc() {
  local name=$1 needle=$2; shift 2
  cases=$((cases + 1))
  local O=$T/o-$name
  rm -rf "$O"; cp -a "$G" "$O"
  [ -n "${HC_SETUP:-}" ] && eval "$HC_SETUP"
  local before; before=$(snapshot "$O")
  local args=() a
  for a in "$@"; do args+=("${a//@OUT@/$O}"); done
  timeout 30 "${args[@]}" > "$T/$name.out" 2> "$T/$name.err"; local rc=$?
  local why=""
  if [ $rc -eq 0 ]; then why="exit 0"
  elif [ $rc -eq 124 ]; then why="hung (killed after 30 s)"
  elif [ $rc -ge 128 ]; then why="killed by signal $((rc - 128))"
  elif ! grep -qF -- "$needle" "$T/$name.err"; then why="stderr lacks '$needle'"
  elif grep -qE "AddressSanitizer|LeakSanitizer|runtime error:|UndefinedBehaviorSanitizer" "$T/$name.err"; then why="sanitizer report"
  elif [ "$(snapshot "$O")" != "$before" ]; then why="--out changed"
  elif ls -A "$T" | grep "^\.o-$name\.nofall" | grep -qv "${HC_ALLOW:-^$}"; then why="staging or lock left: $(ls -A "$T" | grep "^\.o-$name\.nofall" | tr '\n' ' ')"
  fi
  if [ -z "$why" ]; then ok "$name: exit $rc, '$needle'"; else bad "$name: $why"; sed 's/^/    /' "$T/$name.err" | head -5; fi
}
run() { echo "$BIN" run --model "$1" --out @OUT@; }

# ---- checkpoints (model.safetensors) ----------------------------------------------
for c in "st-trailing-json:trailing data" "st-nul-padding:control character" "st-nul-key:u0000" \
         "st-metadata-string:__metadata__" "st-metadata-number:\"format\" is not a string" "st-gap:gap in the data section" \
         "st-trailing-bytes:after the last tensor" "st-overlap:overlap" "st-non-utf8-key:invalid UTF-8" \
         "st-control-key:final_layer.bias\\x1b[31m" "st-duplicate-key:appears twice" "st-header-length:header length" \
         "st-tiny:too short" "st-empty:too short" "st-leading-space:start with '{'" "st-span:needs" \
         "st-negative-shape:shape[0]" "st-fraction-offset:data_offsets[0]"; do
  name=${c%%:*}; needle=${c#*:}
  [ "$name" = st-control-key ] && needle='final_layer.bias\x1b[31m'
  hc "$name" "$needle" $(run "$T/f/m-$name")
done
grep -q $'\x1b' "$T/st-control-key.err" && bad "st-control-key: a raw ESC reached stderr" || ok "st-control-key: the name is escaped"
for name in st-trailing-json st-gap st-non-utf8-key st-header-length; do
  grep -qF "m-$name/model.safetensors" "$T/$name.err" || bad "$name: the message does not name the file"
done
mkdir -p "$T/m-st-dir" "$T/m-st-fifo"; cp "$T/m/config.json" "$T/m-st-dir/"; cp "$T/m/config.json" "$T/m-st-fifo/"
mkdir -p "$T/m-st-dir/model.safetensors"; mkfifo "$T/m-st-fifo/model.safetensors"
hc st-directory "m-st-dir/model.safetensors: is a directory" $(run "$T/m-st-dir")
hc st-fifo "m-st-fifo/model.safetensors: is a FIFO" $(run "$T/m-st-fifo")

# ---- config.json ------------------------------------------------------------------------
for c in "cfg-int-overflow:\"dim\" must be an integer" "cfg-1e300:\"n_heads\" must be an integer" "cfg-1e400:\"n_layers\"" \
         "cfg-fraction:\"dim\" must be an integer" "cfg-negative:bad dim_output" "cfg-duplicate-key:\"dim\" appears twice" \
         "cfg-trailing:trailing data" "cfg-array:not a JSON object" "cfg-bom:byte-order mark" "cfg-non-utf8:invalid UTF-8" \
         "cfg-model-type-control:model_type \"\\x1b[2Jmitra\"" "cfg-task:CLUSTERING" "cfg-string-dim:\"dim\" must be an integer" \
         "cfg-plus-number:malformed number"; do
  name=${c%%:*}; needle=${c#*:}
  [ "$name" = cfg-model-type-control ] && needle='model_type "\x1b[2Jmitra"'
  hc "$name" "$needle" $(run "$T/f/m-$name")
done
for name in cfg-int-overflow cfg-trailing cfg-bom; do
  grep -qF "m-$name/config.json" "$T/$name.err" || bad "$name: the message does not name config.json"
done
mkdir -p "$T/m-cfg-dir/config.json" "$T/m-cfg-fifo" "$T/m-cfg-none"; mkfifo "$T/m-cfg-fifo/config.json"
cp "$T/m/model.safetensors" "$T/m-cfg-dir/"; cp "$T/m/model.safetensors" "$T/m-cfg-fifo/"; cp "$T/m/model.safetensors" "$T/m-cfg-none/"
hc cfg-directory "m-cfg-dir/config.json: is a directory" $(run "$T/m-cfg-dir")
hc cfg-fifo "m-cfg-fifo/config.json: is a FIFO" $(run "$T/m-cfg-fifo")
hc cfg-missing "m-cfg-none/config.json: cannot open" $(run "$T/m-cfg-none")

# ---- inputs (.npy) --------------------------------------------------------------------------
for c in "wrap:too large" "no-braces:not a dict literal" "keys-in-string:unexpected key 'x'" "int-not-tuple:malformed shape" \
         "duplicate-key:appears twice" "after-dict:trailing bytes" "fortran:fortran_order" "big-endian:unsupported dtype '>f4'" \
         "truncated:truncated" "three-d:expected a 2-D array" "magic:bad magic" "header-length:runs past the file"; do
  name=${c%%:*}; needle=${c#*:}
  hc "npy-$name" "x-$name.npy" "$BIN" run --model "$T/m" --out @OUT@ --support-x "$T/f/x-$name.npy" \
     --support-y "$G/support_y.npy" --query-x "$G/query_x.npy"
  grep -qF -- "$needle" "$T/npy-$name.err" || bad "npy-$name: stderr lacks '$needle'"
done
mkfifo "$T/fifo.npy"; mkdir -p "$T/dir.npy"
hc npy-fifo "fifo.npy: is a FIFO" "$BIN" run --model "$T/m" --out @OUT@ --support-x "$G/support_x.npy" --support-y "$T/fifo.npy" --query-x "$G/query_x.npy"
hc npy-directory "dir.npy: is a directory" "$BIN" run --model "$T/m" --out @OUT@ --support-x "$G/support_x.npy" --support-y "$G/support_y.npy" --query-x "$T/dir.npy"

# ---- command line ----------------------------------------------------------------------------
hc seed-word "--seed takes an integer" "$BIN" run --model "$T/m" --out @OUT@ --seed abc
hc seed-negative "--seed takes an integer" "$BIN" run --model "$T/m" --out @OUT@ --seed -1
hc seed-empty "got ''" "$BIN" run --model "$T/m" --out @OUT@ --seed ""
hc seed-float "got '1e23'" "$BIN" run --model "$T/m" --out @OUT@ --seed 1e23
hc seed-overflow "--seed takes an integer" "$BIN" run --model "$T/m" --out @OUT@ --seed 99999999999999999999999
hc seed-space "--seed takes an integer" "$BIN" run --model "$T/m" --out @OUT@ --seed " 5"
hc chunk-zero "--chunk-rows takes an integer in [1," "$BIN" run --model "$T/m" --out @OUT@ --chunk-rows 0
hc chunk-negative "--chunk-rows takes an integer" "$BIN" run --model "$T/m" --out @OUT@ --chunk-rows -5
hc qchunk-zero "--query-chunk takes an integer in [1," "$BIN" run --model "$T/m" --out @OUT@ --query-chunk 0
hc chunk-huge "--chunk-rows takes an integer" "$BIN" run --model "$T/m" --out @OUT@ --chunk-rows 99999999999999999999
hc unknown-last "unknown option --verbose" "$BIN" run --model "$T/m" --out @OUT@ --verbose
hc unknown-control "unknown option --x\\x1b[0m" "$BIN" run --model "$T/m" --out @OUT@ $'--x\x1b[0m'
hc trace-artifact "is the artifact logits.npy of --out" "$BIN" run --model "$T/m" --out @OUT@ --trace @OUT@/logits.npy
cp -r "$T/m" "$T/m-trace"
hc trace-model "is the model's model.safetensors" "$BIN" run --model "$T/m-trace" --out @OUT@ --trace "$T/m-trace/model.safetensors"
cmp -s "$T/m/model.safetensors" "$T/m-trace/model.safetensors" || bad "trace-model: the checkpoint changed"
cp "$G/support_x.npy" "$T/sx-copy.npy"
hc trace-input "is the input --support-x" "$BIN" run --model "$T/m" --out @OUT@ --support-x "$T/sx-copy.npy" --support-y "$G/support_y.npy" \
   --query-x "$G/query_x.npy" --trace "$T/sx-copy.npy"
hc trace-directory "--trace $T: is a directory" "$BIN" run --model "$T/m" --out @OUT@ --trace "$T"
hc model-empty "--model needs a directory" "$BIN" run --model "" --out @OUT@
cp "$T/m/config.json" "$T/config-keep.json"
hc verify-json-model "--json $T/m/config.json is the model's config.json" "$BIN" verify --model "$T/m" --device cpu --against cpu --seeds 1 --json "$T/m/config.json"
cmp -s "$T/m/config.json" "$T/config-keep.json" || bad "verify-json-model: config.json changed"
hc verify-samples "--samples takes an integer" "$BIN" verify --model "$T/m" --device cpu --against cpu --samples -1
hc verify-max-abs "--max-abs takes a finite number" "$BIN" verify --model "$T/m" --device cpu --against cpu --max-abs nan
hc verify-seeds "--seeds takes a comma list" "$BIN" verify --model "$T/m" --device cpu --against cpu --seeds 1,,2
hc bench-runs "--runs takes an integer in [1," "$BIN" bench --model "$T/m" --runs 0
hc bench-features "--features takes an integer" "$BIN" bench --model "$T/m" --features 12x
hc gen-seed "--seed takes an integer" "$BIN" gen-weights mitra --out "$T/gen-bad" --seed x
[ -e "$T/gen-bad" ] && bad "gen-seed: the output directory was created" || true

# ---- filesystem --------------------------------------------------------------------------------
: > "$T/plain-file"
hc out-is-file "plain-file: exists and is not a directory" "$BIN" run --model "$T/m" --out "$T/plain-file"
HC_SETUP='mkdir -p "$O/sub"' hc out-subdir "holds 'sub', which is not a plain file" "$BIN" run --model "$T/m" --out @OUT@
hc stdout-full "cannot write to standard output" bash -c "exec \"$BIN\" run --model \"$T/m\" --out @OUT@ > /dev/full"
if command -v flock > /dev/null; then
  HC_ALLOW='nofall.lock$' hc locked "another nofall run" bash -c "exec flock \"$T/.o-locked.nofall.lock\" \"$BIN\" run --model \"$T/m\" --out @OUT@"
  rm -f "$T/.o-locked.nofall.lock"
else
  echo "skip locked: flock(1) not installed"
fi
# unwritable parent and a full disk: a small tmpfs (root; read-only remount) or chmod (non-root)
MNT=$T/mnt
mkdir -p "$MNT"
if [ "$(id -u)" = 0 ] && mount -t tmpfs -o size=64k tmpfs "$MNT" 2> /dev/null; then
  trap 'umount "$MNT" 2>/dev/null' EXIT
  # full: 16 pages, the previous set takes 7 (+ the lock): the new set cannot fit
  cp -a "$G" "$MNT/out"; dd if=/dev/zero of="$MNT/filler" bs=4096 count=4 2>/dev/null
  before=$(snapshot "$MNT/out")
  cases=$((cases + 1))
  "$BIN" run --model "$T/m" --out "$MNT/out" > "$T/full.out" 2> "$T/full.err"; rc=$?
  if [ $rc -ne 0 ] && [ $rc -lt 128 ] && grep -qE "$MNT/.*(No space left|write failed|cannot create)" "$T/full.err" && [ "$(snapshot "$MNT/out")" = "$before" ] \
     && ! ls -A "$MNT" | grep -q nofall; then ok "disk-full: exit $rc, $(head -c 160 "$T/full.err")"
  else bad "disk-full: rc=$rc"; cat "$T/full.err"; ls -la "$MNT"; fi
  rm -f "$MNT/filler"
  mount -o remount,ro "$MNT"
  before=$(snapshot "$MNT/out")
  cases=$((cases + 1))
  "$BIN" run --model "$T/m" --out "$MNT/out" > "$T/ro.out" 2> "$T/ro.err"; rc=$?
  if [ $rc -ne 0 ] && [ $rc -lt 128 ] && grep -qF -- "--out $MNT/out" "$T/ro.err" && grep -q "Read-only file system" "$T/ro.err" \
     && [ "$(snapshot "$MNT/out")" = "$before" ]; then ok "unwritable: exit $rc, $(head -c 160 "$T/ro.err")"
  else bad "unwritable: rc=$rc"; cat "$T/ro.err"; fi
  umount "$MNT"; trap - EXIT
elif [ "$(id -u)" != 0 ]; then
  cp -a "$G" "$T/ro-parent-out" 2>/dev/null; mkdir -p "$T/ro-parent"; cp -a "$G" "$T/ro-parent/out"; chmod 555 "$T/ro-parent"
  before=$(snapshot "$T/ro-parent/out")
  cases=$((cases + 1))
  "$BIN" run --model "$T/m" --out "$T/ro-parent/out" > /dev/null 2> "$T/ro.err"; rc=$?
  if [ $rc -ne 0 ] && grep -q "Permission denied" "$T/ro.err" && [ "$(snapshot "$T/ro-parent/out")" = "$before" ]; then ok "unwritable (chmod): exit $rc"
  else bad "unwritable (chmod): rc=$rc"; cat "$T/ro.err"; fi
  chmod 755 "$T/ro-parent"
  echo "skip disk-full: needs root to mount a small tmpfs"
else
  echo "skip disk-full and unwritable: cannot mount a tmpfs here (mount refused)"
fi

# ---- a FASTA's index (.fai): untrusted input, checked before htslib reads it (issue #27: a line of 0
# bases made htslib divide by zero, SIGFPE, in run --fasta and annotate) ---------------------------------
"$BIN" gen-weights sptransformer --out "$T/spt" --dim 16 --depth 1 --context 50 --window 64 --seed 1 > /dev/null ||
  bad "gen-weights sptransformer"
FXA=$HERE/fixtures/annotate
for c in "fai-zero-linebases:c1	40	4	0	41:LINEBASES is 0 for a sequence of 40 bases" \
         "fai-past-end:c1	40	4000	40	41:the record ends at byte 4040, past the end of" \
         "fai-negative:c1	40	-4	40	41:OFFSET is not a non-negative integer" \
         "fai-fields:c1	40	4:3 fields, an index line has 5 or 6" \
         "fai-width:c1	40	4	40	39:LINEWIDTH 39 is less than LINEBASES 40" \
         "fai-overflow:c1	9223372036854775807	4	1	2:the record's 9223372036854775807 bases overflow" \
         "fai-name-space:c1 8	40	4	40	41:the sequence name has a white space (byte 3)" \
         "fai-int:c1	40	4	4294967296	4294967297:LINEBASES 4294967296 / LINEWIDTH 4294967297: each at most"; do
  name=${c%%:*}; rest=${c#*:}; line=${rest%%:*}; needle=${rest#*:}
  mkdir -p "$T/$name"
  printf '>c1\nACGTACGTACGTACGTACGTACGTACGTACGTACGTACGT\n' > "$T/$name/in.fa"
  printf '%s\n' "$line" > "$T/$name/in.fa.fai"
  cp "$T/$name/in.fa.fai" "$T/$name/fai.orig"
  hc "$name" "in.fa.fai line 1: $needle" "$BIN" run --model "$T/spt" --fasta "$T/$name/in.fa" --context pad --out @OUT@
  cmp -s "$T/$name/in.fa.fai" "$T/$name/fai.orig" && ok "$name: the .fai left as it was" || bad "$name: the .fai changed"
done
# annotate: the fixture genome with a lying index for its first contig
mkdir -p "$T/fai-ann"
cp "$FXA/genome.fa" "$FXA/genes.gtf" "$FXA/input.vcf" "$T/fai-ann/"
first=$(sed -n '1s/^>\([^ ]*\).*/\1/p' "$T/fai-ann/genome.fa")
printf '%s\t1000\t%d\t0\t61\n' "$first" $((${#first} + 2)) > "$T/fai-ann/genome.fa.fai"
hc fai-annotate "genome.fa.fai line 1: LINEBASES is 0" "$BIN" annotate --model "$T/spt" --vcf "$T/fai-ann/input.vcf" \
   --fasta "$T/fai-ann/genome.fa" --genes "$T/fai-ann/genes.gtf" --out @OUT@/ann.csv
# a good index, as htslib writes it, passes the check: built by the first run, read by the second
cases=$((cases + 1))
rm -f "$T/fai-zero-linebases/in.fa.fai"
if "$BIN" run --model "$T/spt" --fasta "$T/fai-zero-linebases/in.fa" --context pad --out "$T/fai-good" > "$T/fai-good.log" 2>&1 &&
   [ -s "$T/fai-zero-linebases/in.fa.fai" ] &&
   "$BIN" run --model "$T/spt" --fasta "$T/fai-zero-linebases/in.fa" --context pad --out "$T/fai-good2" >> "$T/fai-good.log" 2>&1; then
  ok "fai-good: the index htslib builds, and then reads, passes the check"
else
  bad "fai-good: a good .fai refused"; cat "$T/fai-good.log"
fi

# ---- FIFOs where a seekable file is needed (issue #27: annotate --fasta / --genes on a FIFO blocked
# forever in htslib's open; run --model X.ckpt on a FIFO said "unknown option --sequence") ---------------
mkdir -p "$T/fifo-g"; mkfifo "$T/fifo-g/in.fa" "$T/fifo-g/genes.gtf" "$T/fifo-g/m.ckpt"
hc fifo-run-fasta "fifo-g/in.fa: is a FIFO" "$BIN" run --model "$T/spt" --fasta "$T/fifo-g/in.fa" --context pad --out @OUT@
hc fifo-ann-fasta "--fasta $T/fifo-g/in.fa: is a FIFO" "$BIN" annotate --model "$T/spt" --vcf "$FXA/input.vcf" \
   --fasta "$T/fifo-g/in.fa" --genes "$FXA/genes.gtf" --out @OUT@/ann.csv
hc fifo-ann-genes "--genes $T/fifo-g/genes.gtf: is a FIFO" "$BIN" annotate --model "$T/spt" --vcf "$FXA/input.vcf" \
   --fasta "$FXA/genome.fa" --genes "$T/fifo-g/genes.gtf" --out @OUT@/ann.csv
hc fifo-ckpt "--model $T/fifo-g/m.ckpt: is a FIFO" "$BIN" run --model "$T/fifo-g/m.ckpt" --sequence ACGTACGT --context pad --out @OUT@

# ---- bytes htslib drops from a sequence line (issue #27: a NUL inside a FASTA sequence was dropped,
# every base after it shifted by one, exit 0): refused by file, record and line, in the region read -------
mkdir -p "$T/nul-fa"
printf '>c1\nACGTAC\0GTACGT\n>c2\nACGTACGTACGTA\n' > "$T/nul-fa/two.fa"
printf '>c1\nACGTACGTAC\nGT\001ACGTACG\nTAC\n' > "$T/nul-fa/ctl.fa"
hc nul-region "two.fa: record 'c1' sequence line 1 (byte 10 of the file): a NUL byte" "$BIN" run --model "$T/spt" \
   --fasta "$T/nul-fa/two.fa" --region c1:1-12 --context pad --out @OUT@
hc nul-region-after "two.fa: record 'c1' sequence line 1" "$BIN" run --model "$T/spt" --fasta "$T/nul-fa/two.fa" \
   --region c1:8-12 --context pad --out @OUT@
hc ctl-whole "ctl.fa: record 'c1' sequence line 2 (byte 17 of the file): byte 0x01" "$BIN" run --model "$T/spt" \
   --fasta "$T/nul-fa/ctl.fa" --context pad --out @OUT@
# the region read is checked, not the whole file: c2 is clean and runs
cases=$((cases + 1))
if "$BIN" run --model "$T/spt" --fasta "$T/nul-fa/two.fa" --region c2:1-12 --context pad --out "$T/nul-c2" > "$T/nul-c2.log" 2>&1; then
  ok "nul-other-record: a clean record of the same file runs"
else bad "nul-other-record: refused"; cat "$T/nul-c2.log"; fi
# annotate: a NUL in place of a base of chr1 inside the first record's window (line 100, base 11)
mkdir -p "$T/nul-ann"
python3 -c "import sys; d=open(sys.argv[1],'rb').read(); p=16+99*61+10; open(sys.argv[2],'wb').write(d[:p]+b'\0'+d[p+1:])" \
  "$FXA/genome.fa" "$T/nul-ann/genome.fa"
hc nul-annotate "--fasta $T/nul-ann/genome.fa: record 'chr1' sequence line 100 (byte 6065 of the file): a NUL byte" \
   "$BIN" annotate --model "$T/spt" --vcf "$FXA/input.vcf" --fasta "$T/nul-ann/genome.fa" --genes "$FXA/genes.gtf" --out @OUT@/ann.csv

# a record with no bases (a line htslib drops whole): htslib divided by its 0 bases per line, SIGFPE (fuzz-region)
printf '>c1 x\n\032\n' > "$T/nul-fa/nobases.fa"
hc fasta-no-bases "nobases.fa: record 'c1' has no bases" "$BIN" run --model "$T/spt" --fasta "$T/nul-fa/nobases.fa" --context pad --out @OUT@
hc fasta-no-bases-region "nobases.fa: region 'c1' is not in the file" "$BIN" run --model "$T/spt" --fasta "$T/nul-fa/nobases.fa" \
   --region c1 --context pad --out @OUT@

# a first line htslib drops whole: the index it builds says 0 bases per line, and it divided by that (fuzz-region)
printf '>c\n\377\377\377\377\nTTTT\n' > "$T/nul-fa/blankline.fa"
hc fasta-built-fai "blankline.fa.fai line 1: LINEBASES is 0 for a sequence of 4 bases" "$BIN" run --model "$T/spt" \
   --fasta "$T/nul-fa/blankline.fa" --context pad --out @OUT@

# ---- htslib's own log (issue #27: its warning echoed --region with a raw ESC to the terminal) ---------------
hc region-esc "region 'c2\x1b[31m:1-3' is not in the file" "$BIN" run --model "$T/spt" --fasta "$T/nul-fa/two.fa" \
   --region $'c2\x1b[31m:1-3' --context pad --out @OUT@
cases=$((cases + 1))
grep -q $'\x1b' "$T/region-esc.err" && bad "region-esc: a raw ESC reached stderr" || ok "region-esc: no raw ESC on stderr"
grep -q '^\[[EW]::' "$T/region-esc.err" "$T/nul-annotate.err" && bad "htslib-log: htslib's own message reached stderr" ||
  ok "htslib-log: only nofall's messages"

# ---- an input with no sequence (issue #27: "the input has no sequence" named no flag or file) -------------
mkdir -p "$T/empty-tok"
for c in "e0:|i1:(0,):1 sequence(s) of 0 nt" "b0:|i1:(0, 5):0 sequence(s) of 5 nt" "l0:<i4:(2, 0):2 sequence(s) of 0 nt"; do
  IFS=: read -r name descr shape needle <<< "$c"
  python3 -c "import sys,struct; h=\"{'descr': '%s', 'fortran_order': False, 'shape': %s, }\"%(sys.argv[2],sys.argv[3]); \
h+=' '*((64-(10+len(h)+1)%64)%64)+'\n'; open(sys.argv[1],'wb').write(b'\x93NUMPY\x01\x00'+struct.pack('<H',len(h))+h.encode())" \
    "$T/empty-tok/$name.npy" "$descr" "$shape"
  hc "tokens-empty-$name" "--tokens $T/empty-tok/$name.npy: the input has no sequence ($needle)" "$BIN" run --model "$T/spt" \
     --tokens "$T/empty-tok/$name.npy" --context pad --out @OUT@
done
hc sequence-empty "--sequence: the input has no sequence" "$BIN" run --model "$T/spt" --sequence "" --context pad --out @OUT@

# ==== issue #27, second round: every command's surfaces, in a sandbox X whose whole tree is compared ====
# hx NAME RC NEEDLE CMD...: exit RC (1: refused, 2: a usage error), NEEDLE on stderr, no sanitizer
# report, and nothing under X created, removed or written (every file's size and mtime, every name)
X=$T/x L=$T/x-logs
mkdir -p "$X" "$L"
export OMP_NUM_THREADS=1 # small models; and many held at once below
xstate() { find "$X" \( -type d -printf '%p/\n' \) -o -printf '%p %s %T@\n' | LC_ALL=C sort; }
hx() {
  local name=$1 want=$2 needle=$3; shift 3
  cases=$((cases + 1))
  local before; before=$(xstate)
  timeout 30 "$@" > "$L/$name.out" 2> "$L/$name.err"; local rc=$?
  local why=""
  if [ $rc -ne "$want" ]; then why="exit $rc, want $want"
  elif ! grep -qF -- "$needle" "$L/$name.err"; then why="stderr lacks '$needle'"
  elif grep -qE "AddressSanitizer|LeakSanitizer|runtime error:|UndefinedBehaviorSanitizer" "$L/$name.err"; then why="sanitizer report"
  elif [ "$(xstate)" != "$before" ]; then why="left or changed: $(diff <(echo "$before") <(xstate) | grep '^[<>]' | head -3 | tr '\n' ' ')"
  fi
  if [ -z "$why" ]; then ok "$name: exit $rc, '$needle'"; else bad "$name: $why"; sed 's/^/    /' "$L/$name.err" | head -5; fi
}
# (small models, hard links where only read: the tree is compared case by case, and disk is shared)
cp -r "$T/m" "$X/m"; cp -al "$T/spt" "$X/spt"; cp "$HERE/fixtures/ckpt/bn_wrapped.ckpt" "$HERE/fixtures/ckpt/views.ckpt" "$X/"
"$BIN" gen-weights sptransformer --out "$X/ms" --seed 0 --dim 16 --depth 1 --context 100 --window 512 > /dev/null &&
  "$BIN" gen-weights tabstar --out "$X/tab" --layers 1 --vocab 1000 --seed 3 > /dev/null || bad "x: gen-weights"
CK=$X/bn_wrapped.ckpt
cd "$X" || exit 1
printf 'a,b,y\n1,2,x\n3,4,z\n5,6,x\n7,8,z\n' > train.csv
printf 'a,b,y\n1,2,x\n' > one.csv; : > empty.csv; printf 'a,b,y\n1,2,x\n3,4\n5,6,z\n' > ragged.csv
printf 'a,c,y\n1,2,x\n3,4,z\n' > otherc.csv; printf 'a,b,y\n1,2\0,x\n3,4,z\n' > nul.csv; printf 'a,b,y\n1,"2,x\n3,4,z\n' > quote.csv
mkfifo fifo.csv; : > plain.csv; mkdir -p sub/d cwd
printf '>c1\nACGTACGTACGTACGTACGTACGTACGTACGTACGTACGT\n' > c.fa
python3 - << 'EOF2' || bad "x: .npy files"
import struct
def npy(path, descr, shape, data):
    h = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape)
    h += ' ' * ((64 - (10 + len(h) + 1) % 64) % 64) + '\n'
    open(path, 'wb').write(b'\x93NUMPY\x01\x00' + struct.pack('<H', len(h)) + h.encode() + data)
npy('tf.npy', '<f4', '(1, 120)', b'\0' * 480)
npy('t9.npy', '|i1', '(1, 120)', bytes([9]) + b'\0' * 119)
npy('t3d.npy', '|i1', '(1, 2, 60)', b'\0' * 120)
npy('tneg.npy', '|i1', '(1, 120)', bytes([255]) + b'\0' * 119)
EOF2
echo hello > notzip.ckpt; head -c 2000 "$CK" > trunc.ckpt; echo '{bad' > badcfg.json
python3 -c "
import sys, zipfile
z = zipfile.ZipFile(sys.argv[1]); o = zipfile.ZipFile('nopkl.ckpt', 'w')
for n in z.namelist():
    if not n.endswith('data.pkl'): o.writestr(n, z.read(n))
" "$CK" || bad "x: nopkl.ckpt"
cp "$FXA/genome.fa" "$FXA/genes.gtf" .
{ grep '^#' "$FXA/input.vcf"; printf 'chr1\t25000\t.\tG\tT\t.\t.\t.\n'; } > nogene.vcf  # in no gene: no forward
printf 'hello world\n' > garbage.vcf
cell() { printf '{"format":"%s","task":"%s","n_target_tokens":%s,"n_rows":%s,"n_cells":2,"x_txt":%s,"x_num":[[0,0]]}%s' "$@"; }
F=nofall-tabstar-cells/1
cell $F regression 1 2 '[["a","b"]]' '' > c-rows.json; cell $F clustering 1 1 '[["a","b"]]' '' > c-task.json
cell $F regression 1 1 '[["a",3]]' '' > c-type.json; cell $F regression 1 1 '[["a","b"]]' '{}' > c-trail.json
cell nofall-tabstar-cells/9 regression 1 1 '[["a","b"]]' '' > c-fmt.json
printf '{"a": 1}' > s-obj.json; printf '["a", 3]' > s-num.json
AD=$HERE/fixtures/tabstar/lora-cls3/adapter
for a in nost r0 dora peft; do cp -r "$AD" "ad-$a"; done
rm ad-nost/adapter_model.safetensors
python3 -c "
import json
for d, k, v in (('ad-r0', 'r', 0), ('ad-dora', 'use_dora', True), ('ad-peft', 'peft_type', 'IA3')):
    p = d + '/adapter_config.json'; c = json.load(open(p)); c[k] = v; json.dump(c, open(p, 'w'))
" || bad "x: adapters"
cp -al tab tv; cp -al tab tv2; rm tv/vocab.txt tv2/vocab.txt; printf '[PAD]\n[UNK]\n[UNK]\n' > tv/vocab.txt; : > tv2/vocab.txt
printf 'city,age,y\nTokyo,3,yes\nParis,4,no\nRome,5,yes\nOslo,6,no\n' > tt.csv
# what a first run builds or leaves (indexes, previous outputs), before the tree is compared
"$BIN" run --model spt --fasta c.fa --context pad --out c-first > /dev/null 2>&1 && rm -rf c-first || bad "x: c.fa's index"
"$BIN" annotate --model ms --vcf nogene.vcf --fasta genome.fa --genes genes.gtf --out ann-ref.csv > /dev/null 2>&1 || bad "x: annotate reference"
"$BIN" annotate --model ms --vcf nogene.vcf --fasta genome.fa --genes genes.gtf --out ann.bcf > /dev/null 2>&1 && head -c 300 ann.bcf > trunc.bcf || bad "x: a .bcf"
"$BIN" run --model spt --sequence ACGTACGTACGT --context pad --out tres > /dev/null 2>&1 || bad "x: tres" # tres/tokens.npy: what the run writes
cp tres/tokens.npy .tlock.nofall.lock
LONG=$(printf "$(printf 'x%.0s' $(seq 180))/%.0s" $(seq 25))   # 25 levels of 180 bytes: 4,525 bytes
WIDE=$(printf 'y%.0s' $(seq 300))                                  # a component no file system takes
BASE=$(printf 'z%.0s' $(seq 210))                                  # --out's own name over 200 bytes
P=(predict --model m --train train.csv --test train.csv --target y)
S=(run --model spt --context pad)
A=(annotate --model ms --fasta genome.fa --genes genes.gtf)

# -- the parents of --out: checked before anything is created; a failure removes what was created
hx parents-predict-model 1 "--model $X/nomodel" "$BIN" predict --model "$X/nomodel" --train train.csv --test train.csv --target y --out new/a/b/res
hx parents-predict-device 1 "--device tpu:0: unknown device" "$BIN" "${P[@]}" --device tpu:0 --out new/a/b/res
hx parents-predict-long 1 "too long: 4" "$BIN" "${P[@]}" --out "$LONG/res"
hx parents-predict-component 1 "a component of 300 bytes" "$BIN" "${P[@]}" --out "new/a/$WIDE/res"
hx parents-run-model 1 "--model $X/nomodel" "$BIN" run --model "$X/nomodel" --out new/a/res
hx parents-run-device 1 "--device tpu:0: unknown device" "$BIN" run --model m --device tpu:0 --out new/a/res
hx parents-run-long 1 "too long: 4" "$BIN" run --model m --out "$X/$LONG/res"
hx parents-run-sequence 1 "--sequence: position 5 is 'X'" "$BIN" "${S[@]}" --sequence ACGTXACGT --out new/a/res
hx parents-run-tokens 1 "t9.npy: token [0, 0] is 9, not an id" "$BIN" "${S[@]}" --tokens t9.npy --out new/a/res
hx parents-run-cells 1 "c-rows.json: \"x_txt\" and \"x_num\" must have n_rows = 2" "$BIN" run --model tab --cells c-rows.json --out new/a/res
hx parents-predict-adapter 1 "ad-r0/adapter_config.json: needs an integer r >= 1" "$BIN" predict --model tab --train tt.csv --test tt.csv \
   --target y --adapter ad-r0 --out new/a/res
hx parents-convert-long 1 "too long: 4" "$BIN" convert --model "$CK" --out "$LONG/res"
hx parents-convert-name 1 "name too long (210 bytes; at most 200)" "$BIN" convert --model "$CK" --out "new/a/$BASE"
hx parents-not-a-dir 1 "--out: new/../plain.csv: not a directory" "$BIN" "${P[@]}" --out new/../plain.csv/res
hx parents-annotate 1 "--out: new/.x.csv." "$BIN" "${A[@]}" --vcf nogene.vcf --out new/x.csv

# -- predict's CSVs and options
hx csv-no-target 1 "train.csv: no column 'q' (--target)" "$BIN" predict --model m --train train.csv --test train.csv --target q --out po
hx csv-one-row 1 "one.csv: 1 data rows; need at least 2" "$BIN" predict --model m --train one.csv --test train.csv --target y --out po
hx csv-empty 1 "empty.csv: empty file (no header row)" "$BIN" predict --model m --train train.csv --test empty.csv --target y --out po
hx csv-ragged 1 "ragged.csv: row 2 has 2 fields, the header has 3" "$BIN" predict --model m --train ragged.csv --test train.csv --target y --out po
hx csv-column 1 "otherc.csv: column 'c' is not in the training table" "$BIN" predict --model m --train train.csv --test otherc.csv --target y --out po
hx csv-nul 1 "nul.csv: row 1, column 2 ('b'): not valid UTF-8 (or a NUL byte)" "$BIN" predict --model m --train nul.csv --test train.csv --target y --out po
hx csv-quote 1 "quote.csv: row 1: malformed CSV" "$BIN" predict --model m --train quote.csv --test train.csv --target y --out po
hx csv-fifo 1 "fifo.csv: is a FIFO" "$BIN" predict --model m --train train.csv --test fifo.csv --target y --out po
hx csv-estimators 2 "--n-estimators takes an integer in [1, 1000], got '0'" "$BIN" "${P[@]}" --n-estimators 0 --out po
hx tabstar-predict-device 1 "--device tpu:1: unknown device" "$BIN" predict --model tab --train tt.csv --test tt.csv --target y --device tpu:1 --out po

# -- run on sequences, FASTA, tokens
hx seq-space 1 "--sequence: position 5 is ' '" "$BIN" "${S[@]}" --sequence "ACGT ACGT" --out so
hx region-reversed 1 "c.fa: region 'c1:30-10' is not in the file" "$BIN" "${S[@]}" --fasta c.fa --region c1:30-10 --out so
hx fasta-missing 1 "nofa.fa: cannot open" "$BIN" "${S[@]}" --fasta nofa.fa --out so
hx seq-two-inputs 2 "give one of --tokens, --sequence, --fasta" "$BIN" "${S[@]}" --fasta c.fa --sequence ACGT --out so
hx tokens-float 1 "tf.npy: token ids must be int8, int32 or int64, not float32" "$BIN" "${S[@]}" --tokens tf.npy --out so
hx tokens-3d 1 "t3d.npy: token ids must be (L,) or (B, L), not 3-dimensional" "$BIN" "${S[@]}" --tokens t3d.npy --out so
hx tokens-negative 1 "tneg.npy: token [0, 0] is -1" "$BIN" "${S[@]}" --tokens tneg.npy --out so

# -- .ckpt and convert
hx convert-not-zip 1 "notzip.ckpt: not a torch.save checkpoint (no zip signature" "$BIN" convert --model notzip.ckpt --out co
hx convert-truncated 1 "trunc.ckpt: not a readable zip archive" "$BIN" convert --model trunc.ckpt --out co
hx convert-no-pickle 1 "nopkl.ckpt: no 'bn_wrapped/data.pkl' in the archive" "$BIN" convert --model nopkl.ckpt --out co
hx convert-bad-config 1 "badcfg.json: not valid JSON" "$BIN" convert --model "$CK" --config badcfg.json --out co
hx convert-out-subdir 1 "--out sub holds 'd', which is not a plain file" "$BIN" convert --model "$CK" --out sub
hx run-ckpt-no-pickle 1 "--model nopkl.ckpt: nopkl.ckpt: no 'bn_wrapped/data.pkl'" "$BIN" run --model nopkl.ckpt --length 60 --out co
cp m/config.json tres/config.json # an input kept in --out under an artifact's name
hx convert-config-in-out 1 "move the input out of --out, or give another --out" "$BIN" convert --model "$CK" --config tres/config.json --out tres

# -- annotate: VCF / BCF / FASTA / GTF / outputs
hx ann-vcf-missing 1 "novcf.vcf" "$BIN" "${A[@]}" --vcf novcf.vcf --out ao.csv
hx ann-vcf-garbage 1 "garbage.vcf" "$BIN" "${A[@]}" --vcf garbage.vcf --out ao.csv
hx ann-bcf-truncated 1 "--vcf trunc.bcf: not a VCF/BCF file" "$BIN" "${A[@]}" --vcf trunc.bcf --out ao.csv
hx ann-out-is-vcf 1 "--out nogene.vcf is an input" "$BIN" "${A[@]}" --vcf nogene.vcf --out nogene.vcf
hx ann-device 1 "--device tpu:0: unknown device" "$BIN" "${A[@]}" --vcf nogene.vcf --device tpu:0 --out ao.csv

# -- TabSTAR: cells, tokenize, adapters, vocabulary
hx cells-rows 1 "c-rows.json: \"x_txt\" and \"x_num\" must have n_rows = 2 rows" "$BIN" run --model tab --cells c-rows.json --out to
hx cells-task 1 "c-task.json: \"task\" must be \"classification\" or \"regression\"" "$BIN" run --model tab --cells c-task.json --out to
hx cells-type 1 "c-type.json: cell [0][1]: x_txt must be a string" "$BIN" run --model tab --cells c-type.json --out to
hx cells-trailing 1 "c-trail.json: not valid JSON: trailing data" "$BIN" run --model tab --cells c-trail.json --out to
hx cells-format 1 "c-fmt.json: \"format\" must be \"nofall-tabstar-cells/1\"" "$BIN" run --model tab --cells c-fmt.json --out to
hx tokenize-object 1 "s-obj.json: must be a JSON list of strings" "$BIN" tokenize --model tab --strings s-obj.json --out tko
hx tokenize-item 1 "s-num.json: item 1 is not a string" "$BIN" tokenize --model tab --strings s-num.json --out tko
hx adapter-no-weights 1 "ad-nost/adapter_model.safetensors: cannot open" "$BIN" run --model tab --adapter ad-nost --out to
hx adapter-rank-0 1 "ad-r0/adapter_config.json: needs an integer r >= 1" "$BIN" run --model tab --adapter ad-r0 --out to
hx adapter-dora 1 "ad-dora/adapter_config.json: only plain LoRA is supported" "$BIN" run --model tab --adapter ad-dora --out to
hx adapter-peft-type 1 "ad-peft/adapter_config.json: peft_type must be \"LORA\"" "$BIN" run --model tab --adapter ad-peft --out to
hx vocab-duplicate 1 "tv/vocab.txt: line 3: token \"[UNK]\" already on line 2" "$BIN" run --model tv --out to
hx vocab-empty 1 "tv2/vocab.txt: empty vocabulary file" "$BIN" run --model tv2 --out to

# -- path games: --out's name; inputs where the new set would go (refused even when byte-identical)
hx out-empty 1 "--out needs a directory name, got ''" "$BIN" "${P[@]}" --out ""
hx out-cwd 1 "--out .: is the current directory" bash -c "cd cwd && exec \"\$0\" run --model ../m --out ." "$BIN"
hx out-root 1 "--out /: not a usable directory name" "$BIN" "${P[@]}" --out /
hx out-identical-input 1 "--out (its tokens.npy) $X/tres/tokens.npy is a file this command reads (--tokens tres/tokens.npy); the new results replace that name in --out (even with identical bytes): move the input out of --out" \
   "$BIN" "${S[@]}" --tokens tres/tokens.npy --out tres
hx out-lock-input 1 "a run locks --out with that file and removes it at the end: rename the input" "$BIN" "${S[@]}" --tokens .tlock.nofall.lock --out tlock

# -- SIGINT / SIGTERM: before the commit point (held in the write phase: the previous output stays, nothing
# left, exit 130 / 143), inside the commit (held in it: signals wait, the new output whole, nothing left),
# and in the forward with --out's parents new (they go too). All held at once, each signalled when it
# reports its phase. Needs -DNOFALL_TEST_HOOKS=ON (as tools/test.sh builds).
NOFALL_TEST_DELAY=forward:1 "$BIN" run --model m --out probe > /dev/null 2> "$L/probe.err"; rm -rf probe
if grep -q "test hook: forward phase" "$L/probe.err"; then
  # the new outputs as uninterrupted runs write them, and a previous output of each (copied into every case)
  "$BIN" "${P[@]}" --seed 2 --out pred-ref > /dev/null 2>&1 && "$BIN" convert --model "$CK" --out conv-ref > /dev/null 2>&1 &&
    "$BIN" "${S[@]}" --sequence ACGTACGTAC --out run-ref > /dev/null 2>&1 && "$BIN" "${P[@]}" --seed 1 --out pred-prev > /dev/null 2>&1 &&
    "$BIN" convert --model views.ckpt --out conv-prev > /dev/null 2>&1 &&
    "$BIN" "${S[@]}" --sequence GGGGCCCCAA --out run-prev > /dev/null 2>&1 || bad "signals: the reference runs"
  declare -A SG_PID SG_SIG SG_PHASE SG_OUT SG_CMD
  # sg NAME SIG PHASE OUT CMD...: a case directory sig-NAME holding a previous OUT; the command to run in it
  sg() {
    local name=$1 sig=$2 phase=$3 out=$4; shift 4
    mkdir -p "sig-$name"
    case $out in
      pred | conv | run) cp -a "$out-prev" "sig-$name/$out" ;;
      ann.csv) echo previous > "sig-$name/ann.csv"; echo '{"previous": 1}' > "sig-$name/ann.csv.report.json" ;;
    esac
    SG_OUT[$name]=$(cd "sig-$name" && find . \( -type d -printf '%p/\n' \) -o -printf '%p %s %T@\n' | LC_ALL=C sort)
    SG_SIG[$name]=$sig SG_PHASE[$name]=$phase SG_CMD[$name]=$(printf '%q ' "$@")
  }
  PR=(predict --model ../m --train ../train.csv --test ../train.csv --target y --seed 2 --out)
  CV=(convert --model "$CK" --out)
  AN=(annotate --model ../ms --fasta ../genome.fa --genes ../genes.gtf --vcf ../nogene.vcf --out)
  RN=(run --model ../spt --context pad --sequence ACGTACGTAC --out)
  for sig in INT TERM; do
    for phase in write commit; do
      sg "predict-$phase-$sig" $sig $phase pred "${PR[@]}" pred
      sg "convert-$phase-$sig" $sig $phase conv "${CV[@]}" conv
      sg "annotate-$phase-$sig" $sig $phase ann.csv "${AN[@]}" ann.csv
      sg "run-$phase-$sig" $sig $phase run "${RN[@]}" run
    done
  done
  sg "predict-forward-parents-INT" INT forward "" "${PR[@]}" new/a/res
  sg "run-forward-parents-TERM" TERM forward "" "${RN[@]}" new/a/res
  for n in "${!SG_SIG[@]}"; do # all at once; a commit is held 2 s (signals wait there), the others until signalled
    (cd "sig-$n" && eval "NOFALL_TEST_DELAY=${SG_PHASE[$n]}:$([ "${SG_PHASE[$n]}" = commit ] && echo 2000 || echo 120000) \
       exec \"\$BIN\" ${SG_CMD[$n]}" > "$L/sig-$n.out" 2> "$L/sig-$n.err") &
    SG_PID[$n]=$!
  done
  hooked() { # ERR PHASE: the run says it is held there (builtins only: polled often)
    local l
    while IFS= read -r l; do [[ $l == *"test hook: $2 phase"* ]] && return 0; done < "$1"
    return 1
  }
  pending=("${!SG_PID[@]}")
  for _ in $(seq 1 1200); do # signal each as it reports its phase (60 s at most)
    left=()
    for n in "${pending[@]}"; do
      if hooked "$L/sig-$n.err" "${SG_PHASE[$n]}"; then kill -"${SG_SIG[$n]}" "${SG_PID[$n]}"
      else left+=("$n"); fi
    done
    pending=("${left[@]}")
    [ ${#pending[@]} -eq 0 ] && break
    sleep 0.05
  done
  for n in "${pending[@]}"; do kill -KILL "${SG_PID[$n]}"; done
  for n in $(printf '%s\n' "${!SG_PID[@]}" | LC_ALL=C sort); do
    cases=$((cases + 1))
    wait "${SG_PID[$n]}"; rc=$?
    want=$((128 + $(kill -l "${SG_SIG[$n]}")))
    now=$(cd "sig-$n" && find . \( -type d -printf '%p/\n' \) -o -printf '%p %s %T@\n' | LC_ALL=C sort)
    why=""
    if [[ " ${pending[*]} " == *" $n "* ]]; then why="never reached the ${SG_PHASE[$n]} phase"
    elif [ $rc -ne $want ]; then why="exit $rc, want $want"
    elif grep -qE "AddressSanitizer|LeakSanitizer|runtime error:" "$L/sig-$n.err"; then why="sanitizer report"
    elif [ "${SG_PHASE[$n]}" != commit ]; then
      [ "$now" = "${SG_OUT[$n]}" ] || why="the previous output changed or something was left: $(diff <(echo "${SG_OUT[$n]}") <(echo "$now") | grep '^[<>]' | head -3 | tr '\n' ' ')"
    else # the new output, whole and as an uninterrupted run writes it; nothing else
      case $n in
        predict*) same=$(cd "sig-$n/pred" && for f in *; do [ "$f" = report.json ] || cmp -s "$f" "../../pred-ref/$f" || echo "$f"; done; ls | cmp -s - <(ls ../../pred-ref) || echo names) ;;
        convert*) same=$(cmp -s "sig-$n/conv/model.safetensors" conv-ref/model.safetensors && ls "sig-$n/conv" | cmp -s - <(ls conv-ref) || echo conv) ;;
        annotate*) same=$(cmp -s "sig-$n/ann.csv" ann-ref.csv && grep -q '"records"' "sig-$n/ann.csv.report.json" || echo ann) ;;
        run*) same=$(cd "sig-$n/run" && for f in *.npy; do cmp -s "$f" "../../run-ref/$f" || echo "$f"; done) ;;
      esac
      entries=$(ls -A "sig-$n" | tr '\n' ' ')
      if [ -n "$same" ]; then why="the new output is not whole: $same"
      elif [ "$entries" != "pred " ] && [ "$entries" != "conv " ] && [ "$entries" != "run " ] && [ "$entries" != "ann.csv ann.csv.report.json " ]; then
        why="left in its directory: $entries"
      fi
    fi
    if [ -z "$why" ]; then ok "signal $n: exit $rc"; else bad "signal $n: $why"; sed 's/^/    /' "$L/sig-$n.err" | tail -3; fi
  done
else
  echo "skip the signal cases: $BIN was built without -DNOFALL_TEST_HOOKS=ON"
fi
cd "$T" || exit 1

echo "hostile.sh: $cases cases, $fails failure(s)"
[ $cases -ge 140 ] || { echo "hostile.sh: fewer than 140 cases"; fails=$((fails + 1)); }
[ $fails -eq 0 ]
