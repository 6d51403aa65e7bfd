"""Grading of evaluation samples with :mod:`rewards.math_grader`.

Extraction (regex only) runs here; the equivalence check (may call math-verify / sympy) runs
through the rewards scoring pool when it is available, with a hard per-item time limit, else in
this process's main thread where math-verify's own ``signal.alarm`` limit works.
"""

from __future__ import annotations

import logging
from typing import List, Optional, Sequence, Tuple

log = logging.getLogger(__name__)


def answer_key(s: str) -> str:
    """The canonical string of an answer, used to group votes in maj@k."""
    from rewards.math_grader import normalize_answer  # noqa: PLC0415

    return normalize_answer(s) or s.strip()


def quick_equivalent(a: str, b: str) -> bool:
    """Cheap equivalence for majority voting (normalised strings, exact numbers; no sympy)."""
    from rewards.math_grader import is_equivalent  # noqa: PLC0415

    return bool(is_equivalent(a, b, timeout=None, use_math_verify=False))


def _score_pair(pred: Optional[str], gold: str, timeout: float) -> Optional[float]:
    from rewards.math_grader import is_equivalent  # noqa: PLC0415

    if pred is None:
        return 0.0
    ok = is_equivalent(pred, gold, timeout=timeout)
    return None if ok is None else float(ok)


class Grader:
    """Extract answers and score them against gold answers.

    ``mode`` / ``last_number_fallback`` go to ``rewards.math_grader.extract_answer``;
    ``timeout`` seconds per item; ``workers`` > 0 scores in the rewards process pool when it
    exists (``rewards.pool``), 0 scores in this process.
    """

    def __init__(self, mode: str = "auto", last_number_fallback: bool = False,
                 timeout: float = 5.0, workers: int = 0):
        from rewards.math_grader import EXTRACT_MODES  # noqa: PLC0415

        if mode not in EXTRACT_MODES:
            raise ValueError(f"unknown extract mode '{mode}'; valid: {', '.join(EXTRACT_MODES)}")
        self.mode, self.fallback, self.timeout, self.workers = mode, last_number_fallback, \
            timeout, workers
        self._pool = None

    @property
    def fingerprint(self) -> str:
        """Identifies the grading rules; stored with each sample so that a rerun with other
        rules regrades stored samples instead of regenerating them."""
        return f"{self.mode}|fallback={int(self.fallback)}"

    def extract(self, text: str) -> Optional[str]:
        from rewards.math_grader import extract_answer  # noqa: PLC0415

        return extract_answer(text, mode=self.mode, last_number_fallback=self.fallback)

    def grade(self, texts: Sequence[str], golds: Sequence[str]
              ) -> List[Tuple[Optional[str], Optional[float]]]:
        """(extracted answer, score) per text: score 1.0 / 0.0, None when ungradeable."""
        from rewards.math_grader import gold_answer  # noqa: PLC0415

        preds = [self.extract(t) for t in texts]
        golds = [gold_answer(g) or "" for g in golds]
        scores = self._score(preds, golds)
        return list(zip(preds, scores))

    def _score(self, preds, golds) -> List[Optional[float]]:
        pool = self._get_pool()
        if pool is not None:
            return pool(preds, golds)
        return [_score_pair(p, g, self.timeout) for p, g in zip(preds, golds)]

    def _get_pool(self):
        """A callable (preds, golds) -> scores backed by rewards.pool, or None."""
        if self.workers <= 0:
            return None
        if self._pool is None:
            try:
                from rewards import pool as rpool  # noqa: PLC0415
            except ImportError:
                log.info("rewards.pool not available; grading in-process")
                self.workers = 0
                return None
            self._pool = _adapt_pool(rpool, self.workers, self.timeout)
            if self._pool is None:
                self.workers = 0
        return self._pool

    def close(self) -> None:
        closer = getattr(self._pool, "close", None)
        if closer is not None:
            closer()
        self._pool = None


def _adapt_pool(rpool, workers: int, timeout: float):
    """Wrap whatever scoring-pool API rewards.pool offers; None when it is not recognised."""
    scorer_cls = getattr(rpool, "RewardScorer", None)
    if scorer_cls is None:
        return None
    try:
        scorer = scorer_cls(num_workers=workers, timeout=timeout)
    except TypeError:
        return None
    run = getattr(scorer, "map", None)
    if run is None:
        return None

    class _Pooled:
        def __call__(self, preds, golds):
            out = run(_score_pair, [(p, g, timeout) for p, g in zip(preds, golds)])
            return [None if s is None else float(s) for s in out]

        def close(self):
            closer = getattr(scorer, "close", None)
            if closer:
                closer()

    return _Pooled()
