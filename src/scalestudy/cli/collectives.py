"""The `scalestudy collectives` command: the collectives benchmark of the study's Figure 2.

    torchrun --nproc_per_node 8 -m scalestudy collectives --procs-per-node 8 \\
        --ops all_reduce,all_gather,reduce_scatter --min-bytes 512 --max-bytes 16G --device cuda
"""

from __future__ import annotations

import argparse

from scalestudy.launch import run_guard
from scalestudy.spec.collectives import OPS, CollectivesSpec, format_size, parse_size
from scalestudy.spec.options import add_field_options
from scalestudy.spec.run import spec_with_overrides


def _ops(text: str) -> tuple[str, ...]:
    ops = tuple(o.strip() for o in text.split(",") if o.strip())
    if ops == ("all",):
        return OPS
    return ops


def _size(text: str) -> int:
    try:
        return parse_size(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def add_collectives_spec_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--spec", help="a JSON or YAML file of CollectivesSpec fields; options below override it")
    add_field_options(
        p.add_argument_group("benchmark specification (CollectivesSpec fields)"),
        CollectivesSpec,
        {
            "ops": (_ops, ",".join(CollectivesSpec.ops) + "; comma-separated, or 'all'"),
            "min_bytes": (_size, format_size(CollectivesSpec.min_bytes) + "; K/M/G suffixes allowed"),
            "max_bytes": (_size, format_size(CollectivesSpec.max_bytes) + "; K/M/G suffixes allowed"),
        },
    )


def collectives_spec_from_args(args: argparse.Namespace) -> CollectivesSpec:
    return spec_with_overrides(CollectivesSpec, args.spec, args)


def cmd_collectives(args: argparse.Namespace) -> int:
    run_guard.guard_worker()  # a worker of a launched run: no process of it outlives its launcher or torchrun
    from scalestudy.cli.train import run_into_dir
    from scalestudy.harness.collectives.bench import run_collectives

    return run_into_dir(run_collectives, collectives_spec_from_args(args), args)


def register(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "collectives",
        help="benchmark collectives (nccl-tests style) and write their raw log",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_collectives_spec_options(p)
    p.add_argument("--run-dir", help="the run's raw-log directory (default OUT_ROOT/RUN_ID)")
    p.add_argument("--out-root", default="runs", help="where run directories go (default ./runs)")
    p.add_argument("--quiet", action="store_true", help="no progress table")
    p.set_defaults(func=cmd_collectives)
    return p
