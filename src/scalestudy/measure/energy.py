"""Energy arithmetic shared by the harness (which measures) and the analysis (which reads the raw log).

Pure: no torch, no NVML. Energies in joules, powers in watts, times in seconds.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

SCOPE = "GPU board power only (NVML); CPU, memory and network not included"
METHOD_COUNTER = "nvml_total_energy_counter"
METHOD_SAMPLED = "nvml_power_samples_trapezoid"

# Every numeric field of the `energy` record: null, never zero, when it was not measured.
NUMERIC_FIELDS = (
    "gpu_index",
    "energy_j",
    "window_s",
    "sampled_energy_j",
    "mean_power_w",
    "idle_power_w",
    "sample_period_s",
    "n_samples",
)


class EnergyCounterError(ValueError):
    """The board energy counter went backwards: the driver was reloaded or the counter was reset."""


def trapezoid_j(t_s: Sequence[float], power_w: Sequence[float]) -> float:
    """Trapezoidal integral of power samples over their own span (J). Times must not decrease."""
    if len(t_s) != len(power_w):
        raise ValueError(f"{len(t_s)} times but {len(power_w)} power values")
    total = 0.0
    for i in range(1, len(t_s)):
        dt = t_s[i] - t_s[i - 1]
        if dt < 0:
            raise ValueError(f"sample times go backwards at index {i}: {t_s[i - 1]} then {t_s[i]}")
        total += 0.5 * (power_w[i] + power_w[i - 1]) * dt
    return total


def sampled_energy_j(t_s: Sequence[float], power_w: Sequence[float], start_s: float, end_s: float) -> float | None:
    """Energy over [start_s, end_s] from power samples: linear between samples, the nearest sample
    held constant before the first and after the last. None without samples."""
    if end_s < start_s:
        raise ValueError(f"window ends ({end_s}) before it starts ({start_s})")
    if not t_s:
        return None
    if len(t_s) != len(power_w):
        raise ValueError(f"{len(t_s)} times but {len(power_w)} power values")

    def at(t: float) -> float:
        i = bisect.bisect_left(t_s, t)
        if i == 0:
            return power_w[0]
        if i == len(t_s):
            return power_w[-1]
        t0, t1 = t_s[i - 1], t_s[i]
        if t1 == t0:
            return power_w[i]
        return power_w[i - 1] + (power_w[i] - power_w[i - 1]) * (t - t0) / (t1 - t0)

    inside = [(t, p) for t, p in zip(t_s, power_w) if start_s < t < end_s]
    ts = [start_s] + [t for t, _ in inside] + [end_s]
    ps = [at(start_s)] + [p for _, p in inside] + [at(end_s)]
    return trapezoid_j(ts, ps)


def counter_delta_j(start_mj: int, end_mj: int) -> float:
    """Energy between two readings of NVML's total-energy counter (mJ since the driver loaded).

    The counter is an unsigned 64-bit count of millijoules: it cannot wrap within any run (that
    takes over 10^8 years at 10 kW), so a decrease means the counter was reset, and the window's
    energy is unknown."""
    if start_mj < 0 or end_mj < 0:
        raise EnergyCounterError(f"negative energy counter reading ({start_mj} mJ, {end_mj} mJ)")
    if end_mj < start_mj:
        raise EnergyCounterError(
            f"energy counter went backwards from {start_mj} mJ to {end_mj} mJ (driver reloaded or counter reset)"
        )
    return (end_mj - start_mj) / 1000.0


def mean_power_w(energy_j: float | None, window_s: float | None) -> float | None:
    """Mean power in W over the window; None without energy or window."""
    if energy_j is None or not window_s:
        return None
    return energy_j / window_s


def tokens_per_joule(tokens: float, energy_j: float | None) -> float | None:
    """Tokens per joule (= tokens per watt-second); None when the energy was not measured."""
    if energy_j is None:
        return None
    if tokens < 0:
        raise ValueError(f"negative token count {tokens}")
    if energy_j <= 0:
        raise ValueError(f"energy must be positive to divide by, got {energy_j} J")
    return tokens / energy_j


def unavailable_record(reason: str) -> dict:
    """The `energy` record value of a rank that could not measure: every number null, with why."""
    if not reason:
        raise ValueError("an unavailable energy record needs a reason")
    return {"available": False, "reason": reason, **{k: None for k in NUMERIC_FIELDS}, "method": None, "scope": SCOPE}
