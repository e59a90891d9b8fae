"""Claims of a study of public large-scale runs (experiment `step_time_microbatches`, e.g. mlperf),
reported beside the paper's C1-C7 by the same rules of evidence (95% intervals over the repeated
runs), with no paper number of their own to be consistent with:

D-<family>  the per-device throughput from the smallest to the largest scale of a family (the
            relative change of the seed means, delta method on the log ratio, Welch df), to read
            beside the paper's C1 (-37.22%, Llama-2 7B FSDP from 128 to 2048 GPUs: another model,
            layout and global batch), with the performance model's decline beside it;
F-<family>  the per-step fixed cost of the family: the intercept of a least-squares line of step
            time against micro-batches per step over every run (figure step_time_microbatches), and
            the model's own intercept taken apart into its terms (pipeline fill and drain, optimizer
            and copies, data-parallel waits);
M-<family>  the performance model against the family's measurements where it predicts them
            (model_beside.csv, nothing fitted to them): |error| median and largest, and the
            decline's error, against the targets of MODEL_TARGETS.
A family is named <model>@<system> (the machine its runs name), with the series' distinguishing
fields after it where one system ran a model in more than one way.
"""

from __future__ import annotations

import statistics

from scalestudy.analysis.figures import step_time_microbatches as stm
from scalestudy.analysis.figures.prepare import _truthy, as_int, config_spec, records, shown_names, specs_by_config
from scalestudy.analysis.linear_fit import fit_line
from scalestudy.analysis.stats import from_columns, relative_change
from scalestudy.measure.csv_format import split_list

REPORT_RULE = (
    "reported, not judged: no paper number of this configuration (read it beside C1); ours with its 95% "
    "interval over the repeated runs (relative change: delta method on the log ratio of seed means, "
    "Welch df; fixed cost: the intercept of a least-squares line over every run, Student-t, n-2 df)"
)
C1_PAPER = "C1: -37.22% (Llama-2 7B FSDP, 128 to 2048 GPUs)"
# the model against a family of public runs: median |error| per point, largest |error|, the decline's error
MODEL_TARGETS = {"median": 0.10, "max": 0.20, "decline_pp": 5.0}
MODEL_RULE = (
    "the performance model against the family's measured seed means, nothing fitted to them: consistent "
    f"when the median absolute error per point is at most {MODEL_TARGETS['median']:.0%}, the largest at most "
    f"{MODEL_TARGETS['max']:.0%} and, with two scales or more, the smallest-to-largest decline within "
    f"{MODEL_TARGETS['decline_pp']:g} pp of the measured one; not consistent otherwise; not comparable where "
    "the model cannot express the family (named in the reason)"
)


def applies(cfgs: list[dict]) -> bool:
    return any(stm.NAME in split_list(c.get("experiments")) for c in cfgs)


def _row(cid: str, claim: str, paper: str, unit: str) -> dict:
    return {
        "id": cid,
        "claim": claim,
        "where": "§4.1, public runs",
        "paper": paper,
        "paper_value": None,
        "unit": unit,
        "rule": REPORT_RULE,
        "verdict": "not comparable",
    }


def _ids(cfgs: list[dict]) -> dict:
    return {
        "config_ids": [c["config_id"] for c in cfgs],
        "run_ids": [r for c in cfgs for r in split_list(c.get("run_ids"))],
    }


ID_FIELDS = ("precision", "tp", "cp", "pp", "pp_stages_per_rank", "micro_batch", "seq_len")


def family_ids(names: dict[str, str], specs: dict[str, dict]) -> dict[str, str]:
    """A short id a family (series name): <model>@<system>, and where one system ran a model in more
    than one way, the run-spec fields in which those families differ (e.g. /precision=nvfp4)."""
    first: dict[str, dict] = {}
    for cid, name in sorted(names.items(), key=lambda kv: kv[1]):
        first.setdefault(name, specs.get(cid) or {})
    base = {n: f"{s.get('model')}@{s.get('system') or 'this package'}" for n, s in first.items()}
    out = {}
    for name, b in base.items():
        peers = [first[n] for n, other in base.items() if other == b]
        differ = [f for f in ID_FIELDS if len({str(p.get(f)) for p in peers}) > 1]
        out[name] = b + "".join(f"/{f}={first[name].get(f)}" for f in differ)
    return out


def _beside(tables) -> dict[str, dict]:
    beside = getattr(tables, "model_beside", None)
    return {r["config_id"]: r for r in records(beside)} if beside is not None and len(beside) else {}


def _predicted(b: dict | None) -> float | None:
    if not b or not _truthy(b.get("expressible")) or b.get("tokens_per_s_per_device") in (None, ""):
        return None
    return float(b["tokens_per_s_per_device"])


def decline_rows(tables, cfgs: list[dict]) -> list[dict]:
    mine = [c for c in cfgs if stm.NAME in split_list(c.get("experiments"))]
    specs = specs_by_config(tables)
    names = shown_names({c["config_id"]: config_spec(c, specs) for c in mine})
    ids = family_ids(names, specs)
    beside = _beside(tables)
    out = []
    for name in sorted(set(names.values())):
        family = sorted((c for c in mine if names[c["config_id"]] == name), key=lambda c: as_int(c.get("world_size")))
        a, b = family[0], family[-1]
        row = _row(
            f"D-{ids[name]}",
            f"per-device throughput from the smallest to the largest published scale ({name}; "
            f"{as_int(a.get('world_size'))} to {as_int(b.get('world_size'))} GPUs)",
            C1_PAPER,
            "%",
        )
        row.update(_ids([a, b]))
        if len(family) < 2:
            row["reason"] = "one scale only"
            out.append(row)
            continue
        comp = relative_change(from_columns(a, "tokens_per_s_per_device"), from_columns(b, "tokens_per_s_per_device"))
        ours = None if comp.value is None else 100 * comp.value
        lo = None if comp.ci95_low is None else 100 * comp.ci95_low
        hi = None if comp.ci95_high is None else 100 * comp.ci95_high
        row.update(
            ours=ours,
            ours_ci95_low=lo,
            ours_ci95_high=hi,
            n_seeds=f"{comp.n_a}/{comp.n_b}",
            ours_text="n/a"
            if ours is None
            else (f"{ours:+.2f}% (95% CI [{lo:+.2f}%, {hi:+.2f}%])" if lo is not None else f"{ours:+.2f}% (no CI)"),
            reason=(
                f"{a.get('tokens_per_s_per_device_mean'):.1f} to {b.get('tokens_per_s_per_device_mean'):.1f} "
                "tokens/s per device; another model, layout and batch than the paper's C1, so not judged"
                if ours is not None
                else comp.note or "no value"
            ),
        )
        pa, pb = _predicted(beside.get(a["config_id"])), _predicted(beside.get(b["config_id"]))
        if ours is not None and pa and pb:
            row["reason"] += f"; the model: {100 * (pb / pa - 1):+.2f}% ({pa:.1f} to {pb:.1f}, M-{ids[name]})"
        out.append(row)
    return out


def model_rows(tables, cfgs: list[dict]) -> list[dict]:
    """M-<family>: the model's error against each family it predicts, beside the measurements."""
    beside = _beside(tables)
    if not beside:
        return []
    specs = specs_by_config(tables)
    mine = [c for c in cfgs if c["config_id"] in beside and c.get("tokens_per_s_per_device_mean") not in (None, "")]
    names = shown_names({c["config_id"]: config_spec(c, specs) for c in mine})
    ids = family_ids(names, specs)
    out = []
    for name in sorted(set(names.values())):
        family = sorted((c for c in mine if names[c["config_id"]] == name), key=lambda c: as_int(c.get("world_size")))
        row = {
            **_row(
                f"M-{ids[name]}",
                f"the performance model against the family's measured throughput ({name}; "
                f"{len(family)} scale{'s' if len(family) > 1 else ''})",
                "not in the paper",
                "%",
            ),
            "rule": MODEL_RULE,
            **_ids(family),
        }
        pts = [(c, _predicted(beside[c["config_id"]]), float(c["tokens_per_s_per_device_mean"])) for c in family]
        errs = [p / m - 1 for _, p, m in pts if p is not None]
        if not errs:
            why = sorted({str(beside[c["config_id"]].get("reason") or "not predicted") for c in family})
            row.update(reason="; ".join(why))
            out.append(row)
            continue
        med = statistics.median(abs(e) for e in errs)
        worst = max(abs(e) for e in errs)
        ok = med <= MODEL_TARGETS["median"] and worst <= MODEL_TARGETS["max"]
        points = ", ".join(
            f"{as_int(c.get('world_size'))}: {m:.0f} measured, {p:.0f} predicted ({100 * (p / m - 1):+.1f}%)"
            if p is not None
            else f"{as_int(c.get('world_size'))}: {m:.0f} measured, not predicted"
            for c, p, m in pts
        )
        decline = ""
        (_, pa, ma), (_, pb, mb) = pts[0], pts[-1]
        if len(pts) > 1 and pa and pb:
            dm, dp = 100 * (mb / ma - 1), 100 * (pb / pa - 1)
            ok = ok and abs(dp - dm) <= MODEL_TARGETS["decline_pp"]
            decline = f"; decline {dm:+.1f}% measured, {dp:+.1f}% predicted ({dp - dm:+.1f} pp)"
        row.update(
            ours=100 * med,
            n_seeds=f"{len(errs)} points",
            ours_text=f"median absolute error {100 * med:.1f}%, largest {100 * worst:.1f}%",
            verdict="consistent" if ok else "not consistent",
            reason=f"tokens/s per GPU: {points}{decline}",
        )
        out.append(row)
    return out


# the parts of a predicted step whose intercepts (against micro-batches a step) take the model's fixed cost apart
FIXED_TERMS = (
    ("bubble_s", "pipeline fill and drain"),
    ("tail_s", "optimizer and copies after the last pass"),
    ("dp_wait_s", "waits on data-parallel collectives"),
)


def model_fixed_cost(mine: list[dict], specs: dict[str, dict], beside: dict[str, dict]) -> str | None:
    """The model's own line through the family's predicted steps, its intercept taken apart by term
    (each term's own line; the rest is what the per-micro-batch terms leave at zero micro-batches)."""
    pts = [
        (stm.microbatches(specs[c["config_id"]]), beside[c["config_id"]])
        for c in mine
        if _predicted(beside.get(c["config_id"])) is not None
    ]
    if len({x for x, _ in pts}) < 2:
        return None
    xs = [x for x, _ in pts]
    step = fit_line(xs, [float(b["step_time_s"]) for _, b in pts])
    parts = []
    for key, what in FIXED_TERMS:
        ys = [b.get(key) for _, b in pts]
        if all(y not in (None, "") for y in ys):
            parts.append((what, fit_line(xs, [float(y) for y in ys]).intercept))  # type: ignore[arg-type]  # all() checked none is None
    rest = step.intercept - sum(v for _, v in parts)
    return (
        f"the model's line: {step.intercept:.3f} s + {1e3 * step.slope:.1f} ms per micro-batch, its intercept "
        + ", ".join(f"{what} {v:.3f} s" for what, v in parts)
        + f", the rest {rest:+.3f} s"
    )


def fixed_cost_rows(tables) -> list[dict]:
    out = []
    fits = stm.fits(tables)
    specs = specs_by_config(tables)
    ids = family_ids({c["config_id"]: name for name, (_, mine) in fits.items() for c in mine}, specs)
    beside = _beside(tables)
    for name, (f, mine) in fits.items():
        row = _row(
            f"F-{ids[name]}",
            f"per-step fixed cost: intercept of step time against micro-batches per step ({name})",
            "not in the paper",
            " s",
        )
        row.update(_ids(mine))
        lo, hi = f.intercept_ci95 or (None, None)
        model = model_fixed_cost(mine, specs, beside) if beside else None
        row.update(
            ours=f.intercept,
            ours_ci95_low=lo,
            ours_ci95_high=hi,
            n_seeds=f"{f.n} runs",
            ours_text=stm.fit_text(name, f).split(": ", 1)[1],
            reason="a line through every run; the slope is the time of one micro-batch, the intercept what a "
            "step costs however few micro-batches it runs (pipeline fill and drain, data-parallel "
            "exchange, optimizer)" + (f"; {model}" if model else ""),
        )
        out.append(row)
    return out


def evaluate(tables, cfgs: list[dict]) -> list[dict]:
    if not applies(cfgs):
        return []
    return decline_rows(tables, cfgs) + fixed_cost_rows(tables) + model_rows(tables, cfgs)
