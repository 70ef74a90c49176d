#!/usr/bin/env python3
"""Plots bench/results/mixed*.json as an SVG (no dependencies beyond Python 3):
the CDF of end-to-end request latency per mode (every request of every run;
the server alone included) and its tail (1 - CDF, log scale), then per mode the request latency p99 (median,
min-max whiskers over runs), the training job's normalized throughput and the
TPOT SLO violation rate. '≠' marks a mode whose tokens were not identical to
the solo server's; '!' one whose MPS state was not verified.

    bench/gpu/plot_mixed.py bench/results/mixed.json [out.svg]
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from svgplot import bar_panel, cdf_panel, document, legend  # noqa: E402


def render(d, dst):
    modes = list(d.get("modes", {}))
    entries = [("solo", d.get("solo") or {})] + [(m, d["modes"][m]) for m in modes]
    names = [m + (f" ({e['chosen']})" if e.get("chosen") else "") for m, e in entries]
    W = max(860, 200 + 60 * len(entries))
    x0, pw = 70, W - 110
    parts = legend(x0, 62, names, pw)
    y = 100
    series = [(n, e.get("e2e_ms_all") or []) for n, (_, e) in zip(names, entries)]
    parts += cdf_panel(x0, y, pw, 260, "end-to-end request latency CDF (every request of every run)", series)
    y += 260 + 80
    parts += cdf_panel(x0, y, pw, 200, "tail: fraction of requests slower than x (log scale)", series,
                       tail=True)
    y += 200 + 80

    def mark(gi, si):
        e = entries[si][1]
        s = ""
        if si > 0 and e.get("tokens_identical") is False:
            s += "≠"
        if e.get("mps_verified") is False:
            s += "!"
        return s

    def getter(key, spread_key=None, scale=1.0):
        def get(gi, si):
            e = entries[si][1]
            v = e.get(key)
            if v is None:
                return None
            sp = e.get(spread_key) or {} if spread_key else {}
            lo, hi = sp.get("min"), sp.get("max")
            return (v * scale, lo * scale if lo is not None else None, hi * scale if hi is not None else None)
        return get

    ph = 170
    parts += bar_panel(x0, y, pw, ph, "request latency p99 (ms)", [""], names,
                       getter("infer_p99_ms", "infer_p99_spread"), fmt=lambda v: f"{v:.0f}",
                       ylabel="ms", marks=mark)
    y += ph + 60
    parts += bar_panel(x0, y, pw, ph, "training throughput beside the server (1 = alone)", [""], names,
                       getter("train_norm", "train_norm_spread"), fmt=lambda v: f"{v:.2f}",
                       ylabel="normalized", ref=1.0, marks=mark)
    y += ph + 60
    parts += bar_panel(x0, y, pw, ph, "TPOT SLO violations (%)", [""], names,
                       getter("tpot_slo_violation", None, 100.0), fmt=lambda v: f"{v:.1f}",
                       ylabel="%", marks=mark)
    y += ph + 50
    m = d.get("machine", {})
    sub = (f"{m.get('gpu', '?')}, {d.get('arrivals', '?')} arrivals at {d.get('rate_rps', '?')} req/s, "
           f"batch {d.get('batch', '?')}, training '{(d.get('train') or {}).get('job', '?')}', "
           f"SLO TPOT {d.get('slo_tpot_ms', '?')} ms, commit {m.get('commit', '?')}, {d.get('date', '')}")
    with open(dst, "w") as f:
        f.write(document(W, y, "LLM serving beside training on one GPU", sub, parts))
    return dst


def main():
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(sys.argv) > 1 else 2
    src = sys.argv[1]
    dst = sys.argv[2] if len(sys.argv) > 2 else os.path.splitext(src)[0] + ".svg"
    with open(src) as f:
        print(render(json.load(f), dst))
    return 0


if __name__ == "__main__":
    sys.exit(main())
