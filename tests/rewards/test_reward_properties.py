r"""Property tests over every rule reward that compares answers: a wrong answer is never paid,
and the right answer is paid in every way a policy writes it.

Numeric rewards (``accuracy`` through math-verify and the rewards that share its check,
``gsm8k_accuracy``, ``arithmetic``, ``tool_final_answer``): random pairs of distinct values,
written as integers, with thousands separators, as fractions ``a/b`` and ``\frac{a}{b}``,
decimals, negatives, powers ``b^e`` and percent, inside the answer markers policies use. The
wrong values include the ones a prefix or suffix reading mistakes for the gold (``2/3``, ``2^2``,
``2.5``, ``2,500``, ``\frac{2}{9}`` and ``7/2`` against 2) and hedges (``2 or 3``). Every
expected value is computed here from how the text was built, never by the reader under test.

Task rewards: Countdown equations (the solution rewritten -- spacing, brackets, operands
swapped -- is paid; an equation with another number, a number missing or reused, another
operator, or a near miss within 1e-5 of the target is not) and Knights-and-Knaves answers (the
roles in any order or case are paid; one role flipped, missing or hedged is not).

Hypothesis runs derandomized with a bounded number of examples, so the set is the same on
every run and takes seconds.
"""

import ast
import random
import re
from fractions import Fraction

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from rewards.arithmetic import arithmetic_reward
from rewards.countdown import countdown_equation, make_countdown
from rewards.demo_tasks import kk_roles
from rewards.gsm8k import gsm8k_accuracy
from rewards.knights_knaves import KKAnswer, generate_puzzle, solution_text
from rewards.open_r1 import Accuracy, Cosine
from rewards.tool_demo import tool_final_answer

FAST = settings(derandomize=True, max_examples=150, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
SLOW = settings(FAST, max_examples=60)          # rewards that may call math-verify

# ------------------------------------------------------------------------------ values

integers = st.integers(-10 ** 7, 10 ** 7).map(Fraction)
fractions = st.builds(Fraction, st.integers(-999, 999), st.integers(2, 64))
decimals = st.builds(lambda n, k: Fraction(n, 10 ** k), st.integers(-10 ** 6, 10 ** 6),
                     st.integers(1, 4))
powers = st.builds(lambda b, e, neg: (-1 if neg else 1) * Fraction(b) ** e,
                   st.integers(2, 12), st.integers(2, 6), st.booleans())
values = st.one_of(integers, fractions, decimals, powers)


def _decimal(v: Fraction):
    """The exact decimal of ``v``, or None when it does not terminate."""
    for k in range(0, 12):
        if (v * 10 ** k).denominator == 1:
            n = abs(v.numerator * 10 ** k // v.denominator)
            s = str(n).rjust(k + 1, "0")
            body = s if k == 0 else s[:-k] + "." + s[-k:]
            return ("-" if v < 0 else "") + body
    return None


def _power(n: int):
    """(b, e) with b^e = n, b >= 2, e >= 2, or None."""
    for e in range(12, 1, -1):
        b = round(n ** (1 / e))
        for c in (b - 1, b, b + 1):
            if c >= 2 and c ** e == n:
                return c, e
    return None


def forms(v: Fraction) -> dict:
    """Every way of writing ``v`` that applies to it (name -> text), each worth exactly v."""
    sign = "-" if v < 0 else ""
    a = abs(v)
    out = {}
    if v.denominator == 1:
        out["int"] = str(v.numerator)
        out["as_fraction"] = f"{v.numerator * 3}/3"
        out["decimal_zeros"] = f"{v.numerator}.00"
        if a >= 1000:
            out["thousands"] = f"{v.numerator:,}"
        pw = _power(a.numerator) if a >= 4 else None
        if pw:
            out["power"] = f"{sign}{pw[0]}^{pw[1]}"
            out["power_braces"] = f"{sign}{pw[0]}^{{{pw[1]}}}"
    else:
        out["fraction"] = f"{sign}{a.numerator}/{a.denominator}"
        out["latex_frac"] = f"{sign}\\frac{{{a.numerator}}}{{{a.denominator}}}"
        out["latex_dfrac"] = f"\\dfrac{{{v.numerator}}}{{{v.denominator}}}"
    dec = _decimal(v)
    if dec is not None and v.denominator != 1:
        out["decimal"] = dec
    if dec is not None:
        out["percent"] = dec + "%"
        out["latex_percent"] = dec + "\\%"
        if "." in dec and a >= 1000:
            whole, frac = dec.lstrip("-").split(".")
            out["thousands_decimal"] = f"{sign}{int(whole):,}.{frac}"
    return out


def plain(v: Fraction) -> str:
    """How a reference answer is stored: an integer, a decimal, else \\frac{a}{b}."""
    dec = _decimal(v)
    if dec is not None:
        return dec
    sign = "-" if v < 0 else ""
    return f"{sign}\\frac{{{abs(v.numerator)}}}{{{v.denominator}}}"


MARKED = ["#### {}", "The answer is {}.", "so the total is \\boxed{{{}}}", "<answer>{}</answer>",
          "Final Answer: The final answer is ${}$. I hope it is correct.",
          "Therefore, the final answer is: $\\boxed{{{}}}$"]


@st.composite
def wrong_answers(draw, gold: Fraction):
    """(text, value or None) with value != gold: another value in any form, a value that a
    prefix or suffix reading of the text mistakes for the gold, or a hedge (None)."""
    g = abs(gold.numerator) if gold.denominator == 1 else None
    kind = draw(st.sampled_from(["other", "prefix", "suffix", "hedge"] if g else
                                ["other", "hedge"]))
    if kind == "other":
        v = draw(values.filter(lambda x: x != gold))
        return draw(st.sampled_from(sorted(forms(v).values()))), v
    if kind == "hedge":
        v = draw(values.filter(lambda x: x != gold))
        w = forms(v)["int" if v.denominator == 1 else "fraction"]
        return draw(st.sampled_from([f"{plain(gold)} or {w}", f"{w} or {plain(gold)}",
                                     f"{plain(gold)}, {w}", f"{plain(gold)} and {w}"])), None
    k = draw(st.integers(2, 9))
    d = draw(st.integers(1, 999))
    m, sg = ("-", -1) if gold < 0 else ("", 1)     # the gold's sign, written in front
    if kind == "prefix":   # the text starts with the gold's digits
        text, v = draw(st.sampled_from([
            (f"{m}{g}/{k}", sg * Fraction(g, k)), (f"{m}{g}^{k}", sg * Fraction(g) ** k),
            (f"{m}{g}^{{{k}}}", sg * Fraction(g) ** k),
            (f"{m}{g}.{d}", sg * (g + Fraction(d, 10 ** len(str(d))))),
            (f"{m}{g},{d:03d}", sg * Fraction(g * 1000 + d)),
            (f"{m}\\frac{{{g}}}{{{k}}}", sg * Fraction(g, k)),
            (f"{m}{g}{k}", sg * Fraction(int(f"{g}{k}"))),
            (f"{m}{g} \\times 10^{k}", sg * Fraction(g * 10 ** k)),
            (f"{m}{g}\\frac{{1}}{{{k}}}", sg * (g + Fraction(1, k))),
            (f"{m}{g}e{k}", sg * Fraction(g * 10 ** k)),
            (f"{m}{g}!" if g > 2 else f"{m}{g}/{k}", None if g > 2 else sg * Fraction(g, k)),
            (f"{m}{g} \\pm {k}", None), (f"{m}{g}\\sqrt{{{k}}}", None)]))
    else:                  # the text ends with the gold's digits
        text, v = draw(st.sampled_from([
            (f"{k}/{m}{g}", Fraction(k, sg * g)), (f"\\frac{{{k}}}{{{m}{g}}}", Fraction(k, sg * g)),
            (f"{m}{k}.{g}", sg * (k + Fraction(g, 10 ** len(str(g))))),
            (f"{k}^{m}{g}" if g <= 60 else f"{k}/{m}{g}",
             Fraction(k) ** (sg * g) if g <= 60 else Fraction(k, sg * g)),
            (f"{m}{k}{g}", sg * Fraction(int(f"{k}{g}"))), (f"{k}:{m}{g}", Fraction(k, sg * g)),
            (f"{k},{m}{g}", None), (f"{k} - {g}", Fraction(k - g)), (f"-{m}{g}", -sg * g),
            (f"\\sqrt{{{g}}}" if g > 1 else f"{k}/{g}", None if g > 1 else Fraction(k, g))]))
    assume(v != gold)
    return text, v


# --------------------------------------------------------------------- GSM8K and accuracy

def _gsm8k_gold(v: Fraction) -> str:
    return f"She pays 3 * 4 = <<3*4=12>>12 dollars.\n#### {plain(v)}"


@FAST
@given(gold=values, template=st.sampled_from(MARKED))
def test_gsm8k_pays_the_right_value_in_every_form(gold, template):
    texts = [template.format(t) for t in forms(gold).values()]
    assert gsm8k_accuracy(texts, answer=[_gsm8k_gold(gold)] * len(texts)) == \
        [1.0] * len(texts), texts


@FAST
@given(data=st.data(), gold=values, template=st.sampled_from(MARKED))
def test_gsm8k_never_pays_a_wrong_value(data, gold, template):
    text, _ = data.draw(wrong_answers(gold))
    completion = template.format(text)
    assert gsm8k_accuracy([completion], answer=[_gsm8k_gold(gold)]) == [0.0], completion


@FAST
@given(data=st.data(), gold=values)
def test_gsm8k_last_number_fallback_reads_the_whole_expression(data, gold):
    """Without a marked answer GSM8K reads the last number of the text, whole."""
    text, _ = data.draw(wrong_answers(gold))
    assert gsm8k_accuracy([f"So she has {text}"], answer=[plain(gold)]) == [0.0]
    right = data.draw(st.sampled_from(sorted(forms(gold).values())))
    assert gsm8k_accuracy([f"... so she has {right}"], answer=[plain(gold)]) == [1.0]


def test_gsm8k_holes_of_the_first_number_reading():
    cases = [("#### 2/3", "2"), ("The answer is 2/9.", "2"), (r"\boxed{\frac{2}{3}}", "2"),
             ("The answer is 2^2.", "2"), (r"\boxed{\frac{3}{8}}", r"\frac{3}{7}"),
             ("The answer is 2 or 3.", "2"), ("#### 2.5", "2"), ("#### 2,500", "2"),
             ("#### 5!", "5"), ("so it is 17 or 18", "18"), ("So she has 2:-1", "-1"),
             ("the ratio is 3:4", "4"), (r"\boxed{\sqrt{4}}", "4")]
    assert gsm8k_accuracy([c for c, _ in cases], answer=[g for _, g in cases]) == \
        [0.0] * len(cases)
    assert gsm8k_accuracy([r"\boxed{\frac{3}{7}}", "#### 4", "#### 0.375"],
                          answer=[r"\frac{3}{7}", "2^2", r"#### \frac{3}{8}"]) == [1.0] * 3


@SLOW
@given(gold=values, template=st.sampled_from(MARKED[1:]), gold_form=st.sampled_from(
    ["plain", "boxed"]))
def test_math_accuracy_pays_the_right_value_in_every_form(gold, template, gold_form):
    ref = plain(gold) if gold_form == "plain" else f"so \\boxed{{{plain(gold)}}}."
    texts = [template.format(t) for t in forms(gold).values()]
    assert Accuracy()(texts, answer=[ref] * len(texts)) == [1.0] * len(texts), texts


@SLOW
@given(data=st.data(), gold=values, template=st.sampled_from(MARKED[1:]))
def test_math_accuracy_never_pays_a_wrong_value(data, gold, template):
    text, _ = data.draw(wrong_answers(gold))
    completion = template.format(text)
    assert Accuracy()([completion], answer=[plain(gold)]) == [0.0], completion


@SLOW
@given(gold=values, eps_digits=st.integers(7, 12), template=st.sampled_from(MARKED[1:]))
def test_math_accuracy_never_pays_a_decimal_near_miss(gold, eps_digits, template):
    """A decimal a hair away from an exact gold is another value, even within the float
    rounding that lets 0.333333 stand for 1/3."""
    assume(_decimal(gold) is not None)             # a gold with a finite decimal
    text = _decimal(gold + Fraction(1, 10 ** eps_digits))
    completion = template.format(text)
    assert Accuracy()([completion], answer=[plain(gold)]) == [0.0], completion
    # the rewards that share the check (Cosine: wrong is negative)
    assert Cosine(max_len=10)([completion], answer=[plain(gold)], completion_lengths=[0]) == \
        [-1.0]


@SLOW
@given(gold=fractions, places=st.integers(6, 10), template=st.sampled_from(MARKED[1:]))
def test_math_accuracy_rounded_decimals_of_endless_values(gold, places, template):
    """A value whose decimal never ends (2/3) is paid as its rounding to 6 places or more
    (0.666667, 0.6666667), and not as a decimal one unit off in the last place."""
    assume(_decimal(gold) is None)
    q = Fraction(1, 10 ** places)
    rounded = Fraction(int((gold / q + Fraction(1, 2)) // 1)) * q      # half up, by hand
    off = [_decimal(rounded + d) for d in (q, -q)]
    assume(all(len(t.split(".")[1]) == places for t in off))  # not a rounding at fewer places
    texts = [template.format(t) for t in [_decimal(rounded)] + off]
    assert Accuracy()(texts, answer=[plain(gold)] * 3) == [1.0, 0.0, 0.0], texts


# ----------------------------------------------------------------- arithmetic and tool demo

@FAST
@given(gold=st.integers(-10 ** 6, 10 ** 6), data=st.data())
def test_arithmetic_pays_exactly_the_gold_integer(gold, data):
    g = Fraction(gold)
    right = data.draw(st.sampled_from([f"{gold}", f"{gold}\n", f" {gold}", f"{gold}<|im_end|>"]))
    text, _ = data.draw(wrong_answers(g).filter(lambda tv: tv[1] is None or
                                                tv[1].denominator != 1 or tv[1] != g))
    assert arithmetic_reward([right, text], answer=[str(gold)] * 2) == [1.0, 0.0], text


@FAST
@given(a=st.integers(100, 999), b=st.integers(100, 999), data=st.data())
def test_tool_final_answer_pays_exactly_the_product(a, b, data):
    g = a * b
    call = f"```python\nprint({a}*{b})\n```\n```output\n{g}\n```\n"
    right = data.draw(st.sampled_from([f"{g}", f"{g:,}", f"The answer is {g}.", f"{g}\n"]))
    text, _ = data.draw(wrong_answers(Fraction(g)))
    assert tool_final_answer([call + right, call + text, call],
                             answer=[str(g)] * 3) == [1.0, 0.0, 0.0], text


# ------------------------------------------------------------------------------ Countdown

def _swap(expr: str) -> str:
    """The same equation with the operands of every + and * swapped (the value is unchanged)."""
    def rec(node):
        if isinstance(node, ast.Constant):
            return str(node.value)
        a, b = rec(node.left), rec(node.right)
        op = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}[type(node.op)]
        if op in "+*":
            a, b = b, a
        return f"({a} {op} {b})"

    return rec(ast.parse(expr, mode="eval").body)


@st.composite
def countdown_problems(draw):
    rng = random.Random(draw(st.integers(0, 10 ** 9)))
    nums, target, solution = make_countdown(rng, draw(st.integers(2, 5)), 99, (1, 100))
    return nums, target, solution


@FAST
@given(problem=countdown_problems(), variant=st.sampled_from(
    ["as_is", "no_spaces", "outer_parens", "swapped", "padded"]))
def test_countdown_pays_the_solution_written_any_way(problem, variant):
    nums, target, sol = problem
    eq = {"as_is": sol, "no_spaces": sol.replace(" ", ""), "outer_parens": f"({sol})",
          "swapped": _swap(sol), "padded": f"  {sol}  "}[variant]
    assert countdown_equation([f"<think>..</think>\n<answer>{eq}</answer>"], nums=[nums],
                              target=[target]) == [1.0], eq


@FAST
@given(problem=countdown_problems(), data=st.data())
def test_countdown_never_pays_a_wrong_equation(problem, data):
    nums, target, sol = problem
    kind = data.draw(st.sampled_from(["other_number", "missing", "reused", "wrong_result",
                                      "near_miss", "wrong_target"]))
    new_nums, new_target, eq = list(nums), target, sol
    if kind == "other_number":      # one number replaced by another
        k = data.draw(st.integers(1, 99))
        assume(str(k) != str(nums[0]))
        eq = re.sub(rf"(?<!\d){nums[0]}(?!\d)", str(k), sol, count=1)
        assume(sorted(int(t) for t in re.findall(r"\d+", eq)) != sorted(nums))
    elif kind == "missing":         # one number left out
        eq = _drop_last_operand(sol)
    elif kind == "reused":          # a number used twice
        eq = f"({sol}) * ({nums[0]} / {nums[0]})"
    elif kind == "wrong_result":    # the equation of another target
        eq = f"({sol}) + 1"
        new_nums = nums + [1]
    elif kind == "near_miss":       # within 1e-5 of the target, not equal to it
        m = data.draw(st.integers(60, 99))
        eq = f"({sol}) + 1 / ({m} * {m} * {m})"
        new_nums = nums + [1, m, m, m]
    elif kind == "wrong_target":    # a right equation for a target one off
        new_target = target + data.draw(st.sampled_from([-1, 1]))
    completion = f"<think>..</think>\n<answer>{eq}</answer>"
    assert countdown_equation([completion], nums=[new_nums], target=[new_target]) == [0.0], \
        (kind, eq, new_nums, new_target)


def _drop_last_operand(expr: str) -> str:
    node = ast.parse(expr, mode="eval").body
    return ast.get_source_segment(expr, node.left)


# ----------------------------------------------------------------------- Knights and Knaves

@st.composite
def kk_puzzles(draw):
    n = draw(st.integers(2, 6))
    return generate_puzzle(n, seed=draw(st.integers(0, 10 ** 6)))


def _kk_text(names, roles, order=None, case=str):
    order = order or list(range(len(names)))
    lines = [f"({j + 1}) {names[i]} is a {case(roles[i])}" for j, i in enumerate(order)]
    return "<think>...</think><answer>" + "\n".join(lines) + "</answer>"


@FAST
@given(puzzle=kk_puzzles(), data=st.data(), gold_as=st.sampled_from(["list", "dict", "text"]))
def test_kk_answer_pays_all_roles_right_and_nothing_else(puzzle, data, gold_as):
    names, roles = puzzle["names"], puzzle["solution"]
    sol = {"list": roles, "dict": dict(zip(names, roles)),
           "text": solution_text(names, roles)}[gold_as]
    order = data.draw(st.permutations(range(len(names))))
    case = data.draw(st.sampled_from([str, str.upper, str.capitalize]))
    flip = data.draw(st.integers(0, len(names) - 1))
    flipped = [("knave" if r == "knight" else "knight") if i == flip else r
               for i, r in enumerate(roles)]
    missing = _kk_text(names[:flip] + names[flip + 1:], roles[:flip] + roles[flip + 1:])
    other = "knave" if roles[flip] == "knight" else "knight"
    hedged = _kk_text(names, roles).replace(f"{names[flip]} is a {roles[flip]}",
                                            f"{names[flip]} is a {roles[flip]} or a {other}")
    twice = _kk_text(names, roles).replace("</answer>",
                                           f"\n{names[flip]} is a {other}</answer>")
    texts = [_kk_text(names, roles, order, case), _kk_text(names, flipped), missing, hedged,
             twice]
    got = KKAnswer()(texts, solution=[sol] * 5, names=[names] * 5)
    assert got[0] == 2.0
    assert all(s < 0 for s in got[1:]), got


@FAST
@given(puzzle=kk_puzzles(), data=st.data())
def test_kk_roles_pays_the_roles_and_nothing_else(puzzle, data):
    roles = "".join("1" if r == "knight" else "0" for r in puzzle["solution"])
    flip = data.draw(st.integers(0, len(roles) - 1))
    flipped = roles[:flip] + ("0" if roles[flip] == "1" else "1") + roles[flip + 1:]
    right = data.draw(st.sampled_from([f"<answer>{roles}</answer>", f"{roles}",
                                       f"00:1</think>\n<answer>{roles}</answer>",
                                       f"<answer> {roles} </answer>"]))
    wrong = [f"<answer>{flipped}</answer>", f"<answer>{roles[:-1]}</answer>",
             f"<answer>{roles}0</answer>", f"<answer>{roles} or {flipped}</answer>",
             f"<answer>{flipped} or {roles}</answer>", f"<answer>{roles},{flipped}</answer>",
             f"<answer>{roles}|{flipped}</answer>",
             f"{roles}:{roles[:1]},{flipped}:1"]     # a chain of thought cut before its answer
    got = kk_roles([right] + wrong, answer=[roles] * (1 + len(wrong)))
    assert got == [1.0] + [0.0] * len(wrong), list(zip([right] + wrong, got))


@pytest.mark.parametrize("seed", range(3))
def test_property_generators_build_what_they_say(seed):
    """The test's own forms are worth the value they were built from (checked by Python)."""
    rng = random.Random(seed)
    for _ in range(200):
        v = Fraction(rng.randint(-10 ** 6, 10 ** 6), rng.choice([1, 1, 2, 4, 8, 25, 3, 7]))
        for name, text in forms(v).items():
            t = text.replace(",", "").replace("\\%", "").replace("%", "")
            t = t.replace("\\dfrac", "\\frac")
            if "frac" in t:
                neg = t.startswith("-")
                p, q = t.lstrip("-").replace("\\frac{", "").rstrip("}").split("}{")
                got = Fraction(int(p), int(q)) * (-1 if neg else 1)
            elif "^" in t:
                b, e = t.replace("{", "").replace("}", "").split("^")
                got = -Fraction(int(b.lstrip("-"))) ** int(e) if b.startswith("-") else \
                    Fraction(int(b)) ** int(e)
            else:
                got = Fraction(t)
            assert got == v, (name, text)
