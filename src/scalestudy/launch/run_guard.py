"""A measured run owns its machine: every process of a run carries one token, the launcher ends
them all on every exit path, and locks keep a second run off the same devices and the same run id.

- The token (env SCALESTUDY_RUN_TOKEN) is inherited by torchrun and every worker. torchrun starts
  each worker in a session of its own (start_new_session), so a kill of torchrun's process group
  never reaches them; `end_processes(token)` finds them by the token in /proc/PID/environ (this
  user's processes only) and kills them.
- A worker that loses its launcher ends itself: `guard_worker()` sets PR_SET_PDEATHSIG (SIGKILL
  when its parent, torchrun, dies) and starts a watchdog thread that kills the process when the
  launcher's pid (env SCALESTUDY_LAUNCHER_PID) is gone or belongs to another process.
- `device_lock(names)`: fcntl.flock on one file per device (cuda: per GPU index; cpu: the host)
  under SCALESTUDY_LOCK_DIR (default: a directory of this user in the system's temp dir). A second
  run on the same devices waits for the first (the wait is logged and does not count against its
  time limit).
- `run_lock(run_dir)`: an exclusive flock on RUN_DIR's hidden sibling `.RUN_ID.lock` held for the
  whole launch: a second launch of the same run id refuses at once, naming the holder. flock works
  across hosts on NFS (Linux emulates it with POSIX byte-range locks) and on Lustre/GPFS mounted
  with flock support.
- `LoadWatch`: what the launcher sees while the run measures, recorded in status.json (`load`):
  the host's load average, processes of other runs of the package (another token), and on GPUs
  the compute processes NVML lists on the run's GPUs. A run that saw another run's process, or a
  GPU with more than its one process, is `contaminated` (the load average is recorded only: on a
  shared host it would flag every run).

Pure Python (no torch): the launcher imports it.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import signal
import tempfile
import threading
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

TOKEN_ENV = "SCALESTUDY_RUN_TOKEN"
# the token of a process of no run: a warm-workers server (scalestudy.launch.warm_workers), which writes
# each run's token over it in the run's processes; as long as a token (uuid4 hex never is zeros)
NO_RUN_TOKEN = "0" * 32
LAUNCHER_PID_ENV = "SCALESTUDY_LAUNCHER_PID"
LAUNCHER_START_ENV = "SCALESTUDY_LAUNCHER_START"  # the launcher's start time in /proc ticks: pid reuse
LAUNCHER_HOST_ENV = "SCALESTUDY_LAUNCHER_HOST"  # the watchdog watches only on the launcher's host
LOCK_DIR_ENV = "SCALESTUDY_LOCK_DIR"
_PR_SET_PDEATHSIG = 1


class RunLockedError(Exception):
    """Another launch holds this run id (names the lock file and its holder)."""


def new_token() -> str:
    return uuid.uuid4().hex


def start_ticks(pid: int) -> str | None:
    """A process's start time (field 22 of /proc/PID/stat): with the pid, it names one process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def guarded_env(env: dict, token: str) -> dict:
    """The environment torchrun and every worker of a run start with."""
    return {**env, TOKEN_ENV: token, LAUNCHER_PID_ENV: str(os.getpid()),
            LAUNCHER_START_ENV: start_ticks(os.getpid()) or "", LAUNCHER_HOST_ENV: os.uname().nodename}


# ---- finding and ending a run's processes ------------------------------------------
def _environ_tokens(pid: int) -> str | None:
    """The run token in a process's environment (None: none, or not readable)."""
    try:
        data = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return None
    key = TOKEN_ENV.encode() + b"="
    for item in data.split(b"\0"):
        if item.startswith(key):
            token = item[len(key):].decode(errors="replace")
            return None if token == NO_RUN_TOKEN else token
    return None


def _own_pids() -> Iterator[int]:
    uid, me = os.getuid(), os.getpid()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            if entry.stat().st_uid != uid:
                continue
        except OSError:
            continue
        yield int(entry.name)


def processes_with_token(token: str) -> list[int]:
    """Live processes of this user that carry `token` (this process excluded)."""
    return [pid for pid in _own_pids() if _environ_tokens(pid) == token and not _is_zombie(pid)]


def foreign_run_processes(token: str | None) -> dict[int, str]:
    """Live processes of this user that belong to another run of the package: pid -> its token."""
    out = {}
    for pid in _own_pids():
        t = _environ_tokens(pid)
        if t and t != token and not _is_zombie(pid):
            out[pid] = t
    return out


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def end_processes(token: str, wait_s: float = 5.0) -> list[int]:
    """SIGKILL every process carrying `token` (a stopped one too), until none is left or wait_s
    has passed; returns the pids that were killed."""
    killed: list[int] = []
    deadline = time.monotonic() + wait_s
    while True:
        pids = processes_with_token(token)
        if not pids:
            return killed
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                if pid not in killed:
                    killed.append(pid)
            except (ProcessLookupError, PermissionError):
                pass
        if time.monotonic() > deadline:
            return killed
        time.sleep(0.05)


# ---- the worker's side -------------------------------------------------------------
def _set_pdeathsig(sig: int) -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
    except (OSError, AttributeError):
        pass


def guard_worker(poll_s: float = 0.5) -> threading.Thread | None:
    """In a worker of a launched run: die with the parent (torchrun) and with the launcher.
    Returns the watchdog thread (None outside a launched run)."""
    launcher = os.environ.get(LAUNCHER_PID_ENV, "")
    if not launcher.isdigit():
        return None
    parent = os.getppid()
    _set_pdeathsig(signal.SIGKILL)
    if os.getppid() != parent:  # the parent died before the prctl took hold
        os.kill(os.getpid(), signal.SIGKILL)
    if os.environ.get(LAUNCHER_HOST_ENV, os.uname().nodename) != os.uname().nodename:
        return None  # another node of a multi-node run: srun ends its tasks with the job step
    pid, ticks = int(launcher), os.environ.get(LAUNCHER_START_ENV, "")

    def watch() -> None:
        while True:
            now = start_ticks(pid)
            if now is None or (ticks and now != ticks):
                os.kill(os.getpid(), signal.SIGKILL)
            time.sleep(poll_s)

    t = threading.Thread(target=watch, name="scalestudy-launcher-watchdog", daemon=True)
    t.start()
    return t


def die_with_parent(sig: int = signal.SIGKILL) -> None:
    """preexec_fn for a child of the launcher: `sig` when the launcher dies."""
    _set_pdeathsig(sig)


# ---- locks ---------------------------------------------------------------------------
def lock_dir(env: dict | None = None) -> Path:
    env = os.environ if env is None else env
    d = Path(env.get(LOCK_DIR_ENV) or Path(tempfile.gettempdir()) / f"scalestudy-locks-{os.getuid()}")
    d.mkdir(parents=True, exist_ok=True)
    return d


def gpu_ids(procs_per_node: int, env: dict | None = None) -> list[str]:
    """The GPUs a run's local ranks use: CUDA_VISIBLE_DEVICES entries (indices or UUIDs), or 0..P-1."""
    env = os.environ if env is None else env
    visible = [v.strip() for v in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    return visible[:procs_per_node] if visible else [str(i) for i in range(procs_per_node)]


def device_names(device: str, procs_per_node: int, env: dict | None = None) -> list[str]:
    """The lockable devices of a run on this host: the GPUs torchrun's local ranks use, or the host."""
    if device != "cuda":
        return ["host-cpu"]
    return sorted(f"cuda-{i}" for i in gpu_ids(procs_per_node, env))


def _holder(path: Path) -> str:
    try:
        return path.read_text().strip() or "unknown"
    except OSError:
        return "unknown"


def _write_holder(fd: int, text: str) -> None:
    os.ftruncate(fd, 0)
    os.pwrite(fd, text.encode(), 0)


@dataclass
class DeviceLock:
    paths: list[Path]
    waited_s: float = 0.0
    holders_seen: list[str] = field(default_factory=list)


@contextmanager
def device_lock(names: list[str], who: str, env: dict | None = None, on_wait=None) -> Iterator[DeviceLock]:
    """Hold an exclusive flock on every device in `names` (sorted: no deadlock between runs);
    waits while another run holds one, calling on_wait(holder) once per busy device."""
    d = lock_dir(env)
    lock = DeviceLock([d / f"{n}.lock" for n in sorted(names)])
    fds: list[int] = []
    t0 = time.monotonic()
    try:
        for p in lock.paths:
            fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
            fds.append(fd)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as e:
                if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                    raise
                holder = _holder(p)
                lock.holders_seen.append(holder)
                if on_wait is not None:
                    on_wait(p, holder)
                fcntl.flock(fd, fcntl.LOCK_EX)
            _write_holder(fd, f"{who}\n")
        lock.waited_s = round(time.monotonic() - t0, 3)
        yield lock
    finally:
        for fd in reversed(fds):
            try:
                os.ftruncate(fd, 0)
            except OSError:
                pass
            os.close(fd)  # closing drops the flock


def run_lock_path(run_dir: Path) -> Path:
    return Path(run_dir).with_name(f".{Path(run_dir).name}.lock")


@contextmanager
def run_lock(run_dir: Path, who: str) -> Iterator[Path]:
    """An exclusive lock on one run id for the whole launch; RunLockedError at once if another
    launch holds it. The lock file is removed on release (after checking it is still the file
    this launch locked, so that a launch that opened it meanwhile cannot hold a stale inode)."""
    path = run_lock_path(run_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(fd)
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise RunLockedError(f"{path}: run {Path(run_dir).name} is being launched already "
                                     f"({_holder(path)}); wait for it, or end it, before launching it again") from None
            raise
        try:
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)  # the holder removed the file between our open and our lock: try the new one
    try:
        _write_holder(fd, f"{who}\n")
        yield path
    finally:
        try:
            path.unlink()
        except OSError:
            pass
        os.close(fd)


# ---- load ----------------------------------------------------------------------------
def loadavg() -> float | None:
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


def _nvml() -> Any:
    """pynvml, initialised; None where it is missing or finds no driver."""
    try:
        import pynvml

        pynvml.nvmlInit()
        return pynvml
    except Exception:  # ImportError, NVMLError (no driver): no GPU view
        return None


@dataclass
class LoadWatch:
    """What the launcher saw on its host while a run measured: the load average, processes of
    other runs of the package (by token), and on GPUs the compute processes NVML lists on each of
    the run's GPUs (`gpus`: CUDA_VISIBLE_DEVICES entries, NVML indices or UUIDs). A run has one
    process a GPU, so a GPU listing more had another process on it; NVML's pids are the host's,
    so the rule counts them rather than matching them to ours (they differ in a container)."""

    token: str
    gpus: tuple = ()
    nvml: Any = None
    samples: int = 0
    loadavg_max: float | None = None
    foreign: dict = field(default_factory=dict)  # pid -> token of another run's process
    gpu_procs_max: dict = field(default_factory=dict)  # gpu -> most compute processes seen at once
    gpu_reason: str | None = None

    def __post_init__(self) -> None:
        if self.gpus and self.nvml is None:
            self.nvml = _nvml()
            if self.nvml is None:
                self.gpu_reason = "NVML unavailable: other processes on the GPUs not checked"

    def sample(self) -> None:
        self.samples += 1
        la = loadavg()
        if la is not None:
            self.loadavg_max = la if self.loadavg_max is None else max(self.loadavg_max, la)
        for pid, tok in foreign_run_processes(self.token).items():
            self.foreign.setdefault(pid, tok)
        if self.nvml is not None:
            for gpu in self.gpus:
                try:
                    h = (self.nvml.nvmlDeviceGetHandleByIndex(int(gpu)) if str(gpu).isdigit()
                         else self.nvml.nvmlDeviceGetHandleByUUID(str(gpu)))
                    n = len(self.nvml.nvmlDeviceGetComputeRunningProcesses(h))
                except Exception as e:  # NVMLError: say so, keep watching the rest
                    self.gpu_reason = f"NVML could not list the processes of GPU {gpu}: {e}"
                    continue
                self.gpu_procs_max[str(gpu)] = max(n, self.gpu_procs_max.get(str(gpu), 0))

    def record(self, device_lock_wait_s: float, cpus: int | None = None) -> dict:
        runs = sorted(set(self.foreign.values()))
        shared = {g: n for g, n in sorted(self.gpu_procs_max.items()) if n > 1}
        reasons = []
        if self.foreign and not self.gpus:  # a GPU run shares only its GPUs: NVML's counts decide
            reasons.append(f"{len(self.foreign)} process(es) of {len(runs)} other run(s) of the package ran on this "
                           "host while it measured")
        if shared:
            reasons.append("GPU(s) " + ", ".join(f"{g} ({n} compute processes at once)" for g, n in shared.items())
                           + " ran another process beside the run's one")
        return {
            "host_cpus": cpus or os.cpu_count(), "loadavg_1min_max": None if self.loadavg_max is None
            else round(self.loadavg_max, 2), "samples": self.samples,
            "other_run_processes": sorted(self.foreign), "other_runs": len(runs),
            "gpu_compute_processes_max": dict(sorted(self.gpu_procs_max.items())) if self.gpus else None,
            "gpu_check": self.gpu_reason,
            "device_lock_wait_s": device_lock_wait_s, "contaminated": bool(reasons),
            "reason": "; ".join(reasons) or None,
        }
