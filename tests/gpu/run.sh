#!/usr/bin/env bash
# Runs every tests/gpu program natively and under Vitamin-E, then prints a
# table program x mode -> PASS/FAIL and checks that each program's DIGEST
# lines are identical in every mode (the resource-control contract: results
# must not depend on which SMs a launch got).
#
#   tests/gpu/run.sh [OUTDIR]          default OUTDIR: $OUT, else <repo>/build/gpu/results
#
# Environment:
#   GPU_BIN      directory of the binaries from build.sh (default <repo>/build/gpu)
#   VE_BUILD     Vitamin-E build directory holding ve-run (default <repo>/build)
#   MODES        modes to run (default "native tput chaos"); any other word is
#                passed to ve-run as a policy (whole, fixed, tpot, tput:knob=...)
#   GPU_TIMEOUT  seconds per program run (default 60)
#   GPU_PROGS    programs to run (default: every gpu_* binary in GPU_BIN)
#   VE_RUN_ARGS  extra ve-run options, e.g. "--trace t.json"
# Under Vitamin-E, VE_GPU_STRICT_PAGEABLE=1 is set: gpu_copies then fails
# (instead of noting) if cudaMemcpyAsync from pageable memory did not take the
# bytes present at the call, which Vitamin-E's design promises and CUDA does not.
#
# Per run, OUTDIR gets <prog>.<mode>.log (stdout+stderr), .rc and .digest.
# Cell values: PASS, FAIL (exit status or a FAIL line), TIMEOUT, SKIP (exit 77:
# no GPU), NOLIB (a shared library is missing; counted as skipped), NOVE (ve-run
# missing). The last line is "N passed, N failed"; the exit status is 0 only
# when nothing failed.
set -u
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
outdir=${1:-${OUT:-$repo/build/gpu/results}}
bindir=${GPU_BIN:-$repo/build/gpu}
vebuild=${VE_BUILD:-$repo/build}
verun=$vebuild/ve-run
modes=${MODES:-native tput chaos}
tmo=${GPU_TIMEOUT:-60}
mkdir -p "$outdir" || exit 2

if [ -n "${GPU_PROGS:-}" ]; then
	progs=$GPU_PROGS
else
	progs=""
	for f in "$bindir"/gpu_*; do
		if [ ! -f "$f" ] || [ ! -x "$f" ]; then
			continue
		fi
		progs="$progs $(basename "$f")"
	done
fi
if [ -z "$progs" ]; then
	echo "run.sh: no gpu_* programs in $bindir (run tests/gpu/build.sh first)" >&2
	exit 2
fi

passed=0 failed=0 skipped=0
declare -A cell

for p in $progs; do
	for m in $modes; do
		log=$outdir/$p.$m.log
		if [ "$m" = native ]; then
			cmd=("$bindir/$p")
			envs=()
		else
			if [ ! -x "$verun" ]; then
				cell[$p,$m]=NOVE
				echo "ve-run not found at $verun" >"$log"
				failed=$((failed + 1))
				continue
			fi
			# shellcheck disable=SC2206
			cmd=("$verun" --policy "$m" ${VE_RUN_ARGS:-} -- "$bindir/$p")
			envs=(VE_GPU_STRICT_PAGEABLE=1)
		fi
		start=$(date +%s.%N)
		env ${envs[@]+"${envs[@]}"} timeout -k 5 "$tmo" "${cmd[@]}" >"$log" 2>&1
		rc=$?
		secs=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
		echo "$rc" >"$outdir/$p.$m.rc"
		grep -a '^DIGEST ' "$log" | sort >"$outdir/$p.$m.digest"
		nfail=$(grep -ac '^FAIL ' "$log")
		if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
			st=TIMEOUT
			echo "  (killed after ${tmo}s)" >>"$log"
		elif [ $rc -eq 77 ]; then
			st=SKIP
		elif [ $rc -eq 127 ] && grep -aq 'error while loading shared libraries' "$log"; then
			st=NOLIB
		elif [ $rc -eq 0 ] && [ "$nfail" -eq 0 ] && grep -aq '^SUMMARY ' "$log"; then
			st=PASS
		else
			st=FAIL
		fi
		cell[$p,$m]=$st
		case $st in
		PASS) passed=$((passed + 1)) ;;
		SKIP | NOLIB) skipped=$((skipped + 1)) ;;
		*) failed=$((failed + 1)) ;;
		esac
		printf '%-18s %-8s %-8s rc=%-3s %6ss\n' "$p" "$m" "$st" "$rc" "$secs"
	done

	# Digests: every mode that printed one must agree with the first such
	# mode (native when it ran).
	ref="" refmode="" d=same
	for m in $modes; do
		f=$outdir/$p.$m.digest
		[ -s "$f" ] || continue
		if [ -z "$ref" ]; then
			ref=$f refmode=$m
		elif ! cmp -s "$ref" "$f"; then
			d=DIFF
			echo "DIGEST MISMATCH $p: $refmode: $(tr '\n' ' ' <"$ref")/ $m: $(tr '\n' ' ' <"$f")"
		fi
	done
	[ -z "$ref" ] && d=-
	cell[$p,digest]=$d
	if [ "$d" = DIFF ]; then
		failed=$((failed + 1))
	fi
done

echo
echo "== failures =="
for p in $progs; do
	for m in $modes; do
		case "${cell[$p,$m]}" in
		PASS | SKIP) ;;
		*)
			echo "-- $p ($m): ${cell[$p,$m]}, log $outdir/$p.$m.log"
			grep -a -m 8 '^FAIL ' "$outdir/$p.$m.log" | sed 's/^/   /'
			tail -n 3 "$outdir/$p.$m.log" | sed 's/^/   | /'
			;;
		esac
	done
done

echo
echo "== reports =="
for p in $progs; do
	for m in $modes; do
		[ -f "$outdir/$p.$m.log" ] || continue
		grep -a -E '^(REPORT|NOTE) ' "$outdir/$p.$m.log" | sed "s/^/[$m] /"
	done
done

echo
echo "== results =="
printf '%-18s' program
for m in $modes; do printf ' %-8s' "$m"; done
printf ' %-6s\n' digest
for p in $progs; do
	printf '%-18s' "$p"
	for m in $modes; do printf ' %-8s' "${cell[$p,$m]}"; done
	printf ' %-6s\n' "${cell[$p,digest]}"
done
echo "$skipped skipped (no GPU or missing library)"
echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
