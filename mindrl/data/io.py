"""Reading tabular rows (JSONL, JSON, parquet) with errors that name the file, the line and the
field. No framework import; parquet needs ``pyarrow`` (or ``pandas``), imported only when used."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Sequence

from mindrl.errors import UserError


class DataError(UserError, ValueError):
    """Bad data input: a missing file, an unreadable row, a missing field, an unknown name."""


def read_rows(path, max_rows: Optional[int] = None) -> List[Dict[str, Any]]:
    """All rows of a ``.jsonl``/``.json``/``.parquet`` file as dicts (at most ``max_rows``)."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"data file not found: {path}")
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        rows = []
        with path.open(encoding="utf-8") as f:
            for lineno, line in enumerate(f, 1):
                if max_rows and len(rows) >= max_rows:
                    break
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as e:
                    raise DataError(f"{path}:{lineno}: not valid JSON ({e.msg})") from None
                if not isinstance(row, dict):
                    raise DataError(f"{path}:{lineno}: expected a JSON object per line, "
                                    f"got {type(row).__name__}")
                rows.append(row)
        return rows
    if suffix == ".json":
        data = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(data, dict):  # {"data": [...]} or {"train": [...]} style
            lists = [v for v in data.values() if isinstance(v, list)]
            if len(lists) != 1:
                raise DataError(f"{path}: expected a list of objects "
                                f"(or one list inside an object)")
            data = lists[0]
        if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
            raise DataError(f"{path}: expected a list of JSON objects")
        return data[:max_rows] if max_rows else data
    if suffix == ".parquet":
        return _read_parquet(path, max_rows)
    raise DataError(f"{path}: unsupported file type '{suffix}' (use .jsonl, .json or .parquet)")


def _read_parquet(path: Path, max_rows: Optional[int]) -> List[Dict[str, Any]]:
    try:
        import pyarrow.parquet as pq  # noqa: PLC0415 (optional dependency)

        rows = pq.read_table(path).to_pylist()
    except ImportError:
        try:
            import pandas as pd  # noqa: PLC0415

            rows = pd.read_parquet(path).to_dict(orient="records")
        except ImportError:
            raise DataError(f"{path}: reading parquet needs pyarrow "
                            f"(`pip install pyarrow`), which is not installed") from None
    return rows[:max_rows] if max_rows else rows


def pick_field(row: Dict[str, Any], candidates: Sequence[str], path, index: int,
               what: str) -> str:
    """The first of ``candidates`` present in ``row``; a miss names the file, row and field."""
    for name in candidates:
        if name in row:
            return name
    raise DataError(f"{path}: row {index} has no {what} field "
                    f"{' / '.join(repr(c) for c in candidates)}; "
                    f"its fields are: {', '.join(sorted(row))}")


def check_fields(rows: Iterable[Dict[str, Any]], fields: Sequence[str], path) -> None:
    """Raise :class:`DataError` naming the file and field if any row lacks a field."""
    for i, row in enumerate(rows):
        for name in fields:
            if name not in row:
                raise DataError(f"{path}: row {i} has no field '{name}'; "
                                f"its fields are: {', '.join(sorted(row))}")
