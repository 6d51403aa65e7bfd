"""Rule rewards for RL fine-tuning of reasoning models, and the pool that scores them.

Every reward is ``fn(completions: list[str], **columns) -> list[float | None]`` (None = not
scorable). Rewards are registered by name in ``REWARDS`` and chosen from YAML::

    reward:
      functions: [{name: accuracy, weight: 1.0}, {name: format, weight: 0.5}]
      num_workers: 2
      timeout: 5.0
      none_as: 0.0

``build_scorer(cfg.reward)`` turns that section into a :class:`RewardScorer`.
No deep-learning framework is imported here: rewards run in plain CPU worker processes.
"""

from __future__ import annotations

from typing import Any

from rewards.registry import (REWARDS, batch_level, is_batch_level, load_builtin_rewards,
                              resolve_reward, reward_names)

load_builtin_rewards()

from rewards.pool import RewardResult, RewardScorer  # noqa: E402


def build_scorer(reward_cfg: Any, **overrides) -> RewardScorer:
    """A :class:`RewardScorer` from a ``RewardConfig`` (or any object/dict with ``functions``,
    ``num_workers``, ``timeout``, ``none_as``); ``overrides`` go to the constructor."""

    def get(name, default=None):
        if isinstance(reward_cfg, dict):
            return reward_cfg.get(name, default)
        return getattr(reward_cfg, name, default)

    kwargs = dict(functions=get("functions"), num_workers=get("num_workers", 2),
                  timeout=get("timeout", 5.0), none_as=get("none_as", 0.0))
    kwargs.update(overrides)
    return RewardScorer(**kwargs)


__all__ = ["REWARDS", "resolve_reward", "reward_names", "batch_level", "is_batch_level",
           "build_scorer", "RewardScorer", "RewardResult"]
