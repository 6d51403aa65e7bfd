"""``mindrl data convert`` and ``mindrl data inspect``: between the named formats, and a look at a
file as each job would read it.

Targets (the output file's suffix picks JSONL or parquet):

``verl``    verl's RL parquet (``examples/data_preprocess/gsm8k.py`` shape): ``data_source``,
            ``prompt`` = [system turn,] user turn, ``ability``, ``reward_model`` = {style: rule,
            ground_truth}, ``extra_info`` = {split, index, id, question}. An any-of gold is
            written as a JSON list string (Skywork-OR1's convention). A prompt already in a
            chat format is written as the user turn unchanged.
``mindrl``  RL/eval JSONL: ``id``, ``problem``, ``answer`` (+ ``system`` when the prompt had a
            system turn): what ``data.train_file`` and ``mindrl eval --benchmarks`` read with
            no field options.
``pairs``   ``prompt``, ``chosen``, ``rejected`` (+ ``id``): TRL's standard preference format.
``sft``     ``problem``, ``response``.

Both directions stream: rows are read one parquet batch / one JSONL line at a time and written
in batches of :data:`mindrl.data.io.BATCH_ROWS`, so converting a large file holds one batch.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from mindrl.data.formats import JOBS, Plan, head, iter_mapped, sft_view_hook
from mindrl.data.io import BATCH_ROWS, DataError, column_types, iter_rows, where
from mindrl.data.templates import ChatPrompt

TARGETS = {"verl": "rl", "mindrl": "rl", "pairs": "pref", "sft": "sft"}
Row = Dict[str, Any]


def _verl_row(r: Row, index: int, data_source: str, ability: str, split: str) -> Row:
    p = r["problem"]
    prompt = ([{"role": "system", "content": p.system}]
              if isinstance(p, ChatPrompt) and p.system else []) + \
        [{"role": "user", "content": str(p)}]
    gold = r["answer"]
    extra = {"split": split, "index": index, "question": str(p)}
    if "id" in r:
        extra["id"] = str(r["id"])
    return {"data_source": data_source, "prompt": prompt, "ability": ability,
            "reward_model": {"style": "rule",
                             "ground_truth": json.dumps(gold) if isinstance(gold, list)
                             else str(gold)},
            "extra_info": extra}


def target_row(to: str, r: Row, index: int, data_source: str = "", ability: str = "math",
               split: str = "train") -> Row:
    """One mapped row in the ``to`` format (see the module docstring)."""
    if to == "verl":
        return _verl_row(r, index, data_source, ability, split)
    if to == "mindrl":
        out = {"id": str(r.get("id", index)), "problem": str(r["problem"]), "answer": r["answer"]}
        if isinstance(r["problem"], ChatPrompt) and r["problem"].system:
            out["system"] = r["problem"].system
        return out
    if to == "pairs":
        out = {"prompt": str(r["problem"]), "chosen": r["chosen"], "rejected": r["rejected"]}
        return {**out, "id": str(r["id"])} if "id" in r else out
    return {"problem": str(r["problem"]), "response": r["response"]}


def _writer(out: Path):
    """(write(rows), close()) for a JSONL or parquet file written to a temporary name."""
    tmp = out.with_name(f".{out.name}.tmp{os.getpid()}")
    if out.suffix.lower() == ".parquet":
        import pyarrow as pa  # noqa: PLC0415
        import pyarrow.parquet as pq  # noqa: PLC0415

        state: Dict[str, Any] = {}

        def write(rows: List[Row]) -> None:
            table = pa.Table.from_pylist(rows, schema=state.get("schema"))
            if "w" not in state:
                state["schema"] = table.schema
                state["w"] = pq.ParquetWriter(tmp, table.schema)
            state["w"].write_table(table)

        def close() -> None:
            if "w" in state:
                state["w"].close()
        return tmp, write, close
    if out.suffix.lower() not in (".jsonl", ".ndjson"):
        raise DataError(f"{out}: write .jsonl or .parquet")
    f = tmp.open("w", encoding="utf-8")

    def write_lines(rows: List[Row]) -> None:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    return tmp, write_lines, f.close


def convert(src, out, to: str = "verl", fmt: str = "auto",
            fields: Optional[Dict[str, str]] = None, templated: str = "auto",
            data_source: str = "", ability: str = "math", split: str = "train"
            ) -> Tuple[Plan, int]:
    """Write ``src`` as ``to`` into ``out`` (atomically); returns the plan and the row count."""
    if to not in TARGETS:
        raise DataError(f"unknown target format '{to}'; valid: {', '.join(TARGETS)}")
    src, out = Path(src), Path(out).expanduser()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp, write, close = _writer(out)
    n, plan, batch = 0, None, []
    try:
        for plan, r in iter_mapped(src, TARGETS[to], fmt=fmt, fields=fields,
                                   templated=templated):
            batch.append(target_row(to, r, n, data_source or src.stem, ability, split))
            n += 1
            if len(batch) >= BATCH_ROWS:
                write(batch)
                batch = []
        if batch:
            write(batch)
        close()
        os.replace(tmp, out)
    finally:
        if tmp.exists():
            tmp.unlink()
    return plan, n


# ------------------------------------------------------------------------ inspect
def _show(x: Any, n: int = 200) -> str:
    s = x if isinstance(x, str) else json.dumps(x, ensure_ascii=False, default=str)
    s = s.replace("\n", "\\n")
    return s if len(s) <= n else s[:n - 3] + "..."


def inspect_lines(path, rows: int = 2, fmt: str = "auto",
                  fields: Optional[Dict[str, str]] = None, templated: str = "auto",
                  template: str = "") -> List[str]:
    """What ``mindrl data inspect`` prints: the format, the columns with their types, and for
    each job the mapping and the first ``rows`` rows as the job sees them (or why it cannot)."""
    from mindrl.data.formats import detect_format  # noqa: PLC0415

    path = Path(path)
    first = list(iter_rows(path, rows))
    if not first:
        raise DataError(f"{path}: no rows")
    f = detect_format(first[0][1])
    lines = [f"{path}: {path.suffix.lstrip('.')} file, detected format: {f.name} ({f.help})"]
    if fmt not in ("", "auto"):
        lines.append(f"format forced: {fmt}")
    lines.append("columns:")
    for name, typ in column_types(path, [r for _, r in first]).items():
        lines.append(f"  {name}: {typ}")
    labels = {"rl": "train (RL) / eval", "sft": "sft", "pref": "dpo / simpo"}
    for job in ("rl", "sft", "pref"):
        try:
            plan, mapped = head(path, job, rows, fmt=fmt, fields=fields, templated=templated)
        except DataError as e:
            lines.append(f"{labels[job]}: not usable: {e}")
            continue
        parts = plan.describe().split(" (", 1)
        lines.append(f"{labels[job]}: {parts[1][:-1] if len(parts) > 1 else parts[0]}")
        for pos, raw, row in mapped:
            if job == "sft":
                row = sft_view_hook(raw, row, plan)
            keys = [k for k in ("id",) + JOBS[job][0] if k in row]
            shown = ", ".join(f"{k}={_show(row[k], 120)}" for k in keys)
            lines.append(f"  {where(path, pos)}: {shown}")
            if job == "rl" and template:
                from mindrl.data.templates import render_prompt  # noqa: PLC0415

                try:
                    text = render_prompt(row["problem"], template)
                except ValueError as e:
                    text = f"({e})"
                lines.append(f"    prompt after template '{template}': {_show(text, 300)}")
    return lines
