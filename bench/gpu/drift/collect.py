#!/usr/bin/env python3
"""Merges the JSON lines of the drift programs (drift.cu, torch_drift.py)
into bench/results/drift.json and a detail file with the histograms.

    collect.py --machine STR --out DIR LINES.jsonl...

drift.json has exactly: date, machine, method, workloads: [{name, modes:
{mode: {trials, distinct_outputs, max_ulp}}}] for the modes ve_chaos,
ve_tput, reshape_grid, reshape_cublas, mps_split, green_ctx_raw; a mode that
does not apply to a workload (or could not run) is left out. Lines of one
(workload, mode) from several processes (mps_split: one per percentage) are
merged: trials add up, histograms add up, distinct outputs are counted over
the merged histogram. drift-detail.json keeps everything else: per-digest
counts and ULPs, SM counts seen, the native run, why a mode was unavailable.
"""
import argparse
import datetime
import json
import os
import sys

MODES = ["ve_chaos", "ve_tput", "reshape_grid", "reshape_cublas", "mps_split", "green_ctx_raw"]
ORDER = ["reduce_sum", "splitk_gemm", "cublas_sgemm", "cublas_gemmex_bf16",
         "torch_bf16_square", "torch_bf16_skinny", "torch_fp32_square", "torch_fp32_skinny"]

METHOD = (
    "Each workload is launched T times per mode; each trial's output is read back and identified by "
    "its bits (64-bit hash for the CUDA C programs, SHA-256 for PyTorch); distinct_outputs = number of "
    "different outputs over the mode's trials; max_ulp = largest ULP distance (in the output's own "
    "format: fp32, or bf16 for PyTorch bf16 outputs) of any trial from the reference output, the first "
    "output of the native run with the fixed configuration (what the program computes alone on the "
    "GPU). Workloads: reduce_sum = grid-stride sum of 64 Mi floats, fixed grid 1056 x 256 then one "
    "fixed block over the partials; splitk_gemm = fp32 512x512x8192, split-K S=16, partials added in "
    "fixed order by a second kernel; cublas_sgemm / cublas_gemmex_bf16 = cuBLAS 256x256x16384 fp32 and "
    "bf16-in/fp32-out; torch_* = torch.matmul as PyTorch issues it (deterministic algorithms, "
    "CUBLAS_WORKSPACE_CONFIG=:4096:8, no TF32). Modes: ve_chaos = unchanged program under ve-run "
    "--policy chaos with VE_WINDOW=0 (every launch bound to a random pool entry; the kernels record "
    "%smid, so the SM counts actually used are in drift-detail.json); ve_tput = unchanged program "
    "through ved (policy tput, MPS running) beside a co-runner process looping GEMMs in on/off "
    "phases; reshape_grid = the same kernels run natively but sized per trial to an SM count drawn "
    "from the pool's allocation sizes (grid = 8 blocks per SM, split-K S = SMs*8/64 tiles), as "
    "systems that resize kernels to their SM allocation do; reshape_cublas = cublasSetSmCountTarget(n) "
    "changing per trial; mps_split = the unchanged program as MPS clients with "
    "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE 25/50/75/100, trials split among the four processes (the "
    "libraries see the capped SM count); green_ctx_raw = PyTorch matmuls on PyTorch green contexts of "
    "changing size (torch.cuda.green_contexts), no Vitamin-E."
)


def load_lines(paths):
    recs = []
    for p in paths:
        if not os.path.exists(p):
            print(f"collect: {p} missing (that run produced nothing)", file=sys.stderr)
            continue
        with open(p) as f:
            for n, line in enumerate(f, 1):
                line = line.strip()
                if not line.startswith("{"):
                    continue
                try:
                    r = json.loads(line)
                except ValueError as e:
                    print(f"collect: {p}:{n}: bad JSON ({e})", file=sys.stderr)
                    continue
                if "workload" in r and "mode" in r:
                    r["_file"] = os.path.basename(p)
                    recs.append(r)
    return recs


def merge(recs):
    groups = {}
    for r in recs:
        groups.setdefault((r["workload"], r["mode"]), []).append(r)
    merged = {}
    for key, rs in groups.items():
        ok = [r for r in rs if "unavailable" not in r and "trials" in r]
        m = {"runs": len(rs)}
        why = sorted({r["unavailable"] for r in rs if "unavailable" in r and r["unavailable"]})
        if why:
            m["unavailable"] = why
        if ok:
            hist, ulp, sm_seen, by = {}, {}, {}, {}
            for r in ok:
                for d, c in r.get("hist", {}).items():
                    hist[d] = hist.get(d, 0) + c
                for d, u in r.get("ulp", {}).items():
                    ulp[d] = max(ulp.get(d, 0), u)
                for s, c in r.get("sm_seen", {}).items():
                    sm_seen[s] = sm_seen.get(s, 0) + c
                for s, ds in (r.get("by_target") or r.get("by_size") or {}).items():
                    by.setdefault(s, set()).update(ds)
            m.update(trials=sum(r["trials"] for r in ok), distinct_outputs=len(hist),
                     max_ulp=max(r.get("max_ulp", 0) for r in ok), hist=hist, ulp=ulp,
                     reference=sorted({r.get("reference", "?") for r in ok}),
                     seconds=round(sum(r.get("seconds", 0) for r in ok), 3))
            if sm_seen:
                m["sm_seen"] = dict(sorted(sm_seen.items(), key=lambda x: int(x[0])))
            if by:
                m["outputs_by_sm_count"] = {s: sorted(v) for s, v in sorted(by.items(), key=lambda x: int(x[0]))}
            procs = [{k: r.get(k) for k in ("tag", "device_sms", "trials", "distinct_outputs", "max_ulp")
                      if k in r} for r in ok]
            if len(procs) > 1 or any("tag" in p for p in procs):
                m["processes"] = procs
            if any(r.get("check") == "FAILED" for r in ok):
                m["check"] = "FAILED"
            if any("error" in r for r in ok):
                m["errors"] = [r["error"] for r in ok if "error" in r]
        merged[key] = m
    return merged


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--machine", required=True)
    ap.add_argument("--out", required=True, help="directory for drift.json and drift-detail.json")
    ap.add_argument("--note", default="", help="appended to method (run parameters, deviations)")
    ap.add_argument("lines", nargs="+")
    a = ap.parse_args()
    recs = load_lines(a.lines)
    merged = merge(recs)
    names = sorted({w for w, _ in merged}, key=lambda w: (ORDER.index(w) if w in ORDER else 99, w))
    workloads, detail = [], {}
    notes = []
    for w in names:
        modes = {}
        nat = merged.get((w, "native"))
        nat_digest = None
        if nat and nat.get("distinct_outputs") == 1:
            nat_digest = next(iter(nat["hist"]))
        dw = {}
        for mode in ["native"] + MODES:
            m = merged.get((w, mode))
            if not m:
                continue
            if nat_digest and "hist" in m:
                m["identical_to_native"] = set(m["hist"]) == {nat_digest}
            dw[mode] = m
            if mode in MODES and "trials" in m:
                modes[mode] = {"trials": m["trials"], "distinct_outputs": m["distinct_outputs"],
                               "max_ulp": m["max_ulp"]}
            elif mode in MODES and "unavailable" in m:
                notes.append(f"{w} {mode}: unavailable ({'; '.join(m['unavailable'])})")
            if m.get("check") == "FAILED":
                notes.append(f"{w} {mode}: a correctness check against float64 FAILED (see the log)")
        detail[w] = dw
        if modes:
            workloads.append({"name": w, "modes": modes})
    sms = sorted({r.get("device_sms") for r in recs if r.get("mode") == "native" and r.get("device_sms")})
    machine = a.machine
    if len(sms) == 1 and "SMs" not in machine and " (" in machine:
        machine = machine.replace(" (", f" ({sms[0]} SMs, ", 1)
    method = METHOD
    if a.note:
        method += " " + a.note
    if notes:
        method += " Notes: " + "; ".join(notes) + "."
    res = {"date": datetime.date.today().isoformat(), "machine": machine, "method": method,
           "workloads": workloads}
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "drift.json"), "w") as f:
        json.dump(res, f, indent=1)
        f.write("\n")
    with open(os.path.join(a.out, "drift-detail.json"), "w") as f:
        json.dump({"date": res["date"], "machine": machine, "workloads": detail}, f, indent=1)
        f.write("\n")
    # The short table, last thing a run prints.
    print(f"{'workload':20s} {'mode':15s} {'trials':>7s} {'distinct':>8s} {'max_ulp':>10s}  native-identical")
    for w in names:
        for mode, m in detail[w].items():
            if "trials" not in m:
                print(f"{w:20s} {mode:15s} {'-':>7s} {'-':>8s} {'-':>10s}  unavailable: {'; '.join(m.get('unavailable', []))[:60]}")
                continue
            ident = m.get("identical_to_native")
            print(f"{w:20s} {mode:15s} {m['trials']:7d} {m['distinct_outputs']:8d} {m['max_ulp']:10d}  "
                  f"{'-' if ident is None else ident}")
    for n in notes:
        print("note:", n)


if __name__ == "__main__":
    main()
