r"""The exact value of a numeric final answer, read as a whole expression.

A policy under a rule reward learns quickly to write whatever the reward misreads, so a reward
that compares numbers must read the number the answer *means*, never a prefix of it: ``2/3`` is
two thirds (not 2), ``2^2`` is 4, ``\frac{3}{8}`` is three eighths (not 3), ``2 or 3`` is no single
value at all. This module reads an answer string as one arithmetic expression, exactly
(``fractions.Fraction``):

- numbers: integers, thousands separators (``1,234``, ``1{,}234``, ``10,\!080``), decimals,
  scientific ``2e3``; a leading ``-`` (or ``−``); ``$``/``\$`` currency signs are dropped;
- ``a/b``, ``\frac{a}{b}`` (``\dfrac``, ``\tfrac``, ``\frac12``), ``a^b`` / ``a^{b}``
  (integer exponents, bounded), ``+ - * × · \times \cdot ÷ \div``, parentheses and braces;
- ``50%`` / ``50\%`` reads 50 (the percent sign is dropped, as GSM8K writes its references).

Words separate the numeric *spans* of an answer ("18 dollars" has one span, "2 or 3" two). An
answer is readable when every span parses and all of them have the same value; a chain
``10 - 8 = 2`` reads its last side. Anything else is unreadable (None), and so is a span glued to
something this reader does not evaluate (``5!``, ``\sqrt{4}``, ``2:3``, ``2,5``, ``2 3``):
an unreadable answer is never paid, where a prefix reading would pay a wrong one.

>>> answer_value("2/3"), answer_value(r"\boxed{\frac{3}{8}}"), answer_value("2^2")
(Fraction(2, 3), Fraction(3, 8), Fraction(4, 1))
>>> answer_value("The answer is $1,234.50."), answer_value("2 or 3") is None
(Fraction(2469, 2), True)
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import List, Optional, Tuple

__all__ = ["answer_value", "last_value", "first_span", "numeric_spans", "span_value",
           "format_value", "clean_answer"]

MAX_EXPONENT = 1000       # |b| in a^b
MAX_BITS = 4096           # size of any intermediate numerator/denominator
MAX_SPAN_CHARS = 200      # a longer "number" is not an answer

_TEXT_CMD = re.compile(r"\\(?:text|textbf|textrm|textnormal|mathrm|mathbf|mbox|boxed|fbox)\s*\{")
_DROP = re.compile(r"\\(?:left|right|bigl|bigr|Bigl|Bigr|big|Big|displaystyle|quad|qquad)\b"
                   r"|(?<!\\)\\[,;:! ]|\\\$|\$")


def _match_brace(s: str, i: int) -> Optional[int]:
    depth = 0
    for j in range(i, len(s)):
        if s[j] == "{":
            depth += 1
        elif s[j] == "}":
            depth -= 1
            if depth == 0:
                return j
    return None


def _unwrap_commands(s: str) -> str:
    r"""``\text{dollars}`` -> `` dollars `` and ``\boxed{x}`` -> x (the content, spaced)."""
    for _ in range(20):
        m = _TEXT_CMD.search(s)
        if m is None:
            return s
        close = _match_brace(s, m.end() - 1)
        if close is None:
            return s[:m.start()] + " " + s[m.end():]
        s = s[:m.start()] + " " + s[m.end():close] + " " + s[close + 1:]
    return s


def _brace_pairs(s: str) -> dict:
    """{index of ``{``: index of its ``}``} for the balanced braces of ``s``, in one pass."""
    pairs, stack = {}, []
    for i, ch in enumerate(s):
        if ch == "{":
            stack.append(i)
        elif ch == "}" and stack:
            pairs[stack.pop()] = i
    return pairs


_FRAC = re.compile(r"\\[dtc]?frac(?![a-zA-Z])\s*")


def _rewrite_fracs(s: str) -> str:
    r"""``\frac{a}{b}`` -> ``((a)/(b))``, nested ones too, in one pass (``\frac12`` is
    ``\frac{1}{2}``); a ``\frac`` whose arguments are not two brace groups is left as it is,
    which makes its span unreadable."""
    s = re.sub(r"\\([dtc]?frac)\s*(\d)\s*(\d)", r"\\\1{\2}{\3}", s)
    pairs = _brace_pairs(s)
    edits = {}                                  # start -> (end, replacement)
    for m in _FRAC.finditer(s):
        k = m.end()
        c1 = pairs.get(k)
        c2 = pairs.get(c1 + 1) if c1 is not None else None
        if c2 is None:
            continue
        edits[m.start()] = (k + 1, "((")
        edits[c1] = (c1 + 2, ")/(")
        edits[c2] = (c2 + 1, "))")
    if not edits:
        return s
    out, i = [], 0
    for start in sorted(edits):
        end, rep = edits[start]
        out.append(s[i:start] + rep)
        i = end
    out.append(s[i:])
    return "".join(out)


# GSM8K's calculator annotations, "<<48/2=24>>24": the text after them is the number
_CALCULATOR = re.compile(r"<<[^<>\n]{0,200}>>")
# a rate "$20/hour", "3 km/h": a unit word after the slash (2 letters or more, not a number
# word: "2/three" stays unreadable, as does "2/x")
_NUMBER_WORDS = ("zero|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty"
                 "|thirty|forty|fifty|hundred|thousand|million|billion|half|halves|third|thirds"
                 "|quarter|quarters|fourth|fourths|fifth|fifths|tenth|tenths|hundredth|hundredths")
_PER_UNIT = re.compile(r"(?<=[\d)])\s*/\s*(?=[A-Za-z]{2,}\b)(?!(?:" + _NUMBER_WORDS + r")\b)",
                       re.IGNORECASE)
# square and cubic units, "12 cm^2", "980cm³" (after a unit word only: "2x^2" stays unreadable)
_UNIT_POWER = re.compile(r"(?<![A-Za-z])(mm|cm|km|m|in|ft|yd|inch|inches|foot|feet|yards?"
                         r"|meters?|miles?|units?)\s*\^\s*(?:\{\s*[23]\s*\}|[23])(?![\d])")
_THOUSANDS = re.compile(r"(?<![\d.,])\d{1,3}(?:,\d{3})+(?![\d]|,\d|\.\d*,)")


def clean_answer(s: str) -> str:
    r"""The answer with its LaTeX, currency and thousands separators rewritten into plain
    arithmetic: ``\$1{,}234`` -> ``1234``, ``\frac{1}{2}`` -> ``((1)/(2))``, ``3 \times 4`` ->
    ``3 * 4``; commands this reader does not evaluate are kept (they make a span unreadable)."""
    s = _CALCULATOR.sub(" ", str(s))
    s = _unwrap_commands(s)
    s = re.sub(r"(?<=\d)\s*\{\s*,\s*\}\s*(?=\d)", ",", s)       # 1{,}234
    s = re.sub(r"(?<=\d),\\!\s*(?=\d)", ",", s)                   # 10,\!080
    s = _DROP.sub(" ", s)
    s = s.replace("\\%", "%").replace("−", "-").replace("–", "-")
    s = re.sub(r"\\(?:times|cdot)(?![a-zA-Z])|×|·|⋅", "*", s)
    s = re.sub(r"\\div(?![a-zA-Z])|÷", "/", s)
    s = s.replace("²", "^2").replace("³", "^3")
    s = s.replace("**", " ")       # markdown bold (and Python's power: unreadable on purpose)
    s = _rewrite_fracs(s)
    s = re.sub(r"[ \t]+", " ", s)
    s = _THOUSANDS.sub(lambda m: m.group(0).replace(",", ""), s)
    s = _PER_UNIT.sub(" per ", s)
    s = _UNIT_POWER.sub(r"\1", s)
    s = re.sub(r"(?<=\d)-(?=[A-Za-z]{2,})", " ", s)    # "27-liter", "5-year-old"
    return s


# what a numeric span is made of: digits, operators, brackets, %, and (to make the span
# unreadable) what glues another meaning onto a number: a factorial !, \commands, a comma or
# colon between digits (2,5 and 2:3)
_SPAN = re.compile(r"(?:[\d.+\-*/^()\[\]{}%]|\\[A-Za-z]+|(?<=\d),(?=\d)"
                   r"|(?<=\d)\s*:\s*(?=-?\d)|(?<=[\d)}\]])!|(?<=\d)[eE](?=[+-]?\d)"
                   r"|[ \t](?=[ \t]*(?:[\d.+\-*/^()\[\]{}%]|\\[A-Za-z])))+")


def _spans(text: str) -> List[Tuple[int, int, str]]:
    """(start, end, span) of the numeric spans of cleaned text that hold a digit, in order."""
    out, pos = [], 0
    for part in re.split(r"(=|\n|<|>|\\approx|≈)", text):
        for m in _SPAN.finditer(part):
            if re.search(r"\d", m.group(0)):
                out.append((pos + m.start(), pos + m.end(), m.group(0).strip()))
        pos += len(part)
    return out


def numeric_spans(text: str) -> List[str]:
    """The numeric spans of already-cleaned text, in order (those holding a digit).

    >>> numeric_spans("She pays 3 * 4 = 12 dollars, and 2/3 of it.")
    ['3 * 4', '12', '2/3']
    """
    return [sp for _, _, sp in _spans(text)]


def _trim(span: str) -> str:
    """A span as it stands in prose: a full stop after it, and brackets of the sentence around
    it (``(which is 5)`` -> 5) removed."""
    s = span.strip()
    for _ in range(4):
        before = s
        s = s.rstrip(".").strip()
        for o, c in ("()", "[]", "{}"):
            extra = s.count(o) - s.count(c)     # > 0: unclosed openers; < 0: stray closers
            stray = o if extra > 0 else c
            i, j = 0, len(s)
            while extra and i < j and s[i] in stray + " ":
                extra -= (s[i] == stray) * (1 if stray == o else -1)
                i += 1
            while extra and j > i and s[j - 1] in stray + " ":
                extra -= (s[j - 1] == stray) * (1 if stray == o else -1)
                j -= 1
            s = s[i:j].strip()
        if s == before:
            break
    return s


_TOKEN = re.compile(r"\s*(?:(\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)"
                    r"|([-+*/^()\[\]{}%]))")


class _Unreadable(Exception):
    pass


def _check(x: Fraction) -> Fraction:
    if x.numerator.bit_length() > MAX_BITS or x.denominator.bit_length() > MAX_BITS:
        raise _Unreadable("too large")
    return x


class _Parser:
    """expr := term (+|- term)*; term := unary (*|/ unary)*; unary := (-|+) unary | power;
    power := postfix (^ unary)?; postfix := atom %*; atom := number | (expr) | [expr] | {expr}."""

    def __init__(self, s: str):
        pos, toks = 0, []
        s = s.rstrip()
        while pos < len(s):
            m = _TOKEN.match(s, pos)
            if m is None or m.end() == pos:
                raise _Unreadable(s[pos:pos + 10])
            toks.append(("num", m.group(1)) if m.group(1) is not None else ("op", m.group(2)))
            pos = m.end()
        self.toks, self.i = toks, 0

    def peek(self) -> Optional[str]:
        return self.toks[self.i][1] if self.i < len(self.toks) and self.toks[self.i][0] == "op" \
            else None

    def take(self):
        if self.i >= len(self.toks):
            raise _Unreadable("unexpected end")
        self.i += 1
        return self.toks[self.i - 1]

    def parse(self) -> Fraction:
        v = self.expr()
        if self.i != len(self.toks):
            raise _Unreadable("trailing tokens")
        return v

    def expr(self) -> Fraction:
        v = self.term()
        while self.peek() in ("+", "-"):
            op = self.take()[1]
            w = self.term()
            v = _check(v + w if op == "+" else v - w)
        return v

    def term(self) -> Fraction:
        v = self.unary()
        while self.peek() in ("*", "/"):
            op = self.take()[1]
            w = self.unary()
            if op == "/" and w == 0:
                raise _Unreadable("division by zero")
            v = _check(v * w if op == "*" else v / w)
        return v

    def unary(self) -> Fraction:
        if self.peek() in ("-", "+"):
            op = self.take()[1]
            v = self.unary()
            return -v if op == "-" else v
        return self.power()

    def power(self) -> Fraction:
        v = self.postfix()
        if self.peek() == "^":
            self.take()
            e = self.unary()
            if e.denominator != 1 or abs(e.numerator) > MAX_EXPONENT:
                raise _Unreadable("exponent")
            if v == 0 and e < 0:
                raise _Unreadable("division by zero")
            if v != 0 and max(v.numerator.bit_length(), v.denominator.bit_length()) \
                    * abs(e.numerator) > MAX_BITS:
                raise _Unreadable("too large")
            v = v ** int(e)
        return v

    def postfix(self) -> Fraction:
        v = self.atom()
        while self.peek() == "%":
            self.take()
        return v

    def atom(self) -> Fraction:
        kind, tok = self.take()
        if kind == "num":
            mant, _, exp = tok.lower().partition("e")
            if exp and abs(int(exp)) > MAX_EXPONENT:
                raise _Unreadable("exponent")
            return _check(Fraction(mant.rstrip(".") or "0") * Fraction(10) ** int(exp or 0))
        close = {"(": ")", "[": "]", "{": "}"}.get(tok)
        if close is None:
            raise _Unreadable(f"unexpected {tok!r}")
        v = self.expr()
        if self.take() != ("op", close):
            raise _Unreadable("unbalanced brackets")
        return v


def span_value(span: str) -> Optional[Fraction]:
    """The value of one numeric span (already cleaned), or None when it does not parse.

    >>> span_value("2^{10}"), span_value("((3)/(8))"), span_value("5!") is None
    (Fraction(1024, 1), Fraction(3, 8), True)
    """
    s = _trim(span)
    if not s or len(s) > MAX_SPAN_CHARS or not re.search(r"\d", s):
        return None
    try:
        return _Parser(s).parse()
    except (_Unreadable, ValueError, ZeroDivisionError, OverflowError, RecursionError):
        return None


def _last_side(s: str) -> str:
    """The last side of a chain ``a = b = c`` (``=`` outside brackets)."""
    depth, cut = 0, -1
    for i, ch in enumerate(s):
        depth += (ch in "({[") - (ch in ")}]")
        if ch == "=" and depth <= 0:
            cut = i
    return s[cut + 1:]


def answer_value(answer: Optional[str]) -> Optional[Fraction]:
    r"""The value of a final answer (see the module docstring), or None when it has no number,
    several different ones, a relation (``<``, ``\leq``), or a span that does not parse.

    >>> answer_value("10 - 8 = 2"), answer_value("18 dollars"), answer_value("50\\%")
    (Fraction(2, 1), Fraction(18, 1), Fraction(50, 1))
    >>> [answer_value(a) for a in ("5!", r"\sqrt{4}", "2:3", "2,5", "x > 3")]
    [None, None, None, None, None]
    """
    if answer is None:
        return None
    s = clean_answer(answer)
    if re.search(r"[<>≤≥≠]|\\(?:[lg]eq?|neq?|[lg]t|pm|mp)\b|\\approx|≈", s):
        return None
    s = _last_side(s)
    spans = numeric_spans(s)
    if not spans:
        return None
    values = {span_value(sp) for sp in spans}
    if None in values or len(values) != 1:
        return None
    return values.pop()


_HEDGE_GAP = re.compile(r"[\s,;/|]*(?:(?:or|and|nor|either|maybe|perhaps|possibly|else)\b"
                        r"[\s,;/|]*)*", re.IGNORECASE)


def last_value(text: Optional[str]) -> Optional[Fraction]:
    """The value of the last numeric span of free text (the last-number fallback, read as a
    whole expression: ``... so 2/3`` is 2/3, not 3), or None when that span does not parse or
    ends a list of numbers (``... 17 or 18``, ``17, 18``: a hedge, not an answer).

    >>> last_value("She has 3 + 4 = 7 apples, so $7.00 in total."), last_value("ratio 2:3")
    (Fraction(7, 1), None)
    >>> last_value("so it is 17 or 18") is None
    True
    """
    if text is None:
        return None
    s = clean_answer(text)
    spans = _spans(s)
    if not spans:
        return None
    if len(spans) > 1 and _HEDGE_GAP.fullmatch(s[spans[-2][1]:spans[-1][0]]):
        return None
    return span_value(spans[-1][2])


def first_span(text: Optional[str]) -> Optional[str]:
    """The first numeric span of free text (cleaned, trimmed), or None when there is none or
    a list of numbers starts there (``17 or 18``, ``17, 18``: a hedge, not an answer).

    >>> first_span("432 is it"), first_span("432/2."), first_span("432 or 431") is None
    ('432', '432/2', True)
    """
    if text is None:
        return None
    s = clean_answer(text)
    spans = _spans(s)
    if not spans or (len(spans) > 1 and _HEDGE_GAP.fullmatch(s[spans[0][1]:spans[1][0]])):
        return None
    return _trim(spans[0][2])


def format_value(x: Optional[Fraction]) -> Optional[str]:
    """A value as text: an integer, a terminating decimal, else ``p/q``.

    >>> format_value(Fraction(1200)), format_value(Fraction(2401, 2)), format_value(Fraction(2, 3))
    ('1200', '1200.5', '2/3')
    """
    if x is None:
        return None
    if x.denominator == 1:
        return str(x.numerator)
    d = x.denominator
    for p in (2, 5):
        while d % p == 0:
            d //= p
    if d == 1:
        digits = 0
        while (x * 10 ** digits).denominator != 1:
            digits += 1
        q = abs(x.numerator) * 10 ** digits // x.denominator
        s = str(q).rjust(digits + 1, "0")
        return ("-" if x < 0 else "") + s[:-digits] + "." + s[-digits:]
    return f"{x.numerator}/{x.denominator}"
