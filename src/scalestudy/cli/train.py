"""`scalestudy train` (one run of a spec, under torchrun for several processes) and `scalestudy
plan` (a spec's run id and memory estimate), with the RunSpec options they and other commands share."""

from __future__ import annotations

import argparse
import json
import os
import sys

from scalestudy.launch import run_guard
from scalestudy.spec.options import add_field_options
from scalestudy.spec.run import RunSpec, help_line, spec_with_overrides

# the peak for MFU when --peak-tflops is not given: set by `scalestudy launch` from the study or site file
PEAK_TFLOPS_ENV = "SCALESTUDY_PEAK_TFLOPS"


def add_spec_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--spec", help="a JSON or YAML file of RunSpec fields; options below override it")
    add_field_options(p.add_argument_group("run specification (RunSpec fields)"), RunSpec)


def spec_from_args(args: argparse.Namespace) -> RunSpec:
    return spec_with_overrides(RunSpec, args.spec, args)


def run_into_dir(run, spec, args: argparse.Namespace, who: str = "scalestudy", **options) -> int:
    """A worker command's measurement: `run(spec, run_dir, quiet=..., **options)` into --run-dir
    (default OUT_ROOT/RUN_ID); exit 2 with one sentence when the harness refuses before a raw log
    exists (e.g. started without torchrun), else 0 (the run's status is in its raw log)."""
    from pathlib import Path

    from scalestudy.harness.faults import InvalidConfig

    run_dir = Path(args.run_dir) if args.run_dir else Path(args.out_root) / spec.run_id
    try:
        run(spec, run_dir, quiet=args.quiet, **options)
    except InvalidConfig as e:
        print(f"{who}: {e}", file=sys.stderr)
        return 2
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    run_guard.guard_worker()  # a worker of a launched run: no process of it outlives its launcher or torchrun
    from scalestudy.harness import metrics_sink

    try:
        metrics_sink.check(args.metrics_sink)
    except metrics_sink.SinkUnavailable as e:
        print(f"scalestudy train: {e}", file=sys.stderr)
        return 2
    from scalestudy.harness.train import train

    peak = args.peak_tflops if args.peak_tflops is not None else float(os.environ.get(PEAK_TFLOPS_ENV) or 0) or None
    return run_into_dir(
        train,
        spec_from_args(args),
        args,
        "scalestudy train",
        time_limit_s=args.time_limit_s,
        peak_tflops=peak,
        power_period_s=args.power_period_s,
        progress_every=args.progress_every,
        metrics_sink=args.metrics_sink,
    )


def cmd_plan(args: argparse.Namespace) -> int:
    from scalestudy.spec.memory_estimate import GIB, estimate_memory

    spec = spec_from_args(args)
    est = estimate_memory(spec)
    out = {
        "run_id": spec.run_id,
        "layout": spec.layout,
        "world_size": spec.world_size,
        "grad_accum": spec.grad_accum,
        "memory_estimate": est.as_dict(),
    }
    if args.device_memory_gib:
        out["fits"] = est.fits(int(args.device_memory_gib * GIB))
    print(json.dumps(out, indent=1))
    return 0 if out.get("fits", True) else 3


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("train", help="run one spec (under torchrun for several processes) and write its raw log")
    add_spec_options(p)
    p.add_argument("--run-dir", help="the run's raw-log directory (default OUT_ROOT/RUN_ID)")
    p.add_argument("--out-root", default="runs", help="where run directories go (default ./runs)")
    p.add_argument(
        "--time-limit-s",
        type=float,
        default=None,
        help=help_line("stop the run with status timeout after this long", unit="s", allowed="> 0", default="none"),
    )
    p.add_argument(
        "--quiet",
        action="store_true",
        help="only rank 0 speaks (the workflow's launcher passes it); progress lines stay",
    )
    p.add_argument(
        "--progress-every",
        type=int,
        default=None,
        help=help_line(
            "a progress line (step, loss, tokens/s, MFU, memory, time left) every N steps",
            unit="steps",
            allowed=">= 0; 0: none",
            default="about ten lines a run",
        ),
    )
    p.add_argument(
        "--peak-tflops",
        type=float,
        default=None,
        help=help_line(
            "the device's peak for MFU, for a GPU missing from the peak table (or to override it)",
            unit="TFLOP/s per device",
            allowed="> 0",
            default=f"${PEAK_TFLOPS_ENV}, else the GPU catalog's",
        ),
    )
    p.add_argument(
        "--no-power",
        dest="power_sampling",
        action="store_false",
        default=None,
        help="the same as --no-power-sampling: the spec's power_sampling false, no GPU power or energy "
        "measured (a run id of its own)",
    )
    p.add_argument(
        "--power-period-s",
        type=float,
        default=0.1,
        help=help_line(
            "NVML power sampling period (where the spec's power_sampling is true)", unit="s", allowed="> 0", default=0.1
        ),
    )
    p.add_argument(
        "--metrics-sink",
        default="none",
        choices=("none", "tensorboard", "wandb"),
        help=help_line(
            "also log rank 0's per-step loss, tokens/s, MFU and memory live to TensorBoard "
            "(RUN_DIR/tensorboard) or Weights & Biases (WANDB_PROJECT); its package must be "
            "installed",
            allowed=("none", "tensorboard", "wandb"),
            default="none",
        ),
    )
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("plan", help="validate a spec and print its run id and memory estimate")
    add_spec_options(p)
    p.add_argument(
        "--device-memory-gib",
        type=float,
        help=help_line("exit 3 if the estimate exceeds this", unit="GiB", allowed="> 0"),
    )
    p.set_defaults(func=cmd_plan)
