#!/usr/bin/env python3
"""Drift histograms as an SVG, no dependencies: one panel per workload and
mode, one bar per distinct output (height = trials that produced it, tallest
first), titled with the number of distinct outputs and the max ULP.

    plot.py bench/results/drift.json [drift-detail.json] [out.svg]

Without the detail file (which holds the histograms) each panel shows the
numbers only.
"""
import json
import os
import sys

MODES = ["ve_chaos", "ve_tput", "reshape_grid", "reshape_cublas", "mps_split", "green_ctx_raw"]
VE = {"ve_chaos", "ve_tput"}


def esc(s):
    return str(s).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def panel(x, y, w, h, m, hist):
    out = [f'<rect x="{x}" y="{y}" width="{w}" height="{h}" fill="#fafafa" stroke="#ccc"/>']
    if m is None:
        out.append(f'<text x="{x + w / 2}" y="{y + h / 2}" font-size="10" fill="#999" '
                   f'text-anchor="middle">n/a</text>')
        return out
    d, u, t = m["distinct_outputs"], m["max_ulp"], m["trials"]
    color = "#3b7dd8" if d == 1 else "#d8543b"
    out.append(f'<text x="{x + 4}" y="{y + 12}" font-size="9" font-weight="bold" fill="{color}">'
               f'{d} distinct ({t} trials)</text>')
    out.append(f'<text x="{x + 4}" y="{y + 24}" font-size="9">max ULP {u}</text>')
    if not hist:
        return out
    counts = sorted(hist.values(), reverse=True)
    shown = counts[:24]
    rest = sum(counts[24:])
    if rest:
        shown.append(rest)
    top = max(shown)
    bx, by, bw, bh = x + 4, y + 30, w - 8, h - 34
    step = bw / len(shown)
    for i, c in enumerate(shown):
        hh = bh * c / top
        fill = "#999" if rest and i == len(shown) - 1 else color
        out.append(f'<rect x="{bx + i * step + 0.5:.1f}" y="{by + bh - hh:.1f}" '
                   f'width="{max(1.0, step - 1):.1f}" height="{hh:.1f}" fill="{fill}"/>')
    return out


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    src = sys.argv[1]
    detail_path = sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(src) or ".", "drift-detail.json")
    dst = sys.argv[3] if len(sys.argv) > 3 else src.rsplit(".", 1)[0] + ".svg"
    d = json.load(open(src))
    detail = {}
    if os.path.exists(detail_path):
        detail = json.load(open(detail_path)).get("workloads", {})
    wl = d["workloads"]
    modes = [m for m in MODES if any(m in w["modes"] for w in wl)] or MODES
    lw, pw, ph, top = 150, 130, 90, 60
    W = lw + pw * len(modes) + 10
    H = top + ph * max(1, len(wl)) + 40
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif">',
           f'<rect width="{W}" height="{H}" fill="white"/>',
           f'<text x="{W / 2}" y="20" font-size="14" text-anchor="middle">Output drift: trials per '
           f'distinct output</text>',
           f'<text x="{W / 2}" y="36" font-size="10" text-anchor="middle">{esc(d.get("machine", ""))}, '
           f'{esc(d.get("date", ""))}</text>']
    for j, mode in enumerate(modes):
        cx = lw + j * pw + pw / 2
        weight = "bold" if mode in VE else "normal"
        svg.append(f'<text x="{cx}" y="{top - 6}" font-size="11" text-anchor="middle" '
                   f'font-weight="{weight}">{mode}</text>')
    for i, w in enumerate(wl):
        y = top + i * ph
        svg.append(f'<text x="{lw - 6}" y="{y + ph / 2}" font-size="11" text-anchor="end">{esc(w["name"])}</text>')
        for j, mode in enumerate(modes):
            m = w["modes"].get(mode)
            hist = detail.get(w["name"], {}).get(mode, {}).get("hist")
            svg += panel(lw + j * pw + 2, y + 2, pw - 4, ph - 4, m, hist)
    svg.append(f'<text x="10" y="{H - 12}" font-size="9">blue: one output in every trial (bitwise '
               f'identical); red: drift. Bars: trials per distinct output, tallest first (grey: the rest).</text>')
    svg.append("</svg>")
    with open(dst, "w") as f:
        f.write("\n".join(svg) + "\n")
    print(f"wrote {dst}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
