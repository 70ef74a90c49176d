#!/usr/bin/env bash
# Where the decode step's time goes, part by part: the CUDA-graph decode
# replay alone (bench/gpu/graphs/decode_replay.py --stamps), natively and
# under ve-run, alternating, ROUNDS rounds of SECS s; then one ve-run with
# VE_TRACE, whose op timeline step_split.py lines up with the step stamps
# (pre / hop / first / rest / wake / loop: see step_split.py). Prints steps/s
# per run, then each split. VARIANTS ("name=VAR=value ...", space-separated)
# adds ve-run variants to each round (one setting each). READ=tolist reads
# every slot's result into pageable memory instead of one .item(); NOTRACE=1
# skips the traced run.
#   bench/gpu/probe/decode_split.sh OUTDIR
set -u
OUT=${1:-/tmp/decode-split}; mkdir -p "$OUT"
ROUNDS=${ROUNDS:-3}; SECS=${SECS:-4}
HERE=$(dirname "$0")
TMP=$(mktemp -d)
make -j"$(nproc)" >"$OUT/build.log" 2>&1 || { tail -5 "$OUT/build.log"; exit 1; }
DEC="bench/gpu/graphs/decode_replay.py --layers 4 --batch 8 --read ${READ:-item} --seconds"
run() { # name [env...]: stamps in $TMP/name.r.json
	local name=$1; shift
	local f="$TMP/$name.$r.log" st="$TMP/$name.$r.json"
	if [ "$name" = native ]; then
		timeout 90 python3 $DEC "$SECS" --stamps "$st" >"$f" 2>&1
	else
		env VE_LOG_LEVEL=debug "$@" timeout 120 build/ve-run --policy tput -- \
			python3 $DEC "$SECS" --stamps "$st" >"$f" 2>&1
	fi
	echo "$name $r $(grep '^{' "$f" | tail -1 | python3 -c 'import json,sys
try: print(json.loads(sys.stdin.read())["steps_per_s"])
except Exception: print("FAIL")')" | tee -a "$OUT/runs.txt"
}
for r in $(seq "$ROUNDS"); do
	run native
	run ve
	for v in ${VARIANTS:-}; do run "${v%%=*}" "${v#*=}"; done
done
r=trace
[ -z "${NOTRACE:-}" ] && run ve_trace VE_TRACE="$TMP/trace.json"
cp "$TMP"/ve.1.log "$OUT/ve.1.log"; [ -z "${NOTRACE:-}" ] && cp "$TMP"/ve_trace.trace.log "$OUT/ve_trace.log"
{
	echo "== native (round $ROUNDS)"; python3 "$HERE/step_split.py" "$TMP/native.$ROUNDS.json"
	echo "== ve-run (round $ROUNDS)"; python3 "$HERE/step_split.py" "$TMP/ve.$ROUNDS.json"
	for v in ${VARIANTS:-}; do echo "== ${v%%=*} (round $ROUNDS)"; python3 "$HERE/step_split.py" "$TMP/${v%%=*}.$ROUNDS.json"; done
	[ -z "${NOTRACE:-}" ] && { echo "== ve-run with VE_TRACE"; python3 "$HERE/step_split.py" "$TMP/ve_trace.trace.json" "$TMP/trace.json"; }
} >"$OUT/split.txt" 2>&1
echo "== medians: steps/s"
for m in native ve ${VARIANTS:+$(for v in $VARIANTS; do echo "${v%%=*}"; done)}; do
	awk -v m="$m" '$1 == m && $3 != "FAIL"' "$OUT/runs.txt" | sort -k3 -g |
		awk -v m="$m" '{a[NR]=$0} END{split(a[int((NR+1)/2)], f, " "); print m, f[3]}'
done
grep -v '^{' "$OUT/split.txt"
rm -rf "$TMP"
