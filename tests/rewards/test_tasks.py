"""Knights & knaves and Countdown: generators, solvers, parsers, rewards."""

import json

import pytest

from mindrl.data.prompts import countdown_columns
from rewards.countdown import (CountdownFormat, UnsafeExpression, check_equation,
                               countdown_equation, generate_countdown, safe_eval, solve_countdown)
from rewards.knights_knaves import (KKAnswer, generate_puzzle, generate_puzzles, kk_format,
                                    parse_answer, solve)


@pytest.mark.parametrize("n", range(2, 9))
def test_kk_generator_unique_and_seeded(n):
    for seed in range(3):
        row = generate_puzzle(n, seed)
        assert len(row["names"]) == n == len(set(row["names"]))
        sols = solve(row["statements"], n)
        assert len(sols) == 1
        assert ["knight" if k else "knave" for k in sols[0]] == row["solution"]
        for name in row["names"]:
            assert name in row["quiz"]
    assert generate_puzzle(n, 7) == generate_puzzle(n, 7)
    assert generate_puzzle(n, 7)["quiz"] != generate_puzzle(n, 8)["quiz"]


def test_kk_solver_by_hand():
    # A says "B is a knave", B says "A and B are both knights" -> A knight, B knave
    stmts = [("is", 1, "knave"), ("and", ("is", 0, "knight"), ("is", 1, "knight"))]
    assert solve(stmts, 2) == [(True, False)]
    with pytest.raises(ValueError):
        generate_puzzle(9, 0)


def test_kk_rewards_on_generated_rows():
    rows = generate_puzzles(4, n_people=(3, 5), seed=1)
    kk = KKAnswer()
    for row in rows:
        good = f"<think>solve</think><answer>{row['solution_text']}</answer>"
        flipped = ["knave" if r == "knight" else "knight" for r in row["solution"]]
        wrong_text = "\n".join(f"({i+1}) {n} is a {r}" for i, (n, r) in
                               enumerate(zip(row["names"], flipped)))
        wrong = f"<think>x</think><answer>{wrong_text}</answer>"
        res = kk([good, wrong, "<think>x</think><answer>dunno</answer>", row["solution_text"]],
                 solution=[row["solution"]] * 4, names=[row["names"]] * 4)
        assert res == [2.0, -1.5, -2.0, -2.0]
        # the solution text itself works as the reference column
        assert kk([good], solution=[row["solution_text"]]) == [2.0]


def test_kk_format_and_parser():
    assert kk_format(["<think>a</think>\n<answer>b</answer>", "<think>a</think>",
                      "<think><think>a</think><answer>b</answer>",
                      "</think><think><answer></answer>"]) == [1.0, -1.0, -1.0, -1.0]
    assert parse_answer("Zoey is a knight, and Oliver is a knave.", ["Zoey", "Oliver"]) == \
        {"Zoey": "knight", "Oliver": "knave"}
    # an extra role mention (hedging) is rejected
    assert parse_answer("Zoey is a knight or a knave; Oliver is a knave", ["Zoey", "Oliver"]) is None


def test_safe_eval_accepts_arithmetic():
    assert safe_eval("(30 + 100 - 93) * 2 / 4")[0] == 37 * 2 / 4
    assert check_equation("100 - (93 - 30) / 3", [30, 100, 93, 3], 79)
    assert not check_equation("100 - 93 + 30", [30, 100, 93], 38)  # wrong value


@pytest.mark.parametrize("eq", ["__import__('os').system('x')", "2 ** 10", "2**3", "-3 + 6",
                                "3.0 + 4", "abs(3)", "a + 1", "7 // 2", "[1, 2]", "1; 2"])
def test_safe_eval_rejects(eq):
    with pytest.raises((UnsafeExpression, SyntaxError)):
        safe_eval(eq)


def test_equation_number_rules():
    assert not check_equation("30 + 30", [30, 100], 60)  # reused number
    assert not check_equation("30 + 100", [30, 100, 93], 130)  # number left out
    assert not check_equation("30 / 0", [30, 0], 1)  # division by zero is just wrong
    assert not check_equation("(" * 500 + "1" + ")" * 500, [1], 1)  # too long, no crash
    assert check_equation("(30 + 100) / 93 * 93", [30, 100, 93, 93], 130)


def test_countdown_rewards():
    comps = ["thinking</think>\n<answer>100 - 93 + 30 - 14</answer>",
             "<think>t</think>\n<answer>100 - 93 + 16</answer>",
             "no tags 100-93+16"]
    nums = ["30,100,93,14", [100, 93, 16], [100, 93, 16]]
    assert countdown_equation(comps, nums=nums, target=[23, 23, 23]) == [1.0, 1.0, 0.0]
    assert CountdownFormat()(comps) == [1.0, 1.0, 0.0]
    assert CountdownFormat(prepend_think=False)(comps) == [0.0, 1.0, 0.0]
    # exact: 7 + 1/125000 is 8e-6 from 7 (inside Mini-R1's 1e-5), and not 7
    near = "<answer>7 + 1 / (50 * 50 * 50)</answer>"
    assert countdown_equation([near], nums=[[7, 1, 50, 50, 50]], target=[7]) == [0.0]
    assert countdown_equation(comps[:1], nums=nums[:1], target=["23.0"]) == [1.0]
    with pytest.raises(ValueError, match="target 'x' is not a number"):
        countdown_equation(comps[:1], nums=nums[:1], target=["x"])


def test_countdown_generator_solvable_and_seeded():
    rows = generate_countdown(30, seed=3)
    assert rows == generate_countdown(30, seed=3)
    for r in rows:
        assert 3 <= len(r["nums"]) <= 4 and 1 <= r["target"] <= 100
        assert check_equation(r["solution"], r["nums"], r["target"])
        assert solve_countdown(r["nums"], r["target"]) is not None


def test_countdown_loader_and_solver(shared_data):
    # the rows as the built-in ``countdown`` prompt set reads them
    lines = (shared_data / "tasks" / "countdown_cd3_test.d1.jsonl").read_text().splitlines()
    rows = [countdown_columns(json.loads(x)) for x in lines if x.strip()]
    assert len(rows) == 256 and (rows[0]["nums"], rows[0]["target"]) == ([30, 100, 93], 23)
    for r in rows[:40]:
        eq = solve_countdown(r["nums"], r["target"])
        assert eq is not None and check_equation(eq, r["nums"], r["target"])
    assert solve_countdown([1, 1], 7) is None


def test_countdown_equation_mini_r1_check_is_the_originals():
    """check=mini_r1: Mini-R1's character set (digits, + - * / ( ) . whitespace), the digit runs
    as the numbers used, and a value within 1e-5 of the target; check=exact refuses the near
    miss, the decimal and the unary minus."""
    from rewards.countdown import countdown_equation

    cases = [  # (equation, nums, target, mini_r1, exact)
        ("(100 - 93) * 30 / 10", [30, 100, 93, 10], 21, 1.0, 1.0),    # right
        ("7 + 1 / (50 * 50 * 50)", [7, 1, 50, 50, 50], 7, 1.0, 0.0),  # 8e-6 away: inside 1e-5
        ("7 + 1 / (50 * 50)", [7, 1, 50, 50], 7, 0.0, 0.0),           # 4e-4 away: outside
        ("-(3) + 10", [3, 10], 7, 1.0, 0.0),                           # unary minus: Python's
        ("2 ** 3", [2, 3], 8, 1.0, 0.0),                               # ** is in the set
        ("1.5 * 2", [1, 5, 2], 3, 1.0, 0.0),                           # "1.5" reads as 1 and 5
        ("3 + 4", [3, 4], 8, 0.0, 0.0),                                # wrong value
        ("3 + 4 + 4", [3, 4], 11, 0.0, 0.0),                           # a number used twice
        ("abs(-7)", [7], 7, 0.0, 0.0),                                 # a name: not in the set
        ("7 = 7", [7, 7], 7, 0.0, 0.0),                                # '=' is not in the set
        ("7 / 0", [7, 0], 7, 0.0, 0.0),                                # division by zero
        ("2 ** 999", [2, 999], 8, 0.0, 0.0),                           # exponent over the cap
    ]
    comps = [f"r</think>\n<answer>{eq}</answer>" for eq, *_ in cases]
    nums = [c[1] for c in cases]
    target = [c[2] for c in cases]
    assert countdown_equation(comps, nums=nums, target=target, check="mini_r1") == \
        [c[3] for c in cases]
    assert countdown_equation(comps, nums=nums, target=target) == [c[4] for c in cases]
    tight = countdown_equation(comps[:2], nums=nums[:2], target=target[:2], check="mini_r1",
                               tolerance=1e-6)
    assert tight == [1.0, 0.0]                                         # 8e-6 > 1e-6
    with pytest.raises(ValueError, match="check='loose'; valid: exact, mini_r1"):
        countdown_equation(comps, nums=nums, target=target, check="loose")
