"""The specifications of the instruments: measurements of one GPU that the performance model reads
besides training runs (`scalestudy instrument NAME`, cli/instrument.py). Pure data.

- matmul-sweep: the best achievable bf16 matrix-product rate, MAMF-style, over a grid of shapes and
  the products a rank of the paper's layouts runs (data/h200-matmul, data/h100-matmul; gpus.yaml
  `matmul_achievable_tflops`);
- power-duty: board power under duty cycles of matrix products, copies and idle gaps (data/power-duty;
  perfmodel/power.py's fit);
- comm-power: board power while thread blocks poll and reduce as NCCL's channels do (data/comm-power;
  perfmodel/power.py CommPower);
- burst-rate: the rate of matrix products in short bursts against back to back (data/burst-rate; the
  power limiter's speed side, perfmodel/burst_check.py).

Every default is the constant of the script that made the committed data, so that a run with the
defaults repeats that measurement. A run is one process on one device; its id is the kind, the
device where it has a choice, the digest of its fields but the seed, and the seed.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

from scalestudy.spec import catalog
from scalestudy.spec.run import DEVICES, SpecError, config_digest, doc, refuse_unknown_fields

GRID = (1024, 2048, 4096, 6144, 8192, 12288, 16384)
# model/tokens of one micro batch on one rank in the paper's layouts (paper-rank.yaml)
LLAMA = ("llama-1b/8192", "llama2-7b/8192", "llama2-13b/4096", "llama2-70b/4096")
ALTERNATIONS = ("0.5/0.5", "0.25/0.5", "0.6/0.2", "0.2/0.2", "0.75/0.25")
GIB = 1 << 30
MIB = 1 << 20


def parse_model_tokens(text: str) -> tuple[str, int]:
    """'llama2-7b/8192' -> ('llama2-7b', 8192); ValueError with the reason where it cannot be."""
    parts = text.split("/")
    if len(parts) != 2 or not parts[1].isdigit() or int(parts[1]) < 1:
        raise ValueError(f"{text!r} is not MODEL/TOKENS (e.g. llama2-7b/8192)")
    if parts[0] not in catalog.models():
        raise ValueError(f"{text!r}: unknown model {parts[0]!r}")
    return parts[0], int(parts[1])


def parse_alternation(text: str) -> tuple[float, float]:
    """'0.6/0.2' -> (0.6, 0.2): the compute and copy on-fractions of a period; ValueError where they
    are not two fractions whose sum is at most 1."""
    parts = text.split("/")
    try:
        c, m = (float(x) for x in parts)
    except ValueError:
        raise ValueError(f"{text!r} is not COMPUTE/COPY (e.g. 0.6/0.2)") from None
    if not (c > 0 and m > 0 and c + m <= 1):
        raise ValueError(f"{text!r}: both fractions must be above 0 and their sum at most 1")
    return c, m


def projection_shapes(model: str, tokens: int, tp: int) -> list[tuple[dict, int, int, int]]:
    """(where, m, n, k) of the forward, input-gradient and weight-gradient products of every
    projection (wq, wk+wv, wo, w1, w3, w2, output) of one rank at tensor-parallel degree `tp`; empty
    where tp does not divide the heads. A rank holds at least one KV head."""
    cfg = catalog.model(model)
    if cfg.n_heads % tp:
        return []
    d, kv = cfg.dim, cfg.n_kv_heads * cfg.head_dim
    kv_rank = max(kv // tp, cfg.head_dim)
    proj = {
        "wq": (d, d // tp),
        "wkv": (d, 2 * kv_rank),
        "wo": (d // tp, d),
        "w1": (d, cfg.ffn_dim // tp),
        "w3": (d, cfg.ffn_dim // tp),
        "w2": (cfg.ffn_dim // tp, d),
        "output": (d, cfg.vocab_size // tp),
    }
    out = []
    for p, (k_in, n_out) in proj.items():
        where = {"model": model, "tp": tp, "projection": p}
        out += [
            ({**where, "pass": "forward"}, tokens, n_out, k_in),
            ({**where, "pass": "input_grad"}, tokens, k_in, n_out),
            ({**where, "pass": "weight_grad"}, n_out, k_in, tokens),
        ]
    return out


class _Instrument:
    """What the instruments' specs share: their ids, their dict form, and the one process on one
    device that every run of the package describes to the launcher."""

    KIND: ClassVar[str]
    ID_PREFIX: ClassVar[str]
    device = "cuda"
    nodes = procs_per_node = world_size = processes = launch_nodes = launch_procs_per_node = 1

    @property
    def comm_backend(self) -> str:
        return "nccl" if self.device == "cuda" else "gloo"

    @property
    def config_id(self) -> str:
        d = self.to_dict()
        d.pop("seed")
        return f"{self.ID_PREFIX}-{config_digest(d)}"

    @property
    def run_id(self) -> str:
        return f"{self.config_id}-seed{self.seed}"  # type: ignore[attr-defined]  # every instrument has a seed

    def to_dict(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self).items()}  # type: ignore[call-overload]  # the subclasses are dataclasses

    @classmethod
    def from_dict(cls, d: dict[str, Any]):
        refuse_unknown_fields(cls, d)
        tuples = {f.name for f in fields(cls) if str(f.type).startswith("tuple")}  # type: ignore[arg-type]  # the subclasses are dataclasses
        return cls(**{k: tuple(v) if k in tuples and isinstance(v, list) else v for k, v in d.items()})

    def _check(self, p: list[tuple[str, str]]) -> None:
        """The problems every instrument shares (seed, non-negative seconds), then raise them all."""
        for f in fields(self):  # type: ignore[arg-type]  # the subclasses are dataclasses
            if isinstance(getattr(self, f.name), list):
                object.__setattr__(self, f.name, tuple(getattr(self, f.name)))
        if self.seed < 0:  # type: ignore[attr-defined]  # every instrument has a seed
            p.append(("seed", f"must not be negative, got {self.seed}"))  # type: ignore[attr-defined]  # every instrument has a seed
        if p:
            raise SpecError(p)


def _at_least(p: list[tuple[str, str]], spec, names: tuple[str, ...], low: float) -> None:
    for name in names:
        v = getattr(spec, name)
        if not v >= low:
            p.append((name, f"must be at least {low:g}, got {v}"))


def _above_zero(p: list[tuple[str, str]], spec, names: tuple[str, ...]) -> None:
    for name in names:
        if not getattr(spec, name) > 0:
            p.append((name, f"must be above 0, got {getattr(spec, name)}"))


def _each_at_least(p: list[tuple[str, str]], spec, name: str, low: float) -> None:
    values = getattr(spec, name)
    if not values:
        p.append((name, "at least one value is needed"))
    for v in values:
        if not v >= low:
            p.append((name, f"{v} is below {low:g}"))


@dataclass(frozen=True)
class MatmulSweepSpec(_Instrument):
    """The matmul-sweep instrument: the best achievable bf16 matrix-product rate over a grid of shapes."""

    KIND: ClassVar[str] = "matmul-sweep"
    ID_PREFIX: ClassVar[str] = "matmul"

    grid: tuple[int, ...] = field(
        default=GRID,
        metadata=doc(
            "the sizes M, N and K each take in the grid of shapes (every combination is one shape)",
            unit="elements",
            allowed=">= 1 each",
        ),
    )
    llama: tuple[str, ...] = field(
        default=LLAMA,
        metadata=doc(
            "models whose projections' products are swept after the grid, each MODEL/TOKENS (tokens of one micro batch "
            "on one rank); none: the grid alone",
            allowed="catalog models; tokens >= 1",
        ),
    )
    tp: tuple[int, ...] = field(
        default=(1, 2, 4, 8, 16),
        metadata=doc(
            "tensor-parallel degrees of the projections' products (a degree that does not divide a model's heads is "
            "left out)",
            unit="ranks",
            allowed=">= 1 each",
        ),
    )
    warmup_iters: int = field(default=20, metadata=doc("untimed calls per shape", unit="calls", allowed=">= 0"))
    iters: int = field(
        default=50,
        metadata=doc(
            "calls per shape timed back to back (CUDA events; host clock on CPU)", unit="calls", allowed=">= 1"
        ),
    )
    device: str = field(
        default="cuda", metadata=doc("where the products run (cpu: a check of the code path)", allowed=DEVICES)
    )
    seed: int = field(
        default=0,
        metadata=doc(
            "repeat index, and the seed of the random operands; repeats differ only here", unit="index", allowed=">= 0"
        ),
    )

    def __post_init__(self) -> None:
        p: list[tuple[str, str]] = []
        _each_at_least(p, self, "grid", 1)
        if self.llama:
            _each_at_least(p, self, "tp", 1)
        for text in self.llama:
            try:
                parse_model_tokens(text)
            except ValueError as e:
                p.append(("llama", str(e)))
        _at_least(p, self, ("warmup_iters",), 0)
        _at_least(p, self, ("iters",), 1)
        if self.device not in DEVICES:
            p.append(("device", f"{self.device!r} is not one of {', '.join(DEVICES)}"))
        self._check(p)

    @property
    def config_id(self) -> str:
        d = self.to_dict()
        d.pop("seed")
        return f"{self.ID_PREFIX}-{self.device}-{config_digest(d)}"

    def shapes(self) -> list[tuple[dict, int, int, int]]:
        """(where, m, n, k) in the order they are timed: the grid, then each model's products by TP degree."""
        out = [({"set": "grid"}, m, n, k) for m in self.grid for n in self.grid for k in self.grid]
        for text in self.llama:
            model, tokens = parse_model_tokens(text)
            for tp in self.tp:
                out += [({"set": "llama", **w}, m, n, k) for w, m, n, k in projection_shapes(model, tokens, tp)]
        return out


@dataclass(frozen=True)
class PowerDutySpec(_Instrument):
    """The power-duty instrument: board power under duty cycles of matrix products, copies and idle gaps."""

    KIND: ClassVar[str] = "power-duty"
    ID_PREFIX: ClassVar[str] = "power-duty"

    matmul_n: int = field(
        default=8192,
        metadata=doc("size of the square bf16 matrix products (random data)", unit="elements", allowed=">= 1"),
    )
    matmul_group: int = field(
        default=4, metadata=doc("products launched between two synchronisations", unit="products", allowed=">= 1")
    )
    copy_mib: int = field(
        default=4096,
        metadata=doc(
            "size of the fp32 device-to-device copy (memory-bound, like NCCL's copy kernels)",
            unit="MiB",
            allowed=">= 1",
        ),
    )
    warmup_compute_s: float = field(
        default=2.0,
        metadata=doc(
            "seconds of products before the first phase (clocks up, kernels chosen)", unit="s", allowed=">= 0"
        ),
    )
    warmup_copy_s: float = field(default=0.5, metadata=doc("seconds of copies after them", unit="s", allowed=">= 0"))
    idle_s: float = field(
        default=6.0, metadata=doc("length of the idle phases at the start and the end", unit="s", allowed="> 0")
    )
    continuous_s: float = field(
        default=6.0,
        metadata=doc("length of the phases of products and of copies back to back", unit="s", allowed="> 0"),
    )
    duty_periods_s: tuple[float, ...] = field(
        default=(0.02, 0.2, 1.0),
        metadata=doc(
            "periods of the duty cycles (each of products and of copies, at every on-fraction)",
            unit="s",
            allowed="> 0 each",
        ),
    )
    on_fractions: tuple[float, ...] = field(
        default=(0.25, 0.5, 0.75),
        metadata=doc(
            "shares of a duty cycle's period in which its kernels run", unit="fraction", allowed="> 0 and < 1 each"
        ),
    )
    duty_s: float = field(default=4.0, metadata=doc("length of each duty-cycle phase", unit="s", allowed="> 0"))
    alternations: tuple[str, ...] = field(
        default=ALTERNATIONS,
        metadata=doc(
            "on-fractions of products then copies in each alternating phase's period, each COMPUTE/COPY",
            allowed="fractions > 0 whose sum is at most 1",
        ),
    )
    alternate_period_s: float = field(
        default=0.2, metadata=doc("period of the alternating phases", unit="s", allowed="> 0")
    )
    alternate_s: float = field(default=4.0, metadata=doc("length of each alternating phase", unit="s", allowed="> 0"))
    together_products: int = field(
        default=8,
        metadata=doc(
            "products launched beside each copy on a second stream in the overlapped phase",
            unit="products",
            allowed=">= 1",
        ),
    )
    together_s: float = field(
        default=5.0,
        metadata=doc("length of the overlapped phase (products and copies at once)", unit="s", allowed="> 0"),
    )
    sample_s: float = field(
        default=0.1,
        metadata=doc("interval of the NVML samples of board power, SM clock and temperature", unit="s", allowed="> 0"),
    )
    seed: int = field(
        default=0,
        metadata=doc(
            "repeat index, and the seed of the random operands; repeats differ only here", unit="index", allowed=">= 0"
        ),
    )

    def __post_init__(self) -> None:
        p: list[tuple[str, str]] = []
        _at_least(p, self, ("matmul_n", "matmul_group", "copy_mib", "together_products"), 1)
        _at_least(p, self, ("warmup_compute_s", "warmup_copy_s"), 0)
        _above_zero(
            p, self, ("idle_s", "continuous_s", "duty_s", "alternate_period_s", "alternate_s", "together_s", "sample_s")
        )
        if not self.duty_periods_s or not all(x > 0 for x in self.duty_periods_s):
            p.append(("duty_periods_s", f"needs at least one period, each above 0; got {list(self.duty_periods_s)}"))
        if not self.on_fractions or not all(0 < x < 1 for x in self.on_fractions):
            p.append(
                (
                    "on_fractions",
                    "needs at least one fraction, each above 0 and below 1; got " + str(list(self.on_fractions)),
                )
            )
        for text in self.alternations:
            try:
                parse_alternation(text)
            except ValueError as e:
                p.append(("alternations", str(e)))
        self._check(p)

    @property
    def copy_elements(self) -> int:
        return self.copy_mib * MIB // 4

    def phases(self) -> list[tuple[str, str, tuple[float, ...], dict]]:
        """(name, what runs, its arguments, the fields its record adds) of every phase, in the order
        they run. What runs: idle (seconds), compute or copy back to back (seconds), compute_duty or
        copy_duty (period, on-fraction, seconds), alternate (compute and copy fractions, period,
        seconds), together (seconds)."""
        out: list[tuple[str, str, tuple[float, ...], dict]] = [
            ("idle_a", "idle", (self.idle_s,), {"pattern": "idle", "gap_s": self.idle_s}),
            ("compute", "compute", (self.continuous_s,), {"pattern": "continuous"}),
            ("copy", "copy", (self.continuous_s,), {"pattern": "continuous"}),
        ]
        for kind in ("compute", "copy"):
            for period in self.duty_periods_s:
                for frac in self.on_fractions:
                    out.append(
                        (
                            f"{kind}_duty_p{period}_f{frac}",
                            f"{kind}_duty",
                            (period, frac, self.duty_s),
                            {"pattern": "duty", "period_s": period, "on_fraction": frac, "gap_s": (1 - frac) * period},
                        )
                    )
        p = self.alternate_period_s
        for cf, mf in map(parse_alternation, self.alternations):
            out.append(
                (
                    f"alternate_c{cf}_m{mf}",
                    "alternate",
                    (cf, mf, p, self.alternate_s),
                    {"pattern": "alternate", "period_s": p, "gap_s": (1 - cf - mf) * p},
                )
            )
        out.append(("together", "together", (self.together_s,), {"pattern": "overlapped"}))
        out.append(("idle_b", "idle", (self.idle_s,), {"pattern": "idle", "gap_s": self.idle_s}))
        return out


@dataclass(frozen=True)
class CommPowerSpec(_Instrument):
    """The comm-power instrument: board power while thread blocks poll and reduce as NCCL's channels do."""

    KIND: ClassVar[str] = "comm-power"
    ID_PREFIX: ClassVar[str] = "comm-power"

    phase_s: float = field(
        default=8.0, metadata=doc("length of each phase (one kernel launch a phase)", unit="s", allowed="> 0")
    )
    gap_s: float = field(
        default=3.0,
        metadata=doc("idle seconds before each phase (the board at rest is sampled too)", unit="s", allowed=">= 0"),
    )
    threads: int = field(
        default=512, metadata=doc("threads of each block (NCCL_NTHREADS' default)", unit="threads", allowed="1 to 1024")
    )
    blocks: tuple[int, ...] = field(
        default=(8, 16, 32),
        metadata=doc(
            "thread blocks polling and reducing, one a channel as NCCL runs them", unit="blocks", allowed=">= 1 each"
        ),
    )
    rates_gb_per_s: tuple[float, ...] = field(
        default=(25.0, 50.0, 100.0),
        metadata=doc(
            "network rates at which the blocks reduce chunks (a 200, 400 and 800 Gb/s NIC)",
            unit="GB/s",
            allowed="> 0 each",
        ),
    )
    ring_bytes: int = field(
        default=GIB,
        metadata=doc(
            "fp32 ring the chunks are reduced over (beyond L2: every reduce reaches HBM)",
            unit="bytes",
            allowed="a multiple of chunk_bytes",
        ),
    )
    chunk_bytes: int = field(
        default=MIB,
        metadata=doc(
            "network bytes of one chunk (one period of the reducing blocks)", unit="bytes", allowed="a multiple of 4"
        ),
    )
    matmul_n: int = field(
        default=8192,
        metadata=doc(
            "size of the square bf16 products of the warm-up and the reference phase", unit="elements", allowed=">= 1"
        ),
    )
    matmul_group: int = field(
        default=4, metadata=doc("products launched between two synchronisations", unit="products", allowed=">= 1")
    )
    sample_s: float = field(
        default=0.1,
        metadata=doc("interval of the NVML samples of board power, SM clock and temperature", unit="s", allowed="> 0"),
    )
    seed: int = field(
        default=0,
        metadata=doc(
            "repeat index, and the seed of the random operands; repeats differ only here", unit="index", allowed=">= 0"
        ),
    )

    def __post_init__(self) -> None:
        p: list[tuple[str, str]] = []
        _at_least(p, self, ("matmul_n", "matmul_group", "ring_bytes", "chunk_bytes"), 1)
        _at_least(p, self, ("gap_s",), 0)
        _above_zero(p, self, ("phase_s", "sample_s"))
        if not 1 <= self.threads <= 1024:
            p.append(("threads", f"a CUDA block holds 1 to 1024 threads, got {self.threads}"))
        _each_at_least(p, self, "blocks", 1)
        if not self.rates_gb_per_s or not all(r > 0 for r in self.rates_gb_per_s):
            p.append(("rates_gb_per_s", f"needs at least one rate, each above 0; got {list(self.rates_gb_per_s)}"))
        if self.chunk_bytes % 4:
            p.append(("chunk_bytes", f"must be whole fp32 elements (a multiple of 4), got {self.chunk_bytes}"))
        elif self.chunk_bytes > 0 and self.ring_bytes % self.chunk_bytes:
            p.append(
                (
                    "ring_bytes",
                    (
                        f"must be a multiple of chunk_bytes ({self.chunk_bytes}) so that no chunk "
                        f"wraps, got {self.ring_bytes}"
                    ),
                )
            )
        self._check(p)

    def period_ns(self, rate_gb_per_s: float) -> int:
        """Nanoseconds between the starts of two chunks at a network rate."""
        return int(self.chunk_bytes / (rate_gb_per_s * 1e9) * 1e9)


@dataclass(frozen=True)
class BurstRateSpec(_Instrument):
    """The burst-rate instrument: the rate of matrix products in short bursts against back to back."""

    KIND: ClassVar[str] = "burst-rate"
    ID_PREFIX: ClassVar[str] = "burst-rate"

    matmul_n: int = field(
        default=8192, metadata=doc("size of the square bf16 products (random data)", unit="elements", allowed=">= 1")
    )
    bursts_ms: tuple[int, ...] = field(
        default=(5, 10, 25, 50, 100, 250, 1000),
        metadata=doc(
            "target lengths of the bursts of products, one phase each (between a back-to-back phase at the start and "
            "one at the end)",
            unit="ms",
            allowed=">= 1 each",
        ),
    )
    gap_ms: float = field(
        default=10.0,
        metadata=doc("idle gap after each burst (an exposed collective's wait)", unit="ms", allowed=">= 0"),
    )
    phase_s: float = field(default=4.0, metadata=doc("length of each phase", unit="s", allowed="> 0"))
    rest_s: float = field(default=2.0, metadata=doc("idle seconds before each phase", unit="s", allowed=">= 0"))
    warmup_products: int = field(
        default=200,
        metadata=doc(
            "products before the first phase (kernels chosen, clocks settled at the limit)",
            unit="products",
            allowed=">= 0",
        ),
    )
    reference_products: int = field(
        default=50,
        metadata=doc(
            "products back to back whose mean time sets the products of a burst", unit="products", allowed=">= 1"
        ),
    )
    back_to_back_group: int = field(
        default=20,
        metadata=doc("products timed as one group in the back-to-back phases", unit="products", allowed=">= 1"),
    )
    sample_s: float = field(
        default=0.1,
        metadata=doc("interval of the NVML samples of board power, SM clock and temperature", unit="s", allowed="> 0"),
    )
    seed: int = field(
        default=0,
        metadata=doc(
            "repeat index, and the seed of the random operands; repeats differ only here", unit="index", allowed=">= 0"
        ),
    )

    def __post_init__(self) -> None:
        p: list[tuple[str, str]] = []
        _at_least(p, self, ("matmul_n", "reference_products", "back_to_back_group"), 1)
        _at_least(p, self, ("gap_ms", "rest_s", "warmup_products"), 0)
        _above_zero(p, self, ("phase_s", "sample_s"))
        _each_at_least(p, self, "bursts_ms", 1)
        self._check(p)


SPECS: dict[str, type] = {cls.KIND: cls for cls in (MatmulSweepSpec, PowerDutySpec, CommPowerSpec, BurstRateSpec)}
