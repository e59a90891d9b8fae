"""What the workflow asks of the studies, as plain functions (workflow/rules/common.smk keeps only
the glue): which studies a rule's wildcard may match, and which files the model's rules read.
Pure Python (no torch, no Snakemake).
"""

from __future__ import annotations

import re
from pathlib import Path

CLUSTERS_GLOB = "workflow/clusters/*.yaml"
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
