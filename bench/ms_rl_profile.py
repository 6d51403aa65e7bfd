"""Where a MindSpore RL step's time goes, by phase: kernel launches and kernel time against the
phase's wall time, from MindSpore's CPU profiler (``mindspore.profiler.profile`` with
``ProfilerActivity.CPU``; per-kernel start and duration in ``FRAMEWORK/
cpu_op_execute_timestamp_0.txt``).

    python bench/ms_rl_profile.py --size tiny --steps 3

The step is bench/backends.py's whole RL step (RLTrainer.run_step, ``builtin:<size>``, 16
prompts x 8 samples x <= 8 tokens, native engine, one thread), after 2 warm-up steps. The
phases are the engine's ``generate`` (rollout), the backend's ``logprobs`` (old log-probs) and
``train_step`` (update), timed around the calls; each kernel is counted in the phase its start
falls in. Per phase: wall ms per step, kernels per step, the kernels' summed time, the rest
(Python, launches, host work between kernels), and the op types with the most time.
"""

from __future__ import annotations

import argparse
import collections
import glob
import os
import sys
import tempfile
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("GLOG_v", "3")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
_BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [os.path.dirname(_BENCH)] + [p for p in sys.path
                                            if os.path.abspath(p or ".") != _BENCH]


def kernels(out_dir: str):
    """(op type, start ns, duration ms) of every kernel the profiler wrote under ``out_dir``."""
    rows = []
    for path in glob.glob(os.path.join(out_dir, "**", "cpu_op_execute_timestamp_*.txt"),
                          recursive=True):
        with open(path) as f:
            for line in f:
                name, _, rest = line.strip().partition(";HostCpuOps;")
                op = name.rsplit("/", 1)[-1].rsplit("-op", 1)[0]
                for item in rest.split():
                    start, dur, _ = item.split(",")
                    rows.append((op, int(start), float(dur)))
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", default="tiny")
    ap.add_argument("--steps", type=int, default=3)
    a = ap.parse_args(argv)
    import mindspore as ms
    from mindspore.profiler import ProfilerActivity

    from mindrl.config.loader import load_config
    from mindrl.trainer.rl import RLTrainer

    cfg = load_config(None, [
        f"model.path=builtin:{a.size}", "model.chat_template=none",
        "data.train_file=arithmetic:digits=2,ops=+", "data.max_val_samples=16", "rollout.n=8",
        "rollout.max_new_tokens=8", "train.prompts_per_step=16", "train.micro_batch_size=128",
        "train.lr=1e-4", "train.threads=1", "reward.num_workers=0",
        "reward.functions=[{name: arithmetic}]", "logging.tensorboard=false",
        "logging.progress_bar=false", "logging.plot=false", "checkpoint.save_final=false",
        "rollout.engine=native", "backend=mindspore", f"train.steps={a.steps + 3}",
        f"logging.output_dir={tempfile.mkdtemp()}"])
    tr = RLTrainer(cfg)
    for _ in range(2):
        tr.run_step()                                       # compiles, warms up
    spans = []                                              # (phase, start ns, end ns)

    def timed(phase, fn):
        def call(*args, **kw):
            t0 = time.time_ns()
            try:
                return fn(*args, **kw)
            finally:
                spans.append((phase, t0, time.time_ns()))
        return call

    tr.engine.generate = timed("rollout", tr.engine.generate)
    tr.backend.logprobs = timed("old log-probs", tr.backend.logprobs)
    tr.backend.train_step = timed("update", tr.backend.train_step)
    out = tempfile.mkdtemp(prefix="mindrl_ms_prof_")
    walls = []
    with ms.profiler.profile(activities=[ProfilerActivity.CPU],
                             on_trace_ready=ms.profiler.tensorboard_trace_handler(out)) as p:
        for _ in range(a.steps):
            t0 = time.time_ns()
            tr.run_step()
            walls.append((t0, time.time_ns()))
            p.step()
    ks = kernels(out)
    phases = ["rollout", "old log-probs", "update", "rest of the step"]
    wall = collections.Counter()
    for ph, s, e in spans:
        wall[ph] += (e - s) / 1e6
    wall["rest of the step"] = sum(e - s for s, e in walls) / 1e6 - sum(wall.values())
    count, busy, by_op = collections.Counter(), collections.Counter(), collections.defaultdict(
        collections.Counter)
    for op, start, dur in ks:
        ph = next((p_ for p_, s, e in spans if s <= start < e), "rest of the step")
        count[ph] += 1
        busy[ph] += dur
        by_op[ph][op] += dur
    n = a.steps
    print(f"MindSpore RL step by phase (builtin:{a.size}, {n} steps profiled, per step)")
    print("| phase | wall ms | kernels | kernel ms | rest ms | us per kernel launch "
          "(rest / kernels) | op types with the most kernel time (ms) |")
    print("|---|---|---|---|---|---|---|")
    for ph in phases:
        w, c, b = wall[ph] / n, count[ph] / n, busy[ph] / n
        top = ", ".join(f"{op} {t / n:.1f}" for op, t in by_op[ph].most_common(4))
        per = f"{1e3 * (w - b) / c:.0f}" if c else "-"
        print(f"| {ph} | {w:.1f} | {c:.0f} | {b:.1f} | {w - b:.1f} | {per} | {top} |")
    print(f"(the profiler's files: {out})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
