"""The torch backends' optimizer: AdamW and its learning-rate schedule."""

from __future__ import annotations

import torch

from mindrl.backends.schedule import lr_factor, total_optimizer_steps


def make_adamw(params, cfg, lr: float, weight_decay: float):
    """AdamW over ``params`` (train.betas, train.adam_eps) and its warm-up / decay schedule
    over the run's optimizer steps: the policy's, and the PPO critic's with its own lr."""
    t = cfg.train
    optimizer = torch.optim.AdamW(params, lr=lr, betas=tuple(t.betas), eps=t.adam_eps,
                                  weight_decay=weight_decay)
    total = total_optimizer_steps(cfg)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: lr_factor(s, warmup=t.warmup_steps, total=total,
                                       schedule=t.lr_schedule, min_ratio=t.min_lr_ratio))
    return optimizer, scheduler
