#!/usr/bin/env python3
"""How the steps of two decode servers line up (decode_replay.py --stamps of
both, CLOCK_MONOTONIC ns before each launch, after it, after the read-back).

Two servers of the same step lock into a phase and keep it for the run; in
some runs of any mode the pair ran ~2% faster than in the others. A server's
host gap (its read-back returned -> its next launch) is time the GPU has
none of its work: when both servers' gaps fall together the GPU idles, when
they alternate the other server's kernels fill it. This prints, for a pair:

  gap_us        median host gap of each server
  period_us     median step of each server
  both_idle     fraction of server 0's gap time during which server 1 is in
                its gap too (1: the gaps fall together, 0: they alternate)
  phase         server 1's step start after server 0's, as a fraction of
                server 0's step (median, and a 10-bin histogram)

  pair_phase.py A.stamps.json B.stamps.json      (one JSON line)
"""
import bisect
import json
import statistics
import sys


def load(path):
    with open(path) as f:
        return json.load(f)["steps"]


def _intervals_gap(steps):
    """[(start, end)] of the host gaps: read-back returned -> next launch."""
    return [(steps[i][2], steps[i + 1][0]) for i in range(len(steps) - 1)]


def phase(a, b):
    """a, b: lists of (t0, t1, t2) ns. None when either is too short."""
    if len(a) < 3 or len(b) < 3:
        return None
    ga, gb = _intervals_gap(a), _intervals_gap(b)
    # Time both are in their gaps: walk the two sorted interval lists.
    both, i, j = 0, 0, 0
    while i < len(ga) and j < len(gb):
        lo = max(ga[i][0], gb[j][0])
        hi = min(ga[i][1], gb[j][1])
        if hi > lo:
            both += hi - lo
        if ga[i][1] < gb[j][1]:
            i += 1
        else:
            j += 1
    gap_a = sum(max(0, e - s) for s, e in ga)
    per_a = [a[k + 1][0] - a[k][0] for k in range(len(a) - 1)]
    per_b = [b[k + 1][0] - b[k][0] for k in range(len(b) - 1)]
    pa = statistics.median(per_a)
    starts_a = [s[0] for s in a]
    fr = []
    for s in b:
        k = bisect.bisect_right(starts_a, s[0]) - 1
        if 0 <= k < len(a) - 1:
            fr.append(((s[0] - starts_a[k]) / pa) % 1.0)
    hist = [0] * 10
    for x in fr:
        hist[min(9, int(x * 10))] += 1
    return {
        "gap_us": [round(statistics.median(e - s for s, e in g) / 1e3, 2) for g in (ga, gb)],
        "period_us": [round(pa / 1e3, 2), round(statistics.median(per_b) / 1e3, 2)],
        "both_idle": round(both / gap_a, 3) if gap_a else None,
        "phase_median": round(statistics.median(fr), 3) if fr else None,
        "phase_hist": hist,
    }


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    print(json.dumps(phase(load(argv[1]), load(argv[2]))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
