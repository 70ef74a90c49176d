#!/usr/bin/env python3
"""Where a synchronized step's time goes: lines up an application's step
stamps (decode_replay.py --stamps: CLOCK_MONOTONIC ns before the launch,
after it, after the read-back) with a VE_TRACE timeline of the same run (its
otherData origin_ns puts ts 0 on the same clock), and prints the median,
p10 and p90 of each part of a step in us:

  pre    step start -> the step's longest op (the graph) called (Python,
         PyTorch, shim, and the ops called before it: 'before')
  ops    ops called in the step
  hop    longest op called -> submitted to the driver (hand-over, dispatcher)
  big    its submission -> completion seen (GPU work and detection)
  rest   its completion seen -> the step's last op's completion seen
  wake   last op's completion seen -> read-back returned to Python, in two
         with the trace's wait slices: notice (completion seen -> the
         application thread's wait ended) and back (-> Python)
  loop   read-back returned -> next step start (Python)
  sms    SMs of the entry the longest op ran on
  launch / read   the application's own split (as decode_replay --parts)

With only a stamps file (a native run) it prints launch, read and loop.
  step_split.py STAMPS.json [TRACE.json]
"""
import json
import sys


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def ops_of(trace):
    """Each op once (its entry-track slice): (call, submit, start, end) ns."""
    origin = trace["otherData"]["origin_ns"]
    seen, ops = set(), []
    for e in trace["traceEvents"]:
        a = e.get("args", {})
        if e.get("ph") != "X" or "key" not in a or "call_to_submit_us" not in a:
            continue
        start = origin + e["ts"] * 1e3
        end = start + e["dur"] * 1e3
        k = (round(start), round(end), a["stream"], a["key"])
        if k in seen:
            continue
        seen.add(k)
        submit = start - a.get("submit_to_start_us", 0) * 1e3
        ops.append((submit - a["call_to_submit_us"] * 1e3, submit, start, end, a.get("sms", 0)))
    ops.sort()
    return ops


def waits_of(trace):
    """The application threads' waits: (begin, end) ns, by end."""
    origin = trace["otherData"]["origin_ns"]
    w = [(origin + e["ts"] * 1e3, origin + (e["ts"] + e["dur"]) * 1e3)
         for e in trace["traceEvents"]
         if e.get("ph") == "X" and "wait_us" in e.get("args", {})]
    return sorted(w, key=lambda x: x[1])


def split(stamps, ops, waits=()):
    parts = {k: [] for k in ("pre", "before", "ops", "hop", "big", "rest", "wake", "notice",
                             "back", "loop", "launch", "read", "sms")}
    j = wi = 0
    for i, (t0, t1, t2) in enumerate(stamps):
        parts["launch"].append((t1 - t0) / 1e3)
        parts["read"].append((t2 - t1) / 1e3)
        if i + 1 < len(stamps):
            parts["loop"].append((stamps[i + 1][0] - t2) / 1e3)
        if ops is None:
            continue
        while j < len(ops) and ops[j][0] < t0:
            j += 1
        mine = []
        while j < len(ops) and ops[j][0] <= t2:
            mine.append(ops[j])
            j += 1
        if not mine:
            continue
        b = max(range(len(mine)), key=lambda x: mine[x][3] - mine[x][2])
        c, s, _, e, sms = mine[b]
        parts["sms"].append(sms)
        parts["pre"].append((c - t0) / 1e3)
        parts["before"].append(b)
        parts["ops"].append(len(mine))
        parts["hop"].append((s - c) / 1e3)
        parts["big"].append((e - s) / 1e3)
        last_end = max(o[3] for o in mine)
        parts["rest"].append((last_end - e) / 1e3)
        parts["wake"].append((t2 - last_end) / 1e3)
        while wi < len(waits) and waits[wi][1] < t1:
            wi += 1
        w_end = None
        while wi < len(waits) and waits[wi][1] <= t2:
            w_end = waits[wi][1]
            wi += 1
        if w_end is not None:
            parts["notice"].append((w_end - last_end) / 1e3)
            parts["back"].append((t2 - w_end) / 1e3)
    return {k: v for k, v in parts.items() if v}


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    stamps = json.load(open(sys.argv[1]))["steps"]
    trace = json.load(open(sys.argv[2])) if len(sys.argv) == 3 else None
    res = split(stamps, ops_of(trace) if trace else None, waits_of(trace) if trace else ())
    print(f"{'part':8} {'p50':>9} {'p10':>9} {'p90':>9}  ({len(stamps)} steps)")
    out = {}
    for k, v in res.items():
        out[k] = {"p50": round(pct(v, 0.5), 2), "p10": round(pct(v, 0.1), 2),
                  "p90": round(pct(v, 0.9), 2)}
        print(f"{k:8} {out[k]['p50']:9.2f} {out[k]['p10']:9.2f} {out[k]['p90']:9.2f}")
    print(json.dumps({"steps": len(stamps), "parts_us": out}))


if __name__ == "__main__":
    main()
