"""Gold answers and problem texts as benchmark files write them, normalised: plain numbers
(``27.0``, ``"1,234"``), GSM8K ``####`` rationales, and the AIME 2025 file's trailing
instruction line. Used by the file formats (:mod:`mindrl.data.formats`) and the built-in
benchmarks (:mod:`mindrl.data.benchmarks`); imports neither."""

from __future__ import annotations

import re
from typing import Any

BOXED_SUFFIX = "Please reason step by step, and put your final answer within \\boxed{}."


def number_to_str(x: Any) -> str:
    """``27.0 -> "27"``, ``"025" -> "25"``, ``"1,234" -> "1234"``, ``0.5 -> "0.5"``; anything
    that is not a plain number comes back stripped and unchanged."""
    if isinstance(x, bool):
        return str(x)
    if isinstance(x, int):
        return str(x)
    if isinstance(x, float):
        return str(int(x)) if x.is_integer() else repr(x)
    s = str(x).strip()
    plain = s.replace(",", "") if re.fullmatch(r"-?\d{1,3}(,\d{3})+(\.\d+)?", s) else s
    if re.fullmatch(r"-?\d+", plain):
        return str(int(plain))
    if re.fullmatch(r"-?\d+\.\d*", plain):
        v = float(plain)
        return str(int(v)) if v.is_integer() else plain.rstrip("0")
    return s


def gsm8k_final_answer(rationale: str) -> str:
    """The number after GSM8K's ``"#### "`` marker, commas stripped (``"#### 1,000" -> "1000"``)."""
    text = str(rationale)
    if "####" not in text:
        return number_to_str(text)
    final = text.rsplit("####", 1)[1].strip()
    return number_to_str(final.replace(",", "").replace("$", "").strip())


def strip_suffix_line(problem: str, suffix: str = BOXED_SUFFIX) -> str:
    """Drop a trailing instruction line (the AIME 2025 file's ``Please reason step by step...``)."""
    p = problem.rstrip()
    if p.endswith(suffix):
        p = p[: -len(suffix)].rstrip()
    return p


def normalize_gold(answer: Any) -> str:
    """Generic gold-answer normalisation for user files: GSM8K ``####`` rationales, numbers."""
    if isinstance(answer, str) and "####" in answer:
        return gsm8k_final_answer(answer)
    return number_to_str(answer)
