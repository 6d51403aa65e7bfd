"""Math answer checking shared by the accuracy rewards and the evaluation tool.

Three steps, each usable on its own:

1. ``extract_answer(text, mode)`` finds the final answer in a model output (see its docstring
   for the order): ``<answer>`` tags, the last run of ``\\boxed{}``/``\\fbox{}`` (several boxed
   answers joined by "and", "," ... form one set), a "final answer is x" written after the last
   boxed answer, GSM8K's ``#### x``, "the answer is x", a multiple-choice letter, and, when
   ``fallback`` is on, the last LaTeX expression or number of the text (math-verify's and
   lighteval's fallback).
2. ``normalize_answer(s)`` rewrites an answer string into a canonical form: ``\\text{}``, units,
   ``\\dfrac``/``\\tfrac``/``\\cfrac``, percent, degrees, thousands separators (``1,234``,
   ``1{,}234``, ``1 234``; never a comma followed by a space), trailing zeros (27.0 -> 27),
   zero-padded integers (AIME "025" -> 25), spacing in intervals and tuples, ``x = 5`` -> 5,
   the last part of a chain ``x = 2+3 = 5``, relations (``>=`` -> ``\\geq``), a number written
   in English words (``\\text{nine}``, "twenty-one" -> 21; ``number_from_words``).
3. ``is_equivalent(pred, gold, timeout, problem=None)`` compares two answers: normalised
   strings, exact numbers (with the tolerances of ``GraderOptions``), words and names as text
   (one-letter symbols joined by a minus, "p - q", are an expression), unordered lists, then
   math-verify (symbolic) under a time limit, with the parsed gold cached. With the problem
   statement, an equal answer not in the form the problem asks for (``required_forms``:
   factored, expanded, fraction, decimal, percent, simplified, rationalized) is False.

``grade(text, gold, problem=None)`` chains them: True / False, or None when the gold answer is
unusable or the symbolic check timed out.

Options (``GraderOptions``; ``REWARD_OPTIONS`` and ``EVAL_OPTIONS`` are the two presets, and
every function takes ``options=`` plus keyword overrides):

- ``fallback`` (rewards: off, eval: on): when no answer is marked (no tags, boxed, ``####`` or
  answer phrase), take the last LaTeX expression (``$..$``, ``\\(..\\)``, ``\\[..\\]``) or
  number/expression of the text, as math-verify and lighteval do. Off for rewards: a policy
  under training should be paid for an answer it marked, not for the last number of an
  unfinished or rambling output; eval measures correctness and follows the common graders.
  ``fallback_targets`` ("latex", "expr") selects what the fallback may take.
- ``decimal_comma`` (on): ``1000,99`` or ``2,74`` (a comma not followed by exactly three digits,
  or after a leading 0) is read as a decimal point, but only when the other answer is a decimal
  number written with a point, so that the list "3,5" still equals "5,3".
- ``percent`` ("strip"): ``28\\%``, ``28 percent``, ``28 pct`` all equal 28; "either" also
  accepts the fraction (28% equals 0.28).
- ``float_rounding`` (6): a decimal written with a point equals an exact value whose decimal
  never ends (1/3) when it is that value rounded to its own places, or to this many when it
  has fewer (0.333333 and 0.3333333 are 1/3; 0.33 and 0.3333334 are not); two numbers with
  finite decimals are equal only when equal (2.0000001 is not 2). None: exact comparison only
  (0.333333 never equals 1/3).
- ``check_form`` (on): with a problem statement, check the form it asks for (above); only
  clear cues count, and only when the gold is itself in that form.
- ``approx_rel_tol`` (None): a decimal within this relative tolerance of a gold whose decimal
  never ends (1.299 for 3\\sqrt{3}/4, 3.1416 for \\pi) is equal. None: such decimals are
  wrong, unless they are that value rounded (``float_rounding``). A gold with a finite decimal
  is equal only when equal; a form asked for (a fraction) still rejects a decimal.

Time limits: math-verify enforces its own limit with ``signal.alarm``, which only works in the
main thread. In the main thread we pass the limit through (rounded up to whole seconds, as
math-verify requires); in any other thread we call math-verify with its limit disabled and rely
on the caller (``rewards.pool.RewardScorer``) to enforce a process-level limit.
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import logging
import math
import re
import threading
from fractions import Fraction
from typing import List, Optional, Tuple, Union

__all__ = [
    "GraderOptions",
    "REWARD_OPTIONS",
    "EVAL_OPTIONS",
    "extract_answer",
    "extract_boxed",
    "extract_boxed_run",
    "gold_answer",
    "normalize_answer",
    "number_from_words",
    "required_forms",
    "parse_number",
    "is_equivalent",
    "gold_is_usable",
    "grade",
    "clear_caches",
    "EXTRACT_MODES",
]

EXTRACT_MODES = ("auto", "boxed", "answer_tag", "gsm8k", "choice")
PERCENT_MODES = ("strip", "either")
FALLBACK_TARGETS = ("latex", "expr")


@dataclasses.dataclass(frozen=True)
class GraderOptions:
    """How answers are found and compared; see the module docstring for each field."""

    fallback: bool = False
    fallback_targets: Tuple[str, ...] = FALLBACK_TARGETS
    decimal_comma: bool = True
    percent: str = "strip"
    float_rounding: Optional[int] = 6
    check_form: bool = True
    approx_rel_tol: Optional[float] = None

    def __post_init__(self):
        if self.percent not in PERCENT_MODES:
            raise ValueError(f"percent must be one of {', '.join(PERCENT_MODES)}, "
                             f"not {self.percent!r}")
        bad = [t for t in self.fallback_targets if t not in FALLBACK_TARGETS]
        if bad:
            raise ValueError(f"fallback_targets: unknown {bad}; "
                             f"valid: {', '.join(FALLBACK_TARGETS)}")
        if self.float_rounding is not None and self.float_rounding < 0:
            raise ValueError("float_rounding must be >= 0 or None")
        if self.approx_rel_tol is not None and not 0 < self.approx_rel_tol < 1:
            raise ValueError(f"approx_rel_tol must be in (0, 1) or None, "
                             f"not {self.approx_rel_tol!r}")

    @property
    def fingerprint(self) -> str:
        """Short text naming these options (stored with graded eval samples)."""
        fb = "+".join(self.fallback_targets) if self.fallback else "off"
        return (f"fallback={fb},dc={int(self.decimal_comma)},pct={self.percent},"
                f"round={self.float_rounding}" + ("" if self.check_form else ",form=off")
                + ("" if self.approx_rel_tol is None else f",tol={self.approx_rel_tol:g}"))


REWARD_OPTIONS = GraderOptions()
EVAL_OPTIONS = GraderOptions(fallback=True)


def _opts(options: Optional[GraderOptions], overrides: dict) -> GraderOptions:
    base = options if options is not None else REWARD_OPTIONS
    return dataclasses.replace(base, **overrides) if overrides else base


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


_BOX_TAG = re.compile(r"\\(?:boxed|fbox)")


def _boxed_spans(text: str) -> List[Tuple[int, int, str]]:
    """(start, end, content) of every ``\\boxed{..}``/``\\fbox{..}`` and ``\\boxed 5``, in order.

    Linear in ``len(text)``: a boxed answer's content is skipped, so nested boxes are not listed,
    and an unclosed brace ends the scan."""
    out = []
    pos = 0
    while True:
        m = _BOX_TAG.search(text, pos)
        if m is None:
            return out
        j = m.end()
        k = j
        while k < len(text) and text[k] in " \t":
            k += 1
        if k < len(text) and text[k] == "{":
            close = _match_brace(text, k)
            if close is None:
                return out
            out.append((m.start(), close + 1, text[k + 1:close].strip()))
            pos = close + 1
        elif k > j:  # "\boxed 5"
            mm = re.match(r"[^\s$]+", text[k:])
            if mm:
                out.append((m.start(), k + mm.end(), mm.group(0)))
            pos = k
        else:
            pos = j


def extract_boxed(text: str) -> Optional[str]:
    """Content of the last ``\\boxed{...}`` or ``\\fbox{...}`` (nested braces allowed).

    Also accepts the brace-less ``\\boxed 5`` form. Linear in ``len(text)``.

    >>> extract_boxed(r"so \\boxed{1} no, \\boxed{\\frac{1}{2}}.")
    '\\\\frac{1}{2}'
    """
    spans = _boxed_spans(text)
    return spans[-1][2] if spans else None


# what may stand between two boxed answers of one set: "\boxed{1}, \boxed{2}",
# "\boxed{1} \quad \text{and} \quad \boxed{2}", "\boxed{1} papers and \boxed{2}"
_GAP_NOISE = re.compile(r"\\(?:quad|qquad|text|textbf|mathrm|mbox)\b|\\[,;:!(\[)\]]|[${}\s]|\\\\")
_GAP_JOIN = re.compile(r"(?:^|.*[\s,;])(?:and|or|,|;|&)$|^$", re.IGNORECASE | re.DOTALL)


def _connected(gap: str) -> bool:
    g = _GAP_NOISE.sub(" ", gap).strip().rstrip(".")
    if len(g) > 40:
        return False
    g = re.sub(r"\s+", " ", g)
    return not re.search(r"[^\W\d_]", g) or bool(_GAP_JOIN.fullmatch(g.strip()))


def _boxed_run(text: str, spans=None) -> Optional[Tuple[int, int, str]]:
    """The last run of boxed answers joined only by "and"/"or"/","/spacing, as (start, end,
    "a, b, ..."); duplicates are kept once."""
    spans = _boxed_spans(text) if spans is None else spans
    if not spans:
        return None
    i = len(spans) - 1
    while i > 0 and _connected(text[spans[i - 1][1]:spans[i][0]]):
        i -= 1
    items = []
    for _, _, c in spans[i:]:
        if c and c not in items:
            items.append(c)
    return spans[i][0], spans[-1][1], ", ".join(items)


def extract_boxed_run(text: str) -> Optional[str]:
    r"""The last run of connected boxed answers as one comma-separated list.

    >>> extract_boxed_run(r"\boxed{1} then \boxed{-2} \quad \text{and} \quad \boxed{3}")
    '-2, 3'
    """
    run = _boxed_run(text)
    return run[2] if run else None


_DELIM = re.compile(r"(?<!\\)\$\$|(?<!\\)\$|\\\[|\\\]|\\\(|\\\)")
_CLOSER = {"$$": "$$", "$": "$", "\\[": "\\]", "\\(": "\\)"}


def _latex_envs(text: str) -> List[Tuple[int, int, str]]:
    """(start, end, content) of ``$$..$$``, ``\\[..\\]`` (may span lines), ``$..$`` and
    ``\\(..\\)`` (one line), in order; escaped ``\\$`` is not a delimiter. Linear in
    ``len(text)``: one pass over the delimiters, the next closer of each kind precomputed."""
    toks = [(m.start(), m.end(), m.group(0)) for m in _DELIM.finditer(text)]
    nxt = {k: [None] * (len(toks) + 1) for k in set(_CLOSER.values())}
    for i in range(len(toks) - 1, -1, -1):
        for k, arr in nxt.items():
            arr[i] = i if toks[i][2] == k else arr[i + 1]
    newlines = [m.start() for m in re.finditer("\n", text)]
    out = []
    i = 0
    while i < len(toks):
        start, end, tok = toks[i]
        j = nxt[_CLOSER[tok]][i + 1] if tok in _CLOSER else None
        if j is None:
            i += 1
            continue
        close_start, close_end, _ = toks[j]
        if tok in ("$", "\\(") and \
                bisect.bisect_left(newlines, end) < bisect.bisect_left(newlines, close_start):
            i += 1  # an inline span stays on one line
            continue
        out.append((start, close_end, text[end:close_start]))
        i = j + 1
    return out


_PERCENT_AFTER = re.compile(r"\s*(?:\\%|%|percentage|percent|pct)\b|\s*(?:\\%|%)")
_NUM_TOKEN = (r"(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d{1,3}(?: \d{3})+(?!\d)(?:\.\d+)?"
              r"|\d+(?:[.,]\d+)?|\.\d+)")
_EXPR_TOKEN = re.compile(
    r"(?<![A-Za-z0-9_.,\\])(-?" + _NUM_TOKEN + r"(?:\s*[-+*/×÷^]\s*-?" + _NUM_TOKEN + r")*)")
_WORDS = re.compile(r"[A-Za-z]{2,}\s+[A-Za-z]{2,}")


def _plausible_latex(s: str) -> bool:
    """A LaTeX span that reads as an answer, not prose: non-empty, no run of plain words."""
    t = re.sub(r"\\(?:text|textbf|mathrm|mbox|textnormal)\s*\{[^{}]*\}", "x", s).strip()
    return bool(t) and not _WORDS.search(t) and bool(re.search(r"[\w\\]", t))


_BARE_LATEX = re.compile(r"-?\\(frac|sqrt)\s*\{")


def _bare_latex(text: str, masked: List[str]) -> List[Tuple[int, int, str]]:
    """``\\frac{2}{5}`` / ``\\sqrt{3}`` written outside ``$..$``: (start, end, text). Only the last
    20 occurrences (the answer is near the end) and none inside one already taken, so that
    nested or unclosed braces keep this linear."""
    out: List[Tuple[int, int, str]] = []
    taken_end = -1
    for m in list(_BARE_LATEX.finditer("".join(masked)))[-20:]:
        if m.start() < taken_end:
            continue
        end = _match_brace(text, m.end() - 1)
        if end is not None and m.group(1) == "frac":
            end = _match_brace(text, end + 1) if text.startswith("{", end + 1) else None
        if end is None:
            continue
        out.append((m.start(), end + 1, text[m.start():end + 1]))
        taken_end = end + 1
    return out


def _fallback(text: str, targets: Tuple[str, ...], first: bool = False) -> Optional[str]:
    """math-verify's and lighteval's last resort: of the LaTeX spans (``$..$`` or a bare
    ``\\frac{}{}``) and the numbers or simple expressions outside them, the one that ends last
    (``first``: the one that starts first) and reads as an answer."""
    envs = [env for env in _latex_envs(text) if _plausible_latex(env[2])]
    cands = []  # (end, start, answer)
    masked = list(text)
    for s, e, _ in envs:
        masked[s:e] = " " * (e - s)
    if "latex" in targets:
        for s, e, c in envs:
            pm = _PERCENT_AFTER.match(text, e)
            cands.append((e, s, c + ("\\%" if pm else "")))
        for s, e, c in _bare_latex(text, masked):
            cands.append((e, s, c))
            masked[s:e] = " " * (e - s)
    if "expr" in targets:
        plain = "".join(masked)
        for m in _EXPR_TOKEN.finditer(plain):
            tok = m.group(1)
            if re.fullmatch(r"-?\d+", tok) and m.end() < len(plain) and plain[m.end()] in "_":
                continue
            pm = _PERCENT_AFTER.match(plain, m.end())
            cands.append((m.end(), m.start(), tok.strip() + ("%" if pm else "")))
    if not cands:
        return None
    if first:
        cands.sort(key=lambda c: (c[1], -c[0]))
        return _last_of_chain(cands[0][2])
    cands.sort(key=lambda c: (c[0], -c[1]))
    return _last_of_chain(cands[-1][2])


def _last_of_chain(s: str) -> str:
    """``a = b = c`` -> c (not for lists such as ``a=1, b=2``); ``x = 1/3 \\approx 0.33`` -> 1/3."""
    if "\\approx" in s:
        head, tail = s.split("\\approx", 1)
        s = tail if re.fullmatch(r"\s*" + _SYM + r"\s*", head) else head
    if "," in s or ";" in s:
        return s.strip()
    cuts, depth = [], 0  # "=" outside braces: not the k=0 of \sum_{k=0}
    for i, ch in enumerate(s):
        depth += (ch == "{") - (ch == "}")
        if ch == "=" and depth == 0 and (i == 0 or s[i - 1] not in "<>!\\"):
            cuts.append(i)
    if len(cuts) > 1:
        return s[cuts[-1] + 1:].strip()
    return s.strip()


_ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
# "Final Answer: The final answer is 7.78. I hope it is correct." (Minerva), "The answer is 42."
_FINAL = re.compile(r"final\s+answer", re.IGNORECASE)
_ANCHOR = re.compile(r"(?:final\s+answer|the\s+answer"
                     r"|\b(?:answer|réponse|respuesta|antwort)\s*(?=[:：])|答案\s*(?=[:：是为]))",
                     re.IGNORECASE)


def _sentence(body: str) -> str:
    """The answer phrase after an anchor: up to the line end, "I hope", or a full stop that is
    not a decimal point."""
    body = body.split("\n", 1)[0]
    m = re.search(r"\s+I hope|\.(?=\s|$)|。", body)
    return body[:m.start()] if m else body


def _from_phrase(body: str, is_final: bool) -> Optional[str]:
    """The answer in the text following an anchor such as "final answer is"."""
    body = body.lstrip()
    m = re.match(r"(?:\*\*)?\s*(?:is|was|:|：|=)?\s*(?:\*\*)?\s*(?:[:=]\s*)?", body, re.IGNORECASE)
    body = body[m.end():] if m else body
    body = re.sub(r'^(?:\s|\\?"|\'|\*)+', "", body)
    spans = _boxed_spans(body[:400])
    if spans and spans[0][0] < 60:
        run = _boxed_run(body, spans)
        return run[2] if run else None
    envs = _latex_envs(body[:400])
    if envs and envs[0][0] == 0:  # "$x$" or "$12$ and $13$"
        items = [envs[0][2]]
        end = envs[0][1]
        for s, e, c in envs[1:]:
            if _connected(body[end:s]):
                items.append(c)
                end = e
            else:
                break
        pm = _PERCENT_AFTER.match(body, end)
        return ", ".join(i.strip() for i in items) + ("\\%" if pm else "")
    phrase = _sentence(body).strip().strip("*\"' ")
    if not phrase:
        return None
    if _WORDS.search(re.sub(r"\$[^$]*\$", "x", phrase)) or len(phrase) > 60:
        # prose: "The largest $n$ is 34", "Jane started growing Sphere 3 hours ago"
        m = re.search(r"\bis\b:?\s*(.+)$", phrase) if is_final else None
        if m and not _WORDS.search(m.group(1)):
            return m.group(1)
        return _fallback(phrase, FALLBACK_TARGETS, first=True)
    return phrase


def _anchored(text: str) -> Optional[Tuple[int, bool, str]]:
    """(position, is "final answer", answer) of the last answer phrase with an answer, or None."""
    hits = list(_ANCHOR.finditer(text))
    for m in reversed(hits):
        ans = _from_phrase(text[m.end():m.end() + 1000], bool(_FINAL.match(m.group(0))))
        if ans:
            return m.start(), bool(_FINAL.match(m.group(0))), ans
    return None


def _strip_final(ans: str) -> str:
    prev = None
    while prev != ans:
        prev = ans
        ans = ans.strip().strip("$").rstrip(".。").strip()
        ans = re.sub(r"^\\\(|\\\)$|^\\\[|\\\]$", "", ans).strip()
    return ans


# --- multiple choice
_LETTER = r"(?<![A-Za-z])\(?([A-E])\)?(?![A-Za-z])"
_CHOICE_ANCHOR = re.compile(
    r"answer\s*(?:is|:|：)|final answer|correct (?:answer|option|choice) is|réponse(?: est|\s*:)|"
    r"respuesta(?: es|\s*:)|antwort(?: ist|\s*:)|答案(?:是|为|：|:)?", re.IGNORECASE)


def _choice_in(s: str) -> Optional[str]:
    s = re.sub(r"\\text(?:bf)?\{([^{}]*)\}", r"\1", s)
    m = re.search(_LETTER, s)
    return m.group(1) if m else None


def _extract_choice(text: str) -> Optional[str]:
    """A multiple-choice letter A-E: boxed; the first letter after the last "answer is" (and a
    few other languages' phrases); a letter opening the text ("D. it can't be A or B",
    "(C) Cecile", "B。"); else the last standalone letter."""
    boxed = extract_boxed(text)
    if boxed is not None:
        letter = _choice_in(boxed)
        if letter:
            return letter
    hits = list(_CHOICE_ANCHOR.finditer(text))
    for m in reversed(hits):
        letter = _choice_in(text[m.end():m.end() + 60])
        if letter:
            return letter
    plain = re.sub(r"\\text(?:bf)?\{([^{}]*)\}", r"\1", text)
    m = re.match(r"\s*(?:\*\*)?\(?([A-E])\)?(?:$|(?=[.):：。,;\n]|[^\x00-\x7f]|\s+[A-Z]))", plain)
    if m:
        return m.group(1)
    hits = re.findall(_LETTER, plain)
    return hits[-1] if hits else None


def extract_answer(text: Optional[str], mode: str = "auto", fallback: Optional[bool] = None,
                   last_number_fallback: Optional[bool] = None,
                   options: Optional[GraderOptions] = None, **overrides) -> Optional[str]:
    """The final answer in ``text``, or None when none is found.

    Modes:
      - ``auto``: ``<answer>`` tags (a ``\\boxed{}`` inside them wins); else the last run of
        ``\\boxed{}``/``\\fbox{}`` answers, unless a "final answer is x" comes after it (a later
        final answer beats an earlier intermediate boxed one); else the last ``#### x``; else
        the last "final answer is x" / "the answer is x" / "Answer: x".
      - ``boxed``: only the last run of boxed answers (what Open-R1's accuracy reward reads).
      - ``answer_tag``: only the last ``<answer>...</answer>`` (a boxed answer inside is unwrapped).
      - ``gsm8k``: the last ``#### x``, else ``auto``.
      - ``choice``: a multiple-choice letter A-E.

    Several boxed answers joined only by "and", "or", commas or spacing (``\\boxed{1}, \\boxed{2}``)
    are one answer, the list "1, 2", compared as a set; a boxed answer followed by other text
    ("first \\boxed{3} then corrected: \\boxed{4}") does not join the last one.

    ``fallback`` (default from ``options``: off for rewards, on for eval; ``last_number_fallback``
    is its old name) takes the last LaTeX span or number when nothing else matched, in the
    ``auto`` and ``gsm8k`` modes (``boxed`` and ``answer_tag`` accept only their marker).

    >>> extract_answer("Reasoning... The answer is $42$. I hope it is correct.")
    '42'
    >>> extract_answer("<answer>\\\\boxed{7}</answer>")
    '7'
    >>> extract_answer("it is 3 or 4") is None
    True
    >>> extract_answer("it is 3 or 4", fallback=True)
    '4'
    """
    if text is None:
        return None
    if mode not in EXTRACT_MODES:
        raise ValueError(f"unknown extract mode {mode!r}; valid modes: {', '.join(EXTRACT_MODES)}")
    if fallback is None:
        fallback = last_number_fallback
    if fallback is not None:
        overrides["fallback"] = fallback
    opts = _opts(options, overrides)
    if mode == "choice":
        return _extract_choice(text)
    ans: Optional[str] = None
    if mode == "boxed":
        ans = extract_boxed_run(text)
    else:
        if mode == "gsm8k":
            ans = _after_hashes(text)
        if ans is None:
            tags = _ANSWER_TAG.findall(text)
            if tags:
                inner = tags[-1]
                ans = extract_boxed_run(inner)
                if ans is None:
                    ans = inner
        if ans is None and mode in ("auto", "gsm8k"):
            ans = _marked_answer(text)
    if ans is not None:
        ans = _strip_final(ans)
        if ans:
            return ans
        ans = None
    if opts.fallback and mode in ("auto", "gsm8k"):
        ans = _fallback(text, opts.fallback_targets)
        if ans:
            return _strip_final(ans) or None
    return None


def _after_hashes(text: str) -> Optional[str]:
    idx = text.rfind("####")
    if idx < 0:
        return None
    return text[idx + 4:].strip().split("\n")[0]


def _marked_answer(text: str) -> Optional[str]:
    """Boxed run / later "final answer" / ``####`` / answer phrase, in that order."""
    spans = _boxed_spans(text)
    run = _boxed_run(text, spans) if spans else None
    anchored = _anchored(text)
    if run is not None:
        if anchored is not None and anchored[1] and anchored[0] > run[1]:
            return anchored[2]
        return run[2]
    ans = _after_hashes(text)
    if ans is not None:
        return ans
    return anchored[2] if anchored else None


def gold_answer(gold: Union[str, int, float, None], mode: str = "auto") -> Optional[str]:
    """The reference answer as a string: numbers printed, GSM8K rationales cut after ``####``,
    a boxed reference unwrapped (several connected boxed answers, ``\\boxed{1}\\boxed{2}``, are
    the list "1, 2"), a solution ending in "final answer is x" cut to x; in ``choice`` mode
    the letter of "(C) Cecile"; None for None or an empty string.

    >>> gold_answer("She pays 2 * 3 = <<2*3=6>>6 dollars.\\n#### 6")
    '6'
    >>> gold_answer(27.0)
    '27.0'
    >>> gold_answer(r"\\boxed{1}\\boxed{2}")
    '1, 2'
    """
    if gold is None:
        return None
    if isinstance(gold, bool):
        return str(gold)
    if isinstance(gold, (int, float)):
        return repr(gold) if isinstance(gold, float) else str(gold)
    s = str(gold)
    if mode == "choice" and not re.fullmatch(r"\s*\(?[A-Ea-e]\)?\s*", s):
        letter = _extract_choice(s)
        return letter
    idx = s.rfind("####")
    if idx >= 0:
        s = s[idx + 4:]
    elif "\\boxed" in s or "\\fbox" in s:
        run = _boxed_run(s)
        s = run[2] if run is not None else s
    elif _FINAL.search(s) or len(s) > 200:
        found = _marked_answer(s)
        s = found if found is not None else s
    s = s.strip()
    return s or None


# -------------------------------------------------------------------------- normalisation

_UNITS = [
    "degrees", "degree", "cm", "centimeters", "centimeter", "meters", "meter", "km",
    "kilometers", "miles", "mile", "feet", "foot", "ft", "inches", "inch", "units", "unit",
    "square", "sq", "cents", "cent", "dollars", "dollar", "hours", "hour", "minutes", "minute",
    "seconds", "second", "days", "day", "weeks", "week", "years", "year", "mph", "pounds", "pound",
    "kg", "grams", "gram", "liters", "liter", "ml", "percentage", "percent", "pct", "points",
    "point", "people", "students", "eggs", "apples", "marbles", "books", "coins", "p.m.", "a.m.",
]
_UNIT_RE = re.compile(
    r"(?<=[\d}\s])\s*(?:" + "|".join(re.escape(u) for u in sorted(_UNITS, key=len, reverse=True))
    + r")(?:\^\{?[23]\}?|²|³)?\s*$")
_PERCENT_MARK = re.compile(r"%|\\%|\b(?:percentage|percent|pct)\b")


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
    """Canonical decimal: no thousands separators, no leading/trailing zeros, "-0" -> "0"."""
    neg = tok.startswith("-")
    body = tok[1:] if neg else tok
    body = body.replace(",", "").replace(" ", "")
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


_SMALL_WORDS = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen".split())}
_TENS_WORDS = {w: 10 * (i + 2) for i, w in enumerate(
    "twenty thirty forty fifty sixty seventy eighty ninety".split())}
_SCALE_WORDS = {"thousand": 1000, "million": 1000000}
_NUMBER_WORDS = re.compile(r"(?:(?:negative|minus)\s+)?[a-z]+(?:[\s-]+[a-z]+)*", re.IGNORECASE)


def _words_below_thousand(toks: List[str], i: int) -> Tuple[Optional[int], int]:
    """(value, next index) of "nine", "twenty-one", "three hundred and five", "a hundred" at
    ``toks[i]``; (None, i) when no such group starts there."""
    value, j = 0, i
    if j + 1 < len(toks) and toks[j + 1] == "hundred" and \
            (toks[j] == "a" or 1 <= _SMALL_WORDS.get(toks[j], 0) <= 9):
        value, j = 100 * (1 if toks[j] == "a" else _SMALL_WORDS[toks[j]]), j + 2
        if j + 1 < len(toks) and toks[j] == "and":
            j += 1
    if j < len(toks) and toks[j] in _TENS_WORDS:
        value, j = value + _TENS_WORDS[toks[j]], j + 1
        if j < len(toks) and 1 <= _SMALL_WORDS.get(toks[j], 0) <= 9:
            value, j = value + _SMALL_WORDS[toks[j]], j + 1
    elif j < len(toks) and toks[j] in _SMALL_WORDS and (toks[j] != "zero" or j == i):
        value, j = value + _SMALL_WORDS[toks[j]], j + 1
    return (value, j) if j > i else (None, i)


def number_from_words(s: str) -> Optional[int]:
    """An integer written in English words, or None: "nine", "twenty-one", "one hundred and
    five", "two thousand twenty-four", "a thousand", "negative three" (up to millions; each
    scale word once, in decreasing order; "zero" only alone).

    >>> number_from_words("Twenty-one"), number_from_words("three thousand four hundred")
    (21, 3400)
    >>> number_from_words("twenty twenty") is None, number_from_words("one two") is None
    (True, True)
    """
    s = s.strip()
    if not _NUMBER_WORDS.fullmatch(s):
        return None
    toks = re.split(r"[\s-]+", s.lower())
    sign = 1
    if toks[0] in ("negative", "minus"):
        sign, toks = -1, toks[1:]
    if toks == ["zero"]:
        return 0
    if "zero" in toks or not toks:
        return None
    total, i, last_scale = 0, 0, None
    while i < len(toks):
        if toks[i] == "a" and i + 1 < len(toks) and toks[i + 1] in _SCALE_WORDS:
            group, i = 1, i + 1
        else:
            group, i = _words_below_thousand(toks, i)
        if group is None:
            return None
        if i < len(toks) and toks[i] in _SCALE_WORDS:
            scale = _SCALE_WORDS[toks[i]]
            if last_scale is not None and scale >= last_scale:
                return None
            total, last_scale, i = total + group * scale, scale, i + 1
            if i + 1 < len(toks) and toks[i] == "and":
                i += 1
        elif i == len(toks):
            total += group
        else:
            return None
    return sign * total


# a name on the left of "=" that the answer may drop: x, x_1, a_{37}, \alpha, f(x), |AB|,
# (p,q), A:B, V_{1}:V_{2}, \frac{NO}{BO}
_SYM = r"(?:\\[a-zA-Z]+|[a-zA-Z]{1,3})(?:_\{?\w+\}?)?'?"
_LHS = re.compile(
    rf"\s*(?:{_SYM}(?:\({_SYM}(?:,{_SYM})*\))?|\|{_SYM}\||\({_SYM}(?:\s*,\s*{_SYM})+\)|"
    rf"{_SYM}(?:\s*:\s*{_SYM})+|\\frac\{{{_SYM}\}}\{{{_SYM}\}})\s*=\s*(.+)$")
_THOUSANDS = re.compile(
    r"-?(?:[1-9]\d{0,2}(?:,\d{3})+|[1-9]\d{0,2}(?: \d{3})+|\d+)(?:\.\d*)?|-?\.\d+")


def normalize_answer(s: Optional[str]) -> str:
    r"""Canonical string form of an answer, for exact comparison.

    >>> normalize_answer(r"\text{(C)}")
    'C'
    >>> normalize_answer(r"10,\!080"), normalize_answer("14{,}916"), normalize_answer("32, 349")
    ('10080', '14916', '32,349')
    >>> normalize_answer("025"), normalize_answer("27.0"), normalize_answer(r"90^\circ")
    ('25', '27', '90')
    >>> normalize_answer(r"\dfrac{3}{4}"), normalize_answer(r"\frac43"), normalize_answer("x = 5")
    ('\\frac{3}{4}', '\\frac{4}{3}', '5')
    >>> normalize_answer(r"\left( 3, \frac{\pi}{2} \right)")
    '(3,\\frac{\\pi}{2})'
    """
    if s is None:
        return ""
    return _normalize(str(s))[0]


_CACHE_MAX_LEN = 1000  # longer strings are not cached (a cache of 1 MB answers is a leak)


def _normalize(s: str) -> Tuple[str, str]:
    """(compact form for string comparison, the same with its spaces kept for math-verify:
    "F_k F_{n-k}" must not become "F_kF_{n-k}" before sympy reads it); cached when short."""
    return _normalize_cached(s) if len(s) <= _CACHE_MAX_LEN else _normalize_text(s)


@functools.lru_cache(maxsize=8192)
def _normalize_cached(s: str) -> Tuple[str, str]:
    return _normalize_text(s)


def _normalize_text(s: str) -> Tuple[str, str]:
    s = s.strip()
    if not s:
        return "", ""
    s = s.replace("\n", " ")
    # Outer $...$, \( \), \[ \]
    s = re.sub(r"^\$+|\$+$", "", s).strip()
    s = re.sub(r"^\\[(\[]|\\[)\]]$", "", s).strip()
    if s.startswith(("\\boxed", "\\fbox")):
        run = _boxed_run(s)
        if run is not None and run[0] == 0:
            s = run[2]
    # thousands separators written in LaTeX: 10,\!080 and 14{,}916 (a space may follow)
    s = re.sub(r"(?<=\d),\\!\s*(?=\d)", ",", s)
    s = re.sub(r"(?<=\d)\s*\{\s*,\s*\}\s*(?=\d)", ",", s)
    # spacing commands and sizing
    s = re.sub(r"(?<!\\)\\[,!;:> ]", " ", s)  # spacing, but not the "\\ " of a matrix row
    s = re.sub(r"\\q?quad\b", " ", s)
    s = re.sub(r"\\(?:left|right|bigl|bigr|Bigl|Bigr|big|Big)\b", "", s)
    s = s.replace("\\displaystyle", "")
    s = re.sub(r"\\[dtc]frac\b", r"\\frac", s)
    s = s.replace("\\$", "").replace("$", "")
    s = s.replace("\\%", "").replace("%", "")
    s = s.replace("−", "-")
    # degrees
    s = re.sub(r"\^\s*\{?\s*\\circ\s*\}?", "", s)
    s = s.replace("°", "").replace("\\circ", "")
    # units written as \text{ cm}, \mbox{ inches}^2
    s = re.sub(r"\\(?:text|mbox|textbf|mathrm|textnormal)\{\s*(" + "|".join(map(re.escape, _UNITS))
               + r")\s*\}(?:\^\{?[23]\}?)?", "", s)
    # remaining \text{...} -> contents
    for _ in range(3):
        s = re.sub(r"\\(?:text|textbf|mbox|mathrm|textnormal|operatorname)\s*\{([^{}]*)\}",
                   r"\1", s)
    s = s.strip()
    # trailing unit words ("5 cm", "12 dollars", "4 square units", "28 pct")
    for _ in range(2):
        s = _UNIT_RE.sub("", s).strip()
    s = re.sub(r"\s*\\?\s*(?:degrees?)$", "", s)
    # relations in one spelling
    s = re.sub(r"\\(?:geq|ge)\b|≥|>=", r"\\geq ", s)
    s = re.sub(r"\\(?:leq|le)\b|≤|<=", r"\\leq ", s)
    s = re.sub(r"\\(?:neq|ne)\b|≠|!=", r"\\neq ", s)
    s = re.sub(r"\\lt\b", "<", s)
    s = re.sub(r"\\gt\b", ">", s)
    # "12 and 13", "19, 46, and 82" -> a list
    s = re.sub(r"\s*,?\s+(?:and|or)\s+", ",", s) if re.search(r"[\d}]\s*,?\s+(?:and|or)\s+", s) \
        else s
    # a chain x = 2 + 3 = 5 -> 5; "x = 5" -> 5; "f(x) = 5" -> 5; "x \in [0, 1]" -> [0, 1]
    s = _last_of_chain(s)
    m = _LHS.match(s)
    if m and "=" not in m.group(1):
        s = m.group(1)
    m = re.match(r"^\s*[a-zA-Z]\s*\\in\s*(.+)$", s)
    if m:
        s = m.group(1)
    s = _fix_frac_args(s)
    s = _fix_sqrt_args(s)
    s = s.rstrip(".").strip()
    # a number written in words: "nine", "twenty-one" -> 21
    if s[:1].isalpha() and s[-1:].isalpha():
        n = number_from_words(s)
        if n is not None:
            return str(n), str(n)
    # multiple-choice "(C)" -> "C"
    m = re.fullmatch(r"\(?\s*([A-E])\s*\)?", s)
    if m:
        return m.group(1), m.group(1)
    # plain number with thousands separators / zero padding / trailing zeros; "32, 349" (a comma
    # with a space) is a list, not a thousands separator
    t = re.sub(r"\s+", " ", s).strip()
    if _THOUSANDS.fullmatch(t):
        return _strip_number(t), _strip_number(t)
    # a set written {1, 2} is the list 1, 2
    if t.startswith("{") and _match_brace(t, 0) == len(t) - 1 and len(_split_list(t[1:-1])) > 1:
        t = s = t[1:-1]
    compact = re.sub(r"\s+", "", s)
    # numbers inside tuples / intervals / expressions: drop trailing zeros of decimals only
    compact = re.sub(r"(?<![\d.])(\d+)\.(\d*?)0+(?!\d)",
                     lambda mm: mm.group(1) + ("." + mm.group(2) if mm.group(2) else ""), compact)
    return compact, t


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
_DECIMAL_COMMA = re.compile(r"-?\d+,\d+")


def _is_text_answer(g: str) -> bool:
    """A word or a name ("even", "Devon", "one-to-one"), compared as text; not an expression of
    one-letter symbols joined by a minus ("p-q", "x - y"), which is compared symbolically."""
    if not (_WORD_ANSWER.fullmatch(g) and len(g) > 1 and "\\" not in g):
        return False
    return "-" not in g or all(len(t) > 1 for t in re.split(r"[\s'-]+", g) if t)


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
    """math-verify's parse of ``\\boxed{s}``, cached when short (a gold answer is parsed once
    per problem, not once per sampled completion; sympy results are immutable). A timeout is
    not cached."""
    return _mv_parse_cached(s, limit) if len(s) <= _CACHE_MAX_LEN else _mv_parse_text(s, limit)


@functools.lru_cache(maxsize=4096)
def _mv_parse_cached(s: str, limit: Optional[int]):
    return _mv_parse_text(s, limit)


def _mv_parse_text(s: str, limit: Optional[int]):
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse
    from math_verify.errors import TimeoutException

    _quiet_math_verify()
    try:
        return tuple(parse(f"\\boxed{{{s}}}",
                           extraction_config=[LatexExtractionConfig(boxed_match_priority=0),
                                              ExprExtractionConfig()],
                           parsing_timeout=limit, raise_on_error=True))
    except TimeoutException as e:
        raise _Timeout() from e
    except Exception:
        return ()


def _has_expr(parsed) -> bool:
    """math-verify returns [expr, text] when it parsed, only the text when it gave up."""
    return any(not isinstance(x, str) for x in parsed)


_BASE = re.compile(r"(\w+)_\{?(\d+)\}?")


def _base_number(s: str):
    m = _BASE.fullmatch(s)
    return (m.group(1).lstrip("0") or "0", m.group(2)) if m else None


def _mv_verify(gold_parsed, pred_parsed, limit: Optional[int], rounding: int) -> bool:
    from math_verify import verify
    from math_verify.errors import TimeoutException

    try:
        return bool(verify(list(gold_parsed), list(pred_parsed), float_rounding=rounding,
                           timeout_seconds=limit, raise_on_error=True))
    except TimeoutException as e:
        raise _Timeout() from e
    except Exception:
        return False


def _split_list(s: str) -> List[str]:
    """Top-level comma/semicolon items of a normalised answer ("1,-2" -> ["1", "-2"]); one item
    when the whole answer is bracketed (a tuple or an interval is not a list)."""
    items, depth, cur = [], 0, []
    for ch in s:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch in ",;" and depth == 0:
            items.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    items.append("".join(cur))
    return [i for i in items if i]


def _round_half_up(x: Fraction, digits: int) -> Fraction:
    q = Fraction(10) ** digits
    return Fraction(math.floor(x * q + Fraction(1, 2))) / q


def _numbers_equal(p: Fraction, g: Fraction, p_txt: str, g_txt: str, opts: GraderOptions,
                   p_pct: bool, g_pct: bool) -> bool:
    golds = [g]
    preds = [p]
    if opts.percent == "either":
        if g_pct:
            golds.append(g / 100)
        if p_pct:
            preds.append(p / 100)
    digits = opts.float_rounding if "." in p_txt or "." in g_txt else None
    for gv in golds:
        for pv in preds:
            if gv == pv:
                return True
            if digits is not None and (_approximates(pv, gv, digits) or
                                       _approximates(gv, pv, digits)):
                return True
    return False


def _decimal_places(x: Fraction) -> Optional[int]:
    """Digits after the point of ``x`` written exactly, or None when its decimal never ends."""
    d = x.denominator
    for f in (2, 5):
        while d % f == 0:
            d //= f
    if d != 1:
        return None
    k = 0
    while (x * 10 ** k).denominator != 1:
        k += 1
    return k


def _approximates(dec: Fraction, exact: Fraction, digits: int) -> bool:
    """Whether the decimal ``dec`` stands for ``exact``, a value whose decimal never ends
    (1/3, a radical): ``exact`` rounded to ``dec``'s own places, or to ``digits`` places when
    it has fewer (0.26087 is 6/23 = 0.2608695... at 6 places, its last zero dropped), is
    ``dec``. Two values with finite decimals are equal only when equal: 2.0000001 is not 2;
    and 0.3333334 is not 1/3."""
    k = _decimal_places(dec)
    if k is None or _decimal_places(exact) is not None:
        return False
    return _round_half_up(exact, max(k, digits)) == dec


def _as_number(s: str, other: str, opts: GraderOptions) -> Optional[Fraction]:
    n = parse_number(s)
    if n is None and opts.decimal_comma and _DECIMAL_COMMA.fullmatch(s) and \
            re.fullmatch(r"-?\d*\.\d+", other):
        n = parse_number(s.replace(",", "."))
    return n


def _quick(p: str, g: str, pr: str, gr: str, opts: GraderOptions) -> Optional[bool]:
    """Comparison without sympy: True / False when settled, None to ask math-verify."""
    if p == g:
        return True
    gn, pn = _as_number(g, p, opts), _as_number(p, g, opts)
    if gn is not None and pn is not None:
        return _numbers_equal(pn, gn, p, g, opts, bool(_PERCENT_MARK.search(pr)),
                              bool(_PERCENT_MARK.search(gr)))
    gb = _base_number(g)
    if gb is not None:  # a number in another base, "2516_8": digits and base must both match
        pb = _base_number(p)
        return pb == gb if pb is not None else (p.lstrip("0") or "0") == gb[0]
    if re.fullmatch(r"[A-E]", g):  # multiple choice: only the letter counts
        return p.upper() == g
    if _is_text_answer(g):
        # text answer (a name, "even", "east"): sympy would read it as a product of symbols
        return p.lower().strip() == g.lower().strip()
    gi, pi = _split_list(g), _split_list(p)
    if len(gi) > 1 or len(pi) > 1:
        all_numbers = all(parse_number(x) is not None for x in gi + pi)
        if len(gi) == len(pi):
            left = list(pi)
            for x in gi:
                hit = next((y for y in left if _quick(y, x, y, x, opts) is True), None)
                if hit is None:
                    break
                left.remove(hit)
            else:
                return True
        if all_numbers:
            return False
    elif gn is not None and pn is None and re.fullmatch(r"[\d.,\s-]+", p):
        return False
    return None


# ------------------------------------------------------------- forms the problem asks for

_SENTENCE_START = r"(?:^|[.!?:\n])\s*(?:\*\*)?\s*"
_FORM_CUES = (
    ("factored", re.compile(_SENTENCE_START + r"(?:completely\s+|fully\s+)?factor(?:i[sz]e)?\b"
                            r"(?!\s+(?:of|is|was)\b)|\bfactor(?:ed)?\s+(?:completely|fully)\b"
                            r"|\bfactored\s+form\b", re.IGNORECASE)),
    ("expanded", re.compile(_SENTENCE_START + r"(?:fully\s+)?expand\b(?!\s+(?:on|upon)\b)"
                            r"|\bexpanded\s+form\b", re.IGNORECASE)),
    ("fraction", re.compile(r"\b(?:common|improper|ordinary)\s+fraction\b|\bas\s+a\s+fraction\b",
                            re.IGNORECASE)),
    ("decimal", re.compile(r"\bas\s+a\s+decimal\b|\bdecimal\s+(?:to|rounded)\b|\bto\s+the\s+"
                           r"nearest\s+(?:tenth|hundredth|thousandth|ten-thousandth)\b",
                           re.IGNORECASE)),
    ("percent", re.compile(r"\b(?:as|in)\s+(?:a\s+)?percent(?:age)?\b|\bwhat\s+percent(?:age)?\b",
                           re.IGNORECASE)),
    ("simplified", re.compile(_SENTENCE_START + r"simplify\b|\bsimplest\s+(?:radical\s+)?form\b"
                              r"|\b(?:lowest|simplest)\s+terms\b|\bfully\s+simplified\b"
                              r"|\bsimplified\s+form\b", re.IGNORECASE)),
    ("rationalized", re.compile(r"\brationali[sz]e\b|\bsimplest\s+radical\s+form\b",
                                re.IGNORECASE)),
)
FORMS = tuple(name for name, _ in _FORM_CUES)
# words one of which a cue needs, to skip its regular expression cheaply
_FORM_WORDS = {"factored": ("factor",), "expanded": ("expand",), "fraction": ("fraction",),
               "decimal": ("decimal", "nearest"), "percent": ("percent",),
               "simplified": ("simplif", "simplest", "lowest"),
               "rationalized": ("rationali", "simplest")}


@functools.lru_cache(maxsize=1024)
def required_forms(problem: Optional[str]) -> frozenset:
    r"""The answer forms a problem statement clearly asks for, a subset of ``FORMS``:
    "factored" ("Factor ...", "factor completely", "in factored form"), "expanded" ("Expand
    ..."), "fraction" ("as a common fraction"), "decimal" ("as a decimal", "to the nearest
    tenth"), "percent" ("as a percent", "what percent"), "simplified" ("Simplify ...",
    "simplest form", "lowest terms"), "rationalized" ("rationalize the denominator",
    "simplest radical form").

    >>> sorted(required_forms("Factor the expression $ab+5b+2a+10$."))
    ['factored']
    >>> sorted(required_forms("What is the greatest common factor of 12 and 18?"))
    []
    """
    if not problem:
        return frozenset()
    low = problem.lower()
    return frozenset(name for name, cue in _FORM_CUES
                     if any(w in low for w in _FORM_WORDS[name]) and cue.search(problem))


def _top_level_sum(s: str) -> bool:
    """Whether ``s`` has a + or - outside brackets and braces (a leading sign, one after an
    opening bracket, ``^``, ``_``, ``e`` or another sign is not a sum)."""
    depth = 0
    for i, ch in enumerate(s):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch in "+-" and depth == 0 and i > 0 and s[i - 1] not in "^_+-*/=(":
            return True
    return False


def _groups_with_sums(s: str) -> List[Tuple[int, int]]:
    """(open, close) of each (..) or [..] whose inside is a sum."""
    out, stack = [], []
    for i, ch in enumerate(s):
        if ch in "([":
            stack.append(i)
        elif ch in ")]" and stack:
            j = stack.pop()
            if _top_level_sum(s[j + 1:i]):
                out.append((j, i))
    return out


_SIMPLE_FRACTION = re.compile(r"\\frac\{(\d+)\}\{(\d+)\}|(?<![\d.}])(\d+)/(\d+)(?![\d.])")


def _square_factor(n: int) -> bool:
    """Whether a square > 1 divides ``n`` (False when unsure: n beyond 10^12)."""
    if n > 10 ** 12:
        return False
    k = 2
    while k * k <= n:
        if n % (k * k) == 0:
            return True
        k += 1
    return False


def _in_form(s: str, form: str) -> bool:
    """Whether the normalised answer ``s`` is written in ``form``; True when unsure."""
    if re.search(r"[=,;<>]|\\(?:geq|leq|neq|in|cup|cap|infty)", s):
        return True  # lists, relations, intervals: no opinion
    if form == "factored":
        return not _top_level_sum(s)
    if form == "expanded":
        return not _groups_with_sums(s) or _groups_with_sums(s) == [(0, len(s) - 1)]
    if form == "fraction":
        return not re.search(r"\d*\.\d", s)
    if form == "decimal":
        return bool(re.fullmatch(r"-?(?:\d+(?:\.\d*)?|\.\d+)", s))
    if form == "simplified":
        for m in _SIMPLE_FRACTION.finditer(s):
            a, b = int(m.group(1) or m.group(3)), int(m.group(2) or m.group(4))
            if b != 0 and math.gcd(a, b) > 1:
                return False
        return not any(_square_factor(int(n)) for n in re.findall(r"\\sqrt\{(\d+)\}", s))
    if form == "rationalized":
        for m in re.finditer(r"\\frac\{", s):
            num_end = _match_brace(s, m.end() - 1)
            if num_end is not None and s.startswith("{", num_end + 1):
                den_end = _match_brace(s, num_end + 1)
                if den_end is not None and "\\sqrt" in s[num_end + 1:den_end]:
                    return False
        return not re.search(r"/\(?\\sqrt", s)
    return True


@functools.lru_cache(maxsize=1024)
def _given_expressions(problem: str) -> frozenset:
    """Normalised forms of the LaTeX spans of a problem statement ("Simplify $\\sqrt{242}$")."""
    return frozenset(_normalize(c)[0] for _, _, c in _latex_envs(problem[:20000]))


_REWRITES = frozenset({"factored", "expanded", "simplified"})


def _form_violated(p: str, g: str, forms: frozenset, problem: str) -> Optional[str]:
    """The first form asked for that the gold is in and the answer is not, or None. A form the
    gold itself is not written in is not checked (the cue was misread, or the reference does
    not follow it). When the problem asks to factor, expand or simplify, an answer that copies
    an expression of the problem the gold does not copy ("Simplify $(-k + 4) + (-2 + 3k)$"
    answered with itself) is not in the form asked; a plain number never counts as a copy."""
    for form in FORMS:
        if form in forms and form != "percent" and _in_form(g, form) and not _in_form(p, form):
            return form
    if forms & _REWRITES and p != g and parse_number(p) is None and \
            p in _given_expressions(problem) and g not in _given_expressions(problem):
        return "restated"
    return None


def is_equivalent(pred: Optional[str], gold: Optional[str], timeout: Optional[float] = 5.0,
                  use_math_verify: bool = True, options: Optional[GraderOptions] = None,
                  problem: Optional[str] = None, **overrides) -> Optional[bool]:
    r"""Whether answer ``pred`` equals answer ``gold`` (both already extracted).

    Order: normalised strings equal -> True (a number written in words is its digits); both
    plain numbers -> exact rational comparison (with ``options``: decimal comma, percent, float
    rounding); numbers in a base, choice letters, words -> exact; lists -> the same items in any
    order; otherwise math-verify (symbolic, ``timeout`` seconds per parse/verify in the main
    thread, none elsewhere; the gold's parse is cached).

    ``problem`` (the problem statement, optional): when it clearly asks for a form
    (``required_forms``: factored, expanded, a fraction, a decimal, a percent, simplified,
    rationalized) and the gold is written in it, an equal answer not written in it is False.
    ``options.approx_rel_tol`` (default None): a decimal within this relative tolerance of a
    gold whose decimal never ends (an irrational, 1/3) is True.

    Returns None when ``gold`` is empty, math-verify cannot parse it, or the symbolic check timed
    out; False when ``pred`` is None or empty.

    >>> is_equivalent("0.75", r"\frac{3}{4}"), is_equivalent("025", "25"), is_equivalent("26", "25")
    (True, True, False)
    >>> is_equivalent("1000,99", "1000.99"), is_equivalent("1000,99", "1.1", decimal_comma=False)
    (True, False)
    >>> is_equivalent("ab+2a+5b+10", "(a+5)(b+2)", problem="Factor $ab+2a+5b+10$.")
    False
    """
    opts = _opts(options, overrides)
    g, g_mv = _normalize(str(gold)) if gold is not None else ("", "")
    if not g:
        return None
    p, p_mv = _normalize(str(pred)) if pred is not None else ("", "")
    if not p:
        return False
    forms = required_forms(problem) if problem and opts.check_form else frozenset()
    if "percent" in forms and opts.percent == "either":
        opts = dataclasses.replace(opts, percent="strip")  # the percent, not the fraction
    limit = _mv_timeout(timeout)
    try:
        ok = _equivalent(p, g, p_mv, g_mv, str(pred), str(gold), opts, use_math_verify, limit)
        if ok is False and opts.approx_rel_tol is not None:
            ok = _approximates_within(p, g, g_mv, opts.approx_rel_tol, limit)
    except _Timeout:
        return None
    if ok and forms and _form_violated(p, g, forms, problem):
        return False
    return ok


def _equivalent(p: str, g: str, p_mv: str, g_mv: str, pred: str, gold: str,
                opts: GraderOptions, use_math_verify: bool, limit: Optional[int]
                ) -> Optional[bool]:
    quick = _quick(p, g, pred, gold, opts)
    if quick is not None:
        return quick
    if not use_math_verify:
        return False
    rounding = opts.float_rounding if opts.float_rounding is not None else 15
    gold_parsed = _mv_parse(g_mv, limit)
    if not _has_expr(gold_parsed):
        gold_parsed = _mv_parse(gold, limit)
    if not _has_expr(gold_parsed):
        return None  # unparseable gold: not scorable
    if "=" in g and "=" not in p and "=" in pred:
        p_mv = pred  # an equation against an equation: keep the pred's left side
    pred_parsed = _mv_parse(p_mv, limit)
    if not pred_parsed:
        pred_parsed = _mv_parse(pred, limit)
    if not pred_parsed:
        return False
    return _mv_verify(gold_parsed, pred_parsed, limit, rounding)


def _approximates_within(p: str, g: str, g_mv: str, rel_tol: float, limit: Optional[int]
                         ) -> bool:
    """Whether the decimal ``p`` is within ``rel_tol`` of the gold ``g``, when the gold's exact
    value has a decimal that never ends (3\\sqrt{3}/4, \\pi, 1/3); a gold with a finite decimal
    is equal only when equal."""
    if "." not in p or not re.fullmatch(r"-?(?:\d+\.\d*|\.\d+)", p):
        return False
    pv = Fraction(p)
    gn = parse_number(g)
    if gn is not None:
        if _decimal_places(gn) is not None:
            return False
        gv = float(gn)
    else:
        expr = next((x for x in _mv_parse(g_mv, limit) if not isinstance(x, str)), None)
        if expr is None:
            return False
        from math_verify.errors import TimeoutException
        from math_verify.utils import timeout as mv_timeout

        try:  # under math-verify's own limit, as its parse and verify are
            value = mv_timeout(limit)(_irrational_value)(expr)
        except TimeoutException as e:
            raise _Timeout() from e
        if value is None:
            return False
        gv = value
    if not math.isfinite(gv) or gv == 0:
        return False
    return abs(float(pv) - gv) <= rel_tol * abs(gv)


def _irrational_value(expr) -> Optional[float]:
    """The value of a sympy expression whose decimal never ends, or None (a finite decimal, a
    set, a matrix, a relation, a complex number). Time limits are BaseExceptions: not caught."""
    try:
        exact = expr.doit()
        if exact.is_Float or exact.is_Rational and \
                _decimal_places(Fraction(int(exact.p), int(exact.q))) is not None:
            return None  # a finite decimal: equal only when equal
        value = exact.evalf(30)
        if not (value.is_number and value.is_real):
            return None
        return float(value)
    except Exception:
        return None


def clear_caches() -> None:
    """Forget cached normalisations and math-verify parses (for benchmarks and tests)."""
    _normalize_cached.cache_clear()
    _mv_parse_cached.cache_clear()
    required_forms.cache_clear()
    _given_expressions.cache_clear()


def gold_is_usable(gold: Optional[str], timeout: Optional[float] = 5.0) -> bool:
    r"""Whether ``gold`` can be compared at all: non-empty, and a number, a word, a choice
    letter, a list of numbers, or LaTeX that math-verify parses (a timeout counts as unusable).

    >>> gold_is_usable("025"), gold_is_usable(r"\frac{1}{2}"), gold_is_usable("")
    (True, True, False)
    """
    g, g_mv = _normalize(str(gold)) if gold is not None else ("", "")
    if not g:
        return False
    if parse_number(g) is not None or re.fullmatch(r"[A-E]", g) or _WORD_ANSWER.fullmatch(g) or \
            all(parse_number(x) is not None for x in _split_list(g)):
        return True
    try:
        limit = _mv_timeout(timeout)
        return _has_expr(_mv_parse(g_mv, limit)) or _has_expr(_mv_parse(str(gold), limit))
    except _Timeout:
        return False


def grade(text: Optional[str], gold: Union[str, int, float, None], mode: str = "auto",
          timeout: Optional[float] = 5.0, last_number_fallback: Optional[bool] = None,
          options: Optional[GraderOptions] = None, problem: Optional[str] = None,
          **overrides) -> Optional[bool]:
    r"""Extract the answer from model output ``text`` and compare it with ``gold``.

    ``gold`` may be a number (AMC 27.0, AIME 25), a LaTeX string, a GSM8K rationale ending in
    ``#### x``, a boxed solution (several connected boxed answers are one set), or in ``choice``
    mode a labelled option ("(C) Cecile"). ``options`` (default ``REWARD_OPTIONS``) and keyword
    overrides (``fallback=True``, ``float_rounding=4``, ...) are ``GraderOptions`` fields.
    ``problem``, the problem statement, lets the answer be checked for a form it asks for
    (see ``is_equivalent``).
    Returns None when there is no usable gold answer or the check timed out; False when no
    answer is found in ``text``.

    >>> grade(r"... so the total is \boxed{\dfrac{1}{2}}", r"\frac12")
    True
    >>> grade("#### 1,000", "The total is 1000.\n#### 1000", mode="gsm8k")
    True
    >>> grade("Therefore $x \\geq 5$ is the solution.", "x >= 5", options=EVAL_OPTIONS)
    True
    """
    if last_number_fallback is not None:
        overrides["fallback"] = last_number_fallback
    opts = _opts(options, overrides)
    g = gold_answer(gold, mode=mode)
    if g is None:
        return None
    pred = extract_answer(text, mode=mode, options=opts)
    if pred is None:
        return False
    return is_equivalent(pred, g, timeout=timeout, options=opts, problem=problem)
