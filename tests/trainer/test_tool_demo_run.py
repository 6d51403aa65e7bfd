"""``mindrl demo --task tool``: the tool-use demo's recipes (sft_tool_demo, grpo_tool_demo) run
both stages end to end on the tiny model, with the real sandbox (plumbing in a few steps; the
measured runs are on docs/benchmarks.md)."""

import json

import pytest


@pytest.mark.slow
def test_tool_demo_recipes_run_two_steps(tmp_path, capsys):
    from mindrl.trainer.demo import run_demo

    quick = ["data.max_val_samples=8", "logging.tensorboard=false", "logging.progress_bar=false",
             "logging.plot=false"]
    result = run_demo(output_dir=str(tmp_path), task="tool",
                      overrides=quick + ["train.steps=2", "train.prompts_per_step=4",
                                         "validation.every=2", "train.seed=1"],
                      sft_overrides=quick + ["model.path=builtin:tiny", "train.steps=2",
                                             "validation.every=0"])
    assert 0.0 <= result["sft_accuracy"] <= 1.0 and 0.0 <= result["rl_accuracy"] <= 1.0
    assert 0.0 <= result["sft_calls"] <= 1.0 and 0.0 <= result["rl_calls"] <= 1.0
    out = capsys.readouterr().out
    assert "sandbox isolation:" in out and "| tool calls per sample |" in out
    sft = [json.loads(x) for x in (tmp_path / "sft" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in sft] == [1, 2]
    assert all(r["tools/masked_output_tokens"] > 0 for r in sft)   # 30% of 64 rows call
    grpo = [json.loads(x) for x in (tmp_path / "grpo" / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in grpo if r["step"] > 0]
    assert [r["step"] for r in steps] == [1, 2]
    assert all("tools/calls_per_sample" in r and "reward/tool_final_answer/mean" in r
               for r in steps)
    assert "val/tools/calls_per_sample" in steps[-1]
    for stage in ("sft", "grpo"):
        text = (tmp_path / stage / "config.yaml").read_text()
        assert "tool_mult:" in text and "enabled: true" in text
