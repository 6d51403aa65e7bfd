"""The figures README.md quotes, each with the command that reproduces it: a figure is refreshed,
not remembered.

``python bench/readme_figures.py`` lists every figure: its value in the README today and the
command behind it. ``--cheap`` reruns the figures that take under about a minute (parameter
counts, test-case counts, grader conformance, test counts) and prints old vs new; the others
(benchmarks of several minutes, the demo) print their command, to run by hand.
``--only NAME[,NAME]`` restricts either to some figures. Exit code 1 when a rerun figure differs
from the README (or a pattern no longer finds its figure), so it can gate a README edit.

tests/test_readme.py checks that every pattern here finds its figure in the README, and that the
instant ones still hold.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, List, Optional

os.environ.setdefault("OMP_NUM_THREADS", "1")
REPO = Path(__file__).resolve().parents[1]
_HERE = Path(__file__).resolve().parent
if __name__ == "__main__":
    # run as a script, bench/ comes first on sys.path and bench/rewards.py would shadow
    # ``rewards``: put the checkout root there instead
    sys.path[:] = [str(REPO)] + [p for p in sys.path if Path(p or ".").resolve() != _HERE]
README = REPO / "README.md"


@dataclass
class Figure:
    name: str
    pattern: str                  # regex over README.md; group 1 is the figure
    command: str                  # what reproduces it
    compute: Optional[Callable[[], str]] = None   # the cheap rerun, returning the README's form
    instant: bool = False         # cheap enough for the fast test suite

    def old(self, text: str) -> List[str]:
        return re.findall(self.pattern, text)


# ------------------------------------------------------------------------- cheap reruns
def _params(name: str) -> int:
    from safetensors.numpy import load_file

    from mindrl.models.tiny import resolve_model_path

    weights = load_file(str(Path(resolve_model_path(f"builtin:{name}")) / "model.safetensors"))
    return sum(int(v.size) for v in weights.values())


def mini_params() -> str:
    return f"{_params('mini') / 1e6:.2f}"


def _tests_module(name: str):
    sys.path.insert(0, str(REPO / "tests" / "rewards"))
    import importlib

    return importlib.import_module(name)


def grader_cases() -> str:
    return str(len(_tests_module("test_math_grader").CASES))


def conformance_rows() -> str:
    return str(len(_tests_module("test_grader_conformance").ROWS))


def _conformance(preset: str) -> str:
    from rewards import math_grader

    mod = _tests_module("test_grader_conformance")
    wrong, _ = mod._run(getattr(math_grader, preset))
    n = len(mod.ROWS)
    return f"{n - len(wrong)}/{n} = {100 * (n - len(wrong)) / n:.1f}%"


def _collected(*paths: str) -> str:
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", *paths],
                         cwd=REPO, capture_output=True, text=True, timeout=600,
                         env=dict(os.environ, PYTHONPATH=str(REPO))).stdout
    m = re.search(r"(\d+) tests? collected", out)
    return m.group(1) if m else f"? ({out.strip().splitlines()[-1:]})"


FIGURES: List[Figure] = [
    Figure("mini_params", r"a (\d+(?:\.\d+)?)M-parameter\s+Qwen2-architecture model",
           "python bench/readme_figures.py --cheap --only mini_params", mini_params, True),
    Figure("grader_cases", r"(\d+) hand-written grading cases",
           "python -c 'import sys; sys.path.insert(0, \"tests/rewards\"); import test_math_grader "
           "as t; print(len(t.CASES))'", grader_cases, True),
    Figure("conformance_rows", r"\((\d+) rows ported\s+as data",
           "pytest tests/rewards/test_grader_conformance.py", conformance_rows, True),
    Figure("conformance_eval", r"now, `EVAL_OPTIONS` \| (\d+/\d+ = [\d.]+%)",
           "pytest tests/rewards/test_grader_conformance.py",
           lambda: _conformance("EVAL_OPTIONS")),
    Figure("conformance_reward", r"now, `REWARD_OPTIONS` \(no fallback\) \| (\d+/\d+ = [\d.]+%)",
           "pytest tests/rewards/test_grader_conformance.py",
           lambda: _conformance("REWARD_OPTIONS")),
    Figure("suite_tests", r"The suite is (\d+) tests",
           "python -m pytest --collect-only -q", lambda: _collected()),
    Figure("fault_injection_tests", r"test_fault_injection\.py` \((\d+) tests",
           "python -m pytest --collect-only -q tests/trainer/test_fault_injection.py",
           lambda: _collected("tests/trainer/test_fault_injection.py")),
    # ---- minutes, by hand
    Figure("demo_seed0", r"\| SFT \+ GRPO  \| ([\d.]+%) \|",
           "bash launch/run_grpo.sh   (mindrl demo: about 3 min on 2 cores)"),
    Figure("demo_mindspore", r"runs the same recipes on the MindSpore backend: SFT ([\d.]+%)",
           "MINDRL_BACKEND=mindspore bash launch/run_grpo.sh"),
    Figure("trl_ratio_tiny", r"\| tiny \(h64, 2 layers\) \|[^\n]*\| ([\d.]+) / [\d.]+ \|",
           "python bench/trl_compare.py --repeats 3   (TRL in bench/.trl_pkgs; ~9 min)"),
    Figure("trl_ratio_small", r"\| small \(h256, 4 layers\) \|[^\n]*\| ([\d.]+) / [\d.]+ \|",
           "python bench/trl_compare.py --repeats 3"),
    Figure("trl_quiet_ratios",
           r"quiet machine\s+\(issue 20, same command\): ratio ([\d.]+ \(tiny\) and [\d.]+)",
           "python bench/trl_compare.py --repeats 3   (on an otherwise idle machine)"),
    Figure("vllm_small_step", r"small size\s+the step takes ([\d.]+ s with vLLM)",
           "python bench/trl_compare.py --sizes small --no-trl --repeats 3"),
    Figure("backends_tiny_ratio", r"\| builtin:tiny \(hidden 64, 2 layers\) \|[^|]*\|[^|]*\| "
                                  r"([\d.]+x) \|", "python bench/backends.py"),
    Figure("rewards_grade", r"\| `math_grader.grade`, in process \| ([\d,]+) \|",
           "python bench/rewards.py"),
    Figure("inline_demo", r"\| demo: 512 rollouts, `arithmetic` \| ([\d,]+) \|",
           "python bench/inline_scoring.py"),
    Figure("eval_native_1", r"\| native \| 1 \| ([\d.]+) \|", "python bench/eval_throughput.py"),
    Figure("data_io_stream_first", r"\*\*stream: first row taken\*\* \| \*\*([\d.]+)\*\*",
           "python bench/data_io.py"),
]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cheap", action="store_true", help="rerun the figures under ~1 minute")
    ap.add_argument("--only", default="", help="comma-separated figure names")
    a = ap.parse_args(argv)
    text = README.read_text(encoding="utf-8")
    wanted = {n for n in a.only.split(",") if n}
    unknown = wanted - {f.name for f in FIGURES}
    if unknown:
        ap.error(f"unknown figure(s) {', '.join(sorted(unknown))}; known: "
                 + ", ".join(f.name for f in FIGURES))
    status = 0
    print(f"{'figure':24s} {'README':18s} {'now':26s} command")
    for f in FIGURES:
        if wanted and f.name not in wanted:
            continue
        old = f.old(text)
        shown_old = old[0] if len(old) == 1 else f"? ({len(old)} matches)"
        if len(old) != 1:
            status = 1
        new = "-"
        if a.cheap and f.compute is not None:
            t0 = time.perf_counter()
            new = f.compute()
            mark = "" if new == shown_old else "   <- differs"
            status = status or int(bool(mark))
            new = f"{new} ({time.perf_counter() - t0:.0f} s){mark}"
        elif f.compute is None:
            new = "(by hand)"
        print(f"{f.name:24s} {shown_old:18s} {new:26s} {f.command}")
    return status


if __name__ == "__main__":
    sys.exit(main())
