"""Training data built from an evaluation run's ``samples.jsonl``.

``mindrl eval`` writes one record per sample (``benchmark``, ``problem_id``, ``sample_index``,
``text``, ``score``, ``length`` in tokens, ``finish_reason`` "stop"|"length", ...). The problem
text and gold answer are not in the records; they are read back from the benchmarks named in the
run's ``settings.json`` (or from ``problems=``). Three curations, each a pure function of the
samples that may also write its rows to JSONL (atomically: a temporary file, then a rename):

``filter_by_difficulty``
    Per-problem pass rate p = mean score over its samples; keep ``lo <= p <= hi``. Dropping the
    always-solved (p = 1) and never-solved (p = 0) problems is the curation of SimpleRL-Zoo and
    DAPO: under group-relative advantages such prompts give all-equal rewards and no gradient.
    Rows ``{problem, answer, pass_rate, n, benchmark, problem_id}``: a prompt file for
    ``data.train_file``.
``build_preference_pairs``
    Chosen = a correct sample, rejected = a wrong one of the same problem; each sample used at
    most once, at most ``max_pairs_per_problem`` pairs (0 = no cap). Without ``prefer_shorter``
    both sides are shuffled by a per-problem RNG seeded from ``(seed, benchmark, problem_id)``
    (so the pairs of a problem do not depend on the other problems); with it the shortest correct
    samples are chosen. Rows are the prompt/chosen/rejected format of TRL's ``DPOTrainer``
    ("standard" format: ``prompt`` is the raw problem, ``chosen``/``rejected`` the completions
    only), plus ``problem``, ``answer`` and provenance (``benchmark``, ``problem_id``,
    ``chosen_index``, ``rejected_index``, ``chosen_length``, ``rejected_length``). Render the
    prompt with the chat template the samples were generated under (``settings.json``:
    ``generation.template``).
``build_rejection_sampling_set``
    Correct samples only (rejection-sampling fine-tuning, Yuan et al. 2023, RFT), optionally
    without truncated ones and without duplicates (texts equal after collapsing whitespace), at
    most ``max_per_problem`` per problem (0 = no cap), in sample order. Rows
    ``{problem, response, answer, benchmark, problem_id, sample_index, length}``: an SFT file
    for ``data.train_file`` with ``data.response_field=response``.

Scores: 1.0 is correct, 0.0 wrong, None ungradeable (a timed-out symbolic check). As in the
eval metrics, None counts as 0 in the pass rate; it is neither chosen, rejected nor kept for SFT.
A sample is truncated when its ``finish_reason`` is ``"length"``.
"""

from __future__ import annotations

import json
import random
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Union

from mindrl.data.io import DataError

SAMPLES_FILE = "samples.jsonl"
SETTINGS_FILE = "settings.json"
REQUIRED_FIELDS = ("benchmark", "problem_id", "sample_index", "text", "score", "length",
                   "finish_reason")

Row = Dict[str, Any]
ProblemKey = Tuple[str, str]          # (benchmark, problem id)


@dataclass
class EvalSamples:
    """The samples of one eval run, grouped by problem, with each problem's text and answer."""

    path: Path                                  # the samples.jsonl read
    groups: "OrderedDict[ProblemKey, List[Row]]"  # problem -> its records by sample_index
    problems: Dict[ProblemKey, Row]             # problem -> {"problem": str, "answer": str}

    def problem_row(self, key: ProblemKey) -> Row:
        return {"problem": self.problems[key]["problem"], "answer": self.problems[key]["answer"]}


@dataclass
class ToolResult:
    """What a curation produced: its rows, counts, and the file written (if any)."""

    rows: List[Row]
    counts: Dict[str, int] = field(default_factory=dict)
    out: Optional[Path] = None

    def summary(self, what: str) -> str:
        """One line: ``'<what>: 12 rows -> out.jsonl (problems=20, kept=12, ...)'``."""
        where = f" -> {self.out}" if self.out else ""
        detail = ", ".join(f"{k}={v}" for k, v in self.counts.items())
        return f"{what}: {len(self.rows)} rows{where} ({detail})"


# --------------------------------------------------------------------------- reading
def _samples_path(source: Union[str, Path]) -> Path:
    p = Path(source).expanduser()
    if p.is_dir():
        p = p / SAMPLES_FILE
    if not p.is_file():
        raise DataError(f"samples file not found: {p} (give an eval run directory or a "
                        f"{SAMPLES_FILE} path)")
    return p


def _read_records(path: Path) -> List[Tuple[int, Row]]:
    lines = path.read_text(encoding="utf-8").splitlines()
    last = max((i for i, ln in enumerate(lines) if ln.strip()), default=-1)
    out = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            if i == last:          # a torn last line: the eval run was interrupted mid-write
                continue
            raise DataError(f"{path}:{i + 1}: not valid JSON ({e.msg})") from None
        if not isinstance(rec, dict):
            raise DataError(f"{path}:{i + 1}: expected a JSON object, got {type(rec).__name__}")
        for name in REQUIRED_FIELDS:
            if name not in rec:
                raise DataError(f"{path}:{i + 1}: sample has no field '{name}'; its fields "
                                f"are: {', '.join(sorted(rec))}")
        score = rec["score"]
        if score is not None and not isinstance(score, (int, float)):
            raise DataError(f"{path}:{i + 1}: field 'score' must be a number or null, "
                            f"got {score!r}")
        out.append((i + 1, rec))
    return out


def _pick_hash(path: Path, records: List[Tuple[int, Row]], run_hash: Optional[str],
               wanted: Optional[str]) -> Optional[str]:
    hashes = sorted({str(r.get("settings_hash")) for _, r in records if "settings_hash" in r})
    if wanted:
        if wanted not in hashes:
            raise DataError(f"{path}: no samples with settings_hash '{wanted}'; present: "
                            f"{', '.join(hashes) or 'none'}")
        return wanted
    if run_hash and run_hash in hashes:
        return run_hash
    if len(hashes) > 1:
        raise DataError(f"{path}: samples of {len(hashes)} different settings "
                        f"({', '.join(hashes)}); choose one with settings_hash")
    return hashes[0] if hashes else None


def _load_problem_rows(specs: Sequence[str], data_dir, fields: Dict[str, Any]
                       ) -> Dict[ProblemKey, Row]:
    from mindrl.data.benchmarks import benchmark_name  # noqa: PLC0415
    from mindrl.data.generated import load_problems as load_benchmark  # noqa: PLC0415

    out: Dict[ProblemKey, Row] = OrderedDict()
    for spec in specs:
        name = benchmark_name(spec)
        for r in load_benchmark(spec, data_dir, problem_field=fields.get("problem_field"),
                                answer_field=fields.get("answer_field"),
                                id_field=fields.get("id_field"), fmt=fields.get("format"),
                                limit=fields.get("limit") or None):
            out[(name, str(r["id"]))] = {"problem": r["problem"], "answer": r["answer"]}
    return out


def load_eval_samples(source: Union[str, Path], problems: Union[str, Sequence[str], None] = None,
                      data_dir: Optional[str] = None, settings_hash: Optional[str] = None,
                      fields: Optional[Dict[str, str]] = None) -> EvalSamples:
    """Read an eval run (its directory or its ``samples.jsonl``) with its problems.

    The problems come from ``problems`` (benchmark specs as ``mindrl eval --benchmarks`` takes
    them: built-in names or files; a comma-separated string or a list), else from the run's
    ``settings.json`` (benchmarks, data_dir and field names). ``data_dir`` overrides the data
    directory. ``fields`` (``problem_field``, ``answer_field``, ``id_field``, ``format``;
    paths as in :mod:`mindrl.data.fields`) override the run's field mapping of the benchmark
    files. When the file holds samples of several settings (a reused output directory), the
    run's own hash is taken, or ``settings_hash``. A record appended later for the same
    (benchmark, problem, sample index) replaces the earlier one (regrading appends).
    """
    path = _samples_path(source)
    settings_file = path.parent / SETTINGS_FILE
    run: Dict[str, Any] = {}
    if settings_file.is_file():
        try:
            run = json.loads(settings_file.read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            raise DataError(f"{settings_file}: not valid JSON ({e.msg})") from None
    records = _read_records(path)
    if not records:
        raise DataError(f"{path}: no samples")
    shash = _pick_hash(path, records, run.get("settings_hash"), settings_hash)

    latest: Dict[Tuple[str, str, int], Row] = {}
    for _, r in records:
        if shash is None or str(r.get("settings_hash")) == shash:
            latest[(str(r["benchmark"]), str(r["problem_id"]), int(r["sample_index"]))] = r

    settings = run.get("settings", {})
    if problems is None:
        if not settings.get("benchmarks"):
            raise DataError(f"{path}: no {SETTINGS_FILE} beside it to say which benchmarks the "
                            f"samples answer; pass problems= (--problems) with their specs")
        problems = settings["benchmarks"]
    from mindrl.data.benchmarks import split_benchmarks  # noqa: PLC0415

    specs = split_benchmarks(problems) if isinstance(problems, str) else list(problems)
    mapping = {**settings, **{k: v for k, v in (fields or {}).items() if v}}
    table = _load_problem_rows(specs, data_dir or settings.get("data_dir"), mapping)

    groups: "OrderedDict[ProblemKey, List[Row]]" = OrderedDict()
    for key in table:                         # problem order: the benchmark files' order
        groups[key] = []
    for (b, pid, _), r in sorted(latest.items(), key=lambda kv: kv[0][2]):
        if (b, pid) not in table:
            raise DataError(f"{path}: sample of benchmark '{b}' problem_id '{pid}' has no "
                            f"problem among {', '.join(specs)} (wrong --problems or "
                            f"--data-dir?)")
        groups[(b, pid)].append(r)
    groups = OrderedDict((k, v) for k, v in groups.items() if v)
    return EvalSamples(path, groups, {k: table[k] for k in groups})


def _as_samples(samples: Union[EvalSamples, str, Path, Sequence]) -> EvalSamples:
    if isinstance(samples, EvalSamples):
        return samples
    if isinstance(samples, (list, tuple)):
        return pool_samples([_as_samples(x) for x in samples])
    return load_eval_samples(samples)


def pool_samples(runs: Sequence[EvalSamples]) -> EvalSamples:
    """Several eval runs of the same problems as one (the seed log pooled the samples of three
    models): each problem's samples are those of every run, in run order; each record gains
    ``run`` (its run's index) and ``run_path``. A problem's text and answer must agree across
    runs (else DataError naming the problem)."""
    if len(runs) == 1:
        return runs[0]
    groups: "OrderedDict[ProblemKey, List[Row]]" = OrderedDict()
    problems: Dict[ProblemKey, Row] = {}
    for i, run in enumerate(runs):
        for key, recs in run.groups.items():
            prob = run.problems[key]
            if key in problems and problems[key]["answer"] != prob["answer"]:
                raise DataError(f"{run.path}: problem {key[0]}/{key[1]} has answer "
                                f"{prob['answer']!r}, but an earlier run has "
                                f"{problems[key]['answer']!r}: pool runs of the same problems")
            problems.setdefault(key, prob)
            groups.setdefault(key, []).extend(
                {**r, "run": i, "run_path": str(run.path)} for r in recs)
    return EvalSamples(runs[0].path, groups, problems)


def cot_text(text: str) -> str:
    """The chain of thought of a response: the text before ``</think>`` (without a leading
    ``<think>``) when the response closes a think block, else the whole response."""
    text = str(text)
    head, sep, _ = text.partition("</think>")
    if not sep:
        return text
    head = head.lstrip()
    return head[len("<think>"):] if head.startswith("<think>") else head


class TokenCounter:
    """Token counts of texts under a named tokenizer (a model directory, a tokenizer.json, or
    builtin:NAME), batched; the tokenizer loads once, on first use."""

    def __init__(self, name: str):
        self.name = name
        self._tok = None

    def _load(self):
        if self._tok is None:
            from mindrl.models.tiny import BUILTIN_PREFIX, resolve_model_path  # noqa: PLC0415

            path = self.name
            if path.startswith(BUILTIN_PREFIX):
                path = resolve_model_path(path)
            p = Path(path).expanduser()
            if p.is_file() and p.suffix == ".json":
                from tokenizers import Tokenizer  # noqa: PLC0415

                tok = Tokenizer.from_file(str(p))
                self._tok = lambda texts: [len(e.ids) for e in
                                           tok.encode_batch(texts, add_special_tokens=False)]
            else:
                if not p.is_dir():
                    raise DataError(f"--tokenizer: '{self.name}' is not a model directory, a "
                                    "tokenizer.json or builtin:NAME")
                from transformers import AutoTokenizer  # noqa: PLC0415

                tok = AutoTokenizer.from_pretrained(str(p))
                self._tok = lambda texts: [len(x) for x in
                                           tok(texts, add_special_tokens=False)["input_ids"]]
        return self._tok

    def __call__(self, texts: Sequence[str]) -> List[int]:
        return self._load()(list(texts)) if texts else []


@dataclass(frozen=True)
class LengthFilter:
    """Keep a response when its chain of thought (:func:`cot_text`) has more than
    ``longer_than`` and fewer than ``shorter_than`` tokens of ``tokenizer`` (0 = no bound)."""

    tokenizer: str
    longer_than: int = 0
    shorter_than: int = 0

    def __post_init__(self):
        if self.longer_than < 0 or self.shorter_than < 0:
            raise DataError("--cot-longer-than / --cot-shorter-than must be >= 0")
        if self.shorter_than and self.shorter_than <= self.longer_than + 1:
            raise DataError(f"--cot-shorter-than {self.shorter_than} leaves no length above "
                            f"--cot-longer-than {self.longer_than}")

    @property
    def active(self) -> bool:
        return bool(self.longer_than or self.shorter_than)

    def keep(self, texts: Sequence[str], counter: TokenCounter) -> List[Tuple[bool, int]]:
        out = []
        for n in counter([cot_text(t) for t in texts]):
            ok = n > self.longer_than and (not self.shorter_than or n < self.shorter_than)
            out.append((ok, n))
        return out


def filter_lengths(samples: EvalSamples, lf: Optional[LengthFilter]
                   ) -> Tuple[EvalSamples, Dict[str, int]]:
    """The samples whose chain of thought passes ``lf``; counts ``cot_too_short``,
    ``cot_too_long`` (none when ``lf`` is None or has no bound). Each kept record gains
    ``cot_tokens``."""
    if lf is None or not lf.active:
        return samples, {}
    counter = TokenCounter(lf.tokenizer)
    groups: "OrderedDict[ProblemKey, List[Row]]" = OrderedDict()
    short = long_ = 0
    for key, recs in samples.groups.items():
        kept = []
        for r, (ok, n) in zip(recs, lf.keep([r["text"] for r in recs], counter)):
            if ok:
                kept.append({**r, "cot_tokens": n})
            elif n <= lf.longer_than:
                short += 1
            else:
                long_ += 1
        if kept:
            groups[key] = kept
    return (EvalSamples(samples.path, groups, {k: samples.problems[k] for k in groups}),
            {"cot_too_short": short, "cot_too_long": long_})


def pass_rate(recs: Sequence[Row]) -> float:
    """Mean score of a problem's samples (None, ungradeable, counts as 0)."""
    return sum(float(r["score"] or 0.0) for r in recs) / len(recs)


def _in_bounds(rate: float, lo: Optional[float], hi: Optional[float], inclusive: bool) -> bool:
    if inclusive:
        return (lo is None or rate >= lo) and (hi is None or rate <= hi)
    return (lo is None or rate > lo) and (hi is None or rate < hi)


# --------------------------------------------------------------------------- writing
def write_jsonl(rows: Iterable[Row], out: Union[str, Path]) -> Path:
    """Write rows as JSONL atomically (a temporary file in the same directory, then rename)."""
    from mindrl.jsonl import rewrite_jsonl  # noqa: PLC0415

    return rewrite_jsonl(Path(out).expanduser(), rows)


def _finish(rows: List[Row], counts: Dict[str, int], out) -> ToolResult:
    return ToolResult(rows, counts, write_jsonl(rows, out) if out is not None else None)


def _is_correct(r: Row) -> bool:
    return r["score"] is not None and r["score"] >= 1.0


def _is_wrong(r: Row) -> bool:
    return r["score"] is not None and r["score"] <= 0.0


def _is_truncated(r: Row) -> bool:
    return r["finish_reason"] == "length"


def normalize_text(text: str) -> str:
    """The dedupe key: whitespace runs collapsed to one space, ends stripped."""
    return " ".join(str(text).split())


# --------------------------------------------------------------------------- curations
def filter_by_difficulty(samples: Union[EvalSamples, str, Path], lo: float, hi: float,
                         out: Union[str, Path, None] = None) -> ToolResult:
    """Problems whose pass rate p (mean score, None = 0) satisfies ``lo <= p <= hi``.

    Counts: ``problems``, ``kept``, ``too_easy`` (p > hi), ``too_hard`` (p < lo).
    """
    if not 0.0 <= lo <= hi <= 1.0:
        raise ValueError(f"need 0 <= lo <= hi <= 1, got lo={lo}, hi={hi}")
    s = _as_samples(samples)
    rows, easy, hard = [], 0, 0
    for key, recs in s.groups.items():
        rate = pass_rate(recs)
        if rate > hi:
            easy += 1
        elif rate < lo:
            hard += 1
        else:
            rows.append({**s.problem_row(key), "pass_rate": rate, "n": len(recs),
                         "benchmark": key[0], "problem_id": key[1]})
    return _finish(rows, {"problems": len(s.groups), "kept": len(rows), "too_easy": easy,
                          "too_hard": hard}, out)


def build_preference_pairs(samples: Union[EvalSamples, str, Path], max_pairs_per_problem: int = 1,
                           seed: int = 0, prefer_shorter: bool = False,
                           drop_truncated: bool = True, out: Union[str, Path, None] = None,
                           solved_pairs: int = 2, pair_format: str = "standard"
                           ) -> ToolResult:
    """(correct, wrong) pairs per problem; see the module docstring for the row format.

    ``drop_truncated`` removes truncated samples from both sides (a cut-off response is neither
    a finished answer to imitate nor a fair one to reject).

    ``solved_pairs`` = k > 0 adds the seed log's rule for problems every sample solves (no
    wrong side): the k shortest correct samples (chosen) against the k longest (rejected), all
    k x k combinations (k = 2: 4 pairs), taking k down to half the correct samples when fewer
    than 2k, and never a pair of equal lengths. Those rows have ``pair_type`` "short_vs_long";
    the others "correct_vs_wrong".

    ``pair_format``: ``standard`` (prompt/chosen/rejected) or ``pairwise`` (the seed log's
    ``id, prompt, completion_1, completion_2, preferred``, ``preferred`` naming the chosen
    column, ``"completion_1"`` or ``"completion_2"``, as the log's format does; which side is
    completion_1 is drawn per pair from the seeded per-problem RNG). Both keep the provenance
    fields. Readers accept ``preferred`` as the column name or as 1 / 2.

    Counts: ``problems``, ``problems_paired``, ``pairs``, ``no_correct``, ``no_wrong``
    (problems lacking a side), ``solved_problems`` (every sample correct: paired by length, no
    pair when all lengths are equal), ``solved_pairs``, ``dropped_truncated``.
    """
    if pair_format not in ("standard", "pairwise"):
        raise ValueError(f"pair_format must be standard or pairwise, got {pair_format!r}")
    if solved_pairs < 0:
        raise ValueError(f"solved_pairs={solved_pairs} must be >= 0 (0 = off)")
    if max_pairs_per_problem < 0:
        raise ValueError(f"max_pairs_per_problem={max_pairs_per_problem} must be >= 0 "
                         f"(0 = no cap)")
    s = _as_samples(samples)
    rows: List[Row] = []
    paired = no_correct = no_wrong = truncated = solved = solved_rows = 0
    for key, recs in s.groups.items():
        all_correct = bool(recs) and all(_is_correct(r) for r in recs)
        if drop_truncated:
            truncated += sum(_is_truncated(r) for r in recs)
            recs = [r for r in recs if not _is_truncated(r)]
        good = [r for r in recs if _is_correct(r)]
        bad = [r for r in recs if _is_wrong(r)]
        no_correct += not good
        no_wrong += not bad
        rng = random.Random(f"pairs-{seed}-{key[0]}-{key[1]}")
        if solved_pairs and all_correct and len(good) >= 2:
            mine = _short_vs_long(s, key, good, solved_pairs, rng, pair_format)
            solved += 1
            solved_rows += len(mine)
            paired += bool(mine)
            rows += mine
            continue
        if prefer_shorter:
            good.sort(key=lambda r: (r["length"], r["sample_index"]))
        else:
            rng.shuffle(good)
        rng.shuffle(bad)
        k = min(len(good), len(bad))
        if max_pairs_per_problem:
            k = min(k, max_pairs_per_problem)
        paired += k > 0
        base = s.problem_row(key)
        for c, r in zip(good[:k], bad[:k]):
            rows.append(_pair_row(base, key, c, r, "correct_vs_wrong", len(rows), rng,
                                  pair_format))
    return _finish(rows, {"problems": len(s.groups), "problems_paired": paired,
                          "pairs": len(rows), "no_correct": no_correct, "no_wrong": no_wrong,
                          "solved_problems": solved, "solved_pairs": solved_rows,
                          "dropped_truncated": truncated}, out)


def _short_vs_long(s: EvalSamples, key: ProblemKey, good: List[Row], k: int,
                   rng: random.Random, pair_format: str) -> List[Row]:
    by_len = sorted(good, key=lambda r: (r["length"], r["sample_index"]))
    k = min(k, len(by_len) // 2)
    short, long_ = by_len[:k], by_len[len(by_len) - k:]
    base = s.problem_row(key)
    out = []
    for c in short:
        for r in long_:
            if c["length"] < r["length"]:
                out.append(_pair_row(base, key, c, r, "short_vs_long", len(out), rng,
                                     pair_format))
    return out


def _pair_row(base: Row, key: ProblemKey, c: Row, r: Row, kind: str, i: int,
              rng: random.Random, pair_format: str) -> Row:
    prov = {**base, "benchmark": key[0], "problem_id": key[1], "pair_type": kind,
            "chosen_index": c["sample_index"], "rejected_index": r["sample_index"],
            "chosen_length": c["length"], "rejected_length": r["length"]}
    for side, rec in (("chosen", c), ("rejected", r)):
        if "run" in rec:
            prov[f"{side}_run"] = rec["run"]
    if pair_format == "standard":
        return {"prompt": base["problem"], "chosen": c["text"], "rejected": r["text"], **prov}
    first = rng.random() < 0.5
    return {"id": f"{key[0]}-{key[1]}-{kind}-{c['sample_index']}-{r['sample_index']}",
            "prompt": base["problem"],
            "completion_1": c["text"] if first else r["text"],
            "completion_2": r["text"] if first else c["text"],
            "preferred": "completion_1" if first else "completion_2", **prov}


def build_rejection_sampling_set(samples: Union[EvalSamples, str, Path], max_per_problem: int = 0,
                                 dedupe: bool = True, drop_truncated: bool = True,
                                 out: Union[str, Path, None] = None, lo: Optional[float] = None,
                                 hi: Optional[float] = None, inclusive: bool = False
                                 ) -> ToolResult:
    """Correct samples as SFT rows ``{problem, response, answer, ...}``, in sample order.

    ``lo``/``hi`` bound the problem's pass rate (over all its samples, pooled across runs when
    several are given): exclusive by default, so ``lo=0, hi=1`` keeps the problems solved
    sometimes but not always (pass-rate SFT: the log's rejection-sampling experiment kept the
    problems with 0 < accuracy < 1); ``inclusive`` makes
    them ``<=``. Counts: ``problems``, ``out_of_bounds``, ``problems_kept``, ``correct``,
    ``dropped_truncated``, ``dropped_duplicates``, ``dropped_cap``, ``rows``.
    """
    if max_per_problem < 0:
        raise ValueError(f"max_per_problem={max_per_problem} must be >= 0 (0 = no cap)")
    for name, v in (("lo", lo), ("hi", hi)):
        if v is not None and not 0.0 <= v <= 1.0:
            raise ValueError(f"--{name} {v} must lie in [0, 1]")
    if lo is not None and hi is not None and (lo > hi or (lo == hi and not inclusive)):
        raise ValueError(f"--lo {lo} --hi {hi} keep no pass rate"
                         + ("" if inclusive else " (bounds are exclusive; --inclusive)"))
    s = _as_samples(samples)
    rows: List[Row] = []
    kept_problems = correct = truncated = dupes = capped = outside = 0
    for key, recs in s.groups.items():
        if not _in_bounds(pass_rate(recs), lo, hi, inclusive):
            outside += 1
            continue
        seen, mine = set(), []
        for r in recs:
            if not _is_correct(r):
                continue
            correct += 1
            if drop_truncated and _is_truncated(r):
                truncated += 1
                continue
            norm = normalize_text(r["text"])
            if dedupe and norm in seen:
                dupes += 1
                continue
            seen.add(norm)
            if max_per_problem and len(mine) >= max_per_problem:
                capped += 1
                continue
            row = {"problem": s.problems[key]["problem"], "response": r["text"],
                   "answer": s.problems[key]["answer"], "benchmark": key[0],
                   "problem_id": key[1], "sample_index": r["sample_index"],
                   "length": r["length"], "pass_rate": pass_rate(recs)}
            for extra in ("run", "cot_tokens"):
                if extra in r:
                    row[extra] = r[extra]
            mine.append(row)
        kept_problems += bool(mine)
        rows += mine
    return _finish(rows, {"problems": len(s.groups), "out_of_bounds": outside,
                          "problems_kept": kept_problems,
                          "correct": correct, "dropped_truncated": truncated,
                          "dropped_duplicates": dupes, "dropped_cap": capped,
                          "rows": len(rows)}, out)


# --------------------------------------------------------------------------- CLI options
def length_options(p) -> None:
    p.add_argument("--tokenizer", default="", help="tokenizer that counts chain-of-thought "
                   "tokens: a model directory, a tokenizer.json or builtin:NAME")
    p.add_argument("--cot-longer-than", type=int, default=0, help="keep samples whose chain of "
                   "thought has more than N tokens (0 = no bound; e.g. 32768 keeps only long traces)")
    p.add_argument("--cot-shorter-than", type=int, default=0, help="keep samples whose chain of "
                   "thought has fewer than N tokens (0 = no bound)")


def length_filter(args):
    """The LengthFilter of the --cot-* options (None without them); DataError when a bound is
    given without --tokenizer."""
    if not (args.cot_longer_than or args.cot_shorter_than):
        return None
    if not args.tokenizer:
        raise DataError("--cot-longer-than / --cot-shorter-than count tokens: name the "
                        "tokenizer with --tokenizer (a model directory or builtin:NAME)")
    return LengthFilter(args.tokenizer, args.cot_longer_than, args.cot_shorter_than)
