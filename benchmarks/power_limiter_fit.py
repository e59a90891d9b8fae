"""The duty-cycle fit with and without the power limiter's window, phase by phase.

    python benchmarks/power_limiter_fit.py [RUN_DIR_OR_FILE]   (default: the H200's power_duty_data, gpus.yaml)

perfmodel/power.py fits a compute burst of length b as drawing e x P_compute + (1 - e) x cap,
e = exp(-b / tau_limiter): the board's limiter holds the average power under the cap, so products
shorter than its window run at full clock (the docstring there says why). The earlier fit gave
every burst one compute power. This prints both fits' parameters and residuals.
"""

from __future__ import annotations

import sys

from scalestudy.perfmodel import power
from scalestudy.spec import catalog


def describe(m: power.PowerModel) -> str:
    lim = "none" if m.limiter_tau_s is None else f"{m.limiter_tau_s * 1e3:.0f} ms"
    return (
        f"RMS {m.rel_rms:.1%}, worst {m.rel_max:.1%}; P_compute {m.compute_w:.0f} W, P_copy {m.copy_w:.0f}, "
        f"P_idle {m.idle_w:.0f}, P_warm {m.warm_w:.0f}, gap tau {m.tau_s * 1e3:.0f} ms, limiter tau {lim}"
    )


def main(path: str) -> int:
    header, phases = power.read_duty(path)
    cap = float(header["power_limit_w"])
    with_limiter, without = power.fit(phases, cap), power.fit(phases, cap, limiter=False)
    print(f"{path}: {len(phases)} phases, board limit {cap:.0f} W ({header.get('device_name', '?')})")
    print(f"without the limiter's window: {describe(without)}")
    print(f"with it (the model's fit):    {describe(with_limiter)}")
    print(f"{'phase':28s} {'burst s':>8s} {'measured W':>10s} {'without':>8s} {'with':>8s}")
    for p in phases:
        print(
            f"{p.phase:28s} {p.burst_s:8.3f} {p.mean_power_w:10.1f} {without.residuals[p.phase]:+8.1%} "
            f"{with_limiter.residuals[p.phase]:+8.1%}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else catalog.gpu("NVIDIA H200").power_duty_data))
