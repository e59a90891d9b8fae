"""GPU board power from utilisation, calibrated from measured power (NVML, GPU board only).

    P = P_idle + (P_busy - P_idle) x u_compute + (P_comm - P_idle) x u_exposed,
    P_comm = P_idle + comm_power_fraction x (P_busy - P_idle)

u_compute: the share of the step in which computation kernels run; u_exposed: the share in which
only communication runs (exposed communication). P_idle is the measured idle power (sampled
before warm-up); P_busy follows from each measured run's mean power and its utilisation (from its
trace, or predicted by the compute model for an untraced run), averaged over the calibration runs.
The result is capped at the TDP (the board power limit). Both are carried to another GPU as
fractions of its board power limit (TDP) [assumed];
comm_power_fraction is the cluster's [assumed] value. GPU board power only: CPU, memory, network
and cooling are not included (as in the measurements).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass(frozen=True)
class PowerCalibration:
    idle_fraction: float  # of TDP
    busy_fraction: float  # of TDP
    calib_tdp_w: float
    run_ids: tuple[str, ...]
    detail: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return asdict(self)


def calibrate(runs, tdp_w: float, utilisation: dict[str, float]) -> PowerCalibration:
    """`utilisation`: run id -> u_compute of each run (measured or predicted)."""
    rows = [r for r in runs if r.ok and r.mean_power_w and r.idle_power_w and r.run_id in utilisation]
    if not rows:
        raise ValueError("no measured run with power and idle power to calibrate the power model")
    idle = sum(r.idle_power_w for r in rows) / len(rows)
    busy = []
    detail = {}
    for r in rows:
        u = utilisation[r.run_id]
        b = r.idle_power_w + (r.mean_power_w - r.idle_power_w) / u
        busy.append(b)
        detail[r.run_id] = {"mean_power_w": r.mean_power_w, "idle_power_w": r.idle_power_w, "u_compute": u,
                            "busy_power_w": b}
    return PowerCalibration(idle / tdp_w, sum(busy) / len(busy) / tdp_w, tdp_w, tuple(r.run_id for r in rows),
                            detail)


def power_w(cal: PowerCalibration, tdp_w: float, u_compute: float, u_exposed: float, comm_fraction: float) -> float:
    idle, busy = cal.idle_fraction * tdp_w, cal.busy_fraction * tdp_w
    u_c = min(max(u_compute, 0.0), 1.0)
    u_x = min(max(u_exposed, 0.0), 1.0 - u_c)
    return min(tdp_w, idle + (busy - idle) * u_c + comm_fraction * (busy - idle) * u_x)
