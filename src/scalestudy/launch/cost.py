"""What a study costs before it is submitted: its jobs by size, the GPU-hours at the time limits
the jobs ask SLURM for, and where the performance model can say, the GPU-hours expected. A budget
(`gpu_hours_budget` in the study, the site file or --config) refuses a plan over it.

    scalestudy study --study paper        # prints the table
    snakemake -n --config study=paper     # prints it at the workflow's start, refuses over budget

Requested: each job's GPUs x its SLURM time limit (scalestudy.launch.launcher.job_resources: the run's
wall-clock limit plus grace, at least the site's floor); the most a job can be charged. Expected:
the performance model's step time (scalestudy.perfmodel.predict) x the run's steps, plus a start-up
allowance, on the cluster the study names in `expected_cost_cluster`. A CPU study counts process-hours
instead, which no budget limits. Pure Python (no torch).
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from scalestudy.launch.launcher import job_resources
from scalestudy.launch.slurm_queue import QueuedRuns
from scalestudy.measure import rawlog

# [assumed] start-up of one job before its first step: torchrun rendezvous, NCCL init, model build
EXPECTED_STARTUP_S = 120.0
DEFAULT_CALIBRATION = "data/h200-reference/raw"


class BudgetError(ValueError):
    """A plan over its GPU-hour budget."""


@dataclass(frozen=True)
class SizeRow:
    nodes: int
    devices: int  # GPUs (or CPU processes) a job
    jobs: int
    requested_h: float  # device-hours at the jobs' time limits
    expected_h: float | None  # device-hours the performance model expects; None: it cannot say


@dataclass(frozen=True)
class StudyCost:
    study: str
    unit: str  # "GPU-hours" or "CPU process-hours"
    rows: tuple[SizeRow, ...]
    expected_from: str  # how the expected column was made, or why it is empty
    jobs_done: int = 0
    requested_left_h: float = 0.0
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def gpu(self) -> bool:
        return self.unit == "GPU-hours"

    @property
    def jobs(self) -> int:
        return sum(r.jobs for r in self.rows)

    @property
    def requested_h(self) -> float:
        return sum(r.requested_h for r in self.rows)

    @property
    def expected_h(self) -> float | None:
        vals = [r.expected_h for r in self.rows if r.expected_h is not None]
        return sum(vals) if vals else None


def _job_hours(spec, time_limit_s: float | None, site) -> tuple[int, float]:
    res = job_resources(spec, time_limit_s, site)
    return spec.processes, spec.processes * res["runtime"] / 60.0


def study_cost(study, site=None, *, expected: bool = True, root: Path | str | None = None) -> StudyCost:
    """The cost table of `study` (scalestudy.spec.studies.Study) with the site's time limits; a run
    whose directory under the study's raw/ holds status.json counts as done."""
    root = Path(root if root is not None else study.root)
    cuda = any(r.spec.device == "cuda" for r in study.runs) or any(c.device == "cuda" for c in study.collectives)
    jobs = study.jobs
    predicted, expected_from, notes = ({}, "", [])
    if expected:  # study.jobs begins with the runs, in order: their ids are not made twice
        predicted, expected_from, notes = _expected_hours(study, root, [i for i, _ in jobs[: len(study.runs)]])
    sizes: dict[tuple[int, int], list] = defaultdict(lambda: [0, 0.0, 0.0, False])
    done, left = 0, 0.0
    for run_id, spec in jobs:
        devices, hours = _job_hours(spec, study.time_limit_s, site)
        row = sizes[(spec.nodes, devices)]
        row[0] += 1
        row[1] += hours
        if run_id in predicted:
            row[2] += predicted[run_id]
            row[3] = True
        if (study.raw_dir / run_id / rawlog.STATUS_FILE).exists():
            done += 1
        else:
            left += hours
    rows = tuple(
        SizeRow(n, d, v[0], v[1], v[2] if v[3] else None)
        for (n, d), v in sorted(sizes.items(), key=lambda kv: (kv[0][1], kv[0][0]))
    )
    return StudyCost(
        study.name, "GPU-hours" if cuda else "CPU process-hours", rows, expected_from, done, left, tuple(notes)
    )


def _expected_hours(study, root: Path, run_ids: list[str] | None = None) -> tuple[dict[str, float], str, list[str]]:
    cluster_name = getattr(study, "expected_cost_cluster", None) or (study.prediction or {}).get("cluster")
    if not cluster_name:
        return {}, "no expected column: the study names no expected_cost_cluster for the performance model", []
    # the model (numpy, its calibration) only here: `scalestudy status` and the workflow's start need none of it
    from scalestudy.launch.calibration_cache import calibration_digest, load_calibration, step_times
    from scalestudy.perfmodel.cluster import load_cluster
    from scalestudy.perfmodel.options import ModelOptions

    # the calibration and the step times by configuration are kept on disk between calls, keyed by the raw
    # logs' status.json checksums and the model's code (launch/calibration_cache.py): a plan made
    # before reads its step times and neither calibrates nor predicts
    calibration = [str(root / c) for c in (study.prediction or {}).get("calibration") or [DEFAULT_CALIBRATION]]
    options = ModelOptions()
    try:
        cluster = load_cluster(cluster_name, root)
        cal_key = calibration_digest(calibration, root)
        known = step_times(calibration, cluster, root, options, calibration=cal_key)
    except (OSError, ValueError, KeyError) as e:
        return {}, f"no expected column: the performance model cannot load ({e})", []
    model = None  # (calibration, collective model), loaded for the first configuration not kept
    out, notes = {}, []
    for r, run_id in zip(study.runs, run_ids or [r.run_id for r in study.runs]):
        key = r.spec.config_id  # the seeds of one configuration take the same step: predicted once
        step = known.get(key)
        if step is None:
            if model is None:
                from scalestudy.perfmodel.collectives import CollectiveModel
                from scalestudy.perfmodel.predict import predict

                try:
                    model = (
                        load_calibration(calibration, root, key_digest=cal_key),
                        CollectiveModel.for_cluster(cluster, root),
                    )
                except (OSError, ValueError, KeyError) as e:
                    return {}, f"no expected column: the performance model cannot load ({e})", []
            try:
                step = predict(r.spec, cluster, model[0], model[1], band=False, options=options)["step_time_s"]
            except ValueError as e:  # each run names itself in its note (not kept: rare, and cheap to raise)
                notes.append(f"{run_id}: {e}")
                continue
            known.put(key, step)
        steps = r.spec.warmup_iters + r.spec.measured_iters
        out[run_id] = r.spec.processes * (step * steps + EXPECTED_STARTUP_S) / 3600.0
    known.save()
    how = (
        f"performance model on {cluster_name} (step time x steps + {EXPECTED_STARTUP_S:.0f} s start-up a job "
        "[assumed]; collectives jobs not modelled)"
    )
    return out, how, notes


def format_cost(cost: StudyCost, budget: float | None = None, budget_source: str = "") -> str:
    unit = cost.unit
    lines = [
        f"cost of study {cost.study}: {cost.jobs} jobs, {cost.requested_h:,.0f} {unit} at the requested "
        "time limits" + (f", ~{cost.expected_h:,.0f} expected" if cost.expected_h is not None else "")
    ]
    dev = "GPUs" if cost.gpu else "procs"
    lines.append(f"  {'nodes':>5} {dev:>6} {'jobs':>5} {unit + ' requested':>24} {'expected':>10}")
    for r in cost.rows:
        exp = f"{r.expected_h:>10,.0f}" if r.expected_h is not None else f"{'-':>10}"
        lines.append(f"  {r.nodes:>5} {r.devices:>6} {r.jobs:>5} {r.requested_h:>24,.1f} {exp}")
    if cost.expected_from and cost.gpu:
        lines.append(f"  expected: {cost.expected_from}")
    if cost.notes:
        lines.append(f"  {len(cost.notes)} runs without an expected cost, e.g. {cost.notes[0]}")
    if cost.jobs_done:
        lines.append(
            f"  done: {cost.jobs_done} jobs; left: {cost.jobs - cost.jobs_done} jobs, "
            f"{cost.requested_left_h:,.0f} {unit} requested"
        )
    if budget is not None:
        lines.append(f"  budget: {budget:,.0f} GPU-hours ({budget_source})")
    return "\n".join(line for line in lines if line)


def check_budget(cost: StudyCost, budget: float | None, source: str) -> None:
    """Refuse a GPU study whose requested GPU-hours of the jobs left exceed the budget."""
    if budget is None or not cost.gpu or cost.requested_left_h <= budget:
        return
    exp = f" (~{cost.expected_h:,.0f} expected)" if cost.expected_h is not None else ""
    raise BudgetError(
        f"study {cost.study} asks for {cost.requested_left_h:,.0f} GPU-hours at the requested time limits{exp} "
        f"for {cost.jobs - cost.jobs_done} jobs, over its budget of {budget:,.0f} GPU-hours ({source}); "
        "raise gpu_hours_budget there (or pass --config gpu_hours_budget=N), or plan fewer or shorter runs"
    )


def budget_of(study, site, config_budget: float | None = None) -> tuple[float | None, str]:
    """The budget that applies, and where it is set: --config, else the study, else the site file."""
    if config_budget is not None:
        return float(config_budget), "--config gpu_hours_budget"
    if getattr(study, "gpu_hours_budget", None) is not None:
        return float(study.gpu_hours_budget), f"gpu_hours_budget in {study.source or 'the study'}"
    if site is not None and getattr(site, "gpu_hours_budget", None) is not None:
        return float(site.gpu_hours_budget), f"gpu_hours_budget in {site.source}"
    return None, ""


@dataclass(frozen=True)
class StudyStatus:
    study: str
    unit: str
    planned: int
    done: dict[str, int]  # status -> jobs with a finished raw log
    running: list[str]  # run ids with an attempt in flight (data/STUDY/attempts/)
    failed: list[str]  # run ids whose harness failed (a copy under data/STUDY/crashed/, no raw log)
    left: int
    spent_h: float  # device-hours of the finished and running jobs, from their run.json times
    to_come_h: float  # device-hours requested by the jobs not finished
    queue: QueuedRuns | None = None  # the runs' jobs in SLURM's queue (squeue); None: not asked


def study_status(study, site=None, now: float | None = None) -> StudyStatus:
    """Where a study in flight stands, from its directories (no scheduler query)."""
    now = time.time() if now is None else now
    data = study.raw_dir.parent
    cuda = any(r.spec.device == "cuda" for r in study.runs) or any(c.device == "cuda" for c in study.collectives)
    in_flight = {p.name.split(".attempt")[0]: p for p in (data / "attempts").glob("*.attempt*")}
    crashed = {p.name.split(".")[0] for p in (data / "crashed").glob("*")} if (data / "crashed").is_dir() else set()
    done: dict[str, int] = defaultdict(int)
    running, failed, left = [], [], 0
    spent = to_come = 0.0
    for run_id, spec in study.jobs:
        run_dir = study.raw_dir / run_id
        devices, requested = _job_hours(spec, study.time_limit_s, site)
        if (run_dir / rawlog.STATUS_FILE).exists():
            done[json.loads((run_dir / rawlog.STATUS_FILE).read_text()).get("status", "?")] += 1
            spent += devices * _duration_s(run_dir, now) / 3600.0
            continue
        to_come += requested
        if run_id in in_flight:
            running.append(run_id)
            spent += devices * _duration_s(in_flight[run_id], now) / 3600.0
        elif run_id in crashed:
            failed.append(run_id)
        else:
            left += 1
    return StudyStatus(
        study.name,
        "GPU-hours" if cuda else "CPU process-hours",
        len(study.runs) + len(study.collectives),
        dict(done),
        running,
        failed,
        left,
        spent,
        to_come,
    )


def _duration_s(run_dir: Path, now: float) -> float:
    try:
        run = json.loads((run_dir / rawlog.RUN_FILE).read_text())
    except (OSError, ValueError):
        return 0.0
    start = run.get("start_time_unix")
    if start is None:
        return 0.0
    return max(0.0, (run.get("end_time_unix") or now) - start)


def format_status(st: StudyStatus) -> str:
    done = sum(st.done.values())
    by = ", ".join(f"{n} {s}" for s, n in sorted(st.done.items(), key=lambda kv: (-kv[1], kv[0])))
    lines = [
        f"study {st.study}: {st.planned} jobs planned",
        f"  done     {done:>5}" + (f"  ({by})" if by else ""),
        f"  running  {len(st.running):>5}",
        f"  failed   {len(st.failed):>5}  (harness errors; raw logs kept under crashed/)",
        f"  left     {st.left:>5}",
        f"  {st.unit}: {st.spent_h:,.1f} spent, up to {st.to_come_h:,.1f} to come (the requested time limits)",
    ]
    q = st.queue
    if q is not None and q.error:
        lines.append(f"  squeue   unknown  ({q.error})")
    elif q is not None:
        others = "".join(f", {len(ids)} {state.lower()}" for state, ids in q.other.items())
        lines.append(
            f"  squeue   {len(q.pending):>5} pending, {len(q.running)} running{others}  (SLURM jobs of its runs)"
        )
    lines += [f"  running: {r}" for r in st.running[:10]]
    lines += [f"  failed: {r}" for r in st.failed[:10]]
    return "\n".join(lines)
