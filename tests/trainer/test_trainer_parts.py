"""Trainer pieces that need no model: prompt streams, checkpoints, dynamic-sampling filter,
the arithmetic task."""

import dataclasses
import json
import os

import numpy as np
import pytest

from rewards.arithmetic import arithmetic_reward, generate
from mindrl.trainer.base import group_all_equal
from mindrl.trainer.checkpoint import (latest_checkpoint, list_checkpoints, read_trainer_state,
                                       save_checkpoint)
from mindrl.trainer.prompts import ArithmeticStream, ListStream, build_streams


class FakeBackend:
    """Writes files the way a backend does; counts calls."""

    def __init__(self, fail_in_state=False):
        self.fail_in_state = fail_in_state

    def save_pretrained(self, d):
        os.makedirs(d)
        open(os.path.join(d, "model.safetensors"), "w").write("w")

    def save_state(self, d):
        if self.fail_in_state:
            raise RuntimeError("disk full")
        os.makedirs(d)
        open(os.path.join(d, "optim.bin"), "w").write("o")


def test_list_stream_restores_position_exactly():
    rows = [{"problem": str(i), "answer": str(i)} for i in range(7)]
    a = ListStream(rows, seed=3)
    a.take(5)
    state = a.state()
    expect = [r["problem"] for r in a.take(9)]     # crosses an epoch boundary
    b = ListStream(rows, seed=3)
    b.restore(state)
    assert [r["problem"] for r in b.take(9)] == expect
    # each epoch is a permutation of all rows
    c = ListStream(rows, seed=3)
    assert sorted(r["problem"] for r in c.take(7)) == [str(i) for i in range(7)]


def test_arithmetic_stream_excludes_validation_and_resumes():
    from mindrl.config.schema import DataConfig

    cfg = DataConfig(train_file="arithmetic:digits=2,ops=+", max_val_samples=50)
    train, val = build_streams(cfg, seed=0)
    assert len(val) == 50 and len({r["problem"] for r in val}) == 50
    seen = {r["problem"] for r in train.take(3000)}
    assert not seen & {r["problem"] for r in val}
    s = ArithmeticStream(0, 2, "+")
    s.take(10)
    st = s.state()
    nxt = s.take(4)
    s2 = ArithmeticStream(0, 2, "+")
    s2.restore(st)
    assert s2.take(4) == nxt


def test_arithmetic_generator_and_reward_by_hand():
    rows = generate(20, seed=1, digits=3)
    for r in rows:
        a, b = r["problem"][:-1].split("+")
        assert int(r["answer"]) == int(a) + int(b)
    assert arithmetic_reward(["1458<|im_end|>", " 1458", "1457", ""],
                             answer=["1458"] * 4) == [1.0, 1.0, 0.0, 0.0]


def test_group_all_equal():
    rewards = np.array([1, 1, 1, 0, 1, 0, 0, 0, 0.5])
    groups = np.array([0, 0, 0, 1, 1, 1, 2, 2, 2])
    assert group_all_equal(rewards, groups).tolist() == [True, False, False]


def test_checkpoints_are_atomic_and_pruned(tmp_path):
    root = tmp_path / "ck"
    for step in (1, 2, 3):
        save_checkpoint(root, step, FakeBackend(), {"step": step}, keep_last=2)
    assert [p.name for p in list_checkpoints(root)] == ["step_000002", "step_000003"]
    # a crash while writing leaves no half checkpoint that resume would pick
    with pytest.raises(RuntimeError):
        save_checkpoint(root, 4, FakeBackend(fail_in_state=True), {"step": 4}, keep_last=2)
    assert latest_checkpoint(root).name == "step_000003"
    assert read_trainer_state(latest_checkpoint(root)) == {"step": 3}
    # the next successful save removes the leftover temporary directory
    save_checkpoint(root, 5, FakeBackend(), {"step": 5}, keep_last=2,
                    meta={"chat_template": "none"})
    assert not list(root.glob(".tmp_*"))
    meta = json.loads((root / "step_000005" / "model" / "mindrl_meta.json").read_text())
    assert meta == {"chat_template": "none"}


@pytest.mark.slow
def test_prompt_cache_is_bounded(tiny_model_dir, monkeypatch):
    """A million-row data set must not leave a million encoded prompts in memory."""
    from transformers import AutoTokenizer

    import mindrl.trainer.base as base
    from mindrl.config.schema import RunConfig

    monkeypatch.setattr(base, "PROMPT_CACHE_SIZE", 3)
    t = object.__new__(base.Trainer)
    t.cfg, t._prompt_cache = RunConfig(), {}
    t.cfg = dataclasses.replace(t.cfg, model=dataclasses.replace(t.cfg.model,
                                                                   chat_template="none"))
    t.tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    for i in range(10):
        ids = t.encode(f"{i} + {i} = ?")
        assert ids == t.tokenizer.encode(f"{i} + {i} = ?", add_special_tokens=False)
        assert len(t._prompt_cache) <= 3
