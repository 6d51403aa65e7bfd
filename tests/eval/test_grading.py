"""Grading through rewards.math_grader, in-process and through the rewards scoring pool."""

import time

import pytest

from mindrl.eval.grading import Grader, answer_key

TEXTS = ["so \\boxed{\\frac12}", "no answer here", "\\boxed{x^2+2x+1}", "<answer>025</answer>"]
GOLDS = ["0.5", "3", "(x+1)^2", "25"]
EXPECTED = [("\\frac12", 1.0), (None, 0.0), ("x^2+2x+1", 1.0), ("025", 1.0)]


@pytest.mark.parametrize("workers", [0, 2])
def test_grader_in_process_and_pool_agree(workers):
    g = Grader(workers=workers, timeout=2.0)
    try:
        assert g.grade(TEXTS, GOLDS) == EXPECTED
    finally:
        g.close()


def test_pool_cuts_a_pathological_answer():
    g = Grader(workers=2, timeout=1.0)
    try:
        t0 = time.perf_counter()
        out = g.grade(["\\boxed{9^{9^{9^9}}}", "\\boxed{4}"], ["5", "4"])
        assert out[0][1] in (None, 0.0) and out[1] == ("4", 1.0)
        assert time.perf_counter() - t0 < 10
    finally:
        g.close()


def test_vote_helpers():
    assert answer_key("\\text{(C)}") == answer_key("C") == answer_key("c")
    assert answer_key("0.5") == answer_key("\\frac{1}{2}") == answer_key("1/2")
    assert answer_key("025") == answer_key("25") != answer_key("26")
    with pytest.raises(ValueError, match="extract mode"):
        Grader(mode="weird")
