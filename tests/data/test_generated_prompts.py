"""Generated prompt sets (countdown:gen, kk:gen) and the Countdown file, scored by the real
rewards through the trainer's column passing: the gold answer written as a model would write it
gets the full score, a wrong one does not."""

import itertools

import numpy as np
import pytest

from mindrl.config.schema import DataConfig
from mindrl.data import DataError, load_prompts
from mindrl.data.prompts import parse_prompt_spec
from mindrl.trainer.base import score_rollouts
from mindrl.trainer.prompts import build_streams
from mindrl.types import Rollouts
from rewards import build_scorer
from rewards.countdown import safe_eval, solve_countdown

COUNTDOWN_REWARDS = [{"name": "countdown_format"}, {"name": "countdown_equation"}]
KK_REWARDS = [{"name": "kk_format"}, {"name": "kk_answer"}]


def score(rows, completions, functions):
    """Components of the rewards for one completion per row, as the RL loop computes them."""
    ro = Rollouts(prompt_ids=[[1]] * len(rows), response_ids=[[1, 2]] * len(rows),
                  logprobs=[np.zeros(2)] * len(rows), finish_reasons=["stop"] * len(rows),
                  group_index=np.arange(len(rows)), texts=list(completions))
    with build_scorer({"functions": functions, "num_workers": 0}) as scorer:
        return score_rollouts(scorer, rows, ro).components


def wrong_equation(nums, target):
    """All the numbers, each once, in an equation that misses the target."""
    for ops in itertools.product("+-*", repeat=len(nums) - 1):
        eq = str(nums[0]) + "".join(f" {o} {n}" for o, n in zip(ops, nums[1:]))
        if safe_eval(eq)[0] != target:
            return eq
    raise AssertionError("no wrong equation")


def test_countdown_generated_rows_score_through_the_real_rewards():
    rows = load_prompts("countdown:gen,count=40,seed=3")
    assert len(rows) == 40
    r = rows[0]
    assert set(r) == {"problem", "answer", "nums", "target", "solution"}
    assert r["answer"] == str(r["target"]) and 3 <= len(r["nums"]) <= 4
    assert r["problem"].startswith(f"Using the numbers {r['nums']}, create an equation that "
                                   f"equals {r['target']}.")
    assert "<answer> </answer>" in r["problem"]
    gold = [f"Let me try.</think>\n<answer>{x['solution']}</answer>" for x in rows]
    comps = score(rows, gold, COUNTDOWN_REWARDS)
    assert comps["countdown_format"].tolist() == [1.0] * 40
    assert comps["countdown_equation"].tolist() == [1.0] * 40
    bad = [f"Hmm.</think>\n<answer>{wrong_equation(x['nums'], x['target'])}</answer>"
           for x in rows]
    comps = score(rows, bad, COUNTDOWN_REWARDS)
    assert comps["countdown_format"].tolist() == [1.0] * 40
    assert comps["countdown_equation"].tolist() == [0.0] * 40
    untagged = score(rows[:2], [x["solution"] for x in rows[:2]], COUNTDOWN_REWARDS)
    assert untagged["countdown_format"].tolist() == [0.0, 0.0]
    assert untagged["countdown_equation"].tolist() == [0.0, 0.0]


def test_countdown_options_seed_offset_and_cap():
    a = load_prompts("countdown:count=8,numbers=3")
    assert a == load_prompts("countdown:gen,numbers=3,count=8")          # seeded, order-free
    assert all(len(r["nums"]) == 3 for r in a)
    assert load_prompts("countdown:count=5,numbers=3,offset=3") == a[3:]
    assert load_prompts("countdown:count=8,numbers=3,seed=1") != a
    assert load_prompts("countdown:count=8,numbers=3", max_rows=2) == a[:2]
    small = load_prompts("countdown:count=30,numbers=2,max_number=9,max_target=20")
    assert all(max(r["nums"]) <= 9 and 1 <= r["target"] <= 20 for r in small)


def test_countdown_file_rows_carry_the_reward_columns(shared_data):
    rows = load_prompts("countdown", shared_data, max_rows=12)
    assert rows[0]["nums"] == [30, 100, 93] and rows[0]["target"] == 23
    assert "<think> </think>" in rows[0]["problem"]
    gold = [f"ok</think>\n<answer>{solve_countdown(r['nums'], r['target'])}</answer>"
            for r in rows]
    assert score(rows, gold, COUNTDOWN_REWARDS)["countdown_equation"].tolist() == [1.0] * 12
    bad = [f"ok</think>\n<answer>{wrong_equation(r['nums'], r['target'])}</answer>"
           for r in rows]
    assert score(rows, bad, COUNTDOWN_REWARDS)["countdown_equation"].tolist() == [0.0] * 12


def test_kk_generated_rows_score_through_the_real_rewards():
    rows = load_prompts("kk:count=24,people=2-5,seed=7")
    assert len(rows) == 24 and {r["n_people"] for r in rows} == {2, 3, 4, 5}
    r = rows[0]
    assert set(r) == {"problem", "answer", "names", "solution", "quiz", "n_people"}
    assert r["problem"].startswith(r["quiz"]) and "<answer>" in r["problem"]
    assert r["answer"].startswith(f"(1) {r['names'][0]} is a {r['solution'][0]}")
    gold = [f"<think>Suppose...</think>\n<answer>{x['answer']}</answer>" for x in rows]
    comps = score(rows, gold, KK_REWARDS)
    assert comps["kk_format"].tolist() == [1.0] * 24
    assert comps["kk_answer"].tolist() == [2.0] * 24

    def flip_first(x):
        roles = list(x["solution"])
        roles[0] = "knave" if roles[0] == "knight" else "knight"
        return "\n".join(f"({i + 1}) {n} is a {ro}" for i, (n, ro) in
                         enumerate(zip(x["names"], roles)))

    wrong = [f"<think>Suppose...</think>\n<answer>{flip_first(x)}</answer>" for x in rows]
    assert score(rows, wrong, KK_REWARDS)["kk_answer"].tolist() == [-1.5] * 24
    broken = score(rows[:1], [f"<answer>{rows[0]['answer']}</answer>"], KK_REWARDS)
    assert broken["kk_format"].tolist() == [-1.0] and broken["kk_answer"].tolist() == [-2.0]


def test_kk_options():
    rows = load_prompts("kk:count=6,people=3")
    assert all(r["n_people"] == 3 for r in rows)
    assert load_prompts("kk:count=3,people=3,offset=3") == rows[3:]
    assert load_prompts("kk:count=6,people=3,seed=1") != rows
    assert len(load_prompts("kk", max_rows=4)) == 4           # bare name: the defaults


def test_bad_specs_name_the_spec_and_option():
    assert parse_prompt_spec("kk:gen, count=3") == ("kk", {"count": "3"})
    cases = {"kk:colour=red": "unknown option.*colour; valid: count, offset, people, seed",
             "kk:people=9": "people='9' must lie within 2-8",
             "kk:people=5-3": "people='5-3'",
             "countdown:count=many": "count='many' is not an integer",
             "countdown:count=0": "count=0 must be >= 1",
             "countdown:gen,3": "option '3' must look like key=value",
             "kq:gen": "unknown prompt set 'kq:gen'.*countdown:gen, kk:gen"}
    for spec, msg in cases.items():
        with pytest.raises(DataError, match=msg):
            load_prompts(spec)


def test_recipe_data_section_builds_a_stream():
    train, val = build_streams(DataConfig(train_file="countdown:count=50",
                                          val_file="countdown:count=10,offset=50"), seed=0)
    batch = train.take(4)
    assert len(val) == 10 and {"nums", "target", "solution"} <= set(batch[0])
    assert [r["problem"] for r in val] == \
        [r["problem"] for r in load_prompts("countdown:count=60")[50:]]
    train, _ = build_streams(DataConfig(train_file="kk:count=20,people=3"), seed=0)
    assert len(train.take(3)) == 3


def test_recipe_countdown_gen_spelling():
    train, _ = build_streams(DataConfig(train_file="countdown:gen"), seed=0)
    assert len(train.take(2)) == 2
