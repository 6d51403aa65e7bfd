"""How a tool call looks in the model's text, and how its output is written back.

``tir`` (Qwen2.5-Math tool-integrated reasoning; QwenLM/Qwen2.5-Math ``evaluation/``: the
harness stops at the stop word "```output", runs the last ```python block and appends
"\\n```output\\n{result}\\n```\\n")::

    ```python
    print(1234 * 5678)
    ```
    ```output
    7006652
    ```

``chat`` (Qwen2.5 chat template with tools: the assistant writes
``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``, the result comes back in a
user turn as ``<tool_response>...</tool_response>``).

:func:`find_call` returns the FIRST complete call and the character offset where it ends; the
rollout loop keeps the generated tokens up to that offset (the rest were sampled against output
the model imagined) and appends :func:`render_output`'s text as new tokens.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import List, Optional, Tuple

from mindrl.tools.registry import ToolCall

FORMATS = ("tir", "chat")
# A call: group 1 its body, group 2 the closing marker (empty when the text ends first).
_CALL = {"tir": re.compile(r"```python\n(.*?)(```|\Z)", re.DOTALL),
         "chat": re.compile(r"<tool_call>(.*?)(</tool_call>|\Z)", re.DOTALL)}
# The output written back after a call (:func:`render_output`), group 1 the tool's text;
# lenient about the whitespace before it, and the chat form's closing assistant header optional.
_OUTPUT = {"tir": re.compile(r"\s*```output\n(.*?)\n```\n?", re.DOTALL),
           "chat": re.compile(r"(?:<\|im_end\|>)?\s*<\|im_start\|>user\n<tool_response>\n?(.*?)\n?"
                              r"</tool_response>(?:<\|im_end\|>\n<\|im_start\|>assistant\n)?",
                              re.DOTALL)}


def _pattern(table: dict, fmt: str) -> "re.Pattern":
    if fmt not in table:
        raise ValueError(f"unknown tool format '{fmt}'; valid: {', '.join(FORMATS)}")
    return table[fmt]


@dataclass(frozen=True)
class CallSpan:
    """A call as it stands in a finished trace: its body (code, or the JSON of a chat call),
    whether its closing marker was written, and the output block after it (None: never ran)."""
    body: str
    closed: bool
    output: Optional[str]


def calls_in(text: str, fmt: str) -> List[CallSpan]:
    """Every call in a finished trace, in order, the last one possibly unclosed.

    >>> calls_in("```python\\nprint(2*3)\\n```\\n```output\\n6\\n```\\n6```python\\nx", "tir")
    [CallSpan(body='print(2*3)\\n', closed=True, output='6'), CallSpan(body='x', closed=False, output=None)]
    """
    call, out = _pattern(_CALL, fmt), _pattern(_OUTPUT, fmt)
    spans, pos = [], 0
    while True:
        m = call.search(text, pos)
        if m is None:
            return spans
        o = out.match(text, m.end()) if m.group(2) else None
        spans.append(CallSpan(m.group(1), bool(m.group(2)), None if o is None else o.group(1)))
        pos = o.end() if o is not None else m.end()


def find_call(text: str, fmt: str) -> Optional[Tuple[int, ToolCall]]:
    """(end offset, call) of the first complete call in ``text``, or None."""
    m = _pattern(_CALL, fmt).search(text)
    if m is None or not m.group(2):
        return None
    if fmt == "tir":
        return m.end(), ToolCall("python", {"code": m.group(1)})
    if fmt == "chat":
        try:
            obj = json.loads(m.group(1).strip())
        except ValueError as e:
            return m.end(), ToolCall("", {}, error=f"tool call is not valid JSON ({e})")
        if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
            return m.end(), ToolCall("", {}, error='a tool call needs {"name": ..., '
                                                   '"arguments": {...}}')
        args = obj.get("arguments", {})
        if isinstance(args, str):           # some models write the arguments as a JSON string
            try:
                args = json.loads(args)
            except ValueError:
                pass
        return m.end(), ToolCall(obj["name"], args)


def render_output(text: str, fmt: str, after_eos: bool = False) -> str:
    """The text appended after a call. ``chat``: ``after_eos`` says whether the kept tokens
    already end the assistant turn (``<|im_end|>``)."""
    if fmt == "tir":
        return f"\n```output\n{text}\n```\n"
    head = "" if after_eos else "<|im_end|>"
    return (f"{head}\n<|im_start|>user\n<tool_response>\n{text}\n</tool_response><|im_end|>\n"
            f"<|im_start|>assistant\n")


def split_trace(text: str, fmt: str) -> List[Tuple[str, bool]]:
    """A written tool trace (an SFT demonstration) as ``(segment, trained)`` pieces, the way a
    rollout builds it: the model's text up to the end of each call is trained; the output block
    :func:`render_output` writes right after it is not (a segment the model never samples).
    Text that holds no call is one trained segment. In the chat format, an ``<|im_end|>``
    right after ``</tool_call>`` stays with the call, as the rollout loop keeps it.

    >>> split_trace("```python\\nprint(2*3)\\n```\\n```output\\n6\\n```\\n6", "tir")
    [('```python\\nprint(2*3)\\n```', True), ('\\n```output\\n6\\n```\\n', False), ('6', True)]
    """
    out_re = _pattern(_OUTPUT, fmt)
    pieces: List[Tuple[str, bool]] = []
    rest = text
    while rest:
        found = find_call(rest, fmt)
        if found is None:
            break
        end = found[0]
        if fmt == "chat" and rest.startswith("<|im_end|>", end):
            end += len("<|im_end|>")
        m = out_re.match(rest, end)
        if m is None:                     # a call with no output after it: plain text
            pieces.append((rest[:end], True))
            rest = rest[end:]
            continue
        pieces += [(rest[:end], True), (rest[end:m.end()], False)]
        rest = rest[m.end():]
    if rest:
        pieces.append((rest, True))
    return pieces
