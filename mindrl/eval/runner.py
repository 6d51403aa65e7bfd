"""``mindrl eval``: sample n responses per benchmark problem, grade them, report metrics.

Order of work (nothing heavy starts before the cheap checks pass):

1. settings checked; benchmarks loaded (missing file / field / unknown name -> error); the
   first 64 gold answers of each benchmark checked with the math grader
   (:func:`mindrl.data.preflight.check_golds`: more than 10% unusable -> error naming the file
   and the answer field);
2. model directory resolved (``builtin:tiny`` is built once into a cache) and checked (config,
   tokenizer, weights: the missing file is named); tokenizer loaded; chat template resolved
   (a checkpoint's ``mindrl_meta.json`` wins by default; overriding it with another template
   prints a loud warning, as a template mismatch cost the seed 26 points);
   each benchmark's first problem printed as the engine will see it (problem, gold answer
   after normalisation, id, the prompt after the chat template);
3. the run directory's ``samples.jsonl`` read: samples already there with the same settings
   hash are kept (resume), only the missing (benchmark, problem, sample index) are generated;
4. generation in this process (``workers=1``) or sharded over Ray workers, each finished
   chunk graded and appended to ``samples.jsonl`` at once (a crash loses at most one chunk
   per worker);
5. the sample count checked against problems x n (a lost shard is an error), metrics per
   benchmark written to ``results.json``, a Markdown table to ``table.md`` and stdout, response
   lengths to ``lengths.png``.

Resume is exact for greedy decoding. With sampling, regenerated samples come from different
random streams than an uninterrupted run would have used (each chunk is seeded from the run
seed and its first sample's key), which leaves every metric an unbiased estimate.
"""

from __future__ import annotations

import json
import re
import sys
import time
import warnings
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

from mindrl.eval.engines import Chunk, EngineSpec, SampleKey, chunk_seed, default_engine_factory
from mindrl.eval.metrics import by_problem  # noqa: F401  (re-exported)
from mindrl.eval.settings import (EvalError, EvalSettings, model_fingerprint, settings_hash)

META_FILE = "mindrl_meta.json"
SAMPLES_FILE = "samples.jsonl"
RESULTS_FILE = "results.json"


class TemplateMismatchWarning(UserWarning):
    """Evaluating with a different chat template than the checkpoint was trained with."""


@dataclass
class Problem:
    benchmark: str
    id: str
    problem: str
    answer: str
    prompt: str = ""
    prompt_ids: Optional[List[int]] = None


@dataclass
class EvalResult:
    run_dir: Path
    results: Dict[str, Any]
    table: str
    generated: int                       # samples generated in this call (not resumed)


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# ------------------------------------------------------------------ inputs
def load_problems(settings: EvalSettings) -> "OrderedDict[str, List[Problem]]":
    from mindrl.data.benchmarks import benchmark_name  # noqa: PLC0415
    from mindrl.data.generated import load_problems as load_benchmark  # noqa: PLC0415

    out: "OrderedDict[str, List[Problem]]" = OrderedDict()
    for spec in settings.benchmarks:
        name = benchmark_name(spec)
        if name in out:
            raise EvalError(f"benchmark '{name}' given twice")
        rows = load_benchmark(spec, settings.data_dir, problem_field=settings.problem_field,
                              answer_field=settings.answer_field, id_field=settings.id_field,
                              limit=settings.limit or None)
        out[name] = [Problem(name, r["id"], r["problem"], r["answer"]) for r in rows]
    return out


def check_gold_answers(problems: "OrderedDict[str, List[Problem]]",
                       settings: EvalSettings) -> None:
    """Stop before any model loads when a benchmark's gold answers cannot be graded (the data
    preflight of :mod:`mindrl.data.preflight`, on the first rows of each benchmark)."""
    from types import SimpleNamespace  # noqa: PLC0415

    from mindrl.data.benchmarks import BENCHMARKS, is_builtin  # noqa: PLC0415
    from mindrl.data.preflight import check_golds  # noqa: PLC0415

    for spec, (name, ps) in zip(settings.benchmarks, problems.items()):
        if is_builtin(spec):
            b = BENCHMARKS.get(spec)
            source, field_ = f"{name} ({b.filename})", b.answer_field
        else:
            source, field_ = spec, settings.answer_field or "answer"
        check_golds([{"answer": p.answer} for p in ps],
                    SimpleNamespace(source=source, paths={"answer": [field_]}))


def example_lines(name: str, problems: List[Problem], template: str) -> List[str]:
    """The first problem of a benchmark as the engine will see it."""
    from mindrl.data.preflight import _short, example_lines as data_lines  # noqa: PLC0415

    p = problems[0]
    lines = data_lines({"problem": p.problem, "answer": p.answer, "id": p.id}, "eval", None)
    return ([f"[eval] {name}: {len(problems)} problems; the first as the engine sees it:"]
            + lines[1:] + [f"  prompt after template '{template}': {_short(p.prompt, 400)}"])


def resolve_model(settings: EvalSettings) -> str:
    from mindrl.models.tiny import check_model_dir, resolve_model_path  # noqa: PLC0415

    try:
        path = resolve_model_path(settings.model, cache_dir=settings.cache_dir)
    except ValueError as e:
        raise EvalError(str(e)) from None
    try:
        check_model_dir(path)
    except FileNotFoundError as e:
        raise EvalError(str(e)) from None
    return str(Path(path).resolve())


CPU_WARN_SAMPLES = 1000      # more samples than this on a CPU: say how long it may take


def cpu_size_warning(todo: int, device: str) -> Optional[str]:
    """A warning line before a large eval on a CPU (None otherwise).

    >>> cpu_size_warning(7276, "cpu")[:60]
    '[eval] warning: 7,276 samples to generate on a CPU: at the ~'
    >>> cpu_size_warning(7276, "cuda") is None, cpu_size_warning(120, "cpu") is None
    (True, True)
    """
    if device != "cpu" or todo <= CPU_WARN_SAMPLES:
        return None
    return (f"[eval] warning: {todo:,} samples to generate on a CPU: at the ~4 samples/s of the "
            f"built-in tiny model on 2 cores that is ~{_duration(todo / 4.0)}, longer for a "
            f"bigger model; --limit N evaluates the first N problems of each benchmark")


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def progress_rate(done: int, todo: int, seconds: float) -> str:
    """The rate so far and, until the end, the time left at that rate.

    >>> progress_rate(100, 7276, 25.0)
    '4.0 samples/s, ~30 min left'
    >>> progress_rate(8, 8, 2.0)
    '4.0 samples/s'
    """
    rate = done / max(seconds, 1e-9)
    if done >= todo or rate <= 0:
        return f"{rate:.1f} samples/s"
    return f"{rate:.1f} samples/s, ~{_duration((todo - done) / rate)} left"


def read_meta(model_dir: str) -> Dict[str, Any]:
    p = Path(model_dir) / META_FILE
    if not p.is_file():
        return {}
    try:
        return json.loads(p.read_text())
    except json.JSONDecodeError as e:
        raise EvalError(f"{p}: not valid JSON ({e.msg})") from None


def resolve_template(settings: EvalSettings, meta: Dict[str, Any], tokenizer,
                     log: Callable[[str], None] = _stderr) -> Tuple[str, str, Optional[str]]:
    """(template, system prompt, warning or None). The checkpoint's recorded template is the
    default; a different explicit one is allowed but warned about loudly."""
    from mindrl.data.templates import TEMPLATES, check_template  # noqa: PLC0415

    trained = meta.get("chat_template")
    warning = None
    if settings.template is None:
        if trained:
            template = trained
        else:
            template = "model" if getattr(tokenizer, "chat_template", None) else "none"
    else:
        template = settings.template
        if trained and template != trained:
            warning = (f"chat template '{template}' differs from '{trained}', the template this "
                       f"checkpoint was trained with ({META_FILE}); scores may drop sharply (the "
                       f"same model scored 90.6 on GSM8K with its training template and 64.4 "
                       f"without). Omit --template to use '{trained}'.")
            bar = "!" * 78
            log(f"{bar}\nWARNING: {warning}\n{bar}")
            warnings.warn(warning, TemplateMismatchWarning, stacklevel=3)
    if template not in TEMPLATES:
        raise EvalError(f"unknown chat template '{template}'; "
                        f"valid: {', '.join(TEMPLATES.names())}")
    problem = check_template(template, tokenizer)
    if problem:
        raise EvalError(f"chat template '{template}' cannot be used: {problem}")
    system = settings.system_prompt if settings.system_prompt is not None \
        else meta.get("system_prompt", "") or ""
    return template, system, warning


def load_tokenizer(model_dir: str):
    from transformers import AutoTokenizer  # noqa: PLC0415

    return AutoTokenizer.from_pretrained(model_dir)


def stop_token_ids(model_dir: str, tokenizer) -> Tuple[int, ...]:
    """EOS ids from generation_config.json (an int or a list) plus the tokenizer's EOS."""
    ids = []
    p = Path(model_dir) / "generation_config.json"
    if p.is_file():
        eos = json.loads(p.read_text()).get("eos_token_id")
        ids += eos if isinstance(eos, list) else ([eos] if eos is not None else [])
    if tokenizer.eos_token_id is not None:
        ids.append(tokenizer.eos_token_id)
    return tuple(sorted(set(int(i) for i in ids)))


# ------------------------------------------------------------------ samples file
def read_samples(path: Path, shash: str) -> Dict[SampleKey, Dict[str, Any]]:
    """Samples of ``path`` with settings hash ``shash``, keyed (benchmark, problem id, index).
    A torn last line (a crash mid-write) is skipped."""
    out: Dict[SampleKey, Dict[str, Any]] = {}
    if not path.is_file():
        return out
    with path.open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                r = json.loads(line)
            except json.JSONDecodeError:
                _stderr(f"[eval] {path}:{lineno}: skipping an unreadable line (interrupted write?)")
                continue
            if r.get("settings_hash") == shash:
                out[(r["benchmark"], str(r["problem_id"]), int(r["sample_index"]))] = r
    return out


def _append(path: Path, records: List[Dict[str, Any]]) -> None:
    """Append and fsync; a line torn by an earlier crash is cut off first (it would swallow
    the first new record)."""
    from mindrl.jsonl import append_jsonl  # noqa: PLC0415

    append_jsonl(path, records, fsync=True, ensure_ascii=False)


# ------------------------------------------------------------------ planning
def plan_shards(problems: "OrderedDict[str, List[Problem]]", missing: List[SampleKey],
                workers: int, batch_size: int, seed: int) -> List[List[Chunk]]:
    """Deal the missing samples round-robin over ``workers`` shards (sample i of the ordered
    list to shard i mod K), then cut each shard into chunks: runs of problems with the same
    number of missing samples m, at most ``batch_size`` rollouts (prompts x m) per chunk."""
    by_key = {(b, p.id): p for b, ps in problems.items() for p in ps}
    shards: List[List[Chunk]] = []
    for s in range(workers):
        units: "OrderedDict[Tuple[str, str], List[int]]" = OrderedDict()
        for key in missing[s::workers]:
            units.setdefault((key[0], key[1]), []).append(key[2])
        chunks: List[Chunk] = []
        cur: Optional[Chunk] = None
        for (b, pid), idx in units.items():
            m = len(idx)
            if cur is None or cur.m != m or len(cur.keys) + m > batch_size:
                cur = Chunk([], [], m, shard=s, index=len(chunks))
                chunks.append(cur)
            cur.keys.extend((b, pid, i) for i in idx)
            cur.prompt_ids.append(by_key[(b, pid)].prompt_ids)
        for c in chunks:
            c.seed = chunk_seed(seed, c.keys[0])
        shards.append(chunks)
    return shards


# ------------------------------------------------------------------ the run
def model_label(model: str) -> str:
    """A readable name for a model: ``RUN-step200`` for a training checkpoint
    (``RUN/checkpoints/step_000200/model``), ``builtin-tiny``, else the directory's name."""
    if model.startswith("builtin:"):
        return model.replace(":", "-")
    p = Path(model)
    parts = p.parts
    if len(parts) >= 3 and parts[-1] == "model" and parts[-2].startswith("step_") \
            and parts[-3] == "checkpoints":
        run = p.parents[2].name or "run"
        return f"{run}-step{int(parts[-2].split('_')[1])}"
    if p.name.startswith("step_") and p.parent.name == "checkpoints":
        return f"{p.parents[1].name}-step{int(p.name.split('_')[1])}"
    return p.name or "model"


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._=+-]+", "-", text).strip("-") or "x"


def default_run_dir(settings: EvalSettings, model_dir: str, shash: str) -> Path:
    """``runs/eval/<model>_<benchmarks>``; when that folder holds a run of other settings,
    ``..._<benchmarks>-<hash>`` (the hash only breaks ties, so a rerun resumes in place)."""
    from mindrl.data.benchmarks import benchmark_name  # noqa: PLC0415

    names = [_slug(benchmark_name(b)) for b in settings.benchmarks]
    benches = "+".join(names) if len(names) <= 3 else "+".join(names[:3]) + f"+{len(names) - 3}more"
    base = Path("runs") / "eval" / f"{_slug(model_label(settings.model))}_{benches}"
    meta = base / "settings.json"
    if not base.exists() or (meta.is_file() and _stored_hash(meta) == shash):
        return base
    return base.with_name(f"{base.name}-{shash[:8]}")


def _stored_hash(meta: Path) -> Optional[str]:
    try:
        return json.loads(meta.read_text()).get("settings_hash")
    except (OSError, ValueError):
        return None


def run_eval(settings: EvalSettings, engine_factory: Optional[Callable[[EngineSpec], Any]] = None,
             log: Callable[[str], None] = _stderr, echo_table: bool = True) -> EvalResult:
    """Run (or resume) an evaluation; returns the run directory, results and table.

    ``engine_factory(EngineSpec) -> RolloutEngine`` builds the engine (default: the registered
    engine named by ``settings.engine``); with Ray workers it must be picklable.
    """
    from mindrl.eval.grading import Grader  # noqa: PLC0415

    settings.check()
    problems = load_problems(settings)
    check_gold_answers(problems, settings)
    model_dir = resolve_model(settings)
    from mindrl.eval.defaults import resolve_defaults  # noqa: PLC0415

    settings, chosen = resolve_defaults(settings, model_dir)
    log(chosen)
    tokenizer = load_tokenizer(model_dir)
    meta = read_meta(model_dir)
    template, system, tmpl_warning = resolve_template(settings, meta, tokenizer, log)
    grader = Grader(settings.extract_mode, settings.last_number_fallback, settings.grade_timeout,
                    settings.grade_workers, approx_rel_tol=settings.approx_rel_tol)

    from mindrl.data.templates import render_prompt  # noqa: PLC0415

    for ps in problems.values():
        for p in ps:
            p.prompt = render_prompt(p.problem, template, tokenizer, system)
            p.prompt_ids = tokenizer(p.prompt, add_special_tokens=False)["input_ids"]
    for name, ps in problems.items():
        for line in example_lines(name, ps, template) if ps else ():
            log(line)

    gen = dict(model=model_dir, model_fingerprint=model_fingerprint(model_dir), template=template,
               system_prompt=system, n=settings.n, temperature=settings.temperature,
               top_p=settings.top_p, top_k=settings.top_k, max_new_tokens=settings.max_new_tokens,
               seed=settings.seed, engine=settings.engine, backend=settings.backend,
               dtype=settings.dtype)
    if settings.min_p:
        gen["min_p"] = settings.min_p
    if settings.tools:
        gen["tools"] = dict(names=settings.tools, format=settings.tool_format,
                            max_turns=settings.max_turns, timeout=settings.tool_timeout)
    shash = settings_hash(gen)
    run_dir = Path(settings.output_dir) if settings.output_dir else \
        default_run_dir(settings, model_dir, shash)
    run_dir.mkdir(parents=True, exist_ok=True)
    samples_path = run_dir / SAMPLES_FILE
    (run_dir / "settings.json").write_text(json.dumps(
        {"settings": settings.to_dict(), "generation": gen, "settings_hash": shash}, indent=1))

    done = read_samples(samples_path, shash)
    wanted = [(b, p.id, j) for b, ps in problems.items() for p in ps for j in range(settings.n)]
    missing = [k for k in wanted if k not in done]
    total = len(wanted)
    log(f"[eval] {run_dir}: {total} samples wanted ({len(problems)} benchmarks, n={settings.n}, "
        f"template={template}, hash={shash}); {total - len(missing)} already done, "
        f"{len(missing)} to generate")
    warning = cpu_size_warning(len(missing), settings.device)
    if warning:
        log(warning)

    golds = {(b, p.id): p.answer for b, ps in problems.items() for p in ps}
    statements = {(b, p.id): p.problem for b, ps in problems.items() for p in ps}
    stats = {"generated": 0, "t0": time.perf_counter()}

    def on_chunk(chunk: Chunk, outs: List[Dict[str, Any]]) -> None:
        graded = grader.grade([o["text"] for o in outs], [golds[(k[0], k[1])] for k in chunk.keys],
                              [statements[(k[0], k[1])] for k in chunk.keys])
        recs = []
        for k, o, (ext, score) in zip(chunk.keys, outs, graded):
            recs.append({"benchmark": k[0], "problem_id": k[1], "sample_index": k[2],
                         "settings_hash": shash, "text": o["text"], "extracted": ext,
                         "score": score, "length": o["length"],
                         "finish_reason": o["finish_reason"], "grading": grader.fingerprint})
        _append(samples_path, recs)
        for r in recs:
            done[(r["benchmark"], r["problem_id"], r["sample_index"])] = r
        stats["generated"] += len(recs)
        dt = time.perf_counter() - stats["t0"]
        log(f"[eval] {stats['generated']}/{len(missing)} samples "
            f"({progress_rate(stats['generated'], len(missing), dt)})")

    from mindrl.data.benchmarks import resolve_data_dir  # noqa: PLC0415

    spec = EngineSpec(model_dir=model_dir, engine=settings.engine, backend=settings.backend,
                      dtype=settings.dtype, device=settings.device, seed=settings.seed,
                      tensor_parallel_size=settings.tensor_parallel_size,
                      max_prompt_len=max(len(p.prompt_ids) for ps in problems.values() for p in ps),
                      sampling=dict(temperature=settings.temperature, top_p=settings.top_p,
                                    top_k=settings.top_k, min_p=settings.min_p,
                                    max_new_tokens=settings.max_new_tokens,
                                    stop_token_ids=stop_token_ids(model_dir, tokenizer)),
                      tools=gen.get("tools", {}),
                      tool_hide=[str(run_dir), str(resolve_data_dir(settings.data_dir))])
    factory = engine_factory or default_engine_factory
    restarts: Dict[int, int] = {}
    gen_seconds = 0.0
    try:
        if missing:
            shards = plan_shards(problems, missing, settings.workers, settings.batch_size,
                                 settings.seed)
            t0 = time.perf_counter()
            if settings.workers == 1:
                _run_local(shards[0], factory, spec, tokenizer, on_chunk)
            else:
                from mindrl.eval.parallel import run_sharded  # noqa: PLC0415

                restarts = run_sharded(shards, factory, spec, on_chunk,
                                       max_restarts=settings.max_restarts, log=log,
                                       address=settings.ray_address,
                                       resource=settings.ray_resource)
            gen_seconds = time.perf_counter() - t0
        _regrade_stale(done, wanted, golds, statements, grader, samples_path, shash, log)
    finally:
        grader.close()

    have = [k for k in wanted if k in done]
    if len(have) != total:
        lost = [k for k in wanted if k not in done]
        raise EvalError(f"sample count mismatch: {len(have)} of {total} samples present; "
                        f"{len(lost)} missing, e.g. {lost[:3]} (a lost shard?)")

    from mindrl.eval.report import (format_table, plot_lengths,  # noqa: PLC0415
                                    summarize_run)

    results = summarize_run(problems, done, settings.n)
    results = {"settings_hash": shash, "model": model_dir, "template": template,
               "system_prompt": system, "template_warning": tmpl_warning,
               "settings": settings.to_dict(), "generation": gen,
               "throughput": {"generated": stats["generated"], "seconds": gen_seconds,
                              "samples_per_s": stats["generated"] / gen_seconds
                              if gen_seconds else None,
                              "workers": settings.workers, "restarts": restarts},
               "benchmarks": results}
    (run_dir / RESULTS_FILE).write_text(json.dumps(results, indent=1))
    table = format_table(results)
    (run_dir / "table.md").write_text(table + "\n")
    if settings.plot:
        plot_lengths(problems, done, run_dir / "lengths.png", settings.n)
    if echo_table:
        print(table, flush=True)
    return EvalResult(run_dir, results, table, stats["generated"])


def _run_local(chunks: List[Chunk], factory, spec: EngineSpec, tokenizer, on_chunk) -> None:
    from mindrl.eval.engines import generate_chunk  # noqa: PLC0415

    def decode(ids):
        return tokenizer.decode(ids, skip_special_tokens=True)

    engine = factory(spec)
    try:
        for chunk in chunks:
            on_chunk(chunk, generate_chunk(engine, chunk, spec, decode))
    finally:
        close = getattr(engine, "close", None)
        if close:
            close()


def _regrade_stale(done, wanted, golds, statements, grader, samples_path, shash, log) -> None:
    """Stored samples graded under other rules (extract mode, fallback) are graded again and
    appended (the newest line of a key wins when the file is read)."""
    stale = [k for k in wanted if k in done and done[k].get("grading") != grader.fingerprint]
    if not stale:
        return
    log(f"[eval] regrading {len(stale)} stored samples under '{grader.fingerprint}'")
    graded = grader.grade([done[k]["text"] for k in stale], [golds[(k[0], k[1])] for k in stale],
                          [statements[(k[0], k[1])] for k in stale])
    recs = []
    for k, (ext, score) in zip(stale, graded):
        r = dict(done[k], extracted=ext, score=score, grading=grader.fingerprint)
        done[k] = r
        recs.append(r)
    _append(samples_path, recs)
