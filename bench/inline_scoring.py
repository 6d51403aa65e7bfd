"""Cost of the in-process scorer's time limit (``reward.num_workers=0``).

Scores the CPU demo's batch (512 rollouts of 2-digit addition, the ``arithmetic`` reward, as in
yaml_configs/grpo_tiny_demo.yaml) and 512 MATH-500 answers with the ``accuracy`` reward
(math-verify), in process and with one worker, and prints items/s (median of ``--repeats``).
Usage: python bench/inline_scoring.py [--repeats 5]
"""

import argparse
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))   # before bench/ itself, whose rewards.py would shadow rewards/


def demo_batch(n: int = 512):
    from rewards.arithmetic import generate

    rng = random.Random(0)
    rows = generate(n // 8, seed=0, digits=2, ops="+")
    comps, gold = [], []
    for r in rows:
        for _ in range(8):   # 8 samples per prompt; a third of them wrong
            comps.append(r["answer"] if rng.random() < 0.66 else str(int(r["answer"]) + 1))
            gold.append(r["answer"])
    return comps, gold


def math_batch(data_dir: Path, n: int = 512):
    with open(data_dir / "eval" / "math500_test.simplerl.jsonl") as f:
        golds = [json.loads(line)["answer"] for line in f][:n]
    return [r"so the answer is $\boxed{%s}$." % g for g in golds], golds


def rate(reward: str, comps, gold, workers: int, repeats: int) -> float:
    from rewards.pool import RewardScorer

    with RewardScorer([{"name": reward}], num_workers=workers, timeout=5.0) as s:
        s(comps[:8], answer=gold[:8])            # warm-up (worker start, imports)
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            s(comps, answer=gold)
            times.append(time.perf_counter() - t0)
    return len(comps) / statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--data-dir", default=str(REPO.parent / "shared" / "data"))
    args = ap.parse_args()
    batches = {"arithmetic (demo batch, 512)": ("arithmetic", *demo_batch()),
               "accuracy (MATH-500 answers, 500)": ("accuracy", *math_batch(Path(args.data_dir)))}
    print(f"{'batch':36s} {'in process':>14s} {'1 worker':>14s}")
    for label, (reward, comps, gold) in batches.items():
        inline = rate(reward, comps, gold, 0, args.repeats)
        pooled = rate(reward, comps, gold, 1, args.repeats)
        print(f"{label:36s} {inline:10,.0f}/s   {pooled:10,.0f}/s", flush=True)


if __name__ == "__main__":
    main()
