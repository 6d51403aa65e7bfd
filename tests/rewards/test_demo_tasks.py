"""The compact K&K and Countdown tasks of the CPU demos (rewards/demo_tasks.py): the encoding by
hand, and generator and rewards agreeing -- the gold answer scores 1 (and, for K&K, +2 with
Logic-RL's kk_answer), the teacher's slips score 0 -- with the puzzle decoded and solved
independently of the generator, and each chain of thought replayed step by step (K&K: the
search over assignments re-evaluated with the test's own parser; Countdown: every step's
arithmetic redone, its operands drawn from the numbers and earlier results)."""

import random
import re
from collections import Counter
from itertools import product

import pytest

from mindrl.config.schema import DataConfig
from mindrl.data.io import DataError
from mindrl.trainer.prompts import build_streams, countdown_options, kk_options
from rewards.countdown import countdown_equation
from rewards.countdown import CountdownFormat
from rewards.demo_tasks import (countdown_slip, countdown_steps, kk_answer_roles, kk_encode,
                                kk_logic_rl_text, kk_roles, kk_search, make_countdown_row)
from rewards.knights_knaves import KKAnswer


def _solve_compact(problem):
    """All role strings consistent with a compact puzzle, by brute force over 2^n, with its own
    parser of the symbol grammar (atoms X1/X0, !, then &, |, =, > between at most two terms)."""
    stmts = _statements(problem)
    return ["".join(r) for r in product("10", repeat=len(stmts))
            if all(_truth(s, r) == (r[i] == "1") for i, s in enumerate(stmts))]


def _statements(problem):
    return [s.split(":", 1)[1] for s in problem.rstrip("?").split(";")]


def _truth(expr, roles):
    """Truth of one compact statement (atoms X1/X0, !, then &, |, =, > between at most two
    terms) under a roles string (``roles[i]`` "1" when person i is a knight)."""
    m = re.fullmatch(r"(!?)([A-H])([01])(?:([&|=>])(!?)([A-H])([01]))?", expr)
    assert m, expr
    a = (roles[ord(m[2]) - 65] == m[3]) != (m[1] == "!")
    if not m[4]:
        return a
    b = (roles[ord(m[6]) - 65] == m[7]) != (m[5] == "!")
    return {"&": a and b, "|": a or b, "=": a == b, ">": (not a) or b}[m[4]]


def _check_kk_search(problem, completion):
    """Replay a K&K chain of thought: assignments in counting order, each with the truths of
    the statements up to the first contradiction, ending at the unique solution."""
    think, rest = completion.split("</think>\n<answer>")
    stmts = _statements(problem)
    n = len(stmts)
    steps = think.split(",")
    for k, step in enumerate(steps):
        cand, truths = step.split(":")
        assert cand == format(k, f"0{n}b")                          # counting order
        want = ""
        for i, s in enumerate(stmts):
            want += "1" if _truth(s, cand) else "0"
            if want[-1] != cand[i]:
                break
        assert truths == want, (problem, step)
    assert steps[-1].split(":") == [_solve_compact(problem)[0]] * 2  # stops at the solution
    return rest[:-len("</answer>")]


def test_encoding_by_hand():
    assert kk_encode(("is", 1, "knave")) == "B0"
    assert kk_encode(("iff", ("is", 0, "knight"), ("is", 3, "knave"))) == "A1=D0"
    assert kk_encode(("not", ("is", 2, "knight"))) == "!C1"
    assert _solve_compact("A:B0;B:A1?") == []                 # no consistent assignment
    assert _solve_compact("A:B0;B:!A1?") == ["10", "01"]      # two solutions: not a puzzle
    # by hand: B's "A knight and B knave" cannot be a knight's, so B is a knave; then A's
    # "B is a knight" is false, so A is a knave too
    assert _solve_compact("A:B1;B:A1&B0?") == ["00"]
    assert kk_roles(["10", "01", "10x", ""], answer=["10"] * 4) == [1.0, 0.0, 1.0, 0.0]
    # the search by hand. "A:B1;B:!A0" under 00: A's "B is a knight" is false (no
    # contradiction for a knave), B's "A is not a knave" is false (none either): it stops at 00
    assert kk_search([("is", 1, "knight"), ("not", ("is", 0, "knave"))], 2) == ["00:00"]
    # "A:B0;B:A0": under 00 A's "B is a knave" is true, a knave's truth: stop after A; under 01
    # A's is false (fine), B's "A is a knave" true (fine for a knight): 01 is consistent
    assert kk_search([("is", 1, "knave"), ("is", 0, "knave")], 2) == ["00:1", "01:01"]
    assert _solve_compact("A:B0;B:A0?") == ["10", "01"]
    # reading the roles: inside the first <answer> block when there is one
    assert kk_answer_roles("000:1,001:001</think>\n<answer>001</answer>") == "001"
    assert kk_answer_roles("<answer>x</answer>101") is None
    assert kk_roles(["00:1,01:01</think>\n<answer>01</answer>", "01:01</think>\n<answer>00"
                     "</answer>", "01"], answer=["00:1,01:01</think>\n<answer>01</answer>"] * 3
                    ) == [1.0, 0.0, 1.0]
    row = make_countdown_row(random.Random(3), numbers=(3,), slip=0.0)
    assert re.fullmatch(r"(\d,){2}\d=\d+:", row["problem"])
    assert re.fullmatch(r"\d+[-+*/]\d+=\d+,\d+[-+*/]\d+=\d+</think>\n<answer>[-+*/()\d]+"
                        r"</answer>", row["answer"]), row["answer"]
    assert countdown_steps("((3 + 5) * 2) - 4") == ["3+5=8", "8*2=16", "16-4=12"]
    assert countdown_slip("((3 + 5) * 2) - 4") == "(3 + 5) * 2"   # the last step left out
    assert countdown_slip("(9 - 3) * (8 / 2)") == "9 - 3"
    assert countdown_steps("(9 - 3) * (8 / 2)") == ["9-3=6", "8/2=4", "6*4=24"]
    with pytest.raises(ValueError, match="exact"):
        countdown_steps("7 / 2")


@pytest.mark.slow
def test_kk_generator_and_rewards_agree():
    train, val = build_streams(DataConfig(train_file="kk_compact:people=3-4,slip=0.5",
                                          max_val_samples=64), seed=0)
    rows = train.take(400)
    assert {len(r["roles"]) for r in rows} == {3, 4}
    assert not {r["problem"] for r in rows} & {r["problem"] for r in val}
    slips = 0
    for r in rows:
        assert _solve_compact(r["problem"]) == [r["roles"]]         # unique, and the gold one
        assert _check_kk_search(r["problem"], r["answer"]) == r["roles"]
        assert kk_roles([r["answer"]], answer=[r["answer"]]) == [1.0]
        assert kk_roles([r["roles"]], answer=[r["answer"]]) == [1.0]
        gold = KKAnswer()([kk_logic_rl_text(r["roles"], r["names"])],
                          solution=[r["solution"]], names=[r["names"]])
        assert gold == [2.0]                                          # Logic-RL's score
        taught = _check_kk_search(r["problem"], r["teacher"])        # the same search
        if taught != r["roles"]:
            slips += 1
            assert taught == r["roles"][:-1]                      # the last role left out
            assert kk_roles([r["teacher"]], answer=[r["answer"]]) == [0.0]
            assert KKAnswer()([kk_logic_rl_text(taught, r["names"])],     # a person missing:
                              solution=[r["solution"]], names=[r["names"]]) == [-2.0]  # unparsed
    assert 0.4 < slips / len(rows) < 0.6


@pytest.mark.slow
def test_countdown_generator_and_reward_agree():
    train, val = build_streams(DataConfig(
        train_file="countdown_compact:numbers=3-4,max_number=9,slip=0.5", max_val_samples=64),
        seed=0)
    rows = train.take(400)
    assert {len(r["nums"]) for r in rows} == {3, 4}
    assert all(1 <= n <= 9 for r in rows for n in r["nums"]) and all(
        1 <= r["target"] <= 99 for r in rows)
    score = lambda texts, r: countdown_equation(texts, nums=[r["nums"]] * len(texts),  # noqa
                                                target=[r["target"]] * len(texts))
    slips = 0
    for r in rows:
        assert score([r["answer"]], r) == [1.0]
        assert CountdownFormat()([r["answer"]]) == [1.0]       # Mini-R1's <think> format too
        think, eq = r["answer"][:-len("</answer>")].split("</think>\n<answer>")
        assert sorted(map(int, re.findall(r"\d+", eq))) == sorted(r["nums"])
        # replay the steps: true arithmetic on two available values, ending at the target
        pool = list(r["nums"])
        for step in think.split(","):
            a, op, b, c = re.fullmatch(r"(\d+)([-+*/])(\d+)=(\d+)", step).groups()
            a, b, c = int(a), int(b), int(c)
            pool.remove(a)
            pool.remove(b)
            assert c == {"+": a + b, "-": a - b, "*": a * b, "/": a / b}[op]
            pool.append(c)
        assert pool == [r["target"]]
        if r["teacher"] != r["answer"]:
            slips += 1
            taught_think, taught = r["teacher"][:-len("</answer>")].split("</think>\n<answer>")
            assert taught_think == think                              # the same steps
            # the slip is the equation of one operand of the last step: fewer numbers, always 0
            a, _, b, _ = re.fullmatch(r"(\d+)([-+*/])(\d+)=(\d+)", step).groups()
            assert eval(taught) in (int(a), int(b))                    # digits and + - * /
            used = sorted(map(int, re.findall(r"\d+", taught)))
            assert len(used) < len(r["nums"]) and not Counter(used) - Counter(r["nums"])
            assert score([r["teacher"]], r) == [0.0]
    assert 0.4 < slips / len(rows) < 0.6


def test_bad_options_name_the_generator_and_key():
    with pytest.raises(DataError, match="kk_compact generator: people=9"):
        kk_options({"people": "9"})
    with pytest.raises(DataError, match="unknown option"):
        countdown_options({"number": "3"})
    with pytest.raises(DataError, match="slip"):
        countdown_options({"slip": "2"})
