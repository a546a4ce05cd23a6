# shellcheck shell=bash
# Helpers shared by the perf scripts that time whole runs on cNMF's pbmcA prepare folder.
# Source it after setting: work (scratch folder), prep (the prepare folder to copy), OUT (the
# raw results file) and LIB_NAME (the script's name, for error messages).

# fresh NAME: a new copy of the prepare folder at $work/NAME/pbmcA
fresh() { rm -rf "${work:?}/$1" && mkdir -p "$work/$1" && cp -r "${prep:?}" "$work/$1/pbmcA"; }

# timed RUNNER ROUND CMD...: runs CMD (its output discarded), appends one line
# "RUNNER ROUND wall_s W cpu_s C" (CPU = user + sys, /usr/bin/time) to $OUT and prints it;
# a failed CMD stops the script with the end of its stderr
timed() {
  local name=$1 round=$2; shift 2
  /usr/bin/time -f "%e %U %S" -o "$work/time" "$@" > /dev/null 2> "$work/err" ||
    { echo "${LIB_NAME:-perf}: $name failed:" >&2; tail -5 "$work/err" >&2; exit 1; }
  awk -v n="$name" -v r="$round" '{printf "%s %d wall_s %.3f cpu_s %.3f\n", n, r, $1, $2 + $3}' \
    "$work/time" | tee -a "$OUT"
}
