#!/usr/bin/env bash
# Every public header compiles alone, in C and in C++, with include/ as the
# only include path: what an external policy or an application sees.
#   tests/public_headers.sh [ROOT]
# Output follows the test harness ("ok NAME", "FAIL NAME", "# summary: ...").
set -u
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cc=${CC:-cc}
cxx=${CXX:-c++}
P=0 F=0 S=0
for h in "$root"/include/ve/*.h; do
	n=$(basename "$h" .h)
	out=$(echo "#include \"ve/$n.h\"" |
		"$cc" -std=c11 -Wall -Wextra -Werror -fsyntax-only -I"$root/include" -x c - 2>&1)
	if [ $? -eq 0 ]; then
		echo "ok   ${n}_alone_c"
		P=$((P + 1))
	else
		echo "FAIL ${n}_alone_c"
		echo "$out"
		F=$((F + 1))
	fi
	if ! command -v "$cxx" >/dev/null 2>&1; then
		echo "skip ${n}_alone_cxx (no C++ compiler: $cxx)"
		S=$((S + 1))
		continue
	fi
	out=$(echo "#include \"ve/$n.h\"" |
		"$cxx" -Wall -Wextra -Werror -fsyntax-only -I"$root/include" -x c++ - 2>&1)
	if [ $? -eq 0 ]; then
		echo "ok   ${n}_alone_cxx"
		P=$((P + 1))
	else
		echo "FAIL ${n}_alone_cxx"
		echo "$out"
		F=$((F + 1))
	fi
done
echo "# summary: $P passed, $F failed, $S skipped"
[ "$F" -eq 0 ]
