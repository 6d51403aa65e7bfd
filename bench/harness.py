"""The timing harness shared by the benches: one-thread workers, load average, steps timed
alternately, each side in its own subprocess reporting one JSON result line, medians pooled over
runs with the warm-up dropped, and an optional cProfile of the measured steps only.

Imported as ``bench.harness`` (the repository root on ``sys.path``; bench/ itself holds a
``rewards.py`` that would shadow the repository's ``rewards`` package). No framework at import.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List, Mapping, Sequence, Tuple

RESULT_TAG = "@@BENCH_RESULT "

# A worker's environment: one thread everywhere, quiet frameworks, nothing from the network.
QUIET_ONE_THREAD_ENV = dict(
    OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
    TOKENIZERS_PARALLELISM="false", TRANSFORMERS_VERBOSITY="error", VLLM_LOGGING_LEVEL="ERROR",
    HF_HUB_DISABLE_PROGRESS_BARS="1", HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1",
    PYTHONWARNINGS="ignore", GLOG_v="3", ACCELERATE_DISABLE_RICH="1")


def loadavg() -> float:
    """The 1-minute load average (NaN where /proc/loadavg is missing)."""
    try:
        return float(Path("/proc/loadavg").read_text().split()[0])
    except OSError:
        return float("nan")


def torch_one_thread() -> None:
    """torch intra-op (and, if still allowed, inter-op) threads = 1."""
    import torch

    torch.set_num_threads(1)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass


def interleaved(fa: Callable[[], object], fb: Callable[[], object],
                steps: int) -> Tuple[float, float]:
    """Median ms of ``fa`` and ``fb`` called alternately ``steps`` times each (so load drift
    hits both)."""
    a, b = [], []
    for _ in range(steps):
        t0 = time.perf_counter()
        fa()
        a.append((time.perf_counter() - t0) * 1e3)
        t0 = time.perf_counter()
        fb()
        b.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(a), statistics.median(b)


def emit(result: dict) -> None:
    """A worker's result: one tagged JSON line on stdout, read back by :func:`run_worker`;
    ``peak_rss_mb`` (the worker process's peak RSS) and ``peak_rss_children_mb`` (the largest of
    the child processes it has waited for, e.g. a sampler process) are added."""
    import resource

    result = dict(result)
    result.setdefault("peak_rss_mb", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    result.setdefault("peak_rss_children_mb",
                      resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)
    print(RESULT_TAG + json.dumps(result), flush=True)


def run_worker(cmd: Sequence[str], *, what: str, cwd: Path, timeout: float,
               env: Mapping[str, str], repo: Path) -> dict:
    """Run one worker subprocess (``env`` over this process's, the repository importable) and
    return its :func:`emit` result with ``load_before``, ``load_after`` and ``wall_s`` added;
    a failed worker prints its output tail and raises."""
    full = dict(os.environ, **env)
    full["PYTHONPATH"] = os.pathsep.join(filter(None, [str(repo), full.get("PYTHONPATH", "")]))
    load0 = loadavg()
    t0 = time.perf_counter()
    p = subprocess.run(list(cmd), check=False, env=full, capture_output=True, text=True,
                       cwd=str(cwd), timeout=timeout)
    wall = time.perf_counter() - t0
    line = next((x for x in p.stdout.splitlines() if x.startswith(RESULT_TAG)), None)
    if p.returncode != 0 or line is None:
        sys.stderr.write(p.stdout[-3000:] + p.stderr[-6000:])
        raise RuntimeError(f"{what} failed with exit code {p.returncode}")
    res = json.loads(line[len(RESULT_TAG):])
    res.update(load_before=load0, load_after=loadavg(), wall_s=wall)
    return res


def pool_runs(runs: List[dict]) -> dict:
    """Pool the measured steps (each run's first ``warmup`` dropped) of several runs: median,
    min, max and count of ``step_times``, median ``cpu_times``, median of each ``phases`` key,
    and the runs' (load before, load after)."""
    st = [t for r in runs for t in r["step_times"][r["warmup"]:]]
    ph = [p for r in runs for p in r["phases"][r["warmup"]:]]
    keys = sorted({k for p in ph for k in p})
    med: Dict[str, float] = {k: statistics.median([p[k] for p in ph if k in p]) for k in keys}
    cpu = [t for r in runs for t in r["cpu_times"][r["warmup"]:]]
    return {"median": statistics.median(st), "min": min(st), "max": max(st), "n": len(st),
            "cpu_median": statistics.median(cpu),
            "peak_rss_mb": max(r.get("peak_rss_mb", 0.0) for r in runs),
            "peak_rss_children_mb": max(r.get("peak_rss_children_mb", 0.0) for r in runs),
            "phases": med, "loads": [(r["load_before"], r["load_after"]) for r in runs]}


class Profile:
    """cProfile of the measured steps only (start after warm-up, stop at the end): writes
    ``path`` (pstats dump), ``path.txt`` (by cumulative time) and ``path.tottime.txt``."""

    def __init__(self, path):
        self.path, self.prof = path, None

    def start(self):
        if self.path and self.prof is None:
            import cProfile

            self.prof = cProfile.Profile()
            self.prof.enable()

    def stop(self):
        if self.prof is not None:
            import io
            import pstats

            self.prof.disable()
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            self.prof.dump_stats(self.path)
            s = io.StringIO()
            pstats.Stats(self.prof, stream=s).sort_stats("cumulative").print_stats(45)
            Path(str(self.path) + ".txt").write_text(s.getvalue())
            s = io.StringIO()
            pstats.Stats(self.prof, stream=s).sort_stats("tottime").print_stats(35)
            Path(str(self.path) + ".tottime.txt").write_text(s.getvalue())
            self.prof = None
