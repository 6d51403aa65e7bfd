"""What every framework adapter shares: one scoring service per reward spec in a process
(:func:`shared_service`), on top of the spec and label helpers of :mod:`mindrl.serve.labels`
(re-exported here).

:func:`shared_service` keeps one :class:`ScoringService` per spec in a process, so a framework
that calls a reward per sample from many threads scores all of them on one set of worker
processes with mindrl's per-item timeouts.
"""

from __future__ import annotations

import atexit
import json
import os
import threading
from typing import Any, Dict, Optional, Tuple

from mindrl.serve.labels import (DATA_SOURCE_REWARDS, DEFAULT_REWARDS, EOS_SUFFIXES, Spec,
                                 columns_from_labels, completion_from_query, parse_reward_spec,
                                 rewards_for_data_source)

__all__ = ["parse_reward_spec", "columns_from_labels", "completion_from_query", "shared_service",
           "rewards_for_data_source", "DATA_SOURCE_REWARDS", "DEFAULT_REWARDS", "EOS_SUFFIXES",
           "Spec"]


_SERVICES: Dict[Tuple, Any] = {}
_LOCK = threading.Lock()


def shared_service(spec: Spec, num_workers: Optional[int] = None,
                   timeout: Optional[float] = None):
    """This process's :class:`ScoringService` for ``spec`` (created on first use, closed at exit).

    ``num_workers`` default: ``MINDRL_REWARD_WORKERS`` or 2; ``timeout``: ``MINDRL_REWARD_TIMEOUT``
    or 5 seconds.
    """
    from mindrl.serve.service import ScoringService

    entries = parse_reward_spec(spec)
    workers = int(num_workers if num_workers is not None
                  else os.environ.get("MINDRL_REWARD_WORKERS", 2))
    limit = float(timeout if timeout is not None else os.environ.get("MINDRL_REWARD_TIMEOUT", 5.0))
    key = (json.dumps(entries, sort_keys=True), workers, limit, os.getpid())  # not across fork
    with _LOCK:
        svc = _SERVICES.get(key)
        if svc is None:
            svc = _SERVICES[key] = ScoringService(entries, num_workers=workers, timeout=limit)
        return svc


@atexit.register
def _close_all() -> None:
    with _LOCK:
        for svc in _SERVICES.values():
            svc.close()
        _SERVICES.clear()
