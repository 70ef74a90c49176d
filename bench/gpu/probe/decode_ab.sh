#!/usr/bin/env bash
# A/B of two builds of libve.so on the decode replay alone
# (bench/gpu/graphs/decode_replay.py --parts), natively and under ve-run
# with each library (VE_LIB), alternating, ROUNDS rounds of SECS s.
# The "old" library is this tree with PATCH (a diff of src/) reversed.
#   PATCH=path/to/x.patch bench/gpu/probe/decode_ab.sh OUTDIR
set -u
OUT=${1:-/tmp/decode-ab}; mkdir -p "$OUT"
ROUNDS=${ROUNDS:-3}; SECS=${SECS:-4}
. "$(dirname "$0")/old_lib.sh"
DEC="bench/gpu/graphs/decode_replay.py --layers 4 --batch 8 --parts --seconds"
run() { # name lib
	local name=$1 lib=${2:-}
	local f="$OUT/$name.$r.log"
	if [ -z "$lib" ]; then
		timeout 90 python3 $DEC "$SECS" >"$f" 2>&1
	else
		VE_LIB=$lib VE_LOG_LEVEL=debug timeout 90 build/ve-run --policy tput -- python3 $DEC "$SECS" >"$f" 2>&1
	fi
	echo "$name $r $(grep '^{' "$f" | tail -1 | python3 -c 'import json,sys
try:
    d=json.loads(sys.stdin.read()); print(d["steps_per_s"], d.get("launch_call_us_p50"), d.get("read_back_us_p50"))
except Exception: print("FAIL")')" | tee -a "$OUT/runs.txt"
}
for r in $(seq "$ROUNDS"); do
	run native
	run ve_old "$OLD/build/libve.so"
	run ve_new "$PWD/build/libve.so"
done
echo "== medians: steps/s launch_call_us read_back_us"
for m in native ve_old ve_new; do
	awk -v m="$m" '$1 == m && $3 != "FAIL"' "$OUT/runs.txt" | sort -k3 -g |
		awk -v m="$m" '{a[NR]=$0} END{split(a[int((NR+1)/2)], f, " "); print m, f[3], f[4], f[5]}'
done
grep -h "slept" "$OUT"/ve_*.1.log
