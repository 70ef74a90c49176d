#!/usr/bin/env python3
"""SMs per client over time from a metrics scrape (bench/gpu/metrics_scrape),
as a dependency-free SVG: one step line per client (the SMs it had over each
scrape interval, from ve_client_sm_seconds_total, so nothing between two
scrapes is missed), and below it Vitamin-E's device utilization.

    bench/gpu/plot_metrics.py bench/results/metrics-2026-12-03.csv [out.svg]
"""
import csv
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from svgplot import color, document, esc, nice_ceil, text  # noqa: E402,F401


def load(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        raise SystemExit(f"{path}: no rows")
    need = {"t_s", "client", "pid", "name", "class", "sms_granted", "avg_sms", "device_sms",
            "device_utilization"}
    missing = need - set(rows[0])
    if missing:
        raise SystemExit(f"{path}: not a metrics_scrape CSV (missing {sorted(missing)})")
    return rows


def fnum(s):
    try:
        return float(s)
    except (TypeError, ValueError):
        return None


def axes(x0, y0, w, h, tmax, vmax, ylabel, yfmt):
    out = [f'<line x1="{x0}" y1="{y0 + h}" x2="{x0 + w}" y2="{y0 + h}" stroke="#444"/>',
           f'<line x1="{x0}" y1="{y0}" x2="{x0}" y2="{y0 + h}" stroke="#444"/>']
    for i in range(5):
        v = vmax * i / 4
        y = y0 + h - h * i / 4
        out.append(f'<line x1="{x0}" y1="{y:.1f}" x2="{x0 + w}" y2="{y:.1f}" stroke="#eee"/>')
        out.append(text(x0 - 6, y + 3, yfmt(v), 9, "end"))
    step = nice_ceil(tmax / 8) if tmax > 0 else 1
    t = 0.0
    while t <= tmax + 1e-9:
        x = x0 + w * t / tmax if tmax > 0 else x0
        out.append(text(x, y0 + h + 14, f"{t:g}", 9))
        t += step
    out.append(text(x0 + w / 2, y0 + h + 30, "time since the first scrape (s)", 10))
    out.append(text(x0 - 38, y0 + h / 2, ylabel, 10, rotate=-90))
    return out


def step_line(x0, y0, w, h, tmax, vmax, pts, col, dash=None):
    """pts: (t_end, value) of each interval; the value holds from the previous t."""
    if not pts:
        return []
    d = []
    prev_t = None
    for t, v in pts:
        if v is None:
            prev_t = t
            continue
        x1 = x0 + w * (prev_t if prev_t is not None else t) / tmax
        x2 = x0 + w * t / tmax
        y = y0 + h - h * min(v, vmax) / vmax
        d.append(f"{'M' if not d else 'L'}{x1:.1f},{y:.1f} L{x2:.1f},{y:.1f}")
        prev_t = t
    extra = f' stroke-dasharray="{dash}"' if dash else ""
    return [f'<path d="{" ".join(d)}" fill="none" stroke="{col}" stroke-width="1.8"{extra}/>']


def render(rows, title=None):
    clients = {}
    for r in rows:
        key = (r["client"], r["pid"])
        clients.setdefault(key, []).append(r)
    tmax = max(fnum(r["t_s"]) or 0 for r in rows) or 1.0
    sms = max(fnum(r["device_sms"]) or 0 for r in rows) or 132
    W, H = 1020, 560
    x0, w = 70, 640
    parts = []
    # SMs per client.
    y0, h = 70, 260
    vmax = sms  # the whole device: the quarters of the axis are quarters of the GPU
    parts += axes(x0, y0, w, h, tmax, vmax, "SMs granted", lambda v: f"{v:.0f}")
    parts.append(text(x0 + w / 2, y0 - 10, "SMs each client had (average over each 1 s "
                      "scrape interval; dashed: at the scrape)", 11, weight="bold"))
    legend_y = y0 + 4
    for i, (key, rs) in enumerate(sorted(clients.items(), key=lambda kv: int(kv[0][0]))):
        col = color(i)
        avg = [(fnum(r["t_s"]), fnum(r["avg_sms"])) for r in rs]
        inst = [(fnum(r["t_s"]), fnum(r["sms_granted"])) for r in rs]
        parts += step_line(x0, y0, w, h, tmax, vmax, avg, col)
        parts += step_line(x0, y0, w, h, tmax, vmax, inst, col, dash="3,3")
        r0 = rs[0]
        label = f"client {r0['client']}: {r0['name']} (pid {r0['pid']}, {r0['class']})"
        parts.append(f'<rect x="{x0 + w + 14}" y="{legend_y}" width="12" height="12" fill="{col}"/>')
        parts.append(f'<text x="{x0 + w + 30}" y="{legend_y + 10}" font-size="10">{esc(label[:48])}</text>')
        legend_y += 18
    # Device utilization.
    y1, h1 = 400, 110
    parts += axes(x0, y1, w, h1, tmax, 1.0, "utilization", lambda v: f"{100 * v:.0f}%")
    parts.append(text(x0 + w / 2, y1 - 10, "SMs in use on the device (Vitamin-E's accounting)",
                      11, weight="bold"))
    dev = {}
    for r in rows:
        dev[fnum(r["t_s"])] = fnum(r["device_utilization"])
    parts += step_line(x0, y1, w, h1, tmax, 1.0, sorted(dev.items()), "#444")
    sub = title or f"{len(clients)} clients, {len(dev)} scrapes, {sms:.0f} SMs"
    return document(W, H, "Vitamin-E: SMs per client over time", sub, parts)


def main():
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(sys.argv) > 1 else 2
    src = sys.argv[1]
    dst = sys.argv[2] if len(sys.argv) > 2 else os.path.splitext(src)[0] + ".svg"
    svg = render(load(src))
    with open(dst, "w") as f:
        f.write(svg)
    print(f"wrote {dst}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
