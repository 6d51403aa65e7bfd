"""rollout.async_ahead=1: the batch of step k is sampled by the policy of step k-1 while step
k-1 updates (checked against the weights themselves), token TIS turns on by default, resume
equals an uninterrupted run, and the unsupported combinations are configuration errors."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from mindrl.config.loader import load_config
from mindrl.config.schema import ConfigError
from trainer_helpers import fit_stopped_by_sigterm

BASE = [
    "model.path=builtin:tiny", "model.chat_template=none",
    "data.train_file=arithmetic:digits=2,ops=+", "data.max_val_samples=8",
    "rollout.n=4", "rollout.max_new_tokens=6", "rollout.temperature=1.0",
    "train.prompts_per_step=4", "train.micro_batch_size=8", "train.lr=5e-3",
    "reward.num_workers=0", "reward.functions=[{name: 'trainer_helpers:parity_reward'}]",
    "logging.tensorboard=false", "logging.progress_bar=false", "logging.plot=false",
    "checkpoint.save_final=false", "rollout.async_ahead=1",
]


def cfg_for(tmp_path, *extra):
    return load_config(None, BASE + [f"logging.output_dir={tmp_path}"] + list(extra))


def rows(run_dir):
    return [json.loads(x) for x in (Path(run_dir) / "metrics.jsonl").read_text().splitlines()]


# ------------------------------------------------------------------ configuration (fast)
@pytest.mark.parametrize("extra, message", [
    (["backend=mindspore"], "rollout.async_ahead=1 needs backend=torch"),
    (["rollout.engine=vllm"], "rollout.async_ahead=1 needs rollout.engine=native"),
    (["tools.enabled=true"], "rollout.async_ahead=1 does not run multi-turn tool rollouts"),
    (["algorithm.dynamic_sampling.enabled=true"], "algorithm.dynamic_sampling.enabled=true"),
    (["reward.overlap_groups=true"], "reward.overlap_groups"),
    (["distributed.nproc=2"], "runs in one process"),
    (["device=cuda"], "rollout.async_sampler=process shares CPU memory"),
])
def test_unsupported_combinations_are_config_errors(tmp_path, extra, message):
    with pytest.raises(ConfigError, match=message.replace(".", r"\.")):
        cfg_for(tmp_path, *extra)


def test_depth_other_than_one_is_rejected(tmp_path):
    with pytest.raises(ConfigError, match="rollout.async_ahead"):
        cfg_for(tmp_path, "rollout.async_ahead=2")


def test_token_tis_is_the_default_correction_only_when_none_is_set(tmp_path):
    from mindrl.trainer.async_rollout import effective_config

    rc = effective_config(cfg_for(tmp_path)).algorithm.rollout_correction
    assert (rc.rollout_is, rc.rollout_is_threshold) == ("token", 2.0)
    kept = effective_config(cfg_for(tmp_path, "algorithm.rollout_correction.rollout_is=sequence",
                                    "algorithm.rollout_correction.rollout_is_threshold=3.0"))
    assert kept.algorithm.rollout_correction.rollout_is == "sequence"
    assert kept.algorithm.rollout_correction.rollout_is_threshold == 3.0
    tis = effective_config(cfg_for(tmp_path, "algorithm.tis_cap=2.0")).algorithm
    assert tis.rollout_correction.rollout_is is None and tis.tis_cap == 2.0
    off = effective_config(cfg_for(tmp_path, "rollout.async_ahead=0"))
    assert off.algorithm.rollout_correction.rollout_is is None


def test_pending_batch_survives_json_exactly():
    from mindrl.trainer.async_rollout import rollouts_from_json, rollouts_to_json
    from mindrl.types import Rollouts

    lp = [np.array([-0.1234567, -3.3e-8], np.float32), np.array([-17.25], np.float32)]
    ro = Rollouts([[1, 2], [1, 2]], [[5, 6], [7]], lp, ["stop", "length"],
                  np.array([0, 0]), ["ab", "c"])
    back = rollouts_from_json(json.loads(json.dumps(rollouts_to_json(ro))))
    assert back.response_ids == [[5, 6], [7]] and back.finish_reasons == ["stop", "length"]
    for a, b in zip(lp, back.logprobs):
        assert b.dtype == np.float32 and np.array_equal(a, b)
    assert back.group_index.tolist() == [0, 0] and back.texts == ["ab", "c"]


# ------------------------------------------------------------------ the loop (slow)
@pytest.mark.slow
@pytest.mark.parametrize("sampler", ["process", "thread"])
def test_batch_k_is_sampled_by_the_policy_before_update_k_minus_1(tmp_path, monkeypatch,
                                                                  sampler):
    """Record each step's batch and the weights it trains; the engine's log-probs of step k's
    tokens must be those of the weights step k-1 started from (theta_k-1), not theta_k."""
    from mindrl.trainer.rl import RLTrainer

    tr = RLTrainer(cfg_for(tmp_path, "train.steps=4", "validation.every=2",
                           f"rollout.async_sampler={sampler}"))
    # thread: the engine holds its own copy; process: the child does, the trainer's engine
    # (validation) is the policy itself
    assert (tr.engine.model is tr.backend.model) == (sampler == "process")
    seen = []
    original = RLTrainer.update

    def update(self, batch):
        seen.append((batch, {k: v.detach().clone() for k, v in
                             self.backend.model.state_dict().items()}))
        return original(self, batch)

    monkeypatch.setattr(RLTrainer, "update", update)
    tr.fit()
    m = rows(tmp_path)
    assert [r["rollout/staleness"] for r in m] == [0.0, 1.0, 1.0, 1.0]
    assert all(0 < r["rollout_corr/is_weight_mean"] < 2 for r in m)   # token TIS ran
    assert "val/accuracy" in m[1] and "val/accuracy" in m[3]
    if sampler == "thread":     # the validation after step 4 sampled with the final weights
        engine_state = tr.engine.model.state_dict()
        for name, v in tr.backend.model.state_dict().items():
            torch.testing.assert_close(engine_state[name], v, rtol=0, atol=0)
    temp = tr.cfg.rollout.temperature

    def logp_under(state, batch):
        tr.backend.model.load_state_dict(state)
        return tr.backend.logprobs(batch.tokens, temperature=temp)

    for k, (batch, theta_k) in enumerate(seen):
        mask = batch.tokens.response_mask > 0
        engine = batch.rollout_logp[mask]
        own = np.abs(logp_under(theta_k, batch)[mask] - engine).max()
        if k == 0:                          # sampled in line, by the weights it trains
            assert own < 1e-4
            continue
        prev = np.abs(logp_under(seen[k - 1][1], batch)[mask] - engine).max()
        assert prev < 1e-4, (k, prev)      # sampled by theta_k-1 ...
        assert own > 1e-3, (k, own)        # ... which differs from the theta_k it trains
    tr.close()


@pytest.mark.slow
def test_resume_equals_uninterrupted_async_run(tmp_path, monkeypatch):
    from mindrl.trainer.rl import RLTrainer

    extra = ["train.steps=4", "checkpoint.every=100"]
    full = tmp_path / "full"
    tr = RLTrainer(cfg_for(full, *extra))
    tr.fit()
    w_full = {k: v.detach().clone() for k, v in tr.backend.model.state_dict().items()}
    tr.close()

    part = tmp_path / "part"
    tr = RLTrainer(cfg_for(part, *extra))
    fit_stopped_by_sigterm(tr, monkeypatch)   # SIGTERM during the 2nd step: checkpoint at 2
    state = json.loads((part / "checkpoints" / "step_000002" / "trainer.json").read_text())
    assert state["async_rollout"]["version"] == 1      # batch 3, sampled by theta_1

    tr = RLTrainer(cfg_for(part, *extra))
    tr.fit()
    w_part = {k: v.detach().clone() for k, v in tr.backend.model.state_dict().items()}
    tr.close()
    a, b = rows(full), rows(part)
    assert [r["step"] for r in b] == [1, 2, 3, 4]
    assert [r["rollout/staleness"] for r in b] == [0.0, 1.0, 1.0, 1.0]
    for ra, rb in zip(a, b):
        for key in ("reward/mean", "loss", "grad_norm", "response_length/mean",
                    "rollout_corr/is_weight_mean"):
            assert ra[key] == pytest.approx(rb[key], rel=1e-5, abs=1e-6), (ra["step"], key)
    for k in w_full:
        torch.testing.assert_close(w_full[k], w_part[k], rtol=1e-5, atol=1e-6)
