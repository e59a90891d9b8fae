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
Step times are the logged train-step timings, which leave evaluation out; where a log times one
step in N (Llama 3.1 8B: one in 32), each logged value is one step's time and the window counts
logged timings. The GPU count and kind come from the round's `systems/<system>.json`, never from the
logged `submission_platform` (a placeholder in places, counting nodes). A result file byte-identical
to one already imported (in the output directory or the same batch) is skipped, naming both. Pure
Python: the source tree is read through `git show` (a bare mirror) or from a directory of files.
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
BEYOND_WINDOW = rawlog.PHASES[2]
# v3.x NeMo, v4.1 NeMo (GPT-3), v5.x mlperf_common
STEP_TIME_KEYS = ("train_step_timing", "train_step_timing in s", "train_step_time")
BLOCK_SUMMARY_KEY = "throughput"  # a tracked_stats event that sums up a block, not a step
# the submission's accelerator name (systems/<system>.json) -> the GPU catalog's device name
ACCELERATORS = {
    "NVIDIA H100-SXM5-80GB": "NVIDIA H100 80GB HBM3",
    "NVIDIA H100-SXM-80GB": "NVIDIA H100 80GB HBM3",  # Azure ND H100 v5 (v3.1)
    "NVIDIA H200-SXM5-141GB": "NVIDIA H200",
    "NVIDIA Blackwell GPU (B200-SXM-180GB)": "NVIDIA B200",
    "NVIDIA Blackwell GPU (GB200)": "NVIDIA GB200",
}
WINDOW_RULE = (
    "the package's own: the first warmup_iters optimizer steps are warm-up, the next measured_iters are "
    "measured (RunSpec); later steps of the run are kept as beyond_window and not counted; step times "
    "are the logged train-step timings, evaluation excluded"
)
WINDOW_SPARSE = (
    "the log times one optimizer step in {n}: each logged value is one step's time, and warm-up and "
    "measured window count logged step timings (warmup_iters {w} logged timings = {ws} steps)"
)
CONFIG_DUMP_HEADER = "Experiment configuration"  # NeMo prints its whole configuration under this line
# keys of NeMo's configuration dump the layout reads (the first of each in the dump)
DUMP_KEYS = (
    "tensor_model_parallel_size",
    "pipeline_model_parallel_size",
    "virtual_pipeline_model_parallel_size",
    "context_parallel_size",
    "micro_batch_size",
    "sequence_parallel",
    "fp8",
    "fp4",
    "fp4_recipe",
)


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
                raise MLPerfImportError(
                    f"{self.repository}@{self.commit[:12]}:{path}: cannot read "
                    f"({r.stderr.decode(errors='replace').strip()})"
                )
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
            r = subprocess.run(
                ["git", "-C", str(self.root), "ls-tree", "-r", "--name-only", self.commit, prefix],
                capture_output=True,
                text=True,
            )
            if r.returncode:
                raise MLPerfImportError(f"{self.root}: git ls-tree failed ({r.stderr.strip()})")
            return sorted(r.stdout.split())
        base = self.root / prefix
        return (
            sorted(p.relative_to(self.root).as_posix() for p in base.rglob("*") if p.is_file()) if base.exists() else []
        )


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
    source: str  # "log", "config", "log and config", "system file", "derived", "default (...)"
    log: Any = None
    config: Any = None
    config_at: str | None = None  # path:line of the setting
    log_at: str | None = None  # path:line of a value the log printed (NeMo's configuration dump)

    def as_dict(self) -> dict:
        return {
            k: v
            for k, v in {
                "value": self.value,
                "from": self.source,
                "log": self.log,
                "log_at": self.log_at,
                "config": self.config,
                "config_at": self.config_at,
            }.items()
            if v is not None
        }


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


class Batch(list):
    """The runs one import wrote (a list of Imported), with a sentence for each result file it skipped
    (`skipped`: byte-identical to one imported before) and for each earlier import of a selected file
    under another run id (`stale`: left in place)."""

    def __init__(self, runs=(), skipped=(), stale=()):
        super().__init__(runs)
        self.skipped = list(skipped)
        self.stale = list(stale)


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


def _name(path: str) -> str:
    return path.rsplit("/", 1)[-1]


def _folder(path: str) -> str:
    """The folder a file lies in (its implementation, for a config_*.sh)."""
    return path.rsplit("/", 2)[-2] if path.count("/") >= 1 else ""


def config_candidates(
    tree: SourceTree, org: str, benchmark: str, system: str, nodes: int, gpus_per_node: int
) -> list[str]:
    """The launch configurations that may be a result's, among the `config_*.sh` under
    `<org>/benchmarks/<benchmark>/` (in `implementations/<impl>/` or anywhere below), the first tier
    that has any: the one the submission's `README-<system>.md` names (in the README's folder, else
    anywhere); the one named after the system (`config_<system>.sh`, `config_<system>_*.sh`);
    `config_<X>_<nodes>x<gpus>x*.sh` in the implementation named like the system (or the one whose
    name the system's begins with), else in none named like another system."""
    base = f"{org}/benchmarks/{benchmark}"
    files = tree.list(base)
    configs = [p for p in files if re.fullmatch(r"config_[^/]*\.sh", _name(p))]
    for readme in (p for p in files if _name(p) == f"README-{system}.md"):
        names = set(re.findall(r"config_[A-Za-z0-9_.\-]+?\.sh", tree.read_text(readme)))
        here = [p for p in configs if _name(p) in names and p.rsplit("/", 1)[0] == readme.rsplit("/", 1)[0]]
        named = here or [p for p in configs if _name(p) in names]
        if named:
            return named
    own_name = [p for p in configs if _name(p) == f"config_{system}.sh" or _name(p).startswith(f"config_{system}_")]
    if own_name:
        return own_name
    pat = re.compile(rf"config_[A-Za-z0-9.\-]+?_{nodes}x{gpus_per_node}x[^/]*\.sh")
    cands = [p for p in configs if pat.fullmatch(_name(p))]
    own = [p for p in cands if _folder(p) == system] or [
        p for p in cands if system.startswith(_folder(p) + ".") or system.startswith(_folder(p) + "_")
    ]
    others = _system_dirs(tree, org) - {system}
    return own or [p for p in cands if _folder(p) not in others]


def find_config(
    tree: SourceTree, org: str, benchmark: str, system: str, nodes: int, gpus_per_node: int, dump: dict | None = None
) -> tuple[str | None, str | None]:
    """The launch configuration of a result (config_candidates) and, where several fit, why this
    one: they set the same values (copies in several folders), or it is the only one that agrees
    with the log's configuration dump. Several that differ and that the log does not tell apart are
    refused (give one with --config); none: (None, None)."""
    cands = config_candidates(tree, org, benchmark, system, nodes, gpus_per_node)
    if len(cands) <= 1:
        return (cands[0] if cands else None), None
    saved = dict(tree.read_files)
    cfgs = {p: read_config(tree, p) for p in cands}
    tree.read_files = saved  # only the one chosen is a source of the run
    values = [{k: v.value for k, v in c.settings.items()} for c in cfgs.values()]
    if all(v == values[0] for v in values[1:]):
        return cands[0], f"{len(cands)} configurations set the same values ({', '.join(cands)}): the first"
    agree = [p for p in cands if dump and _agrees(cfgs[p], dump, p)]
    if len(agree) == 1:
        return agree[0], (
            f"the one of {len(cands)} configurations ({', '.join(cands)}) that agrees with the log's configuration dump"
        )
    raise MLPerfImportError(
        f"{org}/benchmarks/{benchmark}: {len(cands)} configurations fit {system} "
        f"({', '.join(cands)}) and the log does not tell which; import it with --config"
    )


_LAYOUT_KEYS = (
    ("tp", "TENSOR_MODEL_PARALLEL", "tensor_model_parallel_size"),
    ("pp", "PIPELINE_MODEL_PARALLEL", "pipeline_model_parallel_size"),
    ("virtual_stages", "INTERLEAVED_PIPELINE", "virtual_pipeline_model_parallel_size"),
    ("cp", "CONTEXT_PARALLEL", "context_parallel_size"),
    ("micro_batch", "MICRO_BATCH_SIZE", "micro_batch_size"),
)


def _layout_int(v) -> int | None:
    """A degree as a config or the dump writes it: null/None (no virtual stages) is 1."""
    if v is None:
        return None
    return 1 if str(v).strip().lower() in ("null", "none", "") else _int(v)


def _agrees(cfg: LaunchConfig, dump: dict, path: str) -> bool:
    """No layout value or precision of the configuration contradicts the log's configuration dump."""
    for _, env, key in _LAYOUT_KEYS:
        c, d = _layout_int(_setting(cfg, env)[0]), _layout_int(dump[key][0]) if key in dump else None
        if c is not None and d is not None and c != d:
            return False
    c, d = _precision_of_config(cfg, path)[0], _precision_of_dump(dump, path)[0]  # type: ignore[assignment]  # c, d are reused for the precisions
    return c is None or d is None or c == d


def _system_dirs(tree: SourceTree, org: str) -> set[str]:
    return {p.rsplit("/", 1)[-1].removesuffix(".json") for p in tree.list(f"{org}/systems")}


def referred_implementation(tree: SourceTree, folder: str) -> str | None:
    """The sibling implementation a folder's README.md refers to for everything but its configs
    ("Please refer to the implementation directory [b200_nemo](../b200_nemo)"), or None."""
    readme = f"{folder}/README.md"
    if readme not in tree.list(folder):
        return None
    m = re.search(r"\]\(\.\./([A-Za-z0-9_.\-]+)/?\)", tree.read_text(readme))
    other = f"{folder.rsplit('/', 1)[0]}/{m.group(1)}" if m else None
    return other if other and other != folder and tree.list(other) else None


def read_config(tree: SourceTree, path: str) -> LaunchConfig:
    """A launch configuration with the files it sources and the NeMo YAML defaults of its `conf/`;
    where its folder holds the configs alone and its README.md refers to a sibling implementation,
    a sourced file or `conf/` the folder lacks is read from there."""
    folder = path.rsplit("/", 1)[0]
    here = set(tree.list(folder))
    other = referred_implementation(tree, folder) if "/" in path else None

    def resolve(p: str) -> str:
        if p in here or other is None or not p.startswith(folder + "/"):
            return p
        alt = other + p[len(folder) :]
        return alt if alt in set(tree.list(other)) else p

    cfg = read_shell(path, tree.read_text, resolve=resolve)
    conf = folder + "/conf/"
    if not tree.list(conf) and other is not None:
        conf = other + "/conf/"
    for p in tree.list(conf):
        if p.endswith(".yaml") and p.count("/") == conf.count("/"):
            read_yaml_defaults(p, tree.read_text(p), cfg)
    return cfg


def _setting(cfg: LaunchConfig | None, name: str):
    if cfg is None:
        return None, None
    s = cfg.get(name)
    return (s.value, f"{s.path}:{s.line}") if s else (None, None)


_RANK_PREFIX = re.compile(r"^\s*\d+:\s?")
_DUMP_LINE = re.compile(r"^(\s*)([A-Za-z_][A-Za-z0-9_]*):(?:\s+(.*?))?\s*$")


def config_dump(text: str, path: str) -> dict[str, tuple[str, str]]:
    """The values NeMo printed of its configuration (the lines after "Experiment configuration", YAML,
    each prefixed with its rank where the launcher does): key -> (value, "path:line") of the first of
    each of DUMP_KEYS. Lines of other ranks interleaved with the dump are passed over; {} without a dump."""
    lines = text.splitlines()
    start = next((i for i, t in enumerate(lines) if CONFIG_DUMP_HEADER in t and ":::MLLOG" not in t), None)
    if start is None:
        return {}
    prefix = _RANK_PREFIX.match(lines[start])
    rank = prefix.group(0).strip() if prefix else None
    out: dict[str, tuple[str, str]] = {}
    began = False
    for i in range(start + 1, len(lines)):
        t = lines[i]
        m = _RANK_PREFIX.match(t)
        if rank is not None:
            if not m or m.group(0).strip() != rank:
                continue  # another rank's line inside the dump
            t = t[m.end() :]
        if t.lstrip().startswith("[NeMo") and not began:
            continue  # the logger's own line before the dump
        y = _DUMP_LINE.match(t)
        if y is None and not t.lstrip().startswith("- "):
            if began:
                break
            continue
        began = True
        if y is not None and y.group(2) in DUMP_KEYS and y.group(3) is not None and y.group(2) not in out:
            out[y.group(2)] = (y.group(3).strip().strip("'\""), f"{path}:{i + 1}")
    return out


def _pick(
    name: str, log_value, cfg_value, cfg_at, disagreements: list[dict], *, default=None, log_at: str | None = None
) -> Value:
    """The logged value first, the configuration's second; a disagreement is recorded."""
    if log_value is not None and cfg_value is not None:
        if log_value != cfg_value:
            disagreements.append(
                {
                    k: v
                    for k, v in {
                        "field": name,
                        "log": log_value,
                        "log_at": log_at,
                        "config": cfg_value,
                        "config_at": cfg_at,
                        "used": "log",
                    }.items()
                    if v is not None
                }
            )
            return Value(log_value, "log", log_value, cfg_value, cfg_at, log_at)
        return Value(log_value, "log and config", log_value, cfg_value, cfg_at, log_at)
    if log_value is not None:
        return Value(log_value, "log", log_value, log_at=log_at)
    if cfg_value is not None:
        return Value(cfg_value, "config", None, cfg_value, cfg_at)
    return Value(default, "default (neither logged nor configured)")


@dataclass(frozen=True)
class ImportOptions:
    """How MLPerf results are imported: the catalog model, warm-up and measured steps, backend and system."""

    model: str  # catalog model name
    warmup_iters: int = 10
    measured_iters: int | None = None  # None: decided over the files imported together (import_results)
    backend: str = "megatron"
    system: str = ""  # RunSpec.system: the cluster description the runs ran on ("" none)


def _precision_of_config(cfg: LaunchConfig | None, path: str) -> tuple[str | None, str | None]:
    """fp8, nvfp4 or bf16 as the launch configuration sets FP8 / FP4 (and FP4_RECIPE), with where."""
    fp4_v, fp4_at = _setting(cfg, "FP4")
    if fp4_v is not None and _bool(fp4_v):
        recipe, _ = _setting(cfg, "FP4_RECIPE")
        if recipe is not None and recipe.strip().lower() != "nvfp4":
            raise MLPerfImportError(
                f"{fp4_at}: FP4 with recipe {recipe!r}: only NVFP4 is a precision of RunSpec (importing {path})"
            )
        return "nvfp4", fp4_at
    fp8_v, fp8_at = _setting(cfg, "FP8")
    if fp8_v is None:
        return None, None
    return ("fp8" if _bool(fp8_v) else "bf16"), fp8_at


def _precision_of_dump(dump: dict, path: str) -> tuple[str | None, str | None]:
    if "fp4" in dump and _bool(dump["fp4"][0]):
        recipe = dump.get("fp4_recipe", ("nvfp4", None))[0]
        if recipe.lower() != "nvfp4":
            raise MLPerfImportError(
                f"{dump['fp4'][1]}: FP4 with recipe {recipe!r}: only NVFP4 is a precision of RunSpec"
            )
        return "nvfp4", dump["fp4"][1]
    if "fp8" in dump:
        fp8 = dump["fp8"][0]
        return ("fp8" if _bool(fp8) or fp8.lower() in ("hybrid", "e4m3") else "bf16"), dump["fp8"][1]
    return None, None


def read_result(tree: SourceTree, path: str, opts: ImportOptions, config_path: str | None = None) -> Imported:
    """One result file with its system description and launch configuration."""
    org, system, benchmark, index = _result_parts(path)
    tree.read_files = {}
    text = tree.read_text(path)
    events = mllog.parse(text, path)
    if not events:
        raise MLPerfImportError(f"{path}: no {mllog.MARKER} lines")
    logged = {
        k: mllog.first_value(events, k)
        for k in (
            "submission_benchmark",
            "submission_org",
            "submission_division",
            "submission_status",
            "submission_platform",
            "seed",
            "global_batch_size",
            "gradient_accumulation_steps",
            "max_sequence_length",
            "opt_base_learning_rate",
        )
    }
    # the machine: GPU count and kind from the system description, never from submission_platform
    sys_path = f"{org}/systems/{system}.json"
    try:
        sys_desc = json.loads(tree.read_text(sys_path))
    except MLPerfImportError:
        raise MLPerfImportError(
            f"{path}: no system description {sys_path}: the GPU count and kind come from it "
            "(submission_platform is not read for them)"
        ) from None
    except json.JSONDecodeError as e:
        raise MLPerfImportError(f"{sys_path}:{e.lineno}: not valid JSON ({e.msg})") from None
    nodes_sys, gpn = _int(sys_desc.get("number_of_nodes")), _int(sys_desc.get("accelerators_per_node"))
    accelerator = sys_desc.get("accelerator_model_name")
    if not nodes_sys or not gpn or not accelerator:
        raise MLPerfImportError(
            f"{sys_path}: number_of_nodes, accelerators_per_node or accelerator_model_name "
            f"missing ({nodes_sys!r}, {gpn!r}, {accelerator!r})"
        )
    platform = str(logged["submission_platform"] or "")
    m = re.match(r"(\d+)x(.+)", platform)
    log_nodes = int(m.group(1)) if m else None
    disagreements: list[dict] = []
    dump = config_dump(text, path)
    chosen = "given (--config)" if config_path else None
    if not config_path:
        config_path, chosen = find_config(tree, org, benchmark, system, nodes_sys, gpn, dump)
    cfg = read_config(tree, config_path) if config_path else None
    cfg_nodes, cfg_nodes_at = _setting(cfg, "DGXNNODES")
    cfg_nodes = _int(cfg_nodes)
    for what, v, at in (("submission_platform", log_nodes, None), ("config", cfg_nodes, cfg_nodes_at)):
        if v is not None and v != nodes_sys:
            disagreements.append(
                {
                    k: x
                    for k, x in {
                        "field": "nodes",
                        what if what == "config" else "log": v,
                        "config_at": at,
                        "system_file": nodes_sys,
                        "used": "system file",
                        "why": (f"submission_platform {platform!r} counts {v} nodes" if what != "config" else None),
                    }.items()
                    if x is not None
                }
            )
    nodes = Value(nodes_sys, "system file", log_nodes, cfg_nodes, cfg_nodes_at)
    world = nodes.value * gpn

    layout: dict[str, Value] = {}
    for name, env, key in _LAYOUT_KEYS:
        lv, lat = (_layout_int(dump[key][0]), dump[key][1]) if key in dump else (None, None)
        cv, cat = _setting(cfg, env)
        layout[name] = _pick(name, lv, _layout_int(cv), cat, disagreements, default=1, log_at=lat)
    minibs_c, minibs_at = _setting(cfg, "MINIBS")
    minibs_c = _int(minibs_c)
    tp, pp, cp, mbs = (layout[k].value or 1 for k in ("tp", "pp", "cp", "micro_batch"))
    dp = world // (tp * pp * cp)
    layout["dp"] = Value(dp, "derived")
    if world % (tp * pp * cp):
        raise MLPerfImportError(f"{path}: {world} GPUs do not split into TP {tp} x PP {pp} x CP {cp}")
    gbs_cfg = minibs_c * dp if minibs_c is not None else None
    gbs_at = f"{minibs_at} (MINIBS x data-parallel degree {dp})" if minibs_at else None
    layout["global_batch"] = _pick("global_batch", _int(logged["global_batch_size"]), gbs_cfg, gbs_at, disagreements)
    ga_cfg = minibs_c // mbs if minibs_c is not None else None
    layout["grad_accum_steps"] = _pick(
        "grad_accum_steps",
        _int(logged["gradient_accumulation_steps"]),
        ga_cfg,
        f"{minibs_at} (MINIBS / MICRO_BATCH_SIZE)" if minibs_at else None,
        disagreements,
    )
    seq_s = cfg.yaml_literals.get("encoder_seq_length") if cfg else None
    layout["seq_len"] = _pick(
        "seq_len",
        _int(logged["max_sequence_length"]),
        _int(seq_s.value) if seq_s else None,
        f"{seq_s.path}:{seq_s.line}" if seq_s else None,
        disagreements,
    )
    prec_l, prec_lat = _precision_of_dump(dump, path)
    prec_c, prec_cat = _precision_of_config(cfg, path)
    layout["precision"] = _pick("precision", prec_l, prec_c, prec_cat, disagreements, log_at=prec_lat)
    if layout["precision"].value is None:
        raise MLPerfImportError(
            f"{path}: the precision is neither logged nor configured (no FP8/FP4 setting"
            + (f" in {config_path}" if config_path else ", no launch configuration found")
            + "); give the launch configuration with --config"
        )
    sp_v, sp_at = _setting(cfg, "SEQ_PARALLEL")
    sp_l = dump.get("sequence_parallel")
    layout["sequence_parallel"] = _pick(
        "sequence_parallel",
        _bool(sp_l[0]) if sp_l else None,
        _bool(sp_v) if sp_v is not None else None,
        sp_at,
        disagreements,
        default=tp > 1,
        log_at=sp_l[1] if sp_l else None,
    )
    embed_v, embed_at = _setting(cfg, "ASYM_PP_EMBED")
    loss_v, _ = _setting(cfg, "ASYM_PP_LOSS")
    asym = bool(_bool(embed_v)) and bool(_bool(loss_v))
    layout["pp_embedding_stages"] = _pick(
        "pp_embedding_stages", None, asym if embed_v is not None else None, embed_at, disagreements, default=False
    )
    gbs, ga, seq = layout["global_batch"].value, layout["grad_accum_steps"].value, layout["seq_len"].value
    if gbs is None or seq is None:
        raise MLPerfImportError(f"{path}: no global batch or sequence length, neither logged nor configured")
    if ga is not None and gbs != mbs * dp * ga:
        disagreements.append(
            {
                "field": "grad_accum_steps",
                "log": ga,
                "config": None,
                "derived": gbs // (mbs * dp),
                "used": "derived",
                "why": f"the logged global batch {gbs} / (micro batch {mbs} x data-parallel {dp})",
            }
        )
        ga = gbs // (mbs * dp)
    ga = ga if ga is not None else gbs // (mbs * dp)
    vpp = layout["virtual_stages"].value or 1

    steps, step_problems, every = _steps(events, path, gbs, seq)
    status, error = _status(events, path)
    opts_measured = opts.measured_iters if opts.measured_iters is not None else max(1, len(steps) - opts.warmup_iters)
    spec = RunSpec(
        model=opts.model,
        seq_len=seq,
        micro_batch=mbs,
        global_batch=gbs,
        nodes=nodes.value,
        procs_per_node=gpn,
        device="cuda",
        dp_replicate=1,
        dp_shard=dp,
        tp=tp,
        cp=cp,
        pp=pp,
        pp_schedule="interleaved_1f1b" if vpp > 1 else "1f1b",
        pp_stages_per_rank=vpp,
        pp_microbatches=ga if pp > 1 else 1,  # without a pipeline the micro-batches are gradient accumulation
        pp_embedding_stages=bool(layout["pp_embedding_stages"].value),
        sequence_parallel=bool(layout["sequence_parallel"].value) and tp > 1,
        precision=layout["precision"].value,
        backend=opts.backend,
        seed=index,
        warmup_iters=opts.warmup_iters,
        measured_iters=opts_measured,
        system=opts.system,
        **(
            {"lr": float(logged["opt_base_learning_rate"])}  # type: ignore[arg-type]  # lr is a float field
            if isinstance(logged["opt_base_learning_rate"], (int, float)) and logged["opt_base_learning_rate"] > 0
            else {}
        ),
    )
    run_id = spec.run_id
    span_problems: list[str] = []
    records = _records(events, steps, run_id, spec, opts, path, span_problems)
    device = ACCELERATORS.get(str(accelerator), str(accelerator))
    records.insert(0, _peak_record(device, spec.precision, run_id))
    counts = (
        "logged step timings: the log times every optimizer step"
        if every == 1
        else f"logged step timings: the log times one optimizer step in {every}, each logged value is that one "
        "step's time"
    )
    run = {
        "kind": "train",
        "run_id": run_id,
        "config_id": spec.config_id,
        "spec": spec.to_dict(),
        "layout": spec.layout,
        "provenance": {
            "imported": True,
            "importer": IMPORTER,
            "devices": {"count": world, "names": [device]},
            "hosts": [],
            "source": {
                "repository": tree.repository,
                "commit": tree.commit,
                "result": path,
                "config": config_path,
                "system": sys_path,
                "files": {},
                **({"config_chosen": chosen} if chosen else {}),
                **({"config_missing": cfg.missing} if cfg is not None and cfg.missing else {}),
            },
        },
        "system": {
            "name": system,
            "cluster": opts.system or None,
            "gpus": world,
            "nodes": nodes.as_dict(),
            "gpus_per_node": gpn,
            "accelerator": accelerator,
            "device": device,
            "device_in_catalog": accelerator in ACCELERATORS,
            "platform": platform,
            "description": sys_desc.get("system_name"),
            "gpus_from": f"{sys_path}: number_of_nodes x accelerators_per_node (submission_platform not used)",
        },
        "mlperf": {
            "benchmark": logged["submission_benchmark"],
            "org": logged["submission_org"],
            "division": logged["submission_division"],
            "status": logged["submission_status"],
            "seed": logged["seed"],
            "result_index": index,
            "not": "a raw log of a public result file; not the official time-to-train score",
        },
        "layout_detail": {k: v.as_dict() for k, v in layout.items()} | {"nodes": nodes.as_dict()},
        "disagreements": disagreements
        + step_problems
        + (
            [
                {
                    "field": "block and evaluation spans",
                    "log": span_problems[:3]
                    + ([f"... {len(span_problems) - 3} more"] if len(span_problems) > 3 else []),
                    "used": "the spans that pair up (the step timings are not affected)",
                }
            ]
            if span_problems
            else []
        ),
        "window": {
            "warmup_iters": spec.warmup_iters,
            "measured_iters": spec.measured_iters,
            "steps_logged": len(steps),
            "counts": counts,
            "steps_per_logged_timing": every,
            "rule": WINDOW_RULE
            + (
                ""
                if every == 1
                else "; " + WINDOW_SPARSE.format(n=every, w=spec.warmup_iters, ws=spec.warmup_iters * every)
            ),
        },
    }
    return Imported(path, spec, run, records, status, error, len(steps), dict(tree.read_files))


def _peak_record(device: str, dtype: str, run_id: str) -> dict:
    try:
        value = device_peak_record(catalog.peak_flops(device, dtype))
    except (LookupError, ValueError) as e:
        value = {"device_name": device, "dtype": dtype, "peak_flops_per_s": None, "source": None, "reason": str(e)}
    return rawlog.record("device_peak", value, rank=0, run_id=run_id)


def _is_block_summary(e: mllog.Event) -> bool:
    """A tracked_stats event that sums up a block (its mean step time), not one step: it carries the
    block's throughput, or no step counter (mlperf_common's block summary has samples_count only)."""
    return BLOCK_SUMMARY_KEY in e.value or "step" not in e.metadata


def _steps_between(meta: dict, previous: dict, gbs: int, seq: int) -> float | None:
    """Optimizer steps from the previous logged timing to this one: by samples_count where logged
    (v5.x), else by the step counter, which counts tokens (v3.x, v4.1) or samples (v5.0)."""
    for key, per_step in (("samples_count", (gbs,)), ("step", (gbs * seq, gbs))):
        v = meta.get(key)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            d = float(v) - previous.get(key, 0.0)
            for n in per_step:
                if d > 0 and d % n == 0:
                    return d / n
            return None
    return None


def _steps(events: list[mllog.Event], path: str, gbs: int, seq: int) -> tuple[list[dict], list[dict], int]:
    """The optimizer steps the log times: each `tracked_stats` with a train-step time (not a block
    summary), its block, its counter, and the steps since the timing before it; and how often the
    log times a step (1: every step; 32: one in 32). A counter that does not grow by whole steps is
    recorded as a disagreement."""
    steps, problems, block = [], [], -1  # type: ignore[var-annotated]  # lists of dicts
    previous: dict = {}
    for e in events:
        if e.key == "block_start":
            block += 1
        if e.key != "tracked_stats" or not isinstance(e.value, dict):
            continue
        key = next((k for k in STEP_TIME_KEYS if k in e.value), None)
        if key is None or _is_block_summary(e):
            continue
        t = e.value[key]
        if not isinstance(t, (int, float)) or t <= 0:
            raise mllog.MLLogError(path, e.line, f"{key} is not a positive number: {t!r}")
        counter = e.metadata.get("step")
        between = _steps_between(e.metadata, previous, gbs, seq)
        if (between is None or between != int(between)) and not problems:
            problems.append(
                {
                    "field": "step counter",
                    "log": counter,
                    "line": e.line,
                    "why": f"neither samples_count nor step grows by whole optimizer steps of {gbs} samples "
                    f"({gbs * seq} tokens)",
                    "used": "log (global batch x sequence length)",
                }
            )
        steps.append(
            {
                "time_s": float(t),
                "line": e.line,
                "time_ms": e.time_ms,
                "block": block,
                "counter": counter,
                "loss": e.value.get("reduced_train_loss"),
                "between": int(between) if between and between == int(between) else None,
            }
        )
        previous = {
            k: float(e.metadata[k])
            for k in ("samples_count", "step")
            if isinstance(e.metadata.get(k), (int, float)) and not isinstance(e.metadata.get(k), bool)
        }
    if not steps:
        raise MLPerfImportError(f"{path}: no per-step train timing ({' or '.join(STEP_TIME_KEYS)} in tracked_stats)")
    gaps = [s["between"] for s in steps[1:] if s["between"]]
    every = max(set(gaps), key=gaps.count) if gaps else 1
    return steps, problems, every  # type: ignore[return-value]  # a step count, float-typed (see report)


def _status(events: list[mllog.Event], path: str) -> tuple[str, str | None]:
    stop = [e for e in events if e.key == "run_stop"]
    if not stop:
        return "crashed", f"{path}: no run_stop event (the run did not end)"
    s = stop[-1].metadata.get("status")
    if s == "success":
        return "ok", None
    return "crashed", f"{path}:{stop[-1].line}: run_stop status {s!r}"


def _records(
    events, steps, run_id: str, spec: RunSpec, opts: ImportOptions, path: str, span_problems: list[str]
) -> list[dict]:
    """The raw log's records; block and evaluation spans that do not pair up (a log that leaves out
    block_stop or eval_start) are left out and described in `span_problems`."""
    meta = {"rank": 0, "run_id": run_id}
    out = [rawlog.record("flops", flops_per_token(spec.model_config(), spec.seq_len), **meta)]
    tokens = spec.global_batch * spec.seq_len
    for i, s in enumerate(steps):
        phase = (
            "warmup"
            if i < spec.warmup_iters
            else "measured"
            if i < spec.warmup_iters + spec.measured_iters
            else BEYOND_WINDOW
        )
        value = {
            "step": i,
            "phase": phase,
            "step_time_s": s["time_s"],
            "tokens": tokens,
            "loss": s["loss"],
            "block": s["block"],
            "mllog_step": s["counter"],
        }
        if s["between"] not in (None, 1):
            value["steps_since_previous_timing"] = s["between"]
        out.append(rawlog.record("iteration", value, **meta, time_unix=s["time_ms"] / 1000.0, mllog_line=s["line"]))
    for name, (start, stop) in (("block", ("block_start", "block_stop")), ("eval", ("eval_start", "eval_stop"))):
        for i, (a, b) in enumerate(mllog.spans(events, start, stop, path, span_problems)):
            value = {
                "index": i,
                "start_unix": a.time_ms / 1000.0,
                "stop_unix": b.time_ms / 1000.0,
                "duration_s": (b.time_ms - a.time_ms) / 1000.0,
                "lines": [a.line, b.line],
            }
            if name == "eval":
                acc = [e.value for e in events if e.key == "eval_accuracy" and a.line < e.line < b.line]
                value["eval_accuracy"] = acc[0] if acc else None
            out.append(rawlog.record(f"mlperf_{name}", value, **meta))
    run = {e.key: e for e in events if e.key in ("run_start", "run_stop")}
    if len(run) == 2:
        out.append(
            rawlog.record(
                "mlperf_run",
                {
                    "start_unix": run["run_start"].time_ms / 1000.0,
                    "stop_unix": run["run_stop"].time_ms / 1000.0,
                    "duration_s": (run["run_stop"].time_ms - run["run_start"].time_ms) / 1000.0,
                    "status": run["run_stop"].metadata.get("status"),
                    "note": "run_start to run_stop of this one file: not the official time-to-train score",
                },
                **meta,
            )
        )
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
    rawlog.write_status(
        run_dir / rawlog.STATUS_FILE,
        {
            "schema": rawlog.SCHEMA,
            "status": imp.status,
            "error": imp.error,
            "culprit_ranks": [],
            "ranks": [{"rank": 0, "status": imp.status, "error": imp.error}],
            "files_sha256": dict(sorted(files_sha.items())),
            "imported_from": f"{tree.repository}@{tree.commit}:{imp.result_path}",
        },
    )
    rawlog.compress_run(run_dir)
    return run_dir


def select_results(tree: SourceTree, pattern: str) -> list[str]:
    """The result files matching a glob (relative to the repository), e.g.
    'NVIDIA/results/eos*_ngc23.09_nemo/gpt3/result_*.txt'."""
    prefix = pattern.split("*", 1)[0].rsplit("/", 1)[0]
    return [p for p in tree.list(prefix) if fnmatch.fnmatchcase(p, pattern)]


@dataclass(frozen=True)
class Earlier:
    """A result file imported before into the output directory."""

    repository: str
    commit: str
    result: str
    run_id: str


def imported_results(out_root: Path) -> dict[str, list[Earlier]]:
    """The result files of the runs already in `out_root`, by the sha256 of the file."""
    out: dict[str, list[Earlier]] = {}
    for run_json in sorted(Path(out_root).glob(f"*/{rawlog.RUN_FILE}")):
        try:
            run = json.loads(run_json.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        src = (run.get("provenance") or {}).get("source") or {}
        sha = (src.get("files") or {}).get(src.get("result"))
        if sha:
            out.setdefault(sha, []).append(
                Earlier(
                    str(src.get("repository")), str(src.get("commit")), str(src.get("result")), run_json.parent.name
                )
            )
    return out


def _dedupe(tree: SourceTree, paths: list[str], out_root: Path) -> tuple[list[str], list[str], dict[str, list[str]]]:
    """The paths to import: those whose bytes no other result file of the output directory or of
    this batch has (a file imported before from the same repository and path is imported again);
    a sentence for each one skipped; and, by path, the run ids an earlier import of it wrote."""
    earlier = imported_results(out_root)
    keep, skipped, again = [], [], {}
    batch: dict[str, str] = {}
    where = f"{tree.repository}@{tree.commit[:12]}"
    for p in paths:
        sha = hashlib.sha256(tree.read_bytes(p)).hexdigest()
        same = [e for e in earlier.get(sha, []) if (e.repository, e.result) == (tree.repository, p)]
        other = [e for e in earlier.get(sha, []) if (e.repository, e.result) != (tree.repository, p)]
        if other:
            e = other[0]
            skipped.append(
                f"{where}:{p} skipped: byte-identical (sha256 {sha[:16]}...) to "
                f"{e.repository}@{e.commit[:12]}:{e.result}, already imported as {e.run_id}"
            )
            continue
        if sha in batch:
            skipped.append(
                f"{where}:{p} skipped: byte-identical (sha256 {sha[:16]}...) to {where}:{batch[sha]} of this import"
            )
            continue
        batch[sha] = p
        keep.append(p)
        again[p] = [e.run_id for e in same]
    return keep, skipped, again


def _refuse_collisions(runs: list[Imported], tree: SourceTree, out_root: Path) -> None:
    """Two result files are never one run: the same run id from two files of this import, or from a
    file other than the one already under that id in `out_root`, is refused (two machines with the
    same layout need two --system names)."""
    by_id: dict[str, str] = {}
    for imp in runs:
        rid = imp.spec.run_id
        if rid in by_id:
            raise MLPerfImportError(
                f"{by_id[rid]} and {imp.result_path} give the same run {rid}: two result files "
                "of one spec and seed (import them with different --system names)"
            )
        by_id[rid] = imp.result_path
        run_json = Path(out_root) / rid / rawlog.RUN_FILE
        if run_json.is_file():
            try:
                src = (json.loads(run_json.read_text()).get("provenance") or {}).get("source") or {}
            except (OSError, json.JSONDecodeError):
                continue
            if (src.get("repository"), src.get("result")) != (tree.repository, imp.result_path):
                raise MLPerfImportError(
                    f"{imp.result_path} gives run {rid}, which {run_json} holds from "
                    f"{src.get('repository')}:{src.get('result')} (import it with another "
                    "--system name)"
                )


def import_results(
    tree: SourceTree, paths: list[str], opts: ImportOptions, out_root: Path, config_path: str | None = None
) -> Batch:
    """Import result files together: without opts.measured_iters, the measured window is the
    fewest steps after warm-up of any of them (one window for all, so that their seeds share a
    configuration id). A file byte-identical to one already imported into `out_root` (from another
    repository or path) or to an earlier one of `paths` is skipped, each with one sentence in the
    result's `skipped`."""
    if not paths:
        raise MLPerfImportError("no result files selected")
    paths, skipped, again = _dedupe(tree, paths, Path(out_root))
    if not paths:
        return Batch([], skipped)
    first = [read_result(tree, p, opts, config_path) for p in paths]
    fewest = min(i.n_steps for i in first) - opts.warmup_iters
    if fewest < 1:
        short = min(first, key=lambda i: i.n_steps)
        raise MLPerfImportError(
            f"{short.result_path}: {short.n_steps} steps, no more than the {opts.warmup_iters} warm-up steps"
        )
    if opts.measured_iters is None:
        opts = ImportOptions(opts.model, opts.warmup_iters, fewest, opts.backend, opts.system)
        first = [read_result(tree, p, opts, config_path) for p in paths]
    short = [i for i in first if i.n_steps < opts.warmup_iters + opts.measured_iters]  # type: ignore[assignment, operator]  # short is reused for the list; measured_iters is set above
    if short:
        raise MLPerfImportError(
            f"{short[0].result_path}: {short[0].n_steps} steps, fewer than warm-up "  # type: ignore[index]  # the list of the line above
            f"{opts.warmup_iters} + measured {opts.measured_iters}"
        )
    _refuse_collisions(first, tree, Path(out_root))
    for imp in first:
        write_run(imp, tree, out_root)
    stale = [
        f"{tree.repository}:{imp.result_path} was imported before as {old}, left in place (now {imp.spec.run_id})"
        for imp in first
        for old in again.get(imp.result_path, [])
        if old != imp.spec.run_id
    ]
    return Batch(first, skipped, stale)
