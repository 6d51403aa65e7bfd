"""The losses, corrections and config keys of issue 18 on tiny inputs worked out by hand:
surrogate gradients (CISPO, GSPO-token) that finite differences cannot check, sequence-level
values, the covariance selection, and the configuration errors."""

import math
from types import SimpleNamespace

import numpy as np
import pytest

from algorithms import POLICY_LOSSES, aggregate, get_ops, rl_loss
from algorithms.is_correction import parse_is_threshold, parse_rs, rollout_correction
from mindrl.config.loader import load_config
from mindrl.config.schema import AlgorithmConfig, ConfigError, RolloutCorrectionConfig

NP = get_ops("numpy")
torch = pytest.importorskip("torch")


def row(*xs):
    return np.array([xs], dtype=float)


def test_cispo_gradient_is_clipped_weight_times_advantage():
    ops = get_ops("torch")
    ratio = np.array([[0.5, 1.1, 3.0]])
    lp = torch.tensor(np.log(ratio), requires_grad=True)
    adv = torch.tensor([[1.0, -2.0, 0.5]], dtype=torch.float64)
    loss, m = POLICY_LOSSES.get("cispo")(ops, lp, torch.zeros_like(lp), adv, torch.ones_like(lp),
                                         clip_eps_low=0.2, clip_eps_high=0.5)
    loss.sum().backward()
    # d/dlogp of -sg(clip(r)) A logp = -clip(r) A: clip(0.5)=0.8, clip(1.1)=1.1, clip(3)=1.5
    np.testing.assert_allclose(lp.grad.numpy(), [[-0.8, 2.2, -0.75]])
    np.testing.assert_allclose(loss.detach().numpy(),
                               [[-0.8 * math.log(0.5), 2.2 * math.log(1.1), -0.75 * math.log(3)]])
    assert float(m["clipfrac"]) == pytest.approx(2 / 3)


def test_gspo_token_gradient_is_sequence_ratio_times_advantage():
    ops = get_ops("torch")
    d = np.array([[0.2, -0.1, 0.5, 0.0]])            # last token is padding
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0]], dtype=torch.float64)
    lp = torch.tensor(d - 1.0, requires_grad=True)
    adv = torch.tensor([[1.0, 1.0, -1.0, 0.0]], dtype=torch.float64)
    loss, _ = POLICY_LOSSES.get("gspo_token")(ops, lp, torch.full_like(lp, -1.0), adv, mask,
                                              clip_eps_low=0.5, clip_eps_high=0.5)
    (loss * mask).sum().backward()
    s = math.exp((0.2 - 0.1 + 0.5) / 3)               # 1.2214, inside [0.5, 1.5]
    np.testing.assert_allclose(lp.grad.numpy(), [[-s, -s, s, 0.0]], rtol=1e-12)
    np.testing.assert_allclose(loss.detach().numpy()[0, :3], [-s, -s, s], rtol=1e-12)


def test_gspo_clips_the_whole_sequence():
    # mean log-ratio 0.4 -> s = e^0.4 = 1.49 > 1 + 0.2: A > 0, clipped at 1.2 for every token
    loss, m = POLICY_LOSSES.get("gspo")(NP, row(0.8, 0.0), np.zeros((1, 2)), row(2.0, 2.0),
                                        np.ones((1, 2)), clip_eps_low=0.2, clip_eps_high=0.2)
    np.testing.assert_allclose(loss, [[-2.4, -2.4]])
    assert m["clipfrac"] == 1.0 and m["seq_ratio_mean"] == pytest.approx(math.exp(0.4))


def test_gmpo_by_hand():
    # A > 0: tokens d = 0.8 (clipped to 0.4), d = -1.0 (pessimistic side, kept) -> mean -0.3
    loss, m = POLICY_LOSSES.get("gmpo")(NP, row(0.8, -1.0), np.zeros((1, 2)), row(1.0, 1.0),
                                        np.ones((1, 2)), clip_eps_low=0.4, clip_eps_high=0.4)
    np.testing.assert_allclose(loss, [[-math.exp(-0.3)] * 2])
    assert m["clipfrac_upper"] == 1.0       # verl counts every token outside the log window
    # A < 0: d = -1.0 clipped to -0.4 (pessimistic for a negative advantage), 0.8 kept -> 0.2
    loss, _ = POLICY_LOSSES.get("gmpo")(NP, row(0.8, -1.0), np.zeros((1, 2)), row(-1.0, -1.0),
                                        np.ones((1, 2)), clip_eps_low=0.4, clip_eps_high=0.4)
    np.testing.assert_allclose(loss, [[math.exp(0.2)] * 2])


def test_sapo_gate_by_hand():
    loss, _ = POLICY_LOSSES.get("sapo")(NP, row(math.log(1.5), math.log(0.5)), np.zeros((1, 2)),
                                        row(1.0, -2.0), np.ones((1, 2)), clip_eps_low=0.2,
                                        clip_eps_high=0.2, tau_pos=2.0, tau_neg=0.5)
    sig = lambda z: 1 / (1 + math.exp(-z))  # noqa: E731
    np.testing.assert_allclose(loss, [[-sig(2.0 * 0.5) * 2.0, 2.0 * sig(0.5 * -0.5) * 8.0]])


def test_gpg_by_hand():
    loss, _ = POLICY_LOSSES.get("gpg")(NP, row(-0.5, -2.0), row(-9.0, 3.0), row(2.0, -1.0),
                                       np.ones((1, 2)), clip_eps_low=0.2, clip_eps_high=0.2)
    np.testing.assert_allclose(loss, [[1.0, -2.0]])


def test_covariance_selection_by_hand():
    # 4 valid tokens; cov_t = (A - mean A)(logp - mean logp), all ratios 1
    logp = row(-1.0, -2.0, -3.0, -4.0, 0.0)
    adv = row(3.0, 1.0, -1.0, -3.0, 0.0)
    mask = row(1, 1, 1, 1, 0)
    # mean A = 0, mean logp = -2.5: cov = 3*1.5, 1*0.5, -1*-0.5, -3*-1.5 = 4.5, 0.5, 0.5, 4.5
    loss, m = POLICY_LOSSES.get("kl_cov")(NP, logp, logp - row(0.1, 0.1, 0.1, 0.1, 0.0), adv,
                                          mask, kl_cov_ratio=0.5, ppo_kl_coef=2.0)
    # k = 2: the two largest (tokens 0 and 3, cov 4.5) get + 2 |0.1|
    r = math.exp(0.1)
    np.testing.assert_allclose(loss[0, :4], [-3 * r + 0.2, -r, r, 3 * r + 0.2])
    assert m["cov_selected_frac"] == 0.5
    # clip_cov: band (1, 5) holds tokens 0 and 3; with ratio 0.25 only one is picked
    loss, m = POLICY_LOSSES.get("clip_cov")(NP, logp, logp, adv, mask, clip_eps_low=0.2,
                                            clip_eps_high=0.2, clip_cov_ratio=0.25,
                                            clip_cov_lb=1.0, clip_cov_ub=5.0)
    zeroed = [i for i in range(4) if loss[0, i] == 0.0]
    assert len(zeroed) == 1 and zeroed[0] in (0, 3) and m["cov_selected_frac"] == 0.25
    loss, _ = POLICY_LOSSES.get("clip_cov")(NP, logp, logp, adv, mask, clip_eps_low=0.2,
                                            clip_eps_high=0.2, clip_cov_ratio=0.5)
    np.testing.assert_allclose(loss[0, :4], [0.0, -1.0, 1.0, 0.0])


def test_tis_and_sequence_is_by_hand():
    old = np.zeros((1, 3))
    roll = row(-math.log(3.0), 0.0, -math.log(0.5))      # w_t = 3, 1, 0.5; product 1.5
    mask = np.ones((1, 3))
    rc = SimpleNamespace(rollout_is="token", rollout_is_threshold=2.0, rollout_rs=None,
                         rollout_rs_threshold=None, off_policy_seq_mask_kl=0.0)
    f, m = rollout_correction(NP, logp=old, old_logp=old, rollout_logp=roll, advantages=old,
                              mask=mask, rc=rc)
    np.testing.assert_allclose(f, [[2.0, 1.0, 0.5]])
    assert m["rollout_corr/is_capped_frac"] == pytest.approx(1 / 3)
    rc.rollout_is, rc.rollout_is_threshold = "sequence", 1.2
    f, _ = rollout_correction(NP, logp=old, old_logp=old, rollout_logp=roll, advantages=old,
                              mask=mask, rc=rc)
    np.testing.assert_allclose(f, [[1.2] * 3])
    rc.rollout_is_threshold = "0.6_2.5"                   # IcePop on the token weights
    rc.rollout_is = "token"
    f, m = rollout_correction(NP, logp=old, old_logp=old, rollout_logp=roll, advantages=old,
                              mask=mask, rc=rc)
    np.testing.assert_allclose(f, [[0.0, 1.0, 0.0]])
    assert m["rollout_corr/is_masked_frac"] == pytest.approx(2 / 3)


def test_threshold_parsing():
    assert parse_is_threshold(2.0) == (2.0, None)
    assert parse_is_threshold("0.5_5") == (5.0, 0.5)
    assert parse_rs("token_k1", "2.0") == (("token_k1", math.log(0.5), math.log(2.0)),)
    assert parse_rs("seq_max_k3, token_k2", "0.1,0.2") == (("seq_max_k3", None, 0.1),
                                                            ("token_k2", None, 0.2))
    for bad in ((("token_k9", "1")), ("token_k1,seq_sum_k2", "1,2,3"), ("token_k2", "0.1_1")):
        with pytest.raises(ValueError):
            parse_rs(*bad)
    with pytest.raises(ValueError):
        parse_is_threshold("2_1")


def test_config_keys_and_errors():
    cfg = load_config(None, ["algorithm.policy_loss=cispo", "algorithm.clip_eps_low=1.0",
                             "algorithm.rollout_correction.rollout_is=token",
                             "algorithm.rollout_correction.rollout_is_threshold='0.5_2'",
                             "algorithm.rollout_correction.rollout_rs=seq_mean_k1",
                             "algorithm.rollout_correction.rollout_rs_threshold=1.5"])
    assert cfg.algorithm.rollout_correction.rollout_is_threshold == "0.5_2"
    for overrides, needle in (
            (["algorithm.clip_eps_low=1.0"], "clip_eps_low"),
            (["algorithm.rollout_correction.rollout_is=token",
              "algorithm.rollout_correction.rollout_is_threshold='x_2'"], "rollout_is_threshold"),
            (["algorithm.rollout_correction.rollout_rs=token_k7",
              "algorithm.rollout_correction.rollout_rs_threshold=2"], "token_k7"),
            (["algorithm.rollout_correction.rollout_rs=token_k1"], "rollout_rs_threshold"),
            (["algorithm.tis_cap=2", "algorithm.rollout_correction.rollout_is=token"], "tis_cap"),
            (["algorithm.rollout_correction.rollout_is=seq"], "rollout_is"),
            (["algorithm.tau_neg=0"], "tau_neg"), (["algorithm.kl_cov_ratio=0"], "kl_cov_ratio"),
            (["algorithm.clip_cov_lb=6"], "clip_cov_lb"), (["algorithm.policy_loss=gspoo"],
                                                            "gspo"),
            (["algorithm.adv_estimator=gdpo", "rollout.n=1"], "gdpo")):
        with pytest.raises(ConfigError, match=needle):
            load_config(None, overrides)


def test_rl_loss_passes_loss_options_and_correction():
    """rl_loss hands the config's loss options to the loss and multiplies by the correction:
    sapo's gate uses tau_pos from the config; an IcePop window that excludes every token
    zeroes the policy loss."""
    rng = np.random.default_rng(0)
    x = dict(logp=rng.normal(-1, 0.3, (2, 3)), old_logp=rng.normal(-1, 0.3, (2, 3)),
             advantages=np.abs(rng.normal(0, 1, (2, 3))), response_mask=np.ones((2, 3)))
    a, _ = rl_loss(NP, cfg=AlgorithmConfig(policy_loss="sapo", tau_pos=1.0), **x)
    b, _ = rl_loss(NP, cfg=AlgorithmConfig(policy_loss="sapo", tau_pos=5.0), **x)
    assert a != pytest.approx(b)
    rc = RolloutCorrectionConfig(rollout_is="token", rollout_is_threshold="100_200")
    c, m = rl_loss(NP, cfg=AlgorithmConfig(rollout_correction=rc),
                   rollout_logp=x["old_logp"], **x)
    assert c == 0.0 and m["rollout_corr/is_masked_frac"] == 1.0
    d, m = rl_loss(NP, cfg=AlgorithmConfig(), rollout_logp=x["old_logp"], **x)
    assert d != 0.0 and not any(k.startswith("rollout_corr/") for k in m)
