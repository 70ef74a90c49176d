"""Child processes of the GPU orchestrators: spawned in their own process
group with output to files, killed with their group, found again by the
orchestrator pid they carry in their environment (so a later run can end
what a run killed by a time limit left behind), and the MPS daemons seen in
/proc. No torch, no GPU: bench/gpu/selftest/ runs all of it on a CPU.
"""
import atexit
import json
import os
import re
import signal
import subprocess
import time

T_START = time.time()  # the orchestrator's start: its --stop-after-s counts from here
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OWNER_VAR = "VE_BENCH_OWNER_PID"  # marks every process we start, for leftover clean-up


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def _run(cmd, timeout=20, **kw):
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
        return r.returncode, r.stdout.strip(), r.stderr.strip()
    except Exception as e:  # missing binary, timeout
        return None, "", repr(e)


# ------------------------------------------------------------------ processes

_live = []  # Proc objects not yet reaped, killed on exit
_cleanups = []  # callables run once on exit (MPS stop, ved stop)


class Proc:
    """A child in its own session (pgid = pid), output to files, killed with its group."""

    def __init__(self, label, cmd, env, out_path, err_path=None):
        self.label, self.cmd, self.env = label, cmd, env
        self.out_path, self.err_path = out_path, err_path or out_path
        self.p = None
        self.t_spawn = None
        self.rc = None

    def spawn(self):
        with open(self.out_path, "w") as o:
            if self.err_path == self.out_path:
                e = subprocess.STDOUT
            else:
                e = open(self.err_path, "w")
                e.write("# " + " ".join(self.cmd) + "\n")
                e.flush()
            try:
                self.p = subprocess.Popen(self.cmd, cwd=REPO, env=self.env, stdout=o, stderr=e,
                                          stdin=subprocess.DEVNULL, start_new_session=True)
            finally:
                if e is not subprocess.STDOUT:
                    e.close()
        self.t_spawn = time.time()
        _live.append(self)
        return self

    @property
    def pid(self):
        return self.p.pid if self.p else None

    def alive(self):
        return self.p is not None and self.p.poll() is None

    def poll(self):
        if self.p is None:
            return None
        rc = self.p.poll()
        if rc is not None:
            self._reaped(rc)
        return rc

    def _reaped(self, rc):
        self.rc = rc
        if self in _live:
            _live.remove(self)

    def wait(self, deadline):
        """Return code, or None if it was still running at deadline (then killed)."""
        while time.time() < deadline:
            rc = self.poll()
            if rc is not None:
                return rc
            time.sleep(0.05)
        self.kill()
        return None

    def kill(self, grace=3.0):
        if self.p is None or self.p.poll() is not None:
            if self.p is not None:
                self._reaped(self.p.poll())
            return
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(self.p.pid, sig)
            except ProcessLookupError:
                break
            try:
                self.p.wait(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                continue
        self._reaped(self.p.poll())

    def json(self):
        """The last line of stdout that parses as a JSON object, else None."""
        return last_json_line(self.out_path)

    def stderr_text(self):
        try:
            with open(self.err_path, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def stderr_tail(self, n=8):
        lines = [l for l in self.stderr_text().splitlines() if not l.startswith("# ")]
        return "\n".join(lines[-n:])


def last_json_line(path):
    try:
        with open(path, errors="replace") as f:
            lines = f.read().strip().splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                continue
    return None


def write_go(path, start_at, **extra):
    """The go file a waiting job polls for: its start time and late settings."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(dict(start_at=start_at, **extra), f)
    os.replace(tmp, path)


def cleanup_all():
    for p in list(_live):
        p.kill(grace=2.0)
    while _cleanups:
        fn = _cleanups.pop()
        try:
            fn()
        except Exception as e:  # keep cleaning the rest
            log(f"cleanup: {e!r}")


def _on_signal(signum, frame):
    log(f"signal {signum}: cleaning up")
    raise SystemExit(128 + signum)


def install_cleanup():
    atexit.register(cleanup_all)
    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, _on_signal)


def _proc_argv(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return []


def _proc_environ(pid):
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            raw = f.read().split(b"\0")
    except OSError:
        return {}
    env = {}
    for kv in raw:
        k, sep, v = kv.partition(b"=")
        if sep:
            env[k.decode(errors="replace")] = v.decode(errors="replace")
    return env


def _pids():
    for d in os.listdir("/proc"):
        if d.isdigit():
            yield int(d)


def _program(argv):
    """The program's name, looking through an interpreter (fakes are scripts)."""
    if not argv:
        return ""
    name = os.path.basename(argv[0])
    if re.match(r"^(python[0-9.]*|sh|bash)$", name) and len(argv) > 1:
        rest = [a for a in argv[1:] if not a.startswith("-")]
        if rest:
            return os.path.basename(rest[0])
    return name


def mps_processes():
    """[(pid, 'control'|'server', pipe_dir)] of every MPS daemon on this machine.
    /proc/PID/comm is cut at 15 characters (both are 'nvidia-cuda-mps'), so the
    command line tells them apart; a control client (no -d/-f) is transient."""
    found = []
    for pid in _pids():
        argv = _proc_argv(pid)
        name = _program(argv)
        if name.startswith("nvidia-cuda-mps-server"):
            kind = "server"
        elif name.startswith("nvidia-cuda-mps-control") and ("-d" in argv or "-f" in argv):
            kind = "control"
        else:
            continue
        pipe = _proc_environ(pid).get("CUDA_MPS_PIPE_DIRECTORY", "/tmp/nvidia-mps")
        found.append((pid, kind, pipe))
    return found


def leftovers():
    """Processes an earlier orchestrator of ours started and left behind (its
    owner pid, in their environment, is gone): a run killed by a timeout."""
    me = os.getpid()
    out = []
    for pid in _pids():
        if pid == me:
            continue
        owner = _proc_environ(pid).get(OWNER_VAR)
        if not owner or not owner.isdigit() or int(owner) == me:
            continue
        if os.path.exists(f"/proc/{owner}") and int(owner) != pid:
            continue  # its orchestrator still runs: not ours to end
        out.append((pid, _program(_proc_argv(pid)), _proc_environ(pid)))
    return out


def clean_leftovers(mps_bin):
    """End what an earlier, killed run of these scripts left (by pid, never by
    name): MPS through its own control pipe, everything else by SIGTERM."""
    left = leftovers()
    for pid, name, env in left:
        if name.startswith("nvidia-cuda-mps-control"):
            log(f"leftover MPS control daemon pid {pid} of an earlier run: quitting it")
            if not mps_bin:
                continue
            _run([mps_bin], timeout=10, input="quit\n",
                 env=dict(os.environ, CUDA_MPS_PIPE_DIRECTORY=env.get("CUDA_MPS_PIPE_DIRECTORY", "")))
    time.sleep(0.5 if left else 0)
    for pid, name, env in leftovers():
        if name.startswith("nvidia-cuda-mps"):
            continue
        log(f"leftover process pid {pid} ({name}) of an earlier run: SIGTERM")
        try:
            os.kill(pid, signal.SIGTERM)
        except OSError:
            pass
    t = time.time() + 5
    while time.time() < t and any(not n.startswith("nvidia-cuda-mps") for _, n, _ in leftovers()):
        time.sleep(0.1)
    for pid, name, _ in leftovers():
        if not name.startswith("nvidia-cuda-mps"):
            log(f"leftover pid {pid} ({name}) ignored SIGTERM: SIGKILL")
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    return len(left)
