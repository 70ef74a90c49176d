#!/usr/bin/env bash
# The layer order of src/, checked over #include edges (docs/architecture.md,
# "Layers"). A module may include its own headers and those of the modules
# in lower layers, never one of its own layer or above:
#
#   0  ve (include/ve: public, includes only itself), util
#   1  core
#   2  backend, pool          backend may include core and util only
#   3  profile
#   4  policy
#   5  coord
#   6  dispatch
#   7  ipc
#   8  ved
#   9  runtime
#  10  shim
#  11  tools
#
# Checked: every edge of src/, include/ve and tools/ against that order, no
# include cycle between files nor between modules (tsort), no file below the
# shim including a shim header. The self-test plants an upward edge, a sideways edge and a
# cycle in a copy of the tree and expects each to be caught.
#
#   tests/layering.sh [ROOT]      check ROOT (default: this repository)
#   tests/layering.sh --list      print the module edges of this repository
# Output follows the test harness ("ok NAME", "FAIL NAME", "# summary: ...").
set -u
here=$(cd "$(dirname "$0")/.." && pwd)

# rank_of MODULE: sets $rank (-1 for a module outside the order). Sets a
# variable rather than printing: this runs once per include edge, and a
# subshell per call made the check take most of a minute.
rank_of() {
	case "$1" in
	ve | util) rank=0 ;;
	core) rank=1 ;;
	backend | pool) rank=2 ;;
	profile) rank=3 ;;
	policy) rank=4 ;;
	coord) rank=5 ;;
	dispatch) rank=6 ;;
	ipc) rank=7 ;;
	ved) rank=8 ;;
	runtime) rank=9 ;;
	shim) rank=10 ;;
	tools) rank=11 ;;
	*) rank=-1 ;;
	esac
}

# Prints "file target-file" for every quoted #include that names a module
# header ("mod/x.h"), relative to root: target src/T or include/T where that
# file exists, ?/T otherwise. One grep and one awk over the whole tree.
edges() {
	local root=$1
	(
		cd "$root" || exit 1
		{
			find src include -type f 2>/dev/null | sed 's/^/H /'
			find src include/ve tools -type f \( -name '*.c' -o -name '*.h' \) 2>/dev/null |
				LC_ALL=C sort | xargs -r grep -H '^[[:space:]]*#[[:space:]]*include[[:space:]]*"[a-z_]*/' |
				sed -n 's/^\([^:]*\):[[:space:]]*#[[:space:]]*include[[:space:]]*"\([a-z_]*\/[^"]*\)".*/E \1 \2/p'
		} | awk '$1 == "H" { have[$2] = 1; next }
			{ t = ("src/" $3) in have ? "src/" $3 : ("include/" $3) in have ? "include/" $3 : "?/" $3
			  print $2, t }'
	)
}

# module_of PATH: sets $mod.
module_of() {
	case "$1" in
	include/ve/*) mod=ve ;;
	tools/*) mod=tools ;;
	src/*/*) mod=${1#src/}; mod=${mod%%/*} ;;
	src/*) mod=${1#src/} ;; # a file outside every module: in no layer
	*) mod="?" ;;
	esac
}

# Violations of the order in root, one line each; returns 1 if any.
check_tree() {
	local root=$1 bad=0 f t mf mt rf rt mod rank
	while read -r f t; do
		module_of "$f"; mf=$mod
		module_of "$t"; mt=$mod
		[ "$mf" = "$mt" ] && continue
		rank_of "$mf"; rf=$rank
		rank_of "$mt"; rt=$rank
		if [ "$t" = "${t#\?/}" ] && [ "$rf" -ge 0 ] && [ "$rt" -ge 0 ]; then :; else
			echo "  $f includes $t: not in the layer order"
			bad=1
			continue
		fi
		if [ "$mf" = backend ] && [ "$mt" != core ] && [ "$mt" != util ]; then
			echo "  $f includes $t: the backend may include core and util only"
			bad=1
		elif [ "$mf" = ve ]; then
			echo "  $f includes $t: a public header includes only public headers"
			bad=1
		elif [ "$rt" -gt "$rf" ]; then
			echo "  $f includes $t: upward edge ($mf, layer $rf -> $mt, layer $rt)"
			bad=1
		elif [ "$rt" -eq "$rf" ]; then
			echo "  $f includes $t: sideways edge ($mf -> $mt, both layer $rf)"
			bad=1
		fi
	done < <(edges "$root")
	return $bad
}

# Include cycles between files; returns 1 if any.
check_cycles() {
	local root=$1 out
	out=$(edges "$root" | grep -v ' ?/' | tsort 2>&1 >/dev/null)
	if [ -n "$out" ]; then
		echo "$out" | sed 's/^/  /'
		return 1
	fi
	return 0
}

# Include cycles between modules (a file of A includes one of B and a file
# of B one of A, or longer); returns 1 if any.
check_module_cycles() {
	local root=$1 out
	out=$(edges "$root" | grep -v ' ?/' | while read -r f t; do
		module_of "$f"; echo -n "$mod "
		module_of "$t"; echo "$mod"
	done | awk '$1 != $2' | LC_ALL=C sort -u | tsort 2>&1 >/dev/null)
	if [ -n "$out" ]; then
		echo "$out" | sed 's/^/  /'
		return 1
	fi
	return 0
}

# No file outside src/shim (and tools) includes a shim header.
check_shim() {
	local root=$1 bad=0 f t
	while read -r f t; do
		case "$t" in src/shim/*) ;; *) continue ;; esac
		case "$f" in src/shim/* | tools/*) continue ;; esac
		echo "  $f includes $t"
		bad=1
	done < <(edges "$root")
	return $bad
}

P=0 F=0
report() { # name status [output]
	if [ "$2" -eq 0 ]; then
		echo "ok   $1"
		P=$((P + 1))
	else
		echo "FAIL $1"
		[ -n "${3:-}" ] && echo "$3"
		F=$((F + 1))
	fi
}

# A copy of the tree (sources only) with one planted fault; the check must fail.
plant() { # name check-function file line
	local tmp
	tmp=$(mktemp -d "${TMPDIR:-/tmp}/ve-layering-XXXXXX") || return 1
	(cd "$here" && tar cf - src include tools 2>/dev/null) | (cd "$tmp" && tar xf -)
	printf '%s\n' "$4" >>"$tmp/$3"
	local out rc
	out=$("$2" "$tmp")
	rc=$?
	rm -rf "$tmp"
	if [ $rc -ne 0 ]; then
		report "$1" 0
	else
		report "$1" 1 "  the planted fault ($3: $4) was not caught"
	fi
}

if [ "${1:-}" = --list ]; then
	edges "$here" | while read -r f t; do
		module_of "$f"; echo -n "$mod -> "
		module_of "$t"; echo "$mod"
	done |
		awk '$1 != $3' | LC_ALL=C sort | uniq -c
	exit 0
fi

root=${1:-$here}
out=$(check_tree "$root")
report layer_order $? "$out"
out=$(check_cycles "$root")
report no_include_cycle $? "$out"
out=$(check_module_cycles "$root")
report no_module_cycle $? "$out"
out=$(check_shim "$root")
report nothing_below_shim_includes_it $? "$out"
if [ $# -eq 0 ]; then
	plant self_test_upward_edge check_tree src/backend/sim.c '#include "shim/shim.h"'
	plant self_test_upward_edge_dispatch check_tree src/dispatch/trace.c '#include "ved/client.h"'
	plant self_test_sideways_edge check_tree src/pool/pool.c '#include "backend/backend.h"'
	plant self_test_public_header check_tree include/ve/ve_pool.h '#include "pool/pool.h"'
	plant self_test_cycle check_cycles src/core/token.h '#include "core/vctx.h"'
	plant self_test_module_cycle check_module_cycles src/core/desc.c '#include "dispatch/trace.h"'
	plant self_test_shim_header check_shim src/dispatch/link.c '#include "shim/shim.h"'
fi
echo "# summary: $P passed, $F failed, 0 skipped"
[ "$F" -eq 0 ]
