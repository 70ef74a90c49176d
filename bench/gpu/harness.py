"""Shared machinery of the GPU orchestrators (bench/gpu/coloc, bench/gpu/mixed):
the mode table and how each mode launches a client and its ved, the round
runner (early spawn, go files, MPS and ved verification, deadlines), machine
information, median/min/max helpers. Processes are in procs.py, MPS and ved
in daemons.py, SVG writers in svgplot.py; all are re-exported here, so the
orchestrators import this module alone.

Nothing here imports torch: the orchestrators must start in milliseconds and
run (with fakes, bench/gpu/selftest/) on machines without a GPU.
"""
import json
import os
import re
import statistics
import sys
import time

from daemons import (InfraError, MPS, Ved, check_foreign_mps, check_foreign_ved,  # noqa: F401
                     find_mps_control, ved_client_check, ved_socket_path, verify_no_mps)
from procs import (OWNER_VAR, REPO, T_START, Proc, _run, clean_leftovers, cleanup_all,  # noqa: F401
                   install_cleanup, last_json_line, leftovers, log, mps_processes, write_go)
from svgplot import bar_panel, cdf_panel, document, legend  # noqa: F401

HERE = os.path.dirname(os.path.abspath(__file__))

# Test hooks (bench/gpu/selftest/): stand-ins for the training job, the LLM
# server and the MPS binaries, so the orchestration runs without a GPU.
TRAIN_SCRIPT = os.environ.get("VE_BENCH_TRAIN") or os.path.join(HERE, "jobs", "train.py")
SERVE_SCRIPT = os.environ.get("VE_BENCH_SERVE") or os.path.join(HERE, "serve_llm.py")
PYTHON = os.environ.get("VE_BENCH_PYTHON") or sys.executable or "python3"


# ------------------------------------------------------------------ stats


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def spread(xs, nd=4):
    xs = [x for x in xs if x is not None]
    if not xs:
        return {"median": None, "min": None, "max": None, "n": 0}
    return {"median": rnd(statistics.median(xs), nd), "min": rnd(min(xs), nd),
            "max": rnd(max(xs), nd), "n": len(xs)}


def rnd(x, nd=4):
    return None if x is None else round(float(x), nd)


def fmt(x, spec="{:.3f}", none="-"):
    return none if x is None else spec.format(x)


def sleep_until(t):
    while True:
        d = t - time.time()
        if d <= 0:
            return
        time.sleep(min(d, 0.2))


# ------------------------------------------------------------------ machine


def git_commit():
    rc, out, _ = _run(["git", "-C", REPO, "rev-parse", "--short=12", "HEAD"])
    if rc != 0:  # a copy of the tree without .git: the caller may say which commit
        return os.environ.get("VE_BENCH_COMMIT")
    rc2, st, _ = _run(["git", "-C", REPO, "status", "--porcelain", "--untracked-files=no"])
    return out + ("-dirty" if rc2 == 0 and st else "")


def cpu_model():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def gpu_info():
    """Name, driver, memory, compute mode of GPU 0, and other processes on it."""
    info = {}
    rc, out, err = _run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total,compute_mode",
                         "--format=csv,noheader"])
    if rc == 0 and out:
        f = [x.strip() for x in out.splitlines()[0].split(",")]
        info.update(gpu=f[0], driver=f[1] if len(f) > 1 else None,
                    memory_total=f[2] if len(f) > 2 else None,
                    compute_mode=f[3] if len(f) > 3 else None)
    else:
        info["gpu_error"] = err or out or "nvidia-smi failed"
    rc, out, _ = _run(["nvidia-smi", "--query-compute-apps=pid,process_name,used_memory",
                       "--format=csv,noheader"])
    info["gpu_processes_at_start"] = [l.strip() for l in out.splitlines() if l.strip()] if rc == 0 else None
    return info


def machine_info(job_results=()):
    """GPU, driver, CPU, commit; torch version and SM count come from a job's JSON."""
    m = gpu_info()
    m.update(cpu=cpu_model(), cpus=os.cpu_count(), commit=git_commit(),
             python=sys.version.split()[0])
    for r in job_results:
        if r and r.get("torch"):
            m.update(torch=r.get("torch"), cuda_runtime=r.get("cuda"))
            if r.get("sm_count_native"):
                m["sm_count"] = r["sm_count_native"]
            break
    return m


# ------------------------------------------------------------------ modes

class Mode:
    def __init__(self, name, desc, mps=False, ve=False, daemon=False, policy=None,
                 split=False, priority=False):
        self.name, self.desc, self.mps, self.ve, self.daemon = name, desc, mps, ve, daemon
        self.policy, self.split, self.priority = policy, split, priority


MODES = {m.name: m for m in (
    Mode("native", "one process, no MPS"),
    Mode("timeslice", "processes side by side without MPS: the driver time-slices their contexts"),
    Mode("mps", "MPS, no limits", mps=True),
    Mode("mps_split", "MPS with CUDA_MPS_ACTIVE_THREAD_PERCENTAGE per client", mps=True, split=True),
    Mode("mps_priority", "MPS, the batch job at CUDA_MPS_CLIENT_PRIORITY=1 (below normal)",
         mps=True, priority=True),
    Mode("ve_solo", "ve-run alone, embedded coordinator (VE_DAEMON=0)", ve=True, policy="tput"),
    Mode("ve_fixed", "MPS + ved policy fixed (a static half of the pool each), clients VE_DAEMON=1",
         mps=True, ve=True, daemon=True, policy="fixed:parts=2"),
    Mode("ve_tput", "MPS + ved policy tput, clients VE_DAEMON=1", mps=True, ve=True, daemon=True,
         policy="tput"),
    Mode("ve_tpot", "MPS + ved policy tpot (server latency class), clients VE_DAEMON=1",
         mps=True, ve=True, daemon=True, policy="tpot"),
    Mode("ve_whole", "MPS + ved policy whole (every op on the whole GPU), clients VE_DAEMON=1",
         mps=True, ve=True, daemon=True, policy="whole"),
)}


def mode_base(name):
    """'ve_tput@b16' is ve_tput under a label of its own (own --ve-env/--policy)."""
    return name.split("@", 1)[0]


def check_modes(names, allowed=None):
    for n in names:
        b = mode_base(n)
        if b not in MODES or (allowed and b not in allowed):
            ok = sorted(allowed or MODES)
            raise SystemExit(f"unknown mode '{n}' (modes: {', '.join(ok)}; a label may follow '@')")


def parse_kv_specs(specs, what):
    """['K=V', 'MODE:K=V', ...] -> {'*': {K: V}, MODE: {K: V}}."""
    out = {"*": {}}
    for s in specs or []:
        scope = "*"
        m = re.match(r"^([a-z_]+(?:@[\w.-]+)?):(.*)$", s)
        if m and "=" not in m.group(1):
            scope, s = m.group(1), m.group(2)
            check_modes([scope])
        k, sep, v = s.partition("=")
        if not sep or not re.match(r"^[A-Z][A-Z0-9_]*$", k):
            raise SystemExit(f"{what} '{s}': want KEY=VALUE or MODE:KEY=VALUE")
        if what == "--ve-env" and not k.startswith("VE_"):
            raise SystemExit(f"--ve-env {k}: only VE_* variables (the runtime's knobs)")
        out.setdefault(scope, {})[k] = v
    return out


class Setup:
    """How each mode launches a client and its ved, for one invocation."""

    def __init__(self, outdir, build, ve_env_specs=(), policy_specs=(), log_level="info"):
        self.outdir = outdir
        self.build = os.path.abspath(build)
        self.ve_env = parse_kv_specs(ve_env_specs, "--ve-env")
        self.policy = {}
        for s in policy_specs or []:
            mode, sep, spec = s.partition("=")
            if not sep or not spec:
                raise SystemExit(f"--policy '{s}': want MODE=SPEC, e.g. ve_fixed=fixed:parts=2")
            check_modes([mode])
            if not MODES[mode_base(mode)].ve:
                raise SystemExit(f"--policy {mode}: not a Vitamin-E mode")
            self.policy[mode] = spec
        self.log_level = log_level
        self.nompsdir = os.path.join(outdir, "no-mps-pipe")
        os.makedirs(self.nompsdir, exist_ok=True)
        self.mps = None  # set by Infra
        self.base_env = self._base_env()

    @staticmethod
    def _base_env():
        env = dict(os.environ)
        dropped = [k for k in env if k.startswith("VE_") and not k.startswith("VE_BENCH_")]
        dropped += [k for k in env if k.startswith("CUDA_MPS_")]
        for k in dropped:
            env.pop(k)
        if dropped:
            log(f"ignoring inherited {', '.join(sorted(dropped))} (pass VE_* with --ve-env)")
        env["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"
        env["PYTHONUNBUFFERED"] = "1"
        env[OWNER_VAR] = str(os.getpid())
        return env

    def mode(self, name):
        return MODES[mode_base(name)]

    def policy_for(self, name, override=None):
        if override:
            return override
        return self.policy.get(name) or self.policy.get(mode_base(name)) or self.mode(name).policy

    def env_for(self, name):
        e = dict(self.ve_env.get("*", {}))
        e.update(self.ve_env.get(mode_base(name), {}))
        e.update(self.ve_env.get(name, {}))
        return e

    def client(self, name, pct=None, low_priority=False, cls=None):
        """(argv prefix, environment) of one client process in mode `name`."""
        m = self.mode(name)
        env = dict(self.base_env)
        if m.mps:
            env.update(self.mps.env())
            if m.split:
                if pct is None:
                    raise ValueError("mps_split needs a percentage per client")
                env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = str(pct)
            if m.priority and low_priority:
                env["CUDA_MPS_CLIENT_PRIORITY"] = "1"
        else:
            # An empty pipe directory: no MPS daemon can be reached, even one
            # someone started at the default /tmp/nvidia-mps.
            env["CUDA_MPS_PIPE_DIRECTORY"] = self.nompsdir
            env["CUDA_MPS_LOG_DIRECTORY"] = self.nompsdir
        prefix = []
        if m.ve:
            env["VE_LOG_LEVEL"] = self.log_level
            env["VE_DAEMON"] = "1" if m.daemon else "0"
            if not m.daemon:
                env["VE_POLICY"] = self.policy_for(name)
            env.update(self.env_for(name))
            prefix = [os.path.join(self.build, "ve-run")] + (["--class", cls] if cls else []) + ["--"]
        return prefix, env

    def ved_env(self, name, policy):
        env = dict(self.base_env)
        env.update(self.mps.env() if self.mps else {})
        env["VE_VED_POLICY"] = policy
        env["VE_VED_LOG_LEVEL"] = "info"
        env.update(self.env_for(name))
        return env


def check_build(build, need_ve, policies=()):
    """Before any GPU time is spent: binaries there, every policy accepted."""
    if not need_ve:
        return
    for b in ("ve-run", "ved", "libve.so"):
        if not os.path.exists(os.path.join(build, b)):
            raise SystemExit(f"{build}/{b} is missing: build first (make -j)")
    for p in sorted(set(policies)):
        rc, out, err = _run([os.path.join(build, "ved"), "--check-config"], timeout=10,
                            env=dict(os.environ, VE_VED_POLICY=p))
        if rc != 0:
            raise SystemExit(f"ved refuses policy '{p}': {err or out}")


class Infra:
    """MPS and ved as a round's mode needs them. ved is started fresh for every
    round, so no round inherits profiles or state from another."""

    def __init__(self, setup, outdir, allow_foreign_mps=False):
        self.setup = setup
        self.mps = MPS(outdir, allow_foreign_mps)
        setup.mps = self.mps
        self.ved = None
        self.logdir = os.path.join(outdir, "logs")

    def prepare(self, mode_name, tag, policy=None):
        m = self.setup.mode(mode_name)
        self.stop_ved()
        if m.mps:
            if self.mps.running and not self.mps.alive():
                log("MPS control daemon gone: restarting it")
                self.mps.running = False
            if not self.mps.running:
                self.mps.start()
        elif self.mps.running:
            self.mps.stop()
        if m.daemon:
            pol = self.setup.policy_for(mode_name, policy)
            self.ved = Ved(self.setup.build, pol, self.setup.ved_env(mode_name, pol),
                           os.path.join(self.logdir, f"{tag}-ved.log")).start()

    def verify_mps(self, mode_name, pids):
        """(True|False|None, detail) for the mode's MPS expectation."""
        m = self.setup.mode(mode_name)
        try:
            if m.mps:
                return self.mps.verify(pids)
            return verify_no_mps()
        except Exception as e:
            return None, f"check failed: {e!r}"

    def ved_report(self):
        """After a round: is ved still alive, and who joined it."""
        if not self.ved:
            return {"alive": None, "joined": set()}
        return {"alive": self.ved.alive(), "joined": self.ved.joined(), "log": self.ved.log_path}

    def stop_ved(self):
        """Stops ved; returns its grant statistics (grant mode) or None."""
        stats = None
        if self.ved:
            self.ved.stop()
            stats = self.ved.grant_stats()
            self.ved = None
        return stats

    def close(self):
        self.stop_ved()
        self.mps.stop()


def out_of_time(stop_after_s, next_round_s):
    """True if the next round would end past the orchestrator's own limit: a
    command killed by an outer time limit loses everything, one that stops
    early keeps what it measured."""
    return time.time() - T_START + next_round_s > stop_after_s


def load_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def write_json(path, data):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)


# ------------------------------------------------------------------ rounds

class Member:
    """One process of a round. prestart: spawned early (during the previous
    round), it imports its libraries and waits for its go file; otherwise it
    is spawned at go time and given the start time on its command line.
    primary: the round ends when the primaries exit; the others are then
    told to stop through the round's stop file."""

    def __init__(self, name, cmd_fn, env, prestart=True, primary=True, result_fn=None):
        self.name, self.cmd_fn, self.env = name, cmd_fn, env
        self.prestart, self.primary, self.result_fn = prestart, primary, result_fn
        self.proc = self.go = None
        self.rc = self.result = self.error = None
        self.ve = (None, "")


class Round:
    def __init__(self, tag, mode, members, lead, span, policy=None, verify_after=1.0,
                 grace=60.0, stop_file=None, tail_grace=60.0, go_extra=None, **meta):
        self.tag, self.mode, self.members = tag, mode, members
        self.lead, self.span, self.policy = lead, span, policy
        self.verify_after, self.grace = verify_after, grace
        self.stop_file, self.tail_grace = stop_file, tail_grace
        self.go_extra = go_extra or (lambda: {})
        self.meta = meta
        self.epoch = None
        self.error = None
        self.mps_ok, self.mps_detail = None, ""
        self.ved_alive = None
        self.ved_grants = None  # ved's grant statistics (grant mode)
        self.started = False


class Runner:
    """Runs rounds one after another; spawns the next round's early members
    as soon as the current round has been started, so their interpreter and
    library start-up is hidden behind the current round's measurement."""

    def __init__(self, setup, infra, outdir, import_s):
        self.setup, self.infra, self.import_s = setup, infra, import_s
        self.logdir = os.path.join(outdir, "logs")
        self.godir = os.path.join(outdir, "go")
        os.makedirs(self.logdir, exist_ok=True)
        os.makedirs(self.godir, exist_ok=True)

    def _paths(self, rnd, i, mb):
        base = os.path.join(self.logdir, f"{rnd.tag}-{i}-{mb.name}")
        return base + ".out", base + ".err"

    def _spawn(self, rnd, i, mb, start_at=None):
        out, err = self._paths(rnd, i, mb)
        if mb.prestart:
            mb.go = os.path.join(self.godir, f"{rnd.tag}-{i}.go")
            if os.path.exists(mb.go):
                os.unlink(mb.go)
            cmd = mb.cmd_fn(go_file=mb.go, start_at=None)
        else:
            cmd = mb.cmd_fn(go_file=None, start_at=start_at)
        mb.proc = Proc(f"{rnd.tag}-{mb.name}", cmd, mb.env, out, err).spawn()

    def prestart(self, rnd):
        if rnd.stop_file and os.path.exists(rnd.stop_file):
            os.unlink(rnd.stop_file)
        for i, mb in enumerate(rnd.members):
            if mb.prestart and mb.proc is None:
                self._spawn(rnd, i, mb)

    def _kill(self, rnd):
        for mb in rnd.members:
            if mb.proc:
                mb.proc.kill()

    def run(self, rnd, nxt=None):
        """Runs one round; whatever goes wrong is recorded in the round, and
        the orchestrator goes on with the next one."""
        try:
            return self._run(rnd, nxt)
        except (InfraError, OSError, ValueError, KeyError, TypeError, RuntimeError) as e:
            import traceback
            traceback.print_exc()
            rnd.error = f"orchestrator: {e!r}"
            log(f"{rnd.tag}: {rnd.error}")
            self._kill(rnd)
            self.infra.stop_ved()
            return rnd

    def _run(self, rnd, nxt=None):
        for i, mb in enumerate(rnd.members):
            if mb.prestart and (mb.proc is None or mb.proc.poll() is not None):
                if mb.proc is not None:
                    log(f"{rnd.tag}: early-spawned {mb.name} exited before its start "
                        f"(rc {mb.proc.rc}): {mb.proc.stderr_tail(3)}; spawning it again")
                    mb.proc = None
                self._spawn(rnd, i, mb)
        try:
            self.infra.prepare(rnd.mode, rnd.tag, rnd.policy)
        except InfraError as e:
            rnd.error = f"infrastructure: {e}"
            log(f"{rnd.tag}: {rnd.error}")
            self._kill(rnd)
            if nxt:
                self.prestart(nxt)
            return rnd
        now = time.time()
        early = [mb.proc.t_spawn for mb in rnd.members if mb.prestart]
        importing = max(0.0, self.import_s - (now - min(early))) if early else 0.0
        rnd.epoch = now + importing + rnd.lead
        extra = rnd.go_extra()
        for i, mb in enumerate(rnd.members):
            if mb.prestart:
                write_go(mb.go, rnd.epoch, **extra)
            else:
                self._spawn(rnd, i, mb, start_at=rnd.epoch)
        rnd.started = True
        if nxt:
            self.prestart(nxt)
        sleep_until(rnd.epoch + rnd.verify_after)
        rnd.mps_ok, rnd.mps_detail = self.infra.verify_mps(rnd.mode, [mb.proc.pid for mb in rnd.members])
        deadline = rnd.epoch + rnd.span + rnd.grace
        prim = [mb for mb in rnd.members if mb.primary] or rnd.members
        for mb in prim:
            mb.rc = mb.proc.wait(deadline)
        if rnd.stop_file:
            with open(rnd.stop_file, "w") as f:
                f.write("stop\n")
        for mb in rnd.members:
            if mb not in prim:
                mb.rc = mb.proc.wait(time.time() + rnd.tail_grace)
        rep = self.infra.ved_report()
        rnd.ved_alive = rep["alive"]
        mode = self.setup.mode(rnd.mode)
        for mb in rnd.members:
            mb.result = mb.result_fn() if mb.result_fn else mb.proc.json()
            if mb.rc is None:
                mb.error = "killed at the round's deadline"
            elif mb.rc != 0 or not mb.result or mb.result.get("ok") is False:
                mb.error = (mb.result or {}).get("error") or f"exit {mb.rc}: {mb.proc.stderr_tail(3)}"
            else:
                mb.error = None
            if mode.ve:
                mb.ve = ved_client_check(mb.proc, rep["joined"], mode.daemon)
        rnd.ved_grants = self.infra.stop_ved()
        if rnd.ved_alive is False:
            log(f"{rnd.tag}: ved DIED during the round (see {rep.get('log')})")
        return rnd
