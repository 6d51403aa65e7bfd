"""Miniatures of the experiment log's findings that run in seconds on CPU (docs/reproduced.md).

    python bench/seed_log.py passk [--n 8 --k 4]    # pass@k advantages of a group, every N_neg
    python bench/seed_log.py lengths                # GRPO vs Dr. GRPO: per-token weight by length
    python bench/seed_log.py pairs PAIRS.jsonl      # chosen / rejected lengths by pair type

``passk`` runs the registered ``passk`` estimator on one group per count of wrong answers and
prints A_pos / A_neg beside the closed form. ``lengths`` runs the ``grpo`` and ``dr_grpo``
estimators with their aggregations (seq_mean_token_mean, seq_mean_token_sum_norm) on a group of
two right and two wrong answers of different lengths and prints the weight each of a response's
tokens gets in the loss: under GRPO a long wrong answer is pushed down less per token than a
short one, the length bias Dr. GRPO removes. ``pairs`` reads a ``mindrl data pairs`` file.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from algorithms.advantages import ADV_ESTIMATORS, passk_group_advantages  # noqa: E402
from algorithms.aggregation import aggregate  # noqa: E402
from algorithms.ops import get_ops  # noqa: E402


def passk_table(n: int, k: int) -> list:
    est = ADV_ESTIMATORS.get("passk")
    rows = []
    for n_neg in range(n + 1):
        rewards = np.array([0.0] * n_neg + [1.0] * (n - n_neg))
        adv = est(rewards, np.zeros(n, dtype=int), np.ones((n, 1)), passk_k=k)[:, 0]
        a_pos, a_neg, r_mean, sigma = passk_group_advantages(n, n_neg, k)
        got_pos = float(adv[-1]) if n_neg < n else 0.0
        got_neg = float(adv[0]) if n_neg > 0 else 0.0
        rows.append((n_neg, r_mean, sigma, got_pos, got_neg, a_pos, a_neg))
    return rows


def length_weights(lengths=(4, 8, 4, 16), rewards=(1.0, 1.0, 0.0, 0.0)) -> dict:
    """{estimator: per-token weight of each response in d(loss)/d(-log pi)}."""
    ops = get_ops("numpy")
    L = max(lengths)
    mask = np.array([[1.0] * n + [0.0] * (L - n) for n in lengths])
    r = np.array(rewards)
    gi = np.zeros(len(r), dtype=int)
    out = {}
    for name, mode in (("grpo", "seq_mean_token_mean"), ("dr_grpo", "seq_mean_token_sum_norm")):
        adv = ADV_ESTIMATORS.get(name)(r, gi, mask)                  # (B, T)
        weights = []
        for i, n in enumerate(lengths):                              # d loss / d token (i, 0)
            unit = np.zeros_like(mask)
            unit[i, 0] = 1.0
            weights.append(float(aggregate(ops, unit * adv, mask, mode, max_len=L)))
        out[name] = weights
    return out


def pair_lengths(path: Path) -> dict:
    by = defaultdict(lambda: [0, 0.0, 0.0])
    for line in path.read_text().splitlines():
        r = json.loads(line)
        row = by[r["pair_type"]]
        row[0] += 1
        row[1] += r["chosen_length"]
        row[2] += r["rejected_length"]
    return {t: (n, c / n, rj / n) for t, (n, c, rj) in sorted(by.items())}


def passk_lines(n: int = 8, k: int = 4) -> list:
    lines = ["| N_neg | mean pass@k R | sigma | A_pos | A_neg |", "|---|---|---|---|---|"]
    for n_neg, r, s, gp, gn, ap, an in passk_table(n, k):
        assert abs(gp - (ap if n_neg < n else 0)) < 1e-12      # the estimator = the closed form
        assert abs(gn - (an if n_neg > 0 else 0)) < 1e-12
        pos = f"{gp:.4f}" if n_neg < n else "-"
        neg = f"{gn:.4f}" if n_neg > 0 else "-"
        lines.append(f"| {n_neg} | {r:.4f} | {s:.4f} | {pos} | {neg} |")
    return lines


def lengths_lines() -> list:
    w = length_weights()
    lines = ["| response (rewards 1 1 0 0) | GRPO | Dr. GRPO |", "|---|---|---|"]
    for i, (n, r) in enumerate(zip((4, 8, 4, 16), (1, 1, 0, 0))):
        lines.append(f"| {'right' if r else 'wrong'}, {n} tokens | {w['grpo'][i]:+.4f} "
                     f"| {w['dr_grpo'][i]:+.4f} |")
    return lines


def pairs_lines(path: Path) -> list:
    lines = ["| pair type | pairs | chosen length | rejected length |", "|---|---|---|---|"]
    for t, (n, c, r) in pair_lengths(path).items():
        lines.append(f"| {t} | {n} | {c:.2f} | {r:.2f} |")
    return lines


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="what", required=True)
    pk = sub.add_parser("passk", help="pass@k advantages of a group, for every N_neg")
    pk.add_argument("--n", type=int, default=8)
    pk.add_argument("--k", type=int, default=4)
    sub.add_parser("lengths", help="GRPO vs Dr. GRPO per-token weights")
    pr = sub.add_parser("pairs", help="lengths of a `mindrl data pairs` file by pair type")
    pr.add_argument("file", type=Path)
    args = p.parse_args(argv)
    if args.what == "passk":
        print(f"pass@k advantages, group of N={args.n}, k={args.k} (estimator = closed form)")
        lines = passk_lines(args.n, args.k)
    elif args.what == "lengths":
        print("per-token loss weight, lengths 4 8 4 16 (GRPO: seq_mean_token_mean; Dr. GRPO: "
              "seq_mean_token_sum_norm)")
        lines = lengths_lines()
    else:
        lines = pairs_lines(args.file)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
