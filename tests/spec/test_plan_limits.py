"""Plan-time limits (issue 54): seeds, step counts, sizes and processes beyond what a run can be
are refused when the study is read or the workflow plans, one sentence naming the field and the
limit, instead of an overflow, a wildcard error or an hours-long run at launch."""

import pytest

from scalestudy.launch.launcher import CPU_PROCS_PER_CPU_MAX, LaunchError, host_problem, launch
from scalestudy.spec.collectives import CollectivesSpec
from scalestudy.spec.run import SEED_MAX, RunSpec, SpecError
from scalestudy.spec.studies import StudyError, load_study


def _study(tmp_path, body: str):
    path = tmp_path / "x.yaml"
    path.write_text("description: x\nhardware: cpu\n" + body)
    return str(path)


@pytest.mark.parametrize(
    "body, words",
    [
        (
            "seeds: [100000000000000000000]\nexperiments: [{name: weak_scaling, set: {model: tiny}}]",
            "seed: 100,000,000,000,000,000,000 is above 4,294,967,295",
        ),
        (
            "seeds: [0]\ndefaults: {measured_iters: 10000000000}\nexperiments: [{name: weak_scaling, set: {model: tiny}}]",
            "measured_iters: 10,000,000,000 is above 100,000",
        ),
        (
            "seeds: [0]\nexperiments: [{name: weak_scaling, set: {model: tiny, seq_len: 100000000000}}]",
            "seq_len: 100,000,000,000 is above 1,048,576",
        ),
    ],
)
def test_a_study_beyond_the_limits_is_refused_when_read(tmp_path, body, words):
    with pytest.raises(StudyError, match=words) as e:
        load_study(_study(tmp_path, body))
    assert "experiment 'weak_scaling'" in str(e.value)


def test_the_largest_seed_is_planned_and_one_more_is_not():
    assert RunSpec(seed=SEED_MAX).seed == SEED_MAX
    with pytest.raises(SpecError, match="seed"):
        RunSpec(seed=SEED_MAX + 1)
    with pytest.raises(SpecError, match="must be a whole number"):
        RunSpec(measured_iters=2.5)


def test_collectives_have_limits_too():
    with pytest.raises(SpecError, match="iters: 10,000,000 is above 100,000"):
        CollectivesSpec(iters=10_000_000)


def test_a_cpu_run_of_more_processes_than_the_host_can_hold_is_refused_before_it_starts(tmp_path):
    spec = RunSpec(procs_per_node=64)
    why = host_problem(spec, cpus=2)
    assert "procs_per_node 64" in why and f"more than {CPU_PROCS_PER_CPU_MAX} processes a CPU" in why
    assert "(2 CPUs)" in why
    assert host_problem(RunSpec(procs_per_node=4), cpus=2) is None  # the smoke study's 4 on 2 cores
    assert host_problem(RunSpec(procs_per_node=64, device="cuda"), cpus=2) is None  # GPUs, not CPUs
    if host_problem(spec) is not None:  # this host: the launcher refuses it with the same sentence
        with pytest.raises(LaunchError, match="procs_per_node 64"):
            launch(spec, tmp_path / "run")
        assert not (tmp_path / "run").exists()
