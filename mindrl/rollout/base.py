"""The rollout-engine protocol: sample n responses per prompt with per-token log-probs, and take
new weights from the trainer after every update."""

from __future__ import annotations

from typing import Iterable, List, Protocol, Tuple

import numpy as np

from mindrl.registry import Registry
from mindrl.types import Rollouts, SamplingParams

ENGINES: Registry = Registry("rollout engine")


class RolloutEngine(Protocol):
    def generate(self, prompt_ids: List[List[int]], sampling: SamplingParams) -> Rollouts:
        """``len(prompt_ids) * sampling.n`` rollouts, prompt-major, with engine log-probs of the
        sampled tokens under logits / temperature (temperature 0: greedy, log-probs at T=1)."""

    def load_weights(self, named_weights: Iterable[Tuple[str, np.ndarray]]) -> None:
        """Replace the engine's weights (Hugging Face names)."""

    def close(self) -> None:
        ...
