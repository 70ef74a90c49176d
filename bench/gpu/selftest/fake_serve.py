#!/usr/bin/env python3
"""CPU stand-in for bench/gpu/serve_llm.py: the command line the mixed
benchmark codes against, and a JSON result of the same shape."""
import argparse
import hashlib
import json
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fake_gpu import attach  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--calibrate", action="store_true")
    ap.add_argument("--arrivals", choices=("poisson", "bursty"), default="poisson")
    ap.add_argument("--rate", type=float)
    ap.add_argument("--duration", type=float)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--graphs", type=int, default=0)
    ap.add_argument("--prompt-len", type=int, default=256)
    ap.add_argument("--gen-len", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--start-at", type=float)
    ap.add_argument("--go-file")  # as serve_llm.py: wait for it before touching the GPU
    ap.add_argument("--slo-tpot-ms", type=float)
    ap.add_argument("--slo-ttft-ms", type=float)
    ap.add_argument("--json", required=True)
    a = ap.parse_args()
    time.sleep(0.5)  # imports
    if a.go_file and not a.calibrate:
        while not os.path.exists(a.go_file):
            time.sleep(0.01)
        with open(a.go_file) as f:
            a.start_at = float(json.load(f)["start_at"])
    sm = attach()
    if a.calibrate:
        time.sleep(1.0)
        res = {"capacity_rps": 4.0, "tpot_ms": 8.0, "ttft_ms": 25.0}
    else:
        for k in ("rate", "duration", "start_at", "slo_tpot_ms", "slo_ttft_ms"):
            if getattr(a, k) is None:
                ap.error(f"--{k.replace('_', '-')} is required")
        late = time.time() > a.start_at
        while time.time() < a.start_at:
            time.sleep(0.02)
        time.sleep(a.duration + 0.2)
        rng = random.Random(a.seed * 1000 + os.getpid())
        slow = 1.0 if sm == 132 else 1.5
        n = max(5, int(a.rate * a.duration))
        e2e = sorted(rng.uniform(400, 700) * slow for _ in range(n))
        pct = lambda xs, p: xs[min(len(xs) - 1, int(p * len(xs)))]
        stats = lambda xs: {"p50": pct(xs, 0.5), "p99": pct(xs, 0.99), "p999": pct(xs, 0.999)}
        tpot = sorted(rng.uniform(7, 10) * slow for _ in range(n))
        ttft = sorted(rng.uniform(20, 40) * slow for _ in range(n))
        res = {"ttft_ms": stats(ttft), "tpot_ms": stats(tpot), "e2e_ms": stats(e2e),
               "tpot_slo_violation": sum(t > a.slo_tpot_ms for t in tpot) / n,
               "ttft_slo_violation": sum(t > a.slo_ttft_ms for t in ttft) / n, "requests": n,
               "tokens_digest": hashlib.sha256(f"tokens{a.seed}".encode()).hexdigest(),
               "logits_digest": hashlib.sha256(f"logits{a.seed}{sm}".encode()).hexdigest(),
               "e2e_ms_all": e2e, "late_start": late}
    with open(a.json, "w") as f:
        json.dump(res, f)
    print(json.dumps({k: v for k, v in res.items() if k != "e2e_ms_all"}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
