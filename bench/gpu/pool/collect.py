#!/usr/bin/env python3
"""Builds bench/results/pool.json from the pool benchmark's outputs.

    collect.py --machine STR --out DIR [--bench FILE] [--mps FILE]
               [--native FILE] [--ve FILE] [--ved-rss-kib N] [--note STR]

--bench: pool_bench's JSON lines (hierarchical, flat, on_demand); --mps: the
line of `pool_bench mps`; --native / --ve: torch_mem.py's line natively and
under ve-run (VE_DAEMON=0); --ved-rss-kib: VmRSS of an idle ved. pool.json
has exactly: date, machine, method, variants: {hierarchical, flat, on_demand,
mps: {startup_ms, bind_us_p50, bind_us_p99, device_mib, host_rss_mib,
allocations}}, runtime: {libve_device_mib, libve_rss_mib, ved_rss_mib}; a
value that was not measured is null.
"""
import argparse
import datetime
import json
import os
import sys

VARIANTS = ["hierarchical", "flat", "on_demand", "mps"]
FIELDS = ["startup_ms", "bind_us_p50", "bind_us_p99", "device_mib", "host_rss_mib", "allocations"]

METHOD = (
    "One C program against the CUDA driver API, alone on the GPU. Binding latency = from picking a "
    "partition to a tiny kernel launched on it having completed (launch + cuStreamSynchronize), "
    "p50/p99 over random partitions. Device memory = cuMemGetInfo delta after one launch on every "
    "stream (lazily allocated state included); host RSS = VmRSS delta. hierarchical: today's pool, "
    "the leaves of one cuDevSmResourceSplitByCount (minCount 8) and the entries of ve_pool_init "
    "(src/pool/pool.c, what the runtime builds), each a green context over the union of its leaves "
    "(cuDevResourceGenerateDesc) with 4 streams; start-up = creating all of them. flat: every "
    "allocation size of the hierarchical pool created on its own, one split per size and a green "
    "context (4 streams) for every group it gives; allocations = green contexts created. on_demand: "
    "nothing kept; each binding splits, generates the descriptor, creates the green context and a "
    "stream, launches and waits (destroying it afterwards is not counted); memory = one live "
    "context; allocations = the sizes drawn (any size can be made). mps: partitions as MPS client "
    "processes with CUDA_MPS_ACTIVE_THREAD_PERCENTAGE; moving a job to another partition means "
    "starting a new process, so its binding latency and start-up are the client start-up, fork to "
    "its first kernel done (after a warm-up client started the MPS server); device memory = "
    "nvidia-smi device-wide delta while one client lives; RSS = the client's VmRSS; allocations = "
    "percentages configured. runtime: a small PyTorch process natively and under ve-run "
    "(VE_DAEMON=0, default pool): difference of device memory in use (torch.cuda.mem_get_info) and "
    "of VmRSS after its first launches = what libve.so adds; ved_rss_mib = VmRSS of an idle ved."
)


def lines(path):
    out = []
    if not path or not os.path.exists(path):
        return out
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                try:
                    out.append(json.loads(line))
                except ValueError:
                    print(f"collect: {path}: bad JSON line", file=sys.stderr)
    return out


def num(v):
    if v is None or (isinstance(v, (int, float)) and v < 0):
        return None
    return v


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--machine", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--bench")
    ap.add_argument("--mps")
    ap.add_argument("--native")
    ap.add_argument("--ve")
    ap.add_argument("--ved-rss-kib", type=float, default=None)
    ap.add_argument("--note", default="")
    a = ap.parse_args()
    got = {r["variant"]: r for r in lines(a.bench) + lines(a.mps) if "variant" in r}
    variants, details = {}, []
    for v in VARIANTS:
        r = got.get(v)
        if r is None:
            variants[v] = {f: None for f in FIELDS}
            details.append(f"{v}: not measured in this run")
            continue
        variants[v] = {f: num(r.get(f)) for f in FIELDS}
        if v == "on_demand":
            variants[v]["startup_ms"] = 0.0  # nothing is created up front
        if r.get("detail"):
            details.append(f"{v}: {r['detail']}")
    nat = (lines(a.native) or [None])[-1]
    ve = (lines(a.ve) or [None])[-1]
    runtime = {"libve_device_mib": None, "libve_rss_mib": None,
               "ved_rss_mib": round(a.ved_rss_kib / 1024.0, 1) if a.ved_rss_kib else None}
    if nat and ve:
        runtime["libve_device_mib"] = round(ve["device_used_mib"] - nat["device_used_mib"], 1)
        runtime["libve_rss_mib"] = round(ve["rss_mib"] - nat["rss_mib"], 1)
        details.append(f"runtime: native {nat['device_used_mib']} MiB device / {nat['rss_mib']} MiB RSS, "
                       f"under ve-run {ve['device_used_mib']} / {ve['rss_mib']}")
    else:
        details.append("runtime: the PyTorch runs did not both report")
    method = METHOD + (" " + a.note if a.note else "") + " Measured: " + "; ".join(details) + "."
    res = {"date": datetime.date.today().isoformat(), "machine": a.machine, "method": method,
           "variants": variants, "runtime": runtime}
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "pool.json"), "w") as f:
        json.dump(res, f, indent=1)
        f.write("\n")

    def fmt(x, p=1):
        return "-" if x is None else (f"{x:.{p}f}" if isinstance(x, float) else str(x))

    print(f"{'variant':13s} {'startup_ms':>10s} {'bind_p50_us':>11s} {'bind_p99_us':>11s} "
          f"{'device_MiB':>10s} {'rss_MiB':>8s} {'allocs':>6s}")
    for v in VARIANTS:
        r = variants[v]
        print(f"{v:13s} {fmt(r['startup_ms']):>10s} {fmt(r['bind_us_p50']):>11s} {fmt(r['bind_us_p99']):>11s} "
              f"{fmt(r['device_mib']):>10s} {fmt(r['host_rss_mib']):>8s} {fmt(r['allocations']):>6s}")
    print(f"runtime: libve adds {fmt(runtime['libve_device_mib'])} MiB device, "
          f"{fmt(runtime['libve_rss_mib'])} MiB RSS; ved RSS {fmt(runtime['ved_rss_mib'])} MiB")


if __name__ == "__main__":
    main()
