"""DPO / SimPO training on generated arithmetic pairs (torch backend, tiny model)."""

import json
from pathlib import Path

import numpy as np
import pytest

from mindrl.config.loader import load_config
from mindrl.data.io import DataError


def write_pairs(path: Path, n: int = 32) -> Path:
    from rewards.arithmetic import generate

    with path.open("w") as f:
        for r in generate(n, seed=5, digits=2):
            wrong = str(int(r["answer"]) + 1)
            f.write(json.dumps({"prompt": r["problem"], "chosen": r["answer"],
                                "rejected": wrong}) + "\n")
    return path


def cfg_for(tmp_path, loss, *extra):
    pairs = write_pairs(tmp_path / "pairs.jsonl")
    return load_config(None, [
        "model.path=builtin:tiny", "model.chat_template=none", f"data.train_file={pairs}",
        f"preference.loss={loss}", "train.prompts_per_step=8", "train.micro_batch_size=4",
        "train.lr=3e-3", "rollout.max_new_tokens=8", "logging.tensorboard=false",
        "logging.progress_bar=false", "logging.plot=false", "checkpoint.save_final=false",
        "reward.num_workers=0", "reward.functions=[{name: arithmetic}]",
        f"logging.output_dir={tmp_path / 'run'}"] + list(extra))


def rows(run_dir):
    return [json.loads(x) for x in (Path(run_dir) / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_dpo_starts_at_log2_and_learns_the_preference(tmp_path):
    from mindrl.trainer.preference import PreferenceTrainer

    cfg = cfg_for(tmp_path, "dpo", "train.steps=20", "preference.beta=0.5")
    tr = PreferenceTrainer(cfg)
    tr.fit()
    tr.close()
    m = rows(tmp_path / "run")
    # policy == reference at step 1: every margin is 0, so the loss is -log sigmoid(0) = log 2
    assert m[0]["pref_loss"] == pytest.approx(np.log(2), abs=1e-5)
    assert m[0]["reward_margin"] == pytest.approx(0.0, abs=1e-5)
    assert m[-1]["pref_loss"] < 0.5 * np.log(2)
    assert m[-1]["reward_accuracy"] > 0.9


@pytest.mark.slow
def test_simpo_with_sft_term_needs_no_reference(tmp_path):
    from mindrl.trainer.preference import PreferenceTrainer

    cfg = cfg_for(tmp_path, "simpo", "train.steps=12", "preference.pref_ftx=0.5",
                  "preference.beta=2.0", "preference.gamma=0.5")
    tr = PreferenceTrainer(cfg)
    assert tr.backend.reference is None
    tr.fit()
    tr.close()
    m = rows(tmp_path / "run")
    assert m[-1]["sft_loss"] < m[0]["sft_loss"]
    assert m[-1]["reward_margin"] > m[0]["reward_margin"]
    # metrics are averaged over micro-batches (token-weighted), the loss summed: close, not equal
    assert m[0]["loss"] == pytest.approx(m[0]["pref_loss"] + 0.5 * m[0]["sft_loss"], rel=1e-2)


def test_pairs_file_missing_field_is_named(tmp_path):
    from mindrl.trainer.preference import load_pairs

    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"prompt": "1+1=", "chosen": "2"}) + "\n")
    with pytest.raises(DataError, match=r"bad.jsonl: line 1: no rejected field"):
        load_pairs(str(bad))
