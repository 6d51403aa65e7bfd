"""Saved rollouts (``logging.save_rollouts``): the records, which steps, the size cap, atomic
files, the RL trainer's hook end to end, and ``mindrl show-rollouts``."""

import json
import logging

import numpy as np
import pytest

from mindrl.analyze.rollouts import AnalyzeError, format_rollouts, load_step, saved_steps
from mindrl.cli import main
from mindrl.trainer.base import Scored
from mindrl.trainer.rollout_log import RolloutLog, rollout_records
from mindrl.types import Rollouts


class ByteTok:
    """Token id = byte value (enough for decode in the records)."""

    def decode(self, ids, **_):
        return bytes(ids).decode("latin-1")


def _batch():
    ro = Rollouts(prompt_ids=[[104, 105]] * 2 + [[111, 107]] * 2,
                  response_ids=[[65, 66, 67], [68], [69, 70], [71, 72, 73]],
                  logprobs=[np.array([-0.5, -1.0, -1.5]), np.array([-2.0]),
                            np.array([-0.1, -0.2]), np.array([-0.3, -0.4, -0.5])],
                  finish_reasons=["stop", "length", "stop", "stop"],
                  group_index=np.array([0, 0, 1, 1]), texts=["ABC", "D", "EF", "GHI"])
    sc = Scored(np.array([1.5, 0.0, 1.0, 0.5]),
                {"accuracy": np.array([1.0, 0.0, 1.0, np.nan]),
                 "format": np.array([0.5, 0.0, 0.0, 0.5])}, {})
    adv = np.array([[0.7, 0.7, 0.7], [-0.7, 0, 0], [0.2, 0.4, 0], [0.1, 0.1, 0.1]], np.float32)
    mask = np.array([[1, 1, 1], [1, 0, 0], [1, 1, 0], [1, 1, 1]], np.float32)
    rows = [{"problem": "hi", "answer": "1"}, {"problem": "ok", "answer": "2"}]
    return rows, ro, sc, adv, mask


def test_records_hold_what_a_reader_needs():
    rows, ro, sc, adv, mask = _batch()
    recs = rollout_records(7, rows, ro, sc, adv, mask, ByteTok())
    r = recs[1]
    assert (r["step"], r["index"], r["group"], r["sample"], r["group_size"]) == (7, 1, 0, 1, 2)
    assert r["prompt"] == "hi" and r["problem"] == "hi" and r["answer"] == "1"
    assert r["response"] == "D" and r["response_ids"] == [68] and r["finish_reason"] == "length"
    assert r["rewards"] == {"accuracy": 0.0, "format": 0.0} and r["reward"] == 0.0
    assert r["advantage"] == pytest.approx(-0.7) and "token_advantages" not in r
    assert recs[3]["rewards"]["accuracy"] is None            # unscorable -> null, not NaN
    assert recs[2]["advantage"] == pytest.approx(0.3)         # mean over its 2 tokens
    assert recs[2]["token_advantages"] == pytest.approx([0.2, 0.4])
    assert recs[0]["rollout_logprobs"] == [-0.5, -1.0, -1.5]
    json.dumps(recs, allow_nan=False)                         # strict JSON


def test_steps_saved_cap_and_atomic_files(tmp_path, caplog):
    rows, ro, sc, adv, mask = _batch()
    log = RolloutLog(tmp_path, every=2, max_mb=1.0)
    saved = [s for s in range(1, 7) if log.save(s, rows, ro, sc, adv, mask, ByteTok())]
    assert saved == [1, 2, 4, 6]
    assert saved_steps(tmp_path) == [1, 2, 4, 6]
    assert not [p for p in (tmp_path / "rollouts").iterdir() if p.name.startswith(".")]
    size = (tmp_path / "rollouts" / "step_000001.jsonl").stat().st_size
    # a cap that holds two steps: the third is refused with a warning, then nothing more
    small = RolloutLog(tmp_path / "capped", every=1, max_mb=2.5 * size / 2 ** 20)
    with caplog.at_level(logging.WARNING, logger="mindrl.train"):
        got = [s for s in range(1, 6) if small.save(s, rows, ro, sc, adv, mask, ByteTok())]
    assert got == [1, 2] and small.stopped
    assert "save_rollouts_max_mb" in caplog.text and "no longer saved" in caplog.text
    assert saved_steps(tmp_path / "capped") == [1, 2]
    # a resumed run counts what is there and may rewrite a step it redoes
    again = RolloutLog(tmp_path / "capped", every=1, max_mb=2.5 * size / 2 ** 20)
    assert again.save(2, rows, ro, sc, adv, mask, ByteTok()) is not None
    assert again.save(3, rows, ro, sc, adv, mask, ByteTok()) is None


def test_config_rejects_bad_values():
    from mindrl.config.loader import load_config
    from mindrl.config.schema import ConfigError

    assert load_config(None, ["logging.save_rollouts=5"]).logging.save_rollouts == 5
    with pytest.raises(ConfigError, match="logging.save_rollouts=-1"):
        load_config(None, ["logging.save_rollouts=-1"])
    with pytest.raises(ConfigError, match="save_rollouts_max_mb=0"):
        load_config(None, ["logging.save_rollouts_max_mb=0"])


def test_show_rollouts_prints_rewards_and_advantage(tmp_path, capsys):
    rows, ro, sc, adv, mask = _batch()
    RolloutLog(tmp_path, every=1, max_mb=1).save(1, rows, ro, sc, adv, mask, ByteTok())
    text = format_rollouts(load_step(tmp_path, 1), width=80)
    assert text.count("PROMPT:") == 2 and text.count("RESPONSE:") == 4
    assert "gold answer: 2" in text
    assert "reward 1.5 (accuracy=1, format=0.5)  advantage +0.700  3 tokens, stop" in text
    assert "accuracy=None" in text and "advantage -0.700  1 tokens, length" in text
    one = format_rollouts(load_step(tmp_path, 1), group=1, width=80)
    assert "GHI" in one and "ABC" not in one
    with pytest.raises(AnalyzeError, match="no group 5; groups: 0, 1"):
        format_rollouts(load_step(tmp_path, 1), group=5)
    assert main(["show-rollouts", str(tmp_path), "--step", "1", "--limit", "1",
                 "--width", "80"]) == 0
    out = capsys.readouterr().out
    assert "ABC" in out and "EF" not in out
    assert main(["show-rollouts", str(tmp_path), "--step", "4"]) == 2
    assert "step 4 was not saved; saved steps: 1" in capsys.readouterr().err
    (tmp_path / "rollouts" / "step_000009.jsonl").write_text('{"step": 9}\n')
    with pytest.raises(AnalyzeError, match="step_000009.jsonl:1: .*no field 'group'"):
        load_step(tmp_path, 9)


@pytest.mark.slow
def test_rl_trainer_saves_rollouts(tmp_path):
    """The hook in RLTrainer.run_step: steps 1 and 2 of 3 saved (every 2), rewards and
    lengths equal to the step's logged metrics."""
    from mindrl.config.loader import load_config
    from mindrl.trainer.rl import RLTrainer

    cfg = load_config(None, [
        "model.path=builtin:tiny", "model.chat_template=none",
        "data.train_file=arithmetic:digits=2,ops=+", "rollout.n=4", "rollout.max_new_tokens=6",
        "train.prompts_per_step=2", "train.steps=3", "reward.num_workers=0",
        "reward.functions=[{name: arithmetic}]", "logging.tensorboard=false",
        "logging.progress_bar=false", "logging.plot=false", "checkpoint.save_final=false",
        "logging.save_rollouts=2", f"logging.output_dir={tmp_path}"])
    tr = RLTrainer(cfg)
    tr.fit()
    tr.close()
    assert saved_steps(tmp_path) == [1, 2]
    metrics = {r["step"]: r for r in map(json.loads, (tmp_path / "metrics.jsonl").read_text()
                                         .splitlines())}
    for s in (1, 2):
        recs = load_step(tmp_path, s)
        assert len(recs) == 8 and {r["group"] for r in recs} == {0, 1}
        assert np.mean([r["reward"] for r in recs]) == pytest.approx(metrics[s]["reward/mean"])
        assert np.mean([len(r["response_ids"]) for r in recs]) == \
            pytest.approx(metrics[s]["response_length/mean"])
        for r in recs:
            assert len(r["rollout_logprobs"]) == len(r["response_ids"]) and r["prompt"]
            assert tr.tokenizer.encode(r["prompt"], add_special_tokens=False) == r["prompt_ids"]
            assert set(r["rewards"]) == {"arithmetic"}
