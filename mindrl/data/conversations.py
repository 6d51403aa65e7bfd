"""Chat SFT data: conversations read from the published shapes, rendered with the run's chat
template, and tokenized with a loss mask that covers the assistant turns only.

Formats (``data.format``; ``auto`` detects them from the first row and logs
``detected: NAME``):

============  ===============================================  ==============================
name          shape                                            published examples
============  ===============================================  ==============================
messages      ``messages`` = [{role, content}] (an assistant   Nemotron-Post-Training-v1,
              turn may carry ``reasoning_content``)            OpenR1-Math-220k
sharegpt      ``conversations`` = [{from, value}], optional    OpenThoughts-114k,
              ``system`` column                                Bespoke-Stratos-17k,
                                                               AM-DeepSeek-R1-0528-Distilled
traces        a prompt column and a *list* of traces           OpenR1 ``generations``, s1K
              (``generations``, ``thinking_trajectories``)     ``thinking_trajectories``
reasoning     ``messages`` without an assistant turn, and      dolphin-r1 (reasoning-deepseek,
              the trace and answer in ``reasoning`` /          reasoning-flash)
              ``answer`` columns
columns       plain prompt / response columns (the response    ``data.response_field``
              is ``data.response_field``, default ``answer``)
============  ===============================================  ==============================

``columns`` (and ``prompt_completion``) rows keep the single-turn path of
:mod:`mindrl.trainer.sft`; the others become :class:`Conversation` rows. Choices:

- ``traces``: the trace picked from the list is the first one marked correct when a
  correctness list exists (``correctness_math_verify``), else the first
  (``data.trace_select=first`` always takes the first). Rows with no correct trace are dropped
  and counted. A trace column with a companion answer column (s1K: ``attempt``) is the
  reasoning of that answer; otherwise (OpenR1 ``generations``) the trace is the whole
  assistant turn, ``<think>`` block included.
- ``data.response_field`` naming a list-valued column selects ``traces`` on that column (a
  list of messages: ``messages``/``sharegpt``), so a list is never read as its Python text.
- A data error names the file, the 1-based row and the field, and is raised while the data
  is read, before any model loads.

Tokenization (:func:`encode_conversation`): the prompt is the text before the first assistant
turn; each assistant turn is trained from where the template's generation prompt ends through
the first end-of-turn marker (``<|im_end|>``, the EOS token, ...), i.e. exactly the tokens a
model would generate for it; user/system turns between them are in the response region with
mask 0. Each piece is tokenized on its own, as the prompt and the sampled tokens are in RL.
Templates without an end marker (``r1-think``, ``none``) get the EOS id appended.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from mindrl.data.io import DataError, read_rows

log = logging.getLogger("mindrl.data")

Row = Dict[str, Any]
Message = Dict[str, str]

CHAT_FORMATS = ("messages", "sharegpt", "traces", "reasoning")
PLAIN_FORMATS = ("columns", "prompt_completion")
SHAREGPT_ROLES = {"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant",
                  "system": "system", "chatgpt": "assistant", "model": "assistant"}
ROLES = ("system", "user", "assistant")
# trace column -> the column holding the final answer it leads to (None: the trace is the turn)
TRACE_COLUMNS = {"generations": None, "thinking_trajectories": "attempt",
                 "thinking_trajectory": "attempt"}
CORRECTNESS_COLUMNS = ("correctness_math_verify",)
PROMPT_COLUMNS = ("problem", "question", "prompt", "input", "query")
TRACE_SELECT = ("first_correct", "first")


def _at(path, row: int, field: str) -> str:
    return f"{path}: row {row}: field '{field}'"


def _is_turns(v: Any, keys: Tuple[str, str]) -> bool:
    return isinstance(v, (list, tuple)) and len(v) > 0 and all(
        isinstance(m, dict) and keys[0] in m and keys[1] in m for m in v)


def _is_str_list(v: Any) -> bool:
    return isinstance(v, (list, tuple)) and len(v) > 0 and all(isinstance(x, str) for x in v)


# ------------------------------------------------------------------------ detection
def detect_format(row: Row, fmt: str = "auto", response_field: str = "") -> Tuple[str, str]:
    """``(format, column)`` for ``row``: the chat format and the column it reads (the
    messages / conversations / trace column), or ``("columns", response_field)``.
    ``fmt`` other than ``auto`` forces the format."""
    if fmt not in ("", "auto"):
        if fmt not in CHAT_FORMATS:   # plain and RL formats: mindrl.data.formats maps them
            return fmt, response_field
        default = {"messages": "messages", "sharegpt": "conversations", "reasoning": "messages",
                   "traces": next((c for c in TRACE_COLUMNS if c in row), "generations")}[fmt]
        return fmt, response_field or default
    if response_field:
        v = row.get(response_field)
        if _is_turns(v, ("role", "content")):
            return "messages", response_field
        if _is_turns(v, ("from", "value")):
            return "sharegpt", response_field
        if _is_str_list(v):
            return "traces", response_field
        return "columns", response_field
    if _is_turns(row.get("conversations"), ("from", "value")):
        return "sharegpt", "conversations"
    msgs = row.get("messages")
    if _is_turns(msgs, ("role", "content")):
        if not any(m.get("role") == "assistant" for m in msgs) and \
                isinstance(row.get("reasoning"), str) and isinstance(row.get("answer"), str):
            return "reasoning", "messages"
        return "messages", "messages"
    for col in TRACE_COLUMNS:
        if _is_str_list(row.get(col)):
            return "traces", col
    return "columns", response_field


# ------------------------------------------------------------------------ row -> messages
def _turns(value: Any, keys: Tuple[str, str], path, row: int, field: str) -> List[Message]:
    if not isinstance(value, (list, tuple)) or not value:
        raise DataError(f"{_at(path, row, field)}: expected a non-empty list of turns "
                        f"{{{keys[0]}, {keys[1]}}}, got {type(value).__name__}")
    out = []
    for j, m in enumerate(value):
        where = f"{field}[{j}]"
        if not isinstance(m, dict) or keys[0] not in m or keys[1] not in m:
            got = ", ".join(map(str, m)) if isinstance(m, dict) else type(m).__name__
            raise DataError(f"{_at(path, row, where)}: expected keys {keys[0]}, {keys[1]}; "
                            f"got {got}")
        raw_role = str(m[keys[0]])
        role = SHAREGPT_ROLES.get(raw_role.lower()) if keys[0] == "from" else raw_role
        if role not in ROLES:
            raise DataError(f"{_at(path, row, f'{where}.{keys[0]}')}: unknown role "
                            f"{raw_role!r} (expected "
                            f"{', '.join(SHAREGPT_ROLES if keys[0] == 'from' else ROLES)})")
        content = m[keys[1]]
        if not isinstance(content, str):
            raise DataError(f"{_at(path, row, f'{where}.{keys[1]}')}: expected text, got "
                            f"{type(content).__name__}")
        msg = {"role": role, "content": content}
        if role == "assistant" and isinstance(m.get("reasoning_content"), str) \
                and m["reasoning_content"].strip():
            msg["reasoning"] = m["reasoning_content"]
        out.append(msg)
    return out


def _text(row: Row, col: str, path, i: int) -> str:
    if col not in row:
        raise DataError(f"{_at(path, i, col)}: no such column; its fields are: "
                        f"{', '.join(sorted(row))}")
    v = row[col]
    if not isinstance(v, (str, int, float)) or isinstance(v, bool):
        raise DataError(f"{_at(path, i, col)}: expected text, got {type(v).__name__}")
    return str(v)


def _pick_trace(row: Row, col: str, path, i: int, select: str) -> Optional[str]:
    traces = row.get(col)
    if not _is_str_list(traces):
        raise DataError(f"{_at(path, i, col)}: expected a non-empty list of texts, got "
                        f"{type(traces).__name__ if not isinstance(traces, list) else 'list'}")
    flags_col = next((c for c in CORRECTNESS_COLUMNS if c in row), None)
    if select == "first" or flags_col is None:
        return traces[0]
    flags = row[flags_col]
    if not isinstance(flags, (list, tuple)) or len(flags) != len(traces):
        raise DataError(f"{_at(path, i, flags_col)}: expected a list of {len(traces)} flags "
                        f"(one per trace in '{col}')")
    return next((t for t, ok in zip(traces, flags) if ok is True), None)


def to_messages(row: Row, fmt: str, col: str, path, i: int, prompt_field: str = "",
                trace_select: str = "first_correct") -> Optional[List[Message]]:
    """The conversation of one raw row (``i``: its 1-based row), or None when ``traces`` finds
    no correct trace."""
    if fmt == "sharegpt":
        msgs = _turns(row.get(col), ("from", "value"), path, i, col)
        system = row.get("system")
        if isinstance(system, str) and system.strip() and msgs[0]["role"] != "system":
            msgs.insert(0, {"role": "system", "content": system})
    elif fmt in ("messages", "reasoning"):
        msgs = _turns(row.get(col), ("role", "content"), path, i, col)
        if fmt == "reasoning":
            if any(m["role"] == "assistant" for m in msgs):
                raise DataError(f"{_at(path, i, col)}: format 'reasoning' expects the "
                                f"assistant answer in the 'answer' column, but the messages "
                                f"already hold an assistant turn (use data.format=messages)")
            msgs.append({"role": "assistant", "content": _text(row, "answer", path, i),
                         "reasoning": _text(row, "reasoning", path, i)})
    elif fmt == "traces":
        pf = prompt_field or next((c for c in PROMPT_COLUMNS if c in row), "")
        if not pf:
            raise DataError(f"{path}: row {i}: no prompt field (looked for "
                            f"{' / '.join(PROMPT_COLUMNS)}); its fields are: "
                            f"{', '.join(sorted(row))}; name it with data.prompt_field")
        trace = _pick_trace(row, col, path, i, trace_select)
        if trace is None:
            return None
        answer_col = TRACE_COLUMNS.get(col)
        if answer_col and answer_col in row:
            turn = {"role": "assistant", "content": _text(row, answer_col, path, i),
                    "reasoning": trace}
        else:
            turn = {"role": "assistant", "content": trace}
        msgs = [{"role": "user", "content": _text(row, pf, path, i)}, turn]
    else:
        raise ValueError(f"not a chat format: {fmt}")
    while msgs and msgs[-1]["role"] != "assistant":     # nothing to learn after the last answer
        msgs.pop()
    if not msgs:
        raise DataError(f"{_at(path, i, col)}: no assistant turn to train on")
    if not any(m["role"] == "user" for m in msgs[:next(j for j, m in enumerate(msgs)
                                                      if m["role"] == "assistant")]):
        raise DataError(f"{_at(path, i, col)}: the first assistant turn has no user turn "
                        f"before it")
    return msgs


def load_conversations(path, fmt: str, col: str, max_rows: int = 0, prompt_field: str = "",
                       trace_select: str = "first_correct",
                       rows: Optional[Sequence[Row]] = None) -> List[Row]:
    """Rows ``{"messages", "problem", "answer"?, "where"}`` of a chat-format file; every
    row is checked here (before any model loads)."""
    if trace_select not in TRACE_SELECT:
        raise DataError(f"data.trace_select='{trace_select}'; valid: {', '.join(TRACE_SELECT)}")
    raw = read_rows(path, max_rows=max_rows or None) if rows is None else rows
    out, dropped = [], 0
    for i, r in enumerate(raw, 1):
        msgs = to_messages(r, fmt, col, path, i, prompt_field, trace_select)
        if msgs is None:
            dropped += 1
            continue
        out.append(_chat_row(msgs, r, fmt, f"{path}: row {i}"))
    if not out:
        raise DataError(f"{path}: no row has a trace to train on ({dropped} rows without a "
                        f"correct trace; data.trace_select=first takes the first one)")
    log.info("%s: detected: %s (%s <- '%s'; %d conversations, %d multi-turn%s)", path, fmt,
             "trace" if fmt == "traces" else "turns", col, len(out),
             sum(sum(m["role"] == "assistant" for m in r["messages"]) > 1 for r in out),
             f"; {dropped} rows dropped: no correct trace" if dropped else "")
    return out


def _chat_row(msgs: List[Message], raw: Row, fmt: str, where: str) -> Row:
    row = {"messages": msgs, "where": where,
           "problem": next(m["content"] for m in msgs if m["role"] == "user")}
    if isinstance(raw.get("answer"), (str, int, float)) and fmt != "reasoning":
        row["answer"] = str(raw["answer"])
    return row


class _KeptRows:
    """A row source (:func:`mindrl.data.io.open_indexed`) seen through the sorted indices of
    the rows kept (``keep``): row ``i`` here is row ``keep[i]`` there. Row groups (parquet) keep
    their order, with the kept rows' counts as sizes, so the windowed shuffle of
    :class:`mindrl.trainer.prompts.FileStream` still decodes about one window at a time."""

    def __init__(self, source, keep: np.ndarray):
        self.inner, self.keep = source, keep
        sizes = getattr(source, "group_sizes", None)
        if sizes is None:
            self.group_sizes = None
        else:
            starts = np.concatenate([[0], np.cumsum(sizes)])
            group = np.searchsorted(starts, keep, side="right") - 1
            self.group_sizes = np.bincount(group, minlength=len(sizes)).astype(np.int64)

    @property
    def cache_rows(self) -> int:
        return getattr(self.inner, "cache_rows", 0)

    @cache_rows.setter
    def cache_rows(self, n: int) -> None:
        self.inner.cache_rows = n

    def __len__(self) -> int:
        return len(self.keep)

    def read(self, indices: Sequence[int]) -> List[Tuple[int, Any]]:
        return self.inner.read([int(self.keep[i]) for i in indices])


class ConversationRows:
    """The conversation rows of a large ``.jsonl``/``.parquet`` chat file, read and converted
    when taken (the ``rows`` of a :class:`mindrl.trainer.prompts.FileStream`): row ``i`` equals
    element ``i`` of :func:`load_conversations`'s list. Memory: the file's index and the kept
    row indices (8 bytes a row each), never the rows."""

    def __init__(self, source: _KeptRows, fmt: str, col: str, path, prompt_field: str,
                 trace_select: str):
        self.source, self.fmt, self.col, self.path = source, fmt, col, path
        self.prompt_field, self.trace_select = prompt_field, trace_select

    def __len__(self) -> int:
        return len(self.source)

    def get(self, indices: Sequence[int]) -> List[Row]:
        out = []
        for i, (_, raw) in zip(indices, self.source.read(indices)):
            n = int(self.source.keep[int(i)]) + 1            # the 1-based row in the file
            msgs = to_messages(raw, self.fmt, self.col, self.path, n, self.prompt_field,
                               self.trace_select)
            out.append(_chat_row(msgs, raw, self.fmt, f"{self.path}: row {n}"))
        return out


def index_conversations(path, fmt: str, col: str, max_rows: int = 0, prompt_field: str = "",
                        trace_select: str = "first_correct", chunk: int = 4096
                        ) -> ConversationRows:
    """:func:`load_conversations` in bounded memory: one pass reads and checks every row (a
    bad row stops here, before any model loads, naming file, row and field) and keeps the
    indices of the rows with something to train on; the rows themselves are not held."""
    from mindrl.data.io import open_indexed  # noqa: PLC0415

    if trace_select not in TRACE_SELECT:
        raise DataError(f"data.trace_select='{trace_select}'; valid: {', '.join(TRACE_SELECT)}")
    source = open_indexed(path, max_rows or None)
    n = len(source)
    if not n:
        raise DataError(f"{path}: no rows")
    keep, multi = [], 0
    for start in range(0, n, chunk):
        idx = range(start, min(n, start + chunk))
        for i, (_, raw) in zip(idx, source.read(idx)):
            msgs = to_messages(raw, fmt, col, path, i + 1, prompt_field, trace_select)
            if msgs is not None:
                keep.append(i)
                multi += sum(m["role"] == "assistant" for m in msgs) > 1
    dropped = n - len(keep)
    if not keep:
        raise DataError(f"{path}: no row has a trace to train on ({dropped} rows without a "
                        f"correct trace; data.trace_select=first takes the first one)")
    log.info("%s: detected: %s (%s <- '%s'; %d conversations, %d multi-turn%s; read as taken)",
             path, fmt, "trace" if fmt == "traces" else "turns", col, len(keep), multi,
             f"; {dropped} rows dropped: no correct trace" if dropped else "")
    return ConversationRows(_KeptRows(source, np.asarray(keep, np.int64)), fmt, col, path,
                            prompt_field, trace_select)


# ------------------------------------------------------------------------ tokenization
def encode_conversation(messages: List[Message], render: Callable[..., str],
                        tokenize: Callable[[str], List[int]], end_markers: Sequence[str],
                        eos_id: int) -> Tuple[List[int], List[int], List[float]]:
    """``(prompt_ids, response_ids, response_mask)`` of a conversation.

    ``render(messages, add_generation_prompt)`` is the chat template, ``tokenize(text)`` the
    tokenizer without special-token additions, ``end_markers`` the end-of-turn strings. Raises
    ValueError when the template does not render a turn after the same text as the
    conversation before it, or drops an assistant turn's reasoning."""
    msgs = list(messages)
    while msgs and msgs[-1]["role"] != "assistant":
        msgs.pop()
    full = render(msgs, False)
    bounds: List[Tuple[int, int]] = []
    assistant = [k for k, m in enumerate(msgs) if m["role"] == "assistant"]
    append_eos = False
    for n, k in enumerate(assistant):
        head = render(msgs[:k], True)
        if not full.startswith(head):
            raise ValueError(f"the chat template renders the conversation before assistant "
                             f"turn {k + 1} differently from the whole conversation, so its "
                             f"tokens cannot be located")
        start = len(head)
        if bounds and start < bounds[-1][1]:
            raise ValueError(f"assistant turn {k + 1} starts inside the previous one")
        stop = len(full) if n + 1 == len(assistant) else len(render(msgs[:assistant[n + 1]],
                                                                    True))
        hits = [(full.find(mk, start, stop), mk) for mk in end_markers if mk]
        hits = [h for h in hits if h[0] >= 0]
        if hits:
            pos, mk = min(hits)
            end = pos + len(mk)
        elif n + 1 == len(assistant):
            end, append_eos = len(full), True
        else:
            raise ValueError(f"assistant turn {k + 1} has no end-of-turn marker "
                             f"({', '.join(end_markers)}) before the next turn")
        said = full[start:end]
        m = msgs[k]
        trace = str(m.get("reasoning") or "").strip()
        if n + 1 == len(assistant) and ((trace and trace[:64] not in said) or (
                "</think>" in m["content"] and "</think>" not in said and not trace)):
            raise ValueError("the chat template drops the reasoning of the last assistant "
                             "turn (DeepSeek-R1-Distill templates cut everything before "
                             "</think>); pick a template that keeps it, e.g. "
                             "model.chat_template=qwen25-chat")
        bounds.append((start, end))
    prompt = tokenize(full[:bounds[0][0]])
    ids: List[int] = []
    mask: List[float] = []
    for n, (start, end) in enumerate(bounds):
        if n:
            gap = tokenize(full[bounds[n - 1][1]:start])
            ids += gap
            mask += [0.0] * len(gap)
        said = tokenize(full[start:end])
        ids += said
        mask += [1.0] * len(said)
    if append_eos:
        ids.append(eos_id)
        mask.append(1.0)
    return prompt, ids, mask
