"""Reports of an evaluation run: metrics per benchmark, the Markdown table, the length plot,
and ``compare`` of two runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from mindrl.eval.metrics import by_problem, summarize


def summarize_run(problems, done, n: int) -> Dict[str, Dict[str, Any]]:
    from mindrl.eval.grading import answer_key  # noqa: PLC0415

    grouped = by_problem(problems, done, n)
    return {b: summarize(grouped[b], key=answer_key) for b in problems}


def _pct(x: Optional[float]) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def _num(x: Optional[float]) -> str:
    return "-" if x is None else f"{x:.0f}"


def table_rows(results: Dict[str, Any]) -> Tuple[List[str], List[List[str]]]:
    """Header and rows of the summary table (accuracy figures in percent)."""
    benches = results["benchmarks"]
    n = max(m["n"] for m in benches.values())
    ks = [k for k in ("1", "4", "8", "16", "64") if int(k) <= n]
    if str(n) not in ks:
        ks.append(str(n))
    head = ["benchmark", "problems", "n", "avg@n"] + [f"pass@{k}" for k in ks] + \
        [f"maj@{n}", "trunc %", "len mean", "len p90", "len ok", "len wrong"]
    rows = []
    for b, m in benches.items():
        rows.append([b, str(m["problems"]), str(m["n"]), _pct(m["accuracy"])]
                    + [_pct(m["pass@k"].get(k)) for k in ks]
                    + [_pct(m["maj@k"].get(str(m["n"]))), _pct(m["truncation_rate"]),
                       _num(m["length"]["all"]["mean"]), _num(m["length"]["all"]["p90"]),
                       _num(m["length"]["correct"]["mean"]), _num(m["length"]["wrong"]["mean"])])
    return head, rows


def markdown(head: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    line = lambda cells: "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths)) + " |"  # noqa: E731
    sep = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([line(head), sep] + [line(r) for r in rows])


def format_table(results: Dict[str, Any]) -> str:
    head, rows = table_rows(results)
    title = (f"model: {results['model']}  template: {results['template']}  "
             f"settings: {results['settings_hash']}")
    return title + "\n\n" + markdown(head, rows)


def plot_lengths(problems, done, path: Path, n: int) -> None:
    """Histograms of response lengths per benchmark, correct and wrong apart (matplotlib Agg)."""
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    names = list(problems)
    grouped = by_problem(problems, done, n)
    fig, axes = plt.subplots(1, len(names), figsize=(3.6 * len(names), 3.0), squeeze=False)
    for ax, b in zip(axes[0], names):
        recs = [r for p in grouped[b] for r in p]
        ok = [r["length"] for r in recs if r["score"]]
        bad = [r["length"] for r in recs if not r["score"]]
        top = max([1] + ok + bad)
        bins = min(30, max(5, top))
        ax.hist([ok, bad], bins=bins, range=(0, top), stacked=True,
                color=["tab:green", "tab:red"],
                label=[f"correct ({len(ok)})", f"wrong ({len(bad)})"])
        ax.set_title(b)
        ax.set_xlabel("response tokens")
        ax.legend(fontsize=7)
    axes[0][0].set_ylabel("samples")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


# ------------------------------------------------------------------ compare
def load_results(run: str) -> Dict[str, Any]:
    p = Path(run)
    p = p / "results.json" if p.is_dir() else p
    if not p.is_file():
        raise FileNotFoundError(f"no results.json at {p} (is '{run}' an eval run directory?)")
    return json.loads(p.read_text())


def _flat(m: Dict[str, Any]) -> Dict[str, Optional[float]]:
    out = {"accuracy": m["accuracy"]}
    out.update({f"pass@{k}": v for k, v in m["pass@k"].items()})
    out.update({f"maj@{k}": v for k, v in m["maj@k"].items()})
    out["truncation_rate"] = m["truncation_rate"]
    for part in ("all", "correct", "wrong"):
        out[f"len_mean_{part}"] = m["length"][part]["mean"]
    return out


def compare_runs(run_a: str, run_b: str) -> str:
    """A Markdown table of two runs side by side: metric, A, B, B - A (percent points for
    accuracies, tokens for lengths). Benchmarks or metrics in one run only show '-'."""
    a, b = load_results(run_a), load_results(run_b)
    rows = []
    for bench in list(a["benchmarks"]) + [x for x in b["benchmarks"] if x not in a["benchmarks"]]:
        fa = _flat(a["benchmarks"][bench]) if bench in a["benchmarks"] else {}
        fb = _flat(b["benchmarks"][bench]) if bench in b["benchmarks"] else {}
        for key in list(fa) + [k for k in fb if k not in fa]:
            va, vb = fa.get(key), fb.get(key)
            fmt = _num if key.startswith("len") else _pct
            if va is not None and vb is not None:
                d = vb - va
                diff = f"{d:+.0f}" if key.startswith("len") else f"{100 * d:+.1f}"
            else:
                diff = "-"
            rows.append([bench, key, fmt(va), fmt(vb), diff])
    notes = [f"A: {run_a}  ({a['model']}, template {a['template']}, n={a['settings']['n']}, "
             f"T={a['settings']['temperature']})",
             f"B: {run_b}  ({b['model']}, template {b['template']}, n={b['settings']['n']}, "
             f"T={b['settings']['temperature']})"]
    if a["template"] != b["template"]:
        notes.append("note: the runs used different chat templates")
    return "\n".join(notes) + "\n\n" + markdown(["benchmark", "metric", "A", "B", "B - A"], rows)
