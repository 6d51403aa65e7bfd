"""The curves figure: a panel with a single point (one validation) keeps readable x labels."""

import itertools


def _overlaps(labels):
    boxes = [t.get_window_extent() for t in labels if t.get_text()]
    return [(a, b) for a, b in itertools.combinations(boxes, 2) if a.overlaps(b)]


def test_a_single_validation_point_has_one_step_label():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from mindrl.trainer.plots import draw_run

    rows = [{"step": 1, "reward/mean": 0.1, "loss": 0.5},
            {"step": 2, "reward/mean": 0.2, "loss": 0.4, "val/accuracy": 1 / 3}]
    fig = draw_run(rows, "mine")
    try:
        fig.canvas.draw()
        val = next(ax for ax in fig.axes if ax.get_title() == "validation accuracy")
        labels = val.get_xticklabels()
        assert [t.get_text() for t in labels if t.get_text()] == ["2"]
        assert val.get_xlim() == (1.0, 3.0)
        for ax in fig.axes:                          # no panel's step labels run together
            if ax.get_visible():
                assert not _overlaps(ax.get_xticklabels()), ax.get_title()
        reward = next(ax for ax in fig.axes if ax.get_title() == "reward (mean)")
        lo, hi = reward.get_xlim()
        assert [x for x in reward.get_xticks() if lo <= x <= hi] == [1.0, 2.0]
    finally:
        plt.close(fig)
