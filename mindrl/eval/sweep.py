"""Several evaluations as one table: every checkpoint of a training run, several response
lengths, or both.

    mindrl eval runs/grpo_own_math --benchmarks math500                  # the newest checkpoint
    mindrl eval runs/grpo_own_math --all-checkpoints --benchmarks math500
    mindrl eval MODEL_DIR --max-new-tokens 16384,32768 --benchmarks aime24 --n 16

Each point is an ordinary eval run (resumable, in its own folder under the sweep folder); the
sweep folder holds ``sweep.md`` (one row per checkpoint and length, avg@n and pass@n per
benchmark), ``sweep.json`` and ``sweep.png`` (accuracy over training steps, or over the response
length when only the length varies).
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from mindrl.eval.settings import EvalError, EvalSettings


@dataclasses.dataclass(frozen=True)
class Point:
    step: Optional[int]           # training step of the checkpoint (None: a plain model)
    label: str                    # readable model label
    model: str                    # model directory
    max_new_tokens: int


def parse_lengths(text: str) -> List[int]:
    """``"16384,32768"`` -> [16384, 32768] (one or more positive integers)."""
    out = []
    for piece in str(text).split(","):
        piece = piece.strip().replace("_", "")
        if not piece:
            continue
        if not re.fullmatch(r"\d+", piece) or int(piece) < 1:
            raise EvalError(f"--max-new-tokens: '{piece}' is not a positive integer "
                            "(give one length or a comma-separated list, e.g. 16384,32768)")
        out.append(int(piece))
    if not out:
        raise EvalError("--max-new-tokens: no length given")
    return out


def _checkpoint_roots(run_dir: Path) -> List[Path]:
    """``RUN/checkpoints`` of a run, or each stage's of a multi-stage run, in stage order."""
    if (run_dir / "checkpoints").is_dir():
        return [run_dir / "checkpoints"]
    stages = [p for p in run_dir.glob("stage_*") if (p / "checkpoints").is_dir()]
    stages.sort(key=lambda p: int(p.name.split("_")[1]) if p.name.split("_")[1].isdigit() else 0)
    return [p / "checkpoints" for p in stages]


def is_run_dir(path: str) -> bool:
    p = Path(path)
    return p.is_dir() and not (p / "config.json").is_file() and bool(_checkpoint_roots(p))


def run_checkpoints(run_dir: str, every: bool) -> List[Tuple[int, str, str]]:
    """(global step, label, model dir) of a training run's complete checkpoints (all, or the
    newest); steps of later stages continue after the earlier stages' last step."""
    from mindrl.eval.runner import model_label  # noqa: PLC0415
    from mindrl.paths import complete_steps  # noqa: PLC0415

    out: List[Tuple[int, str, str]] = []
    offset = 0
    for root in _checkpoint_roots(Path(run_dir)):
        last = 0
        for ck in complete_steps(root):
            step = int(ck.name.split("_")[1])
            last = max(last, step)
            out.append((offset + step, model_label(str(ck / "model")), str(ck / "model")))
        offset += last
    if not out:
        raise EvalError(f"{run_dir}: no complete checkpoint under checkpoints/ (is it a training "
                        "run directory? give a model directory, or train with checkpoint.every)")
    return out if every else out[-1:]


def plan(settings: EvalSettings, lengths: Sequence[int], all_checkpoints: bool) -> List[Point]:
    from mindrl.eval.runner import model_label  # noqa: PLC0415

    if is_run_dir(settings.model):
        models = run_checkpoints(settings.model, all_checkpoints)
    elif all_checkpoints:
        raise EvalError(f"--all-checkpoints needs a training run directory (with checkpoints/), "
                        f"got {settings.model}")
    else:
        models = [(None, model_label(settings.model), settings.model)]
    return [Point(step, label, model, n) for step, label, model in models for n in lengths]


def sweep_dir(settings: EvalSettings, points: List[Point]) -> Path:
    if settings.output_dir:
        return Path(settings.output_dir)
    from mindrl.data.benchmarks import benchmark_name  # noqa: PLC0415
    from mindrl.eval.runner import _slug  # noqa: PLC0415

    src = Path(settings.model).name if is_run_dir(settings.model) else points[0].label
    benches = "+".join(_slug(benchmark_name(b)) for b in settings.benchmarks[:3])
    what = []
    if len({p.model for p in points}) > 1:
        what.append("checkpoints")
    if len({p.max_new_tokens for p in points}) > 1:
        what.append("lengths")
    return Path("runs") / "eval" / f"{_slug(src)}_{benches}_{'+'.join(what) or 'sweep'}"


def run_sweep(settings: EvalSettings, points: List[Point], log=None) -> Dict[str, Any]:
    """Run each point (into ``SWEEP_DIR/<label>-len<N>``), then write the combined table,
    JSON and plot; returns the sweep record."""
    from mindrl.eval.runner import run_eval  # noqa: PLC0415

    out = sweep_dir(settings, points)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for i, p in enumerate(points, 1):
        sub = dataclasses.replace(settings, model=p.model, max_new_tokens=p.max_new_tokens,
                                  output_dir=str(out / f"{p.label}-len{p.max_new_tokens}"))
        print(f"[eval] sweep point {i}/{len(points)}: {p.label}, max_new_tokens="
              f"{p.max_new_tokens}", flush=True)
        kwargs = {} if log is None else {"log": log}
        res = run_eval(sub, echo_table=False, **kwargs)
        rows.append({"step": p.step, "label": p.label, "model": p.model,
                     "max_new_tokens": p.max_new_tokens, "run_dir": str(res.run_dir),
                     "benchmarks": {b: {"accuracy": m["accuracy"],
                                        "pass@n": m["pass@k"].get(str(m["n"])),
                                        "n": m["n"], "truncation_rate": m["truncation_rate"],
                                        "length": m["length"]["all"]["mean"]}
                                    for b, m in res.results["benchmarks"].items()}})
    record = {"source": settings.model, "rows": rows}
    (out / "sweep.json").write_text(json.dumps(record, indent=1))
    table = sweep_table(rows)
    (out / "sweep.md").write_text(table + "\n")
    plot_sweep(rows, out / "sweep.png")
    record["table"], record["dir"] = table, str(out)
    return record


def sweep_table(rows: List[Dict[str, Any]]) -> str:
    """One row per point; per benchmark avg@n (and pass@n when n > 1), truncation % and mean
    length."""
    from mindrl.eval.report import _num, _pct, markdown  # noqa: PLC0415

    benches = list(rows[0]["benchmarks"])
    n = max(m["n"] for r in rows for m in r["benchmarks"].values())
    head = ["step", "model", "max tokens"]
    for b in benches:
        head += [f"{b} avg@{n}"] + ([f"{b} pass@{n}"] if n > 1 else []) + \
            [f"{b} trunc %", f"{b} len"]
    body = []
    for r in rows:
        cells = ["-" if r["step"] is None else str(r["step"]), r["label"], str(r["max_new_tokens"])]
        for b in benches:
            m = r["benchmarks"][b]
            cells += [_pct(m["accuracy"])] + ([_pct(m["pass@n"])] if n > 1 else []) + \
                [_pct(m["truncation_rate"]), _num(m["length"])]
        body.append(cells)
    return markdown(head, body)


def plot_sweep(rows: List[Dict[str, Any]], path: Path) -> None:
    """Accuracy per benchmark over training steps (one line per length), or over the length
    when every point is the same model."""
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    over_steps = len({r["model"] for r in rows}) > 1
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for b in rows[0]["benchmarks"]:
        groups: Dict[Any, List[Tuple[float, float]]] = {}
        for r in rows:
            key = r["max_new_tokens"] if over_steps else None
            x = (r["step"] or 0) if over_steps else r["max_new_tokens"]
            acc = r["benchmarks"][b]["accuracy"]
            groups.setdefault(key, []).append((x, float("nan") if acc is None else 100 * acc))
        for key, pts in groups.items():
            pts.sort()
            label = b if key is None or len(groups) == 1 else f"{b}, {key} tokens"
            ax.plot([x for x, _ in pts], [y for _, y in pts], marker="o", label=label)
    ax.set_xlabel("training step" if over_steps else "max new tokens")
    if not over_steps:
        ax.set_xscale("log", base=2)
    ax.set_ylabel("avg@n accuracy (%)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
