#!/usr/bin/env bash
# The soak on a GPU: two PyTorch clients (bench/gpu/torch_determinism.py
# under ve-run, REPS=2 each run) through the soak's ved under MPS, run again
# and again for SECONDS while tests/soak/ve_soak kills clients, stops them,
# and kills and restarts ved at random; a run is right when its digests equal
# a native reference made first. Plus 2 simulated-GPU clients. Writes the
# figures (leases_leaked, clients_hung, results_lost, results_wrong: goals 0)
# to OUTDIR/soak-gpu.json and the logs to OUTDIR/soak-logs.
#   bench/gpu/soak.sh [OUTDIR] [SECONDS]      default $OUT (or /tmp/ve-soak), 300
# About SECONDS + 1 minute of device time. Starts and stops its own MPS
# daemon (never changes GPU settings); refuses to run when the GPU is busy.
set -u
OUTDIR=${1:-${OUT:-/tmp/ve-soak}}
SECS=${2:-300}
case "$SECS" in '' | *[!0-9]*) echo "soak.sh: SECONDS must be a number" >&2; exit 2 ;; esac
mkdir -p "$OUTDIR"
note() { echo "[$(date +%H:%M:%S)] $*"; }
MPSCTL=$(command -v nvidia-cuda-mps-control || echo /usr/bin/nvidia-cuda-mps-control)
busy=$(nvidia-smi --query-compute-apps=pid --format=csv,noheader 2>/dev/null | grep -c .)
if [ "${busy:-0}" -gt 0 ]; then
	echo "soak.sh: the GPU runs $busy other compute processes: refused" >&2
	exit 1
fi
make -j"$(nproc)" >"$OUTDIR/build.log" 2>&1 || { tail -20 "$OUTDIR/build.log"; exit 1; }
export CUBLAS_WORKSPACE_CONFIG=:4096:8 PYTHONUNBUFFERED=1
note "native reference"
REPS=2 timeout 300 python3 bench/gpu/torch_determinism.py native >"$OUTDIR/ref.json" \
	2>"$OUTDIR/ref.err" || { tail -5 "$OUTDIR/ref.err"; exit 1; }
MPS_DIR=$(mktemp -d /tmp/ve-soak-mps.XXXXXX)
export CUDA_MPS_PIPE_DIRECTORY=$MPS_DIR/pipe CUDA_MPS_LOG_DIRECTORY=$MPS_DIR/log
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
stop_mps() {
	echo quit | timeout 30 "$MPSCTL" >/dev/null 2>&1
	sleep 1
	cp -r "$CUDA_MPS_LOG_DIRECTORY" "$OUTDIR/mps-log" 2>/dev/null
	rm -rf "$MPS_DIR"
}
timeout 30 "$MPSCTL" -d || { echo "soak.sh: MPS did not start" >&2; exit 1; }
trap stop_mps EXIT
note "MPS started; soak of $SECS s"
client="REPS=2 build/ve-run -- python3 bench/gpu/torch_determinism.py soak | python3 tests/soak/same_digests.py $OUTDIR/ref.json"
tests/soak/run --seconds "$SECS" --sim 2 --fake 0 --json "$OUTDIR/soak-gpu.json" --out "$OUTDIR/soak-logs" \
	--cmd "$client" --cmd "$client"
rc=$?
note "soak rc=$rc"
python3 - "$OUTDIR/soak-gpu.json" <<'PY'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception as e:
    print(f"no figures: {e!r}"); sys.exit(0)
keys = ("ops", "kills", "faults", "leases_leaked", "clients_hung", "results_lost", "results_wrong", "ved_failures")
print("  ".join(f"{k} {d.get(k)}" for k in keys))
print("clients:", json.dumps(d.get("clients"))[:400])
PY
exit $rc
