"""Rule rewards ported from Open-R1 (huggingface/open-r1, ``src/open_r1/rewards.py``).

Each reward is ``fn(completions, **columns) -> list[float | None]``. The math ones read the
reference from the ``answer`` column (``solution`` is accepted too, Open-R1's column name) and
the problem statement from the ``problem`` column when there is one: an answer that equals the
reference but not in the form the problem asks for ("Factor ...", "as a common fraction") is
wrong (``check_form``, on by default; see ``rewards.math_grader.required_forms``). The
parameter ``approx_rel_tol`` (default None: off) accepts a decimal within that relative
tolerance of a reference whose decimal never ends (1.299 for 3\\sqrt{3}/4 at 1e-3).
Where a port departs from Open-R1, the docstring says so.
"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Any, List, Optional, Sequence

from rewards.math_grader import (REWARD_OPTIONS, GraderOptions, extract_answer, gold_answer,
                                 gold_is_usable, is_equivalent)
from rewards.registry import REWARDS

Scores = List[Optional[float]]


def _gold_column(columns: dict, n: int) -> Sequence:
    for key in ("answer", "solution"):
        if key in columns and columns[key] is not None:
            gold = columns[key]
            if len(gold) != n:
                raise ValueError(f"column '{key}' has {len(gold)} rows for {n} completions")
            return gold
    raise ValueError("this reward needs the reference answers in an 'answer' (or 'solution') "
                     "column")


def _lengths(completions: Sequence[str], columns: dict) -> List[int]:
    """Token lengths from ``completion_lengths`` when given, else character lengths."""
    lengths = columns.get("completion_lengths")
    if lengths is None:
        return [len(c) for c in completions]
    if len(lengths) != len(completions):
        raise ValueError("completion_lengths must have one entry per completion")
    return [int(x) for x in lengths]


def _problem_column(columns: dict, n: int) -> Sequence:
    """The problem statements (``problem`` column) for the form check, or n Nones."""
    problems = columns.get("problem")
    if problems is None:
        return [None] * n
    if len(problems) != n:
        raise ValueError(f"column 'problem' has {len(problems)} rows for {n} completions")
    return problems


def _grader_options(check_form: bool, approx_rel_tol: Optional[float]) -> GraderOptions:
    return dataclasses.replace(REWARD_OPTIONS, check_form=bool(check_form),
                               approx_rel_tol=approx_rel_tol)


_UNANSWERED = object()         # what _correctness gives a completion with no answer to read


def _correctness(completions, gold, mode: str, timeout: float, problems=None,
                 options: Optional[GraderOptions] = None, unanswered: Any = False) -> List[Any]:
    out: List[Any] = []
    problems = [None] * len(completions) if problems is None else problems
    for text, g, problem in zip(completions, gold, problems):
        ref = gold_answer(g)
        if ref is None:
            out.append(None)
            continue
        pred = extract_answer(text, mode=mode)
        if pred is None:  # no answer: wrong, unless the reference itself is unusable
            out.append(unanswered if gold_is_usable(ref, timeout=timeout) else None)
        else:
            out.append(is_equivalent(pred, ref, timeout=timeout, options=options,
                                     problem=problem if isinstance(problem, str) else None))
    return out


@REWARDS.register("accuracy")
class Accuracy:
    r"""1.0 when the completion's final answer equals the reference, else 0.0; None when the
    reference cannot be parsed (or the check timed out).

    The answer is taken with ``rewards.math_grader.extract_answer(mode)`` (default ``auto``:
    ``<answer>`` tags, else the last ``\boxed{}``, else "the answer is"); equivalence is
    ``is_equivalent`` (normalised strings and exact numbers, then math-verify with ``timeout``).
    With a ``problem`` column the form it asks for is checked (``check_form``), and
    ``approx_rel_tol`` accepts decimal approximations of irrational references (module
    docstring). Source: Open-R1 ``accuracy_reward``, which lets math-verify find the first
    boxed/anchored LaTeX answer; we read the last boxed answer, as graders for MATH do.

    ``unanswered``: the score of a completion with no answer to read (default 0.0); ``None``
    makes it unscorable, so that a judge with this rule first (``rewards.judge``, ``rule``)
    reads exactly those.

    >>> Accuracy()([r"so \boxed{\frac{1}{2}}", r"\boxed{3}", "no answer"], answer=["0.5", "4", "1"])
    [1.0, 0.0, 0.0]
    >>> Accuracy()([r"\boxed{x^2-1}", r"\boxed{(x+1)(x-1)}"], answer=["(x-1)(x+1)"] * 2,
    ...            problem=["Factor $x^2-1$."] * 2)
    [0.0, 1.0]
    >>> Accuracy(unanswered=None)([r"\boxed{3}", "no answer"], answer=["4", "1"])
    [0.0, None]
    """

    def __init__(self, mode: str = "auto", timeout: float = 5.0, check_form: bool = True,
                 approx_rel_tol: Optional[float] = None, unanswered: Optional[float] = 0.0):
        self.mode = mode
        self.timeout = timeout
        self.options = _grader_options(check_form, approx_rel_tol)
        self.unanswered = None if unanswered is None else float(unanswered)

    def __call__(self, completions: Sequence[str], **columns) -> Scores:
        gold = _gold_column(columns, len(completions))
        problems = _problem_column(columns, len(completions))
        out: List[Optional[float]] = []
        for ok in _correctness(completions, gold, self.mode, self.timeout, problems,
                               self.options, _UNANSWERED):
            if ok is _UNANSWERED:
                out.append(self.unanswered)
            else:
                out.append(None if ok is None else float(ok))
        return out


_FORMAT = re.compile(r"<think>\n.*?\n</think>\n<answer>\n.*?\n</answer>", re.DOTALL)


@REWARDS.register("format")
def format_reward(completions: Sequence[str], **columns) -> Scores:
    r"""1.0 when the whole completion is ``<think>\n...\n</think>\n<answer>\n...\n</answer>``, else 0.

    Source: Open-R1 ``format_reward``. Departure: we match the whole string; Open-R1's
    ``re.MULTILINE`` lets any text after a line ending in ``</answer>`` pass.

    >>> format_reward(["<think>\nhm\n</think>\n<answer>\n4\n</answer>", "<answer>4</answer>"])
    [1.0, 0.0]
    """
    return [1.0 if _FORMAT.fullmatch(c) else 0.0 for c in completions]


@REWARDS.register("tag_count")
def tag_count(completions: Sequence[str], **columns) -> Scores:
    r"""0.25 for each of ``<think>\n``, ``\n</think>\n``, ``\n<answer>\n``, ``\n</answer>`` that
    appears exactly once (max 1.0). Source: Open-R1 ``tag_count_reward``.

    >>> tag_count(["<think>\nx\n</think>\n<answer>\n1\n</answer>", "<think>\nx", ""])
    [1.0, 0.25, 0.0]
    """
    tags = ("<think>\n", "\n</think>\n", "\n<answer>\n", "\n</answer>")
    return [0.25 * sum(c.count(t) == 1 for t in tags) for c in completions]


_STEPS = re.compile(r"(Step \d+:|^\d+\.|\n-|\n\*|First,|Second,|Next,|Finally,)", re.MULTILINE)


@REWARDS.register("reasoning_steps")
def reasoning_steps(completions: Sequence[str], **columns) -> Scores:
    r"""min(1, n / 3) where n counts step markers: "Step k:", numbered lines "k.", bullets
    ("\n-", "\n*") and "First,", "Second,", "Next,", "Finally,".

    Source: Open-R1 ``reasoning_steps_reward`` (3 steps for full reward). Departure: numbered
    lines count on every line (``re.MULTILINE``); Open-R1 only counts one at the very start.

    >>> reasoning_steps(["Step 1: a\nStep 2: b\nStep 3: c", "First, a. Finally, b.", "x"])
    [1.0, 0.6666666666666666, 0.0]
    """
    return [min(1.0, len(_STEPS.findall(c)) / 3.0) for c in completions]


@REWARDS.register("length")
class KimiLength:
    r"""Kimi 1.5 length reward, computed over the whole batch (batch-level).

    With L_i the length of completion i and min/max over the scorable items of the batch,
    lambda_i = 0.5 - (L_i - min) / (max - min); correct answers get lambda_i, wrong ones
    min(0, lambda_i); all 0.0 when max == min. None when the reference is unparseable.
    Lengths are token counts from the ``completion_lengths`` column when given, else characters
    (Open-R1 ``len_reward`` uses characters). Departure: Open-R1 counts an unparseable
    reference as correct; we return None. ``timeout`` (default 1 s) bounds each math-verify
    call inside, so one pathological answer cannot use up the whole batch's time limit.
    Source: Kimi k1.5 (arXiv 2501.12599), Open-R1.

    >>> KimiLength()([r"\boxed{1}", r"long wrong \boxed{2}", r"\boxed{1} long right..."],
    ...              answer=["1", "1", "1"], completion_lengths=[10, 30, 20])
    [0.5, -0.5, 0.0]
    """

    batch_level = True

    def __init__(self, mode: str = "auto", timeout: float = 1.0, check_form: bool = True,
                 approx_rel_tol: Optional[float] = None):
        self.mode = mode
        self.timeout = timeout
        self.options = _grader_options(check_form, approx_rel_tol)

    def __call__(self, completions: Sequence[str], **columns) -> Scores:
        gold = _gold_column(columns, len(completions))
        lengths = _lengths(completions, columns)
        correct = _correctness(completions, gold, self.mode, self.timeout,
                               _problem_column(columns, len(completions)), self.options)
        valid = [L for L, ok in zip(lengths, correct) if ok is not None]
        if not valid:
            return [None] * len(completions)
        lo, hi = min(valid), max(valid)
        out: Scores = []
        for L, ok in zip(lengths, correct):
            if ok is None:
                out.append(None)
            elif hi == lo:
                out.append(0.0)
            else:
                lam = 0.5 - (L - lo) / (hi - lo)
                out.append(lam if ok else min(0.0, lam))
        return out


@REWARDS.register("cosine")
class Cosine:
    r"""Cosine-scaled length reward (Yeo et al. 2025, "Demystifying Long Chain-of-Thought").

    With t = min(1, L / max_len) and c = cos(pi * t):
    correct: r = min_value_correct + 0.5 (max_value_correct - min_value_correct)(1 + c), so short
    correct answers get max_value_correct (1.0) and long ones min_value_correct (0.5);
    wrong: r = max_value_wrong + 0.5 (min_value_wrong - max_value_wrong)(1 + c), so short wrong
    answers get min_value_wrong (-1.0) and long ones max_value_wrong (-0.5): the model is pushed
    to think longer when it is wrong. None when the reference is unparseable.

    Defaults: Open-R1's function defaults (min_value_wrong=-1.0). Its training script default
    min_value_wrong=0.0 would give a short wrong answer 0.0 and a long wrong one -0.5, i.e.
    reward giving up early, against the paper. Departures: t is clipped at 1 (Open-R1 lets the
    cosine wrap past max_len); lengths are tokens from ``completion_lengths`` when given, else
    characters (Open-R1 uses characters).

    >>> Cosine(max_len=100)([r"\boxed{1}", r"\boxed{2}"], answer=["1", "1"],
    ...                     completion_lengths=[0, 100])
    [1.0, -0.5]
    """

    def __init__(self, min_value_wrong: float = -1.0, max_value_wrong: float = -0.5,
                 min_value_correct: float = 0.5, max_value_correct: float = 1.0,
                 max_len: int = 1000, mode: str = "auto", timeout: float = 5.0,
                 check_form: bool = True, approx_rel_tol: Optional[float] = None):
        if max_len <= 0:
            raise ValueError("max_len must be positive")
        self.min_value_wrong = min_value_wrong
        self.max_value_wrong = max_value_wrong
        self.min_value_correct = min_value_correct
        self.max_value_correct = max_value_correct
        self.max_len = max_len
        self.mode = mode
        self.timeout = timeout
        self.options = _grader_options(check_form, approx_rel_tol)

    def __call__(self, completions: Sequence[str], **columns) -> Scores:
        gold = _gold_column(columns, len(completions))
        lengths = _lengths(completions, columns)
        correct = _correctness(completions, gold, self.mode, self.timeout,
                               _problem_column(columns, len(completions)), self.options)
        out: Scores = []
        for L, ok in zip(lengths, correct):
            if ok is None:
                out.append(None)
                continue
            c = math.cos(math.pi * min(1.0, L / self.max_len))
            if ok:
                lo, hi = self.min_value_correct, self.max_value_correct
            else:
                lo, hi = self.max_value_wrong, self.min_value_wrong
            out.append(lo + 0.5 * (hi - lo) * (1.0 + c))
        return out


@REWARDS.register("repetition_penalty")
class RepetitionPenalty:
    r"""N-gram repetition penalty: r = max_penalty * (1 - unique_ngrams / total_ngrams).

    Words are ``text.lower().split()`` for ``language="en"``; ``language="zh"`` segments with
    ``jieba`` (install it yourself; a clear ImportError otherwise). 0.0 for an empty completion
    or one shorter than ``ngram_size`` words. Defaults: n=3, max_penalty=-1.0 (Open-R1's script
    defaults). Source: Open-R1 ``get_repetition_penalty_reward`` (Yeo et al. 2025, appendix).

    >>> RepetitionPenalty()(["a b c a b c", "a b c d", ""])
    [-0.25, 0.0, 0.0]
    """

    def __init__(self, ngram_size: int = 3, max_penalty: float = -1.0, language: str = "en"):
        if max_penalty > 0:
            raise ValueError(f"max_penalty {max_penalty} should not be positive")
        if ngram_size < 1:
            raise ValueError("ngram_size must be >= 1")
        if language not in ("en", "zh"):
            raise ValueError(f"language must be 'en' or 'zh', got {language!r}")
        if language == "zh":
            try:
                import jieba  # noqa: F401
            except ImportError as e:
                raise ImportError("repetition_penalty with language='zh' needs a Chinese word "
                                  "segmenter: pip install jieba") from e
        self.ngram_size = ngram_size
        self.max_penalty = max_penalty
        self.language = language

    def _words(self, text: str) -> List[str]:
        if self.language == "zh":
            import jieba

            return [w for w in jieba.lcut(text) if w.strip()]
        return text.lower().split()

    def __call__(self, completions: Sequence[str], **columns) -> Scores:
        out: Scores = []
        n = self.ngram_size
        for text in completions:
            words = self._words(text) if text else []
            if len(words) < n:
                out.append(0.0)
                continue
            grams = [tuple(words[i:i + n]) for i in range(len(words) - n + 1)]
            out.append((1.0 - len(set(grams)) / len(grams)) * self.max_penalty + 0.0)
        return out


@REWARDS.register("soft_overlong")
class SoftOverlong:
    r"""DAPO soft overlong punishment on the token length L (``completion_lengths`` column):
    0 when L <= max_length - buffer; ((max_length - buffer) - L) / buffer in the buffer zone
    (0 down to -1); -1 when L > max_length.

    Defaults: max_length=16384, buffer=4096 (Open-R1's script defaults; DAPO, arXiv 2503.14476,
    uses 20480 and 4096). Source: DAPO eq. 13, Open-R1 ``get_soft_overlong_punishment``.

    >>> SoftOverlong(max_length=100, buffer=20)(["", "", "", ""],
    ...                                           completion_lengths=[80, 90, 100, 101])
    [0.0, -0.5, -1.0, -1.0]
    """

    def __init__(self, max_length: int = 16384, buffer: int = 4096):
        if not 0 < buffer <= max_length:
            raise ValueError("need 0 < buffer <= max_length")
        self.max_length = max_length
        self.buffer = buffer

    def __call__(self, completions: Sequence[str], **columns) -> Scores:
        lengths = columns.get("completion_lengths")
        if lengths is None:
            raise ValueError("soft_overlong needs token lengths in a 'completion_lengths' column")
        if len(lengths) != len(completions):
            raise ValueError("completion_lengths must have one entry per completion")
        start = self.max_length - self.buffer
        out: Scores = []
        for L in lengths:
            if L <= start:
                out.append(0.0)
            elif L <= self.max_length:
                out.append((start - L) / self.buffer)
            else:
                out.append(-1.0)
        return out
