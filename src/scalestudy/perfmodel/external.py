"""The external validation ledger: published throughput of real runs against the model's prediction.

workflow/validation/external.yaml lists each row's source (repository, commit and path, or paper
table), its configuration (cluster, RunSpec fields, model options) and the published number. Rows
the model cannot express carry `not_expressible: reason` and are reported as such. Nothing here
is fitted: the ledger is predicted with the calibration every other prediction uses.

Published metrics: tokens_per_s_per_device (torchtitan's TPS/WPS per GPU), or
tflops_per_gpu_megatron (Narayanan et al. 2021: F = 96 B s l h^2 (1 + s/(6h) + V/(16 l h)) FLOPs a
batch of B sequences, the recomputed forward included), converted to tokens/s per GPU as
X x 1e12 / (F / (B s)).
"""

from __future__ import annotations

import copy
import csv
import io
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path

from scalestudy.measure.code_version import model_version
from scalestudy.measure.rawlog import atomic_write_text
from scalestudy.perfmodel.cluster import load_cluster
from scalestudy.perfmodel.collectives import CollectiveModel
from scalestudy.perfmodel.options import ModelOptions
from scalestudy.perfmodel.predict import Calibration, predict
from scalestudy.spec import strict_yaml
from scalestudy.spec.checkout import checkout_path
from scalestudy.spec.run import RunSpec

LEDGER = Path("workflow") / "validation" / "external.yaml"
METRICS = ("tokens_per_s_per_device", "tflops_per_gpu_megatron")
SPEC_BASE = dict(device="cuda", precision="bf16", procs_per_node=8)


class LedgerError(ValueError):
    pass


def megatron_flops_per_token(cfg, seq_len: int) -> float:
    """Narayanan et al. 2021, eq. (3) over B s tokens: 96 l h^2 (1 + s/(6h) + V/(16 l h))."""
    l, h, v, s = cfg.n_layers, cfg.dim, cfg.vocab_size, seq_len
    return 96.0 * l * h * h * (1 + s / (6 * h) + v / (16 * l * h))


@dataclass
class LedgerRow:
    id: str
    group: str
    source: dict
    table: str
    cluster: str | None
    spec: dict
    options: dict
    metric: str
    published: float
    not_expressible: str | None = None
    published_tokens_per_s_per_device: float | None = None
    predicted: float | None = None  # tokens/s per GPU
    low: float | None = None
    high: float | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def error(self) -> float | None:
        if self.predicted is None or not self.published_tokens_per_s_per_device:
            return None
        return self.predicted / self.published_tokens_per_s_per_device - 1.0

    @property
    def inside_band(self) -> bool | None:
        if self.low is None:
            return None
        return self.low <= self.published_tokens_per_s_per_device <= self.high

    def source_text(self) -> str:
        s = self.source
        if "repo" in s:
            return f"{s['repo']}@{s['commit'][:7]}:{s['path']} ({self.table})"
        return f"{s['paper'].split(',')[0]}, {self.table}"

    def as_dict(self) -> dict:
        return {**asdict(self), "error": self.error, "inside_band": self.inside_band}


def _merge(a: dict, b: dict) -> dict:
    out = copy.deepcopy(a)
    for k, v in (b or {}).items():
        out[k] = _merge(out.get(k, {}), v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def load_ledger(root: Path | str = ".") -> tuple[dict, list[LedgerRow]]:
    path = checkout_path(str(LEDGER), root)
    data = strict_yaml.load_file(path)
    for key in ("sources", "rows", "targets"):
        if key not in data:
            raise LedgerError(f"{path}: no {key!r} section")
    rows = []
    seen = set()
    for i, r in enumerate(data["rows"]):
        where = f"{path}: rows[{i}] ({r.get('id', '?')})"
        for key in ("id", "group", "source", "table", "published"):
            if key not in r:
                raise LedgerError(f"{where}: missing {key!r}")
        if r["id"] in seen:
            raise LedgerError(f"{where}: id {r['id']!r} appears twice")
        seen.add(r["id"])
        if r["source"] not in data["sources"]:
            raise LedgerError(f"{where}: source {r['source']!r} is not in sources ({', '.join(data['sources'])})")
        if r["published"].get("metric") not in METRICS:
            raise LedgerError(f"{where}: published.metric must be one of {', '.join(METRICS)}")
        d = (data.get("defaults") or {}).get(r["source"], {})
        rows.append(
            LedgerRow(
                id=r["id"],
                group=r["group"],
                source=data["sources"][r["source"]],
                table=r["table"],
                cluster=r.get("cluster", d.get("cluster")),
                spec=_merge(d.get("spec", {}), r.get("spec", {})),
                options=_merge(d.get("options", {}), r.get("options", {})),
                metric=r["published"]["metric"],
                published=float(r["published"]["value"]),
                not_expressible=r.get("not_expressible"),
            )
        )
    return data, rows


def spec_of(row: LedgerRow) -> RunSpec:
    return RunSpec(**{**SPEC_BASE, **row.spec})


def predict_ledger(cal: Calibration, root: Path | str = ".") -> tuple[dict, list[LedgerRow]]:
    data, rows = load_ledger(root)
    clusters: dict[str, tuple] = {}
    for row in rows:
        if row.not_expressible:
            if row.metric == "tokens_per_s_per_device":
                row.published_tokens_per_s_per_device = row.published
            continue
        if row.cluster not in clusters:
            cl = load_cluster(row.cluster, root)
            clusters[row.cluster] = (cl, CollectiveModel.for_cluster(cl, root))
        cl, cm = clusters[row.cluster]
        spec = spec_of(row)
        if row.metric == "tflops_per_gpu_megatron":
            row.published_tokens_per_s_per_device = (
                row.published * 1e12 / megatron_flops_per_token(spec.model_config(), spec.seq_len)
            )
        else:
            row.published_tokens_per_s_per_device = row.published
        p = predict(spec, cl, cal, cm, options=ModelOptions.from_dict(row.options))
        row.predicted = p.values["tokens_per_s_per_device"]
        row.low, row.high = p.band["tokens_per_s_per_device"]
        row.notes = list(p.notes)
    return data, rows


def group_summary(data: dict, rows: list[LedgerRow]) -> dict[str, dict]:
    out = {}
    for group, target in data["targets"].items():
        rs = [r for r in rows if r.group == group and r.error is not None]
        errs = [abs(r.error) for r in rs]
        s = {
            "n_predicted": len(rs),
            "n_not_expressible": sum(1 for r in rows if r.group == group and r.not_expressible),
            "median_abs_error": statistics.median(errs) if errs else None,
            "max_abs_error": max(errs) if errs else None,
            "target": target,
        }
        ok = True
        if "abs_error_max" in target and errs:
            ok &= max(errs) <= target["abs_error_max"]
        if "median_abs_error_max" in target and errs:
            ok &= statistics.median(errs) <= target["median_abs_error_max"]
        if "ratio" in target:
            a, b = (next(r for r in rows if r.id == i) for i in target["ratio"])
            if a.predicted and b.predicted:
                pub = 100 * (b.published_tokens_per_s_per_device / a.published_tokens_per_s_per_device - 1)
                pred = 100 * (b.predicted / a.predicted - 1)
                s["ratio"] = {
                    "rows": target["ratio"],
                    "published_pct": pub,
                    "predicted_pct": pred,
                    "error_pp": pred - pub,
                }
                ok &= abs(pred - pub) <= target["ratio_error_pp_max"]
        s["within_target"] = bool(ok) if errs else None
        out[group] = s
    return out


CSV_FIELDS = (
    "id",
    "group",
    "source",
    "cluster",
    "configuration",
    "published_metric",
    "published_value",
    "published_tokens_per_s_per_device",
    "predicted_tokens_per_s_per_device",
    "band_low",
    "band_high",
    "error_pct",
    "inside_band",
    "not_expressible",
    "model_version",
)


def csv_rows(rows: list[LedgerRow]) -> list[dict]:
    out = []
    for r in rows:
        out.append(
            {
                "id": r.id,
                "group": r.group,
                "source": r.source_text(),
                "cluster": r.cluster or "",
                "configuration": ", ".join(f"{k}={v}" for k, v in sorted(r.spec.items()))
                + ("; " + ", ".join(f"{k}={v}" for k, v in sorted(r.options.items())) if r.options else ""),
                "published_metric": r.metric,
                "published_value": r.published,
                "published_tokens_per_s_per_device": r.published_tokens_per_s_per_device,
                "predicted_tokens_per_s_per_device": r.predicted,
                "band_low": r.low,
                "band_high": r.high,
                "error_pct": None if r.error is None else 100 * r.error,
                "inside_band": r.inside_band,
                "not_expressible": r.not_expressible or "",
            }
        )
    return out


def write_csv(rows: list[LedgerRow], path: Path | str, root: Path | str = ".") -> None:
    """The ledger with its predictions; every row names the model version that predicted it
    (scalestudy.measure.code_version.model_version: `scalestudy audit` compares it)."""
    version = model_version(root)
    f = io.StringIO(newline="")
    w = csv.DictWriter(f, fieldnames=CSV_FIELDS)
    w.writeheader()
    for r in csv_rows(rows):
        w.writerow(
            {
                **{k: ("" if v is None else (f"{v:.6g}" if isinstance(v, float) else v)) for k, v in r.items()},
                "model_version": version,
            }
        )
    atomic_write_text(path, f.getvalue())


def format_ledger(data: dict, rows: list[LedgerRow]) -> str:
    lines = ["# External validation ledger (published runs; nothing fitted to them)", ""]
    summary = group_summary(data, rows)
    for group in data["targets"]:
        lines.append(f"## {group}")
        for r in (r for r in rows if r.group == group):
            if r.not_expressible:
                lines.append(
                    f"- {r.id}: NOT EXPRESSIBLE ({r.not_expressible}); published {r.published:g} [{r.source_text()}]"
                )
                continue
            pub = f"{r.published_tokens_per_s_per_device:.0f} tokens/s a GPU"
            if r.metric == "tflops_per_gpu_megatron":
                pub = f"{r.published:g} TFLOP/s a GPU (Megatron's formula) = {pub}"
            lines.append(
                f"- {r.id}: published {pub}; predicted {r.predicted:.0f} [{r.low:.0f}, {r.high:.0f}] "
                f"({100 * r.error:+.1f}%{'' if r.inside_band else ', outside the band'}) [{r.source_text()}]"
            )
        s = summary[group]
        t = ", ".join(f"{k} {v}" for k, v in s["target"].items())
        if s["median_abs_error"] is not None:
            lines.append(
                f"  {s['n_predicted']} predicted, {s['n_not_expressible']} not expressible; |error| median "
                f"{100 * s['median_abs_error']:.1f}%, max {100 * s['max_abs_error']:.1f}%; target ({t}): "
                f"{'met' if s['within_target'] else 'NOT met'}"
            )
        if "ratio" in s:
            q = s["ratio"]
            lines.append(
                f"  ratio {q['rows'][0]} -> {q['rows'][1]}: published {q['published_pct']:+.1f}%, predicted "
                f"{q['predicted_pct']:+.1f}% ({q['error_pp']:+.1f} pp)"
            )
        lines.append("")
    lines += ["Assumptions:"] + [f"- {a}" for a in data.get("assumptions", [])]
    return "\n".join(lines) + "\n"
