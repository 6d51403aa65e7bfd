"""Multiplication with a Python tool: the task of the tool-use CPU demo
(``mindrl demo --task tool``).

A prompt is ``"123*456="``; the gold ``answer`` is the product, ``"56088"``. Three-digit
products are beyond the 1.12M-parameter demo model's head, but a tool call is not: the model can
copy the operands into a ``tir`` call (:mod:`mindrl.tools.formats`), let the sandbox print the
product, and copy the printed number into its answer::

    ```python
    print(123*456)
    ```
    ```output          <- appended by the rollout loop (not trained on)
    56088
    ```
    56088

The ``teacher`` column, the SFT demonstration, comes from an imperfect teacher that calls the
tool in only a fraction ``call`` of the problems (the trace above, with the true output, since
the sandbox prints the true product) and otherwise answers from its head, ``~56012``: an
estimate (``~``) that keeps the product's first two digits and guesses the rest, which is never
the product (so SFT imitates a habit that a correctness reward penalises: RL should learn to
call the tool every time). ``teacher_calls`` says which kind a row's demonstration is. The
``~`` makes the choice between the two habits one token (``~`` or the fence's first token),
taken 70/30 after SFT at ``call=0.3``: greedy decoding then answers from the head, sampling
calls the tool in about 30% of the samples.

The reward ``tool_final_answer`` reads the answer after the tool's output: the last number
outside the ```python and ```output blocks, read whole (``2/56088`` is not 56088), so the
operands in the call and the number the tool printed do not count, and a trace that stops
after the output earns nothing.
"""

from __future__ import annotations

import random
import re
from typing import Dict, List, Optional, Sequence

from rewards.answer_value import answer_value, format_value, last_value
from rewards.registry import REWARDS

CALL_FENCE = "```python\n"


def tool_trace(a: int, b: int, product: Optional[int] = None) -> str:
    """The demonstration of a tool call: the call, the output block the rollout loop appends
    (``mindrl.tools.formats.render_output`` of what the sandbox prints), the copied answer."""
    value = a * b if product is None else product
    return f"{CALL_FENCE}print({a}*{b})\n```\n```output\n{value}\n```\n{value}"


def head_guess(rng: random.Random, product: int) -> int:
    """An estimate from the head: the product's first two digits, the rest guessed (never the
    product itself)."""
    text = str(product)
    if len(text) <= 2:
        return product + 1
    guess = text[:2] + "".join(str(rng.randrange(10)) for _ in text[2:])
    if int(guess) == product:         # change the last digit
        guess = guess[:-1] + str((int(guess[-1]) + 1) % 10)
    return int(guess)


def make_tool_mult(rng: random.Random, digits: int = 3, call: float = 0.3) -> Dict:
    """One row: ``problem`` (``123*456=``), ``answer`` (the product), ``teacher`` (a tool trace
    with probability ``call``, else a wrong estimate ``~...``) and ``teacher_calls``."""
    lo = 10 ** (digits - 1) if digits > 1 else 0
    a, b = rng.randrange(lo, 10 ** digits), rng.randrange(lo, 10 ** digits)
    product = a * b
    calls = rng.random() < call
    teacher = tool_trace(a, b) if calls else "~" + str(head_guess(rng, product))
    return {"problem": f"{a}*{b}=", "answer": str(product), "teacher": teacher,
            "teacher_calls": calls}


_BLOCK = re.compile(r"```(?:python|output)\n.*?(?:```|\Z)", re.DOTALL)


def final_answer(text: str) -> Optional[str]:
    """The value of the last number outside ```python / ```output blocks (an unclosed block
    runs to the end), read whole (``2/56088`` is not 56088; ``56,088`` is), as text; None when
    there is none or it does not read as one number.

    >>> final_answer("```python\\nprint(12*3)\\n```\\n```output\\n36\\n```\\n36")
    '36'
    >>> final_answer("```python\\nprint(12*3)\\n```\\n```output\\n36\\n```\\n") is None
    True
    """
    return format_value(last_value(_BLOCK.sub(" ", text or "")))


@REWARDS.register("tool_final_answer")
def tool_final_answer(completions: Sequence[str], answer: Sequence[str], **_
                      ) -> List[Optional[float]]:
    """1.0 when the last number outside the ```python / ```output blocks, read whole, equals
    the gold answer exactly, else 0.0 (the tool-use demo).

    >>> tool_final_answer(["56088", "```python\\nprint(123*456)\\n```\\n```output\\n56088\\n```\\n",
    ...                    "```python\\nprint(123*456)\\n```\\n```output\\n56088\\n```\\n56088"],
    ...                   answer=["56088"] * 3)
    [1.0, 0.0, 1.0]
    """
    out: List[Optional[float]] = []
    for text, gold in zip(completions, answer):
        want = answer_value(str(gold))
        got = last_value(_BLOCK.sub(" ", text or ""))
        out.append(float(want is not None and got == want))
    return out
