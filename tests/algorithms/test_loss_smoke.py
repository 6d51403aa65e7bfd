"""Two RL steps of the tiny model with every policy loss (on torch; on MindSpore the losses
whose loop path differs, see MS_LOOP_LOSSES), plus one run with every rollout correction on and
one with GDPO over two rewards: the loss is finite, the weights move, and the correction metrics
are logged per step."""

import json
from pathlib import Path

import numpy as np
import pytest

from algorithms import POLICY_LOSSES
from mindrl.config.loader import load_config

BASE = [
    "model.path=builtin:tiny", "model.chat_template=none",
    "data.train_file=arithmetic:digits=2,ops=+", "data.max_val_samples=16",
    "rollout.n=4", "rollout.max_new_tokens=4", "train.prompts_per_step=4",
    "train.micro_batch_size=8", "train.lr=1e-3", "reward.num_workers=0", "train.steps=2",
    "reward.functions=[{name: 'smoke_rewards:length_parity'}]", "logging.tensorboard=false",
    "logging.progress_bar=false", "logging.plot=false", "checkpoint.save_final=false",
]
# options that make each loss's special path bind on a 16-rollout batch
LOSS_EXTRA = {
    "clip_cov": ["algorithm.clip_cov_ratio=0.2", "algorithm.clip_cov_lb=-10",
                 "algorithm.clip_cov_ub=10"],
    "kl_cov": ["algorithm.kl_cov_ratio=0.2"],
    "gspo": ["algorithm.loss_agg_mode=seq_mean_token_mean"],
    "gmpo": ["algorithm.loss_agg_mode=seq_mean_token_mean", "algorithm.clip_eps_low=0.4",
             "algorithm.clip_eps_high=0.4"],
    "cispo": ["algorithm.clip_eps_low=1.0", "algorithm.clip_eps_high=2.0"],
}


def _train(tmp_path, backend, *extra):
    from mindrl.trainer.rl import RLTrainer

    cfg = load_config(None, BASE + [f"backend={backend}", f"logging.output_dir={tmp_path}",
                                    *extra])
    tr = RLTrainer(cfg)
    before = {k: v.copy() for k, v in tr.backend.named_weights()}
    last = tr.fit()
    after = dict(tr.backend.named_weights())
    tr.close()
    moved = [k for k in before if not np.allclose(before[k], after[k])]
    rows = [json.loads(x) for x in (Path(tmp_path) / "metrics.jsonl").read_text().splitlines()]
    return last, moved, rows


# The MindSpore loop runs the losses whose loop-visible path differs: the default (ppo_clip),
# the covariance losses (their selection metric comes out of the compiled step) and a
# sequence-level ratio with sequence aggregation (gspo). Every other loss is compiled into the
# MindSpore backend's fused loss graph and checked there against torch's gradients
# (tests/backends/mindspore/test_ms_train.py::test_gradient_parity_with_torch_every_policy_loss),
# and runs in the loop on torch here: a MindSpore loop run per loss (a 30-40 s compile each)
# would add only the loss-independent optimizer step, which the runs kept here cover.
MS_LOOP_LOSSES = ("ppo_clip", "clip_cov", "kl_cov", "gspo")
LOSS_BACKENDS = [(loss, backend) for loss in POLICY_LOSSES.names() for backend in
                 ("torch", "mindspore") if backend == "torch" or loss in MS_LOOP_LOSSES]


@pytest.mark.slow
@pytest.mark.parametrize("loss, backend", LOSS_BACKENDS)
def test_every_loss_two_steps(tmp_path, backend, loss):
    last, moved, rows = _train(tmp_path, backend, f"algorithm.policy_loss={loss}",
                               *LOSS_EXTRA.get(loss, []))
    assert [r["step"] for r in rows] == [1, 2]
    assert np.isfinite(last["loss"]) and np.isfinite(last["grad_norm"])
    assert moved, "no parameter changed"
    if loss in ("clip_cov", "kl_cov"):
        assert "cov_selected_frac" in last


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["torch", "mindspore"])
def test_rollout_corrections_run_and_report(tmp_path, backend):
    last, moved, rows = _train(
        tmp_path, backend, "algorithm.rollout_correction.rollout_is=sequence",
        "algorithm.rollout_correction.rollout_is_threshold='0.01_100'",
        "algorithm.rollout_correction.rollout_rs=token_k1,seq_mean_k3",
        "algorithm.rollout_correction.rollout_rs_threshold='0.5_2.0,0.1'",
        "algorithm.rollout_correction.off_policy_seq_mask_kl=0.01")
    assert moved
    # the native engine samples from the trainer's own weights: its log-probs equal the
    # trainer's to float noise, so every weight is 1 (inside the 0.01..100 band) and no
    # threshold masks a token or a sequence
    for row in rows:
        assert abs(row["rollout_corr/is_weight_mean"] - 1.0) < 1e-3, row
        for key in ("rollout_corr/is_masked_frac", "rollout_corr/rs_masked_frac",
                    "rollout_corr/rs_seq_masked_frac", "rollout_corr/opsm_masked_frac"):
            assert row[key] == 0.0, (key, row[key])


@pytest.mark.slow
def test_gdpo_two_rewards(tmp_path):
    last, moved, rows = _train(
        tmp_path, "torch", "algorithm.adv_estimator=gdpo",
        "reward.functions=[{name: 'smoke_rewards:length_parity', weight: 1.0}, "
        "{name: 'smoke_rewards:has_digit', weight: 0.5}]")
    assert moved and np.isfinite(last["loss"])
    assert abs(rows[0]["advantage/mean"]) < 1e-6     # batch-whitened
