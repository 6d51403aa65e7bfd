"""The figures the documentation quotes (README.md and the pages under docs/, most of them on
docs/benchmarks.md), each with the command that reproduces it: a figure is refreshed, not
remembered.

``python bench/readme_figures.py`` lists every figure: its value in the docs today and the
command behind it. ``--cheap`` reruns the figures that take under about a minute (parameter
and vocabulary counts, test and test-case counts, grader conformance, the math-verify verdict
differences, row counts of the shared data, checksum rates, the inline timeout; about 30 s on 2
cores) and prints old vs new; the others (benchmarks of several minutes, the demo) print their
command, to run separately. A benchmark's table is registered whole (``table``): every cell comes
from the one command named.
``--only NAME[,NAME]`` restricts either to some figures. Exit code 1 when a rerun figure differs
from the docs (or a pattern no longer finds its figure), so it can gate a docs edit; a timing
(``exact=False``) is shown old vs new but does not count.

tests/test_readme.py checks that every pattern here finds its figure exactly once in the docs
(README.md and docs/**/*.md read as one text), and that the instant ones still hold.
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


def doc_pages() -> List[Path]:
    """README.md, then every page under docs/ (sorted): where the figures are looked for."""
    return [README] + sorted((REPO / "docs").rglob("*.md"))


def docs_text() -> str:
    return "\n".join(p.read_text(encoding="utf-8") for p in doc_pages())


@dataclass
class Figure:
    name: str
    pattern: str                  # regex over the docs (docs_text()); group 1 is the figure
    command: str                  # what reproduces it
    compute: Optional[Callable[[], str]] = None   # the cheap rerun, returning the form the docs print
    instant: bool = False         # cheap enough for the fast test suite
    exact: bool = True            # False: a timing, expected to move with the machine's load;
                                  # a difference is shown but does not fail the run

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


def _shared() -> Path:
    """../shared/data beside the checkout, or $MINDRL_SHARED_DATA (as tests/conftest.py)."""
    return Path(os.environ.get("MINDRL_SHARED_DATA", REPO.parent / "shared" / "data"))


def conformance_negatives() -> str:
    return str(sum(not c["expected"] for c in _tests_module("test_grader_conformance").ROWS))


def conformance_skipped() -> str:
    mod = _tests_module("test_grader_conformance")
    return str(len(mod.CASES) - len(mod.ROWS))


def conformance_left() -> str:
    from rewards import math_grader

    wrong, _ = _tests_module("test_grader_conformance")._run(math_grader.EVAL_OPTIONS)
    words = {0: "no", 1: "one", 2: "two", 3: "three", 4: "four", 5: "five"}
    return words.get(len(wrong), str(len(wrong)))


def _quiet():
    """The command's own report (stdout and stderr) stays out of the table."""
    import contextlib
    import io

    stack = contextlib.ExitStack()
    stack.enter_context(contextlib.redirect_stdout(io.StringIO()))
    stack.enter_context(contextlib.redirect_stderr(io.StringIO()))
    return stack


def tiny_vocab() -> str:
    from transformers import AutoTokenizer

    from mindrl.models.tiny import resolve_model_path

    return f"{len(AutoTokenizer.from_pretrained(resolve_model_path('builtin:tiny'))):,}"


def tiny_build_s() -> str:
    import tempfile

    from mindrl.cli import main as cli

    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        with _quiet():
            assert cli(["build-tiny", str(Path(d) / "tiny")]) == 0
        return f"{time.perf_counter() - t0:.0f}"


def checksum_rates() -> str:
    """GB/s of zlib.crc32 and hashlib.sha256 over 256 MiB (what a checkpoint save pays)."""
    import hashlib
    import zlib

    buf = os.urandom(256 << 20)
    rates = []
    for fn in (zlib.crc32, lambda b: hashlib.sha256(b).digest()):
        best = min(_timed(fn, buf) for _ in range(3))
        rates.append(len(buf) / best / 1e9)
    return f"{rates[0]:.1f} vs {rates[1]:.1f}"


def _timed(fn, arg) -> float:
    t0 = time.perf_counter()
    fn(arg)
    return time.perf_counter() - t0


def _jsonl_rows(path: Path) -> int:
    with open(path, encoding="utf-8") as f:
        return sum(1 for line in f if line.strip())


def gsm8k_train_rows() -> str:
    return str(_jsonl_rows(_shared() / "train" / "gsm8k_train.openai.jsonl"))


def clean_kept() -> str:
    """`mindrl data clean --drop-urls --drop-cjk` on the SimpleRL MATH level 3-5 file."""
    import tempfile

    from mindrl.cli import main as cli

    src = _shared() / "train" / "simplelr_qwen_level3to5_train.simplerl_pr57.jsonl"
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "clean.jsonl"
        with _quiet():
            assert cli(["data", "clean", str(src), str(out), "--drop-urls", "--drop-cjk"]) == 0
        return f"{_jsonl_rows(out)} of {_jsonl_rows(src)}"


def verdicts_differ() -> str:
    """Pairs on which bench/rewards.py's plain math-verify and math_grader.grade disagree."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("_bench_rewards", REPO / "bench" / "rewards.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)      # it puts the checkout root first on sys.path, as we do
    pairs = mod.build_pairs(_shared(), 1000)
    mv, mine = mod.sequential(pairs), mod.ours(pairs)
    return str(sum((a or 0.0) != (b or 0.0) for a, b in zip(mv, mine)))


def _seed_log(fn: str) -> str:
    """Rows of a bench/seed_log.py table, as the docs print them (header and rule dropped)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("seed_log", REPO / "bench" / "seed_log.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return "\n".join(getattr(mod, fn)()[2:]) + "\n"


def table(name: str, header: str, command: str) -> Figure:
    """A whole docs table as one figure (its rows under the header line that starts with
    ``header``): every cell of a benchmark's table comes from one command."""
    return Figure(name, r"(?m)^" + re.escape(header) + r"[^\n]*\n\|[-|: ]+\|\n((?:\|[^\n]*\n)+)",
                  command)


def inline_timeout_s() -> str:
    """Seconds until `num_workers: 0`, `timeout: 1` gives up on a power tower."""
    from rewards.pool import RewardScorer

    with RewardScorer([{"name": "accuracy"}], num_workers=0, timeout=1.0) as scorer:
        t0 = time.perf_counter()
        res = scorer([r"\boxed{9^{9^{9^9}}}"], answer=["5"])
        took = time.perf_counter() - t0
    assert res.components["accuracy"] == [None], res.components
    return f"{took:.1f}"


def _sig3(x: float) -> str:
    """Three significant figures with thousands separators, as the docs' rate tables."""
    from math import floor, log10

    return f"{round(x, 2 - int(floor(log10(abs(x))))):,.0f}" if x else "0"


_INLINE: dict = {}


def _inline(row: int) -> str:
    """One row of `bench/inline_scoring.py` (with limit | 1 worker), run once for both rows."""
    if not _INLINE:
        out = subprocess.run([sys.executable, str(REPO / "bench" / "inline_scoring.py"),
                              "--data-dir", str(_shared())], cwd=REPO, capture_output=True,
                             text=True, timeout=600, env=dict(os.environ, PYTHONPATH=str(REPO)))
        rates = re.findall(r"([\d,]+)/s\s+([\d,]+)/s", out.stdout)
        assert len(rates) == 2, out.stdout + out.stderr
        for i, (inline, pooled) in enumerate(rates):
            _INLINE[i] = " | ".join(_sig3(float(v.replace(",", ""))) for v in (inline, pooled))
    return _INLINE[row]


_PIPELINE: dict = {}


def _pipeline(which: str) -> str:
    """The AceReason-style data pipeline as the docs' block runs it (clean -> sample 8 -> filter),
    in a temporary directory: "rows | dropped" of each `data filter` line (about 15 s)."""
    import tempfile

    if not _PIPELINE:
        src = _shared() / "train" / "simplelr_qwen_level3to5_train.simplerl_pr57.jsonl"
        steps = [["data", "clean", str(src), "clean.jsonl", "--drop-urls", "--drop-cjk"],
                 ["eval", "builtin:tiny", "--benchmarks", "clean.jsonl", "--problem-field",
                  "question", "--answer-field", "gt_answer", "--limit", "64", "--n", "8",
                  "--temperature", "1.0", "--max-new-tokens", "32", "--no-plot",
                  "--output-dir", "sample8"],
                 ["data", "filter", "sample8", "--lo", "0", "--hi", "0.875", "-o", "train.jsonl"],
                 ["data", "filter", "sample8", "--lo", "0.125", "--hi", "0.875", "-o",
                  "rs.jsonl"]]
        with tempfile.TemporaryDirectory() as d:
            for argv in steps:
                res = subprocess.run([sys.executable, "-m", "mindrl", *argv], cwd=d,
                                     capture_output=True, text=True, timeout=600,
                                     env=dict(os.environ, PYTHONPATH=str(REPO)))
                assert res.returncode == 0, (argv, res.stderr[-2000:])
            n = _jsonl_rows(Path(d) / "sample8" / "samples.jsonl") // 8
            for name in ("train", "rs"):
                kept = _jsonl_rows(Path(d) / f"{name}.jsonl")
                _PIPELINE[name] = f"{kept} | {n - kept}"
    return _PIPELINE[which]


def window_rows() -> str:
    from mindrl.trainer.prompts import DEFAULT_WINDOW_ROWS

    return f"{DEFAULT_WINDOW_ROWS:,}"


def prompt_cache() -> str:
    from mindrl.trainer.base import PROMPT_CACHE_SIZE

    return f"{PROMPT_CACHE_SIZE:,}"


def ray_grace_s() -> str:
    from mindrl.distributed.ray_launch import GRACE_S

    return f"{GRACE_S:g}"


def _collected(*paths: str) -> str:
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", *paths],
                         cwd=REPO, capture_output=True, text=True, timeout=600,
                         env=dict(os.environ, PYTHONPATH=str(REPO))).stdout
    m = re.search(r"(\d+)(?:/\d+)? tests? collected", out)   # "124/131 tests collected" with -m
    return m.group(1) if m else f"? ({out.strip().splitlines()[-1:]})"


FIGURES: List[Figure] = [
    # ---- Set-up (counts of tests)
    Figure("suite_tests", r"\| full, as CI runs it \| `bash \.ci/run` \| (\d+) \|",
           "python -m pytest --collect-only -q", lambda: _collected()),
    Figure("docs_tests", r"\| docs \| `[^`]+` \| (\d+) \|",
           "python -m pytest --collect-only -q tests/test_readme.py tests/test_docs.py -m 'not slow'",
           lambda: _collected("tests/test_readme.py", "tests/test_docs.py", "-m", "not slow")),
    Figure("docs_tests_s", r"\| docs \| `[^`]+` \| \d+ \| (\d+) s \|",
           "time python -m pytest -q tests/test_readme.py tests/test_docs.py -m 'not slow'"),
    Figure("suite_fast_tests", r"\| fast \| `[^`]+` \| (\d+) \|",
           "python -m pytest --collect-only -q -m 'not slow'",
           lambda: _collected("-m", "not slow")),
    Figure("suite_fast_s", r"\| fast \| `[^`]+` \| \d+ \| about (\d+) s \|",
           "time python -m pytest -q -m 'not slow'"),
    # ---- the CPU demo
    Figure("mini_params", r"a (\d+(?:\.\d+)?)M-parameter\s+Qwen2-architecture\s+model",
           "python bench/readme_figures.py --cheap --only mini_params", mini_params, True),
    Figure("demo_wall", r"load ~1: (\d+ min \d+ s) wall", "time bash launch/run_grpo.sh"),
    Figure("demo_gain_total", r"GRPO gain: (\+[\d.]+ points; total \d+ s)", "bash launch/run_grpo.sh"),
    Figure("ray_grace_s", r"SIGKILL after (\d+) s\)",
           "python -c 'from mindrl.distributed.ray_launch import GRACE_S; print(GRACE_S)'",
           ray_grace_s, True),
    # ---- training
    Figure("checksum_rates", r"CRC-32 rather than SHA-256: ([\d.]+ vs [\d.]+) GB/s",
           "python bench/readme_figures.py --cheap --only checksum_rates", checksum_rates,
           exact=False),
    Figure("fault_injection_tests", r"test_fault_injection\.py` \((\d+) tests",
           "python -m pytest --collect-only -q tests/trainer/test_fault_injection.py",
           lambda: _collected("tests/trainer/test_fault_injection.py")),
    Figure("fault_injection_s", r"test_fault_injection\.py` \(\d+ tests, (\d+) s on 2 CPU cores",
           "python -m pytest -q --durations=0 tests/trainer/test_fault_injection.py"),
    # ---- models, engines, TRL benchmark
    Figure("tiny_vocab", r"with a ([\d,]+)-token byte-level BPE",
           "python bench/readme_figures.py --cheap --only tiny_vocab", tiny_vocab, True),
    Figure("tiny_build_s", r"\| building the tiny model \| ~(\d+) s \|",
           "time mindrl build-tiny /tmp/tiny", tiny_build_s, exact=False),
    Figure("trl_update_overhead", r"in the update\s+\(([\d.]+ s vs [\d.]+ s)\)",
           "python bench/trl_compare.py --repeats 5 --profile DIR"),
    Figure("trl_profile_split", r"both sides spend (~\d+% in transformers `generate` and ~\d+%)",
           "python bench/trl_compare.py --repeats 5 --profile DIR"),
    Figure("trl_rollout_vllm", r"the vLLM engine was the lever \(rollout ([\d.]+ s -> [\d.]+ s)\)",
           "python bench/trl_compare.py --repeats 5   (its time/rollout, native vs vLLM)"),
    Figure("trl_quiet_ratios",
           r"the same with `--repeats 3`: ratio ([\d.]+ \(tiny\) and [\d.]+)",
           "python bench/trl_compare.py --repeats 3   (on an otherwise idle machine)"),
    Figure("vllm_small_step", r"small model ([\d.]+ s with vLLM)",
           "python bench/trl_compare.py --sizes small --no-trl --repeats 3"),
    # ---- MindSpore backend
    # ---- data tools
    Figure("gsm8k_rows_inspect", r"data: train\.parquet \((\d+) rows\)",
           "mindrl data inspect train.parquet   (verl's GSM8K train parquet; = the shared "
           "gsm8k_train rows)", gsm8k_train_rows, True),
    Figure("data_io_summary", r"holds (90-240 MiB instead\s+of 2\.3-2\.9 GiB) \(the table's",
           "python bench/data_io.py   (the ranges of its stream and list rows)"),
    # constants of the code that the docs quote (not measured; checked so they cannot drift)
    Figure("shuffle_window_rows", r"gathers them into windows\s+of at least ([\d,]+) rows",
           "python -c 'from mindrl.trainer.prompts import DEFAULT_WINDOW_ROWS as w; print(w)'",
           window_rows, True),
    Figure("prompt_cache", r"capped at ([\d,]+) entries",
           "python -c 'from mindrl.trainer.base import PROMPT_CACHE_SIZE as n; print(n)'",
           prompt_cache, True),
    # ---- analysis: the seed log's data pipeline
    Figure("clean_kept", r"--drop-urls --drop-cjk\s+# (\d+ of \d+) kept",
           "mindrl data clean ../shared/data/train/simplelr_qwen_level3to5_train.simplerl_pr57"
           ".jsonl clean.jsonl --drop-urls --drop-cjk", clean_kept),
    Figure("gsm8k_clean", r"GSM8K train too: (\d+) of \d+\)",
           "mindrl data clean ../shared/data/train/gsm8k_train.openai.jsonl c.jsonl --drop-urls "
           "--drop-cjk", gsm8k_train_rows, True),
    Figure("pipeline_all_correct", r"\| `data filter --lo 0 --hi 0\.875` \| (\d+ \| \d+) always",
           "the block above the table (mindrl data clean / eval / filter)",
           lambda: _pipeline("train")),
    Figure("pipeline_rs", r"\| `data filter --lo 0\.125 --hi 0\.875` \| (\d+ \| \d+) never",
           "the block above the table (mindrl data clean / eval / filter)",
           lambda: _pipeline("rs")),
    # ---- rewards
    Figure("grader_cases", r"(\d+) hand-written grading cases",
           "python -c 'import sys; sys.path.insert(0, \"tests/rewards\"); import test_math_grader "
           "as t; print(len(t.CASES))'", grader_cases, True),
    Figure("conformance_rows", r"\((\d+) rows ported\s+as data",
           "pytest tests/rewards/test_grader_conformance.py", conformance_rows, True),
    Figure("conformance_skipped", r"sources and commits named there; (\d+) rows\s+skipped",
           "pytest tests/rewards/test_grader_conformance.py", conformance_skipped, True),
    Figure("conformance_negatives", r"false accepts \(of (\d+) negative rows\)",
           "pytest tests/rewards/test_grader_conformance.py", conformance_negatives, True),
    Figure("conformance_eval", r"\| `EVAL_OPTIONS` \(evaluation\) \| (\d+/\d+ = [\d.]+%)",
           "pytest tests/rewards/test_grader_conformance.py",
           lambda: _conformance("EVAL_OPTIONS")),
    Figure("conformance_reward", r"\| `REWARD_OPTIONS` \(rewards, no fallback\) \| (\d+/\d+ = [\d.]+%)",
           "pytest tests/rewards/test_grader_conformance.py",
           lambda: _conformance("REWARD_OPTIONS")),
    Figure("conformance_left", r"The (\w+) remaining disagreements",
           "pytest tests/rewards/test_grader_conformance.py", conformance_left),
    Figure("verdicts_differ", r"differ from\s+plain math-verify's on (\d+) pairs",
           "python bench/readme_figures.py --cheap --only verdicts_differ   (= 1000 - the "
           "'verdicts equal' count bench/rewards.py prints)", verdicts_differ),
    Figure("inline_demo", r"\| demo: 512 rollouts, `arithmetic` \| ([\d,]+ \| [\d,]+) \|",
           "python bench/inline_scoring.py", lambda: _inline(0), exact=False),
    Figure("inline_math500", r"\| 500 MATH-500 answers, `accuracy` \| ([\d,]+ \| [\d,]+) \|",
           "python bench/inline_scoring.py", lambda: _inline(1), exact=False),
    Figure("inline_timeout_s", r"with `timeout: 1` scores `None` after ([\d.]+) s",
           "python bench/readme_figures.py --cheap --only inline_timeout_s", inline_timeout_s,
           exact=False),
    Figure("rewards_worst_latency", r"with a 2 s timeout: ([\d.]+ s)",
           "python bench/rewards.py   (its last line)"),
    Figure("peers_install_s", r"\| installing the peer frameworks for the tests \| (\d+ s) the first time",
           "time bash launch/install_peers_plugins.sh   (on a machine without tests/.peers)"),
    # ---- evaluation
    # ---- whole tables of measured numbers: every cell comes from the command named
    # ---- the experiment log in miniature (docs/reproduced.md)
    Figure("seed_passk", r"(?m)^\| N_neg \| mean pass@k R \|[^\n]*\n\|[-|: ]+\|\n((?:\|[^\n]*\n)+)",
           "python bench/seed_log.py passk", lambda: _seed_log("passk_lines"), True),
    Figure("seed_lengths",
           r"(?m)^\| response \(rewards 1 1 0 0\) \|[^\n]*\n\|[-|: ]+\|\n((?:\|[^\n]*\n)+)",
           "python bench/seed_log.py lengths", lambda: _seed_log("lengths_lines"), True),
    table("seed_template", "| evaluation template | accuracy |",
          "mindrl sft sft_tiny_demo ... logging.output_dir=runs/seed_sft; "
          "mindrl eval runs/seed_sft ... --template T (docs/benchmarks.md)"),
    table("seed_pairs", "| sampling temperature | avg@8 |",
          "mindrl eval runs/seed_sft ... --n 8 --temperature T; "
          "mindrl data pairs RUN -o pairs.jsonl --max-pairs 0 --pair-format pairwise"),
    table("head_memory", "| response tokens | train.logprob_chunk_tokens |",
          "python bench/head_memory.py --tokens 1024,8192 --chunks=-1; "
          "python bench/head_memory.py --tokens 1024 --chunks=0"),
    table("demo_table", "| model (seed 0) |", "bash launch/run_grpo.sh   (= mindrl demo; ~3 min)"),
    table("demo_seeds", "| seed | SFT |", "mindrl demo train.seed=N   (N = 0, 1, 2)"),
    table("demo_backends", "| backend | seed | SFT |",
          "bash launch/run_grpo.sh; MINDRL_BACKEND=mindspore bash launch/run_grpo.sh"),
    table("demo_countdown", "| task | rollout.seed | SFT (before) |",
          "mindrl sft sft_countdown_demo; mindrl train grpo_countdown_demo ... rollout.seed=N; "
          "mindrl demo --task countdown train.seed=N"),
    table("demo_kk", "| task | warm-up | rollout.seed |",
          "mindrl sft sft_kk_demo; mindrl train grpo_kk_demo ... rollout.seed=N"),
    table("demo_tool", "| rollout.seed | SFT: held-out accuracy",
          "mindrl sft sft_tool_demo; mindrl train grpo_tool_demo ... rollout.seed=N"),
    table("demo_variants", "| variant | command |", "the command in each row"),
    table("distill_result", "| greedy accuracy, 256 held-out problems |",
          "mindrl sft sft_tiny_demo checkpoint.every=600; mindrl train grpo_tiny_demo "
          "model.path=runs/sft_tiny_demo; mindrl train distill_tiny_demo"),
    table("distill_runs", "| run (40 steps; lr, rollouts a step) |",
          "mindrl train distill_tiny_demo with the overrides of each row"),
    table("trl_table", "| size | prompts x n x tokens |",
          "python bench/trl_compare.py --repeats 5   (TRL in bench/.trl_pkgs; ~15 min)"),
    table("backends_table", "| model | torch eager step |", "python bench/backends.py"),
    table("real_width", "| figure | mindrl | reference | ratio |",
          "python bench/real_width.py   (TRL from MINDRL_BENCH_TRL_DIR; ~25 min at load 8)"),
    table("backends_families", "| family (built-in model) | torch train step |",
          "python bench/backends.py --sizes tiny,tiny-qwen3,tiny-llama,tiny-qwen3-moe "
          "--rl-steps 0"),
    table("trl_mixed", "| model | prompts x n x max tokens (mixed) |",
          "python bench/trl_compare.py --no-vllm --mixed --repeats 3 ... (Benchmarks page)"),
    table("trl_mixed_variants", "| model | mindrl variant |",
          "python bench/trl_compare.py --no-vllm --mixed --repeats 3 ... (Benchmarks page)"),
    table("trl_async", "| model | TRL s/step |",
          "python bench/trl_compare.py --no-vllm --mixed --repeats 2 ... async variants"),
    table("trl_defaults", "| model | TRL GRPOTrainer s/step |",
          "python bench/trl_compare.py --no-vllm --mixed --repeats 2 --steps 3 --warmup 1 "
          "--variant packed:... --variant async_packed:..."),
    table("trl_sorted", "| size | TRL GRPOTrainer s/step | mindrl defaults s/step (ratio) |",
          "python bench/trl_compare.py --no-vllm --mixed --repeats 2 --steps 3 --warmup 1 "
          "--set logging.profile=true --sizes tiny,small --variant packed:train.padding_free=true"),
    table("async_rl_table", "| size | mode | s/step | x sync |",
          "python bench/async_rl.py --size tiny --steps 8 --warmup 2; python bench/async_rl.py "
          "--size small --steps 6 --warmup 2"),
    table("async_demo_table", "| mode | keys | held-out accuracy after GRPO",
          "mindrl train grpo_tiny_demo model.path=<sft>/checkpoints/step_001200/model "
          "+ each mode's keys (docs/benchmarks.md)"),
    table("rollout_table", "| model | rows x max tokens | side |",
          "python bench/rollout.py --reps 5"),
    table("packing_table", "| layout | micro-batches |", "python bench/packing.py"),
    table("slow_reward_table", "| reward | s/step (min-max) |",
          "python bench/trl_compare.py --sizes tiny --no-trl ... --variant slow... "),
    table("scaling_table", "| backend | response length |",
          "python bench/scaling.py --lengths 64,128,256,512,1024 --groups 4 --steps 3 --warmup 2 "
          "--repeats 2 --breakdown (MindSpore rows: the same with --backends mindspore)"),
    table("scaling_breakdown_table", "| backend | length | ms per 1k tokens (CPU) |",
          "python bench/scaling.py --lengths 64,128,256,512,1024 --groups 4 --steps 3 --warmup 2 "
          "--repeats 2 --breakdown (MindSpore rows: the same with --backends mindspore)"),
    table("lora_table", "| backend | mode | trainable params |",
          "python bench/lora.py --backends torch; python bench/lora.py --backends mindspore"),
    table("reward_server_table", "| clients | requests |",
          "python bench/reward_server.py --seconds 8"),
    table("data_io_table", "| file | reader |",
          "python bench/data_io.py; python bench/data_io.py --readers \"stream epoch\""),
    table("pipeline_table", "| stage | rows | dropped |",
          "the five commands of the block above the table (about 20 s)"),
    table("conformance_table", "| grader | agreement |",
          "pytest tests/rewards/test_grader_conformance.py"),
    table("inline_table", "| batch | in process", "python bench/inline_scoring.py"),
    table("rewards_table", "| scorer | pairs/s |", "python bench/rewards.py"),
    table("memory_plan_table", "| case | dtype | recompute |", "python bench/memory_plan.py"),
    Figure("memory_plan_cpu", r"On CPU it is\s+within ([\d.]+)% of the measured peak",
           "python bench/memory_plan.py  (the largest deviation it prints)"),
    table("eval_example_table", "| benchmark | problems |",
          "mindrl eval builtin:tiny --benchmarks math500,aime24,aime25,amc23,gsm8k --limit 2 --n 4 "
          "--max-new-tokens 64   (tests/test_readme.py compares, slow)"),
    table("eval_throughput_table", "| engine | Ray workers |",
          "python bench/eval_throughput.py --problems 64 --max-new-tokens 128"),
]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cheap", action="store_true", help="rerun the figures under ~1 minute")
    ap.add_argument("--only", default="", help="comma-separated figure names")
    a = ap.parse_args(argv)
    text = docs_text()
    wanted = {n for n in a.only.split(",") if n}
    unknown = wanted - {f.name for f in FIGURES}
    if unknown:
        ap.error(f"unknown figure(s) {', '.join(sorted(unknown))}; known: "
                 + ", ".join(f.name for f in FIGURES))
    status = 0
    print(f"{'figure':24s} {'docs':18s} {'now':26s} command")
    for f in FIGURES:
        if wanted and f.name not in wanted:
            continue
        old = f.old(text)
        shown_old = old[0] if len(old) == 1 else f"? ({len(old)} matches)"
        if "\n" in shown_old:            # a whole table
            shown_old = f"table, {shown_old.count(chr(10))} rows"
        if len(old) != 1:
            status = 1
        new = "-"
        if a.cheap and f.compute is not None:
            t0 = time.perf_counter()
            new = f.compute()
            if len(old) == 1 and new == old[0]:
                mark = ""
            elif f.exact:
                mark = "   <- differs"
                status = 1
            else:
                mark = "   (a timing: moves with the load)"
            shown_new = f"table, {new.count(chr(10))} rows" if "\n" in new else new
            new = f"{shown_new} ({time.perf_counter() - t0:.0f} s){mark}"
        elif f.compute is None:
            new = "(run its command)"
        print(f"{f.name:24s} {shown_old:18s} {new:26s} {f.command}")
    return status


if __name__ == "__main__":
    sys.exit(main())
