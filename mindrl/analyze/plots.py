"""Pictures of the analysis tools (matplotlib, Agg backend, PNG)."""

from __future__ import annotations

from pathlib import Path
from typing import Dict, List

import numpy as np

COLORS = {"correct": "tab:green", "wrong": "tab:red", "truncated": "tab:gray"}


def _plt():
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    return plt


def _smooth(y: np.ndarray, w: int) -> np.ndarray:
    if w <= 1 or y.size < w:
        return y
    c = np.cumsum(np.insert(y, 0, 0.0))
    head = c[1:w] / np.arange(1, w)                       # growing window at the start
    return np.concatenate([head, (c[w:] - c[:-w]) / w])


def plot_quantiles(res, path: Path, smooth: int = 1) -> Path:
    """One curve per step (RL, coloured by step with a colour bar) or per checkpoint (SFT,
    with a legend); below, how many responses reach each position."""
    plt = _plt()
    import matplotlib  # noqa: PLC0415
    from matplotlib import cm, colors  # noqa: PLC0415

    curves = res.curves
    fig, (ax, axc) = plt.subplots(2, 1, figsize=(8.0, 5.6), sharex=True,
                                  gridspec_kw={"height_ratios": [3, 1]})
    vals = [c.value for c in curves]
    norm = colors.Normalize(min(vals), max(vals) if max(vals) > min(vals) else min(vals) + 1)
    cmap = matplotlib.colormaps["viridis"]
    for c in curves:
        col = cmap(norm(c.value))
        ax.plot(c.positions, _smooth(c.quantiles, smooth), color=col, lw=1.4, label=c.label)
        axc.plot(c.positions, c.counts, color=col, lw=1.0)
    who = "initial policy" if res.kind == "rl" else "each checkpoint"
    ax.set_title(f"{res.q:g}-quantile of token log-prob under {who}, per response position"
                 + (f" (moving average over {smooth})" if smooth > 1 else ""), fontsize=10)
    ax.set_ylabel(f"log p, {res.q:g}-quantile")
    ax.grid(alpha=0.3)
    if res.kind == "rl":
        sm = cm.ScalarMappable(norm=norm, cmap=cmap)
        fig.colorbar(sm, ax=[ax, axc], label="RL step (rollouts of)")
    else:
        ax.legend(fontsize=8, title="scored under", title_fontsize=8)
    axc.set_ylabel("responses")
    axc.set_xlabel("response position (token)")
    axc.grid(alpha=0.3)
    fig.text(0.01, 0.005, f"scorer: {res.scorer}", fontsize=7, color="0.4")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return Path(path)


def plot_lengths(runs: List[Dict], path: Path, bins: int = 30) -> Path:
    """A grid: one row per benchmark, one column per eval run; each panel the response-length
    histogram of correct / wrong / truncated samples (stacked) with their means as lines."""
    plt = _plt()
    benches: List[str] = []
    for r in runs:
        benches += [b for b in r["lengths"] if b not in benches]
    top = max([1] + [x for r in runs for b in r["lengths"].values()
                     for xs in b.values() for x in xs])
    edges = np.linspace(0, top, bins + 1)
    fig, axes = plt.subplots(len(benches), len(runs), squeeze=False, sharex=True,
                             figsize=(4.2 * len(runs), 2.9 * len(benches)))
    for i, b in enumerate(benches):
        ymax = 1
        for j, r in enumerate(runs):
            ax = axes[i][j]
            parts = r["lengths"].get(b, {})
            data = [parts.get(k, []) for k in COLORS]
            labels = [f"{k} ({len(d)}, mean {np.mean(d):.0f})" if d else f"{k} (0)"
                      for k, d in zip(COLORS, data)]
            ax.hist(data, bins=edges, stacked=True, color=list(COLORS.values()), label=labels)
            for k, d in zip(COLORS, data):
                if d:
                    ax.axvline(np.mean(d), color=COLORS[k], ls="--", lw=1.2)
            ymax = max(ymax, ax.get_ylim()[1])
            ax.set_title(f"{r['label']} - {b}", fontsize=9)
            ax.legend(fontsize=7)
            ax.grid(alpha=0.3)
            if i == len(benches) - 1:
                ax.set_xlabel("response length (tokens)")
            if j == 0:
                ax.set_ylabel("samples")
        for j in range(len(runs)):            # same y scale across a row: comparable heights
            axes[i][j].set_ylim(0, ymax)
    fig.suptitle("response lengths (dashed: means)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return Path(path)
