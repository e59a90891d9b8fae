"""The paper's claims C1-C7 (STUDY.md) and the critics' HSDP question, recomputed from a
study's tables, each with the paper's number, ours with its 95% interval, and a verdict:

consistent       the comparison rule of the claim holds (see RULES and each row's `rule`), with an
                 interval narrow enough to have rejected a materially different value (POWER_RULE)
undecided        the paper's value lies inside our interval, but so does half or double it, or the
                 interval is wider than the paper's value: too wide to tell the paper's effect from a
                 materially different one
not consistent   it fails
not comparable   the study lacks the runs (the reason names which), they failed, the data are
                 CPU smoke data, there is one seed where an interval is needed, or our
                 95% interval cannot tell the direction

Two kinds of rule:
NUMERIC      (C1-C4) ours is a relative change (or a difference) between two configurations of
             the summary table, with a 95% CI (stats.relative_change: delta method on the log
             ratio of seed means, Welch-Satterthwaite df; stats.difference: Welch). Consistent:
             the same sign as the paper's value and the paper's value inside our CI.
QUALITATIVE  (C5-C7) the direction the paper states. Consistent: the direction holds with our 95%
             intervals separated from no change; not consistent: the opposite direction, equally
             resolved; with one seed the direction is read from the means and the reason says so.
The HSDP question has no paper number: its rows report ours and are always `not comparable`.

Predicted configurations (summary `kind` predicted, from scalestudy.perfmodel): a comparison of two
predictions takes its interval from the model's band, both sides evaluated at the same corner of
the model's uncertainty box (predictions.csv); the same rules then apply with that band in place
of the 95% CI, and every such row says PREDICTED in its reason and `n_seeds`. A predicted
configuration is never compared with a measured one. A predicted configuration that takes a measured
input with a known artefact (its summary notes starting "caveat: ", perfmodel.rank_shares) puts
"CAVEAT on an input: ..." in the reason of every claim it is behind, and claims.md names those
claims above the table; the verdict is computed as usual.

Seeds that a configuration's summary left out (contaminated, or outliers: aggregate.left_out_reason)
are listed with why in the `left_out` column of every claim that reads the configuration, counted
in its reason and named under "Runs behind each claim" in claims.md; `run_ids` names only the seeds
behind the values.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TypeGuard

from scalestudy.analysis import scale_claims
from scalestudy.analysis.aggregate import load_tables
from scalestudy.analysis.figures.prepare import records
from scalestudy.analysis.markdown_html import to_html
from scalestudy.analysis.run_table import CAVEAT_PREFIX
from scalestudy.measure.table_files import WEAKENED_NOTE, weakened_kind
from scalestudy.analysis.stats import Comparison, Summary, difference, from_columns, relative_change
from scalestudy.measure.code_version import code_version
from scalestudy.measure.csv_format import format_value, split_list, write_csv
from scalestudy.measure.rawlog import atomic_write_text
from scalestudy.spec.rank_share import measured_base

CLAIMS_CSV = "claims.csv"
CLAIMS_MD = "claims.md"
CLAIMS_HTML = "claims.html"  # claims.md as a page of the Snakemake report
CONSISTENT, NOT_CONSISTENT, NOT_COMPARABLE = "consistent", "not consistent", "not comparable"
UNDECIDED = "undecided"
# a verdict that can fail: "consistent" only where the interval excludes half and double the paper's value
POWER_RULE = (
    "and only where that interval also excludes half and double the paper's value and is no wider than "
    "the paper's value (else undecided, with the interval's width)"
)
CLAIM_COLUMNS = [
    "id",
    "inputs",
    "claim",
    "where",
    "paper",
    "paper_value",
    "unit",
    "ours",
    "ours_ci95_low",
    "ours_ci95_high",
    "n_seeds",
    "ours_text",
    "verdict",
    "reason",
    "rule",
    "rests_on",
    "config_ids",
    "run_ids",
    "left_out",
]
# What a predicted claim is read from (a measured study's claims: MODEL_ALONE's rows, column empty).
# MODEL_ALONE, the headline: every configuration predicted by the model alone. WITH_MEASURED: a
# configuration whose rank share was measured (its "--measured-inputs" variant, perfmodel.study)
# replaced by that variant, the others as in the headline.
MODEL_ALONE, WITH_MEASURED = "model alone", "with measured inputs"
HEADLINE_WHY = (
    "every configuration of a claim is then predicted the same way, from the calibration and the "
    "cited sources alone; measured rank shares exist for some configurations only, ran on an H200 "
    "standing in for an H100 (carried by the model's own kernel-time ratio), so a claim that compares "
    "a configuration with a measured share against one without would mix the two"
)
MODEL_7B = "llama2-7b"

RULES = {
    "numeric": (
        "consistent if our value has the paper's sign and the paper's value lies inside our 95% CI "
        f"{POWER_RULE} (relative change: delta method on the log ratio of the two configurations' seed means, "
        "Welch df); "
        "not comparable without both configurations, on CPU data, or with one seed on a side (no CI)"
    ),
    "difference": (
        "consistent if our difference (A100 minus H100 MFU, percentage points, both at one GPU count) has "
        f"the paper's sign and the paper's difference lies inside our Welch 95% CI {POWER_RULE}; H200 "
        "stands in for H100 (same compute peak) and says so; not comparable without both device kinds at "
        "one GPU count, on CPU data, or with one seed on a side"
    ),
    "qualitative": (
        "direction only: consistent if every stated direction holds with our 95% interval excluding "
        "no change (one seed: the means decide, said in the reason); not consistent if one is "
        "reversed; not comparable without the runs, on CPU data, or when our interval includes no change"
    ),
    "question": "no paper number (the paper defers HSDP to its Appendix A): ours is reported, the verdict is "
    "always not comparable",
}
# the same rules for a row that compares predictions: the model's band in place of the confidence interval
PREDICTED_RULES = {
    "numeric": (
        "consistent if our value has the paper's sign and the paper's value lies inside the model's band "
        f"{POWER_RULE} (relative change of the two configurations' predictions, both at the same corner of "
        "the model's uncertainty box); not comparable without both configurations, or where one side takes a "
        "measured input and the other does not"
    ),
    "difference": (
        "consistent if our difference (A100 minus H100 MFU, percentage points, both at one GPU count) has "
        f"the paper's sign and the paper's difference lies inside the model's band (both at the same "
        f"corner) {POWER_RULE}; not comparable without both device kinds at one GPU count, or where one "
        "side takes a measured input and the other does not"
    ),
    "qualitative": (
        "direction only: consistent if every stated direction holds over the whole model band; not "
        "consistent if one is reversed; not comparable without the configurations or when the band "
        "includes no change"
    ),
    "question": RULES["question"],
}


# ---- selection -------------------------------------------------------------------
PREDICTED = "predicted"
PREDICTED_REASON = (
    "PREDICTED by scalestudy.perfmodel, not measured (the interval is the model's band: both "
    "sides at the same corner of its uncertainty box)"
)


CAVEAT_REASON = "CAVEAT on an input: "


def inputs_view(cfgs: list[dict], inputs: str = MODEL_ALONE) -> list[dict]:
    """The configurations a claim is read from: without the measured-inputs variants (MODEL_ALONE),
    or with each variant in place of its base configuration (WITH_MEASURED)."""
    variants = {measured_base(c["config_id"]): c for c in cfgs if measured_base(c["config_id"])}
    base = [c for c in cfgs if not measured_base(c["config_id"])]
    return base if inputs == MODEL_ALONE else [variants.get(c["config_id"], c) for c in base]


def has_measured_inputs(tables) -> bool:
    return any(measured_base(str(c["config_id"])) for c in records(tables.summary))


def _configs(tables, inputs: str = MODEL_ALONE) -> list[dict]:
    cfgs = inputs_view(records(tables.summary), inputs)
    pred = getattr(tables, "predictions", None)
    if pred is not None:
        corners: dict[str, dict] = {}
        for r in records(pred):
            corners.setdefault(r["config_id"], {})[r["metric"]] = [float(x) for x in split_list(r.get("corners"))]
        for c in cfgs:
            if c["config_id"] in corners:
                c["_corners"] = corners[c["config_id"]]
    return cfgs


def _predicted(c: dict | None) -> TypeGuard[dict]:
    return bool(c) and c.get("kind") == PREDICTED  # type: ignore[union-attr]  # bool(None) is False


# type: ignore[union-attr]  # bool(None) is False

_CORNER_METRIC = {"step_time_mean_s": "step_time_s"}


def _compare(a: dict | None, b: dict | None, metric: str, how: str = "ratio") -> Comparison:
    """b / a - 1 ('ratio') or b - a ('difference'): over seeds (stats), or for two predictions
    with the model's joint band."""
    if not (_predicted(a) or _predicted(b)):
        sa, sb = _stat(a, metric), _stat(b, metric)
        return relative_change(sa, sb) if how == "ratio" else difference(sa, sb)
    if not (_predicted(a) and _predicted(b)):
        return Comparison(None, None, None, 1, 1, "one side predicted, the other measured: not compared")
    va, vb = a.get(f"{metric}_mean"), b.get(f"{metric}_mean")
    if va is None or vb is None:
        return Comparison(None, None, None, 1, 1, "missing values")

    def f(x, y):
        return y / x - 1.0 if how == "ratio" else y - x

    value = f(va, vb)
    ca = (a.get("_corners") or {}).get(_CORNER_METRIC.get(metric, metric)) or []
    cb = (b.get("_corners") or {}).get(_CORNER_METRIC.get(metric, metric)) or []
    if not ca or len(ca) != len(cb):
        return Comparison(value, None, None, 1, 1, "predicted: no joint band", predicted=True)
    xs = [f(x, y) for x, y in zip(ca, cb)] + [value]
    return Comparison(value, min(xs), max(xs), 1, 1, "predicted: the model's joint band", predicted=True)


def _in(c: dict, experiment: str) -> bool:
    return experiment in split_list(c.get("experiments"))


def _pick(cands: list[dict], prefer: str | None = None) -> dict | None:
    if not cands:
        return None
    return sorted(cands, key=lambda c: (not (prefer and _in(c, prefer)), -(c.get("n_ok") or 0), c["config_id"]))[0]


def _worlds(cands: list[dict]) -> str:
    ws = sorted({int(c["world_size"]) for c in cands})
    return ", ".join(map(str, ws)) if ws else "none"


def own_cluster(cfgs: list[dict]) -> list[dict]:
    """The configurations on the study's own device kind. The hardware comparison (experiment
    hardware_generations) adds configurations on another kind (paper-model's `--a100-paper`
    variants); only C4 compares kinds, every other claim is read on the study's own cluster: the
    kind most configurations of the other experiments ran on."""

    def kind(c):
        return " + ".join(split_list(c.get("device_names"))) or str(c.get("device"))

    if len({kind(c) for c in cfgs}) < 2:
        return cfgs
    beyond = [c for c in cfgs if set(split_list(c.get("experiments"))) - {"hardware_generations"}] or cfgs
    counts: dict[str, int] = {}
    for c in beyond:
        counts[kind(c)] = counts.get(kind(c), 0) + 1
    own = max(counts, key=lambda k: (counts[k], k))
    return [c for c in cfgs if kind(c) == own]


def _fsdp_7b(cfgs, local_batch=2):
    return [
        c
        for c in cfgs
        if c["model"] == MODEL_7B
        and c["layout"] == "fsdp"
        and (local_batch is None or c.get("local_batch") == local_batch)
    ]


def _ids(*cfgs) -> dict:
    cfgs = [c for c in cfgs if c]  # type: ignore[assignment]  # the tuple of arguments, filtered
    return {  # type: ignore[assignment]  # the tuple of arguments, filtered
        "config_ids": [c["config_id"] for c in cfgs],
        "run_ids": [r for c in cfgs for r in split_list(c.get("run_ids"))],
    }


def _cpu(*cfgs) -> bool:
    return any(c and c.get("device") == "cpu" for c in cfgs)


def _pct(x):
    return None if x is None else 100.0 * x


def _fmt(v, unit="%"):
    if v is None:
        return "n/a"
    return f"{v:+.2f}{unit}" if unit in ("%", " pp") else f"{v:.4g}{unit}"


@dataclass(frozen=True)
class _Basis:
    """How a row words its evidence: seeds with 95% intervals, or predictions with the model's band."""

    predicted: bool = False

    @property
    def interval(self) -> str:
        return "model band" if self.predicted else "95% CI"

    @property
    def our_interval(self) -> str:
        return "the model's band" if self.predicted else "our 95% CI"

    @property
    def intervals(self) -> str:
        return "model bands" if self.predicted else "95% intervals"

    @property
    def point(self) -> str:
        return (
            "one prediction a configuration: from its central value" if self.predicted else "one seed: from the means"
        )


SEEDS, PREDICTIONS = _Basis(False), _Basis(True)


def _basis(*things) -> _Basis:
    """PREDICTIONS when any comparison or configuration given is a prediction."""
    return (
        PREDICTIONS
        if any(getattr(t, "predicted", False) or (isinstance(t, dict) and _predicted(t)) for t in things)
        else SEEDS
    )


def _fmt_ci(lo, hi, unit="%", basis: _Basis = SEEDS):
    if lo is None:
        return "no joint band" if basis.predicted else "no CI"
    return f"{basis.interval} [{_fmt(lo, unit)}, {_fmt(hi, unit)}]"


def _stat(c: dict | None, metric: str) -> Summary:
    return from_columns(c, metric) if c else Summary(0, None, None, None, None)


def _base(cid: str, claim: str, where: str, paper: str, paper_value, unit: str, rule: str) -> dict:
    return {
        "id": cid,
        "claim": claim,
        "where": where,
        "paper": paper,
        "paper_value": paper_value,
        "unit": unit,
        "rule": RULES[rule],
        "verdict": NOT_COMPARABLE,
    }


def _why_missing(c: dict | None, metric: str, what: str) -> str | None:
    if c is None:
        return None
    if c.get(f"{metric}_mean") is None:
        if c.get("status") == "insufficient":
            return f"the {what} configuration has too few clean seeds ({c.get('error')})"
        if c.get("status") not in ("ok", "partial"):
            return f"the {what} configuration failed ({c.get('status')})"
        return f"the {what} configuration has no {metric} value"
    return None


def _numeric(row: dict, comp: Comparison, paper_value: float, cpu: bool, scale: float = 100.0) -> dict:
    ours = None if comp.value is None else comp.value * scale
    lo = None if comp.ci95_low is None else comp.ci95_low * scale
    hi = None if comp.ci95_high is None else comp.ci95_high * scale
    unit = row["unit"]
    b = _basis(comp)
    row.update(
        ours=ours,
        ours_ci95_low=lo,
        ours_ci95_high=hi,
        n_seeds=f"{comp.n_a}/{comp.n_b}",
        ours_text=f"{_fmt(ours, unit)} ({_fmt_ci(lo, hi, unit, b)})",
    )
    if ours is None:
        row["reason"] = comp.note or "no value"
        return row
    same_sign = (ours > 0) == (paper_value > 0) and ours != 0
    reasons = []
    if cpu:
        reasons.append("CPU smoke data")
    if lo is None and b.predicted:
        reasons.append(
            f"{comp.note}: no band to hold the paper's value; ours has the {'same' if same_sign else 'opposite'} sign"
        )
    elif lo is None:
        reasons.append(
            f"one seed on a side (n={comp.n_a}/{comp.n_b}): no interval to hold the paper's value; "
            f"ours has the {'same' if same_sign else 'opposite'} sign"
        )
    if reasons:
        row["reason"] = "; ".join(reasons)
        return row
    inside = lo <= paper_value <= hi  # type: ignore[operator]  # lo and hi are set when reasons is empty
    near = [  # type: ignore[operator]  # lo and hi are set when reasons is empty
        f"{name} ({_fmt(v, unit)})"
        for name, v in (("half", paper_value / 2), ("double", 2 * paper_value))
        if lo <= v <= hi  # type: ignore[operator]  # lo and hi are set when reasons is empty
    ]  # type: ignore[operator]  # lo and hi are set when reasons is empty
    wide = hi - lo > abs(paper_value)  # type: ignore[operator]  # lo and hi are set when reasons is empty
    if same_sign and inside and (near or wide):  # type: ignore[operator]  # lo and hi are set when reasons is empty
        width = f"{hi - lo:.2f} {'pp' if unit in ('%', ' pp') else unit.strip()}"  # type: ignore[operator]  # lo and hi are set when reasons is empty
        row["verdict"] = UNDECIDED  # type: ignore[operator]  # lo and hi are set when reasons is empty
        row["reason"] = (
            f"same sign, paper's {_fmt(paper_value, unit)} inside {b.our_interval}, which is {width} wide"
            + (f" and holds {' and '.join(near)} the paper's value too" if near else ", wider than the paper's value")
            + ": too wide to decide"
        )
    elif same_sign and inside:
        row["verdict"] = CONSISTENT
        row["reason"] = f"same sign, paper's {_fmt(paper_value, unit)} inside {b.our_interval}"
    else:
        row["verdict"] = NOT_CONSISTENT
        row["reason"] = ("opposite sign" if not same_sign else "same sign") + (
            f"; paper's {_fmt(paper_value, unit)} outside {b.our_interval}" if not inside else ""
        )
    return row


def _direction(comp: Comparison, positive: bool, what: str, unit: str = "%") -> tuple[str, str]:
    """('holds' | 'reversed' | 'unresolved' | 'missing', text); unit " pp" for a difference of shares."""
    if comp.value is None:
        return "missing", f"{what}: {comp.note or 'no value'}"
    want = (lambda v: v > 0) if positive else (lambda v: v < 0)
    b = _basis(comp)
    if comp.ci95_low is None:
        state = "holds" if want(comp.value) else "reversed"
        return state, f"{what}: {_fmt(_pct(comp.value), unit)} ({b.point})"
    text = f"{what}: {_fmt(_pct(comp.value), unit)} ({_fmt_ci(_pct(comp.ci95_low), _pct(comp.ci95_high), unit, b)})"
    if comp.ci95_low > 0 or comp.ci95_high < 0:  # type: ignore[operator]  # both ends are set when ci95_low is
        return ("holds" if want(comp.value) else "reversed"), text  # type: ignore[operator]  # both ends are set when ci95_low is
    return "unresolved", text


def _qualitative(row: dict, parts: list[tuple[str, str]], cpu: bool, basis: _Basis = SEEDS) -> dict:
    row["ours_text"] = "; ".join(t for s, t in parts if s != "missing") or None
    states = [s for s, _ in parts]
    if "missing" in states:
        row["reason"] = "; ".join(t for s, t in parts if s == "missing")
    elif cpu:
        row["reason"] = "CPU smoke data"
    elif "reversed" in states:
        row["verdict"] = NOT_CONSISTENT
        row["reason"] = "reversed: " + "; ".join(t for s, t in parts if s == "reversed")
    elif "unresolved" in states:
        row["reason"] = (
            ("our model band" if basis.predicted else "our 95% interval")
            + " includes no change: "
            + "; ".join(t for s, t in parts if s == "unresolved")
        )
    else:
        row["verdict"] = CONSISTENT
        one_point = basis.point in (row["ours_text"] or "")
        row["reason"] = "the stated direction holds" + (
            f" ({basis.point})" if one_point else f" with our {basis.intervals} excluding no change"
        )
    return row


# ---- the claims --------------------------------------------------------------------
def c1_c2(cfgs: list[dict]) -> list[dict]:
    out = []
    cands = _fsdp_7b(cfgs)
    a = _pick([c for c in cands if c["world_size"] == 128], "weak_scaling")
    b = _pick([c for c in cands if c["world_size"] == 2048], "weak_scaling")
    for cid, claim, metric, paper in (
        (
            "C1",
            "per-device throughput falls from 128 to 2048 GPUs (Llama-7B FSDP, local batch 2)",
            "tokens_per_s_per_device",
            -37.22,
        ),
        ("C2", "per-GPU power falls from 128 to 2048 GPUs (Llama-7B FSDP, local batch 2)", "power_w_per_gpu", -5.87),
    ):
        row = _base(cid, claim, "§4.1", f"{paper:+.2f}%", paper, "%", "numeric")
        row.update(_ids(a, b))
        if a is None or b is None:
            missing = [str(w) for w, c in ((128, a), (2048, b)) if c is None]
            row["reason"] = (
                f"no Llama-7B FSDP local-batch-2 runs at {' and '.join(missing)} GPUs "
                f"(the study has them at: {_worlds(cands)})"
            )
            out.append(row)
            continue
        why = _why_missing(a, metric, "128-GPU") or _why_missing(b, metric, "2048-GPU")
        if why:
            row["reason"] = why
            out.append(row)
            continue
        out.append(_numeric(row, _compare(a, b, metric), paper, _cpu(a, b)))
    return out


def c3(cfgs: list[dict]) -> dict:
    paper = 52.60
    row = _base(
        "C3",
        "tensor parallelism raises global WPS over the FSDP baseline at 2048 GPUs (Llama-7B)",
        "§5",
        f"{paper:+.2f}%",
        paper,
        "%",
        "numeric",
    )
    base = _pick([c for c in _fsdp_7b(cfgs) if c["world_size"] == 2048], "weak_scaling") or _pick(
        [c for c in _fsdp_7b(cfgs, None) if c["world_size"] == 2048]
    )
    tps = [c for c in cfgs if c["model"] == MODEL_7B and c["world_size"] == 2048 and c["tp"] > 1 and c["pp"] == 1]
    ok = [c for c in tps if c.get("tokens_per_s_mean") is not None]
    best = max(ok, key=lambda c: (c["tokens_per_s_mean"], c["config_id"])) if ok else None
    row.update(_ids(base, best or (tps[0] if tps else None)))
    if base is None or not tps:
        missing = ([] if base else ["no FSDP baseline"]) + ([] if tps else ["no tensor-parallel configuration"])
        row["reason"] = f"{' and '.join(missing)} of Llama-7B at 2048 GPUs"
        return row
    why = _why_missing(base, "tokens_per_s", "FSDP")
    if why or best is None:
        row["reason"] = why or f"every tensor-parallel configuration failed ({', '.join(c['status'] for c in tps)})"
        return row
    row = _numeric(row, _compare(base, best, "tokens_per_s"), paper, _cpu(base, best))
    row["ours_text"] += f"; best TP configuration: {best.get('label')}"
    return row


def _kind(c: dict) -> str | None:
    names = " ".join(split_list(c.get("device_names")))
    if "A100" in names:
        return "A100"
    if "H100" in names:
        return "H100"
    if "H200" in names:
        return "H200"
    return None


def c4(cfgs: list[dict]) -> dict:
    a100_paper, h100_paper = 59.67, 40.77
    paper = a100_paper - h100_paper
    row = _base(
        "C4",
        "MFU is higher on A100 than on H100",
        "§4.4",
        f"{a100_paper}% vs {h100_paper}% ({paper:+.2f} pp)",
        paper,
        " pp",
        "difference",
    )
    pool = [c for c in cfgs if _in(c, "hardware_generations")] or cfgs
    by_kind: dict[str, list[dict]] = {}
    for c in pool:
        if _kind(c):
            by_kind.setdefault(_kind(c), []).append(c)  # type: ignore[arg-type]  # _kind(c) checked on the line above
    hopper = "H100" if "H100" in by_kind else ("H200" if "H200" in by_kind else None)  # type: ignore[arg-type]  # _kind(c) checked on the line above
    if "A100" not in by_kind or hopper is None:
        kinds = sorted({" ".join(split_list(c.get("device_names"))) or str(c.get("device")) for c in pool})
        row["reason"] = f"the study needs runs on A100 and H100; it has: {', '.join(kinds) or 'none'}"
        return row

    def best(cs):
        ok = [c for c in cs if c.get("mfu_mean") is not None]
        return max(ok, key=lambda c: (c["mfu_mean"], c["config_id"])) if ok else None

    # one GPU count on both sides: the smallest both kinds have a value at (the fewest collectives)
    worlds = {k: {c["world_size"] for c in by_kind[k] if c.get("mfu_mean") is not None} for k in ("A100", hopper)}
    common = sorted(worlds["A100"] & worlds[hopper])
    if not common:
        row["reason"] = (
            f"no GPU count with an MFU value on both A100 ({_worlds(by_kind['A100'])}) and {hopper} "
            f"({_worlds(by_kind[hopper])}): not compared across scales"
        )
        return row
    n = common[0]
    a = best([c for c in by_kind["A100"] if c["world_size"] == n])
    h = best([c for c in by_kind[hopper] if c["world_size"] == n])
    row.update(_ids(a, h))
    row = _numeric(row, _compare(h, a, "mfu", "difference"), paper, _cpu(a, h))
    row["ours_text"] = (
        f"at {n} GPUs: A100 {100 * a['mfu_mean']:.2f}% ({a.get('label')}) vs {hopper} "
        f"{100 * h['mfu_mean']:.2f}% ({h.get('label')}): " + row["ours_text"]
    )
    if hopper == "H200":
        row["reason"] += "; H200 stands in for H100 (same compute peak, more memory bandwidth)"
    return row


def c5(cfgs: list[dict]) -> dict:
    row = _base(
        "C5",
        "beyond about 128 GPUs FSDP is communication-bound; TP or PP of degree 2 to 4 recovers throughput",
        "§4.3",
        "qualitative",
        None,
        "",
        "qualitative",
    )
    fsdp = [c for c in _fsdp_7b(cfgs, None) if c.get("exposed_comm_share_mean") is not None]
    small = [c for c in fsdp if c["world_size"] <= 128]
    large = [c for c in fsdp if c["world_size"] > 128]
    parts = []
    used = []
    if not small or not large:
        parts.append(
            (
                "missing",
                f"exposed communication of Llama-7B FSDP needs traced runs at and below 128 GPUs "
                f"and above (traced at: {_worlds(fsdp)})",
            )
        )
    else:
        a = _pick([c for c in small if c["world_size"] == max(x["world_size"] for x in small)], "kernel_breakdown")
        b = _pick([c for c in large if c["world_size"] == max(x["world_size"] for x in large)], "kernel_breakdown")
        used += [a, b]
        parts.append(
            _direction(
                _compare(a, b, "exposed_comm_share", "difference"),
                True,
                f"FSDP exposed-communication share {a['world_size']} -> {b['world_size']} GPUs (change in share)",  # type: ignore[index]  # the candidates are non-empty, so _pick gives one
                " pp",  # type: ignore[index]  # the candidates are non-empty, so _pick gives one
            )
        )
    recovered = None
    for w in sorted({c["world_size"] for c in cfgs if c["world_size"] > 128 and c["model"] == MODEL_7B}, reverse=True):
        base = _pick([c for c in _fsdp_7b(cfgs, None) if c["world_size"] == w and c.get("tokens_per_s_mean")])
        mp = [
            c
            for c in cfgs
            if c["model"] == MODEL_7B
            and c["world_size"] == w
            and c.get("tokens_per_s_mean")
            and (2 <= c["tp"] <= 4 or 2 <= c["pp"] <= 4)
        ]
        if base and mp:
            best = max(mp, key=lambda c: (c["tokens_per_s_mean"], c["config_id"]))
            used += [base, best]
            recovered = _direction(
                _compare(base, best, "tokens_per_s"),
                True,
                f"best TP/PP of degree 2-4 ({best.get('label')}) over FSDP at {w} GPUs",
            )
            break
    parts.append(recovered or ("missing", "no Llama-7B FSDP and TP/PP (degree 2-4) pair with values above 128 GPUs"))
    row.update(_ids(*used))
    return _qualitative(row, parts, _cpu(*used), _basis(*used))


def c6(tables) -> dict:
    row = _base(
        "C6",
        "AllReduce bandwidth holds up with node count better than AllGather/ReduceScatter",
        "§2.2",
        "qualitative",
        None,
        "",
        "qualitative",
    )
    rows = records(tables.collectives_summary)
    nodes = sorted({int(r["nodes"]) for r in rows})
    ops = {r["op"] for r in rows}
    ring = [o for o in ("all_gather", "reduce_scatter") if o in ops]
    if len(nodes) < 2 or "all_reduce" not in ops or not ring:
        row["reason"] = (
            f"needs all_reduce and all_gather/reduce_scatter at two or more node counts "
            f"(the study has ops: {', '.join(sorted(ops)) or 'none'}; nodes: "
            f"{', '.join(map(str, nodes)) or 'none'})"
        )
        return row
    lo_n, hi_n = nodes[0], nodes[-1]
    basis = PREDICTIONS if any("PREDICTED" in str(r.get("note") or "") for r in rows) else SEEDS
    retention: dict[str, Comparison] = {}
    used_runs: list[str] = []
    texts = []
    for op in ["all_reduce"] + ring:
        at = {
            n: {int(r["size_bytes"]): r for r in rows if r["op"] == op and int(r["nodes"]) == n} for n in (lo_n, hi_n)
        }
        common_sizes = sorted(set(at[lo_n]) & set(at[hi_n]))
        if not common_sizes:
            continue
        size = common_sizes[-1]
        a, b = at[lo_n][size], at[hi_n][size]
        retention[op] = relative_change(from_columns(a, "busbw_GBps"), from_columns(b, "busbw_GBps"))
        used_runs += split_list(a.get("run_ids")) + split_list(b.get("run_ids"))
        r = retention[op]
        texts.append(
            f"{op} keeps {100 * (1 + r.value):.1f}% of its {lo_n}-node busbw at {hi_n} nodes "  # type: ignore[operator]  # value is set on a comparison of two measurements
            f"({size} B"  # type: ignore[operator]  # value is set on a comparison of two measurements
            + (
                f", {basis.interval} {100 * (1 + r.ci95_low):.1f}-{100 * (1 + r.ci95_high):.1f}%)"  # type: ignore[operator]  # both ends are set when ci95_low is
                if r.ci95_low is not None  # type: ignore[operator]  # both ends are set when ci95_low is
                else ")"
                if basis.predicted
                else ", one seed)"
            )
        )
    row["run_ids"] = sorted(set(used_runs))
    ring = [o for o in ring if o in retention]
    if "all_reduce" not in retention or not ring:
        row["reason"] = "no message size common to both node counts"
        return row
    ar = retention["all_reduce"]
    parts = []
    for op in ring:
        rg = retention[op]
        diff = ar.value - rg.value  # type: ignore[operator]  # value is set on a comparison of two measurements
        if ar.ci95_low is None or rg.ci95_low is None:  # type: ignore[operator]  # value is set on a comparison of two measurements
            state, how = ("holds" if diff > 0 else "reversed"), f" ({basis.point})"
        elif ar.ci95_low > rg.ci95_high or ar.ci95_high < rg.ci95_low:  # type: ignore[operator]  # both ends are set when ci95_low is
            state, how = ("holds" if diff > 0 else "reversed"), f" ({basis.intervals} separated)"  # type: ignore[operator]  # both ends are set when ci95_low is
        else:
            state, how = "unresolved", f" ({basis.intervals} overlap)"
        parts.append((state, f"all_reduce minus {op} retention: {100 * diff:+.1f} pp{how}"))
    row["ours"] = 100 * min(ar.value - retention[o].value for o in ring)  # type: ignore[operator]  # value is set on a comparison of two measurements
    row["unit"] = " pp"  # type: ignore[operator]  # value is set on a comparison of two measurements
    cpu = any(r.get("device") == "cpu" for r in rows)
    row = _qualitative(row, parts, cpu, basis)
    row["ours_text"] = "; ".join(texts) + " | " + row["ours_text"]
    return row


def c7(cfgs: list[dict]) -> dict:
    row = _base(
        "C7", "tokens per watt fall as GPUs are added (FSDP)", "§4, Fig 10", "qualitative", None, "", "qualitative"
    )
    pool = [c for c in cfgs if c["layout"] == "fsdp" and _in(c, "power")] or [
        c for c in cfgs if c["layout"] == "fsdp" and c.get("tokens_per_joule_mean") is not None
    ]
    models = sorted({c["model"] for c in pool}, key=lambda m: (m != MODEL_7B, m))
    pool = [c for c in pool if models and c["model"] == models[0]]
    worlds = sorted({c["world_size"] for c in pool})
    if len(worlds) < 2:
        row["reason"] = f"FSDP power runs at two or more GPU counts are needed (the study has: {_worlds(pool)})"
        return row
    a = _pick([c for c in pool if c["world_size"] == worlds[0]], "power")
    b = _pick([c for c in pool if c["world_size"] == worlds[-1]], "power")
    row.update(_ids(a, b))
    why = _why_missing(a, "tokens_per_joule", f"{worlds[0]}-GPU") or _why_missing(
        b, "tokens_per_joule", f"{worlds[-1]}-GPU"
    )
    if why:
        row["reason"] = why + ("; no GPU power data (CPU run)" if _cpu(a, b) else "")
        return row
    comp = _compare(a, b, "tokens_per_joule")
    row.update(ours=_pct(comp.value), ours_ci95_low=_pct(comp.ci95_low), ours_ci95_high=_pct(comp.ci95_high))
    row["unit"] = "%"
    row["n_seeds"] = f"{comp.n_a}/{comp.n_b}"
    return _qualitative(
        row,
        [_direction(comp, False, f"{a['model']} FSDP tokens per joule {worlds[0]} -> {worlds[-1]} GPUs")],  # type: ignore[index]  # the candidates are non-empty, so _pick gives one
        _cpu(a, b),  # type: ignore[index]  # the candidates are non-empty, so _pick gives one
        _basis(comp),
    )


def hsdp(cfgs: list[dict]) -> list[dict]:
    out = []
    for w in (256, 2048):
        row = _base(
            f"HSDP-{w}",
            f"HSDP (shard in a node, replicate across) against the best TP/PP at {w} GPUs (Llama-7B, local batch 2)",
            "critics; App. A",
            "not reported",
            None,
            "%",
            "question",
        )
        h = _pick(
            [
                c
                for c in cfgs
                if c["model"] == MODEL_7B
                and c["world_size"] == w
                and c["layout"].startswith("hsdp")
                and c["tp"] == 1
                and c["pp"] == 1
            ]
        )
        mp = [
            c
            for c in cfgs
            if c["model"] == MODEL_7B
            and c["world_size"] == w
            and (c["tp"] > 1 or c["pp"] > 1)
            and c.get("tokens_per_s_mean") is not None
        ]
        best = max(mp, key=lambda c: (c["tokens_per_s_mean"], c["config_id"])) if mp else None
        fsdp = _pick([c for c in _fsdp_7b(cfgs) if c["world_size"] == w])
        row.update(_ids(h, best, fsdp))
        if h is None:
            row["reason"] = f"no Llama-7B HSDP run at {w} GPUs; the paper reports no HSDP number either"
            out.append(row)
            continue
        texts = []
        if best is not None:
            comp = _compare(best, h, "tokens_per_s")
            row.update(
                ours=_pct(comp.value),
                ours_ci95_low=_pct(comp.ci95_low),
                ours_ci95_high=_pct(comp.ci95_high),
                n_seeds=f"{comp.n_a}/{comp.n_b}",
            )
            texts.append(
                f"HSDP vs best TP/PP ({best.get('label')}): {_fmt(_pct(comp.value))} "
                f"({_fmt_ci(_pct(comp.ci95_low), _pct(comp.ci95_high), '%', _basis(comp))})"
            )
        else:
            texts.append("no TP/PP configuration with a value to compare with")
        if fsdp is not None:
            comp = _compare(fsdp, h, "tokens_per_s")
            texts.append(
                f"HSDP vs FSDP: {_fmt(_pct(comp.value))} "
                f"({_fmt_ci(_pct(comp.ci95_low), _pct(comp.ci95_high), '%', _basis(comp))})"
            )
        row["ours_text"] = "; ".join(texts)
        row["reason"] = "the paper reports no HSDP number (deferred to App. A)" + (
            "; CPU smoke data" if _cpu(h, best, fsdp) else ""
        )
        out.append(row)
    return out


def evaluate(tables, inputs: str = MODEL_ALONE) -> list[dict]:
    """Every claim's row, in the order C1..C7, HSDP-256, HSDP-2048, read from the configurations of
    `inputs` (inputs_view)."""
    cfgs = _configs(tables, inputs)
    own = own_cluster(cfgs)
    rows = c1_c2(own) + [c3(own), c4(cfgs), c5(own), c6(tables), c7(own)] + hsdp(own)
    rows += scale_claims.evaluate(tables, cfgs)
    predicted = {c["config_id"] for c in cfgs if _predicted(c)}
    predicted_runs = {rid for c in cfgs if _predicted(c) for rid in split_list(c.get("run_ids"))}
    for c in records(tables.collectives_summary):
        if "PREDICTED" in str(c.get("note") or ""):
            predicted_runs.update(split_list(c.get("run_ids")))
    for r in rows:
        if (set(r.get("config_ids") or []) & predicted) or (set(r.get("run_ids") or []) & predicted_runs):
            reason = r.get("reason") or ""
            r["reason"] = PREDICTED_REASON + ("; " + reason if reason else "")
            r["n_seeds"] = PREDICTED
            kind = next((k for k, v in RULES.items() if v == r.get("rule")), None)
            if kind:
                r["rule"] = PREDICTED_RULES[kind]
    # seeds the summary left out (contaminated, outliers): listed with why in every claim they touch
    left_out = {c["config_id"]: split_list(c.get("left_out")) for c in cfgs}
    for r in rows:
        flagged = [f"{cid}: {n}" for cid in (r.get("config_ids") or []) for n in left_out.get(cid, [])]
        r["left_out"] = flagged
        if flagged:
            n = len(flagged)
            r["reason"] = "; ".join(
                [x for x in [r.get("reason")] if x]
                + [f"{n} seed{'s' if n > 1 else ''} left out (column left_out says which and why)"]
            )
    # a predicted configuration that takes a measured input with a known artefact: said in every claim it is behind
    caveats = {c["config_id"]: [n for n in split_list(c.get("notes")) if n.startswith(CAVEAT_PREFIX)] for c in cfgs}
    config_of = {rid: c["config_id"] for c in cfgs for rid in split_list(c.get("run_ids"))}
    for r in rows:
        cids = list(r.get("config_ids") or []) + [config_of[x] for x in r.get("run_ids") or [] if x in config_of]
        said = list(dict.fromkeys(n for cid in cids for n in caveats.get(cid, [])))
        if said:
            r["reason"] = "; ".join(
                [x for x in [r.get("reason")] if x] + [CAVEAT_REASON + n.removeprefix(CAVEAT_PREFIX) for n in said]
            )
    weakened = {c["config_id"]: [n for n in split_list(c.get("notes")) if n.startswith(WEAKENED_NOTE)] for c in cfgs}
    for r in rows:
        cids = list(r.get("config_ids") or []) + [config_of[x] for x in r.get("run_ids") or [] if x in config_of]
        said = list(dict.fromkeys(n for cid in dict.fromkeys(cids) for n in weakened.get(cid, [])))
        if said:
            kinds = sorted({weakened_kind(n) for n in said})
            r["reason"] = "; ".join(
                [x for x in [r.get("reason")] if x]
                + [
                    f"{len(said)} seed{'s' if len(said) > 1 else ''} {WEAKENED_NOTE} "
                    f"({', '.join(kinds)}): scalestudy audit --strict refuses them"
                ]
            )
    if inputs == WITH_MEASURED:
        for r in rows:
            mixed_inputs(r)
    basis = (getattr(tables, "claim_basis", None) or {}).get("rests_on") or {}
    for r in rows:  # a predicted claim names what it rests on (perfmodel.sensitivity.rests_on)
        r["rests_on"] = basis.get(r["id"])
    for r in rows:
        r["inputs"] = inputs if predicted else None
        for k in CLAIM_COLUMNS:
            r.setdefault(k, None)
        for k in ("ours", "ours_ci95_low", "ours_ci95_high"):
            if isinstance(r[k], float) and math.isnan(r[k]):
                r[k] = None
    return rows


def mixed_inputs(row: dict) -> None:
    """A claim with measured inputs compares like with like: where some of its configurations take a
    measured rank share and others the model alone, it is not comparable, and says which is which."""
    cids = list(row.get("config_ids") or [])
    measured = [c for c in cids if measured_base(c)]
    alone = [c for c in cids if not measured_base(c)]
    if not measured or not alone or row.get("verdict") == NOT_COMPARABLE and not row.get("ours_text"):
        return
    row["verdict"] = NOT_COMPARABLE
    row["reason"] = "; ".join(x for x in [row.get("reason")] if x) + (
        f"; NOT COMPARABLE: mixes input kinds: {', '.join(f'`{c}`' for c in measured)} take a measured rank share, "
        f"{', '.join(f'`{c}`' for c in alone)} the model alone (the headline column compares like with like)"
    )


def c3_section(tables) -> list[str]:
    """C3 taken apart (a prediction study's c3_terms.csv and claim_basis.json): the step of FSDP and of
    the best TP layout at 2048 GPUs term by term, which single input brings C3 to the paper's value
    and C1 there, and whether any corner of the inputs meets C1 and C3 together."""
    terms = getattr(tables, "c3_terms", None)
    basis = getattr(tables, "claim_basis", None) or {}
    if terms is None or not len(terms):
        return []
    rows = records(terms)
    layouts = list(dict.fromkeys(r["layout"] for r in rows))
    names = list(dict.fromkeys(r["term"] for r in rows))
    value = {(r["layout"], r["term"]): float(r["seconds"]) for r in rows}
    label = {r["layout"]: r["label"] for r in rows}
    out = [
        "",
        "## C3 taken apart (predicted, the model alone)",
        "",
        "The step of FSDP and of the best TP layout at 2048 GPUs (Llama-2 7B, local batch 2), seconds; the "
        "terms overlap (exposed communication is what the computation does not hide), so they need not add up "
        "to the step.",
        "",
        "| term | " + " | ".join(f"{lay} ({label[lay]})" for lay in layouts) + " |",
        "|---|" + "---|" * len(layouts),
    ]
    for t in names:
        out.append(f"| {t} | " + " | ".join(f"{value.get((lay, t), 0.0):.4f}" for lay in layouts) + " |")
    search = basis.get("c3_search") or {}
    paper = basis.get("paper") or {}
    if search.get("single"):
        out += [
            "",
            f"Which single input brings C3 to the paper's {paper.get('C3', 52.6):+.1f}% (searched from x1/16 "
            "to x16 of its value), and C1 there (paper " + f"{paper.get('C1', -37.22):+.2f}%):",
            "",
        ]
        for r in search["single"]:
            out.append(
                f"- {r['latency model']} latency, {r['input']}: "
                + (
                    "no value in the range reaches it"
                    if r.get("factor") is None
                    else f"x{r['factor']:.3f} gives C3 {r['C3']:+.1f}% with C1 {r['C1']:+.1f}%"
                )
            )
    joint = search.get("joint")
    if joint:
        c, top = joint["closest"], joint["largest_c3"]
        tg = joint.get("targets_pp", {})
        verdict = "none of them" if not joint["meeting_both"] else f"{len(joint['meeting_both'])} of them"
        out += [
            "",
            f"Both together: of the {joint['corners']} corners of the inputs (network latency x0.5/1/1.5 "
            "under either latency model, network bandwidth, computation time and the overlap slowdown at their "
            f"band corners), {verdict} put C1 within {tg.get('C1', 10):g} pp and C3 within {tg.get('C3', 15):g} pp "
            f"of the paper's values. The closest: C1 {c['C1']:+.1f}% and C3 {c['C3']:+.1f}% ({c['latency model']} "
            f"latency x{c['latency']:g}); the largest C3, {top['C3']:+.1f}%, comes with C1 {top['C1']:+.1f}%."
            + (
                ""
                if joint["meeting_both"]
                else " The paper's C1 and C3 together are not consistent with the "
                "modelled mechanisms: a C3 of +52.6% needs FSDP's loss at 2048 GPUs to come from something TP "
                "removes that the model lacks (e.g. congestion or jitter that grows with a ring's length but not "
                "with a tree's or a TP group's), or compute at a fraction of what the H200 calibration says."
            ),
        ]
    return out


REASON_SEP = "; "
SHARED_REASON_ROWS = 3  # a part of a reason that this many rows give, or more, is written once above the table
SHARED_REASON_WORDS = 10  # if it is at least this long


def shared_reasons(reasons: list[str | None]) -> dict[str, str]:
    """The parts of the reasons (split at REASON_SEP) that at least SHARED_REASON_ROWS of them give and
    that have at least SHARED_REASON_WORDS words, each with its number (1, 2, ...), in order of first use."""
    counts: dict[str, int] = {}
    for r in reasons:
        for part in dict.fromkeys(str(r or "").split(REASON_SEP)):
            if part and part != PREDICTED_REASON and len(part.split()) >= SHARED_REASON_WORDS:
                counts[part] = counts.get(part, 0) + 1
    common = [part for part, n in counts.items() if n >= SHARED_REASON_ROWS]
    return {part: str(i) for i, part in enumerate(common, start=1)}


def markdown(rows: list[dict], study, measured: list[dict] | None = None, tables=None) -> str:
    def cell(v):
        return format_value(v).replace("|", "\\|").replace("\n", " ")

    shared = shared_reasons([r.get("reason") for r in [*rows, *(measured or [])]])

    def reason(v):  # what a note above the table says once, a word in each row
        parts = str(v or "").replace(PREDICTED_REASON, "PREDICTED (see above)").split(REASON_SEP)
        return cell(REASON_SEP.join(f"note {shared[x]} (above)" if x in shared else x for x in parts))

    predicted = any(r.get("n_seeds") == PREDICTED or PREDICTED_REASON in (r.get("reason") or "") for r in rows)
    lines = [
        f"# Claims of arXiv 2411.13055 against study `{study.name}`",
        "",
        f"Hardware: {study.hardware}. Recomputed from the study's tables by `scalestudy claims` "
        f"(`{code_version()}`); ours: "
        + (
            "the model's prediction with its band."
            if predicted
            else "the value with its 95% confidence interval over seeds."
        ),
        "",
    ]
    if predicted:
        lines += [
            "**PREDICTED by scalestudy.perfmodel, not measured**: rows marked PREDICTED compare model "
            "predictions with the paper; their interval is the model's band (both sides at the same corner "
            "of its uncertainty box), which takes the place of the 95% CI in the rules below.",
            "",
        ]
    caveated = [r["id"] for r in rows if CAVEAT_REASON in (r.get("reason") or "")]
    if caveated:
        lines += [
            f"**CAVEAT**: {', '.join(caveated)} {'rests' if len(caveated) == 1 else 'rest'} on a measured input "
            "with a known artefact (the reason says which and why); the number is used as measured and the "
            "verdict is computed as for any other row.",
            "",
        ]
    if any("CPU smoke data" in (r.get("reason") or "") for r in rows):
        lines += ["**CPU smoke data — not comparable to the paper.**", ""]
    if shared:
        lines += ["**Notes the reasons refer to** (each given by several rows):", ""]
        lines += [f"- note {mark}: {cell(text)}" for text, mark in shared.items()]
        lines += [""]
    if measured:
        shares = (getattr(study, "prediction", None) or {}).get("rank_shares") or "its rank-share study"
        lines += [
            f"**Both ways**: each claim is given from the model alone and {WITH_MEASURED}: a configuration "
            f"whose rank share study `{shares}` measured is predicted with that share's compute and memory, "
            "the others as in the headline. The headline is the model alone: "
            f"{HEADLINE_WHY}.",
            "",
        ]
        lines += [
            f"| id | claim | paper | ours, {MODEL_ALONE} (headline) | verdict | ours, {WITH_MEASURED} | verdict "
            "| reason |",
            "|---|---|---|---|---|---|---|---|",
        ]
        by_id = {r["id"]: r for r in measured}
        for r in rows:
            m = by_id.get(r["id"]) or {}
            same = m.get("config_ids") == r.get("config_ids")
            lines.append(
                f"| {r['id']} | {cell(r['claim'])} ({cell(r['where'])}) | {cell(r['paper'])} | "
                f"{cell(r['ours_text'] or 'n/a')} | **{r['verdict']}** | "
                f"{'the same: no measured input' if same else cell(m.get('ours_text') or 'n/a')} | "
                f"{'' if same else '**' + str(m.get('verdict')) + '**'} | {reason(r['reason'])} |"
            )
    else:
        lines += ["| id | claim | paper | ours | verdict | reason |", "|---|---|---|---|---|---|"]
        for r in rows:
            lines.append(
                f"| {r['id']} | {cell(r['claim'])} ({cell(r['where'])}) | {cell(r['paper'])} | "
                f"{cell(r['ours_text'] or 'n/a')} | **{r['verdict']}** | {reason(r['reason'])} |"
            )
    if measured:
        lines += ["", f"## Reasons, {WITH_MEASURED}", ""]
        for r, m in zip(rows, measured):
            if m.get("config_ids") != r.get("config_ids"):
                lines.append(
                    f"- **{m['id']}**: {reason(m['reason'])} (configurations: "
                    f"{', '.join(f'`{c}`' for c in m.get('config_ids') or [])})"
                )
    lines += c3_section(tables)
    if any(r.get("rests_on") for r in rows):
        lines += ["", "## What each claim rests on", ""]
        lines += [f"- **{r['id']}**: {cell(r['rests_on'])}" for r in rows if r.get("rests_on")]
    lines += ["", "## Comparison rules", ""]
    for r in rows:
        lines.append(f"- **{r['id']}**: {r['rule']}.")
    lines += ["", "## Runs behind each claim", ""]
    for r in rows:
        ids = r.get("run_ids") or []
        lines.append(
            f"- **{r['id']}**: {', '.join(f'`{i}`' for i in ids) if ids else 'none'}"
            + (f"; left out: {cell('; '.join(r['left_out']))}" if r.get("left_out") else "")
        )
    return "\n".join(lines) + "\n"


def write_claims(tables, study, out_dir: Path | str | None = None) -> list[Path]:
    out = Path(out_dir) if out_dir is not None else Path(study.figures_dir)
    rows = evaluate(tables)
    measured = evaluate(tables, WITH_MEASURED) if has_measured_inputs(tables) else None
    csv_path = write_csv(out / CLAIMS_CSV, CLAIM_COLUMNS, rows + (measured or []))
    md_path = out / CLAIMS_MD
    text = markdown(rows, study, measured, tables)
    atomic_write_text(md_path, text)
    html_path = out / CLAIMS_HTML
    atomic_write_text(html_path, to_html(text, title=f"Claims against study {study.name}"))
    return [csv_path, md_path, html_path]


def claims(study, tables=None, out_dir: Path | str | None = None) -> list[Path]:
    """Write claims.csv and claims.md (default: in study.figures_dir, next to the figures, from the
    tables in study.tables_dir)."""
    tables = tables if tables is not None else load_tables(study.tables_dir)
    return write_claims(tables, study, out_dir)
