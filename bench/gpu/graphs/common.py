"""Shared by the PyTorch graph workloads of bench/gpu/graphs: determinism
settings, seeded inputs made on the CPU (the same bits whatever the GPU or
the SMs a launch gets), SHA-256 digests of tensors, and the one JSON line
each workload prints last (read by bench/gpu/graphs/run)."""
import os

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import hashlib  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import torch  # noqa: E402


def deterministic():
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True
    torch.use_deterministic_algorithms(True)
    try:
        from torch.utils import deterministic as det
        det.fill_uninitialized_memory = False
    except (ImportError, AttributeError):
        pass


def randn(shape, seed, dtype=torch.float32):
    """Seeded normal values made on the CPU, copied to the GPU."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float32).to(dtype).cuda()


def seed_module(m, seed):
    """Every parameter from its own seeded CPU generator, scaled like a default init."""
    with torch.no_grad():
        for i, p in enumerate(m.parameters()):
            fan = p.shape[-1] if p.dim() > 1 else p.shape[0]
            p.copy_(randn(tuple(p.shape), seed * 1000 + i, p.dtype) / fan ** 0.5)
    return m


class Digest:
    def __init__(self):
        self.h = hashlib.sha256()

    def add(self, t):
        t = t.detach().contiguous()
        self.h.update(str((tuple(t.shape), str(t.dtype))).encode())
        self.h.update(t.view(torch.uint8).cpu().numpy().tobytes())

    def hex(self):
        return self.h.hexdigest()


def emit(name, ok, digest, time_s, **extra):
    """The result line: the last line of stdout, one JSON object."""
    out = {"name": name, "ok": bool(ok), "digest": digest, "time_s": round(time_s, 6),
           "torch": torch.__version__, "gpu": torch.cuda.get_device_name(0),
           "sm_count": torch.cuda.get_device_properties(0).multi_processor_count}
    out.update(extra)
    print(json.dumps(out), flush=True)
    return 0 if ok else 1


def timed(fn, n):
    """Seconds per call of fn over n calls, synchronized at both ends."""
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(n):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t) / n


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)
