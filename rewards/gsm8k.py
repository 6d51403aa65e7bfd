"""GSM8K: the reference after ``#### ``, the answer in free text, and two rewards.

  - ``gsm8k_accuracy``: 1.0 when the value of the completion's final answer equals the
    reference value exactly, else 0.0; None when the reference has no single number. Both are
    read as whole expressions by :mod:`rewards.answer_value` (``2/3`` is two thirds, never 2;
    ``2 or 3`` is no value), so no prefix of a fraction, decimal or power is ever paid.
  - ``gsm8k_format``: +1.0 for ``<think>...</think>`` followed by ``<answer>...</answer>`` whose
    answer contains a number, else -1.0. This is mindrl's own shape check, not the GSM8K-R1
    reproduction's: that one is Logic-RL's tag check (``kk_format``: each tag once, in order),
    which ``grpo_gsm8k_qwen25_1.5b`` uses.
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import List, Optional, Sequence

from rewards.answer_value import answer_value, format_value, last_value
from rewards.math_grader import extract_answer
from rewards.registry import REWARDS


def gsm8k_gold_value(answer: str) -> Optional[Fraction]:
    r"""The value of a GSM8K reference: the text after the last ``#### `` (else the whole
    reference) read as one answer (:func:`rewards.answer_value.answer_value`); None when it holds
    no single number.

    >>> gsm8k_gold_value("Natalia sold 48/2 = <<48/2=24>>24 clips.\\n#### 1,024")
    Fraction(1024, 1)
    >>> gsm8k_gold_value(r"\frac{3}{7}")
    Fraction(3, 7)
    """
    text = str(answer)
    idx = text.rfind("####")
    return answer_value(text[idx + 4:] if idx >= 0 else text)


def gsm8k_gold(answer: str) -> Optional[str]:
    """The reference's value as text (``1024``, ``2.5``, ``3/7``), or None.

    >>> gsm8k_gold("Natalia sold 48/2 = <<48/2=24>>24 clips.\\n#### 1,024")
    '1024'
    """
    return format_value(gsm8k_gold_value(answer))


def gsm8k_answer_value(text: str) -> Optional[Fraction]:
    r"""The value a completion gives as its answer. The marked answer (``####``, ``<answer>``,
    ``\boxed{}``, "the answer is") when there is one, read whole: ``2/3`` is 2/3, ``2^2`` is 4,
    ``2 or 3`` and ``5!`` are unreadable (None). Without a marked answer, the last numeric
    expression of the text, read whole.

    >>> gsm8k_answer_value("#### 2/3"), gsm8k_answer_value(r"\boxed{\frac{3}{8}}")
    (Fraction(2, 3), Fraction(3, 8))
    """
    ans = extract_answer(text, mode="gsm8k")
    if ans is not None:
        return answer_value(ans)
    return last_value(text)


def extract_gsm8k_answer(text: str) -> Optional[str]:
    """:func:`gsm8k_answer_value` as text, or None.

    >>> extract_gsm8k_answer("She has 3 + 4 = 7 apples, so $7.00 in total.")
    '7'
    >>> extract_gsm8k_answer("<answer>The answer is 1,234 dollars</answer>")
    '1234'
    """
    return format_value(gsm8k_answer_value(text))


@REWARDS.register("gsm8k_accuracy")
def gsm8k_accuracy(completions: Sequence[str], answer: Sequence[str], **columns
                   ) -> List[Optional[float]]:
    """1.0 when the value of the completion's answer equals the reference's (a rationale ending
    in ``####`` or a bare answer) exactly, 0.0 otherwise, None when the reference holds no
    single number.

    >>> gsm8k_accuracy(["so 18 dollars", "<answer>17</answer>"], answer=["... #### 18"] * 2)
    [1.0, 0.0]
    """
    out: List[Optional[float]] = []
    for text, gold in zip(completions, answer):
        g = gsm8k_gold_value(gold)
        out.append(None if g is None else float(gsm8k_answer_value(text) == g))
    return out


_FORMAT = re.compile(r"\s*<think>.*?</think>\s*<answer>(.*?)</answer>\s*", re.DOTALL)


@REWARDS.register("gsm8k_format")
def gsm8k_format(completions: Sequence[str], **columns) -> List[Optional[float]]:
    """+1.0 for ``<think>...</think><answer>...</answer>`` (whitespace between allowed) with a
    number in the answer, else -1.0.

    >>> gsm8k_format(["<think>2+2</think>\\n<answer>4</answer>", "4", "<think></think><answer>x</answer>"])
    [1.0, -1.0, -1.0]
    """
    out: List[Optional[float]] = []
    for text in completions:
        m = _FORMAT.fullmatch(text)
        out.append(1.0 if m and re.search(r"\d", m.group(1)) else -1.0)
    return out


