"""GPU board power from what the GPU does, fitted to a duty-cycle measurement (NVML, board only).

The measurement (one H200, `scalestudy instrument power-duty`, the run directory its GPU catalog
entry names as `power_duty_data`; the removed benchmarks/power_duty.py's file data/power-duty/h200-power-duty.jsonl.gz is the
earlier one, readable in the same form): phases of
bf16 matrix products, large device-to-device copies and idle gaps of several lengths and ratios;
each phase's mean power from NVML's total-energy counter, its compute share u_c, copy
share u_m and idle share u_i = 1 - u_c - u_m from the kernels' own timing. The fit:

    P = min(cap, u_c x P_burst(b) + u_m x P_copy + u_i x P_gap(g)),
    P_burst(b) = e x P_compute + (1 - e) x cap,   e = exp(-b / tau_limiter)
    P_gap(g) = P_idle + (P_warm - P_idle) x exp(-g / tau)      (g: the length of each idle gap)

The board's limiter holds the *average* power under the cap: a burst of matrix products of length
b shorter than its window runs at full clock and draws P_compute, what products draw without the
limit; products longer than the window are held at the cap. The duty cycles show it: in the 20 ms
compute cycles the SM clock stays near its maximum and momentary board power reaches about 900 W,
where back-to-back products run at a median 1470 MHz and 700 W. (The fit with one compute power
for every burst, tau_limiter = None, left -8% to -13% on the 20 ms compute cycles: RMS 5.1%, worst
13.4%; `benchmarks/power_limiter_fit.py` prints both fits.) A phase's compute burst is its compute
share x its period (unbounded for continuous work). P_warm is the power of a short gap; both taus
by grid search, the four powers by least squares on relative error (numpy). In a training step a
compute burst is the computation between two exposed waits (perfmodel/overlap.py, the step's
timeline); the gaps between kernels are microseconds: an idle share there draws P_warm. Products
in a short burst also run faster: its full-clock share e runs 1 / s_cap times faster than the
calibrated rates, measured at the limit (burst_speed; s_cap below), where e is what the window
allows and no more than keeps the period's average power at the cap (burst_full_clock_share).
Not fitted to rates: on an H100 (data/burst-rate), bf16 products in bursts of 4 ms to 1 s between
10 ms gaps ran within about 2-3% of that (the H200's fit, its tau_limiter and s_cap, against the
back-to-back rate; perfmodel/burst_check.py prints the table, data/burst-rate/README.md the errors).

Communication, measured (one H200, `scalestudy instrument comm-power`, the run directory its catalog
entry names as `comm_power_data`; the removed benchmarks/comm_power.py's file in data/comm-power is the earlier one): what the board draws while k thread
blocks (NCCL's channels) poll a flag in device memory and reduce chunks at a network's rate r
(GB/s), the other SMs idle. Above the idle board the phases draw

    dP(k, r) = c_0 + c_k x k + c_r x r      (least squares over the phases; CommPower)

(data/comm-power/README.md gives the fitted terms and the idle board). An exposed collective draws a gap's power plus that: P_comm = P_gap(g) + dP(channels,
bus rate). What it cannot capture: NIC and NVSwitch power (not board power), the NIC's DMA writes
into HBM, NCCL's own loop. Where the catalog names no such run the older assumption stands:
P_comm = P_warm + f x (P_copy - P_warm), f = hbm_bytes_per_bus_byte x bus bandwidth / HBM
bandwidth [assumed: 3 bytes through HBM a bus byte].

To another GPU the powers carry as fractions of the board power its clocks are designed for
(cluster `design_power_w`, by default the GPU kind's catalog power cap) [assumed]. GPU board power only: CPU,
memory, network and cooling are not included (as in the measurements).

Power-limit throttling: where the matrix products would draw more than the board limit, the
GPU lowers its clocks until they do not. Dynamic power is C V^2 f and, in the DVFS range, the
voltage rises linearly with the clock, so the power above the static floor goes as the cube of
the clock [published: Le Sueur and Heiser, "Dynamic voltage and frequency scaling: the laws of
diminishing returns", HotPower 2010; D. J. Greaves, Cambridge "System on Chip" notes, power:
"ramping voltage up linearly with f results in dynamic power with a cubic dependence on f"]:

    P(s) = P_idle + (P_compute - P_idle) x s^3,    s = clock / full clock,
    s_cap = ((cap - P_idle) / (P_compute - P_idle))^(1/3)   where P_compute > cap, else 1,

with P_idle (floor) and P_compute (unthrottled matrix products) from the duty-cycle fit. Tensor-core
work runs at s_cap of its full-clock rate; the measured efficiencies already hold the measured
GPU's own s_cap (the H200 at 700 W: `scalestudy model inputs` prints it), so another GPU's matrix products run at
s_cap(target) / s_cap(measured) of the calibrated rate (clock_ratio). Memory-bound work is not
throttled (copies draw below the limit; the HBM clock is not lowered) [assumed]. A GPU whose
limit is its design power throttles as the measured one does (ratio 1); a part limited below
its design power (torchtitan's 500 W H100s) runs its matrix products slower.
"""

from __future__ import annotations

import functools
import math
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np

from scalestudy.measure.instruments import content_stamp, read_instrument
from scalestudy.spec import catalog
from scalestudy.spec.checkout import checkout_path

TAU_GRID_S = tuple(float(x) for x in np.geomspace(0.005, 2.0, 60))
LIMITER_GRID_S = tuple(float(x) for x in np.geomspace(0.005, 5.0, 60))
UNBOUNDED_S = math.inf
DVFS_EXPONENT = 3.0  # P_dynamic ~ f^3 (C V^2 f, V linear in f) [published: Le Sueur and Heiser, HotPower 2010]


@dataclass(frozen=True)
class DutyPhase:
    phase: str
    mean_power_w: float
    compute_share: float
    copy_share: float
    gap_s: float  # length of each idle gap (0: none)
    burst_s: float = UNBOUNDED_S  # length of each burst of matrix products (compute share x period)

    @property
    def idle_share(self) -> float:
        return max(0.0, 1.0 - self.compute_share - self.copy_share)


@dataclass(frozen=True)
class CommPower:
    """Board power above the idle board while communication kernels run (measured; see above)."""

    idle_w: float  # the idle board of the measurement
    const_w: float
    per_block_w: float
    per_gbps_w: float
    rel_rms: float  # of the fitted phase powers
    n_phases: int
    source: str

    def extra_w(self, blocks: float, gbps: float) -> float:
        return max(0.0, self.const_w + self.per_block_w * blocks + self.per_gbps_w * max(gbps, 0.0))

    def as_dict(self) -> dict:
        return asdict(self)


def read_comm(path: Path | str) -> tuple[dict, list[dict]]:
    """The header and phases of a comm-power measurement: a run directory or the script's file."""
    log = read_instrument(path, "comm-power")
    return log.header, log.of("phase")


def fit_comm(path: Path | str) -> CommPower:
    """dP(k, r) fitted to the poll_* and trickle_* phases over the idle phases' mean power."""
    header, phases = read_comm(path)
    idle = [p["mean_power_w"] for p in phases if p["phase"].startswith("idle")]
    rows = [p for p in phases if p["phase"].startswith(("poll_", "trickle_"))]
    if not idle or len(rows) < 3:
        raise ValueError(
            f"{path}: needs idle phases and at least 3 poll_/trickle_ phases (scalestudy instrument comm-power)"
        )
    p_idle = float(np.mean(idle))
    a = np.array(
        [
            [1.0, float(p["blocks"]), float(p.get("achieved_network_gb_per_s", p.get("network_gb_per_s", 0.0)))]
            for p in rows
        ]
    )
    y = np.array([p["mean_power_w"] - p_idle for p in rows])
    coef, *_ = np.linalg.lstsq(a, y, rcond=None)
    rel = (p_idle + a @ coef) / (p_idle + y) - 1.0
    return CommPower(
        idle_w=p_idle,
        const_w=float(coef[0]),
        per_block_w=float(coef[1]),
        per_gbps_w=float(coef[2]),
        rel_rms=float(np.sqrt(np.mean(rel**2))),
        n_phases=len(rows),
        source=f"measured: communication kernels on one {header.get('device_name', 'GPU')} "
        f"({Path(path).name}), NVML energy counter",
    )


@dataclass(frozen=True)
class PowerModel:
    idle_w: float
    warm_w: float
    tau_s: float
    compute_w: float  # matrix products at full clock, unthrottled; the cap limits them
    copy_w: float
    cap_w: float  # the board limit of the measured GPU
    device: str
    rel_rms: float
    rel_max: float
    n_phases: int
    source: str
    residuals: dict = field(default_factory=dict)  # phase -> relative error
    comm: CommPower | None = None  # the measured communication phase (None: the HBM-traffic assumption)
    limiter_tau_s: float | None = None  # the limiter's window (None: every burst at P_compute, then the cap)

    def as_dict(self) -> dict:
        return asdict(self)

    def gap_w(self, gap_s: float) -> float:
        return self.idle_w + (self.warm_w - self.idle_w) * math.exp(-gap_s / self.tau_s)

    def burst_w(self, burst_s: float = UNBOUNDED_S) -> float:
        """Mean power of a burst of matrix products `burst_s` long (measured GPU, before the cap)."""
        e = full_clock_share(burst_s, self.limiter_tau_s)
        return e * self.compute_w + (1.0 - e) * min(self.compute_w, self.cap_w)

    def burst_speed(self, full_clock: float, cap_w: float | None = None, design_w: float | None = None) -> float:
        """The rate of clock-bound work (matrix products, attention) in a burst of computation whose
        share `full_clock` runs at full clock (burst_full_clock_share), over its rate held at the
        limit: that share 1 / clock_factor times faster, the rest at the limit's clock; 1 without a
        limiter window."""
        if self.limiter_tau_s is None:
            return 1.0
        return full_clock / self.clock_factor(cap_w, design_w) + (1.0 - full_clock)

    def clock_factor(self, cap_w: float | None = None, design_w: float | None = None) -> float:
        """The clock (relative to full) at which matrix products keep a GPU with board limit `cap_w`
        and design power `design_w` (default: its cap) within its limit (DVFS_EXPONENT law)."""
        cap = cap_w or self.cap_w
        k = (design_w or cap) / self.cap_w
        full, floor = k * self.compute_w, k * self.idle_w
        if full <= cap:
            return 1.0
        return max(0.0, (cap - floor) / (full - floor)) ** (1.0 / DVFS_EXPONENT)

    def clock_ratio(self, cap_w: float | None = None, design_w: float | None = None) -> float:
        """A GPU's matrix-product rate relative to the measured GPU's, both under their limits."""
        return self.clock_factor(cap_w, design_w) / self.clock_factor()

    def power_w(
        self,
        u_compute: float,
        u_copy: float = 0.0,
        gap_s: float = 0.0,
        cap_w: float | None = None,
        u_comm: float = 0.0,
        comm_hbm_fraction: float = 0.0,
        design_w: float | None = None,
        comm_gbps: float = 0.0,
        comm_blocks: float = 16.0,
        comm_scale: float = 1.0,
        burst_s: float = UNBOUNDED_S,
    ) -> float:
        """Board power for the shares of a period; `cap_w` the target GPU's limit, `design_w` the power
        its clocks are designed for (default the cap; the powers scale with it [assumed]); u_comm:
        share in which only communication kernels run: with the measured communication phase, at
        comm_gbps of reduced network bytes on comm_blocks channels (its power above a gap's times
        comm_scale, the band's axis); without it, comm_hbm_fraction of the copy power; burst_s: the
        length of each burst of computation (the limiter's window, burst_w)."""
        u_c, rest, k, cap = self._period(
            u_compute, u_copy, gap_s, cap_w, u_comm, comm_hbm_fraction, design_w, comm_gbps, comm_blocks, comm_scale
        )
        return min(cap, k * (u_c * self.burst_w(burst_s) + rest))

    def burst_full_clock_share(self, u_compute: float, burst_s: float = UNBOUNDED_S, **period) -> float:
        """The share of each burst of computation that runs at full clock, for the period power_w
        describes (the same arguments): what the limiter's window allows (exp(-b / tau_limiter)), no
        more than keeps the period's average power at the cap (the rest of each burst held at it)."""
        e = full_clock_share(burst_s, self.limiter_tau_s)
        u_c, rest, k, cap = self._period(u_compute, **period)
        if u_c <= 0.0 or k * self.compute_w <= cap:
            return e
        return min(e, max(0.0, (cap - k * rest - u_c * cap) / (u_c * (k * self.compute_w - cap))))

    def _period(
        self,
        u_compute: float,
        u_copy: float = 0.0,
        gap_s: float = 0.0,
        cap_w: float | None = None,
        u_comm: float = 0.0,
        comm_hbm_fraction: float = 0.0,
        design_w: float | None = None,
        comm_gbps: float = 0.0,
        comm_blocks: float = 16.0,
        comm_scale: float = 1.0,
    ) -> tuple[float, float, float, float]:
        """The compute share, the mean power of the rest of the period (measured GPU's units), the
        target's power scale and its cap (power_w's arguments)."""
        cap = cap_w or self.cap_w
        k = (design_w or cap) / self.cap_w
        u_c = min(max(u_compute, 0.0), 1.0)
        u_m = min(max(u_copy, 0.0), 1.0 - u_c)
        u_x = min(max(u_comm, 0.0), 1.0 - u_c - u_m)
        u_i = max(0.0, 1.0 - u_c - u_m - u_x)
        if self.comm is not None:
            comm = self.gap_w(gap_s) + comm_scale * self.comm.extra_w(comm_blocks, comm_gbps)
        else:
            comm = self.warm_w + min(max(comm_hbm_fraction, 0.0), 1.0) * (self.copy_w - self.warm_w)
        return u_c, u_m * self.copy_w + u_x * comm + u_i * self.gap_w(gap_s), k, cap


def read_duty(path: Path | str) -> tuple[dict, list[DutyPhase]]:
    """The header and phases of a power-duty measurement: a run directory or the script's file."""
    log = read_instrument(path, "power-duty")
    phases = []
    for r in log.of("phase"):
        c = min(float(r["compute_share"]), 1.0)
        period = r.get("period_s")  # none for continuous work
        burst = c * float(period) if period else UNBOUNDED_S
        phases.append(
            DutyPhase(
                r["phase"],
                float(r["mean_power_w"]),
                c,
                min(float(r["copy_share"]), 1.0 - c),
                float(r.get("gap_s") or 0.0),
                burst,
            )
        )
    if not phases:
        raise ValueError(f"{path}: no phase records (is it a power-duty measurement?)")
    return log.header, phases


def full_clock_share(burst_s: float, tau_limiter: float | None) -> float:
    """The share of a burst of products that draws P_compute, the rest held at the cap: exp(-b / tau)
    (tau_limiter None: no limiter window, every burst at P_compute)."""
    if tau_limiter is None:
        return 1.0
    return math.exp(-burst_s / tau_limiter) if math.isfinite(burst_s) else 0.0


def _features(p: DutyPhase, tau: float, tau_limiter: float | None, cap_w: float) -> tuple[list[float], float]:
    """The phase's coefficients of (P_compute, P_copy, P_idle, P_warm), and the power its throttled
    products draw at the cap."""
    w = math.exp(-p.gap_s / tau) if p.gap_s > 0 else 1.0
    e = full_clock_share(p.burst_s, tau_limiter)
    return (
        [p.compute_share * e, p.copy_share, p.idle_share * (1.0 - w), p.idle_share * w],
        p.compute_share * (1.0 - e) * cap_w,
    )


def fit(phases: list[DutyPhase], cap_w: float, device: str = "", source: str = "", limiter: bool = True) -> PowerModel:
    """limiter=False: the earlier fit, one compute power for every burst (for comparison)."""
    y = np.array([p.mean_power_w for p in phases])
    best = None
    for tau in TAU_GRID_S:
        for tau_lim in LIMITER_GRID_S if limiter else (None,):
            rows = [_features(p, tau, tau_lim, cap_w) for p in phases]
            a, at_cap = np.array([r[0] for r in rows]), np.array([r[1] for r in rows])
            coef, *_ = np.linalg.lstsq(a / y[:, None], (y - at_cap) / y, rcond=None)
            rel = np.minimum(a @ coef + at_cap, cap_w) / y - 1.0
            rms = float(np.sqrt(np.mean(rel**2)))
            if best is None or rms < best[0]:
                best = (rms, tau, tau_lim, coef, rel)
    rms, tau, tau_lim, (pc, pm, pi, pw), rel = best
    return PowerModel(
        idle_w=float(pi),
        warm_w=float(pw),
        tau_s=float(tau),
        compute_w=float(pc),
        copy_w=float(pm),
        cap_w=cap_w,
        device=device,
        rel_rms=rms,
        rel_max=float(np.max(np.abs(rel))),
        n_phases=len(phases),
        source=source,
        residuals={p.phase: float(r) for p, r in zip(phases, rel)},
        limiter_tau_s=None if tau_lim is None else float(tau_lim),
    )


def fit_file(path: Path | str, limiter: bool = True) -> PowerModel:
    """The fit of a power-duty measurement: a run directory of `scalestudy instrument power-duty` or the
    script's file."""
    return _fit_file(str(path), content_stamp(path), limiter)


@functools.lru_cache(maxsize=8)
def _fit_file(path: str, _stamp: tuple, limiter: bool) -> PowerModel:
    """The grid search takes a quarter of a second: one fit per version of the files and process."""
    header, phases = read_duty(path)
    device = header.get("device_name")
    return fit(
        phases,
        float(header.get("power_limit_w") or 700.0),
        device or "",
        f"measured: duty cycles on one {device or 'GPU'} ({Path(path).name}), NVML energy counter",
        limiter,
    )


def load(gpu: str, root: Path | str = ".") -> PowerModel:
    """The power model of `gpu`: the fit of the power-duty run its GPU catalog entry names
    (`power_duty_data`), with the measured communication phase where the entry names a comm-power run
    (`comm_power_data`). FileNotFoundError where it names no power-duty run; UnknownDeviceError for a
    GPU the catalog lacks."""
    g = catalog.gpu(gpu)
    if not g.power_duty_data:
        raise FileNotFoundError(
            f"the GPU catalog names no power-duty run for {g.name} (power_duty_data): `scalestudy instrument "
            "power-duty` on that GPU makes one"
        )
    pm = fit_file(checkout_path(g.power_duty_data, root))
    return replace(pm, comm=fit_comm(checkout_path(g.comm_power_data, root))) if g.comm_power_data else pm


def data_files(gpu: str) -> dict[str, str]:
    """The power measurements the catalog names for `gpu` (relative to the project root), by what they are."""
    g = catalog.gpu(gpu)
    return {
        path: what
        for path, what in (
            (g.power_duty_data, f"{g.name}: board power under duty cycles (perfmodel/power.py)"),
            (g.comm_power_data, f"{g.name}: board power while communication kernels run (perfmodel/power.py)"),
        )
        if path
    }


def burst_runs() -> dict[str, str]:
    """GPU name -> the burst-rate run its catalog entry names (`power_burst_data`), for each GPU naming one."""
    return {name: g.power_burst_data for name, g in sorted(catalog.gpus().items()) if g.power_burst_data}
