"""The `scalestudy instrument NAME` command: one measurement of one GPU that the performance model
reads besides training runs (spec/instruments.py), written as a sealed raw log like every run.

    scalestudy instrument matmul-sweep --out-root data/h200-matmul/raw     # the achievable matmul rate
    scalestudy instrument power-duty --out-root data/power-duty/raw        # board power under duty cycles
    scalestudy instrument comm-power --out-root data/comm-power/raw        # board power of communication kernels
    scalestudy instrument burst-rate --out-root data/burst-rate/raw        # products in short bursts
    scalestudy instrument matmul-sweep --device cpu --grid 32,64 --llama tiny/64 --tp 1,2   # the code path on CPU
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable
from dataclasses import MISSING, fields

from scalestudy.launch import run_guard
from scalestudy.spec.instruments import SPECS
from scalestudy.spec.options import add_field_options
from scalestudy.spec.run import spec_with_overrides

# NAME -> (module of scalestudy.harness.instruments, its run function, what it measures)
INSTRUMENTS = {
    "matmul-sweep": (
        "matmul_sweep",
        "run_matmul_sweep",
        "the best achievable bf16 matrix-product rate over a sweep of shapes (MAMF-style)",
    ),
    "power-duty": (
        "power_duty",
        "run_power_duty",
        "GPU board power under duty cycles of matrix products, copies and idle gaps",
    ),
    "comm-power": (
        "comm_power",
        "run_comm_power",
        "GPU board power while thread blocks poll and reduce as NCCL's channels do (needs cupy)",
    ),
    "burst-rate": (
        "burst_rate",
        "run_burst_rate",
        "the rate and power of matrix products in short bursts against back to back",
    ),
}
_ELEMENT_TYPES: dict[str, Callable[[str], object]] = {"int": int, "float": float, "str": str}


def _list_of(kind: Callable[[str], object]) -> Callable[[str], tuple]:
    def parse(text: str) -> tuple:
        return tuple(kind(t.strip()) for t in text.split(",") if t.strip())

    return parse


def _tuple_options(cls: type) -> dict[str, tuple[Callable[[str], tuple], str]]:
    """The comma-separated options of a spec's tuple fields: their parser and default as shown."""
    out = {}
    for f in fields(cls):
        text = str(f.type)
        if text.startswith("tuple["):
            kind = _ELEMENT_TYPES[text[len("tuple[") :].split(",")[0].strip()]
            default = f.default if f.default is not MISSING else ()
            out[f.name] = (_list_of(kind), ",".join(map(str, default)) + "; comma-separated")
    return out


def cmd_instrument(args: argparse.Namespace) -> int:
    run_guard.guard_worker()
    from scalestudy.cli.train import run_into_dir

    module, function, _ = INSTRUMENTS[args.instrument]
    run = getattr(importlib.import_module(f"scalestudy.harness.instruments.{module}"), function)
    spec = spec_with_overrides(SPECS[args.instrument], args.spec, args)
    return run_into_dir(run, spec, args, "scalestudy instrument")


def register(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "instrument",
        help="measure one GPU for the performance model (matmul sweep, power "
        "duty cycles, communication power, burst rate) and write the raw log",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="instrument", required=True, metavar="NAME", help="one of:")
    for name, (_, _, what) in INSTRUMENTS.items():
        cls = SPECS[name]
        q = sub.add_parser(name, help=what, description=f"{what} ({cls.__name__}, spec/instruments.py)")
        q.add_argument("--spec", help=f"a JSON or YAML file of {cls.__name__} fields; options below override it")
        add_field_options(
            q.add_argument_group(f"measurement specification ({cls.__name__} fields)"), cls, _tuple_options(cls)
        )
        q.add_argument("--run-dir", help="the run's raw-log directory (default OUT_ROOT/RUN_ID)")
        q.add_argument("--out-root", default="runs", help="where run directories go (default ./runs)")
        q.add_argument("--quiet", action="store_true", help="no progress lines")
        q.set_defaults(func=cmd_instrument)
    return p
