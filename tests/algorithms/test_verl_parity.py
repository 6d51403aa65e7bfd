"""Every policy loss, rollout correction and the GDPO estimator against verl's own functions.

verl (0.9.1, ``verl.trainer.ppo.core_algos`` and ``rollout_corr_helper``) is not a mindrl
dependency: ``bash launch/install_test_peers.sh`` puts it in tests/.peers/verl, appended to
sys.path here (after the venv, so nothing in the venv is shadowed). Inputs are random, with
ragged masks (one empty row) and extreme log-ratios (+-8 on a few tokens); verl runs in
float64 torch. Our numpy and float64 torch implementations must match its loss value and the
gradient w.r.t. logp within 1e-6; MindSpore runs in float32 (it has no float64 training path
here), with tolerance 2e-4 relative: losses sum ~50 terms of size up to e^8 ~ 3e3 (float32
epsilon 6e-8 x 3e3 x a few accumulations ~ 1e-4 absolute on values ~1).

Where verl has no function: ``vanilla_pg`` (unclipped ratio), DeepSeek-V3.2's off-policy
sequence mask, both checked by hand here.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest

from algorithms import POLICY_LOSSES, aggregate, get_ops
from algorithms.is_correction import (importance_weights, off_policy_sequence_mask,
                                      rejection_mask)
from algorithms.multi_reward import compute_multi_reward_advantages

PEERS = Path(__file__).resolve().parents[1] / ".peers" / "verl"
if not (PEERS / "verl").is_dir():
    raise RuntimeError(f"verl is not installed in {PEERS}: run `bash launch/install_test_peers.sh`")
if str(PEERS) not in sys.path:
    sys.path.append(str(PEERS))

torch = pytest.importorskip("torch")
ms = pytest.importorskip("mindspore")
core_algos = pytest.importorskip("verl.trainer.ppo.core_algos")
rollout_corr = pytest.importorskip("verl.trainer.ppo.rollout_corr_helper")
from verl.workers.config import ActorConfig, PolicyLossConfig  # noqa: E402

B, T = 6, 9
TOL64 = dict(rtol=1e-6, atol=1e-6)
TOL32 = dict(rtol=2e-4, atol=2e-4)
AGG = {"token-mean": "token_mean", "seq-mean-token-mean": "seq_mean_token_mean",
       "token-sum": "token_mean"}


def _inputs(seed, seq_adv=False):
    rng = np.random.default_rng(seed)
    lengths = np.array([T, 1, 5, 0, 7, 3])                    # ragged, one empty row
    mask = (np.arange(T)[None] < lengths[:, None]).astype(np.float64)
    old = rng.normal(-1.5, 0.6, (B, T))
    d = rng.normal(0, 0.6, (B, T))
    d[0, 2], d[2, 1], d[4, 5] = 8.0, -8.0, 4.5                # extreme ratios e^8, e^-8
    adv = np.repeat(rng.normal(0, 1, (B, 1)), T, 1) if seq_adv else rng.normal(0, 1, (B, T))
    adv[5, 0] = 0.0                                            # a zero advantage
    rollout = old + rng.normal(0, 0.4, (B, T))
    rollout[1, 0] = old[1, 0] + 3.0
    return dict(logp=old + d, old_logp=old, advantages=adv * mask, response_mask=mask,
                rollout_logp=rollout)


def _actor(**kw):
    pl = {k: kw.pop(k) for k in ("clip_cov_ratio", "clip_cov_lb", "clip_cov_ub", "kl_cov_ratio",
                                 "ppo_kl_coef") if k in kw}
    return ActorConfig(strategy="fsdp", rollout_n=1, ppo_mini_batch_size=1,
                       ppo_micro_batch_size_per_gpu=1, policy_loss=PolicyLossConfig(**pl), **kw)


# (our name, verl name, verl actor options, our options, verl agg mode, advantages per sequence)
LOSS_CASES = {
    "ppo_clip": ("vanilla", dict(clip_ratio_low=0.2, clip_ratio_high=0.28, clip_ratio_c=3.0),
                 dict(clip_eps_low=0.2, clip_eps_high=0.28, dual_clip_c=3.0), "token-mean", False),
    "gspo": ("gspo", dict(clip_ratio_low=3e-4, clip_ratio_high=4e-4),
             dict(clip_eps_low=3e-4, clip_eps_high=4e-4, log_ratio_clamp=10.0),
             "seq-mean-token-mean", True),
    "gspo_token": ("gspo", dict(clip_ratio_low=0.2, clip_ratio_high=0.3),
                   dict(clip_eps_low=0.2, clip_eps_high=0.3, log_ratio_clamp=10.0),
                   "token-mean", False),
    "cispo": ("cispo", dict(clip_ratio_low=0.8, clip_ratio_high=2.0),
              dict(clip_eps_low=0.8, clip_eps_high=2.0), "token-mean", False),
    "sapo": ("sapo", dict(tau_pos=1.0, tau_neg=1.05), dict(tau_pos=1.0, tau_neg=1.05),
             "seq-mean-token-mean", False),
    "sapo_sharp": ("sapo", dict(tau_pos=3.0, tau_neg=0.4), dict(tau_pos=3.0, tau_neg=0.4),
                   "seq-mean-token-mean", False),
    "gpg": ("gpg", {}, {}, "token-mean", False),
    "clip_cov": ("clip_cov", dict(clip_ratio_low=0.2, clip_ratio_high=0.2, clip_cov_ratio=1.0,
                                  clip_cov_lb=0.05, clip_cov_ub=1.5),
                 dict(clip_eps_low=0.2, clip_eps_high=0.2, clip_cov_ratio=1.0, clip_cov_lb=0.05,
                      clip_cov_ub=1.5, log_ratio_clamp=0.0), "token-mean", False),
    "kl_cov": ("kl_cov", dict(kl_cov_ratio=0.2, ppo_kl_coef=0.7),
               dict(kl_cov_ratio=0.2, ppo_kl_coef=0.7, log_ratio_clamp=0.0), "token-mean", False),
    "gmpo": ("geo_mean", dict(clip_ratio_low=0.4, clip_ratio_high=0.4),
             dict(clip_eps_low=0.4, clip_eps_high=0.4, log_ratio_clamp=0.0),
             "seq-mean-token-mean", True),
    "gmpo_token_adv": ("geo_mean", dict(clip_ratio_low=0.3, clip_ratio_high=0.5),
                       dict(clip_eps_low=0.3, clip_eps_high=0.5, log_ratio_clamp=0.0),
                       "seq-mean-token-mean", False),
}


def _verl_loss(case, x):
    verl_name, actor_kw, _, mode, _ = LOSS_CASES[case]
    t = {k: torch.tensor(v, dtype=torch.float64) for k, v in x.items()}
    logp = t["logp"].clone().requires_grad_(True)
    fn = core_algos.get_policy_loss_fn(verl_name)
    loss, _ = fn(t["old_logp"], logp, t["advantages"], t["response_mask"], loss_agg_mode=mode,
                 config=_actor(**dict(clip_ratio=0.2, **actor_kw)))
    loss.backward()
    return float(loss.detach()), logp.grad.numpy()


def _our_loss(ops, case, x, grad):
    name = case.split("_sharp")[0].replace("_token_adv", "")
    _, _, kw, mode, _ = LOSS_CASES[case]
    kw = {"clip_eps_low": 0.2, "clip_eps_high": 0.2, **kw}
    mask = x["response_mask"]
    n_rows = float((np.asarray(mask).sum(-1) > 0).sum()) if name != "gmpo" else float(B)

    def value(logp):
        per_token, metrics = POLICY_LOSSES.get(name)(ops, logp, x["old_logp"], x["advantages"],
                                                     x["response_mask"], **kw)
        return aggregate(ops, per_token, x["response_mask"], AGG[mode], global_seqs=n_rows), \
            metrics
    return grad(value, x["logp"])


def _numpy(case, x):
    ops = get_ops("numpy")
    return _our_loss(ops, case, x, lambda f, lp: (float(f(lp)[0]), None, f(lp)[1]))


def _torch(case, x):
    ops = get_ops("torch")
    t = {k: torch.tensor(v, dtype=torch.float64) for k, v in x.items()}

    def grad(f, lp):
        lp = lp.clone().requires_grad_(True)
        loss, metrics = f(lp)
        loss.backward()
        return float(loss.detach()), lp.grad.numpy(), metrics
    return _our_loss(ops, case, t, grad)


def _mindspore(case, x):
    ops = get_ops("mindspore")
    t = {k: ms.Tensor(v.astype(np.float32)) for k, v in x.items()}

    def grad(f, lp):
        loss, g = ms.value_and_grad(lambda z: f(z)[0])(lp)
        return float(loss.asnumpy()), g.asnumpy(), f(lp)[1]
    return _our_loss(ops, case, t, grad)


@pytest.mark.parametrize("case", sorted(LOSS_CASES))
@pytest.mark.parametrize("seed", [0, 1])
def test_policy_loss_matches_verl(case, seed):
    x = _inputs(seed, seq_adv=LOSS_CASES[case][4])
    ref, ref_grad = _verl_loss(case, x)
    assert np.any(ref_grad != 0)
    np_val, _, np_metrics = _numpy(case, x)
    t_val, t_grad, _ = _torch(case, x)
    m_val, m_grad, _ = _mindspore(case, x)
    assert np_val == pytest.approx(ref, **{"rel": 1e-6, "abs": 1e-6})
    assert t_val == pytest.approx(ref, **{"rel": 1e-6, "abs": 1e-6})
    np.testing.assert_allclose(t_grad, ref_grad, **TOL64, err_msg="torch gradient")
    assert m_val == pytest.approx(ref, rel=2e-4, abs=2e-4)
    np.testing.assert_allclose(m_grad, ref_grad, **TOL32, err_msg="mindspore gradient")
    if case.startswith(("clip_cov", "kl_cov")):     # the selection really selected something
        assert 0 < float(np_metrics["cov_selected_frac"]) < 1


def test_vanilla_pg_by_hand():
    """verl has no unclipped-ratio loss: -A exp(logp - old) summed, gradient -A rho."""
    x = _inputs(3)
    ops = get_ops("torch")
    t = {k: torch.tensor(v, dtype=torch.float64) for k, v in x.items()}
    lp = t["logp"].clone().requires_grad_(True)
    per_token, _ = POLICY_LOSSES.get("vanilla_pg")(ops, lp, t["old_logp"], t["advantages"],
                                                   t["response_mask"], clip_eps_low=0.2,
                                                   clip_eps_high=0.2)
    aggregate(ops, per_token, t["response_mask"], "token_mean", global_tokens=1).backward()
    rho = np.exp(x["logp"] - x["old_logp"])
    np.testing.assert_allclose(lp.grad.numpy(), -x["advantages"] * rho * x["response_mask"],
                               **TOL64)


# --- rollout corrections ---------------------------------------------------------------------
IS_CASES = [("token", 2.0), ("sequence", 5.0), ("token", "0.5_2.0"), ("sequence", "0.2_5.0")]
RS_CASES = [("token_k1", "0.5_2.0"), ("token_k1", "1.5"), ("seq_sum_k1", "0.2_5.0"),
            ("seq_mean_k1", "0.8_1.25"), ("token_k2", "0.05"), ("token_k3", "0.05"),
            ("seq_sum_k3", "0.3"), ("seq_mean_k2", "0.04"), ("seq_max_k3", "0.4"),
            ("seq_max_k2", "0.36"), ("token_k1,seq_mean_k3", "0.5_2.0,0.05")]


def _conv(name, a):
    """A float64 array as this backend's input: float64 numpy / torch, float32 MindSpore."""
    if name == "numpy":
        return np.asarray(a, np.float64)
    if name == "torch":
        return torch.tensor(a, dtype=torch.float64)
    return ms.Tensor(np.asarray(a, np.float32))


def _verl_correction(x, **kw):
    t = {k: torch.tensor(v, dtype=torch.float64) for k, v in x.items()}
    proto, new_mask, metrics = rollout_corr.compute_rollout_correction_and_rejection_mask(
        t["old_logp"], t["rollout_logp"], t["response_mask"], **kw)
    w = None if proto is None else proto.batch["rollout_is_weights"].numpy()
    return w, new_mask.numpy(), metrics


@pytest.mark.parametrize("level,threshold", IS_CASES)
def test_importance_weights_match_verl(level, threshold):
    x = _inputs(4)
    ref_w, _, ref_m = _verl_correction(x, rollout_is=level, rollout_is_threshold=threshold)
    lr = x["old_logp"] - x["rollout_logp"]
    for name in ("numpy", "torch", "mindspore"):
        ops = get_ops(name)
        w, m = importance_weights(ops, _conv(name, lr), _conv(name, x["response_mask"]), level,
                                  threshold)
        tol = TOL32 if name == "mindspore" else TOL64
        np.testing.assert_allclose(ops.to_numpy(w), ref_w, **tol, err_msg=name)
        mean = float(ops.to_numpy(m["rollout_corr/is_weight_mean"]))
        assert mean == pytest.approx(float((ref_w * x["response_mask"]).sum()
                                           / x["response_mask"].sum()), rel=2e-4)
    if isinstance(threshold, str):
        np_m = importance_weights(get_ops("numpy"), lr, x["response_mask"], level, threshold)[1]
        assert float(np_m["rollout_corr/is_masked_frac"]) == pytest.approx(
            ref_m["rollout_corr/rollout_is_oob_ratio"])


@pytest.mark.parametrize("options,threshold", RS_CASES)
def test_rejection_masks_match_verl(options, threshold):
    x = _inputs(5)
    _, ref_mask, ref_m = _verl_correction(x, rollout_rs=options, rollout_rs_threshold=threshold)
    mask = x["response_mask"]
    assert 0 < ref_mask.sum() < mask.sum(), "the case should reject some tokens, not all"
    lr = x["old_logp"] - x["rollout_logp"]
    for name in ("numpy", "torch", "mindspore"):
        ops = get_ops(name)
        keep, m = rejection_mask(ops, _conv(name, lr), _conv(name, mask), options, threshold)
        np.testing.assert_array_equal(ops.to_numpy(keep) * mask, ref_mask, err_msg=name)
        assert float(ops.to_numpy(m["rollout_corr/rs_masked_frac"])) == pytest.approx(
            ref_m["rollout_corr/rollout_rs_masked_fraction"], abs=1e-6)


def test_corrected_loss_value_and_gradient_match_verl():
    """verl's vanilla loss with its IS weights and rejection mask (token-sum, so the
    normaliser question does not arise) vs ppo_clip times our correction factor."""
    from types import SimpleNamespace

    from algorithms.is_correction import rollout_correction

    x = _inputs(6)
    spec = dict(rollout_is="sequence", rollout_is_threshold="0.2_5.0",
                rollout_rs="token_k1", rollout_rs_threshold="0.4_2.5")
    ref_w, ref_mask, _ = _verl_correction(x, **spec)
    t = {k: torch.tensor(v, dtype=torch.float64) for k, v in x.items()}
    lp = t["logp"].clone().requires_grad_(True)
    ref, _ = core_algos.compute_policy_loss_vanilla(
        t["old_logp"], lp, t["advantages"], torch.tensor(ref_mask), loss_agg_mode="token-sum",
        config=_actor(clip_ratio=0.2, clip_ratio_c=3.0), rollout_is_weights=torch.tensor(ref_w))
    ref.backward()
    rc = SimpleNamespace(off_policy_seq_mask_kl=0.0, **spec)
    ops = get_ops("torch")
    mine_lp = t["logp"].clone().requires_grad_(True)
    per_token, _ = POLICY_LOSSES.get("ppo_clip")(ops, mine_lp, t["old_logp"], t["advantages"],
                                                 t["response_mask"], clip_eps_low=0.2,
                                                 clip_eps_high=0.2, dual_clip_c=3.0)
    factor, metrics = rollout_correction(ops, logp=mine_lp, old_logp=t["old_logp"],
                                         rollout_logp=t["rollout_logp"],
                                         advantages=t["advantages"], mask=t["response_mask"],
                                         rc=rc)
    mine = aggregate(ops, per_token * factor, t["response_mask"], "token_mean", global_tokens=1)
    mine.backward()
    assert float(mine.detach()) == pytest.approx(float(ref.detach()), rel=1e-6, abs=1e-6)
    np.testing.assert_allclose(mine_lp.grad.numpy(), lp.grad.numpy(), **TOL64)
    assert set(metrics) >= {"rollout_corr/is_weight_mean", "rollout_corr/is_masked_frac",
                            "rollout_corr/rs_masked_frac", "rollout_corr/rs_seq_masked_frac"}


def test_off_policy_sequence_mask_by_hand():
    """Not in verl: DeepSeek-V3.2 eq. 9, by a loop over sequences."""
    x = _inputs(7)
    delta = 0.05
    mask = x["response_mask"]
    expect = np.ones((B, T))
    for i in range(B):
        n = mask[i].sum()
        kl = ((x["rollout_logp"][i] - x["logp"][i]) * mask[i]).sum() / max(n, 1)
        for t_ in range(T):
            if x["advantages"][i, t_] < 0 and kl > delta:
                expect[i, t_] = 0.0
    assert 0 < (expect * mask).sum() < mask.sum()
    for name in ("numpy", "torch", "mindspore"):
        ops = get_ops(name)
        keep, m = off_policy_sequence_mask(ops, *(_conv(name, x[k]) for k in
                                                  ("logp", "rollout_logp", "advantages")),
                                           _conv(name, mask), delta)
        np.testing.assert_array_equal(ops.to_numpy(keep) * mask, expect * mask, err_msg=name)
        assert float(ops.to_numpy(m["rollout_corr/opsm_masked_frac"])) == pytest.approx(
            ((1 - expect) * mask).sum() / mask.sum(), abs=1e-6)


# --- GDPO --------------------------------------------------------------------------------------
def test_gdpo_matches_verl():
    rng = np.random.default_rng(8)
    groups = np.repeat(np.arange(4), 4)
    n = len(groups)
    lengths = rng.integers(1, T + 1, n)
    mask = (np.arange(T)[None] < lengths[:, None]).astype(np.float64)
    fmt = rng.integers(0, 2, n).astype(np.float64)
    fmt[:4] = 1.0                                              # a group where format agrees
    acc = rng.normal(0, 3.0, n)
    acc[5] = np.nan                                            # unscorable -> none_as
    weights = {"format": 0.5, "accuracy": 2.0}
    comps = {"format": fmt, "accuracy": acc}
    total = 0.5 * fmt + 2.0 * np.nan_to_num(acc, nan=-1.0)
    mine = compute_multi_reward_advantages("gdpo", total=total, components=comps,
                                           weights=weights, none_as=-1.0, group_index=groups,
                                           response_mask=mask, std_eps=1e-6, std_ddof=1)
    P = 3
    batch = {"prompts": torch.zeros(n, P, dtype=torch.long),
             "attention_mask": torch.cat([torch.ones(n, P), torch.tensor(mask)], 1).long()}
    ntb = {"format": fmt, "accuracy": np.nan_to_num(acc, nan=-1.0)}
    cfg = {"gdpo_reward_keys": ["format", "accuracy"], "gdpo_reward_weights": [0.5, 2.0]}
    ref, _ = core_algos.compute_gdpo_outcome_advantage(
        torch.zeros(n, T, dtype=torch.float64), torch.tensor(mask), groups, epsilon=1e-6,
        config=cfg, non_tensor_batch=ntb, batch=batch)
    # verl builds each component as float32 (np.float32 then a float32 tensor): 1e-6 relative
    np.testing.assert_allclose(mine, ref.double().numpy(), rtol=1e-5, atol=1e-6)
    # and it differs from GRPO on the weighted sum (the point of decoupling)
    grpo = compute_multi_reward_advantages("grpo", total=total, components=comps,
                                           weights=weights, group_index=groups,
                                           response_mask=mask, std_eps=1e-6, std_ddof=1)
    assert np.abs(grpo - mine).max() > 0.1
