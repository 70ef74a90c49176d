#!/usr/bin/env python3
"""Memory of a small PyTorch process after its first launches: device memory
in use on the whole GPU (torch.cuda.mem_get_info; the GPU is otherwise idle)
and this process's VmRSS. Run it natively and under ve-run: the difference
is what the Vitamin-E runtime (libve.so: the pool of green contexts, lanes,
staging buffers, the dispatcher) adds. Prints one JSON line.

    torch_mem.py LABEL
"""
import json
import sys
import time

import torch


def rss_mib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return -1.0


def main():
    label = sys.argv[1] if len(sys.argv) > 1 else "run"
    t0 = time.time()
    g = torch.Generator(device="cpu").manual_seed(1)
    x = torch.randn(1024, 1024, generator=g).cuda()
    y = x
    for _ in range(20):
        y = torch.tanh(y @ x) * 0.5
    torch.cuda.synchronize()
    free, total = torch.cuda.mem_get_info()
    print(json.dumps({
        "label": label,
        "device_used_mib": round((total - free) / 2**20, 1),
        "torch_reserved_mib": round(torch.cuda.memory_reserved() / 2**20, 1),
        "rss_mib": round(rss_mib(), 1),
        "seconds": round(time.time() - t0, 2),
        "checksum": float(y.double().sum().item()),
    }), flush=True)


if __name__ == "__main__":
    main()
