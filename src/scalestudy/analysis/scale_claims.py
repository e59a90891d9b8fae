"""Claims of a study of public large-scale runs (experiment `step_time_microbatches`, e.g. mlperf),
reported beside the paper's C1-C7 by the same rules of evidence (95% intervals over the repeated
runs), with no paper number of their own to be consistent with:

D-<model>  the per-device throughput from the smallest to the largest scale of a family (the
           relative change of the seed means, delta method on the log ratio, Welch df), to read
           beside the paper's C1 (-37.22%, Llama-2 7B FSDP from 128 to 2048 GPUs: another model,
           layout and global batch);
F-<model>  the per-step fixed cost of the family: the intercept of a least-squares line of step
           time against micro-batches per step over every run (figure step_time_microbatches).
"""

from __future__ import annotations

from scalestudy.analysis.csv_format import split_list
from scalestudy.analysis.figures import step_time_microbatches as stm
from scalestudy.analysis.figures.prepare import as_int, config_spec, shown_names, specs_by_config
from scalestudy.analysis.stats import from_columns, relative_change

REPORT_RULE = ("reported, not judged: no paper number of this configuration (read it beside C1); ours with its 95% "
               "interval over the repeated runs (relative change: delta method on the log ratio of seed means, "
               "Welch df; fixed cost: the intercept of a least-squares line over every run, Student-t, n-2 df)")
C1_PAPER = "C1: -37.22% (Llama-2 7B FSDP, 128 to 2048 GPUs)"


def applies(cfgs: list[dict]) -> bool:
    return any(stm.NAME in split_list(c.get("experiments")) for c in cfgs)


def _row(cid: str, claim: str, paper: str, unit: str) -> dict:
    return {"id": cid, "claim": claim, "where": "§4.1, public runs", "paper": paper, "paper_value": None,
            "unit": unit, "rule": REPORT_RULE, "verdict": "not comparable"}


def _ids(cfgs: list[dict]) -> dict:
    return {"config_ids": [c["config_id"] for c in cfgs],
            "run_ids": [r for c in cfgs for r in split_list(c.get("run_ids"))]}


def decline_rows(tables, cfgs: list[dict]) -> list[dict]:
    mine = [c for c in cfgs if stm.NAME in split_list(c.get("experiments"))]
    specs = specs_by_config(tables)
    names = shown_names({c["config_id"]: config_spec(c, specs) for c in mine})
    out = []
    for name in sorted(set(names.values())):
        family = sorted((c for c in mine if names[c["config_id"]] == name), key=lambda c: as_int(c.get("world_size")))
        model = family[0].get("model")
        a, b = family[0], family[-1]
        row = _row(f"D-{model}", f"per-device throughput from the smallest to the largest published scale ({name}; "
                               f"{as_int(a.get('world_size'))} to {as_int(b.get('world_size'))} GPUs)", C1_PAPER, "%")
        row.update(_ids([a, b]))
        if len(family) < 2:
            row["reason"] = "one scale only"
            out.append(row)
            continue
        comp = relative_change(from_columns(a, "tokens_per_s_per_device"), from_columns(b, "tokens_per_s_per_device"))
        ours = None if comp.value is None else 100 * comp.value
        lo = None if comp.ci95_low is None else 100 * comp.ci95_low
        hi = None if comp.ci95_high is None else 100 * comp.ci95_high
        row.update(ours=ours, ours_ci95_low=lo, ours_ci95_high=hi, n_seeds=f"{comp.n_a}/{comp.n_b}",
                   ours_text="n/a" if ours is None else (f"{ours:+.2f}% (95% CI [{lo:+.2f}%, {hi:+.2f}%])"
                                                         if lo is not None else f"{ours:+.2f}% (no CI)"),
                   reason=(f"{a.get('tokens_per_s_per_device_mean'):.1f} to {b.get('tokens_per_s_per_device_mean'):.1f} "
                           "tokens/s per device; another model, layout and batch than the paper's C1, so not judged"
                           if ours is not None else comp.note or "no value"))
        out.append(row)
    return out


def fixed_cost_rows(tables) -> list[dict]:
    out = []
    for name, (f, mine) in stm.fits(tables).items():
        model = mine[0].get("model")
        row = _row(f"F-{model}", f"per-step fixed cost: intercept of step time against micro-batches per step ({name})",
                   "not in the paper", " s")
        row.update(_ids(mine))
        lo, hi = f.intercept_ci95 or (None, None)
        row.update(ours=f.intercept, ours_ci95_low=lo, ours_ci95_high=hi, n_seeds=f"{f.n} runs",
                   ours_text=stm.fit_text(name, f).split(": ", 1)[1],
                   reason="a line through every run; the slope is the time of one micro-batch, the intercept what a "
                          "step costs however few micro-batches it runs (pipeline fill and drain, data-parallel "
                          "exchange, optimizer)")
        out.append(row)
    return out


def evaluate(tables, cfgs: list[dict]) -> list[dict]:
    return decline_rows(tables, cfgs) + fixed_cost_rows(tables) if applies(cfgs) else []
