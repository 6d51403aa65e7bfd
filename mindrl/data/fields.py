"""The field-path language every data loader uses (RL, SFT, DPO/SimPO, eval, ``mindrl data``).

A path names a value inside one row (a JSON object, a parquet row, or a JSON list such as an
Open-Reasoner-Zero turn pair):

==============================  ==========================================================
``answer``                      the top-level column ``answer``
``reward_model.ground_truth``   a key inside a nested object (verl parquet)
``prompt[-1].content``          an element of a list (0-based; negative counts from the end)
``conversations[0].value``      ShareGPT: the first turn's text
``[1].ground_truth.value``      a row that is itself a list (ORZ: the assistant turn)
``extra_info.index``            verl's row index
==============================  ==========================================================

An id may join several columns: ``year,contest,number`` gives ``"2019-AMC_10A-4"``
(:func:`join_id`, the parts joined with ``-``).

The API (small on purpose; other modules import only these):

``parse_path(text) -> tuple``
    ``"prompt[-1].content"`` -> ``("prompt", -1, "content")``; a malformed path raises
    :class:`~mindrl.data.io.DataError`.
``get_field(row, path)``
    The value, or :class:`FieldMissing` (a ``KeyError``) saying which step of the path failed
    and what was there instead.
``has_field(row, path) -> bool``
``split_fields("a, b,c") -> ["a", "b", "c"]``
``join_id(row, fields) -> str``
``field_error(where, path, err) -> DataError``
    The one-line error "``FILE: line 3: field 'x.y': ...``" every loader raises.
"""

from __future__ import annotations

import re
from typing import Any, List, Sequence, Tuple, Union

from mindrl.data.io import DataError

Step = Union[str, int]
_INDEX = re.compile(r"\[\s*(-?\d+)\s*\]")
_NAME = re.compile(r"[^.\[\]]+")


class FieldMissing(KeyError):
    """A path step that does not resolve; ``str(e)`` says which step and what was there."""

    def __str__(self) -> str:
        return str(self.args[0])


def parse_path(text: str) -> Tuple[Step, ...]:
    """``"a.b[0].c"`` -> ``("a", "b", 0, "c")``.

    >>> parse_path("prompt[-1].content")
    ('prompt', -1, 'content')
    >>> parse_path("[1].ground_truth.value")
    (1, 'ground_truth', 'value')
    """
    s = str(text).strip()
    if not s:
        raise DataError("empty field path")
    steps: List[Step] = []
    pos = 0
    while pos < len(s):
        m = _INDEX.match(s, pos)
        if m is None:
            m = _NAME.match(s, pos + (1 if pos and s[pos] == "." else 0))
            if m is None or (pos and s[pos] != "."):
                raise DataError(f"field path '{text}': cannot read it at character {pos + 1} "
                                f"(write names joined by '.', list items as [N], e.g. "
                                f"reward_model.ground_truth or prompt[-1].content)")
            steps.append(m.group(0).strip())
        else:
            steps.append(int(m.group(1)))
        pos = m.end()
    return tuple(steps)


def _describe(value: Any) -> str:
    if isinstance(value, dict):
        keys = ", ".join(str(k) for k in list(value)[:12])
        return f"an object with keys: {keys}" if keys else "an empty object"
    if isinstance(value, (list, tuple)):
        return f"a list of {len(value)} items"
    return f"{type(value).__name__} {str(value)[:40]!r}"


def get_field(row: Any, path: Union[str, Sequence[Step]]) -> Any:
    """The value at ``path`` in ``row``; :class:`FieldMissing` names the failing step.

    >>> get_field({"reward_model": {"ground_truth": "72"}}, "reward_model.ground_truth")
    '72'
    >>> get_field({"prompt": [{"role": "user", "content": "hi"}]}, "prompt[-1].content")
    'hi'
    """
    steps = parse_path(path) if isinstance(path, str) else tuple(path)
    cur, done = row, ""
    for step in steps:
        if isinstance(step, int):
            if not isinstance(cur, (list, tuple)) or hasattr(cur, "keys"):
                raise FieldMissing(f"'{done or 'the row'}' is {_describe(cur)}, not a list, so "
                                   f"[{step}] does not apply")
            if not -len(cur) <= step < len(cur):
                raise FieldMissing(f"'{done or 'the row'}' has {len(cur)} items; [{step}] is "
                                   f"out of range")
            cur = cur[step]
            done = f"{done}[{step}]"
        else:
            if not isinstance(cur, dict):
                where = f"'{done}'" if done else "the row"
                raise FieldMissing(f"{where} is {_describe(cur)}, so it has no key '{step}'")
            if step not in cur:
                where = f"'{done}'" if done else "the row"
                keys = ", ".join(str(k) for k in cur) or "none"
                raise FieldMissing(f"{where} has no key '{step}'; its keys are: {keys}")
            cur = cur[step]
            done = f"{done}.{step}" if done else step
    return cur


def has_field(row: Any, path: Union[str, Sequence[Step]]) -> bool:
    try:
        get_field(row, path)
    except FieldMissing:
        return False
    return True


def split_fields(text: Union[str, Sequence[str], None]) -> List[str]:
    """``"year, contest,number"`` -> ``["year", "contest", "number"]``; '' or None -> []."""
    if not text:
        return []
    items = text.split(",") if isinstance(text, str) else list(text)
    return [x.strip() for x in items if x.strip()]


def join_id(row: Any, fields: Sequence[str]) -> str:
    """The id of ``row``: the values at ``fields`` as text joined with ``-``.

    >>> join_id({"year": 2019, "contest": "AMC_10A", "number": 4}, ["year", "contest", "number"])
    '2019-AMC_10A-4'
    """
    return "-".join(str(get_field(row, f)) for f in fields)


def field_error(where: str, path: str, err: Exception) -> DataError:
    """``DataError("FILE: line 3: field 'a.b': <why>")``."""
    return DataError(f"{where}: field '{path}': {err}")
