"""Countdown: reach a target with the given numbers, each used once, and + - * /.

Rewards (Mini-R1, philschmid "mini-deepseek-r1"; TinyZero's countdown task):
  - ``countdown_format``: 1.0 when the completion (with ``<think>`` prepended, as Mini-R1's
    prompt ends in ``<think>``) is ``<think>...</think>\\n<answer>...</answer>``, else 0.0.
  - ``countdown_equation``: 1.0 when the first ``<answer>`` holds an equation that uses exactly
    the given numbers, each once, and equals the target; else 0.0. Two checks
    (``check``): ``exact`` (the default) allows only integers, + - * / and parentheses and asks
    for the target exactly, in fractions; ``mini_r1`` is Mini-R1's own check: the characters
    digits, + - * / ( ) . and whitespace, the numbers read as the runs of digits, and any value
    within ``tolerance`` (1e-5) of the target, so it also pays near misses such as
    ``7 + 1/(50*50*50)`` for 7. ``countdown_mini_r1`` uses ``mini_r1``.

The equation is evaluated by ``safe_eval`` on the Python AST with exact fractions: only integer
literals, the four binary operators and parentheses are accepted (no names, calls, powers,
unary minus, or Python ``eval``). Also: a seeded generator of solvable problems, a brute-force
solver, and a loader for d1's ``countdown_cd3_test.jsonl`` (``input`` "30,100,93", ``output``).
"""

from __future__ import annotations

import ast
import random
import re
from fractions import Fraction
from typing import Dict, List, Optional, Sequence, Tuple, Union

from rewards.registry import REWARDS

MAX_EQUATION_CHARS = 256
_OPS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b,
        ast.Mult: lambda a, b: a * b, ast.Div: lambda a, b: a / b}


class UnsafeExpression(ValueError):
    """The equation contains something other than integers, + - * / and parentheses."""


def _eval_node(node: ast.AST, used: List[int]) -> Fraction:
    if isinstance(node, ast.Expression):
        return _eval_node(node.body, used)
    if isinstance(node, ast.Constant) and type(node.value) is int:
        used.append(node.value)
        return Fraction(node.value)
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        left = _eval_node(node.left, used)
        right = _eval_node(node.right, used)
        if isinstance(node.op, ast.Div) and right == 0:
            raise ZeroDivisionError("division by zero")
        return _OPS[type(node.op)](left, right)
    raise UnsafeExpression(f"not allowed in an equation: {type(node).__name__}")


def safe_eval(equation: str) -> Tuple[Fraction, List[int]]:
    """Value of an arithmetic equation and the integers it uses, without ``eval``.

    Raises ``UnsafeExpression`` for anything but integer literals, + - * / and parentheses
    (``**``, names, calls, unary minus, floats), ``ZeroDivisionError``, or ``SyntaxError``.

    >>> safe_eval("(100 - 93) * 30 / 10")
    (Fraction(21, 1), [100, 93, 30, 10])
    """
    if len(equation) > MAX_EQUATION_CHARS:
        raise UnsafeExpression(f"equation longer than {MAX_EQUATION_CHARS} characters")
    if not re.fullmatch(r"[\d+\-*/()\s]+", equation):
        raise UnsafeExpression("only digits, + - * /, parentheses and spaces are allowed")
    if "**" in equation or "//" in equation:
        raise UnsafeExpression("only + - * / are allowed")
    tree = ast.parse(equation.strip(), mode="eval")
    used: List[int] = []
    value = _eval_node(tree, used)
    return value, used


def check_equation(equation: str, nums: Sequence[int], target: Union[int, float, str]) -> bool:
    """True when ``equation`` uses exactly ``nums`` (each once) and equals ``target`` exactly.

    Exact, not within Mini-R1's 1e-5: ``7 + 1/(50*50*50)`` is 8e-6 away from 7, and a policy
    would be paid for it.

    >>> check_equation("7 + 1 / (50 * 50 * 50)", [7, 1, 50, 50, 50], 7)
    False
    """
    try:
        goal = Fraction(str(target).strip())
    except ValueError:
        raise ValueError(f"countdown: target {target!r} is not a number") from None
    try:
        value, used = safe_eval(equation)
    except (UnsafeExpression, SyntaxError, ZeroDivisionError, ValueError, RecursionError,
            MemoryError):
        return False
    if sorted(used) != sorted(int(n) for n in nums):
        return False
    return value == goal


MINI_R1_CHARS = re.compile(r"[\d+\-*/().\s]+")      # Mini-R1's allowed_pattern, whole string
MAX_POWER = 64                                       # |exponent| cap for ** (Python eval's power)


def _eval_mini_r1(node: ast.AST) -> Fraction:
    """Python's value of what Mini-R1's character set lets through (+ - * / // ** and unary
    signs on integer or decimal literals), in exact fractions; anything else raises."""
    if isinstance(node, ast.Expression):
        return _eval_mini_r1(node.body)
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return Fraction(str(node.value))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.UAdd, ast.USub)):
        v = _eval_mini_r1(node.operand)
        return -v if isinstance(node.op, ast.USub) else v
    if isinstance(node, ast.BinOp):
        a, b = _eval_mini_r1(node.left), _eval_mini_r1(node.right)
        if isinstance(node.op, (ast.Div, ast.FloorDiv)) and b == 0:
            raise ZeroDivisionError("division by zero")
        if type(node.op) in _OPS:
            return _OPS[type(node.op)](a, b)
        if isinstance(node.op, ast.FloorDiv):
            return Fraction(a // b)
        if isinstance(node.op, ast.Pow) and b.denominator == 1 and abs(b) <= MAX_POWER \
                and not (a == 0 and b < 0):
            return a ** int(b)
    raise UnsafeExpression(f"not allowed in an equation: {type(node).__name__}")


def check_equation_mini_r1(equation: str, nums: Sequence[int], target: Union[int, float, str],
                           tolerance: float = 1e-5) -> bool:
    """Mini-R1's equation check: only digits, + - * / ( ) . and whitespace; the runs of digits
    are the numbers used and must be ``nums`` (each once); the value must lie within
    ``tolerance`` of the target. Evaluated on the AST, without ``eval``; a power whose exponent
    is not a whole number up to 64 in size scores 0 (Python would compute it).

    >>> check_equation_mini_r1("7 + 1 / (50 * 50 * 50)", [7, 1, 50, 50, 50], 7)
    True
    >>> check_equation_mini_r1("7 + 1 / (50 * 50)", [7, 1, 50, 50], 7)
    False
    """
    try:
        goal = Fraction(str(target).strip())
    except ValueError:
        raise ValueError(f"countdown: target {target!r} is not a number") from None
    if len(equation) > MAX_EQUATION_CHARS or not MINI_R1_CHARS.fullmatch(equation):
        return False
    if sorted(int(t) for t in re.findall(r"\d+", equation)) != sorted(int(n) for n in nums):
        return False
    try:
        value = _eval_mini_r1(ast.parse(equation.strip(), mode="eval"))
    except (UnsafeExpression, SyntaxError, ZeroDivisionError, ValueError, RecursionError,
            MemoryError, OverflowError):
        return False
    return abs(value - goal) < Fraction(tolerance)


CHECKS = ("exact", "mini_r1")


def _nums(x) -> List[int]:
    if isinstance(x, str):
        return [int(t) for t in x.split(",") if t.strip()]
    return [int(t) for t in x]


_FORMAT = re.compile(r"^<think>([^<]*(?:<(?!/?think>)[^<]*)*)</think>\n<answer>([\s\S]*?)</answer>$",
                     re.DOTALL)
_ANSWER = re.compile(r"<answer>(.*?)</answer>")


def _with_think(text: str, prepend: bool) -> str:
    return "<think>" + text if prepend and not text.startswith("<think>") else text


@REWARDS.register("countdown_format")
class CountdownFormat:
    """1.0 for ``<think>...</think>\\n<answer>...</answer>`` (no nested think tags), else 0.0.

    ``prepend_think`` (default True) adds the ``<think>`` that Mini-R1's prompt ends with, unless
    the completion already starts with it. Source: Mini-R1 ``format_reward_func``.

    >>> CountdownFormat()(["reason</think>\\n<answer>1+2</answer>", "<answer>1+2</answer>"])
    [1.0, 0.0]
    """

    def __init__(self, prepend_think: bool = True):
        self.prepend_think = prepend_think

    def __call__(self, completions: Sequence[str], **columns) -> List[Optional[float]]:
        return [1.0 if _FORMAT.search(_with_think(c, self.prepend_think)) else 0.0
                for c in completions]


@REWARDS.register("countdown_equation")
def countdown_equation(completions: Sequence[str], nums: Sequence, target: Sequence,
                       check: str = "exact", tolerance: float = 1e-5,
                       **columns) -> List[Optional[float]]:
    """1.0 when the first ``<answer>`` equation is valid and hits the target, else 0.0.

    Columns: ``nums`` (a list of ints or "30,100,93") and ``target``. ``check``: ``exact``
    (:func:`check_equation`) or ``mini_r1`` (:func:`check_equation_mini_r1`, within
    ``tolerance``), set as reward params. Source: Mini-R1 ``equation_reward_func`` (which uses
    a regex and ``eval``; both checks here read the AST).

    >>> countdown_equation(["<answer>(100 - 93) * 30 / 10</answer>", "<answer>100-93</answer>"],
    ...                    nums=[[30, 100, 93, 10]] * 2, target=[21, 7])
    [1.0, 0.0]
    """
    if check not in CHECKS:
        raise ValueError(f"countdown_equation: check={check!r}; valid: {', '.join(CHECKS)}")
    if check == "mini_r1" and not tolerance > 0:
        raise ValueError(f"countdown_equation: tolerance={tolerance} must be > 0")
    out: List[Optional[float]] = []
    for text, ns, tgt in zip(completions, nums, target):
        m = _ANSWER.search(text)
        if not m:
            out.append(0.0)
            continue
        eq = m.group(1).strip()
        ok = check_equation(eq, _nums(ns), tgt) if check == "exact" else \
            check_equation_mini_r1(eq, _nums(ns), tgt, tolerance)
        out.append(1.0 if ok else 0.0)
    return out


# ------------------------------------------------------------------------ generator, solver


def solve_countdown(nums: Sequence[int], target: Union[int, float]) -> Optional[str]:
    """An equation reaching ``target`` with all of ``nums`` (each once), or None. Brute force;
    fine for up to 5 numbers.

    >>> solve_countdown([30, 100, 93], 23) is not None
    True
    """
    goal = Fraction(target).limit_denominator(10**6)
    seen = set()

    def rec(items):
        if len(items) == 1:
            return items[0][1] if items[0][0] == goal else None
        key = tuple(sorted(v for v, _ in items))
        if key in seen:
            return None
        seen.add(key)
        for i in range(len(items)):
            for j in range(len(items)):
                if i == j:
                    continue
                (a, ea), (b, eb) = items[i], items[j]
                rest = [items[k] for k in range(len(items)) if k not in (i, j)]
                cands = [(a + b, f"({ea} + {eb})")] if i < j else []
                cands += [(a - b, f"({ea} - {eb})")]
                if i < j:
                    cands.append((a * b, f"({ea} * {eb})"))
                if b != 0:
                    cands.append((a / b, f"({ea} / {eb})"))
                for v, e in cands:
                    found = rec(rest + [(v, e)])
                    if found:
                        return found
        return None

    expr = rec([(Fraction(n), str(n)) for n in nums])
    if expr and expr.startswith("(") and expr.endswith(")"):
        expr = expr[1:-1]
    return expr


def generate_countdown(num_problems: int, seed: int = 0, n_numbers: Union[int, Sequence[int]] = (3, 4),
                       max_number: int = 99, target_range=(1, 100)) -> List[Dict[str, object]]:
    """Seeded solvable problems ``{"nums": [...], "target": int, "solution": str}``.

    Each problem is built by combining random numbers with random operations (exact integer
    division only), so it is solvable by construction; ``solution`` is that equation.

    >>> rows = generate_countdown(2, seed=1)
    >>> all(check_equation(r["solution"], r["nums"], r["target"]) for r in rows)
    True
    """
    rng = random.Random(f"countdown-{seed}")
    counts = [n_numbers] if isinstance(n_numbers, int) else list(n_numbers)
    rows: List[Dict[str, object]] = []
    while len(rows) < num_problems:
        nums, target, expr = make_countdown(rng, rng.choice(counts), max_number, target_range)
        rows.append({"nums": nums, "target": target, "solution": expr})
    return rows


def make_countdown(rng: random.Random, k: int, max_number: int = 99,
                   target_range=(1, 100)) -> Tuple[List[int], int, str]:
    """``(nums, target, solution)``: ``k`` numbers in 1..max_number combined by random
    operations (exact integer division only) into a target in ``target_range``, redrawn until
    it falls there; ``nums`` shuffled."""
    while True:
        nums = [rng.randint(1, max_number) for _ in range(k)]
        items = [(n, str(n)) for n in nums]
        while len(items) > 1:
            i, j = rng.sample(range(len(items)), 2)
            (a, ea), (b, eb) = items[i], items[j]
            ops = ["+", "*"] + (["-"] if a > b else []) + (["/"] if b and a % b == 0 else [])
            op = rng.choice(ops)
            v = {"+": a + b, "-": a - b, "*": a * b, "/": a // b if b else 0}[op]
            rest = [items[t] for t in range(len(items)) if t not in (i, j)]
            items = rest + [(v, f"({ea} {op} {eb})")]
        value, expr = items[0]
        if target_range[0] <= value <= target_range[1]:
            expr = expr[1:-1] if expr.startswith("(") else expr
            rng.shuffle(nums)
            return nums, int(value), expr
