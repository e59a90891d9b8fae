"""RunSpec.power_sampling: power sampling off is part of the run specification (its run id says
so), exempt from the config id at its default (every earlier run id stays), planned by a study
like any field, and set by `scalestudy train --no-power` as a convenience."""

import json
from dataclasses import fields

import pytest
from conftest import REPO

from scalestudy.cli import main
from scalestudy.spec.run import ID_EXEMPT_AT_DEFAULT, RunSpec, SpecError, config_digest
from scalestudy.spec.studies import StudyError, load_study, study_from_dict


def test_the_field_round_trips_and_is_typed():
    off = RunSpec(power_sampling=False)
    assert RunSpec().power_sampling is True
    assert RunSpec.from_dict(off.to_dict()) == off
    assert RunSpec.from_dict(json.loads(json.dumps(off.to_dict()))).power_sampling is False
    assert off.replace(seed=3).power_sampling is False
    with pytest.raises(SpecError) as e:
        RunSpec.from_dict({"power_sampling": "false"})  # a string is no boolean
    assert e.value.problems == [("power_sampling", "expected bool, got 'false'")]
    assert "power_sampling" in {f.name for f in fields(RunSpec)}


def test_exempt_from_the_config_id_at_its_default_and_an_id_of_its_own_when_off():
    on = RunSpec(model="tiny", procs_per_node=2)
    before = on.to_dict()  # the digest as it was before the field existed: without it
    before.pop("seed")
    for name, default in ID_EXEMPT_AT_DEFAULT.items():
        if before[name] == default:
            before.pop(name)
    assert "power_sampling" not in before and on.config_id.endswith(config_digest(before))
    off = on.replace(power_sampling=False)
    assert off.config_id != on.config_id and off.run_id != on.run_id
    assert off.config_id.rsplit("-", 1)[0] == on.config_id.rsplit("-", 1)[0]  # same layout, another digest


def test_committed_runs_made_with_the_old_no_power_flag_keep_their_run_ids():
    """Their specs never held the field: read back, power_sampling is the default, and the run id is
    the recorded one (the h200-megatron loss-curve runs, and h200-reference's retired bare run)."""
    runs = {p: json.loads(p.read_text()) for p in sorted((REPO / "data").glob("*/raw/*/run.json"))}
    legacy = {p: run for p, run in runs.items() if (run.get("launch") or {}).get("power") is False}
    assert len(legacy) >= 5
    for p, run in legacy.items():
        assert "power_sampling" not in run["spec"], p
        assert RunSpec.from_dict(run["spec"]).run_id == run["run_id"], p


def _study(**changes) -> dict:
    d = {
        "description": "a test study",
        "hardware": "CPU",
        "seeds": [0],
        "defaults": {"model": "tiny", "device": "cpu", "precision": "fp32", "warmup_iters": 1, "measured_iters": 2},
        "experiments": [
            {"name": "weak_scaling"},
            {"name": "instrumentation_overhead", "set": {"power_sampling": False}},
        ],
    }
    d.update(changes)
    return d


def test_a_study_experiment_plans_power_sampling_off():
    s = study_from_dict("t", _study(), root=REPO)
    (on,) = s.runs_of("weak_scaling")
    (off,) = s.runs_of("instrumentation_overhead")
    assert on.spec.power_sampling is True and off.spec.power_sampling is False
    assert off.run_id == RunSpec.from_dict({**on.spec.to_dict(), "power_sampling": False}).run_id != on.run_id
    grid = _study(experiments=[{"name": "weak_scaling", "grid": {"power_sampling": [True, False]}}])
    assert sorted(r.spec.power_sampling for r in study_from_dict("t", grid, root=REPO).runs) == [False, True]
    with pytest.raises(StudyError, match="power_sampling"):
        study_from_dict("t", _study(defaults={"model": "tiny", "power_sampling": "off"}), root=REPO)


def test_the_launchers_spec_file_carries_it_to_the_worker_command(tmp_path):
    """`scalestudy launch` writes the planned spec to a file and starts `scalestudy train --spec
    FILE` (launch.launcher): the worker's spec says power_sampling false, under the planned run id."""
    from scalestudy.cli import build_parser
    from scalestudy.cli.train import spec_from_args
    from scalestudy.launch.launcher import torchrun_command

    (off,) = study_from_dict("t", _study(), root=REPO).runs_of("instrumentation_overhead")
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps(off.spec.to_dict(), indent=1, sort_keys=True) + "\n")
    cmd = torchrun_command(off.spec, spec_file, tmp_path / off.run_id)
    args = build_parser().parse_args(cmd[cmd.index("train") :])
    worker = spec_from_args(args)
    assert worker.power_sampling is False and worker.run_id == off.run_id


def test_h200_reference_plans_its_instrumentation_overhead_run_without_power():
    s = load_study("h200-reference", REPO)
    (run,) = s.runs_of("instrumentation_overhead")
    assert run.spec.power_sampling is False and run.spec.activation_checkpointing == "full"
    assert run.spec.profile_iters == 0
    assert all(r.spec.power_sampling for r in s.runs if r is not run)
    # the run made before the spec could say so is retired, not planned (its raw log stays as measured)
    assert s.partial and set(s.retired_runs) == {"llama2-7b-n1x1-r1s1t1p1-gb2-660d5325af-seed0"}
    assert not set(s.retired_runs) & set(s.run_ids)


def test_a_retired_run_the_grid_still_plans_is_refused():
    d = _study()
    planned = study_from_dict("t", d, root=REPO).runs_of("weak_scaling")[0].run_id
    with pytest.raises(StudyError, match="retired_runs.*still planned by the grid"):
        study_from_dict("t", {**d, "retired_runs": {planned: "a reason"}}, root=REPO)
    s = study_from_dict("t", {**d, "retired_runs": {"tiny-old-seed0": "made before the grid changed"}}, root=REPO)
    assert s.retired_runs == {"tiny-old-seed0": "made before the grid changed"}


@pytest.mark.parametrize("flag", ["--no-power", "--no-power-sampling"])
def test_train_and_plan_options_set_the_spec_field(flag, capsys):
    assert main(["plan", "--no-power-sampling"]) == 0
    assert json.loads(capsys.readouterr().out)["run_id"] == RunSpec(power_sampling=False).run_id
    from scalestudy.cli import build_parser
    from scalestudy.cli.train import spec_from_args

    args = build_parser().parse_args(["train", flag])
    assert spec_from_args(args).power_sampling is False
    assert spec_from_args(build_parser().parse_args(["train"])).power_sampling is True
    assert spec_from_args(build_parser().parse_args(["train", "--power-sampling"])).power_sampling is True
