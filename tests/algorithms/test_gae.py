"""GAE and the clipped value loss against hand-computed numbers (algorithms.gae,
algorithms.value_loss), on ragged masks, for gamma, lam < 1 and gamma = lam = 1."""

import numpy as np
import pytest

from algorithms import compute_advantages
from algorithms.gae import gae, gae_returns, outcome_token_rewards
from algorithms.ops import get_ops
from algorithms.value_loss import value_loss

# Row 0: 3 response tokens; row 1: 1 token; row 2: 2 tokens with a hole between them (mask
# 1 0 1 0): the hole is skipped, as if the tokens were adjacent.
MASK = np.array([[1, 1, 1, 0], [1, 0, 0, 0], [1, 0, 1, 0]], np.float64)
VALUES = np.array([[0.5, 0.2, -0.1, 9.0], [0.3, 9.0, 9.0, 9.0], [0.4, 9.0, 0.6, 9.0]])
REWARDS = np.array([1.0, 0.0, 2.0])


def by_hand(gamma, lam):
    """The GAE recursion written out token by token for the three rows above."""
    g, gl = gamma, gamma * lam
    # row 0: c = (0, 0, 1), V = (0.5, 0.2, -0.1)
    d2 = 1.0 - (-0.1)
    d1 = 0.0 + g * (-0.1) - 0.2
    d0 = 0.0 + g * 0.2 - 0.5
    a2 = d2
    a1 = d1 + gl * a2
    a0 = d0 + gl * a1
    # row 1: c = (0,), V = (0.3,)
    b0 = 0.0 - 0.3
    # row 2: valid columns 0 and 2: c = (0, 2), V = (0.4, 0.6)
    e2 = 2.0 - 0.6
    e0 = 0.0 + g * 0.6 - 0.4 + gl * e2
    adv = np.array([[a0, a1, a2, 0], [b0, 0, 0, 0], [e0, 0, e2, 0]])
    ret = (adv + VALUES) * MASK
    return adv, ret


@pytest.mark.parametrize("gamma, lam", [(0.9, 0.8), (1.0, 1.0), (0.5, 0.0)])
def test_gae_by_hand_on_ragged_masks(gamma, lam):
    c = outcome_token_rewards(REWARDS, MASK)
    np.testing.assert_array_equal(c, [[0, 0, 1, 0], [0, 0, 0, 0], [0, 0, 2, 0]])
    adv, ret = gae(c, VALUES, MASK, gamma, lam)
    want_adv, want_ret = by_hand(gamma, lam)
    np.testing.assert_allclose(adv, want_adv, atol=1e-12)
    np.testing.assert_allclose(ret, want_ret, atol=1e-12)
    np.testing.assert_allclose(gae_returns(REWARDS, VALUES, MASK, gamma=gamma, lam=lam),
                               want_ret, atol=1e-12)


def test_gamma_lam_one_is_outcome_minus_value():
    """Open-Reasoner-Zero's setting: A_t = r - V_t, R_t = r on every valid token."""
    adv, ret = gae(outcome_token_rewards(REWARDS, MASK), VALUES, MASK, 1.0, 1.0)
    np.testing.assert_allclose(adv, (REWARDS[:, None] - VALUES) * MASK, atol=1e-12)
    np.testing.assert_allclose(ret, REWARDS[:, None] * MASK, atol=1e-12)


def test_kl_in_reward_enters_every_token():
    kl = np.full(MASK.shape, 0.5)
    c = outcome_token_rewards(REWARDS, MASK, kl, kl_coef=0.2)
    np.testing.assert_allclose(c, [[-0.1, -0.1, 0.9, 0], [-0.1, 0, 0, 0], [-0.1, 0, 1.9, 0]])


def test_registered_estimator_whitens_over_valid_tokens():
    want, _ = by_hand(0.9, 0.8)
    valid = want[MASK > 0]
    whitened = (want - valid.mean()) / (valid.std(ddof=1) + 1e-6) * MASK
    got = compute_advantages("gae", rewards=REWARDS, group_index=np.arange(3),
                             response_mask=MASK, values=VALUES, gamma=0.9, lam=0.8,
                             std_eps=1e-6, std_ddof=1)
    np.testing.assert_allclose(got, whitened, atol=1e-12)
    raw = compute_advantages("gae", rewards=REWARDS, group_index=np.arange(3),
                             response_mask=MASK, values=VALUES, gamma=0.9, lam=0.8,
                             whiten_advantages=False)
    np.testing.assert_allclose(raw, want, atol=1e-12)
    with pytest.raises(ValueError, match="values"):
        compute_advantages("gae", rewards=REWARDS, group_index=np.arange(3),
                           response_mask=MASK)


def test_value_clip_loss_by_hand():
    """Four tokens: (V, V_old, R) chosen so that the clip binds on two of them.
    c = 0.2; l = 0.5 max((V-R)^2, (V_old + clip(V-V_old, -c, c) - R)^2)."""
    ops = get_ops("numpy")
    v = np.array([[1.0, 0.0, 0.5, 3.0]])
    old = np.array([[0.5, 0.1, 0.5, 0.0]])
    ret = np.array([[0.0, 1.0, 0.4, 9.0]])
    mask = np.array([[1.0, 1.0, 1.0, 0.0]])
    # token 0: V-R = 1, clipped V = 0.7 -> 0.49; max = 1 -> 0.5
    # token 1: V-R = -1 -> 1; clipped V = 0.0 (within 0.2 of 0.1) -> 1; max 1 -> 0.5, not clipped
    # token 2: V-R = 0.1 -> 0.01; clipped 0.5 -> 0.01 -> 0.005
    # token 0's clipped term 0.49 < 1: not counted. Make a token where clipping is larger:
    v2 = np.array([[0.0, 0.0, 0.5, 3.0]])
    old2 = np.array([[1.0, 0.1, 0.5, 0.0]])
    # token 0 (v2): V-R = 0 -> 0; clipped V = 0.8 -> 0.64: the clipped term wins -> 0.32
    loss, m = value_loss(ops, values=v, old_values=old, returns=ret, response_mask=mask,
                         cliprange_value=0.2)
    assert loss == pytest.approx((0.5 + 0.5 + 0.005) / 3)
    assert m["vf_clipfrac"] == pytest.approx(0.0)
    loss2, m2 = value_loss(ops, values=v2, old_values=old2, returns=ret, response_mask=mask,
                           cliprange_value=0.2)
    assert loss2 == pytest.approx((0.32 + 0.5 + 0.005) / 3)
    assert m2["vf_clipfrac"] == pytest.approx(1 / 3)
    # cliprange 0 = no clip: token 0 back to 0
    loss3, _ = value_loss(ops, values=v2, old_values=old2, returns=ret, response_mask=mask,
                          cliprange_value=0.0)
    assert loss3 == pytest.approx((0.0 + 0.5 + 0.005) / 3)
    # seq_mean_token_sum with global normalisers: sum / global_seqs
    loss4, _ = value_loss(ops, values=v2, old_values=old2, returns=ret, response_mask=mask,
                          cliprange_value=0.2, loss_agg_mode="seq_mean_token_sum",
                          global_seqs=4.0)
    assert loss4 == pytest.approx((0.32 + 0.5 + 0.005) / 4)


def test_critic_config_is_checked_at_load():
    from mindrl.config.loader import load_config
    from mindrl.errors import ConfigError

    with pytest.raises(ConfigError) as e:
        load_config(None, ["algorithm.adv_estimator=gae", "algorithm.lam=1.5", "critic.lr=0",
                           "critic.cliprange_value=-1", "critic.warmup_steps=5",
                           "train.steps=5", "critic.loss_agg_mode=bogus"])
    text = str(e.value)
    for key in ("algorithm.lam=1.5", "critic.lr=0", "critic.cliprange_value=-1",
                "critic.warmup_steps=5", "critic.loss_agg_mode='bogus'"):
        assert key in text, key
    cfg = load_config(None, ["algorithm.adv_estimator=gae", "rollout.n=1",
                             "algorithm.kl.in_reward=true", "algorithm.kl.coef=0.1"])
    assert cfg.critic.cliprange_value == 0.5          # gae needs no group: n = 1 is fine
