"""The language-model loss: output projection and cross-entropy together, a chunk of tokens at a
time, so that the [tokens, vocab] logits never exist whole in fp32 (the naive loss holds them
twice, as logits and as log-softmax, until backward).

The gradients are computed during forward, chunk by chunk: the derivative of the summed
cross-entropy with respect to the logits, softmax - onehot, goes into one [tokens, vocab] buffer
in the compute dtype (what nn.Linear's backward would receive), then two matrix products give the
gradients of the hidden states and the weight. Backward only scales them by the incoming gradient
over the token count: no recomputation.
"""

from __future__ import annotations

import torch


class _ChunkedLinearCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, hidden: torch.Tensor, weight: torch.Tensor, labels: torch.Tensor, chunk: int):
        n = hidden.shape[0]
        need_grad = ctx.needs_input_grad[0] or ctx.needs_input_grad[1]
        dlogits = torch.empty((n, weight.shape[0]), dtype=hidden.dtype, device=hidden.device) if need_grad else None
        total = torch.zeros((), dtype=torch.float32, device=hidden.device)
        for start in range(0, n, chunk):
            y = labels[start : start + chunk].unsqueeze(1)
            # logits rounded to the compute dtype, as nn.Linear gives them; statistics in fp32
            logp = torch.log_softmax(hidden[start : start + chunk] @ weight.t(), dim=-1, dtype=torch.float32)
            total -= logp.gather(1, y).sum()
            if need_grad:
                probs = logp.exp_()
                probs.scatter_add_(1, y, torch.full_like(y, -1, dtype=probs.dtype))
                dlogits[start : start + chunk].copy_(probs)
        grad_h = dlogits @ weight if ctx.needs_input_grad[0] else None
        grad_w = dlogits.t() @ hidden if ctx.needs_input_grad[1] else None
        ctx.n = n
        ctx.save_for_backward(grad_h, grad_w)
        return total / n

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor):
        if ctx.n is None:
            raise RuntimeError(
                "linear_cross_entropy: backward ran twice (retain_graph); its gradients are "
                "scaled in place and cannot be used again"
            )
        grad_h, grad_w = ctx.saved_tensors
        scale = grad_out.float() / ctx.n
        ctx.n = None
        return _scale_(grad_h, scale), _scale_(grad_w, scale), None, None


def _scale_(t: torch.Tensor | None, scale: torch.Tensor, rows: int = 4096) -> torch.Tensor | None:
    """t *= scale, computed in fp32 (a bf16 copy of 1/tokens would be off by up to 0.4%), a
    block of rows at a time so that no fp32 copy of the whole weight gradient exists."""
    if t is None:
        return None
    for part in t.split(rows):
        part.copy_(part.float().mul_(scale))
    return t


def linear_cross_entropy(
    hidden: torch.Tensor, weight: torch.Tensor, labels: torch.Tensor, chunk_tokens: int = 1024
) -> torch.Tensor:
    """Mean cross-entropy of `hidden @ weight.T` ([tokens, dim] @ [dim, vocab]) against `labels`
    ([tokens]), as float32; equals F.cross_entropy(F.linear(hidden, weight).float(), labels)."""
    if hidden.dim() != 2 or labels.shape != hidden.shape[:1]:
        raise ValueError(
            f"linear_cross_entropy: hidden {tuple(hidden.shape)} must be [tokens, dim] "
            f"and labels {tuple(labels.shape)} [tokens]"
        )
    return _ChunkedLinearCrossEntropy.apply(hidden, weight, labels, max(1, chunk_tokens))
