#!/usr/bin/env bash
# Decode replay of CUDA graphs alone (bench/gpu/graphs/decode_replay.py: a
# token step is a graph launch and a read-back), natively and under ve-run
# with dispatcher knobs, alternating, ROUNDS rounds: where a step's overhead
# goes. Prints steps/s per run and the median per mode last.
#   bench/gpu/probe/decode_knobs.sh OUTDIR
set -u
OUT=${1:-/tmp/decode-knobs}; mkdir -p "$OUT"
ROUNDS=${ROUNDS:-3}; SECS=${SECS:-5}
make -j"$(nproc)" >"$OUT/build.log" 2>&1 || { tail -5 "$OUT/build.log"; exit 1; }
run() { # name env...
	local name=$1; shift
	local f="$OUT/$name.$r.log"
	if [ "$name" = native ]; then
		timeout 90 python3 bench/gpu/graphs/decode_replay.py --layers 4 --batch 8 --seconds "$SECS" >"$f" 2>&1
	else
		env "$@" timeout 90 build/ve-run --policy tput -- python3 bench/gpu/graphs/decode_replay.py \
			--layers 4 --batch 8 --seconds "$SECS" >"$f" 2>&1
	fi
	sps=$(grep -o '"steps_per_s": [0-9.]*' "$f" | tail -1 | awk '{print $2}')
	echo "$name $r ${sps:-FAIL}" | tee -a "$OUT/runs.txt"
}
for r in $(seq "$ROUNDS"); do
	run native
	run ve PROBE=1
	run ve_poll5 VE_POLL_US=5
	run ve_nospin VE_SYNC_SPIN_US=0
	run ve_op VE_BIND=op
done
echo "== medians (steps/s)"
for m in $(awk '{print $1}' "$OUT/runs.txt" | sort -u); do
	echo "$m $(awk -v m="$m" '$1 == m {print $3}' "$OUT/runs.txt" | sort -g | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}')"
done
