#!/usr/bin/env python3
"""Pool cost bars as an SVG, no dependencies: one panel per measure
(start-up, binding p50 and p99 on a log scale, device memory, host RSS,
allocations offered), one bar per variant.

    plot.py bench/results/pool.json [out.svg]
"""
import json
import math
import sys

VARIANTS = ["hierarchical", "flat", "on_demand", "mps"]
COLORS = {"hierarchical": "#3b7dd8", "flat": "#59a14f", "on_demand": "#e07b39", "mps": "#9c6ade"}
PANELS = [("startup_ms", "start-up (ms)", False), ("bind_us_p50", "binding p50 (us, log)", True),
          ("bind_us_p99", "binding p99 (us, log)", True), ("device_mib", "device memory (MiB)", False),
          ("host_rss_mib", "host RSS (MiB)", False), ("allocations", "allocations offered", False)]


def esc(s):
    return str(s).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def fmt(v):
    if v is None:
        return "n/a"
    if abs(v) >= 100:
        return f"{v:.0f}"
    return f"{v:.1f}" if abs(v) >= 1 else f"{v:.2f}"


def panel(x0, y0, w, h, title, vals, log):
    out = [f'<text x="{x0 + w / 2}" y="{y0 - 8}" font-size="12" text-anchor="middle" '
           f'font-weight="bold">{esc(title)}</text>',
           f'<line x1="{x0}" y1="{y0 + h}" x2="{x0 + w}" y2="{y0 + h}" stroke="#444"/>']
    present = [v for v in vals if v is not None and v > 0]
    vmax = max(present) if present else 1.0

    def height(v):
        if v is None or v <= 0:
            return 0.0
        if log:
            lo = math.log10(min(present)) - 0.5 if present else 0
            hi = math.log10(vmax)
            return h * (math.log10(v) - lo) / max(1e-9, hi - lo)
        return h * v / vmax

    n = len(vals)
    bw = w / n * 0.6
    for i, v in enumerate(vals):
        cx = x0 + (i + 0.5) * w / n
        hh = height(v)
        name = VARIANTS[i]
        if hh > 0:
            out.append(f'<rect x="{cx - bw / 2:.1f}" y="{y0 + h - hh:.1f}" width="{bw:.1f}" '
                       f'height="{hh:.1f}" fill="{COLORS[name]}"/>')
        out.append(f'<text x="{cx:.1f}" y="{y0 + h - hh - 4:.1f}" font-size="10" '
                   f'text-anchor="middle">{fmt(v)}</text>')
        out.append(f'<text x="{cx:.1f}" y="{y0 + h + 13}" font-size="9" '
                   f'text-anchor="middle">{name}</text>')
    return out


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    src = sys.argv[1]
    dst = sys.argv[2] if len(sys.argv) > 2 else src.rsplit(".", 1)[0] + ".svg"
    d = json.load(open(src))
    pw, ph, cols = 300, 140, 3
    rows = (len(PANELS) + cols - 1) // cols
    W, H = pw * cols + 20, 70 + rows * (ph + 60) + 30
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif">',
           f'<rect width="{W}" height="{H}" fill="white"/>',
           f'<text x="{W / 2}" y="22" font-size="14" text-anchor="middle">Pool of SM partitions: '
           f'what each variant costs</text>',
           f'<text x="{W / 2}" y="38" font-size="10" text-anchor="middle">{esc(d.get("machine", ""))}, '
           f'{esc(d.get("date", ""))}</text>']
    for k, (field, title, log) in enumerate(PANELS):
        r, c = divmod(k, cols)
        vals = [(d["variants"].get(v) or {}).get(field) for v in VARIANTS]
        svg += panel(20 + c * pw + 10, 70 + r * (ph + 60) + 20, pw - 40, ph, title, vals, log)
    rt = d.get("runtime", {})
    svg.append(f'<text x="20" y="{H - 12}" font-size="10">runtime: libve.so adds '
               f'{fmt(rt.get("libve_device_mib"))} MiB device, {fmt(rt.get("libve_rss_mib"))} MiB RSS '
               f'to a PyTorch process; idle ved {fmt(rt.get("ved_rss_mib"))} MiB RSS</text>')
    svg.append("</svg>")
    with open(dst, "w") as f:
        f.write("\n".join(svg) + "\n")
    print(f"wrote {dst}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
