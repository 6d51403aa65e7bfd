"""Math answer checking shared by the accuracy rewards and the evaluation tool.

Three steps, each usable on its own:

1. ``extract_answer(text, mode)`` finds the final answer in a model output: the last
   ``\\boxed{}`` / ``\\fbox{}`` (nested braces), ``<answer>...</answer>`` tags, GSM8K's ``#### x``,
   "the answer is x", a multiple-choice letter, and, only when asked, the last number.
2. ``normalize_answer(s)`` rewrites an answer string into a canonical form: ``\\text{}``, units,
   ``\\dfrac``/``\\tfrac``, percent, degrees, thousands separators, trailing zeros (27.0 -> 27),
   zero-padded integers (AIME "025" -> 25), spacing in intervals and tuples, ``x = 5`` -> 5.
3. ``is_equivalent(pred, gold, timeout)`` compares two answers: first the normalised strings
   and plain numbers (fast, exact, no sympy), then math-verify (symbolic) under a time limit.

``grade(text, gold)`` chains them: True / False, or None when the gold answer is unusable or the
symbolic check timed out.

Time limits: math-verify enforces its own limit with ``signal.alarm``, which only works in the
main thread. In the main thread we pass the limit through (rounded up to whole seconds, as
math-verify requires); in any other thread we call math-verify with its limit disabled and rely
on the caller (``rewards.pool.RewardScorer``) to enforce a process-level limit.
"""

from __future__ import annotations

import logging
import math
import re
import threading
from fractions import Fraction
from typing import Optional, Union

__all__ = [
    "extract_answer",
    "extract_boxed",
    "gold_answer",
    "normalize_answer",
    "parse_number",
    "is_equivalent",
    "gold_is_usable",
    "grade",
    "EXTRACT_MODES",
]

EXTRACT_MODES = ("auto", "boxed", "answer_tag", "gsm8k", "choice")

_NUMBER = r"-?(?:\d+(?:,\d{3})*(?:\.\d*)?|\.\d+)"

# ----------------------------------------------------------------------------- extraction


def _match_brace(text: str, open_idx: int) -> Optional[int]:
    """Index of the ``}`` closing the ``{`` at ``open_idx`` (escaped braces skipped), or None."""
    depth = 0
    i = open_idx
    n = len(text)
    while i < n:
        c = text[i]
        if c == "\\":
            i += 2  # \{ and \} do not count
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return None


def extract_boxed(text: str) -> Optional[str]:
    """Content of the last ``\\boxed{...}`` or ``\\fbox{...}`` (nested braces allowed).

    Also accepts the brace-less ``\\boxed 5`` form. Linear in ``len(text)``.

    >>> extract_boxed(r"so \\boxed{1} no, \\boxed{\\frac{1}{2}}.")
    '\\\\frac{1}{2}'
    """
    best = -1
    for tag in ("\\boxed", "\\fbox"):
        best = max(best, text.rfind(tag))
    if best < 0:
        return None
    start = best + (len("\\boxed") if text.startswith("\\boxed", best) else len("\\fbox"))
    rest = text[start:]
    stripped = rest.lstrip()
    if stripped.startswith("{"):
        open_idx = start + (len(rest) - len(stripped))
        close = _match_brace(text, open_idx)
        if close is None:
            return None
        return text[open_idx + 1:close].strip()
    if rest.startswith(" "):  # "\boxed 5"
        m = re.match(r"\s*([^\s$]+)", rest)
        return m.group(1) if m else None
    return None


_ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
_ANSWER_IS = re.compile(
    r"(?:final answer|the answer)\s*(?:is|:)?\s*[:=]?\s*(.+?)(?:\n|$)", re.IGNORECASE)
_CHOICE = re.compile(r"(?:^|[\s(\[{:*])\(?([A-E])\)?(?=$|[\s).,;:*\]}])")


def _strip_final(ans: str) -> str:
    prev = None
    while prev != ans:
        prev = ans
        ans = ans.strip().strip("$").rstrip(".。").strip()
    return ans


def _extract_choice(text: str) -> Optional[str]:
    """A multiple-choice letter A-E: boxed, "answer is (C)", or a lone "(C)"."""
    boxed = extract_boxed(text)
    candidates = [boxed] if boxed is not None else []
    m = list(_ANSWER_IS.finditer(text))
    if m:
        candidates.append(m[-1].group(1))
    candidates.append(text)
    for cand in candidates:
        cand = re.sub(r"\\text(?:bf)?\{([^{}]*)\}", r"\1", cand).strip()
        hits = _CHOICE.findall(cand)
        if hits:
            return hits[-1] if cand is text else hits[0]
    return None


def extract_answer(text: Optional[str], mode: str = "auto",
                   last_number_fallback: bool = False) -> Optional[str]:
    """The final answer in ``text``, or None when none is found.

    Modes:
      - ``auto``: ``<answer>`` tags (a ``\\boxed{}`` inside them wins), else the last
        ``\\boxed{}``/``\\fbox{}``, else the last ``#### x``, else "the (final) answer is x".
      - ``boxed``: only the last ``\\boxed{}``/``\\fbox{}`` (what Open-R1's accuracy reward reads).
      - ``answer_tag``: only the last ``<answer>...</answer>`` (a boxed answer inside is unwrapped).
      - ``gsm8k``: the last ``#### x``, else ``auto``.
      - ``choice``: a multiple-choice letter A-E.

    ``last_number_fallback`` (off by default: rewards must not credit a stray number) returns the
    last number in the text when nothing else matched.

    >>> extract_answer("Reasoning... The answer is $42$.")
    '42'
    >>> extract_answer("<answer>\\\\boxed{7}</answer>")
    '7'
    >>> extract_answer("it is 3 or 4") is None
    True
    >>> extract_answer("it is 3 or 4", last_number_fallback=True)
    '4'
    """
    if text is None:
        return None
    if mode not in EXTRACT_MODES:
        raise ValueError(f"unknown extract mode {mode!r}; valid modes: {', '.join(EXTRACT_MODES)}")
    if mode == "choice":
        return _extract_choice(text)
    ans: Optional[str] = None
    if mode == "boxed":
        ans = extract_boxed(text)
    else:
        if mode == "gsm8k":
            idx = text.rfind("####")
            if idx >= 0:
                ans = text[idx + 4:].strip().split("\n")[0]
        if ans is None and mode in ("auto", "answer_tag", "gsm8k"):
            tags = _ANSWER_TAG.findall(text)
            if tags:
                inner = tags[-1]
                ans = extract_boxed(inner)
                if ans is None:
                    ans = inner
        if ans is None and mode in ("auto", "gsm8k"):
            ans = extract_boxed(text)
            if ans is None:
                idx = text.rfind("####")
                if idx >= 0:
                    ans = text[idx + 4:].strip().split("\n")[0]
            if ans is None:
                hits = list(_ANSWER_IS.finditer(text))
                if hits:
                    ans = hits[-1].group(1)
                    boxed = extract_boxed(ans)
                    ans = boxed if boxed is not None else ans
    if ans is not None:
        ans = _strip_final(ans)
        if ans:
            return ans
        ans = None
    if last_number_fallback:
        nums = re.findall(_NUMBER, text.replace("$", " "))
        if nums:
            return nums[-1].rstrip(".")
    return None


def gold_answer(gold: Union[str, int, float, None]) -> Optional[str]:
    """The reference answer as a string: numbers printed, GSM8K rationales cut after ``####``,
    a boxed reference unwrapped; None for None or an empty string.

    >>> gold_answer("She pays 2 * 3 = <<2*3=6>>6 dollars.\\n#### 6")
    '6'
    >>> gold_answer(27.0)
    '27.0'
    """
    if gold is None:
        return None
    if isinstance(gold, bool):
        return str(gold)
    if isinstance(gold, (int, float)):
        return repr(gold) if isinstance(gold, float) else str(gold)
    s = str(gold)
    idx = s.rfind("####")
    if idx >= 0:
        s = s[idx + 4:]
    elif "\\boxed" in s or "\\fbox" in s:
        boxed = extract_boxed(s)
        s = boxed if boxed is not None else s
    s = s.strip()
    return s or None


# -------------------------------------------------------------------------- normalisation

_UNITS = [
    "degrees", "degree", "cm", "centimeters", "centimeter", "meters", "meter", "km",
    "kilometers", "miles", "mile", "feet", "foot", "ft", "inches", "inch", "units", "unit",
    "square", "sq", "cents", "cent", "dollars", "dollar", "hours", "hour", "minutes", "minute",
    "seconds", "second", "days", "day", "weeks", "week", "years", "year", "mph", "pounds", "pound",
    "kg", "grams", "gram", "liters", "liter", "ml", "percent", "points", "point", "people",
    "students", "eggs", "apples", "marbles", "books", "coins", "p.m.", "a.m.",
]
_UNIT_RE = re.compile(
    r"(?<=[\d}\s])\s*(?:" + "|".join(re.escape(u) for u in sorted(_UNITS, key=len, reverse=True))
    + r")(?:\^\{?[23]\}?|²|³)?\s*$")


def _fix_frac_args(s: str) -> str:
    r"""``\frac12`` -> ``\frac{1}{2}``, ``\frac 59`` -> ``\frac{5}{9}``, ``\frac{270}7`` -> ..."""
    out = []
    i = 0
    while True:
        j = s.find("\\frac", i)
        if j < 0:
            out.append(s[i:])
            break
        out.append(s[i:j + 5])
        k = j + 5
        args = []
        for _ in range(2):
            while k < len(s) and s[k] == " ":
                k += 1
            if k < len(s) and s[k] == "{":
                close = _match_brace(s, k)
                if close is None:
                    args.append(s[k:])
                    k = len(s)
                else:
                    args.append(s[k:close + 1])
                    k = close + 1
            elif k < len(s) and s[k] == "\\":
                m = re.match(r"\\[a-zA-Z]+", s[k:])
                tok = m.group(0) if m else s[k:k + 2]
                args.append("{" + tok + "}")
                k += len(tok)
            elif k < len(s):
                args.append("{" + s[k] + "}")
                k += 1
        out.append("".join(args))
        i = k
    return "".join(out)


def _fix_sqrt_args(s: str) -> str:
    r"""``\sqrt2`` -> ``\sqrt{2}``, ``\sqrt 3`` -> ``\sqrt{3}``."""
    return re.sub(r"\\sqrt\s*([0-9a-zA-Z])", r"\\sqrt{\1}", s)


def _strip_number(tok: str) -> str:
    """Canonical decimal: no thousands commas, no leading/trailing zeros, "-0" -> "0"."""
    neg = tok.startswith("-")
    body = tok[1:] if neg else tok
    body = body.replace(",", "")
    if "." in body:
        whole, frac = body.split(".", 1)
        frac = frac.rstrip("0")
    else:
        whole, frac = body, ""
    whole = whole.lstrip("0") or "0"
    out = whole + ("." + frac if frac else "")
    if out == "0":
        neg = False
    return ("-" if neg else "") + out


def normalize_answer(s: Optional[str]) -> str:
    r"""Canonical string form of an answer, for exact comparison.

    >>> normalize_answer(r"\text{(C)}")
    'C'
    >>> normalize_answer(r"10,\!080")
    '10080'
    >>> normalize_answer("025"), normalize_answer("27.0"), normalize_answer(r"90^\circ")
    ('25', '27', '90')
    >>> normalize_answer(r"\dfrac{3}{4}"), normalize_answer(r"\frac43"), normalize_answer("x = 5")
    ('\\frac{3}{4}', '\\frac{4}{3}', '5')
    >>> normalize_answer(r"\left( 3, \frac{\pi}{2} \right)")
    '(3,\\frac{\\pi}{2})'
    """
    if s is None:
        return ""
    s = str(s).strip()
    if not s:
        return ""
    s = s.replace("\n", " ")
    # Outer $...$, \( \), \[ \]
    s = re.sub(r"^\$+|\$+$", "", s).strip()
    s = re.sub(r"^\\[(\[]|\\[)\]]$", "", s).strip()
    boxed = extract_boxed(s) if s.startswith(("\\boxed", "\\fbox")) else None
    if boxed is not None:
        s = boxed
    # spacing commands and sizing
    s = re.sub(r"(?<!\\)\\[,!;:> ]", "", s)  # spacing, but not the "\\ " of a matrix row
    s = s.replace("\\left", "").replace("\\right", "").replace("\\bigl", "").replace("\\bigr", "")
    s = s.replace("\\displaystyle", "")
    s = s.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    s = s.replace("\\$", "").replace("$", "")
    s = s.replace("\\%", "").replace("%", "")
    s = s.replace("−", "-")
    # degrees
    s = re.sub(r"\^\s*\{?\s*\\circ\s*\}?", "", s)
    s = s.replace("°", "").replace("\\circ", "")
    # units written as \text{ cm}, \mbox{ inches}^2
    s = re.sub(r"\\(?:text|mbox|textbf|mathrm)\{\s*(" + "|".join(map(re.escape, _UNITS))
               + r")\s*\}(?:\^\{?[23]\}?)?", "", s)
    # remaining \text{...} -> contents
    for _ in range(3):
        s = re.sub(r"\\(?:text|textbf|mbox|mathrm|textnormal|operatorname)\s*\{([^{}]*)\}",
                   r"\1", s)
    s = s.strip()
    # trailing unit words ("5 cm", "12 dollars", "4 square units")
    for _ in range(2):
        s = _UNIT_RE.sub("", s).strip()
    s = re.sub(r"\s*\\?\s*(?:degrees?)$", "", s)
    # simple equality with a one-letter (or short) variable on the left: "x = 5" -> "5"
    m = re.match(r"^\s*[a-zA-Z](?:_\{?\w+\}?)?\s*=\s*(.+)$", s)
    if m and "=" not in m.group(1):
        s = m.group(1)
    m = re.match(r"^\s*[a-zA-Z]\s*\\in\s*(.+)$", s)
    if m:
        s = m.group(1)
    s = _fix_frac_args(s)
    s = _fix_sqrt_args(s)
    s = s.rstrip(".").strip()
    # multiple-choice "(C)" -> "C"
    m = re.fullmatch(r"\(?\s*([A-E])\s*\)?", s)
    if m:
        return m.group(1)
    # plain number with thousands separators / zero padding / trailing zeros
    compact = re.sub(r"\s+", "", s)
    if re.fullmatch(r"-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d*)?|-?\.\d+", compact):
        return _strip_number(compact)
    # numbers inside tuples / intervals / expressions: drop trailing zeros of decimals only
    compact = re.sub(r"(?<![\d.])(\d+)\.(\d*?)0+(?!\d)",
                     lambda mm: mm.group(1) + ("." + mm.group(2) if mm.group(2) else ""), compact)
    return compact


_FRAC_RE = re.compile(r"(-?)\\frac\{(-?\d+)\}\{(-?\d+)\}")


def parse_number(s: str) -> Optional[Fraction]:
    r"""A normalised answer as an exact number (integer, decimal, a/b, \frac{a}{b}), or None.

    >>> parse_number(r"\frac{3}{4}") == parse_number("0.75")
    True
    """
    s = s.strip()
    if not s or len(s) > 64:
        return None
    try:
        if re.fullmatch(r"-?(?:\d+(?:\.\d*)?|\.\d+)", s):
            return Fraction(s)
        m = re.fullmatch(r"(-?\d+)/(-?\d+)", s)
        if m:
            return Fraction(int(m.group(1)), int(m.group(2)))
        m = re.fullmatch(r"(-?)(\d+)\\frac\{(\d+)\}\{(\d+)\}", s)  # mixed number 1\frac{4}{5}
        if m:
            val = int(m.group(2)) + Fraction(int(m.group(3)), int(m.group(4)))
            return -val if m.group(1) else val
        m = _FRAC_RE.fullmatch(s)
        if m:
            val = Fraction(int(m.group(2)), int(m.group(3)))
            return -val if m.group(1) else val
    except (ValueError, ZeroDivisionError):
        return None
    return None


# ---------------------------------------------------------------------------- equivalence

_WORD_ANSWER = re.compile(r"[A-Za-z][A-Za-z '\-]*")


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _mv_timeout(timeout: Optional[float]) -> Optional[int]:
    """math-verify's limit: whole seconds in the main thread, disabled elsewhere."""
    if timeout is None or timeout <= 0 or not _in_main_thread():
        return None
    return max(1, int(math.ceil(timeout)))


def _quiet_math_verify() -> None:
    # math-verify warns once per process that its timeout is disabled; the pool enforces ours.
    logging.getLogger("math_verify").setLevel(logging.ERROR)


class _Timeout(Exception):
    pass


def _mv_parse(s: str, limit: Optional[int]):
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse
    from math_verify.errors import TimeoutException

    _quiet_math_verify()
    try:
        return parse(f"\\boxed{{{s}}}",
                     extraction_config=[LatexExtractionConfig(boxed_match_priority=0),
                                        ExprExtractionConfig()],
                     parsing_timeout=limit, raise_on_error=True)
    except TimeoutException as e:
        raise _Timeout() from e
    except Exception:
        return []


def _has_expr(parsed) -> bool:
    """math-verify returns [expr, text] when it parsed, only the text when it gave up."""
    return any(not isinstance(x, str) for x in parsed)


_BASE = re.compile(r"(\w+)_\{?(\d+)\}?")


def _base_number(s: str):
    m = _BASE.fullmatch(s)
    return (m.group(1).lstrip("0") or "0", m.group(2)) if m else None


def _mv_verify(gold_parsed, pred_parsed, limit: Optional[int]) -> bool:
    from math_verify import verify
    from math_verify.errors import TimeoutException

    try:
        return bool(verify(gold_parsed, pred_parsed, timeout_seconds=limit, raise_on_error=True))
    except TimeoutException as e:
        raise _Timeout() from e
    except Exception:
        return False


def is_equivalent(pred: Optional[str], gold: Optional[str], timeout: Optional[float] = 5.0,
                  use_math_verify: bool = True) -> Optional[bool]:
    r"""Whether answer ``pred`` equals answer ``gold`` (both already extracted).

    Order: normalised strings equal -> True; both plain numbers -> exact rational comparison;
    single letters / words -> case-insensitive comparison; otherwise math-verify (symbolic,
    ``timeout`` seconds per parse/verify in the main thread, none elsewhere).

    Returns None when ``gold`` is empty, math-verify cannot parse it, or the symbolic check timed
    out; False when ``pred`` is None or empty.

    >>> is_equivalent("0.75", r"\frac{3}{4}"), is_equivalent("025", "25"), is_equivalent("26", "25")
    (True, True, False)
    """
    g = normalize_answer(gold)
    if not g:
        return None
    p = normalize_answer(pred)
    if not p:
        return False
    if p == g:
        return True
    gn, pn = parse_number(g), parse_number(p)
    if gn is not None and pn is not None:
        return gn == pn
    gb = _base_number(g)
    if gb is not None:  # a number in another base, "2516_8": digits and base must both match
        pb = _base_number(p)
        return pb == gb if pb is not None else (p.lstrip("0") or "0") == gb[0]
    if re.fullmatch(r"[A-E]", g):  # multiple choice: only the letter counts
        return p.upper() == g
    if _WORD_ANSWER.fullmatch(g) and len(g) > 1 and "\\" not in g:
        # text answer (a name, "even", "east"): sympy would read it as a product of symbols
        return p.lower().strip() == g.lower().strip()
    if not use_math_verify:
        return False
    limit = _mv_timeout(timeout)
    try:
        gold_parsed = _mv_parse(g, limit)
        if not _has_expr(gold_parsed):
            gold_parsed = _mv_parse(str(gold), limit)
        if not _has_expr(gold_parsed):
            return None  # unparseable gold: not scorable
        pred_parsed = _mv_parse(p, limit)
        if not pred_parsed:
            pred_parsed = _mv_parse(str(pred), limit)
        if not pred_parsed:
            return False
        return _mv_verify(gold_parsed, pred_parsed, limit)
    except _Timeout:
        return None


def gold_is_usable(gold: Optional[str], timeout: Optional[float] = 5.0) -> bool:
    r"""Whether ``gold`` can be compared at all: non-empty, and a number, a word, a choice
    letter, or LaTeX that math-verify parses (a timeout counts as unusable).

    >>> gold_is_usable("025"), gold_is_usable(r"\frac{1}{2}"), gold_is_usable("")
    (True, True, False)
    """
    g = normalize_answer(gold)
    if not g:
        return False
    if parse_number(g) is not None or re.fullmatch(r"[A-E]", g) or _WORD_ANSWER.fullmatch(g):
        return True
    try:
        limit = _mv_timeout(timeout)
        return _has_expr(_mv_parse(g, limit)) or _has_expr(_mv_parse(str(gold), limit))
    except _Timeout:
        return False


def grade(text: Optional[str], gold: Union[str, int, float, None], mode: str = "auto",
          timeout: Optional[float] = 5.0, last_number_fallback: bool = False) -> Optional[bool]:
    r"""Extract the answer from model output ``text`` and compare it with ``gold``.

    ``gold`` may be a number (AMC 27.0, AIME 25), a LaTeX string, a GSM8K rationale ending in
    ``#### x``, or a boxed solution. Returns None when there is no usable gold answer or the
    check timed out; False when no answer is found in ``text``.

    >>> grade(r"... so the total is \boxed{\dfrac{1}{2}}", r"\frac12")
    True
    >>> grade("#### 1,000", "The total is 1000.\n#### 1000", mode="gsm8k")
    True
    """
    g = gold_answer(gold)
    if g is None:
        return None
    pred = extract_answer(text, mode=mode, last_number_fallback=last_number_fallback)
    if pred is None:
        return False
    return is_equivalent(pred, g, timeout=timeout)
