"""Training prompt sets: built-in names, generated sets, or any JSONL/parquet path.

:func:`load_prompts` returns rows with at least ``problem`` and ``answer`` (normalised like the
benchmark answers) plus every original column, so rewards that need more (Countdown's ``nums``
and ``target``) find it under its own name. Other modules may register more sets in
:data:`PROMPT_SETS`: a callable ``(data_dir, max_rows, prompt_field, answer_field) -> rows``.

Generated sets (:data:`PROMPT_GENERATORS`) are seeded and need no data file. Their spec is
``name:gen`` or ``name:key=value,key=value`` (``gen`` may lead the options; a bare ``kk``
means ``kk:gen``):

``countdown:count=10000,numbers=3-4,max_number=99,max_target=100,seed=0,offset=0``
    Mini-R1 / TinyZero Countdown, solvable by construction (``rewards.countdown``). Columns
    ``nums``, ``target`` (what ``countdown_equation`` reads), ``solution`` (one equation that
    works), ``answer`` (the target). Score with ``countdown_format`` + ``countdown_equation``.
``kk:count=5000,people=3-7,seed=0,offset=0``
    Logic-RL Knights and Knaves with a unique solution (``rewards.knights_knaves``). Columns
    ``names`` and ``solution`` (roles aligned with ``names``: what ``kk_answer`` reads),
    ``answer`` (Logic-RL's "(1) Zoey is a knave\\n(2) ..." text), ``quiz``, ``n_people``. Score
    with ``kk_format`` + ``kk_answer``.

``offset`` skips the first rows of the seeded stream, so ``count=2000`` for training and
``count=200,offset=2000`` for validation never share a problem index (different seeds are
independent draws, which may coincide on small problem spaces). ``data.max_train_samples``
caps ``count``. The problem text carries the answer-format instruction (Mini-R1's user prompt;
Logic-RL's system prompt, moved into the problem so any chat template works).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from mindrl.data.benchmarks import gsm8k_final_answer, normalize_gold
from mindrl.data.location import candidate_dirs, find_data_file
from mindrl.data.io import DataError, read_rows, where
from mindrl.registry import Registry

Row = Dict[str, Any]
PROMPT_SETS: Registry = Registry("prompt set")


def _builtin(name: str, filename: str, problem_field: str, answer_field: str,
             answer_fn: Callable[[Any], str] = normalize_gold,
             extra: Optional[Callable[[Row], Row]] = None):
    def load(data_dir, max_rows: int = 0, prompt_field: str = "", answer_field_: str = ""):
        path = find_data_file(filename, data_dir, fetch_name=name)
        raw = read_rows(path, max_rows=max_rows or None)
        return _map(raw, path, prompt_field or problem_field, answer_field_ or answer_field,
                    answer_fn, extra)
    load.filename = filename
    return load


def countdown_problem(nums: Sequence[int], target: int) -> str:
    """Mini-R1's Countdown user prompt. Departure: its example answer ``(1 + 2) / 3 = 1`` is
    shown without ``= 1``, since ``countdown_equation`` (like Mini-R1's own reward) scores only a
    bare equation."""
    return (f"Using the numbers {list(nums)}, create an equation that equals {target}. You can "
            f"use basic arithmetic operations (+, -, *, /) and each number can only be used once. "
            f"Show your work in <think> </think> tags. And return the final equation in "
            f"<answer> </answer> tags, for example <answer> (1 + 2) / 3 </answer>.")


def kk_problem(quiz: str) -> str:
    """A Knights-and-Knaves quiz followed by Logic-RL's answer-format instruction."""
    return (f"{quiz}\n\nThink it through in <think> </think> tags, then clearly state the "
            f"identity of each character within <answer> </answer> tags, i.e., "
            f"<answer> (1) Zoey is a knight\n(2) ... </answer>.")


def countdown_columns(row: Row) -> Row:
    """Countdown rows ``{"input": "30,100,93", "output": "23"}``: add ``nums`` and ``target``
    (the columns ``countdown_equation`` reads) and the Mini-R1 problem statement."""
    nums = [int(x) for x in str(row["input"]).split(",") if x.strip()]
    target = int(float(row["output"]))
    return {"nums": nums, "target": target, "problem": countdown_problem(nums, target)}


PROMPT_SETS.register("gsm8k", _builtin("gsm8k_train", "train/gsm8k_train.openai.jsonl", "question", "answer",
                                       answer_fn=gsm8k_final_answer))
PROMPT_SETS.register("gsm8k_test", _builtin("gsm8k", "eval/gsm8k_test.openai.jsonl", "question", "answer",
                                            answer_fn=gsm8k_final_answer))
PROMPT_SETS.register("math_l3to5", _builtin(
    "math_l3to5", "train/simplelr_qwen_level3to5_train.simplerl_pr57.jsonl", "question", "gt_answer"))
PROMPT_SETS.register("countdown", _builtin("countdown", "tasks/countdown_cd3_test.d1.jsonl", "input", "output",
                                           extra=countdown_columns))


def _map(raw: List[Row], path, pf: str, af: str, answer_fn, extra) -> List[Row]:
    if not raw:
        raise DataError(f"{path}: no rows")
    out = []
    for i, r in enumerate(raw, 1):
        for f, what in ((pf, "prompt"), (af, "answer")):
            if f not in r:
                raise DataError(f"{where(path, i)}: no {what} field '{f}'; its fields are: "
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


# ------------------------------------------------------------------------ generated sets
@dataclass(frozen=True)
class PromptGenerator:
    """A seeded prompt set: ``build(options) -> rows`` with ``options`` = ``defaults`` updated
    by the spec (all values strings, as written)."""

    name: str
    build: Callable[[Dict[str, str]], List[Row]]
    defaults: Dict[str, str]
    help: str = ""


PROMPT_GENERATORS: Registry = Registry("prompt generator")


def parse_prompt_spec(spec: str) -> Tuple[str, Dict[str, str]]:
    """``"kk:gen,count=10,people=3"`` -> ``("kk", {"count": "10", "people": "3"})``; the bare
    word ``gen`` is allowed (and ignored) among the options.

    >>> parse_prompt_spec("countdown:count=5,numbers=3")
    ('countdown', {'count': '5', 'numbers': '3'})
    """
    name, _, rest = spec.partition(":")
    opts: Dict[str, str] = {}
    for item in filter(None, (x.strip() for x in rest.split(","))):
        if item == "gen":
            continue
        if "=" not in item:
            raise DataError(f"prompt set '{spec}': option '{item}' must look like key=value")
        k, v = item.split("=", 1)
        opts[k.strip()] = v.strip()
    return name.strip(), opts


def _int_opt(spec: str, opts: Dict[str, str], key: str, lo: int = 0) -> int:
    try:
        v = int(opts[key])
    except ValueError:
        raise DataError(f"prompt set '{spec}': {key}={opts[key]!r} is not an integer") from None
    if v < lo:
        raise DataError(f"prompt set '{spec}': {key}={v} must be >= {lo}")
    return v


def _range_opt(spec: str, opts: Dict[str, str], key: str, lo: int, hi: int) -> List[int]:
    """``"3"`` -> [3]; ``"3-5"`` -> [3, 4, 5]; each within [lo, hi]."""
    text = opts[key]
    a, sep, b = text.partition("-")
    try:
        first, last = int(a), int(b) if sep else int(a)
    except ValueError:
        raise DataError(f"prompt set '{spec}': {key}={text!r} must be N or A-B") from None
    if not lo <= first <= last <= hi:
        raise DataError(f"prompt set '{spec}': {key}={text!r} must lie within {lo}-{hi} "
                        f"(and A <= B)")
    return list(range(first, last + 1))


def generate_prompts(spec: str, max_rows: int = 0) -> List[Row]:
    """Rows of a generated set (see the module docstring for the spec)."""
    name, opts = parse_prompt_spec(spec)
    gen: PromptGenerator = PROMPT_GENERATORS.get(name)
    unknown = sorted(set(opts) - set(gen.defaults))
    if unknown:
        raise DataError(f"prompt set '{spec}': unknown option(s) {', '.join(unknown)}; valid: "
                        f"{', '.join(sorted(gen.defaults))}")
    full = {**gen.defaults, **opts}
    if max_rows and max_rows < int(full["count"]):
        full["count"] = str(max_rows)
    full["spec"] = spec
    return gen.build(full)


def _countdown_rows(o: Dict[str, str]) -> List[Row]:
    from rewards.countdown import generate_countdown  # noqa: PLC0415

    spec = o["spec"]
    count, offset = _int_opt(spec, o, "count", 1), _int_opt(spec, o, "offset")
    numbers = _range_opt(spec, o, "numbers", 2, 6)
    max_target = _int_opt(spec, o, "max_target", 1)
    raw = generate_countdown(offset + count, seed=_int_opt(spec, o, "seed"), n_numbers=numbers,
                             max_number=_int_opt(spec, o, "max_number", 1),
                             target_range=(1, max_target))[offset:]
    return [{"problem": countdown_problem(r["nums"], r["target"]), "answer": str(r["target"]),
             "nums": r["nums"], "target": r["target"], "solution": r["solution"]} for r in raw]


def _kk_rows(o: Dict[str, str]) -> List[Row]:
    from rewards.knights_knaves import generate_puzzles  # noqa: PLC0415

    spec = o["spec"]
    count, offset = _int_opt(spec, o, "count", 1), _int_opt(spec, o, "offset")
    raw = generate_puzzles(offset + count, n_people=_range_opt(spec, o, "people", 2, 8),
                           seed=_int_opt(spec, o, "seed"))[offset:]
    return [{"problem": kk_problem(r["quiz"]), "answer": r["solution_text"],
             "names": r["names"], "solution": r["solution"], "quiz": r["quiz"],
             "n_people": len(r["names"])} for r in raw]


PROMPT_GENERATORS.register("countdown", PromptGenerator(
    "countdown", _countdown_rows,
    {"count": "10000", "numbers": "3-4", "max_number": "99", "max_target": "100", "seed": "0",
     "offset": "0"},
    "Countdown (Mini-R1): reach the target with the numbers; countdown_format + "
    "countdown_equation"))
PROMPT_GENERATORS.register("kk", PromptGenerator(
    "kk", _kk_rows, {"count": "5000", "people": "3-7", "seed": "0", "offset": "0"},
    "Knights and Knaves (Logic-RL); kk_format + kk_answer"))


def _is_generator_spec(spec: str) -> bool:
    name, sep, _ = spec.partition(":")
    return (bool(sep) and name in PROMPT_GENERATORS) or \
        (spec in PROMPT_GENERATORS and spec not in PROMPT_SETS)


# ------------------------------------------------------------------------ the entry point
def load_prompts(spec: str, data_dir=None, prompt_field: str = "", answer_field: str = "",
                 max_rows: int = 0, **options) -> List[Row]:
    """Training prompts as rows with ``problem``, ``answer`` and all original columns.

    ``spec``: a registered name (``gsm8k``, ``math_l3to5``, ``countdown``, ...), a generated set
    (``countdown:gen``, ``kk:count=1000,people=3``; see the module docstring) or a path to a
    ``.jsonl``/``.json``/``.parquet`` file. ``data_dir`` holds the built-in files (default
    ``../shared/data``). Empty field names mean the set's default; files go through
    :func:`mindrl.data.formats.load_file` (format detected from the columns; field paths such as
    ``reward_model.ground_truth``; ``options``: ``id_field``, ``fmt``, ``templated``, ``job``).
    ``max_rows`` > 0 keeps the first rows. Generated sets ignore the field names.
    """
    return load_prompt_source(spec, data_dir, prompt_field, answer_field, max_rows,
                              **options)[1]


def load_prompt_source(spec: str, data_dir=None, prompt_field: str = "", answer_field: str = "",
                       max_rows: int = 0, id_field: str = "", fmt: str = "auto",
                       templated: str = "auto", job: str = "rl",
                       fields: Optional[Dict[str, str]] = None):
    """``(plan or None, rows)``: :func:`load_prompts` with the file's mapping (None for
    built-in and generated sets)."""
    if not spec:
        raise DataError("no prompt set given (data.train_file is empty)")
    if _is_generator_spec(spec):
        return None, generate_prompts(spec, max_rows or 0)
    if spec in PROMPT_SETS:
        return None, PROMPT_SETS.get(spec)(data_dir, max_rows, prompt_field, answer_field)
    path = resolve_file(spec, data_dir)
    from mindrl.data.formats import load_file  # noqa: PLC0415

    roles = dict(fields or {})
    roles.update({k: v for k, v in (("problem", prompt_field), ("answer", answer_field),
                                    ("id", id_field)) if v})
    return load_file(path, job, fmt or "auto", roles, max_rows, templated)


def resolve_file(spec: str, data_dir=None) -> Path:
    """A data file path from a spec: as given, else relative to ``data_dir``."""
    path = Path(spec).expanduser()
    if path.suffix.lower() not in (".jsonl", ".json", ".parquet", ".ndjson"):
        gens = ", ".join(f"{g}:gen" for g in PROMPT_GENERATORS.names())
        raise DataError(f"unknown prompt set '{spec}'; valid names: "
                        f"{', '.join(PROMPT_SETS.names())} (or a generator: {gens}; or a "
                        f".jsonl/.json/.parquet path)")
    if not path.is_absolute() and not path.exists():
        for d in candidate_dirs(data_dir):
            if (d / path).exists():
                return d / path
    return path
