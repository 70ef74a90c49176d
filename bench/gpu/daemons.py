"""MPS and ved for the GPU orchestrators: started for a run and stopped at
its end, and checked, while the jobs run, to really be under them.
"""
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time

from procs import OWNER_VAR, Proc, _cleanups, _proc_argv, _program, _run, log, mps_processes


# ------------------------------------------------------------------ MPS

def find_mps_control():
    dirs = [os.environ.get("VE_BENCH_MPS_BIN"), "/usr/local/nvidia/bin", "/usr/bin",
            "/usr/local/cuda/bin"]
    for d in dirs:
        if d and os.access(os.path.join(d, "nvidia-cuda-mps-control"), os.X_OK):
            return os.path.join(d, "nvidia-cuda-mps-control")
    return shutil.which("nvidia-cuda-mps-control")


class InfraError(Exception):
    pass


def _fifo_ok(d):
    """A FIFO can be made in d (some shared or network file systems refuse)."""
    try:
        os.makedirs(d, exist_ok=True)
        p = os.path.join(d, ".fifo-test")
        if os.path.exists(p):
            os.unlink(p)
        os.mkfifo(p)
        os.unlink(p)
        return True
    except OSError:
        return False


class MPS:
    """One MPS control daemon with its own pipe and log directories.

    The pipe directory goes under the output directory when FIFOs can be made
    there and its path is short (MPS opens sockets in it, and socket paths are
    limited to 108 bytes); otherwise a fresh directory under /tmp, logged."""

    def __init__(self, outdir, allow_foreign=False):
        self.allow_foreign = allow_foreign
        self.bin = find_mps_control()
        self.log_dir = os.path.join(outdir, "mps-log")
        cand = os.path.join(outdir, "mps-pipe")
        if os.path.isdir(cand):
            shutil.rmtree(cand, ignore_errors=True)
        if len(cand) <= 64 and _fifo_ok(cand):
            self.pipe_dir = cand
        else:
            self.pipe_dir = tempfile.mkdtemp(prefix="ve-mps-", dir="/tmp")
            log(f"MPS pipe directory {self.pipe_dir} ({cand} is too long or cannot hold a FIFO)")
        os.makedirs(self.log_dir, exist_ok=True)
        self.running = False
        self.starts = 0
        # What ran before us is foreign; everything MPS that appears later is
        # ours, whether or not its environment names our pipe directory (the
        # server is spawned by the control daemon, not by us).
        self.foreign = {p[0] for p in mps_processes()}

    def refresh_foreign(self):
        """Call once leftovers of earlier runs are gone, before the first start."""
        self.foreign = {p[0] for p in mps_processes()}

    def ours(self):
        return [p for p in mps_processes() if p[0] not in self.foreign]

    def env(self):
        return {"CUDA_MPS_PIPE_DIRECTORY": self.pipe_dir, "CUDA_MPS_LOG_DIRECTORY": self.log_dir}

    def query(self, cmd, timeout=10):
        env = dict(os.environ, **self.env())
        return _run([self.bin], timeout=timeout, input=cmd + "\n", env=env)

    def start(self):
        if not self.bin:
            raise InfraError("nvidia-cuda-mps-control not found (looked in /usr/local/nvidia/bin, "
                             "/usr/bin, /usr/local/cuda/bin and PATH)")
        others = [p for p in mps_processes() if p[0] in self.foreign]
        if others and not self.allow_foreign:
            raise InfraError(f"another MPS daemon runs: {others}; refusing to start a second one")
        if any(p[1] == "control" and p[2] == self.pipe_dir for p in self.ours()):
            self.running = True
            return
        env = dict(os.environ, **self.env())
        env[OWNER_VAR] = str(os.getpid())
        env.pop("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", None)
        env.pop("CUDA_MPS_CLIENT_PRIORITY", None)
        rc, out, err = _run([self.bin, "-d"], timeout=15, env=env)
        if rc != 0:
            raise InfraError(f"nvidia-cuda-mps-control -d failed (rc {rc}): {err or out}")
        fifo = os.path.join(self.pipe_dir, "control")
        t = time.time() + 10
        while time.time() < t and not os.path.exists(fifo):
            time.sleep(0.05)
        if not os.path.exists(fifo):
            raise InfraError(f"MPS control pipe {fifo} did not appear; see {self.log_dir}/control.log")
        rc, out, err = self.query("get_server_list")
        if rc != 0:
            raise InfraError(f"MPS control daemon does not answer (rc {rc}): {err or out}")
        self.running = True
        self.starts += 1
        if self.stop not in _cleanups:
            _cleanups.append(self.stop)
        log(f"MPS control daemon up (pipe {self.pipe_dir})")

    def alive(self):
        rc, _, _ = self.query("get_server_list", timeout=5)
        return rc == 0 and any(p[1] == "control" for p in self.ours())

    def stop(self):
        if not self.running:
            return
        self.running = False
        rc, out, err = self.query("quit")
        t = time.time() + 10
        while time.time() < t and self.ours():
            time.sleep(0.1)
        rest = self.ours()
        for pid, kind, _ in rest:
            log(f"MPS {kind} pid {pid} still there 10 s after quit: SIGTERM")
            try:
                os.kill(pid, signal.SIGTERM)
            except OSError:
                pass
        log("MPS stopped" if not rest else "MPS stopped (forced)")

    def servers(self):
        rc, out, _ = self.query("get_server_list", timeout=5)
        return [int(x) for x in re.findall(r"\d+", out)] if rc == 0 else []

    def clients(self):
        cl = set()
        for s in self.servers():
            rc, out, _ = self.query(f"get_client_list {s}", timeout=5)
            if rc == 0:
                cl.update(int(x) for x in re.findall(r"\d+", out))
        return cl

    def verify(self, pids):
        """Every pid is a client of one of this daemon's servers (ve-run execs
        the program, so the pid we spawned is the client's)."""
        servers = self.servers()
        clients = self.clients()
        missing = [p for p in pids if p not in clients]
        detail = f"servers {servers}, clients {sorted(clients)}, jobs {list(pids)}"
        return (not missing and bool(servers)), detail


def verify_no_mps():
    procs = mps_processes()
    servers = [p for p in procs if p[1] == "server"]
    detail = "no MPS process" if not procs else f"MPS processes: {procs}"
    return (not servers), detail


# ------------------------------------------------------------------ ved

class Ved:
    """One ved with a policy; logs to a file; ready once it says it serves."""

    def __init__(self, build, policy, env, log_path):
        self.build, self.policy, self.env, self.log_path = build, policy, env, log_path
        self.proc = None
        self.socket = None
        self.sampler = None

    def _sample(self, period_s=0.5):
        """Every period: `ve-ctl clients` and `ve-ctl status` into <log>.status,
        so that a stall (no grant, an entry busy for seconds) can be read back."""
        ctl = os.path.join(self.build, "ve-ctl")
        with open(self.log_path + ".status", "a") as f:
            while self.alive():
                for cmd in ("clients", "status"):
                    try:
                        r = subprocess.run([ctl, "--socket", self.socket, cmd], capture_output=True,
                                           text=True, timeout=2)
                        f.write(f"--- {time.strftime('%H:%M:%S')}.{int(time.time() * 1000) % 1000:03d} "
                                f"{cmd}\n{r.stdout}{r.stderr}")
                    except (OSError, subprocess.SubprocessError) as e:
                        f.write(f"--- {cmd}: {e!r}\n")
                f.flush()
                time.sleep(period_s)

    def start(self, timeout=10.0):
        self.proc = Proc(f"ved-{self.policy}", [os.path.join(self.build, "ved")], self.env,
                         self.log_path).spawn()
        t = time.time() + timeout
        while time.time() < t:
            m = re.search(r"serving device \d+ on (\S+) \(", self._log())
            if m and os.path.exists(m.group(1)):
                self.socket = m.group(1)
                if os.environ.get("VE_BENCH_SAMPLE_VED", "1") != "0":
                    self.sampler = threading.Thread(target=self._sample, daemon=True)
                    self.sampler.start()
                return self
            if self.proc.poll() is not None:
                break
            time.sleep(0.02)
        tail = self._log().strip().splitlines()[-6:]
        self.proc.kill()
        raise InfraError(f"ved (policy {self.policy}) did not become ready: " + " | ".join(tail))

    def _log(self):
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def joined(self):
        return {int(x) for x in re.findall(r"joined: pid (\d+)", self._log())}

    def stop(self):
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        rc = self.proc.wait(time.time() + 5)
        return rc

    def grant_stats(self):
        """The grant statistics ved logs when it stops (grant mode), or None."""
        m = re.search(r"grants: (\d+) ticks, (\d+) changes, (\d+) reclaims, reclaim_us p50 "
                      r"([\d.]+) p99 ([\d.]+) max ([\d.]+)", self._log())
        if not m:
            return None
        k = ("ticks", "changes", "reclaims")
        d = {x: int(m.group(i + 1)) for i, x in enumerate(k)}
        d.update(reclaim_us_p50=float(m.group(4)), reclaim_us_p99=float(m.group(5)),
                 reclaim_us_max=float(m.group(6)))
        # Lends (docs/policies.md, "Lending"), from builds that log them.
        ml = re.search(r"grants: .*; (\d+) lends, (\d+) taken back", self._log())
        if ml:
            d.update(lends=int(ml.group(1)), lend_takes=int(ml.group(2)))
        # What each client was granted, from the line ved logs as it leaves
        # (keyed by pid: the orchestrator knows which job that was).
        d["clients"] = {}
        for c in re.finditer(r"client \d+ \(pid (\d+), [^)]*\) left .*?granted ([\d.]+) SMs on "
                             r"average over ([\d.]+) s \((\d+)% of it granted, (\d+)% shared\)",
                             self._log()):
            d["clients"][c.group(1)] = {"sms_mean": float(c.group(2)), "span_s": float(c.group(3)),
                                        "granted_frac": int(c.group(4)) / 100,
                                        "shared_frac": int(c.group(5)) / 100}
        # Ops late for their deadline (VE_TPOT_MS, advice), when a client had any.
        for c in re.finditer(r"client \d+ \(pid (\d+), [^)]*\) left \([^)]*\): \d+ ops done "
                             r"\((\d+) after their deadline\)", self._log()):
            d["clients"].setdefault(c.group(1), {})["late_ops"] = int(c.group(2))
        return d


def ved_client_check(proc, joined, daemon=True):
    """(ok, detail): a ve-run client really ran under the shim (and, with
    ved, registered there and never fell back to safe mode)."""
    err = proc.stderr_text()
    bad = [s for s in ("transparent pass-through", "safe mode", "lost ved", "is unusable")
           if s in err]
    if daemon:
        ok = proc.pid in joined and "coordinator: ved at" in err and not bad
        what = f"pid {proc.pid} {'joined' if proc.pid in joined else 'never joined'} ved"
    else:
        ok = "coordinator: embedded" in err and not bad
        what = "embedded coordinator" + ("" if "coordinator: embedded" in err else " not reported")
    return ok, what + (f"; log says: {', '.join(bad)}" if bad else "")


def check_foreign_mps(allow):
    procs = mps_processes()
    if procs and not allow:
        raise SystemExit(
            f"MPS is already running on this machine: {procs}. Time-slicing runs would not be "
            "what they claim. Stop it (echo quit | nvidia-cuda-mps-control, with its "
            "CUDA_MPS_PIPE_DIRECTORY) or pass --allow-foreign-mps to go on regardless.")
    if procs:
        log(f"warning: MPS already runs here ({procs}); continuing as asked")


def ved_socket_path(device=0):
    """ved's default control socket, as the shim and ved compute it (docs/daemon.md)."""
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg and xdg.startswith("/"):
        return os.path.join(xdg, "vitamin-e", f"ved-{device}.sock")
    return f"/tmp/vitamin-e-{os.getuid()}/ved-{device}.sock"


def check_foreign_ved(need_ved):
    """ved allows one instance per socket (a lock file next to it holds its
    pid): one at the default socket that is not ours would make every ved
    round fail. veds on other sockets (tests, say) do not matter."""
    if not need_ved:
        return
    lock = ved_socket_path()[:-5] + ".lock"
    try:
        with open(lock) as f:
            pid = int(f.read().strip() or 0)
    except (OSError, ValueError):
        return
    if pid > 0 and pid != os.getpid() and _program(_proc_argv(pid)) == "ved":
        raise SystemExit(f"a ved (pid {pid}) already serves {ved_socket_path()}; this benchmark "
                         "starts its own for every round: stop it first (kill -TERM PID)")
