#!/usr/bin/env bash
# Where a decode step's time goes under ve-run (bench/gpu/graphs/decode_replay.py
# alone: a graph launch and a read-back per token step), natively and under
# ve-run in several configurations, alternating, ROUNDS rounds of SECS s each;
# every run also times the launch call and the read-back apart (--parts).
# Then one ve-run with VE_TRACE for the op timeline (trace.json) and one
# eager (no graph) pair for comparison. Prints steps/s per run and the
# median per mode last.
#   bench/gpu/probe/decode_step.sh OUTDIR
set -u
OUT=${1:-/tmp/decode-step}; mkdir -p "$OUT"
ROUNDS=${ROUNDS:-2}; SECS=${SECS:-4}
make -j"$(nproc)" >"$OUT/build.log" 2>&1 || { tail -5 "$OUT/build.log"; exit 1; }
DEC="bench/gpu/graphs/decode_replay.py --layers 4 --batch 8 --parts --seconds"
run() { # name [--eager] env...
	local name=$1; shift
	local extra=""
	if [ "${1:-}" = --eager ]; then extra=--eager; shift; fi
	local f="$OUT/$name.$r.log"
	if [ "${name%%_*}" = native ]; then
		timeout 90 python3 $DEC "$SECS" $extra >"$f" 2>&1
	else
		env VE_LOG_LEVEL=info "$@" timeout 90 build/ve-run --policy tput -- python3 $DEC "$SECS" $extra >"$f" 2>&1
	fi
	local j; j=$(grep '^{' "$f" | tail -1)
	echo "$name $r $(echo "$j" | python3 -c 'import json,sys
try:
    d=json.loads(sys.stdin.read()); print(d["steps_per_s"], d.get("launch_call_us_p50"), d.get("read_back_us_p50"), d.get("read_back_us_p10"))
except Exception: print("FAIL")')" | tee -a "$OUT/runs.txt"
}
for r in $(seq "$ROUNDS"); do
	run native
	run ve PROBE=1
	run ve_gstream VE_GRAPHS=stream
	run ve_whole VE_POLICY=whole
	run ve_event VE_COMPLETION=event
	run ve_nobounce VE_BOUNCE_KB=0
	run native_eager --eager
	run ve_eager --eager PROBE=1
done
r=trace
run ve_trace VE_TRACE="$OUT/trace.json"
echo "== medians: steps/s launch_call_us read_back_us (p50)"
for m in $(awk '$2 != "trace" {print $1}' "$OUT/runs.txt" | sort -u); do
	awk -v m="$m" '$1 == m && $3 != "FAIL"' "$OUT/runs.txt" | sort -k3 -g |
		awk -v m="$m" '{a[NR]=$0} END{split(a[int((NR+1)/2)], f, " "); print m, f[3], f[4], f[5]}'
done
