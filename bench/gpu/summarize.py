#!/usr/bin/env python3
"""Summarizes a bench/gpu/run_gpu.sh output directory: one table on stdout
and OUTDIR/summary.json (what bench/results/ keeps)."""
import glob
import json
import os
import sys


def load(path):
    try:
        with open(path) as f:
            txt = f.read().strip().splitlines()
        return json.loads(txt[-1]) if txt else None
    except Exception:
        return None


def main():
    out = sys.argv[1]
    summary = {}
    det = {m: load(os.path.join(out, f"det-{m}.json")) for m in ("native", "chaos", "tput")}
    if any(det.values()):
        rows = {}
        base = det.get("native") or {}
        for m, d in det.items():
            if not d:
                rows[m] = {"error": "no result"}
                continue
            for w, r in d.get("workloads", {}).items():
                ent = rows.setdefault(w, {})
                if "error" in r:
                    ent[m] = {"error": r["error"]}
                    continue
                ref = base.get("workloads", {}).get(w, {}).get("digests", [None])[0]
                ent[m] = {"reps": len(r["digests"]), "consistent": r["consistent"],
                          "identical_to_native": all(x == ref for x in r["digests"]) if ref else None,
                          "digest": r["digests"][0][:16], "seconds": r.get("seconds")}
        summary["determinism"] = rows
        print("determinism (bitwise identical to native over all repetitions):")
        for w, ent in rows.items():
            cells = []
            for m in ("native", "chaos", "tput"):
                e = ent.get(m, {}) if isinstance(ent, dict) else {}
                if "error" in e:
                    cells.append(f"{m}=ERROR")
                else:
                    ok = e.get("consistent") and (m == "native" or e.get("identical_to_native"))
                    cells.append(f"{m}={'identical' if ok else 'DIFFERENT'}({e.get('reps')})")
            print(f"  {w:8s} " + " ".join(cells))
    launch = {m: load(os.path.join(out, f"launch-{m}.json")) for m in ("native", "whole", "tput")}
    if launch.get("native"):
        nat = launch["native"]
        summary["launch"] = launch
        print("launch (us): mode app_thread_per_launch chain_per_kernel")
        for m, l in launch.items():
            if l:
                print(f"  {m:6s} {l['launch_us_median']:8.3f} {l['chain_us_per_kernel_median']:8.3f}")
        for m in ("whole", "tput"):
            if launch.get(m):
                summary[f"launch_overhead_us_{m}"] = round(launch[m]["launch_us_median"] - nat["launch_us_median"], 3)
        if launch.get("tput"):
            summary["launch_overhead_us"] = summary["launch_overhead_us_tput"]
    inf = {m: load(os.path.join(out, f"infer-{m}.json")) for m in ("native", "whole", "tput")}
    if inf.get("native"):
        summary["infer_latency"] = inf
        print("eager inference latency (us): mode p50 p95")
        for m, l in inf.items():
            if l:
                extra = ""
                if m != "native":
                    extra = f"  (p95 {100.0 * (l['p95_us'] / inf['native']['p95_us'] - 1):+.1f}%)"
                print(f"  {m:6s} {l['p50_us']:9.1f} {l['p95_us']:9.1f}{extra}")
    st = os.path.join(out, "logs", "suite.txt")
    if os.path.exists(st):
        with open(st) as f:
            lines = f.read().strip().splitlines()
        summary["suite_tail"] = lines[-12:]
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)


if __name__ == "__main__":
    main()
