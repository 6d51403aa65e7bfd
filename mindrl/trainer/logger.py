"""Per-step metrics: ``metrics.jsonl`` (one JSON object a step, appended through
:func:`mindrl.jsonl.append_jsonl`, so a line torn by a crash is cut before the next append and
skipped when read), TensorBoard scalars when a writer is available, and a one-line console
summary."""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Dict, Optional

from mindrl.jsonl import append_jsonl, read_jsonl, rewrite_jsonl


class MetricsLogger:
    def __init__(self, run_dir: Path, tensorboard: bool = True, enabled: bool = True):
        self.enabled = enabled
        self.path = Path(run_dir) / "metrics.jsonl"
        self._tb = None
        if enabled and tensorboard:
            self._tb = _tensorboard_writer(Path(run_dir) / "tensorboard")

    def log(self, step: int, metrics: Dict[str, float]) -> None:
        if not self.enabled:
            return
        row = {"step": step}
        row.update({k: _jsonable(v) for k, v in sorted(metrics.items())})
        append_jsonl(self.path, [row], fsync=False)
        if self._tb is not None:
            for k, v in metrics.items():
                if isinstance(v, (int, float)) and math.isfinite(float(v)):
                    self._tb.add_scalar(k, float(v), step)
            self._tb.flush()

    def truncate_after(self, step: int) -> None:
        """On resume: forget rows of steps after the checkpoint (they will be redone)."""
        if not self.enabled or not self.path.is_file():
            return
        rows = [r for r in read_jsonl(self.path) if r.get("step", 0) <= step]
        rewrite_jsonl(self.path, rows)

    def close(self) -> None:
        if self._tb is not None:
            self._tb.close()


def _jsonable(v):
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if hasattr(v, "item"):
        return v.item()
    return v


def _tensorboard_writer(logdir: Path) -> Optional[object]:
    """A writer with ``add_scalar(tag, value, step)``, ``flush()``, ``close()``: torch's
    SummaryWriter when torch is installed, else the tensorboard package's own framework-free
    writer (a MindSpore-only install), else tensorboardX; None, with one warning naming
    ``logging.tensorboard``, when none imports."""
    try:
        from torch.utils.tensorboard import SummaryWriter  # needs the tensorboard package
        return SummaryWriter(str(logdir))
    except ImportError:
        pass
    try:
        from tensorboard.summary import Writer             # numpy only

        return _NativeWriter(Writer(str(logdir)))
    except ImportError:
        pass
    try:
        from tensorboardX import SummaryWriter  # type: ignore
        return SummaryWriter(str(logdir))
    except ImportError:
        pass
    logging.getLogger("mindrl.train").warning(
        "logging.tensorboard=true but the tensorboard package does not import: writing "
        "metrics.jsonl only (pip install tensorboard, or set logging.tensorboard=false)")
    return None


class _NativeWriter:
    """``tensorboard.summary.Writer`` behind SummaryWriter's ``add_scalar`` signature."""

    def __init__(self, writer):
        self._w = writer

    def add_scalar(self, tag: str, value: float, step: int) -> None:
        self._w.add_scalar(tag, value, step=step)

    def flush(self) -> None:
        self._w.flush()

    def close(self) -> None:
        self._w.close()


def read_metrics(run_dir: Path):
    path = Path(run_dir) / "metrics.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist: is {run_dir} a mindrl run directory?")
    return read_jsonl(path)
