#!/usr/bin/env python3
"""Output drift of PyTorch GEMMs as PyTorch issues them (torch.matmul).

Four GEMMs, bf16 and fp32, square and skinny (few output tiles, long K:
cuBLAS picks split-K kernels there), each run TRIALS times. Every trial's
output is compared bitwise with the distinct outputs seen so far (on the GPU);
a new one gets its SHA-256 (first 16 hex digits) and its largest ULP distance
from the reference (the native run's first output, saved with --save-ref).

  --mode native          plain process (run it with --save-ref DIR first)
  --mode ve_chaos        the same, run by the caller under ve-run --policy chaos
  --mode mps_split       the same, run by the caller as an MPS client with
                         CUDA_MPS_ACTIVE_THREAD_PERCENTAGE set (PyTorch then
                         sees fewer SMs); --tag pct=N labels the process
  --mode green_ctx_raw   every trial on a PyTorch green context of a size
                         drawn from --sizes (torch.cuda.green_contexts); when
                         the API is missing or fails, one line per workload
                         says "unavailable" and why

One JSON line per workload goes to --out (appended); progress to stderr.
Determinism settings as everywhere in the project: CUBLAS_WORKSPACE_CONFIG,
deterministic algorithms, no TF32, seeded inputs.
"""
import argparse
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

# name, dtype, M, K, N
WORKLOADS = [
    ("torch_bf16_square", torch.bfloat16, 2048, 2048, 2048),
    ("torch_bf16_skinny", torch.bfloat16, 64, 16384, 1024),
    ("torch_fp32_square", torch.float32, 1024, 1024, 1024),
    ("torch_fp32_skinny", torch.float32, 32, 16384, 512),
]
POOL_SIZES = [8, 12, 16, 20, 32, 36, 64, 68, 96, 100, 112, 116, 120, 124, 132]
MAX_CLASSES = 256  # distinct outputs kept on the GPU for bitwise comparison


def say(msg):
    print(f"[{time.strftime('%H:%M:%S')}] torch_drift: {msg}", file=sys.stderr, flush=True)


def bits(t):
    return t.view(torch.int16) if t.dtype == torch.bfloat16 else t.view(torch.int32)


def ordered(t):
    """Integers in the order of the float values: differences are ULPs."""
    if t.dtype == torch.bfloat16:
        i, lo = t.view(torch.int16).to(torch.int64), -(1 << 15)
    else:
        i, lo = t.view(torch.int32).to(torch.int64), -(1 << 31)
    return torch.where(i < 0, lo - i, i)


def max_ulp(a, ref):
    if ref is None:
        return 0
    if torch.isnan(a).any().item() != torch.isnan(ref).any().item():
        return 2 ** 63 - 1
    return int((ordered(a) - ordered(ref)).abs().max().item())


def sha(t):
    return hashlib.sha256(t.contiguous().cpu().view(torch.uint8).numpy().tobytes()).hexdigest()[:16]


class Classes:
    """Distinct outputs: bitwise comparison on the GPU against the ones seen."""

    def __init__(self, ref):
        self.ref = ref
        self.reps = []  # (bits tensor, digest)
        self.hist, self.ulp = {}, {}
        self.first = None

    def add(self, out):
        b = bits(out)
        digest = None
        for rb, d in self.reps:
            if torch.equal(rb, b):
                digest = d
                break
        if digest is None:
            if self.ref is not None and (self.ref.shape != out.shape or self.ref.dtype != out.dtype):
                say(f"reference {tuple(self.ref.shape)} {self.ref.dtype} does not match the output; ignored")
                self.ref = None
            digest = sha(out)
            if digest not in self.ulp:
                self.ulp[digest] = max_ulp(out, self.ref)
            if len(self.reps) < MAX_CLASSES:
                self.reps.append((b.clone(), digest))
        if self.first is None:
            self.first = out.detach().clone()
        self.hist[digest] = self.hist.get(digest, 0) + 1
        return digest


def inputs(idx, dtype, m, k, n, seed):
    g = torch.Generator(device="cpu").manual_seed(seed * 1000 + idx)
    a = torch.randn(m, k, generator=g).to(dtype).to("cuda")
    b = torch.randn(k, n, generator=g).to(dtype).to("cuda")
    return a, b


def load_ref(ref_dir, name):
    if not ref_dir:
        return None
    p = os.path.join(ref_dir, name + ".pt")
    if not os.path.exists(p):
        return None
    return torch.load(p, map_location="cuda")


def trial_sizes(trials, sizes, seed):
    g = torch.Generator(device="cpu").manual_seed(seed + 4242)
    idx = torch.randint(0, len(sizes), (trials,), generator=g).tolist()
    return [sizes[i] for i in idx]


class GreenRunner:
    """Runs a callable on a green context of n SMs with whichever PyTorch API
    this build has: GreenContext(num_sms=n) or GreenContext.create(n, dev),
    then its Stream() or set_context/pop_context (make_current/pop_current
    in older builds)."""

    def __init__(self, sizes):
        try:
            import torch.cuda.green_contexts as gcm
        except Exception as e:  # noqa: BLE001
            raise RuntimeError(f"import torch.cuda.green_contexts: {e!r}")
        if not getattr(gcm, "SUPPORTED", True):
            raise RuntimeError("torch.cuda.green_contexts.SUPPORTED is False (PyTorch built without it)")
        gc = gcm.GreenContext
        self.ctx, self.streams, self.errors = {}, {}, {}
        for n in sorted(set(sizes)):
            try:
                try:
                    c = gc(num_sms=n)
                except TypeError:
                    c = gc.create(n, torch.cuda.current_device())
                self.ctx[n] = c
                if hasattr(c, "Stream"):
                    self.streams[n] = c.Stream()
            except Exception as e:  # noqa: BLE001
                self.errors[n] = repr(e)
        if not self.ctx:
            raise RuntimeError(f"no green context could be created: {self.errors}")

    def run(self, n, fn):
        c = self.ctx[n]
        if n in self.streams:
            s = self.streams[n]
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                out = fn()
            s.synchronize()
            return out
        enter = getattr(c, "set_context", None) or getattr(c, "make_current")
        leave = getattr(c, "pop_context", None) or getattr(c, "pop_current")
        torch.cuda.synchronize()
        enter()
        try:
            out = fn()
            torch.cuda.synchronize()
        finally:
            leave()
        return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", required=True, choices=["native", "ve_chaos", "ve_tput", "mps_split", "green_ctx_raw"])
    ap.add_argument("--trials", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--ref", default="", help="directory with the native run's first outputs")
    ap.add_argument("--save-ref", default="", help="save this run's first outputs here")
    ap.add_argument("--out", default="", help="append JSON lines here (default stdout)")
    ap.add_argument("--tag", default="")
    ap.add_argument("--sizes", default=",".join(map(str, POOL_SIZES)), help="green_ctx_raw SM counts")
    ap.add_argument("--workloads", default="", help="comma list (default all)")
    a = ap.parse_args()
    if a.trials < 1:
        ap.error("--trials must be >= 1")
    sizes = [int(x) for x in a.sizes.split(",") if x.strip()]
    wanted = [w for w in a.workloads.split(",") if w]
    names = [w[0] for w in WORKLOADS]
    for w in wanted:
        if w not in names:
            ap.error(f"unknown workload {w} (have {','.join(names)})")
    out = open(a.out, "a") if a.out else sys.stdout
    props = torch.cuda.get_device_properties(0)
    base = {"mode": a.mode, "device": props.name, "device_sms": props.multi_processor_count,
            "torch": torch.__version__}
    if a.tag:
        base["tag"] = a.tag
    say(f"{a.mode}: {props.name}, PyTorch sees {props.multi_processor_count} SMs, torch {torch.__version__}")

    green, green_err = None, None
    if a.mode == "green_ctx_raw":
        try:
            green = GreenRunner(sizes)
            say(f"green contexts: {sorted(green.ctx)} SMs; failed: {green.errors or 'none'}")
        except Exception as e:  # noqa: BLE001
            green_err = str(e)
            say(f"green contexts unavailable: {green_err}")
    if a.save_ref:
        os.makedirs(a.save_ref, exist_ok=True)

    for idx, (name, dtype, m, k, n) in enumerate(WORKLOADS):
        if wanted and name not in wanted:
            continue
        rec = dict(base, workload=name, shape=f"{m}x{k} @ {k}x{n}", dtype=str(dtype).replace("torch.", ""))
        if a.mode == "green_ctx_raw" and green is None:
            rec["unavailable"] = green_err
            print(json.dumps(rec), file=out, flush=True)
            continue
        a_, b_ = inputs(idx, dtype, m, k, n, a.seed)
        ref = load_ref(a.ref, name)
        rec["reference"] = "native run" if ref is not None else "first trial of this run"
        cls = Classes(ref)
        seq = trial_sizes(a.trials, [s for s in sizes if green and s in green.ctx], a.seed) if green else None
        by_size = {}
        torch.cuda.synchronize()
        t0 = time.time()
        err = None
        for t in range(a.trials):
            try:
                if green:
                    o = green.run(seq[t], lambda: torch.matmul(a_, b_))
                else:
                    o = torch.matmul(a_, b_)
            except Exception as e:  # noqa: BLE001
                err = f"trial {t}: {e!r}"
                break
            d = cls.add(o)
            if cls.ref is None:
                cls.ref = cls.first  # reference = first trial when no native one exists
            if green:
                by_size.setdefault(str(seq[t]), set()).add(d)
        torch.cuda.synchronize()
        secs = time.time() - t0
        if a.save_ref and cls.first is not None:
            torch.save(cls.first.cpu(), os.path.join(a.save_ref, name + ".pt"))
        done = sum(cls.hist.values())
        if err and done == 0:
            rec["unavailable"] = err
        else:
            rec.update(trials=done, distinct_outputs=len(cls.hist), max_ulp=max(cls.ulp.values(), default=0),
                       hist=cls.hist, ulp=cls.ulp, seconds=round(secs, 3),
                       ms_per_trial=round(1e3 * secs / max(1, done), 4))
            if err:
                rec["error"] = err
            if green:
                rec["by_size"] = {s: sorted(v) for s, v in sorted(by_size.items(), key=lambda x: int(x[0]))}
                if green.errors:
                    rec["green_ctx_errors"] = {str(k_): v for k_, v in green.errors.items()}
        print(json.dumps(rec), file=out, flush=True)
        say(f"{a.mode} {name}: {done} trials, {len(cls.hist)} distinct, max ulp "
            f"{rec.get('max_ulp')}, {secs:.2f} s{' ERROR ' + err if err else ''}")
    if out is not sys.stdout:
        out.close()


if __name__ == "__main__":
    main()
