"""The model's measured, published and assumed inputs as one table, read from where the model reads
them (no value typed here): the achievable matrix-product rates of the GPU catalog (gpus.yaml,
perfmodel/achievable.py) and the carry factors they give, the board-power fit of the calibration
GPU's duty-cycle measurement and of its communication-power measurement (the runs its GPU catalog
entry names as `power_duty_data` and `comm_power_data`, perfmodel/power.py), the power limiter
against measured bursts (each GPU's `power_burst_data`, perfmodel/burst_check.py) and the shape factors of the
matrix products timed at layouts' shapes (gemm_rates.py, GEMM_DIR). Each row names its source
(measured, published, assumed or derived, and what) and, where a raw log stands behind it, the
log's path relative to the project root and its content sha256 (measure/instruments.py
content_sha256: of a run directory, its sealed status.json).

    scalestudy model inputs [--format md|csv] [--only PART,...] [--out FILE]
    scalestudy model inputs --update-docs | --check-docs

The docs quote these values only inside generated blocks, between a line
`<!-- BEGIN scalestudy model inputs [--format md] [--only PART,...] -->` and
`<!-- END scalestudy model inputs -->`: update_docs() rewrites each block as that command prints
it (tests/perfmodel/test_inputs_table.py fails on a stale one). Pure reading: numpy and the
files; no torch."""

from __future__ import annotations

import csv
import io
import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from scalestudy.measure.instruments import content_sha256, read_instrument
from scalestudy.measure.rawlog import RUN_FILE, find_runs
from scalestudy.perfmodel import achievable, burst_check, gemm_rates, power
from scalestudy.spec import catalog
from scalestudy.spec.checkout import checkout_path

# the calibration runs whose GPU the efficiencies are carried from (as `scalestudy model` defaults)
DEFAULT_CALIBRATION = "data/h200-reference/raw"
# the matrix products timed at layouts' shapes (`scalestudy gemm` on the H200; the mlperf study's
# calibration reads them) and the layout S is taken against: the calibration run's (llama2-7b,
# micro batch 2 x 4096 tokens, TP 1), as `scalestudy model gemm-factors` takes it by default
GEMM_DIR = "data/h200-gemm/raw"
GEMM_CALIBRATION_LAYOUT = "llama2-7b/8192/1"

# the table's parts, in its order: name -> what it holds
PARTS = {
    "matmul": "achievable matrix-product rates (gpus.yaml matmul_achievable_tflops)",
    "carry": "the calibrated matrix-product efficiency carried to other GPUs (perfmodel/achievable.py)",
    "power": "board power fitted to duty cycles (perfmodel/power.py; gpus.yaml power_duty_data)",
    "comm-power": "board power of communication kernels (perfmodel/power.py; gpus.yaml comm_power_data)",
    "burst": "the power limiter against measured bursts (perfmodel/burst_check.py; gpus.yaml power_burst_data)",
    "gemm": "matrix products at layouts' shapes (perfmodel/gemm_rates.py)",
}
FORMATS = ("md", "csv")
CSV_COLUMNS = ("part", "quantity", "value", "unit", "source", "raw_log", "sha256")

BEGIN = "<!-- BEGIN scalestudy model inputs"
END = "<!-- END scalestudy model inputs -->"
DOC_FILES = ("README.md", "docs/*.md")
_BLOCK = re.compile(re.escape(BEGIN) + r"(?P<args>[^\n]*?)-->\n(?P<body>.*?)" + re.escape(END), re.S)


@dataclass(frozen=True)
class InputRow:
    """One input of the model: its value in `unit`, where it comes from, and the raw logs behind it
    (paths relative to the project root) with their content sha256, in the same order."""

    part: str
    quantity: str
    value: float
    unit: str
    source: str
    raw_logs: tuple[str, ...] = ()
    sha256: tuple[str, ...] = ()
    digits: int | None = None  # decimals the markdown table shows (None: as the catalog writes it)

    def shown(self) -> str:
        return f"{self.value:g}" if self.digits is None else f"{self.value:.{self.digits}f}"

    def as_csv(self) -> dict:
        return {
            "part": self.part,
            "quantity": self.quantity,
            "value": repr(float(self.value)),
            "unit": self.unit,
            "source": self.source,
            "raw_log": " ".join(self.raw_logs),
            "sha256": " ".join(self.sha256),
        }


def _logs(root: Path | str, *rels: str | Path) -> dict:
    """raw_logs and sha256 of an InputRow for the measurements at `rels` (relative to root, or to the
    package's own checkout where root lacks them)."""
    paths = [str(r) for r in rels]
    return {"raw_logs": tuple(paths), "sha256": tuple(str(content_sha256(checkout_path(p, root))) for p in paths)}


def calibration_gpu(raw_dirs=(DEFAULT_CALIBRATION,), root: Path | str = ".") -> str:
    """The GPU the calibration runs under raw_dirs ran on (their run.json's devices), as the catalog
    names it; refused where they name none or several."""
    names: set[str] = set()
    for d in raw_dirs:
        for run_dir in find_runs(Path(root) / d):
            run = json.loads((run_dir / RUN_FILE).read_text()) if (run_dir / RUN_FILE).exists() else {}
            names.update((run.get("provenance") or {}).get("devices", {}).get("names") or [])
    known = {catalog.gpu_name(n) or n for n in names}
    if len(known) != 1:
        raise ValueError(
            f"the calibration runs under {', '.join(map(str, raw_dirs))} ran on {len(known)} GPU kinds "
            f"({', '.join(sorted(known)) or 'none recorded'}): the carry needs one"
        )
    return known.pop()


def _citation(source: str) -> str:
    """A catalog source shortened to its kind, its first clause and the repository@commit it cites."""
    kind, _, text = source.partition(":")
    first = re.split(r" \(|; |: ", text.strip(), maxsplit=1)[0].rstrip(",")
    if first.endswith("'s"):  # "the H100 SXM5's (same silicon; ...": another GPU's rate, and why
        why = re.match(r"[^(]*\(([^;)]*)", text)
        first += " rate" + (f" ({why.group(1)})" if why else "")
    cite = re.search(r"[\w.-]+/[\w.-]+@[0-9a-f]{7,40}", text)
    return f"{kind}: {first}" + (f" ({cite.group(0)})" if cite and cite.group(0) not in first else "")


def _dtypes(rates: dict) -> list[str]:
    return sorted(rates, key=lambda d: (d != "bf16", d))


def matmul_rows(root: Path | str = ".") -> list[InputRow]:
    """Every catalog GPU's achievable matrix-product rates, precision by precision: the rate the model
    reads, with its catalog source; a measured one with the sweep it names (`matmul_achievable_data`)
    and that sweep's own best beside it where they differ."""
    out = []
    for name, g in catalog.gpus().items():
        for dtype in _dtypes(g.matmul_achievable_flops_per_s):
            rate = achievable.achievable_rate(name, dtype)
            if rate is None:
                continue
            quantity = f"{g.product}: achievable {dtype} matmul ({rate.fraction:.1%} of the {rate.peak_tflops:g} peak)"
            data = g.matmul_achievable_data if dtype in catalog.SHARED_SOURCE_DTYPES else ""
            if not data:
                out.append(InputRow("matmul", quantity, rate.tflops, "TFLOP/s", _citation(rate.source)))
                continue
            log = read_instrument(checkout_path(data, root), "matmul-sweep")
            head, best = log.header, log.of("best")[-1]
            source = (
                f"measured: the best of {best['shapes']} {dtype} shapes on one {head.get('device_name')} at its "
                f"{head.get('power_limit_w'):g} W limit (scalestudy instrument matmul-sweep)"
            )
            if abs(float(best["tflops"]) - rate.tflops) > 5e-3:
                source += f"; the sweep's best is {best['tflops']:g}: gpus.yaml is stale"
            out.append(InputRow("matmul", quantity, rate.tflops, "TFLOP/s", source, **_logs(root, data)))
    return out


def carry_rows(calibration: str) -> list[InputRow]:
    """The calibration GPU's matrix-product efficiency carried to each GPU with an achievable rate:
    bf16 by the ratio of achievable fractions of peak (tensor_carry), and the layers' FP8 products
    where the GPU has an FP8 rate (precision_carry, a factor on the bf16 efficiency at its bf16 peak)."""
    cal = catalog.gpu(calibration)
    out = []
    for name, g in catalog.gpus().items():
        if name != calibration and "bf16" in g.matmul_achievable_flops_per_s:
            c = achievable.tensor_carry(name, calibration)
            out.append(
                InputRow(
                    "carry",
                    f"{g.product}: achievable-rate carry of the matrix-product and attention efficiencies "
                    f"over the {cal.product}'s",
                    c.factor,
                    "x",
                    "derived: achievable bf16 fraction of peak over the calibration GPU's (tensor_carry); a "
                    "prediction multiplies in the power-limit clock ratio",
                    digits=3,
                )
            )
    for name, g in catalog.gpus().items():
        if "fp8" in g.matmul_achievable_flops_per_s and "bf16" in g.peak_flops_per_s:
            p = achievable.precision_carry(name, calibration, "fp8")
            out.append(
                InputRow(
                    "carry",
                    f"{g.product}: FP8 layer products, over the {cal.product}'s bf16 efficiency",
                    p.factor,
                    "x",
                    "derived: achievable fp8 rate over the bf16 peak, over the calibration GPU's bf16 fraction "
                    "(precision_carry)",
                    digits=3,
                )
            )
    return out


def power_model(gpu: str, root: Path | str = ".") -> "power.PowerModel | None":
    """The power fit of `gpu` (power.load), read once for the power, comm-power and burst parts; None
    where the catalog names no power-duty run for it."""
    return power.load(gpu, root) if catalog.gpu(gpu).power_duty_data else None


def power_rows(pm: "power.PowerModel | None", gpu: str, root: Path | str = ".") -> list[InputRow]:
    """The duty-cycle fit `pm` of `gpu`: its terms and error, the clock it puts back-to-back matrix
    products at, and the clock ratio of each cluster whose board limit is below its GPU's design power;
    nothing without a fit."""
    from scalestudy.perfmodel.cluster import cluster_names, load_cluster
    from scalestudy.perfmodel.predict import design_power_w

    if pm is None:
        return []
    duty = catalog.gpu(gpu).power_duty_data
    logs = _logs(root, duty)
    head = read_instrument(checkout_path(duty, root), "power-duty").header
    src = (
        f"measured: duty cycles on one {pm.device} at its {pm.cap_w:g} W limit, NVML energy counter "
        "(scalestudy instrument power-duty), fitted by perfmodel/power.py"
    )
    terms = [
        ("idle board (P_idle)", pm.idle_w, "W", 1),
        ("a short idle gap (P_warm)", pm.warm_w, "W", 1),
        ("the gap's time constant (tau)", 1e3 * pm.tau_s, "ms", 0),
        ("matrix products at full clock (P_compute)", pm.compute_w, "W", 1),
        ("device copies (P_copy)", pm.copy_w, "W", 1),
    ]
    if pm.limiter_tau_s is not None:
        terms.append(("the power limiter's window (tau_limiter)", 1e3 * pm.limiter_tau_s, "ms", 0))
    terms += [
        (f"fit error over {pm.n_phases} phases, RMS", 100 * pm.rel_rms, "%", 1),
        ("fit error, worst phase", 100 * pm.rel_max, "%", 1),
    ]
    out = [InputRow("power", q, v, u, src, digits=d, **logs) for q, v, u, d in terms]
    out.append(
        InputRow(
            "power",
            f"clock of back-to-back matrix products at the {head.get('power_limit_w', pm.cap_w):g} W limit (s_cap)",
            pm.clock_factor(),
            "of full clock",
            "derived: the fit and the cube law of dynamic power (PowerModel.clock_factor)",
            digits=3,
            **logs,
        )
    )
    for name in cluster_names(root):
        c = load_cluster(name, root)
        cap, design = c.v("tdp_w"), design_power_w(c)
        ratio = pm.clock_ratio(cap, design)
        if abs(ratio - 1.0) > 1e-9:
            out.append(
                InputRow(
                    "power",
                    f"matrix-product clock ratio on cluster {name} ({c.gpu}: {cap:g} W limit, {design:g} W design)",
                    ratio,
                    "x",
                    "derived: the fit and the cube law, over the measured GPU's clock (PowerModel.clock_ratio)",
                    digits=3,
                    **logs,
                )
            )
    return out


def comm_power_rows(pm: "power.PowerModel | None", gpu: str, root: Path | str = ".") -> list[InputRow]:
    """The communication-power fit in `pm` (of `gpu`), dP = c0 + c_k k + c_r r above the idle board
    (power.fit_comm), where its catalog entry names the measurement, with two of its values."""
    comm = pm.comm if pm is not None else None
    if comm is None:
        return []
    logs = _logs(root, catalog.gpu(gpu).comm_power_data)
    src = (
        f"measured: {comm.source.removeprefix('measured: ').split(' (')[0]} (scalestudy instrument comm-power), "
        "fitted by perfmodel/power.py"
    )
    terms = [
        ("idle board of the measurement", comm.idle_w, "W", 1),
        ("c0: communication kernels running, above the idle board", comm.const_w, "W", 2),
        ("c_k: a channel (thread block) polling", comm.per_block_w, "W", 3),
        ("c_r: a GB/s of network bytes reduced", comm.per_gbps_w, "W per GB/s", 3),
        (f"fit error over {comm.n_phases} phases, RMS", 100 * comm.rel_rms, "%", 1),
    ]
    out = [InputRow("comm-power", q, v, u, src, digits=d, **logs) for q, v, u, d in terms]
    derived = "derived: c0 + c_k k + c_r r (CommPower.extra_w)"
    for what, blocks, gbps in (
        ("16 channels polling, nothing reduced", 16, 0.0),
        ("16 channels reducing at 50 GB/s", 16, 50.0),
    ):
        out.append(InputRow("comm-power", what, comm.extra_w(blocks, gbps), "W", derived, digits=1, **logs))
    return out


def burst_rows(pm: "power.PowerModel | None", root: Path | str = ".") -> list[InputRow]:
    """The power fit `pm` against the bursts of products measured on each GPU whose catalog entry names
    a burst-rate run (burst_check.rows): the worst relative error of the rate and of the power over the
    phases, each with its phase; nothing without a fit."""
    if pm is None:
        return []
    return [row for rel in power.burst_runs().values() for row in _burst_rows(rel, pm, root)]


def _burst_rows(rel: str, model: "power.PowerModel", root: Path | str) -> list[InputRow]:
    path = checkout_path(rel, root)
    rs = burst_check.rows(path, model)
    head = read_instrument(path, "burst-rate").header
    logs = _logs(root, rel)
    src = (
        f"measured: bf16 bursts on one {head.get('device_name')} at its {head.get('power_limit_w'):g} W limit "
        "(scalestudy instrument burst-rate) against the power fit, nothing refitted (perfmodel/burst_check.py)"
    )
    out = []
    for what, key in (("rate", "rate"), ("board power", "power")):
        worst = max(rs, key=lambda r: abs(r[f"{key}_model"] / r[key] - 1))
        out.append(
            InputRow(
                "burst",
                f"worst |error| of the modelled {what} over {len(rs)} phases ({worst['phase']})",
                100 * abs(worst[f"{key}_model"] / worst[key] - 1),
                "%",
                src,
                digits=1,
                **logs,
            )
        )
    return out


def gemm_rows(root: Path | str = ".", raw_dir: str = GEMM_DIR, layout: str = GEMM_CALIBRATION_LAYOUT) -> list[InputRow]:
    """The shape factors S of the measured layouts' layer products (gemm_rates.factor_table), their
    lowest and highest in each precision, and the calibration layout's bf16 rate they are taken
    against; nothing where no finished gemm run is there."""
    if not (Path(root) / raw_dir).is_dir():
        return []
    rates = gemm_rates.read_gemm_rates([raw_dir], root)
    if rates is None:
        return []
    logs = _logs(root, *(f"{raw_dir}/{r}" for r in rates.run_ids))
    src = (
        f"measured: scalestudy gemm on one {rates.gpu}, the median of {len(rates.run_ids)} runs; S against "
        f"{layout} in bf16 (perfmodel/gemm_rates.py)"
    )
    table = gemm_rates.factor_table(rates, [layout])
    cal = gemm_rates.shape_factor(rates, layout, "bf16", [layout])
    out = []
    if cal is not None:
        out.append(
            InputRow("gemm", f"layer products of {layout}, bf16", cal.layer_tflops, "TFLOP/s", src, digits=0, **logs)
        )
    for dtype in ("bf16", "fp8"):
        measured = [r for r in table if r[f"{dtype}_S"] is not None]
        if not measured:
            continue
        for which, pick in (("lowest", min), ("highest", max)):
            r = pick(measured, key=lambda r: r[f"{dtype}_S"])
            out.append(
                InputRow(
                    "gemm",
                    f"shape factor S, {dtype} layer products, {which} of {len(measured)} layouts ({r['layout']})",
                    r[f"{dtype}_S"],
                    "x",
                    src,
                    digits=3,
                    **logs,
                )
            )
    return out


def raw_log_paths(root: Path | str = ".") -> list[str]:
    """Every raw log the table may name, relative to root (without reading them): the catalog's
    matmul sweeps, power, communication-power and burst measurements, and the gemm runs."""
    paths = {
        path
        for g in catalog.gpus().values()
        for path in (g.matmul_achievable_data, g.power_duty_data, g.comm_power_data, g.power_burst_data)
        if path
    }
    paths |= {str(p.relative_to(root)) for p in find_runs(Path(root) / GEMM_DIR)}
    return sorted(p for p in paths if (Path(root) / p).exists())


def input_files(root: Path | str = ".", calibration=(DEFAULT_CALIBRATION,)) -> list[str]:
    """The files the table is read from, relative to root (the workflow rule's inputs; the catalogs
    and the model's code are package files, in code_version.model_version): each raw log's sealed
    status.json (a script's file itself) and the calibration runs' run.json."""
    out = [f"{p}/status.json" if (Path(root) / p).is_dir() else p for p in raw_log_paths(root)]
    for d in calibration:
        out += sorted(
            str((r / RUN_FILE).relative_to(root)) for r in find_runs(Path(root) / d) if (r / RUN_FILE).exists()
        )
    return out


def rows(root: Path | str = ".", calibration=(DEFAULT_CALIBRATION,)) -> list[InputRow]:
    """The whole table, part by part (PARTS)."""
    gpu = calibration_gpu(calibration, root)
    pm = power_model(gpu, root)
    return [
        *matmul_rows(root),
        *carry_rows(gpu),
        *power_rows(pm, gpu, root),
        *comm_power_rows(pm, gpu, root),
        *burst_rows(pm, root),
        *gemm_rows(root),
    ]


def select(rs: list[InputRow], only=None) -> list[InputRow]:
    """The rows of the parts named in `only` (all where None); an unknown part is refused."""
    if not only:
        return list(rs)
    unknown = [p for p in only if p not in PARTS]
    if unknown:
        raise ValueError(f"unknown part {', '.join(unknown)} of the model's inputs; known: {', '.join(PARTS)}")
    return [r for r in rs if r.part in only]


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def to_markdown(rs: list[InputRow]) -> str:
    """A markdown table of the rows, then each raw log named with its content sha256."""
    lines = ["| part | quantity | value | unit | source | raw log |", "|---|---|---|---|---|---|"]
    for r in rs:
        logs = "<br>".join(f"`{p}`" for p in r.raw_logs) or "-"
        lines.append(f"| {r.part} | {_cell(r.quantity)} | {r.shown()} | {r.unit} | {_cell(r.source)} | {logs} |")
    shas = {p: s for r in rs for p, s in zip(r.raw_logs, r.sha256)}
    if shas:
        lines += ["", "Raw logs, content sha256 (of a run directory: its sealed status.json):", ""]
        lines += [f"- `{p}`: `{s}`" for p, s in sorted(shas.items())]
    return "\n".join(lines) + "\n"


def to_csv(rs: list[InputRow]) -> str:
    """The rows as CSV (CSV_COLUMNS), values at full precision; several raw logs separated by spaces."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CSV_COLUMNS, lineterminator="\n")
    w.writeheader()
    w.writerows(r.as_csv() for r in rs)
    return buf.getvalue()


def render(rs: list[InputRow], fmt: str = "md", only=None) -> str:
    """The rows of `only` (PARTS; all where None) in `fmt` (FORMATS)."""
    if fmt not in FORMATS:
        raise ValueError(f"format {fmt!r}: one of {', '.join(FORMATS)}")
    chosen = select(rs, only)
    return to_markdown(chosen) if fmt == "md" else to_csv(chosen)


def block_options(args: str) -> tuple[str, list[str] | None]:
    """The format and parts a doc block's BEGIN line asks for (`--format md`, `--only PART,...`)."""
    words = shlex.split(args)
    fmt, only = "md", None
    while words:
        flag = words.pop(0)
        if flag not in ("--format", "--only") or not words:
            raise ValueError(f"{BEGIN}{args}-->: takes --format md and --only PART,... only")
        value = words.pop(0)
        if flag == "--format":
            fmt = value
        else:
            only = [p for p in value.split(",") if p]
    if fmt != "md":
        raise ValueError(f"{BEGIN}{args}-->: a doc block is markdown (--format md)")
    return fmt, only


def regenerate(text: str, rs: list[InputRow]) -> str:
    """`text` with every generated block rewritten from the rows, as its BEGIN line asks."""

    def block(m: re.Match) -> str:
        fmt, only = block_options(m.group("args"))
        return f"{BEGIN}{m.group('args')}-->\n\n{render(rs, fmt, only)}\n{END}"

    return _BLOCK.sub(block, text)


def doc_files(root: Path | str = ".") -> list[Path]:
    """The docs that may hold generated blocks (DOC_FILES), those holding one."""
    files = sorted({p for pattern in DOC_FILES for p in Path(root).glob(pattern) if p.is_file()})
    return [p for p in files if BEGIN in p.read_text(encoding="utf-8")]


def update_docs(root: Path | str = ".", rs: list[InputRow] | None = None, write: bool = True) -> list[str]:
    """Rewrite the generated blocks of the docs under root from the rows (default: rows(root)); the
    files whose blocks were stale, relative to root (rewritten only where `write`)."""
    rs = rows(root) if rs is None else rs
    stale = []
    for path in doc_files(root):
        text = path.read_text(encoding="utf-8")
        new = regenerate(text, rs)
        if new != text:
            stale.append(str(path.relative_to(root)))
            if write:
                path.write_text(new, encoding="utf-8")
    return stale
