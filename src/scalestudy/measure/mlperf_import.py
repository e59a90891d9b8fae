"""MLPerf Training result files -> raw logs of this package (docs/mlperf.md).

One run directory a result file (`<org>/results/<system>/<benchmark>/result_N.txt`): the
per-step `tracked_stats` timings as `iteration` records, the block and evaluation spans as records
of their own, and `run.json` with the system (the submission's `systems/<system>.json`), the layout
(the logged values first, the launch configuration `benchmarks/<benchmark>/implementations/*/
config_*.sh` second, every disagreement recorded) and the source: repository, commit, path and
sha256 of every file read. The RunSpec seed is the result file's index; the logged seed is kept.

The measured window follows the package's own rule (RunSpec warmup_iters / measured_iters): the
first `warmup_iters` optimizer steps are warm-up; the next `measured_iters` are measured; MLPerf runs
go on until they converge, so their later steps are kept with phase `beyond_window` and not counted.
Step times are the logged train-step timings, which leave evaluation out. Pure Python: the source
tree is read through `git show` (a bare mirror) or from a directory of files.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scalestudy.measure import mllog, rawlog
from scalestudy.measure.metrics import device_peak_record, flops_per_token
from scalestudy.measure.mlperf_config import LaunchConfig, read_shell, read_yaml_defaults
from scalestudy.spec import catalog
from scalestudy.spec.run import RunSpec

IMPORTER = "scalestudy.measure.mlperf_import"
BEYOND_WINDOW = "beyond_window"
STEP_TIME_KEYS = ("train_step_timing", "train_step_time")  # v3.x NeMo, v4.x/v5.x mlperf_common
BLOCK_SUMMARY_KEY = "throughput"  # a tracked_stats event that sums up a block, not a step
# the submission's accelerator name -> the GPU catalog's device name
ACCELERATORS = {"NVIDIA H100-SXM5-80GB": "NVIDIA H100 80GB HBM3"}
WINDOW_RULE = ("the package's own: the first warmup_iters optimizer steps are warm-up, the next measured_iters are "
               "measured (RunSpec); later steps of the run are kept as beyond_window and not counted; step times "
               "are the logged train-step timings, evaluation excluded")


class MLPerfImportError(ValueError):
    """An import that cannot be made: names the file (and line) at fault."""


# ---- the source tree ---------------------------------------------------------------
@dataclass
class SourceTree:
    """A submission repository: a bare git mirror (read at `commit`) or a plain directory."""

    root: Path
    repository: str
    commit: str
    git: bool
    read_files: dict[str, str] = field(default_factory=dict)  # path -> sha256 of each file read for one result

    def read_bytes(self, path: str) -> bytes:
        if self.git:
            r = subprocess.run(["git", "-C", str(self.root), "show", f"{self.commit}:{path}"], capture_output=True)
            if r.returncode:
                raise MLPerfImportError(f"{self.repository}@{self.commit[:12]}:{path}: cannot read "
                                   f"({r.stderr.decode(errors='replace').strip()})")
            data = r.stdout
        else:
            p = self.root / path
            if not p.is_file():
                raise MLPerfImportError(f"{p}: no such file")
            data = p.read_bytes()
        self.read_files[path] = hashlib.sha256(data).hexdigest()
        return data

    def read_text(self, path: str) -> str:
        return self.read_bytes(path).decode("utf-8", errors="replace")

    def list(self, prefix: str) -> list[str]:
        if self.git:
            r = subprocess.run(["git", "-C", str(self.root), "ls-tree", "-r", "--name-only", self.commit, prefix],
                               capture_output=True, text=True)
            if r.returncode:
                raise MLPerfImportError(f"{self.root}: git ls-tree failed ({r.stderr.strip()})")
            return sorted(r.stdout.split())
        base = self.root / prefix
        return sorted(p.relative_to(self.root).as_posix() for p in base.rglob("*") if p.is_file()) \
            if base.exists() else []


def open_tree(root: str | Path, repository: str, commit: str | None = None) -> SourceTree:
    """A bare git mirror or a checkout (`git rev-parse` works: read at `commit`, default HEAD), or a
    plain directory of files (commit: the one given, or 'none')."""
    root = Path(root)
    r = subprocess.run(["git", "-C", str(root), "rev-parse", commit or "HEAD"], capture_output=True, text=True)
    if r.returncode == 0:
        return SourceTree(root, repository, r.stdout.strip(), git=True)
    if not root.is_dir():
        raise MLPerfImportError(f"{root}: neither a git repository nor a directory")
    return SourceTree(root, repository, commit or "none", git=False)


# ---- what a result file says ------------------------------------------------------------
@dataclass(frozen=True)
class Value:
    """One layout value: what the log and the configuration say, and which is used."""

    value: Any
    source: str  # "log", "config", "log and config", "derived", "default (...)"
    log: Any = None
    config: Any = None
    config_at: str | None = None  # path:line of the setting

    def as_dict(self) -> dict:
        return {k: v for k, v in {"value": self.value, "from": self.source, "log": self.log, "config": self.config,
                                  "config_at": self.config_at}.items() if v is not None}


@dataclass
class Imported:
    """One result file made into a raw log (before it is written)."""

    result_path: str
    spec: RunSpec
    run: dict
    records: list[dict]
    status: str
    error: str | None
    n_steps: int
    files: dict[str, str] = field(default_factory=dict)  # every source file read for it -> sha256


def _int(v) -> int | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return int(f) if f == int(f) else None


def _bool(v) -> bool | None:
    s = str(v).strip().lower()
    return True if s in ("true", "1", "yes") else False if s in ("false", "0", "no", "null", "none") else None


def _result_parts(path: str) -> tuple[str, str, str, int]:
    """(org, system, benchmark, index) of `<org>/results/<system>/<benchmark>/result_N.txt`."""
    parts = path.split("/")
    m = re.fullmatch(r"result_(\d+)\.txt", parts[-1])
    if len(parts) < 5 or parts[-4] != "results" or not m:
        raise MLPerfImportError(f"{path}: not an MLPerf result file (<org>/results/<system>/<benchmark>/result_N.txt)")
    return parts[-5], parts[-3], parts[-2], int(m.group(1))


def find_config(tree: SourceTree, org: str, benchmark: str, system: str, nodes: int, gpus_per_node: int) -> str | None:
    """The launch configuration of a result: `config_<SYSTEM>_<nodes>x<gpus>x*.sh` under the
    benchmark's implementations, in the implementation named like the system where there is one."""
    base = f"{org}/benchmarks/{benchmark}/implementations"
    pat = re.compile(rf"config_[A-Za-z0-9]+_{nodes}x{gpus_per_node}x[^/]*\.sh")
    cands = [p for p in tree.list(base) if pat.fullmatch(p.rsplit("/", 1)[-1])]
    own = [p for p in cands if p.split("/")[-2] == system]
    others = _system_dirs(tree, org)
    cands = own or [p for p in cands if p.split("/")[-2] not in others]
    if len(cands) > 1:
        raise MLPerfImportError(f"{base}: {len(cands)} configurations fit {system} ({', '.join(cands)}); import it "
                           "with --config")
    return cands[0] if cands else None


def _system_dirs(tree: SourceTree, org: str) -> set[str]:
    return {p.rsplit("/", 1)[-1].removesuffix(".json") for p in tree.list(f"{org}/systems")}


def read_config(tree: SourceTree, path: str) -> LaunchConfig:
    cfg = read_shell(path, tree.read_text)
    conf = path.rsplit("/", 1)[0] + "/conf/"
    for p in tree.list(conf):
        if p.endswith(".yaml") and p.count("/") == conf.count("/"):
            read_yaml_defaults(p, tree.read_text(p), cfg)
    return cfg


def _setting(cfg: LaunchConfig | None, name: str):
    if cfg is None:
        return None, None
    s = cfg.get(name)
    return (s.value, f"{s.path}:{s.line}") if s else (None, None)


def _pick(name: str, log_value, cfg_value, cfg_at, disagreements: list[dict], *, default=None) -> Value:
    """The logged value first, the configuration's second; a disagreement is recorded."""
    if log_value is not None and cfg_value is not None:
        if log_value != cfg_value:
            disagreements.append({"field": name, "log": log_value, "config": cfg_value, "config_at": cfg_at,
                                  "used": "log"})
            return Value(log_value, "log", log_value, cfg_value, cfg_at)
        return Value(log_value, "log and config", log_value, cfg_value, cfg_at)
    if log_value is not None:
        return Value(log_value, "log", log_value)
    if cfg_value is not None:
        return Value(cfg_value, "config", None, cfg_value, cfg_at)
    return Value(default, "default (neither logged nor configured)")


@dataclass(frozen=True)
class ImportOptions:
    model: str  # catalog model name
    warmup_iters: int = 10
    measured_iters: int | None = None  # None: decided over the files imported together (import_results)
    backend: str = "megatron"


def read_result(tree: SourceTree, path: str, opts: ImportOptions, config_path: str | None = None) -> Imported:
    """One result file with its system description and launch configuration."""
    org, system, benchmark, index = _result_parts(path)
    tree.read_files = {}
    events = mllog.parse(tree.read_text(path), path)
    if not events:
        raise MLPerfImportError(f"{path}: no {mllog.MARKER} lines")
    logged = {k: mllog.first_value(events, k) for k in (
        "submission_benchmark", "submission_org", "submission_division", "submission_status", "submission_platform",
        "seed", "global_batch_size", "gradient_accumulation_steps", "max_sequence_length", "opt_base_learning_rate")}
    sys_path = f"{org}/systems/{system}.json"
    try:
        sys_desc = json.loads(tree.read_text(sys_path))
    except MLPerfImportError:
        sys_desc, sys_path = {}, None
    except json.JSONDecodeError as e:
        raise MLPerfImportError(f"{sys_path}:{e.lineno}: not valid JSON ({e.msg})") from None
    platform = str(logged["submission_platform"] or "")
    m = re.match(r"(\d+)x(.+)", platform)
    log_nodes = int(m.group(1)) if m else None
    disagreements: list[dict] = []
    nodes = _pick("nodes", log_nodes, _int(sys_desc.get("number_of_nodes")), sys_path, disagreements)
    gpn = _int(sys_desc.get("accelerators_per_node"))
    if nodes.value is None or gpn is None:
        raise MLPerfImportError(f"{path}: the number of nodes or of GPUs a node is unknown (submission_platform "
                           f"{platform!r}; {sys_path or org + '/systems/' + system + '.json (missing)'})")
    config_path = config_path or find_config(tree, org, benchmark, system, nodes.value, gpn)
    cfg = read_config(tree, config_path) if config_path else None
    if cfg is not None:
        nodes = _pick("nodes", nodes.value, _int(_setting(cfg, "DGXNNODES")[0]), _setting(cfg, "DGXNNODES")[1],
                      disagreements)
    world = nodes.value * gpn

    def cfg_int(name, default=None):
        v, at = _setting(cfg, name)
        return (_int(v) if v is not None else default), at

    tp_c, tp_at = cfg_int("TENSOR_MODEL_PARALLEL")
    pp_c, pp_at = cfg_int("PIPELINE_MODEL_PARALLEL")
    vpp_c, vpp_at = cfg_int("INTERLEAVED_PIPELINE")
    cp_c, cp_at = cfg_int("CONTEXT_PARALLEL")
    mbs_c, mbs_at = cfg_int("MICRO_BATCH_SIZE")
    minibs_c, minibs_at = cfg_int("MINIBS")
    layout: dict[str, Value] = {
        "tp": _pick("tp", None, tp_c, tp_at, disagreements, default=1),
        "pp": _pick("pp", None, pp_c, pp_at, disagreements, default=1),
        "virtual_stages": _pick("virtual_stages", None, vpp_c, vpp_at, disagreements, default=1),
        "cp": _pick("cp", None, cp_c, cp_at, disagreements, default=1),
        "micro_batch": _pick("micro_batch", None, mbs_c, mbs_at, disagreements, default=1),
    }
    tp, pp, cp, mbs = (layout[k].value or 1 for k in ("tp", "pp", "cp", "micro_batch"))
    dp = world // (tp * pp * cp)
    layout["dp"] = Value(dp, "derived")
    if world % (tp * pp * cp):
        raise MLPerfImportError(f"{path}: {world} GPUs do not split into TP {tp} x PP {pp} x CP {cp}")
    gbs_cfg = minibs_c * dp if minibs_c is not None else None
    gbs_at = f"{minibs_at} (MINIBS x data-parallel degree {dp})" if minibs_at else None
    layout["global_batch"] = _pick("global_batch", _int(logged["global_batch_size"]), gbs_cfg, gbs_at, disagreements)
    ga_cfg = minibs_c // mbs if minibs_c is not None else None
    layout["grad_accum_steps"] = _pick("grad_accum_steps", _int(logged["gradient_accumulation_steps"]), ga_cfg,
                                       f"{minibs_at} (MINIBS / MICRO_BATCH_SIZE)" if minibs_at else None, disagreements)
    seq_s = cfg.yaml_literals.get("encoder_seq_length") if cfg else None
    layout["seq_len"] = _pick("seq_len", _int(logged["max_sequence_length"]), _int(seq_s.value) if seq_s else None,
                              f"{seq_s.path}:{seq_s.line}" if seq_s else None, disagreements)
    fp8_v, fp8_at = _setting(cfg, "FP8")
    layout["precision"] = _pick("precision", None, None if fp8_v is None else ("fp8" if _bool(fp8_v) else "bf16"),
                                fp8_at, disagreements, default="bf16")
    sp_v, sp_at = _setting(cfg, "SEQ_PARALLEL")
    layout["sequence_parallel"] = _pick("sequence_parallel", None, _bool(sp_v) if sp_v is not None else None, sp_at,
                                        disagreements, default=tp > 1)
    embed_v, embed_at = _setting(cfg, "ASYM_PP_EMBED")
    loss_v, _ = _setting(cfg, "ASYM_PP_LOSS")
    asym = bool(_bool(embed_v)) and bool(_bool(loss_v))
    layout["pp_embedding_stages"] = _pick("pp_embedding_stages", None, asym if embed_v is not None else None, embed_at,
                                          disagreements, default=False)
    gbs, ga, seq = layout["global_batch"].value, layout["grad_accum_steps"].value, layout["seq_len"].value
    if gbs is None or seq is None:
        raise MLPerfImportError(f"{path}: no global batch or sequence length, neither logged nor configured")
    if ga is not None and gbs != mbs * dp * ga:
        disagreements.append({"field": "grad_accum_steps", "log": ga, "config": None,
                              "derived": gbs // (mbs * dp), "used": "derived",
                              "why": f"the logged global batch {gbs} / (micro batch {mbs} x data-parallel {dp})"})
        ga = gbs // (mbs * dp)
    ga = ga if ga is not None else gbs // (mbs * dp)
    vpp = layout["virtual_stages"].value or 1

    steps, step_problems = _steps(events, path, gbs, seq)
    status, error = _status(events, path)
    opts_measured = opts.measured_iters if opts.measured_iters is not None else max(1, len(steps) - opts.warmup_iters)
    spec = RunSpec(
        model=opts.model, seq_len=seq, micro_batch=mbs, global_batch=gbs, nodes=nodes.value, procs_per_node=gpn,
        device="cuda", dp_replicate=1, dp_shard=dp, tp=tp, cp=cp, pp=pp,
        pp_schedule="interleaved_1f1b" if vpp > 1 else "1f1b", pp_stages_per_rank=vpp, pp_microbatches=ga,
        pp_embedding_stages=bool(layout["pp_embedding_stages"].value),
        sequence_parallel=bool(layout["sequence_parallel"].value) and tp > 1, precision=layout["precision"].value,
        backend=opts.backend, seed=index, warmup_iters=opts.warmup_iters, measured_iters=opts_measured,
        **({"lr": float(logged["opt_base_learning_rate"])} if isinstance(logged["opt_base_learning_rate"], (int, float))
           and logged["opt_base_learning_rate"] > 0 else {}),
    )
    run_id = spec.run_id
    records = _records(events, steps, run_id, spec, opts)
    device = ACCELERATORS.get(str(sys_desc.get("accelerator_model_name")), str(sys_desc.get("accelerator_model_name")))
    records.insert(0, _peak_record(device, spec.precision, run_id))
    run = {
        "kind": "train", "run_id": run_id, "config_id": spec.config_id, "spec": spec.to_dict(), "layout": spec.layout,
        "provenance": {
            "imported": True, "importer": IMPORTER, "devices": {"count": world, "names": [device]}, "hosts": [],
            "source": {"repository": tree.repository, "commit": tree.commit, "result": path, "config": config_path,
                       "system": sys_path, "files": {}},
        },
        "system": {"name": system, "gpus": world, "nodes": nodes.as_dict(), "gpus_per_node": gpn,
                   "accelerator": sys_desc.get("accelerator_model_name"), "platform": platform,
                   "description": sys_desc.get("system_name")},
        "mlperf": {"benchmark": logged["submission_benchmark"], "org": logged["submission_org"],
                   "division": logged["submission_division"], "status": logged["submission_status"],
                   "seed": logged["seed"], "result_index": index,
                   "not": "a raw log of a public result file; not the official time-to-train score"},
        "layout_detail": {k: v.as_dict() for k, v in layout.items()},
        "disagreements": disagreements + step_problems,
        "window": {"warmup_iters": spec.warmup_iters, "measured_iters": spec.measured_iters, "steps_logged": len(steps),
                   "rule": WINDOW_RULE},
    }
    return Imported(path, spec, run, records, status, error, len(steps), dict(tree.read_files))


def _peak_record(device: str, dtype: str, run_id: str) -> dict:
    try:
        value = device_peak_record(catalog.peak_flops(device, dtype))
    except LookupError as e:
        value = {"device_name": device, "dtype": dtype, "peak_flops_per_s": None, "source": None, "reason": str(e)}
    return rawlog.record("device_peak", value, rank=0, run_id=run_id)


def _steps(events: list[mllog.Event], path: str, gbs: int, seq: int) -> tuple[list[dict], list[dict]]:
    """The optimizer steps: each `tracked_stats` with a train-step time (not a block summary), its
    block, and its counter (metadata step: tokens or samples so far); a counter that does not grow
    by one step's samples or tokens is recorded as a disagreement."""
    steps, problems, block = [], [], -1
    previous = 0.0
    for e in events:
        if e.key == "block_start":
            block += 1
        if e.key != "tracked_stats" or not isinstance(e.value, dict) or BLOCK_SUMMARY_KEY in e.value:
            continue
        key = next((k for k in STEP_TIME_KEYS if k in e.value), None)
        if key is None:
            continue
        t = e.value[key]
        if not isinstance(t, (int, float)) or t <= 0:
            raise mllog.MLLogError(path, e.line, f"{key} is not a positive number: {t!r}")
        counter = e.metadata.get("step")
        steps.append({"time_s": float(t), "line": e.line, "time_ms": e.time_ms, "block": block, "counter": counter,
                      "loss": e.value.get("reduced_train_loss")})
        if isinstance(counter, (int, float)):
            delta = float(counter) - previous
            if delta not in (float(gbs), float(gbs * seq)) and not problems:
                problems.append({"field": "step counter", "log": counter, "line": e.line,
                                 "why": f"grows by {delta:g}, neither the global batch {gbs} (samples) nor "
                                        f"{gbs * seq} tokens", "used": "log (global batch x sequence length)"})
            previous = float(counter)
    if not steps:
        raise MLPerfImportError(f"{path}: no per-step train timing ({' or '.join(STEP_TIME_KEYS)} in tracked_stats)")
    return steps, problems


def _status(events: list[mllog.Event], path: str) -> tuple[str, str | None]:
    stop = [e for e in events if e.key == "run_stop"]
    if not stop:
        return "crashed", f"{path}: no run_stop event (the run did not end)"
    s = stop[-1].metadata.get("status")
    if s == "success":
        return "ok", None
    return "crashed", f"{path}:{stop[-1].line}: run_stop status {s!r}"


def _records(events, steps, run_id: str, spec: RunSpec, opts: ImportOptions) -> list[dict]:
    meta = {"rank": 0, "run_id": run_id}
    out = [rawlog.record("flops", flops_per_token(spec.model_config(), spec.seq_len), **meta)]
    tokens = spec.global_batch * spec.seq_len
    for i, s in enumerate(steps):
        phase = "warmup" if i < spec.warmup_iters else "measured" if i < spec.warmup_iters + spec.measured_iters \
            else BEYOND_WINDOW
        value = {"step": i, "phase": phase, "step_time_s": s["time_s"], "tokens": tokens, "loss": s["loss"],
                 "block": s["block"], "mllog_step": s["counter"]}
        out.append(rawlog.record("iteration", value, **meta, time_unix=s["time_ms"] / 1000.0, mllog_line=s["line"]))
    for name, (start, stop) in (("block", ("block_start", "block_stop")), ("eval", ("eval_start", "eval_stop"))):
        for i, (a, b) in enumerate(mllog.spans(events, start, stop, "result")):
            value = {"index": i, "start_unix": a.time_ms / 1000.0, "stop_unix": b.time_ms / 1000.0,
                     "duration_s": (b.time_ms - a.time_ms) / 1000.0, "lines": [a.line, b.line]}
            if name == "eval":
                acc = [e.value for e in events if e.key == "eval_accuracy" and a.line < e.line < b.line]
                value["eval_accuracy"] = acc[0] if acc else None
            out.append(rawlog.record(f"mlperf_{name}", value, **meta))
    run = {e.key: e for e in events if e.key in ("run_start", "run_stop")}
    if len(run) == 2:
        out.append(rawlog.record("mlperf_run", {
            "start_unix": run["run_start"].time_ms / 1000.0, "stop_unix": run["run_stop"].time_ms / 1000.0,
            "duration_s": (run["run_stop"].time_ms - run["run_start"].time_ms) / 1000.0,
            "status": run["run_stop"].metadata.get("status"),
            "note": "run_start to run_stop of this one file: not the official time-to-train score"}, **meta))
    return out


# ---- writing -------------------------------------------------------------------------
def write_run(imp: Imported, tree: SourceTree, out_root: Path) -> Path:
    """Write one imported run as a finished, sealed raw log with metrics.jsonl gzipped."""
    run_dir = Path(out_root) / imp.spec.run_id
    if run_dir.exists():
        for p in run_dir.iterdir():
            p.unlink()
    run_dir.mkdir(parents=True, exist_ok=True)
    run = json.loads(json.dumps(imp.run))
    run["provenance"]["source"]["files"] = dict(sorted(imp.files.items()))
    rawlog.atomic_write_json(run_dir / rawlog.RUN_FILE, run)
    text = "".join(json.dumps(r, sort_keys=True, separators=(",", ":")) + "\n" for r in imp.records)
    rawlog.atomic_write_text(run_dir / rawlog.METRICS_FILE, text)
    files_sha = {n: rawlog.sha256_file(run_dir / n) for n in (rawlog.METRICS_FILE, rawlog.RUN_FILE)}
    rawlog.write_status(run_dir / rawlog.STATUS_FILE, {
        "schema": rawlog.SCHEMA, "status": imp.status, "error": imp.error, "culprit_ranks": [],
        "ranks": [{"rank": 0, "status": imp.status, "error": imp.error}], "files_sha256": dict(sorted(files_sha.items())),
        "imported_from": f"{tree.repository}@{tree.commit}:{imp.result_path}"})
    rawlog.compress_run(run_dir)
    return run_dir


def select_results(tree: SourceTree, pattern: str) -> list[str]:
    """The result files matching a glob (relative to the repository), e.g.
    'NVIDIA/results/eos*_ngc23.09_nemo/gpt3/result_*.txt'."""
    prefix = pattern.split("*", 1)[0].rsplit("/", 1)[0]
    return [p for p in tree.list(prefix) if fnmatch.fnmatchcase(p, pattern)]


def import_results(tree: SourceTree, paths: list[str], opts: ImportOptions, out_root: Path,
                   config_path: str | None = None) -> list[Imported]:
    """Import result files together: without opts.measured_iters, the measured window is the
    fewest steps after warm-up of any of them (one window for all, so that their seeds share a
    configuration id)."""
    if not paths:
        raise MLPerfImportError("no result files selected")
    first = [read_result(tree, p, opts, config_path) for p in paths]
    fewest = min(i.n_steps for i in first) - opts.warmup_iters
    if fewest < 1:
        short = min(first, key=lambda i: i.n_steps)
        raise MLPerfImportError(f"{short.result_path}: {short.n_steps} steps, no more than the {opts.warmup_iters} "
                           "warm-up steps")
    if opts.measured_iters is None:
        opts = ImportOptions(opts.model, opts.warmup_iters, fewest, opts.backend)
        first = [read_result(tree, p, opts, config_path) for p in paths]
    short = [i for i in first if i.n_steps < opts.warmup_iters + opts.measured_iters]
    if short:
        raise MLPerfImportError(f"{short[0].result_path}: {short[0].n_steps} steps, fewer than warm-up "
                                f"{opts.warmup_iters} + measured {opts.measured_iters}")
    for imp in first:
        write_run(imp, tree, out_root)
    return first
