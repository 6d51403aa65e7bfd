"""Issue 10 ("answer checking"): one test per failure class of the report, and the grader's
options (decimal comma, percent, float rounding, fallback), each with its settings."""

import pytest

from rewards.knights_knaves import KKAnswer, parse_answer
from rewards.math_grader import (EVAL_OPTIONS, REWARD_OPTIONS, GraderOptions, extract_answer,
                                 gold_answer, grade, is_equivalent)


# --- answer phrases: the sentence ends at its full stop / "I hope"
@pytest.mark.parametrize("text,answer", [
    ("The answer is 42. I hope it is correct.", "42"),
    ("Final Answer: The final answer is 7.78.", "7.78"),
    ("Final Answer: The final answer is $28 \\%$. I hope it is correct.", "28 \\%"),
    ("so the final answer is 3.14159. Done.", "3.14159"),
    ("Final Answer: The largest $n$ is 34.", "34"),
])
def test_answer_phrase_stops_at_the_sentence_end(text, answer):
    assert extract_answer(text) == answer


def test_minerva_answers_grade_true():
    assert grade("The answer is 42. I hope it is correct.", "42") is True
    assert grade("Final Answer: The final answer is 7.78.", "7.78") is True
    assert grade("Final Answer: The final answer is 7.78.", "7.79") is False


# --- several boxed answers
def test_gold_with_several_boxed_is_a_set():
    assert gold_answer(r"\boxed{1}\boxed{2}") == "1, 2"
    assert grade(r"\boxed{1, 2}", r"\boxed{1}\boxed{2}") is True
    assert grade(r"\boxed{2,1}", r"\boxed{1}\boxed{2}") is True
    assert grade(r"\boxed{2}", r"\boxed{1}\boxed{2}") is False
    assert grade(r"\boxed{1,2,3}", r"\boxed{1}\boxed{2}") is False


def test_prediction_with_a_run_of_boxed_answers_is_a_set():
    assert grade(r"roots \boxed{1} \quad \text{and} \quad \boxed{2}", "1, 2") is True
    assert grade(r"roots \boxed{1} and \boxed{2}", "2") is False  # hedging is not rewarded
    assert grade(r"first \boxed{3}; on reflection it is \boxed{4}", "4") is True


def test_later_final_answer_beats_an_intermediate_boxed():
    text = (r"Step 1 gives \boxed{3} for the first part. Then adding 2, "
            "Final Answer: The final answer is 5. I hope it is correct.")
    assert extract_answer(text) == "5"
    assert grade(text, "5") is True and grade(text, "3") is False
    # a boxed answer after the phrase still wins
    assert grade(r"The final answer is 5, i.e. \boxed{6}", "6") is True


# --- thousands separators
def test_comma_with_space_is_not_a_thousands_separator():
    assert grade(r"\boxed{32, 349}", "32349") is False
    assert grade(r"\boxed{32,349}", "32349") is True
    assert grade(r"\boxed{14{,}916}", "14916") is True
    assert grade(r"\boxed{11,\! 111,\! 111,\! 100}", "11111111100") is True


# --- multiple choice
@pytest.mark.parametrize("text,letter", [
    ("D. it can't be A or B", "D"),
    ("(C) because the others fail", "C"),
    ("The answer is for sure D, it can't be A or B", "D"),
    ("B。 不是 A", "B"),
    ("A is wrong; C is right", "C"),
])
def test_choice_letter(text, letter):
    assert extract_answer(text, mode="choice") == letter


def test_choice_gold_with_option_text():
    assert grade("D", "(D) Alina", mode="choice") is True
    assert grade("C", "(A) Cecile", mode="choice") is False
    assert grade("C", "Alina and the answer is\n(C) Cecile", mode="choice") is True


# --- fallback: last LaTeX expression or number, eval on / rewards off
def test_fallback_finds_unanchored_latex_in_eval_only():
    text = r"Therefore $x \geq 5$ is the solution."
    assert grade(text, "x >= 5", options=EVAL_OPTIONS) is True
    assert grade(text, "x >= 5", options=REWARD_OPTIONS) is False  # no marked answer
    assert grade(text, "x >= 5") is False  # the default is the reward preset
    assert grade(text, "x > 5", options=EVAL_OPTIONS) is False
    assert extract_answer("the result: 3 + 10 = 13 apples", fallback=True) == "13"
    assert extract_answer("AZYUK2A", fallback=True) is None  # not a number inside a word


def test_fallback_targets():
    assert extract_answer("Answer $ \n 9 \n $", fallback=True) == "9"  # the number
    assert extract_answer("Answer $ \n 9 \n $", fallback=True, fallback_targets=("latex",)) is None
    assert extract_answer(r"Answer \[ 9 \]", fallback=True, fallback_targets=("latex",)) == "9"
    assert extract_answer("it is 1000,99 here", fallback=True, fallback_targets=("expr",)) \
        == "1000,99"


def test_eval_grader_uses_the_fallback_by_default():
    from mindrl.eval.grading import Grader

    g = Grader()
    assert g.grade([r"Therefore $x \geq 5$ is the solution."], ["x >= 5"])[0][1] == 1.0
    off = Grader(last_number_fallback=False)
    assert off.grade([r"Therefore $x \geq 5$ is the solution."], ["x >= 5"])[0][1] == 0.0
    assert g.fingerprint != off.fingerprint


# --- decimal comma
def test_decimal_comma_option():
    assert is_equivalent("1000,99", "1000.99") is True
    assert is_equivalent("0,111", "0.111") is True
    assert is_equivalent("1000,99", "1000.99", decimal_comma=False) is False
    assert grade("Soucis : 2,74 $ a..", "2.74", options=EVAL_OPTIONS) is True
    # only against a decimal written with a point: the list "3,5" still equals "5,3"
    assert is_equivalent("3,5", "5,3") is True
    assert is_equivalent("1,222", "1.222") is False  # a thousands separator, 1222


# --- percent
def test_percent_option():
    for pred in ("28 pct", "28 percent", "28 %", r"28\%", "28"):
        assert is_equivalent(pred, r"28\%") is True, pred
    assert is_equivalent("0.28", r"28\%") is False
    assert is_equivalent("0.28", r"28\%", percent="either") is True
    assert is_equivalent("28", "0.28", percent="either") is False  # no percent sign anywhere
    with pytest.raises(ValueError, match="percent"):
        GraderOptions(percent="ratio")


# --- float vs exact fraction
def test_float_rounding_option():
    assert is_equivalent("0.333333", r"\frac{1}{3}") is True  # 6 decimals by default
    assert is_equivalent("0.333333", r"\frac{1}{3}", float_rounding=None) is False
    assert is_equivalent("0.3333", r"\frac{1}{3}") is False
    assert is_equivalent("0.3333", r"\frac{1}{3}", float_rounding=4) is True
    assert is_equivalent(r"\frac{1}{3}", "0.33") is False  # 0.33 is not 1/3 at 6 decimals
    assert is_equivalent("3.2", "3.21") is False


def test_presets():
    assert REWARD_OPTIONS.fallback is False and EVAL_OPTIONS.fallback is True
    assert REWARD_OPTIONS.decimal_comma and REWARD_OPTIONS.percent == "strip"
    assert REWARD_OPTIONS.float_rounding == 6


# --- knights and knaves: word boundary after knight/knave
def test_kk_role_needs_a_word_boundary():
    names = ["Zoey", "Oliver"]
    assert parse_answer("(1) Zoey is a knights (2) Oliver is a knave", names) is None
    assert parse_answer("(1) Zoey is a knight (2) Oliver is a knave", names) == {
        "Zoey": "knight", "Oliver": "knave"}
    out = KKAnswer()(["<think>.</think><answer>(1) Zoey is a knights (2) Oliver is a knave"
                      "</answer>"], solution=[["knight", "knave"]], names=[names])
    assert out == [-2.0]


def test_extraction_stays_linear_on_hostile_outputs():
    """The fallback scans LaTeX delimiters and bare \\frac once: nested or unclosed braces and
    thousands of unclosed \\( cost well under a second each (an earlier draft took 114 s)."""
    import time

    for text in ["\\frac{" * 20000 + "1" + "}{2}" * 20000, "\\frac{" * 20000, "\\(" * 50000,
                 "$a$ text \\( b \n" * 20000, "1 and " * 50000 + "2"]:
        t = time.perf_counter()
        extract_answer(text, fallback=True)
        gold_answer(text)
        assert time.perf_counter() - t < 5.0
