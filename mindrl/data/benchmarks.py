"""Evaluation benchmarks as uniform rows ``{"id", "problem", "answer"}``.

Three kinds of benchmark spec:

* a built-in name (:data:`BENCHMARKS`): ``math500``, ``aime24``, ``aime25``, ``amc23``, ``gsm8k``,
  read from the data directory's ``eval/`` folder (:mod:`mindrl.data.location`: ``--data-dir``,
  ``$MINDRL_DATA_DIR``, the user cache that ``mindrl data fetch`` fills);
* a local ``.jsonl`` / ``.json`` / ``.parquet`` file, with a field mapping;
* a Hugging Face dataset ``hf:owner/name[:config][@split]`` (needs ``datasets``; imported lazily).

Gold answers are normalised per file so that graders compare like with like:

* AIME 2024 zero-padded strings: ``"025" -> "25"``;
* AMC 2023 floats: ``27.0 -> "27"``;
* GSM8K rationales: the final number after ``"#### "``, thousands commas stripped;
* AIME 2025 prompts end with a fixed instruction line, stripped so the chat template decides the
  instruction (it would otherwise appear twice under ``qwen25-math-cot``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence

# Answer normalisation lives in mindrl.data.answers (below the file formats); re-exported here.
from mindrl.data.answers import (BOXED_SUFFIX, gsm8k_final_answer,  # noqa: F401
                                 normalize_gold, number_to_str, strip_suffix_line)
from mindrl.data.io import DataError, read_rows
from mindrl.registry import Registry

from mindrl.data.location import REPO_ROOT, data_root, find_data_file  # noqa: F401

PROBLEM_FIELDS = ("problem", "question", "prompt", "input", "query")
ANSWER_FIELDS = ("answer", "gt_answer", "final_answer", "target", "output")
ID_FIELDS = ("unique_id", "id", "idx", "problem_id")

Row = Dict[str, Any]


# ---------------------------------------------------------------- built-in benchmarks
@dataclass(frozen=True)
class BenchmarkSpec:
    """Where a built-in benchmark lives and how its fields map onto id / problem / answer."""

    name: str
    filename: str                     # inside the eval data directory
    problem_field: str
    answer_field: str
    id_field: Optional[str]           # None: the 0-based row index
    rows: int                         # expected row count (checked, warns on mismatch)
    answer_fn: Callable[[Any], str] = number_to_str
    problem_fn: Callable[[str], str] = str.strip


BENCHMARKS: Registry = Registry("benchmark")
for _spec in (
    BenchmarkSpec("math500", "math500_test.simplerl.jsonl", "problem", "answer", "unique_id", 500,
                  answer_fn=lambda a: str(a).strip()),
    BenchmarkSpec("aime24", "aime24_test.simplerl.jsonl", "problem", "answer", "id", 30),
    BenchmarkSpec("aime25", "aime25.qwq.jsonl", "prompt", "answer", None, 30,
                  problem_fn=strip_suffix_line),
    BenchmarkSpec("amc23", "amc23_test.simplerl.jsonl", "problem", "answer", "id", 40),
    BenchmarkSpec("gsm8k", "gsm8k_test.openai.jsonl", "question", "answer", None, 1319,
                  answer_fn=gsm8k_final_answer),
):
    BENCHMARKS.register(_spec.name, _spec)


def resolve_data_dir(data_dir=None, sub: str = "eval") -> Path:
    """The data directory (:func:`mindrl.data.location.data_root`) joined with ``sub``; a
    directory given explicitly is returned as it is."""
    if data_dir not in (None, ""):
        return data_root(data_dir)
    return data_root() / sub


def is_builtin(spec: str) -> bool:
    return spec in BENCHMARKS


def split_benchmarks(text: str) -> List[str]:
    """A comma-separated benchmark list, where a generated task spec keeps its own commas:
    a piece ``key=value`` (no ``:`` and no path) continues the spec before it.

    >>> split_benchmarks("math500, arithmetic:digits=2,ops=+ ,gsm8k")
    ['math500', 'arithmetic:digits=2,ops=+', 'gsm8k']
    """
    out: List[str] = []
    for piece in (p.strip() for p in text.split(",")):
        if not piece:
            continue
        option = "=" in piece and ":" not in piece and "/" not in piece
        if option and out and ":" in out[-1]:
            out[-1] += "," + piece
        else:
            out.append(piece)
    return out


def benchmark_name(spec: str) -> str:
    """Short name used in outputs: the built-in name, a file's stem, or the HF dataset id."""
    if is_builtin(spec):
        return spec
    if spec.startswith("hf:"):
        return spec[3:].replace("/", "_").replace(":", "_").replace("@", "_")
    if _looks_like_file(spec):
        return Path(spec).stem
    return spec


def _looks_like_file(spec: str) -> bool:
    return Path(spec).suffix.lower() in (".jsonl", ".json", ".parquet", ".ndjson") \
        or os.sep in spec or Path(spec).exists()


def load_benchmark(spec: str, data_dir=None, *, problem_field: Optional[str] = None,
                   answer_field: Optional[str] = None, id_field: Optional[str] = None,
                   limit: Optional[int] = None, fmt: Optional[str] = None) -> List[Row]:
    """Rows ``{"id": str, "problem": str, "answer": str}`` of one benchmark, in file order.

    ``limit`` keeps the first ``limit`` problems. Field arguments (paths such as
    ``reward_model.ground_truth``; ``id_field`` may join columns: ``year,contest,number``) and
    ``fmt`` (a :mod:`mindrl.data.formats` name) apply to local files and HF datasets (built-ins
    know their fields). Gold answers that the math grader cannot parse stop the load
    (:func:`mindrl.data.preflight.check_golds`). Raises :class:`DataError` naming the file, the
    1-based line or row and the field.
    """
    if is_builtin(spec):
        b: BenchmarkSpec = BENCHMARKS.get(spec)
        path = find_data_file(f"eval/{b.filename}", data_dir, fetch_name=spec)
        raw = read_rows(path)
        if not limit and len(raw) != b.rows:
            import warnings  # noqa: PLC0415

            warnings.warn(f"{path}: {len(raw)} rows, expected {b.rows} for {spec}")
        raw = raw[:limit] if limit else raw
        rows = []
        for i, r in enumerate(raw):
            for f in (b.problem_field, b.answer_field) + ((b.id_field,) if b.id_field else ()):
                if f not in r:
                    raise DataError(f"{path}: line {i + 1}: no field '{f}' (needed by benchmark "
                                    f"{spec}); its fields are: {', '.join(sorted(r))}")
            rows.append({"id": str(r[b.id_field]) if b.id_field else str(i),
                         "problem": b.problem_fn(str(r[b.problem_field])),
                         "answer": b.answer_fn(r[b.answer_field])})
        return _check_ids(rows, path)
    fields = {"problem": problem_field or "", "answer": answer_field or "",
              "id": id_field or ""}
    if spec.startswith("hf:"):
        return map_rows(_load_hf(spec[3:], limit), spec, problem_field=problem_field,
                        answer_field=answer_field, id_field=id_field, fmt=fmt)
    if not _looks_like_file(spec):
        raise DataError(f"unknown benchmark '{spec}'; valid names: {', '.join(BENCHMARKS.names())}"
                        f" (or a .jsonl/.json/.parquet path, hf:owner/name[:config][@split], or "
                        f"a generated task such as arithmetic:digits=2,ops=+)")
    from mindrl.data.formats import load_file  # noqa: PLC0415
    from mindrl.data.preflight import check_golds  # noqa: PLC0415

    path = Path(spec).expanduser()
    plan, rows = load_file(path, "eval", fmt or "auto", fields, limit or 0)
    check_golds(rows, plan)
    return _check_ids(_eval_rows(rows), path)


def _eval_rows(rows: Sequence[Row]) -> List[Row]:
    return [{"id": str(r["id"]), "problem": r["problem"], "answer": r["answer"]} for r in rows]


def map_rows(raw: Sequence[Row], where, *, problem_field=None, answer_field=None,
             id_field=None, fmt=None) -> List[Row]:
    """Apply a field mapping (paths as in :mod:`mindrl.data.fields`; empty = the format's
    default) to rows already in memory (a Hugging Face split)."""
    from mindrl.data.formats import plan as make_plan  # noqa: PLC0415
    from mindrl.data.preflight import check_golds  # noqa: PLC0415

    if not raw:
        raise DataError(f"{where}: no rows")
    p = make_plan(raw[0], "eval", str(where), fmt or "auto",
                  {"problem": problem_field or "", "answer": answer_field or "",
                   "id": id_field or ""})
    rows = [p.map(r, i + 1, i) for i, r in enumerate(raw)]
    check_golds(rows, p)
    return _check_ids(_eval_rows(rows), where)


def _check_ids(rows: List[Row], where) -> List[Row]:
    seen = set()
    for r in rows:
        if r["id"] in seen:
            raise DataError(f"{where}: duplicate problem id '{r['id']}' (pass an id field that "
                            f"is unique, or none to use row numbers)")
        seen.add(r["id"])
    return rows


def _load_hf(dataset: str, limit: Optional[int]) -> List[Row]:
    try:
        import datasets  # noqa: PLC0415 (optional dependency)
    except ImportError:
        raise DataError(f"benchmark 'hf:{dataset}' needs the Hugging Face `datasets` package "
                        f"(`pip install datasets`), which is not installed; or download the "
                        f"file and pass its local path") from None
    name, _, split = dataset.partition("@")
    repo, _, config = name.partition(":")
    ds = datasets.load_dataset(repo, config or None, split=split or "test")
    if limit:
        ds = ds.select(range(min(limit, len(ds))))
    return [dict(r) for r in ds]
