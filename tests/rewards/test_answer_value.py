r"""The whole-answer reader of the numeric rewards (rewards/answer_value.py), by hand: each
answer's value worked out from how it is written, and the answers that must stay unreadable
(None) because a prefix or a part of them is not their value."""

from fractions import Fraction as F

import pytest

from rewards.answer_value import answer_value, first_span, format_value, last_value


@pytest.mark.parametrize("text,value", [
    ("18", F(18)), ("-18", F(-18)), ("−18", F(-18)), ("18.00", F(18)), (".5", F(1, 2)),
    ("1,234", F(1234)), ("1,234,567.5", F(2469135, 2)), (r"1{,}234", F(1234)),
    (r"10,\!080", F(10080)), (r"\$1,000", F(1000)), ("$18.50", F(37, 2)),
    ("2/3", F(2, 3)), ("-2/3", F(-2, 3)), (r"\frac{3}{8}", F(3, 8)), (r"\dfrac{3}{8}", F(3, 8)),
    (r"\frac12", F(1, 2)), (r"-\frac{3}{4}", F(-3, 4)), (r"\frac{\frac{1}{2}}{3}", F(1, 6)),
    ("2^2", F(4)), ("2^{10}", F(1024)), ("10^{-3}", F(1, 1000)), ("-2^2", F(-4)),
    (r"3 \times 10^2", F(300)), (r"6 \div 4", F(3, 2)), ("2e3", F(2000)),
    ("50%", F(50)), (r"50\%", F(50)), ("18 dollars", F(18)), (r"18 \text{ dollars}", F(18)),
    (r"\boxed{18}", F(18)), ("10 - 8 = 2", F(2)), ("x = 5", F(5)), ("(5)", F(5)),
    ("5, which is 5", F(5)), ("**18**", F(18)), ("18 (she has 9 * 2 = 18)", F(18)),
    ("$<<600*12=7200>>7200/year", F(7200)), ("<<8=8>>8", F(8)), ("27-liter", F(27)),
    ("980cm³", F(980)), ("12 cm^2", F(12)), ("3 km/h", F(3)),
])
def test_values_by_hand(text, value):
    assert answer_value(text) == value


@pytest.mark.parametrize("text", [
    "2 or 3", "2, 3", "2 and 3", "2,5", "2:3", "2 3", "5!", r"\sqrt{4}", r"2\sqrt{3}",
    r"2 \pi", "x > 3", r"x \leq 3", r"1 \pm 2", "1/0", "9^9^9^9", "2**3", "five", "", "5 - ",
    r"\frac{1}", "2(3)", "2^{1/2}", "18 (since 9 * 3 = 27)",
    "2/three", "2/x", "2x^2", "2-x",
])
def test_unreadable_answers(text):
    assert answer_value(text) is None


def test_last_and_first_number_of_free_text():
    assert last_value("She has 3 + 4 = 7 apples, so $7.00 in total.") == 7
    assert last_value("... so the share is 2/3") == F(2, 3)    # not 3
    assert last_value("so it is 17 or 18") is None               # a hedge
    assert last_value("the ratio is 2:3") is None and last_value("no number") is None
    assert first_span("432 is it") == "432" and first_span("432/2") == "432/2"
    assert first_span("432 or 431") is None and first_span("none") is None


def test_format_value():
    assert [format_value(x) for x in (F(7), F(-5, 2), F(1, 3), F(1, 8))] == \
        ["7", "-2.5", "1/3", "0.125"]
    assert format_value(None) is None
