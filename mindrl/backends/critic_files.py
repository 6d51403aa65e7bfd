"""What both backends' critics (PPO value models) share, framework-free: where the critic's
starting weights come from, the fresh value head, and the critic's file in a checkpoint.

A critic is the policy's decoder (``model.*`` parameters, Hugging Face names) with a scalar
head ``score`` (weight (1, H), bias (1,)) on the final hidden state in place of the LM head,
as transformers' ``*ForTokenClassification`` with one label. Its weights are written as
``critic.safetensors`` (float32, those names) in ``state/critic/`` of a checkpoint, with its
optimizer state beside it; either backend reads the other's weights file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Dict, Tuple

import numpy as np

from mindrl.errors import ConfigError

CRITIC_DIR = "critic"                   # under a checkpoint's state/
CRITIC_WEIGHTS = "critic.safetensors"
HEAD_WEIGHT, HEAD_BIAS = "score.weight", "score.bias"


def needs_critic(cfg) -> bool:
    return cfg.algorithm.adv_estimator == "gae"


def fresh_head(hidden: int, std: float, seed: int) -> Dict[str, np.ndarray]:
    """The value head a critic starts with: weight ~ N(0, std^2) (1, H), seeded, bias 0;
    identical on every backend and rank."""
    rng = np.random.default_rng(seed + 7_654_321)
    return {HEAD_WEIGHT: (rng.standard_normal((1, hidden)) * std).astype(np.float32),
            HEAD_BIAS: np.zeros(1, np.float32)}


def critic_source(cfg, policy_path: str) -> Tuple[str, str]:
    """("critic", file) when the critic starts from a saved critic (``critic.model_path`` that
    file, or a directory holding it: a checkpoint, its state/ or state/critic/), else ("hf", directory) of a causal LM
    whose decoder it takes (the policy's when ``critic.model_path`` is empty)."""
    path = cfg.critic.model_path
    if not path:
        return "hf", policy_path
    p = Path(path)
    if p.is_file() and p.name.endswith(".safetensors"):
        return "critic", str(p)
    for sub in (p, p / CRITIC_DIR, p / "state" / CRITIC_DIR):
        if (sub / CRITIC_WEIGHTS).is_file():
            return "critic", str(sub / CRITIC_WEIGHTS)
    if (p / "config.json").is_file():
        return "hf", str(p)
    raise ConfigError(f"critic.model_path={path}: neither a critic ({CRITIC_WEIGHTS}, or a "
                      f"mindrl checkpoint holding state/{CRITIC_WEIGHTS}) nor a Hugging Face "
                      "model directory (config.json)")


def read_critic(path: str) -> Dict[str, np.ndarray]:
    from safetensors.numpy import load_file

    return load_file(path)


def write_critic(path: Path, arrays: Dict[str, np.ndarray]) -> None:
    """float32 safetensors, written to a temporary name and renamed."""
    import os

    from safetensors.numpy import save_file

    tmp = Path(str(path) + ".tmp")
    save_file({k: np.ascontiguousarray(v, np.float32) for k, v in arrays.items()}, str(tmp),
              metadata={"format": "mindrl-critic"})
    os.replace(tmp, path)
