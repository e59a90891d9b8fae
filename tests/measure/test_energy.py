import math

import pytest

from scalestudy.measure import energy


def test_trapezoid_constant_and_ramp():
    assert energy.trapezoid_j([0.0, 1.0, 3.0], [100.0, 100.0, 100.0]) == pytest.approx(300.0)
    # P = 10 t on [0, 2]: 20 J, exact for a linear trace whatever the spacing
    assert energy.trapezoid_j([0.0, 0.3, 1.7, 2.0], [0.0, 3.0, 17.0, 20.0]) == pytest.approx(20.0)


def test_trapezoid_converges_on_a_sine():
    n = 1000
    t = [math.pi * i / n for i in range(n + 1)]
    assert energy.trapezoid_j(t, [math.sin(x) for x in t]) == pytest.approx(2.0, rel=1e-5)


def test_trapezoid_edge_cases():
    assert energy.trapezoid_j([], []) == 0.0
    assert energy.trapezoid_j([1.0], [50.0]) == 0.0
    with pytest.raises(ValueError, match="backwards"):
        energy.trapezoid_j([0.0, 2.0, 1.0], [1.0, 1.0, 1.0])
    with pytest.raises(ValueError):
        energy.trapezoid_j([0.0, 1.0], [1.0])


def test_sampled_energy_over_a_window():
    t, p = [0.5, 1.5], [100.0, 200.0]
    # held at 100 W on [0, 0.5], linear 100..200 on [0.5, 1.5], held at 200 on [1.5, 2]
    assert energy.sampled_energy_j(t, p, 0.0, 2.0) == pytest.approx(50 + 150 + 100)
    # a window inside the samples interpolates at both ends: 125 W at 0.75, 175 W at 1.25
    assert energy.sampled_energy_j(t, p, 0.75, 1.25) == pytest.approx(75.0)
    assert energy.sampled_energy_j([], [], 0.0, 1.0) is None
    with pytest.raises(ValueError):
        energy.sampled_energy_j(t, p, 2.0, 1.0)


def test_counter_delta():
    assert energy.counter_delta_j(1_000_000, 1_250_500) == pytest.approx(250.5)
    assert energy.counter_delta_j(7, 7) == 0.0
    big = 2**63
    assert energy.counter_delta_j(big, big + 2000) == pytest.approx(2.0)


def test_counter_going_backwards_is_an_error():
    with pytest.raises(energy.EnergyCounterError, match="backwards"):
        energy.counter_delta_j(2**64 - 10, 5)  # no wraparound is possible: a reset
    with pytest.raises(energy.EnergyCounterError):
        energy.counter_delta_j(-1, 5)


def test_tokens_per_joule():
    assert energy.tokens_per_joule(1_000_000, 2_000.0) == pytest.approx(500.0)
    assert energy.tokens_per_joule(100, None) is None
    with pytest.raises(ValueError):
        energy.tokens_per_joule(100, 0.0)
    with pytest.raises(ValueError):
        energy.tokens_per_joule(-1, 10.0)


def test_mean_power():
    assert energy.mean_power_w(600.0, 2.0) == pytest.approx(300.0)
    assert energy.mean_power_w(None, 2.0) is None
    assert energy.mean_power_w(600.0, None) is None


def test_unavailable_record_is_null_with_reason():
    rec = energy.unavailable_record("NVML initialisation failed: no driver")
    assert rec["available"] is False
    assert rec["reason"] == "NVML initialisation failed: no driver"
    for k in energy.NUMERIC_FIELDS:
        assert k in rec and rec[k] is None
    assert rec["scope"] == energy.SCOPE
    with pytest.raises(ValueError):
        energy.unavailable_record("")
