"""Model shapes: the ModelConfig type and parameter counts (the catalog, scalestudy.spec.catalog,
looks shapes up by name). The shapes themselves are data in
scalestudy/spec/catalog/models.yaml (and user catalog files). Pure data: no torch import."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class ModelConfig:
    """A model shape of the catalog (Llama-style decoder)."""

    name: str
    n_layers: int
    dim: int
    n_heads: int
    n_kv_heads: int
    ffn_dim: int
    vocab_size: int
    norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    mlp: str = "swiglu"  # swiglu: w1, w2, w3 (Llama); gelu: two matrices (GPT)
    tied_embeddings: bool = False
    source: str = ""

    @property
    def head_dim(self) -> int:
        return self.dim // self.n_heads

    def as_dict(self) -> dict:
        return asdict(self)


def parameter_counts(cfg: ModelConfig) -> dict[str, int]:
    """Exact parameter counts of a Llama-style model as harness/llama.py builds it (no biases, RMSNorm
    weights only); GPT-style shapes are counted the same way (their biases and LayerNorm shifts,
    under 0.1% of the weights, are left out)."""
    d, kv_dim = cfg.dim, cfg.n_kv_heads * cfg.head_dim
    attention = d * d * 2 + d * kv_dim * 2  # wq, wo, wk, wv
    mlp = (3 if cfg.mlp == "swiglu" else 2) * d * cfg.ffn_dim
    norms = 2 * d
    per_layer = attention + mlp + norms
    embedding = cfg.vocab_size * d
    output = 0 if cfg.tied_embeddings else cfg.vocab_size * d
    total = embedding + cfg.n_layers * per_layer + d + output
    return {
        "n_params": total,
        "n_params_embedding": embedding,
        "n_params_non_embedding": total - embedding,
        "n_params_per_layer": per_layer,
    }
