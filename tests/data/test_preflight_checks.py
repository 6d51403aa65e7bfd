"""The preflight's reward self-check and batch-size warning: every built-in task's gold answers,
written as ideal completions, earn its rewards' maxima; a reward that cannot pay a right answer
on the data stops the run before the model loads, with one line."""

import dataclasses
import json
import logging
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mindrl.config.loader import load_config
from mindrl.data.io import DataError

REPO = Path(__file__).resolve().parents[2]
GSM8K = REPO.parent / "shared" / "data" / "train" / "gsm8k_train.openai.jsonl"
if not GSM8K.is_file():
    GSM8K = Path("/work/shared/data/train/gsm8k_train.openai.jsonl")


def preflight_lines(caplog, recipe, *overrides, level=logging.INFO):
    from mindrl.models.tiny import resolve_model_path
    from mindrl.trainer.prompts import build_streams

    cfg = load_config(recipe, list(overrides))
    if cfg.model.path.startswith("builtin:"):
        cfg = dataclasses.replace(cfg, model=dataclasses.replace(
            cfg.model, path=resolve_model_path(cfg.model.path)))
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="mindrl.data"):
        build_streams(cfg.data, cfg.train.seed, cfg=cfg, job="rl")
    return [r.getMessage() for r in caplog.records if r.levelno == level]


def reward_line(lines):
    found = [x for x in lines if x.startswith("reward check: ")]
    assert len(found) == 1, lines
    return found[0]


KK = ["data.train_file=kk:gen,count=20,people=3", "data.max_prompt_len=1024",
      "model.chat_template=none",
      "reward.functions=[{name: kk_format}, {name: kk_answer}, {name: repetition_penalty}]"]
MATH = ["data.train_file=math_l3to5", "data.max_prompt_len=4096", "data.max_train_samples=16",
        "model.chat_template=qwen25-math-cot",
        "data.system_prompt=Reason in <think> </think> tags, then answer in <answer> </answer> "
        "tags, with the final answer in \\boxed{}.",
        "reward.functions=[{name: format}, {name: tag_count}, {name: accuracy}, "
        "{name: cosine, params: {max_len: 16}}, {name: length}, {name: reasoning_steps}]"]


@pytest.mark.parametrize("recipe,overrides,expect", [
    ("grpo_tiny_demo", [], "(bare answer) earn the maximum of arithmetic 64/64 rows"),
    ("grpo_kk_demo", [], "(bare answer) earn the maximum of kk_roles 64/64 rows"),
    ("grpo_countdown_demo", [],
     "(compact <think>/<answer> tags) earn the maximum of countdown_equation 64/64 rows"),
    ("grpo_tool_demo", [], "(bare answer) earn the maximum of tool_final_answer 64/64 rows"),
    ("grpo_gsm8k_smoke", [], "(<think>/<answer> tags) earn the maximum of kk_format 8/8, "
                             "gsm8k_accuracy 8/8 rows"),
    ("countdown_mini_r1_smoke", [], "(compact <think>/<answer> tags) earn the maximum of "
                                    "countdown_format 8/8, countdown_equation 8/8 rows"),
    ("simplerl_zoo_smoke", [], "(\\boxed{}) earn the maximum of accuracy 8/8 rows"),
    ("grpo_tiny_demo", KK, "(<think>/<answer> tags) earn the maximum of kk_format 20/20, "
                           "kk_answer 20/20 rows; not checked (no gold answer to write): "
                           "repetition_penalty"),
    ("grpo_tiny_demo", MATH, "(<answer>\\boxed{}</answer> tags) earn the maximum of format 16/16, "
                             "tag_count 16/16, accuracy 16/16, cosine 16/16 rows; not checked "
                             "(no gold answer to write): length, reasoning_steps"),
])
def test_every_builtin_task_pays_its_gold_answers(caplog, recipe, overrides, expect):
    line = reward_line(preflight_lines(caplog, recipe, *overrides))
    assert line == "reward check: the gold answers written as completions " + expect


def test_a_format_reward_the_template_makes_unpayable_stops(caplog):
    # r1-think opens <think> in the prompt; Logic-RL's kk_format wants it in the completion
    with pytest.raises(DataError, match=r"^data: format reward 'kk_format' earns its maximum 1 "
                                        r"on only 0 of the first 20 gold answers written as "
                                        r"completions in the format the other rewards read "
                                        r"\(<think>/<answer> tags\) \(the prompt already opens "
                                        r"<think>, so a completion does not start with it\); "
                                        r"e\.g\. data: row 1: 'Let me work it out step by "
                                        r"step\.\\n</think>\\n<answer>\\n\(1\) "):
        preflight_lines(caplog, "grpo_tiny_demo", *KK, "model.chat_template=r1-think")


def gsm8k_first_number_hits(n=64):
    """How many of the first ``n`` GSM8K rationales name the final answer as their first
    integer (what the arithmetic reward reads), computed from the raw file."""
    hits = 0
    for line in GSM8K.read_text().splitlines()[:n]:
        raw = json.loads(line)["answer"]
        body, final = raw.rsplit("####", 1)
        body = re.sub(r"<<[^>]*>>", "", body)
        first = re.search(r"-?\d+", body)
        hits += first is not None and first.group(0) == final.strip().replace(",", "")
    return hits


def test_a_reward_that_cannot_pay_the_data_stops_before_the_model_loads(tmp_path):
    """The arithmetic demo's reward (the first integer of the completion) on GSM8K, whose right
    answers reason before they answer: one line naming the reward, the field and a row."""
    env = dict(os.environ, OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    t0 = time.monotonic()
    res = subprocess.run([sys.executable, "-m", "mindrl", "train", "grpo_tiny_demo",
                          f"data.train_file={GSM8K}", "data.max_prompt_len=512",
                          "train.steps=1", f"logging.output_dir={tmp_path / 'run'}"],
                         env=env, cwd=REPO, timeout=300, capture_output=True, text=True)
    took = time.monotonic() - t0
    hits = gsm8k_first_number_hits()
    assert hits < 0.9 * 64
    assert res.returncode == 2, res.stderr[-3000:]
    last = res.stderr.strip().splitlines()[-1]
    assert last.endswith(
        f"{GSM8K}: reward 'arithmetic' cannot pay a right answer on this data: the gold answer "
        f"(field 'answer') written as a completion (bare answer) earns its maximum 1 on only "
        f"{hits} of the first 64 rows (e.g. {GSM8K}: line 1: 'Natalia sold 48/2 = 24 clips in "
        f"May.\\nNatalia sold 48+24 = 72 clips altogether in April and May.\\n72' scores 0.0); "
        f"check reward.functions against the data"), last
    assert "Loading weights" not in res.stderr + res.stdout
    assert not (tmp_path / "run" / "metrics.jsonl").exists()
    assert took < 60, took


def test_more_prompts_per_step_than_rows_warns(caplog):
    warn = preflight_lines(caplog, "grpo_tiny_demo", f"data.train_file={GSM8K}",
                           "data.max_prompt_len=512", "data.max_train_samples=5",
                           "reward.functions=[{name: gsm8k_accuracy}]", level=logging.WARNING)
    assert warn == [f"warning: train.prompts_per_step=64 is more than the 5 rows of {GSM8K}: "
                    f"every step repeats rows (each about 12.8 times)"]
    assert preflight_lines(caplog, "grpo_tiny_demo", f"data.train_file={GSM8K}",
                           "data.max_prompt_len=512", "data.max_train_samples=64",
                           "reward.functions=[{name: gsm8k_accuracy}]",
                           level=logging.WARNING) == []


def _own_file(path, answers):
    rows = [{"problem": f"Tom has {a - 7} apples and buys 7 more. How many apples now?",
             "answer": ans} for a, ans in answers]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_self_check_answers_in_the_format_the_prompt_asks_for(caplog, tmp_path):
    """grpo_own_math asks for \\boxed{}: the gold's final answer is written boxed (a GSM8K
    rationale's number after ####, not the rationale)."""
    f = _own_file(tmp_path / "mine.jsonl",
                  [(a, f"{a - 7} + 7 = {a}\n#### {a}" if a % 2 else str(a))
                   for a in range(10, 40)])
    line = reward_line(preflight_lines(caplog, "grpo_own_math_tiny", f"data.train_file={f}",
                                       "data.val_split=0"))
    assert line == ("reward check: the gold answers written as completions (\\boxed{}) earn "
                    "the maximum of accuracy 30/30 rows")


def test_self_check_refuses_golds_with_no_final_answer(caplog, tmp_path):
    """A gold that is prose matches itself as a string, but no model answer (\\boxed{31},
    <answer>31</answer>) can earn the reward: the run stops before the model loads."""
    from rewards.registry import resolve_reward

    gold = "We work it out step by step, which gives 31 in total."
    acc = resolve_reward("accuracy", {})
    assert acc(["\\boxed{31}", "<answer>31</answer>"], answer=[gold, gold]) == [0.0, 0.0]
    f = _own_file(tmp_path / "mine.jsonl", [(31, gold)] * 30)
    with pytest.raises(DataError) as e:
        preflight_lines(caplog, "grpo_own_math_tiny", f"data.train_file={f}", "data.val_split=0")
    msg = str(e.value)
    assert msg == (f"{f}: 30 of the first 30 gold answers (field 'answer') have no final answer "
                   f"a reward can compare, e.g. {f}: line 1: '{gold}'; give the final answer "
                   f"alone (31, \\frac{{1}}{{2}}, B) or end a worked solution with '#### 31'")
