#!/usr/bin/env python3
"""Plots a ve-sim JSON result (bench/results/sim-*.json) as an SVG bar chart,
with no dependencies: per policy, the aggregate normalized throughput (with
its min-max range over seeds), with the oracle's best static partition and
upper bound beside it when the run had --oracle, and, where the scenario has
them, TPOT/TTFT SLO violation rates and latency p99.

    bench/plot_sim.py bench/results/sim-llm-serving.json [out.svg]
"""
import json
import sys


def bar_group(x0, y0, w, h, title, labels, values, ranges, fmt, vmax):
    out = [f'<text x="{x0 + w / 2}" y="{y0 - 8}" font-size="13" text-anchor="middle" '
           f'font-weight="bold">{title}</text>',
           f'<line x1="{x0}" y1="{y0 + h}" x2="{x0 + w}" y2="{y0 + h}" stroke="#444"/>']
    n = max(1, len(values))
    bw = w / n * 0.6
    colors = ["#3b7dd8", "#e07b39", "#59a14f", "#9c6ade", "#c9b61c", "#888888"]
    for i, (lab, v) in enumerate(zip(labels, values)):
        cx = x0 + (i + 0.5) * w / n
        if v is None:
            out.append(f'<text x="{cx}" y="{y0 + h - 4}" font-size="10" text-anchor="middle">n/a</text>')
        else:
            bh = 0 if vmax <= 0 else h * v / vmax
            out.append(f'<rect x="{cx - bw / 2}" y="{y0 + h - bh}" width="{bw}" height="{bh}" '
                       f'fill="{colors[i % len(colors)]}"/>')
            out.append(f'<text x="{cx}" y="{y0 + h - bh - 4}" font-size="10" '
                       f'text-anchor="middle">{fmt(v)}</text>')
            r = ranges[i] if ranges else None
            if r and vmax > 0 and r[1] > r[0]:
                ya, yb = y0 + h - h * r[0] / vmax, y0 + h - h * r[1] / vmax
                out.append(f'<line x1="{cx}" y1="{ya}" x2="{cx}" y2="{yb}" stroke="#000"/>')
        out.append(f'<text x="{cx}" y="{y0 + h + 14}" font-size="10" text-anchor="middle">{lab}</text>')
    return out


def main():
    src = sys.argv[1]
    dst = sys.argv[2] if len(sys.argv) > 2 else src.rsplit(".", 1)[0] + ".svg"
    d = json.load(open(src))
    pols = list(d["policies"].keys())
    short = [p.split(":")[0] for p in pols]
    agg = [d["policies"][p].get("aggregate_normalized_throughput", {}) for p in pols]
    agg_labels, agg_vals = list(short), [a.get("mean") for a in agg]
    agg_ranges = [(a.get("min"), a.get("max")) if a else None for a in agg]
    orc = d.get("oracle")
    if orc:
        best = orc.get("best_static") or {}
        b = best.get("aggregate_normalized_throughput", {})
        agg_labels += ["static " + "/".join(map(str, best.get("partition", []))), "bound"]
        agg_vals += [b.get("mean"), orc.get("upper_bound")]
        agg_ranges += [(b.get("min"), b.get("max")) if b else None, None]
    groups = [("aggregate normalized throughput", agg_vals, agg_ranges, lambda v: f"{v:.3f}",
               agg_labels)]
    jobs = list(d["solo_throughput"].keys())
    for metric, title, fmt in (("tpot_slo_violation", "TPOT SLO violations", lambda v: f"{100 * v:.1f}%"),
                               ("ttft_slo_violation", "TTFT SLO violations", lambda v: f"{100 * v:.1f}%"),
                               ("latency_p99_us", "request latency p99 (ms)", lambda v: f"{v / 1000:.1f}")):
        for j in jobs:
            vals = [d["policies"][p]["jobs"].get(j, {}).get(metric, {}).get("mean") for p in pols]
            if any(v is not None for v in vals):
                groups.append((f"{j}: {title}", vals, None, fmt, short))
    W, H, gh = 440 if orc else 360, 60 + 200 * len(groups), 130
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif">',
           f'<rect width="{W}" height="{H}" fill="white"/>',
           f'<text x="{W / 2}" y="22" font-size="14" text-anchor="middle">ve-sim: {d["scenario"]}</text>',
           f'<text x="{W / 2}" y="38" font-size="10" text-anchor="middle">{d.get("seeds", 1)} seed(s), '
           f'bind {d.get("bind", "op")}, window {d.get("window", "?")}, '
           f'{d.get("horizon_ms", 0):.0f} ms virtual, {d.get("date", "")}</text>']
    for gi, (title, vals, ranges, fmt, labels) in enumerate(groups):
        vmax = max([v for v in vals if v is not None] + [r[1] for r in (ranges or []) if r and r[1]] + [1e-9])
        svg += bar_group(40, 80 + gi * 200, W - 80, gh, title, labels, vals, ranges, fmt, vmax * 1.15)
    svg.append("</svg>")
    open(dst, "w").write("\n".join(svg) + "\n")
    print(dst)


if __name__ == "__main__":
    main()
