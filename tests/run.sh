#!/usr/bin/env bash
# Runs each test binary in its own process and sums their "# summary:" lines.
#   tests/run.sh [--label L] [--timeout S] [--totals FILE] BIN...
# A binary that crashes, hangs past the timeout or exits non-zero without a
# summary counts as one failure. Exit 77 with no summary counts as one skip.
# Logs go next to the binaries (<bin>.log). The last line is always
#   N passed, N failed, N skipped
set -u
label="" timeout_s="${VE_TEST_TIMEOUT:-900}" totals=""
while [ $# -gt 0 ]; do
	case "$1" in
	--label) label="$2 "; shift 2 ;;
	--timeout) timeout_s="$2"; shift 2 ;;
	--totals) totals="$2"; shift 2 ;;
	*) break ;;
	esac
done
P=0 F=0 S=0
for bin in "$@"; do
	name=$(basename "$bin")
	log="$bin.log"
	start=$(date +%s.%N)
	timeout -k 10 "$timeout_s" "$bin" >"$log" 2>&1
	rc=$?
	secs=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')
	line=$(grep -a '^# summary:' "$log" | tail -n 1)
	if [ -n "$line" ]; then
		p=$(echo "$line" | sed -E 's/.* ([0-9]+) passed.*/\1/')
		f=$(echo "$line" | sed -E 's/.* ([0-9]+) failed.*/\1/')
		s=$(echo "$line" | sed -E 's/.* ([0-9]+) skipped.*/\1/')
	elif [ $rc -eq 77 ]; then
		p=0 f=0 s=1
	else
		p=0 f=1 s=0
	fi
	# A binary that printed a summary but then crashed (e.g. a sanitizer report at exit) fails.
	if [ $rc -ne 0 ] && [ $rc -ne 77 ] && [ "$f" -eq 0 ]; then f=1; fi
	if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then echo "  (timed out after ${timeout_s}s)" >>"$log"; fi
	P=$((P + p)) F=$((F + f)) S=$((S + s))
	status=ok
	[ "$f" -gt 0 ] && status=FAIL
	[ "$f" -eq 0 ] && [ "$p" -eq 0 ] && [ "$s" -gt 0 ] && status=skip
	printf '%s%-4s %-28s %3d passed %2d failed %2d skipped  %6ss\n' "$label" "$status" "$name" "$p" "$f" "$s" "$secs"
	if [ "$status" = FAIL ]; then
		echo "---- $log (last 40 lines) ----"
		tail -n 40 "$log"
		echo "----"
	fi
done
if [ -n "$totals" ]; then echo "$P $F $S" >>"$totals"; fi
echo "$P passed, $F failed, $S skipped"
[ $F -eq 0 ]
