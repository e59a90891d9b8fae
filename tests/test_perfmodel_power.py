"""The board-power fit (perfmodel/power.py) on synthetic phases and on the committed H200 duty cycles."""

import math
from pathlib import Path

import pytest

from scalestudy.perfmodel.power import DUTY_FILE, DutyPhase, PowerModel, fit, fit_file

REPO = Path(__file__).resolve().parents[1]


def test_fit_recovers_known_powers():
    truth = PowerModel(idle_w=120, warm_w=250, tau_s=0.1, compute_w=760, copy_w=560, cap_w=700, device="x",
                       rel_rms=0, rel_max=0, n_phases=0, source="")
    phases = []
    for c, m, g in ((0, 0, 5.0), (0.25, 0, 0.015), (0.5, 0, 0.1), (0.5, 0, 0.5), (0, 0.5, 0.01), (0, 0.75, 0.25),
                    (0, 1, 0), (0.3, 0.3, 0.05), (0.2, 0.2, 1.0)):
        phases.append(DutyPhase(f"{c}-{m}-{g}", truth.power_w(c, m, g), c, m, g))
    got = fit(phases, 700)
    assert got.rel_rms < 0.01
    for k in ("idle_w", "warm_w", "copy_w"):
        assert getattr(got, k) == pytest.approx(getattr(truth, k), rel=0.03), k
    assert got.tau_s == pytest.approx(0.1, rel=0.1)


def test_power_is_capped_and_scales_with_the_target_cap():
    pm = PowerModel(idle_w=140, warm_w=190, tau_s=0.2, compute_w=760, copy_w=570, cap_w=700, device="x",
                    rel_rms=0, rel_max=0, n_phases=0, source="")
    assert pm.power_w(1.0) == 700  # matrix products throttled to the limit
    assert pm.power_w(0.0, gap_s=10.0) == pytest.approx(140 + 50 * math.exp(-50))
    assert pm.power_w(0.0) == pytest.approx(190)  # gaps inside a step: warm
    assert pm.power_w(0.0, u_comm=1.0, comm_hbm_fraction=0.5) == pytest.approx(190 + 0.5 * (570 - 190))
    assert pm.power_w(0.5, cap_w=400) == pytest.approx(min(400, (0.5 * 760 + 0.5 * 190) * 400 / 700))


def test_committed_h200_duty_cycles():
    pm = fit_file(REPO / DUTY_FILE)
    assert pm.device == "NVIDIA H200" and pm.cap_w == 700 and pm.n_phases >= 25
    assert 100 < pm.idle_w < 160 and pm.idle_w < pm.warm_w < pm.copy_w < pm.compute_w
    assert pm.compute_w > pm.cap_w  # continuous matrix products run at the limit
    assert pm.rel_rms < 0.08 and pm.rel_max < 0.2
