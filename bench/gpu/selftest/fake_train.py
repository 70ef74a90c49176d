#!/usr/bin/env python3
"""CPU stand-in for bench/gpu/jobs/train.py (same arguments, same JSON)."""
import hashlib
import json
import os
import random
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "jobs"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train  # noqa: E402  (its argument parser; it imports torch only to run)
from fake_gpu import attach  # noqa: E402

RATE = {"big": 20.0, "small": 60.0, "dense": 10.0, "hostphase": 15.0, "tiny": 2000.0}


def main():
    a = train.parse(sys.argv[1:])
    if a.check_args:
        print("arguments ok")
        return 0
    t_start = time.time()
    time.sleep(0.3)  # "import torch"
    start_at, reps = a.start_at, a.cpu_reps
    if a.go_file:
        go = train.wait_go(a.go_file, a.go_timeout_s)
        start_at = go["start_at"]
        reps = reps or go.get("cpu_reps")
    t_go = time.time()
    sm = attach()
    time.sleep(0.4)  # CUDA init, model build, minimum warm-up
    ready = time.time()
    start_at = start_at or ready
    late = ready > start_at + 0.1 * a.window_s
    first = int(-(-(ready - start_at) // a.window_s)) if late else 0
    rng = random.Random(os.getpid())
    rate = RATE[a.job] * sm / 132
    wins = []
    for i in range(first, a.windows):
        s0 = max(time.time(), start_at + i * a.window_s)
        train.sleep_until(start_at + (i + 1) * a.window_s)
        dt = time.time() - s0
        k = max(1, round(rate * dt * rng.uniform(0.9, 1.1)))
        wins.append({"i": i, "steps": k, "s": round(dt, 5), "sps": round(k / dt, 5)})
    tail = 0
    if a.stop_file:
        t_end = time.time() + a.max_tail_s
        while not os.path.exists(a.stop_file) and time.time() < t_end:
            time.sleep(0.02)
            tail += 1
    out = {"job": a.job, "pid": os.getpid(), "ok": True, "torch": "fake", "cuda": "fake",
           "gpu": "Fake H200", "sm_count": sm, "start_at": start_at, "ready_at": ready,
           "ready_after_go_s": round(ready - t_go, 3), "late_start": late, "windows_missed": first,
           "windows": wins, "steps_per_s": sorted(w["sps"] for w in wins)[len(wins) // 2] if wins else None,
           "digest": hashlib.sha256((a.job + ("" if sm == 132 else "-split")).encode()).hexdigest(),
           "digest_step": 10, "tail_steps": tail, "import_s": 0.3, "wall_s": time.time() - t_start}
    if a.job == "hostphase":
        out.update(cpu_reps=reps or 3, cpu_frac=0.4, cpu_phase_ms=10.0, gpu_phase_ms=15.0)
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
