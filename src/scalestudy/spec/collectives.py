"""The specification of one collectives-benchmark run (the study's Figure 2). Pure data."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any

from scalestudy.spec.run import DEVICES, MAXIMA, SpecError, config_digest, doc, maxima_problems, refuse_unknown_fields

OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")
DTYPES = {"float32": 4, "bfloat16": 2, "float16": 2}


COLLECTIVE_MAXIMA = {
    **{k: MAXIMA[k] for k in ("seed", "warmup_iters", "nodes", "procs_per_node")},
    "iters": (100_000, "timed calls per op and size"),
    "step_factor": (1 << 10, "a size's factor"),
    "min_bytes": (1 << 36, "64 GiB buffers"),
    "max_bytes": (1 << 36, "64 GiB buffers"),
}


@dataclass(frozen=True)
class CollectivesSpec:
    """One collectives benchmark of a study: the operations, message sizes and repeats."""

    ops: tuple[str, ...] = field(
        default=("all_reduce", "all_gather", "reduce_scatter"),
        metadata=doc("collectives to measure, each over every size", allowed=OPS),
    )
    min_bytes: int = field(
        default=1024,
        metadata=doc(
            "smallest message, as nccl-tests counts it (see scalestudy.measure.bandwidth)", unit="bytes", allowed=">= 1"
        ),
    )
    max_bytes: int = field(
        default=1 << 20, metadata=doc("largest message, as nccl-tests counts it", unit="bytes", allowed=">= min_bytes")
    )
    step_factor: int = field(
        default=2, metadata=doc("sizes min_bytes, min_bytes*f, ... up to max_bytes", unit="factor", allowed=">= 2")
    )
    dtype: str = field(default="float32", metadata=doc("element type of the buffers", allowed=tuple(DTYPES)))
    warmup_iters: int = field(default=5, metadata=doc("untimed calls per op and size", unit="calls", allowed=">= 0"))
    iters: int = field(default=20, metadata=doc("timed calls per op and size", unit="calls", allowed=">= 1"))
    nodes: int = field(default=1, metadata=doc("hosts the benchmark spans", unit="nodes", allowed=">= 1"))
    procs_per_node: int = field(
        default=2,
        metadata=doc("processes per host (one per GPU)", unit="processes", allowed=">= 1; nodes*procs_per_node >= 2"),
    )
    device: str = field(default="cpu", metadata=doc("where the buffers live", allowed=DEVICES))
    seed: int = field(default=0, metadata=doc("repeat index; repeats differ only here", unit="index", allowed=">= 0"))

    def __post_init__(self) -> None:
        object.__setattr__(self, "ops", tuple(self.ops))
        p: list[tuple[str, str]] = []
        for op in self.ops:
            if op not in OPS:
                p.append(("ops", f"{op!r} is not one of {', '.join(OPS)}"))
        if not self.ops:
            p.append(("ops", "at least one collective is needed"))
        if self.dtype not in DTYPES:
            p.append(("dtype", f"{self.dtype!r} is not one of {', '.join(DTYPES)}"))
        if self.device not in DEVICES:
            p.append(("device", f"{self.device!r} is not one of {', '.join(DEVICES)}"))
        p += maxima_problems(self, COLLECTIVE_MAXIMA)
        if p:
            raise SpecError(p)
        for name in ("min_bytes", "max_bytes", "iters", "nodes", "procs_per_node"):
            if getattr(self, name) < 1:
                p.append((name, f"must be at least 1, got {getattr(self, name)}"))
        if self.step_factor < 2:
            p.append(("step_factor", f"must be at least 2, got {self.step_factor}"))
        if self.warmup_iters < 0:
            p.append(("warmup_iters", f"must not be negative, got {self.warmup_iters}"))
        if self.max_bytes < self.min_bytes:
            p.append(("max_bytes", f"{self.max_bytes} is below min_bytes {self.min_bytes}"))
        if self.world_size < 2:
            p.append(("procs_per_node", "a collective needs at least 2 processes (nodes*procs_per_node)"))
        if p:
            raise SpecError(p)

    @property
    def world_size(self) -> int:
        return self.nodes * self.procs_per_node

    @property
    def processes(self) -> int:
        return self.world_size

    @property
    def launch_nodes(self) -> int:
        return self.nodes

    @property
    def launch_procs_per_node(self) -> int:
        return self.procs_per_node

    @property
    def comm_backend(self) -> str:
        return "nccl" if self.device == "cuda" else "gloo"

    def sizes(self) -> list[int]:
        out, s = [], self.min_bytes
        while s <= self.max_bytes:
            out.append(s)
            s *= self.step_factor
        return out

    @property
    def config_id(self) -> str:
        d = self.to_dict()
        d.pop("seed")
        return f"collectives-n{self.nodes}x{self.procs_per_node}-{self.device}-{config_digest(d)}"

    @property
    def run_id(self) -> str:
        return f"{self.config_id}-seed{self.seed}"

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["ops"] = list(self.ops)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "CollectivesSpec":
        refuse_unknown_fields(cls, d)
        d = dict(d)
        if "ops" in d:
            d["ops"] = tuple(d["ops"])
        return cls(**d)


_SIZE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([kKmMgG]?)\s*$")
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}


def parse_size(text: str | int) -> int:
    """Bytes from '512', '1K', '16M', '1.5G' (binary units, as nccl-tests' -b and -e read them)."""
    if isinstance(text, int):
        return text
    m = _SIZE.match(text)
    if not m:
        raise ValueError(f"not a size: {text!r} (use bytes or a K, M or G suffix, e.g. 16M)")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


def format_size(n: int) -> str:
    """1024 -> '1K', 16 << 20 -> '16M'; sizes that are no whole multiple stay in bytes."""
    for suffix, unit in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= unit and n % unit == 0:
            return f"{n // unit}{suffix}"
    return str(n)
