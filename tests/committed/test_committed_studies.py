"""The committed studies follow from their raw logs (scalestudy audit: tables, claims and figure
data rebuilt and compared byte for byte), and `scalestudy audit --strict` holds where every run was
made with every check on: no committed run was measured with a check switched off; the runs made
from an uncommitted checkout (before runs recorded what `dirty` covers) are listed by --strict and
wait to be measured again."""

from pathlib import Path

import pytest

from scalestudy.analysis.audit import audit
from scalestudy.spec.studies import load_study

REPO = Path(__file__).resolve().parents[2]
STRICT = ("mlperf", "h200-megatron")
DIRTY_RUNS = ("paper-rank", "h100-rank", "h200-reference")
UNCOMMITTED = "made from a checkout with uncommitted changes"


@pytest.mark.parametrize("name", STRICT + DIRTY_RUNS)
def test_a_committed_study_follows_from_its_raw_logs(name):
    study = load_study(name, REPO)
    strict = name in STRICT
    problems = audit(study, figures=False, strict=strict)
    assert problems == [], problems[:5]
    if not strict:
        weakened = audit(study, figures=False, claims=False, strict=True)
        assert weakened and all(UNCOMMITTED in p for p in weakened), [p for p in weakened if UNCOMMITTED not in p][:5]
