#!/usr/bin/env python3
"""A GPU co-runner: bf16 GEMMs back to back until SIGTERM/SIGINT or
--seconds, so another job shares the GPU with a busy neighbour.

  corunner.py [--seconds 600] [--size 4096]

Prints 'corunner: running' to stderr once warm (scripts wait for it) and one
JSON line with the GEMM rate at exit. A 4096^3 GEMM takes about 0.2 ms on a
whole H200, so a scheduler sees a fresh kernel often.
"""
import argparse
import json
import signal
import sys
import time

import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=600.0, help="stop after this long in any case")
    ap.add_argument("--size", type=int, default=4096)
    a = ap.parse_args()
    if a.seconds <= 0 or not 64 <= a.size <= 32768:
        ap.error("need --seconds > 0 and 64 <= --size <= 32768")
    stop = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.append(1))
    g = torch.Generator(device="cpu").manual_seed(3)
    x = torch.randn(a.size, a.size, generator=g).to("cuda", torch.bfloat16)
    w = torch.randn(a.size, a.size, generator=g).to("cuda", torch.bfloat16) * 0.01
    y = torch.empty_like(x)
    for _ in range(3):
        torch.mm(x, w, out=y)
    torch.cuda.synchronize()
    print("corunner: running", file=sys.stderr, flush=True)
    n, t0 = 0, time.perf_counter()
    while not stop and time.perf_counter() - t0 < a.seconds:
        for _ in range(20):
            torch.mm(x, w, out=y)
        n += 20
        # Bounded queue: a stop request takes effect within 20 GEMMs.
        torch.cuda.synchronize()
    el = time.perf_counter() - t0
    print(json.dumps({"corunner": "gemm", "size": a.size, "gemms": n, "seconds": round(el, 3),
                      "tflops": round(2 * a.size ** 3 * n / el / 1e12, 2) if el > 0 else 0.0}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
