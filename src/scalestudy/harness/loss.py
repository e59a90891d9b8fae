"""The language-model loss: output projection and cross-entropy together, a chunk of tokens at a
time, so that the [tokens, vocab] logits never exist whole in fp32 (the naive loss holds them
twice, as logits and as log-softmax, until backward).

The gradients are computed during forward, chunk by chunk (the derivative of the mean
cross-entropy with respect to the logits is (softmax - onehot) / tokens), and scaled by the
incoming gradient in backward: no recomputation, and what is kept for backward is one gradient
the size of the hidden states and one the size of the output weight.
"""

from __future__ import annotations

import torch


class _ChunkedLinearCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, hidden: torch.Tensor, weight: torch.Tensor, labels: torch.Tensor, chunk: int):
        n = hidden.shape[0]
        need_h, need_w = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        grad_h = torch.empty_like(hidden) if need_h else None
        grad_w = torch.zeros(weight.shape, dtype=torch.float32, device=weight.device) if need_w else None
        total = torch.zeros((), dtype=torch.float32, device=hidden.device)
        for start in range(0, n, chunk):
            h, y = hidden[start:start + chunk], labels[start:start + chunk]
            logits = (h @ weight.t()).float()  # rounded to the compute dtype first, as nn.Linear is
            lse = torch.logsumexp(logits, dim=-1)
            total += (lse - logits.gather(1, y.unsqueeze(1)).squeeze(1)).sum()
            if not (need_h or need_w):
                continue
            probs = logits.sub_(lse.unsqueeze(1)).exp_()
            probs.scatter_add_(1, y.unsqueeze(1), torch.full_like(probs[:, :1], -1.0))
            g = probs.div_(n).to(hidden.dtype)
            if need_h:
                torch.matmul(g, weight, out=grad_h[start:start + chunk])
            if need_w:
                grad_w += g.t() @ h
        ctx.save_for_backward(grad_h, grad_w.to(weight.dtype) if need_w else None)
        return total / n

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor):
        grad_h, grad_w = ctx.saved_tensors
        return (grad_h * grad_out.to(grad_h.dtype) if grad_h is not None else None,
                grad_w * grad_out.to(grad_w.dtype) if grad_w is not None else None, None, None)


def linear_cross_entropy(hidden: torch.Tensor, weight: torch.Tensor, labels: torch.Tensor,
                         chunk_tokens: int = 1024) -> torch.Tensor:
    """Mean cross-entropy of `hidden @ weight.T` ([tokens, dim] @ [dim, vocab]) against `labels`
    ([tokens]), as float32; equals F.cross_entropy(F.linear(hidden, weight).float(), labels)."""
    if hidden.dim() != 2 or labels.shape != hidden.shape[:1]:
        raise ValueError(f"linear_cross_entropy: hidden {tuple(hidden.shape)} must be [tokens, dim] "
                         f"and labels {tuple(labels.shape)} [tokens]")
    return _ChunkedLinearCrossEntropy.apply(hidden, weight, labels, max(1, chunk_tokens))
