#!/usr/bin/env python3
"""A Llama-style decoder-only model in plain PyTorch, for the serving and
decode benchmarks (bench/gpu/serve_llm.py, bench/gpu/decode_bench.py).

RMSNorm, rotary embeddings, grouped-query attention written as matmul +
masked softmax (no fused attention backend, so nothing non-deterministic),
SwiGLU MLP, bf16, random weights from a fixed seed. Default size: d_model
2048, 22 layers, 16 query heads / 4 KV heads (head dim 128), FFN 5632, vocab
32000: 1.1 B parameters. --small: the same with 4 layers (0.31 B).

Serving runs through an Engine: B fixed-shape decode slots, each with its own
position and its own KV cache of a fixed maximum length. A request is
prefilled alone at the fixed prompt length into a staging cache, which is
then copied whole into a free slot. Every kernel of a decode step has the
same shape whatever the slots hold and no reduction crosses rows, so a
request's tokens do not depend on which requests shared its batch or when
they arrived. Empty slots are computed and ignored.

Weights are a hash of (seed, tensor, index) computed elementwise on the GPU:
torch.randn on CUDA maps elements to Philox streams by launch grid, which
follows the SM count, so under MPS with a thread percentage it would build a
different model and nothing could be compared.

Self-test (batch invariance, CUDA graph == eager, run-to-run, timings):
    python3 bench/gpu/llm.py [--small] [--layers N] [--json OUT]
"""
import os

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import random  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

BF16 = torch.bfloat16
FULL_LAYERS = 22
SMALL_LAYERS = 4
MODEL_SEED = 0


def set_determinism():
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True
    torch.use_deterministic_algorithms(True)
    try:
        # (a from-import: `import torch.utils...` here would make `torch` local)
        from torch.utils import deterministic
        # Deterministic mode fills every torch.empty with NaN: one more kernel
        # per allocation. Nothing here reads memory it has not written.
        deterministic.fill_uninitialized_memory = False
    except (ImportError, AttributeError):
        pass


class Config:
    def __init__(self, n_layers=FULL_LAYERS, d_model=2048, n_heads=16, n_kv_heads=4, ffn=5632,
                 vocab=32000, rope_theta=10000.0, eps=1e-5, seed=MODEL_SEED):
        if d_model % n_heads or n_heads % n_kv_heads or (d_model // n_heads) % 2:
            raise ValueError("bad head layout")
        self.n_layers, self.d_model, self.n_heads, self.n_kv_heads = n_layers, d_model, n_heads, n_kv_heads
        self.ffn, self.vocab, self.rope_theta, self.eps, self.seed = ffn, vocab, rope_theta, eps, seed
        self.head_dim = d_model // n_heads
        self.group = n_heads // n_kv_heads
        # Fused QKV rows: per KV head, its G query heads then its key head
        # (so after rotary the queries of one KV head stay one strided view
        # and attention needs no copy), then all value heads.
        self.n_qk = n_kv_heads * (self.group + 1) * self.head_dim
        self.n_qkv = self.n_qk + n_kv_heads * self.head_dim

    def n_params(self):
        d = self.d_model
        layer = d * self.n_qkv + d * d + d * 2 * self.ffn + self.ffn * d + 2 * d
        return self.n_layers * layer + 2 * self.vocab * d + d

    def describe(self):
        return {"layers": self.n_layers, "d_model": self.d_model, "heads": self.n_heads,
                "kv_heads": self.n_kv_heads, "head_dim": self.head_dim, "ffn": self.ffn,
                "vocab": self.vocab, "params": self.n_params(), "dtype": "bfloat16",
                "weights": f"hash-uniform, seed {self.seed}"}


def make_config(small=False, layers=None):
    n = layers if layers else (SMALL_LAYERS if small else FULL_LAYERS)
    return Config(n_layers=n)


_M32 = 0xFFFFFFFF


def _mul32(h, c):
    # (h * c) mod 2^32 for 0 <= h < 2^32, in 16-bit halves so that no int64
    # product overflows (signed overflow is not something to rely on).
    lo, hi = c & 0xFFFF, c >> 16
    return (h * lo + (((h * hi) & 0xFFFF) << 16)) & _M32


def hash_uniform(shape, seed, stream, device):
    """float64 values uniform in [-1, 1): murmur3's finalizer of (index, seed,
    stream). Elementwise, so the bits are the same on any GPU partition."""
    n = math.prod(shape)
    if n >= 1 << 32:
        raise ValueError("tensor too large for a 32-bit index hash")
    key = (seed * 0x632BE5AB + stream * 0x85157AF5 + 0x27D4EB2F) & _M32
    h = _mul32(torch.arange(n, device=device, dtype=torch.int64), 0x9E3779B1) ^ key
    h = h ^ (h >> 16)
    h = _mul32(h, 0x85EBCA6B)
    h = h ^ (h >> 13)
    h = _mul32(h, 0xC2B2AE35)
    h = h ^ (h >> 16)
    return (h.to(torch.float64) * (2.0 / 4294967296.0) - 1.0).view(shape)


def rope_tables(head_dim, n_pos, theta):
    # Computed on the CPU in float64: the same tables everywhere.
    inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
    f = torch.outer(torch.arange(n_pos, dtype=torch.float64), inv)
    cos = torch.cat([f.cos(), f.cos()], dim=-1)
    # rotate-half's sign folded into sin: rope(x) = x*cos + roll(x, hd/2)*sin
    sin = torch.cat([-f.sin(), f.sin()], dim=-1)
    return cos, sin


def prompt_ids(seed, index, length, vocab):
    """Prompt of request `index`: a function of (seed, index) only."""
    g = torch.Generator().manual_seed((seed * 1000003 + index * 7919 + 1) & ((1 << 63) - 1))
    return torch.randint(0, vocab, (length,), generator=g, dtype=torch.int64)


class Model:
    """Weights; an Engine owns the KV caches and runs prefill and decode."""

    def __init__(self, cfg, device="cuda", max_pos=4096):
        c = self.cfg = cfg
        d, hd, std = c.d_model, c.head_dim, 0.02
        streams = iter(range(1, 1 << 30))
        amp = std * math.sqrt(3.0)  # uniform with this std

        def w(shape, row_scale=None):
            t = hash_uniform(shape, c.seed, next(streams), device) * amp
            if row_scale is not None:
                t = t * row_scale
            return t.to(BF16).contiguous()

        # The softmax scale 1/sqrt(hd) is folded into the query rows (rotary
        # is linear): one kernel fewer per layer and step.
        qs = torch.ones(c.n_qkv, 1, dtype=torch.float64)
        for j in range(c.n_kv_heads):
            s = j * (c.group + 1) * hd
            qs[s:s + c.group * hd] = 1.0 / math.sqrt(hd)
        qs = qs.to(device)
        self.embed = w((c.vocab, d))
        self.wqkv, self.wo, self.wgu, self.wd, self.ln1, self.ln2 = [], [], [], [], [], []
        for _ in range(c.n_layers):
            self.wqkv.append(w((c.n_qkv, d), qs))
            self.wo.append(w((d, d)))
            self.wgu.append(w((2 * c.ffn, d)))  # gate rows, then up rows
            self.wd.append(w((d, c.ffn)))
            self.ln1.append(torch.ones(d, dtype=BF16, device=device))
            self.ln2.append(torch.ones(d, dtype=BF16, device=device))
        self.lnf = torch.ones(d, dtype=BF16, device=device)
        self.lm_head = w((c.vocab, d))
        cos, sin = rope_tables(hd, max_pos, c.rope_theta)
        self.cos, self.sin = cos.to(device=device, dtype=BF16), sin.to(device=device, dtype=BF16)
        self.max_pos = max_pos
        self.device = device
        if torch.device(device).type == "cuda":
            torch.cuda.synchronize()

    def rms(self, x, w):
        if hasattr(F, "rms_norm"):
            return F.rms_norm(x, (x.shape[-1],), w, self.cfg.eps)
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.cfg.eps)
        return xf.to(x.dtype) * w

    def mlp(self, l, x):
        h = self.rms(x, self.ln2[l])
        gu = F.linear(h, self.wgu[l])
        f = self.cfg.ffn
        return x + F.linear(F.silu(gu[..., :f]) * gu[..., f:], self.wd[l])


def rope(x, cos, sin):
    return torch.addcmul(x * cos, torch.roll(x, shifts=x.shape[-1] // 2, dims=-1), sin)


def checksum_coefficients(n, device):
    # Odd and < 2^31: |bits| < 2^15, so the sum of n < 2^15 products stays
    # below 2^61 and no int64 ever overflows.
    rng = random.Random(0x5EED)
    return torch.tensor([rng.getrandbits(30) * 2 + 1 for _ in range(n)], dtype=torch.int64, device=device)


class Engine:
    """B decode slots of fixed shape, a staging cache for prefill, and the
    decode step (eager, or one CUDA graph replay)."""

    def __init__(self, model, batch, prompt_len, max_len, graphs=False, checksum=True):
        c = model.cfg
        if not (0 < prompt_len < max_len <= model.max_pos):
            raise ValueError(f"need 0 < prompt_len ({prompt_len}) < max_len ({max_len}) <= {model.max_pos}")
        self.m, self.c, self.B, self.P, self.L = model, c, batch, prompt_len, max_len
        dev = model.device
        kv = (c.n_layers, batch, c.n_kv_heads, max_len, c.head_dim)
        self.k = torch.zeros(kv, dtype=BF16, device=dev)
        self.v = torch.zeros(kv, dtype=BF16, device=dev)
        # Positions >= P of the staging cache stay zero forever, so a slot's
        # whole cache is a function of its own request once copied in.
        st = (c.n_layers, 1, c.n_kv_heads, max_len, c.head_dim)
        self.sk = torch.zeros(st, dtype=BF16, device=dev)
        self.sv = torch.zeros(st, dtype=BF16, device=dev)
        self.tok = torch.zeros(batch, dtype=torch.int64, device=dev)
        self.pos = torch.zeros(batch, dtype=torch.int64, device=dev)
        self.logits = torch.zeros(batch, c.vocab, dtype=BF16, device=dev)
        self.out = torch.zeros(2, batch, dtype=torch.int64, device=dev)  # next token, logits checksum
        self.pre_out = torch.zeros(2, dtype=torch.int64, device=dev)
        self.arange = torch.arange(max_len, dtype=torch.int64, device=dev)
        self.causal = torch.ones(prompt_len, prompt_len, dtype=torch.bool, device=dev).triu(1)
        self.coef = checksum_coefficients(c.vocab, dev)
        self.use_checksum = checksum
        self.graph = None
        if graphs:
            self.capture()

    def checksum(self, logits):
        """Per row: sum_i bits(logit_i) * c_i with fixed odd c_i (bits as
        int16). An exact integer sum, so the order of the reduction cannot
        matter; a change of one logit's bits always changes it."""
        return (logits.view(torch.int16).to(torch.int64) * self.coef).sum(dim=-1)

    def reset(self):
        self.k.zero_()
        self.v.zero_()
        self.tok.zero_()
        self.pos.zero_()

    # -- prefill: one request, fixed length P ------------------------------
    def prefill(self, prompt):
        """prompt: [P] int64 on the GPU. Fills the staging cache; returns the
        last position's logits [1, V] and their argmax [1]."""
        m, c, P = self.m, self.c, self.P
        KV, G, hd = c.n_kv_heads, c.group, c.head_dim
        x = F.embedding(prompt, m.embed)  # [P, d]
        cos, sin = m.cos[:P].unsqueeze(1), m.sin[:P].unsqueeze(1)
        for l in range(c.n_layers):
            h = m.rms(x, m.ln1[l])
            qkv = F.linear(h, m.wqkv[l])
            qk = rope(qkv[:, :c.n_qk].view(P, -1, hd), cos, sin).reshape(P, KV, G + 1, hd)
            q = qk[:, :, :G].permute(1, 2, 0, 3)  # [KV, G, P, hd]
            k = qk[:, :, G].permute(1, 0, 2)  # [KV, P, hd]
            v = qkv[:, c.n_qk:].view(P, KV, hd).permute(1, 0, 2)
            self.sk[l, 0, :, :P].copy_(k)
            self.sv[l, 0, :, :P].copy_(v)
            s = torch.matmul(q, k.transpose(-1, -2).unsqueeze(1))  # [KV, G, P, P]
            s.masked_fill_(self.causal, float("-inf"))
            a = torch.matmul(torch.softmax(s, dim=-1), v.unsqueeze(1))  # [KV, G, P, hd]
            x = x + F.linear(a.permute(2, 0, 1, 3).reshape(P, c.d_model), m.wo[l])
            x = m.mlp(l, x)
        logits = F.linear(m.rms(x[-1:], m.lnf), m.lm_head)  # [1, V]
        return logits, torch.argmax(logits, dim=-1)

    def insert(self, slot, tok):
        self.k[:, slot].copy_(self.sk[:, 0])
        self.v[:, slot].copy_(self.sv[:, 0])
        self.tok[slot:slot + 1].copy_(tok)
        self.pos[slot:slot + 1].fill_(self.P)

    def admit(self, slot, prompt):
        """Prefill + insert into `slot`. Returns (pre_out, logits): pre_out is
        a [2] int64 GPU tensor (first token, its logits checksum), overwritten
        by the next admit; logits is [1, V]."""
        logits, tok = self.prefill(prompt)
        self.insert(slot, tok)
        self.pre_out[0:1].copy_(tok)
        if self.use_checksum:
            self.pre_out[1:2].copy_(self.checksum(logits))
        return self.pre_out, logits

    # -- decode: all B slots, one token each --------------------------------
    def _layer(self, l, x, cos, sin, wmask, invalid):
        m, c, B = self.m, self.c, self.B
        KV, G, hd = c.n_kv_heads, c.group, c.head_dim
        h = m.rms(x, m.ln1[l])
        qkv = F.linear(h, m.wqkv[l])  # [B, n_qkv]
        qk = rope(qkv[:, :c.n_qk].view(B, -1, hd), cos, sin).reshape(B, KV, G + 1, hd)
        q = qk[:, :, :G]  # [B, KV, G, hd]
        k = qk[:, :, G:]  # [B, KV, 1, hd]
        v = qkv[:, c.n_qk:].view(B, KV, 1, hd)
        ck, cv = self.k[l], self.v[l]  # [B, KV, L, hd]
        # Each row writes its own position; a where over the (small) cache
        # keeps the step free of index_put (sorting under deterministic mode).
        torch.where(wmask, k, ck, out=ck)
        torch.where(wmask, v, cv, out=cv)
        s = torch.matmul(q, ck.transpose(-1, -2))  # [B, KV, G, L]
        s.masked_fill_(invalid, float("-inf"))
        a = torch.matmul(torch.softmax(s, dim=-1), cv)  # [B, KV, G, hd]
        x = x + F.linear(a.reshape(B, c.d_model), m.wo[l])
        return m.mlp(l, x)

    def _step(self):
        m, c, B, L = self.m, self.c, self.B, self.L
        pos = self.pos
        x = F.embedding(self.tok, m.embed)  # [B, d]
        cos = m.cos.index_select(0, pos).unsqueeze(1)  # [B, 1, hd]
        sin = m.sin.index_select(0, pos).unsqueeze(1)
        row, p = self.arange.unsqueeze(0), pos.unsqueeze(1)
        wmask = (row == p).view(B, 1, L, 1)
        invalid = (row > p).view(B, 1, 1, L)
        for l in range(c.n_layers):
            x = self._layer(l, x, cos, sin, wmask, invalid)
        torch.mm(m.rms(x, m.lnf), m.lm_head.t(), out=self.logits)
        nxt = torch.argmax(self.logits, dim=-1)
        self.out[0].copy_(nxt)
        if self.use_checksum:
            self.out[1].copy_(self.checksum(self.logits))
        self.tok.copy_(nxt)
        # Empty slots keep stepping; the clamp keeps their position indexable.
        self.pos.add_(1).clamp_(max=L - 1)

    def step(self):
        """One decode step for every slot: results in self.out / self.logits,
        next inputs in self.tok / self.pos. Nothing is synchronized."""
        if self.graph is not None:
            self.graph.replay()
        else:
            self._step()

    def capture(self, warmup=3):
        self.reset()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(warmup):
                self._step()
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            self._step()
        torch.cuda.synchronize()
        self.graph = g
        self.reset()
        torch.cuda.synchronize()


# -- self-test ---------------------------------------------------------------

def _run(eng, prompts, plan, gen):
    """plan: (step, request, slot) admissions. Returns {request: (tokens, checksums)}."""
    eng.reset()
    res, slot_req = {}, {}
    last = max(at for at, _, _ in plan) + gen
    for t in range(last):
        for at, r, s in plan:
            if at == t:
                pre, _ = eng.admit(s, prompts[r])
                a, b = pre.tolist()
                res[r] = ([a], [b])
                slot_req[s] = r
        eng.step()
        toks, sums = eng.out.tolist()
        for s, r in slot_req.items():
            if len(res[r][0]) < gen:
                res[r][0].append(toks[s])
                res[r][1].append(sums[s])
    return res


def _median_ms(fn, n):
    ts = []
    for _ in range(n):
        torch.cuda.synchronize()
        t = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        ts.append((time.perf_counter() - t) * 1e3)
    ts.sort()
    return round(ts[len(ts) // 2], 3)


def selftest(args):
    set_determinism()
    cfg = make_config(args.small, args.layers)
    t = time.perf_counter()
    model = Model(cfg)
    init_s = time.perf_counter() - t
    P, gen, B = 64, 24, 16
    prompts = [prompt_ids(0, i, P, cfg.vocab).cuda() for i in range(B)]
    checks = {}
    eager = Engine(model, B, P, P + gen + 16)
    solo = _run(eager, prompts, [(0, 0, 3)], gen)
    mixed_plan = [(5, 0, 9)] + [(r % 11, r, s) for r, s in zip(range(1, B), [0, 1, 2, 3, 4, 5, 6, 7, 8, 10, 11, 12, 13, 14, 15])]
    mixed = _run(eager, prompts, mixed_plan, gen)
    checks["batch_invariant_req0"] = solo[0] == mixed[0]
    solo7 = _run(eager, prompts, [(0, 7, 0)], gen)
    checks["batch_invariant_req7"] = solo7[7] == mixed[7]
    checks["run_to_run"] = _run(eager, prompts, mixed_plan, gen) == mixed
    graphed = Engine(model, B, P, P + gen + 16, graphs=True)
    checks["graph_equals_eager_b16"] = _run(graphed, prompts, mixed_plan, gen) == mixed
    e1 = Engine(model, 1, P, P + gen + 16)
    g1 = Engine(model, 1, P, P + gen + 16, graphs=True)
    r1 = _run(e1, prompts, [(0, 0, 0)], gen)
    checks["graph_equals_eager_b1"] = _run(g1, prompts, [(0, 0, 0)], gen) == r1
    timing = {"prefill_ms": _median_ms(lambda: eager.admit(0, prompts[0]), 10)}
    for name, eng in (("b1_eager", e1), ("b1_graph", g1), ("b16_eager", eager), ("b16_graph", graphed)):
        eng.reset()
        timing[f"step_ms_{name}"] = _median_ms(eng.step, 30)
    out = {"model": cfg.describe(), "init_s": round(init_s, 2), "torch": torch.__version__,
           "gpu": torch.cuda.get_device_name(0),
           "sm_count": torch.cuda.get_device_properties(0).multi_processor_count,
           "checks": checks, "all_ok": all(checks.values()), "timing": timing,
           "req0_distinct_tokens": len(set(mixed[0][0])), "req0_tokens": mixed[0][0]}
    text = json.dumps(out, indent=1)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text + "\n")
    print(text)
    return 0 if out["all_ok"] else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--small", action="store_true", help=f"{SMALL_LAYERS} layers instead of {FULL_LAYERS}")
    ap.add_argument("--layers", type=int, default=None, help="explicit layer count (overrides --small)")
    ap.add_argument("--json", default=None, help="also write the result here")
    args = ap.parse_args()
    if args.layers is not None and not 1 <= args.layers <= 64:
        ap.error("--layers must be in 1..64")
    if not torch.cuda.is_available():
        print("llm.py: no CUDA device", file=sys.stderr)
        return 1
    return selftest(args)


if __name__ == "__main__":
    sys.exit(main())
