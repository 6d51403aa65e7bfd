"""mindrl rewards as an OpenRLHF reward-function file (written and tested against OpenRLHF 0.11.2).

OpenRLHF loads a ``.py`` path given as ``--remote_rm_url`` by file and calls its
``reward_func(queries, prompts, labels)`` in a thread for each rollout; ``queries`` are prompt +
response decoded with special tokens. One line of OpenRLHF configuration::

    --remote_rm_url $(python -c "import mindrl.integrations.openrlhf_reward as m; print(m.__file__)")

Rewards: ``MINDRL_REWARDS`` (``"accuracy:1,format:0.5"``; default ``accuracy``); workers and
timeout: ``MINDRL_REWARD_WORKERS`` / ``MINDRL_REWARD_TIMEOUT``. Scoring runs on this process's
shared scoring service (worker processes, hard per-item timeout). For the HTTP form of the same
protocol run ``mindrl serve-rewards`` and pass ``--remote_rm_url http://HOST:PORT/openrlhf``.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List

from mindrl.integrations.common import columns_from_labels, completion_from_query, shared_service


def reward_func(queries: List[str], prompts: List[str], labels: List[Any]) -> Dict[str, Any]:
    """``{"rewards": (B,) tensor, "scores": (B,) tensor, "extra_logs": {reward: (B,) tensor}}``,
    the return value OpenRLHF documents; a timed-out or failed component logs as 0."""
    import torch

    svc = shared_service(os.environ.get("MINDRL_REWARDS") or "accuracy")
    texts = [completion_from_query(q, p) for q, p in zip(queries, prompts)]
    res = svc.score(texts, **columns_from_labels(labels))
    total = torch.tensor(res.total, dtype=torch.float32)
    logs = {k: torch.tensor([0.0 if v is None else v for v in vals], dtype=torch.float32)
            for k, vals in res.components.items()}
    return {"rewards": total, "scores": total.clone(), "extra_logs": logs}
