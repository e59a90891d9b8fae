"""What the workflow asks of the studies, as plain functions (workflow/rules/common.smk keeps only
the glue): which studies a rule's wildcard may match, and which files the model's rules read.
Pure Python (no torch, no Snakemake).
"""

from __future__ import annotations

import re
from pathlib import Path

from scalestudy.spec.studies import RANK_FIGURES

CLUSTERS_GLOB = "workflow/clusters/*.yaml"
SENSITIVITY_TABLES = ("claim_sensitivity.csv", "c3_terms.csv", "claim_basis.json")


class NoRawLogs(ValueError):
    """A study that is never launched and has none of its raw logs committed."""


# the study fields that put a study under a rule: launched (its raw logs made by the run jobs; a
# study without the field is launched), predicted by the model, with the model beside its measurements
ROLES = {"launch": True, "prediction": False, "model_beside": False}


def studies_with(role: str, current, headers: dict[str, dict]) -> str:
    """A wildcard pattern of the studies that have `role` (a key of ROLES): the configured study
    (`current`, loaded) and every other study file's header (`headers`, by name); `(?!)` matches none."""
    default = ROLES[role]
    names = {current.name} if getattr(current, role) else set()
    names |= {n for n, d in headers.items() if n != current.name and d.get(role, default)}
    return "|".join(re.escape(n) for n in sorted(names)) or "(?!)"


def model_inputs(study, section: str, rank_share_study=None, root: Path | str = ".") -> list[str]:
    """The files a model rule of `study` reads, relative to root: the study file, the cluster files,
    the finished calibration runs of `study.<section>` (`prediction` or `model_beside`), and for a
    prediction from measured rank shares their table and the file of the study that measured them
    (what they stand in for, and the known artefacts the predictions carry as caveats)."""
    root = Path(root)
    files = [str(study.source)] if study.source else []
    files += sorted(str(p.relative_to(root)) for p in root.glob(CLUSTERS_GLOB))
    part = getattr(study, section) or {}
    for d in part.get("calibration", []):
        files += sorted(str(p.relative_to(root)) for p in (root / d).glob("*/status.json"))
    shares = part.get("rank_shares") if section == "prediction" else None
    table = f"data/{shares}/tables/rank_configs.csv"
    if shares and (root / table).exists():
        files.append(table)
        if rank_share_study is not None:
            files.append(str(rank_share_study.source))
    return files


def raw_dirs(study, root: Path | str = ".") -> list[str]:
    """Every raw-log directory of the study, relative to root: one a planned run (those of a
    `partial` study that exist), or for a predicted study its whole raw/ (predicted at once)."""
    if study.prediction:
        return [f"data/{study.name}/raw"]
    dirs = [f"data/{study.name}/raw/{run_id}" for run_id in study.run_ids + study.collectives_ids]
    if study.partial:  # the committed raw logs hold some of the planned runs; the rest stay planned
        dirs = [d for d in dirs if (Path(root) / d).is_dir()]
    if not study.launch and not any((Path(root) / d).is_dir() for d in dirs):
        raise NoRawLogs(
            f"study {study.name!r} is not launched by the workflow (launch: false) and "
            f"data/{study.name}/raw holds none of its runs: commit its raw logs first"
        )
    return dirs


def table_files(study) -> list[str]:
    """The tables the study's figures and claims read."""
    names = ["runs", "summary", "collectives", "collectives_summary"] + (["model_beside"] if study.model_beside else [])
    files = [f"data/{study.name}/tables/{n}.csv" for n in names]
    if study.prediction:  # the claims' sensitivity and C3 taken apart (rule claim_sensitivity)
        files += [f"data/{study.name}/tables/{n}" for n in SENSITIVITY_TABLES]
    return files


def runs_in_words(study, figure: str, root: Path | str = ".") -> str:
    """The runs a figure of the study draws on, in words (its report caption says them)."""
    if figure == "model_validation":
        return (
            "the published runs of the external validation ledger (workflow/validation/external.yaml), "
            f"predicted with the calibration of study {study.name}; none of them is fitted to"
        )
    if figure == "collectives_bandwidth":
        worlds = ", ".join(str(c.world_size) for c in study.collectives)
        return f"{len(study.collectives)} collectives benchmarks of study {study.name} (world sizes {worlds})"
    if figure in RANK_FIGURES:
        shares = [r for r in study.runs if r.spec.comm == "fake"]
        measured = sum((Path(root) / f"data/{study.name}/raw" / r.run_id).is_dir() for r in shares)
        return (
            f"{len(shares)} rank shares planned in study {study.name}, {measured} measured "
            "(one rank's share, communication not executed)"
        )
    planned = study.runs_of(figure)
    seeds: dict[str, int] = {}
    for r in planned:
        seeds[r.spec.config_id] = seeds.get(r.spec.config_id, 0) + 1
    if study.prediction:  # a prediction has the model's band, never seeds
        return (
            f"{len(planned)} predicted runs of study {study.name}, experiment {figure}: {len(seeds)} "
            "configurations, PREDICTED by the performance model (one prediction a run, with the model's band)"
        )
    counts = sorted(set(seeds.values())) or [0]
    each = f"{counts[0]}" if len(counts) == 1 else f"{counts[0]} to {counts[-1]}"
    return f"{len(planned)} runs of study {study.name}, experiment {figure}: {len(seeds)} configurations x {each} seeds"
