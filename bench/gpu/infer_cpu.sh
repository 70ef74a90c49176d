#!/usr/bin/env bash
# Eager batch-1 inference (bench/gpu/torch_infer_latency.py) natively and
# under ve-run, alternating, with the CPU each pass's threads ran on
# (CPUS=1): where the slow passes (~4 ms instead of ~2.4) come from.
#
#   bench/gpu/infer_cpu.sh OUTDIR [ROUNDS]
#
# Modes: native; tput (ve-run --policy tput); tput_spin0 (VE_IDLE_SPIN_US=0:
# the dispatcher sleeps at once when idle); and, where the host has SMT,
# native_phys / tput_phys: the process limited to one CPU per physical core
# (taskset), so the dispatcher never shares a core with the application.
# Writes OUTDIR/infer-cpu.jsonl (one line per run), OUTDIR/host.txt (CPU
# topology, GPU affinity) and prints a table: median p50/p95/p99, slow
# passes, and slow passes among those where both threads shared a core.
set -u
OUTDIR=$(realpath -m "${1:?usage: infer_cpu.sh OUTDIR [ROUNDS]}") # before the cd below
ROUNDS=${2:-4}
cd "$(dirname "$0")/../.."
mkdir -p "$OUTDIR"
{
	lscpu 2>&1 | grep -E 'Model name|^CPU\(s\)|Thread|Core|Socket|NUMA'
	nvidia-smi topo -m 2>&1 | head -5
} >"$OUTDIR/host.txt"
# The CPUs this process may use, and one of them per physical core (SMT
# siblings from sysfs, within the allowed set).
read -r ALL PHYS < <(python3 - <<'PY'
import os
allowed = sorted(os.sched_getaffinity(0))
seen, phys = set(), []
for c in allowed:
    try:
        txt = open(f"/sys/devices/system/cpu/cpu{c}/topology/thread_siblings_list").read().strip()
        sib = set()
        for part in txt.split(","):
            lo, _, hi = part.partition("-")
            sib.update(range(int(lo), int(hi or lo) + 1))
    except (OSError, ValueError):
        sib = {c}
    if not sib & seen:
        phys.append(c)
    seen |= sib
print(len(allowed), ",".join(map(str, phys)))
PY
)
NPHYS=$(echo "$PHYS" | tr ',' '\n' | wc -l)
MODES="native tput tput_spin0"
[ "$NPHYS" -lt "$ALL" ] && MODES="$MODES native_phys tput_phys"
echo "cpus $ALL, physical cores $NPHYS ($PHYS); modes: $MODES" | tee -a "$OUTDIR/host.txt"
J="$OUTDIR/infer-cpu.jsonl"
: >"$J"
for r in $(seq "$ROUNDS"); do
	for m in $MODES; do
		pre=()
		case $m in *_phys) pre=(taskset -c "$PHYS") ;; esac
		case $m in
		native*) CPUS=1 timeout 120 ${pre[@]+"${pre[@]}"} python3 bench/gpu/torch_infer_latency.py "$m" ;;
		tput_spin0) CPUS=1 VE_IDLE_SPIN_US=0 timeout 120 build/ve-run --policy tput -- \
			python3 bench/gpu/torch_infer_latency.py "$m" ;;
		tput*) CPUS=1 timeout 120 ${pre[@]+"${pre[@]}"} build/ve-run --policy tput -- \
			python3 bench/gpu/torch_infer_latency.py "$m" ;;
		esac >>"$J" 2>>"$OUTDIR/infer-cpu.err"
	done
done
python3 - "$J" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
by = {}
for r in rows:
    by.setdefault(r["mode"], []).append(r)
print(f"{'mode':12s} {'n':>2s} {'p50':>7s} {'p95':>7s} {'p99':>7s} {'slow%':>6s}  per run slow%      same-core passes (slow)")
for m, rs in by.items():
    med = lambda k: statistics.median(x[k] for x in rs)
    same = [x.get("same_core_passes_slow", [0, 0]) for x in rs]
    print(f"{m:12s} {len(rs):2d} {med('p50_us'):7.0f} {med('p95_us'):7.0f} {med('p99_us'):7.0f} "
          f"{100 * med('slow_frac'):6.1f}  {' '.join('%.0f' % (100 * x['slow_frac']) for x in rs):18s} "
          f"{' '.join('%d(%d)' % (a, b) for a, b in same)}")
PY
