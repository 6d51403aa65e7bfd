"""``mindrl data clean``: drop training rows that contain web links or CJK text.

The first step of an AceReason-Math data pipeline (clean -> sample k -> drop
all-correct -> train): problems that cite a URL usually depend on a page the model cannot see,
and problems in (or half-translated from) Chinese do not match an English chat template.

    url  ``http://``, ``https://``, ``ftp://`` or ``www.`` followed by a non-space, or a bare
         domain such as ``example.com/...`` (a name starting with a letter, a dot and one of
         the common top-level domains com/org/net/edu/gov/io/cn/uk/de/jp, not followed by a
         letter, digit or hyphen)
    cjk  a character of the CJK ideograph blocks (U+3400-U+4DBF, U+4E00-U+9FFF, U+F900-U+FAFF),
         CJK symbols and punctuation (U+3000-U+303F), kana (U+3040-U+30FF), Hangul syllables
         (U+AC00-U+D7AF) or full-width forms (U+FF00-U+FFEF)

Fields searched: those named by ``fields`` (each must exist in every row), else every
top-level string field of the row. Counts say how many rows each reason hit (a row may hit
both) and how many were dropped; the first few matches of each reason are kept as examples.
"""

from __future__ import annotations

import argparse
import re
from typing import Dict, List, Optional, Sequence

from mindrl.command import DefaultsHelpFormatter
from mindrl.data.io import DataError

URL_RE = re.compile(r"(?i)(?:\b(?:https?|ftp)://|\bwww\.)\S+"
                    r"|\b[a-z][a-z0-9-]*\.(?:com|org|net|edu|gov|io|cn|uk|de|jp)(?![\w-])")
CJK_RE = re.compile("[\u3000-\u303f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
                    "\uac00-\ud7af\uff00-\uffef]+")
CHECKS = {"url": URL_RE, "cjk": CJK_RE}


def find_reasons(row: Dict, checks: Sequence[str], fields: Optional[Sequence[str]] = None
                 ) -> Dict[str, str]:
    """{reason: the first matching text (with its field)} for the checks this row fails."""
    names = list(fields) if fields else [k for k, v in row.items() if isinstance(v, str)]
    hits: Dict[str, str] = {}
    for reason in checks:
        for name in names:
            m = CHECKS[reason].search(str(row.get(name, "")))
            if m:
                hits[reason] = f"{name}: {m.group(0)[:40]!r}"
                break
    return hits


def clean_rows(rows: List[Dict], drop_urls: bool = True, drop_cjk: bool = True,
               fields: Optional[Sequence[str]] = None, source: str = "rows",
               examples: int = 3):
    """(kept rows, counts, examples). Counts: ``rows``, ``kept``, ``dropped``, ``url``,
    ``cjk`` (rows matching each check), ``both``."""
    checks = [c for c, on in (("url", drop_urls), ("cjk", drop_cjk)) if on]
    if not checks:
        raise DataError("nothing to clean: give --drop-urls and/or --drop-cjk")
    kept: List[Dict] = []
    counts = {"rows": len(rows), "kept": 0, "dropped": 0, "url": 0, "cjk": 0, "both": 0}
    shown: Dict[str, List[str]] = {c: [] for c in checks}
    for i, row in enumerate(rows, 1):
        for f in fields or ():
            if f not in row:
                raise DataError(f"{source}: row {i} has no field '{f}'; its fields are: "
                                f"{', '.join(sorted(row))}")
        hits = find_reasons(row, checks, fields)
        if not hits:
            kept.append(row)
            continue
        counts["dropped"] += 1
        counts["both"] += len(hits) == 2
        for reason, what in hits.items():
            counts[reason] += 1
            if len(shown[reason]) < examples:
                shown[reason].append(f"row {i} {what}")
    counts["kept"] = len(kept)
    return kept, counts, shown


def clean_file(src, dst, drop_urls: bool = True, drop_cjk: bool = True,
               fields: Optional[Sequence[str]] = None, length=None,
               length_field: str = "response", chunk: int = 512):
    """Stream ``src`` (JSONL/JSON/parquet) in chunks of ``chunk`` rows, write the kept rows to
    ``dst`` (JSONL, atomically); returns (counts, examples). ``length`` (a
    :class:`mindrl.data.tools.LengthFilter`) also drops rows whose ``length_field`` chain of
    thought is out of its bounds (counts ``cot_too_short``, ``cot_too_long``)."""
    from mindrl.data.fields import FieldMissing, get_field  # noqa: PLC0415
    from mindrl.data.io import iter_rows, where  # noqa: PLC0415
    from mindrl.data.tools import TokenCounter, write_jsonl  # noqa: PLC0415

    use_length = length is not None and length.active
    if not (drop_urls or drop_cjk or use_length):
        raise DataError("nothing to clean: give --drop-urls, --drop-cjk and/or a "
                        "--cot-longer-than / --cot-shorter-than bound")
    counter = TokenCounter(length.tokenizer) if use_length else None
    counts = {"rows": 0, "kept": 0, "dropped": 0, "url": 0, "cjk": 0, "both": 0,
              "cot_too_short": 0, "cot_too_long": 0}
    shown: Dict[str, List[str]] = {}

    def batches():
        buf = []
        for pos, row in iter_rows(src):
            buf.append((pos, row))
            if len(buf) >= chunk:
                yield buf
                buf = []
        if buf:
            yield buf

    def kept_rows():
        for buf in batches():
            rows = [r for _, r in buf]
            if drop_urls or drop_cjk:
                kept, c, ex = clean_rows(rows, drop_urls, drop_cjk, fields, source=str(src))
                for k in ("url", "cjk", "both", "dropped"):
                    counts[k] += c[k]
                for k, items in ex.items():
                    shown.setdefault(k, [])
                    shown[k] += items[:max(0, 3 - len(shown[k]))]
                keep_ids = {id(r) for r in kept}
                buf = [(p, r) for p, r in buf if id(r) in keep_ids]
            counts["rows"] += len(rows)
            if use_length:
                texts = []
                for pos, row in buf:
                    try:
                        texts.append(str(get_field(row, length_field)))
                    except FieldMissing as e:
                        raise DataError(f"{where(src, pos)}: --length-field {length_field}: "
                                        f"{e}") from None
                verdict = length.keep(texts, counter)
                out = []
                for (pos, row), (ok, n) in zip(buf, verdict):
                    if ok:
                        out.append((pos, row))
                    else:
                        counts["dropped"] += 1
                        counts["cot_too_short" if n <= length.longer_than else "cot_too_long"] += 1
                buf = out
            counts["kept"] += len(buf)
            yield from (r for _, r in buf)

    write_jsonl(kept_rows(), dst)
    return counts, shown


def _clean_command(args: argparse.Namespace) -> int:
    from mindrl.data.tools import length_filter  # noqa: PLC0415

    fields = [f.strip() for x in args.field or [] for f in x.split(",") if f.strip()]
    try:
        counts, shown = clean_file(args.input, args.output, args.drop_urls, args.drop_cjk,
                                   fields or None, length=length_filter(args),
                                   length_field=args.length_field)
    except DataError as e:
        import sys  # noqa: PLC0415

        print(f"mindrl data clean: error: {e}", file=sys.stderr)
        return 2
    print(f"data clean: {counts['kept']} of {counts['rows']} rows kept -> {args.output}")
    print(f"  dropped {counts['dropped']}: web link {counts['url']}, CJK text {counts['cjk']} "
          f"(both {counts['both']}), chain of thought too short {counts['cot_too_short']}, "
          f"too long {counts['cot_too_long']}")
    for reason, items in shown.items():
        for s in items:
            print(f"  e.g. [{reason}] {s}")
    return 0


def add_clean_parser(sub) -> argparse.ArgumentParser:
    """Add ``data clean`` to the ``mindrl data`` subparsers."""
    c = sub.add_parser("clean", help="drop rows containing web links and/or CJK (Chinese) text",
                       description=__doc__.split("\n\n")[0],
                       formatter_class=DefaultsHelpFormatter)
    c.add_argument("input", metavar="IN", help="JSONL / JSON / parquet file of rows")
    c.add_argument("output", metavar="OUT", help="JSONL file to write (atomically)")
    c.add_argument("--drop-urls", action="store_true", help="drop rows with a web link")
    c.add_argument("--drop-cjk", action="store_true",
                   help="drop rows with Chinese / Japanese / Korean characters")
    c.add_argument("--field", action="append", default=None,
                   help="field(s) to search, repeatable or comma-separated (default: every "
                        "top-level string field)")
    from mindrl.data.tools import length_options  # noqa: PLC0415

    length_options(c)
    c.add_argument("--length-field", default="response",
                   help="field path of the response whose chain of thought --cot-* measure")
    c.set_defaults(func=_clean_command)
    return c

