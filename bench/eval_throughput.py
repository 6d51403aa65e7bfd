"""Evaluation throughput on the tiny model: native vs vLLM engine, 1 vs 2 Ray workers.

    .venv/bin/python bench/eval_throughput.py [--problems 16] [--n 4] [--max-new-tokens 64]

Each configuration runs ``mindrl eval`` (GSM8K, sampling at T=0.6 / top_p 0.95; the random tiny
model rarely emits EOS, so most responses run to ``--max-new-tokens``) into a fresh run
directory and reports:
  wall s      generation time including engine / Ray worker start-up,
  samples/s   samples / wall,
  steady/s    samples after the first finished chunk / time after it (start-up excluded),
  tokens/s    response tokens / wall.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import time
from pathlib import Path

for _k, _v in {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "GLOG_v": "3",
               "VLLM_LOGGING_LEVEL": "ERROR", "TRANSFORMERS_VERBOSITY": "error",
               "HF_HUB_DISABLE_PROGRESS_BARS": "1", "HF_HUB_OFFLINE": "1",
               "TOKENIZERS_PARALLELISM": "false", "RAY_AUTH_MODE": "disabled",
               "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}.items():
    os.environ.setdefault(_k, _v)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mindrl.eval.report import markdown  # noqa: E402
from mindrl.eval.runner import run_eval  # noqa: E402
from mindrl.eval.settings import EvalSettings  # noqa: E402


def one(engine: str, workers: int, args, root: Path):
    marks = []

    def log(msg: str) -> None:
        m = re.match(r"\[eval\] (\d+)/(\d+) samples", msg)
        if m:
            marks.append((time.perf_counter(), int(m.group(1))))

    s = EvalSettings(model=args.model, benchmarks=["gsm8k"], limit=args.problems, n=args.n,
                     temperature=0.6, top_p=0.95, max_new_tokens=args.max_new_tokens, seed=0,
                     engine=engine, workers=workers, batch_size=args.batch_size,
                     output_dir=str(root / f"{engine}-{workers}"), plot=False,
                     cache_dir=args.cache_dir, data_dir=args.data_dir, grade_workers=0)
    res = run_eval(s, log=log, echo_table=False)
    tp = res.results["throughput"]
    m = res.results["benchmarks"]["gsm8k"]
    tokens = m["length"]["all"]["mean"] * m["samples"]
    steady = None
    if len(marks) >= 2:
        (t0, c0), (t1, c1) = marks[0], marks[-1]
        steady = (c1 - c0) / (t1 - t0) if t1 > t0 else None
    return [engine, str(workers), str(tp["generated"]), f"{tp['seconds']:.1f}",
            f"{tp['samples_per_s']:.2f}", "-" if steady is None else f"{steady:.2f}",
            f"{tokens / tp['seconds']:.0f}"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="builtin:tiny")
    ap.add_argument("--cache-dir", default=None)
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--problems", type=int, default=16)
    ap.add_argument("--n", type=int, default=4)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--batch-size", type=int, default=16, help="rollouts per generate call")
    ap.add_argument("--engines", default="native,vllm")
    ap.add_argument("--workers", default="1,2")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for engine in args.engines.split(","):
            for w in (int(x) for x in args.workers.split(",")):
                print(f"running {engine} x {w} worker(s) ...", file=sys.stderr, flush=True)
                rows.append(one(engine, w, args, Path(tmp)))
    print(f"\nGSM8K, {args.problems} problems x n={args.n}, {args.max_new_tokens} new tokens, "
          f"tiny model, {os.cpu_count()} CPUs\n")
    print(markdown(["engine", "workers", "samples", "wall s", "samples/s", "steady/s",
                    "tokens/s"], rows))


if __name__ == "__main__":
    main()
