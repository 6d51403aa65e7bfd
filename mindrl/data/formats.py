"""Named dataset formats: detection from the columns, and what each job reads from a row.

Every loader (RL prompts, eval benchmarks, SFT, DPO/SimPO, ``mindrl data``) goes through
:func:`plan` + :meth:`Plan.map`: the format is detected from the first row (or named with
``data.format`` / ``--format``), each *role* of the job gets a field path
(:mod:`mindrl.data.fields`), and field options override any of them.

Jobs and their roles (``*`` = required):

=========  =================================================================
``rl``     ``problem``\\*, ``answer``\\*, ``id``
``eval``   ``problem``\\*, ``answer``\\*, ``id`` (default: the 0-based row index)
``sft``    ``problem``\\*, ``response``\\*
``pref``   ``problem``\\*, ``chosen``\\*, ``rejected``\\*
=========  =================================================================

Formats (detection tries them in this order):

==================  ==========================================  ==============================
name                shape                                       roles
==================  ==========================================  ==============================
verl                ``prompt`` = chat messages, ``reward_model``  problem <- ``prompt``, answer
                    {style, ground_truth}, ``extra_info``         <- ``reward_model.ground_truth``,
                    (DAPO-Math-17k, Skywork-OR1, verl gsm8k)      id <- ``extra_info.index``
orz                 a JSON list per row: [{from: human, value},   problem <- ``[0].value``,
                    {from: assistant, ground_truth: {value}}]     answer <-
                                                                  ``[1].ground_truth.value``
pairwise            ``completion_1``, ``completion_2``,           chosen / rejected by
                    ``preferred`` (a name / 1 / 2), ``prompt``    ``preferred``
preference          ``chosen``, ``rejected`` (+ ``prompt``);      TRL standard or
                    strings or chat messages                      conversational
messages            ``messages`` = [{role, content}]              problem <- the user turn
sharegpt            ``conversations`` = [{from, value}]           problem <- the human turn
prompt_completion   ``prompt``, ``completion``                    SFT: response <- completion
columns             anything else: the first present of           as listed in
                    :data:`PROBLEM_FIELDS`, :data:`ANSWER_FIELDS`,  :data:`ROLE_FIELDS`
                    :data:`ID_FIELDS`, :data:`RESPONSE_FIELDS`
==================  ==========================================  ==============================

Values are converted by role: a chat-message list as a problem becomes a
:class:`~mindrl.data.templates.ChatPrompt` (the last user turn; the system turn kept); a
problem with chat markers becomes :class:`~mindrl.data.templates.Templated` (used as-is); a
message list as a response/chosen/rejected gives its last assistant turn; a gold answer given
as a list, or as a JSON list of strings (``'["3", "\\\\frac{1}{2}"]'``, Skywork-OR1), is *any-of*:
a list of normalised answers, scored by the best match (:mod:`rewards.registry`). A JSON list
of numbers (``"[1, 2]"``) stays one answer: it may be an interval. An object where text is
expected is an error naming its keys.

SFT on chat formats (``messages``, ``sharegpt``): the whole conversation with assistant-only
loss is :mod:`mindrl.data.conversations`' job; here the SFT view is the last user turn and the
last assistant turn (see :func:`sft_view_hook`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

from mindrl.data.answers import normalize_gold, strip_suffix_line
from mindrl.data.fields import FieldMissing, field_error, get_field, parse_path, split_fields
from mindrl.data.io import DataError, iter_rows, where
from mindrl.data.templates import ChatPrompt, Templated, has_chat_markers
from mindrl.registry import Registry

Row = Dict[str, Any]

JOBS: Dict[str, Tuple[Tuple[str, ...], Tuple[str, ...]]] = {   # job -> (required, optional)
    "rl": (("problem", "answer"), ("id",)),
    "eval": (("problem", "answer"), ("id",)),
    "sft": (("problem", "response"), ()),
    "pref": (("problem", "chosen", "rejected"), ()),
}
PROBLEM_FIELDS = ("problem", "question", "prompt", "input", "query")
ANSWER_FIELDS = ("answer", "gt_answer", "final_answer", "ground_truth", "solutions", "target",
                 "output")
ID_FIELDS = ("unique_id", "id", "idx", "problem_id", "query_id")
RESPONSE_FIELDS = ("response", "completion", "solution", "answer")
ROLE_FIELDS: Dict[str, Tuple[str, ...]] = {
    "problem": PROBLEM_FIELDS, "answer": ANSWER_FIELDS, "id": ID_FIELDS,
    "response": RESPONSE_FIELDS, "chosen": ("chosen",), "rejected": ("rejected",)}
ROLE_OPTION = {"problem": "prompt_field", "answer": "answer_field", "id": "id_field",
               "response": "response_field", "chosen": "chosen_field",
               "rejected": "rejected_field"}
SHAREGPT_ROLES = {"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant",
                  "system": "system", "chatgpt": "assistant", "bing": "assistant", "bard":
                  "assistant", "model": "assistant"}
TEMPLATED_MODES = ("auto", "always", "never")


# ------------------------------------------------------------------------ the formats
@dataclass(frozen=True)
class Format:
    """One named dataset shape: how to recognise a row, and the default path of each role."""

    name: str
    help: str
    detect: Callable[[Any], bool]
    fields: Dict[str, str] = field(default_factory=dict)   # role -> path ('' = by candidates)
    prepare: Optional[Callable[[Any, str], Any]] = None    # row, where -> row (before mapping)


FORMATS: Registry = Registry("data format")


def _is_messages(v: Any, keys=("role", "content")) -> bool:
    return isinstance(v, (list, tuple)) and len(v) > 0 and all(
        isinstance(m, dict) and keys[0] in m and keys[1] in m for m in v)


def _orz_row(row: Any) -> bool:
    return isinstance(row, (list, tuple)) and len(row) >= 2 and isinstance(row[0], dict) \
        and "value" in row[0] and isinstance(row[1], dict) and "ground_truth" in row[1]


def _pairwise_prepare(row: Row, at: str) -> Row:
    """The seed's DPO rows: ``preferred`` (the column name, ``completion_1`` / ``completion_2``,
    as the log writes it, or 1 / 2) picks ``chosen``."""
    pref = row.get("preferred")
    key = str(pref).strip().lower()
    if key in ("1", "completion_1", "1.0"):
        order = ("completion_1", "completion_2")
    elif key in ("2", "completion_2", "2.0"):
        order = ("completion_2", "completion_1")
    else:
        raise DataError(f"{at}: field 'preferred': must be 1 or 2 (or completion_1 / "
                        f"completion_2), got {pref!r}")
    return {**row, "chosen": row[order[0]], "rejected": row[order[1]]}


_ORDER: List[str] = []      # detection order: the most specific shapes first
for _f in (
    Format("verl", "verl RL parquet: prompt = chat messages, reward_model.ground_truth",
           lambda r: isinstance(r, dict) and isinstance(r.get("reward_model"), dict)
           and _is_messages(r.get("prompt")),
           {"problem": "prompt", "answer": "reward_model.ground_truth",
            "id": "extra_info.index"}),
    Format("orz", "Open-Reasoner-Zero JSON: [human turn, assistant turn with ground_truth]",
           _orz_row, {"problem": "[0].value", "answer": "[1].ground_truth.value"}),
    Format("pairwise", "id, prompt, completion_1, completion_2, preferred (completion_1 / "
           "completion_2, or 1 / 2)",
           lambda r: isinstance(r, dict) and {"completion_1", "completion_2", "preferred"}
           <= set(r),
           {"problem": "prompt", "chosen": "chosen", "rejected": "rejected", "id": "id"},
           _pairwise_prepare),
    Format("preference", "prompt, chosen, rejected (TRL standard or conversational)",
           lambda r: isinstance(r, dict) and "chosen" in r and "rejected" in r,
           {"chosen": "chosen", "rejected": "rejected"}),
    Format("messages", "OpenAI chat: messages = [{role, content}, ...]",
           lambda r: isinstance(r, dict) and _is_messages(r.get("messages")),
           {"problem": "messages", "response": "messages"}),
    Format("sharegpt", "ShareGPT: conversations = [{from, value}, ...]",
           lambda r: isinstance(r, dict) and _is_messages(r.get("conversations"),
                                                          ("from", "value")),
           {"problem": "conversations", "response": "conversations"}),
    Format("prompt_completion", "prompt, completion (TRL SFT)",
           lambda r: isinstance(r, dict) and "prompt" in r and "completion" in r,
           {"problem": "prompt", "response": "completion"}),
    Format("columns", "plain columns (problem/question/prompt, answer/gt_answer/...)",
           lambda r: isinstance(r, dict)),
):
    FORMATS.register(_f.name, _f)
    _ORDER.append(_f.name)


def detect_format(row: Any) -> Format:
    """The first format whose shape ``row`` has (``columns`` for any object)."""
    for name in _ORDER:
        f: Format = FORMATS.get(name)
        if f.detect(row):
            return f
    raise DataError("a row is neither a JSON object nor an [human, assistant] turn pair")


# ------------------------------------------------------------------------ values by role
def chat_turns(value: Any) -> Optional[List[Dict[str, str]]]:
    """``[{role, content}]`` from OpenAI messages or ShareGPT turns; None for anything else."""
    if _is_messages(value):
        return [{"role": str(m["role"]), "content": m["content"]} for m in value]
    if _is_messages(value, ("from", "value")):
        return [{"role": SHAREGPT_ROLES.get(str(m["from"]).lower(), str(m["from"])),
                 "content": m["value"]} for m in value]
    return None


def _object_error(path: str, value: dict) -> str:
    keys = ", ".join(map(str, value))
    hint = next((k for k in ("ground_truth", "content", "value", "text", "answer") if k in value),
                next(iter(value), "key"))
    return f"holds an object with keys: {keys}; name the key, e.g. {path}.{hint}"


def _text(value: Any, path: str) -> str:
    if isinstance(value, dict):
        raise FieldMissing(_object_error(path, value))
    if value is None:
        raise FieldMissing("is empty (null)")
    return str(value)


def problem_value(value: Any, path: str, templated: str = "auto") -> str:
    """The problem text: a message list -> ChatPrompt, chat markers -> Templated."""
    turns = chat_turns(value)
    if turns is not None:
        while turns and turns[-1]["role"] == "assistant":     # a full conversation
            turns = turns[:-1]
        users = [m for m in turns if m["role"] == "user"]
        if not users:
            raise FieldMissing("is a chat without a user turn")
        system = "\n\n".join(str(m["content"]) for m in turns if m["role"] == "system")
        text = str(users[-1]["content"])
        if templated == "always" or (templated == "auto" and has_chat_markers(text)):
            return Templated(text)
        # all turns are kept only for a few-shot prompt (template 'model' renders them)
        return ChatPrompt(text, system, turns if len(users) > 1 else ())
    text = _text(value, path)
    if templated == "always" or (templated == "auto" and has_chat_markers(text)):
        return Templated(text)
    return text.strip()


def response_value(value: Any, path: str) -> str:
    """A target/chosen/rejected text: a message list gives its last assistant turn."""
    turns = chat_turns(value)
    if turns is not None:
        said = [m for m in turns if m["role"] == "assistant"]
        if not said:
            raise FieldMissing("is a chat without an assistant turn")
        return str(said[-1]["content"])
    return _text(value, path)


def gold_value(value: Any, path: str):
    """A normalised gold answer; a list (or JSON list of strings) -> any-of list; one item ->
    that item."""
    if isinstance(value, str) and value.strip().startswith("["):
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError:
            parsed = None
        if isinstance(parsed, list) and parsed and all(isinstance(x, str) for x in parsed):
            value = parsed
    if isinstance(value, (list, tuple)):
        golds: List[str] = []
        for x in value:
            if isinstance(x, (dict, list, tuple)):
                raise FieldMissing(f"holds a list whose items are not answers ({x!r:.60})")
            g = normalize_gold(x)
            if g not in golds:
                golds.append(g)
        if not golds:
            raise FieldMissing("is an empty list")
        return golds[0] if len(golds) == 1 else golds
    if isinstance(value, dict):
        raise FieldMissing(_object_error(path, value))
    return None if value is None else normalize_gold(value)


# ------------------------------------------------------------------------ the plan
@dataclass
class Plan:
    """A job's mapping for one file: the format and the field path of each role."""

    job: str
    format: Format
    paths: Dict[str, List[str]]          # role -> paths (several only for a joined id)
    source: str                          # the file, for messages
    templated: str = "auto"
    detected: bool = True

    def describe(self) -> str:
        """``"detected: verl (problem <- prompt, answer <- reward_model.ground_truth, ...)"``."""
        how = "detected" if self.detected else "format"
        parts = [f"{role} <- {','.join(p)}" for role, p in self.paths.items() if p]
        if self.format.name == "pairwise":
            parts = [p for p in parts if not p.startswith(("chosen", "rejected"))] + \
                ["chosen/rejected <- completion_{preferred}"]
        return f"{how}: {self.format.name} ({', '.join(parts)})"

    def __post_init__(self):
        self._steps = {role: [parse_path(p) for p in paths] for role, paths in self.paths.items()}

    def map(self, row: Any, pos: int, index: int = 0) -> Row:
        """The job's view of one raw row (``pos``: its 1-based line/row for messages;
        ``index``: its 0-based index, the default eval id)."""
        if self.format.prepare is not None:
            row = self.format.prepare(row, where(self.source, pos))
        out: Row = dict(row) if isinstance(row, dict) else {}
        required, optional = JOBS[self.job]
        for role in required + optional:
            paths, steps = self.paths.get(role) or [], self._steps.get(role) or []
            if not paths:
                continue
            try:
                if role == "id":
                    out["id"] = "-".join(str(get_field(row, p)) for p in steps)
                    continue
                raw = get_field(row, steps[0])
                if role == "problem":
                    out["problem"] = problem_value(raw, paths[0], self.templated)
                    if self.job == "eval" and type(out["problem"]) is str:
                        out["problem"] = strip_suffix_line(out["problem"])
                elif role == "answer":
                    out["answer"] = gold_value(raw, paths[0])
                    if paths[0] == "answer" and isinstance(raw, str) and raw != out["answer"]:
                        out["answer_raw"] = raw        # e.g. GSM8K's full rationale
                else:
                    out[role] = response_value(raw, paths[0])
            except FieldMissing as e:
                raise field_error(where(self.source, pos), ",".join(paths), e) from None
        if self.job == "eval" and "id" not in out:
            out["id"] = str(index)
        return out


def _candidate(row: Any, names: Sequence[str]) -> Optional[str]:
    return next((n for n in names if isinstance(row, dict) and n in row), None)


def plan(first: Any, job: str, source: str, fmt: str = "auto",
         fields: Optional[Dict[str, str]] = None, templated: str = "auto",
         first_pos: int = 1) -> Plan:
    """The mapping for ``job`` from the first row (``fields``: role -> path override, '' =
    the format's default; ``id`` may list several comma-separated paths)."""
    if job not in JOBS:
        raise ValueError(f"unknown job '{job}'; valid: {', '.join(JOBS)}")
    if templated not in TEMPLATED_MODES:
        raise DataError(f"data.templated_prompts='{templated}'; valid: "
                        f"{', '.join(TEMPLATED_MODES)}")
    if fmt not in ("", "auto", None) and fmt not in FORMATS:
        raise DataError(FORMATS._miss_message(fmt) + " (or auto)")
    f: Format = detect_format(first) if fmt in ("", "auto", None) else FORMATS.get(fmt)
    fields = {k: v for k, v in (fields or {}).items() if v}
    required, optional = JOBS[job]
    at = where(source, first_pos)
    paths: Dict[str, List[str]] = {}
    prepared = f.prepare(first, at) if f.prepare is not None else first
    for role in required + optional:
        if role in fields:
            paths[role] = split_fields(fields[role]) if role == "id" else [fields[role].strip()]
        elif f.fields.get(role):
            paths[role] = [f.fields[role]]
        else:
            name = _candidate(prepared, ROLE_FIELDS[role])
            paths[role] = [name] if name else []
        if not paths[role]:
            if role in required:
                cols = ", ".join(map(str, prepared)) if isinstance(prepared, dict) else \
                    "(a list row)"
                raise DataError(f"{at}: no {role} field (looked for "
                                f"{' / '.join(ROLE_FIELDS[role])}; format {f.name}); its "
                                f"fields are: {cols}; name it with data.{ROLE_OPTION[role]} "
                                f"(or --{ROLE_OPTION[role].replace('_', '-')})")
            continue
        if role == "id" and role not in fields and f.name == "verl" and \
                not all(_has(prepared, p) for p in paths[role]):
            paths[role] = []          # verl's extra_info.index is optional
    return Plan(job, f, paths, str(source), templated, detected=fmt in ("", "auto", None))


def _has(row: Any, path: str) -> bool:
    try:
        get_field(row, path)
    except FieldMissing:
        return False
    return True


def fields_from(cfg) -> Dict[str, str]:
    """Role -> path from a :class:`~mindrl.config.schema.DataConfig` (or any object with the
    ``*_field`` attributes)."""
    return {role: getattr(cfg, opt, "") or "" for role, opt in ROLE_OPTION.items()}


def load_file(path, job: str, fmt: str = "auto", fields: Optional[Dict[str, str]] = None,
              max_rows: int = 0, templated: str = "auto") -> Tuple[Plan, List[Row]]:
    """Every row of ``path`` as ``job`` sees it, with the plan used (streamed while mapping,
    so only the mapped rows are held)."""
    it = iter_rows(path, max_rows or None)
    out: List[Row] = []
    p: Optional[Plan] = None
    for i, (pos, row) in enumerate(it):
        if p is None:
            p = plan(row, job, str(path), fmt, fields, templated, pos)
        out.append(p.map(row, pos, i))
    if p is None:
        raise DataError(f"{path}: no rows")
    return p, out


class IndexedRows:
    """The rows of a ``.jsonl``/``.parquet`` file as ``job`` sees them, read and mapped on
    demand: :meth:`get` gives row ``i`` exactly as element ``i`` of :func:`load_file`'s list
    (the same plan, positions and 0-based index), without holding the rows
    (:class:`~mindrl.data.io.JsonlRows`, :class:`~mindrl.data.io.ParquetRows`)."""

    def __init__(self, source, plan_: Plan):
        self.source, self.plan = source, plan_

    def __len__(self) -> int:
        return len(self.source)

    def get(self, indices: Sequence[int]) -> List[Row]:
        """The mapped rows at these 0-based indices, in the order given."""
        return [self.plan.map(raw, pos, int(i))
                for i, (pos, raw) in zip(indices, self.source.read(indices))]


def index_file(path, job: str, fmt: str = "auto", fields: Optional[Dict[str, str]] = None,
               max_rows: int = 0, templated: str = "auto") -> Tuple[Plan, IndexedRows]:
    """:func:`load_file` for large files: the plan (from the first row) and the rows as an
    :class:`IndexedRows`. JSONL costs one pass to index the line offsets; parquet reads the
    footer and the first row group."""
    from mindrl.data.io import open_indexed  # noqa: PLC0415

    source = open_indexed(path, max_rows or None)
    if not len(source):
        raise DataError(f"{path}: no rows")
    pos, first = source.read([0])[0]
    p = plan(first, job, str(path), fmt, fields, templated, pos)
    return p, IndexedRows(source, p)


def head(path, job: str, n: int = 2, **kw) -> Tuple[Plan, List[Tuple[int, Any, Row]]]:
    """The plan and the first ``n`` rows as ``(position, raw row, mapped row)``; reads only
    those rows."""
    rows = list(iter_rows(path, n))
    if not rows:
        raise DataError(f"{path}: no rows")
    p = plan(rows[0][1], job, str(path), first_pos=rows[0][0], **kw)
    return p, [(pos, raw, p.map(raw, pos, i)) for i, (pos, raw) in enumerate(rows)]


def sft_view_hook(raw: Any, mapped: Row, plan_: Plan) -> Row:
    """The SFT view ``mindrl data inspect`` prints for a row: for the chat formats
    (:mod:`mindrl.data.conversations`: messages, sharegpt, traces, reasoning) the whole
    conversation as ``mindrl sft`` trains on it, trained (assistant) turns marked ``*``;
    otherwise the mapped row (problem -> response)."""
    from mindrl.data.conversations import CHAT_FORMATS, detect_format, to_messages  # noqa: PLC0415

    if not isinstance(raw, dict):
        return mapped
    forced = plan_.format.name if plan_.format.name in CHAT_FORMATS and not plan_.detected \
        else "auto"
    fmt, col = detect_format(raw, forced)
    if fmt not in CHAT_FORMATS:
        return mapped
    msgs = to_messages(raw, fmt, col, plan_.source, 0) or []
    turns = []
    for m in msgs:
        mark = "*" if m["role"] == "assistant" else ""
        think = f"<think>{m['reasoning']}</think> " if m.get("reasoning") else ""
        turns.append(f"[{m['role']}{mark}] {think}{m['content']}")
    user = next((m["content"] for m in msgs if m["role"] == "user"), mapped.get("problem", ""))
    return {**mapped, "problem": user, "response": " | ".join(turns)}


def iter_mapped(path, job: str, **kw) -> Iterable[Tuple[Plan, Row]]:
    """Stream ``(plan, mapped row)`` (for ``mindrl data convert`` of large files)."""
    p: Optional[Plan] = None
    for i, (pos, row) in enumerate(iter_rows(path)):
        if p is None:
            p = plan(row, job, str(path), first_pos=pos, **kw)
        yield p, p.map(row, pos, i)
    if p is None:
        raise DataError(f"{path}: no rows")
