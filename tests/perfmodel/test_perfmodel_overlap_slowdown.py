"""The overlap slowdown (options.overlap_slowdown, perfmodel/overlap.py): computation that overlaps
an FSDP collective runs 1 + s times slower for the overlapped part, inside the timeline. Pure logic."""

import pytest

from scalestudy.perfmodel.options import MEANING, ModelOptions, choices
from scalestudy.perfmodel.overlap import StepInputs, simulate, stretched_end


def test_stretched_end_only_inside_collectives():
    assert stretched_end(0.0, 1.0, [], 0.2) == pytest.approx(1.0)
    assert stretched_end(0.0, 1.0, [(0.0, 10.0)], 0.2) == pytest.approx(1.2)  # wholly under a collective
    # under a collective until 0.5 (0.5 / 1.2 of the work done), then at full rate
    assert stretched_end(0.0, 1.0, [(0.0, 0.5)], 0.2) == pytest.approx(0.5 + 1.0 - 0.5 / 1.2)
    # full rate to 0.5, a collective of 0.1, full rate again
    assert stretched_end(0.0, 1.0, [(0.5, 0.6)], 0.2) == pytest.approx(1.0 + 0.1 * 0.2 / 1.2)
    assert stretched_end(2.0, 1.0, [(0.0, 1.0)], 0.2) == pytest.approx(3.0)  # a collective already over
    assert stretched_end(0.0, 1.0, [(0.0, 10.0)], 0.0) == pytest.approx(1.0)


KW = dict(
    layers=2,
    microbatches=1,
    layer_fwd_s=1.0,
    layer_bwd_s=0.0,
    head_fwd_s=0.0,
    head_bwd_s=0.0,
    embed_s=0.0,
    tail_s=0.0,
    gap_fraction=0.0,
    forward_prefetch=1,
)


def test_long_collective_absorbs_the_stretch():
    # all-gathers of 2 s: block 0 computes [2, 3] under block 1's all-gather [2, 4] and waits for it
    plain = simulate(StepInputs(ag_block_s=2.0, **KW))
    slowed = simulate(StepInputs(ag_block_s=2.0, interference=0.2, **KW))
    assert plain.step_s == pytest.approx(5.0) and plain.exposed_comm_s == pytest.approx(3.0)
    assert slowed.step_s == pytest.approx(5.0)  # the step still waits for the collective
    assert slowed.slowdown_s == pytest.approx(0.2)
    assert slowed.compute_s == pytest.approx(plain.compute_s + 0.2)  # the stretch is computation ...
    assert slowed.exposed_comm_s == pytest.approx(plain.exposed_comm_s - 0.2)  # ... and hides communication


def test_short_collective_lengthens_the_step():
    # block 1's all-gather [0.5, 1.0] under block 0's forward [0.5, ...]: 0.5 s of wall time at 1 / 1.2
    plain = simulate(StepInputs(ag_block_s=0.5, **KW))
    slowed = simulate(StepInputs(ag_block_s=0.5, interference=0.2, **KW))
    assert plain.step_s == pytest.approx(2.5)
    assert slowed.step_s == pytest.approx(2.5 + 0.5 * 0.2 / 1.2)
    assert slowed.slowdown_s == pytest.approx(slowed.step_s - plain.step_s)
    assert slowed.exposed_comm_s == pytest.approx(plain.exposed_comm_s)  # the edge all-gather: nothing to hide it


def test_no_collective_no_slowdown():
    tl = simulate(StepInputs(interference=0.5, **KW))
    assert tl.slowdown_s == 0.0 and tl.step_s == pytest.approx(2.0)


def test_option_default_bounds_and_flag():
    assert ModelOptions().overlap_slowdown == pytest.approx(0.189)  # Lee et al., arXiv 2507.03114, abstract
    assert ModelOptions(overlap_slowdown=0.0).overlap_slowdown == 0.0
    with pytest.raises(ValueError):
        ModelOptions(overlap_slowdown=-0.1)
    with pytest.raises(ValueError):
        ModelOptions(overlap_slowdown=1.5)
    assert choices()["overlap_slowdown"] is float and "2507.03114" in MEANING["overlap_slowdown"]
    assert ModelOptions.from_dict({"overlap_slowdown": 0.1}).overlap_slowdown == 0.1


def test_compute_bursts_are_the_stretches_between_exposed_waits():
    # the power limiter's bursts (perfmodel/power.py): block 0 computes [2, 3], waits for block 1's
    # all-gather until 4, computes [4, 5]; without collectives the blocks run back to back
    assert simulate(StepInputs(ag_block_s=2.0, **KW)).compute_bursts == 2
    assert simulate(StepInputs(**KW)).compute_bursts == 1
