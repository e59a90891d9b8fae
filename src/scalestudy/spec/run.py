"""The run specification: one frozen dataclass that every part of the package reads.

Pure data (no torch import): the workflow plans with it, the harness runs it, the raw log
stores it, and the analysis side reads it back from the raw log.

Every field carries its documentation, from which the command-line help is generated:
    new_field: int = field(default=0, metadata=doc("one-line meaning", unit="steps", allowed=">= 0"))
`allowed` is a tuple of choices (string fields become argparse choices) or a phrase; numbers need a unit.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
import re
from dataclasses import dataclass, field, fields
from typing import Any

import yaml

from scalestudy.spec import catalog, strict_yaml
from scalestudy.spec.catalog.models import ModelConfig

DEVICES = ("cpu", "cuda")
BACKENDS = ("torch", "megatron")
PRECISIONS = ("fp32", "bf16", "fp8", "nvfp4")
PP_SCHEDULES = ("gpipe", "1f1b", "interleaved_1f1b")
AC_MODES = ("none", "full")
OPTIMIZERS = ("adamw", "sgd")
# The largest learning rate the harness trains with, per optimizer (the study schema's `lr` maximum is
# the largest of them). Measured on the smoke spec (tiny Llama, 4 layers, seq 128, fp32 on CPU, one
# process, seed 0) over 7 steps, the loss from 6.68 (ln 512 = 6.24) against the sane band of
# harness.faults.check_step (at most 2 ln 512 = 12.48):
#   adamw  lr 0.01: 6.50 after 7 steps; 0.05: 6.65; 0.1: 7.16 (in the band); 0.3: peak 8.21;
#          0.5: 12.78 at step 3 (out); 1: 14.15 at step 1; 10: 2104 at step 1; 1000: 2.5e7 at step 1, NaN at 4
#   sgd    lr 3: 6.41; 10: 6.27 (still training); 30: 15.58 at step 3 (out), NaN at step 6;
#          100: 2063 at step 2
# (benchmarks/lr_bound.py --optimizer adamw|sgd LR ... repeats the measurement)
LR_MAX = {"adamw": 0.1, "sgd": 10.0}
MESH_DIMS = ("pp", "dp_replicate", "dp_shard", "tp")
COMM_MODES = ("default", "fake")
# Fields added after runs were committed: left out of the config id while at their default, so
# that the ids of earlier runs stay what they were.
ID_EXEMPT_AT_DEFAULT = {
    "comm": "default",
    "emulate_rank": 0,
    "device_memory_cap_gib": 0.0,
    "cp": 1,
    "pp_embedding_stages": False,
    "system": "",
    "power_sampling": True,
}
# What a run without power sampling records as its energy's reason (harness.hooks), and the
# analysis names as "not measured by design" (analysis.run_table).
POWER_SAMPLING_OFF = "power sampling switched off by the run specification (power_sampling: false)"
# Precisions only imported runs have (docs/mlperf.md): the harness trains fp32 and bf16.
IMPORTED_PRECISIONS = ("fp8", "nvfp4")
# RunSpec.system: the name of a cluster description, workflow/clusters/NAME.yaml
SYSTEM_NAME = re.compile(r"[a-z0-9-]+")


def config_digest(fields_: dict[str, Any]) -> str:
    """The 10 hex digits that name a configuration in its id: sha256 of its fields as sorted JSON."""
    return hashlib.sha256(json.dumps(fields_, sort_keys=True).encode()).hexdigest()[:10]


def refuse_unknown_fields(cls, d: dict[str, Any]) -> None:
    """SpecError naming every key of `d` that is no field of the spec dataclass `cls`."""
    unknown = sorted(set(d) - {f.name for f in fields(cls)})
    if unknown:
        raise SpecError([(k, "unknown field") for k in unknown])


class SpecError(ValueError):
    """A RunSpec that cannot work. `problems` lists (field, reason) pairs."""

    def __init__(self, problems: list[tuple[str, str]]):
        self.problems = problems
        super().__init__("invalid run spec: " + "; ".join(f"{f}: {r}" for f, r in problems))


@dataclass(frozen=True)
class FieldDoc:
    """What a spec field means: one line, its unit ("" when it has none) and its allowed values
    (a tuple of choices, or a phrase such as ">= 1"). `scalestudy ... --help` is generated from it."""

    meaning: str
    unit: str = ""
    allowed: tuple[str, ...] | str = ""


def doc(meaning: str, *, unit: str = "", allowed: tuple[str, ...] | str = "") -> dict[str, FieldDoc]:
    """Field metadata: `field(default=..., metadata=doc("meaning", unit=..., allowed=...))`."""
    return {"doc": FieldDoc(meaning, unit, allowed)}


def field_doc(f: dataclasses.Field) -> FieldDoc:
    """A spec field's doc(...) metadata; a TypeError if it has none."""
    try:
        return f.metadata["doc"]
    except KeyError:
        raise TypeError(f"spec field {f.name!r} has no doc(...) metadata") from None


def help_line(meaning: str, *, unit: str = "", allowed: tuple[str, ...] | str = "", default: Any = None) -> str:
    """One help line: `meaning [unit: U; allowed: A; default: D]` (the parts that apply)."""
    allowed = ", ".join(allowed) if isinstance(allowed, tuple) else allowed
    parts = [
        f"unit: {unit}" if unit else "",
        f"allowed: {allowed}" if allowed else "",
        f"default: {default}" if default is not None else "",
    ]
    parts = [p for p in parts if p]
    return f"{meaning} [{'; '.join(parts)}]" if parts else meaning


def describe_field(f: dataclasses.Field, default: Any = None) -> str:
    """A spec field's help line: meaning, unit, allowed values and default."""
    d = field_doc(f)
    return help_line(d.meaning, unit=d.unit, allowed=d.allowed, default=f.default if default is None else default)


_POSITIVE = ">= 1"
_COUNT = ">= 0"

# The largest value of each integer field that a run can have, checked when a spec (a study's run)
# is made, so that a typo is one sentence at planning time, not an overflow or an hours-long run.
SEED_MAX = 2**32 - 1  # numpy's and torch's seed range
MAXIMA = {
    "seed": (SEED_MAX, "the seed range of numpy and torch"),
    "warmup_iters": (100_000, "a day of steps of a second"),
    "measured_iters": (100_000, "a day of steps of a second"),
    "profile_iters": (1_000, "traces of more steps do not fit a disk"),
    "profile_start": (100_000, "the most measured steps"),
    "seq_len": (1 << 20, "a million tokens a sequence"),
    "micro_batch": (1 << 16, "65,536 sequences"),
    "global_batch": (1 << 24, "16.8 million sequences"),
    "n_layers": (1_024, "layers of any catalog model"),
    "nodes": (1 << 17, "131,072 hosts"),
    "procs_per_node": (1_024, "processes (GPUs) of one host"),
    "dp_replicate": (1 << 20, "ranks"),
    "dp_shard": (1 << 20, "ranks"),
    "tp": (1_024, "ranks"),
    "cp": (1_024, "ranks"),
    "pp": (1_024, "ranks"),
    "pp_microbatches": (1 << 16, "microbatches"),
    "pp_stages_per_rank": (64, "stages"),
    "fsdp_forward_prefetch": (64, "blocks"),
    "fsdp_backward_prefetch": (64, "blocks"),
}


def maxima_problems(obj, maxima: dict) -> list[tuple[str, str]]:
    """(field, sentence) for each field of `obj` above its maximum or not an integer."""
    p = []
    for name, (most, what) in maxima.items():
        v = getattr(obj, name)
        if isinstance(v, bool) or not isinstance(v, int):
            p.append((name, f"must be a whole number, got {v!r}"))
        elif v > most:
            p.append((name, f"{v:,} is above {most:,}, the most a run plans ({what})"))
    return p


@dataclass(frozen=True)
class RunSpec:
    """One training run: model, parallel layout, batch, precision, seed and what is measured."""

    model: str = field(
        default="tiny",
        metadata=doc(
            "model shape from the catalog",
            allowed="a model name of the catalog (scalestudy/spec/catalog/models.yaml or a SCALESTUDY_CATALOG file)",
        ),
    )
    n_layers: int = field(
        default=0,
        metadata=doc(
            "train a slice of the model with this many layers; 0: the model's own depth", unit="layers", allowed=_COUNT
        ),
    )
    seq_len: int = field(default=128, metadata=doc("sequence length", unit="tokens", allowed=_POSITIVE))
    micro_batch: int = field(
        default=1,
        metadata=doc("sequences per data-parallel rank per forward/backward", unit="sequences", allowed=_POSITIVE),
    )
    global_batch: int = field(
        default=0,
        metadata=doc(
            "sequences per optimizer step; 0: one micro batch per dp rank (and pipeline microbatch)",
            unit="sequences",
            allowed=">= 0, a multiple of micro_batch*dp*pp_microbatches",
        ),
    )
    nodes: int = field(default=1, metadata=doc("hosts the run spans", unit="nodes", allowed=_POSITIVE))
    procs_per_node: int = field(
        default=1, metadata=doc("processes per host (one per GPU)", unit="processes", allowed=_POSITIVE)
    )
    device: str = field(default="cpu", metadata=doc("where the model runs", allowed=DEVICES))
    dp_replicate: int = field(
        default=1,
        metadata=doc(
            "replicated data-parallel degree (DDP, or HSDP's replica groups)", unit="ranks", allowed=_POSITIVE
        ),
    )
    dp_shard: int = field(
        default=-1,
        metadata=doc(
            "sharded data-parallel degree (FSDP2); -1: the processes left after dp_replicate, tp and pp",
            unit="ranks",
            allowed="-1 or >= 1; dp_replicate*dp_shard*tp*pp = nodes*procs_per_node",
        ),
    )
    tp: int = field(
        default=1,
        metadata=doc(
            "tensor-parallel degree", unit="ranks", allowed=">= 1, divides heads, KV heads, FFN width, vocabulary"
        ),
    )
    cp: int = field(
        default=1,
        metadata=doc(
            "context-parallel degree: the sequence split over this many ranks (imported runs only; the harness "
            "runs cp 1)",
            unit="ranks",
            allowed=">= 1, divides seq_len",
        ),
    )
    pp: int = field(
        default=1,
        metadata=doc(
            "pipeline-parallel degree", unit="ranks", allowed=">= 1; pp*pp_stages_per_rank divides the layers"
        ),
    )
    pp_schedule: str = field(default="1f1b", metadata=doc("pipeline schedule", allowed=PP_SCHEDULES))
    pp_microbatches: int = field(
        default=0,
        metadata=doc(
            "microbatches per pipeline step; 0: pp*pp_stages_per_rank (1 without pipeline parallelism)",
            unit="microbatches",
            allowed=">= pp when pp > 1; a multiple of pp for interleaved_1f1b",
        ),
    )
    pp_stages_per_rank: int = field(
        default=1,
        metadata=doc("pipeline stages each rank holds", unit="stages", allowed=">= 2 with interleaved_1f1b, else 1"),
    )
    pp_embedding_stages: bool = field(
        default=False,
        metadata=doc(
            "the input embedding and the output layer each fill one layer's place in the pipeline split "
            "(NeMo's ASYM_PP_EMBED and ASYM_PP_LOSS; imported runs only)",
            allowed="true, false; true: pp*pp_stages_per_rank divides the layers + 2",
        ),
    )
    sequence_parallel: bool = field(
        default=False,
        metadata=doc(
            "shard norms and dropout over the sequence within the TP group", allowed="true, false; true needs tp > 1"
        ),
    )
    reshard_after_forward: bool = field(
        default=False,
        metadata=doc(
            "FSDP2 frees gathered parameters after forward (false: the paper's setting)", allowed=("true", "false")
        ),
    )
    fsdp_forward_prefetch: int = field(
        default=1,
        metadata=doc(
            "blocks FSDP2 prefetches explicitly in forward; 0: FSDP2's implicit default", unit="blocks", allowed=_COUNT
        ),
    )
    fsdp_backward_prefetch: int = field(
        default=1,
        metadata=doc(
            "blocks FSDP2 prefetches explicitly in backward; 0: FSDP2's implicit default", unit="blocks", allowed=_COUNT
        ),
    )
    activation_checkpointing: str = field(
        default="none", metadata=doc("recompute activations in backward", allowed=AC_MODES)
    )
    compile: bool = field(default=False, metadata=doc("torch.compile each block", allowed=("true", "false")))
    precision: str = field(
        default="bf16",
        metadata=doc(
            "bf16: bf16 compute, fp32 master weights and gradient reduction; fp32: fp32 throughout; fp8: FP8 matrix "
            "products (Transformer Engine; imported runs only); nvfp4: NVFP4 matrix products (Transformer Engine's "
            "4-bit recipe, Blackwell; imported runs only)",
            allowed=PRECISIONS,
        ),
    )
    backend: str = field(
        default="torch",
        metadata=doc(
            "training code: torch (FSDP2/DTensor, torchtitan style) or megatron (megatron-core)", allowed=BACKENDS
        ),
    )
    optimizer: str = field(
        default="adamw",
        metadata=doc("AdamW [assumed by the study]; sgd makes gradient errors visible in tests", allowed=OPTIMIZERS),
    )
    lr: float = field(
        default=3e-4,
        metadata=doc("learning rate", unit="per step", allowed="> 0, at most 0.1 (adamw) or 10 (sgd): LR_MAX"),
    )
    seed: int = field(
        default=0, metadata=doc("seed of weights and data; repeats differ only here", unit="index", allowed=_COUNT)
    )
    warmup_iters: int = field(
        default=10, metadata=doc("optimizer steps run before measuring", unit="steps", allowed=_COUNT)
    )
    measured_iters: int = field(
        default=50, metadata=doc("optimizer steps measured after warm-up", unit="steps", allowed=_POSITIVE)
    )
    profile_iters: int = field(
        default=0,
        metadata=doc(
            "measured steps traced by torch.profiler; 0: no trace",
            unit="steps",
            allowed=">= 0; profile_start+profile_iters <= measured_iters",
        ),
    )
    profile_start: int = field(
        default=2, metadata=doc("first traced step, counted within the measured ones", unit="steps", allowed=_COUNT)
    )
    power_sampling: bool = field(
        default=True,
        metadata=doc(
            "GPU board power and energy over the measured steps through NVML (and the idle power before them); "
            "false: none measured, by design (the run records why; its tables say so)",
            allowed=("true", "false"),
        ),
    )
    comm: str = field(
        default="default",
        metadata=doc(
            "fake: one process runs the share of rank emulate_rank of the whole layout, collectives return at once "
            "without moving data (torch's fake process group; see docs/rank-shares.md)",
            allowed=COMM_MODES,
        ),
    )
    emulate_rank: int = field(
        default=0,
        metadata=doc(
            "the rank whose share a fake-communication run computes",
            unit="rank",
            allowed=">= 0, < nodes*procs_per_node; nonzero needs comm fake",
        ),
    )
    device_memory_cap_gib: float = field(
        default=0.0,
        metadata=doc(
            "run as a GPU of this memory size (the caching allocator's per-process fraction); 0: no cap",
            unit="GiB",
            allowed=">= 0; needs device cuda",
        ),
    )
    system: str = field(
        default="",
        metadata=doc(
            "the machine an imported run ran on, by the name of its cluster description (workflow/clusters/NAME.yaml); "
            "empty for runs of this package (imported runs only)",
            allowed="empty, or lowercase letters, digits and '-'",
        ),
    )

    def __post_init__(self) -> None:
        problems = _validate(self)
        if problems:
            raise SpecError(problems)
        if self.dp_shard == -1:
            object.__setattr__(self, "dp_shard", self.world_size // (self.dp_replicate * self.tp * self.pp * self.cp))
        if self.pp_microbatches == 0:
            object.__setattr__(self, "pp_microbatches", self.pp * self.pp_stages_per_rank if self.pp > 1 else 1)
        if self.global_batch == 0:
            object.__setattr__(self, "global_batch", self.micro_batch * self.dp * self.pp_microbatches)
        problems = _validate_resolved(self)
        if problems:
            raise SpecError(problems)

    # ---- derived quantities -------------------------------------------------------
    def model_config(self) -> ModelConfig:
        cfg = catalog.model(self.model)
        return dataclasses.replace(cfg, n_layers=self.n_layers) if self.n_layers else cfg

    @property
    def world_size(self) -> int:
        return self.nodes * self.procs_per_node

    @property
    def dp(self) -> int:
        return self.dp_replicate * self.dp_shard

    @property
    def grad_accum(self) -> int:
        return self.global_batch // (self.micro_batch * self.dp * self.pp_microbatches)

    @property
    def local_batch(self) -> int:
        """Sequences each data-parallel rank processes per optimizer step."""
        return self.global_batch // self.dp

    @property
    def tokens_per_step(self) -> int:
        return self.global_batch * self.seq_len

    @property
    def comm_backend(self) -> str:
        if self.comm == "fake":
            return "fake"
        return "nccl" if self.device == "cuda" else "gloo"

    @property
    def processes(self) -> int:
        """Processes the launcher starts: the world, or one for a fake-communication rank share."""
        return 1 if self.comm == "fake" else self.world_size

    @property
    def launch_nodes(self) -> int:
        return 1 if self.comm == "fake" else self.nodes

    @property
    def launch_procs_per_node(self) -> int:
        return 1 if self.comm == "fake" else self.procs_per_node

    @property
    def layout(self) -> str:
        """Short name of the parallel layout, e.g. 'fsdp', 'hsdp+tp', 'fsdp+tp+pp'."""
        parts = []
        if self.dp_replicate > 1 and self.dp_shard > 1:
            parts.append("hsdp")
        elif self.dp_replicate > 1:
            parts.append("ddp")
        elif self.dp_shard > 1 or (self.tp == 1 and self.pp == 1):
            parts.append("fsdp")
        if self.tp > 1:
            parts.append("tp")
        if self.pp > 1:
            parts.append("pp")
        if self.cp > 1:
            parts.append("cp")
        return "+".join(parts)

    def harness_problems(self) -> list[tuple[str, str]]:
        """What of this spec the package's harness cannot run (NOT_RUN_BY_HARNESS): a spec of
        imported public logs (docs/mlperf.md) describes runs made elsewhere."""
        out = []
        if self.precision in IMPORTED_PRECISIONS:
            out.append(("precision", f"{self.precision} runs only in imported logs: the harness runs bf16 or fp32"))
        if self.cp > 1:
            out.append(("cp", "context parallelism runs only in imported logs: the harness runs cp 1"))
        if self.pp_embedding_stages:
            out.append(("pp_embedding_stages", "only in imported logs: the harness splits the layers alone"))
        if self.system:
            out.append(
                ("system", f"{self.system!r} names the machine of an imported run: runs of this package leave it empty")
            )
        return out

    @functools.cached_property  # a frozen spec: computed once (the workflow asks for it thousands of times)
    def config_id(self) -> str:
        """Stable id of the configuration: every field but the seed."""
        d = self.to_dict()
        d.pop("seed")
        for name, default in ID_EXEMPT_AT_DEFAULT.items():
            if d[name] == default:
                d.pop(name)
        degrees = f"r{self.dp_replicate}s{self.dp_shard}t{self.tp}p{self.pp}"
        return f"{self.model}-n{self.nodes}x{self.procs_per_node}-{degrees}-gb{self.global_batch}-{config_digest(d)}"

    @property
    def run_id(self) -> str:
        return f"{self.config_id}-seed{self.seed}"

    # ---- (de)serialisation --------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "RunSpec":
        refuse_unknown_fields(cls, d)
        problems = []
        for f in fields(cls):
            if f.name in d:
                want = _field_type(f)
                v = d[f.name]
                if want is float and isinstance(v, int) and not isinstance(v, bool):
                    continue
                if not isinstance(v, want) or (want is int and isinstance(v, bool)):
                    problems.append((f.name, f"expected {want.__name__}, got {v!r}"))
        if problems:
            raise SpecError(problems)
        return cls(**d)

    def replace(self, **changes: Any) -> "RunSpec":
        d = self.to_dict()
        d.update(changes)
        return RunSpec.from_dict(d)


def _field_type(f: dataclasses.Field) -> type:
    return {"int": int, "float": float, "bool": bool, "str": str}[str(f.type)]


def _validate(s: RunSpec) -> list[tuple[str, str]]:
    p: list[tuple[str, str]] = []
    choices = {
        "device": DEVICES,
        "backend": BACKENDS,
        "precision": PRECISIONS,
        "pp_schedule": PP_SCHEDULES,
        "activation_checkpointing": AC_MODES,
        "optimizer": OPTIMIZERS,
        "comm": COMM_MODES,
    }
    for name, allowed in choices.items():
        if getattr(s, name) not in allowed:
            p.append((name, f"{getattr(s, name)!r} is not one of {', '.join(allowed)}"))
    if s.model not in catalog.models():
        p.append(
            (
                "model",
                f"unknown model {s.model!r}; known: {', '.join(sorted(catalog.models()))} "
                f"(add yours with a catalog file: {catalog.ENV_VAR})",
            )
        )
    p += maxima_problems(s, MAXIMA)
    if p:
        return p
    for name in (
        "seq_len",
        "micro_batch",
        "nodes",
        "procs_per_node",
        "dp_replicate",
        "tp",
        "cp",
        "pp",
        "pp_stages_per_rank",
        "measured_iters",
    ):
        if getattr(s, name) < 1:
            p.append((name, f"must be at least 1, got {getattr(s, name)}"))
    for name in (
        "n_layers",
        "global_batch",
        "pp_microbatches",
        "warmup_iters",
        "profile_iters",
        "profile_start",
        "fsdp_forward_prefetch",
        "fsdp_backward_prefetch",
        "seed",
    ):
        if getattr(s, name) < 0:
            p.append((name, f"must not be negative, got {getattr(s, name)}"))
    if s.system and not SYSTEM_NAME.fullmatch(s.system):
        p.append(("system", f"{s.system!r} is not a cluster name (lowercase letters, digits and '-' only)"))
    if s.dp_shard == 0 or s.dp_shard < -1:
        p.append(("dp_shard", f"must be at least 1, or -1 for the rest, got {s.dp_shard}"))
    if not isinstance(s.lr, (int, float)) or not math.isfinite(s.lr) or s.lr <= 0:
        p.append(("lr", f"must be a finite positive number, got {s.lr}"))
    elif s.optimizer in LR_MAX and s.lr > LR_MAX[s.optimizer]:
        p.append(
            (
                "lr",
                f"{s.lr:g} is above {LR_MAX[s.optimizer]:g}, the largest learning rate the harness trains "
                f"with under {s.optimizer} (measured: a larger one leaves the sane loss band, the run diverges)",
            )
        )
    if not math.isfinite(s.device_memory_cap_gib):
        p.append(("device_memory_cap_gib", f"must be finite, got {s.device_memory_cap_gib}"))
    elif s.device_memory_cap_gib < 0:
        p.append(("device_memory_cap_gib", f"must not be negative, got {s.device_memory_cap_gib}"))
    if s.device_memory_cap_gib and s.device != "cuda":
        p.append(("device_memory_cap_gib", "a memory cap needs device cuda"))
    if s.emulate_rank and s.comm != "fake":
        p.append(("emulate_rank", "only a fake-communication run (comm: fake) emulates a rank"))
    if not 0 <= s.emulate_rank < s.world_size:
        p.append(("emulate_rank", f"{s.emulate_rank} is not a rank of the world of {s.world_size}"))
    if s.comm == "fake" and s.backend != "torch":
        p.append(("comm", "fake communication runs with backend torch only"))
    if s.comm == "fake" and s.pp_schedule == "interleaved_1f1b" and s.pp > 1:
        p.append(("comm", "fake communication emulates gpipe and 1f1b pipeline stages, not interleaved_1f1b"))
    if not p and s.n_layers:
        depth = catalog.model(s.model).n_layers
        if s.n_layers > depth:
            p.append(("n_layers", f"a slice of {s.n_layers} layers is deeper than {s.model}'s {depth} layers"))
    if p:
        return p
    world = s.world_size
    fixed = s.dp_replicate * s.tp * s.pp * s.cp * (s.dp_shard if s.dp_shard > 0 else 1)
    cp = "*cp" if s.cp > 1 else ""
    if s.dp_shard == -1:
        if world % fixed:
            p.append(
                (
                    "dp_shard",
                    f"world size {world} (nodes {s.nodes} x procs_per_node {s.procs_per_node}) "
                    f"is not divisible by dp_replicate*tp*pp{cp} = {fixed}",
                )
            )
    elif fixed != world:
        p.append(("world_size", f"nodes*procs_per_node = {world} but dp_replicate*dp_shard*tp*pp{cp} = {fixed}"))
    if s.cp > 1 and s.seq_len % s.cp:
        p.append(("cp", f"seq_len {s.seq_len} is not divisible by cp={s.cp}"))
    cfg = s.model_config()
    if cfg.n_heads % s.tp:
        p.append(("tp", f"{cfg.n_heads} attention heads of {s.model} are not divisible by tp={s.tp}"))
    if cfg.n_kv_heads % s.tp:
        p.append(("tp", f"{cfg.n_kv_heads} key/value heads of {s.model} are not divisible by tp={s.tp}"))
    if cfg.ffn_dim % s.tp:
        p.append(("tp", f"FFN width {cfg.ffn_dim} of {s.model} is not divisible by tp={s.tp}"))
    if cfg.vocab_size % s.tp:
        p.append(("tp", f"vocabulary {cfg.vocab_size} of {s.model} is not divisible by tp={s.tp}"))
    if s.sequence_parallel and s.tp == 1:
        p.append(("sequence_parallel", "needs tp > 1"))
    if s.sequence_parallel and s.seq_len % s.tp:
        p.append(("sequence_parallel", f"seq_len {s.seq_len} is not divisible by tp={s.tp}"))
    stages = s.pp * s.pp_stages_per_rank
    split = cfg.n_layers + (2 if s.pp_embedding_stages else 0)
    if split % stages:
        what = f"{cfg.n_layers} layers of {s.model}" + (" with embedding and output" if s.pp_embedding_stages else "")
        p.append(("pp", f"{what} do not split into pp*pp_stages_per_rank = {stages} equal stages"))
    if s.pp_embedding_stages and s.pp == 1:
        p.append(("pp_embedding_stages", "needs pp > 1"))
    if s.pp_schedule == "interleaved_1f1b":
        if s.pp > 1 and s.pp_stages_per_rank < 2:
            p.append(("pp_stages_per_rank", "interleaved_1f1b needs at least 2 stages per rank"))
    elif s.pp_stages_per_rank != 1:
        p.append(("pp_stages_per_rank", f"{s.pp_schedule} runs one stage per rank; use interleaved_1f1b"))
    if s.pp == 1 and s.pp_microbatches not in (0, 1):
        p.append(("pp_microbatches", "pipeline microbatches need pp > 1"))
    if s.pp > 1 and 0 < s.pp_microbatches < s.pp:
        p.append(("pp_microbatches", f"{s.pp_microbatches} microbatches cannot fill {s.pp} pipeline ranks"))
    if s.pp > 1 and s.pp_schedule == "interleaved_1f1b" and s.pp_microbatches % s.pp:
        p.append(("pp_microbatches", f"interleaved_1f1b needs a multiple of pp={s.pp} microbatches"))
    if s.precision == "bf16" and s.device == "cpu":
        pass  # allowed (slow); the smoke study uses fp32 on CPU
    if s.profile_iters and s.profile_start + s.profile_iters > s.measured_iters:
        p.append(
            (
                "profile_iters",
                f"profile window {s.profile_start}+{s.profile_iters} exceeds measured_iters={s.measured_iters}",
            )
        )
    return p


def _validate_resolved(s: RunSpec) -> list[tuple[str, str]]:
    per_step = s.micro_batch * s.dp * s.pp_microbatches
    if s.global_batch % per_step:
        return [
            (
                "global_batch",
                f"{s.global_batch} is not divisible by micro_batch*dp*pp_microbatches = "
                f"{s.micro_batch}*{s.dp}*{s.pp_microbatches} = {per_step}",
            )
        ]
    return []


def load_mapping(path: str, what: str) -> dict:
    """The mapping of fields in a JSON or YAML spec file."""
    with open(path) as f:
        text = f.read()
    try:
        data = (
            strict_yaml.load_text(text, path)
            if path.endswith((".yaml", ".yml"))
            else strict_yaml.json_loads(text, path)
        )
    except (yaml.YAMLError, ValueError) as e:  # a duplicate key, or not YAML/JSON: one sentence naming the file
        raise SpecError([("spec", " ".join(str(e).split()))]) from None
    if not isinstance(data, dict):
        raise SpecError([("spec", f"{path} does not hold a mapping of {what} fields")])
    return data


def spec_with_overrides(cls, path: str | None, args) -> Any:
    """A spec of dataclass `cls` from an optional JSON/YAML file, with every field that `args`
    (an argparse namespace with one attribute per field) sets overriding the file."""
    base = cls.from_dict(load_mapping(path, cls.__name__)).to_dict() if path else {}
    for f in fields(cls):
        v = getattr(args, f.name)
        if v is not None:
            base[f.name] = v
    return cls.from_dict(base)
