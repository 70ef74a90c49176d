#!/usr/bin/env bash
# make install into a temporary tree, then use only what it installed:
#   install_tree        bin/, lib/ (libve.so with its soname and links), include/ve,
#                       the pkg-config file, man pages, units with the install's paths
#   install_version     every installed tool answers --version and --help
#   install_ext_policy  an external policy built with only the installed headers
#                       (through pkg-config) runs in the installed ve-sim
#   install_ve_run      the installed ve-run finds its own libve.so and runs a
#                       program (fake driver) with that policy
#   uninstall           make uninstall removes it all but the configuration
#   tests/install.sh ROOT BUILD
# Output follows the test harness ("ok NAME", "FAIL NAME", "# summary: ...").
set -u
. "$(dirname "$0")/sh_harness.sh"
cc=${CC:-cc}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ve-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
prefix=/opt/vitamin-e-test
dest=$tmp/root
inst=$dest$prefix
version=$(cat "$root/VERSION")

log=$tmp/make.log
if ! make -C "$root" --no-print-directory install BUILD="$build" PREFIX=$prefix DESTDIR="$dest" \
	>"$log" 2>&1; then
	fail install_tree "make install failed"
	tail -n 30 "$log"
	summary
fi

# ---- install_tree
have_lib=1
[ -f "$build/libve.so" ] || have_lib=0
bad=""
for t in ve-run ved ve-ctl ve-sim ve-profile; do
	[ -x "$inst/bin/$t" ] || bad="$bad bin/$t"
	[ -s "$inst/share/man/man1/$t.1" ] || bad="$bad man1/$t.1"
done
for h in "$root"/include/ve/*.h; do
	[ -f "$inst/include/ve/$(basename "$h")" ] || bad="$bad include/ve/$(basename "$h")"
done
[ -f "$inst/lib/pkgconfig/vitamin-e.pc" ] || bad="$bad vitamin-e.pc"
grep -q "^ExecStart=$prefix/bin/ved " "$inst/lib/systemd/system/ved@.service" 2>/dev/null ||
	bad="$bad ved@.service(paths)"
[ -f "$dest/etc/vitamin-e/ved.conf" ] || bad="$bad etc/vitamin-e/ved.conf"
if [ $have_lib = 1 ]; then
	[ -f "$inst/lib/libve.so.$version" ] || bad="$bad lib/libve.so.$version"
	[ "$(readlink "$inst/lib/libve.so")" = "libve.so.${version%%.*}" ] || bad="$bad lib/libve.so(link)"
	[ "$(readlink "$inst/lib/libve.so.${version%%.*}")" = "libve.so.$version" ] ||
		bad="$bad lib/libve.so.${version%%.*}(link)"
	if command -v readelf >/dev/null 2>&1; then
		readelf -d "$inst/lib/libve.so.$version" | grep -q "SONAME.*\[libve.so.${version%%.*}\]" ||
			bad="$bad soname"
	fi
fi
if [ -z "$bad" ]; then ok install_tree; else fail install_tree "missing or wrong:$bad"; fi

# ---- install_version
bad=""
for t in ve-run ved ve-ctl ve-sim ve-profile; do
	out=$("$inst/bin/$t" --version 2>&1) || bad="$bad $t(--version exit)"
	echo "$out" | grep -q "^$t (Vitamin-E) $version\$" || bad="$bad $t(version line)"
	echo "$out" | grep -q "^commit: " || bad="$bad $t(commit)"
	echo "$out" | grep -q "^built against CUDA headers: " || bad="$bad $t(headers)"
	echo "$out" | grep -q "^driver: " || bad="$bad $t(driver)"
	"$inst/bin/$t" --help >/dev/null 2>&1 || bad="$bad $t(--help)"
done
# No driver: "none", never a crash; the fake one: found.
out=$(VE_LIBCUDA=$tmp/no-such-libcuda.so "$inst/bin/ve-run" --version 2>&1)
echo "$out" | grep -q "^driver: none" || bad="$bad driver-none"
if [ -f "$build/fakecuda/libcuda.so.1" ]; then
	out=$(VE_LIBCUDA=$build/fakecuda/libcuda.so.1 "$inst/bin/ve-run" --version 2>&1)
	echo "$out" | grep -q "^driver: .*CUDA [0-9]" || bad="$bad driver-found"
fi
if [ -z "$bad" ]; then ok install_version; else fail install_version "$bad"; fi

# ---- install_ext_policy: nothing of the source tree but the policy's .c
cp "$root/tests/policy/ext_policy.c" "$tmp/my_policy.c"
pcdir=$inst/lib/pkgconfig
if command -v pkg-config >/dev/null 2>&1; then
	cflags=$(PKG_CONFIG_SYSROOT_DIR=$dest PKG_CONFIG_PATH=$pcdir PKG_CONFIG_LIBDIR=$pcdir \
		pkg-config --cflags vitamin-e 2>&1)
	how=pkg-config
else
	# The .pc file read by hand: includedir under the staging root.
	cflags="-I$dest$(sed -n 's/^includedir=//p' "$pcdir/vitamin-e.pc")"
	how="the .pc file (no pkg-config here)"
fi
if ! $cc -std=c11 -O2 -fPIC -shared -Wall -Wextra -Werror $cflags "$tmp/my_policy.c" \
	-o "$tmp/my_policy.so" >"$tmp/cc.log" 2>&1; then
	fail install_ext_policy "does not build with cflags '$cflags' from $how: $(head -c 400 "$tmp/cc.log")"
else
	out=$("$inst/bin/ve-sim" --policies "$tmp/my_policy.so" --horizon-ms 40 --quiet 2>&1)
	# One row per job of the scenario under the policy, named by its path.
	if [ $? -eq 0 ] && echo "$out" | grep -q "my_policy.so  *trainA  *0\.[0-9]*[1-9]"; then
		ok install_ext_policy
	else
		fail install_ext_policy "the installed ve-sim did not run it: $(echo "$out" | tail -n 5)"
	fi
fi

# ---- install_ve_run: the installed launcher finds the installed libve.so
prog=$build/tests/prog_shim_cudart_style
if [ $have_lib = 0 ] || [ ! -x "$prog" ] || [ ! -f "$build/fakecuda/libcuda.so.1" ] ||
	[ ! -f "$tmp/my_policy.so" ]; then
	skip install_ve_run "needs libve.so, the fake driver, $prog and the policy"
else
	out=$(cd "$tmp" && env FAKECUDA_JITTER_US=0 FAKECUDA_SEED=4 VETEST_SEED=4 VETEST_EXPECT_GREEN=1 \
		VE_DAEMON=0 VE_LOG_LEVEL=info VE_LIBCUDA="$build/fakecuda/libcuda.so.1" \
		LD_LIBRARY_PATH="$build/fakecuda" \
		timeout 60 "$inst/bin/ve-run" --policy "$tmp/my_policy.so" -- "$prog" 2>&1)
	rc=$?
	if [ $rc -eq 0 ] && echo "$out" | grep -q "policy ext_first_fit" &&
		echo "$out" | grep -q "from $inst/bin/../lib/libve.so"; then
		ok install_ve_run
	else
		fail install_ve_run "rc $rc: $(echo "$out" | tail -n 6)"
	fi
fi

# ---- uninstall
make -C "$root" --no-print-directory uninstall BUILD="$build" PREFIX=$prefix DESTDIR="$dest" \
	>"$log" 2>&1
left=$(cd "$dest" && find . -type f -o -type l | grep -v '^./etc/vitamin-e/ved.conf$' | sort)
if [ -z "$left" ] && [ -f "$dest/etc/vitamin-e/ved.conf" ]; then
	ok uninstall
else
	fail uninstall "left behind: $(echo $left | head -c 300)"
fi
summary
