"""PPO with a critic (algorithm.adv_estimator=gae) in the RL loop: 2 steps + resume + 2 steps
equals 4 steps on both backends (the critic's weights and optimizer are in the checkpoint),
critic warm-up leaves the policy alone, and PPO learns on the CPU addition demo."""

import numpy as np
import pytest

from test_rl_loop import cfg_for, rows, weights
from trainer_helpers import fit_stopped_by_sigterm

PPO = ["algorithm.adv_estimator=gae", "algorithm.gamma=0.9", "algorithm.lam=0.8",
       "critic.lr=1e-3", "critic.cliprange_value=0.2",
       "reward.functions=[{name: 'trainer_helpers:parity_reward'}]"]


def critic_weights(tr):
    return {k: v.copy() for k, v in tr.backend.critic.arrays().items()}


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["torch", "mindspore"])
def test_ppo_resume_2_plus_2_equals_4(tmp_path, monkeypatch, backend):
    from mindrl.trainer.rl import RLTrainer

    extra = [f"backend={backend}", "train.steps=4", "checkpoint.every=100",
             "train.lr_schedule=cosine", "train.warmup_steps=1", "critic.warmup_steps=1", *PPO]
    full = tmp_path / "full"
    tr = RLTrainer(cfg_for(full, *extra))
    tr.fit()
    w_full, c_full = weights(tr), critic_weights(tr)
    tr.close()

    part = tmp_path / "part"          # the same config, stopped by SIGTERM after step 2
    tr = RLTrainer(cfg_for(part, *extra))
    fit_stopped_by_sigterm(tr, monkeypatch)   # SIGTERM during the 2nd step: checkpoint at 2
    assert (part / "checkpoints" / "step_000002" / "state" / "critic" / "critic.safetensors").is_file()
    tr = RLTrainer(cfg_for(part, *extra))
    tr.fit()
    w_part, c_part = weights(tr), critic_weights(tr)
    tr.close()
    a, b = rows(full), rows(part)
    assert [r["step"] for r in b] == [1, 2, 3, 4]
    assert "loss" not in a[0] and "loss" in a[1]       # step 1: the critic warms up alone
    for ra, rb in zip(a, b):
        for key in ("reward/mean", "critic/loss", "critic/grad_norm", "critic/values_mean",
                    "critic/vf_clipfrac", "advantage/mean", "response_length/mean"):
            assert ra[key] == pytest.approx(rb[key], rel=1e-4, abs=1e-4), (ra["step"], key)
        if "loss" in ra:
            assert ra["loss"] == pytest.approx(rb["loss"], rel=1e-4, abs=1e-4)
    for k in w_full:
        np.testing.assert_allclose(w_full[k], w_part[k], rtol=1e-4, atol=1e-4)
    for k in c_full:
        np.testing.assert_allclose(c_full[k], c_part[k], rtol=1e-4, atol=1e-4)
    assert a[-1]["critic/loss"] < a[0]["critic/loss"]          # the critic fits the returns


@pytest.mark.slow
def test_critic_warmup_leaves_the_policy_alone(tmp_path):
    from mindrl.trainer.rl import RLTrainer

    tr = RLTrainer(cfg_for(tmp_path, "train.steps=2", "critic.warmup_steps=1", *PPO))
    before, c_before = weights(tr), critic_weights(tr)
    tr.run_step()                        # step 0 < warmup: critic only
    after, c_after = weights(tr), critic_weights(tr)
    assert all(np.array_equal(before[k], after[k]) for k in before)
    assert any(not np.array_equal(c_before[k], c_after[k]) for k in c_before)
    tr.step = 1
    tr.run_step()
    assert any(not np.array_equal(after[k], v) for k, v in weights(tr).items())
    tr.close()


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["torch"])
def test_orz_smoke_recipe_runs_two_steps(tmp_path, backend):
    """yaml_configs/ppo_orz_smoke.yaml (the Open-Reasoner-Zero recipe's CI variant) moves the
    critic; both backends run the recipe in tests/trainer/test_recipe_smoke.py, and the
    MindSpore critic is checked step by step in test_ppo_resume_2_plus_2_equals_4."""
    from mindrl.config.loader import load_config
    from mindrl.trainer.rl import RLTrainer

    cfg = load_config("ppo_orz_smoke", [f"backend={backend}", f"logging.output_dir={tmp_path}"])
    assert (cfg.algorithm.adv_estimator, cfg.algorithm.gamma, cfg.algorithm.lam) == ("gae", 1, 1)
    tr = RLTrainer(cfg)
    c_before = critic_weights(tr)
    last = tr.fit()
    c_after = critic_weights(tr)
    tr.close()
    assert [r["step"] for r in rows(tmp_path)] == [1, 2]
    for key in ("loss", "critic/loss", "critic/grad_norm", "critic/values_mean"):
        assert np.isfinite(last[key]), key
    assert any(not np.array_equal(c_before[k], c_after[k]) for k in c_before)
