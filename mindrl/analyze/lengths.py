"""Response lengths of eval runs side by side (e.g. AIME before and after RL).

Every sample of an eval run's ``samples.jsonl`` (the run's own settings hash, the newest line of
each key) falls in exactly one class:

    truncated   finish_reason == "length" (cut at max_new_tokens, whatever its score)
    correct     not truncated and score >= 1
    wrong       not truncated and score < 1 or None (ungradeable)

Per run and benchmark: counts and mean lengths per class (a Markdown table), and histograms on
a shared x axis (a PNG: one row per benchmark, one column per run).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import numpy as np

from mindrl.analyze.rollouts import AnalyzeError

CLASSES = ("correct", "wrong", "truncated")


def sample_class(rec: Dict) -> str:
    if rec.get("finish_reason") == "length":
        return "truncated"
    s = rec.get("score")
    return "correct" if s is not None and s >= 1.0 else "wrong"


def read_eval_lengths(run, benchmarks: Optional[Sequence[str]] = None
                      ) -> Dict[str, Dict[str, List[int]]]:
    """{benchmark: {class: [lengths]}} of one eval run directory."""
    from mindrl.eval.runner import read_samples  # noqa: PLC0415

    run = Path(run).expanduser()
    samples = run / "samples.jsonl" if run.is_dir() else run
    if not samples.is_file():
        raise AnalyzeError(f"eval run not found: {run} has no samples.jsonl (give a "
                           f"`mindrl eval` output directory)")
    settings = samples.parent / "settings.json"
    try:
        shash = json.loads(settings.read_text()).get("settings_hash")
    except (OSError, json.JSONDecodeError) as e:
        raise AnalyzeError(f"{settings}: cannot read the run's settings ({e})") from None
    recs = read_samples(samples, shash)
    if not recs:
        raise AnalyzeError(f"{samples}: no samples with the run's settings hash {shash}")
    out: Dict[str, Dict[str, List[int]]] = {}
    for (b, _, _), r in sorted(recs.items()):
        if benchmarks and b not in benchmarks:
            continue
        if not isinstance(r.get("length"), int):
            raise AnalyzeError(f"{samples}: sample {b}/{r.get('problem_id')}/"
                               f"{r.get('sample_index')} has no integer 'length'")
        out.setdefault(b, {k: [] for k in CLASSES})[sample_class(r)].append(r["length"])
    if benchmarks and not out:
        raise AnalyzeError(f"{samples}: none of the benchmarks {', '.join(benchmarks)}; the run "
                           f"has {', '.join(sorted({k[0] for k in recs}))}")
    return out


def lengths_table(runs: List[Dict]) -> str:
    from mindrl.eval.report import markdown  # noqa: PLC0415

    mean = lambda xs: f"{np.mean(xs):.0f}" if xs else "-"  # noqa: E731
    rows = []
    for r in runs:
        for b, parts in r["lengths"].items():
            every = [x for k in CLASSES for x in parts[k]]
            rows.append([r["label"], b, str(len(every)), mean(every)]
                        + [x for k in CLASSES for x in (str(len(parts[k])), mean(parts[k]))])
    head = ["run", "benchmark", "samples", "mean len", "correct", "mean len correct", "wrong",
            "mean len wrong", "truncated", "mean len truncated"]
    return markdown(head, rows)


def compare_lengths(eval_runs: Sequence[str], labels: Optional[Sequence[str]] = None,
                    benchmarks: Optional[Sequence[str]] = None, out_dir="runs/analyze",
                    bins: int = 30) -> Dict:
    """Read each run, write ``lengths.png`` and ``lengths.md`` into ``out_dir``; returns
    ``{"runs": [...], "table": str, "files": [png, md]}``."""
    from mindrl.analyze.plots import plot_lengths  # noqa: PLC0415

    if labels and len(labels) != len(eval_runs):
        raise AnalyzeError(f"--labels gives {len(labels)} names for {len(eval_runs)} runs")
    names = list(labels) if labels else [Path(r).name or str(r) for r in eval_runs]
    runs = [{"label": n, "run": str(r), "lengths": read_eval_lengths(r, benchmarks)}
            for n, r in zip(names, eval_runs)]
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    table = lengths_table(runs)
    md = out / "lengths.md"
    md.write_text(table + "\n")
    png = plot_lengths(runs, out / "lengths.png", bins=bins)
    return {"runs": runs, "table": table, "files": [png, md]}
