#!/usr/bin/env bash
# A short first look on a GPU machine, before the long benchmarks: builds,
# the dependent-chain launch overhead (native, grant mode, per-op), each
# training job alone natively and under ve-run (bitwise digests compared),
# the LLM model's self-test and the server's solo calibration natively and
# under ve-run. About 5 minutes on an H200. Logs and one summary JSON go to
# OUTDIR (default $OUT or /tmp/ve-smoke); the last lines are a short table.
#   bench/gpu/smoke.sh [OUTDIR] [JOBS...]
set -u
OUTDIR=${1:-${OUT:-/tmp/ve-smoke}}
shift || true
JOBS=${*:-dense big tiny}
mkdir -p "$OUTDIR/logs"
B=build
VERUN="$PWD/$B/ve-run"
export CUBLAS_WORKSPACE_CONFIG=:4096:8 VE_DAEMON=0 PYTHONUNBUFFERED=1
note() { echo "[$(date +%H:%M:%S)] $*"; }
L=$OUTDIR/logs

note "machine: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | head -1)"
note "build"
make -j"$(nproc)" "$B/libve.so" "$B/ve-run" "$B/ved" >"$L/build.log" 2>&1 || {
	tail -30 "$L/build.log"
	exit 1
}
gcc -O2 -std=c11 -I/usr/local/cuda/include bench/gpu/launch_overhead.c \
	-L/usr/local/cuda/lib64/stubs -lcuda -o "$B/launch_overhead" >>"$L/build.log" 2>&1

note "dependent chain: native, grant mode, per-op"
timeout 120 "$B/launch_overhead" native >"$OUTDIR/launch-native.json" 2>"$L/launch-native.err"
timeout 120 "$VERUN" --policy tput -- "$B/launch_overhead" ve_grant >"$OUTDIR/launch-grant.json" 2>"$L/launch-grant.err"
VE_BIND=op timeout 120 "$VERUN" --policy tput -- "$B/launch_overhead" ve_op >"$OUTDIR/launch-op.json" 2>"$L/launch-op.err"
cat "$OUTDIR"/launch-*.json

solo() { # mode job
	local mode=$1 job=$2 start
	start=$(python3 -c 'import time; print(time.time() + 14)')
	local cmd=(python3 bench/gpu/jobs/train.py "$job" --start-at "$start" --windows 2 --window-s 2)
	if [ "$mode" = native ]; then
		timeout 90 "${cmd[@]}" >"$OUTDIR/solo-$job-$mode.json" 2>"$L/solo-$job-$mode.err"
	else
		VE_LOG_LEVEL=info timeout 90 "$VERUN" --policy tput -- "${cmd[@]}" \
			>"$OUTDIR/solo-$job-$mode.json" 2>"$L/solo-$job-$mode.err"
	fi
	tail -1 "$OUTDIR/solo-$job-$mode.json" | cut -c1-200
}
for j in $JOBS; do
	note "solo $j: native, then ve-run"
	solo native "$j"
	solo ve "$j"
done

note "LLM self-test (small) and server calibration"
timeout 120 python3 bench/gpu/llm.py --small --json "$OUTDIR/llm-selftest.json" >"$L/llm.log" 2>&1
tail -3 "$L/llm.log"
timeout 90 python3 bench/gpu/serve_llm.py --calibrate --batch 1 --json "$OUTDIR/cal-native.json" \
	>"$L/cal-native.log" 2>&1
timeout 90 "$VERUN" --policy tput --class latency -- python3 bench/gpu/serve_llm.py --calibrate \
	--batch 1 --json "$OUTDIR/cal-ve.json" >"$L/cal-ve.log" 2>&1

python3 - "$OUTDIR" <<'PY'
import json, os, sys, glob
out = sys.argv[1]
def last(p):
    try:
        return json.loads(open(p).read().strip().splitlines()[-1])
    except Exception as e:
        return {"error": repr(e)}
res = {"launch": {m: last(f"{out}/launch-{m}.json") for m in ("native", "grant", "op")}, "solo": {}}
n = res["launch"]["native"].get("chain_us_per_kernel_median")
for m in ("grant", "op"):
    v = res["launch"][m].get("chain_us_per_kernel_median")
    if n and v:
        res["launch"][m]["chain_overhead_us"] = round(v - n, 3)
print(f"{'what':28s} {'native':>10s} {'ve':>10s} {'ratio':>7s} bitwise")
for m in ("grant", "op"):
    v = res["launch"][m]
    print(f"{'chain us/kernel (' + m + ')':28s} {n!s:>10} {v.get('chain_us_per_kernel_median')!s:>10}"
          f" {v.get('chain_overhead_us')!s:>7} -")
jobs = sorted({os.path.basename(p).split("-")[1] for p in glob.glob(f"{out}/solo-*-native.json")})
for j in jobs:
    a, b = last(f"{out}/solo-{j}-native.json"), last(f"{out}/solo-{j}-ve.json")
    r = (b.get("steps_per_s") or 0) / a["steps_per_s"] if a.get("steps_per_s") else None
    same = a.get("digest") is not None and a.get("digest") == b.get("digest")
    res["solo"][j] = {"native": a, "ve": b, "ve_vs_native": r, "bitwise": same}
    print(f"{'solo ' + j + ' steps/s':28s} {a.get('steps_per_s')!s:>10} {b.get('steps_per_s')!s:>10}"
          f" {round(r, 3) if r else None!s:>7} {same}")
cn, cv = last(f"{out}/cal-native.json"), last(f"{out}/cal-ve.json")
res["serve_calibration"] = {"native": cn, "ve": cv}
for k in ("tpot_ms", "ttft_ms", "capacity_rps"):
    print(f"{'serve ' + k:28s} {cn.get(k)!s:>10} {cv.get(k)!s:>10}")
json.dump(res, open(f"{out}/smoke.json", "w"), indent=1)
PY
