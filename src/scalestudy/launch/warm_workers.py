"""A warm start for the local workers of CPU runs: one server a host, code and environment that
has imported torch and the harness once, and forks the workers of each run on request.

    python -m scalestudy.launch.warm_workers --nproc 4 -- train --spec SPEC.json --run-dir DIR --quiet

The command above is the client, which the launcher (scalestudy.launch.launcher) starts instead of
`python -m scalestudy workers` (local_workers) when SCALESTUDY_LOCAL_LAUNCHER=warm (the workflow sets it
for its local jobs). It imports no torch: it connects to the server's socket in the lock
directory (run_guard.lock_dir), starting the server first if there is none, hands it its log
(stdout, stderr), environment, working directory and command, passes SIGTERM and SIGINT on,
and exits with the workers' exit code, like local_workers. Without a working server it runs
local_workers itself.

The server imports what local_workers would import for every run (2.5 to 3.5 CPU-seconds) once.
A run's processes keep the rules of run_guard: the launcher holds the host's device lock while
they run (the server is asked only then, and idles otherwise). The run's parent, forked from the
server, writes the run's identity (token, launcher pid, start and host) over placeholders in its
own environment block, where /proc/PID/environ - which run_guard reads to find and end a run's
processes - shows them and forked workers inherit them; it joins a session of its own and ends
with the launcher (run_guard.guard_worker). The server's own token is run_guard.NO_RUN_TOKEN,
never a run's. A server serves one environment: its key is the interpreter, the package's
files, the installed packages' directories and every environment variable except the run's
identity, the shell's bookkeeping and the tests' fault switch (read when a run starts), so that
the workers have imported what a fresh start would have. It ends after SCALESTUDY_WARM_IDLE_S seconds (default 120) without a run, or when
stop_servers (the workflow's end) removes its socket. The server process is the command line's
(`scalestudy workers --serve`, scalestudy.cli.workers), which hands serve() its entry point and
what to preload; the client here needs none of it.
"""

from __future__ import annotations

import argparse
import ctypes
import fcntl
import hashlib
import json
import os
import resource
import select
import signal
import socket
import struct
import subprocess
import sys
import sysconfig
import time
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

import scalestudy
from scalestudy.launch import local_workers, run_guard

IDLE_ENV = "SCALESTUDY_WARM_IDLE_S"
DEFAULT_IDLE_S = 120.0
START_TIMEOUT_S = 120.0  # the server's imports, on a busy host
# the run's identity: set per run, left out of the server's key and replaced in its environment
_PER_RUN = (run_guard.TOKEN_ENV, run_guard.LAUNCHER_PID_ENV, run_guard.LAUNCHER_START_ENV, run_guard.LAUNCHER_HOST_ENV)
# the shell's bookkeeping, which no import reads: left out of the key too
_SHELL = ("OLDPWD", "PWD", "SHLVL", "_")
# read when a run starts, by no import (harness.faults.INJECT_ENV, the tests' fault switch;
# measure.rawlog.IDENTITY_ENV, the study and hardware line run.json records): left out of the key;
# the run's parent takes the run's own value with the rest of its environment
_READ_AT_RUN = ("SCALESTUDY_INJECT_FAULT", "SCALESTUDY_RUN_IDENTITY")
_SLOT = 64  # room for a pid, a start time or a host name
_MAX_REQUEST = 1 << 20
_SOCKET_PATH_MAX = 100  # sun_path holds 108 bytes


class WarmUnavailable(Exception):
    """No server can serve this run (the client then runs local_workers itself)."""


# ---- the key of a server ------------------------------------------------------------------
def _source_digest() -> str:
    root = Path(scalestudy.__file__).resolve().parent  # the whole package, every wing
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.suffix in (".py", ".yaml", ".json") and "__pycache__" not in p.parts:
            st = p.stat()
            h.update(f"{p.relative_to(root)}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    return h.hexdigest()


def server_key(env: dict) -> str:
    """What a server's imports depend on: the interpreter, the package's files, the installed
    packages' directories (a pip install changes their times) and the environment."""
    h = hashlib.sha256()
    h.update(f"{sys.executable}\0{sys.version}\0{_source_digest()}\0".encode())
    for d in sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}):
        try:
            h.update(f"{d}\0{os.stat(d).st_mtime_ns}\0".encode())
        except OSError:
            pass
    for k in sorted(env):
        if k not in _PER_RUN and k not in _SHELL and k not in _READ_AT_RUN:
            h.update(f"{k}={env[k]}\0".encode())
    return h.hexdigest()[:16]


def socket_path(env: dict) -> Path:
    return run_guard.lock_dir(env) / f"warm-{server_key(env)}.sock"


@contextmanager
def _address(path: Path):
    """The address to bind or connect to for the socket file at path: the path itself or, past
    what sun_path holds, the same file reached through /proc/self/fd/N of its open directory."""
    if len(os.fsencode(path)) <= _SOCKET_PATH_MAX:
        yield str(path)
        return
    fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        yield f"/proc/self/fd/{fd}/{path.name}"
    finally:
        os.close(fd)


# ---- the run's identity in the environment block ----------------------------------------
def placeholders() -> dict[str, str]:
    """The server's values of the run's identity variables: room for a run's values. The token's
    is run_guard.NO_RUN_TOKEN, which run_guard counts as no run's."""
    return {k: run_guard.NO_RUN_TOKEN if k == run_guard.TOKEN_ENV else "0" * _SLOT for k in _PER_RUN}


def _environ_block() -> tuple[int, int]:
    """The address range of this process's initial environment (fields 50, 51 of /proc/self/stat)."""
    fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[50 - 3]), int(fields[51 - 3])


def check_fits(env: dict) -> None:
    for k, room in placeholders().items():
        if len(env.get(k, "").encode()) > len(room):
            raise WarmUnavailable(f"{k}={env[k]!r} is longer than its room in a server's environment ({len(room)})")


def stamp_run(env: dict) -> None:
    """Write the run's identity (token, launcher pid, start and host) over the placeholders in
    this process's environment block, where /proc/PID/environ - and so run_guard - reads them
    (a shorter value is padded with NULs); forked children inherit the block."""
    check_fits(env)
    start, end = _environ_block()
    block = b"\0" + ctypes.string_at(start, end - start)
    for k, room in placeholders().items():
        entry = f"\0{k}=".encode()
        at = block.find(entry + room.encode() + b"\0")
        if at < 0:
            raise WarmUnavailable(f"no room for {k} in this process's environment block")
        value = env.get(k, "").encode()
        ctypes.memmove(start + at - 1 + len(entry), value + b"\0" * (len(room) - len(value)), len(room))


# ---- the server -----------------------------------------------------------------------
def serve(path: Path, idle_s: float, runner: local_workers.Runner, preload: Callable[[str], None]) -> int:
    """Serve runs on the socket at `path` until idle for `idle_s` or retired: each run's parent
    forks its workers, which run `runner` (the command line's entry point; `preload(command)` has
    imported what a command's workers need). Started as `scalestudy workers --serve` (cli.workers)."""
    stamp_run(placeholders())  # the block can be written: else exit before serving
    for command in ("train", "collectives"):
        preload(command)
    os.umask(0o077)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        path.unlink(missing_ok=True)
        with _address(path) as address:
            listener.bind(address)
    except OSError as e:
        print(f"[scalestudy warm_workers] cannot listen on {path}: {e}", file=sys.stderr, flush=True)
        return 1
    listener.listen(8)
    mine = path.stat().st_ino
    print(f"[scalestudy warm_workers] pid {os.getpid()} serving on {path}", file=sys.stderr, flush=True)
    runs: set[int] = set()
    served = 0
    last = time.monotonic()
    try:
        while True:
            while runs:
                try:
                    pid, _ = os.waitpid(-1, os.WNOHANG)
                except ChildProcessError:
                    runs.clear()
                    break
                if pid == 0:
                    break
                runs.discard(pid)
                last = time.monotonic()
            retired = not _still_mine(path, mine)  # stop_servers removed the socket, or a new server took it
            if not runs and (retired or time.monotonic() - last > idle_s):
                return 0
            if retired:  # no new runs; the ones in flight finish first (their parents die with this process)
                time.sleep(0.5)
                continue
            ready, _, _ = select.select([listener], [], [], 1.0)
            if not ready:
                continue
            conn, _ = listener.accept()
            try:
                pid = _fork_run(conn, listener, runner)
                if pid:
                    runs.add(pid)
                    served += 1
                    last = time.monotonic()
            finally:
                conn.close()
    finally:
        if _still_mine(path, mine):
            path.unlink(missing_ok=True)
        listener.close()
        # the runs' processes are this server's descendants, not the launchers': their CPU time
        # shows here (and not in a `time snakemake ...`)
        me, runs_cpu = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        print(
            f"[scalestudy warm_workers] pid {os.getpid()} ends after serving {served} run(s); CPU time: "
            f"server {me.ru_utime:.1f} s user + {me.ru_stime:.1f} s sys, runs {runs_cpu.ru_utime:.1f} s user + "
            f"{runs_cpu.ru_stime:.1f} s sys",
            file=sys.stderr,
            flush=True,
        )


def _still_mine(path: Path, inode: int) -> bool:
    try:
        return path.stat().st_ino == inode
    except OSError:
        return False


def stop_servers(env: dict | None = None) -> list[Path]:
    """Retire every warm server of this lock directory (the workflow's end): each takes no new
    run and ends when its runs in flight have ended. Returns the sockets removed."""
    removed = []
    for sock in sorted(run_guard.lock_dir(os.environ if env is None else env).glob("warm-*.sock")):
        try:
            sock.unlink()
            removed.append(sock)
        except OSError:
            pass
    return removed


def _peer_uid(conn: socket.socket) -> int:
    _pid, uid, _gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
    return uid


def _fork_run(conn: socket.socket, listener: socket.socket, runner: local_workers.Runner) -> int | None:
    """Read one request and fork the run's parent; returns its pid (None: request refused)."""
    if _peer_uid(conn) != os.getuid():
        return None
    conn.settimeout(10.0)
    try:
        data, fds, _flags, _addr = socket.recv_fds(conn, _MAX_REQUEST, 3)
        while chunk := conn.recv(65536):  # the client shuts its side after the request
            data += chunk
        request = json.loads(data)
    except (OSError, ValueError) as e:
        print(f"[scalestudy warm_workers] bad request: {e}", file=sys.stderr, flush=True)
        return None
    if len(fds) != 3:
        for fd in fds:
            os.close(fd)
        return None
    pid = os.fork()
    if pid == 0:
        listener.close()
        _run_parent(conn, fds, request, runner)
    for fd in fds:
        os.close(fd)
    return pid


def _run_parent(conn: socket.socket, fds: list[int], request: dict, runner: local_workers.Runner) -> None:
    """In the forked child: become the run's parent (what local_workers' process is), then leave."""
    code = 1
    try:
        os.setsid()
        for target, fd in zip((0, 1, 2), fds):
            os.dup2(fd, target)
            os.close(fd)
        env = request["env"]
        stamp_run(env)
        os.environ.clear()
        os.environ.update(env)
        os.chdir(request["cwd"])
        sys.argv = ["python -m scalestudy.launch.warm_workers", *request["args"]]
        for s in (signal.SIGTERM, signal.SIGINT):
            signal.signal(s, signal.SIG_DFL)
        run_guard.guard_worker()  # ends with the launcher, like a worker
        conn.sendall(f"pid {os.getpid()}\n".encode())
        code = local_workers.run_workers(int(request["nproc"]), list(request["args"]), runner)
    except BaseException as e:  # noqa: BLE001 - said in the run's log, exit code 1
        print(f"[scalestudy warm_workers] the run's parent failed: {type(e).__name__}: {e}", file=sys.stderr)
        code = 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
            conn.sendall(f"exit {code}\n".encode())
        except OSError:
            pass
        os._exit(code)


# ---- the client -----------------------------------------------------------------------
def _connect(path: Path) -> socket.socket | None:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        with _address(path) as address:
            s.connect(address)
        return s
    except OSError:
        s.close()
        return None


def _start_server(path: Path, env: dict) -> socket.socket:
    """Start a server for this environment (one at a time: a lock file beside the socket) and
    connect to it."""
    with open(path.with_suffix(".start"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        conn = _connect(path)
        if conn is not None:
            return conn
        server_env = {**{k: v for k, v in env.items() if k not in _PER_RUN + _READ_AT_RUN}, **placeholders()}
        idle = env.get(IDLE_ENV, str(DEFAULT_IDLE_S))
        with open(path.with_suffix(".log"), "a") as log:
            server = subprocess.Popen(
                [sys.executable, "-m", "scalestudy", "workers", "--serve", str(path), "--idle-s", idle],
                env=server_env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                cwd="/",
            )
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            conn = _connect(path)
            if conn is not None:
                return conn
            if server.poll() is not None:
                raise WarmUnavailable(
                    f"the server ended with exit code {server.returncode} (see {path.with_suffix('.log')})"
                )
            time.sleep(0.05)
        server.kill()
        raise WarmUnavailable(f"no server on {path} after {START_TIMEOUT_S:.0f} s")


def _read_line(conn: socket.socket, buf: bytearray) -> str | None:
    while b"\n" not in buf:
        try:
            chunk = conn.recv(4096)
        except InterruptedError:
            continue
        if not chunk:
            return None
        buf += chunk
    line, _, rest = bytes(buf).partition(b"\n")
    buf[:] = rest
    return line.decode()


def run_client(nproc: int, args: list[str]) -> int:
    env = dict(os.environ)
    if not env.get(run_guard.TOKEN_ENV):
        raise WarmUnavailable(f"{run_guard.TOKEN_ENV} is not set: warm workers serve launched runs only")
    check_fits(env)
    path = socket_path(env)
    conn = _connect(path) or _start_server(path, env)
    with conn:
        request = json.dumps({"nproc": nproc, "args": args, "env": env, "cwd": os.getcwd()}).encode()
        socket.send_fds(conn, [request], [0, 1, 2])
        conn.shutdown(socket.SHUT_WR)
        buf = bytearray()
        first = _read_line(conn, buf)
        if first is None or not first.startswith("pid "):
            raise WarmUnavailable(f"the server at {path} did not start the run")
        parent = int(first.split()[1])
        local_workers.forward_signals(lambda: (parent,))
        last = _read_line(conn, buf)
    if last is None or not last.startswith("exit "):
        print("[scalestudy warm_workers] the run's parent ended without an exit code", file=sys.stderr, flush=True)
        return 1
    return int(last.split()[1])


def command(nproc: int, module_args: list[str], python: str = sys.executable) -> list[str]:
    """The command line for `module_args` ("scalestudy", "train", ...) on nproc warm workers."""
    if module_args[0] != "scalestudy":
        raise ValueError(f"warm workers run scalestudy commands, not {module_args[0]!r}")
    return [python, "-m", "scalestudy.launch.warm_workers", f"--nproc={nproc}", "--", *module_args[1:]]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m scalestudy.launch.warm_workers",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--nproc", type=int, help="worker processes [unit: processes; allowed: >= 1]")
    p.add_argument("args", nargs=argparse.REMAINDER, help="the scalestudy command and its options, after --")
    ns = p.parse_args(argv)
    args = ns.args[1:] if ns.args[:1] == ["--"] else ns.args
    if not ns.nproc or ns.nproc < 1 or not args:
        p.error("needs --nproc >= 1 and a scalestudy command")
    try:
        return run_client(ns.nproc, args)
    except WarmUnavailable as e:
        print(f"[scalestudy warm_workers] {e}; starting the workers here instead", file=sys.stderr, flush=True)
        os.execv(sys.executable, local_workers.command(ns.nproc, ["scalestudy", *args], sys.executable))
    return 1  # not reached


if __name__ == "__main__":
    sys.exit(main())
