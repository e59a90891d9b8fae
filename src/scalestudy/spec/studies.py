"""Studies: named grids of runs, read from workflow/studies/<name>.yaml and validated against
workflow/schemas/study.schema.json. Pure data (no torch import): the workflow plans from it,
the analysis side maps run ids to experiments with it.

A study file, in short (the schema documents every key):

    description: ...
    hardware: H100 SXM 80 GB, 8 a node
    assumptions: [...]                 # the [assumed] choices the figures must name
    seeds: [0, 1, 2]
    defaults: {model: llama2-7b, device: cuda, ...}       # RunSpec fields
    experiments:
      - name: weak_scaling             # a figure group, or a free name
        also: [kernel_breakdown]       # further groups the same runs belong to
        set: {global_batch_per_gpu: 2} # fields fixed for this experiment
        grid: {nodes: [1, 2, 4]}       # every combination of these values ...
        layouts:                       # ... crossed with each of these points
          - {}                         # FSDP
          - {dp_shard: 8, dp_replicate: rest}   # HSDP
    collectives: {ops: [...], min_bytes: 512, max_bytes: 16G, procs_per_node: 8, nodes: [1, 2, 4]}

Planning values, resolved before the RunSpec is built: `global_batch_per_gpu: N` (global_batch =
N x GPUs), `dp_replicate: rest` (the processes left after dp_shard, tp and pp) and
`pp_microbatches: fill` (the whole local batch in one pipeline pass), and for fake-communication
rank shares `emulate_rank: stages` (one run for each distinct pipeline stage: first, one middle,
last; rank 0 alone without pipeline parallelism). A point whose spec cannot
work is an error naming the study, the experiment, the point and the field, unless the
experiment says `skip_infeasible: true`: then it is dropped and listed in `Study.dropped`
(as are points whose memory estimate exceeds the study's `device_memory_gib`).
"""

from __future__ import annotations

import itertools
import json
import os
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Iterable

import yaml

from scalestudy.spec import catalog, strict_yaml
from scalestudy.spec.checkout import checkout_path
from scalestudy.spec.collectives import CollectivesSpec, parse_size
from scalestudy.spec.memory_estimate import GIB, estimate_memory
from scalestudy.spec.rank_share import (
    MEASURED_INPUTS,
    MEASURED_SERIES,
    distinct_stages,
    measured_work,
    rank_of,
    work_key,
)
from scalestudy.spec.run import RunSpec, SpecError
from scalestudy.spec.site import SiteError, load_site

FIGURES = (
    "collectives_bandwidth",
    "weak_scaling",
    "kernel_breakdown",
    "strong_scaling",
    "tp_pp_grid",
    "model_sizes",
    "hardware_generations",
    "power",
)
FIGURE_GROUPS = FIGURES[1:]  # the experiment names that feed a figure of the same name
# Figures of rank shares (spec comm: fake; scalestudy.spec.rank_share), drawn from the rank_shares table
RANK_FIGURES = ("rank_grid", "rank_memory")
# Figures beyond the paper's, drawn where a study's `figures` names them: step time against the
# micro-batches a pipeline runs per step, and the per-step fixed cost (studies of public runs: mlperf)
EXTRA_FIGURES = ("step_time_microbatches", "claim_sensitivity")
ALL_FIGURES = FIGURES + RANK_FIGURES + EXTRA_FIGURES
MAX_RUN_ID = 200  # characters: run directories are named by run ids (NAME_MAX 255, with room for suffixes)
STUDIES_DIR = Path("workflow") / "studies"
SCHEMA_FILE = Path("workflow") / "schemas" / "study.schema.json"
PLANNING_KEYS = ("global_batch_per_gpu",)
_EXCLUSIVE = (("global_batch", "global_batch_per_gpu"),)  # setting one clears the other from lower layers


class StudyError(SpecError):
    """A study file that cannot be planned. `problems` lists (field, reason) pairs; the message
    names the study and, where there is one, the experiment and the grid point."""

    def __init__(
        self, study: str, problems: list[tuple[str, str]], experiment: str | None = None, point: dict | None = None
    ):
        self.study, self.experiment, self.point, self.problems = study, experiment, point, problems
        where = f"study {study!r}"
        if experiment:
            where += f", experiment {experiment!r}"
        if point:
            where += " (" + ", ".join(f"{k}={v}" for k, v in point.items()) + ")"
        ValueError.__init__(self, where + ": " + "; ".join(f"{f}: {r}" for f, r in problems))


@dataclass(frozen=True)
class PlannedRun:
    """A run a study plans: its spec, the experiments it serves and its label."""

    spec: RunSpec
    experiments: tuple[str, ...]  # the figures' groups this run belongs to, e.g. ("weak_scaling",)
    label: str  # the strategy in words, e.g. "FSDP", "HSDP 8x32", "TP=2, PP=4, FSDP over 32"
    variant: str = ""  # a prediction study's further cluster for this spec (run id suffix "--<variant>")

    @property
    def run_id(self) -> str:
        return self.spec.run_id + (f"--{self.variant}" if self.variant else "")

    @property
    def config_id(self) -> str:
        return self.spec.config_id + (f"--{self.variant}" if self.variant else "")


@dataclass(frozen=True)
class DroppedPoint:
    """A grid point of an experiment with `skip_infeasible: true` that was left out, and why."""

    experiment: str
    point: dict
    reason: str


@dataclass(frozen=True)
class Study:
    """A study as loaded: its planned runs, benchmarks, figures and settings."""

    name: str
    description: str
    hardware: str  # what the figures say the runs ran on, e.g. "CPU (gloo)", "H100 SXM"
    assumptions: tuple[str, ...]
    runs: tuple[PlannedRun, ...]  # one per (configuration, seed)
    collectives: tuple[CollectivesSpec, ...]
    figures: tuple[str, ...]
    root: Path = field(default=Path("."))
    launch: bool = True  # False: never launched by the workflow; figures come from committed raw logs
    partial: bool = False  # True: the committed raw logs may hold only some planned runs (the rest: planned)
    time_limit_s: float | None = None  # every run's wall-clock limit; None: estimated from its spec
    dropped: tuple[DroppedPoint, ...] = ()
    source: Path | None = None  # the YAML file
    # A study predicted by scalestudy.perfmodel instead of run: {cluster, calibration, variants}
    # (see workflow/studies/paper-model.yaml); None for a study of measurements.
    prediction: dict | None = None
    # The performance model beside a study of measurements: {cluster, calibration} (scalestudy model
    # beside); None: no model beside it.
    model_beside: dict | None = None
    # A study of public raw logs imported from elsewhere: the sources (repository, commit, results,
    # model) its runs were imported from (scalestudy import); () for runs of this package.
    imported: tuple[dict, ...] = ()
    gpu_hours_budget: float | None = None  # refuse to submit a plan asking more (scalestudy.launch.cost)
    catalog: tuple[str, ...] = ()  # catalog files (model shapes, GPU kinds) the study adds
    peak_tflops: float | None = None  # the peak for MFU of every run (else the GPU catalog's)
    # {kind: tensorboard|wandb, dir, project, mode}: where every run mirrors its per-step numbers
    # (scalestudy.harness.metrics_sink); not part of any run id
    metrics_sink: dict | None = None
    expected_cost_cluster: str | None = None  # workflow/clusters NAME: the expected GPU-hours
    # run id -> why its numbers carry a known artefact (kept in use; consumers carry the caveat)
    known_artefacts: dict[str, str] = field(default_factory=dict)
    # run id -> why the grid no longer plans it: a committed run directory whose configuration the
    # study changed after it was measured (raw logs are never rewritten); listed in unplanned_runs.csv
    # with why, never read into the tables, not an audit problem (analysis.aggregate.unplanned_runs)
    retired_runs: dict[str, str] = field(default_factory=dict)
    # a rank-share study (comm: fake): {gpu, measured_on}, the GPU kind its one-GPU measurements
    # stand in for and the one they ran on (scalestudy.perfmodel.rank_shares); None: not one
    stands_in_for: dict | None = None
    # The outlier rule's threshold (scalestudy.analysis.aggregate.seed_outliers): a clean seed more than
    # this fraction below the fastest clean seed of its configuration is left out; None: the default of
    # the runs' device kind, tied to its measured run-to-run noise (aggregate.OUTLIER_SLOWDOWN)
    outlier_slowdown: float | None = None

    @property
    def raw_dir(self) -> Path:
        return self.root / "data" / self.name / "raw"

    @property
    def tables_dir(self) -> Path:
        return self.root / "data" / self.name / "tables"

    @property
    def figures_dir(self) -> Path:
        return self.root / "figures" / self.name

    # ---- look-ups ---------------------------------------------------------------------
    @cached_property
    def _runs_by_id(self) -> dict[str, PlannedRun]:
        return {r.run_id: r for r in self.runs}

    @cached_property
    def _collectives_by_id(self) -> dict[str, CollectivesSpec]:
        return {c.run_id: c for c in self.collectives}

    @property
    def run_ids(self) -> tuple[str, ...]:
        return tuple(self._runs_by_id)

    @property
    def collectives_ids(self) -> tuple[str, ...]:
        return tuple(self._collectives_by_id)

    @property
    def jobs(self) -> tuple[tuple[str, RunSpec | CollectivesSpec], ...]:
        """(run id, spec) of every job the study plans: its runs, then its collectives benchmarks."""
        return tuple((r.run_id, r.spec) for r in self.runs) + tuple((c.run_id, c) for c in self.collectives)

    @property
    def experiments(self) -> tuple[str, ...]:
        seen: dict[str, None] = {}
        for r in self.runs:
            seen.update(dict.fromkeys(r.experiments))
        return tuple(seen)

    def run(self, run_id: str) -> PlannedRun:
        try:
            return self._runs_by_id[run_id]
        except KeyError:
            raise KeyError(f"study {self.name!r} plans no training run {run_id!r}") from None

    def collective(self, run_id: str) -> CollectivesSpec:
        try:
            return self._collectives_by_id[run_id]
        except KeyError:
            raise KeyError(f"study {self.name!r} plans no collectives benchmark {run_id!r}") from None

    def runs_of(self, experiment: str) -> tuple[PlannedRun, ...]:
        return tuple(r for r in self.runs if experiment in r.experiments)

    def experiments_by_run_id(self) -> dict[str, tuple[str, ...]]:
        out = {run_id: r.experiments for run_id, r in self._runs_by_id.items()}
        out.update({run_id: ("collectives_bandwidth",) for run_id in self._collectives_by_id})
        return out


# ---- labels -------------------------------------------------------------------------
_SCHEDULE_WORDS = {"1f1b": "", "gpipe": " GPipe", "interleaved_1f1b": " interleaved"}


def strategy_label(spec: RunSpec) -> str:
    """The parallel strategy in words: "FSDP", "HSDP 8x32" (shard 8 within a group, 32 replicas),
    "TP=2, PP=4, FSDP over 32", "TP=2+SP, FSDP over 2", "PP=2 interleaved x2, FSDP over 2"."""
    parts = []
    if spec.tp > 1:
        parts.append(f"TP={spec.tp}" + ("+SP" if spec.sequence_parallel else ""))
    if spec.pp > 1:
        words = _SCHEDULE_WORDS[spec.pp_schedule]
        if spec.pp_schedule == "interleaved_1f1b":
            words += f" x{spec.pp_stages_per_rank}"
        parts.append(f"PP={spec.pp}{words}")
    if spec.cp > 1:
        parts.append(f"CP={spec.cp}")
    model_parallel = bool(parts)
    if spec.dp_replicate > 1 and spec.dp_shard > 1:
        parts.append(f"HSDP {spec.dp_shard}x{spec.dp_replicate}")
    elif spec.dp_replicate > 1:
        parts.append(f"DDP over {spec.dp_replicate}")
    elif spec.dp_shard > 1:
        parts.append(f"FSDP over {spec.dp_shard}" if model_parallel else "FSDP")
    elif not model_parallel:
        parts.append("FSDP")
    if spec.activation_checkpointing != "none":
        parts.append(f"{spec.activation_checkpointing} AC")
    label = ", ".join(parts)
    return label if spec.backend == "torch" else f"{label} [{spec.backend}]"


# ---- loading --------------------------------------------------------------------------
def study_path(name: str, root: Path | str = ".") -> Path:
    """The YAML file of study `name` (a name under workflow/studies, or a path to a file)."""
    p = Path(name)
    if p.suffix in (".yaml", ".yml") or len(p.parts) > 1:
        return p if p.is_absolute() or p.exists() else Path(root) / p
    return Path(root) / STUDIES_DIR / f"{name}.yaml"


def study_names(root: Path | str = ".") -> list[str]:
    """The names of the studies under `root` (studies/*.yaml), sorted."""
    return sorted(p.stem for p in (Path(root) / STUDIES_DIR).glob("*.yaml"))


def study_headers(root: Path | str = ".") -> tuple[dict[str, dict], dict[str, str]]:
    """The top-level mapping of every workflow/studies/*.yaml by study name, and the files that
    cannot be read (name -> a sentence naming the file): a broken file leaves out only its study."""
    headers, broken = {}, {}
    for p in sorted((Path(root) / STUDIES_DIR).glob("*.yaml")):
        try:
            data = strict_yaml.load_file(p)
        except (yaml.YAMLError, OSError, UnicodeDecodeError) as e:
            broken[p.stem] = f"{p} is not valid YAML: {' '.join(str(e).split())}"
            continue
        if data is not None and not isinstance(data, dict):
            broken[p.stem] = f"{p} does not hold a mapping of study fields"
            continue
        headers[p.stem] = data or {}
    return headers, broken


def schema_path(root: Path | str = ".") -> Path:
    """The study schema's file, under `root` or in the package's checkout."""
    return checkout_path(SCHEMA_FILE, root)


def load_study(name: str, root: Path | str = ".") -> Study:
    """The study `name` (workflow/studies/<name>.yaml under root, or a path to a YAML file)."""
    root = Path(root)
    path = study_path(name, root)
    study_name = path.stem
    if not path.exists():
        known = ", ".join(study_names(root)) or "none"
        raise StudyError(study_name, [("study", f"no file {path} (known studies: {known})")])
    try:
        data = strict_yaml.load_file(path)
    except yaml.YAMLError as e:
        raise StudyError(study_name, [("yaml", f"{path} is not valid YAML: {e}")]) from None
    try:
        site = load_site(root=root)
        use_catalog_files([f.strip() for f in (site.catalog or "").split(",") if f.strip()], root)
    except (SiteError, ValueError) as e:
        raise StudyError(study_name, [("site catalog", str(e))]) from None
    return study_from_dict(study_name, data, root=root, source=path)


def use_catalog_files(paths: Iterable[str], root: Path | str = ".") -> list[Path]:
    """Add catalog files (relative to root) to this process's catalog, once each, and to
    SCALESTUDY_CATALOG so that the processes it starts (a run's workers) see them too."""
    added = []
    for p in paths:
        path = Path(p) if Path(p).is_absolute() else Path(root) / p
        path = path.resolve()
        if str(path) not in catalog.files():
            catalog.add_catalog_file(path)
        listed = [f for f in os.environ.get(catalog.ENV_VAR, "").split(os.pathsep) if f]
        if str(path) not in listed:
            os.environ[catalog.ENV_VAR] = os.pathsep.join([*listed, str(path)])
        added.append(path)
    return added


def validate_study_dict(name: str, data: Any, root: Path | str = ".") -> None:
    """Check a study mapping against the JSON schema; raise StudyError naming every bad field."""
    import jsonschema  # heavy: only when validating (spec loads at CLI and Snakemake start)

    schema = json.loads(schema_path(root).read_text())
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(data), key=lambda e: [str(p) for p in e.absolute_path])
    if errors:
        raise StudyError(name, [(_path_words(data, e.absolute_path), _error_words(e)) for e in errors])


def _path_words(data: Any, path: Iterable) -> str:
    out, node = "", data
    for p in path:
        if isinstance(p, int):
            out += f"[{p}]"
            if (
                isinstance(node, list)
                and p < len(node)
                and isinstance(node[p], dict)
                and "name" in node[p]
                and out.startswith("experiments")
                and out.count("[") == 1
            ):
                out += f" ({node[p]['name']})"
        else:
            out += f".{p}" if out else str(p)
        try:
            node = node[p]
        except (KeyError, IndexError, TypeError):
            node = None
    return out or "(top level)"


def _error_words(e) -> str:
    import jsonschema  # heavy: only when validating a study

    if e.context:  # oneOf/anyOf: say what the closest alternative wanted
        best = jsonschema.exceptions.best_match(e.context)
        alternatives = [s.get("const", s.get("type")) for s in e.validator_value if isinstance(s, dict)]
        alternatives = [a for a in alternatives if a is not None]
        if alternatives:
            return f"{e.instance!r} is not any of: " + ", ".join(map(str, alternatives))
        return best.message
    if e.validator == "additionalProperties":
        return e.message.replace("Additional properties are not allowed", "unknown key")
    return e.message


def _measured_input_variants(planned: tuple[PlannedRun, ...], prediction: dict, root: Path | str) -> tuple:
    """The runs of the study's own cluster that its rank-share study (`rank_shares: STUDY`)
    measured a share of, once more as variant MEASURED_INPUTS: predicted with that share's compute
    and memory (the run as planned is predicted from the model alone)."""
    if not prediction.get("rank_shares"):
        return ()
    measured = measured_work(load_study(prediction["rank_shares"], root))
    return tuple(
        PlannedRun(p.spec, p.experiments, p.label + MEASURED_SERIES, variant=MEASURED_INPUTS)
        for p in planned
        if not p.variant and work_key(p.spec) in measured
    )


def study_from_dict(name: str, data: Any, *, root: Path | str = ".", source: Path | None = None) -> Study:
    """The Study `name` from its parsed YAML `data`; a StudyError listing every problem."""
    validate_study_dict(name, data, root)
    try:
        use_catalog_files(data.get("catalog", ()), root)
    except ValueError as e:  # catalog.CatalogError
        raise StudyError(name, [("catalog", str(e))]) from None
    seeds = tuple(data["seeds"])
    defaults = dict(data.get("defaults", {}))
    memory_gib = data.get("device_memory_gib")
    runs: dict[str, tuple[RunSpec, list[str]]] = {}
    dropped: list[DroppedPoint] = []
    for exp in data["experiments"]:
        exp_name = exp["name"]
        names = [exp_name, *[a for a in exp.get("also", []) if a != exp_name]]
        for spec in _expand(name, exp, defaults, memory_gib, dropped):
            for seed in exp.get("seeds", seeds):
                try:
                    s = spec.replace(seed=seed)
                except SpecError as e:
                    raise StudyError(name, e.problems, experiment=exp_name) from None
                if len(s.run_id) > MAX_RUN_ID:  # a run directory's name; with a variant's suffix under NAME_MAX
                    raise StudyError(
                        name,
                        [
                            (
                                f"experiments/{exp_name}",
                                f"run id {s.run_id!r} has {len(s.run_id)} "
                                f"characters, more than {MAX_RUN_ID} (a run directory is named by it; "
                                f"the model name {s.model!r} is {len(s.model)})",
                            )
                        ],
                    )
                have = runs.setdefault(s.run_id, (s, []))[1]
                have.extend(n for n in names if n not in have)
    planned = tuple(PlannedRun(spec=s, experiments=tuple(e), label=strategy_label(s)) for s, e in runs.values())
    prediction = data.get("prediction")
    if prediction:
        # the same spec predicted on a further cluster: a run of its own, "<run id>--<cluster>"
        extra = []
        for cluster, exps in sorted((prediction.get("variants") or {}).items()):
            for p in planned:
                mine = tuple(e for e in p.experiments if e in exps)
                if mine:
                    extra.append(PlannedRun(p.spec, mine, f"{p.label} ({cluster})", variant=cluster))
        planned += tuple(extra) + _measured_input_variants(planned, prediction, root)
    collectives = _collectives(name, data.get("collectives"))
    artefacts = dict(data.get("known_artefacts") or {})
    unknown = sorted(set(artefacts) - {p.run_id for p in planned} - {c.run_id for c in collectives})
    if unknown:
        raise StudyError(
            name,
            [
                (
                    "known_artefacts",
                    f"{source or 'the study file'}: {', '.join(map(repr, unknown))} "
                    f"{'is not a run' if len(unknown) == 1 else 'are not runs'} of this study",
                )
            ],
        )
    retired = dict(data.get("retired_runs") or {})
    planned_too = sorted(set(retired) & ({p.run_id for p in planned} | {c.run_id for c in collectives}))
    if planned_too:
        raise StudyError(
            name,
            [
                (
                    "retired_runs",
                    f"{source or 'the study file'}: {', '.join(map(repr, planned_too))} "
                    f"{'is' if len(planned_too) == 1 else 'are'} still planned by the grid: a retired run is "
                    "one the grid no longer plans",
                )
            ],
        )
    figures = (
        tuple(data["figures"])
        if "figures" in data
        else _default_figures(planned, collectives) + (("claim_sensitivity",) if data.get("prediction") else ())
    )  # a prediction study's inputs against its claims
    return Study(
        name=name,
        description=data["description"].strip(),
        hardware=data["hardware"],
        assumptions=tuple(data.get("assumptions", ())),
        runs=planned,
        collectives=collectives,
        figures=figures,
        root=Path(root),
        launch=data.get("launch", True),
        partial=data.get("partial", False),
        time_limit_s=data.get("time_limit_s"),
        dropped=tuple(dropped),
        source=source,
        prediction=dict(prediction) if prediction else None,
        model_beside=dict(data["model_beside"]) if data.get("model_beside") else None,
        imported=tuple(dict(s) for s in data.get("imported") or ()),
        gpu_hours_budget=data.get("gpu_hours_budget"),
        expected_cost_cluster=data.get("expected_cost_cluster"),
        catalog=tuple(data.get("catalog", ())),
        peak_tflops=data.get("peak_tflops"),
        known_artefacts=artefacts,
        retired_runs=retired,
        metrics_sink=dict(data["metrics_sink"]) if data.get("metrics_sink") else None,
        outlier_slowdown=None if data.get("outlier_slowdown") is None else float(data["outlier_slowdown"]),
        stands_in_for=dict(data["stands_in_for"]) if data.get("stands_in_for") else None,
    )


def _default_figures(runs: tuple[PlannedRun, ...], collectives: tuple) -> tuple[str, ...]:
    groups = {e for r in runs for e in r.experiments}
    return tuple(f for f in FIGURES if f in groups or (f == "collectives_bandwidth" and collectives))


def _merge(*layers: dict) -> dict:
    out: dict = {}
    for layer in layers:
        for group in _EXCLUSIVE:
            if any(k in layer for k in group):
                for k in group:
                    out.pop(k, None)
        out.update(layer)
    return out


def _expand(
    study: str, exp: dict, defaults: dict, memory_gib: float | None, dropped: list[DroppedPoint]
) -> Iterable[RunSpec]:
    name = exp["name"]
    grid = exp.get("grid", {})
    layouts = exp.get("layouts", [{}])
    keys = list(grid)
    skip = exp.get("skip_infeasible", False)
    for values in itertools.product(*(grid[k] for k in keys)):
        point = dict(zip(keys, values))
        for layout in layouts:
            both = sorted(set(point) & set(layout))
            if both:
                raise StudyError(study, [(both[0], "set by both the grid and a layout")], experiment=name)
            where = {**point, **layout}
            try:
                merged = _merge(defaults, exp.get("set", {}), point, layout)
                stages = merged.get("emulate_rank") == "stages"
                if stages:
                    merged["emulate_rank"] = 0
                spec = resolve_spec(merged)
            except SpecError as e:
                if skip:
                    dropped.append(DroppedPoint(name, where, "; ".join(f"{f}: {r}" for f, r in e.problems)))
                    continue
                raise StudyError(study, e.problems, experiment=name, point=where) from None
            if skip and memory_gib:
                need = estimate_memory(spec).total_bytes
                if need > memory_gib * GIB:
                    dropped.append(
                        DroppedPoint(
                            name,
                            where,
                            f"memory estimate {need / GIB:.0f} GiB exceeds device_memory_gib {memory_gib:g}",
                        )
                    )
                    continue
            if stages and spec.comm == "fake":
                for kind in distinct_stages(spec):
                    yield spec.replace(emulate_rank=rank_of(spec, pp_rank=kind.pp_rank))
            else:
                yield spec


def resolve_spec(fields: dict) -> RunSpec:
    """A RunSpec from study fields, planning keys and values resolved (see the module doc)."""
    f = dict(fields)
    base = RunSpec.__dataclass_fields__

    def get(k: str):
        return f.get(k, base[k].default)

    world = get("nodes") * get("procs_per_node")
    per_gpu = f.pop("global_batch_per_gpu", None)
    if per_gpu is not None:
        f["global_batch"] = per_gpu * world
    if f.get("dp_replicate") == "rest":
        shard = get("dp_shard")
        if shard < 1:
            raise SpecError([("dp_replicate", "'rest' needs dp_shard set to a number of processes")])
        fixed = shard * get("tp") * get("pp") * get("cp")
        if world % fixed:
            raise SpecError(
                [("dp_replicate", f"'rest': world size {world} is not divisible by dp_shard*tp*pp*cp = {fixed}")]
            )
        f["dp_replicate"] = world // fixed
    if f.get("pp_microbatches") == "fill":
        if get("pp") == 1:
            f["pp_microbatches"] = 0
        else:
            rep, shard = get("dp_replicate"), get("dp_shard")
            if shard == -1:
                shard = world // (rep * get("tp") * get("pp") * get("cp")) or 1
            dp, gb, mb = rep * shard, get("global_batch"), get("micro_batch")
            if gb < 1:
                raise SpecError([("pp_microbatches", "'fill' needs global_batch or global_batch_per_gpu")])
            if gb % (dp * mb) or gb // (dp * mb) < get("pp"):
                raise SpecError(
                    [
                        (
                            "pp_microbatches",
                            f"'fill': global batch {gb} over {dp} data-parallel ranks in "
                            f"micro batches of {mb} does not give a whole number of at "
                            f"least pp={get('pp')} microbatches",
                        )
                    ]
                )
            f["pp_microbatches"] = gb // (dp * mb)
    return RunSpec.from_dict(f)


def _collectives(study: str, c: dict | None) -> tuple[CollectivesSpec, ...]:
    if not c:
        return ()
    c = dict(c)
    nodes, worlds = c.pop("nodes", None), c.pop("world_sizes", None)
    seeds = c.pop("seeds", [0])
    if (nodes is None) == (worlds is None):
        raise StudyError(study, [("collectives", "give either nodes (a list) or world_sizes (one node each)")])
    if worlds is not None and "procs_per_node" in c:
        raise StudyError(study, [("collectives.procs_per_node", "world_sizes sets it (one node each)")])
    for k in ("min_bytes", "max_bytes"):
        if k in c:
            c[k] = parse_size(c[k])
    points = [{"nodes": n} for n in nodes] if nodes is not None else [{"nodes": 1, "procs_per_node": w} for w in worlds]
    out = []
    for p in points:
        for seed in seeds:
            try:
                out.append(CollectivesSpec.from_dict({**c, **p, "seed": seed}))
            except SpecError as e:
                raise StudyError(study, [(f"collectives.{f}", r) for f, r in e.problems], point=p) from None
    return tuple(out)
