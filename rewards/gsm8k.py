"""GSM8K: the reference after ``#### ``, the answer in free text, and two rewards.

  - ``gsm8k_accuracy``: 1.0 when the number extracted from the completion equals the reference
    number (exact rational comparison), else 0.0; None when the reference has no number.
  - ``gsm8k_format``: +1.0 for ``<think>...</think>`` followed by ``<answer>...</answer>`` whose
    answer contains a number, else -1.0 (the +1/-1 format reward of GSM8K R1-Zero
    reproductions, which punish a missing structure instead of ignoring it).
"""

from __future__ import annotations

import re
from typing import List, Optional, Sequence

from rewards.math_grader import extract_answer, normalize_answer, parse_number
from rewards.registry import REWARDS

_NUM = re.compile(r"-?\d[\d,]*(?:\.\d+)?|-?\.\d+")


def gsm8k_gold(answer: str) -> Optional[str]:
    """The number after the last ``#### `` in a GSM8K rationale, commas stripped.

    >>> gsm8k_gold("Natalia sold 48/2 = <<48/2=24>>24 clips.\\n#### 1,024")
    '1024'
    """
    idx = str(answer).rfind("####")
    tail = str(answer)[idx + 4:] if idx >= 0 else str(answer)
    m = _NUM.search(tail)
    if m is None:
        return None
    return normalize_answer(m.group(0))


def extract_gsm8k_answer(text: str) -> Optional[str]:
    """The number a completion gives as its answer: ``<answer>``/``\\boxed{}``/``####``/"the
    answer is" when present (first number inside), else the last number in the text.

    >>> extract_gsm8k_answer("She has 3 + 4 = 7 apples, so $7.00 in total.")
    '7'
    >>> extract_gsm8k_answer("<answer>The answer is 1,234 dollars</answer>")
    '1234'
    """
    ans = extract_answer(text, mode="gsm8k")
    if ans is not None:
        nums = _NUM.findall(ans.replace("\\!", "").replace("$", ""))
        if nums:
            return normalize_answer(nums[-1] if "=" in ans else nums[0])
    nums = _NUM.findall(text.replace("\\!", ""))
    nums = [n for n in nums if re.search(r"\d", n)]
    return normalize_answer(nums[-1].rstrip(",")) if nums else None


def _equal(a: Optional[str], b: Optional[str]) -> bool:
    if a is None or b is None:
        return False
    x, y = parse_number(a), parse_number(b)
    if x is not None and y is not None:
        return x == y
    return a == b


@REWARDS.register("gsm8k_accuracy")
def gsm8k_accuracy(completions: Sequence[str], answer: Sequence[str], **columns
                   ) -> List[Optional[float]]:
    """1.0 when the completion's number equals the reference (a rationale ending in ``####`` or
    a bare number), 0.0 otherwise, None when the reference holds no number.

    >>> gsm8k_accuracy(["so 18 dollars", "<answer>17</answer>"], answer=["... #### 18"] * 2)
    [1.0, 0.0]
    """
    out: List[Optional[float]] = []
    for text, gold in zip(completions, answer):
        g = gsm8k_gold(gold)
        out.append(None if g is None else float(_equal(extract_gsm8k_answer(text), g)))
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


