"""pass@k against brute force over all k-subsets; maj@k and length/truncation by hand."""

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest

from mindrl.eval.metrics import (k_values, length_stats, maj_at_k, majority_vote, pass_at_k,
                                 summarize, truncation_rate)


def brute_pass_at_k(outcomes, k):
    """Fraction of k-subsets of the samples holding at least one correct sample."""
    subsets = list(itertools.combinations(range(len(outcomes)), k))
    return Fraction(sum(any(outcomes[i] for i in s) for s in subsets), len(subsets))


@pytest.mark.parametrize("n", range(1, 9))
def test_pass_at_k_equals_brute_force(n):
    for c in range(n + 1):
        outcomes = [1] * c + [0] * (n - c)
        for k in range(1, n + 1):
            assert pass_at_k(n, c, k) == pytest.approx(float(brute_pass_at_k(outcomes, k)),
                                                       abs=1e-12)


def test_pass_at_k_order_does_not_matter():
    rng = np.random.default_rng(0)
    outcomes = list(rng.integers(0, 2, size=7))
    for k in range(1, 8):
        assert pass_at_k(7, sum(outcomes), k) == pytest.approx(
            float(brute_pass_at_k(outcomes, k)), abs=1e-12)


def test_pass_at_k_stable_for_large_n():
    n, c, k = 1024, 3, 64
    exact = 1 - Fraction(math.comb(n - c, k), math.comb(n, k))
    assert pass_at_k(n, c, k) == pytest.approx(float(exact), rel=1e-12)
    assert pass_at_k(100000, 1, 1) == pytest.approx(1e-5, rel=1e-9)
    assert pass_at_k(64, 0, 64) == 0.0 and pass_at_k(64, 64, 1) == 1.0
    with pytest.raises(ValueError):
        pass_at_k(4, 1, 5)


def test_k_values():
    assert k_values(1) == [1]
    assert k_values(8) == [1, 2, 4, 8]
    assert k_values(6) == [1, 2, 4, 6]


def test_majority_vote_hand_cases():
    assert majority_vote(["3", "4", "4"]) == 1                 # plain majority
    assert majority_vote(["3", "4", "4", "3"]) == 0            # tie: earliest first member
    assert majority_vote(["4", "3", "3", "4"]) == 0
    assert majority_vote([None, "", None]) is None             # nobody voted
    assert majority_vote([None, "5", "6", "6", None]) == 2     # None does not vote
    assert majority_vote([" 7", "7 ", "8"]) == 0               # default key strips
    eq = lambda a, b: {a, b} <= {"0.5", "\\frac{1}{2}", "1/2"}  # noqa: E731
    assert majority_vote(["9", "0.5", "\\frac{1}{2}", "9", "1/2"], equivalent=eq) == 1


def test_maj_at_k_uses_first_k_and_winner_score():
    answers = ["1", "2", "2", "1", "1"]
    scores = [1.0, 0.0, 0.0, 1.0, 1.0]
    assert maj_at_k(answers, scores, 1) == 1.0
    assert maj_at_k(answers, scores, 3) == 0.0       # "2" wins 2-1 in the first three
    assert maj_at_k(answers, scores, 4) == 1.0       # 2-2 tie: "1" appeared first
    assert maj_at_k(answers, scores, 5) == 1.0
    assert maj_at_k([None, None], [0.0, 0.0], 2) == 0.0
    assert maj_at_k(["a", "b"], [None, 1.0], 2) == 0.0   # ungraded winner counts as wrong


def test_length_and_truncation():
    s = length_stats([10, 20, 30, 40, 50, 60, 70, 80, 90, 100])
    assert s["mean"] == 55 and s["median"] == 55 and s["p90"] == pytest.approx(91)
    assert length_stats([])["mean"] is None
    assert truncation_rate(["stop", "length", "length", "stop"]) == 0.5


def _rec(j, score, ans, length, fin="stop"):
    return {"sample_index": j, "score": score, "extracted": ans, "length": length,
            "finish_reason": fin}


def test_summarize():
    p1 = [_rec(0, 1.0, "5", 10), _rec(1, 0.0, "6", 30, "length"), _rec(2, 1.0, "5", 20),
          _rec(3, 0.0, None, 40, "length")]
    p2 = [_rec(3, None, "x", 8), _rec(0, 0.0, "y", 4), _rec(1, 0.0, "z", 6), _rec(2, 0.0, "z", 2)]
    m = summarize([p1, p2])
    assert m["n"] == 4 and m["problems"] == 2 and m["samples"] == 8
    assert m["avg@4"] == m["accuracy"] == pytest.approx(2 / 8)
    assert m["pass@k"]["1"] == pytest.approx((0.5 + 0) / 2)
    assert m["pass@k"]["4"] == pytest.approx(0.5)
    assert m["maj@k"]["4"] == pytest.approx(0.5)       # p1: "5" wins 2-1; p2: "z" wins, wrong
    assert m["ungraded"] == 1 and m["no_answer"] == 1
    assert m["truncation_rate"] == pytest.approx(2 / 8)
    assert m["length"]["correct"]["mean"] == 15 and m["length"]["correct"]["count"] == 2
    assert m["length"]["wrong"]["count"] == 6
    with pytest.raises(ValueError, match="same number of samples"):
        summarize([p1, p2[:3]])
