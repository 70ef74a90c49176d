#!/bin/sh
# Every CUDA driver function of the installed cuda.h that takes a stream or a
# graph is classified in src/shim/cuda_api.classes, the hooked ones are
# exported by libve.so, and docs/cuda-api.md is up to date
# (tools/cuda_api_table.py). Skips without python3 or cuda.h.
#   tests/cuda_api.sh [REPO] [BUILD_DIR]
repo=${1:-$(dirname "$0")/..}
build=${2:-$repo/build}
inc=${CUDA_HOME:-/usr/local/cuda}/include
if ! command -v python3 >/dev/null 2>&1 || [ ! -f "$inc/cuda.h" ]; then
	echo "skip: needs python3 and $inc/cuda.h"
	exit 77
fi
lib=""
[ -f "$build/libve.so" ] && lib="--libve $build/libve.so"
if python3 "$repo/tools/cuda_api_table.py" --cuda-include "$inc" $lib --check; then
	echo "# summary: 1 passed, 0 failed, 0 skipped"
else
	echo "# summary: 0 passed, 1 failed, 0 skipped"
	exit 1
fi
