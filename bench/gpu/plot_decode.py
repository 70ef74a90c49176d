#!/usr/bin/env python3
"""Plots bench/results/decode.json (bench/gpu/decode) as an SVG with no
dependencies: per mode, the generations bitwise identical to native, those
with the same tokens but other logits bits, and those whose tokens diverged
(left); where each divergent generation's first differing token is (right).

    bench/gpu/plot_decode.py bench/results/decode.json [out.svg]
"""
import json
import sys
from xml.sax.saxutils import escape

GREEN, AMBER, RED, GREY = "#59a14f", "#e0a030", "#d04a3a", "#888888"


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    src = sys.argv[1]
    dst = sys.argv[2] if len(sys.argv) > 2 else src.rsplit(".", 1)[0] + ".svg"
    with open(src) as f:
        d = json.load(f)
    modes = d.get("modes", {})
    native = d.get("native") or {}
    tokens = native.get("tokens") or max([max(m.get("first_divergence") or [0]) + 1 for m in modes.values()] + [1])
    W, top, rh = 900, 78, 58
    H = top + rh * max(1, len(modes)) + 60
    bx, bw = 130, 300  # generations bar
    px, pw = 480, 380  # divergence positions
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif">',
           f'<rect width="{W}" height="{H}" fill="white"/>',
           f'<text x="{W / 2}" y="22" font-size="15" text-anchor="middle">Greedy decode vs native: '
           f'bitwise identical or not</text>',
           f'<text x="{W / 2}" y="40" font-size="10" text-anchor="middle">{escape(d.get("machine", ""))}, '
           f'{escape(str(d.get("date", "")))}; {native.get("generations", "?")} native generations of '
           f'{tokens} tokens, {(native.get("model") or {}).get("layers", "?")}-layer model</text>',
           f'<text x="{bx + bw / 2}" y="{top - 12}" font-size="12" text-anchor="middle" font-weight="bold">'
           f'generations</text>',
           f'<text x="{px + pw / 2}" y="{top - 12}" font-size="12" text-anchor="middle" font-weight="bold">'
           f'first differing token position</text>']
    for i, (name, m) in enumerate(modes.items()):
        y = top + i * rh
        svg.append(f'<text x="{bx - 10}" y="{y + 22}" font-size="12" text-anchor="end">{escape(name)}</text>')
        n = m.get("generations") or 0
        if m.get("skipped") or n == 0:
            svg.append(f'<text x="{bx}" y="{y + 22}" font-size="11" fill="{GREY}">skipped: '
                       f'{escape(str(m.get("skipped", "no generations")))[:90]}</text>')
            continue
        div = m.get("first_divergence") or []
        ident = m.get("identical_to_native") or 0
        parts = [(ident, GREEN), (max(0, n - ident - len(div)), AMBER), (len(div), RED)]
        x = bx
        for cnt, col in parts:
            wpx = bw * cnt / n
            if wpx > 0:
                svg.append(f'<rect x="{x:.1f}" y="{y + 8}" width="{wpx:.1f}" height="22" fill="{col}"/>')
                if wpx > 22:
                    svg.append(f'<text x="{x + wpx / 2:.1f}" y="{y + 23}" font-size="10" fill="white" '
                               f'text-anchor="middle">{cnt}</text>')
            x += wpx
        dl = m.get("logits_max_abs_diff")
        svg.append(f'<text x="{bx}" y="{y + 44}" font-size="9" fill="#444">{ident}/{n} bitwise identical, '
                   f'{len(div)} diverged; max |logit - native| '
                   f'{"n/a" if dl is None else f"{dl:.4g}"}</text>')
        svg.append(f'<line x1="{px}" y1="{y + 30}" x2="{px + pw}" y2="{y + 30}" stroke="#bbb"/>')
        for j, pos in enumerate(div):
            cx = px + pw * min(pos, tokens - 1) / max(1, tokens - 1)
            cy = y + 12 + (j * 7) % 17  # spread overlapping dots deterministically
            svg.append(f'<circle cx="{cx:.1f}" cy="{cy}" r="2.6" fill="{RED}" fill-opacity="0.75"/>')
        if not div:
            svg.append(f'<text x="{px + pw / 2}" y="{y + 24}" font-size="10" fill="{GREY}" '
                       f'text-anchor="middle">no token diverged</text>')
    ya = top + rh * max(1, len(modes))
    for t in (0, tokens // 4, tokens // 2, 3 * tokens // 4, tokens - 1):
        x = px + pw * t / max(1, tokens - 1)
        svg.append(f'<line x1="{x:.1f}" y1="{ya - 6}" x2="{x:.1f}" y2="{ya}" stroke="#444"/>')
        svg.append(f'<text x="{x:.1f}" y="{ya + 12}" font-size="9" text-anchor="middle">{t}</text>')
    ly = ya + 34
    for k, (lab, col) in enumerate((("bitwise identical", GREEN), ("same tokens, logits bits differ", AMBER),
                                    ("tokens diverged", RED))):
        lx = bx + k * 210
        svg.append(f'<rect x="{lx}" y="{ly - 9}" width="10" height="10" fill="{col}"/>')
        svg.append(f'<text x="{lx + 14}" y="{ly}" font-size="10">{lab}</text>')
    svg.append("</svg>")
    with open(dst, "w") as f:
        f.write("\n".join(svg) + "\n")
    print(f"wrote {dst}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
