"""Knights and Knaves: Logic-RL's rewards, an answer parser, and a procedural puzzle generator.

Knights always tell the truth, knaves always lie. A puzzle gives each inhabitant one statement;
the solution is the unique knight/knave assignment under which every knight's statement is true
and every knave's is false.

Rewards (Logic-RL, Xie et al. 2025, arXiv 2502.14768; Unakar/Logic-RL ``kk.py``):
  - ``kk_format``: +1 when ``<think>``, ``</think>``, ``<answer>``, ``</answer>`` each appear
    exactly once and in that order, else -1.
  - ``kk_answer``: +2 when every inhabitant's role in the ``<answer>`` block is right, -1.5 when
    the block parses but is wrong, -2 when it cannot be parsed or the format is broken.

The generator (``generate_puzzle``) is seeded, supports 2..8 people, and keeps a puzzle only when
a brute-force solver over all 2^n assignments finds exactly one solution.
"""

from __future__ import annotations

import random
import re
from itertools import product
from typing import Dict, List, Optional, Sequence, Tuple, Union

from rewards.registry import REWARDS

KNIGHT, KNAVE = "knight", "knave"

NAMES = [
    "Zoey", "Oliver", "Emma", "Liam", "Ava", "Noah", "Mia", "Ethan", "Sofia", "Lucas", "Chloe",
    "Mason", "Aria", "Logan", "Ella", "Jacob", "Grace", "Henry", "Lily", "Jack", "Nora", "Owen",
    "Ruby", "Leo", "Zoe", "Isaac", "Hazel", "Aiden", "Violet", "Samuel", "Stella", "David",
]

# ------------------------------------------------------------------------------ statements
# A statement is a nested tuple: ("is", i, role) | ("and"|"or"|"iff"|"imp", s1, s2) | ("not", s)


def evaluate(stmt: tuple, knights: Sequence[bool]) -> bool:
    """Truth of a statement under an assignment (``knights[i]`` True when person i is a knight)."""
    op = stmt[0]
    if op == "is":
        return knights[stmt[1]] == (stmt[2] == KNIGHT)
    if op == "not":
        return not evaluate(stmt[1], knights)
    a, b = evaluate(stmt[1], knights), evaluate(stmt[2], knights)
    if op == "and":
        return a and b
    if op == "or":
        return a or b
    if op == "iff":
        return a == b
    if op == "imp":
        return (not a) or b
    raise ValueError(f"unknown statement op {op!r}")


def render(stmt: tuple, names: Sequence[str]) -> str:
    """English text of a statement."""
    op = stmt[0]
    if op == "is":
        return f"{names[stmt[1]]} is a {stmt[2]}"
    if op == "not":
        return f"it is not the case that {render(stmt[1], names)}"
    a, b = render(stmt[1], names), render(stmt[2], names)
    return {"and": f"{a} and {b}", "or": f"{a} or {b}", "iff": f"{a} if and only if {b}",
            "imp": f"if {a} then {b}"}[op]


def solve(statements: Sequence[tuple], n: int) -> List[Tuple[bool, ...]]:
    """All assignments consistent with the statements (person i's statement true iff knight)."""
    return [kn for kn in product((True, False), repeat=n)
            if all(evaluate(s, kn) == kn[i] for i, s in enumerate(statements))]


def _random_statement(rng: random.Random, speaker: int, n: int) -> tuple:
    def atom() -> tuple:
        return ("is", rng.randrange(n), rng.choice((KNIGHT, KNAVE)))

    kind = rng.random()
    if kind < 0.4:
        who = rng.choice([j for j in range(n) if j != speaker]) if n > 1 else speaker
        return ("is", who, rng.choice((KNIGHT, KNAVE)))
    if kind < 0.5:
        return ("not", atom())
    a, b = atom(), atom()
    while b[1] == a[1]:
        b = atom()
    return (rng.choice(("and", "or", "iff", "imp")), a, b)


def solution_text(names: Sequence[str], roles: Sequence[str]) -> str:
    """Logic-RL's solution format: ``(1) Zoey is a knave\\n(2) Oliver is a knight``."""
    return "\n".join(f"({i + 1}) {name} is a {role}" for i, (name, role) in
                     enumerate(zip(names, roles)))


def generate_puzzle(n_people: int, seed: int, max_tries: int = 10000) -> Dict[str, object]:
    """A puzzle with a unique solution, as a row::

        {"quiz": str, "names": [str], "solution": ["knight"|"knave"], "solution_text": str,
         "statements": [tuple]}

    Seeded: the same (n_people, seed) always gives the same puzzle.

    >>> row = generate_puzzle(3, seed=0)
    >>> len(solve(row["statements"], 3))
    1
    """
    if not 2 <= n_people <= 8:
        raise ValueError("n_people must be in 2..8")
    rng = random.Random(f"kk-{n_people}-{seed}")
    names = rng.sample(NAMES, n_people)
    for _ in range(max_tries):
        statements = [_random_statement(rng, i, n_people) for i in range(n_people)]
        sols = solve(statements, n_people)
        if len(sols) == 1:
            roles = [KNIGHT if k else KNAVE for k in sols[0]]
            lines = [f'{names[i]} said: "{_capitalize(render(s, names))}."'
                     for i, s in enumerate(statements)]
            quiz = (f"A very special island is inhabited only by knights and knaves. Knights "
                    f"always tell the truth, and knaves always lie. You meet {n_people} "
                    f"inhabitants: {_join(names)}. " + " ".join(lines) +
                    " So who is a knight and who is a knave?")
            return {"quiz": quiz, "names": list(names), "solution": roles,
                    "solution_text": solution_text(names, roles), "statements": statements}
    raise RuntimeError(f"no unique puzzle found in {max_tries} tries")


def generate_puzzles(num: int, n_people: Union[int, Sequence[int]] = (2, 3, 4, 5, 6, 7, 8),
                     seed: int = 0) -> List[Dict[str, object]]:
    """``num`` puzzles cycling through the people counts in ``n_people``."""
    counts = [n_people] if isinstance(n_people, int) else list(n_people)
    return [generate_puzzle(counts[i % len(counts)], seed=seed * 1_000_003 + i)
            for i in range(num)]


def _capitalize(s: str) -> str:
    return s[:1].upper() + s[1:]


def _join(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


# --------------------------------------------------------------------------------- parsing

_TAGS = ("<think>", "</think>", "<answer>", "</answer>")
_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)


def has_valid_structure(text: str) -> bool:
    """Each of the four tags exactly once, in the order think, /think, answer, /answer."""
    if any(text.count(t) != 1 for t in _TAGS):
        return False
    pos = [text.find(t) for t in _TAGS]
    return pos == sorted(pos)


def parse_answer(answer_text: str, names: Sequence[str]) -> Optional[Dict[str, str]]:
    """Roles stated in an answer like ``(1) Zoey is a knave (2) Oliver is a knight``.

    None unless every name has a "<name> is a knight|knave" statement and the total number of
    "knight"/"knave" mentions equals the number of people (Logic-RL's rule, so "Zoey is a knight
    or a knave" does not pass).

    >>> parse_answer("(1) Zoey is a knave\\n(2) Oliver is a knight", ["Zoey", "Oliver"])
    {'Zoey': 'knave', 'Oliver': 'knight'}
    >>> parse_answer("Zoey is a knave", ["Zoey", "Oliver"]) is None
    True
    """
    low = answer_text.lower()
    if low.count(KNIGHT) + low.count(KNAVE) != len(names):
        return None
    roles: Dict[str, str] = {}
    for name in names:
        m = re.search(rf"\b{re.escape(name)}\b\s+is\s+an?\s+(knight|knave)\b", answer_text,
                      re.IGNORECASE)
        if m is None:
            return None
        roles[name] = m.group(1).lower()
    return roles


def _gold_roles(solution, names) -> Tuple[List[str], Dict[str, str]]:
    if isinstance(solution, dict):
        return list(solution), {k: v.lower() for k, v in solution.items()}
    if isinstance(solution, str):
        pairs = re.findall(r"\(\d+\)\s*(\w+)\s+is\s+an?\s+(knight|knave)\b", solution,
                           re.IGNORECASE)
        if not pairs:
            raise ValueError(f"cannot read a knights-and-knaves solution from {solution!r}")
        return [p[0] for p in pairs], {p[0]: p[1].lower() for p in pairs}
    if names is None:
        raise ValueError("a list solution needs a 'names' column")
    roles = [KNIGHT if r is True else KNAVE if r is False else str(r).lower() for r in solution]
    return list(names), dict(zip(names, roles))


@REWARDS.register("kk_format")
def kk_format(completions: Sequence[str], **columns) -> List[Optional[float]]:
    """+1.0 when think/answer tags appear once each and in order, else -1.0 (Logic-RL).

    >>> kk_format(["<think>a</think><answer>b</answer>", "<answer>b</answer><think>a</think>"])
    [1.0, -1.0]
    """
    return [1.0 if has_valid_structure(c) else -1.0 for c in completions]


@REWARDS.register("kk_answer")
class KKAnswer:
    """+2 all roles right, -1.5 parsed but wrong, -2 unparseable (Logic-RL answer score).

    Columns: ``solution`` (a list of roles aligned with ``names``, a {name: role} dict, or
    Logic-RL's "(1) Zoey is a knave ..." text) and ``names`` when ``solution`` is a list. The
    answer is the last ``<answer>`` block. With ``require_format`` (default, as in Logic-RL) a
    completion whose tags are broken scores -2 without being parsed.

    >>> KKAnswer()(["<think>.</think><answer>(1) A is a knight (2) B is a knave</answer>",
    ...             "<think>.</think><answer>(1) A is a knave (2) B is a knave</answer>",
    ...             "<think>.</think><answer>no idea</answer>"],
    ...            solution=[["knight", "knave"]] * 3, names=[["A", "B"]] * 3)
    [2.0, -1.5, -2.0]
    """

    def __init__(self, correct: float = 2.0, wrong: float = -1.5, unparseable: float = -2.0,
                 require_format: bool = True):
        self.correct, self.wrong, self.unparseable = correct, wrong, unparseable
        self.require_format = require_format

    def __call__(self, completions: Sequence[str], **columns) -> List[Optional[float]]:
        solutions = columns.get("solution")
        if solutions is None:
            raise ValueError("kk_answer needs a 'solution' column")
        names_col = columns.get("names") or [None] * len(completions)
        out: List[Optional[float]] = []
        for text, sol, names in zip(completions, solutions, names_col):
            order, gold = _gold_roles(sol, names)
            if self.require_format and not has_valid_structure(text):
                out.append(self.unparseable)
                continue
            blocks = _ANSWER.findall(text)
            pred = parse_answer(blocks[-1], order) if blocks else None
            if pred is None:
                out.append(self.unparseable)
            else:
                out.append(self.correct if pred == gold else self.wrong)
        return out
