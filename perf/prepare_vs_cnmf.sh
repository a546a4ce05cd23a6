#!/usr/bin/env bash
# `knmf prepare` against `cnmf prepare` (cNMF 1.7.1) on the same input, side by side in one
# run: wall seconds and peak RSS (/usr/bin/time -v), REPS runs each, alternating, medians.
#
#   perf/prepare_vs_cnmf.sh [COUNTS.h5ad] [REPS]
#
# Defaults: pbmc-donor-a (2,896 cells x 13,939 genes, 2.19M non-zeros; the largest real matrix
# here that cNMF accepts: mouse-brain-e18-10k is refused by cNMF for cells without counts in
# the HVGs), 5 runs. Needs the built driver (build/drivers/knmf) and cNMF's reference copy at
# ../shared/tools/cnmf-reference (or CNMF_REF). Options: -k 5 6 7 8 --n-iter 20 --seed 14
# --numgenes 2000 (tests/data/real/cnmf-pbmc-donor-a's run). Not a test.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
counts=$(realpath "${1:-$here/tests/data/real/pbmc-donor-a/pbmc-donor-a.h5ad}")
reps=${2:-5}
knmf=${KNMF:-$here/build/drivers/knmf}
cnmf_ref=${CNMF_REF:-$here/../shared/tools/cnmf-reference}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
opts=(-k 5 6 7 8 --n-iter 20 --seed 14 --numgenes 2000)

measure() {  # $1 label, rest: command; prints "seconds rss_kb"
  local label=$1; shift
  rm -rf "$work/out"
  (cd "$work" && /usr/bin/time -v "$@" > "$work/$label.log" 2> "$work/$label.time")
  local wall rss
  wall=$(grep "Elapsed (wall clock)" "$work/$label.time" | awk '{print $NF}' |
         awk -F: '{ if (NF == 3) print $1*3600 + $2*60 + $3; else print $1*60 + $2 }')
  rss=$(grep "Maximum resident set size" "$work/$label.time" | awk '{print $NF}')
  echo "$wall $rss"
}

median() { sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

: > "$work/knmf.txt"; : > "$work/cnmf.txt"
for ((i = 1; i <= reps; i++)); do
  measure knmf "$knmf" prepare --output-dir out --name bench -c "$counts" "${opts[@]}" >> "$work/knmf.txt"
  measure cnmf "$cnmf_ref/run_cnmf.sh" prepare --output-dir out --name bench -c "$counts" "${opts[@]}" >> "$work/cnmf.txt"
done
ks=$(cut -d' ' -f1 "$work/knmf.txt" | median); km=$(cut -d' ' -f2 "$work/knmf.txt" | median)
cs=$(cut -d' ' -f1 "$work/cnmf.txt" | median); cm=$(cut -d' ' -f2 "$work/cnmf.txt" | median)
echo "input: $counts"
echo "options: ${opts[*]}; $reps runs each, alternating; machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "knmf runs (s, KB): $(tr '\n' ';' < "$work/knmf.txt")"
echo "cnmf runs (s, KB): $(tr '\n' ';' < "$work/cnmf.txt")"
printf '| tool | median wall s | median peak RSS MB |\n|---|---|---|\n'
printf '| knmf prepare | %.2f | %.0f |\n' "$ks" "$(echo "$km / 1024" | bc -l)"
printf '| cnmf prepare | %.2f | %.0f |\n' "$cs" "$(echo "$cm / 1024" | bc -l)"
printf 'ratio cnmf / knmf: %.1fx time, %.1fx peak RSS\n' "$(echo "$cs / $ks" | bc -l)" "$(echo "$cm / $km" | bc -l)"
