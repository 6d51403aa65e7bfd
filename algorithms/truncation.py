"""Truncated sampling: the distribution a rollout engine samples from under top-k / min-p / top-p.

With logits z (already divided by the temperature) and p = softmax(z), a token is kept when

* top-k:  z >= the k-th largest z                                   (``top_k`` >= 1; -1 = off)
* min-p:  p >= min_p * max p, i.e. z >= max z + log(min_p)          (``min_p`` > 0)
* top-p:  among the tokens kept so far, renormalised, the mass of the tokens MORE probable than
          it is < top_p (the smallest set whose mass reaches top_p; the top token always stays)

and q = softmax(z over the kept tokens), 0 elsewhere. This is vLLM's order (min-p, then top-k and
top-p; min-p and top-k commute: both are thresholds on the same values) and the native samplers'.
transformers' own warpers apply min-p AFTER top-p, which keeps a different set, so the native
torch engine does its truncation itself (:class:`mindrl.rollout.native_torch.Truncate`).

The importance ratio and the rollout-vs-trainer gap compare log q, so the trainer scores the
policy under the same masks (:func:`mindrl.backends.torch.truncation.truncated_logits`, the
MindSpore one in ``backends/mindspore/truncation.py``), computed from its own logits without
gradient. Departure: the scored token is always kept (normalised over kept + itself), so an
update that pushes it out of the set gives a small log-prob, never -inf. The reference model
(KL penalty) and a distillation teacher are scored untruncated.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

# logit given to a cut token: exp underflows to 0 and 0 * FILL stays 0 (entropy), unlike -inf
FILL = -1.0e9


@dataclass(frozen=True)
class Truncation:
    top_k: int = -1
    top_p: float = 1.0
    min_p: float = 0.0

    @classmethod
    def from_rollout(cls, rollout_cfg) -> Optional["Truncation"]:
        """The rollout config's truncation, or None when sampling is untruncated or greedy."""
        t = cls(int(rollout_cfg.top_k), float(rollout_cfg.top_p), float(rollout_cfg.min_p))
        return t if t.active and rollout_cfg.temperature > 0 else None

    @property
    def active(self) -> bool:
        return self.top_k >= 1 or self.top_p < 1.0 or self.min_p > 0.0

    def describe(self) -> str:
        """The settings in config words, e.g. 'rollout.top_p=0.9, rollout.top_k=50'."""
        parts = []
        if self.top_p < 1.0:
            parts.append(f"rollout.top_p={self.top_p:g}")
        if self.top_k >= 1:
            parts.append(f"rollout.top_k={self.top_k}")
        if self.min_p > 0.0:
            parts.append(f"rollout.min_p={self.min_p:g}")
        return ", ".join(parts)


def keep_mask(logits: np.ndarray, trunc: Truncation, dtype=np.float64) -> np.ndarray:
    """(..., V) tempered logits -> (..., V) bool, the tokens the sampler may draw (NumPy
    reference, float64; ``dtype=np.float32``: every step in float32, as the trainers' kernels
    run it)."""
    z = np.asarray(logits, dtype)
    V = z.shape[-1]
    keep = np.ones(z.shape, bool)
    if 1 <= trunc.top_k < V:
        kth = -np.partition(-z, trunc.top_k - 1, axis=-1)[..., trunc.top_k - 1:trunc.top_k]
        keep &= z >= kth
    if trunc.min_p > 0.0:
        keep &= z >= z.max(-1, keepdims=True) + dtype(np.log(trunc.min_p))
    if trunc.top_p < 1.0:
        p = np.where(keep, np.exp(z - z.max(-1, keepdims=True)), dtype(0.0))
        p /= p.sum(-1, keepdims=True)
        s = -np.sort(-p, axis=-1)
        n_keep = ((np.cumsum(s, -1) - s) < dtype(trunc.top_p)).sum(-1, keepdims=True)
        keep &= p >= np.take_along_axis(s, n_keep - 1, -1)
    return keep


def truncated_token_logp(logits: np.ndarray, targets: np.ndarray, trunc: Truncation) -> np.ndarray:
    """(..., V) tempered logits, (...) token ids -> (...) log q(target) (target always kept)."""
    z = np.asarray(logits, np.float64)
    keep = keep_mask(z, trunc)
    np.put_along_axis(keep, targets[..., None], True, -1)
    zm = np.where(keep, z, -np.inf)
    m = zm.max(-1, keepdims=True)
    lse = m[..., 0] + np.log(np.exp(zm - m).sum(-1))
    return np.take_along_axis(z, targets[..., None], -1)[..., 0] - lse
