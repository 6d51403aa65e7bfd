"""mindrl rewards as MindSpeed-RL rule verifiers (Ascend only; written against its sources).

MindSpeed-RL (gitcode Ascend/MindSpeed-RL, ``mindspeed_rl/models/rule_verifier.py``) scores
rollouts with ``verifier(responses, data, config)``: it looks each name of
``rl_config.verifier_function`` up in a table of functions
``fn(queue, sequences, answers, *args, **kwargs) -> list[float]`` (``answers`` = the dataset's
``labels``; the result is also ``queue.put`` when a queue is given), weights them with
``rl_config.verifier_weight`` and sums. That table is a local dict inside ``verifier``; the
documented way to add a rule is to edit it. :func:`register` instead wraps the module's
``verifier`` so that names ``mindrl_<reward>`` (any mindrl reward: ``mindrl_accuracy``,
``mindrl_format``, ``mindrl_gsm8k_accuracy``, ``mindrl_kk_answer``, ...) are scored by mindrl and
every other name goes to MindSpeed-RL's own table. One line in the training entry script
(before the trainer starts; it runs in the process that calls ``compute_verifier_score``)::

    import mindrl.integrations.mindspeed_rl as m; m.register()

and in the YAML ``verifier_function: ["mindrl_accuracy", "mindrl_format"]``,
``verifier_weight: [1.0, 0.5]``. The responses are cut as MindSpeed-RL's own ``acc`` rule cuts
them (from ``<|im_start|>assistant``, before the first stop word). Scoring runs on mindrl's
shared scoring service (worker processes, hard per-item timeout; ``MINDRL_REWARD_TIMEOUT``),
not on MindSpeed-RL's ``verifier_parallel`` processes.

MindSpeed-RL cannot be installed here: ``mindspeed-rl`` on PyPI is a placeholder whose setup.py
raises, and the project needs torch_npu / MindSpeed on Ascend. Only the verifier functions and
the wrapping are tested on CPU (tests/integrations/test_mindspeed_rl.py).
"""

from __future__ import annotations

import re
from typing import Any, Callable, List, Optional, Sequence

from mindrl.integrations.common import columns_from_labels, shared_service

__all__ = ["PREFIX", "make_verifier", "register", "clean_response"]

PREFIX = "mindrl_"
_STOP_WORDS = ("</s>", "<|im_end|>", "<|endoftext|>")


def clean_response(text: str) -> str:
    """The assistant's part of a decoded sequence, before the first stop word."""
    text = re.sub(r"^.*?<\|im_start\|>assistant\n?", "", text, flags=re.DOTALL, count=1)
    for stop in _STOP_WORDS:
        text = text.split(stop)[0]
    return text.strip()


def make_verifier(reward: str, timeout: Optional[float] = None) -> Callable:
    """A MindSpeed-RL rule function ``fn(queue, sequences, answers, *args, **kwargs)`` that
    scores ``sequences`` with mindrl's ``reward`` (registered name or import path)."""

    def verifier_fn(queue, sequences: Sequence[str], answers: Sequence[Any] = (), *args,
                    **kwargs) -> List[float]:
        texts = [clean_response(s) for s in sequences]
        labels = list(answers) if answers else [None] * len(texts)
        svc = shared_service([{"name": reward, "weight": 1.0}], timeout=timeout)
        res = svc.score(texts, **columns_from_labels(labels))
        scores = [0.0 if v is None else float(v) for v in next(iter(res.components.values()))]
        if queue is not None:
            queue.put(scores)
        return scores

    verifier_fn.__name__ = PREFIX + reward
    return verifier_fn


def register(module: Any = None) -> Any:
    """Wrap ``mindspeed_rl.models.rule_verifier.verifier`` (or ``module.verifier``) so that
    ``mindrl_*`` verifier names are scored by mindrl. Idempotent; returns the module."""
    if module is None:
        from mindspeed_rl.models import rule_verifier as module   # Ascend only
    original = module.verifier
    if getattr(original, "_mindrl_wrapped", False):
        return module

    def verifier(responses, data, config, **kwargs):
        names = list(config.verifier_function)
        weights = list(config.verifier_weight)
        ours = [i for i, n in enumerate(names) if str(n).startswith(PREFIX)]
        if not ours:
            return original(responses, data, config, **kwargs)
        rest = [i for i in range(len(names)) if i not in ours]
        rewards = [0.0] * len(responses)
        metrics = {}
        if rest:
            sub = _SubConfig(config, [names[i] for i in rest], [weights[i] for i in rest])
            rewards, metrics = original(responses, data, sub, **kwargs)
            rewards = list(rewards)
        labels = data.get("labels") if isinstance(data, dict) else None
        for i in ours:
            scores = make_verifier(names[i][len(PREFIX):])(None, responses, labels or [])
            metrics[f"grpo/{names[i]}_rewards/mean"] = scores
            rewards = [r + s * weights[i] for r, s in zip(rewards, scores)]
        return rewards, metrics

    verifier._mindrl_wrapped = True
    module.verifier = verifier
    return module


class _SubConfig:
    """The caller's rl_config with only MindSpeed-RL's own verifier names and weights."""

    def __init__(self, config, names, weights):
        self._config, self.verifier_function, self.verifier_weight = config, names, weights

    def __getattr__(self, name):
        return getattr(self._config, name)
