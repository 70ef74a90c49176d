# Sourced by decode_ab.sh and pair_ab.sh: builds this tree, then a copy of
# it with PATCH (a diff of src/) reversed under /tmp/ve-old-tree, the "old"
# library of an A/B; OLD names that tree. Logs under OUT; exits on failure.
make -j"$(nproc)" >"$OUT/build.log" 2>&1 || { tail -5 "$OUT/build.log"; exit 1; }
OLD=/tmp/ve-old-tree; rm -rf "$OLD"; mkdir -p "$OLD"
cp -r Makefile include src tools tests bench docs "$OLD"/ 2>/dev/null
(cd "$OLD" && patch -R -p1 <"$OLDPWD/${PATCH:?PATCH names the diff to reverse}" >"$OUT/patch.log" 2>&1 &&
	make -j"$(nproc)" build/libve.so >"$OUT/build-old.log" 2>&1) || { echo "old build failed"; tail -5 "$OUT"/patch.log "$OUT"/build-old.log; exit 1; }
