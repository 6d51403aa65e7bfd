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
import os
from collections import OrderedDict
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np

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


def _jsonl_row(path: Path, raw: bytes, lineno: int, first: bool) -> Any:
    """The row on one JSONL line (``first``: the file's first line, which may carry a BOM), or
    None for a blank line."""
    try:
        line = raw.decode("utf-8-sig" if first else "utf-8")
    except UnicodeDecodeError as e:
        raise _not_utf8(path, f"line {lineno}", e) from None
    if not line.strip():
        return None
    try:
        row = json.loads(line)
    except json.JSONDecodeError as e:
        raise DataError(f"{path}: line {lineno}: not valid JSON ({e.msg} at column "
                        f"{e.colno})") from None
    if not isinstance(row, (dict, list)):
        raise DataError(f"{path}: line {lineno}: expected a JSON object per line, "
                        f"got {type(row).__name__}")
    return row


def _iter_jsonl(path: Path, max_rows: Optional[int]) -> Iterator[Tuple[int, Any]]:
    n = 0
    with path.open("rb") as f:
        for lineno, raw in enumerate(f, 1):
            if max_rows and n >= max_rows:
                return
            row = _jsonl_row(path, raw, lineno, lineno == 1)
            if row is None:
                continue
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


# ------------------------------------------------------------------------ random access
INDEX_CHUNK = 1 << 24          # bytes read at a time while indexing a JSONL file
_ROW_START = (ord("{"), ord("["))
_NEWLINE = ord("\n")


def _index_jsonl(path: Path, max_rows: Optional[int]) -> Tuple[np.ndarray, np.ndarray, int]:
    """``(row offsets, blank-line offsets before the last row, end of the last row)``.

    One pass in :data:`INDEX_CHUNK` pieces: the start of every line and its first byte. A line
    whose first byte is ``{`` or ``[`` is a row; any other line is decoded and stripped exactly
    as :func:`_iter_jsonl` does (blank -> skipped; anything else is a row, whose error, if any,
    is raised when it is read)."""
    starts, firsts = [], []
    base, pending, seen = 0, True, 0
    with path.open("rb") as f:
        while True:
            chunk = f.read(INDEX_CHUNK)
            if not chunk:
                break
            a = np.frombuffer(chunk, np.uint8)
            if pending:                          # a line starts at this chunk's first byte
                starts.append(np.array([base], np.int64))
                firsts.append(a[:1].copy())
                seen += int(a[0] in _ROW_START)
            nl = np.flatnonzero(a == _NEWLINE)
            inner = nl[nl + 1 < len(a)]
            starts.append(inner + 1 + base)
            firsts.append(a[inner + 1])
            seen += int(np.isin(firsts[-1], _ROW_START).sum())
            pending = bool(len(nl)) and int(nl[-1]) == len(a) - 1
            base += len(a)
            if max_rows and seen > max_rows:     # the first max_rows rows and one row more
                break
    size = base                                  # bytes seen (the file size unless cut short)
    start = np.concatenate(starts) if starts else np.zeros(0, np.int64)
    first = np.concatenate(firsts) if firsts else np.zeros(0, np.uint8)
    is_row = np.isin(first, _ROW_START)
    unsure = np.flatnonzero(~is_row & (first != _NEWLINE))
    if len(unsure):
        with path.open("rb") as f:
            fd = f.fileno()
            for j in unsure:
                end = int(start[j + 1]) if j + 1 < len(start) else size
                raw = os.pread(fd, end - int(start[j]), int(start[j]))
                try:
                    blank = not raw.decode("utf-8-sig" if start[j] == 0 else "utf-8").strip()
                except UnicodeDecodeError:
                    blank = False                # reported as not UTF-8 when read
                is_row[j] = not blank
    rows = np.flatnonzero(is_row)
    if max_rows:
        rows = rows[:max_rows]
    if not len(rows):
        return np.zeros(0, np.int64), np.zeros(0, np.int64), 0
    last = int(rows[-1])
    stop = int(start[last + 1]) if last + 1 < len(start) else size
    blank = start[:last][~is_row[:last]]
    return start[rows].astype(np.int64), blank.astype(np.int64), stop


class JsonlRows:
    """Random access to the rows of a ``.jsonl`` file through an index of line offsets.

    Memory: 8 bytes a row (the byte offset of its line, int64) plus 8 bytes per blank line
    before the last row (for line numbers in messages); the file is never held. Building the
    index reads the file once (:func:`_index_jsonl`); with ``max_rows`` it stops after those
    rows. A row is read (``os.pread``) and parsed when asked for, with the same checks and
    messages as :func:`iter_rows`, so a bad line deep in the file is reported when it is read.
    Rows are numbered 0..n-1 in file order, the rows :func:`iter_rows` yields."""

    group_sizes = None              # no row groups: any order is as cheap as any other

    def __init__(self, path, max_rows: Optional[int] = None):
        self.path = Path(path)
        _check_path(self.path)
        self.offsets, self.blank, self.stop = _index_jsonl(self.path, max_rows)

    def __len__(self) -> int:
        return len(self.offsets)

    def position(self, i: int) -> int:
        """The 1-based line number of row ``i`` (blank lines counted, as in messages)."""
        return int(i) + 1 + int(np.searchsorted(self.blank, self.offsets[i]))

    def read(self, indices: Sequence[int]) -> List[Tuple[int, Any]]:
        """``(line number, row)`` of each row index, in the order given."""
        out = []
        fd = os.open(self.path, os.O_RDONLY)
        try:
            for i in indices:
                i = int(i)
                start = int(self.offsets[i])
                end = int(self.offsets[i + 1]) if i + 1 < len(self.offsets) else self.stop
                raw = os.pread(fd, end - start, start)
                cut = raw.find(b"\n")
                raw = raw if cut < 0 else raw[:cut + 1]
                pos = self.position(i)
                out.append((pos, _jsonl_row(self.path, raw, pos, start == 0)))
        finally:
            os.close(fd)
        return out


class ParquetRows:
    """Random access to the rows of a ``.parquet`` file by (row group, row) addressing.

    Row ``i`` lies in row group ``g`` with ``group_starts[g] <= i < group_starts[g + 1]``. A row
    group is decoded whole (``read_row_group``, kept as a columnar Arrow table, not Python
    objects) the first time one of its rows is asked for, and kept in an LRU cache of at most
    ``cache_rows`` rows (at least the group in use): a file written as one row group is decoded
    whole. Only the rows asked for become Python objects (``Table.take(...).to_pylist()``),
    the values :func:`iter_rows` yields. ``max_rows`` keeps the first rows."""

    def __init__(self, path, max_rows: Optional[int] = None, cache_rows: int = 0):
        self.path = Path(path)
        _check_path(self.path)
        self._file = parquet_file(self.path)
        md = self._file.metadata
        sizes = np.array([md.row_group(g).num_rows for g in range(md.num_row_groups)], np.int64)
        if max_rows:
            ends = np.minimum(np.cumsum(sizes), max_rows)
            sizes = np.diff(np.concatenate([[0], ends]))
            sizes = sizes[:int(np.searchsorted(ends, max_rows)) + 1]
        sizes = sizes[:np.flatnonzero(sizes).max() + 1] if sizes.any() else sizes[:0]
        self.group_sizes = sizes
        self.group_starts = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        self.cache_rows = cache_rows
        self._cache: "OrderedDict[int, Any]" = OrderedDict()

    def __len__(self) -> int:
        return int(self.group_starts[-1])

    def position(self, i: int) -> int:
        return int(i) + 1

    def _group(self, g: int):
        table = self._cache.get(g)
        if table is not None:
            self._cache.move_to_end(g)
            return table
        try:
            table = self._file.read_row_group(g)
        except Exception as e:  # pyarrow: ArrowInvalid / OSError for a damaged group
            lo, hi = int(self.group_starts[g]) + 1, int(self.group_starts[g + 1])
            raise DataError(f"{self.path}: rows {lo}-{hi} (row group {g + 1}): cannot be "
                            f"read ({e})") from None
        n = int(self.group_sizes[g])
        if table.num_rows > n:
            table = table.slice(0, n)
        self._cache[g] = table
        held = sum(t.num_rows for t in self._cache.values())
        while len(self._cache) > 1 and held > self.cache_rows:
            _, old = self._cache.popitem(last=False)
            held -= old.num_rows
        return table

    def read(self, indices: Sequence[int]) -> List[Tuple[int, Any]]:
        """``(row number, row)`` of each row index, in the order given (one decode and one
        ``take`` per row group touched)."""
        import pyarrow as pa  # noqa: PLC0415 (optional dependency, present: the file opened)

        idx = np.asarray(indices, np.int64).reshape(-1)
        if len(idx) and (idx.min() < 0 or idx.max() >= len(self)):
            raise IndexError(f"row index out of range 0..{len(self) - 1}")
        groups = np.searchsorted(self.group_starts, idx, side="right") - 1
        out: List[Any] = [None] * len(idx)
        for g in dict.fromkeys(groups.tolist()):        # groups in order of first use
            sel = np.flatnonzero(groups == g)
            local = pa.array(idx[sel] - self.group_starts[g])
            for j, row in zip(sel.tolist(), self._group(g).take(local).to_pylist()):
                out[j] = (int(idx[j]) + 1, row)
        return out


def open_indexed(path, max_rows: Optional[int] = None):
    """:class:`JsonlRows` or :class:`ParquetRows` for a ``.jsonl``/``.ndjson``/``.parquet``
    file; ``.json`` (one document, parsed whole) has no indexed reader: use :func:`read_rows`."""
    path = Path(path)
    suffix = _check_path(path)
    if suffix in (".jsonl", ".ndjson"):
        return JsonlRows(path, max_rows)
    if suffix == ".parquet":
        return ParquetRows(path, max_rows)
    raise DataError(f"{path}: a .json file is one document, read whole; random access needs "
                    f".jsonl or .parquet")
