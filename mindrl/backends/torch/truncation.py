"""Torch form of :mod:`algorithms.truncation`: the policy's logits under the rollout's top-k /
min-p / top-p masks (the distribution the engine sampled from)."""

from __future__ import annotations

import math
from typing import Optional

import torch

from algorithms.truncation import FILL, Truncation


@torch.no_grad()
def keep_mask(z: torch.Tensor, trunc: Truncation) -> torch.Tensor:
    """(..., V) tempered logits -> (..., V) bool, the tokens the sampler may draw."""
    V = z.shape[-1]
    keep = torch.ones_like(z, dtype=torch.bool)
    if 1 <= trunc.top_k < V:
        keep &= z >= torch.topk(z, trunc.top_k, dim=-1).values[..., -1:]
    if trunc.min_p > 0.0:
        keep &= z >= z.amax(-1, keepdim=True) + math.log(trunc.min_p)
    if trunc.top_p < 1.0:
        p = torch.softmax(z.masked_fill(~keep, float("-inf")), dim=-1)
        s = torch.sort(p, dim=-1, descending=True).values
        n_keep = ((torch.cumsum(s, -1) - s) < trunc.top_p).sum(-1, keepdim=True)
        keep &= p >= torch.gather(s, -1, n_keep - 1)
    return keep


def truncated_logits(logits: torch.Tensor, trunc: Optional[Truncation],
                     targets: Optional[torch.Tensor] = None) -> torch.Tensor:
    """(..., V) tempered logits with the cut tokens set to FILL (differentiable through the kept
    ones); ``targets`` (...) ids, when given, are always kept. ``trunc`` None: unchanged."""
    if trunc is None:
        return logits
    keep = keep_mask(logits.detach(), trunc)
    if targets is not None:
        keep.scatter_(-1, targets.unsqueeze(-1), True)
    return logits.masked_fill(~keep, FILL)
