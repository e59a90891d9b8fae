"""The `scalestudy` command: one module a command group (train and plan; measure; collectives;
analysis; launch, study and status; model; import), each adding its subcommands with register(); the
domain modules they call live in the wings below.

Every command group's module imports the wings inside its command functions, not at the top: the
parser is built for every call (and by each local worker), so `scalestudy --help` and a command
pay only for the wings that command uses (torch for train, matplotlib for figures, the model for
predictions), never for all of them."""

from __future__ import annotations

import argparse
import importlib
import sys

from scalestudy.spec.catalog import CatalogError
from scalestudy.spec.run import SpecError

# modules adding subcommands through register(subparsers), one a command group
COMMAND_MODULES = (
    "scalestudy.cli.train",
    "scalestudy.cli.measure",
    "scalestudy.cli.collectives",
    "scalestudy.cli.gemm",
    "scalestudy.cli.instrument",
    "scalestudy.cli.analysis",
    "scalestudy.cli.launch",
    "scalestudy.cli.model",
    "scalestudy.cli.importing",
    "scalestudy.cli.workers",
)


class _Version(argparse.Action):
    """--version, hashed only when asked (the parser is built for every call)."""

    def __call__(self, parser, namespace, values, option_string=None):
        from scalestudy.measure.code_version import code_version, model_version

        print(f"{code_version()} ({model_version()})")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="scalestudy", description="The `scalestudy` command.")
    parser.add_argument(
        "--version",
        action=_Version,
        nargs=0,
        help="the package version with the hashes of its analysis and model code, as outputs record them, and exit",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", help="one of:")
    for module in COMMAND_MODULES:
        importlib.import_module(module).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except (SpecError, CatalogError) as e:  # a bad spec, study or catalog file: the message names it
        print(f"scalestudy: {e}", file=sys.stderr)
        return 2
