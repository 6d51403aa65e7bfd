"""Curves of a run: reward, accuracy, response length, KL (and validation accuracy) over steps;
with ``logging.profile`` also the step time stacked by phase."""

from __future__ import annotations

from pathlib import Path
from typing import List, Tuple

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


def grid_shape(n: int) -> Tuple[int, int]:
    """(rows, columns) of a grid for ``n`` panels: at most 3 columns, as square as that allows
    (4 panels: 2 x 2; 5-6: 2 x 3; 7: 3 x 3)."""
    ncols = 1 if n <= 1 else 2 if n <= 4 else 3
    return (n + ncols - 1) // ncols, ncols


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

    fig = draw_run(read_metrics(run_dir), run_dir.resolve().name)
    if fig is None:
        return []
    out = Path(run_dir) / "curves.png"
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return [out]


def draw_run(rows, name: str):
    """The curves figure of a run's metric rows (None when no panel has data). A panel with a
    single step (one validation point) shows that step alone on its x axis."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, MaxNLocator

    panels = [(k, title) for k, title in PANELS if any(r.get(k) is not None for r in rows)]
    if not panels:
        return None
    from mindrl.trainer.profile import PHASES

    phases = [k for k in PHASES if any(r.get(k) is not None for r in rows)]
    profiled = any(r.get("profile/overhead_fraction") is not None for r in rows)
    extra = 1 if profiled and phases else 0
    nrows, ncols = grid_shape(len(panels) + extra)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.4 * ncols, 3.2 * nrows), squeeze=False)
    flat = [ax for row in axes for ax in row]
    for ax in flat[len(panels) + extra:]:
        ax.set_visible(False)
    fig.suptitle(f"{name}: {len(rows)} steps logged", fontsize=11)
    if extra:                           # logging.profile: the step time stacked by phase
        ax = flat[len(panels)]
        steps = [r["step"] for r in rows]
        ax.stackplot(steps, [[r.get(k) or 0.0 for r in rows] for k in phases],
                     labels=[k.split("/", 1)[1] for k in phases])
        frac = [r.get("profile/overhead_fraction") for r in rows]
        known = [f for f in frac if f is not None]
        ax.set_title(f"step time by phase (s); overhead {100 * known[-1]:.0f}%" if known
                     else "step time by phase (s)")
        ax.set_xlabel("step")
        ax.legend(fontsize=6, loc="upper left", ncol=2)
        ax.grid(alpha=0.3)
    for ax, (key, title) in zip(flat, panels):
        pts = [(r["step"], r[key]) for r in rows if r.get(key) is not None]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o" if len(pts) < 30 else None,
                markersize=3)
        ax.set_title(title)
        ax.set_xlabel("step")
        ax.ticklabel_format(axis="y", useOffset=False)
        ax.grid(alpha=0.3)
    for ax in flat:
        xs = {x for line in ax.get_lines() for x in line.get_xdata()}
        if len(xs) == 1:                # one point: autoscale would tick 1.900 ... 2.100
            x0 = next(iter(xs))
            ax.set_xlim(x0 - 1, x0 + 1)
            ax.xaxis.set_major_locator(FixedLocator([x0]))
        else:
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    fig.tight_layout(rect=(0, 0, 1, 0.96))
    return fig
