#!/usr/bin/env bash
# A/B of two builds of libve.so on the decode pair (bench/gpu/graphs/run):
# each round runs the two servers under MPS, through ved with this tree's
# library, then with the "old" library (this tree with PATCH, a diff of
# src/, reversed; ved is this tree's), then each VARIANTS entry (more
# --pair-policies, e.g. "tput+VE_COMPLETION=event"), all against the same
# round's MPS pair. ROUNDS rounds (3).
#   PATCH=path/to/x.patch [VARIANTS=a,b] bench/gpu/probe/pair_ab.sh OUTDIR
set -u
OUT=${1:-/tmp/pair-ab}; mkdir -p "$OUT"
ROUNDS=${ROUNDS:-3}
. "$(dirname "$0")/old_lib.sh"
POL="tput+VE_LIB=$OLD/build/libve.so${VARIANTS:+,$VARIANTS}"
timeout $((ROUNDS * 120 + 120)) python3 bench/gpu/graphs/run --programs "" --torch "" --skip-backend-check \
	--pair-rounds "$ROUNDS" --pair-policies "$POL" --budget-s $((ROUNDS * 110 + 90)) \
	--ve-env pair:VE_LOG_LEVEL=debug --out /tmp/pair-ab-run --json "$OUT/pair-ab.json" >"$OUT/run.txt" 2>&1
grep "decode" "$OUT/run.txt" | tail -$((ROUNDS * 6 + 4))
echo "== the new library's exit lines (one server, round 1)"
grep -h "completion markers\|graph launches" /tmp/pair-ab-run/logs/pair_ve-r1-0.log | sed 's/.*exit: //'
echo "== the old library's"
grep -h "completion markers\|graph launches" /tmp/pair-ab-run/logs/pair_ve_tput*-r1-0.log 2>/dev/null | head -2 | sed 's/.*exit: //'
