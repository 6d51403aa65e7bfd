"""Multi-digit arithmetic: the synthetic task of the CPU demo.

A prompt is ``"47+385="`` and the expected response is the number, ``"432"``, followed by the
end-of-turn token. With ``reverse=True`` the answer is written least-significant digit first
(``"234"``, sign kept in front): the order in which carries are computed, which lets a small
transformer learn addition far faster (Lee et al. 2023, "Teaching Arithmetic to Small
Transformers"; Zhou et al. 2024). ``min_digits`` lets operands have fewer digits than ``digits``. A tiny model trained from scratch gets partly right after a short SFT
warm-up, which leaves GRPO room to show a gain on held-out problems within minutes on a CPU.

Problems are generated from a seed, so the training stream and the held-out set are
reproducible and disjoint (the held-out set uses its own seed and is filtered out of training).
"""

from __future__ import annotations

import random
import re
from typing import Dict, Iterator, List, Optional

from rewards.answer_value import first_span
from rewards.registry import REWARDS

_OPS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b}


def format_answer(value: int, reverse: bool = False) -> str:
    """The gold response text: ``str(value)``, or its digits reversed (sign first)."""
    text = str(abs(value))
    return ("-" if value < 0 else "") + (text[::-1] if reverse else text)


def _operand(rng: random.Random, digits: int, min_digits: Optional[int]) -> int:
    if min_digits is not None and min_digits < digits:
        digits = rng.randint(min_digits, digits)
    return rng.randrange(10 ** (digits - 1) if digits > 1 else 0, 10 ** digits)


def add_without_carry(a: int, b: int) -> int:
    """The classic slip: add column by column and forget every carry (``47+38`` -> 75); the
    leftmost column is written in full (``96+78`` -> 164)."""
    out, place = 0, 1
    while a >= 10 or b >= 10:
        out += ((a % 10 + b % 10) % 10) * place
        a, b, place = a // 10, b // 10, place * 10
    return out + (a + b) * place


def make_problem(rng: random.Random, digits: int = 3, ops: str = "+", reverse: bool = False,
                 min_digits: Optional[int] = None, slip: float = 0.0) -> Dict[str, str]:
    """One row: ``problem``, the gold ``answer`` and ``teacher``, a demonstration for SFT that
    equals the answer except that, with probability ``slip``, an addition forgets its carries
    (an imperfect teacher: SFT imitates the slip, a correctness reward does not reward it)."""
    a = _operand(rng, digits, min_digits)
    b = _operand(rng, digits, min_digits)
    op = rng.choice(ops)
    value = _OPS[op](a, b)
    taught = value
    if slip > 0 and rng.random() < slip and op == "+":
        taught = add_without_carry(a, b)
    return {"problem": f"{a}{op}{b}=", "answer": format_answer(value, reverse),
            "teacher": format_answer(taught, reverse)}


def generate(n: int, seed: int, digits: int = 3, ops: str = "+",
             exclude: Optional[set] = None, **options) -> List[Dict[str, str]]:
    """``n`` distinct problems from ``seed``, none of whose text is in ``exclude``;
    ``options`` (reverse, min_digits, slip) go to :func:`make_problem`."""
    rng = random.Random(seed)
    seen = set(exclude or ())
    rows: List[Dict[str, str]] = []
    budget = 50 * n + 1000
    while len(rows) < n and budget:
        budget -= 1
        row = make_problem(rng, digits, ops, **options)
        if row["problem"] in seen:
            continue
        seen.add(row["problem"])
        rows.append(row)
    if len(rows) < n:
        raise ValueError(f"only {len(rows)} distinct {digits}-digit problems exist for ops "
                         f"'{ops}' (asked for {n})")
    return rows


def stream(seed: int, digits: int = 3, ops: str = "+",
           exclude: Optional[set] = None, **options) -> Iterator[Dict[str, str]]:
    rng = random.Random(seed)
    while True:
        row = make_problem(rng, digits, ops, **options)
        if not exclude or row["problem"] not in exclude:
            yield row


@REWARDS.register("arithmetic")
def arithmetic_reward(completions: List[str], answer: List[str], **_) -> List[Optional[float]]:
    """1.0 when the completion's first number, read whole, is an integer written exactly as the
    gold answer (digits compared as text: the reversed format keeps its leading zeros), else
    0.0. A number that goes on as a fraction, decimal, power or expression (``432/2``,
    ``432.5``, ``432^2``, ``432 - 1``) is not the integer it starts with, and a list
    (``432 or 431``) is a hedge.

    >>> arithmetic_reward(["432", "431", "no", "432/2", "432 is it", "432 or 431"],
    ...                   answer=["432"] * 6)
    [1.0, 0.0, 0.0, 0.0, 1.0, 0.0]
    """
    out: List[Optional[float]] = []
    for text, gold in zip(completions, answer):
        first = first_span(text) or ""
        out.append(float(re.fullmatch(r"-?\d+", first) is not None and
                         first == str(gold).strip()))
    return out
