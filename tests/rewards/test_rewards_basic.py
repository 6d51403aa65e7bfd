"""Open-R1 ports, GSM8K, registry and doctests: hand-computed expected values."""

import doctest
import math
import pickle

import pytest

import rewards
from rewards import REWARDS, resolve_reward
from rewards.gsm8k import extract_gsm8k_answer, gsm8k_accuracy, gsm8k_format, gsm8k_gold
from rewards.open_r1 import (Accuracy, Cosine, KimiLength, RepetitionPenalty, SoftOverlong,
                             format_reward, reasoning_steps, tag_count)


@pytest.mark.parametrize("mod", ["rewards.math_grader", "rewards.open_r1", "rewards.registry",
                                 "rewards.knights_knaves", "rewards.countdown", "rewards.gsm8k",
                                 "rewards.pool", "rewards.answer_value", "rewards.arithmetic",
                                 "rewards.demo_tasks"])
def test_doctests(mod):
    import importlib

    res = doctest.testmod(importlib.import_module(mod))
    assert res.failed == 0


def test_no_framework_imports():
    import subprocess
    import sys

    code = ("import sys, rewards, rewards.pool; "
            "print(any(m in sys.modules for m in ('torch', 'mindspore', 'vllm')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_accuracy_none_for_unparseable_gold():
    assert Accuracy()([r"\boxed{1}", "nothing", r"\boxed{2}"], answer=["}{", "}{", "2"]) == \
        [None, None, 1.0]
    assert Accuracy()(["x"], solution=["5"]) == [0.0]  # Open-R1's column name works too
    with pytest.raises(ValueError, match="answer"):
        Accuracy()(["x"])


def test_format_and_tag_count():
    good = "<think>\nreason\n</think>\n<answer>\n42\n</answer>"
    assert format_reward([good, good + "\ntrailing", "<think>\nr\n</think><answer>\n4\n</answer>"]) \
        == [1.0, 0.0, 0.0]
    assert tag_count([good, good + "<think>\n", "<answer>\n1"]) == [1.0, 0.75, 0.0]


def test_reasoning_steps():
    text = "1. a\n2. b\n- c\n* d"
    assert reasoning_steps([text, "Step 1: x", "Next, y"]) == [1.0, 1 / 3, 1 / 3]


def test_kimi_length_hand_computed():
    comps = [r"\boxed{1}", r"\boxed{2}", r"\boxed{1}", r"\boxed{2}", "no gold"]
    # lengths 100 (right), 200 (wrong), 300 (right), 150 (wrong); min 100 max 300
    res = KimiLength()(comps, answer=["1", "1", "1", "1", "}{"],
                       completion_lengths=[100, 200, 300, 150, 5])
    assert res == [0.5, 0.0, -0.5, 0.25 * 0 + min(0.0, 0.5 - 50 / 200), None]
    assert KimiLength()([r"\boxed{1}"] * 2, answer=["1", "2"], completion_lengths=[7, 7]) == [0.0, 0.0]
    assert KimiLength.batch_level


def test_cosine_hand_computed():
    cos = Cosine(max_len=100)
    # correct at L=50: 0.5 + 0.5*0.5*(1+cos(pi/2)) = 0.75; wrong at L=50: -0.5 + 0.5*(-0.5)*1 = -0.75
    res = cos([r"\boxed{1}", r"\boxed{2}", r"\boxed{1}"], answer=["1", "1", "1"],
              completion_lengths=[50, 50, 400])
    assert res[0] == pytest.approx(0.75) and res[1] == pytest.approx(-0.75)
    assert res[2] == pytest.approx(0.5)  # clipped at max_len, no wrap-around
    # characters when no token lengths: len=9 of 1000 -> close to max_value_correct
    assert cos.max_len == 100 and Cosine()([r"\boxed{1}"], answer=["1"])[0] == pytest.approx(
        0.5 + 0.25 * (1 + math.cos(math.pi * 9 / 1000)))


def test_repetition_penalty():
    rp = RepetitionPenalty(ngram_size=2, max_penalty=-0.5)
    # "a a a a": bigrams (a,a) x3, 1 unique -> 1 - 1/3 = 2/3 -> -1/3
    assert rp(["a a a a", "A b", "a"]) == [pytest.approx(-1 / 3), 0.0, 0.0]
    with pytest.raises(ValueError):
        RepetitionPenalty(max_penalty=0.5)
    try:
        import jieba  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="jieba"):
            RepetitionPenalty(language="zh")


def test_soft_overlong():
    so = SoftOverlong(max_length=1000, buffer=200)
    assert so([""] * 4, completion_lengths=[800, 900, 1000, 5000]) == [0.0, -0.5, -1.0, -1.0]
    with pytest.raises(ValueError, match="completion_lengths"):
        so(["x"])


def test_gsm8k():
    assert gsm8k_gold("x <<1+2=3>>3\n#### 1,250") == "1250"
    assert extract_gsm8k_answer("He pays 3*4 = 12, so the answer is 12.") == "12"
    assert extract_gsm8k_answer("Total: $1,200.50 in the end") == "1200.5"
    assert extract_gsm8k_answer("no number") is None
    gold = ["... #### 18"] * 4
    assert gsm8k_accuracy(["so 18", "#### 18.00", "<answer>17</answer>", "none"], answer=gold) == \
        [1.0, 1.0, 0.0, 0.0]
    assert gsm8k_accuracy(["1"], answer=["#### none"]) == [None]
    assert gsm8k_format(["<think>a</think> <answer>7</answer>", "<answer>7</answer>",
                         "<think>a</think><answer>seven</answer>"]) == [1.0, -1.0, -1.0]


def test_registry_names_and_miss_message():
    names = rewards.reward_names()
    for n in ["accuracy", "format", "tag_count", "reasoning_steps", "length", "cosine",
              "repetition_penalty", "soft_overlong", "kk_format", "kk_answer",
              "countdown_format", "countdown_equation", "gsm8k_accuracy", "gsm8k_format"]:
        assert n in names
    with pytest.raises(KeyError) as e:
        resolve_reward("acuracy")
    assert "did you mean 'accuracy'" in str(e.value) and "tag_count" in str(e.value)


def test_resolve_params_and_paths_and_pickle():
    cos = resolve_reward("cosine", {"max_len": 50})
    assert isinstance(cos, Cosine) and cos.max_len == 50
    assert pickle.loads(pickle.dumps(cos)).max_len == 50
    fn = resolve_reward("rewards.open_r1:tag_count")
    assert fn is tag_count and resolve_reward("rewards.open_r1.tag_count") is tag_count
    part = resolve_reward("countdown_equation", {})
    assert part is REWARDS.get("countdown_equation")
    with pytest.raises(TypeError, match="unknown params"):
        resolve_reward("format", {"bogus": 1})
    with pytest.raises(KeyError, match="cannot import"):
        resolve_reward("no_such_pkg.mod:fn")
