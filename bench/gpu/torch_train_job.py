#!/usr/bin/env python3
"""One training job for the colocation benchmark (bench/gpu/coloc.sh).

  torch_train_job.py NAME SECONDS [DIGEST_STEP]

Trains a transformer stack (size by NAME: 'big' or 'small') with AdamW on
fixed synthetic data, one step after another for SECONDS of wall time after
5 warm-up steps, and prints one JSON line: steps per second, and the SHA-256
of the parameters after DIGEST_STEP steps (default 20), which must be bitwise
identical whether the job ran alone, colocated, or under Vitamin-E.
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
torch.use_deterministic_algorithms(True)

SIZES = {"big": (1024, 16, 4096, 6, 16, 256), "small": (512, 8, 2048, 4, 16, 128)}


def main():
    name, secs = sys.argv[1], float(sys.argv[2])
    digest_step = int(sys.argv[3]) if len(sys.argv) > 3 else 20
    d, heads, ff, layers, batch, seq = SIZES[name]
    torch.manual_seed(0)
    layer = lambda: torch.nn.TransformerEncoderLayer(d, heads, ff, dropout=0.0, batch_first=True)
    model = torch.nn.Sequential(*[layer() for _ in range(layers)]).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    g = torch.Generator(device="cpu").manual_seed(1)
    x = torch.randn(batch, seq, d, generator=g).cuda()
    y = torch.randn(batch, seq, d, generator=g).cuda()

    def step():
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()

    digest, n = None, 0
    t_start = None
    while True:
        step()
        n += 1
        if n == 5:
            torch.cuda.synchronize()
            t_start = time.perf_counter()
        if n == digest_step:
            torch.cuda.synchronize()
            h = hashlib.sha256()
            for p in model.parameters():
                h.update(p.detach().cpu().reshape(-1).view(torch.uint8).numpy().tobytes())
            digest = h.hexdigest()
        if t_start is not None and n >= digest_step and time.perf_counter() - t_start >= secs:
            break
    torch.cuda.synchronize()
    el = time.perf_counter() - t_start
    print(json.dumps({"job": name, "steps_timed": n - 5, "seconds": round(el, 3),
                      "steps_per_s": round((n - 5) / el, 4), "digest_step": digest_step,
                      "digest": digest}))


if __name__ == "__main__":
    main()
