"""The expected-cost column with the calibration and the step times kept on disk
(launch/calibration_cache.py) is the column as it was computed before them: every run predicted, the
calibration made in the process. No timing (benchmarks/planning_speed.py prints the times)."""

from pathlib import Path

from conftest import REPO

from scalestudy.launch import cost
from scalestudy.perfmodel import predict as predict_mod
from scalestudy.launch.calibration_cache import CACHE_ENV
from scalestudy.perfmodel.cluster import load_cluster
from scalestudy.perfmodel.collectives import CollectiveModel
from scalestudy.spec.site import Site
from scalestudy.spec.studies import load_study


def _every_run_predicted(study, root: Path) -> dict[str, float]:
    """The column as scalestudy.launch.cost computed it before issue 53: one prediction a run."""
    cluster = load_cluster(study.expected_cost_cluster, root)
    cal = predict_mod.cached_calibration([str(root / cost.DEFAULT_CALIBRATION)], root)
    cm = CollectiveModel.for_cluster(cluster, root)
    out = {}
    for r in study.runs:
        p = predict_mod.predict(r.spec, cluster, cal, cm, band=False)
        steps = r.spec.warmup_iters + r.spec.measured_iters
        out[r.run_id] = r.spec.processes * (p["step_time_s"] * steps + cost.EXPECTED_STARTUP_S) / 3600.0
    return out


def test_the_cost_with_and_without_the_cache_is_the_same(tmp_path, monkeypatch):
    study = load_study("paper", REPO)
    want = _every_run_predicted(study, REPO)
    assert len(want) == len(study.runs) > len({r.spec.config_id for r in study.runs})  # seeds share a config

    calibrations, predictions = [], []
    real_calibrate, real_predict = predict_mod.calibrate, predict_mod.predict
    monkeypatch.setattr(predict_mod, "calibrate", lambda *a, **k: calibrations.append(1) or real_calibrate(*a, **k))
    monkeypatch.setattr(predict_mod, "predict", lambda *a, **k: predictions.append(1) or real_predict(*a, **k))
    cache = tmp_path / "cache"
    monkeypatch.setenv(CACHE_ENV, str(cache))

    cold = cost._expected_hours(study, REPO)  # calibrated, each configuration predicted once
    assert (len(calibrations), len(predictions)) == (1, len({r.spec.config_id for r in study.runs}))
    assert sorted(p.name.split("-")[0] for p in cache.iterdir()) == ["calibration", "steps"]
    warm = cost._expected_hours(study, REPO)  # the step times read: neither calibrated nor predicted
    assert (len(calibrations), len(predictions)) == (1, 128)
    for p in cache.glob("steps-*.json"):
        p.unlink()
    from_entry = cost._expected_hours(study, REPO)  # the calibration read from its entry, predicted again
    assert (len(calibrations), len(predictions)) == (1, 256)
    for got in (cold, warm, from_entry):
        assert got[0] == want  # the same floats, not approximately
        assert got[1] == cold[1] and got[2] == [] == cold[2]

    a = cost.study_cost(study, Site())  # from the step times kept
    monkeypatch.setenv(CACHE_ENV, "off")
    b = cost.study_cost(study, Site())  # nothing kept: calibrated and predicted in the process
    assert len(calibrations) == 2
    assert a == b and cost.format_cost(a) == cost.format_cost(b)


def test_a_run_the_model_cannot_predict_names_itself_each_seed(tmp_path, monkeypatch):
    """Predictions that fail are not kept: each seed's run names itself in the notes."""
    import yaml

    from scalestudy.spec.studies import study_from_dict

    data = yaml.safe_load((REPO / "workflow/studies/paper.yaml").read_text())
    data["expected_cost_cluster"] = "h100-paper"
    study = study_from_dict("paper", data, root=REPO)
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    big = [r for r in study.runs if r.spec.world_size == max(x.spec.world_size for x in study.runs)]
    real_predict = predict_mod.predict

    def refuse_largest(spec, *a, **k):
        if spec.world_size == big[0].spec.world_size:
            raise ValueError(f"{spec.run_id} is refused by the test")
        return real_predict(spec, *a, **k)

    monkeypatch.setattr(predict_mod, "predict", refuse_largest)
    out, _, notes = cost._expected_hours(study, REPO)
    assert len(notes) == len(big)
    assert all(n.startswith(f"{r.run_id}: {r.run_id} is refused") for n, r in zip(notes, big))
    assert len(out) == len(study.runs) - len(big)
