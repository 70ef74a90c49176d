#!/usr/bin/env bash
# Builds the CUDA test programs tests/gpu/gpu_*.cu (they need a GPU to run;
# see tests/gpu/run.sh). Not part of the Makefile.
#
#   tests/gpu/build.sh [OUTDIR]        default OUTDIR: <repo>/build/gpu
#
# Environment:
#   NVCC      nvcc to use (default: nvcc on PATH, else /usr/local/cuda/bin/nvcc)
#   GPU_ARCH  -arch value (default sm_90: H100/H200)
#   CUDART    static (default, nvcc's default) or shared: how libcudart is linked
#   WERROR    1: treat every warning as an error (the sources are warning-clean)
#   JOBS      parallel compiles (default 2)
# gpu_cublas is optional: if it does not link (no cuBLAS), it is skipped with
# a message and the build still succeeds. Exit status: 0 when every other
# program built.
set -u
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
out=${1:-$repo/build/gpu}
mkdir -p "$out" || exit 1
out=$(cd "$out" && pwd)

NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
if [ ! -x "$NVCC" ] && ! command -v "$NVCC" >/dev/null 2>&1; then
	echo "build.sh: nvcc not found (set NVCC)" >&2
	exit 1
fi
cudadir=$(cd "$(dirname "$(command -v "$NVCC" || echo "$NVCC")")/.." && pwd)
arch=${GPU_ARCH:-sm_90}
jobs=${JOBS:-2}
# shellcheck disable=SC2054 # the commas belong to -Xcompiler
flags=(-arch="$arch" -O2 -std=c++17 -lineinfo -cudart "${CUDART:-static}"
	-Xcompiler -Wall,-Wextra,-pthread)
if [ "${WERROR:-0}" = 1 ]; then
	flags+=(-Werror all-warnings)
fi

extra_flags() {
	case "$1" in
	gpu_streams_ptds) echo "--default-stream per-thread" ;;
	gpu_cublas) echo "-lcublas -Xlinker -rpath=$cudadir/lib64" ;;
	gpu_graph_device) echo "-rdc=true -lcudadevrt" ;;
	gpu_graph_smid) echo "-rdc=true -lcudadevrt -L$cudadir/lib64/stubs -lcuda" ;;
	gpu_graph_ctx) echo "-L$cudadir/lib64/stubs -lcuda" ;;
	*) echo "" ;;
	esac
}

build_one() {
	local src=$1 name
	name=$(basename "$src" .cu)
	# shellcheck disable=SC2046
	if "$NVCC" "${flags[@]}" $(extra_flags "$name") "$src" -o "$out/$name" \
		>"$out/$name.build.log" 2>&1; then
		if [ -s "$out/$name.build.log" ]; then
			echo "built $name (with output, see $out/$name.build.log)"
		else
			echo "built $name"
		fi
		rm -f "$out/$name.build.log"
		return 0
	fi
	if [ "$name" = gpu_cublas ]; then
		echo "skipped $name: did not build (cuBLAS missing?), see $out/$name.build.log"
		rm -f "$out/$name"
		return 0
	fi
	echo "FAILED $name:"
	cat "$out/$name.build.log"
	return 1
}

fail=0
pids=()
for src in "$here"/gpu_*.cu; do
	build_one "$src" &
	pids+=($!)
	if [ "${#pids[@]}" -ge "$jobs" ]; then
		wait "${pids[0]}" || fail=1
		pids=("${pids[@]:1}")
	fi
done
for p in "${pids[@]}"; do
	wait "$p" || fail=1
done
if [ $fail -ne 0 ]; then
	echo "build.sh: some programs failed to build" >&2
	exit 1
fi
echo "binaries in $out"
