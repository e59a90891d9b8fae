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
  in the lock directory (`lock_dir`): SCALESTUDY_LOCK_DIR, else the site file's `lock_dir`
  (slurm/site.yaml; the launcher and the workflow export it as SCALESTUDY_LOCK_DIR), else
  default_lock_dir(), /tmp/scalestudy-locks-UID: one fixed place a host, whatever TMPDIR says (two
  workflows started with different TMPDIR values would otherwise measure side by side, each
  holding a lock of its own). A second run on the same devices waits for the first (the wait is
  logged and does not count against its time limit).
- `run_lock(run_dir)`: an exclusive flock on RUN_DIR's hidden sibling `.RUN_ID.lock` held for the
  whole launch: a second launch of the same run id refuses at once, naming the holder. flock works
  across hosts on NFS (Linux emulates it with POSIX byte-range locks) and on Lustre/GPFS mounted
  with flock support.
- `LoadWatch`: what the launcher sees while the run measures, recorded in status.json (`load`):
  the host's load average, processes of other runs of the package (another token), the CPU time
  of every other process of the host (whoever started it: /proc/PID/stat, every user's), and on
  GPUs the compute processes NVML lists on the run's GPUs and their utilisation. A run that saw
  another run's process, a GPU with more than its one process, or (a CPU run) other processes
  using more than FOREIGN_CPU_SHARE_MAX of the host's CPU time during its measured steps, is
  `contaminated` (the load average is recorded only: on a shared host it would flag every run).

Pure Python (no torch): the launcher imports it.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import signal
import threading
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from scalestudy.measure import rawlog

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


def _stat(pid: int | str) -> tuple[str, list[str]] | None:
    """/proc/PID/stat as (the command name, the fields after it: state, ppid, ...; field N of
    proc(5) is item N - 3); None where the process is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    head, _, tail = text.rpartition(")")
    return head.partition("(")[2], tail.split()


def start_ticks(pid: int) -> str | None:
    """A process's start time (field 22 of /proc/PID/stat): with the pid, it names one process."""
    st = _stat(pid)
    return None if st is None else st[1][19]


def guarded_env(env: dict, token: str) -> dict:
    """The environment torchrun and every worker of a run start with."""
    return {
        **env,
        TOKEN_ENV: token,
        LAUNCHER_PID_ENV: str(os.getpid()),
        LAUNCHER_START_ENV: start_ticks(os.getpid()) or "",
        LAUNCHER_HOST_ENV: os.uname().nodename,
    }


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
            token = item[len(key) :].decode(errors="replace")
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


def run_tokens() -> dict[int, str]:
    """Live processes of this user (this process excluded) that carry a run's token: pid -> token."""
    out = {}
    for pid in _own_pids():
        t = _environ_tokens(pid)
        if t and not _is_zombie(pid):
            out[pid] = t
    return out


def processes_with_token(token: str) -> list[int]:
    """Live processes of this user that carry `token` (this process excluded)."""
    return [pid for pid, t in run_tokens().items() if t == token]


def foreign_run_processes(token: str | None, tokens: dict[int, str] | None = None) -> dict[int, str]:
    """Live processes of this user that belong to another run of the package: pid -> its token
    (`tokens`: run_tokens() where the caller has read it already)."""
    return {pid: t for pid, t in (run_tokens() if tokens is None else tokens).items() if t != token}


def _is_zombie(pid: int) -> bool:
    st = _stat(pid)
    return st is None or st[1][0] == "Z"


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
# Where a host's locks live unless SCALESTUDY_LOCK_DIR or the site file says otherwise: a fixed path,
# never tempfile.gettempdir() (which follows TMPDIR, and so differs between two shells of one host).
# /tmp is on every POSIX host and local to it (the device locks are a host's); one directory a user.
DEFAULT_LOCK_ROOT = "/tmp"


def default_lock_dir() -> Path:
    return Path(DEFAULT_LOCK_ROOT) / f"scalestudy-locks-{os.getuid()}"


def lock_dir(env: dict | None = None, site_dir: str | os.PathLike | None = None) -> Path:
    """The host's lock directory: $SCALESTUDY_LOCK_DIR (the tests' override), else `site_dir`
    (the site file's lock_dir), else default_lock_dir(); never a function of TMPDIR."""
    env = os.environ if env is None else env
    d = Path(env.get(LOCK_DIR_ENV) or site_dir or default_lock_dir()).expanduser()
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
                raise RunLockedError(
                    f"{path}: run {Path(run_dir).name} is being launched already "
                    f"({_holder(path)}); wait for it, or end it, before launching it again"
                ) from None
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
        import pynvml  # local: optional (nvidia-ml-py), loaded only when a GPU view is asked for

        pynvml.nvmlInit()
        return pynvml
    except Exception:  # ImportError, NVMLError (no driver): no GPU view
        return None


# A CPU run is contaminated when processes other than its own (any user's, the package's or not)
# used more than this share of the host's CPU time (CPU-seconds / (wall seconds x CPUs)) during its
# measured steps. A tenth: one busy neighbour on a 2-core host is half of the host, five times the
# threshold, and a neighbour that takes a tenth of a host's CPU time takes at least that much from a
# CPU run that uses all of it; the workflow's own process waits while a run measures, and the
# launcher's own sampling (about 0.03 s a sample, once a second, on a host of about 100 processes)
# is the run's, not counted. On a host shared with other work every CPU run is contaminated: that is
# the point (SCALESTUDY_FOREIGN_CPU_MAX below sets another share).
FOREIGN_CPU_SHARE_MAX = rawlog.FOREIGN_CPU_SHARE_DEFAULT
# another threshold for the runs a launcher starts (a fraction of the host's CPU time; "off": the
# share is recorded, never flagged - the test suite's, whose pytest workers run side by side)
FOREIGN_CPU_ENV = "SCALESTUDY_FOREIGN_CPU_MAX"


def foreign_cpu_threshold(env: dict | None = None) -> float | None:
    """The foreign CPU share above which a CPU run is contaminated (None: never)."""
    text = str((os.environ if env is None else env).get(FOREIGN_CPU_ENV, "")).strip().lower()
    if not text:
        return FOREIGN_CPU_SHARE_MAX
    if text in ("off", "none", "no"):
        return None
    try:
        v = float(text)
    except ValueError:
        raise ValueError(f"{FOREIGN_CPU_ENV}={text!r}: a fraction of the host's CPU time, or off") from None
    if not 0 < v:
        raise ValueError(f"{FOREIGN_CPU_ENV}={text!r}: must be above 0 (or off)")
    return v


_CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def host_processes() -> dict[int, tuple[float, int, str]]:
    """Every process of the host: pid -> (its CPU time in seconds, user + system; its parent's pid;
    its command name), from /proc/PID/stat (readable for every user's processes)."""
    out = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or (st := _stat(entry.name)) is None:
            continue
        comm, f = st
        try:
            out[int(entry.name)] = ((int(f[11]) + int(f[12])) / _CLK_TCK, int(f[1]), comm)
        except (IndexError, ValueError):
            continue
    return out


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
    gpu_util_max: dict = field(default_factory=dict)  # gpu -> highest utilisation (%) NVML reported
    gpu_reason: str | None = None
    # the CPU time of other processes: host_processes() (a test passes a stand-in) read each sample
    processes: Any = host_processes
    own_pid: int = field(default_factory=os.getpid)  # the launcher: it and its descendants are the run's
    cpu_seen: dict = field(default_factory=dict)  # pid -> CPU seconds at the last sample
    cpu_series: list = field(default_factory=list)  # (time_unix, other processes' CPU seconds so far)
    cpu_by_pid: dict = field(default_factory=dict)  # pid -> [CPU seconds of it seen, its command]
    ours_seen: set = field(default_factory=set)  # pids counted as the run's at an earlier sample
    cpu_share_max: float | None = FOREIGN_CPU_SHARE_MAX  # None: recorded, never flagged

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
        try:
            procs = self.processes()
        except OSError:
            procs = None
        tokens = run_tokens()  # after the snapshot: a process in it that carries a token is in here
        for pid, tok in foreign_run_processes(self.token, tokens).items():
            self.foreign.setdefault(pid, tok)
        if procs is not None:
            self._sample_cpu(procs, {pid for pid, t in tokens.items() if t == self.token})
        if self.nvml is not None:
            for gpu in self.gpus:
                try:
                    h = (
                        self.nvml.nvmlDeviceGetHandleByIndex(int(gpu))
                        if str(gpu).isdigit()
                        else self.nvml.nvmlDeviceGetHandleByUUID(str(gpu))
                    )
                    n = len(self.nvml.nvmlDeviceGetComputeRunningProcesses(h))
                except Exception as e:  # NVMLError: say so, keep watching the rest
                    self.gpu_reason = f"NVML could not list the processes of GPU {gpu}: {e}"
                    continue
                self.gpu_procs_max[str(gpu)] = max(n, self.gpu_procs_max.get(str(gpu), 0))
                try:  # recorded only: the run's own process drives it
                    util = int(self.nvml.nvmlDeviceGetUtilizationRates(h).gpu)
                    self.gpu_util_max[str(gpu)] = max(util, self.gpu_util_max.get(str(gpu), 0))
                except Exception:  # noqa: BLE001 - NVMLError, or a GPU without the counter
                    pass

    def _sample_cpu(self, procs: dict[int, tuple[float, int, str]], with_token: set[int]) -> None:
        """Add the CPU time other processes used since the last sample (`procs`: host_processes()):
        every process of the host but the launcher, its descendants and the processes carrying the
        run's token (`with_token`: a warm server's workers). A process first seen after the first
        sample counts with all its CPU time (it started since); one that lived less than a
        sampling period is not seen. A process once counted as the run's stays the run's while it
        lives: an exiting process has dropped its memory, and with it the environment that shows
        its token, before it is a zombie (a warm worker's last CPU time would count as foreign).
        A pid that left the snapshot, or whose CPU time went down (another process under the
        same pid), is forgotten."""
        self.ours_seen = {
            pid for pid in self.ours_seen if pid in procs and procs[pid][0] >= self.cpu_seen.get(pid, 0.0)
        }
        ours = {self.own_pid} | with_token | self.ours_seen
        parent = {pid: info[1] for pid, info in procs.items()}

        def is_ours(pid: int) -> bool:
            chain = []
            while pid > 1 and pid not in ours and pid not in chain:
                chain.append(pid)
                pid = parent.get(pid, 0)
            mine = pid in ours
            if mine:
                ours.update(chain)
            return mine

        first = not self.cpu_series
        added = 0.0
        for pid, (cpu, _ppid, comm) in procs.items():
            before = self.cpu_seen.get(pid)
            self.cpu_seen[pid] = cpu
            if first or is_ours(pid):
                continue
            used = cpu if before is None or cpu < before else cpu - before  # lower: a new process
            if used > 0:
                added += used
                seen = self.cpu_by_pid.setdefault(pid, [0.0, comm])
                seen[0] += used
        self.ours_seen = {pid for pid in procs if pid in ours}
        total = (self.cpu_series[-1][1] if self.cpu_series else 0.0) + added
        self.cpu_series.append((time.time(), total))

    def foreign_cpu(self, window: tuple[float, float] | None = None, cpus: int | None = None) -> dict:
        """Other processes' CPU time over `window` (time_unix of the measured steps' start and end;
        None: the whole watch), between the samples around it, as a share of the host's CPUs."""
        series = self.cpu_series
        out = {
            "window": "measured steps" if window else "whole run",
            "foreign_cpu_s": None,
            "window_s": None,
            "foreign_cpu_share": None,
        }
        if len(series) < 2:
            return out
        i, j = 0, len(series) - 1
        if window:
            i = max([k for k, (t, _) in enumerate(series) if t <= window[0]] or [0])
            j = min([k for k, (t, _) in enumerate(series) if t >= window[1]] or [len(series) - 1])
        if j <= i:
            return out
        wall = series[j][0] - series[i][0]
        used = series[j][1] - series[i][1]
        out.update(
            foreign_cpu_s=round(used, 3),
            window_s=round(wall, 3),
            foreign_cpu_share=round(used / (wall * (cpus or os.cpu_count() or 1)), 4) if wall > 0 else None,
        )
        return out

    def record(
        self, device_lock_wait_s: float, cpus: int | None = None, window: tuple[float, float] | None = None
    ) -> dict:
        """status.json's `load`; `window`: the measured steps (time_unix of their start and end)."""
        runs = sorted(set(self.foreign.values()))
        shared = {g: n for g, n in sorted(self.gpu_procs_max.items()) if n > 1}
        cpus = cpus or os.cpu_count()
        cpu = self.foreign_cpu(window, cpus)
        top = sorted(self.cpu_by_pid.items(), key=lambda kv: -kv[1][0])[:10]
        top_text = ", ".join(f"{comm} (pid {pid}, {used:.1f} CPU-s)" for pid, (used, comm) in top[:5])
        reasons = []
        if self.foreign and not self.gpus:  # a GPU run shares only its GPUs: NVML's counts decide
            reasons.append(
                f"{len(self.foreign)} process(es) of {len(runs)} other run(s) of the package ran on this "
                "host while it measured"
            )
        share = cpu["foreign_cpu_share"]
        limit = self.cpu_share_max
        if share is not None and limit is not None and share > limit and not self.gpus:
            reasons.append(
                f"other processes used {share:.0%} of the host's {cpus} CPUs during its {cpu['window']} "
                f"({cpu['foreign_cpu_s']:.1f} CPU-s in {cpu['window_s']:.1f} s; more than "
                f"{limit:.0%}): {top_text}"
            )
        if shared:
            reasons.append(
                "GPU(s) "
                + ", ".join(f"{g} ({n} compute processes at once)" for g, n in shared.items())
                + " ran another process beside the run's one"
            )
        return {
            "host_cpus": cpus,
            "loadavg_1min_max": None if self.loadavg_max is None else round(self.loadavg_max, 2),
            "samples": self.samples,
            "other_run_processes": sorted(self.foreign),
            "other_runs": len(runs),
            "foreign_cpu": {
                **cpu,
                "threshold": limit,
                "applies": not self.gpus and limit is not None,
                "top_processes": [{"pid": pid, "command": comm, "cpu_s": round(used, 3)} for pid, (used, comm) in top],
            },
            "gpu_compute_processes_max": dict(sorted(self.gpu_procs_max.items())) if self.gpus else None,
            "gpu_utilization_max": dict(sorted(self.gpu_util_max.items())) if self.gpus else None,
            "gpu_check": self.gpu_reason,
            "device_lock_wait_s": device_lock_wait_s,
            "contaminated": bool(reasons),
            "reason": "; ".join(reasons) or None,
        }
