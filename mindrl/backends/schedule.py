"""The learning-rate schedule both backends use (framework-free, so it is written once)."""

from __future__ import annotations

import math


def lr_factor(step: int, *, warmup: int, total: int, schedule: str, min_ratio: float) -> float:
    """Multiplier of the peak lr at optimizer step ``step`` (0-based): linear warm-up
    ``(step + 1) / warmup`` (the first step already moves), then constant or cosine decay
    from 1 to ``min_ratio`` at ``total``."""
    if warmup > 0 and step < warmup:
        return (step + 1) / warmup
    if schedule == "constant":
        return 1.0
    if schedule == "cosine":
        progress = min(1.0, (step - warmup) / max(1, total - warmup))
        return min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))
    raise ValueError(f"unknown train.lr_schedule '{schedule}'; valid: constant, cosine")


def total_optimizer_steps(cfg) -> int:
    """Optimizer steps of a whole run: steps x ppo_epochs x mini-batches per rollout batch."""
    batch = cfg.train.prompts_per_step * cfg.rollout.n
    mini = cfg.train.mini_batch_size or batch
    return max(1, cfg.train.steps * cfg.train.ppo_epochs * max(1, batch // mini))
