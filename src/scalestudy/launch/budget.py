"""Which of a study's missing runs fit a device-time budget: in the order the study gives, each
charged its devices x its wall-clock limit (what it may use, so the budget holds even if every
run is stopped at its limit), up to the first that does not fit. A run whose raw log is
finished (status.json) is done and skipped, so a second call with a budget goes on where the
first stopped.

    scalestudy launch --study node --budget-gpu-s 28800
    snakemake --config study=node budget_gpu_s=28800 --resources gpus=8

Pure Python (no torch).
"""

from __future__ import annotations

from dataclasses import dataclass

from scalestudy.launch.launcher import job_resources
from scalestudy.measure import rawlog


class BudgetTooSmall(ValueError):
    """A budget that cannot start the study's next run."""


@dataclass(frozen=True)
class PlannedRun:
    run_id: str
    spec: object  # RunSpec or CollectivesSpec
    devices: int
    charge_s: float  # devices x the run's wall-clock limit


@dataclass(frozen=True)
class BudgetPlan:
    study: str
    budget_s: float
    unit: str  # "GPU-seconds" or "CPU process-seconds"
    chosen: tuple[PlannedRun, ...]  # run now, in this order
    left: tuple[PlannedRun, ...]  # missing runs a later call makes
    done: tuple[str, ...]  # run ids with a finished raw log

    @property
    def charged_s(self) -> float:
        return sum(r.charge_s for r in self.chosen)

    def describe(self) -> str:
        line = (
            f"budget {self.budget_s:,.0f} {self.unit} for study {self.study}: {len(self.done)} runs done, "
            f"{len(self.chosen)} to run now ({self.charged_s:,.0f} {self.unit} at their time limits), "
            f"{len(self.left)} left for a later call"
        )
        if self.left:
            line += f" (next: {self.left[0].run_id}, {self.left[0].charge_s:,.0f} {self.unit})"
        return line


def plan_budget(study, budget_s: float, site=None, *, time_limit_s: float | None = None) -> BudgetPlan:
    """The study's runs (then its collectives benchmarks) that are missing, split into those the
    budget covers now and those left. Refuses a budget below the next run's charge when nothing
    would run (a call that can never make progress)."""
    if budget_s <= 0:
        raise BudgetTooSmall(f"a budget must be positive, not {budget_s:g} s")
    limit = time_limit_s or study.time_limit_s
    cuda = any(spec.device == "cuda" for _, spec in study.jobs)
    done, missing = [], []
    for run_id, spec in study.jobs:
        if (study.raw_dir / run_id / rawlog.STATUS_FILE).exists():
            done.append(run_id)
            continue
        res = job_resources(spec, limit, site)
        missing.append(PlannedRun(run_id, spec, spec.processes, float(spec.processes * res["time_limit_s"])))
    chosen, spent = [], 0.0
    for run in missing:
        if spent + run.charge_s > budget_s:
            break
        chosen.append(run)
        spent += run.charge_s
    unit = "GPU-seconds" if cuda else "CPU process-seconds"
    plan = BudgetPlan(study.name, float(budget_s), unit, tuple(chosen), tuple(missing[len(chosen) :]), tuple(done))
    if missing and not chosen:
        nxt = missing[0]
        raise BudgetTooSmall(
            f"a budget of {budget_s:,.0f} {unit} cannot start {nxt.run_id}, the next run of study {study.name}: "
            f"it may use {nxt.charge_s:,.0f} ({nxt.devices} devices x {nxt.charge_s / nxt.devices:,.0f} s, its "
            "time limit); raise the budget or lower the study's time_limit_s"
        )
    return plan
