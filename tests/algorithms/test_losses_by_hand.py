"""Policy, KL, entropy, aggregation, preference and composite losses on tiny inputs whose
values were worked out by hand (NumPy reference; gradients by hand through torch)."""

import dataclasses
import math

import numpy as np
import pytest

from algorithms import (AGG_MODES, KL_ESTIMATORS, POLICY_LOSSES, PREFERENCE_LOSSES, aggregate,
                        entropy_from_logits, get_ops, kl_penalty, kl_penalty_numpy,
                        preference_loss, rl_loss, sft_nll)
from mindrl.config.schema import AlgorithmConfig, KLConfig, PreferenceConfig

NP = get_ops("numpy")


def row(*xs):
    return np.array([xs], dtype=float)


def ppo(adv, ratio, **kw):
    kw = {"clip_eps_low": 0.2, "clip_eps_high": 0.2, **kw}
    logp = row(*np.log(ratio))
    old = np.zeros_like(logp)
    return POLICY_LOSSES.get("ppo_clip")(NP, logp, old, row(*adv), np.ones_like(logp), **kw)


def test_ppo_clip_by_hand():
    # A=1, rho=1.5 -> max(-1.5, -1.2) = -1.2 (upper clip)
    # A=-1, rho=0.5 -> max(0.5, 0.8) = 0.8 (lower clip)
    # A=1, rho=0.5 -> max(-0.5, -0.8) = -0.5 (no clip: pessimistic side)
    # A=-1, rho=1.1 -> 1.1 (inside)
    loss, m = ppo([1, -1, 1, -1], [1.5, 0.5, 0.5, 1.1])
    np.testing.assert_allclose(loss[0], [-1.2, 0.8, -0.5, 1.1])
    assert m["clipfrac_upper"] == 0.25 and m["clipfrac_lower"] == 0.25 and m["clipfrac"] == 0.5
    assert m["ratio_max"] == pytest.approx(1.5) and m["ratio_min"] == pytest.approx(0.5)
    assert m["ratio_mean"] == pytest.approx(0.9)
    kl = np.mean([r - 1 - math.log(r) for r in (1.5, 0.5, 0.5, 1.1)])
    assert m["approx_kl"] == pytest.approx(kl)


def test_ppo_clip_higher_and_dual_clip_by_hand():
    loss, _ = ppo([1, 1], [1.25, 1.35], clip_eps_high=0.28)
    np.testing.assert_allclose(loss[0], [-1.25, -1.28])
    # A=-1, rho=5: max(5, 0.8) = 5, dual clip c=3 -> min(5, 3) = 3; rho=2 -> 2 (< c)
    loss, m = ppo([-1, -1, 2], [5.0, 2.0, 5.0], dual_clip_c=3.0)
    np.testing.assert_allclose(loss[0], [3.0, 2.0, -2 * 1.2])
    assert m["dual_clip_frac"] == pytest.approx(1 / 3)
    loss, _ = ppo([-1], [5.0])
    np.testing.assert_allclose(loss[0], [5.0])  # no dual clip by default


def test_log_ratio_clamp_and_vanilla_pg():
    vpg = POLICY_LOSSES.get("vanilla_pg")
    logp, old = row(-1.0, 50.0), row(-1.5, 0.0)
    loss, _ = vpg(NP, logp, old, row(2.0, 1.0), np.ones((1, 2)), clip_eps_low=0.2,
                  clip_eps_high=0.2, log_ratio_clamp=20.0)
    np.testing.assert_allclose(loss[0], [-2 * math.exp(0.5), -math.exp(20.0)])


def test_truncated_importance_sampling_by_hand():
    logp = old = np.zeros((1, 2))
    rollout = row(-math.log(3.0), -math.log(1.5))  # old/rollout ratios 3 and 1.5, cap 2
    loss, m = POLICY_LOSSES.get("ppo_clip")(NP, logp, old, row(1.0, 1.0), np.ones((1, 2)),
                                           clip_eps_low=0.2, clip_eps_high=0.2,
                                           rollout_logp=rollout, tis_cap=2.0)
    np.testing.assert_allclose(loss[0], [-2.0, -1.5])
    _, m2 = ppo([1.0, 1.0], [1.5, 0.5])
    assert m2["ratio_min"] == pytest.approx(0.5)
    _, empty = POLICY_LOSSES.get("ppo_clip")(NP, logp, old, row(1.0, 1.0), np.zeros((1, 2)),
                                             clip_eps_low=0.2, clip_eps_high=0.2)
    assert empty["ratio_min"] == 0.0 and empty["ratio_max"] == 0.0 and empty["clipfrac"] == 0.0
    assert m["tis_capped_frac"] == 0.5 and m["tis_weight_mean"] == pytest.approx(1.75)


def test_policy_gradients_by_hand():
    torch = pytest.importorskip("torch")
    ops = get_ops("torch")
    ratio = torch.tensor([[1.5, 0.5, 0.5, 1.1, 5.0]], dtype=torch.float64)
    logp = ratio.log().requires_grad_()
    adv = torch.tensor([[1.0, -1.0, 1.0, -1.0, -1.0]], dtype=torch.float64)
    loss, _ = POLICY_LOSSES.get("ppo_clip")(ops, logp, torch.zeros_like(logp), adv,
                                           torch.ones_like(adv), clip_eps_low=0.2,
                                           clip_eps_high=0.2, dual_clip_c=3.0)
    loss.sum().backward()
    # d(-A rho)/dlogp = -A rho where the unclipped branch is active, 0 where a clip binds
    np.testing.assert_allclose(logp.grad.numpy()[0], [0.0, 0.0, -0.5, 1.1, 0.0])
    # vanilla_pg on-policy: gradient is -A (REINFORCE)
    lp = torch.tensor([[-0.3, -2.0]], dtype=torch.float64, requires_grad=True)
    loss, _ = POLICY_LOSSES.get("vanilla_pg")(ops, lp, lp.detach(), torch.tensor([[2.0, -1.0]],
                                             dtype=torch.float64), torch.ones(1, 2),
                                             clip_eps_low=0.2, clip_eps_high=0.2)
    loss.sum().backward()
    np.testing.assert_allclose(lp.grad.numpy()[0], [-2.0, 1.0])


def test_kl_estimators_by_hand():
    logp, ref = row(-1.0, -2.0), row(-1.5, -1.0)  # d = 0.5, -1
    d = np.array([0.5, -1.0])
    np.testing.assert_allclose(kl_penalty(NP, logp, ref, "k1")[0], d)
    np.testing.assert_allclose(kl_penalty(NP, logp, ref, "k2")[0], [0.125, 0.5])
    np.testing.assert_allclose(kl_penalty(NP, logp, ref, "k3")[0], np.exp(-d) - 1 + d)
    np.testing.assert_allclose(kl_penalty(NP, logp, ref, "k3", log_ratio_clip=0.5)[0],
                               [math.exp(-0.5) - 0.5, math.exp(0.5) - 1.5])
    np.testing.assert_allclose(kl_penalty(NP, logp, ref, "k1", value_clip=0.7)[0], [0.5, -0.7])
    assert sorted(KL_ESTIMATORS) == ["k1", "k2", "k3"]
    host = kl_penalty_numpy(logp.astype(np.float32), ref, "k3", 0.5, 0.1)
    assert host.dtype == np.float64
    np.testing.assert_allclose(host[0], [0.1, 0.1])  # k3 of +-0.5 is 0.107, 0.149: both clip


def test_entropy_by_hand():
    logits = np.array([[[0.0, 0.0, 0.0, 0.0], [0.0, math.log(3), -np.inf, -np.inf]]])
    logits = np.where(np.isinf(logits), -1e4, logits)
    h = entropy_from_logits(NP, logits)
    h_34 = -(0.25 * math.log(0.25) + 0.75 * math.log(0.75))
    np.testing.assert_allclose(h[0], [math.log(4), h_34], rtol=1e-9)
    big = np.array([[[1000.0, 1000.0, -1000.0]]])  # stable at large logits
    np.testing.assert_allclose(entropy_from_logits(NP, big)[0], [math.log(2)])


LOSS = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
MASK = np.array([[1, 1, 0], [1, 0, 0]], dtype=float)


@pytest.mark.parametrize("mode, expected", [
    ("token_mean", 7 / 3),                  # (1 + 2 + 4) / 3 tokens
    ("seq_mean_token_sum", (3 + 4) / 2),    # per-sequence sums, mean over 2 sequences
    ("seq_mean_token_mean", (1.5 + 4) / 2),  # per-sequence means, mean over sequences
    ("seq_mean_token_sum_norm", 7 / (2 * 4)),  # Dr. GRPO: sum / (seqs * max_len=4)
])
def test_aggregation_by_hand(mode, expected):
    assert aggregate(NP, LOSS, MASK, mode, max_len=4) == pytest.approx(expected)


def test_aggregation_explicit_normalisers_and_empty_rows():
    assert aggregate(NP, LOSS, MASK, "token_mean", global_tokens=14) == pytest.approx(0.5)
    mask = np.array([[1, 1, 0], [0, 0, 0]], dtype=float)
    assert aggregate(NP, LOSS, mask, "seq_mean_token_mean") == pytest.approx(1.5 / 2)
    assert aggregate(NP, LOSS, np.zeros_like(MASK), "token_mean") == 0.0
    assert sorted(AGG_MODES) == sorted(["token_mean", "seq_mean_token_sum",
                                        "seq_mean_token_mean", "seq_mean_token_sum_norm"])


def pref_inputs():
    # chosen: 2 tokens, S = -1 ; rejected: 3 tokens, S = -2 (third column padding)
    cl, cm = np.array([[-0.4, -0.6, -9.0]]), np.array([[1, 1, 0]], dtype=float)
    rl, rm = np.array([[-0.5, -0.5, -1.0]]), np.ones((1, 3))
    ref_c, ref_r = np.array([[-1.0, -0.5, -9.0]]), np.array([[-0.8, -0.5, -0.5]])  # -1.5, -1.8
    return dict(chosen_logp=cl, chosen_mask=cm, rejected_logp=rl, rejected_mask=rm,
                ref_chosen_logp=ref_c, ref_rejected_logp=ref_r)


def test_dpo_ipo_simpo_by_hand():
    inp = pref_inputs()
    # DPO: chosen margin -1 - (-1.5) = 0.5, rejected -2 - (-1.8) = -0.2, h = 0.1 * 0.7
    loss, m = preference_loss(NP, cfg=PreferenceConfig(loss="dpo", beta=0.1), **inp)
    assert loss == pytest.approx(math.log1p(math.exp(-0.07)))
    assert m["reward_chosen"] == pytest.approx(0.05)
    assert m["reward_rejected"] == pytest.approx(-0.02)
    assert m["reward_margin"] == pytest.approx(0.07) and m["reward_accuracy"] == 1.0
    loss, _ = preference_loss(NP, cfg=PreferenceConfig(loss="dpo", beta=0.1,
                                                       label_smoothing=0.2), **inp)
    expected = 0.8 * math.log1p(math.exp(-0.07)) + 0.2 * math.log1p(math.exp(0.07))
    assert loss == pytest.approx(expected)
    # IPO: (0.7 - 1/(2*0.1))^2
    loss, _ = preference_loss(NP, cfg=PreferenceConfig(loss="ipo", beta=0.1), **inp)
    assert loss == pytest.approx((0.7 - 5.0) ** 2)
    # SimPO: beta=2: 2*(-1/2) - 2*(-2/3) - 0.5 = 1/3 - 0.5 ; plus pref_ftx * (1/2), the token
    # mean of the chosen NLL (the seed log's SFT term)
    loss, m = preference_loss(NP, cfg=PreferenceConfig(loss="simpo", beta=2.0, gamma=0.5,
                                                       pref_ftx=0.3), **inp)
    pref = math.log1p(math.exp(-(1 / 3 - 0.5)))
    assert loss == pytest.approx(pref + 0.3 * 0.5)
    assert m["pref_loss"] == pytest.approx(pref) and m["sft_loss"] == pytest.approx(0.5)
    assert m["reward_accuracy"] == 1.0 and m["reward_margin"] == pytest.approx(1 / 3)
    assert sorted(PREFERENCE_LOSSES) == ["dpo", "ipo", "simpo"]


def test_simpo_sft_term_sum_is_the_sequence_nll():
    # the summed SFT term -S(y_w) over the chosen tokens: S(y_w) = -1 over 2 tokens
    inp = pref_inputs()
    loss, m = preference_loss(NP, cfg=PreferenceConfig(loss="simpo", beta=2.0, gamma=0.5,
                                                       pref_ftx=0.3, sft_term="sum"), **inp)
    pref = math.log1p(math.exp(-(1 / 3 - 0.5)))
    assert loss == pytest.approx(pref + 0.3 * 1.0)
    assert m["sft_loss"] == pytest.approx(1.0)
    # two pairs of lengths 2 and 3: mean over pairs of the sums, not of the per-token means
    two = {k: np.concatenate([v, v[:, ::-1]]) for k, v in inp.items()}
    two["chosen_mask"] = np.array([[1, 1, 0], [1, 1, 1]])
    two["chosen_logp"] = np.array([[-0.5, -0.5, -9.0], [-1.0, -2.0, -3.0]])
    for term, sft in (("sum", (1.0 + 6.0) / 2), ("mean_token", (0.5 + 2.0) / 2)):
        _, m = preference_loss(NP, cfg=PreferenceConfig(loss="simpo", pref_ftx=1.0,
                                                        sft_term=term), **two)
        assert m["sft_loss"] == pytest.approx(sft), term


def test_dpo_needs_reference():
    inp = pref_inputs()
    inp.pop("ref_chosen_logp")
    with pytest.raises(ValueError, match="reference"):
        preference_loss(NP, cfg=PreferenceConfig(loss="dpo"), **inp)
    preference_loss(NP, cfg=PreferenceConfig(loss="simpo"), **inp)  # SimPO needs none


def test_sft_nll_by_hand():
    logp = np.array([[-1.0, -2.0, -5.0], [-3.0, -7.0, -7.0]])
    mask = np.array([[1, 1, 0], [1, 0, 0]])
    assert sft_nll(NP, logp, mask) == pytest.approx(2.0)  # (1 + 2 + 3) / 3
    assert sft_nll(NP, logp, mask, "seq_mean_token_mean") == pytest.approx((1.5 + 3) / 2)


def test_rl_loss_composite_by_hand():
    cfg = AlgorithmConfig(kl=KLConfig(coef=0.5, estimator="k1"), entropy_coef=0.1,
                          loss_agg_mode="token_mean")
    logp = row(-1.0, -1.0)
    old = row(-1.0, -1.0)          # rho = 1 -> pg loss = -A
    adv = row(2.0, 4.0)
    ref = row(-1.5, -0.5)          # k1 = 0.5, -0.5 -> mean 0
    ent = row(1.0, 3.0)            # mean 2
    mask = np.ones((1, 2))
    loss, m = rl_loss(NP, logp=logp, old_logp=old, advantages=adv, response_mask=mask,
                      ref_logp=ref, entropy=ent, cfg=cfg)
    assert loss == pytest.approx(-3.0 + 0.5 * 0.0 - 0.1 * 2.0)
    assert m["pg_loss"] == pytest.approx(-3.0) and m["entropy"] == pytest.approx(2.0)
    ref2 = row(-1.5, -1.5)  # k1 = 0.5, 0.5
    loss, m = rl_loss(NP, logp=logp, old_logp=old, advantages=adv, response_mask=mask,
                      ref_logp=ref2, cfg=cfg)
    assert loss == pytest.approx(-3.0 + 0.25) and m["kl"] == pytest.approx(0.5)
    # in_reward: KL reported, not added to the loss
    cfg_r = dataclasses.replace(cfg, kl=KLConfig(coef=0.5, estimator="k1", in_reward=True))
    loss, m = rl_loss(NP, logp=logp, old_logp=old, advantages=adv, response_mask=mask,
                      ref_logp=ref2, cfg=cfg_r)
    assert loss == pytest.approx(-3.0) and m["kl"] == pytest.approx(0.5)


@pytest.mark.parametrize("lookup, bad, valid", [
    (lambda n: POLICY_LOSSES.get(n), "ppo_clp", "ppo_clip"),
    (lambda n: kl_penalty(NP, row(0.0), row(0.0), n), "k4", "k3"),
    (lambda n: aggregate(NP, LOSS, MASK, n), "token-mean", "token_mean"),
    (lambda n: PREFERENCE_LOSSES.get(n), "simpo2", "simpo"),
])
def test_registry_misses_list_valid_names(lookup, bad, valid):
    with pytest.raises(KeyError, match="valid names:") as err:
        lookup(bad)
    assert valid in str(err.value)


def test_duplicate_registration_rejected():
    with pytest.raises(KeyError, match="already registered"):
        POLICY_LOSSES.register("ppo_clip", lambda *a, **k: None)


def test_get_ops_unknown():
    with pytest.raises(ValueError, match="numpy, torch, mindspore"):
        get_ops("jax")
