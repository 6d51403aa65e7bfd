"""The algorithm core shared by both backends: pure math, no framework import at module level.

Group-level math (advantages) runs in NumPy float64 on the host; token-level, differentiable math
(policy, KL, entropy, preference losses, aggregation) is written once against the ops namespace
of :mod:`algorithms.ops` (numpy reference, torch, mindspore).
"""

from .advantages import ADV_ESTIMATORS, ADV_PARAMS, advantage_params, compute_advantages
from .aggregation import AGG_MODES, aggregate
from .entropy import entropy_from_logits
from .gae import gae, gae_returns
from .is_correction import rollout_correction
from .kl import KL_ESTIMATORS, kl_penalty, kl_penalty_numpy
from .multi_reward import compute_multi_reward_advantages
from .ops import BACKENDS, get_ops, to_numpy
from .policy_loss import POLICY_LOSSES
from .preference import PREFERENCE_LOSSES, preference_loss, sft_nll
from .rl_loss import rl_loss
from .value_loss import value_loss

__all__ = [
    "ADV_ESTIMATORS", "ADV_PARAMS", "AGG_MODES", "BACKENDS", "KL_ESTIMATORS", "POLICY_LOSSES",
    "PREFERENCE_LOSSES", "advantage_params", "aggregate", "compute_advantages",
    "entropy_from_logits", "get_ops", "kl_penalty", "kl_penalty_numpy", "preference_loss",
    "rl_loss", "sft_nll", "to_numpy", "rollout_correction", "compute_multi_reward_advantages",
    "gae", "gae_returns", "value_loss",
]
