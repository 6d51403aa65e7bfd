"""mindrl rewards as TRL ``reward_funcs`` (written and tested against TRL 1.16).

TRL calls each reward function as ``fn(prompts=..., completions=..., completion_ids=...,
trainer_state=..., **dataset_columns) -> list[float | None]``. :func:`reward_funcs` returns one
such callable per mindrl reward::

    GRPOTrainer(model, reward_funcs=reward_funcs("accuracy,format:0.5"), ...)

Each callable scores its batch on this process's shared scoring service (mindrl's worker
processes, hard per-item timeout), reads the gold answer from the dataset's ``answer`` /
``solution`` column (any other column is passed on by name), and returns its reward's scores
unweighted: the weight goes to ``GRPOConfig(reward_weights=...)``, which :func:`reward_weights`
gives. A timeout or failure is None, which TRL treats as "no reward" (NaN). Conversational
completions (lists of messages) are scored on the last message's content.
"""

from __future__ import annotations

from typing import Any, List, Optional

from mindrl.integrations.common import parse_reward_spec, shared_service

__all__ = ["MindrlReward", "reward_funcs", "reward_weights"]

_TRL_ARGS = ("prompts", "completion_ids", "trainer_state", "log_extra", "log_metric")


class MindrlReward:
    """One mindrl reward as a TRL reward function (picklable; ``__name__`` is the reward key)."""

    def __init__(self, name: str, params: Optional[dict] = None, workers: Optional[int] = None,
                 timeout: Optional[float] = None):
        self.entry = {"name": name, "weight": 1.0, **({"params": params} if params else {})}
        self.workers, self.timeout = workers, timeout
        self.__name__ = name.split(":")[-1].split(".")[-1]

    def __call__(self, completions: List[Any], **kwargs) -> List[Optional[float]]:
        texts = [c[-1]["content"] if isinstance(c, list) else str(c) for c in completions]
        n = len(texts)
        columns = {k: list(v) for k, v in kwargs.items()
                   if k not in _TRL_ARGS and isinstance(v, (list, tuple)) and len(v) == n}
        svc = shared_service([self.entry], self.workers, self.timeout)
        res = svc.score(texts, **columns)
        return next(iter(res.components.values()))


def reward_funcs(spec: Any, workers: Optional[int] = None,
                 timeout: Optional[float] = None) -> List[MindrlReward]:
    """One :class:`MindrlReward` per entry of ``spec`` (``"accuracy,format:0.5"`` or a list)."""
    return [MindrlReward(e["name"], e.get("params"), workers, timeout)
            for e in parse_reward_spec(spec)]


def reward_weights(spec: Any) -> List[float]:
    """The weights of ``spec``, in order, for ``GRPOConfig(reward_weights=...)``."""
    return [float(e.get("weight", 1.0)) for e in parse_reward_spec(spec)]
