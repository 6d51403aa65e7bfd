"""Reading tabular rows (JSONL, JSON, parquet) with errors that name the file, the 1-based line
or row, and the field. No framework import; parquet needs ``pyarrow`` (imported when used).

Memory: ``.jsonl`` is read line by line and ``.parquet`` one record batch at a time
(``ParquetFile.iter_batches``), so :func:`iter_rows` holds one batch, and reading the first rows
of a large file costs what those rows cost. ``.json`` (one JSON document) is parsed whole.

Positions: JSONL errors name the line (``FILE: line 7``, blank lines counted), parquet and JSON
errors the row (``FILE: row 7``); both 1-based. :func:`iter_rows` yields ``(position, row)``.
A row is a JSON object, or a JSON list for files whose rows are lists (Open-Reasoner-Zero's
``[human turn, assistant turn]`` pairs).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

from mindrl.errors import UserError

SUFFIXES = (".jsonl", ".ndjson", ".json", ".parquet")
BATCH_ROWS = 1024


class DataError(UserError, ValueError):
    """Bad data input: a missing file, an unreadable row, a missing field, an unknown name."""


def unit(path) -> str:
    """``"line"`` for JSONL files, ``"row"`` otherwise."""
    return "line" if Path(path).suffix.lower() in (".jsonl", ".ndjson") else "row"


def where(path, pos: int) -> str:
    """``"FILE: line 3"`` (JSONL) or ``"FILE: row 3"`` (parquet, JSON); ``pos`` is 1-based."""
    return f"{path}: {unit(path)} {pos}"


def _check_path(path: Path) -> str:
    if not path.is_file():
        raise DataError(f"data file not found: {path}")
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:
        raise DataError(f"{path}: unsupported file type '{suffix}' (use .jsonl, .json or "
                        f".parquet)")
    return suffix


def _not_utf8(path: Path, pos_text: str, err: UnicodeDecodeError) -> DataError:
    bad = err.object[err.start:err.start + 1]
    return DataError(f"{path}: {pos_text}: not UTF-8 text (byte 0x{bad.hex()} at byte "
                     f"{err.start + 1} of the {pos_text.split()[0]}); re-save the file as UTF-8, "
                     f"e.g. `iconv -f latin1 -t utf-8 {path.name} > fixed{path.suffix}`")


def iter_rows(path, max_rows: Optional[int] = None) -> Iterator[Tuple[int, Any]]:
    """``(position, row)`` for each row of a ``.jsonl``/``.json``/``.parquet`` file, streaming
    (see the module docstring); at most ``max_rows`` rows (None or 0 = all)."""
    path = Path(path)
    suffix = _check_path(path)
    if suffix in (".jsonl", ".ndjson"):
        yield from _iter_jsonl(path, max_rows)
    elif suffix == ".json":
        for i, row in enumerate(_read_json(path)[:max_rows or None], 1):
            yield i, row
    else:
        yield from _iter_parquet(path, max_rows)


def _iter_jsonl(path: Path, max_rows: Optional[int]) -> Iterator[Tuple[int, Any]]:
    n = 0
    with path.open("rb") as f:
        for lineno, raw in enumerate(f, 1):
            if max_rows and n >= max_rows:
                return
            try:
                line = raw.decode("utf-8-sig" if lineno == 1 else "utf-8")
            except UnicodeDecodeError as e:
                raise _not_utf8(path, f"line {lineno}", e) from None
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise DataError(f"{path}: line {lineno}: not valid JSON ({e.msg} at column "
                                f"{e.colno})") from None
            if not isinstance(row, (dict, list)):
                raise DataError(f"{path}: line {lineno}: expected a JSON object per line, "
                                f"got {type(row).__name__}")
            n += 1
            yield lineno, row


def _read_json(path: Path) -> List[Any]:
    data = path.read_bytes()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        raise _not_utf8(path, f"line {line}", e) from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        hint = " (one JSON object per line? name the file .jsonl)" \
            if e.msg == "Extra data" else ""
        raise DataError(f"{path}: line {e.lineno}: not valid JSON ({e.msg} at column "
                        f"{e.colno}){hint}") from None
    if isinstance(doc, dict):  # {"data": [...]} or {"train": [...]} style
        lists = [v for v in doc.values() if isinstance(v, list)]
        if len(lists) != 1:
            raise DataError(f"{path}: expected a list of rows (or one list inside an object); "
                            f"found an object with keys: {', '.join(list(doc)[:10])}")
        doc = lists[0]
    if not isinstance(doc, list):
        raise DataError(f"{path}: expected a list of rows, got {type(doc).__name__}")
    for i, row in enumerate(doc, 1):
        if not isinstance(row, (dict, list)):
            raise DataError(f"{path}: row {i}: expected a JSON object (or a list of turns), "
                            f"got {type(row).__name__}")
    return doc


def parquet_file(path: Path):
    """A ``pyarrow.parquet.ParquetFile``; a missing pyarrow or a corrupt file is a DataError."""
    try:
        import pyarrow.parquet as pq  # noqa: PLC0415 (optional dependency)
    except ImportError:
        raise DataError(f"{path}: reading parquet needs pyarrow (`pip install 'pyarrow>=15'`), "
                        f"which is not installed") from None
    try:
        return pq.ParquetFile(path)
    except Exception as e:  # pyarrow raises ArrowInvalid / OSError for a bad file
        raise DataError(f"{path}: not a readable parquet file ({e})") from None


def _iter_parquet(path: Path, max_rows: Optional[int]) -> Iterator[Tuple[int, Any]]:
    pf = parquet_file(path)
    pos = 0
    batch_rows = min(BATCH_ROWS, max_rows) if max_rows else BATCH_ROWS
    for batch in pf.iter_batches(batch_size=batch_rows):
        for row in batch.to_pylist():
            if max_rows and pos >= max_rows:
                return
            pos += 1
            yield pos, row


def read_rows(path, max_rows: Optional[int] = None) -> List[Any]:
    """All rows of a ``.jsonl``/``.json``/``.parquet`` file (at most ``max_rows``)."""
    return [row for _, row in iter_rows(path, max_rows)]


def column_types(path, rows: Sequence[Any]) -> Dict[str, str]:
    """Column -> type, from the parquet schema, else from the given rows (JSON types)."""
    path = Path(path)
    if path.suffix.lower() == ".parquet":
        schema = parquet_file(path).schema_arrow
        return {f.name: str(f.type) for f in schema}
    out: Dict[str, str] = {}
    for row in rows:
        items = row.items() if isinstance(row, dict) else \
            ((f"[{i}]", v) for i, v in enumerate(row))
        for k, v in items:
            out.setdefault(str(k), _json_type(v))
    return out


def _json_type(v: Any) -> str:
    if isinstance(v, dict):
        return "object{" + ", ".join(f"{k}: {_json_type(x)}" for k, x in list(v.items())[:6]) \
            + ("" if len(v) <= 6 else ", ...") + "}"
    if isinstance(v, list):
        return f"list<{_json_type(v[0])}>" if v else "list"
    return {str: "string", bool: "bool", int: "int", float: "float",
            type(None): "null"}.get(type(v), type(v).__name__)


def pick_field(row: Dict[str, Any], candidates: Sequence[str], path, index: int,
               what: str) -> str:
    """The first of ``candidates`` present in ``row``; a miss names the file, row and field
    (``index`` is the 1-based position)."""
    for name in candidates:
        if isinstance(row, dict) and name in row:
            return name
    fields = ", ".join(sorted(map(str, row))) if isinstance(row, dict) else "(a list row)"
    raise DataError(f"{where(path, index)}: no {what} field "
                    f"{' / '.join(repr(c) for c in candidates)}; its fields are: {fields} "
                    f"(name one with a field option, e.g. data.prompt_field=...)")


def check_fields(rows: Sequence[Dict[str, Any]], fields: Sequence[str], path) -> None:
    """Raise :class:`DataError` naming the file, 1-based row and field if any row lacks one."""
    for i, row in enumerate(rows, 1):
        for name in fields:
            if name not in row:
                raise DataError(f"{where(path, i)}: no field '{name}'; its fields are: "
                                f"{', '.join(sorted(row))}")
