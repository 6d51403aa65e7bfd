"""Evaluation metrics over n samples per problem.

* ``avg@n``: mean score over all n x problems samples (the figure reports give as avg@64 for n_samples=64).
* ``pass@k`` (unbiased, Chen et al. 2021, "Evaluating Large Language Models Trained on Code"):
  per problem with n samples of which c are correct,

      pass@k = 1 - C(n - c, k) / C(n, k) = 1 - prod_{i = n - c + 1}^{n} (1 - k / i)

  the probability that a random k-subset of the n samples holds a correct one; the product form
  never forms the huge binomials. Averaged over problems.
* ``maj@k``: majority vote over the extracted answers of the FIRST k samples (sample indices
  0..k-1, so it is deterministic and reproducible; it is not averaged over k-subsets). Answers
  are grouped into clusters of equivalent answers: same ``key`` (default: the stripped string;
  the runner passes a canonical form from the grader: normalised LaTeX, exact numbers in one
  form, see ``mindrl.eval.grading.answer_key``), and, when ``equivalent`` is given,
  clusters whose representatives it calls equivalent are merged (first match in cluster order).
  Samples without an extracted answer do not vote; a problem where none voted scores 0.
  Tie-breaking: among clusters with the most votes, the one whose first member has the lowest
  sample index wins. The problem scores the score of that first member.
* Response lengths (tokens): mean / median / p90, for all samples, correct ones and wrong ones.
* Truncation rate: fraction of samples that stopped at the token limit (finish reason "length").

Scores are 1.0 (correct), 0.0 (wrong) or None (ungradeable: no usable gold answer, or the
symbolic check timed out); None counts as wrong in every metric and is counted apart as
``ungraded``.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k for one problem: n samples, c correct. Requires 1 <= k <= n.

    >>> pass_at_k(4, 1, 1), pass_at_k(4, 1, 4), pass_at_k(4, 0, 2)
    (0.25, 1.0, 0.0)
    """
    if not 1 <= k <= n:
        raise ValueError(f"pass@k needs 1 <= k <= n (got k={k}, n={n})")
    if not 0 <= c <= n:
        raise ValueError(f"correct count c={c} must be in [0, n={n}]")
    if n - c < k:
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1, dtype=np.float64)))


def k_values(n: int) -> List[int]:
    """1, 2, 4, ... up to n, plus n itself when n is not a power of two."""
    ks, k = [], 1
    while k <= n:
        ks.append(k)
        k *= 2
    if ks[-1] != n:
        ks.append(n)
    return ks


def _as_correct(scores: Sequence[Optional[float]]) -> np.ndarray:
    return np.array([bool(s) and float(s) > 0 for s in scores], dtype=bool)


def majority_vote(answers: Sequence[Optional[str]], key: Callable[[str], Any] = None,
                  equivalent: Optional[Callable[[str, str], bool]] = None) -> Optional[int]:
    """Index of the sample whose answer wins the vote (the first member of the winning cluster),
    or None when no sample has an answer. See the module docstring for the rules.

    >>> majority_vote(["3", "4", "4", "3"])      # tie 2-2: "3" appeared first
    0
    >>> majority_vote([None, "5", "6", "6"])
    2
    >>> majority_vote(["0.5", "1/2", "7"], equivalent=lambda a, b: {a, b} == {"0.5", "1/2"})
    0
    """
    key = key or (lambda s: s.strip())
    clusters: List[List[int]] = []      # member sample indices, in first-appearance order
    keys: List[Any] = []
    for i, a in enumerate(answers):
        if a is None or not str(a).strip():
            continue
        k = key(str(a))
        for ci, ck in enumerate(keys):
            rep = answers[clusters[ci][0]]
            if k == ck or (equivalent is not None and equivalent(str(a), str(rep))):
                clusters[ci].append(i)
                break
        else:
            clusters.append([i])
            keys.append(k)
    if not clusters:
        return None
    best = max(range(len(clusters)), key=lambda ci: (len(clusters[ci]), -clusters[ci][0]))
    return clusters[best][0]


def maj_at_k(answers: Sequence[Optional[str]], scores: Sequence[Optional[float]], k: int,
             key=None, equivalent=None) -> float:
    """maj@k of one problem from its samples in sample-index order (first k vote)."""
    if not 1 <= k <= len(answers):
        raise ValueError(f"maj@k needs 1 <= k <= n (got k={k}, n={len(answers)})")
    winner = majority_vote(list(answers[:k]), key=key, equivalent=equivalent)
    return 0.0 if winner is None else float(bool(scores[winner]) and float(scores[winner]) > 0)


def length_stats(lengths: Sequence[int]) -> Dict[str, Optional[float]]:
    """Mean, median and 90th percentile of response lengths (None when empty)."""
    if len(lengths) == 0:
        return {"mean": None, "median": None, "p90": None, "count": 0}
    x = np.asarray(lengths, dtype=np.float64)
    return {"mean": float(x.mean()), "median": float(np.median(x)),
            "p90": float(np.percentile(x, 90)), "count": int(x.size)}


def truncation_rate(finish_reasons: Sequence[str]) -> float:
    if not finish_reasons:
        return 0.0
    return float(np.mean([r == "length" for r in finish_reasons]))


def summarize(problems: Sequence[Sequence[Dict[str, Any]]], key=None,
              equivalent=None) -> Dict[str, Any]:
    """Metrics of one benchmark. ``problems``: per problem, its sample records (dicts with
    ``sample_index``, ``score``, ``extracted``, ``length``, ``finish_reason``), every problem
    with the same number n of samples."""
    if not problems:
        raise ValueError("no problems to summarise")
    ns = {len(p) for p in problems}
    if len(ns) != 1:
        raise ValueError(f"every problem needs the same number of samples; got counts {sorted(ns)}")
    n = ns.pop()
    per = [sorted(p, key=lambda r: r["sample_index"]) for p in problems]
    correct = [_as_correct([r["score"] for r in p]) for p in per]
    flat = [r for p in per for r in p]
    flat_ok = np.concatenate(correct)
    lengths = np.array([r["length"] for r in flat])
    out: Dict[str, Any] = {
        "problems": len(per), "n": n, "samples": len(flat),
        f"avg@{n}": float(flat_ok.mean()),
        "pass@k": {str(k): float(np.mean([pass_at_k(n, int(c.sum()), k) for c in correct]))
                   for k in k_values(n)},
        "maj@k": {str(k): float(np.mean([maj_at_k([r["extracted"] for r in p],
                                                  [r["score"] for r in p], k, key, equivalent)
                                         for p in per]))
                  for k in k_values(n)},
        "ungraded": int(sum(r["score"] is None for r in flat)),
        "no_answer": int(sum(r["extracted"] in (None, "") for r in flat)),
        "truncation_rate": truncation_rate([r["finish_reason"] for r in flat]),
        "length": {"all": length_stats(lengths), "correct": length_stats(lengths[flat_ok]),
                   "wrong": length_stats(lengths[~flat_ok])},
    }
    out["accuracy"] = out[f"avg@{n}"]
    return out


def by_problem(problems, done, n) -> Dict[str, List[List[Dict[str, Any]]]]:
    """Group finished samples per benchmark and problem: ``problems`` maps a benchmark to its
    problems (each with an ``id``), ``done`` maps ``(benchmark, problem id, sample index)`` to
    a sample record; the result maps a benchmark to one list of ``n`` records per problem, in
    the problems' order."""
    out: Dict[str, List[List[Dict[str, Any]]]] = defaultdict(list)
    for b, ps in problems.items():
        for p in ps:
            out[b].append([done[(b, p.id, j)] for j in range(n)])
    return out
