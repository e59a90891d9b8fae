"""Rank shares on the tensor x pipeline grid (study paper-rank): heatmaps over tensor (rows) x
pipeline (columns) degrees of one rank's wall time per step and its GPU's busy time per step (each
the configuration's pipeline stages put together) and its peak memory, one row of panels per
(model, GPUs, global batch). A tensor-parallel share's wall step is its host's dispatch loop; the
GPU busy time (harness/device_busy.py) is the GPU's own work, blank where not yet measured.
Cells that ran out of memory under the study's cap are hatched `oom`; planned cells say so.
One rank's share, communication not executed: never a throughput. Data: rank_configs.csv."""

from __future__ import annotations

from pathlib import Path

from scalestudy.analysis.figures import drawing, heatmap, prepare
from scalestudy.analysis.figures.description import Description, Quantity
from scalestudy.analysis.rank_shares import CONFIGS_FILE
from scalestudy.measure.csv_format import read_table, split_list
from scalestudy.measure.table_files import WEAKENED_NOTE, weakened_kind
from scalestudy.spec.rank_share import LABEL, PIPELINE_RULE

NAME = "rank_grid"
EXPERIMENTS = ("tp_pp_grid",)
STEP = Quantity("one rank's wall time per step", "s", "rank_step_time_s")
BUSY = Quantity("one rank's GPU busy time per step", "s", "rank_device_busy_step_s")
MEMORY = Quantity("one rank's peak memory (largest stage)", "GiB", "peak_allocated_bytes", 1 / 2**30)
PP = Quantity("PP degree", "", low=1.0)
DESCRIPTION = Description(
    name=NAME,
    title=f"Tensor x pipeline grid, {LABEL}",
    paper="the configurations of the paper's Figs 6-8",
    shows=(
        "Heatmaps over tensor (rows) x pipeline (columns) parallel degrees of one rank's wall time per step and "
        "its GPU's busy time per step (its pipeline stages put together) and its peak allocated memory, each rank "
        "run alone on one GPU under the study's memory cap with communication faked"
    ),
    series="one row of panels per model, GPU count and global batch; a cell is one configuration",
    x=PP,
    quantities=(STEP, BUSY, MEMORY),
    category="Rank shares",
    notes=(
        f"{LABEL.capitalize()}: no communication time, not a throughput of the configuration.",
        f"Pipelined cells: {PIPELINE_RULE}.",
        "GPU busy: the union of the GPU's kernel, copy and memset intervals in traced steps after the measured "
        "ones; a host-bound share's wall step is larger. 'not measured': a share measured before the meter.",
        "Hatched: oom (a stage did not fit the cap) or another failure; 'planned': not measured; 'partial': "
        "some of its pipeline stages measured (a step needs the slowest).",
    ),
)
METRICS = [(STEP, "{:.3g}"), (BUSY, "{:.3g}"), (MEMORY, "{:.3g}")]


def configs(study, experiments) -> list[dict]:
    path = Path(study.tables_dir) / CONFIGS_FILE
    if not path.exists():
        return []
    rows = prepare.records(read_table(path))
    return [r for r in rows if set(split_list(r.get("experiments"))) & set(experiments)]


def weakened_note(cfgs: list[dict]) -> str | None:
    """The footnote on the configurations drawn whose runs were made with a check weakened
    (rank_configs.csv `weakened`, measure.rawlog.weakened_checks), or None."""
    hit = [c for c in cfgs if split_list(c.get("weakened"))]
    if not hit:
        return None
    kinds = sorted({weakened_kind(w) for c in hit for w in split_list(c.get("weakened"))})
    return (
        f"{WEAKENED_NOTE}: {len(hit)} of the {len(cfgs)} configurations drawn ({'; '.join(kinds)}); "
        "rank_configs.csv says which; scalestudy audit --strict refuses them."
    )


def data(tables, study) -> prepare.FigureData:
    fd = prepare.FigureData(NAME, DESCRIPTION.heading(False), description=DESCRIPTION, panels=[])
    cfgs = configs(study, EXPERIMENTS)
    if not cfgs:
        fd.panels = [STEP.label]
        fd.empty_reason = f"no rank shares of experiment 'tp_pp_grid' in study {study.name!r} (rank_configs.csv)"
        return fd
    for key in sorted({(c["model"], c["world_size"], c["global_batch"]) for c in cfgs}):
        members = [c for c in cfgs if (c["model"], c["world_size"], c["global_batch"]) == key]
        for q, _ in METRICS:
            panel = f"{key[0]}, {key[1]} GPUs, global batch {key[2]}:\n{q.label}"
            fd.panels.append(panel)
            for c in sorted(members, key=lambda c: (c["tp"], c["pp"])):
                v = c.get(q.metric)
                if q in (STEP, BUSY) and c["status"] != "ok":
                    v = None
                unmeasured = q is BUSY and c["status"] == "ok" and v is None
                fd.rows.append(
                    {
                        "panel": panel,
                        "series": f"TP={c['tp']}",
                        "x_quantity": PP.label,
                        "x": c["pp"],
                        "y_quantity": q.label,
                        "y": v * q.scale if v is not None else None,
                        "n_seeds": 1 if v is not None else 0,
                        "status": c["status"],
                        "note": f"{c['stages_measured']} of {c['stages_planned']} stages measured"
                        + ("; GPU busy time not measured (a stage ran before the meter)" if unmeasured else ""),
                        "label": LABEL,
                        "config_ids": c["group_id"],
                        "run_ids": c.get("run_ids"),
                    }
                )
    note = weakened_note(cfgs)
    if note:
        fd.notes.append(note)
    return fd


FAILURES_IN_CELLS = True  # a cell that ran out of memory is hatched `oom`: no 'x', no list in the notes


def cells(rows: list[dict]) -> list[heatmap.Cell]:
    out = []
    for r in rows:
        tp, pp, status, v = int(r["series"][3:]), int(r["x"]), r.get("status"), r.get("y")
        if status not in ("ok", "partial", "planned"):
            out.append(heatmap.Cell(tp, pp, v, status if v is None or status == "oom" else "", heatmap.FAILED_HATCH))  # type: ignore[arg-type]  # status is a string where v is None
        else:
            if status == "partial":
                empty = f"partial:\n{r['note'].split(' stages')[0]} stages"
            else:
                empty = (
                    status
                    if status == "planned"
                    else "not\nmeasured"
                    if r["panel"].endswith(BUSY.label)
                    else "no value"
                )
            out.append(heatmap.Cell(tp, pp, v, "" if v is not None else empty))
    return out


def draw(fd: prepare.FigureData, study):
    fig, axes = drawing.figure_for(fd, ncols=len(METRICS))
    fmts = {q.label: fmt for q, fmt in METRICS}
    for ax, panel in zip(axes, fd.panels):
        label = panel.rsplit("\n", 1)[-1]
        heatmap.heatmap_panel(
            ax,
            cells([r for r in fd.rows if r["panel"] == panel]),
            title=panel,
            value_label=label,
            fmt=fmts.get(label, "{:.3g}").format,
        )
    return fig
