#!/usr/bin/env bash
# One machine call after a change of the runtime: the GPU determinism check
# (CUDA C suite and PyTorch under native, chaos and tput), an A/B of the
# host-phase training job alone (native against ve-run with policy and
# dispatcher knobs), and serving beside dense training (time slicing, MPS,
# MPS split, ve_tput, ve_tpot through ved, ved's clients and status sampled
# every 0.5 s). Before anything, the GPU is checked to be idle (memory in use,
# utilization, compute processes): a GPU someone else uses makes every figure
# wrong. Returns few files in OUTDIR: pass.txt (the tables), host.txt,
# mixed-pass.json, logs.tgz (every log). The last lines are a short table.
#   bench/gpu/check-pass.sh [OUTDIR] [PARTS]    PARTS: det,host,serve,suite,graphs,decpair,decode,coloc,infer,preload
#                                               (default det,host,serve)
# graphs: bench/gpu/graphs/run (graphs.json, about 6 min); decpair: only its
# decode replay, alone and as a pair of servers against MPS, DECPAIR_ROUNDS
# (3) alternating rounds within DECPAIR_BUDGET s (270) (graphs-decode.json,
# about 3 min); decode: greedy
# decode flips, 100 generations of 64 tokens per mode (decode.json, about 5 min).
# Knobs: MODES, TPOT_ARGS, SERVE_RUNS, SERVE_S, SERVE_BUDGET, SERVE_TIMEOUT, SERVE_ARGS
# (extra arguments of bench/gpu/mixed, e.g. "--arrivals bursty" or "--merge --out F") (serve);
# GRAPHS_ARGS (extra arguments of bench/gpu/graphs/run), GRAPHS_BUDGET,
# GRAPHS_TIMEOUT; DECODE_BUDGET, DECODE_TIMEOUT; COLOC_PAIRS (default b,d),
# COLOC_MODES (mps,ve_tput), COLOC_RUNS (3), COLOC_BUDGET (300), COLOC_ARGS (extra
# arguments, e.g. --policy ve_tput@nolend=tput:lend=0 for a lending A/B with
# COLOC_MODES=mps,ve_tput,ve_tput@nolend) for coloc:
# bench/gpu/coloc, 2 windows of 1.5 s per process start, coloc-pass.json;
# INFER_ROUNDS (3) and INFER_MODES ("native tput"; NAME=VE_X=v,... adds
# ve-run tput with those settings) for infer: eager batch-1 inference latency
# (bench/gpu/torch_infer_latency.py) natively and under ve-run, alternating,
# infer.json with every run and the medians. preload: the dense training job
# alone under ve-run with VE_PRELOAD=0 and 1 (kernels loaded by the shim,
# driver submissions that held the dispatcher 1 ms or more).
set -u
OUTDIR=${1:-${OUT:-/tmp/ve-check}}
PARTS=${2:-det,host,serve}
MODES=${MODES:-timeslice,mps,mps_split,ve_tput,ve_tpot}
W=/tmp/ve-check-work
rm -rf "$W" && mkdir -p "$W" "$OUTDIR"
export CUBLAS_WORKSPACE_CONFIG=:4096:8
note() { echo "[$(date +%H:%M:%S)] $*"; }
has() { case ",$PARTS," in *",$1,"*) return 0 ;; esac; return 1; }
finish() {
	(cd "$W" && tar czf "$OUTDIR/logs.tgz" --exclude='*.so' --exclude='gpu/gpu_*' . ) 2>/dev/null
}
trap finish EXIT
exec > >(tee "$W/pass-full.txt") 2>&1

gpu_state() { # label: memory in use, utilization, compute processes
	echo "gpu $1: $(nvidia-smi --query-gpu=memory.used,utilization.gpu,utilization.memory,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader 2>&1 | head -1)" \
		| tee -a "$W/gpu-state.txt"
	nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader >>"$W/gpu-state.txt" 2>&1
}
gpu_state start
nvidia-smi >"$W/nvidia-smi.txt" 2>&1
nvidia-smi -q >"$W/nvidia-smi-q.txt" 2>&1

note "build"
make -j"$(nproc)" >"$W/build.log" 2>&1 || { tail -20 "$W/build.log"; exit 1; }
if has det; then
	bash bench/gpu/run_gpu.sh build "$W/det" >"$W/det-build.txt" 2>&1 || { tail -20 "$W/det-build.txt"; exit 1; }
fi
if has graphs || has suite; then
	[ -x build/gpu/gpu_graph ] || JOBS=$(nproc) bash tests/gpu/build.sh build/gpu >"$W/gpu-build.txt" 2>&1 ||
		{ tail -20 "$W/gpu-build.txt"; exit 1; }
fi

if has det; then
	note "determinism: CUDA C suite (native, tput, chaos)"
	bash bench/gpu/run_gpu.sh suite "$W/det" >"$W/det-suite.txt" 2>&1
	tail -3 "$W/det-suite.txt"
	note "determinism: PyTorch (native, chaos, tput)"
	REPS=${REPS:-10} bash bench/gpu/run_gpu.sh torch "$W/det" >"$W/det-torch.txt" 2>&1
	tail -8 "$W/det-torch.txt"
fi
if has suite; then
	note "backend check and the graph programs natively (logs)"
	timeout 120 build/gpu_backend_check >"$W/backend.txt" 2>&1
	echo "backend_check_rc=$?" >>"$W/backend.txt"
	grep -E "FAIL|fail" "$W/backend.txt" | head -5
	GPU_BIN=build/gpu VE_BUILD=build MODES=native GPU_PROGS="${SUITE_PROGS:-gpu_graph_child gpu_graph_smid}" \
		timeout 200 tests/gpu/run.sh "$W/suite-native" >"$W/suite-native.txt" 2>&1
	tail -4 "$W/suite-native.txt"
	gpu_state after-suite
fi

host_run() { # label env... : the hostphase job alone, 3 windows of 2 s
	local label=$1; shift
	local cmd=(python3 bench/gpu/jobs/train.py hostphase --windows 3 --window-s 2 ${REPS_ARG:-})
	if [ "$label" = native ]; then
		timeout 90 "${cmd[@]}" >"$W/host-$label.json" 2>"$W/host-$label.err"
	else
		timeout 90 env "$@" build/ve-run -- "${cmd[@]}" >"$W/host-$label.json" 2>"$W/host-$label.err"
	fi
	python3 - "$label" "$W/host-$label.json" <<'EOF' | tee -a "$W/host.txt"
import json, sys
label, path = sys.argv[1], sys.argv[2]
try:
    d = json.loads(open(path).read().strip().splitlines()[-1])
except Exception as e:
    print(f"{label:20s} no result ({e!r})"); sys.exit(0)
w = [x["sps"] for x in d.get("windows", [])]
print(f"{label:20s} steps/s {d.get('steps_per_s')} windows {w} cpu_reps {d.get('cpu_reps')} "
      f"digest {str(d.get('digest'))[:12]} ok {d.get('ok')}")
EOF
}

if has host; then
	note "host-phase job alone: native and ve-run variants"
	host_run calibrate
	REPS_ARG="--cpu-reps $(python3 -c "import json;print(json.loads(open('$W/host-calibrate.json').read().strip().splitlines()[-1]).get('cpu_reps') or 1)" 2>/dev/null || echo 1)"
	: >"$W/host.txt"
	host_run native
	host_run tput VE_POLICY=tput
	host_run tput_alone0 VE_POLICY=tput:alone=0
	host_run whole VE_POLICY=whole
	host_run native2
	cp "$W/host.txt" "$OUTDIR/host.txt"
	gpu_state after-host
fi

if has serve; then
	note "serving beside dense training: $MODES"
	timeout ${SERVE_TIMEOUT:-330} python3 bench/gpu/mixed --runs ${SERVE_RUNS:-1} --duration ${SERVE_S:-6} \
		--modes "$MODES" --split-sweep 50/50 --tpot-args ${TPOT_ARGS:-reserve=16,standing=0 reserve=16,standing=0,batch_min=116} \
		--best-by train_within_10pct --budget-s ${SERVE_BUDGET:-320} --stop-after-s $(( ${SERVE_BUDGET:-320} - 20 )) \
		--outdir "$W/mixed" --out "$OUTDIR/mixed-pass.json" --no-plot ${SERVE_ARGS:-} >"$W/mixed.txt" 2>&1
	tail -12 "$W/mixed.txt"
	grep -h "grants:" "$W"/mixed/logs/*ved.log 2>/dev/null
	gpu_state after-serve
fi

if has graphs; then
	note "CUDA graphs: programs, PyTorch workloads, decode replay alone and paired"
	timeout ${GRAPHS_TIMEOUT:-380} python3 bench/gpu/graphs/run --budget-s ${GRAPHS_BUDGET:-340} \
		--out "$W/graphs" --json "$OUTDIR/graphs.json" ${GRAPHS_ARGS:-} >"$W/graphs.txt" 2>&1
	tail -12 "$W/graphs.txt"
	gpu_state after-graphs
fi
if has decpair; then
	note "decode replay of CUDA graphs: alone, then two servers under MPS and through ved"
	timeout $(( ${DECPAIR_BUDGET:-270} + 30 )) python3 bench/gpu/graphs/run --programs "" --torch "" --skip-backend-check \
		--pair-rounds ${DECPAIR_ROUNDS:-3} --budget-s ${DECPAIR_BUDGET:-270} --out "$W/decpair" \
		--json "$OUTDIR/graphs-decode.json" >"$W/decpair.txt" 2>&1
	tail -12 "$W/decpair.txt"
	grep -h "grants:" "$W"/decpair/logs/*ved*.log 2>/dev/null | head -6
	gpu_state after-decpair
fi
if has coloc; then
	note "colocated training: pairs ${COLOC_PAIRS:-b,d}, modes ${COLOC_MODES:-mps,ve_tput}"
	timeout $(( ${COLOC_BUDGET:-300} + 40 )) python3 bench/gpu/coloc --pairs ${COLOC_PAIRS:-b,d} \
		--modes ${COLOC_MODES:-mps,ve_tput} --runs ${COLOC_RUNS:-3} --windows 2 --window-s 1.5 --lead-s 4 \
		--stop-after-s $(( ${COLOC_BUDGET:-300} - 15 )) --budget-s ${COLOC_BUDGET:-300} \
		--outdir "$W/coloc" --out "$OUTDIR/coloc-pass.json" --no-plot ${COLOC_ARGS:-} >"$W/coloc.txt" 2>&1
	tail -20 "$W/coloc.txt"
	grep -h "grants:" "$W"/coloc/logs/*ved.log 2>/dev/null | head -20
	gpu_state after-coloc
fi
if has preload; then
	# Lazy loading's cost on the dispatcher thread: the dense training job
	# alone under ve-run with the shim's preload off, then on; the exit lines
	# say how many kernels the shim loaded and how many driver submissions
	# held the dispatcher 1 ms or more.
	note "kernel loading: dense training alone under ve-run, VE_PRELOAD=0 then 1"
	for p in 0 1; do
		VE_PRELOAD=$p VE_LOG_LEVEL=info timeout 120 build/ve-run --policy tput -- \
			python3 bench/gpu/jobs/train.py dense --windows 1 --window-s 1.5 \
			>"$W/preload-$p.out" 2>"$W/preload-$p.err"
		echo "VE_PRELOAD=$p rc=$?: $(grep -ho 'kernels loaded on the launching.*' "$W/preload-$p.err" || echo 'no slow submissions, nothing preloaded')" |
			tee -a "$W/preload.txt"
	done
fi
if has infer; then
	note "eager inference latency: native and ve-run (tput), alternating"
	: >"$W/infer.jsonl"
	# INFER_MODES: native, tput, or NAME=VE_X=v[,VE_Y=w] (ve-run tput with
	# those settings), e.g. "native tput tput_spin0=VE_IDLE_SPIN_US=0".
	for r in $(seq "${INFER_ROUNDS:-3}"); do
		for m in ${INFER_MODES:-native tput}; do
			name=${m%%=*}
			if [ "$m" = native ]; then
				timeout 120 python3 bench/gpu/torch_infer_latency.py native >>"$W/infer.jsonl" 2>>"$W/infer.err"
			else
				envs=""
				[ "$name" != "$m" ] && envs=$(echo "${m#*=}" | tr ',' ' ')
				timeout 120 env $envs build/ve-run --policy tput -- python3 bench/gpu/torch_infer_latency.py "$name" \
					>>"$W/infer.jsonl" 2>>"$W/infer.err"
			fi
		done
	done
	python3 - "$W/infer.jsonl" "$OUTDIR/infer.json" <<'EOF' | tee "$W/infer.txt"
import json, statistics, sys, time
runs = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
out = {"date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "what": "bench/gpu/torch_infer_latency.py, "
       "native and ve-run --policy tput alternating, one process each", "runs": runs, "median": {}}
for m in dict.fromkeys(r.get("mode") for r in runs):
    rs = [r for r in runs if r.get("mode") == m]
    if rs:
        out["median"][m] = {k: statistics.median(r[k] for r in rs) for k in ("p50_us", "p95_us", "p99_us")}
        out["median"][m]["n"] = len(rs)
        if all("slow_frac" in r for r in rs):
            out["median"][m]["slow_frac"] = statistics.median(r["slow_frac"] for r in rs)
json.dump(out, open(sys.argv[2], "w"), indent=1)
for m, v in out["median"].items():
    print(f"infer {m:12s} median of {v['n']}: p50 {v['p50_us']:.1f} p95 {v['p95_us']:.1f} p99 {v['p99_us']:.1f} us"
          + (f", slow passes {v['slow_frac']:.1%}" if "slow_frac" in v else ""))
EOF
fi
if has decode; then
	note "greedy decode: native, reshape, ve_chaos, mps_split, ve_tput"
	timeout ${DECODE_TIMEOUT:-330} bash bench/gpu/decode --tokens 64 --budget-s ${DECODE_BUDGET:-300} \
		--out "$W/decode" --json "$OUTDIR/decode.json" >"$W/decode.txt" 2>&1
	tail -8 "$W/decode.txt"
	gpu_state after-decode
fi

note "summary"
{
	cat "$W/gpu-state.txt"
	[ -f "$W/det-suite.txt" ] && grep -E "FAIL|passed" "$W/det-suite.txt" | tail -4
	[ -f "$W/det-torch.txt" ] && python3 bench/gpu/summarize.py "$W/det" 2>/dev/null | grep -A4 "^determinism"
	[ -f "$W/host.txt" ] && cat "$W/host.txt"
	[ -f "$W/mixed.txt" ] && grep -A9 "^mode " "$W/mixed.txt"
	[ -f "$W/graphs.txt" ] && tail -6 "$W/graphs.txt"
	[ -f "$W/decpair.txt" ] && grep -E "decode (alone|pair)|pair_ve_vs_mps" "$W/decpair.txt"
	[ -f "$W/coloc.txt" ] && tail -14 "$W/coloc.txt"
	[ -f "$W/infer.txt" ] && cat "$W/infer.txt"
	[ -f "$W/preload.txt" ] && cat "$W/preload.txt"
	[ -f "$W/decode.txt" ] && grep -A7 "^mode " "$W/decode.txt"
} | tee "$OUTDIR/pass.txt"
exit 0
