#!/usr/bin/env python3
"""Determinism workloads for Vitamin-E on a real GPU (PyTorch, unmodified).

Runs three fixed-structure workloads, each REPS times in this process, and
prints one JSON object with the SHA-256 of every repetition's results:
  train   a transformer block + AdamW, 4 steps, with a second CUDA stream
          whose work joins the main stream through an event
  infer   an eager inference loop (no_grad), 16 batches
  triton  a Triton kernel (row-wise fused scale+softmax, fixed block shape)
Run it natively and under `ve-run --policy chaos|tput`: every digest must be
identical within a run and across runs (bench/gpu/run_gpu.sh compares them).
"""
import hashlib
import json
import os
import sys
import time

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
import torch  # noqa: E402

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
torch.backends.cudnn.benchmark = False
torch.backends.cudnn.deterministic = True
torch.use_deterministic_algorithms(True)

REPS = int(os.environ.get("REPS", "20"))
DEV = "cuda"


def digest(tensors):
    h = hashlib.sha256()
    for t in tensors:
        t = t.detach().contiguous().cpu().reshape(-1)
        h.update(str(t.numel()).encode())
        h.update(t.view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


class Block(torch.nn.Module):
    def __init__(self, d=512, heads=8, ff=2048):
        super().__init__()
        self.ln1 = torch.nn.LayerNorm(d)
        self.attn = torch.nn.MultiheadAttention(d, heads, batch_first=True, dropout=0.0)
        self.ln2 = torch.nn.LayerNorm(d)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(d, ff), torch.nn.GELU(), torch.nn.Linear(ff, d))

    def forward(self, x):
        h = self.ln1(x)
        a, _ = self.attn(h, h, h, need_weights=False)
        x = x + a
        return x + self.mlp(self.ln2(x))


def train():
    torch.manual_seed(1234)
    model = torch.nn.Sequential(Block(), Block()).to(DEV)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    g = torch.Generator(device="cpu").manual_seed(99)
    x = torch.randn(8, 128, 512, generator=g).to(DEV)
    w_side = torch.randn(512, 512, generator=g).to(DEV)
    side = torch.cuda.Stream()
    main = torch.cuda.current_stream()
    for _ in range(4):
        side.wait_stream(main)
        with torch.cuda.stream(side):
            aux = torch.tanh(x.reshape(-1, 512) @ w_side).mean()
        ev = side.record_event()
        out = model(x)
        loss = out.float().pow(2).mean()
        main.wait_event(ev)
        aux.record_stream(main)
        loss = loss + 1e-3 * aux
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    torch.cuda.synchronize()
    return digest([p for p in model.parameters()] + [loss])


def infer():
    torch.manual_seed(4321)
    model = torch.nn.Sequential(Block(), Block(), Block()).to(DEV).eval()
    g = torch.Generator(device="cpu").manual_seed(7)
    outs = []
    with torch.no_grad():
        for _ in range(16):
            x = torch.randn(4, 64, 512, generator=g).to(DEV)
            outs.append(model(x))
    torch.cuda.synchronize()
    return digest(outs)


def triton_workload():
    import triton
    import triton.language as tl

    @triton.jit
    def scaled_softmax(x_ptr, y_ptr, n_cols, scale, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        offs = tl.arange(0, BLOCK)
        mask = offs < n_cols
        x = tl.load(x_ptr + row * n_cols + offs, mask=mask, other=-float("inf"))
        x = x * scale
        x = x - tl.max(x, axis=0)
        e = tl.exp(x)
        y = e / tl.sum(e, axis=0)
        tl.store(y_ptr + row * n_cols + offs, y, mask=mask)

    g = torch.Generator(device="cpu").manual_seed(5)
    x = torch.randn(4096, 1000, generator=g).to(DEV)
    y = torch.empty_like(x)
    outs = []
    for i in range(8):
        scaled_softmax[(x.shape[0],)](x, y, x.shape[1], 0.5 + i, BLOCK=1024)
        outs.append(y.clone())
    torch.cuda.synchronize()
    return digest(outs)


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "native"
    res = {"mode": mode, "reps": REPS, "torch": torch.__version__,
           "device": torch.cuda.get_device_name(0), "workloads": {}}
    for name, fn in (("train", train), ("infer", infer), ("triton", triton_workload)):
        t0 = time.time()
        try:
            ds = [fn() for _ in range(REPS)]
            res["workloads"][name] = {"digests": ds, "consistent": len(set(ds)) == 1,
                                      "seconds": round(time.time() - t0, 2)}
        except Exception as e:  # report, do not hide
            res["workloads"][name] = {"error": repr(e)}
    print(json.dumps(res))


if __name__ == "__main__":
    main()
