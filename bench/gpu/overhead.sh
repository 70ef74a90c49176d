#!/usr/bin/env bash
# What Vitamin-E costs a program alone on the GPU, native and under ve-run in
# the same run: the dependent-chain launch overhead (grant mode, the default,
# and per-op binding), the time of a step that synchronizes (a kernel of 0 or
# 300 us, then cuStreamSynchronize: sync_step_overhead_us_t0/_t300) and eager
# batch-1 inference latency. About 2 minutes.
# Writes OUTDIR/overhead.json (bench/results/overhead.json's schema:
# chain_overhead_us = ve - native, us per kernel) and logs; prints a table.
#   bench/gpu/overhead.sh [OUTDIR]
set -u
OUTDIR=${1:-${OUT:-/tmp/ve-overhead}}
mkdir -p "$OUTDIR/logs"
B=build
VERUN="$PWD/$B/ve-run"
L=$OUTDIR/logs
export CUBLAS_WORKSPACE_CONFIG=:4096:8 VE_DAEMON=0 PYTHONUNBUFFERED=1
note() { echo "[$(date +%H:%M:%S)] $*"; }
make -j"$(nproc)" "$B/libve.so" "$B/ve-run" >"$L/build.log" 2>&1 || {
	tail -20 "$L/build.log"
	exit 1
}
gcc -O2 -std=c11 -I/usr/local/cuda/include bench/gpu/launch_overhead.c \
	-L/usr/local/cuda/lib64/stubs -lcuda -o "$B/launch_overhead" >>"$L/build.log" 2>&1 || exit 1
for m in native grant op; do
	note "launch overhead: $m"
	case $m in
	native) timeout 120 "$B/launch_overhead" native ;;
	grant) timeout 120 "$VERUN" --policy tput -- "$B/launch_overhead" ve_grant ;;
	op) VE_BIND=op timeout 120 "$VERUN" --policy tput -- "$B/launch_overhead" ve_op ;;
	esac >"$OUTDIR/launch-$m.json" 2>"$L/launch-$m.err"
done
for m in native grant; do
	note "eager inference latency: $m"
	if [ $m = native ]; then
		timeout 200 python3 bench/gpu/torch_infer_latency.py native
	else
		timeout 200 "$VERUN" --policy tput -- python3 bench/gpu/torch_infer_latency.py ve_grant
	fi >"$OUTDIR/infer-$m.json" 2>"$L/infer-$m.err"
done
python3 - "$OUTDIR" <<'PY'
import json, subprocess, sys, time
out = sys.argv[1]
def last(p):
    try:
        return json.loads(open(p).read().strip().splitlines()[-1])
    except Exception as e:
        return {"error": repr(e)}
L = {m: last(f"{out}/launch-{m}.json") for m in ("native", "grant", "op")}
I = {m: last(f"{out}/infer-{m}.json") for m in ("native", "grant")}
gpu = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                     capture_output=True, text=True).stdout.strip()
n = L["native"].get("chain_us_per_kernel_median")
res = {"date": time.strftime("%Y-%m-%d"), "machine": gpu,
       "method": "bench/gpu/launch_overhead.c: 4000 dependent 1-thread kernels on one stream, "
                 "synchronized, median of 15 reps (us per kernel), native and under ve-run "
                 "(embedded coordinator, policy tput) in the same run; eager batch-1 inference "
                 "latency percentiles from bench/gpu/torch_infer_latency.py",
       "launch": L, "infer": I}
for m in ("grant", "op"):
    v = L[m].get("chain_us_per_kernel_median")
    res[f"chain_overhead_us_{m}"] = round(v - n, 3) if (v and n) else None
res["chain_overhead_us"] = res["chain_overhead_us_grant"]
# A loop that synchronizes every step: extra us per step under ve-run (grant).
for t in ("t0", "t300"):
    a_, b_ = L["native"].get(f"sync_step_us_{t}_median"), L["grant"].get(f"sync_step_us_{t}_median")
    res[f"sync_step_overhead_us_{t}"] = round(b_ - a_, 3) if (a_ and b_) else None
a, b = I["native"], I["grant"]
for k in ("p50_us", "p95_us", "p99_us"):
    if a.get(k) and b.get(k):
        res[f"infer_{k}_ve_vs_native"] = round(b[k] / a[k], 4)
json.dump(res, open(f"{out}/overhead.json", "w"), indent=1)
print(f"chain us/kernel: native {n}, grant {L['grant'].get('chain_us_per_kernel_median')}, "
      f"per-op {L['op'].get('chain_us_per_kernel_median')}; chain_overhead_us {res['chain_overhead_us']}")
print(f"synchronized steps, us each (native / grant / per-op): "
      f"T=0 {L['native'].get('sync_step_us_t0_median')} / {L['grant'].get('sync_step_us_t0_median')} / "
      f"{L['op'].get('sync_step_us_t0_median')}; T=300us {L['native'].get('sync_step_us_t300_median')} / "
      f"{L['grant'].get('sync_step_us_t300_median')} / {L['op'].get('sync_step_us_t300_median')}")
print("infer:", {m: {k: I[m].get(k) for k in ("p50_us", "p95_us", "p99_us")} for m in I})
PY
