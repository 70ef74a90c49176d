#!/usr/bin/env bash
# Regenerates the committed simulator results, bench/results/sim-*.{json,txt,svg}:
# every scenario of scenarios/ with its policies, 3 seeds, the oracle; the
# four paper scenarios also in strict per-op mode (-strict). Run from the
# repository root after `make`; takes a few minutes on 2 cores.
#
#   bench/sim_results.sh                # all
#   bench/sim_results.sh train-infer    # one scenario (and its -strict twin)
set -euo pipefail
SIM=${SIM:-build/ve-sim}
OUT=${OUT_DIR:-bench/results}
[ -x "$SIM" ] || { echo "sim_results: $SIM not built (run make)" >&2; exit 1; }

# scenario | policies (grant mode) | strict policies ('' = no strict run)
PLAN=(
  "train-infer|tput,tput:lend=0,tpot:reserve=32,tpot:reserve=32,lend_reserve=1,fixed,whole|tput,tpot:reserve=32,fixed,whole"
  "train-pair-dense|tput,tput:lend=0,fixed,whole|tput,fixed,whole"
  "train-pair-offload|tput,tput:lend=0,fixed,whole|tput,fixed,whole"
  "llm-serving|tput,tput:lend=0,tpot:reserve=64,tpot_ms=7,fixed,whole|tput,tpot:reserve=64,tpot_ms=7,fixed,whole"
  "serve-graphs|tput,tput:lend=0,tpot:reserve=32,tpot_ms=2.5,standing=0,tpot:reserve=32,tpot_ms=2.5,standing=0,adapt=1,tpot:reserve=64,tpot_ms=2.5,standing=0,tpot:reserve=64,tpot_ms=2.5,lend_reserve=1,fixed,whole|"
  "coloc-hostphase-dense|tput,tput:turns=0,fixed,whole|"
  "coloc-dense-dense|tput,tput:turns=0,fixed,whole|"
  "coloc-three|tput,tput:turns=0,fixed,whole|"
  "decode-pair-graphs|tput,tput:share=0,fixed,whole|"
  "serve-two|tpot:reserve=32,tput,fixed,whole|"
)

run() { # name policies extra-args...
	local name=$1 pol=$2 tag=$3
	shift 3
	echo "sim_results: $name$tag ($pol)" >&2
	"$SIM" "scenarios/$name.txt" --policies "$pol" --seeds 3 --oracle \
		--json "$OUT/sim-$name$tag.json" "$@" >"$OUT/sim-$name$tag.txt"
	[ -n "$tag" ] || python3 bench/plot_sim.py "$OUT/sim-$name$tag.json" >/dev/null
}

for row in "${PLAN[@]}"; do
	IFS='|' read -r name pol strict <<<"$row"
	[ $# -eq 0 ] || [[ " $* " == *" $name "* ]] || continue
	run "$name" "$pol" ""
	[ -z "$strict" ] || run "$name" "$strict" -strict --bind op --window 0
done
