#!/usr/bin/env python3
"""A decode loop replayed as a CUDA graph: bench/gpu/llm.py's Llama-style
model (bf16; --layers 4 by default), B slots admitted with seeded prompts,
then one graph replay per decode step (llm.Engine(graphs=True)); the host
reads the step's tokens after each step, as a server does.

Digest: SHA-256 of the tokens and logits checksums of the first --check-steps
steps (identical natively, under Vitamin-E and under MPS, alone or paired).
Throughput: steps per second, measured either over --steps steps or, with
--seconds, over that long a window starting at --start-at (epoch seconds), or
at the start time of a --go file written once every server touched its
--ready file (two servers then measure the same window). Prints one JSON line
last.
"""
import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # bench/gpu, for llm

import common  # noqa: E402
import llm  # noqa: E402
import torch  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--prompt-len", type=int, default=128)
    ap.add_argument("--check-steps", type=int, default=48)
    ap.add_argument("--steps", type=int, default=300, help="steps measured (without --seconds)")
    ap.add_argument("--seconds", type=float, default=0, help="measure for this long instead")
    ap.add_argument("--start-at", type=float, default=0, help="epoch second to start measuring")
    ap.add_argument("--ready", help="touch this file once set up, then wait for --go")
    ap.add_argument("--go", help='a JSON file {"start_at": epoch} that the runner writes')
    ap.add_argument("--delay-us", type=float, default=0,
                    help="start the loop this long after --start-at / the go time (a pair's "
                         "second server: its steps offset from the first's)")
    ap.add_argument("--window-s", type=float, default=1.0, help="rate windows (spread)")
    ap.add_argument("--eager", action="store_true", help="no graph (for comparison)")
    ap.add_argument("--parts", action="store_true",
                    help="also time each step's launch call and read-back apart (medians in us)")
    ap.add_argument("--read", choices=("item", "tolist"), default="item",
                    help="how the host reads each step's result: one token with .item() (a copy "
                         "into pinned memory and a synchronize) or every slot's with .tolist() "
                         "(a copy into pageable memory)")
    ap.add_argument("--stamps", help="write each measured step's CLOCK_MONOTONIC ns before the "
                    "launch, after it and after the read-back to this JSON file (to line up with "
                    "a VE_TRACE timeline: bench/gpu/probe/step_split.py)")
    a = ap.parse_args()
    if a.check_steps < 1 or a.batch < 1 or (a.seconds <= 0 and a.steps < 1):
        ap.error("need --check-steps >= 1, --batch >= 1 and --steps >= 1 or --seconds > 0")
    llm.set_determinism()
    t0 = time.perf_counter()
    model = llm.Model(llm.make_config(layers=a.layers))
    max_len = a.prompt_len + a.check_steps + 16
    eng = llm.Engine(model, a.batch, a.prompt_len, max_len, graphs=not a.eager)
    prompts = [llm.prompt_ids(0, i, a.prompt_len, model.cfg.vocab).cuda() for i in range(a.batch)]
    d = common.Digest()
    eng.reset()
    for s in range(a.batch):
        pre, _ = eng.admit(s, prompts[s])
        d.add(pre)
    for _ in range(a.check_steps):
        eng.step()
        d.add(eng.out)  # tokens and checksums of every slot (a device-to-host read per step)
    init_s = time.perf_counter() - t0
    common.log(f"model and {a.check_steps} checked steps in {init_s:.1f} s")

    # Throughput: positions wrap at max_len (clamped), shapes never change.
    if a.ready and a.go:
        open(a.ready, "w").close()
        deadline = time.time() + 300
        while not os.path.exists(a.go):
            if time.time() > deadline:
                common.log("no go file after 300 s")
                return 2
            time.sleep(0.01)
        with open(a.go) as f:
            a.start_at = json.load(f)["start_at"]
    if a.start_at:
        while time.time() < a.start_at:
            time.sleep(0.001)
    if a.delay_us > 0:
        t_go = time.perf_counter() + a.delay_us * 1e-6
        while time.perf_counter() < t_go:
            pass
    steps, rates = 0, []
    t_start = time.perf_counter()
    t_win, n_win = t_start, 0
    t_launch, t_read, stamps = [], [], []
    read = (lambda: eng.out[0, 0].item()) if a.read == "item" else (lambda: eng.out.tolist())
    while True:
        if a.stamps:
            t0 = time.monotonic_ns()
            eng.step()
            t1 = time.monotonic_ns()
            read()
            stamps.append((t0, t1, time.monotonic_ns()))
        elif a.parts:
            t0 = time.perf_counter()
            eng.step()
            t1 = time.perf_counter()
            read()
            t_launch.append(t1 - t0)
            t_read.append(time.perf_counter() - t1)
        else:
            eng.step()
            read()
        steps += 1
        n_win += 1
        now = time.perf_counter()
        if now - t_win >= a.window_s:
            rates.append(n_win / (now - t_win))
            t_win, n_win = now, 0
        if a.seconds > 0 and now - t_start >= a.seconds:
            break
        if a.seconds <= 0 and steps >= a.steps:
            break
    elapsed = time.perf_counter() - t_start
    sps = steps / elapsed
    if a.stamps:
        with open(a.stamps, "w") as f:
            json.dump({"clock": "CLOCK_MONOTONIC", "steps": stamps}, f)
    parts = {}
    if a.parts:
        parts = {"launch_call_us_p50": round(statistics.median(t_launch) * 1e6, 2),
                 "read_back_us_p50": round(statistics.median(t_read) * 1e6, 2),
                 "read_back_us_p10": round(sorted(t_read)[len(t_read) // 10] * 1e6, 2)}
    return common.emit("decode_replay", True, d.hex(), elapsed / steps, steps=steps,
                       steps_per_s=round(sps, 3),
                       window_rates={"median": round(statistics.median(rates), 3) if rates else None,
                                     "min": round(min(rates), 3) if rates else None,
                                     "max": round(max(rates), 3) if rates else None,
                                     "n": len(rates),
                                     "each": [round(r, 1) for r in rates]},
                       layers=a.layers, batch=a.batch, graphs=not a.eager, init_s=round(init_s, 2),
                       **parts)


if __name__ == "__main__":
    raise SystemExit(main())
