#!/usr/bin/env bash
# One machine call after a change of the runtime: the GPU determinism check
# (CUDA C suite and PyTorch under native, chaos and tput), an A/B of the
# host-phase training job alone (native against ve-run with dispatcher and
# sync knobs), and a serving diagnosis (the LLM server beside dense training
# under ve_whole, ve_tput and ve_tpot through ved, with ved's clients and
# status sampled every 0.5 s). Full logs under OUTDIR; a short table last.
#   bench/gpu/check-pass.sh [OUTDIR] [PARTS]     PARTS: det,host,serve (default all)
set -u
OUTDIR=${1:-${OUT:-/tmp/ve-check}}
PARTS=${2:-det,host,serve}
W=/tmp/ve-check-work
rm -rf "$W" && mkdir -p "$W" "$OUTDIR"
export CUBLAS_WORKSPACE_CONFIG=:4096:8
note() { echo "[$(date +%H:%M:%S)] $*"; }
has() { case ",$PARTS," in *",$1,"*) return 0 ;; esac; return 1; }

note "build"
make -j"$(nproc)" >"$W/build.log" 2>&1 || { tail -20 "$W/build.log"; exit 1; }
bash bench/gpu/run_gpu.sh build "$OUTDIR/det" >"$OUTDIR/det-build.txt" 2>&1 || { tail -20 "$OUTDIR/det-build.txt"; exit 1; }

if has det; then
	note "determinism: CUDA C suite (native, tput, chaos)"
	bash bench/gpu/run_gpu.sh suite "$OUTDIR/det" >"$OUTDIR/det-suite.txt" 2>&1
	tail -3 "$OUTDIR/det-suite.txt"
	note "determinism: PyTorch (native, chaos, tput)"
	REPS=${REPS:-10} bash bench/gpu/run_gpu.sh torch "$OUTDIR/det" >"$OUTDIR/det-torch.txt" 2>&1
	tail -8 "$OUTDIR/det-torch.txt"
fi

host_run() { # label env... : the hostphase job alone, 3 windows of 2 s
	local label=$1; shift
	local cmd=(python3 bench/gpu/jobs/train.py hostphase --windows 3 --window-s 2 ${REPS_ARG:-})
	if [ "$label" = native ]; then
		timeout 90 "${cmd[@]}" >"$W/host-$label.json" 2>"$W/host-$label.err"
	else
		timeout 90 env "$@" build/ve-run -- "${cmd[@]}" >"$W/host-$label.json" 2>"$W/host-$label.err"
	fi
	python3 - "$label" "$W/host-$label.json" <<'EOF' | tee -a "$OUTDIR/host.txt"
import json, sys
label, path = sys.argv[1], sys.argv[2]
try:
    d = json.loads(open(path).read().strip().splitlines()[-1])
except Exception as e:
    print(f"{label:28s} no result ({e!r})"); sys.exit(0)
w = [x["sps"] for x in d.get("windows", [])]
print(f"{label:28s} steps/s {d.get('steps_per_s')} windows {w} cpu_reps {d.get('cpu_reps')} "
      f"digest {str(d.get('digest'))[:12]} ok {d.get('ok')}")
EOF
}

if has host; then
	note "host-phase job alone: native and ve-run variants"
	: >"$OUTDIR/host.txt"
	host_run native
	REPS_ARG="--cpu-reps $(python3 -c "import json;print(json.loads(open('$W/host-native.json').read().strip().splitlines()[-1]).get('cpu_reps') or 1)" 2>/dev/null || echo 1)"
	: >"$OUTDIR/host.txt"
	host_run native
	host_run tput VE_POLICY=tput
	host_run whole VE_POLICY=whole
	host_run tput_alone0 VE_POLICY=tput:alone=0
	host_run tput_poll5 VE_POLICY=tput VE_POLL_US=5
	host_run tput_poll200 VE_POLICY=tput VE_POLL_US=200
	cp "$W"/host-*.err "$OUTDIR/" 2>/dev/null
fi

if has serve; then
	note "serving diagnosis: server beside dense training under ve_whole, ve_tput, ve_tpot"
	timeout 420 python3 bench/gpu/mixed --runs 1 --duration 6 --modes ve_whole,ve_tput,ve_tpot \
		--tpot-args reserve=16 --budget-s 400 --stop-after-s 380 --outdir "$W/mixed" \
		--out "$OUTDIR/mixed-diag.json" --no-plot >"$OUTDIR/mixed.txt" 2>&1
	tail -12 "$OUTDIR/mixed.txt"
	(cd "$W" && tar czf "$OUTDIR/mixed-logs.tgz" mixed) 2>/dev/null
fi

note "summary"
[ -f "$OUTDIR/det-suite.txt" ] && grep -E "passed|failed" "$OUTDIR/det-suite.txt" | tail -1
[ -f "$OUTDIR/det-torch.txt" ] && python3 bench/gpu/summarize.py "$OUTDIR/det" 2>/dev/null | grep -A6 "^determinism"
[ -f "$OUTDIR/host.txt" ] && cat "$OUTDIR/host.txt"
exit 0
