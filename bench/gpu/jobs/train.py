#!/usr/bin/env python3
"""Training jobs for the GPU colocation benchmarks (bench/gpu/coloc, bench/gpu/mixed).

  train.py JOB [--start-at EPOCH | --go-file PATH] [--windows K] [--window-s S]
               [--warmup busy|idle] [--stop-file PATH] [--digest-step N] ...

Jobs (deterministic: fixed seeds, deterministic algorithms, no TF32):
  big, small  launch-bound transformer stacks (the configurations of the
              earlier pair benchmark, so results compare with its figures)
  dense       compute-bound bf16: 8 pre-LN residual layers of 8192x8192
              GEMMs on 16384 tokens; fills an H200 alone (~50-150 ms a step)
  hostphase   each step: a CPU phase (seeded data generation and
              augmentation with torch CPU ops), a pinned host-to-device
              copy, a medium bf16 GPU step, then a read-back of the loss; the
              GPU idles during the CPU phase
  tiny        a small MLP on batch 8: narrow kernels, launch-bound

Timing: the job warms up until EPOCH (busy: stepping; idle: a few steps,
then waiting), then measures K consecutive windows [EPOCH + i*S, EPOCH +
(i+1)*S]: steps completed in each, with a device synchronization at each
window edge, so two jobs given the same EPOCH measure the same wall-clock
windows. A job not warm at EPOCH says so (late_start) and skips the windows
that had begun. With --go-file it imports its libraries first and then waits
for the file, which holds {"start_at": EPOCH, ...}: an orchestrator can spawn
it early and start it on time. With --stop-file it keeps training after the
windows (unmeasured) until the file exists, so a neighbour measured longer
never sees an idle GPU.

Digest: SHA-256 of the parameters right after step --digest-step (a device
copy is taken then and hashed at the end, off the measured windows). At most
--inflight (2) steps are queued on the device, so a window's closing
synchronization lags its edge by at most that many steps.

Prints one JSON line on stdout (errors too, with "ok": false).
"""
import time

T_START = time.time()

import argparse  # noqa: E402
import hashlib  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
import traceback  # noqa: E402

# Test hook: VE_BENCH_TRAIN_DEVICE=cpu runs every job on the CPU with shrunken
# shapes (bench/gpu/selftest/cpu_jobs.sh), to check the code without a GPU.
CPU_TEST = os.environ.get("VE_BENCH_TRAIN_DEVICE") == "cpu"
DEV = "cpu" if CPU_TEST else "cuda"

# (digest step, minimum warm-up steps); big/small keep the earlier digest step.
JOBS = {"big": (20, 5), "small": (20, 5), "dense": (6, 3), "hostphase": (10, 4), "tiny": (50, 20)}
SIZES = {"big": (1024, 16, 4096, 6, 16, 256), "small": (512, 8, 2048, 4, 16, 128)}


def parse(argv):
    ap = argparse.ArgumentParser(description="one training job of the colocation benchmarks")
    ap.add_argument("job", choices=sorted(JOBS))
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--start-at", type=float, help="EPOCH (time.time()) the first window starts")
    g.add_argument("--go-file", help="wait for this file, holding {\"start_at\": EPOCH}")
    ap.add_argument("--go-timeout-s", type=float, default=300.0)
    ap.add_argument("--windows", type=int, default=3)
    ap.add_argument("--window-s", type=float, default=2.5)
    ap.add_argument("--warmup", choices=("busy", "idle"), default="busy",
                    help="busy: step until EPOCH; idle: minimum steps, then wait")
    ap.add_argument("--warmup-steps", type=int, help="minimum warm-up steps")
    ap.add_argument("--digest-step", type=int)
    ap.add_argument("--stop-file", help="after the windows keep training until this exists")
    ap.add_argument("--max-tail-s", type=float, default=120.0)
    ap.add_argument("--threads", type=int, default=4, help="torch CPU threads (fixed: determinism)")
    ap.add_argument("--inflight", type=int, default=2,
                    help="steps queued on the device at most (0: unbounded)")
    ap.add_argument("--cpu-frac", type=float, default=0.4,
                    help="hostphase: CPU share of a solo step to calibrate for")
    ap.add_argument("--cpu-reps", type=int, help="hostphase: augmentation passes (no calibration)")
    ap.add_argument("--check-args", action="store_true",
                    help="validate the arguments and exit (no torch import)")
    a = ap.parse_args(argv)
    if a.windows < 1 or a.window_s <= 0:
        ap.error("--windows must be >= 1 and --window-s > 0")
    if not 0.05 <= a.cpu_frac <= 0.9:
        ap.error("--cpu-frac must be in [0.05, 0.9]")
    if a.inflight < 0:
        ap.error("--inflight must be >= 0")
    if a.cpu_reps is not None and a.cpu_reps < 1:
        ap.error("--cpu-reps must be >= 1")
    for k in ("digest_step", "warmup_steps"):
        if getattr(a, k) is not None and getattr(a, k) < 1:
            ap.error(f"--{k.replace('_', '-')} must be >= 1")
    return a


def wait_go(path, timeout):
    t_end = time.time() + timeout
    while not os.path.exists(path):
        if time.time() > t_end:
            raise TimeoutError(f"no go file {path} after {timeout:.0f} s")
        time.sleep(0.01)
    with open(path) as f:
        return json.load(f)


def sleep_until(t):
    while True:
        d = t - time.time()
        if d <= 0:
            return
        time.sleep(min(d, 0.05))


def median(xs):
    xs = sorted(xs)
    if not xs:
        return None
    m = len(xs) // 2
    return xs[m] if len(xs) % 2 else 0.5 * (xs[m - 1] + xs[m])


class Job:
    def __init__(self, params, step, meta, on_warm=None, report=None):
        self.params, self.step, self.meta = params, step, meta
        self.on_warm = on_warm or (lambda n: None)
        self.report = report or (lambda lo, hi: {})


def hash_uniform(torch, shape, seed, bound, dtype):
    """Uniform(-bound, bound) from an integer hash of the element index, made
    by elementwise device ops: quick, and unlike the device RNG its values do
    not depend on the launch grid (torch sizes that by the SM count)."""
    n = math.prod(shape)
    m = 1 << 31
    x = torch.arange(n, device=DEV, dtype=torch.int64)
    # every intermediate stays below 2**63: indices < 2**28, factors < 2**32
    x.mul_(2654435761).add_((seed * 1013904223 + 12345) % m).remainder_(m)
    x.bitwise_xor_(x >> 13)
    x.mul_(1597334677).remainder_(m)
    x.bitwise_xor_(x >> 16)
    u = x.to(torch.float32).mul_(2.0 / m).sub_(1.0).mul_(bound)
    del x
    return u.to(dtype).reshape(shape)


def build_transformer(torch, name):
    F = torch.nn.functional
    d, heads, ff, layers, batch, seq = SIZES[name]
    torch.manual_seed(0)
    layer = lambda: torch.nn.TransformerEncoderLayer(d, heads, ff, dropout=0.0, batch_first=True)
    model = torch.nn.Sequential(*[layer() for _ in range(layers)]).to(DEV)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    g = torch.Generator(device="cpu").manual_seed(1)
    x = torch.randn(batch, seq, d, generator=g).to(DEV)
    y = torch.randn(batch, seq, d, generator=g).to(DEV)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()

    meta = {"model": f"{layers} x TransformerEncoderLayer({d}, {heads} heads, ff {ff}), fp32",
            "batch": [batch, seq], "optimizer": "AdamW lr 1e-4"}
    return Job(list(model.parameters()), step, meta)


def build_dense(torch):
    F = torch.nn.functional
    D, L, T = (256, 2, 512) if CPU_TEST else (8192, 8, 16384)
    bf16 = torch.bfloat16
    ws = [torch.nn.Parameter(hash_uniform(torch, (D, D), l + 1, 1.0 / math.sqrt(D), bf16))
          for l in range(L)]
    x = hash_uniform(torch, (T, D), 1001, 1.0, bf16)
    y = hash_uniform(torch, (T, D), 1002, 1.0, bf16)
    opt = torch.optim.AdamW(ws, lr=1e-4)

    def step():
        opt.zero_grad(set_to_none=True)
        h = x
        for w in ws:
            h = h + F.gelu(F.linear(F.layer_norm(h, (D,)), w))
        loss = F.mse_loss(h.float(), y.float())
        loss.backward()
        opt.step()

    meta = {"model": f"{L} x [h + gelu(linear(layernorm(h), W {D}x{D}))], bf16, no bias",
            "tokens": T, "tflop_per_step": round(6 * T * D * D * L / 1e12, 1),
            "optimizer": "AdamW lr 1e-4"}
    return Job(ws, step, meta)


def build_hostphase(torch, a, reps):
    F = torch.nn.functional
    B, IMG, P, Dm, L = 32, 128, 8, (128 if CPU_TEST else 2048), (2 if CPU_TEST else 6)
    tokens, pd = B * (IMG // P) ** 2, 3 * P * P
    bf16 = torch.bfloat16
    w_in = torch.nn.Parameter(hash_uniform(torch, (Dm, pd), 11, 1 / math.sqrt(pd), bf16))
    blocks = [(torch.nn.Parameter(hash_uniform(torch, (4 * Dm, Dm), 100 + l, 1 / math.sqrt(Dm), bf16)),
               torch.nn.Parameter(hash_uniform(torch, (Dm, 4 * Dm), 200 + l, 0.5 / math.sqrt(Dm), bf16)))
              for l in range(L)]
    w_out = torch.nn.Parameter(hash_uniform(torch, (pd, Dm), 12, 1 / math.sqrt(Dm), bf16))
    params = [w_in] + [w for b in blocks for w in b] + [w_out]
    opt = torch.optim.AdamW(params, lr=1e-4)
    pinned = torch.empty((tokens, pd), dtype=torch.float32)
    pinned = pinned if CPU_TEST else pinned.pin_memory()
    st = {"i": 0, "reps": reps, "calibrated": reps is None}
    phases = []  # per step: (gen_ms, rep_ms, cpu_ms, gpu_ms)

    def cpu_phase(i, nrep):
        t0 = time.perf_counter()
        g = torch.Generator(device="cpu").manual_seed(10007 + i)
        base = torch.randn(B, 3, 40, 40, generator=g)
        img = F.interpolate(base, size=(IMG + 8, IMG + 8), mode="bilinear", align_corners=False)
        offs = torch.randint(0, 9, (B, 2), generator=g).tolist()
        flip = torch.rand(B, 1, 1, 1, generator=g) < 0.5
        gain = 1.0 + 0.4 * (torch.rand(B, 1, 1, 1, generator=g) - 0.5)
        bias = 0.2 * (torch.rand(B, 1, 1, 1, generator=g) - 0.5)
        t1 = time.perf_counter()
        # Every pass computes the same batch from the same inputs: the pass
        # count sets the CPU share of a step and never changes the data.
        for _ in range(nrep):
            crops = torch.stack([img[b, :, oy:oy + IMG, ox:ox + IMG] for b, (oy, ox) in enumerate(offs)])
            crops = torch.where(flip, crops.flip(-1), crops)
            z = torch.tanh(crops * gain + bias)
            z = (z - z.mean(dim=(2, 3), keepdim=True)) / (z.std(dim=(2, 3), keepdim=True) + 1e-5)
            patches = z.reshape(B, 3, IMG // P, P, IMG // P, P).permute(0, 2, 4, 1, 3, 5)
            pinned.copy_(patches.reshape(tokens, pd))
        t2 = time.perf_counter()
        return 1e3 * (t1 - t0), 1e3 * (t2 - t1) / nrep, 1e3 * (t2 - t0)

    def step():
        nrep = st["reps"] or 1
        gen_ms, rep_ms, cpu_ms = cpu_phase(st["i"], nrep)
        t0 = time.perf_counter()
        xg = pinned.to(DEV, non_blocking=True).to(bf16)
        opt.zero_grad(set_to_none=True)
        h = F.linear(xg, w_in)
        for w1, w2 in blocks:
            h = h + F.linear(F.gelu(F.linear(F.layer_norm(h, (Dm,)), w1)), w2)
        loss = F.mse_loss(F.linear(h, w_out).float(), xg.float())
        loss.backward()
        opt.step()
        loss.item()  # the loss read-back of a logging loop: the GPU idles in the next CPU phase
        phases.append((gen_ms, rep_ms, cpu_ms, 1e3 * (time.perf_counter() - t0)))
        st["i"] += 1

    def on_warm(n):
        # Calibrate once, alone, after the first (lazy-init) step: passes such
        # that CPU / (CPU + GPU) is about --cpu-frac.
        if st["reps"] is None and n >= 3:
            last = phases[1:]
            gen, rep, gpu = (median([p[k] for p in last]) for k in (0, 1, 3))
            want = a.cpu_frac / (1 - a.cpu_frac) * gpu
            st["reps"] = int(max(1, min(200, round((want - gen) / max(rep, 1e-3)))))

    def report(lo, hi):
        sel = phases[lo:hi] or phases
        cpu, gpu = median([p[2] for p in sel]), median([p[3] for p in sel])
        return {"cpu_reps": st["reps"], "cpu_reps_calibrated_here": st["calibrated"],
                "cpu_phase_ms": round(cpu, 3) if cpu else None,
                "gpu_phase_ms": round(gpu, 3) if gpu else None,
                "cpu_frac": round(cpu / (cpu + gpu), 4) if cpu and gpu else None}

    meta = {"model": f"patch MLP: {L} x [h + W2 gelu(W1 layernorm(h))], d {Dm}, ff {4 * Dm}, bf16",
            "tokens": tokens, "cpu_phase": f"{B} images 3x{IMG}x{IMG}: randn, bilinear resize, "
            "crop, flip, gain/bias, tanh, per-image normalization, patchify, pinned copy",
            "threads": a.threads, "optimizer": "AdamW lr 1e-4"}
    return Job(params, step, meta, on_warm, report)


def build_tiny(torch):
    F = torch.nn.functional
    nn = torch.nn
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                          nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 16)).to(DEV)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    g = torch.Generator(device="cpu").manual_seed(2)
    x = torch.randn(8, 256, generator=g).to(DEV)
    y = torch.randn(8, 16, generator=g).to(DEV)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()

    meta = {"model": "MLP 256-512-512-512-16, fp32", "batch": 8, "optimizer": "AdamW lr 1e-3"}
    return Job(list(model.parameters()), step, meta)


def digest(torch, tensors):
    h = hashlib.sha256()
    for t in tensors:
        h.update(t.detach().contiguous().cpu().reshape(-1).view(torch.uint8).numpy())
    return h.hexdigest()


def run(a, out):
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(a.threads)
    out["import_s"] = round(time.time() - T_START, 3)
    start_at, reps = a.start_at, a.cpu_reps
    if a.go_file:
        go = wait_go(a.go_file, a.go_timeout_s)
        start_at = float(go["start_at"])
        if go.get("cpu_reps") and reps is None:
            reps = int(go["cpu_reps"])
    t_go = time.time()
    if CPU_TEST:
        sync = lambda: None
        out.update(torch=torch.__version__, cuda=None, gpu="cpu (test)", sm_count=0, threads=a.threads)
    else:
        sync = torch.cuda.synchronize
        props = torch.cuda.get_device_properties(0)
        out.update(torch=torch.__version__, cuda=torch.version.cuda, gpu=props.name,
                   sm_count=props.multi_processor_count, threads=a.threads)
    if a.job in SIZES:
        job = build_transformer(torch, a.job)
    elif a.job == "dense":
        job = build_dense(torch)
    elif a.job == "hostphase":
        job = build_hostphase(torch, a, reps)
    else:
        job = build_tiny(torch)
    d_step = a.digest_step or JOBS[a.job][0]
    w_min = a.warmup_steps or JOBS[a.job][1]
    out["config"] = job.meta
    st = {"n": 0, "snap": None}
    # Without a bound the host can queue many GPU-bound steps (up to the
    # launch queue), and the synchronization closing a window would then
    # land up to a second after the window's edge: the two jobs' windows
    # would drift apart, and a last window could run on after the other job
    # has exited. With at most `inflight` steps queued the lag is bounded by
    # that many steps, and the device never idles between steps.
    evs = [torch.cuda.Event() for _ in range(a.inflight)] if a.inflight and not CPU_TEST else []

    def do_step():
        job.step()
        st["n"] += 1
        if st["n"] == d_step:
            st["snap"] = [p.detach().clone() for p in job.params]
        if evs:
            e = evs[st["n"] % len(evs)]
            e.synchronize()  # the step `inflight` steps back (an unrecorded event returns at once)
            e.record()

    est = None
    while True:
        t = time.time()
        do_step()
        sync()
        dt = time.time() - t
        est = dt if est is None or st["n"] <= 2 else 0.5 * est + 0.5 * dt
        job.on_warm(st["n"])
        if st["n"] >= w_min:
            if start_at is None or a.warmup == "idle" or time.time() + 1.5 * est >= start_at:
                break
    warm = st["n"]
    ready = time.time()
    # For a harness that waits for the job to run (a co-runner): one line.
    print(f"train: warm after {warm} steps", file=sys.stderr, flush=True)
    if start_at is None:
        start_at = ready
    # A few milliseconds late still measures the first window (from now); a
    # job later than a tenth of a window skips every window that has begun.
    late = ready > start_at + 0.1 * a.window_s
    first = math.ceil((ready - start_at) / a.window_s - 1e-9) if late else 0
    out.update(start_at=round(start_at, 3), ready_at=round(ready, 3),
               late_by_s=round(max(0.0, ready - start_at), 3),
               ready_after_go_s=round(ready - t_go, 3), warmup_steps=warm,
               warm_step_s=round(est, 5), late_start=late,
               windows_missed=min(first, a.windows), digest_step=d_step)
    wins = []
    phase_mark = st["n"]
    if first < a.windows:
        sleep_until(start_at + first * a.window_s)
        sync()
        t0 = time.time()
        for i in range(first, a.windows):
            end = start_at + (i + 1) * a.window_s
            k = 0
            while True:
                do_step()
                k += 1
                if time.time() >= end:
                    break
            sync()
            t1 = time.time()
            wins.append({"i": i, "steps": k, "s": round(t1 - t0, 5), "sps": round(k / (t1 - t0), 5),
                         "t0": round(t0, 3), "t1": round(t1, 3)})
            t0 = t1
    measured_to = st["n"]
    tail = 0
    if a.stop_file:
        t_end = time.time() + a.max_tail_s
        while not os.path.exists(a.stop_file) and time.time() < t_end:
            do_step()
            tail += 1
    while st["n"] < d_step:
        do_step()
    sync()
    out.update(windows=wins, steps_per_s=median([w["sps"] for w in wins]),
               steps_total=st["n"], tail_steps=tail,
               digest=digest(torch, st["snap"]))
    out.update(job.report(phase_mark, measured_to))
    out["wall_s"] = round(time.time() - T_START, 3)


def main():
    a = parse(sys.argv[1:])
    if a.check_args:
        print("arguments ok")
        return 0
    out = {"job": a.job, "pid": os.getpid(), "ok": False}
    rc = 1
    try:
        run(a, out)
        out["ok"] = True
        rc = 0
    except Exception as e:  # one JSON line whatever happens
        traceback.print_exc()
        out["error"] = f"{type(e).__name__}: {e}"
    print(json.dumps(out), flush=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
