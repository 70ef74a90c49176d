#!/usr/bin/env python3
"""LLM serving benchmark: a continuous-batching server for the decoder of
bench/gpu/llm.py and its own open-loop load generator, in one process.

  serve_llm.py --arrivals poisson|bursty --rate R --duration S --batch 1|16
               --graphs 0|1 --prompt-len 256 --gen-len 64 --seed 0
               --start-at EPOCH | --go-file PATH
               --slo-tpot-ms X --slo-ttft-ms Y --json OUT [--small]
  serve_llm.py --calibrate --batch 1|16 --json OUT [--small] [--graphs 0|1]

Serving. The arrival schedule is computed up front from --seed: Poisson at
R requests/s, or bursty (Poisson at R*(on+off)/on during ON periods of
--burst-on-s, nothing during OFF periods of --burst-off-s: the same mean
rate) over --duration seconds. Request i's prompt is a function of (seed, i).
The model is built and warmed up (and the decode step captured as a CUDA
graph with --graphs 1), then the process waits until --start-at (epoch
seconds) and the first arrival is at that instant; the JSON records whether
warm-up finished in time. Requests are served FIFO: each is prefilled alone
at the fixed prompt length as soon as a slot is free, then decoded with the
others in fixed-shape batches of --batch slots (batch 1 = one request at a
time), for exactly --gen-len tokens (no early stop). The host reads every
step's tokens (a sync per token, as a streaming server does) and timestamps
them with time.perf_counter. TTFT = first token - arrival (queueing
included), TPOT = (last - first token) / (gen_len - 1), e2e = last token -
arrival. Requests still unfinished --max-drain-s after the last arrival are
abandoned, counted as violating both SLOs, and have null latencies.

Determinism: a request's tokens depend only on its prompt and --batch (fixed
shapes, see llm.py), not on arrival timing or its batch mates. tokens_digest
= SHA-256 over the completed requests' token ids (int32 LE) in request
order; logits_digest = SHA-256, in the same order, over each request's
per-token 64-bit checksums of its bf16 logits row (llm.Engine.checksum:
exact and order-free, computed on the GPU; the prefill's logits count as the
first token's).

Calibration measures alone: prefill time (= TTFT at no load), decode step
time with all slots full (= TPOT), and capacity_rps from a saturated run
(all requests queued at t=0, 3 rounds of --batch requests, at least 8).
"""
import os

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import argparse  # noqa: E402
import datetime  # noqa: E402
import hashlib  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import random  # noqa: E402
import struct  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections import deque  # noqa: E402


def log(msg):
    print(f"[{datetime.datetime.now().strftime('%H:%M:%S.%f')[:-3]}] serve_llm: {msg}", file=sys.stderr, flush=True)


def parse(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calibrate", action="store_true", help="measure prefill, decode step and capacity alone")
    ap.add_argument("--arrivals", choices=["poisson", "bursty"])
    ap.add_argument("--rate", type=float, help="mean arrival rate, requests/s")
    ap.add_argument("--duration", type=float, help="seconds of arrivals")
    ap.add_argument("--batch", type=int, help="decode slots (1 = one request at a time)")
    ap.add_argument("--graphs", type=int, default=0, choices=[0, 1], help="CUDA graph for the decode step")
    ap.add_argument("--prompt-len", type=int, default=256)
    ap.add_argument("--gen-len", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0, help="arrival schedule and prompts")
    ap.add_argument("--start-at", type=float, default=None, help="epoch seconds of the first arrival's time origin")
    ap.add_argument("--go-file", default=None,
                    help="after the imports and before touching CUDA, wait for this file holding "
                         "{\"start_at\": EPOCH}, then as --start-at EPOCH (an orchestrator spawns the "
                         "server while the previous run still holds the GPU)")
    ap.add_argument("--go-timeout-s", type=float, default=600.0, help="give up waiting for --go-file")
    ap.add_argument("--slo-tpot-ms", type=float)
    ap.add_argument("--slo-ttft-ms", type=float)
    ap.add_argument("--json", required=True, help="result file")
    ap.add_argument("--small", action="store_true", help="4-layer model")
    ap.add_argument("--layers", type=int, default=None, help="explicit layer count (overrides --small)")
    ap.add_argument("--burst-on-s", type=float, default=0.5)
    ap.add_argument("--burst-off-s", type=float, default=1.5)
    ap.add_argument("--max-drain-s", type=float, default=30.0,
                    help="after the last arrival, give up on unfinished requests after this long")
    ap.add_argument("--progress-every", type=int, default=0, help="progress line every N completions (0: N/10)")
    a = ap.parse_args(argv)
    if a.batch is None:
        ap.error("--batch is required")
    if not 1 <= a.batch <= 64:
        ap.error(f"--batch must be in 1..64 (got {a.batch})")
    if a.prompt_len < 1 or a.gen_len < 2:
        ap.error("--prompt-len must be >= 1 and --gen-len >= 2 (TPOT needs two tokens)")
    if a.prompt_len + a.gen_len > 4096:
        ap.error("--prompt-len + --gen-len must be <= 4096")
    if a.layers is not None and not 1 <= a.layers <= 64:
        ap.error("--layers must be in 1..64")
    if not a.calibrate:
        missing = [f for f, v in (("--arrivals", a.arrivals), ("--rate", a.rate), ("--duration", a.duration),
                                  ("--slo-tpot-ms", a.slo_tpot_ms), ("--slo-ttft-ms", a.slo_ttft_ms)) if v is None]
        if missing:
            ap.error("serving needs " + ", ".join(missing) + " (or use --calibrate)")
        for name, v in (("--rate", a.rate), ("--duration", a.duration), ("--slo-tpot-ms", a.slo_tpot_ms),
                        ("--slo-ttft-ms", a.slo_ttft_ms)):
            if not (v > 0 and math.isfinite(v)):
                ap.error(f"{name} must be a positive number (got {v})")
        if a.duration > 3600:
            ap.error("--duration must be <= 3600 s")
        if a.burst_on_s <= 0 or a.burst_off_s < 0:
            ap.error("--burst-on-s must be > 0 and --burst-off-s >= 0")
        if a.max_drain_s < 0:
            ap.error("--max-drain-s must be >= 0")
        if a.start_at is not None and a.go_file:
            ap.error("--start-at and --go-file exclude each other")
        if a.start_at is not None:
            now = time.time()
            if not (1e9 < a.start_at < now + 3600):
                ap.error(f"--start-at must be an epoch time within the next hour (got {a.start_at}, now {now:.0f})")
    d = os.path.dirname(os.path.abspath(a.json))
    if not os.path.isdir(d):
        try:
            os.makedirs(d, exist_ok=True)
        except OSError as e:
            ap.error(f"cannot create the directory of --json: {e}")
    return a


def schedule(kind, rate, duration, seed, on_s, off_s):
    """Arrival offsets in seconds from the time origin, ascending."""
    rng = random.Random(seed * 7919 + 104729)
    out = []
    if kind == "poisson":
        t = rng.expovariate(rate)
        while t < duration:
            out.append(t)
            t += rng.expovariate(rate)
        return out
    # Bursty: a Poisson process on the ON-time axis, mapped onto wall time.
    period = on_s + off_s
    r_on = rate * period / on_s
    u = rng.expovariate(r_on)
    while True:
        k, rem = divmod(u, on_s)
        t = k * period + rem
        if t >= duration:
            return out
        out.append(t)
        u += rng.expovariate(r_on)


def quantiles(xs):
    if not xs:
        return None
    s = sorted(xs)
    n = len(s)

    def q(p):  # nearest rank
        return s[min(n - 1, max(0, math.ceil(p * n) - 1))]
    return {"p50": round(q(0.50), 3), "p99": round(q(0.99), 3), "p999": round(q(0.999), 3),
            "mean": round(sum(s) / n, 3)}


def serve_loop(eng, prompts, arr, gen_len, hard_end_after, every):
    """Runs the schedule `arr` (offsets from now). Returns per-request times
    (perf_counter) and tokens, and loop statistics."""
    B = eng.B
    N = len(arr)
    t_first, t_last = [None] * N, [None] * N
    toks, sums = [None] * N, [None] * N
    slots = [-1] * B
    free = list(range(B - 1, -1, -1))  # pop() -> lowest index first
    queue = deque()
    nxt = done = steps = occupied = 0
    max_queue = 0
    t0 = time.perf_counter()
    hard_end = t0 + hard_end_after
    while done < N:
        now = time.perf_counter()
        if now > hard_end:
            break
        while nxt < N and t0 + arr[nxt] <= now:
            queue.append(nxt)
            nxt += 1
        max_queue = max(max_queue, len(queue))
        while queue and free:
            i = queue.popleft()
            s = free.pop()
            pre, _ = eng.admit(s, prompts[i])
            tok, cs = pre.tolist()  # syncs: the first token is on the host
            t_first[i] = time.perf_counter()
            toks[i], sums[i] = [tok], [cs]
            slots[s] = i
        active = B - len(free)
        if active:
            eng.step()
            row_tok, row_sum = eng.out.tolist()  # syncs: this step's tokens are on the host
            t = time.perf_counter()
            steps += 1
            occupied += active
            for s in range(B):
                i = slots[s]
                if i < 0:
                    continue
                toks[i].append(row_tok[s])
                sums[i].append(row_sum[s])
                if len(toks[i]) == gen_len:
                    t_last[i] = t
                    slots[s] = -1
                    free.append(s)
                    done += 1
                    if every and done % every == 0:
                        log(f"done {done}/{N}  arrived {nxt}  queued {len(queue)}  "
                            f"active {B - len(free)}  t={t - t0:.1f}s")
        elif nxt < N:
            wait = t0 + arr[nxt] - time.perf_counter()
            if wait > 0.002:
                time.sleep(wait - 0.001)  # the last millisecond is spun
        else:
            break
    wall = time.perf_counter() - t0
    return {"t0": t0, "t_first": t_first, "t_last": t_last, "toks": toks, "sums": sums, "done": done,
            "arrived": nxt, "steps": steps, "occupied": occupied, "max_queue": max_queue, "wall": wall}


def results(r, arr, gen_len, slo_tpot, slo_ttft):
    N = len(arr)
    t0 = r["t0"]
    ttft_all, tpot_all, e2e_all = [None] * N, [None] * N, [None] * N
    for i in range(N):
        if r["t_last"][i] is None:
            continue
        a = t0 + arr[i]
        ttft_all[i] = round((r["t_first"][i] - a) * 1e3, 3)
        tpot_all[i] = round((r["t_last"][i] - r["t_first"][i]) * 1e3 / (gen_len - 1), 3)
        e2e_all[i] = round((r["t_last"][i] - a) * 1e3, 3)
    done = [i for i in range(N) if r["t_last"][i] is not None]
    th, lh = hashlib.sha256(), hashlib.sha256()
    per_req = [None] * N
    for i in done:
        b = struct.pack(f"<{gen_len}i", *r["toks"][i])
        th.update(b)
        lh.update(struct.pack(f"<{gen_len}q", *r["sums"][i]))
        per_req[i] = hashlib.sha256(b).hexdigest()[:16]
    out = {
        "requests": N,
        "completed": len(done),
        "unfinished": N - len(done),
        "tokens_generated": sum(len(r["toks"][i]) for i in range(N) if r["toks"][i] is not None),
        "ttft_ms": quantiles([ttft_all[i] for i in done]),
        "tpot_ms": quantiles([tpot_all[i] for i in done]),
        "e2e_ms": quantiles([e2e_all[i] for i in done]),
        "tokens_digest": th.hexdigest(),
        "logits_digest": lh.hexdigest(),
        "digest_requests": len(done),
        "tokens_digest_per_request": per_req,
        "ttft_ms_all": ttft_all, "tpot_ms_all": tpot_all, "e2e_ms_all": e2e_all,
        "decode_steps": r["steps"],
        "mean_active_slots": round(r["occupied"] / r["steps"], 3) if r["steps"] else 0.0,
        "max_queue": r["max_queue"],
        "wall_s": round(r["wall"], 3),
        "achieved_rps": round(len(done) / r["wall"], 3) if r["wall"] > 0 else 0.0,
    }
    if slo_tpot is not None:
        # Unfinished requests violate both SLOs.
        out["tpot_slo_violation"] = round(sum(1 for i in range(N) if tpot_all[i] is None or tpot_all[i] > slo_tpot) / N, 6)
        out["ttft_slo_violation"] = round(sum(1 for i in range(N) if ttft_all[i] is None or ttft_all[i] > slo_ttft) / N, 6)
    return out


def main(argv=None):
    a = parse(sys.argv[1:] if argv is None else argv)
    if not a.calibrate:
        arr = schedule(a.arrivals, a.rate, a.duration, a.seed, a.burst_on_s, a.burst_off_s)
        if not arr:
            print(f"serve_llm: the schedule has no arrivals (rate {a.rate}/s over {a.duration} s)", file=sys.stderr)
            return 2
    import torch
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import llm

    if a.go_file and not a.calibrate:
        t_end = time.time() + a.go_timeout_s
        while not os.path.exists(a.go_file):
            if time.time() > t_end:
                print(f"serve_llm: no go file {a.go_file} after {a.go_timeout_s:.0f} s", file=sys.stderr)
                return 2
            time.sleep(0.01)
        with open(a.go_file) as f:
            a.start_at = float(json.load(f)["start_at"])
    if not torch.cuda.is_available():
        print("serve_llm: no CUDA device", file=sys.stderr)
        return 1
    llm.set_determinism()
    t_build = time.perf_counter()
    cfg = llm.make_config(a.small, a.layers)
    model = llm.Model(cfg)
    L = a.prompt_len + a.gen_len
    eng = llm.Engine(model, a.batch, a.prompt_len, L, graphs=bool(a.graphs))
    n_prompts = len(arr) if not a.calibrate else max(3 * a.batch, 8)
    prompts = torch.stack([llm.prompt_ids(a.seed, i, a.prompt_len, cfg.vocab) for i in range(n_prompts)]).cuda()
    # Warm-up: cuBLAS handles and heuristics, the allocator, both code paths.
    for i in range(min(a.batch, 2)):
        eng.admit(i, prompts[i % len(prompts)])
    for _ in range(4):
        eng.step()
    eng.out.tolist()
    eng.reset()
    torch.cuda.synchronize()
    warm_s = time.perf_counter() - t_build
    props = torch.cuda.get_device_properties(0)
    common = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "gpu": torch.cuda.get_device_name(0), "sm_count": props.multi_processor_count,
        "torch": torch.__version__, "cuda": torch.version.cuda, "model": cfg.describe(),
        "small": bool(a.small), "batch": a.batch, "graphs": a.graphs, "prompt_len": a.prompt_len,
        "gen_len": a.gen_len, "seed": a.seed, "build_and_warmup_s": round(warm_s, 3),
        "env": {k: v for k, v in sorted(os.environ.items())
                if k.startswith("VE_") or k.startswith("CUDA_MPS_ACTIVE") or k == "CUDA_VISIBLE_DEVICES"},
    }
    log(f"model {cfg.n_layers} layers, {cfg.n_params() / 1e9:.2f} B params, batch {a.batch}, graphs {a.graphs}, "
        f"{props.multi_processor_count} SMs, ready in {warm_s:.1f} s")

    if a.calibrate:
        out = calibrate(torch, eng, prompts, a)
        out.update(common)
    else:
        start_at = a.start_at if a.start_at is not None else time.time()
        in_time = time.time() <= start_at
        if not in_time:
            log(f"warning: warm-up finished {time.time() - start_at:.2f} s after --start-at; starting now")
        while True:
            left = start_at - time.time()
            if left <= 0:
                break
            time.sleep(min(left, 0.25) if left > 0.3 else max(0.0, left - 0.002))
        started = time.time()
        log(f"serving {len(arr)} requests ({a.arrivals}, {a.rate}/s for {a.duration} s)")
        every = a.progress_every or max(1, len(arr) // 10)
        r = serve_loop(eng, prompts, arr, a.gen_len, a.duration + a.max_drain_s, every)
        out = results(r, arr, a.gen_len, a.slo_tpot_ms, a.slo_ttft_ms)
        out.update(common)
        out.update({"arrivals": a.arrivals, "rate": a.rate, "duration": a.duration,
                    "burst_on_s": a.burst_on_s if a.arrivals == "bursty" else None,
                    "burst_off_s": a.burst_off_s if a.arrivals == "bursty" else None,
                    "slo_tpot_ms": a.slo_tpot_ms, "slo_ttft_ms": a.slo_ttft_ms,
                    "start_at": a.start_at, "started_at": round(started, 6),
                    "start_late_s": round(max(0.0, started - start_at), 6),
                    "warmup_finished_in_time": in_time, "max_drain_s": a.max_drain_s})
    with open(a.json + ".tmp", "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    os.replace(a.json + ".tmp", a.json)
    if a.calibrate:
        print(json.dumps({k: out[k] for k in ("capacity_rps", "tpot_ms", "ttft_ms", "prefill_ms",
                                               "decode_step_ms", "capacity_rps_model", "batch", "graphs",
                                               "sm_count")}))
    else:
        q = lambda k: out[k]["p99"] if out[k] else None  # noqa: E731
        print(f"requests {out['requests']} completed {out['completed']}  "
              f"ttft p50/p99 {out['ttft_ms'] and out['ttft_ms']['p50']}/{q('ttft_ms')} ms  "
              f"tpot p50/p99 {out['tpot_ms'] and out['tpot_ms']['p50']}/{q('tpot_ms')} ms  "
              f"viol tpot {out['tpot_slo_violation']} ttft {out['ttft_slo_violation']}  "
              f"tokens {out['tokens_digest'][:16]}  logits {out['logits_digest'][:16]}")
    return 0


def calibrate(torch, eng, prompts, a):
    def timed(fn, n):
        ts = []
        for _ in range(n):
            torch.cuda.synchronize()
            t = time.perf_counter()
            fn()
            ts.append((time.perf_counter() - t) * 1e3)
        ts.sort()
        return ts

    pre = timed(lambda: eng.admit(0, prompts[0])[0].tolist(), 10)
    eng.reset()
    for s in range(eng.B):
        eng.admit(s, prompts[s % len(prompts)])
    n_steps = min(40, a.gen_len - 1)
    step = timed(lambda: (eng.step(), eng.out.tolist()), n_steps)
    pre_ms, step_ms = pre[len(pre) // 2], step[len(step) // 2]
    log(f"prefill {pre_ms:.2f} ms, decode step {step_ms:.2f} ms (all {eng.B} slots)")
    eng.reset()
    n = len(prompts)
    r = serve_loop(eng, prompts, [0.0] * n, a.gen_len, 300.0, 0)
    if r["done"] != n:
        raise RuntimeError("saturated run did not finish")
    sat = results(r, [0.0] * n, a.gen_len, None, None)
    cap = n / r["wall"]
    model_cap = eng.B * 1e3 / (eng.B * pre_ms + (a.gen_len - 1) * step_ms)
    log(f"capacity {cap:.2f} req/s measured, {model_cap:.2f} req/s from prefill + steps")
    return {"capacity_rps": round(cap, 3), "tpot_ms": round(step_ms, 3), "ttft_ms": round(pre_ms, 3),
            "prefill_ms": round(pre_ms, 3), "prefill_ms_all": [round(x, 3) for x in pre],
            "decode_step_ms": round(step_ms, 3), "decode_step_ms_p90": round(step[int(0.9 * (len(step) - 1))], 3),
            "capacity_rps_model": round(model_cap, 3),
            "saturated": {"requests": n, "wall_s": sat["wall_s"], "ttft_ms": sat["ttft_ms"],
                          "tpot_ms": sat["tpot_ms"], "tokens_digest": sat["tokens_digest"]}}


if __name__ == "__main__":
    sys.exit(main())
