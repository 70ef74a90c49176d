#!/usr/bin/env bash
# A short pass over the benchmarks that decide the fast path and serving,
# in one 10-minute machine call: the colocation pairs (MPS and ve_tput only,
# merged into an existing coloc.json whose solo section they reuse), the
# launch overhead, a one-run serving comparison on the small model, and the
# metrics scrape. Returns at most a few files in OUTDIR: coloc.json,
# overhead.json, mixed.json and pass.tgz (plots, metrics CSV, every log).
#   bench/gpu/short-pass.sh OUTDIR [COLOC_JSON]
set -u
OUTDIR=${1:?usage: short-pass.sh OUTDIR [COLOC_JSON]}
COLOC_IN=${2:-bench/results/coloc.json}
W=/tmp/ve-pass
rm -rf "$W" && mkdir -p "$W" "$OUTDIR"
note() { echo "[$(date +%H:%M:%S)] $*"; }
note "build"
make -j"$(nproc)" >"$W/build.log" 2>&1 || {
	tail -20 "$W/build.log"
	exit 1
}
cp "$COLOC_IN" "$OUTDIR/coloc.json"
note "colocation: mps and ve_tput on the four pairs"
python3 bench/gpu/coloc --pairs a,b,c,d --modes mps,ve_tput --skip-solo --merge --window-s 2 \
	--budget-s 300 --stop-after-s 200 --outdir "$W/coloc" --out "$OUTDIR/coloc.json" \
	>"$W/coloc.txt" 2>&1
grep -E "^[abcd] " "$W/coloc.txt"
note "launch overhead"
bash bench/gpu/overhead.sh "$W/overhead" >"$W/overhead.txt" 2>&1
cp "$W/overhead/overhead.json" "$OUTDIR/overhead.json" 2>/dev/null
tail -2 "$W/overhead.txt"
note "serving beside training (small model, one run per mode)"
python3 bench/gpu/mixed --server-args "--small" --runs 1 --duration 8 \
	--modes timeslice,mps,mps_split,ve_tput,ve_tpot --split-sweep 50/50 --tpot-args reserve=16 \
	--budget-s 300 --stop-after-s 280 --outdir "$W/mixed" --out "$OUTDIR/mixed.json" \
	>"$W/mixed.txt" 2>&1
tail -14 "$W/mixed.txt"
if [ -x bench/gpu/metrics_scrape ]; then
	note "metrics scrape"
	timeout 110 bench/gpu/metrics_scrape --outdir "$W/metrics" --results "$W/metrics-results" \
		>"$W/metrics.txt" 2>&1
	tail -3 "$W/metrics.txt"
fi
cp "$OUTDIR"/*.svg "$W/" 2>/dev/null
tar czf "$OUTDIR/pass.tgz" -C /tmp ve-pass 2>/dev/null
note "done"
