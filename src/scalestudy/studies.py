"""Studies: named grids of runs, read from workflow/studies/<name>.yaml and validated against
workflow/schemas/study.schema.json. Pure data (no torch import): the workflow plans from it,
the analysis side maps run ids to experiments with it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from scalestudy.collectives_spec import CollectivesSpec
from scalestudy.spec import RunSpec


@dataclass(frozen=True)
class PlannedRun:
    spec: RunSpec
    experiments: tuple[str, ...]  # the figures' groups this run belongs to, e.g. ("weak_scaling",)
    label: str  # the strategy in words, e.g. "FSDP", "TP=2 x PP=4, FSDP over 32"


@dataclass(frozen=True)
class Study:
    name: str
    description: str
    hardware: str  # what the figures say the runs ran on, e.g. "CPU (gloo)", "H100 SXM"
    assumptions: tuple[str, ...]
    runs: tuple[PlannedRun, ...]  # one per (configuration, seed)
    collectives: tuple[CollectivesSpec, ...]
    figures: tuple[str, ...]
    root: Path = field(default=Path("."))

    @property
    def raw_dir(self) -> Path:
        return self.root / "data" / self.name / "raw"

    @property
    def tables_dir(self) -> Path:
        return self.root / "data" / self.name / "tables"

    @property
    def figures_dir(self) -> Path:
        return self.root / "figures" / self.name


def load_study(name: str, root: Path | str = ".") -> Study:
    """The study `name` (workflow/studies/<name>.yaml under root, or a path to a YAML file)."""
    raise NotImplementedError("load_study is being written (workflow issue)")
