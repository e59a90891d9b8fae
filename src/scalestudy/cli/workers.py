"""`scalestudy workers`: the process that forks a one-host CPU run's workers (launch.local_workers),
or with --serve a warm server that forks them for many runs (launch.warm_workers). The launcher
starts it; nobody types it. It lives here because its workers run this command line: it preloads
a command's modules, then hands the launch wing the command line's entry point.

    python -m scalestudy workers --nproc 4 -- train --spec SPEC.json --run-dir DIR --quiet
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from pathlib import Path

from scalestudy.spec.run import help_line

# what each command's workers need, imported once in the parent. torch._dynamo: torch imports it
# lazily on a run's first meta-device initialisation (about 0.5 CPU-s in every worker otherwise)
PRELOAD = {
    "train": ("scalestudy.harness.train", "torch._dynamo"),
    "collectives": ("scalestudy.harness.collectives.bench",),
}


def preload(command: str) -> None:
    """Import what the workers of `command` need, and every command's module (the parser imports
    them), so that forked workers start with them loaded."""
    from scalestudy.cli import build_parser

    for module in PRELOAD.get(command, ()):
        importlib.import_module(module)
    build_parser()


def run_command(argv: list[str]) -> int:
    """One worker: the scalestudy command line on `argv`."""
    from scalestudy.cli import main

    return main(argv)


def cmd_workers(args: argparse.Namespace) -> int:
    from scalestudy.launch import local_workers, warm_workers

    if args.serve:
        code = warm_workers.serve(Path(args.serve), args.idle_s, run_command, preload)
    else:
        command = args.args[1:] if args.args[:1] == ["--"] else args.args
        if not args.nproc or args.nproc < 1 or not command:
            print("scalestudy workers: needs --nproc >= 1 and a scalestudy command after --", file=sys.stderr)
            return 2
        preload(command[0])
        code = local_workers.run_workers(args.nproc, command, run_command)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # no interpreter teardown with torch loaded (about a second on 2 busy cores)


def register(subparsers: argparse._SubParsersAction) -> None:
    from scalestudy.launch.warm_workers import DEFAULT_IDLE_S

    p = subparsers.add_parser(
        "workers",
        help="(started by scalestudy launch) fork a one-host CPU run's workers, or serve them warm",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--nproc", type=int, help=help_line("worker processes", unit="processes", allowed=">= 1"))
    p.add_argument(
        "--serve", metavar="SOCKET", help="run a warm server on this unix socket (the warm client starts it)"
    )
    p.add_argument(
        "--idle-s",
        type=float,
        default=DEFAULT_IDLE_S,
        help=help_line(
            "the server ends after this long without a run", unit="s", allowed="> 0", default=f"{DEFAULT_IDLE_S:.0f}"
        ),
    )
    p.add_argument("args", nargs=argparse.REMAINDER, help="the scalestudy command and its options, after --")
    p.set_defaults(func=cmd_workers)
