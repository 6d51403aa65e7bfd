"""Merging per-micro-batch metrics into step metrics, the same way in every backend.

``loss`` and ``pg_loss`` are partial sums (each micro-batch's share of the globally normalised
loss), so they add up; ``*_max`` / ``*_min`` take the extreme; everything else is a per-token
mean, weighted by the micro-batch's response tokens and divided by the total at the end.
"""

from __future__ import annotations

import math
import time
from typing import Dict, Iterable, Tuple

SUM_METRICS = ("loss", "pg_loss")


class MetricMerger:
    def __init__(self):
        self.sums: Dict[str, float] = {}
        self.maxes: Dict[str, float] = {}
        self.mins: Dict[str, float] = {}
        self.tokens = 0.0

    def add(self, metrics: Iterable[Tuple[str, float]], n_tok: float) -> None:
        self.tokens += n_tok
        for k, v in metrics:
            v = float(v)
            if k in SUM_METRICS:
                self.sums[k] = self.sums.get(k, 0.0) + v
            elif k.endswith("_max"):
                self.maxes[k] = max(self.maxes.get(k, -math.inf), v)
            elif k.endswith("_min"):
                self.mins[k] = min(self.mins.get(k, math.inf), v)
            else:
                self.sums[k] = self.sums.get(k, 0.0) + v * n_tok

    def parts(self):
        return self.sums, self.maxes, self.mins, self.tokens


def finish(sums: Dict[str, float], maxes: Dict[str, float], mins: Dict[str, float],
           tokens: float) -> Dict[str, float]:
    """Step metrics from (possibly all-reduced) sums, maxima, minima and token count."""
    out = {k: (v if k in SUM_METRICS else v / max(tokens, 1.0)) for k, v in sums.items()}
    out.update(maxes)
    out.update(mins)
    return out


class Clock:
    """Phase clock (logging.profile). ``with Clock(times, "train_fwd_bwd", sync):`` (or ``.start()`` ... ``.stop()``) adds the block's wall time to
    ``times[key]``; ``sync`` (or None) runs before each reading (an accelerator's synchronise)."""

    def __init__(self, times: Dict[str, float], key: str, sync=None):
        self.times, self.key, self.sync = times, key, sync

    def start(self) -> "Clock":
        if self.sync is not None:
            self.sync()
        self.t0 = time.perf_counter()
        return self

    def stop(self) -> None:
        if self.sync is not None:
            self.sync()
        self.times[self.key] = self.times.get(self.key, 0.0) + time.perf_counter() - self.t0

    __enter__ = start

    def __exit__(self, *exc):
        self.stop()
