"""A shaping reward for well-formed tool calls (tool-integrated RL, ``tools.enabled``).

The answer reward reads the final answer as it always does; this one only looks at the calls a
completion made, in the text the rollout loop left (the model's calls and the outputs appended
after them, :mod:`mindrl.tools.formats`). A call is *good* when it parses and ran without error:

- ``tir``: a ```python block that is closed, whose code compiles (``ast.parse``), and that is
  followed by an ```output block showing no error (no ``Traceback``, no ``Error:`` line from the
  tool loop, no ``SomethingError:`` / ``Killed (...)`` last line, the forms the sandbox
  reports timeouts, memory and signals in);
- ``chat``: a ``<tool_call>`` holding a JSON object with a string ``name`` (and object
  ``arguments`` when present), followed by a ``<tool_response>`` that shows no error.

Everything else is *bad*: an unclosed block, code that does not compile, invalid JSON, a call
that errored or timed out, and a call that never ran (the last turn's call, left as text).

Score per completion: the mean over its calls of ``good`` (default 1.0) or ``bad`` (default
0.0; set it negative to penalise), and ``no_call`` (default 0.0) when it made none. Weight it
small next to the answer reward (it pays for calling, not for being right).
"""

from __future__ import annotations

import ast
import json
import re
from typing import List, Optional, Sequence, Tuple

from mindrl.tools.formats import calls_in
from rewards.registry import REWARDS

_ERROR_LINE = re.compile(r"^(\w+(Error|Exception|Interrupt)\b.*|Killed \(.*)$")


def output_failed(text: str) -> bool:
    """Whether a tool output shows an error (traceback, ``Error:``, an exception or kill line).

    >>> output_failed("42"), output_failed("Traceback (most recent call last):\\n..."), \\
    ...     output_failed("TimeoutError: 5 s")
    (False, True, True)
    """
    if "Traceback (most recent call last)" in text or text.startswith("Error:"):
        return True
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return bool(lines) and _ERROR_LINE.match(lines[-1].strip()) is not None


def _compiles(code: str) -> bool:
    try:
        ast.parse(code)
    except (SyntaxError, ValueError):
        return False
    return True


def _json_call(body: str) -> bool:
    try:
        obj = json.loads(body.strip())
    except ValueError:
        return False
    return (isinstance(obj, dict) and isinstance(obj.get("name"), str)
            and isinstance(obj.get("arguments", {}), (dict, str)))


def call_verdicts(text: str, fmt: str = "tir") -> List[bool]:
    """One verdict per call in ``text`` (True = good), in order.

    >>> call_verdicts("```python\\nprint(1)\\n```\\n```output\\n1\\n```\\n1")
    [True]
    >>> call_verdicts("```python\\nprint(1\\n```\\n```output\\nSyntaxError: ...\\n```\\n")
    [False]
    """
    if fmt not in ("tir", "chat"):
        raise ValueError(f"tool_call_format: unknown format '{fmt}'; valid: tir, chat")
    ok_body = _compiles if fmt == "tir" else _json_call
    return [c.closed and ok_body(c.body) and c.output is not None and not output_failed(c.output)
            for c in calls_in(text or "", fmt)]


@REWARDS.register("tool_call_format")
class ToolCallFormat:
    """Shaping for well-formed tool calls: the mean over a completion's calls of ``good`` for
    a call that parses and ran without error and ``bad`` otherwise; ``no_call`` without calls
    (see the module docstring). ``format``: ``tir`` or ``chat`` (as ``tools.format``).

    >>> ok = "```python\\nprint(2*3)\\n```\\n```output\\n6\\n```\\n6"
    >>> bad = "```python\\nprint(2*)\\n```\\n```output\\nSyntaxError: invalid syntax\\n```\\n"
    >>> ToolCallFormat(bad=-1.0)(["6", ok, bad, ok + bad])
    [0.0, 1.0, -1.0, 0.0]
    """

    def __init__(self, format: str = "tir", good: float = 1.0, bad: float = 0.0,  # noqa: A002
                 no_call: float = 0.0):
        if format not in ("tir", "chat"):
            raise ValueError(f"tool_call_format: unknown format '{format}'; valid: tir, chat")
        self.format, self.good, self.bad, self.no_call = format, good, bad, no_call

    def score(self, text: str) -> Tuple[float, int]:
        verdicts = call_verdicts(text, self.format)
        if not verdicts:
            return self.no_call, 0
        return sum(self.good if v else self.bad for v in verdicts) / len(verdicts), \
            len(verdicts)

    def __call__(self, completions: Sequence[str], **_) -> List[Optional[float]]:
        return [float(self.score(t)[0]) for t in completions]
