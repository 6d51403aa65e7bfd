"""Answer-checking throughput on the same (completion, gold) pairs: plain math-verify
parse+verify (what Open-R1 does), ``rewards.math_grader.grade`` in process, and the accuracy
reward through ``RewardScorer`` in process and with worker processes.

Builds >= 1,000 pairs from the MATH-500 answers in ../shared/data, in varied output formats
(boxed, <answer> tags, "the answer is", half of them wrong), plus a pathological set. Prints
pairs/s (median of 3 runs), each row's ratio to plain math-verify, how often the two verdicts
agree, the machine load (``os.getloadavg``), and the worst latency on the pathological items.
Every run starts cold: the grader's caches are cleared and each pool run gets fresh workers,
so repeats do not hit answers cached by the previous run (within a run a gold answer seen
twice is parsed once, as in a GRPO group).
Usage: python bench/rewards.py [--workers 2] [--timeout 2]
"""

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
# run as a script, this file's folder comes first on sys.path and this file would shadow the
# ``rewards`` package: put the checkout root there instead
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))


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


def ours(pairs):
    from rewards.math_grader import clear_caches, grade

    clear_caches()
    return [None if (v := grade(text, gold)) is None else float(v) for text, gold in pairs]


def timed(fn, pairs, repeats):
    rates, out = [], None
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn(pairs)
        rates.append(len(pairs) / (time.perf_counter() - t))
    return statistics.median(rates), out


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
    from rewards.math_grader import clear_caches

    load = os.getloadavg()
    rows = []
    rate, mv = timed(sequential, pairs, args.repeats)
    rows.append(("math-verify parse+verify, sequential", rate))
    rate, mine = timed(ours, pairs, args.repeats)
    rows.append(("math_grader.grade, in process", rate))
    for workers in (0, args.workers):
        rates = []
        for _ in range(args.repeats):
            clear_caches()
            with RewardScorer([{"name": "accuracy"}], num_workers=workers,
                              timeout=args.timeout) as scorer:
                scorer([r"\boxed{0}"], answer=["1"])  # start the workers
                t = time.perf_counter()
                scorer(texts, answer=golds)
                rates.append(len(pairs) / (time.perf_counter() - t))
        rows.append((f"RewardScorer accuracy, num_workers={workers}", statistics.median(rates)))
    base = rows[0][1]
    print(f"{len(pairs)} pairs, median of {args.repeats} runs, load average at start "
          f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} CPUs")
    print(f"{'scorer':<44}{'pairs/s':>10}{'ratio':>8}")
    for name, rate in rows:
        print(f"{name:<44}{rate:>10.1f}{rate / base:>8.2f}")
    same = sum((a or 0.0) == (b or 0.0) for a, b in zip(mv, mine))
    print(f"verdicts equal to plain math-verify's on {same}/{len(pairs)} pairs")
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
