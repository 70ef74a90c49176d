# Sourced by the shell tests (tests/NAME.sh ROOT BUILD, run through the
# wrappers the Makefile writes), after `set -u`: the two arguments, the test
# harness's lines ("ok NAME", "FAIL NAME: why", "skip NAME (why)") and the
# closing "# summary: ..." line that tests/run.sh reads.
# shellcheck shell=bash
root=${1:?repository} build=${2:?build folder}
case $build in /*) ;; *) build=$root/$build ;; esac
P=0 F=0 S=0
ok() { echo "ok   $1"; P=$((P + 1)); }
fail() { echo "FAIL $1: $2"; F=$((F + 1)); }
skip() { echo "skip $1 ($2)"; S=$((S + 1)); }
# Prints the summary line and exits: 0 when nothing failed.
summary() {
	echo "# summary: $P passed, $F failed, $S skipped"
	[ "$F" -eq 0 ]
	exit $?
}
