"""The CPU demo (``bash launch/run_grpo.sh`` = ``mindrl demo``): its task generator, and a short
end-to-end run of the pipeline (SFT warm-up -> checkpoint -> GRPO from it -> table, curves).

The full demo (mini model, 1200 SFT steps, 60 GRPO steps, a few minutes) is what shows RL
beating SFT; the short run here checks the plumbing in seconds, not the gain."""

import json
import random

import pytest

from mindrl.trainer.prompts import arithmetic_options, build_streams
from rewards.arithmetic import add_without_carry, arithmetic_reward, format_answer, make_problem


def test_add_without_carry_and_reversed_answers():
    assert add_without_carry(47, 38) == 75          # 7+8=15 -> 5, carry forgotten
    assert add_without_carry(96, 78) == 164         # leftmost column written in full
    assert add_without_carry(12, 34) == 46          # no carry: the true sum
    assert format_answer(432) == "432" and format_answer(432, reverse=True) == "234"
    assert format_answer(-120, reverse=True) == "-021"
    rows = [make_problem(random.Random(i), 3, "+", reverse=True) for i in range(20)]
    for r in rows:
        a, b = r["problem"][:-1].split("+")
        assert int(r["answer"][::-1]) == int(a) + int(b)
        assert arithmetic_reward([r["answer"]], answer=[r["answer"]]) == [1.0]


def test_teacher_slip_only_touches_the_demonstration():
    from mindrl.config.schema import DataConfig

    train, val = build_streams(DataConfig(train_file="arithmetic:digits=2,ops=+,slip=0.5",
                                          max_val_samples=64), seed=0)
    rows = train.take(4000)
    for r in rows:
        a, b = map(int, r["problem"][:-1].split("+"))
        assert int(r["answer"]) == a + b                                   # gold always right
        assert r["teacher"] in (r["answer"], str(add_without_carry(a, b)))
    wrong = sum(r["teacher"] != r["answer"] for r in rows) / len(rows)
    assert 0.18 < wrong < 0.27          # 0.5 x P(ones carry) = 0.5 x 0.45
    assert all(r["teacher"] == r["answer"] for r in
               build_streams(DataConfig(train_file="arithmetic:digits=2,ops=+"), 0)[0].take(200))
    with pytest.raises(ValueError, match="unknown option"):
        arithmetic_options({"digitz": "2"})
    with pytest.raises(ValueError, match="slip"):
        arithmetic_options({"slip": "1.5"})


@pytest.mark.slow
def test_demo_pipeline_end_to_end_short(tmp_path):
    from mindrl.trainer.demo import run_demo

    quick = ["data.max_val_samples=32", "logging.tensorboard=false", "logging.progress_bar=false"]
    result = run_demo(
        output_dir=str(tmp_path),
        overrides=quick + ["train.steps=3", "train.prompts_per_step=8", "train.micro_batch_size=64",
                           "validation.every=3",
                           "checkpoint.every=0", "train.seed=3"],
        # the tiny model for speed (GRPO then starts from the SFT checkpoint)
        sft_overrides=quick + ["model.path=builtin:tiny", "train.steps=30", "validation.every=0"])
    model = next((tmp_path / "sft" / "checkpoints").iterdir()) / "model"
    assert (model / "config.json").is_file() and (model / "model.safetensors").is_file()
    meta = json.loads((model / "mindrl_meta.json").read_text())
    assert meta["step"] == 30
    assert 0.0 <= result["sft_accuracy"] <= 1.0 and 0.0 <= result["rl_accuracy"] <= 1.0
    assert 0.0 < result["sft_seconds"] < result["seconds"]
    assert (tmp_path / "grpo" / "curves.png").stat().st_size > 0
    # the seed reached both stages; GRPO started from the SFT checkpoint
    for stage in ("sft", "grpo"):
        assert "seed: 3" in (tmp_path / stage / "config.yaml").read_text()
    assert str(model) in (tmp_path / "grpo" / "config.yaml").read_text()


@pytest.mark.slow
@pytest.mark.parametrize("task", ["kk", "countdown"])
def test_demo_other_tasks_run_both_stages(tmp_path, task):
    """``mindrl demo --task kk|countdown``: the compact tasks' recipes run end to end (plumbing,
    a few steps on the tiny model; the measured runs are on docs/benchmarks.md)."""
    from mindrl.trainer.demo import run_demo

    quick = ["data.max_val_samples=16", "logging.tensorboard=false", "logging.progress_bar=false",
             "logging.plot=false"]
    result = run_demo(output_dir=str(tmp_path), task=task,
                      overrides=quick + ["train.steps=2", "train.prompts_per_step=4",
                                         "validation.every=2", "train.seed=1"],
                      sft_overrides=quick + ["model.path=builtin:tiny", "train.steps=3",
                                             "validation.every=0"])
    assert 0.0 <= result["sft_accuracy"] <= 1.0 and 0.0 <= result["rl_accuracy"] <= 1.0
    spec = "kk_compact:" if task == "kk" else "countdown_compact:"
    for stage in ("sft", "grpo"):
        assert spec in (tmp_path / stage / "config.yaml").read_text()
