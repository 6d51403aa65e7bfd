"""Grading of evaluation samples with :mod:`rewards.math_grader`.

Extraction (regex only) runs here; the equivalence check (may call math-verify / sympy) runs
through the rewards scoring pool when it is available, with a hard per-item time limit, else in
this process's main thread where math-verify's own ``signal.alarm`` limit works.

Eval grades with ``rewards.math_grader.EVAL_OPTIONS``: like the reward grader, plus the
fallback to the last LaTeX expression or number when an output marks no answer (what
math-verify and lighteval do), unless ``last_number_fallback=False``. Each answer is graded
with its problem statement, so that a form the problem asks for ("Factor ...", "as a common
fraction") is checked.
"""

from __future__ import annotations

import logging
from typing import List, Optional, Sequence, Tuple

log = logging.getLogger(__name__)


def answer_key(s: str) -> str:
    """The canonical string of an answer, used to group votes in maj@k: the grader's
    normalised form, with exact numbers in one form (``0.5``, ``1/2`` and ``\\frac{1}{2}`` all
    give ``1/2``) and single letters upper-cased, so that grouping needs no pairwise checks."""
    from rewards.math_grader import normalize_answer, parse_number  # noqa: PLC0415

    norm = normalize_answer(s) or s.strip()
    num = parse_number(norm)
    if num is not None:
        return str(num)
    return norm.upper() if len(norm) == 1 and norm.isalpha() else norm


def _score_pair(pred: Optional[str], gold: str, timeout: float, options=None,
                problem: Optional[str] = None) -> Optional[float]:
    from rewards.math_grader import is_equivalent  # noqa: PLC0415

    if pred is None:
        return 0.0
    ok = is_equivalent(pred, gold, timeout=timeout, options=options, problem=problem)
    return None if ok is None else float(ok)


class Grader:
    """Extract answers and score them against gold answers.

    ``mode`` goes to ``rewards.math_grader.extract_answer``; ``last_number_fallback`` (on by
    default) switches the fallback of ``EVAL_OPTIONS`` (last LaTeX expression or number when no
    answer is marked); ``options`` replaces ``EVAL_OPTIONS`` (a ``GraderOptions``);
    ``timeout`` seconds per item; ``workers`` > 0 scores in the rewards process pool when it
    exists (``rewards.pool``), 0 scores in this process; ``approx_rel_tol`` (default None: off)
    sets that option of the grader (decimal approximations of irrational golds).
    """

    def __init__(self, mode: str = "auto", last_number_fallback: Optional[bool] = None,
                 timeout: float = 5.0, workers: int = 0, options=None,
                 approx_rel_tol: Optional[float] = None):
        import dataclasses  # noqa: PLC0415

        from rewards.math_grader import EVAL_OPTIONS, EXTRACT_MODES  # noqa: PLC0415

        if mode not in EXTRACT_MODES:
            raise ValueError(f"unknown extract mode '{mode}'; valid: {', '.join(EXTRACT_MODES)}")
        options = EVAL_OPTIONS if options is None else options
        if last_number_fallback is not None:
            options = dataclasses.replace(options, fallback=bool(last_number_fallback))
        if approx_rel_tol is not None:
            options = dataclasses.replace(options, approx_rel_tol=float(approx_rel_tol))
        self.mode, self.options, self.timeout, self.workers = mode, options, timeout, workers
        self._pool = None

    @property
    def fallback(self) -> bool:
        return self.options.fallback

    @property
    def fingerprint(self) -> str:
        """Identifies the grading rules; stored with each sample so that a rerun with other
        rules (or after the grader itself changed: ``grader3``) regrades stored samples
        instead of regenerating them."""
        return f"{self.mode}|grader3|{self.options.fingerprint}"

    def extract(self, text: str) -> Optional[str]:
        from rewards.math_grader import extract_answer  # noqa: PLC0415

        return extract_answer(text, mode=self.mode, options=self.options)

    def grade(self, texts: Sequence[str], golds: Sequence[str],
              problems: Optional[Sequence[Optional[str]]] = None
              ) -> List[Tuple[Optional[str], Optional[float]]]:
        """(extracted answer, score) per text: score 1.0 / 0.0, None when ungradeable.
        ``problems`` (the problem statement of each text) lets the grader check a form the
        problem asks for."""
        from rewards.math_grader import gold_answer  # noqa: PLC0415

        if problems is not None and len(problems) != len(texts):
            raise ValueError(f"{len(problems)} problems for {len(texts)} texts")
        preds = [self.extract(t) for t in texts]
        # a list gold is any-of (mindrl.data.formats): the best score over its alternatives
        owner = [i for i, g in enumerate(golds) for _ in (g if isinstance(g, list) else [g])]
        flat = [gold_answer(a, mode=self.mode) or ""
                for g in golds for a in (g if isinstance(g, list) else [g])]
        probs = [problems[i] if problems is not None else None for i in owner]
        scores: List[Optional[float]] = [None] * len(preds)
        for i, s in zip(owner, self._score([preds[i] for i in owner], flat, probs)):
            if s is not None and (scores[i] is None or s > scores[i]):
                scores[i] = s
        return list(zip(preds, scores))

    def _score(self, preds, golds, problems) -> List[Optional[float]]:
        pool = self._get_pool()
        if pool is not None:
            return pool(preds, golds, problems)
        return [_score_pair(p, g, self.timeout, self.options, q)
                for p, g, q in zip(preds, golds, problems)]

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
            self._pool = _adapt_pool(rpool, self.workers, self.timeout, self.options)
            if self._pool is None:
                self.workers = 0
        return self._pool

    def close(self) -> None:
        closer = getattr(self._pool, "close", None)
        if closer is not None:
            closer()
        self._pool = None


class ScoreExtracted:
    """A reward-shaped callable (``fn(completions, **columns)``) for the scoring pool: each
    completion is an already extracted answer, compared with its ``gold`` column (and checked
    for the form its ``problem`` column asks for). A class so that the time limit travels with
    it to the worker processes (picklable)."""

    __name__ = "score_extracted"

    def __init__(self, timeout: float, options=None):
        self.timeout = timeout
        self.options = options

    def __call__(self, completions: Sequence[str], gold: Sequence[str],
                 problem: Optional[Sequence[Optional[str]]] = None, **_
                 ) -> List[Optional[float]]:
        problem = [None] * len(completions) if problem is None else problem
        return [_score_pair(p, g, self.timeout, self.options, q)
                for p, g, q in zip(completions, gold, problem)]


def _adapt_pool(rpool, workers: int, timeout: float, options=None):
    """Score through ``rewards.pool.RewardScorer`` (hard per-item limit enforced by the parent,
    worker replaced on a timeout). Items without an extracted answer score 0 without a trip."""
    scorer_cls = getattr(rpool, "RewardScorer", None)
    if scorer_cls is None:
        return None
    scorer = scorer_cls([ScoreExtracted(timeout, options)], num_workers=workers,
                        timeout=timeout + 1.0)

    class _Pooled:
        def __call__(self, preds, golds, problems):
            idx = [i for i, p in enumerate(preds) if p is not None]
            out: List[Optional[float]] = [0.0] * len(preds)
            if idx:
                res = scorer([preds[i] for i in idx], gold=[golds[i] for i in idx],
                             problem=[problems[i] for i in idx])
                for i, v in zip(idx, next(iter(res.components.values()))):
                    out[i] = None if v is None else float(v)
            return out

        def close(self):
            scorer.close()

    return _Pooled()
