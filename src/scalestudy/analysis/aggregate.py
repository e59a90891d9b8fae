"""Tables of a study from its raw logs: `aggregate(study)` writes them under study.tables_dir.

runs.csv                 one row per planned training run (configuration and seed); see run_table.
summary.csv              one row per configuration: its status over seeds, status counts, and for
                         every metric of run_table.METRICS `<m>_mean`, `<m>_std`, `<m>_ci95_low`,
                         `<m>_ci95_high` and `<m>_n` (stats.summarize over the ok seeds, less the
                         seeds flagged `outlier` (seed_outliers) or `contaminated` in runs.csv,
                         each named in `notes`; when every ok seed is contaminated they are kept
                         and `notes` says so). A predicted configuration's `notes` also hold its
                         runs' caveats (runs.csv `caveats`: a measured input with a known artefact).
collectives.csv          one row per (benchmark run, op, size); collectives_summary.csv the summary
                         per (op, size, world size, nodes) over seeds (collectives_table).
unplanned_runs.csv       run directories under the raw directory that the study did not plan, and
                         copies of planned runs anywhere but raw/RUN_ID (a backup, a duplicate):
                         reported, never read into the tables (the audit counts them as problems).
predictions.csv          only when the study holds predicted runs (scalestudy.perfmodel): one row per
                         predicted run and metric, the predicted value, the model's band and its value
                         at every corner of the uncertainty box (';'-joined), so that claims can band a
                         comparison of two predictions jointly.

Strictness: a planned run without a directory, or with an incomplete or corrupt one, stops the
aggregation with an error naming the file (all such problems are listed at once). With
`allow_missing=True` they become rows of status `missing` / `unreadable` holding the error, so a
partial study can still be tabulated; nothing is ever dropped silently.

The same raw logs give the same bytes: rows sorted, floats written '%.10g', no timestamps.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from scalestudy.analysis import collectives_table, run_table
from scalestudy.analysis.csv_format import read_table, split_list, write_csv
from scalestudy.analysis.stats import summarize
from scalestudy.measure.rawlog import STATUS_PRIORITY, STATUSES, RawLogError, find_runs, read_run

RUNS_FILE = "runs.csv"
SUMMARY_FILE = "summary.csv"
COLLECTIVES_FILE = "collectives.csv"
COLLECTIVES_SUMMARY_FILE = "collectives_summary.csv"
UNPLANNED_FILE = "unplanned_runs.csv"
PREDICTIONS_FILE = "predictions.csv"  # only for studies with predicted runs (scalestudy.perfmodel)
# only for studies with the model beside their measurements (`model_beside`; scalestudy.perfmodel.beside)
MODEL_BESIDE_FILE = "model_beside.csv"
TABLE_FILES = (RUNS_FILE, SUMMARY_FILE, COLLECTIVES_FILE, COLLECTIVES_SUMMARY_FILE, UNPLANNED_FILE)
PREDICTION_METRICS = ("tokens_per_s", "tokens_per_s_per_device", "mfu", "power_w_per_gpu", "tokens_per_joule",
                      "exposed_comm_share", "step_time_s")
PREDICTION_COLUMNS = ["config_id", "run_id", "metric", "value", "band_low", "band_high", "corners"]

MISSING = "missing"  # a planned run without a directory (allow_missing only)
UNREADABLE = "unreadable"  # an incomplete or corrupt run directory (allow_missing only)
ALL_STATUSES = STATUSES + (UNREADABLE, MISSING)
PARTIAL = "partial"  # some seeds ok, some not

STAT_SUFFIXES = ("mean", "std", "ci95_low", "ci95_high", "n")
CONFIG_COLUMNS = ["config_id", "label", "kind", "experiments", "status", "n_seeds", *[f"n_{s}" for s in ALL_STATUSES],
                  "error", "layout", "model", "world_size", "nodes", "procs_per_node", "dp_replicate", "dp_shard",
                  "tp", "pp", "global_batch", "local_batch", "seq_len", "tokens_per_step", "device", "device_names",
                  "sequence_parallel", "precision", "flops_per_token", "flops_formula", "mfu_peak_source",
                  "energy_scope", "exposed_comm_kind", "seeds", "run_ids", "measured_inputs"]
SUMMARY_COLUMNS = (CONFIG_COLUMNS + [f"{m}_{s}" for m in run_table.METRICS for s in STAT_SUFFIXES] + ["notes"])
UNPLANNED_COLUMNS = ["raw_dir", "run_id", "complete", "reason"]


class StudyDataError(RawLogError):
    """Every raw-log problem of a study at once; `errors` holds them, `path` names the first."""

    def __init__(self, errors: list[RawLogError]):
        self.errors = errors
        first = errors[0]
        more = "" if len(errors) == 1 else f" (and {len(errors) - 1} more: " + "; ".join(
            str(e) for e in errors[1:]) + ")"
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


_ASIDE = re.compile(r"^(?P<run_id>.+)\.incomplete-[0-9T]+$")


def unplanned_runs(study, dirs: dict[str, list[Path]] | None = None) -> list[dict]:
    raw = Path(study.raw_dir)
    dirs = run_directories(raw) if dirs is None else dirs
    planned = _planned_ids(study)
    rows = []
    for name, paths in dirs.items():
        m = _ASIDE.match(name)
        for d in paths:
            if name in planned and d.parent == raw:
                continue  # the one place a planned run is read from
            if name in planned:
                reason = (f"a copy of planned run {name} outside {raw.name}/{name} (a backup or a duplicate): "
                          "never read")
            elif m and m.group("run_id") in planned:
                reason = f"an unfinished attempt of planned run {m.group('run_id')}, moved aside"
            else:
                reason = f"not a run of study {study.name!r}"
            rows.append({"raw_dir": _rel(d, raw), "run_id": name, "complete": (d / "status.json").exists(),
                         "reason": reason})
    return sorted(rows, key=lambda r: r["raw_dir"])


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
        copies = f" (copies not read: {', '.join(_rel(p, raw) for p in paths)})" if paths else ""
        errors.append(RawLogError(raw / run_id, f"planned run has no raw-log directory{copies}"))
        return None

    def read(path: Path, run_id: str):
        try:
            log = read_run(path, verify_checksums=verify_checksums)
        except RawLogError as e:
            errors.append(e)
            return None, str(e)
        if log.run_id != run_id:
            e = RawLogError(path / "run.json", f"holds run_id {log.run_id!r}, the study planned {run_id!r} here")
            errors.append(e)
            return None, str(e)
        return log, None

    for planned in study.runs:
        rid = planned.run_id
        path = locate(rid)
        if path is None:
            tables.runs.append(run_table.unread_row(planned, MISSING, str(errors[-1]), None))
            continue
        log, err = read(path, rid)
        if log is None:
            tables.runs.append(run_table.unread_row(planned, UNREADABLE, err, _rel(path, raw)))
            continue
        try:
            row = run_table.run_row(log, planned, _rel(path, raw))
            if row.get(run_table.PREDICTED_BAND):
                bands[rid] = row[run_table.PREDICTED_BAND]
                tables.predictions.extend(_prediction_rows(row))
            tables.runs.append(run_table.finish(row))
        except RawLogError as e:
            errors.append(e)
            tables.runs.append(run_table.unread_row(planned, UNREADABLE, str(e), _rel(path, raw)))

    for cs in study.collectives:
        rid = cs.run_id
        path = locate(rid)
        if path is None:
            tables.collectives.append(collectives_table.unread_collective_row(cs, MISSING, str(errors[-1]), None))
            continue
        log, err = read(path, rid)
        if log is None:
            tables.collectives.append(collectives_table.unread_collective_row(cs, UNREADABLE, err, _rel(path, raw)))
            continue
        tables.collectives.extend(collectives_table.collective_rows(log, cs, _rel(path, raw)))

    if errors and not allow_missing:
        raise StudyDataError(errors)
    tables.runs.sort(key=lambda r: (r["model"], r["world_size"], r["layout"], r["config_id"], r["seed"]))
    flag_outliers(tables.runs)
    tables.summary = summarize_configs(tables.runs, bands)
    tables.predictions.sort(key=lambda r: (r["config_id"], r["run_id"], r["metric"]))
    tables.collectives.sort(key=collectives_table.sort_key)
    tables.collectives_summary = collectives_table.summarize_collectives(tables.collectives)
    return tables


def _prediction_rows(row: dict) -> list[dict]:
    central = row.get("_central") or {}
    band, corners = row.get(run_table.PREDICTED_BAND) or {}, row.get(run_table.PREDICTED_CORNERS) or {}
    out = []
    for m in PREDICTION_METRICS:
        if central.get(m) is None:
            continue
        lo, hi = (band.get(m) or [None, None])[:2]
        out.append({"config_id": row["config_id"], "run_id": row["run_id"], "metric": m, "value": central[m],
                    "band_low": lo, "band_high": hi, "corners": list(corners.get(m) or [])})
    return out


# A seed's throughput is an outlier when it lies outside the range of the configuration's other ok
# seeds by more than max(OUTLIER_MADS x their median absolute deviation, OUTLIER_REL x their
# median); judged only with at least OUTLIER_MIN_SEEDS ok seeds.
OUTLIER_METRIC = "tokens_per_s"
OUTLIER_MADS = 3.0
OUTLIER_REL = 0.05
OUTLIER_MIN_SEEDS = 3


def _median(xs: list[float]) -> float:
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


def seed_outliers(values: dict) -> dict:
    """key -> why its value is an outlier against the others (see OUTLIER_*); others absent."""
    out = {}
    if len(values) < OUTLIER_MIN_SEEDS:
        return out
    for k, v in values.items():
        others = [x for j, x in values.items() if j != k]
        med = _median(others)
        margin = max(OUTLIER_MADS * _median([abs(x - med) for x in others]), OUTLIER_REL * abs(med))
        lo, hi = min(others), max(others)
        if v < lo - margin or v > hi + margin:
            out[k] = (f"{OUTLIER_METRIC} {v:.6g} lies outside the other seeds' range [{lo:.6g}, {hi:.6g}] by more "
                      f"than max({OUTLIER_MADS:g} MAD, {OUTLIER_REL:.0%} of their median) = {margin:.6g}")
    return out


def flag_outliers(runs: list[dict]) -> None:
    """Fill `outlier` of every measured ok run whose throughput is an outlier among its seeds."""
    groups: dict[str, dict[str, float]] = {}
    for r in runs:
        if r["status"] == "ok" and r.get("kind") != "predicted" and r.get(OUTLIER_METRIC) is not None:
            groups.setdefault(r["config_id"], {})[r["run_id"]] = float(r[OUTLIER_METRIC])
    flagged = {rid: why for g in groups.values() for rid, why in seed_outliers(g).items()}
    for r in runs:
        r["outlier"] = flagged.get(r["run_id"])


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
PREDICTED_NOTE = ("PREDICTED by scalestudy.perfmodel, not measured: the ci95 columns hold the model's band "
                  "(the corners of its uncertainty box), not a confidence interval over seeds")


def summarize_configs(runs: list[dict], bands: dict[str, dict] | None = None) -> list[dict]:
    """One row per configuration. A configuration whose runs are predicted (kind `predicted`)
    gets `kind` predicted, its mean from the prediction and its ci95 columns from the model's band
    (`bands`: run id -> metric -> [low, high]), and says so in `notes`."""
    bands = bands or {}
    groups: dict[str, list[dict]] = {}
    for r in runs:
        groups.setdefault(r["config_id"], []).append(r)
    out = []
    for cid, g in groups.items():
        g = sorted(g, key=lambda r: r["seed"])
        first = g[0]
        statuses = [r["status"] for r in g]
        # an outlier seed, or one measured beside another run, is flagged and left out of the means
        excluded = [r for r in g if r["status"] == "ok" and (r.get("outlier") or r.get("contaminated"))]
        ok = [r for r in g if r["status"] == "ok" and r not in excluded] or \
            [r for r in g if r["status"] == "ok" and not r.get("outlier")]
        row = {c: first.get(c) for c in ("layout", "model", "world_size", "nodes", "procs_per_node",
                                          "dp_replicate", "dp_shard", "tp", "pp", "global_batch", "local_batch",
                                          "seq_len", "tokens_per_step", "device")}
        kinds = {r.get("kind") for r in g}
        predicted = kinds == {"predicted"}
        row.update(config_id=cid, label=first.get("label"), kind="predicted" if predicted else first.get("kind"),
                   experiments=sorted({e for r in g for e in (r.get("experiments") or [])}),
                   status=config_status(statuses), n_seeds=len(g),
                   error=next((r["error"] for r in g if r["status"] != "ok" and r.get("error")), None),
                   device_names=sorted({n for r in g for n in (r.get("device_names") or [])}),
                   sequence_parallel=first.get("spec.sequence_parallel"), precision=first.get("spec.precision"),
                   seeds=[r["seed"] for r in g], run_ids=[r["run_id"] for r in g],
                   measured_inputs=first.get("measured_inputs"))
        for s in ALL_STATUSES:
            row[f"n_{s}"] = statuses.count(s)
        for c in ("flops_per_token", "flops_formula"):
            row[c] = next((r[c] for r in ok if r.get(c) is not None), None)
        for c in ("mfu_peak_source", "energy_scope", "exposed_comm_kind"):
            row[c] = sorted({x for r in ok for x in (r.get(c) or [])})
        notes = set()
        band = bands.get(ok[0]["run_id"], {}) if (predicted and len(ok) == 1) else {}
        for m in run_table.METRICS:
            s = summarize(r.get(m) for r in ok)
            row.update({f"{m}_mean": s.mean, f"{m}_std": s.std, f"{m}_ci95_low": s.ci95_low,
                        f"{m}_ci95_high": s.ci95_high, f"{m}_n": s.n})
            b = band.get(_BAND_KEYS.get(m, m))
            if s.n == 1 and b and b[0] is not None:
                row.update({f"{m}_ci95_low": b[0], f"{m}_ci95_high": b[1]})
            elif s.n == 1 and not predicted:
                notes.add("one seed: no confidence interval")
        if predicted:
            notes.add(PREDICTED_NOTE)
        for r in excluded:
            if r in ok:
                notes.add(f"seed {r['seed']} CONTAMINATED (another run of the package ran beside it), kept: every "
                          "ok seed is")
                continue
            why = f"outlier: {r['outlier']}" if r.get("outlier") else \
                "contaminated: another run of the package ran on its host while it measured"
            notes.add(f"seed {r['seed']} left out of the statistics ({why})")
        for r in ok:
            for c in run_table.REASON_COLUMNS:
                if r.get(c):
                    notes.add(f"{c.removesuffix('_reason')}: {r[c]}")
            notes.update(split_list(r.get("caveats")))  # a predicted run's input with a known artefact: once a config
        row["notes"] = sorted(notes)
        out.append(row)
    out.sort(key=lambda r: (r["model"], r["world_size"], r["layout"], r["tp"], r["pp"], r["global_batch"],
                            r["config_id"]))
    return out


def write_tables(tables: StudyTables, out_dir: Path | str) -> list[Path]:
    out = Path(out_dir)
    extra = [write_csv(out / PREDICTIONS_FILE, PREDICTION_COLUMNS, tables.predictions)] if tables.predictions else []
    return extra + [
        write_csv(out / RUNS_FILE, run_table.RUN_COLUMNS, tables.runs),
        write_csv(out / SUMMARY_FILE, SUMMARY_COLUMNS, tables.summary),
        write_csv(out / COLLECTIVES_FILE, collectives_table.COLLECTIVE_COLUMNS, tables.collectives),
        write_csv(out / COLLECTIVES_SUMMARY_FILE, collectives_table.COLLECTIVE_SUMMARY_COLUMNS,
                  tables.collectives_summary),
        write_csv(out / UNPLANNED_FILE, UNPLANNED_COLUMNS, tables.unplanned),
    ]


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


def load_tables(tables_dir: Path | str) -> LoadedTables:
    d = Path(tables_dir)
    pred = read_table(d / PREDICTIONS_FILE) if (d / PREDICTIONS_FILE).exists() else None
    beside = read_table(d / MODEL_BESIDE_FILE) if (d / MODEL_BESIDE_FILE).exists() else None
    return LoadedTables(runs=read_table(d / RUNS_FILE), summary=read_table(d / SUMMARY_FILE),
                        collectives=read_table(d / COLLECTIVES_FILE),
                        collectives_summary=read_table(d / COLLECTIVES_SUMMARY_FILE), directory=d, predictions=pred,
                        model_beside=beside)
