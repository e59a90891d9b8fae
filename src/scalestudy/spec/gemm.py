"""The specification of one matrix-product benchmark run, and the matrix products a layout runs.
Pure data.

A run times, on one GPU, every matrix product of one transformer layer and the output layer as one
tensor-parallel rank of a layout runs them, forward (fprop), input gradient (dgrad) and weight
gradient (wgrad), in each precision asked for. A layout is `model/tokens/tp`: the catalog model, the
tokens of one micro batch on one rank (micro batch x sequence / context-parallel degree) and the
tensor-parallel degree. The performance model weighs the measured rates of a layout's products by
their FLOPs (perfmodel/gemm_rates.py); `layer_gemms` is the one list both sides read.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from scalestudy.spec import catalog
from scalestudy.spec.run import DEVICES, SpecError, config_digest, doc, refuse_unknown_fields

GEMM_DTYPES = ("bf16", "fp8")
PASSES = ("fprop", "dgrad", "wgrad")
# The output layer stays in bf16 under FP8 training: Megatron's output layer is its own
# ColumnParallelLinear, not a Transformer Engine module (megatron/core/models/gpt/gpt_model.py)
HEAD = "output"


@dataclass(frozen=True)
class Gemm:
    """One matrix product C[m, n] = A[m, k] B[k, n] of a layer's projection in one pass."""

    projection: str  # qkv, proj, fc1, fc2, output
    pass_: str  # fprop, dgrad, wgrad
    m: int
    n: int
    k: int

    @property
    def flops(self) -> float:
        return 2.0 * self.m * self.n * self.k

    def as_dict(self) -> dict:
        return {"projection": self.projection, "pass": self.pass_, "m": self.m, "n": self.n, "k": self.k}


def parse_layout(text: str) -> tuple[str, int, int]:
    """'gpt3-175b/2048/4' -> (model, tokens, tp); refused with the reason where it cannot be."""
    parts = text.split("/")
    if len(parts) != 3 or not parts[1].isdigit() or not parts[2].isdigit():
        raise ValueError(f"layout {text!r} is not MODEL/TOKENS/TP (e.g. gpt3-175b/2048/4)")
    model, tokens, tp = parts[0], int(parts[1]), int(parts[2])
    if model not in catalog.models():
        raise ValueError(f"layout {text!r}: unknown model {model!r}")
    cfg = catalog.model(model)
    if tokens < 1 or tp < 1 or cfg.n_heads % tp or cfg.ffn_dim % tp or cfg.vocab_size % tp:
        raise ValueError(
            f"layout {text!r}: {tokens} tokens and TP {tp} do not fit {model} (heads {cfg.n_heads}, "
            f"FFN {cfg.ffn_dim}, vocabulary {cfg.vocab_size})"
        )
    return model, tokens, tp


def layout_name(model: str, tokens: int, tp: int) -> str:
    """A layout's name, MODEL/TOKENS/TP."""
    return f"{model}/{tokens}/{tp}"


def run_layout(spec) -> str:
    """The MODEL/TOKENS/TP layout of a RunSpec's products: a micro batch's tokens on one rank."""
    return layout_name(spec.model, spec.micro_batch * spec.seq_len // spec.cp, spec.tp)


def layer_gemms(model: str, tokens: int, tp: int) -> list[Gemm]:
    """The matrix products of one layer and of the output layer on one TP rank (Megatron's split:
    column-parallel qkv and fc1 on the gathered input, row-parallel proj and fc2 on the rank's
    slice; a rank holds at least one KV head)."""
    cfg = catalog.model(model)
    d, f = cfg.dim, cfg.ffn_dim
    kv = max(cfg.n_kv_heads // tp, 1) * cfg.head_dim
    up = 2 * f if cfg.mlp == "swiglu" else f  # SwiGLU's gate and up projections as one product
    proj = {
        "qkv": (d, d // tp + 2 * kv),
        "proj": (d // tp, d),
        "fc1": (d, up // tp),
        "fc2": (f // tp, d),
        HEAD: (d, cfg.vocab_size // tp),
    }
    out = []
    for name, (k_in, n_out) in proj.items():
        out += [
            Gemm(name, "fprop", tokens, n_out, k_in),
            Gemm(name, "dgrad", tokens, k_in, n_out),
            Gemm(name, "wgrad", n_out, k_in, tokens),
        ]
    return out


@dataclass(frozen=True)
class GemmSpec:
    """One GEMM benchmark of a study: the layouts and dtypes whose matrix products are timed."""

    layouts: tuple[str, ...] = field(
        default=("tiny/256/1",),
        metadata=doc(
            "layouts whose products are timed, each MODEL/TOKENS/TP (tokens of one micro batch on one rank)",
            allowed="catalog models; TP divides heads, FFN width and vocabulary",
        ),
    )
    dtypes: tuple[str, ...] = field(
        default=("bf16",),
        metadata=doc("precisions of the layers' products (the output layer always bf16)", allowed=GEMM_DTYPES),
    )
    settle_s: float = field(
        default=10.0,
        metadata=doc(
            "seconds of back-to-back 8192-cubed bf16 products before the first timed one, so that every product runs "
            "at the board's settled power limit, not at a cold GPU's full clock",
            unit="s",
            allowed=">= 0",
        ),
    )
    warmup_iters: int = field(default=10, metadata=doc("untimed calls per product", unit="calls", allowed=">= 0"))
    iters: int = field(default=30, metadata=doc("timed calls per product", unit="calls", allowed=">= 1"))
    device: str = field(default="cpu", metadata=doc("where the products run", allowed=DEVICES))
    seed: int = field(default=0, metadata=doc("repeat index; repeats differ only here", unit="index", allowed=">= 0"))

    def __post_init__(self) -> None:
        object.__setattr__(self, "layouts", tuple(self.layouts))
        object.__setattr__(self, "dtypes", tuple(self.dtypes))
        p: list[tuple[str, str]] = []
        if not self.layouts:
            p.append(("layouts", "at least one layout is needed"))
        for text in self.layouts:
            try:
                parse_layout(text)
            except ValueError as e:
                p.append(("layouts", str(e)))
        for d in self.dtypes:
            if d not in GEMM_DTYPES:
                p.append(("dtypes", f"{d!r} is not one of {', '.join(GEMM_DTYPES)}"))
        if not self.dtypes:
            p.append(("dtypes", "at least one precision is needed"))
        if "fp8" in self.dtypes and self.device != "cuda":
            p.append(("dtypes", "fp8 products need a GPU with FP8 tensor cores (device cuda)"))
        if self.device not in DEVICES:
            p.append(("device", f"{self.device!r} is not one of {', '.join(DEVICES)}"))
        if self.iters < 1:
            p.append(("iters", f"must be at least 1, got {self.iters}"))
        if not self.settle_s >= 0:
            p.append(("settle_s", f"must not be negative, got {self.settle_s}"))
        if self.warmup_iters < 0:
            p.append(("warmup_iters", f"must not be negative, got {self.warmup_iters}"))
        if p:
            raise SpecError(p)

    # one process on one device, as every run of the package describes itself to the launcher
    nodes = procs_per_node = world_size = processes = launch_nodes = launch_procs_per_node = 1

    @property
    def comm_backend(self) -> str:
        return "nccl" if self.device == "cuda" else "gloo"

    def gemms(self) -> list[tuple[str, str, Gemm]]:
        """(layout, dtype, product) in the order they are timed; the output layer once a layout, in bf16."""
        out = []
        for layout in self.layouts:
            gemms = layer_gemms(*parse_layout(layout))
            for dtype in self.dtypes:
                out += [(layout, dtype, g) for g in gemms if g.projection != HEAD]
            out += [(layout, "bf16", g) for g in gemms if g.projection == HEAD]
        return out

    @property
    def config_id(self) -> str:
        d = self.to_dict()
        d.pop("seed")
        return f"gemm-{self.device}-{config_digest(d)}"

    @property
    def run_id(self) -> str:
        return f"{self.config_id}-seed{self.seed}"

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["layouts"], d["dtypes"] = list(self.layouts), list(self.dtypes)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "GemmSpec":
        refuse_unknown_fields(cls, d)
        d = dict(d)
        for k in ("layouts", "dtypes"):
            if k in d:
                d[k] = tuple(d[k])
        return cls(**d)
