"""Training prompt sets: built-in names, or any JSONL/parquet path.

:func:`load_prompts` returns rows with at least ``problem`` and ``answer`` (normalised like the
benchmark answers) plus every original column, so rewards that need more (Countdown's ``nums``
and ``target``) find it under its own name. Other modules may register more sets (generators)
in :data:`PROMPT_SETS`: a callable ``(data_dir, max_rows) -> rows``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

from mindrl.data.benchmarks import (ANSWER_FIELDS, PROBLEM_FIELDS, gsm8k_final_answer,
                                    normalize_gold, resolve_data_dir)
from mindrl.data.io import DataError, pick_field, read_rows
from mindrl.registry import Registry

Row = Dict[str, Any]
PROMPT_SETS: Registry = Registry("prompt set")


def _builtin(filename: str, problem_field: str, answer_field: str,
             answer_fn: Callable[[Any], str] = normalize_gold,
             extra: Optional[Callable[[Row], Row]] = None):
    def load(data_dir, max_rows: int = 0, prompt_field: str = "", answer_field_: str = ""):
        root = resolve_data_dir(data_dir, sub="")
        path = root / filename
        if not path.is_file():
            raise DataError(f"data file not found: {path} (set data.data_dir to the directory "
                            f"that holds {filename})")
        raw = read_rows(path, max_rows=max_rows or None)
        return _map(raw, path, prompt_field or problem_field, answer_field_ or answer_field,
                    answer_fn, extra)
    load.filename = filename
    return load


def countdown_columns(row: Row) -> Row:
    """Countdown rows ``{"input": "30,100,93", "output": "23"}``: add ``nums`` and ``target``
    and a problem statement (the output format is the chat template's business)."""
    nums = [int(x) for x in str(row["input"]).split(",") if x.strip()]
    target = int(row["output"])
    return {"nums": nums, "target": target,
            "problem": f"Using the numbers {nums}, create an equation that equals {target}. "
                       f"You can use basic arithmetic operations (+, -, *, /) and each number "
                       f"can only be used once."}


PROMPT_SETS.register("gsm8k", _builtin("train/gsm8k_train.openai.jsonl", "question", "answer",
                                       answer_fn=gsm8k_final_answer))
PROMPT_SETS.register("math_l3to5", _builtin(
    "train/simplelr_qwen_level3to5_train.simplerl_pr57.jsonl", "question", "gt_answer"))
PROMPT_SETS.register("countdown", _builtin("tasks/countdown_cd3_test.d1.jsonl", "input", "output",
                                           extra=countdown_columns))


def _map(raw: List[Row], path, pf: str, af: str, answer_fn, extra) -> List[Row]:
    if not raw:
        raise DataError(f"{path}: no rows")
    out = []
    for i, r in enumerate(raw):
        for f, what in ((pf, "prompt"), (af, "answer")):
            if f not in r:
                raise DataError(f"{path}: row {i} has no {what} field '{f}'; its fields are: "
                                f"{', '.join(sorted(r))}")
        row = dict(r)
        row["problem"] = str(r[pf]).strip()
        row["answer"] = answer_fn(r[af])
        if af == "answer" and str(r[af]) != row["answer"]:
            row["answer_raw"] = r[af]      # e.g. GSM8K's full rationale
        if extra is not None:
            row.update(extra(r))
        out.append(row)
    return out


def load_prompts(spec: str, data_dir=None, prompt_field: str = "", answer_field: str = "",
                 max_rows: int = 0) -> List[Row]:
    """Training prompts as rows with ``problem``, ``answer`` and all original columns.

    ``spec``: a registered name (``gsm8k``, ``math_l3to5``, ``countdown``, ...) or a path to a
    ``.jsonl``/``.json``/``.parquet`` file. ``data_dir`` holds the built-in files (default
    ``../shared/data``). Empty field names mean the set's default (for files: the first of
    ``problem/question/prompt/input/query`` and ``answer/gt_answer/final_answer/target/output``).
    ``max_rows`` > 0 keeps the first rows.
    """
    if not spec:
        raise DataError("no prompt set given (data.train_file is empty)")
    if spec in PROMPT_SETS:
        return PROMPT_SETS.get(spec)(data_dir, max_rows, prompt_field, answer_field)
    path = Path(spec).expanduser()
    if path.suffix.lower() not in (".jsonl", ".json", ".parquet", ".ndjson"):
        raise DataError(f"unknown prompt set '{spec}'; valid names: "
                        f"{', '.join(PROMPT_SETS.names())} (or a .jsonl/.json/.parquet path)")
    if not path.is_absolute() and not path.exists():
        alt = resolve_data_dir(data_dir, sub="") / path
        path = alt if alt.exists() else path
    raw = read_rows(path, max_rows=max_rows or None)
    if not raw:
        raise DataError(f"{path}: no rows")
    pf = prompt_field or pick_field(raw[0], PROBLEM_FIELDS, path, 0, "prompt")
    af = answer_field or pick_field(raw[0], ANSWER_FIELDS, path, 0, "answer")
    return _map(raw, path, pf, af, normalize_gold, None)
