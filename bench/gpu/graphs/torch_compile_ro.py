#!/usr/bin/env python3
"""torch.compile(mode="reduce-overhead") training: a small MLP classifier
whose compiled forward and backward run as CUDA graphs (cudagraph trees),
trained 20 steps with SGD with momentum on seeded synthetic data. Digest:
SHA-256 of the parameters after the last step and of the losses. Time:
seconds per step over the last 8 steps (compilation excluded, reported
apart). Prints one JSON line last."""
import argparse
import time

import common  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--dim", type=int, default=512)
    ap.add_argument("--batch", type=int, default=256)
    a = ap.parse_args()
    common.deterministic()
    model = common.seed_module(torch.nn.Sequential(
        torch.nn.Linear(a.dim, 2 * a.dim), torch.nn.ReLU(), torch.nn.Linear(2 * a.dim, a.dim),
        torch.nn.ReLU(), torch.nn.Linear(a.dim, 10)).cuda(), 5)
    cmodel = torch.compile(model, mode="reduce-overhead")
    opt = torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9)
    xs = [common.randn((a.batch, a.dim), 300 + i) for i in range(a.steps)]
    ys = [torch.arange(a.batch, device="cuda") % 10 for _ in range(a.steps)]
    losses, times = [], []
    t_compile = time.perf_counter()
    for i in range(a.steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        torch.compiler.cudagraph_mark_step_begin()
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(cmodel(xs[i]), ys[i])
        loss.backward()
        opt.step()
        losses.append(loss.detach().clone())
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
        if i == 2:
            t_compile = time.perf_counter() - t_compile
    d = common.Digest()
    for p in model.parameters():
        d.add(p)
    d.add(torch.stack(losses))
    ok = all(bool(torch.isfinite(p).all()) for p in model.parameters())
    tail = times[-8:]
    return common.emit("torch_compile_reduce_overhead", ok, d.hex(), sum(tail) / len(tail),
                       steps=a.steps, compile_and_first_steps_s=round(t_compile, 2),
                       final_loss=float(losses[-1]))


if __name__ == "__main__":
    raise SystemExit(main())
