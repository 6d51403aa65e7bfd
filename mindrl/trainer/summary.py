"""The few lines every training command ends with: the final metrics, where the checkpoints,
curves and metrics are, and the commands to run next."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Dict, List, Sequence

# the metrics a person looks at first, in this order, when the run logged them
KEY_METRICS = ("val/accuracy", "accuracy", "reward/mean", "loss", "kl",
               "response_length/mean", "pref/accuracy", "pref/margin", "sft/loss")


def _fmt(v: float) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def summary_lines(stages: Sequence, last: Dict[str, float], seconds: float,
                  recipe: str = "") -> List[str]:
    """The summary of a finished run (``stages``: :class:`mindrl.config.stages.Stage` list)."""
    from mindrl.trainer.checkpoint import latest_checkpoint

    final = stages[-1].cfg
    run_dir = Path(final.logging.output_dir)
    top = run_dir.parent if len(stages) > 1 else run_dir
    name = recipe or top.name
    steps = sum(s.cfg.train.steps for s in stages)
    lines = [f"== finished: {name}, {steps} steps in {seconds:.0f} s"]
    shown = [(k, last[k]) for k in KEY_METRICS if k in last
             and isinstance(last[k], (int, float)) and math.isfinite(last[k])]
    if not shown:
        shown = [(k, v) for k, v in sorted(last.items())
                 if isinstance(v, (int, float)) and math.isfinite(v)][:6]
    if shown:
        lines.append("final metrics: " + "  ".join(f"{k} {_fmt(v)}" for k, v in shown))
    if "truncated/total" in last:       # SFT / preference: responses cut to the limit
        lines.append(f"responses cut: {int(last['truncated/total'])} rows longer than "
                     f"data.max_response_len={final.data.max_response_len}")
    from mindrl.data.preflight import RUN_WARNINGS

    for w in RUN_WARNINGS:
        lines.append(f"{'warning:':14s} {w[len('warning: '):] if w.startswith('warning: ') else w}")
    ck = latest_checkpoint(run_dir / "checkpoints")
    lines.append(f"checkpoint:    {ck / 'model' if ck else '(none saved: checkpoint.save_final=false)'}")
    for label, path in (("curves:", run_dir / "curves.png"),
                        ("metrics:", run_dir / "metrics.jsonl"),
                        ("tensorboard:", run_dir / "tensorboard")):
        if path.exists():
            lines.append(f"{label:14s} {path}")
    lines.append("next:")
    if ck is not None:
        bench, note = _benchmark_hint(final)
        lines.append(f"  mindrl eval {top} --benchmarks {bench}       # the final checkpoint"
                     f"{note}; --all-checkpoints for every one")
    lines.append(f"  mindrl plot {run_dir}")
    return lines


def _benchmark_hint(cfg):
    """``(benchmarks, note)`` to suggest: the user's own file (with its field options), the
    run's generated task, else GSM8K / MATH-500 (with the command that fetches it when this
    machine lacks it)."""
    from mindrl.data.benchmarks import BENCHMARKS
    from mindrl.data.location import MissingDataError, find_data_file

    spec = cfg.data.val_file or cfg.data.train_file
    if Path(spec).suffix.lower() in (".jsonl", ".json", ".parquet", ".ndjson"):
        d = cfg.data
        opts = "".join(f" --{flag} {value}" for flag, value in (
            ("problem-field", d.prompt_field), ("answer-field", d.answer_field),
            ("id-field", d.id_field)) if value)
        return f"{spec}{opts}", " on your file"
    if ":" in spec and not spec.startswith("hf:") and "/" not in spec:
        return f'"{spec}"', ""
    name = "gsm8k" if "gsm8k" in spec else "math500"
    try:
        find_data_file(f"eval/{BENCHMARKS.get(name).filename}", cfg.data.data_dir)
        return name, ""
    except MissingDataError:
        return name, f" (first: mindrl data fetch {name})"


def print_summary(stages: Sequence, last: Dict[str, float], seconds: float,
                  recipe: str = "") -> None:
    if int(os.environ.get("RANK", "0")) != 0:
        return
    from mindrl.data.preflight import RUN_WARNINGS

    print("\n" + "\n".join(summary_lines(stages, last, seconds, recipe)), flush=True)
    RUN_WARNINGS.clear()
