"""PPO with a critic (``algorithm.adv_estimator: gae``): the parts of an RL step that the
value model adds, called from :class:`mindrl.trainer.rl.RLTrainer`.

Per step, after the rollouts are scored::

    rollouts --critic.values--> V_old (B, T)
    reward, V_old --algorithms.gae--> advantages A (B, T, whitened), returns R = A_raw + V_old
    critic.step on (tokens, V_old, R), mini-/micro-batches as the policy's (train.*)
    policy update on A, unless step < critic.warmup_steps (the critic warms up alone)

Data parallel: each rank scores its own rows; advantages and returns are computed over the
gathered global batch (the whitening is global) and each rank keeps its rows, as for the other
estimators; the critic's gradients are all-reduced by the backend's critic.
"""

from __future__ import annotations

from typing import Dict, List

import numpy as np

from mindrl.types import TokenBatch, ValueBatch


def critic_of(trainer):
    critic = getattr(trainer.backend, "critic", None)
    if critic is None:
        raise RuntimeError(f"algorithm.adv_estimator=gae needs a critic; backend "
                           f"{trainer.cfg.backend} built none")
    return critic


def old_values(trainer, tokens: TokenBatch) -> np.ndarray:
    """(B, T) float32 V_old of this rank's rollouts, 0 at padding."""
    return critic_of(trainer).values(tokens, micro_batch_size=trainer.cfg.train.micro_batch_size)


def returns_for(trainer, g_rewards, g_values, g_mask, g_kl) -> np.ndarray:
    """(B_global, T) float64 GAE returns (the critic's targets) of the gathered batch."""
    from algorithms.gae import gae_returns

    a = trainer.cfg.algorithm
    return gae_returns(g_rewards, g_values, g_mask, gamma=a.gamma, lam=a.lam, token_kl=g_kl,
                       kl_coef=a.kl.coef if a.kl.in_reward else 0.0)


def critic_update(trainer, batch: ValueBatch) -> Dict[str, float]:
    """Train the critic on this rank's rows with the policy's epoch / mini / micro layout
    (its own shuffle); metrics prefixed ``critic/``."""
    critic = critic_of(trainer)
    acc: Dict[str, List[float]] = {}
    for micro, norm in trainer.mini_batches(batch, trainer.cfg.train.seed * 7919 + trainer.step
                                            + 104_729):
        for k, v in critic.step(micro, norm).items():
            acc.setdefault(k, []).append(float(v))
    return {f"critic/{k}": float(np.mean(v)) for k, v in acc.items()}


def value_metrics(trainer, values: np.ndarray, returns: np.ndarray,
                  mask: np.ndarray) -> Dict[str, float]:
    """Mean value and return over this step's response tokens (all ranks), and the share of
    the returns' variance the values explain (1 - Var(R - V) / Var(R))."""
    sel = mask > 0
    v, r = values[sel].astype(np.float64), returns[sel].astype(np.float64)
    n, sv, sr, srr, se, see = trainer.allsum([v.size, v.sum(), r.sum(), (r * r).sum(),
                                              (r - v).sum(), ((r - v) ** 2).sum()])
    if n == 0:
        return {}
    var_r = srr / n - (sr / n) ** 2
    var_e = see / n - (se / n) ** 2
    return {"critic/values_mean": float(sv / n), "critic/returns_mean": float(sr / n),
            "critic/explained_variance": float(1.0 - var_e / var_r) if var_r > 1e-12
            else float("nan")}
