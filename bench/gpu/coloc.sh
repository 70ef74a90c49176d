#!/usr/bin/env bash
# Colocated training on one GPU: two unmodified PyTorch jobs ('big', 'small')
# side by side under time slicing (no MPS), MPS with no limits, and
# Vitamin-E through ved (tput, and fixed = a static 50/50 split), each job's
# throughput normalized to its solo native run and its parameters after 20
# steps compared bitwise with the solo run.
#   bench/gpu/coloc.sh [OUTDIR] [SECONDS]
# Starts the MPS control daemon for its own runs (pipe/log dirs under
# OUTDIR) and stops it at the end; never changes compute mode or clocks.
set -u
OUTDIR=${1:-${OUT:-/tmp/ve-coloc}}
SECS=${2:-20}
B=${VE_BUILD:-build}
mkdir -p "$OUTDIR/logs"
MPSBIN=${MPSBIN:-/usr/local/nvidia/bin}
export CUDA_MPS_PIPE_DIRECTORY=$OUTDIR/mps-pipe CUDA_MPS_LOG_DIRECTORY=$OUTDIR/mps-log
unset CUDA_MPS_ACTIVE_THREAD_PERCENTAGE
JOB="python3 bench/gpu/torch_train_job.py"
note() { echo "[$(date +%H:%M:%S)] $*"; }

pair() { # label prefix-command... : runs big and small together
	local label=$1; shift
	note "pair: $label"
	"$@" $JOB big "$SECS" > "$OUTDIR/$label-big.json" 2> "$OUTDIR/logs/$label-big.err" &
	local a=$!
	"$@" $JOB small "$SECS" > "$OUTDIR/$label-small.json" 2> "$OUTDIR/logs/$label-small.err" &
	local b=$!
	wait $a $b
}

mps_start() {
	mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
	"$MPSBIN/nvidia-cuda-mps-control" -d && sleep 1 && note "MPS started"
}
mps_stop() { echo quit | "$MPSBIN/nvidia-cuda-mps-control" 2>/dev/null; sleep 1; note "MPS stopped"; }

ved_start() { # policy
	VE_VED_POLICY="$1" VE_VED_LOG_LEVEL=info "$B/ved" > "$OUTDIR/logs/ved-$1.log" 2>&1 &
	VED=$!
	sleep 1
	note "ved ($1) pid $VED"
}
ved_stop() { kill $VED 2>/dev/null; wait $VED 2>/dev/null; }

for j in big small; do
	note "solo native: $j"
	$JOB $j "$SECS" > "$OUTDIR/solo-$j.json" 2> "$OUTDIR/logs/solo-$j.err"
done
pair timeslice env
mps_start
pair mps env
ved_start tput
VE_DAEMON=1 VE_LOG_LEVEL=info pair vitamin-tput "$B/ve-run" --
VE_DAEMON=1 VE_PIPE_BUDGET=16 VE_LOG_LEVEL=info pair vitamin-tput-b16 "$B/ve-run" --
ved_stop
ved_start fixed
VE_DAEMON=1 VE_LOG_LEVEL=info pair vitamin-fixed "$B/ve-run" --
ved_stop
mps_stop
python3 - "$OUTDIR" <<'PY'
import json, sys, os
out = sys.argv[1]
def load(p):
    try:
        return json.loads(open(os.path.join(out, p)).read().strip().splitlines()[-1])
    except Exception as e:
        return {"error": repr(e)}
solo = {j: load(f"solo-{j}.json") for j in ("big", "small")}
res = {"solo": solo, "modes": {}}
print("mode            big_norm small_norm aggregate  bitwise(big,small)")
for m in ("timeslice", "mps", "vitamin-tput", "vitamin-tput-b16", "vitamin-fixed"):
    r = {j: load(f"{m}-{j}.json") for j in ("big", "small")}
    try:
        norm = {j: r[j]["steps_per_s"] / solo[j]["steps_per_s"] for j in r}
        same = {j: r[j]["digest"] == solo[j]["digest"] for j in r}
        agg = sum(norm.values())
        print(f"{m:15s} {norm['big']:8.3f} {norm['small']:10.3f} {agg:9.3f}  {same['big']},{same['small']}")
        res["modes"][m] = {"jobs": r, "normalized": norm, "aggregate_normalized_throughput": agg,
                           "bitwise_identical_to_solo": same}
    except Exception as e:
        print(f"{m:15s} ERROR {e}")
        res["modes"][m] = {"jobs": r, "error": repr(e)}
json.dump(res, open(os.path.join(out, "coloc.json"), "w"), indent=1)
PY
