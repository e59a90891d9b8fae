"""Throughput, model FLOPs and MFU from raw-log records. Pure Python: no torch import."""

from __future__ import annotations

import statistics
from collections import defaultdict
from typing import Iterable

from scalestudy.spec import catalog
from scalestudy.spec.catalog.gpus import PeakInfo
from scalestudy.spec.catalog.models import ModelConfig, parameter_counts

FLOPS_FORMULA = "6*N_non_embedding + 12*n_layers*dim*seq_len"
STEP_TIME_RULE = "max over ranks per step (a step ends when its slowest rank ends)"


class MFUError(ValueError):
    """An MFU above 1: the throughput, the FLOPs per token or the peak is wrong."""


def flops_per_token(model: ModelConfig | str, seq_len: int) -> dict:
    """Training FLOPs per token: 6 per non-embedding parameter (forward and backward matrix
    products) plus the attention score and value products, 12*L*d*T, counted in full (the causal
    mask's skipped half is not subtracted). This is also the `flops` record value."""
    cfg = catalog.model(model) if isinstance(model, str) else model
    if seq_len < 1:
        raise ValueError(f"seq_len must be at least 1, got {seq_len}")
    counts = parameter_counts(cfg)
    n = counts["n_params_non_embedding"]
    head = cfg.vocab_size * cfg.dim if cfg.tied_embeddings else 0  # a tied head still multiplies
    return {
        "flops_per_token": 6 * (n + head) + 12 * cfg.n_layers * cfg.dim * seq_len,
        "formula": FLOPS_FORMULA,
        "n_params": counts["n_params"],
        "n_params_non_embedding": n,
        "n_layers": cfg.n_layers,
        "dim": cfg.dim,
        "seq_len": seq_len,
    }


def device_peak_record(peak: PeakInfo) -> dict:
    """The value of the `device_peak` record (docs/raw-log-format.md)."""
    return {
        "device_name": peak.device_name,
        "dtype": peak.dtype,
        "peak_flops_per_s": peak.peak_flops_per_s,
        "source": peak.source,
        "detail": dict(peak.detail),
    }


def throughput(iteration_records: Iterable[dict], world_size: int) -> dict:
    """Tokens per second over the measured iterations.

    `iteration_records` are raw-log records (`{"key": "iteration", "value": ..., "metadata": ...}`)
    of any ranks; records of other keys and warm-up iterations are skipped. Each step's time is
    the longest any rank took; global tokens/s is the sum of tokens over the sum of step times.
    """
    if world_size < 1:
        raise ValueError(f"world_size must be at least 1, got {world_size}")
    times: dict[int, list[float]] = defaultdict(list)
    tokens: dict[int, int] = {}
    ranks: set[int] = set()
    for rec in iteration_records:
        if rec.get("key", "iteration") != "iteration":
            continue
        v = rec["value"]
        if v["phase"] != "measured":
            continue
        step = v["step"]
        if step in tokens and tokens[step] != v["tokens"]:
            raise ValueError(f"ranks disagree on the tokens of step {step}: {tokens[step]} and {v['tokens']}")
        tokens[step] = v["tokens"]
        times[step].append(float(v["step_time_s"]))
        ranks.add(rec.get("metadata", {}).get("rank", 0))
    if not tokens:
        raise ValueError("no measured iterations among the records")
    step_times = [max(times[s]) for s in sorted(times)]
    total_time = sum(step_times)
    if total_time <= 0:
        raise ValueError(f"the measured steps took {total_time} s in all")
    global_tps = sum(tokens.values()) / total_time
    return {
        "tokens_per_s": global_tps,
        "tokens_per_s_per_device": global_tps / world_size,
        "step_time_mean_s": statistics.fmean(step_times),
        "step_time_median_s": statistics.median(step_times),
        "n_steps": len(step_times),
        "tokens": sum(tokens.values()),
        "world_size": world_size,
        "n_ranks_seen": len(ranks),
        "step_time_rule": STEP_TIME_RULE,
    }


def mfu(tokens_per_s_per_device: float, flops_per_token: float, peak_flops_per_s: float) -> float:
    """Model FLOPs utilisation: achieved model FLOP/s per device over the device's peak."""
    if peak_flops_per_s <= 0:
        raise ValueError(f"peak FLOP/s must be positive, got {peak_flops_per_s}")
    value = tokens_per_s_per_device * flops_per_token / peak_flops_per_s
    if value > 1.0:
        raise MFUError(
            f"MFU {value:.3f} exceeds 1: {tokens_per_s_per_device:.6g} tokens/s per device x "
            f"{flops_per_token:.6g} FLOPs per token = {tokens_per_s_per_device * flops_per_token:.6g} "
            f"FLOP/s, above the peak of {peak_flops_per_s:.6g} FLOP/s; check the peak (dtype, device) "
            "and the token count"
        )
    return value
