#!/usr/bin/env python3
"""Plots bench/results/coloc.json as an SVG (no dependencies beyond Python 3):
aggregate normalized throughput per pair and mode (median, min-max whiskers
over runs), each job's normalized throughput, and every job's ve-run/native
ratio alone. A bar marked '≠' was not bitwise identical to the solo run; '!'
marks a run whose MPS state could not be verified as the mode claims.

    bench/gpu/plot_coloc.py bench/results/coloc.json [out.svg]
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from svgplot import bar_panel, document, legend  # noqa: E402

ORDER = ["timeslice", "mps", "mps_split", "mps_priority", "ve_fixed", "ve_tput", "ve_tpot", "ve_whole"]


def mode_order(pairs):
    seen = []
    for p in pairs:
        for m in p["modes"]:
            if m not in seen:
                seen.append(m)
    rank = lambda m: (ORDER.index(m.split("@")[0]) if m.split("@")[0] in ORDER else 99, m)
    return sorted(seen, key=rank)


def marks_for(e):
    s = ""
    if e.get("bitwise") is False:
        s += "≠"
    if e.get("mps_verified") is False:
        s += "!"
    return s


def render(d, dst):
    pairs = d.get("pairs", [])
    modes = mode_order(pairs)
    solo = d.get("solo", {})
    W = max(900, 120 + len(pairs) * 2 * (len(modes) * 16 + 30))
    x0, pw, ph = 70, W - 110, 210
    parts = legend(x0, 62, modes, pw)
    y = 110

    def get_agg(gi, si):
        e = pairs[gi]["modes"].get(modes[si])
        if not e or e.get("aggregate") is None:
            return None
        sp = e.get("aggregate_spread") or {}
        return (e["aggregate"], sp.get("min"), sp.get("max"))

    def mark_agg(gi, si):
        e = pairs[gi]["modes"].get(modes[si])
        return marks_for(e) if e else ""

    parts += bar_panel(x0, y, pw, ph, "aggregate normalized throughput (sum over the pair; 1 = one job alone)",
                       [f"{p.get('id', '')} {p['name']}" for p in pairs], modes, get_agg,
                       ylabel="normalized", ref=1.0, marks=mark_agg)
    y += ph + 80
    groups = [(pi, k) for pi in range(len(pairs)) for k in range(2)]

    def get_job(gi, si):
        pi, k = groups[gi]
        e = pairs[pi]["modes"].get(modes[si])
        if not e or not e.get("jobs") or e["jobs"][k] is None:
            return None
        sp = (e.get("jobs_spread") or [{}, {}])[k] or {}
        return (e["jobs"][k], sp.get("min"), sp.get("max"))

    def mark_job(gi, si):
        pi, k = groups[gi]
        e = pairs[pi]["modes"].get(modes[si])
        return marks_for(e) if e else ""

    parts += bar_panel(x0, y, pw, ph, "each job's normalized throughput in the pair (1 = as fast as alone)",
                       [f"{pairs[pi].get('id', '')}: {pairs[pi]['jobs'][k]}" for pi, k in groups],
                       modes, get_job, ylabel="normalized", ref=1.0, marks=mark_job)
    y += ph + 80
    jobs = list(solo)

    def get_solo(gi, si):
        e = solo[jobs[gi]]
        return None if e.get("ve_vs_native") is None else (e["ve_vs_native"], None, None)

    parts += bar_panel(x0, y, min(pw, 140 * max(1, len(jobs))), ph,
                       "alone: ve-run steps/s / native steps/s", jobs, ["ve_solo"], get_solo,
                       ylabel="ratio", ref=1.0,
                       marks=lambda gi, si: "≠" if solo[jobs[gi]].get("bitwise") is False else "")
    y += ph + 50
    m = d.get("machine", {})
    sub = (f"{m.get('gpu', '?')}, driver {m.get('driver', '?')}, torch {m.get('torch', '?')}, "
           f"commit {m.get('commit', '?')}, {d.get('date', '')}; whiskers: min-max over runs; "
           "≠ not bitwise identical to solo, ! MPS state not verified")
    svg = document(W, y, "Colocated training on one GPU", sub, parts)
    with open(dst, "w") as f:
        f.write(svg)
    return dst


def main():
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(sys.argv) > 1 else 2
    src = sys.argv[1]
    dst = sys.argv[2] if len(sys.argv) > 2 else os.path.splitext(src)[0] + ".svg"
    with open(src) as f:
        d = json.load(f)
    print(render(d, dst))
    return 0


if __name__ == "__main__":
    sys.exit(main())
