"""Curves of a run: reward, accuracy, response length, KL (and validation accuracy) over steps."""

from __future__ import annotations

from pathlib import Path
from typing import List

from mindrl.errors import UserError
from mindrl.trainer.logger import read_metrics

PANELS = [
    ("reward/mean", "reward (mean)"),
    ("accuracy", "train accuracy"),
    ("val/accuracy", "validation accuracy"),
    ("response_length/mean", "response length (tokens)"),
    ("kl", "KL to reference"),
    ("entropy", "entropy"),
]


def plot_run(run_dir) -> List[Path]:
    """Draw ``RUN_DIR/curves.png`` from ``RUN_DIR/metrics.jsonl``; returns the files written
    (none when no panel has data). A missing folder or metrics file is a UserError."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise UserError(f"run directory {run_dir} does not exist")
    if not (run_dir / "metrics.jsonl").is_file():
        raise UserError(f"{run_dir} has no metrics.jsonl: is it a mindrl run directory?")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = read_metrics(run_dir)
    panels = [(k, title) for k, title in PANELS if any(r.get(k) is not None for r in rows)]
    if not panels:
        return []
    fig, axes = plt.subplots(1, len(panels), figsize=(3.6 * len(panels), 3.0), squeeze=False)
    for ax, (key, title) in zip(axes[0], panels):
        pts = [(r["step"], r[key]) for r in rows if r.get(key) is not None]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o" if len(pts) < 30 else None,
                markersize=3)
        ax.set_title(title)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    fig.tight_layout()
    out = Path(run_dir) / "curves.png"
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return [out]
