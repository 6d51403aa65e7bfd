"""A user's first hour: the recipe catalogue, the own-data recipes, the summary a training
command ends with, eval of generated tasks, every checkpoint and several lengths, the curves
grid, a rerun of a multi-stage recipe with changed settings, and MindSpore's quiet logs.

Every command runs as a user types it (``python -m mindrl ...`` in a fresh folder)."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest


REPO = Path(__file__).resolve().parents[2]


def mindrl(*args, cwd, env_extra=None, drop=(), timeout=600):
    env = dict(os.environ, PYTHONPATH=str(REPO))
    for k in drop:
        env.pop(k, None)
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "-m", "mindrl", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


# ------------------------------------------------------------------ the recipe catalogue
def test_recipes_lists_every_recipe_with_job_kind_and_purpose(tmp_path):
    res = mindrl("recipes", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    on_disk = sorted(p.stem for p in (REPO / "yaml_configs").glob("*.yaml"))
    rows = {ln.split()[0]: ln for ln in lines[1:] if ln.strip() and not ln.startswith("run one")}
    assert sorted(rows) == on_disk
    assert re.search(r"sft_tiny_demo\s+sft\s+torch\s+builtin:mini \(CPU\)\s+demo", res.stdout)
    assert re.search(r"deepscaler_1\.5b\s+3 stages \(train\)\s+torch\s+1\.5B\s+full", res.stdout)
    assert re.search(r"grpo_own_math_tiny\s+train\s+torch\s+builtin:tiny \(CPU\)\s+smoke", res.stdout)
    for name, line in rows.items():             # every row has a purpose after the kind
        assert re.search(r"\b(demo|smoke|full)\s+\S", line), line
    demos = mindrl("recipes", "--kind", "demo", cwd=tmp_path).stdout
    assert "grpo_tiny_demo" in demos and "deepscaler_1.5b " not in demos


def test_train_help_lists_recipes_and_no_recipe_is_one_clear_line(tmp_path):
    res = mindrl("train", "--help", cwd=tmp_path)
    assert res.returncode == 0
    for name in ("grpo_own_math_tiny", "grpo_tiny_demo", "logic_rl_kk", "mindrl recipes"):
        assert name in res.stdout
    res = mindrl("train", cwd=tmp_path)
    assert res.returncode == 2
    err = res.stderr.strip().splitlines()
    assert len(err) == 1 and "needs a recipe" in err[0] and "grpo_own_math_tiny" in err[0]
    assert "overrides" not in err[0]


# ------------------------------------------------------------------ own data, summary
def _own_math_file(path: Path, n: int = 12) -> Path:
    """A user's file with their own column names and GSM8K-style answers."""
    rows = [{"q": f"Tom has {a} apples and buys {b} more. How many apples does he have?",
             "sol": f"{a} + {b} = {a + b}\n#### {a + b}"} for a, b in
            zip(range(3, 3 + n), range(20, 20 + n))]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.mark.slow
def test_own_math_recipe_trains_on_a_users_file_and_ends_with_a_summary(tmp_path):
    data = _own_math_file(tmp_path / "mine.jsonl")
    # the user's field names apply to their file; validation is a held-out tenth of it
    res = mindrl("train", "grpo_own_math_tiny", f"data.train_file={data}",
                 "data.prompt_field=q", "data.answer_field=sol", "logging.output_dir=runs/mine",
                 "checkpoint.every=1", cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    out = res.stdout
    summary = out[out.index("== finished: grpo_own_math_tiny, 2 steps"):]
    assert re.search(r"final metrics: val/accuracy \S+ .*reward/mean \S+", summary)
    assert "checkpoint:    runs/mine/checkpoints/step_000002/model" in summary
    assert "curves:        runs/mine/curves.png" in summary
    assert "metrics:       runs/mine/metrics.jsonl" in summary
    assert f"mindrl eval runs/mine --benchmarks {data} --problem-field q --answer-field sol" \
        in summary and "mindrl plot runs/mine" in summary
    assert (tmp_path / "runs/mine/checkpoints/step_000002/model").is_dir()
    rows = [json.loads(x) for x in (tmp_path / "runs/mine/metrics.jsonl").read_text().splitlines()]
    # the user's gold column was read (##### answers parsed): every reward was scorable
    assert [r["step"] for r in rows] == [1, 2] and all(r["reward/none"] == 0 for r in rows)
    # the checkpoint records the training system prompt, and the summary's eval line uses it
    system = "Please reason step by step, and put your final answer within \\boxed{}."
    meta = json.loads((tmp_path / "runs/mine/checkpoints/step_000002/model/mindrl_meta.json")
                      .read_text())
    assert meta["system_prompt"] == system and meta["chat_template"] == "model"
    line = next(x for x in summary.splitlines() if "mindrl eval" in x).split("#")[0].split()
    res = mindrl(*line[1:], "--limit", "2", "--max-new-tokens", "4", "--grade-workers", "0",
                 "--no-plot", "--output-dir", "ev", cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    results = json.loads((tmp_path / "ev/results.json").read_text())
    assert results["system_prompt"] == system
    assert results["benchmarks"]["mine"]["problems"] == 2


@pytest.mark.slow
def test_own_choice_recipe_pays_the_right_letter_only(tmp_path):
    from rewards import REWARDS

    acc = REWARDS.get("accuracy")(mode="choice")
    comps = [r"so \boxed{B}", r"\boxed{C}", "The answer is (B).", "Answer: D", "no letter"]
    assert acc(comps, answer=["B"] * 5) == [1.0, 0.0, 1.0, 0.0, 0.0]
    rows = [{"question": f"What is {a}+{a}? (A) {2 * a - 1} (B) {2 * a} (C) {2 * a + 1}",
             "answer": "B"} for a in range(2, 14)]
    f = tmp_path / "mcq.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    res = mindrl("train", "grpo_own_choice_tiny", f"data.train_file={f}",
                 "logging.output_dir=runs/mcq", cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "== finished: grpo_own_choice_tiny" in res.stdout


# ------------------------------------------------------------------ eval
def test_benchmark_list_keeps_a_generated_specs_commas():
    from mindrl.eval.settings import split_benchmarks

    assert split_benchmarks("arithmetic:digits=2,ops=+") == ["arithmetic:digits=2,ops=+"]
    assert split_benchmarks("math500,arithmetic:digits=2,ops=+-,slip=0,gsm8k,kk:people=3") == \
        ["math500", "arithmetic:digits=2,ops=+-,slip=0", "gsm8k", "kk:people=3"]
    assert split_benchmarks("a.jsonl, data/b.parquet") == ["a.jsonl", "data/b.parquet"]


@pytest.mark.slow
def test_eval_generated_task_named_folder_and_tie_break(tmp_path):
    base = ("eval", "builtin:tiny", "--benchmarks", "arithmetic:digits=2,ops=+", "--limit", "3",
            "--grade-workers", "0", "--no-plot")
    args = base + ("--max-new-tokens", "4")
    res = mindrl(*args, cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    folder = tmp_path / "runs/eval/builtin-tiny_arithmetic-digits=2-ops=+"
    assert (folder / "results.json").is_file()
    results = json.loads((folder / "results.json").read_text())
    assert results["benchmarks"]["arithmetic:digits=2,ops=+"]["problems"] == 3
    assert "| arithmetic:digits=2,ops=+" in res.stdout and f"run directory: runs/eval/{folder.name}" in res.stdout
    again = mindrl(*args, cwd=tmp_path)                 # same settings: resumes in place
    assert "3 already done" in again.stderr
    other = mindrl(*base, "--max-new-tokens", "5", cwd=tmp_path)   # other settings: a tie
    assert other.returncode == 0
    made = sorted(p.name for p in (tmp_path / "runs/eval").iterdir())
    assert len(made) == 2 and made[0] == folder.name and re.fullmatch(
        re.escape(folder.name) + r"-[0-9a-f]{8}", made[1])


@pytest.mark.slow
def test_eval_every_checkpoint_and_lengths_into_one_table(tmp_path):
    data = _own_math_file(tmp_path / "mine.jsonl")
    res = mindrl("train", "grpo_own_math_tiny", f"data.train_file={data}", f"data.val_file={data}",
                 "data.prompt_field=q", "data.answer_field=sol", "logging.output_dir=runs/r",
                 "checkpoint.every=1", "checkpoint.keep_last=5", "validation.every=0",
                 "logging.plot=false", cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    res = mindrl("eval", "runs/r", "--all-checkpoints", "--max-new-tokens", "4,8",
                 "--benchmarks", "arithmetic:digits=2,ops=+", "--limit", "2", "--grade-workers",
                 "0", "--no-plot", cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    sweep = tmp_path / "runs/eval/r_arithmetic-digits=2-ops=+_checkpoints+lengths"
    rec = json.loads((sweep / "sweep.json").read_text())
    assert [(r["step"], r["max_new_tokens"]) for r in rec["rows"]] == [(1, 4), (1, 8), (2, 4), (2, 8)]
    assert [r["model"] for r in rec["rows"]][::2] == [
        "runs/r/checkpoints/step_000001/model", "runs/r/checkpoints/step_000002/model"]
    for r in rec["rows"]:                                 # every response fits its length
        assert r["benchmarks"]["arithmetic:digits=2,ops=+"]["length"] <= r["max_new_tokens"]
    table = (sweep / "sweep.md").read_text().splitlines()
    assert len(table) == 2 + 4 and table[0].startswith("| step | model")
    assert (sweep / "sweep.png").read_bytes()[:4] == b"\x89PNG"
    # the newest checkpoint alone, without --all-checkpoints
    one = mindrl("eval", "runs/r", "--benchmarks", "arithmetic:digits=2,ops=+", "--limit", "2",
                 "--max-new-tokens", "4", "--grade-workers", "0", "--no-plot", cwd=tmp_path)
    assert one.returncode == 0 and "runs/eval/r-step2_arithmetic" in one.stdout
    bad = mindrl("eval", "builtin:tiny", "--all-checkpoints", cwd=tmp_path)
    assert bad.returncode == 2 and "--all-checkpoints needs a training run directory" in bad.stderr
    bad = mindrl("eval", "builtin:tiny", "--max-new-tokens", "8,x", cwd=tmp_path)
    assert bad.returncode == 2 and "'x' is not a positive integer" in bad.stderr


# ------------------------------------------------------------------ curves, stages, logs
def test_curves_are_a_grid_not_a_strip(tmp_path):
    from PIL import Image

    from mindrl.trainer.plots import grid_shape, plot_run

    assert [grid_shape(n) for n in (1, 2, 4, 5, 6, 7)] == [(1, 1), (1, 2), (2, 2), (2, 3),
                                                             (2, 3), (3, 3)]
    rows = [{"step": s, "reward/mean": s / 10, "accuracy": s / 20, "val/accuracy": s / 30,
             "response_length/mean": 10 + s, "kl": 0.01 * s, "entropy": 1 - s / 100,
             "time/rollout": 0.5, "time/update": 0.3, "profile/overhead_fraction": 0.1}
            for s in range(1, 11)]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = plot_run(tmp_path)
    w, h = Image.open(out[0]).size
    assert w / h < 2.5, (w, h)          # 7 panels (6 + phase time): 3 x 3, not a 1 x 7 strip
    assert h > 900


@pytest.mark.slow
def test_rerun_of_a_finished_stage_with_other_settings_is_refused(tmp_path):
    res = mindrl("train", "logic_rl_smoke", "logging.output_dir=runs/s", cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    same = mindrl("train", "logic_rl_smoke", "logging.output_dir=runs/s", cwd=tmp_path)
    assert same.returncode == 0 and same.stdout.count("finished earlier") == 2
    other = mindrl("train", "logic_rl_smoke", "logging.output_dir=runs/s",
                   "data.max_prompt_len=500", cwd=tmp_path)
    assert other.returncode == 2
    err = other.stderr.strip().splitlines()
    assert "stage 1/2 'ppl3' finished earlier" in err[0]
    assert any("data.max_prompt_len: 512 -> 500" in x for x in err)
    assert "Loading weights" not in other.stderr           # refused before any model loads


ME_LOG = re.compile(r"^\[(?:WARNING|INFO)\] ME", re.M)     # MindSpore's own log lines


@pytest.mark.slow
def test_mindspore_logs_quiet_unless_verbose(tmp_path):
    """A MindSpore training run prints none of MindSpore's own lines by default; with
    ``logging.verbose=true`` the backend lets them through. The verbose side is checked where the
    flag acts (``build_backend`` sets ``GLOG_v`` before MindSpore is first imported): building
    the MindSpore backend alone already logs dozens of such lines (30 measured), so a second
    training run would show nothing more."""
    res = mindrl("train", "grpo_own_math_tiny", "backend=mindspore", "train.steps=1",
                 "data.max_train_samples=8", "validation.every=0", "logging.output_dir=runs/m",
                 cwd=tmp_path, drop=("GLOG_v",))
    assert res.returncode == 0, res.stderr[-2000:]
    assert not ME_LOG.search(res.stderr), res.stderr[-1500:]
    build = ("from mindrl.backends.base import build_backend\n"
             "from mindrl.config.loader import load_config\n"
             "build_backend('mindspore', load_config('grpo_own_math_tiny', "
             "['backend=mindspore', 'logging.verbose=true']))\n")
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("GLOG_v", None)
    res = subprocess.run([sys.executable, "-c", build], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    assert ME_LOG.search(res.stderr), res.stderr[-1500:]
