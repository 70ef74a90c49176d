#!/usr/bin/env bash
# Every VE_* variable the sources read is listed in src/runtime/knobs.c (the
# user's knobs, or tooling of tests and benchmarks), so that the shim's
# warning about unknown VE_* variables never fires for a real one. ved's
# VE_VED_<KEY> variables are checked by ved against its keys instead.
#   tests/knobs.sh [ROOT]
# Output follows the test harness ("ok NAME", "FAIL NAME", "# summary: ...").
set -u
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
list="$root/src/runtime/knobs.c"
fail=0
names=$(cd "$root" && grep -rhoE '(getenv|env_[a-z0-9_]+|ve_test_env_long)\("VE_[A-Z0-9_]+"' \
	src tools tests bench --include='*.c' --include='*.h' --include='*.cu' 2>/dev/null |
	sed -E 's/.*"(VE_[A-Z0-9_]+)"/\1/' | grep -v '^VE_VED_' | grep -v '^VE_BENCH_' | sort -u)
missing=""
for n in $names; do
	grep -q "\"$n\"" "$list" || missing="$missing $n"
done
if [ -n "$missing" ]; then
	echo "variables read but not listed in src/runtime/knobs.c:$missing" >&2
	echo "FAIL knobs_listed"
	fail=1
else
	echo "ok   knobs_listed ($(echo "$names" | wc -w) variables)"
fi
# Every user knob is documented.
undoc=""
for n in $(sed -n '/ve_knobs\[\] = {/,/};/p' "$list" | grep -oE '"VE_[A-Z0-9_]+"' | tr -d '"'); do
	grep -q "\`$n\`" "$root/docs/configuration.md" || undoc="$undoc $n"
done
if [ -n "$undoc" ]; then
	echo "knobs without a row in docs/configuration.md:$undoc" >&2
	echo "FAIL knobs_documented"
	fail=$((fail + 1))
else
	echo "ok   knobs_documented"
fi
# The two places that describe VE_WINDOW under ved say the same thing.
flat() { tr '\n' ' ' <"$1" | tr -s ' '; }
phrase='only `VE_PIPE_BUDGET` pipelines'
if flat "$root/docs/configuration.md" | grep -qF "$phrase" &&
	flat "$root/docs/daemon.md" | grep -qF "$phrase" &&
	! flat "$root/docs/daemon.md" | grep -qF 'is refused while ved schedules'; then
	echo "ok   window_under_ved_documented_alike"
else
	echo "docs/configuration.md and docs/daemon.md disagree on VE_WINDOW under ved" >&2
	echo "FAIL window_under_ved_documented_alike"
	fail=$((fail + 1))
fi
echo "# summary: $((3 - fail)) passed, $fail failed, 0 skipped"
[ $fail -eq 0 ]
