"""The `scalestudy gemm` command: the matrix products of layouts, timed on one GPU (spec/gemm.py).

    scalestudy gemm --layouts-of mlperf --with-calibration --dtypes bf16,fp8 --device cuda \\
        --out-root data/h200-gemm/raw
"""

from __future__ import annotations

import argparse

from scalestudy.launch import run_guard
from scalestudy.spec.gemm import GemmSpec, run_layout
from scalestudy.spec.options import add_field_options
from scalestudy.spec.run import spec_with_overrides


def _list(text: str) -> tuple[str, ...]:
    return tuple(t.strip() for t in text.split(",") if t.strip())


def study_layouts(study_name: str, with_calibration: bool) -> tuple[str, ...]:
    """The layouts of a study's configurations, and with_calibration those of the runs its model is
    calibrated from (its model_beside or prediction calibration)."""
    from scalestudy.measure.rawlog import find_runs, read_run
    from scalestudy.spec.run import RunSpec
    from scalestudy.spec.studies import load_study

    study = load_study(study_name)
    out = dict.fromkeys(run_layout(p.spec) for p in study.runs)
    if with_calibration:
        conf = study.model_beside or study.prediction or {}
        for d in conf.get("calibration") or ():
            for run_dir in find_runs(study.root / d):
                log = read_run(run_dir)
                if log.run.get("kind", "train") == "train":
                    out[run_layout(RunSpec.from_dict(log.run["spec"]))] = None
    return tuple(out)


def cmd_gemm(args: argparse.Namespace) -> int:
    run_guard.guard_worker()
    from scalestudy.cli.train import run_into_dir
    from scalestudy.harness.gemm_bench import run_gemm

    if args.layouts_of:
        args.layouts = study_layouts(args.layouts_of, args.with_calibration) + tuple(args.layouts or ())
    return run_into_dir(run_gemm, spec_with_overrides(GemmSpec, args.spec, args), args)


def register(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "gemm",
        help="time the matrix products of layouts on one GPU and write their raw log",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--spec", help="a JSON or YAML file of GemmSpec fields; options below override it")
    add_field_options(
        p.add_argument_group("benchmark specification (GemmSpec fields)"),
        GemmSpec,
        {
            "layouts": (_list, "tiny/256/1; comma-separated MODEL/TOKENS/TP"),
            "dtypes": (_list, "bf16; comma-separated"),
        },
    )
    p.add_argument("--layouts-of", metavar="STUDY", help="also every layout of this study's configurations")
    p.add_argument(
        "--with-calibration",
        action="store_true",
        help="with --layouts-of: also the layouts of the runs the study's model is calibrated from",
    )
    p.add_argument("--run-dir", help="the run's raw-log directory (default OUT_ROOT/RUN_ID)")
    p.add_argument("--out-root", default="runs", help="where run directories go (default ./runs)")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.set_defaults(func=cmd_gemm)
    return p
