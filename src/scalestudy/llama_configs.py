"""Named Llama-style model shapes. Pure data: no torch import."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class ModelConfig:
    name: str
    n_layers: int
    dim: int
    n_heads: int
    n_kv_heads: int
    ffn_dim: int
    vocab_size: int
    norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    source: str = ""

    @property
    def head_dim(self) -> int:
        return self.dim // self.n_heads

    def as_dict(self) -> dict:
        return asdict(self)


MODELS: dict[str, ModelConfig] = {
    # A CPU-sized Llama: every feature of the real ones (GQA, SwiGLU, RoPE),
    # 8 layers so that pipelines of 2 and 4 stages (and 2 virtual stages per rank) divide it.
    "tiny": ModelConfig(
        name="tiny", n_layers=8, dim=64, n_heads=4, n_kv_heads=2, ffn_dim=176,
        vocab_size=512, source="scalestudy: CPU test shape",
    ),
    # No Llama-2 release has 1B parameters; TinyLlama-1.1B is the documented
    # Llama-2-architecture model of that size (22 layers, GQA with 4 KV heads, Llama-2 tokenizer).
    "llama-1b": ModelConfig(
        name="llama-1b", n_layers=22, dim=2048, n_heads=32, n_kv_heads=4, ffn_dim=5632,
        vocab_size=32000, source="TinyLlama-1.1B (Llama-2 architecture and tokenizer) [assumed]",
    ),
    "llama2-7b": ModelConfig(
        name="llama2-7b", n_layers=32, dim=4096, n_heads=32, n_kv_heads=32, ffn_dim=11008,
        vocab_size=32000, source="Llama-2 7B public release",
    ),
    "llama2-13b": ModelConfig(
        name="llama2-13b", n_layers=40, dim=5120, n_heads=40, n_kv_heads=40, ffn_dim=13824,
        vocab_size=32000, source="Llama-2 13B public release",
    ),
    "llama2-70b": ModelConfig(
        name="llama2-70b", n_layers=80, dim=8192, n_heads=64, n_kv_heads=8, ffn_dim=28672,
        vocab_size=32000, source="Llama-2 70B public release",
    ),
}


def get_model_config(name: str) -> ModelConfig:
    try:
        return MODELS[name]
    except KeyError:
        raise KeyError(f"unknown model {name!r}; known: {', '.join(sorted(MODELS))}") from None


def parameter_counts(cfg: ModelConfig) -> dict[str, int]:
    """Exact parameter counts of the model that harness/llama.py builds (untied output head)."""
    d, kv_dim = cfg.dim, cfg.n_kv_heads * cfg.head_dim
    attention = d * d * 2 + d * kv_dim * 2  # wq, wo, wk, wv
    mlp = 3 * d * cfg.ffn_dim
    norms = 2 * d
    per_layer = attention + mlp + norms
    embedding = cfg.vocab_size * d
    output = cfg.vocab_size * d
    total = embedding + cfg.n_layers * per_layer + d + output
    return {
        "n_params": total,
        "n_params_embedding": embedding,
        "n_params_non_embedding": total - embedding,
        "n_params_per_layer": per_layer,
    }
