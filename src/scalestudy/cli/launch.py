"""`scalestudy launch`: run one planned run of a study on this host (the workflow's run and
collectives jobs), and `scalestudy study`: list what a study plans.

    scalestudy launch --study smoke --run-id tiny-n1x2-r1s2t1p1-gb2-...-seed0
    scalestudy launch --spec-json spec.json --run-dir runs/x --time-limit-s 600
    scalestudy launch --study node --budget-gpu-s 28800   # its missing runs, in order, in budget
    scalestudy study --study paper            # runs, labels, experiments, dropped points

Inside a SLURM job a run of N nodes starts with srun on the job's nodes (scalestudy.launch.slurm;
site settings from slurm/site.yaml). See scalestudy.launch.launcher for the exit codes: 0 for every
classified outcome (the run's status is data), 1 when the harness itself failed, 2 when the run
could not be started, 3 when a stopped run (timeout, preempted) should run again
(--attempt below --max-attempts).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from pathlib import Path

from scalestudy.spec.run import help_line


def _load_spec(args: argparse.Namespace):
    from scalestudy.spec.collectives import CollectivesSpec
    from scalestudy.spec.run import RunSpec
    from scalestudy.spec.studies import load_study

    if args.study:
        if not args.run_id:
            raise _Usage("--study needs --run-id (one run) or --budget-gpu-s (its missing runs)")
        study = load_study(args.study, args.root)
        if not study.launch:
            raise _Usage(
                f"study {study.name!r} is not launched by the workflow (launch: false): its figures "
                f"come from the raw logs committed under {study.raw_dir}"
            )
        try:
            spec = study.run(args.run_id).spec
        except KeyError:
            try:
                spec = study.collective(args.run_id)
            except KeyError:
                raise _Usage(f"study {study.name!r} plans no run {args.run_id!r}") from None
        run_dir = Path(args.run_dir) if args.run_dir else study.raw_dir / spec.run_id
        return (
            spec,
            run_dir,
            study.time_limit_s,
            study.peak_tflops,
            _study_sink(study),
            {"study": study.name, "hardware": study.hardware},
        )
    path = args.spec_json or args.collectives_json
    data = json.loads(Path(path).read_text())
    spec = CollectivesSpec.from_dict(data) if args.collectives_json else RunSpec.from_dict(data)
    if args.run_id and args.run_id != spec.run_id:
        raise _Usage(f"--run-id {args.run_id} does not match the spec's run id {spec.run_id}")
    run_dir = Path(args.run_dir) if args.run_dir else Path("runs") / spec.run_id
    return spec, run_dir, None, None, None, None


def _study_sink(study) -> dict | None:
    """The study's metrics_sink with its directory made absolute (the workers may start
    elsewhere): by default data/STUDY/tensorboard or data/STUDY/wandb; W&B runs grouped by study.
    A sink whose package is not installed is refused here (harness.metrics_sink.SinkUnavailable)."""
    from scalestudy.harness import metrics_sink

    sink = dict(study.metrics_sink or {})
    if sink.get("kind", "none") == "none":
        return None
    metrics_sink.check(sink, where=f"metrics_sink in {study.source or study.name}:")
    where = Path(sink["dir"]) if sink.get("dir") else Path("data") / study.name / sink["kind"]
    sink["dir"] = str((where if where.is_absolute() else Path(study.root) / where).resolve())
    if sink["kind"] == "wandb":
        sink.setdefault("group", study.name)
    return sink


class _Usage(Exception):
    pass


def cmd_launch(args: argparse.Namespace) -> int:
    if args.budget_gpu_s is not None:
        return _launch_in_budget(args)
    return cmd_launch_one(args)


def cmd_launch_one(args: argparse.Namespace) -> int:
    from scalestudy.cli.train import PEAK_TFLOPS_ENV
    from scalestudy.harness import metrics_sink
    from scalestudy.launch.launcher import EXIT_USAGE, LaunchError, launch
    from scalestudy.spec.site import SiteError, load_site

    try:
        spec, run_dir, study_limit, study_peak, sink, identity = _load_spec(args)
        site = load_site(root=args.root)
        peak = study_peak or site.peak_tflops
        if peak:  # the workers' --peak-tflops: the study's, else the site's
            os.environ[PEAK_TFLOPS_ENV] = str(peak)
        if sink is not None:  # the workers' metrics sink: the study's
            os.environ[metrics_sink.SINK_ENV] = metrics_sink.to_env(sink)
        outcome = launch(
            spec,
            run_dir,
            time_limit_s=args.time_limit_s or study_limit,
            log_path=args.log,
            grace_s=args.grace_s,
            attempt=args.attempt,
            max_attempts=max(args.max_attempts, args.attempt),
            site=site,
            identity=identity,
        )
    except (_Usage, LaunchError, SiteError, metrics_sink.SinkUnavailable) as e:
        print(f"scalestudy launch: {e}", file=sys.stderr)
        return EXIT_USAGE
    stream = sys.stdout if outcome.exit_code == 0 else sys.stderr
    print(f"scalestudy launch: {outcome.message}", file=stream)
    if outcome.exit_code == 0:
        _summarize(outcome.run_dir, args.log)
    return outcome.exit_code


def _launch_in_budget(args: argparse.Namespace) -> int:
    """The study's missing runs that fit the budget, one after another, each as `--run-id` would
    launch it. Stops at the first run the launcher could not start or whose harness failed; a
    stopped run (timeout, preempted) is data, and the next run goes on."""
    from scalestudy.launch.budget import BudgetTooSmall, plan_budget
    from scalestudy.launch.launcher import EXIT_USAGE
    from scalestudy.launch.local_workers import LAUNCHER_ENV
    from scalestudy.launch.warm_workers import stop_servers
    from scalestudy.spec.site import SiteError, load_site
    from scalestudy.spec.studies import load_study

    if not args.study or args.run_id or args.run_dir:
        print(
            "scalestudy launch: --budget-gpu-s needs --study, and launches its runs into their own "
            "directories (no --run-id, no --run-dir)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    try:
        study = load_study(args.study, args.root)
        if not study.launch:
            raise _Usage(
                f"study {study.name!r} is not launched (launch: false): its figures come from the raw logs "
                f"committed under {study.raw_dir}"
            )
        plan = plan_budget(study, args.budget_gpu_s, load_site(root=args.root), time_limit_s=args.time_limit_s)
    except (_Usage, BudgetTooSmall, SiteError) as e:
        print(f"scalestudy launch: {e}", file=sys.stderr)
        return EXIT_USAGE
    print(f"scalestudy launch: {plan.describe()}", flush=True)
    # CPU runs fork from one warm server for the whole budget, as under the workflow
    os.environ.setdefault(LAUNCHER_ENV, "warm")
    worst = 0
    try:
        for i, run in enumerate(plan.chosen):
            code = cmd_launch_one(argparse.Namespace(**{**vars(args), "run_id": run.run_id, "budget_gpu_s": None}))
            if code in (1, EXIT_USAGE):
                print(
                    f"scalestudy launch: stopped at {run.run_id} (exit {code}); {len(plan.chosen) - i - 1} runs "
                    "of this budget not started",
                    file=sys.stderr,
                )
                return code
            worst = max(worst, code)
    finally:
        stop_servers()
    return worst


def _summarize(run_dir: Path, log: str | None) -> None:
    """The run's summary line, on this terminal (Snakemake's, under the workflow) and in its log."""
    from scalestudy.launch.run_summary import summary_line

    line = summary_line(run_dir)
    print(line, flush=True)
    if log:
        with open(log, "a") as f:
            f.write(line + "\n")


def cmd_study(args: argparse.Namespace) -> int:
    from scalestudy.launch.cost import BudgetError, budget_of, check_budget, format_cost, study_cost
    from scalestudy.launch.launcher import job_resources
    from scalestudy.spec.site import load_site
    from scalestudy.spec.studies import load_study

    study = load_study(args.study, args.root)
    site = load_site(root=args.root)
    cost = study_cost(study, site, expected=not args.no_expected, root=args.root)
    budget, budget_source = budget_of(study, site)
    if args.json:
        print(
            json.dumps(
                {
                    "name": study.name,
                    "hardware": study.hardware,
                    "launch": study.launch,
                    "figures": list(study.figures),
                    "runs": [
                        {
                            "run_id": r.run_id,
                            "label": r.label,
                            "experiments": list(r.experiments),
                            "world_size": r.spec.world_size,
                            "resources": job_resources(r.spec, study.time_limit_s, site),
                        }
                        for r in study.runs
                    ],
                    "collectives": [{"run_id": c.run_id, "world_size": c.world_size} for c in study.collectives],
                    "dropped": [
                        {"experiment": d.experiment, "point": d.point, "reason": d.reason} for d in study.dropped
                    ],
                    "cost": {
                        "unit": cost.unit,
                        "jobs": cost.jobs,
                        "requested_h": cost.requested_h,
                        "expected_h": cost.expected_h,
                        "expected_from": cost.expected_from,
                        "by_size": [dataclasses.asdict(r) for r in cost.rows],
                        "budget_h": budget,
                        "budget_source": budget_source or None,
                    },
                },
                indent=1,
            )
        )
        return 0
    print(f"study {study.name}: {study.hardware}" + ("" if study.launch else " (not launched: committed raw logs)"))
    print(
        f"{len(study.runs)} runs ({len({r.spec.config_id for r in study.runs})} configurations), "
        f"{len(study.collectives)} collectives benchmarks; figures: {', '.join(study.figures)}"
    )
    for r in study.runs:
        if r.spec.seed == study.runs[0].spec.seed or args.all_seeds:
            model = r.spec.model + (f"/{r.spec.n_layers}L" if r.spec.n_layers else "")
            print(f"  {model:<14} {r.spec.world_size:>5} procs {r.label:<32} {','.join(r.experiments):<48} {r.run_id}")
    for c in study.collectives:
        print(f"  {'collectives':<14} {c.world_size:>5} procs {c.run_id}")
    for d in study.dropped:
        point = ", ".join(f"{k}={v}" for k, v in d.point.items())
        print(f"  dropped from {d.experiment} ({point}): {d.reason}")
    print(format_cost(cost, budget, budget_source))
    try:
        check_budget(cost, budget, budget_source)
    except BudgetError as e:
        print(f"scalestudy study: {e}", file=sys.stderr)
        return 4
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from scalestudy.launch.cost import format_status, study_status
    from scalestudy.launch.slurm_queue import queued_runs
    from scalestudy.spec.site import load_site
    from scalestudy.spec.studies import load_study

    study = load_study(args.study, args.root)
    st = study_status(study, load_site(root=args.root))
    # where SLURM is (squeue on PATH), its queue too: a job pending there has no attempt directory yet
    st = dataclasses.replace(
        st, queue=queued_runs(study.name, [r.run_id for r in study.runs] + [c.run_id for c in study.collectives])
    )
    if args.json:
        print(json.dumps(dataclasses.asdict(st), indent=1))
    else:
        print(format_status(st))
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "launch",
        help="run one planned run on this host under a time limit (workflow jobs)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--study", help="a study name (workflow/studies/NAME.yaml) or YAML path; needs --run-id")
    src.add_argument("--spec-json", help="a JSON file of RunSpec fields")
    src.add_argument("--collectives-json", help="a JSON file of CollectivesSpec fields")
    p.add_argument("--run-id", help="the planned run (training or collectives) to launch")
    p.add_argument(
        "--budget-gpu-s",
        type=float,
        default=None,
        help="with --study, no --run-id: launch the study's missing runs in its order, each charged its "
        "devices x time limit, until the next would exceed this many device-seconds; a later call "
        "goes on from there [unit: device-seconds (GPU or CPU process); allowed: > 0]",
    )
    p.add_argument("--root", default=".", help="the repository root (default .)")
    p.add_argument("--run-dir", help="the raw-log directory (default data/STUDY/raw/RUN_ID, or runs/RUN_ID)")
    p.add_argument("--log", help="write torchrun's output here (default: this terminal)")
    p.add_argument(
        "--time-limit-s",
        type=float,
        default=None,
        help=help_line(
            "wall-clock limit of the run",
            unit="s",
            allowed="> 0",
            default="the study's time_limit_s, else estimated from the spec",
        ),
    )
    p.add_argument(
        "--grace-s",
        type=float,
        default=30.0,
        help=help_line("after SIGTERM at the limit, kill after this long", unit="s", allowed=">= 0", default=30),
    )
    p.add_argument(
        "--attempt",
        type=int,
        default=1,
        help=help_line("this attempt at the run (the workflow's)", unit="attempts", allowed=">= 1", default=1),
    )
    p.add_argument(
        "--max-attempts",
        type=int,
        default=1,
        help=help_line(
            "attempts the workflow makes; before the last, a run stopped by a time limit or a "
            "preemption exits 3 so that it runs again",
            unit="attempts",
            allowed=">= 1",
            default="1: the status is data at once",
        ),
    )
    p.set_defaults(func=cmd_launch)

    p = subparsers.add_parser("study", help="list a study's planned runs, labels, experiments and dropped points")
    p.add_argument("--study", required=True, help="a study name or YAML path")
    p.add_argument("--root", default=".", help="the repository root (default .)")
    p.add_argument("--json", action="store_true", help="machine-readable, with each run's job resources")
    p.add_argument("--all-seeds", action="store_true", help="list every seed, not only the first")
    p.add_argument(
        "--no-expected",
        action="store_true",
        help="skip the performance model's expected GPU-hours (it calibrates first: seconds)",
    )
    p.set_defaults(func=cmd_study)

    p = subparsers.add_parser(
        "status",
        help="a study in flight: jobs done (by status), running, failed and left; "
        "GPU-hours spent and to come; where squeue is on PATH, the "
        "runs' SLURM jobs pending and running",
    )
    p.add_argument("--study", required=True, help="a study name or YAML path")
    p.add_argument("--root", default=".", help="the repository root (default .)")
    p.add_argument("--json", action="store_true", help="machine-readable")
    p.set_defaults(func=cmd_status)
