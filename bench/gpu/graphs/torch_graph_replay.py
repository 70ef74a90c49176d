#!/usr/bin/env python3
"""torch.cuda.graph capture and CUDAGraph.replay: an MLP forward with an
in-place accumulator captured on a side stream (after warm-up), replayed 60
times with new inputs copied into the static input (replays must run in issue
order: the accumulator makes any reordering show), then two graphs of
separate memory pools replayed concurrently on two streams behind a sleep (as
PyTorch's test_graph_concurrent_replay does without sharing pools). Digest:
SHA-256 of every replay's output and of the accumulators. Time: seconds per
replay (steady state). Prints one JSON line last."""
import argparse

import common  # noqa: E402  (sets CUBLAS_WORKSPACE_CONFIG before torch)
import torch  # noqa: E402


def mlp(d, layers, seed):
    mods = []
    for _ in range(layers):
        mods += [torch.nn.Linear(d, d), torch.nn.GELU()]
    return common.seed_module(torch.nn.Sequential(*mods).cuda(), seed)


def capture(model, x, acc, pool=None):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            model(x)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    # Each graph on its own capture stream: PyTorch keys its cuBLAS workspace
    # by stream, and graphs captured on the shared default capture stream
    # share one workspace; replayed concurrently they race on it (natively
    # the concurrent replay below then hangs).
    with torch.cuda.graph(g, pool=pool, stream=torch.cuda.Stream()):
        y = model(x)
        acc.mul_(0.5).add_(y.sum(0))
    return g, y


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--replays", type=int, default=60)
    ap.add_argument("--dim", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=64)
    a = ap.parse_args()
    common.deterministic()
    torch.set_grad_enabled(False)
    d = common.Digest()
    model = mlp(a.dim, 4, 1)
    x = torch.zeros(a.batch, a.dim, device="cuda")
    acc = torch.zeros(a.dim, device="cuda")
    g, y = capture(model, x, acc)
    inputs = [common.randn((a.batch, a.dim), 100 + i) for i in range(a.replays)]
    acc.zero_()
    for i in range(a.replays):
        x.copy_(inputs[i])
        g.replay()
        d.add(y)
    d.add(acc)
    per_replay = common.timed(g.replay, 50)

    # Two graphs, own pools, replayed concurrently on two streams.
    m0, m1 = mlp(a.dim, 3, 2), mlp(a.dim, 3, 3)
    x0, x1 = common.randn((a.batch, a.dim), 7), common.randn((a.batch, a.dim), 8)
    a0, a1 = torch.zeros(a.dim, device="cuda"), torch.zeros(a.dim, device="cuda")
    g0, y0 = capture(m0, x0, a0)
    g1, y1 = capture(m1, x1, a1)
    a0.zero_()
    a1.zero_()
    torch.cuda.synchronize()
    s0, s1 = torch.cuda.Stream(), torch.cuda.Stream()
    for _ in range(5):
        with torch.cuda.stream(s0):
            torch.cuda._sleep(1000000)
            s1.wait_stream(s0)
            g0.replay()
        with torch.cuda.stream(s1):
            g1.replay()
        torch.cuda.current_stream().wait_stream(s0)
        torch.cuda.current_stream().wait_stream(s1)
    torch.cuda.synchronize()
    for t in (y0, y1, a0, a1):
        d.add(t)
    ok = bool(torch.isfinite(acc).all()) and bool(torch.isfinite(a0).all())
    return common.emit("torch_graph_replay", ok, d.hex(), per_replay, replays=a.replays)


if __name__ == "__main__":
    raise SystemExit(main())
