#!/usr/bin/env python3
"""Several threads multiplying with cuSPARSE on their own streams at once, as
PyTorch's TestCuda.test_cusparse_multiple_threads_same_device does: each
thread syncs the device, meets the others at a barrier, then runs
results = weight.mm(results); results.div_(size) on its own stream (weight is
a sparse all-ones matrix, so every result stays exactly 1), then syncs the
device. A deadlock shows as a timeout of the run (bench/gpu/graphs/run sets
VE_WATCHDOG_MS so that a stuck wait logs what it waits for). Digest: SHA-256
of the results. Prints one JSON line last."""
import argparse
import threading
import time

import common  # noqa: E402
import torch  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--iters", type=int, default=500)
    a = ap.parse_args()
    weight = torch.ones((a.size, a.size), device="cuda").to_sparse()
    results = {}
    errors = []
    d = common.Digest()
    t0 = time.perf_counter()
    for trial in range(a.trials):
        for t in range(a.threads):
            results[t] = torch.ones((a.size, a.size), device="cuda")
        barrier = threading.Barrier(a.threads)

        def worker(t):
            try:
                s = torch.cuda.Stream()
                torch.cuda.synchronize()
                barrier.wait()
                with torch.cuda.stream(s):
                    for _ in range(a.iters):
                        results[t] = weight.mm(results[t])
                        results[t].div_(float(a.size))
                torch.cuda.synchronize()
            except Exception as e:  # reported in the JSON line
                errors.append(repr(e))

        ths = [threading.Thread(target=worker, args=(t,)) for t in range(a.threads)]
        for th in ths:
            th.start()
        for th in ths:
            th.join()
        for t in range(a.threads):
            d.add(results[t])
        common.log(f"trial {trial}: done")
    ok = not errors and all(bool((results[t] == 1).all()) for t in range(a.threads))
    return common.emit("torch_sparse_threads", ok, d.hex(), (time.perf_counter() - t0) / a.trials,
                       errors=errors[:4])


if __name__ == "__main__":
    raise SystemExit(main())
