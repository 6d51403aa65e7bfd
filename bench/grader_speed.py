"""Speed of the math grader on the conformance table (tests/rewards/grader_conformance_cases.py).

Grades every counted row with ``grade`` under the evaluation and the reward presets, caches
cleared before each pass, and prints rows/s (median of ``--repeats`` passes). Then the 500
MATH-500 reference answers, boxed, graded against themselves with and without their problem
statements (what the form check costs; ``--data-dir``, default ../shared/data/eval). ``--baseline
FILE`` loads another copy of ``rewards/math_grader.py`` (say, the one of an older commit:
``git show main:rewards/math_grader.py > /tmp/old.py``) and alternates passes of both, so that
the two are measured under the same load. ``--per-row`` also prints, for each grader, the sum
over the rows of each row's fastest of 3 runs (caches cleared before each run; math-verify's
own parse cache stays warm), which a busy machine disturbs much less than whole passes.

    python bench/grader_speed.py --repeats 5
    python bench/grader_speed.py --repeats 5 --baseline /tmp/old.py
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "rewards")]


def _load(path: str, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # dataclasses need the module registered
    spec.loader.exec_module(mod)
    return mod


def _grade_row(grader, c, opts):
    kw = {}
    if "precision" in c:
        kw["float_rounding"] = c["precision"]
    if "match_types" in c:
        kw["fallback_targets"] = tuple(c["match_types"])
    return grader.grade(c["pred"], c["gold"], mode=c.get("mode", "auto"), timeout=5,
                        options=opts, **kw)


def _pass(grader, rows, preset: str) -> float:
    grader.clear_caches()
    opts = getattr(grader, preset)
    t0 = time.perf_counter()
    for c in rows:
        _grade_row(grader, c, opts)
    return time.perf_counter() - t0


def _per_row(graders, rows, preset: str) -> dict:
    """Per grader: the sum over rows of the fastest of 3 runs of each row (the graders
    interleaved)."""
    total = {n: 0.0 for n in graders}
    for i, c in enumerate(rows):
        best = {n: float("inf") for n in graders}
        order = list(graders.items())
        order = order[::-1] if i % 2 else order     # who goes first alternates: no order effect
        for _ in range(3):
            for n, g in order:
                g.clear_caches()
                t0 = time.perf_counter()
                _grade_row(g, c, getattr(g, preset))
                best[n] = min(best[n], time.perf_counter() - t0)
        for n in graders:
            total[n] += best[n]
    return total


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--baseline", default="", help="another math_grader.py to compare with")
    ap.add_argument("--per-row", action="store_true",
                    help="sum of each row's fastest of 3 runs, per grader and preset")
    ap.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "data" / "eval"))
    a = ap.parse_args(argv)
    from grader_conformance_cases import CASES

    rows = [c for c in CASES if "skip" not in c]
    graders = {"current": _load(str(ROOT / "rewards" / "math_grader.py"), "_grader_current")}
    if a.baseline:
        graders["baseline"] = _load(a.baseline, "_grader_baseline")
    for g in graders.values():  # warm imports (math-verify, sympy) outside the timing
        _pass(g, rows[:20], "EVAL_OPTIONS")
    times = {(n, p): [] for n in graders for p in ("EVAL_OPTIONS", "REWARD_OPTIONS")}
    for _ in range(a.repeats):
        for (n, p) in times:
            times[(n, p)].append(_pass(graders[n], rows, p))
    print(f"{len(rows)} rows, median of {a.repeats} cold passes")
    for (n, p), ts in times.items():
        med = statistics.median(ts)
        print(f"{n:9s} {p:15s} {med:7.3f} s  {len(rows) / med:7.1f} rows/s  "
              f"(min {min(ts):.3f} s, max {max(ts):.3f} s)")
    if a.per_row:
        for p in ("EVAL_OPTIONS", "REWARD_OPTIONS"):
            for n, t in _per_row(graders, rows, p).items():
                print(f"{n:9s} {p:15s} per row, fastest of 3, summed: {1000 * t:8.1f} ms")
    math500 = Path(a.data_dir) / "math500_test.simplerl.jsonl"
    if math500.is_file():
        import json

        items = [json.loads(x) for x in math500.open()]
        g = graders["current"]
        ts = {"without problem": [], "with problem": []}
        for _ in range(a.repeats):
            for label in ts:
                g.clear_caches()
                t0 = time.perf_counter()
                for r in items:
                    kw = {"problem": r["problem"]} if label == "with problem" else {}
                    g.grade("\\boxed{" + r["answer"] + "}", r["answer"], options=g.EVAL_OPTIONS,
                            timeout=5, **kw)
                ts[label].append(time.perf_counter() - t0)
        for label, t in ts.items():
            med = statistics.median(t)
            print(f"current   MATH-500 golds, {label:15s} {med:7.3f} s  "
                  f"{len(items) / med:7.1f} rows/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
