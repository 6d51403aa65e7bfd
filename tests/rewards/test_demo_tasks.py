"""The compact K&K and Countdown tasks of the CPU demos (rewards/demo_tasks.py): the encoding by
hand, and generator and rewards agreeing -- the gold answer scores 1 (and, for K&K, +2 with
Logic-RL's kk_answer), the teacher's slips score 0 -- with the puzzle decoded and solved
independently of the generator."""

import random
import re
from itertools import product

import pytest

from mindrl.config.schema import DataConfig
from mindrl.data.io import DataError
from mindrl.trainer.prompts import build_streams, countdown_options, kk_options
from rewards.countdown import countdown_equation
from rewards.demo_tasks import kk_encode, kk_logic_rl_text, kk_roles, make_countdown_row
from rewards.knights_knaves import KKAnswer


def _solve_compact(problem):
    """All role strings consistent with a compact puzzle, by brute force over 2^n, with its own
    parser of the symbol grammar (atoms X1/X0, !, then &, |, =, > between at most two terms)."""
    stmts = [s.split(":", 1)[1] for s in problem.rstrip("?").split(";")]
    n = len(stmts)

    def truth(expr, roles):
        m = re.fullmatch(r"(!?)([A-H])([01])(?:([&|=>])(!?)([A-H])([01]))?", expr)
        assert m, expr
        a = (roles[ord(m[2]) - 65] == m[3]) != (m[1] == "!")
        if not m[4]:
            return a
        b = (roles[ord(m[6]) - 65] == m[7]) != (m[5] == "!")
        return {"&": a and b, "|": a or b, "=": a == b, ">": (not a) or b}[m[4]]

    return ["".join(r) for r in product("10", repeat=n)
            if all(truth(s, r) == (r[i] == "1") for i, s in enumerate(stmts))]


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
    row = make_countdown_row(random.Random(3), numbers=(3,), slip=0.0)
    assert re.fullmatch(r"(\d,){2}\d=\d+:", row["problem"])
    assert row["answer"].startswith("<answer>") and row["answer"].endswith("</answer>")


@pytest.mark.slow
def test_kk_generator_and_rewards_agree():
    train, val = build_streams(DataConfig(train_file="kk_compact:people=3-4,slip=0.5",
                                          max_val_samples=64), seed=0)
    rows = train.take(400)
    assert {len(r["answer"]) for r in rows} == {3, 4}
    assert not {r["problem"] for r in rows} & {r["problem"] for r in val}
    slips = 0
    for r in rows:
        assert _solve_compact(r["problem"]) == [r["answer"]]        # unique, and the gold one
        assert kk_roles([r["answer"]], answer=[r["answer"]]) == [1.0]
        gold = KKAnswer()([kk_logic_rl_text(r["answer"], r["names"])],
                          solution=[r["solution"]], names=[r["names"]])
        assert gold == [2.0]                                          # Logic-RL's score
        if r["teacher"] != r["answer"]:
            slips += 1
            assert r["teacher"][:-1] == r["answer"][:-1]             # the last role flipped
            assert kk_roles([r["teacher"]], answer=[r["answer"]]) == [0.0]
            assert KKAnswer()([kk_logic_rl_text(r["teacher"], r["names"])],
                              solution=[r["solution"]], names=[r["names"]]) == [-1.5]
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
    wrong_slips = 0
    for r in rows:
        assert score([r["answer"]], r) == [1.0]
        eq = r["answer"][len("<answer>"):-len("</answer>")]
        assert sorted(map(int, re.findall(r"\d+", eq))) == sorted(r["nums"])
        if r["teacher"] != r["answer"]:
            assert r["teacher"] == r["answer"].replace("(", "").replace(")", "")
            # the slip scores 0 exactly when dropping the parentheses changed the value
            value = eval(r["teacher"][len("<answer>"):-len("</answer>")])  # digits and + - * /
            assert score([r["teacher"]], r) == [float(abs(value - r["target"]) < 1e-9)]
            wrong_slips += score([r["teacher"]], r) == [0.0]
    assert 0.1 < wrong_slips / len(rows) < 0.2     # 14% here: parentheses often do not matter


def test_bad_options_name_the_generator_and_key():
    with pytest.raises(DataError, match="kk_compact generator: people=9"):
        kk_options({"people": "9"})
    with pytest.raises(DataError, match="unknown option"):
        countdown_options({"number": "3"})
    with pytest.raises(DataError, match="slip"):
        countdown_options({"slip": "2"})
