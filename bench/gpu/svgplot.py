"""Dependency-free SVG pieces for the benchmark plots: grouped bars with
min-max whiskers, latency CDFs, a legend and the document around them.
Each panel function returns a list of SVG elements placed at (x, y)."""
import math

PALETTE = ["#3b7dd8", "#e07b39", "#59a14f", "#9c6ade", "#c9b61c", "#d64f6d", "#4bb5c1",
           "#888888", "#8c564b", "#17becf"]


def color(i):
    return PALETTE[i % len(PALETTE)]


def esc(s):
    return (str(s).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace('"', "&quot;"))


def text(x, y, s, size=10, anchor="middle", weight=None, rotate=None, fill="#000"):
    extra = f' font-weight="{weight}"' if weight else ""
    if rotate is not None:
        extra += f' transform="rotate({rotate} {x:.1f} {y:.1f})"'
    return (f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}" '
            f'fill="{fill}"{extra}>{esc(s)}</text>')


def nice_ceil(v):
    """Smallest 1, 2, 2.5 or 5 x 10^k at or above v."""
    if v <= 0:
        return 1.0
    e = 10 ** math.floor(math.log10(v))
    for m in (1, 2, 2.5, 5, 10):
        if m * e >= v * (1 - 1e-9):
            return m * e
    return 10 * e


def tick_fmt(v):
    if v == 0:
        return "0"
    if abs(v) >= 100:
        return f"{v:.0f}"
    if abs(v) >= 1:
        return f"{v:g}"
    return f"{v:.2g}"


def bar_panel(x, y, w, h, title, groups, series, get, fmt=lambda v: f"{v:.2f}", ylabel="",
              ref=None, marks=None, vmax=None):
    """Grouped bars: groups along x, one bar per series in each group.
    get(gi, si) -> None | (value, lo, hi) (lo/hi may be None: no whisker).
    marks(gi, si) -> a short string printed above the bar ('' for none).
    ref: a value drawn as a dashed line (e.g. 1.0 for normalized throughput)."""
    out = [text(x + w / 2, y - 8, title, 12, weight="bold")]
    vals = []
    for gi in range(len(groups)):
        for si in range(len(series)):
            r = get(gi, si)
            if r and r[0] is not None:
                vals += [r[0]] + [v for v in r[1:] if v is not None]
    want = max(vals + ([ref] if ref else []) + [1e-12]) * 1.12 if vmax is None else vmax
    step = nice_ceil(want / 4)
    nt = max(1, math.ceil(want / step - 1e-9))
    top = step * nt
    sy = lambda v: y + h - h * max(0.0, min(v, top)) / top
    for k in range(nt + 1):
        v = step * k
        out.append(f'<line x1="{x}" y1="{sy(v):.1f}" x2="{x + w}" y2="{sy(v):.1f}" '
                   f'stroke="#ddd" stroke-width="1"/>')
        out.append(text(x - 4, sy(v) + 3, tick_fmt(v), 9, "end"))
    if ylabel:
        out.append(text(x - 34, y + h / 2, ylabel, 10, rotate=-90))
    if ref is not None and ref <= top:
        out.append(f'<line x1="{x}" y1="{sy(ref):.1f}" x2="{x + w}" y2="{sy(ref):.1f}" '
                   f'stroke="#444" stroke-dasharray="4,3"/>')
    ng, ns = max(1, len(groups)), max(1, len(series))
    gw = w / ng
    bw = gw * 0.8 / ns
    for gi, g in enumerate(groups):
        gx = x + gi * gw + gw * 0.1
        for si in range(len(series)):
            cx = gx + (si + 0.5) * bw
            r = get(gi, si)
            if not r or r[0] is None:
                out.append(text(cx, y + h - 3, "n/a", 7, rotate=-90 if bw < 16 else None))
                continue
            v, lo, hi = (list(r) + [None, None])[:3]
            out.append(f'<rect x="{cx - bw * 0.45:.1f}" y="{sy(v):.1f}" width="{bw * 0.9:.1f}" '
                       f'height="{y + h - sy(v):.1f}" fill="{color(si)}"/>')
            if lo is not None and hi is not None and hi > lo:
                out.append(f'<line x1="{cx:.1f}" y1="{sy(lo):.1f}" x2="{cx:.1f}" y2="{sy(hi):.1f}" '
                           f'stroke="#000" stroke-width="1"/>')
                for yy in (sy(lo), sy(hi)):
                    out.append(f'<line x1="{cx - bw * 0.2:.1f}" y1="{yy:.1f}" x2="{cx + bw * 0.2:.1f}" '
                               f'y2="{yy:.1f}" stroke="#000" stroke-width="1"/>')
            label = fmt(v) + ((" " + marks(gi, si)) if marks and marks(gi, si) else "")
            ty = min(sy(v), sy(hi) if hi is not None else sy(v)) - 3
            if bw < 22:
                out.append(text(cx + 3, ty, label, 8, "start", rotate=-90))
            else:
                out.append(text(cx, ty, label, 9))
        out.append(text(x + gi * gw + gw / 2, y + h + 13, g, 10))
    out.append(f'<line x1="{x}" y1="{y + h}" x2="{x + w}" y2="{y + h}" stroke="#444"/>')
    return out


def legend(x, y, names, width=800):
    out, cx, cy = [], x, y
    for i, n in enumerate(names):
        wd = 18 + 6.2 * len(str(n)) + 14
        if cx + wd > x + width and cx > x:
            cx, cy = x, cy + 16
        out.append(f'<rect x="{cx:.1f}" y="{cy - 9:.1f}" width="12" height="10" fill="{color(i)}"/>')
        out.append(text(cx + 16, cy, n, 10, "start"))
        cx += wd
    return out


def _log_ticks(lo, hi):
    ticks = []
    e = math.floor(math.log10(lo))
    while 10 ** e <= hi * 1.0001:
        for m in (1, 2, 5):
            v = m * 10 ** e
            if lo <= v <= hi:
                ticks.append(v)
        e += 1
    return ticks


def cdf_panel(x, y, w, h, title, series, xlabel="latency (ms)", log_x=None, tail=False):
    """Empirical CDFs, one line per (name, values); x on a log scale when the
    values span more than 20x (unless log_x says otherwise). tail=True draws
    1 - CDF on a log scale down to 1e-3 instead, where p99 and p99.9 show."""
    out = [text(x + w / 2, y - 8, title, 12, weight="bold")]
    allv = [v for _, vs in series for v in vs if v is not None and v > 0]
    if not allv:
        out.append(text(x + w / 2, y + h / 2, "no data", 11))
        return out
    lo, hi = min(allv), max(allv)
    if log_x is None:
        log_x = hi / lo > 20
    if log_x:
        lo_e, hi_e = math.log10(lo) - 0.02, math.log10(hi) + 0.02
        sx = lambda v: x + w * (math.log10(max(v, 1e-12)) - lo_e) / (hi_e - lo_e)
        ticks = _log_ticks(10 ** lo_e, 10 ** hi_e)
    else:
        top = nice_ceil(hi)
        lo_v = 0.0
        sx = lambda v: x + w * (v - lo_v) / (top - lo_v)
        ticks = [top * k / 5 for k in range(6)]
    if tail:
        floor = 1e-3
        sy = lambda p: y + h * min(1.0, math.log10(max(1 - p, floor)) / math.log10(floor))
        for p, lab in ((0, "1"), (0.9, "0.1"), (0.99, "0.01 (p99)"), (0.999, "0.001")):
            out.append(f'<line x1="{x}" y1="{sy(p):.1f}" x2="{x + w}" y2="{sy(p):.1f}" stroke="#ddd"/>')
            out.append(text(x - 4, sy(p) + 3, lab, 9, "end"))
    else:
        sy = lambda p: y + h - h * p
        for p in (0, 0.25, 0.5, 0.75, 0.9, 1.0):
            out.append(f'<line x1="{x}" y1="{sy(p):.1f}" x2="{x + w}" y2="{sy(p):.1f}" stroke="#ddd"/>')
            out.append(text(x - 4, sy(p) + 3, f"{p:g}", 9, "end"))
    for t in ticks:
        out.append(f'<line x1="{sx(t):.1f}" y1="{y}" x2="{sx(t):.1f}" y2="{y + h}" stroke="#eee"/>')
        out.append(text(sx(t), y + h + 12, tick_fmt(t), 9))
    out.append(text(x + w / 2, y + h + 26, xlabel + (" (log scale)" if log_x else ""), 10))
    out.append(f'<rect x="{x}" y="{y}" width="{w}" height="{h}" fill="none" stroke="#444"/>')
    for i, (name, vs) in enumerate(series):
        vs = sorted(v for v in vs if v is not None and v > 0)
        if not vs:
            continue
        n = len(vs)
        pts = [(sx(vs[0]), sy(0))]
        for k, v in enumerate(vs):
            pts.append((sx(v), sy(k / n)))
            pts.append((sx(v), sy((k + 1) / n)))
        path = " ".join(f"{a:.1f},{b:.1f}" for a, b in pts)
        out.append(f'<polyline points="{path}" fill="none" stroke="{color(i)}" stroke-width="1.6"/>')
    return out


def document(width, height, title, subtitle, parts):
    head = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'font-family="sans-serif">',
            f'<rect width="{width}" height="{height}" fill="white"/>',
            text(width / 2, 22, title, 15),
            text(width / 2, 40, subtitle, 10)]
    return "\n".join(head + parts + ["</svg>"]) + "\n"
