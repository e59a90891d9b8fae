"""A raw log checks itself against its spec: exactly the planned warm-up and measured steps, each
step number once and in order on every rank, the same steps on every rank; anything else is
refused with a sentence, never turned into a number (issue 54)."""

import json

import pytest
from analysis_fixtures import INTEGRITY_SPEC, integrity_seeds, make_study

from scalestudy.analysis import aggregate as agg
from scalestudy.analysis.audit import audit
from scalestudy.measure import rawlog

SPEC = {"warmup_iters": 2, "measured_iters": 3}


def steps(rank=0, warmup=(0, 1), measured=(2, 3, 4), **extra):
    out = [
        {
            "key": "iteration",
            "value": {"phase": "warmup", "step": s, "step_time_s": 1.0, "tokens": 8},
            "metadata": {"rank": rank},
        }
        for s in warmup
    ]
    out += [
        {
            "key": "iteration",
            "value": {"phase": "measured", "step": s, "step_time_s": 1.0, "tokens": 8},
            "metadata": {"rank": rank},
        }
        for s in measured
    ]
    for phase, ss in extra.items():
        out += [
            {
                "key": "iteration",
                "value": {"phase": phase, "step": s, "step_time_s": 1.0, "tokens": 8},
                "metadata": {"rank": rank},
            }
            for s in ss
        ]
    return out


def test_the_planned_steps_on_every_rank_pass():
    assert rawlog.step_problems(SPEC, steps(0) + steps(1)) == []


def test_steps_after_an_imported_window_are_allowed():
    assert rawlog.step_problems(SPEC, steps(0, beyond_window=(5, 6))) == []


@pytest.mark.parametrize(
    "records, words",
    [
        (steps(measured=(2, 3, 4, 5, 6)), "rank 0 holds 5 of 3 measured steps (more than the spec plans)"),
        (steps(measured=(2, 3)), "rank 0 holds 2 of 3 measured steps"),
        (steps(warmup=(0,), measured=(1, 2, 3)), "rank 0 holds 1 of 2 warmup steps"),
        (steps() + steps(measured=(2,))[2:], "rank 0 logs step 2 more than once"),
        (steps(measured=(2, 4, 3)), "rank 0 logs its steps out of order (0, 1, 2, 4, 3)"),
        (
            steps(warmup=(0,), measured=(1, 2, 3)) + steps(warmup=(4,), measured=())[:1],
            "logs warmup step 4 after measured",
        ),
        (steps(0) + steps(1, warmup=(0, 1), measured=(2, 3, 5)), "ranks 0 and 1 disagree on the steps they logged"),
        (steps(0, beyond_window=(5,), cooldown=(6,)), "unknown phase 'cooldown'"),
    ],
)
def test_other_steps_than_planned_are_named(records, words):
    problems = rawlog.step_problems(SPEC, records)
    assert len(problems) == 1 and words in problems[0], problems


def _reseal_with(run_dir, records):
    """What a forger would do: new metrics, their checksum and the seal recomputed."""
    metrics = run_dir / rawlog.METRICS_FILE
    metrics.write_text("".join(json.dumps(r) + "\n" for r in records))
    status = json.loads((run_dir / rawlog.STATUS_FILE).read_text())
    status["files_sha256"][rawlog.METRICS_FILE] = rawlog.sha256_file(metrics)
    rawlog.write_status(run_dir / rawlog.STATUS_FILE, status)


@pytest.mark.parametrize(
    "edit, words",
    [
        (
            "two_more_slower",
            f"holds {INTEGRITY_SPEC.measured_iters + 2} of {INTEGRITY_SPEC.measured_iters} measured steps",
        ),
        ("duplicated_slower", "more than once"),
    ],
)
def test_a_resealed_log_with_other_steps_is_refused_not_published(tmp_path, edit, words):
    raw = tmp_path / "data" / "t" / "raw"
    study = make_study(tmp_path, integrity_seeds(raw, (0.5, 0.51, 0.52)))
    run_dir = raw / INTEGRITY_SPEC.replace(seed=1).run_id
    records = [json.loads(line) for line in (run_dir / rawlog.METRICS_FILE).read_text().splitlines()]
    measured = [r for r in records if r["key"] == "iteration" and r["value"]["phase"] == "measured"]
    last = max(r["value"]["step"] for r in measured)
    slower = [json.loads(json.dumps(r)) for r in measured[:2]]
    for i, r in enumerate(slower):
        r["value"]["step_time_s"] *= 10
        if edit == "two_more_slower":
            r["value"]["step"] = last + 1 + i
    _reseal_with(run_dir, records + slower)
    with pytest.raises(rawlog.RawLogError, match=words):
        agg.aggregate(study)
    assert any(str(run_dir) in p and words in p for p in audit(study, figures=False, claims=False))
