#!/usr/bin/env bash
# hostile.sh BIN TMP -- the hostile-input corpus (issue #11): malformed
# checkpoints, configs, inputs, arguments and filesystem situations. Every
# case must: exit non-zero (not by a signal, not by hanging), print a message
# naming the file / tensor / argument at fault, print no sanitizer report,
# and leave the previous contents of --out byte for byte as they were, with
# no staging directory left behind.
set -u
BIN=$1; T=$2
HERE=$(cd "$(dirname "$0")" && pwd)
rm -rf "$T"; mkdir -p "$T"
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
         "fai-overflow:c1	9223372036854775807	4	1	2:the record's 9223372036854775807 bases overflow"; do
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

echo "hostile.sh: $cases cases, $fails failure(s)"
[ $cases -ge 45 ] || { echo "hostile.sh: fewer than 45 cases"; fails=$((fails + 1)); }
[ $fails -eq 0 ]
