"""The math grader on numbers written in words, reordered symbolic answers, forms the problem
asks for, and decimal approximations of irrational golds: a right and a wrong variant of each,
through ``grade`` (the entry point of the accuracy rewards and of eval) and through the two
paths by which the problem text reaches it (the reward's ``problem`` column, eval's Grader)."""

import json

import numpy as np
import pytest
from pathlib import Path

from rewards.math_grader import (EVAL_OPTIONS, REWARD_OPTIONS, GraderOptions, grade,
                                 number_from_words, required_forms)

# --------------------------------------------------------------------------- number words

# (model output, gold, expected)
WORDS = [
    (r"\boxed{\text{nine}}", "9", True),
    ("The answer is four.", "4", True),
    (r"\boxed{twenty-one}", "21", True),
    (r"\boxed{\text{Twenty One}}", 21, True),
    (r"\boxed{\textbf{one hundred and five}}", "105", True),
    (r"\boxed{two thousand twenty-four}", "2024", True),
    (r"\boxed{three thousand four hundred}", "3,400", True),
    (r"\boxed{a hundred}", "100", True),
    (r"\boxed{\text{zero}}", "0", True),
    (r"\boxed{negative three}", "-3", True),
    (r"\boxed{\text{five dollars}}", "5", True),
    (r"\boxed{5}", "five", True),                      # the gold in words
    (r"\boxed{\text{eight}}", "9", False),
    (r"\boxed{twenty-two}", "21", False),
    (r"\boxed{\text{nine}}", "90", False),
    (r"\boxed{twenty twenty}", "2020", False),         # not a number
    (r"\boxed{ninety-ten}", "100", False),
    (r"\boxed{one thousand thousand}", "1000000", False),
    (r"\boxed{one two}", "12", False),
    (r"\boxed{none}", "9", False),
    (r"\boxed{6}", "five", False),
]


@pytest.mark.parametrize("text,gold,expected", WORDS)
def test_numbers_written_in_words(text, gold, expected):
    for options in (REWARD_OPTIONS, EVAL_OPTIONS):
        assert grade(text, gold, options=options) is expected


@pytest.mark.parametrize("words,value", [
    ("nine", 9), ("Twenty-one", 21), ("ninety nine", 99), ("one hundred and five", 105),
    ("seven hundred twelve", 712), ("a thousand", 1000), ("four thousand and six", 4006),
    ("twelve thousand three hundred forty-five", 12345), ("two million", 2000000),
    ("minus seven", -7), ("zero", 0),
    ("twenty twenty", None), ("one two", None), ("hundred", None), ("zero zero", None),
    ("one hundred and", None), ("thousand one", None), ("eleven hundred", None),
    ("seven-ish", None), ("x", None), ("", None),
])
def test_number_from_words(words, value):
    assert number_from_words(words) == value


# ------------------------------------------------------- symbolic answers written like words

SYMBOLIC = [
    (r"\boxed{-q + p}", "p - q", True),
    (r"\boxed{p-q}", "-q+p", True),
    (r"\boxed{-y+x}", "x-y", True),
    (r"<answer>-b + a</answer>", "a - b", True),
    (r"\boxed{q - p}", "p - q", False),
    (r"\boxed{p+q}", "p-q", False),
    (r"\boxed{-q-p}", "p - q", False),
    # words and names are still compared as text
    (r"\boxed{\text{Even}}", "even", True),
    (r"\boxed{one-to-one}", "One-to-one", True),
    (r"\boxed{odd}", "even", False),
    (r"\boxed{\text{Devin}}", "Devon", False),
]


@pytest.mark.parametrize("text,gold,expected", SYMBOLIC)
def test_symbolic_answers_compare_symbolically(text, gold, expected):
    assert grade(text, gold, options=EVAL_OPTIONS) is expected


# ---------------------------------------------------------------------------------- forms

FACTOR = "Factor the expression $ab+5b+2a+10$."
EXPAND = "Expand the product ${(x+2)(x+3)}$."
FRACTION = "What is $x$? Express your answer as a common fraction."
DECIMAL = r"Write $\frac{3}{20}$ as a decimal."
LOWEST = "What fraction of the juice is Jack's? Answer as a fraction in lowest terms."
RADICAL = r"Simplify $\sqrt{242}$."
SIMPLIFY = "Simplify $(-k + 4) + (-2 + 3k)$."
RATIONAL = r"Rationalize the denominator: $\frac{3}{\sqrt{3}}$."
SIMPLEST_RADICAL = "How long is the side? Express your answer in simplest radical form."

# (problem, model answer, gold, expected)
FORMS = [
    (FACTOR, "(a+5)(b+2)", "(a+5)(b+2)", True),
    (FACTOR, "(b+2)(a+5)", "(a+5)(b+2)", True),
    (FACTOR, "ab+2a+5b+10", "(a+5)(b+2)", False),
    (FACTOR, "(a+2)(b+5)", "(a+5)(b+2)", False),
    ("Completely factor $x^2-1$.", "(x+1)(x-1)", "(x-1)(x+1)", True),
    ("Completely factor $x^2-1$.", "x^2-1", "(x-1)(x+1)", False),
    ("Factor $x^2-2x+1$.", "(x-1)^2", "(x-1)^2", True),
    ("Factor $x^2-2x+1$.", "x^2-2x+1", "(x-1)^2", False),
    (EXPAND, "x^2+5x+6", "x^2+5x+6", True),
    (EXPAND, "6+5x+x^2", "x^2+5x+6", True),
    (EXPAND, "(x+3)(x+2)", "x^2+5x+6", False),
    (EXPAND, "x(x+5)+6", "x^2+5x+6", False),
    (EXPAND, "x^2+5x+5", "x^2+5x+6", False),
    (FRACTION, r"\frac{3}{4}", r"\frac34", True),
    (FRACTION, "3/4", r"\frac34", True),
    (FRACTION, "0.75", r"\frac34", False),
    (FRACTION, r"\frac{3}{5}", r"\frac34", False),
    (DECIMAL, "0.15", "0.15", True),
    (DECIMAL, ".15", "0.15", True),
    (DECIMAL, r"\frac{3}{20}", "0.15", False),
    (DECIMAL, "3/20", "0.15", False),
    (LOWEST, r"\frac{3}{4}", r"\frac 34", True),
    (LOWEST, r"\frac{6}{8}", r"\frac 34", False),
    (RADICAL, r"11\sqrt{2}", r"11\sqrt2", True),
    (RADICAL, r"\sqrt{242}", r"11\sqrt2", False),
    (RADICAL, r"\sqrt{2}\cdot\sqrt{121}", r"11\sqrt2", False),  # a square under a root
    (RADICAL, r"12\sqrt{2}", r"11\sqrt2", False),
    (SIMPLIFY, "2k+2", "2k+2", True),
    (SIMPLIFY, "(-k + 4) + (-2 + 3k)", "2k+2", False),             # the question restated
    (RATIONAL, r"\sqrt{3}", r"\sqrt{3}", True),
    (RATIONAL, r"\frac{3}{\sqrt{3}}", r"\sqrt{3}", False),
    (SIMPLEST_RADICAL, r"\frac{\sqrt{2}}{2}", r"\frac{\sqrt2}{2}", True),
    (SIMPLEST_RADICAL, r"\frac{1}{\sqrt{2}}", r"\frac{\sqrt2}{2}", False),
    # no form asked, or the gold not written in the form asked: the value decides
    ("What is the product of $(a+5)$ and $(b+2)$?", "ab+2a+5b+10", "(a+5)(b+2)", True),
    ("What is the greatest common factor of $12$ and $18$?", "6", "6", True),
    ("Factor $x^2+1$ over the integers, if possible.", "x^2+1", "x^2+1", True),
    ("What is $\\frac{1}{3}+\\frac{1}{3}$? Express it as a common fraction.", "2/3",
     r"\frac23", True),
    ("If $y = 1/3$, what is $x = y$? Express it as a common fraction.", "1/3", r"\frac13", True),
    ("Simplify $\\frac{2}{6}$ if $z = 1/3$.", "1/3", r"\frac13", True),  # a number: no copy
]


@pytest.mark.parametrize("problem,answer,gold,expected", FORMS)
def test_forms_the_problem_asks_for(problem, answer, gold, expected):
    text = "The final answer is $\\boxed{" + answer + "}$."
    for options in (REWARD_OPTIONS, EVAL_OPTIONS):
        assert grade(text, gold, problem=problem, options=options) is expected
    # without the problem, or with the check off, only the value counts
    value_ok = grade(text, gold, options=EVAL_OPTIONS)
    assert grade(text, gold, problem=problem, options=EVAL_OPTIONS, check_form=False) is value_ok


def test_the_forms_wrong_answers_have_the_right_value():
    """Each form's False row above is the right value in the wrong form (the test would be
    vacuous otherwise), except the rows with another value."""
    wrong_value = {"(a+2)(b+5)", "x^2+5x+5", r"\frac{3}{5}", r"12\sqrt{2}"}
    for problem, answer, gold, expected in FORMS:
        if not expected and answer not in wrong_value:
            assert grade(f"\\boxed{{{answer}}}", gold, options=EVAL_OPTIONS) is True, answer


def test_percent_asked_means_the_percent_not_the_fraction():
    problem = r"By what percent does the area decrease?"
    either = dict(options=EVAL_OPTIONS, percent="either")
    assert grade(r"\boxed{0.1}", r"10\%", **either) is True            # without the problem
    assert grade(r"\boxed{0.1}", r"10\%", problem=problem, **either) is False
    assert grade(r"\boxed{10\%}", r"10\%", problem=problem, **either) is True
    assert grade(r"\boxed{10}", r"10\%", problem=problem, **either) is True
    assert grade(r"\boxed{20\%}", r"10\%", problem=problem, **either) is False


@pytest.mark.parametrize("problem,forms", [
    ("Factor $x^2-1$.", {"factored"}),
    ("Completely factor the expression: $x^3-x$.", {"factored"}),
    ("Write $x^2-1$ in factored form.", {"factored"}),
    ("What is the greatest common factor of 12 and 18?", set()),
    ("How many positive factors does 24 have?", set()),
    ("A factor of 3 separates them. What is the factor?", set()),
    ("The factorial $5!$ equals what?", set()),
    ("Expand the product ${(x+2)(x+3)}$.", {"expanded"}),
    ("The universe will expand forever; how old is it?", set()),
    ("Express your answer as a common fraction.", {"fraction"}),
    ("Express your answer as a decimal to the nearest tenth.", {"decimal"}),
    ("Round to the nearest hundredth.", {"decimal"}),
    ("What is 20% of 50?", set()),
    ("What percent of 50 is 20?", {"percent"}),
    ("Simplify $\\sqrt{8}$.", {"simplified"}),
    ("Express your answer in simplest radical form.", {"simplified", "rationalized"}),
    ("Rationalize the denominator of $\\frac{1}{\\sqrt2}$.", {"rationalized"}),
    ("", set()),
    (None, set()),
])
def test_required_forms(problem, forms):
    assert set(required_forms(problem)) == forms


def test_every_math500_gold_is_in_the_form_its_problem_asks_for(shared_data):
    """Each MATH-500 gold, boxed, graded with its own problem statement stays right: the form
    check never rejects the reference answer (and finds forms in about 60 of the problems)."""
    rows = [json.loads(x) for x in (shared_data / "eval" / "math500_test.simplerl.jsonl").open()]
    asked = 0
    for r in rows:
        asked += bool(required_forms(r["problem"]))
        if required_forms(r["problem"]):
            assert grade("\\boxed{" + r["answer"] + "}", r["answer"], problem=r["problem"],
                         options=EVAL_OPTIONS) is True, r["unique_id"]
    assert 50 <= asked <= 70


# -------------------------------------------------------------------------- approximations

# (answer, gold, tolerance, expected)
APPROX = [
    ("1.299", r"\frac{3\sqrt{3}}{4}", None, False),     # the default: exact only
    ("3.1416", r"\pi", None, False),
    ("1.4142", r"\sqrt{2}", None, False),
    ("0.33", r"\frac{1}{3}", None, False),
    ("3.141593", r"\pi", None, True),                 # rounded to 6 places: float_rounding
    ("1.299038", r"\frac{3\sqrt{3}}{4}", None, True),
    ("3.14159", r"\pi", None, False),
    ("1.299", r"\frac{3\sqrt{3}}{4}", 1e-3, True),
    ("3.1416", r"\pi", 1e-4, True),
    ("1.4142", r"\sqrt{2}", 1e-4, True),
    ("0.33", r"\frac{1}{3}", 1e-2, True),
    ("-1.299", r"-\frac{3\sqrt{3}}{4}", 1e-3, True),
    ("1.35", r"\frac{3\sqrt{3}}{4}", 1e-3, False),      # 3.9% off
    ("3.15", r"\pi", 1e-3, False),                       # 0.27% off
    ("-1.299", r"\frac{3\sqrt{3}}{4}", 1e-3, False),
    ("2.001", "2", 1e-2, False),                         # a finite decimal: exact only
    ("0.5001", "2^{-1}", 1e-2, False),
    ("1.299", "(1, 2)", 1e-2, False),                    # no single value
]


@pytest.mark.parametrize("answer,gold,tol,expected", APPROX)
def test_decimal_approximations_of_irrational_golds(answer, gold, tol, expected):
    text = f"\\boxed{{{answer}}}"
    for options in (REWARD_OPTIONS, EVAL_OPTIONS):
        assert grade(text, gold, options=options, approx_rel_tol=tol) is expected


def test_a_form_asked_for_beats_the_tolerance():
    problem = "Express your answer as a common fraction in simplest radical form."
    gold = r"\frac{3\sqrt{3}}{4}"
    assert grade(r"\boxed{1.299}", gold, approx_rel_tol=1e-3) is True
    assert grade(r"\boxed{1.299}", gold, approx_rel_tol=1e-3, problem=problem) is False


def test_bad_tolerance_is_named():
    for bad in (0, -1e-3, 1.5):
        with pytest.raises(ValueError, match="approx_rel_tol"):
            GraderOptions(approx_rel_tol=bad)
    from mindrl.eval.settings import EvalError, EvalSettings
    from rewards.registry import resolve_reward

    with pytest.raises(EvalError, match="approx_rel_tol"):
        EvalSettings(approx_rel_tol=2.0).check()
    with pytest.raises(ValueError, match="approx_rel_tol"):
        resolve_reward("accuracy", {"approx_rel_tol": -1})


# --------------------------------------------- where the problem text reaches the grader

def test_rewards_read_the_problem_column_through_the_scorer():
    """The RL loop's path: each data row's columns (``problem`` among them) go to the rewards."""
    from mindrl.trainer.base import score_rollouts
    from mindrl.types import Rollouts
    from rewards import build_scorer

    rows = [{"problem": "Factor $x^2-1$.", "answer": "(x-1)(x+1)"},
            {"problem": "What is $(x-1)(x+1)$ multiplied out?", "answer": "(x-1)(x+1)"}]
    texts = [r"\boxed{x^2-1}", r"\boxed{(x+1)(x-1)}"] * 2          # 2 samples per row
    ro = Rollouts(prompt_ids=[[1]] * 4, response_ids=[[1, 2]] * 4, logprobs=[np.zeros(2)] * 4,
                  finish_reasons=["stop"] * 4, group_index=np.array([0, 0, 1, 1]),
                  texts=texts)
    functions = [{"name": "accuracy"}, {"name": "cosine", "params": {"max_len": 100}},
                 {"name": "accuracy", "params": {"check_form": False}}]
    with build_scorer({"functions": functions, "num_workers": 0}) as scorer:
        comps = list(score_rollouts(scorer, rows, ro).components.values())
    assert comps[0].tolist() == [0.0, 1.0, 1.0, 1.0]     # only the "Factor" row checks the form
    assert comps[1][0] < 0 < comps[1][1]                   # cosine: wrong, then right
    assert comps[2].tolist() == [1.0, 1.0, 1.0, 1.0]      # check_form off


def test_rewards_tolerance_param():
    from rewards.registry import resolve_reward

    gold = [r"\frac{3\sqrt{3}}{4}"] * 2
    texts = [r"\boxed{1.299}", r"\boxed{1.35}"]
    assert resolve_reward("accuracy")(texts, answer=gold) == [0.0, 0.0]
    assert resolve_reward("accuracy", {"approx_rel_tol": 1e-3})(texts, answer=gold) == [1.0, 0.0]


@pytest.mark.parametrize("workers", [0, 2])
def test_eval_grader_checks_forms_with_the_problems(workers):
    """Eval's path: Grader.grade gets each text's problem statement, in process and through
    the scoring pool."""
    from mindrl.eval.grading import Grader

    texts = [r"\boxed{x^2-1}", r"\boxed{(x+1)(x-1)}", r"\boxed{x^2-1}", r"\boxed{3.1416}"]
    golds = ["(x-1)(x+1)", "(x-1)(x+1)", ["(x-1)(x+1)", "x^2-1"], r"\pi"]
    problems = ["Factor $x^2-1$."] * 3 + ["What is the area of a unit circle?"]
    g = Grader(workers=workers, timeout=10.0)   # a fresh worker imports sympy on its first item
    t = Grader(workers=0, timeout=10.0, approx_rel_tol=1e-4)
    try:
        assert [s for _, s in g.grade(texts, golds, problems)] == [0.0, 1.0, 1.0, 0.0]
        assert [s for _, s in g.grade(texts, golds)] == [1.0, 1.0, 1.0, 0.0]
        assert [s for _, s in t.grade(texts, golds, problems)] == [0.0, 1.0, 1.0, 1.0]
        assert t.fingerprint != g.fingerprint and "grader3" in g.fingerprint
    finally:
        g.close()


def test_tolerance_keeps_the_time_limit():
    """The numeric value of the gold is computed under math-verify's own limit, like its parse
    and verify: a gold whose value takes long is cut, not waited for (``grade`` says None).
    Run in a fresh interpreter: sympy's caches and signal handlers left by other tests of the
    process cannot decide the outcome."""
    import subprocess
    import sys

    code = """
import time
from rewards.math_grader import _approximates_within, _mv_parse, _Timeout
gold = r"\\prod_{k=1}^{10000} (1+\\frac{1}{\\sqrt{k}})"   # parses at once; its value takes
_mv_parse(r"\\prod_{k=1}^{5} k", 30)                         # seconds to minutes unlimited
t0 = time.perf_counter()
try:
    _approximates_within("1.5", gold, gold, 1e-3, limit=1)
    print("no timeout", time.perf_counter() - t0)
except _Timeout:
    print("cut", time.perf_counter() - t0)
"""
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, cwd=str(Path(__file__).resolve().parents[2]))
    assert res.returncode == 0, res.stderr[-2000:]
    verdict, seconds = res.stdout.split()[-2:]
    assert verdict == "cut", res.stdout
    assert float(seconds) < 6