"""Tables of a study from its raw logs: `aggregate(study)` writes them under study.tables_dir.

runs.csv                 one row per planned training run (configuration and seed); see run_table.
summary.csv              one row per configuration: its status over seeds, status counts, and for
                         every metric of run_table.METRICS `<m>_mean`, `<m>_std`, `<m>_ci95_low`,
                         `<m>_ci95_high` and `<m>_n` (stats.summarize over the ok seeds, less the
                         seeds flagged `contaminated` or `outlier` (seed_outliers: one-sided, more
                         than the study's `outlier_slowdown` below the fastest clean seed) in
                         runs.csv: never kept; `n_left_out` counts them, `left_out` names each
                         and why, `notes` too; `run_ids` names the seeds behind the values). Too
                         few clean seeds left (< 2 of 3 or more planned): status `insufficient`,
                         no values. A predicted configuration's `notes` also hold its
                         runs' caveats (runs.csv `caveats`: a measured input with a known artefact).
collectives.csv          one row per (benchmark run, op, size); collectives_summary.csv the summary
                         per (op, size, world size, nodes) over seeds (collectives_table).
unplanned_runs.csv       run directories under the raw directory that the study did not plan, and
                         copies of planned runs anywhere but raw/RUN_ID (a backup, a duplicate):
                         reported, never read into the tables (the audit counts them as problems,
                         but for those the launcher moved aside and the runs the study retired,
                         `retired_runs`: committed before the grid changed, each with why).
predictions.csv          only when the study holds predicted runs (scalestudy.perfmodel): one row per
                         predicted run and metric, the predicted value, the model's band and its value
                         at every corner of the uncertainty box (';'-joined), so that claims can band a
                         comparison of two predictions jointly.

Identity: a run directory whose run.json holds another run_id or config_id than the planned run, or
(where it records them) another study name or hardware line than the study's, is refused naming the
field (identity_problem). Writing: all tables or none (write_tables: staged, then os.replace'd).

Strictness: a planned run without a directory, or with an incomplete or corrupt one, stops the
aggregation with an error naming the file (all such problems are listed at once). With
`allow_missing=True` they become rows of status `missing` / `unreadable` holding the error, so a
partial study can still be tabulated; nothing is ever dropped silently.

The same raw logs give the same bytes: rows sorted, floats written '%.10g', no timestamps.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from scalestudy.analysis import collectives_table, run_table
from scalestudy.analysis.stats import summarize
from scalestudy.measure.csv_format import csv_text, read_table, split_list
from scalestudy.measure.rawlog import STATUS_PRIORITY, STATUSES, RawLogError, disk_error, find_runs, read_run
from scalestudy.measure.table_files import (  # noqa: F401 - the tables' names, shared with the performance model
    C3_TERMS_FILE,
    CLAIM_BASIS_FILE,
    COLLECTIVES_FILE,
    COLLECTIVES_SUMMARY_FILE,
    MODEL_BESIDE_FILE,
    PREDICTIONS_FILE,
    RUNS_FILE,
    SENSITIVITY_FILE,
    SUMMARY_FILE,
    TABLE_FILES,
    UNPLANNED_FILE,
    WEAKENED_NOTE,
)

PREDICTION_METRICS = (
    "tokens_per_s",
    "tokens_per_s_per_device",
    "mfu",
    "power_w_per_gpu",
    "tokens_per_joule",
    "exposed_comm_share",
    "step_time_s",
)
PREDICTION_COLUMNS = ["config_id", "run_id", "metric", "value", "band_low", "band_high", "corners"]

MISSING = "missing"  # a planned run without a directory (allow_missing only)
UNREADABLE = "unreadable"  # an incomplete or corrupt run directory (allow_missing only)
ALL_STATUSES = STATUSES + (UNREADABLE, MISSING)
PARTIAL = "partial"  # some seeds ok, some not

STAT_SUFFIXES = ("mean", "std", "ci95_low", "ci95_high", "n")
CONFIG_COLUMNS = [
    "config_id",
    "label",
    "kind",
    "experiments",
    "status",
    "n_seeds",
    *[f"n_{s}" for s in ALL_STATUSES],
    "error",
    "layout",
    "model",
    "world_size",
    "nodes",
    "procs_per_node",
    "dp_replicate",
    "dp_shard",
    "tp",
    "pp",
    "global_batch",
    "local_batch",
    "seq_len",
    "tokens_per_step",
    "device",
    "device_names",
    "sequence_parallel",
    "precision",
    "flops_per_token",
    "flops_formula",
    "mfu_peak_source",
    "energy_scope",
    "exposed_comm_kind",
    "seeds",
    "run_ids",
    "measured_inputs",
    "n_left_out",
    "left_out",
]
SUMMARY_COLUMNS = CONFIG_COLUMNS + [f"{m}_{s}" for m in run_table.METRICS for s in STAT_SUFFIXES] + ["notes"]
UNPLANNED_COLUMNS = ["raw_dir", "run_id", "complete", "reason"]


class StudyDataError(RawLogError):
    """Every raw-log problem of a study at once; `errors` holds them, `path` names the first."""

    def __init__(self, errors: list[RawLogError]):
        self.errors = errors
        first = errors[0]
        more = (
            "" if len(errors) == 1 else f" (and {len(errors) - 1} more: " + "; ".join(str(e) for e in errors[1:]) + ")"
        )
        super().__init__(first.path, first.reason + more)


@dataclass
class StudyTables:
    runs: list[dict] = field(default_factory=list)
    summary: list[dict] = field(default_factory=list)
    collectives: list[dict] = field(default_factory=list)
    collectives_summary: list[dict] = field(default_factory=list)
    unplanned: list[dict] = field(default_factory=list)
    predictions: list[dict] = field(default_factory=list)


def run_directories(raw_dir: Path) -> dict[str, list[Path]]:
    """Run directories under raw_dir by directory name (complete or not)."""
    out: dict[str, list[Path]] = {}
    if raw_dir.is_dir():
        for d in find_runs(raw_dir):
            out.setdefault(d.name, []).append(d)
    return out


def _rel(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return path.name


def _planned_ids(study) -> dict[str, tuple[str, object]]:
    ids: dict[str, tuple[str, object]] = {}
    for p in study.runs:
        ids[p.run_id] = ("train", p)
    for cs in study.collectives:
        ids[cs.run_id] = ("collectives", cs)
    return ids


# an unplanned_runs.csv reason of a run the study retired (Study.retired_runs: the grid no longer
# plans it; its raw log stays as measured): never read, not an audit problem
RETIRED = "retired by the study (retired_runs)"

# what the launcher moves aside beside raw/RUN_ID: an unfinished attempt, and a finished run found
# where it was to measure (launch.launcher.FOUND_SUFFIX: another workflow's, a copy), never read
_ASIDE = re.compile(r"^(?P<run_id>.+)\.(?P<kind>incomplete|found)-[0-9T]+(~[0-9]+)?$")


def unplanned_runs(study, dirs: dict[str, list[Path]] | None = None) -> list[dict]:
    raw = Path(study.raw_dir)
    dirs = run_directories(raw) if dirs is None else dirs
    planned = _planned_ids(study)
    retired = getattr(study, "retired_runs", None) or {}
    rows = []
    for name, paths in dirs.items():
        m = _ASIDE.match(name)
        for d in paths:
            if name in planned and d.parent == raw:
                continue  # the one place a planned run is read from
            if name in retired and d.parent == raw:
                reason = f"{RETIRED}: {retired[name]} (never read)"
            elif name in planned:
                reason = f"a copy of planned run {name} outside {raw.name}/{name} (a backup or a duplicate): never read"
            elif m and m.group("run_id") in planned:
                reason = (
                    f"an unfinished attempt of planned run {m.group('run_id')}, moved aside (never read)"
                    if m.group("kind") == "incomplete"
                    else f"a finished copy of planned run {m.group('run_id')} that the launcher found in its place "
                    "and moved aside (never read)"
                )
            else:
                reason = f"not a run of study {study.name!r}"
            rows.append(
                {"raw_dir": _rel(d, raw), "run_id": name, "complete": (d / "status.json").exists(), "reason": reason}
            )
    return sorted(rows, key=lambda r: r["raw_dir"])


def _from_root(text: str | None, study) -> str:
    """An error for a table cell with the paths in it relative to the study's root, so that the
    tables are the same bytes whichever way the study was loaded (root "." or an absolute path)."""
    root = Path(getattr(study, "root", ".") or ".")
    text = text or ""
    if not root.is_absolute():
        return text
    for prefix in {str(root), str(root.resolve())}:
        text = text.replace(prefix.rstrip("/") + "/", "")
    return text


def build_tables(study, *, allow_missing: bool = False, verify_checksums: bool = True) -> StudyTables:
    """Read every planned run of `study` and build its tables in memory."""
    raw = Path(study.raw_dir)
    dirs = run_directories(raw)
    errors: list[RawLogError] = []
    tables = StudyTables(unplanned=unplanned_runs(study, dirs))
    bands: dict[str, dict] = {}  # run id -> the model's band, for predicted runs

    def locate(run_id: str) -> Path | None:
        """A planned run is read from raw/RUN_ID only; copies elsewhere (backups, duplicates) are
        listed as unplanned and never picked instead."""
        paths = dirs.get(run_id, [])
        if raw / run_id in paths:
            return raw / run_id
        if (raw / run_id).is_symlink():
            errors.append(
                RawLogError(
                    raw / run_id,
                    f"a symbolic link (to {(raw / run_id).resolve()}): a run "
                    "directory is read where it lies, never through a link",
                )
            )
            return None
        copies = f" (copies not read: {', '.join(_rel(p, raw) for p in paths)})" if paths else ""
        errors.append(RawLogError(raw / run_id, f"planned run has no raw-log directory{copies}"))
        return None

    def read(path: Path, run_id: str, config_id: str | None = None):
        try:
            log = read_run(path, verify_checksums=verify_checksums)
        except RawLogError as e:
            errors.append(e)
            return None, str(e)
        problem = identity_problem(log, study, run_id, config_id)
        if problem:
            e = RawLogError(path / "run.json", problem)  # type: ignore[misc]  # a new name binding after the except block
            errors.append(e)  # type: ignore[misc]  # bound on the line above
            return None, str(e)  # type: ignore[misc]  # bound two lines above
        return log, None

    contamination: dict[str, str] = {}  # run id -> what the load record saw beside it
    for planned in study.runs:
        rid = planned.run_id
        path = locate(rid)
        if path is None:
            tables.runs.append(run_table.unread_row(planned, MISSING, _from_root(str(errors[-1]), study), None))
            continue
        log, err = read(path, rid, getattr(planned, "config_id", planned.spec.config_id))
        if log is None:
            tables.runs.append(run_table.unread_row(planned, UNREADABLE, _from_root(err, study), _rel(path, raw)))
            continue
        try:
            row = run_table.run_row(log, planned, _rel(path, raw))
            if row.get(run_table.PREDICTED_BAND):
                bands[rid] = row[run_table.PREDICTED_BAND]
                tables.predictions.extend(_prediction_rows(row))
            tables.runs.append(run_table.finish(row))
            load = log.status.get("load") or {}
            if load.get("contaminated") and load.get("reason"):
                contamination[rid] = str(load["reason"])
        except RawLogError as e:
            errors.append(e)
            tables.runs.append(run_table.unread_row(planned, UNREADABLE, _from_root(str(e), study), _rel(path, raw)))

    for cs in study.collectives:
        rid = cs.run_id
        path = locate(rid)
        if path is None:
            tables.collectives.append(collectives_table.unread_collective_row(cs, MISSING, str(errors[-1]), None))
            continue
        log, err = read(path, rid, cs.config_id)
        if log is None:
            tables.collectives.append(collectives_table.unread_collective_row(cs, UNREADABLE, err, _rel(path, raw)))
            continue
        tables.collectives.extend(collectives_table.collective_rows(log, cs, _rel(path, raw)))

    if errors and not allow_missing:
        raise StudyDataError(errors)
    tables.runs.sort(key=lambda r: (r["model"], r["world_size"], r["layout"], r["config_id"], r["seed"]))
    flag_outliers(tables.runs, outlier_slowdown(study))
    tables.summary = summarize_configs(tables.runs, bands, contamination)
    tables.predictions.sort(key=lambda r: (r["config_id"], r["run_id"], r["metric"]))
    tables.collectives.sort(key=collectives_table.sort_key)
    tables.collectives_summary = collectives_table.summarize_collectives(tables.collectives)
    return tables


def identity_problem(log, study, run_id: str, config_id: str | None) -> str | None:
    """Why a run's run.json is not the run the study planned at its place (None: it is): its
    run_id, config_id and, where run.json records them (harnesses since issue 26), the study's
    name and hardware line must be the planned ones."""
    run = log.run
    checks = [
        ("run_id", run.get("run_id"), run_id),
        ("config_id", run.get("config_id"), config_id),
        ("study", run.get("study"), getattr(study, "name", None)),
        ("hardware", run.get("hardware"), getattr(study, "hardware", None)),
    ]
    for name, found, planned in checks:
        if found is None or planned is None or name != "run_id" and name not in run:
            continue
        if str(found) != str(planned):
            return (
                f"holds {name} {found!r}, but study {getattr(study, 'name', '?')!r} planned {planned!r} here: "
                "a run of another study or configuration is not read"
            )
    return None


def _prediction_rows(row: dict) -> list[dict]:
    central = row.get("_central") or {}
    band, corners = row.get(run_table.PREDICTED_BAND) or {}, row.get(run_table.PREDICTED_CORNERS) or {}
    out = []
    for m in PREDICTION_METRICS:
        if central.get(m) is None:
            continue
        lo, hi = (band.get(m) or [None, None])[:2]
        out.append(
            {
                "config_id": row["config_id"],
                "run_id": row["run_id"],
                "metric": m,
                "value": central[m],
                "band_low": lo,
                "band_high": hi,
                "corners": list(corners.get(m) or []),
            }
        )
    return out


# The outlier rule, one-sided (interference only slows a run): a clean ok seed whose throughput
# (OUTLIER_METRIC) lies more than the study's `outlier_slowdown` (a fraction) below the fastest
# clean seed of its configuration is an outlier and left out of the statistics. The fastest clean
# seed is never an outlier, whatever the others do; a contaminated seed (status.json's load record)
# never enters a summary and never sets the reference. Without the setting, the threshold is tied
# to the run-to-run noise measured on the device kind (OUTLIER_SLOWDOWN, by spec.device):
#   cpu   0.35  repeated clean runs of the smoke study on a 2-core host (6 configurations x 3 seeds
#               x 5 repetitions, one run at a time): a clean seed lay up to 36% below the fastest
#               of its 3 (median about 10%; within-run step-time noise does not predict it); at
#               0.35, 1 of the 90 clean seeds was left out (1.1%) and no point was insufficient
#   cuda  0.05  the committed MLPerf H100 runs (12 configurations x 3 seeds): up to 2.6% below the
#               fastest; twice that
# A configuration of 3 or more planned seeds left with fewer than MIN_CLEAN_SEEDS kept seeds (1
# for fewer planned seeds) has status INSUFFICIENT: no value, drawn as a point without one.
OUTLIER_METRIC = "tokens_per_s"
OUTLIER_SLOWDOWN = {"cpu": 0.35, "cuda": 0.05}
OUTLIER_SETTING = "outlier_slowdown"
MIN_CLEAN_SEEDS = 2
INSUFFICIENT = "insufficient"


def default_slowdown(device: str | None) -> float:
    return OUTLIER_SLOWDOWN.get(str(device), OUTLIER_SLOWDOWN["cuda"])


def outlier_slowdown(study) -> float | None:
    """The study's `outlier_slowdown` (Study.outlier_slowdown, checked by the study schema); None:
    the device kind's default (OUTLIER_SLOWDOWN)."""
    v = getattr(study, OUTLIER_SETTING, None)
    return None if v is None else float(v)


def seed_outliers(values: dict, slowdown: float = OUTLIER_SLOWDOWN["cuda"]) -> dict:
    """key -> why its value is an outlier: more than `slowdown` below the fastest of `values`
    (the clean seeds' throughputs); the fastest never is. Others absent."""
    out: dict = {}
    if len(values) < 2:
        return out
    fastest_key = max(values, key=lambda k: (values[k], str(k)))
    top = values[fastest_key]
    if top <= 0:
        return out
    for k, v in values.items():
        below = 1.0 - v / top
        if k != fastest_key and below > slowdown:
            out[k] = (
                f"{OUTLIER_METRIC} {v:.6g} is {below:.1%} below the fastest clean seed's {top:.6g}: more "
                f"than {OUTLIER_SETTING} {slowdown:.0%}"
            )
    return out


def flag_outliers(runs: list[dict], slowdown: float | None = None) -> None:
    """Fill `outlier` of every measured, clean (not contaminated) ok run whose throughput lies more
    than `slowdown` (None: its device kind's default_slowdown) below the fastest clean seed of its
    configuration."""
    groups: dict[str, dict[str, float]] = {}
    devices: dict[str, str] = {}
    for r in runs:
        if (
            r["status"] == "ok"
            and r.get("kind") != "predicted"
            and not r.get("contaminated")
            and r.get(OUTLIER_METRIC) is not None
        ):
            groups.setdefault(r["config_id"], {})[r["run_id"]] = float(r[OUTLIER_METRIC])
            devices[r["config_id"]] = r.get("device")  # type: ignore[assignment]  # a missing device is None
    flagged = {
        rid: why
        for cid, g in groups.items()
        for rid, why in seed_outliers(g, slowdown if slowdown is not None else default_slowdown(devices[cid])).items()
    }
    for r in runs:
        r["outlier"] = flagged.get(r["run_id"])


def left_out_reason(r: dict) -> str | None:
    """Why an ok seed is left out of its configuration's statistics (None: it is kept)."""
    if r["status"] != "ok":
        return None
    if r.get("contaminated"):
        return "contaminated: something else used the machine while it measured"
    if r.get("outlier"):
        return f"outlier: {r['outlier']}"
    return None


def config_status(statuses: list[str]) -> str:
    if all(s == "ok" for s in statuses):
        return "ok"
    if any(s == "ok" for s in statuses):
        return PARTIAL
    for s in STATUS_PRIORITY + (UNREADABLE, MISSING):
        if s in statuses:
            return s
    return statuses[0]


# summary metric -> the key of a predicted run's band
_BAND_KEYS = {"step_time_mean_s": "step_time_s"}
PREDICTED_NOTE = (
    "PREDICTED by scalestudy.perfmodel, not measured: the ci95 columns hold the model's band "
    "(the corners of its uncertainty box), not a confidence interval over seeds"
)


def summarize_configs(
    runs: list[dict], bands: dict[str, dict] | None = None, contamination: dict[str, str] | None = None
) -> list[dict]:
    """One row per configuration. A configuration whose runs are predicted (kind `predicted`)
    gets `kind` predicted, its mean from the prediction and its ci95 columns from the model's band
    (`bands`: run id -> metric -> [low, high]), and says so in `notes`. Seeds left out of the
    statistics (left_out_reason: contaminated, outlier) are listed in `left_out` with why, counted in
    `n_left_out` and named in `notes`; `run_ids` names the seeds behind the values (every run of the
    configuration where it has no value). Too few kept seeds: status INSUFFICIENT, no values."""
    bands = bands or {}
    contamination = contamination or {}
    groups: dict[str, list[dict]] = {}
    for r in runs:
        groups.setdefault(r["config_id"], []).append(r)
    out = []
    for cid, g in groups.items():
        g = sorted(g, key=lambda r: r["seed"])
        first = g[0]
        statuses = [r["status"] for r in g]
        # an outlier seed, or one measured beside something else, is flagged and never enters the means
        why_out = {r["run_id"]: left_out_reason(r) for r in g}
        excluded = [r for r in g if why_out[r["run_id"]]]
        ok = [r for r in g if r["status"] == "ok" and not why_out[r["run_id"]]]
        row = {
            c: first.get(c)
            for c in (
                "layout",
                "model",
                "world_size",
                "nodes",
                "procs_per_node",
                "dp_replicate",
                "dp_shard",
                "tp",
                "pp",
                "global_batch",
                "local_batch",
                "seq_len",
                "tokens_per_step",
                "device",
            )
        }
        kinds = {r.get("kind") for r in g}
        predicted = kinds == {"predicted"}
        needed = min(MIN_CLEAN_SEEDS, 1 if len(g) < 3 else MIN_CLEAN_SEEDS)
        insufficient = bool(excluded) and len(ok) < needed
        left_out = []
        for r in excluded:
            why = why_out[r["run_id"]]
            if r.get("contaminated") and contamination.get(r["run_id"]):
                why = f"{why} ({contamination[r['run_id']]})"
            left_out.append(f"seed {r['seed']} ({r['run_id']}): {why}".replace(";", ","))
        status = (
            INSUFFICIENT
            if insufficient
            else config_status([s for r, s in zip(g, statuses) if not why_out[r["run_id"]]] or statuses)
        )
        error = next((r["error"] for r in g if r["status"] != "ok" and r.get("error")), None)
        if insufficient:
            error = (
                f"{INSUFFICIENT}: {len(ok)} clean seed{'s' if len(ok) != 1 else ''} of {len(g)} "
                f"(at least {needed} needed), {len(excluded)} left out"
            )
            ok = []
        row.update(
            config_id=cid,
            label=first.get("label"),
            kind="predicted" if predicted else first.get("kind"),
            experiments=sorted({e for r in g for e in (r.get("experiments") or [])}),
            status=status,
            n_seeds=len(g),
            error=error,
            device_names=sorted({n for r in g for n in (r.get("device_names") or [])}),
            sequence_parallel=first.get("spec.sequence_parallel"),
            precision=first.get("spec.precision"),
            seeds=[r["seed"] for r in g],
            run_ids=[r["run_id"] for r in (ok or g)],
            measured_inputs=first.get("measured_inputs"),
            n_left_out=len(excluded),
            left_out=left_out,
        )
        for s in ALL_STATUSES:
            row[f"n_{s}"] = statuses.count(s)
        for c in ("flops_per_token", "flops_formula"):
            row[c] = next((r[c] for r in ok if r.get(c) is not None), None)
        for c in ("mfu_peak_source", "energy_scope", "exposed_comm_kind"):
            row[c] = sorted({x for r in ok for x in (r.get(c) or [])})
        notes = set()
        band = bands.get(ok[0]["run_id"], {}) if (predicted and len(ok) == 1) else {}
        for m in run_table.METRICS:
            s = summarize(r.get(m) for r in ok)  # type: ignore[assignment]  # s is reused for the Summary
            row.update(
                {
                    f"{m}_mean": s.mean,  # type: ignore[attr-defined]  # a Summary
                    f"{m}_std": s.std,  # type: ignore[attr-defined]  # a Summary
                    f"{m}_ci95_low": s.ci95_low,  # type: ignore[attr-defined]  # a Summary
                    f"{m}_ci95_high": s.ci95_high,  # type: ignore[attr-defined]  # a Summary
                    f"{m}_n": s.n,  # type: ignore[attr-defined]  # a Summary
                }
            )
            b = band.get(_BAND_KEYS.get(m, m))
            if s.n == 1 and b and b[0] is not None:  # type: ignore[attr-defined]  # a Summary
                row.update({f"{m}_ci95_low": b[0], f"{m}_ci95_high": b[1]})
            elif s.n == 1 and not predicted:  # type: ignore[attr-defined]  # a Summary
                notes.add("one seed: no confidence interval")
        if predicted:
            notes.add(PREDICTED_NOTE)
        for item in left_out:
            notes.add(f"{item.split(' (', 1)[0]} left out of the statistics ({item.split('): ', 1)[1]})")
        if insufficient:
            notes.add(f"{INSUFFICIENT}: fewer than {needed} clean seed{'s' if needed > 1 else ''} left: no value")
        for r in ok:
            for c in run_table.REASON_COLUMNS:
                if r.get(c):
                    notes.add(f"{c.removesuffix('_reason')}: {r[c]}")
            notes.update(split_list(r.get("caveats")))  # a predicted run's input with a known artefact: once a config
            for why in split_list(r.get("weakened")):
                notes.add(f"{WEAKENED_NOTE}: seed {r['seed']}: {why}")
        row["notes"] = sorted(notes)
        out.append(row)
    out.sort(
        key=lambda r: (r["model"], r["world_size"], r["layout"], r["tp"], r["pp"], r["global_batch"], r["config_id"])
    )
    return out


def write_tables(tables: StudyTables, out_dir: Path | str) -> list[Path]:
    """Write the tables atomically, all or none: each to a temporary file in out_dir first, then
    every one os.replace'd into place; a failure (a full disk) removes the temporary files and
    leaves the tables as they were, and raises an OSError naming the file."""
    # looked up at each call, not at import: tests patch rawlog.atomic_write_bytes (a full disk)
    from scalestudy.measure.rawlog import atomic_write_bytes

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    planned = ([(out / PREDICTIONS_FILE, PREDICTION_COLUMNS, tables.predictions)] if tables.predictions else []) + [
        (out / RUNS_FILE, run_table.RUN_COLUMNS, tables.runs),
        (out / SUMMARY_FILE, SUMMARY_COLUMNS, tables.summary),
        (out / COLLECTIVES_FILE, collectives_table.COLLECTIVE_COLUMNS, tables.collectives),
        (out / COLLECTIVES_SUMMARY_FILE, collectives_table.COLLECTIVE_SUMMARY_COLUMNS, tables.collectives_summary),
        (out / UNPLANNED_FILE, UNPLANNED_COLUMNS, tables.unplanned),
    ]
    staged: list[tuple[Path, Path]] = []
    try:
        for path, columns, rows in planned:
            tmp = path.with_name(f".{path.name}.staged")
            staged.append((tmp, path))
            try:
                atomic_write_bytes(tmp, csv_text(columns, rows).encode("utf-8"))
            except OSError as e:  # a full disk: say which table could not be written, and how much room is left
                raise disk_error(e, path) from None
        for tmp, path in staged:
            os.replace(tmp, path)
    finally:
        for tmp, _ in staged:
            tmp.unlink(missing_ok=True)
    return [path for path, _, _ in planned]


def aggregate(study, out_dir: Path | str | None = None, *, allow_missing: bool = False) -> list[Path]:
    """Write the study's tables (default: study.tables_dir); returns their paths."""
    tables = build_tables(study, allow_missing=allow_missing)
    return write_tables(tables, out_dir if out_dir is not None else study.tables_dir)


@dataclass
class LoadedTables:
    """The tables as DataFrames, as figures and claims read them."""

    runs: object
    summary: object
    collectives: object
    collectives_summary: object
    directory: Path
    predictions: object = None  # predictions.csv, where the study has predicted runs
    model_beside: object = None  # model_beside.csv, where the study has the model beside its measurements
    claim_sensitivity: object = None  # claim_sensitivity.csv, c3_terms.csv, claim_basis.json: prediction studies
    c3_terms: object = None
    claim_basis: dict | None = None


def load_tables(tables_dir: Path | str) -> LoadedTables:
    d = Path(tables_dir)

    def optional(name):
        return read_table(d / name) if (d / name).exists() else None

    basis = json.loads((d / CLAIM_BASIS_FILE).read_text()) if (d / CLAIM_BASIS_FILE).exists() else None
    return LoadedTables(
        runs=read_table(d / RUNS_FILE),
        summary=read_table(d / SUMMARY_FILE),
        collectives=read_table(d / COLLECTIVES_FILE),
        collectives_summary=read_table(d / COLLECTIVES_SUMMARY_FILE),
        directory=d,
        predictions=optional(PREDICTIONS_FILE),
        model_beside=optional(MODEL_BESIDE_FILE),
        claim_sensitivity=optional(SENSITIVITY_FILE),
        c3_terms=optional(C3_TERMS_FILE),
        claim_basis=basis,
    )
