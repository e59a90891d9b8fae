"""Matrix products at the shapes a layout runs, measured (`scalestudy gemm`, spec/gemm.py).

The calibrated matrix-product efficiency (compute.py eta_matmul) was measured at the calibration
runs' shapes in bf16. Where a calibration also holds a matrix-product benchmark that timed both the
calibration's layout and a predicted layout, on the calibration's GPU, the predicted layout's products
run at eta_matmul times

    S = rate(layout's products, precision) / rate(calibration layout's products, bf16)

each rate the FLOP-weighted harmonic mean of the measured rates of the layer's products (qkv, proj,
fc1, fc2 in fprop, dgrad and wgrad), the output layer's apart and always in bf16. S replaces the
best-shape ratio (achievable.PrecisionCarry, the achievable-rate carry) for the products it covers:
it holds the precision's gain and the shapes' loss, both measured. To another GPU the efficiency
then carries by the ratio of the two GPUs' achievable fractions of peak in that precision.
"""

from __future__ import annotations

import hashlib
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from scalestudy.measure.rawlog import find_runs, read_run
from scalestudy.spec import catalog
from scalestudy.spec.gemm import HEAD, layer_gemms, parse_layout

LAYER = "layer"


@dataclass(frozen=True)
class GemmRates:
    """Measured rates (TFLOP/s) by (layout, dtype, projection, pass), the median over runs."""

    gpu: str | None
    rates: dict[tuple[str, str, str, str], float]
    run_ids: tuple[str, ...] = ()
    files_sha256: dict[str, str] = field(default_factory=dict)

    @property
    def digest(self) -> str:
        h = hashlib.sha256()
        for k, v in sorted(self.files_sha256.items()):
            h.update(f"{k}={v}".encode())
        return h.hexdigest()[:16]

    def rate(self, layout: str, dtype: str, part: str = LAYER) -> float | None:
        """The FLOP-weighted harmonic mean rate of a layout's layer products (part LAYER) or of its
        output layer (part HEAD, bf16) in TFLOP/s; None where a product was not measured."""
        gemms = [g for g in layer_gemms(*parse_layout(layout)) if (g.projection == HEAD) == (part == HEAD)]
        dtype = "bf16" if part == HEAD else dtype
        flops = time = 0.0
        for g in gemms:
            r = self.rates.get((layout, dtype, g.projection, g.pass_))
            if r is None:
                return None
            flops += g.flops
            time += g.flops / r
        return flops / time if time else None

    def describe(self) -> str:
        return f"measured products of {len({k[0] for k in self.rates})} layouts on {self.gpu} (runs {', '.join(self.run_ids)})"


def read_gemm_rates(raw_dirs, root: Path | str = ".") -> GemmRates | None:
    """Every finished ok `gemm` run under raw_dirs (one GPU kind), or None where there is none."""
    samples: dict[tuple, list[float]] = {}
    gpus, ids, files = set(), [], {}
    for d in raw_dirs:
        for run_dir in find_runs(Path(root) / d):
            if not (run_dir / "status.json").exists():
                continue
            log = read_run(run_dir)
            if log.run.get("kind") != "gemm" or log.status.get("status") != "ok":
                continue
            ids.append(log.run_id)
            gpus.update(log.run.get("provenance", {}).get("devices", {}).get("names") or [])
            files.update({f"{log.run_id}/{k}": v for k, v in log.status.get("files_sha256", {}).items()})
            for r in log.records:
                if r["key"] == "gemm":
                    v = r["value"]
                    samples.setdefault((v["layout"], v["dtype"], v["projection"], v["pass"]), []).append(v["tflops"])
    if not samples:
        return None
    if len(gpus) > 1:
        raise ValueError(f"matrix-product runs of several GPU kinds ({', '.join(sorted(gpus))}) in one calibration")
    return GemmRates(
        next(iter(gpus), None), {k: statistics.median(v) for k, v in samples.items()}, tuple(sorted(ids)), files
    )


@dataclass(frozen=True)
class ShapeFactor:
    """S for a layout's layer products in `dtype` and for its output layer, against the calibration's."""

    layout: str
    dtype: str
    layer: float
    head: float
    calibration_layout: str
    layer_tflops: float
    head_tflops: float
    calibration_tflops: float

    def describe(self) -> str:
        return (
            f"the layer products of {self.layout} in {self.dtype} at {self.layer_tflops:.0f} TFLOP/s and its output "
            f"layer at {self.head_tflops:.0f} (bf16), measured, against the calibration's {self.calibration_layout} "
            f"at {self.calibration_tflops:.0f} in bf16: x {self.layer:.3f} and x {self.head:.3f}"
        )


def shape_factor(rates: GemmRates | None, layout: str, dtype: str, calibration_layouts) -> ShapeFactor | None:
    """S of `layout` in `dtype` against the calibration layouts (the products of all their layers and
    of the output layer, bf16, FLOP-weighted as a step runs them); None where anything was not measured."""
    if rates is None:
        return None
    cal_flops = cal_time = 0.0
    for cal in calibration_layouts:
        model = parse_layout(cal)[0]
        for part, times in ((LAYER, catalog.model(model).n_layers), (HEAD, 1)):
            r = rates.rate(cal, "bf16", part)
            if r is None:
                return None
            f = times * sum(
                g.flops for g in layer_gemms(*parse_layout(cal)) if (g.projection == HEAD) == (part == HEAD)
            )
            cal_flops += f
            cal_time += f / r
    if not cal_time:
        return None
    cal_rate = cal_flops / cal_time
    layer, head = rates.rate(layout, dtype), rates.rate(layout, dtype, HEAD)
    if layer is None or head is None:
        return None
    return ShapeFactor(
        layout, dtype, layer / cal_rate, head / cal_rate, ", ".join(calibration_layouts), layer, head, cal_rate
    )


def factor_table(rates: GemmRates, calibration_layouts, dtypes=("bf16", "fp8")) -> list[dict]:
    """One row a measured layout: its layer products' rate and shape factor S in each precision
    against the calibration layouts' bf16 products (the numbers `scalestudy model gemm-factors` prints)."""
    rows = []
    for layout in sorted({k[0] for k in rates.rates}):
        row: dict = {"layout": layout}
        for dtype in dtypes:
            sf = shape_factor(rates, layout, dtype, calibration_layouts)
            row[f"{dtype}_tflops"] = sf.layer_tflops if sf else None
            row[f"{dtype}_S"] = sf.layer if sf else None
        rows.append(row)
    return rows
