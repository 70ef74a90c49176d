#!/usr/bin/env python3
"""torch.cuda.make_graphed_callables in training: an MLP block whose forward
and backward are captured as CUDA graphs, trained for 30 steps with AdamW on
seeded synthetic data (a second, eager block after it). Digest: SHA-256 of
every parameter after the last step and of the losses. Time: seconds per step
over the last 10 steps. Prints one JSON line last."""
import argparse
import time

import common  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--dim", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=128)
    a = ap.parse_args()
    common.deterministic()
    d_in = a.dim
    block = common.seed_module(torch.nn.Sequential(
        torch.nn.Linear(d_in, 4 * d_in), torch.nn.GELU(), torch.nn.Linear(4 * d_in, d_in)).cuda(), 1)
    head = common.seed_module(torch.nn.Linear(d_in, 16).cuda(), 2)
    sample = common.randn((a.batch, d_in), 3).requires_grad_(False)
    graphed = torch.cuda.make_graphed_callables(block, (sample,))
    params = list(block.parameters()) + list(head.parameters())
    opt = torch.optim.AdamW(params, lr=1e-3)
    xs = [common.randn((a.batch, d_in), 1000 + i) for i in range(a.steps)]
    ys = [common.randn((a.batch, 16), 2000 + i) for i in range(a.steps)]
    losses = []
    times = []
    for i in range(a.steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = F.mse_loss(head(graphed(xs[i])), ys[i])
        loss.backward()
        opt.step()
        losses.append(loss.detach())
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    d = common.Digest()
    for p in params:
        d.add(p)
    d.add(torch.stack(losses))
    ok = all(bool(torch.isfinite(p).all()) for p in params)
    tail = times[-10:]
    return common.emit("torch_graphed_callables", ok, d.hex(), sum(tail) / len(tail), steps=a.steps,
                       final_loss=float(losses[-1]))


if __name__ == "__main__":
    raise SystemExit(main())
