"""Adaptive entropy control (Skywork-OR1, He et al. 2025, arXiv 2505.22312, "Adaptive Entropy
Control"; SkyworkAI/Skywork-OR1 ``verl/trainer/ppo/core_algos.py`` ``EntController``).

The entropy bonus ``- alpha_k * agg(H)`` of :func:`algorithms.rl_loss.rl_loss` gets a
coefficient that follows the measured entropy ``e_k`` of the policy towards a target::

    c_{k+1} = clip(c_k + delta, 0, c_max)   if e_k <  target
    c_{k+1} = clip(c_k - delta, 0, c_max)   if e_k >= target
    alpha_{k+1} = c_{k+1} * 1[e_k < target]      (the "adaptive" variant: the bonus is on only
                                                  while the entropy is below the target)

with ``c_0 = algorithm.entropy_coef`` and ``alpha_0 = c_0`` (Skywork's controller starts with
the loss enabled). Skywork's scripts (``or1_scripts/train/7b_8k.sh``) use target 0.2,
delta 1e-4, c_max 0.005, c_0 = 0.

Where mindrl departs: ``e_k`` is the mean token entropy (over response tokens, before the
update) that step k's policy update measured, so the coefficient a step uses was set by the
previous step's entropy. The controller is plain host-side float64 state, saved in checkpoints.
"""

from __future__ import annotations

from typing import Dict


class AdaptiveEntropyController:
    """The Skywork-OR1 coefficient controller; ``coefficient`` is what the loss multiplies the
    aggregated entropy by at the next step.

    >>> c = AdaptiveEntropyController(target=0.2, delta=0.1, max_coef=0.25)
    >>> [c.update(e) for e in (0.1, 0.1, 0.1, 0.3, 0.1)]
    [0.1, 0.2, 0.25, 0.0, 0.25]
    """

    def __init__(self, target: float, delta: float, max_coef: float, init_coef: float = 0.0):
        self.target, self.delta, self.max_coef = float(target), float(delta), float(max_coef)
        self.value = min(max(float(init_coef), 0.0), self.max_coef)   # c_k
        self.active = True                                            # 1[e_k < target]

    @property
    def coefficient(self) -> float:
        """alpha_k = c_k * 1[e_k < target]."""
        return self.value if self.active else 0.0

    def update(self, entropy: float) -> float:
        """Move c by delta towards the target entropy, clip to [0, max_coef]; return alpha."""
        below = float(entropy) < self.target
        self.value = min(max(self.value + (self.delta if below else -self.delta), 0.0),
                         self.max_coef)
        self.active = below
        return self.coefficient

    def state_dict(self) -> Dict:
        return {"value": self.value, "active": self.active}

    def load_state_dict(self, state: Dict) -> None:
        self.value, self.active = float(state["value"]), bool(state["active"])
