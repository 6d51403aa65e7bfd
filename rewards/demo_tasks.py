"""Compact Knights-and-Knaves and Countdown: the tasks of the two CPU demos beyond addition.

The published tasks (Logic-RL's K&K puzzles in English, Mini-R1's Countdown with a
``<think>`` chain) are far too long for the 1.12M-parameter demo model. These generators keep
the problems and the checking of the published tasks and shorten only the text:

- ``kk_compact``: a puzzle of :func:`rewards.knights_knaves.generate_puzzle` (the same
  statement types and the same uniqueness filter; 2-8 people) with people named A, B, C, ...
  and each statement written in symbols: ``B1`` "B is a knight", ``B0`` "B is a knave", ``!`` not,
  ``&`` and, ``|`` or, ``=`` if and only if, ``>`` implies. Prompt
  ``A:B0&C1;B:!A1;C:A1>B0?``, answer ``101`` (the roles in order, 1 = knight). The reward
  ``kk_roles`` is 1.0 for the right roles; :func:`kk_logic_rl_text` turns an answer into
  Logic-RL's ``(1) A is a knight ...`` text, which ``kk_answer`` scores +2 when right.
- ``countdown_compact``: a problem of :func:`rewards.countdown.make_countdown` (numbers
  1..max_number, solvable by construction). Prompt ``3,5,2=16:``, answer
  ``<answer>(3+5)*2</answer>``: no ``<think>`` block, so Mini-R1's ``countdown_equation``
  scores it unchanged (its ``countdown_format`` reward does not apply).

Both rows carry ``teacher``, the SFT demonstration: the gold answer except that, with
probability ``slip``, the teacher makes a systematic slip (K&K: the last person's role flipped;
Countdown: every parenthesis dropped, which changes the value whenever they mattered), so that
SFT imitates a mistake and a correctness reward can unlearn it (as in the addition demo).
"""

from __future__ import annotations

import random
import re
from typing import Dict, List, Optional, Sequence

from rewards.countdown import check_equation, make_countdown
from rewards.knights_knaves import KNIGHT, KNAVE, generate_puzzle, solution_text
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


def make_kk(rng: random.Random, people: Sequence[int] = (3,), slip: float = 0.0) -> Dict:
    """One row: ``problem``, ``answer`` (e.g. ``101``), ``teacher``, ``names``, ``solution``
    (the roles, as :class:`rewards.knights_knaves.KKAnswer` reads them)."""
    n = rng.choice(list(people))
    puzzle = generate_puzzle(n, seed=rng.getrandbits(48))
    names = letters(n)
    problem = ";".join(f"{names[i]}:{kk_encode(s)}" for i, s in
                       enumerate(puzzle["statements"])) + "?"
    answer = kk_roles_text(puzzle["solution"])
    teacher = answer
    if slip > 0 and rng.random() < slip:
        teacher = answer[:-1] + ("0" if answer[-1] == "1" else "1")
    return {"problem": problem, "answer": answer, "teacher": teacher, "names": names,
            "solution": list(puzzle["solution"])}


def kk_logic_rl_text(answer: str, names: Sequence[str]) -> str:
    """A compact K&K answer as a Logic-RL completion (what ``kk_answer`` parses).

    >>> kk_logic_rl_text("10", ["A", "B"])
    '<think></think><answer>(1) A is a knight\\n(2) B is a knave</answer>'
    """
    roles = [KNIGHT if c == "1" else KNAVE for c in answer]
    return f"<think></think><answer>{solution_text(names, roles)}</answer>"


_ROLES = re.compile(r"[01]+")


@REWARDS.register("kk_roles")
def kk_roles(completions: Sequence[str], answer: Sequence[str], **_) -> List[Optional[float]]:
    """1.0 when the first run of 0/1 digits in the completion is the gold roles string
    (``101``: A and C knights, B a knave), else 0.0 (the compact K&K demo).

    >>> kk_roles(["101", "100", "1011", "x"], answer=["101"] * 4)
    [1.0, 0.0, 0.0, 0.0]
    """
    out: List[Optional[float]] = []
    for text, gold in zip(completions, answer):
        m = _ROLES.search(text or "")
        out.append(float(m is not None and m.group(0) == str(gold).strip()))
    return out


def make_countdown_row(rng: random.Random, numbers: Sequence[int] = (3,), max_number: int = 9,
                       max_target: int = 99, slip: float = 0.0) -> Dict:
    """One row: ``problem`` (``3,5,2=16:``), ``answer`` (``<answer>(3+5)*2</answer>``),
    ``teacher``, ``nums``, ``target`` (the columns of ``countdown_equation``)."""
    nums, target, solution = make_countdown(rng, rng.choice(list(numbers)), max_number,
                                            (1, max_target))
    solution = solution.replace(" ", "")
    taught = solution
    if slip > 0 and rng.random() < slip:
        taught = solution.replace("(", "").replace(")", "")
    return {"problem": ",".join(map(str, nums)) + f"={target}:",
            "answer": f"<answer>{solution}</answer>", "teacher": f"<answer>{taught}</answer>",
            "nums": nums, "target": target}


def countdown_slip_is_wrong(row: Dict) -> bool:
    """Whether the row's teacher demonstration misses the target."""
    eq = row["teacher"][len("<answer>"):-len("</answer>")]
    return not check_equation(eq, row["nums"], row["target"])
