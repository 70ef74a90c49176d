#!/usr/bin/env python3
"""Greedy decode under reshaping vs under Vitamin-E: the pieces that
bench/gpu/decode runs (see there for the protocol).

  decode_bench.py plan   --generations N --tokens T --layers L --modes M,.. --budget-s S
  decode_bench.py share  --mode M --remaining M,.. --budget-end EPOCH --native W.json ...
  decode_bench.py worker --modes native[,reshape] | ve_chaos | ve_tput | mps_split ...
  decode_bench.py report --work DIR --json OUT --details OUT2 ...

A worker builds the model of bench/gpu/llm.py (batch 1, eager, no logits
checksum) and runs greedy generations of T tokens (the first from the
prefill) from fixed prompts, reading every step's bf16 logits into pinned
host memory without synchronizing until the end of the generation. Per
generation it keeps the tokens and a SHA-256 (16 hex) of every step's logits.
The native worker writes the reference: tokens and step digests of every
generation, and the exact bf16 logits of the first --logit-steps steps
(default 32, 2 MiB per generation at vocab 32000; deleted at the end unless
kept). Other workers compare each generation with the reference as they go:
first token position that differs, whether every step's logits are bitwise
equal, and the max |logit - native logit| over the saved steps up to and
including the first divergent token (after it the contexts differ, so a
logits difference means nothing). Steps beyond --logit-steps are compared
by digest only. Only plan/share/report run without PyTorch.
"""
import argparse
import datetime
import glob
import hashlib
import json
import os
import sys
import time

MODES = ("native", "reshape", "ve_chaos", "ve_tput", "mps_split")
RESHAPE_SMS = (8, 16, 32, 64, 98, 132)

# A-priori cost model for the plan: eager kernels per token and host cost
# per kernel (us) in each mode, start-up seconds, processes in parallel. The
# shares after the native run scale with the measured native ms/token. From
# the H200 (decode.json of 2026-12-03, 4 layers, 108 kernels a token): native
# 3.76 ms/token, reshape 4.23, ve_chaos 2.24 and ve_tput 2.31 (the driver
# calls leave the Python thread), an MPS-capped process about 4.3.
US_PER_OP = {"native": 35.0, "reshape": 39.0, "ve_chaos": 21.0, "mps_split": 40.0, "ve_tput": 22.0}
STARTUP_S = {"native": 15.0, "reshape": 2.0, "ve_chaos": 20.0, "mps_split": 25.0, "ve_tput": 45.0}
PARALLEL = {"mps_split": 3}
MIN_SHARE_S = 30.0


def ops_per_token(layers):
    return 22 * layers + 20


def est_seconds(mode, gens, tokens, layers, native_ms_per_token=None):
    if native_ms_per_token:
        ms = native_ms_per_token * US_PER_OP[mode] / US_PER_OP["native"]
    else:
        ms = ops_per_token(layers) * US_PER_OP[mode] / 1000.0
    per_gen = tokens * ms / 1000.0 + 0.03  # + prefill, hashing, compare
    return STARTUP_S[mode] + gens * per_gen / PARALLEL.get(mode, 1)


def share_seconds(mode, remaining, budget_end, gens, tokens, layers, native_ms_per_token, now=None):
    """Seconds `mode` may run: what is left of the budget, split among the
    modes still to run in proportion to their estimated cost. Vitamin-E
    modes come first: the claim needs every one of their generations, so
    each gets its whole estimate (x1.3) while the Vitamin-E modes' together
    fit in what is left; the baselines share the rest."""
    now = time.time() if now is None else now
    left = budget_end - now - 5.0 * len(remaining)
    ests = {m: est_seconds(m, gens, tokens, layers, native_ms_per_token) for m in remaining}
    ve = {m: 1.3 * e for m, e in ests.items() if m.startswith("ve_")}
    base = {m: e for m, e in ests.items() if not m.startswith("ve_")}
    if ve and sum(ve.values()) + MIN_SHARE_S * len(base) <= left:
        if mode in ve:
            return max(MIN_SHARE_S, ve[mode])
        rest = left - sum(ve.values())
        return max(MIN_SHARE_S, rest * base[mode] / sum(base.values()))
    return max(MIN_SHARE_S, left * ests[mode] / sum(ests.values()))


def note(msg):
    print(f"[{datetime.datetime.now().strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def csv(s):
    return [x for x in (s or "").split(",") if x]


# -- plan / share -------------------------------------------------------------

def cmd_plan(a):
    modes = ["native"] + [m for m in csv(a.modes) if m != "native"]
    rows, total = [], 0.0
    for m in modes:
        e = est_seconds(m, a.generations, a.tokens, a.layers)
        total += e
        rows.append((m, e))
    print(f"decode plan: {a.generations} generations x {a.tokens} tokens, {a.layers}-layer model "
          f"(~{ops_per_token(a.layers)} kernels/token), budget {a.budget_s:.0f} s")
    print(f"  {'mode':10s} {'est_s':>7s}")
    for m, e in rows:
        print(f"  {m:10s} {e:7.0f}")
    print(f"  {'total':10s} {total:7.0f}")
    if total > a.budget_s:
        print(f"  over budget by {total - a.budget_s:.0f} s: after native, each mode gets a share of what is "
              f"left (>= {MIN_SHARE_S:.0f} s) and stops starting generations when it runs out")
    return 0


def cmd_share(a):
    ms = None
    try:
        with open(a.native) as f:
            ms = json.load(f)["modes"]["native"]["ms_per_token"]
    except (OSError, KeyError, ValueError):
        pass
    s = share_seconds(a.mode, csv(a.remaining), a.budget_end, a.generations, a.tokens, a.layers, ms)
    print(int(s))
    return 0


# -- worker -------------------------------------------------------------------

def first_diff(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


class CublasSm:
    """cublasSetSmCountTarget on PyTorch's own cuBLAS handle, through the
    libcublas that torch loaded."""

    def __init__(self, torch):
        import ctypes
        path = None
        with open("/proc/self/maps") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 6 and os.path.basename(parts[5]).startswith("libcublas.so"):
                    path = parts[5]
                    break
        if path is None:
            raise RuntimeError("libcublas.so is not mapped in this process (no GEMM run yet?)")
        self.path = path
        lib = ctypes.CDLL(path)
        self._set = lib.cublasSetSmCountTarget
        self._set.argtypes = [ctypes.c_void_p, ctypes.c_int]
        self._set.restype = ctypes.c_int
        self._get = lib.cublasGetSmCountTarget
        self._get.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
        self._get.restype = ctypes.c_int
        self._ct = ctypes
        self.handle = ctypes.c_void_p(torch.cuda.current_blas_handle())

    def set(self, n):
        rc = self._set(self.handle, int(n))
        if rc != 0:
            raise RuntimeError(f"cublasSetSmCountTarget({n}) = {rc}")

    def get(self):
        v = self._ct.c_int(-1)
        rc = self._get(self.handle, self._ct.byref(v))
        return v.value if rc == 0 else None


class Worker:
    def __init__(self, a):
        import torch
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import llm
        self.torch, self.llm, self.a = torch, llm, a
        llm.set_determinism()
        # cublasSetSmCountTarget steers the cuBLAS API; PyTorch's cublasLt
        # path carries its own SM target. Every mode uses the same library.
        try:
            torch.backends.cuda.preferred_blas_library("cublas")
        except (AttributeError, RuntimeError):
            pass
        self.blas = str(torch.backends.cuda.preferred_blas_library()) \
            if hasattr(torch.backends.cuda, "preferred_blas_library") else "default"
        self.cfg = llm.make_config(layers=a.layers)
        t = time.perf_counter()
        self.model = llm.Model(self.cfg)
        self.eng = llm.Engine(self.model, 1, a.prompt_len, a.prompt_len + a.tokens, graphs=False, checksum=False)
        self.host = torch.empty((a.tokens, self.cfg.vocab), dtype=torch.bfloat16, pin_memory=True)
        self.toks_dev = torch.zeros(a.tokens, dtype=torch.int64, device="cuda")
        self.prompts = {}
        self.build_s = time.perf_counter() - t
        self.ref_dir = os.path.join(a.work, "ref")
        self.ref = None

    def prompt(self, g):
        if g not in self.prompts:
            self.prompts[g] = self.llm.prompt_ids(self.a.seed, g, self.a.prompt_len, self.cfg.vocab).cuda()
        return self.prompts[g]

    def generate(self, g):
        """One greedy generation; returns (tokens, step digests, seconds)."""
        torch, eng, host, T = self.torch, self.eng, self.host, self.a.tokens
        torch.cuda.synchronize()
        t = time.perf_counter()
        _, logits = eng.admit(0, self.prompt(g))
        host[0].copy_(logits[0], non_blocking=True)
        self.toks_dev[0:1].copy_(eng.tok[0:1])
        for s in range(1, T):
            eng.step()
            host[s].copy_(eng.logits[0], non_blocking=True)
            self.toks_dev[s:s + 1].copy_(eng.tok[0:1])
        torch.cuda.synchronize()
        dt = time.perf_counter() - t
        toks = self.toks_dev.tolist()
        arr = host.view(torch.int16).numpy()
        digs = [hashlib.sha256(arr[s].tobytes()).hexdigest()[:16] for s in range(T)]
        return toks, digs, dt

    def load_ref(self):
        with open(os.path.join(self.ref_dir, "native.json")) as f:
            r = json.load(f)
        if r["tokens_per_generation"] != self.a.tokens or r["prompt_len"] != self.a.prompt_len \
                or r["layers"] != self.a.layers or r["seed"] != self.a.seed:
            raise SystemExit("decode_bench: the reference in the work dir was made with other settings")
        self.ref = r

    def compare(self, g, toks, digs):
        torch = self.torch
        key = str(g)
        if key not in self.ref["tokens"]:
            return {"g": g, "error": "no native reference for this generation"}
        rt, rd = self.ref["tokens"][key], self.ref["digests"][key]
        div = first_diff(toks, rt)
        upto = len(toks) if div is None else div + 1  # steps whose context matched native
        mism = [s for s in range(upto) if digs[s] != rd[s]]
        k = min(self.ref["logit_steps"], upto)
        diff = 0.0
        if any(s < k for s in mism):
            ref = torch.load(os.path.join(self.ref_dir, f"logits-{g:04d}.pt"), weights_only=True)
            diff = float((self.host[:k].float() - ref[:k].float()).abs().max().item())
        return {"g": g, "tokens_identical": div is None,
                "logits_identical": div is None and not mism,
                "first_divergence": div,
                "first_logits_mismatch_step": mism[0] if mism else None,
                "logits_mismatch_steps": len(mism), "compared_steps": upto,
                "logits_max_abs_diff": diff, "diff_steps": k,
                "diff_covers_all_mismatches": all(s < k for s in mism)}

    def save_ref(self, g, toks, digs):
        torch = self.torch
        k = min(self.a.logit_steps, self.a.tokens)
        torch.save(self.host[:k].clone(), os.path.join(self.ref_dir, f"logits-{g:04d}.pt"))
        self.ref["tokens"][str(g)] = toks
        self.ref["digests"][str(g)] = digs

    def write_ref(self):
        tmp = os.path.join(self.ref_dir, "native.json.tmp")
        with open(tmp, "w") as f:
            json.dump(self.ref, f)
        os.replace(tmp, os.path.join(self.ref_dir, "native.json"))


def cmd_worker(a):
    modes = csv(a.modes)
    bad = [m for m in modes if m not in MODES]
    if bad or not modes:
        raise SystemExit(f"decode_bench worker: unknown mode(s) {bad}; known: {', '.join(MODES)}")
    if "native" in modes and modes[0] != "native":
        raise SystemExit("decode_bench worker: native must come first")
    if a.tokens < 2 or a.generations < 1 or a.prompt_len < 1:
        raise SystemExit("decode_bench worker: need --tokens >= 2, --generations >= 1, --prompt-len >= 1")
    k, n = (int(x) for x in a.shard.split("/"))
    gens = [g for g in range(a.generations) if g % n == k]
    if not gens:
        raise SystemExit(f"decode_bench worker: shard {a.shard} of {a.generations} generations is empty")
    os.makedirs(os.path.join(a.work, "ref"), exist_ok=True)
    w = Worker(a)
    torch = w.torch
    props = torch.cuda.get_device_properties(0)
    out = {"tag": a.tag, "pid": os.getpid(), "gpu": torch.cuda.get_device_name(0),
           "sm_count": props.multi_processor_count, "torch": torch.__version__, "cuda": torch.version.cuda,
           "model": w.cfg.describe(), "blas": w.blas, "build_s": round(w.build_s, 2), "tokens": a.tokens,
           "prompt_len": a.prompt_len, "seed": a.seed,
           "env": {k2: v for k2, v in sorted(os.environ.items())
                   if k2.startswith("VE_") or k2.startswith("CUDA_MPS_ACTIVE") or k2.startswith("CUBLAS")},
           "modes": {}}
    note(f"worker {a.tag}: {','.join(modes)}, {len(gens)} generations, {props.multi_processor_count} SMs, "
         f"model built in {w.build_s:.1f} s")

    def dump():
        tmp = a.out + ".tmp"
        with open(tmp, "w") as f:
            json.dump(out, f, indent=1)
        os.replace(tmp, a.out)

    # Warm-up generation (not compared): cuBLAS heuristics, allocator, pinned copies.
    w.generate(gens[0])
    if a.wait_file:
        # Built and warm while the co-runner starts; go when it runs.
        t = time.time()
        while not os.path.exists(a.wait_file) and time.time() - t < a.wait_max_s:
            time.sleep(0.2)
        out["waited_s"] = round(time.time() - t, 2)
        out["go_file_seen"] = os.path.exists(a.wait_file)
        note(f"worker {a.tag}: waited {out['waited_s']} s for {a.wait_file} (seen: {out['go_file_seen']})")
    for mode in modes:
        res = {"generations_planned": len(gens), "gens": [], "deadline_hit": False}
        out["modes"][mode] = res
        deadline = a.deadline
        if mode == "native":
            w.ref = {"tokens": {}, "digests": {}, "logit_steps": min(a.logit_steps, a.tokens),
                     "tokens_per_generation": a.tokens, "prompt_len": a.prompt_len, "layers": a.layers,
                     "seed": a.seed}
        else:
            if w.ref is None:
                w.load_ref()
            if mode == "reshape" and a.budget_end:
                ms = out["modes"].get("native", {}).get("ms_per_token")
                sh = share_seconds("reshape", ["reshape"] + csv(a.later), a.budget_end, a.generations,
                                   a.tokens, a.layers, ms)
                deadline = time.time() + sh
                note(f"reshape: share {sh:.0f} s")
        sm = None
        if mode == "reshape":
            sm = CublasSm(torch)
            res["libcublas"] = sm.path
            res["probe_gemm_bits_change"] = reshape_probe(w, sm, a.reshape_sms)
            note(f"reshape probe (GEMMs whose bits change per SM target): {res['probe_gemm_bits_change']}")
        t_mode = time.perf_counter()
        per_tok = []
        try:
            for j, g in enumerate(gens):
                if deadline and time.time() > deadline:
                    res["deadline_hit"] = True
                    note(f"{mode}: deadline reached after {j} generations")
                    break
                target = None
                if sm is not None:
                    target = a.reshape_sms[j % len(a.reshape_sms)]
                    sm.set(target)
                toks, digs, dt = w.generate(g)
                per_tok.append(dt * 1e3 / a.tokens)
                if mode == "native":
                    w.save_ref(g, toks, digs)
                    r = {"g": g, "seconds": round(dt, 4)}
                else:
                    r = w.compare(g, toks, digs)
                    r["seconds"] = round(dt, 4)
                    if sm is not None:
                        r["sm_target"] = target
                        r["sm_target_read_back"] = sm.get()
                res["gens"].append(r)
                if (j + 1) % 10 == 0 or j + 1 == len(gens):
                    ident = sum(1 for x in res["gens"] if x.get("logits_identical"))
                    note(f"{mode}: {j + 1}/{len(gens)} generations, {sorted(per_tok)[len(per_tok) // 2]:.3f} "
                         f"ms/token" + ("" if mode == "native" else f", {ident} bitwise identical"))
                    res["ms_per_token"] = round(sorted(per_tok)[len(per_tok) // 2], 4)
                    dump()
        finally:
            if sm is not None:
                sm.set(0)
                res["sm_target_after_reset"] = sm.get()
        res["seconds"] = round(time.perf_counter() - t_mode, 2)
        if per_tok:
            res["ms_per_token"] = round(sorted(per_tok)[len(per_tok) // 2], 4)
        if mode == "native":
            w.write_ref()
            # The same generation again in the same process: must not move a bit.
            toks, digs, _ = w.generate(gens[0])
            res["repeat_identical"] = (toks == w.ref["tokens"][str(gens[0])]
                                       and digs == w.ref["digests"][str(gens[0])])
            note(f"native: done in {res['seconds']} s, repeat identical: {res['repeat_identical']}")
        dump()
    return 0


def reshape_probe(w, sm, targets):
    """The model's decode GEMM shapes (one row) under each SM target vs 0."""
    torch, llm, c = w.torch, w.llm, w.cfg
    shapes = {"qkv": (c.n_qkv, c.d_model), "o": (c.d_model, c.d_model), "gate_up": (2 * c.ffn, c.d_model),
              "down": (c.d_model, c.ffn), "lm_head": (c.vocab, c.d_model)}
    ops = {}
    for i, (name, (n, kdim)) in enumerate(shapes.items()):
        x = llm.hash_uniform((1, kdim), 7, 1000 + i, "cuda").to(torch.bfloat16)
        wt = (llm.hash_uniform((n, kdim), 7, 2000 + i, "cuda") * 0.03).to(torch.bfloat16)
        ops[name] = (x, wt)
    sm.set(0)
    base = {k: torch.nn.functional.linear(x, wt) for k, (x, wt) in ops.items()}
    out = {}
    for t in targets:
        sm.set(t)
        out[str(t)] = [k for k, (x, wt) in ops.items() if not torch.equal(torch.nn.functional.linear(x, wt), base[k])]
    sm.set(0)
    return out


# -- report -------------------------------------------------------------------

def cmd_report(a):
    files = sorted(glob.glob(os.path.join(a.work, "w-*.json")))
    workers = []
    for p in files:
        try:
            with open(p) as f:
                workers.append((os.path.basename(p), json.load(f)))
        except (OSError, ValueError) as e:
            note(f"report: cannot read {p}: {e}")
    nat = None
    for _, w in workers:
        if "native" in w.get("modes", {}):
            nat = w
    modes_out, details = {}, {"workers": {}}
    for name, w in workers:
        details["workers"][name] = {k: v for k, v in w.items() if k != "modes"}
        details["workers"][name]["modes"] = {m: {k: v for k, v in r.items() if k != "gens"}
                                             for m, r in w.get("modes", {}).items()}
    for m in csv(a.modes):
        if m == "native":
            continue
        gens, infos = [], []
        for name, w in workers:
            r = w.get("modes", {}).get(m)
            if r is not None:
                gens += [x for x in r["gens"] if "error" not in x]
                infos.append({"worker": name, "tag": w.get("tag"), "sm_count": w.get("sm_count"),
                              "generations": len(r["gens"]), "deadline_hit": r.get("deadline_hit"),
                              "ms_per_token": r.get("ms_per_token"),
                              **({"probe_gemm_bits_change": r["probe_gemm_bits_change"]}
                                 if "probe_gemm_bits_change" in r else {})})
        gens.sort(key=lambda x: x["g"])
        skip = os.path.join(a.work, f"skipped-{m}.txt")
        if not gens:
            reason = open(skip).read().strip() if os.path.exists(skip) else "no generations ran (see logs)"
            modes_out[m] = {"generations": 0, "identical_to_native": 0, "first_divergence": None,
                            "logits_max_abs_diff": None, "skipped": reason}
            continue
        div = [x["first_divergence"] for x in gens if x["first_divergence"] is not None]
        modes_out[m] = {"generations": len(gens),
                        "identical_to_native": sum(1 for x in gens if x["logits_identical"]),
                        "first_divergence": div or None,
                        "logits_max_abs_diff": max(x["logits_max_abs_diff"] for x in gens)}
        details[m] = {"workers": infos,
                      "tokens_identical": sum(1 for x in gens if x["tokens_identical"]),
                      "logits_bitwise_identical": modes_out[m]["identical_to_native"],
                      "diff_covers_all_mismatches": all(x["diff_covers_all_mismatches"] for x in gens),
                      "generations": gens}
        if os.path.exists(skip):
            details[m]["note"] = open(skip).read().strip()
    native = None
    if nat is not None:
        r = nat["modes"]["native"]
        native = {"generations": len(r["gens"]), "tokens": nat["tokens"], "prompt_len": nat["prompt_len"],
                  "model": nat["model"], "ms_per_token": r.get("ms_per_token"), "seconds": r.get("seconds"),
                  "repeat_identical": r.get("repeat_identical"), "sm_count": nat["sm_count"],
                  "torch": nat["torch"], "cuda": nat["cuda"], "gpu": nat["gpu"]}
    machine = a.machine or (nat["gpu"] if nat else "unknown GPU")
    if nat:
        machine += f" ({nat['sm_count']} SMs as PyTorch reports), PyTorch {nat['torch']}, CUDA {nat['cuda']}"
    method = (f"greedy decode, batch 1, eager PyTorch (cuBLAS, not cublasLt, for GEMMs), {native['model']['layers'] if native else '?'}-layer "
              f"Llama-style bf16 model (d 2048, GQA 16/4, vocab 32000, hash-seeded weights); "
              f"{native['generations'] if native else '?'} generations of {native['tokens'] if native else '?'} "
              f"tokens from fixed prompts of {native['prompt_len'] if native else '?'} tokens, each compared with "
              f"the native run: identical_to_native = every token and every step's bf16 logits bitwise equal; "
              f"first_divergence = first differing token position per generation whose tokens differ; "
              f"logits_max_abs_diff = max |logit - native| over the first {a.logit_steps} steps up to the first "
              f"divergent token. ve_chaos: ve-run --policy chaos, VE_WINDOW=0 (random pool entry per kernel); "
              f"ve_tput: MPS + ved (tput) beside a GEMM/training co-runner under Vitamin-E; reshape: native, "
              f"cublasSetSmCountTarget on PyTorch's cuBLAS handle cycling {','.join(map(str, RESHAPE_SMS))} "
              f"per generation; mps_split: MPS, three processes at CUDA_MPS_ACTIVE_THREAD_PERCENTAGE 25/50/75 "
              f"sharing the generations. Modes after native stop starting generations when their share of the "
              f"time budget ({a.budget_s} s) runs out.")
    res = {"date": datetime.date.today().isoformat(), "machine": machine, "method": method,
           "modes": modes_out, "native": native}
    os.makedirs(os.path.dirname(os.path.abspath(a.json)), exist_ok=True)
    with open(a.json, "w") as f:
        json.dump(res, f, indent=1)
        f.write("\n")
    if a.details:
        with open(a.details, "w") as f:
            json.dump(details, f, indent=1)
            f.write("\n")
    print(f"\n{'mode':10s} {'gens':>5s} {'bitwise':>8s} {'tok_div':>8s} {'max|dlogit|':>12s}  first divergences")
    if native:
        print(f"{'native':10s} {native['generations']:5d} {'ref':>8s} {'-':>8s} {'-':>12s}  "
              f"{native['ms_per_token']} ms/token, repeat identical {native['repeat_identical']}")
    for m, r in modes_out.items():
        if r.get("skipped"):
            print(f"{m:10s} skipped: {r['skipped']}")
            continue
        d = r["first_divergence"] or []
        dstr = ",".join(map(str, d[:12])) + (",..." if len(d) > 12 else "")
        print(f"{m:10s} {r['generations']:5d} {r['identical_to_native']:8d} {len(d):8d} "
              f"{r['logits_max_abs_diff']:12.4g}  {dstr}")
    print(f"wrote {a.json}")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)

    def common(p):
        p.add_argument("--generations", type=int, default=100)
        p.add_argument("--tokens", type=int, default=256)
        p.add_argument("--layers", type=int, default=4)

    p = sub.add_parser("plan")
    common(p)
    p.add_argument("--modes", default=",".join(MODES[1:]))
    p.add_argument("--budget-s", type=float, default=225)
    p = sub.add_parser("share")
    common(p)
    p.add_argument("--mode", required=True)
    p.add_argument("--remaining", required=True)
    p.add_argument("--budget-end", type=float, required=True)
    p.add_argument("--native", required=True, help="the native worker's JSON (measured ms/token)")
    p = sub.add_parser("worker")
    common(p)
    p.add_argument("--modes", required=True)
    p.add_argument("--prompt-len", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--shard", default="0/1", help="k/n: the generations g with g %% n == k")
    p.add_argument("--tag", default="")
    p.add_argument("--deadline", type=float, default=0.0, help="epoch s after which no generation starts")
    p.add_argument("--budget-end", type=float, default=0.0, help="for reshape's share after native")
    p.add_argument("--later", default="", help="modes that run after this process (for reshape's share)")
    p.add_argument("--wait-file", default="", help="after warm-up, wait until this file exists")
    p.add_argument("--wait-max-s", type=float, default=180.0)
    p.add_argument("--logit-steps", type=int, default=32)
    p.add_argument("--reshape-sms", default=",".join(map(str, RESHAPE_SMS)))
    p.add_argument("--work", required=True)
    p.add_argument("--out", required=True)
    p = sub.add_parser("report")
    p.add_argument("--work", required=True)
    p.add_argument("--modes", default=",".join(MODES[1:]))
    p.add_argument("--json", required=True)
    p.add_argument("--details", default=None)
    p.add_argument("--machine", default=None)
    p.add_argument("--logit-steps", type=int, default=32)
    p.add_argument("--budget-s", type=float, default=225)
    a = ap.parse_args()
    if a.cmd == "worker":
        try:
            a.reshape_sms = [int(x) for x in csv(a.reshape_sms)]
            kk, nn = (int(x) for x in a.shard.split("/"))
            if not 0 <= kk < nn:
                raise ValueError
        except ValueError:
            ap.error("bad --reshape-sms or --shard")
        if not a.reshape_sms or any(x < 0 for x in a.reshape_sms):
            ap.error("--reshape-sms needs non-negative SM counts")
    return {"plan": cmd_plan, "share": cmd_share, "worker": cmd_worker, "report": cmd_report}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
