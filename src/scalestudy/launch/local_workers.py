"""Start the processes of a one-host CPU run without torchrun: import the harness once, then fork
one worker a rank with the environment torchrun would give it (RANK, LOCAL_RANK, WORLD_SIZE,
LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT).

    python -m scalestudy workers --nproc 4 -- train --spec SPEC.json --run-dir DIR --quiet

Most of a small CPU run is start-up: torchrun's agent imports torch, and each of its workers
imports torch and the harness anew (about 2.5 and 4.5 CPU-seconds). Forked from a parent that
has imported them, the workers start at once. The parent never runs a torch operation or joins
the process group, so the children inherit no threads or communicators. Like torchrun it passes
SIGTERM and SIGINT on to the workers and exits with the first non-zero exit code of a worker
(128 + signal for a worker killed by one). The launcher (scalestudy.launch.launcher) uses it for CPU runs
on one host; GPU runs, SLURM runs and SCALESTUDY_LOCAL_LAUNCHER=torchrun use torchrun.

The process is the command line's (`scalestudy workers`, scalestudy.cli.workers): it preloads the
command's modules and hands run_workers the command line's entry point, so that nothing here
reaches up into the wing above.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import traceback
from collections.abc import Callable, Iterable
from contextlib import closing

LAUNCHER_ENV = "SCALESTUDY_LOCAL_LAUNCHER"
Runner = Callable[[list[str]], int]  # a scalestudy command line, run in this process: its exit code


def launcher_choice(device: str, nodes: int, env: dict) -> str:
    """How a run on this host starts its processes: `local` (this module), `warm` (forked by a
    warm server, scalestudy.launch.warm_workers; the workflow's choice) or `torchrun` (GPU and
    multi-node runs always)."""
    choice = env.get(LAUNCHER_ENV, "local")
    if choice not in ("local", "warm", "torchrun"):
        raise ValueError(f"{LAUNCHER_ENV}={choice!r}: expected local, warm or torchrun")
    return choice if device == "cpu" and nodes == 1 else "torchrun"


def command(nproc: int, module_args: list[str], python: str = sys.executable) -> list[str]:
    """The command line for `module_args` ("scalestudy", "train", ...) on nproc local workers."""
    if module_args[0] != "scalestudy":
        raise ValueError(f"local workers run scalestudy commands, not {module_args[0]!r}")
    return [python, "-m", "scalestudy", "workers", f"--nproc={nproc}", "--", *module_args[1:]]


def _free_port() -> int:
    with closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(argv: list[str], env: dict[str, str], runner: Runner) -> None:
    """In the forked child: run the command as one rank, then leave at once (no interpreter
    teardown: every record is written and closed by then)."""
    for s in (signal.SIGTERM, signal.SIGINT):
        signal.signal(s, signal.SIG_DFL)
    os.environ.update(env)
    code = 1
    try:
        code = runner(argv)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:  # noqa: BLE001 - the traceback goes to the run's log, like torchrun's workers
        traceback.print_exc()
        code = 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code if isinstance(code, int) else 1)


def forward_signals(targets: Callable[[], Iterable[int]]) -> None:
    """Pass SIGTERM and SIGINT on to the processes `targets()` names when the signal arrives."""

    def forward(signum, _frame):
        for pid in targets():
            try:
                os.kill(pid, signum)
            except ProcessLookupError:
                pass

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)


def run_workers(nproc: int, args: list[str], runner: Runner) -> int:
    """Fork `nproc` workers, each running `runner(args)` (the command line's entry point, its
    modules preloaded), wait for them and return the first non-zero exit code (0 if none)."""
    base = {
        "WORLD_SIZE": str(nproc),
        "LOCAL_WORLD_SIZE": str(nproc),
        "GROUP_RANK": "0",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(_free_port()),
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
    }
    sys.stdout.flush()
    sys.stderr.flush()
    children: dict[int, int] = {}
    for rank in range(nproc):
        pid = os.fork()
        if pid == 0:
            _worker(args, {**base, "RANK": str(rank), "LOCAL_RANK": str(rank)}, runner)
        children[pid] = rank

    forward_signals(lambda: list(children))
    first_failure = 0
    while children:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            break
        if pid not in children:
            continue
        rank = children.pop(pid)
        code = os.waitstatus_to_exitcode(status)
        code = 128 - code if code < 0 else code
        if code and not first_failure:
            first_failure = code
            print(f"[scalestudy workers] rank {rank} exited with code {code}", file=sys.stderr, flush=True)
    return first_failure
