#!/usr/bin/env bash
# Does it matter which CPUs the application thread and ve-run's dispatcher
# thread share? The CUDA-graph decode replay alone, natively on one CPU and
# under ve-run on two: two hyperthreads of one core (the dispatcher's spin
# then slows the application's own work) or two cores, alternating, ROUNDS
# rounds of SECS s. Prints the topology, steps/s per run and the medians.
#   bench/gpu/probe/decode_cpus.sh OUTDIR
set -u
OUT=${1:-/tmp/decode-cpus}; mkdir -p "$OUT"
ROUNDS=${ROUNDS:-2}; SECS=${SECS:-4}
make -j"$(nproc)" >"$OUT/build.log" 2>&1 || { tail -5 "$OUT/build.log"; exit 1; }
lscpu -p=CPU,CORE,SOCKET,NODE | grep -v '^#' >"$OUT/topology.txt"
A=${CPU_A:-2}
core_of() { awk -F, -v c="$1" '$1 == c {print $2}' "$OUT/topology.txt"; }
CA=$(core_of "$A")
SIB=$(awk -F, -v c="$A" -v k="$CA" '$2 == k && $1 != c {print $1; exit}' "$OUT/topology.txt")
OTHER=$(awk -F, -v k="$CA" '$2 != k {print $1}' "$OUT/topology.txt" | sed -n 3p)
echo "cpu $A (core $CA); its sibling: ${SIB:-none}; another core's cpu: $OTHER" | tee "$OUT/cpus.txt"
DEC="bench/gpu/graphs/decode_replay.py --layers 4 --batch 8 --seconds $SECS"
run() { # name cpus [ve]
	local f="$OUT/$1.$r.log"
	if [ "${3:-}" = ve ]; then
		taskset -c "$2" timeout 120 build/ve-run --policy tput -- python3 $DEC >"$f" 2>&1
	else
		taskset -c "$2" timeout 90 python3 $DEC >"$f" 2>&1
	fi
	echo "$1 $r $(grep '^{' "$f" | tail -1 | python3 -c 'import json,sys
try: print(json.loads(sys.stdin.read())["steps_per_s"])
except Exception: print("FAIL")')" | tee -a "$OUT/runs.txt"
}
for r in $(seq "$ROUNDS"); do
	run native_1cpu "$A"
	run native_2cores "$A,$OTHER"
	[ -n "$SIB" ] && run ve_siblings "$A,$SIB" ve
	run ve_2cores "$A,$OTHER" ve
	run ve_all "0-$(($(nproc) - 1))" ve
done
echo "== medians: steps/s"
for m in native_1cpu native_2cores ve_siblings ve_2cores ve_all; do
	awk -v m="$m" '$1 == m && $3 != "FAIL"' "$OUT/runs.txt" | sort -k3 -g |
		awk -v m="$m" '{a[NR]=$0} END{if (NR) {split(a[int((NR+1)/2)], f, " "); print m, f[3]}}'
done
