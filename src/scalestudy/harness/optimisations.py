"""The harness's speed and memory optimisations, each of which can be turned off for a
before/after measurement: SCALESTUDY_HARNESS_OFF=norm,ekern (or `all`). None of them changes what
is computed (same model, precision policy, optimizer and batch), only how.

norm   fused torch.nn.functional.rms_norm (else the hand-written fp32-upcast RMSNorm)
loss   chunked output projection + cross-entropy that never holds the full fp32 logits (harness/loss.py)
rope   under torch.compile, rotary embedding in real arithmetic, which the compiled block fuses
alloc  PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (set before the first CUDA allocation)
ekern  in eager blocks on CUDA, rotary embedding (in real arithmetic, with the real table) and
       SwiGLU each as one generated kernel (fused_ops)

Measured on one H200 and dropped, for they did not help (data/h200-harness/README.md): rotary
embedding in real arithmetic as plain PyTorch in eager blocks (10% slower there than complex),
cuDNN attention first in SDPA's order, Python's garbage collector kept out of the steps, and
(3-ekern) attention's wq/wk/wv and the feed-forward's w1/w3 each as one fused matrix and the
chunked loss's softmax gradient as one generated kernel (within noise in eager, 0.2-1.7% slower
compiled).
"""

from __future__ import annotations

import os

OFF_ENV = "SCALESTUDY_HARNESS_OFF"
NAMES = ("norm", "loss", "rope", "alloc", "ekern")


def turned_off() -> frozenset[str]:
    raw = os.environ.get(OFF_ENV, "")
    names = {n.strip() for n in raw.split(",") if n.strip()}
    if "all" in names:
        return frozenset(NAMES)
    unknown = names - set(NAMES)
    if unknown:
        raise ValueError(
            f"{OFF_ENV}={raw!r}: unknown optimisation(s) {sorted(unknown)}; known: {', '.join(NAMES)}, all"
        )
    return frozenset(names)


def enabled(name: str) -> bool:
    if name not in NAMES:
        raise KeyError(f"no harness optimisation named {name!r}")
    return name not in turned_off()


def apply_allocator_setting() -> None:
    """Expandable segments for the CUDA caching allocator, unless the user set the allocator's
    configuration or turned this off; must run before the process's first CUDA allocation."""
    if enabled("alloc"):
        os.environ.setdefault("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")
