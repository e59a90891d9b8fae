"""What a study's numbers are, in one word, wherever they are shown (report home page, captions,
titles, notes, claims): measured (with seeds), predicted (with the model's band), imported (public
raw logs), or one rank's share (one rank alone on one GPU, communication faked). Pure data."""

from __future__ import annotations

MEASURED = "measured"
PREDICTED = "predicted"
IMPORTED = "imported"
RANK_SHARE = "rank share"
KINDS = (MEASURED, PREDICTED, IMPORTED, RANK_SHARE)


def study_evidence(study) -> str:
    """The kind of a study's numbers: a `prediction` section makes them predicted, an `imported`
    section imported; where every run of more than one GPU fakes its communication (paper-rank:
    its one-GPU agreement run is real) one rank's share; else measured."""
    if getattr(study, "prediction", None):
        return PREDICTED
    if getattr(study, "imported", None):
        return IMPORTED
    runs = getattr(study, "runs", None) or []
    wide = [r.spec for r in runs if getattr(r.spec, "world_size", 1) > 1]
    if wide and all(getattr(spec, "comm", None) == "fake" for spec in wide):
        return RANK_SHARE
    return MEASURED
