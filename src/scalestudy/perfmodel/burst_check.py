"""The power model's limiter against bursts of products measured on another board (the burst-rate run a
GPU catalog entry names as `power_burst_data`: data/burst-rate, on an H100):
each phase's rate and mean power as perfmodel/power.py gives them (fitted on the H200's duty cycles,
data/power-duty; nothing refitted here) beside the measurement. Was benchmarks/burst_rate_check.py
(`git show 315aca1:benchmarks/burst_rate_check.py`); tests/perfmodel/test_perfmodel_power.py holds
the model to it.

Rate: the back-to-back rate (the mean of the phases without bursts, at the limit) x burst_speed of
the phase's full-clock share (its bursts' window share, no more than its average power under the cap
allows). Power: power_w with the phase's compute share, its idle gaps and its bursts.
"""

from __future__ import annotations

import statistics
from pathlib import Path

from scalestudy.measure.instruments import read_instrument
from scalestudy.perfmodel import power


def rows(path: Path | str, model: power.PowerModel) -> list[dict]:
    """One row a phase of a burst-rate measurement (a run directory or the script's file): measured and
    modelled rate (TFLOP/s) and mean power (W), the model being `model` (a power fit: power.load's)."""
    log = read_instrument(path, "burst-rate")
    head, phases = log.header, log.of("phase")
    at_limit = statistics.mean(p["tflops"] for p in phases if p["burst_products"] is None)
    gap_s = head["gap_ms"] / 1000.0
    out = []
    for p in phases:
        burst = p["burst_ms_measured"] / 1000.0 if p["burst_products"] else power.UNBOUNDED_S
        period = {"gap_s": gap_s if p["burst_products"] else 0.0, "cap_w": head["power_limit_w"], "burst_s": burst}
        rate = at_limit * model.burst_speed(
            model.burst_full_clock_share(p["compute_share"], **period), head["power_limit_w"]
        )
        watts = model.power_w(p["compute_share"], **period)
        out.append(
            {
                "phase": p["phase"],
                "burst_ms": p["burst_ms_measured"],
                "share": p["compute_share"],
                "rate": p["tflops"],
                "rate_model": rate,
                "power": p["mean_power_w"],
                "power_model": watts,
            }
        )
    return out


def table(rs: list[dict]) -> str:
    """The rows as a markdown table, with the worst relative error of rate and power."""
    lines = [
        "| phase | burst (ms) | compute share | rate (TFLOP/s) | model | error | power (W) | model | error |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rs:
        burst = f"{r['burst_ms']:.1f}" if r["burst_ms"] else "-"
        lines.append(
            f"| {r['phase']} | {burst} | {r['share']:.2f} | {r['rate']:.1f} | {r['rate_model']:.1f} "
            f"| {100 * (r['rate_model'] / r['rate'] - 1):+.1f}% | {r['power']:.0f} | {r['power_model']:.0f} "
            f"| {100 * (r['power_model'] / r['power'] - 1):+.1f}% |"
        )
    worst_rate = max(abs(r["rate_model"] / r["rate"] - 1) for r in rs)
    worst_power = max(abs(r["power_model"] / r["power"] - 1) for r in rs)
    lines.append(f"\nworst |error|: rate {100 * worst_rate:.1f}%, power {100 * worst_power:.1f}%")
    return "\n".join(lines) + "\n"
