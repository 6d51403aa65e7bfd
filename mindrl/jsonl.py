"""Append-only JSON Lines files that survive a crash mid-write.

A process killed while appending leaves a torn last line (bytes without the closing newline).
Appending after it glues the next record onto the torn bytes, and both are lost when the file is
read. Every JSONL file mindrl appends to (``metrics.jsonl``, eval ``samples.jsonl``) goes
through :func:`append_jsonl`, which first cuts the file back to its last whole line
(:func:`repair_tail`) and says how many bytes it dropped. :func:`read_jsonl` reads such a file
and skips a torn last line, so a resumed run never fails on it.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any, Dict, Iterable, List, Union

from mindrl.errors import UserError

log = logging.getLogger("mindrl.jsonl")


def _tail_start(f, size: int) -> int:
    """Offset just past the last newline of an open binary file of ``size`` bytes (0: none)."""
    pos, block = size, 1 << 16
    while pos > 0:
        start = max(0, pos - block)
        f.seek(start)
        chunk = f.read(pos - start)
        cut = chunk.rfind(b"\n")
        if cut >= 0:
            return start + cut + 1
        pos = start
    return 0


def repair_tail(path: Path) -> int:
    """Make ``path`` end with a whole line; returns the number of bytes dropped.

    A last line without its newline that still parses as a JSON object (the crash fell between
    the record and its newline) gets the newline; anything else after the last newline is cut
    off, with a warning naming the file and the bytes dropped. A missing file is left alone."""
    path = Path(path)
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return 0
    if size == 0:
        return 0
    with path.open("r+b") as f:
        f.seek(size - 1)
        if f.read(1) == b"\n":
            return 0
        start = _tail_start(f, size)
        f.seek(start)
        tail = f.read()
        if _is_record(tail):
            f.seek(size)
            f.write(b"\n")
            return 0
        f.truncate(start)
        f.flush()
        os.fsync(f.fileno())
    log.warning("%s: dropped a torn last line (%d bytes, an interrupted write) before appending",
                path, size - start)
    return size - start


def _is_record(raw: bytes) -> bool:
    try:
        return isinstance(json.loads(raw.decode("utf-8")), dict)
    except (UnicodeDecodeError, ValueError):
        return False


def append_jsonl(path: Path, records: Iterable[Dict[str, Any]], fsync: bool = True,
                 ensure_ascii: bool = True) -> None:
    """Append one line per record after repairing a torn tail; ``fsync`` makes the lines
    durable before returning."""
    path = Path(path)
    repair_tail(path)
    text = "".join(json.dumps(r, ensure_ascii=ensure_ascii) + "\n" for r in records)
    with path.open("a", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        if fsync:
            os.fsync(f.fileno())


def read_jsonl(path: Path) -> List[Dict[str, Any]]:
    """Records of ``path``; blank lines and a torn last line (no newline, not valid JSON) are
    skipped. A bad line elsewhere is a :class:`UserError` naming the file and 1-based line."""
    path = Path(path)
    data = path.read_bytes()
    lines = data.split(b"\n")
    torn = lines.pop()              # b"" when the file ends with a newline
    rows = []
    for i, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        try:
            rows.append(json.loads(raw.decode("utf-8")))
        except (UnicodeDecodeError, ValueError) as e:
            raise UserError(f"{path}:{i}: not a JSON line ({e}); fix or delete that line") \
                from None
    if torn.strip():
        if _is_record(torn):
            rows.append(json.loads(torn.decode("utf-8")))
        else:
            log.warning("%s:%d: skipping a torn last line (%d bytes, an interrupted write)",
                        path, len(lines) + 1, len(torn))
    return rows


def write_text_atomic(path: Path, text: Union[str, Iterable[str]]) -> Path:
    """Replace ``path`` with ``text`` (a string, or pieces written as they come, so a large
    file never sits in memory) atomically: written beside it (a name with this process's id),
    fsynced, renamed; a crash or an error while the pieces are made leaves the old file (or
    none), never a torn one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        with tmp.open("w", encoding="utf-8") as f:
            if isinstance(text, str):
                f.write(text)
            else:
                for piece in text:
                    f.write(piece)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return path


def rewrite_jsonl(path: Path, records: Iterable[Dict[str, Any]]) -> Path:
    """Replace ``path`` with one line per record, atomically (:func:`write_text_atomic`),
    streamed: records are written as the iterable yields them."""
    return write_text_atomic(path, (json.dumps(r, ensure_ascii=False) + "\n" for r in records))
