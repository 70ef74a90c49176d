#!/usr/bin/env bash
# The single-file driver-API benchmarks that run only on a GPU machine
# (bench/gpu/launch_overhead.c, bench/gpu/probe/step_parts.c and
# bench/gpu/probe/graph_copy.c, with their shared bench/gpu/cu_bench.h)
# compile here, warnings as errors, against the CUDA toolkit's headers: a
# change to one is caught before a GPU session spends its time on a build
# error. Skipped without cuda.h.
#   tests/bench_build.sh [ROOT]
# Output follows the test harness ("ok NAME", "FAIL NAME", "# summary: ...").
set -u
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cc=${CC:-cc}
inc=${CUDA_HOME:-/usr/local/cuda}/include
P=0 F=0 S=0
for src in bench/gpu/launch_overhead.c bench/gpu/probe/step_parts.c bench/gpu/probe/graph_copy.c; do
	n=$(basename "$src" .c)
	if [ ! -f "$inc/cuda.h" ]; then
		echo "skip ${n}_compiles (no $inc/cuda.h)"
		S=$((S + 1))
		continue
	fi
	out=$("$cc" -std=c11 -O2 -Wall -Wextra -Werror -fsyntax-only -I"$inc" "$root/$src" 2>&1)
	if [ $? -eq 0 ]; then
		echo "ok   ${n}_compiles"
		P=$((P + 1))
	else
		echo "FAIL ${n}_compiles"
		echo "$out"
		F=$((F + 1))
	fi
done
echo "# summary: $P passed, $F failed, $S skipped"
[ "$F" -eq 0 ]
