#!/usr/bin/env bash
# Vitamin-E on a real GPU: build, correctness, determinism and overhead, in
# parts that fit one device-machine call each. Run from the repository root.
#   bench/gpu/run_gpu.sh build|suite|torch|overhead|all [OUTDIR]
# Logs and JSON go to OUTDIR (default $OUT or /tmp/ve-gpu); the last lines
# printed are a short table. Never changes GPU settings.
set -u
PART=${1:-all}
OUTDIR=${2:-${OUT:-/tmp/ve-gpu}}
mkdir -p "$OUTDIR/logs"
B=build
VERUN="$PWD/$B/ve-run"
export CUBLAS_WORKSPACE_CONFIG=:4096:8
note() { echo "[$(date +%H:%M:%S)] $*"; }

run_mode() { # mode cmd... : runs cmd natively or under ve-run with that policy
	local mode=$1; shift
	case $mode in
	native) "$@" ;;
	chaos) VE_WINDOW=0 "$VERUN" --policy chaos -- "$@" ;;
	*) "$VERUN" --policy "$mode" -- "$@" ;;
	esac
}

part_build() {
	note "machine: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -1)"
	nvidia-smi > "$OUTDIR/logs/nvidia-smi.txt" 2>&1
	note "build"
	make -j"$(nproc)" $B/libve.so $B/ve-run $B/ve-sim > "$OUTDIR/logs/build.log" 2>&1 || { tail -30 "$OUTDIR/logs/build.log"; return 1; }
	gcc -O2 -std=c11 -I/usr/local/cuda/include bench/gpu/launch_overhead.c \
		-L/usr/local/cuda/lib64/stubs -lcuda -o $B/launch_overhead >> "$OUTDIR/logs/build.log" 2>&1
	gcc -std=c11 -O2 -D_GNU_SOURCE -Iinclude -Isrc -I/usr/local/cuda/include \
		tests/gpu/gpu_backend_check.c src/backend/cuda.c src/backend/cuda_driver.c src/backend/cuda_driver_ptsz.c \
		src/pool/pool.c src/util/log.c -o $B/gpu_backend_check -pthread -ldl -lm -lrt \
		>> "$OUTDIR/logs/build.log" 2>&1
	if [ -x tests/gpu/build.sh ]; then
		JOBS=$(nproc) tests/gpu/build.sh $B/gpu >> "$OUTDIR/logs/build.log" 2>&1 || note "tests/gpu build failed (see build.log)"
	fi
	note "build done"
}

part_suite() {
	note "backend check (pool, confinement by %smid)"
	timeout 120 $B/gpu_backend_check > "$OUTDIR/logs/backend.txt" 2>&1
	echo "backend_check_rc=$?" >> "$OUTDIR/logs/backend.txt"
	tail -5 "$OUTDIR/logs/backend.txt"
	if [ -x tests/gpu/run.sh ]; then
		note "CUDA C suite: native, tput, chaos"
		GPU_BIN=$B/gpu VE_BUILD=$B timeout 400 tests/gpu/run.sh "$OUTDIR/logs/suite" > "$OUTDIR/logs/suite.txt" 2>&1
		tail -25 "$OUTDIR/logs/suite.txt"
	fi
}

part_torch() {
	for mode in native chaos tput; do
		note "torch determinism: $mode"
		REPS=${REPS:-20} timeout ${TORCH_TIMEOUT:-150} bash -c "$(declare -f run_mode); VERUN=$VERUN; run_mode $mode python3 bench/gpu/torch_determinism.py $mode" \
			> "$OUTDIR/det-$mode.json" 2> "$OUTDIR/logs/det-$mode.err"
		echo "rc=$?" >> "$OUTDIR/logs/det-$mode.err"
		tail -3 "$OUTDIR/logs/det-$mode.err"
	done
}

part_overhead() {
	for mode in native whole tput; do
		note "launch overhead: $mode"
		timeout 120 bash -c "$(declare -f run_mode); VERUN=$VERUN; run_mode $mode $B/launch_overhead $mode" \
			> "$OUTDIR/launch-$mode.json" 2> "$OUTDIR/logs/launch-$mode.err"
		cat "$OUTDIR/launch-$mode.json"
	done
	for mode in native whole tput; do
		note "eager inference latency: $mode"
		timeout 200 bash -c "$(declare -f run_mode); VERUN=$VERUN; run_mode $mode python3 bench/gpu/torch_infer_latency.py $mode" \
			> "$OUTDIR/infer-$mode.json" 2> "$OUTDIR/logs/infer-$mode.err"
		cat "$OUTDIR/infer-$mode.json"
	done
}

case $PART in
build) part_build ;;
suite) part_suite ;;
torch) part_torch ;;
overhead) part_overhead ;;
all) part_build && part_suite && part_torch && part_overhead ;;
*) echo "usage: $0 build|suite|torch|overhead|all [OUTDIR]"; exit 2 ;;
esac
python3 bench/gpu/summarize.py "$OUTDIR" || true
(cd "$OUTDIR" && tar czf logs.tar.gz logs) 2>/dev/null
