"""Reward scoring throughput: plain sequential math-verify (what Open-R1 does) vs RewardScorer.

Builds >= 1,000 (completion, gold) pairs from the MATH-500 answers in ../shared/data, in varied
output formats (boxed, <answer> tags, "the answer is", wrong answers), plus a pathological set.
Prints pairs/s (median of 3 runs), the pool/sequential ratio, and the worst-case latency of the
pathological items.  Usage: python bench/rewards.py [--workers 2] [--timeout 2]
"""

import argparse
import json
import os
import statistics
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")


def build_pairs(data_dir: Path, n: int):
    with open(data_dir / "eval" / "math500_test.simplerl.jsonl") as f:
        golds = [json.loads(line)["answer"] for line in f]
    templates = [r"Reasoning... so the answer is $\boxed{%s}$.",
                 "<think>\nwork\n</think>\n<answer>\n%s\n</answer>",
                 r"We get \boxed{%s}", "The answer is %s"]
    pairs = []
    i = 0
    while len(pairs) < n:
        g = golds[i % len(golds)]
        pred = g if (i // len(golds)) % 2 == 0 else g + "+1"  # second pass: wrong answers
        pairs.append((templates[i % len(templates)] % pred, g))
        i += 1
    return pairs


PATHOLOGICAL = [r"\boxed{2^{10^{9}}}", r"\boxed{9^{9^{9^9}}}", r"\boxed{1000000!}",
                "x" * 1_000_000 + r"\boxed{1}", "{" * 20000 + r"\boxed{" * 2000, "\ud800", ""]


def sequential(pairs):
    from math_verify import parse, verify

    out = []
    for text, gold in pairs:
        g = parse(f"${gold}$")
        out.append(float(verify(g, parse(text))) if g else None)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=1000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=2.0)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    import logging

    logging.getLogger("math_verify").setLevel(logging.CRITICAL)
    logging.getLogger("rewards.pool").setLevel(logging.ERROR)
    from rewards.pool import RewardScorer

    data_dir = Path(os.environ.get("MINDRL_SHARED_DATA",
                                   Path(__file__).resolve().parents[2] / "shared" / "data"))
    pairs = build_pairs(data_dir, args.pairs)
    texts, golds = [p[0] for p in pairs], [p[1] for p in pairs]
    rows = []
    seq = []
    for _ in range(args.repeats):
        t = time.perf_counter()
        sequential(pairs)
        seq.append(len(pairs) / (time.perf_counter() - t))
    rows.append(("math-verify sequential (Open-R1 style)", statistics.median(seq)))
    for workers in (0, args.workers):
        with RewardScorer([{"name": "accuracy"}], num_workers=workers,
                          timeout=args.timeout) as scorer:
            scorer(texts[:8], answer=golds[:8])  # start workers
            rates = []
            for _ in range(args.repeats):
                t = time.perf_counter()
                scorer(texts, answer=golds)
                rates.append(len(pairs) / (time.perf_counter() - t))
        rows.append((f"RewardScorer num_workers={workers}", statistics.median(rates)))
    base = rows[0][1]
    print(f"{'scorer':<42}{'pairs/s':>10}{'ratio':>8}")
    for name, rate in rows:
        print(f"{name:<42}{rate:>10.1f}{rate / base:>8.2f}")
    with RewardScorer([{"name": "accuracy"}], num_workers=args.workers,
                      timeout=args.timeout) as scorer:
        worst = 0.0
        for text in PATHOLOGICAL:
            t = time.perf_counter()
            res = scorer([text, r"\boxed{1}"], answer=["5", "1"])
            worst = max(worst, time.perf_counter() - t)
            assert res.components["accuracy"][1] == 1.0
    print(f"pathological set ({len(PATHOLOGICAL)} items, timeout {args.timeout:g}s): "
          f"worst latency {worst:.2f}s (limit {args.timeout + 1:g}s)")


if __name__ == "__main__":
    main()
