"""The seed log's data recipes as commands, on real eval output of a CPU demo model.

The module fixture trains the demo model (builtin:mini) for 150 SFT steps on 1-digit addition
(its imperfect teacher forgets carries in half of the problems that have one), then samples 8
answers to each of 20 held-out problems twice (temperature 1.0 and 0.6): pass rates between 0
and 1, as real runs have. Each command's output is checked against counts computed here from
the samples.jsonl files directly.
"""

import json
import os
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TASK = "arithmetic:digits=1,ops=+"


def mindrl(*args, cwd):
    return subprocess.run([sys.executable, "-m", "mindrl", *map(str, args)], cwd=cwd,
                          env=dict(os.environ, PYTHONPATH=str(REPO)), capture_output=True,
                          text=True, timeout=900)


@pytest.fixture(scope="module")
def evals(tmp_path_factory):
    root = tmp_path_factory.mktemp("seed")
    res = mindrl("sft", "sft_tiny_demo", f"data.train_file={TASK}", "data.max_val_samples=20",
                 "train.steps=150", "logging.output_dir=runs/sft", "validation.every=0",
                 "logging.progress_bar=false", "logging.plot=false", "logging.tensorboard=false",
                 cwd=root)
    assert res.returncode == 0, res.stderr[-2000:]
    model = root / "runs/sft/checkpoints/step_000150/model"
    runs = []
    for i, temp in enumerate(("1.0", "0.6")):
        res = mindrl("eval", model, "--benchmarks", TASK, "--limit", "20", "--n", "8",
                     "--temperature", temp, "--max-new-tokens", "4", "--grade-workers", "0",
                     "--no-plot", "--seed", str(i), "--output-dir", f"runs/ev{i}", cwd=root)
        assert res.returncode == 0, res.stderr[-2000:]
        runs.append(root / f"runs/ev{i}")
    return root, runs


def _samples(run):
    return [json.loads(x) for x in (run / "samples.jsonl").read_text().splitlines()]


def _rates(recs):
    by = defaultdict(list)
    for r in recs:
        by[r["problem_id"]].append(float(r["score"] or 0))
    return {p: sum(v) / len(v) for p, v in by.items()}


def _read(path):
    return [json.loads(x) for x in Path(path).read_text().splitlines()]


@pytest.mark.slow
def test_the_demo_model_solves_some_problems_sometimes(evals):
    _, runs = evals
    rates = _rates(_samples(runs[0]))
    assert len(rates) == 20
    assert any(0 < r < 1 for r in rates.values())     # the recipes below need such problems


def test_pass_rate_sft_pools_runs_with_exclusive_bounds(evals):
    root, runs = evals
    pooled = _samples(runs[0]) + _samples(runs[1])
    rates = _rates(pooled)
    mid = {p for p, r in rates.items() if 0 < r < 1}
    res = mindrl("data", "rejection", *runs, "--lo", "0", "--hi", "1", "-o", "rft.jsonl",
                 cwd=root)
    assert res.returncode == 0, res.stderr
    rows = _read(root / "rft.jsonl")
    assert {r["problem_id"] for r in rows} == {p for p in mid}     # every mid problem has a right one
    expect = Counter()
    for p in mid:                          # distinct correct texts per problem, both runs pooled
        expect[p] = len({" ".join(r["text"].split()) for r in pooled
                         if r["problem_id"] == p and r["score"] == 1 and
                         r["finish_reason"] == "stop"})
    assert Counter(r["problem_id"] for r in rows) == expect
    assert all(r["pass_rate"] == pytest.approx(rates[r["problem_id"]]) for r in rows)
    assert f"pooled 2 runs ({len(pooled)} samples of 20 problems)" in res.stdout
    assert f"out_of_bounds={20 - len(mid)}" in res.stdout
    # inclusive bounds keep the always-solved too; a cap of 1 keeps one row per problem
    res = mindrl("data", "rejection", *runs, "--lo", "0", "--hi", "1", "--inclusive",
                 "--max-per-problem", "1", "-o", "all.jsonl", cwd=root)
    solved = {p for p, r in rates.items() if r > 0}
    assert sorted(r["problem_id"] for r in _read(root / "all.jsonl")) == sorted(solved)
    bad = mindrl("data", "rejection", *runs, "--lo", "0.5", "--hi", "0.5", "-o", "x.jsonl",
                 cwd=root)
    assert bad.returncode == 2 and "keep no pass rate" in bad.stderr


def test_pairs_with_the_solved_rule_in_both_formats(evals):
    root, runs = evals
    recs = _samples(runs[1])
    rates = _rates(recs)
    res = mindrl("data", "pairs", runs[1], "-o", "pairs.jsonl", "--pair-format", "pairwise",
                 cwd=root)
    assert res.returncode == 0, res.stderr
    rows = _read(root / "pairs.jsonl")
    solved = sum(r == 1 for r in rates.values())
    assert f"solved_problems={solved}" in res.stdout
    for r in rows:
        assert set(r) >= {"id", "prompt", "completion_1", "completion_2", "preferred"}
        if r["pair_type"] == "short_vs_long":
            assert rates[r["problem_id"]] == 1 and r["chosen_length"] < r["rejected_length"]
        else:
            assert 0 < rates[r["problem_id"]] < 1
    wrong_side = {p for p, v in rates.items() if 0 < v < 1}
    assert {r["problem_id"] for r in rows if r["pair_type"] == "correct_vs_wrong"} == wrong_side


@pytest.mark.slow
def test_cot_length_filter_counts_tokens_of_the_named_tokenizer(evals, tiny_dir):
    from tokenizers import Tokenizer

    from mindrl.models.tiny import resolve_model_path

    root, runs = evals
    tok = Tokenizer.from_file(str(Path(resolve_model_path("builtin:mini")) / "tokenizer.json"))
    recs = _samples(runs[0])
    n_tok = [len(tok.encode(r["text"], add_special_tokens=False).ids) for r in recs]
    cut = sorted(n_tok)[len(n_tok) // 2]                # the median length: some on each side
    res = mindrl("data", "rejection", runs[0], "-o", "long.jsonl", "--no-dedupe",
                 "--tokenizer", "builtin:mini", "--cot-longer-than", cut, cwd=root)
    assert res.returncode == 0, res.stderr
    short = sum(n <= cut for n in n_tok)
    assert f"dropped {short} too short, 0 too long" in res.stdout
    kept = _read(root / "long.jsonl")
    want = sum(n > cut and r["score"] == 1 and r["finish_reason"] == "stop"
               for n, r in zip(n_tok, recs))
    assert len(kept) == want and all(r["cot_tokens"] > cut for r in kept)
    bad = mindrl("data", "pairs", runs[0], "-o", "x.jsonl", "--cot-longer-than", "3", cwd=root)
    assert bad.returncode == 2 and "--tokenizer" in bad.stderr


@pytest.mark.slow
def test_cot_is_the_think_block_and_clean_filters_by_it(tmp_path):
    from mindrl.data.tools import cot_text

    assert cot_text("<think>a b</think> 4") == "a b"
    assert cot_text("  <think>x</think>") == "x"
    assert cot_text("no think block: 4") == "no think block: 4"
    rows = [{"response": "<think>" + " ".join(["w"] * n) + "</think> 4", "n": n}
            for n in (1, 5, 9, 20)]
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    res = mindrl("data", "clean", src, tmp_path / "out.jsonl", "--tokenizer", "builtin:mini",
                 "--cot-longer-than", "4", "--cot-shorter-than", "15", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert [r["n"] for r in _read(tmp_path / "out.jsonl")] == [5, 9]
    assert "too short 1, too long 1" in res.stdout


def test_sample_random_and_stratified(shared_data, tmp_path):
    src = shared_data / "train/simplelr_qwen_level3to5_train.simplerl_pr57.jsonl"
    res = mindrl("data", "sample", src, "-o", "s.jsonl", "--n", "2446", "--seed", "1",
                 "--by", "level", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    rows = _read(tmp_path / "s.jsonl")
    # the file has 2514 / 2648 / 3361 rows of levels 3 / 4 / 5 (8523): 2446 * share =
    # 721.5 / 759.97 / 964.56; floors 721 + 759 + 964 = 2444, the 2 left go to the largest
    # remainders (levels 4 and 5)
    assert Counter(r["level"] for r in rows) == {3: 721, 4: 760, 5: 965}
    assert "level=5: 965 of 3361" in res.stdout
    order = [json.loads(x)["question"] for x in src.read_text().splitlines()]
    pos = {q: i for i, q in enumerate(order)}
    idx = [pos[r["question"]] for r in rows]
    assert idx == sorted(idx)                               # written in file order
    again = mindrl("data", "sample", src, "-o", "s2.jsonl", "--n", "2446", "--seed", "1",
                   "--by", "level", cwd=tmp_path)
    assert again.returncode == 0 and _read(tmp_path / "s2.jsonl") == rows
    a = mindrl("data", "sample", src, "-o", "r1.jsonl", "--n", "50", "--seed", "3", cwd=tmp_path)
    b = mindrl("data", "sample", src, "-o", "r2.jsonl", "--n", "50", "--seed", "4", cwd=tmp_path)
    assert a.returncode == b.returncode == 0
    r1, r2 = _read(tmp_path / "r1.jsonl"), _read(tmp_path / "r2.jsonl")
    assert len(r1) == len(r2) == 50 and r1 != r2
    bad = mindrl("data", "sample", src, "-o", "x.jsonl", "--n", "9000", cwd=tmp_path)
    assert bad.returncode == 2 and "more than its 8523 rows" in bad.stderr
    bad = mindrl("data", "sample", src, "-o", "x.jsonl", "--n", "5", "--by", "lvl", cwd=tmp_path)
    assert bad.returncode == 2 and "line 1: --by lvl" in bad.stderr


def test_allocation_by_largest_remainder():
    from mindrl.data.sample import allocate

    assert allocate({"a": 50, "b": 30, "c": 20}, 10) == {"a": 5, "b": 3, "c": 2}
    assert allocate({"a": 1, "b": 1, "c": 1}, 2) == {"a": 1, "b": 1, "c": 0}
    assert sum(allocate({"x": 7, "y": 13, "z": 29}, 17).values()) == 17


@pytest.mark.slow
def test_a_stage_trains_on_problems_rated_by_the_previous_stage(evals):
    """data.from_stage=eval+filter: stage 2 rates its training file with stage 1's final model
    (8 samples each) and trains on the problems with 0 < pass rate < 1; a rerun skips both."""
    root, _ = evals
    warm = root / "runs/sft/checkpoints/step_000150/model"
    problems = [{"problem": f"{a}+{b}=", "answer": str(a + b)} for a in range(4) for b in range(6)]
    # and four the model can never be paid for (no two 1-digit numbers add up to 100)
    problems += [{"problem": f"{a}+9=", "answer": "100"} for a in range(6, 10)]
    (root / "add.jsonl").write_text("".join(json.dumps(r) + "\n" for r in problems))
    (root / "fs.yaml").write_text(f"""
extends: grpo_tiny_demo.yaml
model: {{path: {warm}}}
data: {{train_file: add.jsonl, prompt_field: problem, answer_field: answer, val_file: "",
        max_val_samples: 0}}
train: {{steps: 1, prompts_per_step: 4, micro_batch_size: 32}}
validation: {{every: 0}}
logging: {{output_dir: runs/fs, tensorboard: false, plot: false, progress_bar: false}}
stages:
  - {{name: keep, run: sft, data: {{train_file: add.jsonl, response_field: answer,
                                     max_response_len: 64}},
      train: {{steps: 1, lr: 1.0e-9}}}}
  - {{name: rl, data: {{from_stage: eval+filter, resample: {{n: 8, temperature: 1.0}}}}}}
""")
    res = mindrl("train", "fs.yaml", cwd=root)
    assert res.returncode == 0, res.stderr[-2000:]
    stage = root / "runs/fs/stage_2_rl"
    samples = [json.loads(x) for x in (stage / "resample/eval/samples.jsonl").read_text().splitlines()]
    assert len(samples) == 8 * len(problems)
    rates = _rates(samples)
    kept = _read(stage / "resample/train.jsonl")
    assert sorted(r["problem_id"] for r in kept) == sorted(p for p, v in rates.items() if 0 < v < 1)
    assert 0 < len(kept) <= len(problems) - 4
    assert not {r["problem"] for r in kept} & {f"{a}+9=" for a in range(6, 10)}
    done = json.loads((stage / "resample/done.json").read_text())
    assert done["kept"] == len(kept) and done["too_easy"] == sum(v == 1 for v in rates.values())
    cfg = (stage / "config.yaml").read_text()
    assert f"train_file: {stage.relative_to(root)}/resample/train.jsonl" in cfg
    assert "kept %d of %d problems" % (len(kept), len(problems)) in res.stdout
    again = mindrl("train", "fs.yaml", cwd=root)
    assert again.returncode == 0 and again.stdout.count("finished earlier") == 2
    bad = mindrl("train", "grpo_tiny_demo", "data.from_stage=eval+filter", cwd=root)
    assert bad.returncode == 2 and "needs a previous stage" in bad.stderr
