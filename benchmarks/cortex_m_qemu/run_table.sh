#!/bin/bash
# run_table.sh OUT NAME...   e.g.  run_table.sh /tmp/qemu-table portable kv_cache dynamic cond transformer
# For each of pte_lab's example programs NAME: export it (pte-lab example), write its cortex-m runner
# (pte-lab sizes --target cortex-m --example-runner), and run it under QEMU (run_runner.sh) at pools.h's sizes,
# with one byte less on the method pool, one byte less on the temp pool, "method alone" (no temp allocator:
# pools.h's METHOD_POOL_ALONE_BYTES) and one byte less on it, and at pools.h's sizes with nonzero inputs.
# One line per run in OUT/table.tsv; the guests' logs in OUT/runs/. PTE_LAB: the pte-lab command.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${1:?usage: run_table.sh OUT NAME...}; shift
PTE_LAB=${PTE_LAB:-pte-lab}
mkdir -p "$OUT/runs" "$OUT/pools"
for name in "$@"; do
  R=$OUT/runners/$name
  "$PTE_LAB" example "$name" "$OUT/$name.pte" > /dev/null 2>&1 || { echo "$name: export failed" >&2; continue; }
  "$PTE_LAB" sizes "$OUT/$name.pte" --target cortex-m --example-runner "$R" > /dev/null 2>&1
  get() { awk -v k="$1" '$1=="#define" && $2 ~ k"$" {gsub("u","",$3); print $3; exit}' "$R/pools.h"; }
  mp=$(get _METHOD_POOL_BYTES); tp=$(get _TEMP_POOL_BYTES); alone=$(get _METHOD_POOL_ALONE_BYTES)
  mk() {  # file method temp alone
    sed -E "s/(_METHOD_POOL_BYTES )[0-9]+u/\1$2u/; s/(_TEMP_POOL_BYTES )[0-9]+u/\1$3u/; s/(_METHOD_POOL_ALONE_BYTES )[0-9]+u/\1$4u/" \
      "$R/pools.h" > "$1"
  }
  P=$OUT/pools/$name; mkdir -p "$P"
  mk "$P/exact.h" "$mp" "$tp" "${alone:-0}"
  mk "$P/method-1.h" $((mp - 1)) "$tp" "${alone:-0}"
  mk "$P/temp-1.h" "$mp" $((tp - 1)) "${alone:-0}"
  cfgs="exact method-1 temp-1 exact-nonzero"
  if [ -n "$alone" ]; then
    mk "$P/alone-1.h" "$mp" "$tp" $((alone - 1)); cp "$P/exact.h" "$P/alone.h"; cfgs="$cfgs alone alone-1"
  fi
  for cfg in $cfgs; do
    case $cfg in
      exact-nonzero) h=$P/exact.h; env="NONZERO=1";;
      alone*) h=$P/$cfg.h; env="NO_TEMP=1";;
      *) h=$P/$cfg.h; env="";;
    esac
    log=$OUT/runs/$name.$cfg.log
    env POOLS_H="$h" $env WORK="$OUT/work/$name.$cfg" "$HERE/run_runner.sh" "$R" > "$log" 2>&1
    rc=$?
    sizes=$(grep -o '^#define [A-Z0-9_]*_\(METHOD_POOL\|TEMP_POOL\|METHOD_POOL_ALONE\)_BYTES [0-9]*' "$h" | awk '{printf "%s ", $3}')
    said=$(grep -m1 -o 'method [a-z_]*: \(loaded and executed twice; method pool [0-9]* B used of [0-9]*\|error 0x[0-9a-f]*\)' "$log")
    printf '%s\t%s\t%s\t%s\trc=%s\t%s\n' "$name" "$cfg" "$sizes" "${env:-}" "$rc" "${said:-}" | tee -a "$OUT/table.tsv"
  done
done
