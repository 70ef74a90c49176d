#!/usr/bin/env python3
"""Renders the result tables of docs/evaluation.md from the result JSONs, so
that the document is regenerated, never hand-edited. No dependencies.

    bench/gpu/evaluation_tables.py [--results DIR] [--doc FILE] [--write | --check]

Reads from DIR (default bench/results): drift.json, pool.json, decode.json,
determinism.json and overhead.json (or, for the last two, gpu-summary.json as
written by bench/gpu/run_gpu.sh). Without --write/--check it prints every
table. --write replaces the text between each `<!-- table:NAME -->` and
`<!-- /table:NAME -->` pair of the document; --check exits 1 when the
document differs from what --write would make. A missing result renders as
"not yet measured", never as a number.
"""
import argparse
import json
import os
import re
import sys

DRIFT_MODES = ["ve_chaos", "ve_tput", "reshape_grid", "reshape_cublas", "mps_split", "green_ctx_raw"]
POOL_VARIANTS = ["hierarchical", "flat", "on_demand", "mps"]
NOT_YET = "not yet measured"


def load(d, name):
    p = os.path.join(d, name)
    if not os.path.exists(p):
        return None
    try:
        with open(p) as f:
            return json.load(f)
    except ValueError:
        return None


def table(head, rows):
    out = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return out


def machine_short(m):
    """The GPU, driver and CUDA parts of a result's machine string (commas
    inside parentheses kept), not the notes some results append."""
    parts, depth, cur = [], 0, ""
    for ch in str(m):
        depth += (ch == "(") - (ch == ")")
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    parts.append(cur.strip())
    keep = [p for p in parts if re.search(r"NVIDIA|GeForce|Tesla|\bH\d+|\bA\d+|driver|CUDA|\d+ SMs|\d+ MiB", p)]
    return ", ".join(keep or parts[:1])


def source(name, d):
    if not d:
        return f"Source: `bench/results/{name}`: {NOT_YET}."
    return f"Source: `bench/results/{name}`, {d.get('date', '?')}, {machine_short(d.get('machine', '?'))}."


def fnum(v, p=1):
    if v is None:
        return "-"
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, int):
        return str(v)
    return f"{v:.{p}f}"


def t_drift(res):
    d = load(res, "drift.json")
    head = ["workload"] + DRIFT_MODES
    if not d:
        return [source("drift.json", d), ""] + table(head, [[NOT_YET] + ["-"] * len(DRIFT_MODES)])
    rows = []
    for w in d.get("workloads", []):
        row = [f"`{w['name']}`"]
        for m in DRIFT_MODES:
            r = w.get("modes", {}).get(m)
            if not r:
                row.append("n/a")
                continue
            mark = "**1**" if r["distinct_outputs"] == 1 else f"{r['distinct_outputs']}"
            row.append(f"{mark} / {r['max_ulp']} ({r['trials']})")
        rows.append(row)
    if not rows:
        rows = [[NOT_YET] + ["-"] * len(DRIFT_MODES)]
    return [source("drift.json", d),
            "Cells: distinct outputs / max ULP from the native output (trials); "
            "n/a: the mode does not apply to the workload or could not run (see method).", ""] + table(head, rows)


def t_pool(res):
    d = load(res, "pool.json")
    head = ["variant", "start-up (ms)", "binding p50 (us)", "binding p99 (us)", "device (MiB)",
            "host RSS (MiB)", "allocations"]
    rows = []
    for v in POOL_VARIANTS:
        r = (d or {}).get("variants", {}).get(v)
        if not r or all(r.get(k) is None for k in ("startup_ms", "bind_us_p50", "device_mib")):
            rows.append([v, NOT_YET, "-", "-", "-", "-", "-"])
            continue
        rows.append([v, fnum(r.get("startup_ms")), fnum(r.get("bind_us_p50")), fnum(r.get("bind_us_p99")),
                     fnum(r.get("device_mib")), fnum(r.get("host_rss_mib")), fnum(r.get("allocations"))])
    rt = (d or {}).get("runtime") or {}
    out = [source("pool.json", d), ""] + table(head, rows) + [""]
    rrow = [fnum(rt.get("libve_device_mib")), fnum(rt.get("libve_rss_mib")), fnum(rt.get("ved_rss_mib"))]
    if all(x == "-" for x in rrow):
        rrow = [NOT_YET, "-", "-"]
    out += table(["libve.so adds: device (MiB)", "libve.so adds: RSS (MiB)", "idle ved RSS (MiB)"], [rrow])
    return out


def flatten(x, prefix="", out=None):
    out = [] if out is None else out
    if isinstance(x, dict):
        for k, v in x.items():
            flatten(v, f"{prefix}.{k}" if prefix else k, out)
    elif isinstance(x, list) and x and all(isinstance(e, dict) and "name" in e for e in x):
        for e in x:
            flatten({k: v for k, v in e.items() if k != "name"}, f"{prefix}[{e['name']}]", out)
    elif isinstance(x, (int, float, bool)) and not isinstance(x, str):
        out.append((prefix, x))
    return out


def t_decode(res):
    d = load(res, "decode.json")
    if not d:
        return [source("decode.json", d), ""] + table(["measure", "value"], [[NOT_YET, "-"]])
    if isinstance(d.get("workloads"), list) and all("modes" in w for w in d["workloads"]):
        modes = []
        for w in d["workloads"]:
            for m in w["modes"]:
                if m not in modes:
                    modes.append(m)
        keys = []
        for w in d["workloads"]:
            for r in w["modes"].values():
                for k in r:
                    if k not in keys and isinstance(r[k], (int, float)):
                        keys.append(k)
        rows = [[f"`{w['name']}`"] + [" / ".join(fnum(w["modes"].get(m, {}).get(k)) for k in keys)
                                      for m in modes] for w in d["workloads"]]
        return [source("decode.json", d), f"Cells: {' / '.join(keys)}.", ""] + table(["workload"] + modes, rows)
    if isinstance(d.get("modes"), dict) and isinstance(d.get("native"), dict):
        # decode_bench.py's schema: one row per mode against the native run.
        n = d["native"]
        rows = [["native (reference)", fnum(n.get("generations")), "-", "-",
                 fnum(n.get("ms_per_token"), 3)]]
        for m, v in d["modes"].items():
            fd = v.get("first_divergence") or []
            rows.append([f"`{m}`", fnum(v.get("generations")),
                         f"{fnum(v.get('identical_to_native'))} of {fnum(v.get('generations'))}",
                         fnum(v.get("logits_max_abs_diff"), 4) + (f"; first flips at token {min(fd)}" if fd else ""),
                         fnum(v.get("ms_per_token"), 3)])
        notes = [f"Note: {x}" for x in d.get("notes", [])]
        return ([source("decode.json", d),
                 f"{fnum(n.get('generations'))} greedy generations of {fnum(n.get('tokens'))} tokens, "
                 f"{fnum((n.get('model') or {}).get('layers'))}-layer model; identical = every token and "
                 "every step's logits bitwise equal to native.", ""]
                + table(["mode", "generations", "identical to native", "max abs logit diff", "ms/token"], rows)
                + ([""] + notes if notes else []))
    pairs = [(k, v) for k, v in flatten(d) if k not in ("date",)][:60]
    return [source("decode.json", d), "(flattened: every numeric field)", ""] + table(
        ["measure", "value"], [[f"`{k}`", fnum(v, 3)] for k, v in pairs] or [[NOT_YET, "-"]])


def newer(curated, summary, key):
    """The run_gpu.sh summary replaces a curated file when it is more recent."""
    if summary and key in summary and (not curated or summary.get("date", "") > curated.get("date", "")):
        return None
    return curated


def t_determinism(res):
    g = load(res, "gpu-summary.json")
    d = newer(load(res, "determinism.json"), g, "determinism")
    modes = ["native", "chaos", "tput"]
    rows = []
    if d and "workloads" in d:
        for w, r in d["workloads"].items():
            row = [f"`{w}`"]
            for m in modes:
                e = r.get(m)
                if not e:
                    row.append("-")
                elif e.get("bitwise_identical_to_native") and e.get("consistent_within_run"):
                    row.append(f"identical ({e.get('reps')})")
                else:
                    row.append(f"DIFFERENT ({e.get('reps')})")
            rows.append(row)
        extra = []
        if "cuda_c_suite_total" in d:
            suite = d.get("cuda_c_suite") or {}
            differ = [p for p, r in suite.items() if r.get("digest_across_modes") not in ("same", "-")]
            extra = [f"CUDA C suite: {d['cuda_c_suite_total']} (native, tput, chaos); digests "
                     + (f"differ across modes for {', '.join(differ)}." if differ else
                        "equal across modes wherever a program produced one.")]
            if d.get("cuda_c_suite_notes"):
                extra.append(d["cuda_c_suite_notes"])
        return [source("determinism.json", d)] + extra + [""] + table(["PyTorch workload"] + modes, rows)
    if g and "determinism" in g:
        for w, r in g["determinism"].items():
            row = [f"`{w}`"]
            for m in modes:
                e = r.get(m, {})
                if "error" in e:
                    row.append("error")
                elif e:
                    ok = e.get("consistent") and (m == "native" or e.get("identical_to_native"))
                    row.append(f"{'identical' if ok else 'DIFFERENT'} ({e.get('reps')})")
                else:
                    row.append("-")
            rows.append(row)
        return [source("gpu-summary.json", g), ""] + table(["PyTorch workload"] + modes, rows)
    return [source("determinism.json", None), ""] + table(["PyTorch workload"] + modes, [[NOT_YET, "-", "-", "-"]])


def t_overhead(res):
    g = load(res, "gpu-summary.json")
    d = newer(load(res, "overhead.json"), g, "launch")
    launch = (d or {}).get("launch")
    infer = (d or {}).get("eager_inference_latency_us") or (d or {}).get("infer")
    src = source("overhead.json", d)
    if not d and g and (g.get("launch") or g.get("infer_latency")):
        launch, infer = g.get("launch"), g.get("infer_latency")
        src = source("gpu-summary.json", g)
    out = [src, ""]
    rows = []
    # Modes as each file has them: native, whole, tput (2026-12-02) or
    # native, grant, op (grant mode and per-op binding, 2026-12-03).
    modes = [m for m in ("native", "whole", "tput", "grant", "op")
             if (launch or {}).get(m) or (infer or {}).get(m)] or ["native", "whole", "tput"]
    for m in modes:
        lr = (launch or {}).get(m) or {}
        ir = (infer or {}).get(m) or {}
        if not lr and not ir:
            rows.append([m, NOT_YET, "-", "-", "-"])
            continue
        rows.append([m, fnum(lr.get("launch_us_median"), 2), fnum(lr.get("chain_us_per_kernel_median"), 2),
                     fnum(ir.get("p50_us")), fnum(ir.get("p95_us"))])
    return out + table(["mode", "app-thread us per launch", "dependent chain us per kernel",
                        "eager inference p50 (us)", "p95 (us)"], rows)


TABLES = {"drift": t_drift, "pool": t_pool, "decode": t_decode, "determinism": t_determinism,
          "overhead": t_overhead}


def render_doc(text, res):
    def sub(m):
        name = m.group(1)
        if name not in TABLES:
            return m.group(0)
        body = "\n".join(TABLES[name](res))
        return f"<!-- table:{name} -->\n{body}\n<!-- /table:{name} -->"
    return re.sub(r"<!-- table:(\w+) -->.*?<!-- /table:\1 -->", sub, text, flags=re.S)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    repo = os.path.dirname(os.path.dirname(here))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results", default=os.path.join(repo, "bench", "results"))
    ap.add_argument("--doc", default=os.path.join(repo, "docs", "evaluation.md"))
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--write", action="store_true")
    g.add_argument("--check", action="store_true")
    a = ap.parse_args()
    if not (a.write or a.check):
        for name, fn in TABLES.items():
            print(f"## {name}\n")
            print("\n".join(fn(a.results)) + "\n")
        return 0
    with open(a.doc) as f:
        text = f.read()
    new = render_doc(text, a.results)
    if a.check:
        if new != text:
            print(f"{a.doc} is out of date: run {os.path.relpath(__file__, repo)} --write", file=sys.stderr)
            return 1
        return 0
    if new != text:
        with open(a.doc, "w") as f:
            f.write(new)
        print(f"updated {a.doc}")
    else:
        print(f"{a.doc} already up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
