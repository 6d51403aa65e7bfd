"""Compact Knights-and-Knaves and Countdown: the tasks of the two CPU demos beyond addition.

The published tasks (Logic-RL's K&K puzzles in English, Mini-R1's Countdown with a free
``<think>`` chain) are far too long for the 1.12M-parameter demo model. These generators keep
the problems and the checking of the published tasks, shorten the text, and give the answer a
short, mechanical chain of thought that such a model can learn to write (a direct answer was
not learnt: README, "Two more CPU demos"):

- ``kk_compact``: a puzzle of :func:`rewards.knights_knaves.generate_puzzle` (the same
  statement types and the same uniqueness filter; 2-8 people) with people named A, B, C, ...
  and each statement written in symbols: ``B1`` "B is a knight", ``B0`` "B is a knave", ``!`` not,
  ``&`` and, ``|`` or, ``=`` if and only if, ``>`` implies. Prompt ``A:B0&C1;B:!A1;C:A1>B0?``,
  answer ``000:1,001:1,...,101:101</think>\\n<answer>101</answer>``: the search of
  :func:`kk_search` (every assignment in counting order, with the truths of the statements up to
  the first contradiction), then the roles in order (1 = knight). The reward ``kk_roles`` is 1.0
  for the right roles; :func:`kk_logic_rl_text` turns roles into Logic-RL's
  ``(1) A is a knight ...`` text, which ``kk_answer`` scores +2 when right.
- ``countdown_compact``: a problem of :func:`rewards.countdown.make_countdown` (numbers
  1..max_number, solvable by construction). Prompt ``3,5,2=16:``, answer
  ``3+5=8,8*2=16</think>\\n<answer>(3+5)*2</answer>``: the intermediate results of
  :func:`countdown_steps`, then the equation -- Mini-R1's format with the ``<think>`` that its
  prompt ends with, so ``countdown_format`` scores it 1 and ``countdown_equation`` scores the
  equation unchanged.

Both rows carry ``teacher``, the SFT demonstration: the gold answer except that, with
probability ``slip``, the teacher makes a systematic slip after a correct chain of thought
(K&K: the answer without the last person's role; Countdown: the equation written without
its last step, :func:`countdown_slip`), so that SFT imitates a mistake and a correctness reward
can unlearn it (as in the addition demo).
"""

from __future__ import annotations

import ast
import random
import re
from itertools import product
from typing import Dict, List, Optional, Sequence

from rewards.countdown import make_countdown
from rewards.knights_knaves import KNIGHT, KNAVE, evaluate, generate_puzzle, solution_text
from rewards.registry import REWARDS

KK_OPS = {"and": "&", "or": "|", "iff": "=", "imp": ">"}


def letters(n: int) -> List[str]:
    return [chr(ord("A") + i) for i in range(n)]


def kk_encode(stmt: tuple) -> str:
    """Symbols of a statement tuple of :mod:`rewards.knights_knaves`.

    >>> kk_encode(("imp", ("is", 0, "knight"), ("not", ("is", 2, "knave"))))
    'A1>!C0'
    """
    op = stmt[0]
    if op == "is":
        return f"{chr(ord('A') + stmt[1])}{int(stmt[2] == KNIGHT)}"
    if op == "not":
        return "!" + kk_encode(stmt[1])
    return kk_encode(stmt[1]) + KK_OPS[op] + kk_encode(stmt[2])


def kk_roles_text(roles: Sequence[str]) -> str:
    return "".join("1" if r == KNIGHT else "0" for r in roles)


def kk_search(statements: Sequence[tuple], n: int) -> List[str]:
    """The chain of thought of a compact K&K answer: the assignments in counting order
    (``000``, ``001``, ... with 1 = knight), each followed by the truth of the people's
    statements under it, in order, up to the first that contradicts its speaker's role (a
    knight's statement false, a knave's true); the first assignment without a contradiction is
    the solution.

    >>> kk_search([("is", 1, KNAVE), ("not", ("is", 0, KNIGHT))], 2)   # A:B0;B:!A1
    ['00:1', '01:01']
    """
    steps = []
    for roles in product("01", repeat=n):
        knights = [r == "1" for r in roles]
        truths = ""
        for i, s in enumerate(statements):
            truths += "1" if evaluate(s, knights) else "0"
            if truths[-1] != roles[i]:
                break
        steps.append("".join(roles) + ":" + truths)
        if truths == "".join(roles):
            return steps
    raise ValueError("the statements have no consistent assignment")


def make_kk(rng: random.Random, people: Sequence[int] = (3,), slip: float = 0.0) -> Dict:
    """One row: ``problem``, ``answer`` (the gold completion, e.g.
    ``000:110,...,101:101</think>\\n<answer>101</answer>``: the search of :func:`kk_search`,
    then the roles), ``roles`` (``101``), ``teacher``, ``names``, ``solution`` (the roles, as
    :class:`rewards.knights_knaves.KKAnswer` reads them)."""
    n = rng.choice(list(people))
    puzzle = generate_puzzle(n, seed=rng.getrandbits(48))
    names = letters(n)
    problem = ";".join(f"{names[i]}:{kk_encode(s)}" for i, s in
                       enumerate(puzzle["statements"])) + "?"
    roles = kk_roles_text(puzzle["solution"])
    think = ",".join(kk_search(puzzle["statements"], n)) + "</think>\n"
    taught = roles
    if slip > 0 and rng.random() < slip:
        taught = roles[:-1]                 # the last person's role left out: always wrong
    return {"problem": problem, "answer": f"{think}<answer>{roles}</answer>", "roles": roles,
            "teacher": f"{think}<answer>{taught}</answer>", "names": names,
            "solution": list(puzzle["solution"])}


def kk_logic_rl_text(answer: str, names: Sequence[str]) -> str:
    """A compact K&K answer as a Logic-RL completion (what ``kk_answer`` parses).

    >>> kk_logic_rl_text("10", ["A", "B"])
    '<think></think><answer>(1) A is a knight\\n(2) B is a knave</answer>'
    """
    roles = [KNIGHT if c == "1" else KNAVE for c in answer]
    return f"<think></think><answer>{solution_text(names, roles)}</answer>"


_ROLES = re.compile(r"[01]+")
_DIGITS = re.compile(r"\d+")
_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)


def kk_answer_roles(text: str) -> Optional[str]:
    """The roles a compact K&K completion answers: the digits of its first ``<answer>`` block,
    or of the whole text when it has none, when they are one run of 0/1 (other characters
    around it allowed); None otherwise: ``101 or 100`` and ``101,100`` are hedges, and a text
    without a block whose chain of thought starts ``000:...`` does not answer ``000``.

    >>> kk_answer_roles("000:1</think>\\n<answer>101</answer>"), kk_answer_roles("10x")
    ('101', '10')
    >>> kk_answer_roles("<answer>101 or 100</answer>"), kk_answer_roles("000:110,001:1")
    (None, None)
    """
    m = _ANSWER.search(text or "")
    runs = _DIGITS.findall(m.group(1) if m else (text or ""))
    return runs[0] if len(runs) == 1 and _ROLES.fullmatch(runs[0]) else None


@REWARDS.register("kk_roles")
def kk_roles(completions: Sequence[str], answer: Sequence[str], **_) -> List[Optional[float]]:
    """1.0 when the completion's roles (:func:`kk_answer_roles`) are the gold ones (``101``:
    A and C knights, B a knave), else 0.0 (the compact K&K demo). ``answer`` is the gold roles
    string or a gold completion (its ``<answer>`` block is read the same way).

    >>> kk_roles(["101", "100", "1011", "x", "000:110</think>\\n<answer>101</answer>"],
    ...          answer=["101"] * 5)
    [1.0, 0.0, 0.0, 0.0, 1.0]
    """
    out: List[Optional[float]] = []
    for text, gold in zip(completions, answer):
        got = kk_answer_roles(text)
        out.append(float(got is not None and got == kk_answer_roles(str(gold).strip())))
    return out


def countdown_steps(expr: str) -> List[str]:
    """The intermediate results of a parenthesised equation of positive integers, innermost and
    leftmost first (each step an exact integer).

    >>> countdown_steps("((3 + 5) * 2) - 4")
    ['3+5=8', '8*2=16', '16-4=12']
    """
    steps: List[str] = []

    def value(node) -> int:
        if isinstance(node, ast.Constant):
            return int(node.value)
        a, b = value(node.left), value(node.right)
        op = _AST_OPS[type(node.op)]
        v = {"+": a + b, "-": a - b, "*": a * b, "/": a // b if b and a % b == 0 else None}[op]
        if v is None:
            raise ValueError(f"{expr!r}: {a}/{b} is not an exact division")
        steps.append(f"{a}{op}{b}={v}")
        return v

    value(ast.parse(expr, mode="eval").body)
    return steps


_AST_OPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}


def make_countdown_row(rng: random.Random, numbers: Sequence[int] = (3,), max_number: int = 9,
                       max_target: int = 99, slip: float = 0.0) -> Dict:
    """One row: ``problem`` (``3,5,2=16:``), ``answer`` (the gold completion
    ``3+5=8,8*2=16</think>\\n<answer>(3+5)*2</answer>``: the intermediate results, then the
    equation), ``teacher``, ``nums``, ``target`` (the columns of ``countdown_equation``)."""
    nums, target, solution = make_countdown(rng, rng.choice(list(numbers)), max_number,
                                            (1, max_target))
    think = ",".join(countdown_steps(solution)) + "</think>\n"
    taught = solution
    if slip > 0 and rng.random() < slip:
        taught = countdown_slip(solution)
    solution, taught = solution.replace(" ", ""), taught.replace(" ", "")
    return {"problem": ",".join(map(str, nums)) + f"={target}:",
            "answer": f"{think}<answer>{solution}</answer>",
            "teacher": f"{think}<answer>{taught}</answer>", "nums": nums, "target": target}


def countdown_slip(expr: str) -> str:
    """The teacher's slip: the equation without its last step (the larger operand of the last
    operation; the left one on a tie), which leaves numbers unused and so always scores 0.

    >>> countdown_slip("((3 + 5) * 2) - 4"), countdown_slip("9 * (8 - 2)")
    ('(3 + 5) * 2', '8 - 2')
    """
    node = ast.parse(expr, mode="eval").body
    left, right = node.left, node.right
    size = lambda n: len(list(ast.walk(n)))  # noqa: E731
    return ast.get_source_segment(expr, right if size(right) > size(left) else left)
