"""Advantage estimators against hand-computed numbers and brute force (NumPy only)."""

import itertools
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from algorithms import ADV_ESTIMATORS, advantage_params, compute_advantages
from algorithms.advantages import passk_group_advantages
from mindrl.config.schema import AlgorithmConfig, KLConfig

ONES4 = np.ones((4, 3))


def adv_of(name, rewards, groups, mask=None, **params):
    rewards = np.asarray(rewards, dtype=float)
    mask = np.ones((len(rewards), 2)) if mask is None else mask
    return compute_advantages(name, rewards=rewards, group_index=groups, response_mask=mask,
                              **params)


def test_grpo_unbiased_std_by_hand():
    # mean 0.5; unbiased std = sqrt(4 * 0.25 / 3) = sqrt(1/3); 0.5 / sqrt(1/3) = sqrt(3)/2
    a = adv_of("grpo", [1, 0, 0, 1], [7, 7, 7, 7], ONES4, std_ddof=1, std_eps=0.0)
    expected = np.array([1, -1, -1, 1]) * math.sqrt(3) / 2
    np.testing.assert_allclose(a, np.repeat(expected[:, None], 3, axis=1), rtol=1e-12)
    assert a.dtype == np.float64 and a.shape == (4, 3)


def test_grpo_population_std_and_eps():
    a = adv_of("grpo", [1, 0, 0, 1], [0] * 4, std_ddof=0, std_eps=0.0)[:, 0]
    np.testing.assert_allclose(a, [1, -1, -1, 1])
    a = adv_of("grpo", [1, 0, 0, 1], [0] * 4, std_ddof=0, std_eps=0.5)[:, 0]
    np.testing.assert_allclose(a, [0.5, -0.5, -0.5, 0.5])  # 0.5 / (0.5 + 0.5)


def test_grpo_defaults_match_config():
    cfg = AlgorithmConfig()
    a = adv_of("grpo", [1, 0, 0, 1], [0] * 4, **advantage_params(cfg))[:, 0]
    np.testing.assert_allclose(a, np.array([1, -1, -1, 1]) * 0.5 / (math.sqrt(1 / 3) + 1e-6))


def test_grpo_group_of_one_and_constant_group_get_zero():
    # groups: {a: [1, 0]}, {b: [3]} alone, {c: [2, 2]} all equal
    a = adv_of("grpo", [1, 0, 3, 2, 2], ["a", "a", "b", "c", "c"], std_ddof=1)[:, 0]
    assert a[2] == 0.0 and a[3] == 0.0 and a[4] == 0.0
    expected = 0.5 / (math.sqrt(0.5) + 1e-6)  # mean 0.5, unbiased std sqrt(0.5)
    np.testing.assert_allclose(a[:2], [expected, -expected])
    for name in ("dr_grpo", "rloo", "reinforce_pp_baseline"):
        assert adv_of(name, [1, 0, 3], [0, 0, 1])[2, 0] == 0.0, name


def test_groups_are_independent_and_order_free():
    r = [1, 0, 5, 1, 0, 7]
    g = [0, 0, 1, 0, 0, 1]
    a = adv_of("grpo", r, g, std_ddof=0, std_eps=0.0)[:, 0]
    np.testing.assert_allclose(a, [1, -1, -1, 1, -1, 1])


def test_padding_is_zero():
    mask = np.array([[1, 1, 0], [1, 0, 0]], dtype=bool)
    for name in ADV_ESTIMATORS:
        extra = {"values": np.full(mask.shape, 0.3)} if name == "gae" else {}  # critic's V
        a = adv_of(name, [1, 0], [0, 0], mask, passk_k=1, **extra)
        assert np.all(a[~mask] == 0), name


def test_dr_grpo_by_hand():
    a = adv_of("dr_grpo", [1, 0, 0, 0], [0] * 4)[:, 0]
    np.testing.assert_allclose(a, [0.75, -0.25, -0.25, -0.25])


def test_rloo_by_hand():
    a = adv_of("rloo", [1, 0, 0, 0, 2, 4], [0, 0, 0, 0, 1, 1])[:, 0]
    # 1 - (0+0+0)/3 ; 0 - (1+0+0)/3 ; 2 - 4 ; 4 - 2
    np.testing.assert_allclose(a, [1, -1 / 3, -1 / 3, -1 / 3, -2, 2])


def _whiten(values, eps=1e-6):
    v = np.asarray(values, dtype=float)
    return (v - v.mean()) / (v.std(ddof=1) + eps)


def test_reinforce_pp_returns_and_whitening_by_hand():
    mask = np.array([[1, 1, 1], [1, 1, 0]], dtype=float)
    # row 0: reward 1 at t=2 -> returns 0.25, 0.5, 1 (gamma 0.5); row 1: reward 0 -> 0, 0
    a = adv_of("reinforce_pp", [1, 0], [0, 1], mask, gamma=0.5)
    w = _whiten([0.25, 0.5, 1.0, 0.0, 0.0])
    np.testing.assert_allclose(a[0], w[:3])
    np.testing.assert_allclose(a[1], [w[3], w[4], 0.0])


def test_reinforce_pp_kl_folded_into_rewards_by_hand():
    mask = np.array([[1, 1, 1], [1, 1, 0]], dtype=float)
    kl = np.array([[0.2, 0.4, 0.6], [1.0, 2.0, 99.0]])  # 99 sits on padding: ignored
    a = compute_advantages("reinforce_pp", rewards=[1.0, 0.0], group_index=[0, 1],
                           response_mask=mask, token_kl=kl, gamma=1.0, kl_coef=0.1)
    # token rewards row 0: -0.02, -0.04, 1 - 0.06 ; row 1: -0.1, -0.2
    returns0 = [-0.02 - 0.04 + 0.94, -0.04 + 0.94, 0.94]
    returns1 = [-0.3, -0.2]
    w = _whiten(returns0 + returns1)
    np.testing.assert_allclose(a[0], w[:3])
    np.testing.assert_allclose(a[1, :2], w[3:])
    # kl_coef 0 (kl not in reward) ignores token_kl
    b = compute_advantages("reinforce_pp", rewards=[1.0, 0.0], group_index=[0, 1],
                           response_mask=mask, token_kl=kl, gamma=1.0, kl_coef=0.0)
    np.testing.assert_allclose(b[0], _whiten([1, 1, 1, 0, 0])[:3])


def test_reinforce_pp_credits_turns_before_a_tool_output():
    """Multi-turn: tokens 2-3 are a tool output (mask 0) inside row 0. Its reward 1 at t=5
    reaches the first turn: returns 0.125, 0.25, -, -, 0.5, 1 (gamma 0.5; the hole is skipped,
    not a discount step), the numbers of the same tokens without the hole."""
    mask = np.array([[1, 1, 0, 0, 1, 1], [1, 1, 1, 0, 0, 0]], dtype=float)
    a = adv_of("reinforce_pp", [1, 0], [0, 1], mask, gamma=0.5)
    w = _whiten([0.125, 0.25, 0.5, 1.0, 0.0, 0.0, 0.0])
    np.testing.assert_allclose(a[0], [w[0], w[1], 0, 0, w[2], w[3]])
    np.testing.assert_allclose(a[1], [w[4], w[5], w[6], 0, 0, 0])
    solid = adv_of("reinforce_pp", [1, 0], [0, 1], np.array([[1, 1, 1, 1], [1, 1, 1, 0]], float),
                   gamma=0.5)
    np.testing.assert_allclose(a[0][mask[0] > 0], solid[0])
    # the baseline variant walks the same way: row 0 centred 0.5 at t=5, row 1 -0.5 at t=2
    b = adv_of("reinforce_pp_baseline", [1, 0], [0, 0], mask, gamma=1.0)
    wb = _whiten([0.5] * 4 + [-0.5] * 3)
    np.testing.assert_allclose(b[0], [wb[0], wb[1], 0, 0, wb[2], wb[3]])


def test_reinforce_pp_baseline_by_hand():
    mask = np.ones((4, 2))
    a = adv_of("reinforce_pp_baseline", [1, 0, 3, 3], [0, 0, 1, 1], mask)
    # centred: 0.5, -0.5, 0, 0 broadcast to 2 tokens each, then batch-whitened
    w = _whiten([0.5, 0.5, -0.5, -0.5, 0, 0, 0, 0])
    np.testing.assert_allclose(a.reshape(-1), w)


def test_advantage_params_from_config():
    cfg = AlgorithmConfig(kl=KLConfig(coef=0.3, in_reward=True), gamma=0.9)
    p = advantage_params(cfg)
    assert p["kl_coef"] == 0.3 and p["gamma"] == 0.9 and p["std_ddof"] == 1
    assert advantage_params(AlgorithmConfig(kl=KLConfig(coef=0.3)))["kl_coef"] == 0.0


# --- pass@k ---------------------------------------------------------------------------------
def brute_force_passk(correct, k):
    """Average, over the k-subsets holding each rollout, of (max(subset) - R) / sigma."""
    n = len(correct)
    subsets = list(itertools.combinations(range(n), k))
    score = {s: float(max(correct[i] for i in s)) for s in subsets}
    values = np.array(list(score.values()))
    r_mean, sigma = values.mean(), values.std()
    if sigma == 0:
        return np.zeros(n)
    return np.array([np.mean([(score[s] - r_mean) / sigma for s in subsets if i in s])
                     for i in range(n)])


@pytest.mark.parametrize("n", [2, 3, 4, 5, 6])
def test_passk_matches_brute_force(n):
    for k in range(1, n + 1):
        for n_pos in range(0, n + 1):
            correct = [1] * n_pos + [0] * (n - n_pos)
            a = adv_of("passk", correct, [0] * n, np.ones((n, 1)), passk_k=k)[:, 0]
            np.testing.assert_allclose(a, brute_force_passk(correct, k), atol=1e-12,
                                       err_msg=f"n={n} k={k} n_pos={n_pos}")


def test_passk_by_hand_and_k1_is_grpo():
    # N=4, N_neg=2, k=2: R = 1 - 1/6, sigma = sqrt(5)/6, A_pos = 1/sqrt5, A_neg = -1/sqrt5
    a_pos, a_neg, r_mean, sigma = passk_group_advantages(4, 2, 2)
    assert r_mean == pytest.approx(5 / 6) and sigma == pytest.approx(math.sqrt(5) / 6)
    assert a_pos == pytest.approx(1 / math.sqrt(5)) and a_neg == pytest.approx(-1 / math.sqrt(5))
    r = [1, 0, 0, 0, 1, 1]
    np.testing.assert_allclose(adv_of("passk", r, [0] * 6, passk_k=1),
                               adv_of("grpo", r, [0] * 6, std_ddof=0, std_eps=0.0))


def test_passk_threshold_mixed_groups_and_errors():
    a = adv_of("passk", [1.0, 0.0, 0.2, 0.9, 0.0, 0.0], [0, 0, 0, 1, 1, 1], passk_k=3)[:, 0]
    assert np.all(a[:3] == 0)  # k = N = 3 with one correct: every subset passes, sigma = 0
    with pytest.raises(ValueError, match="k <= group size"):
        adv_of("passk", [1, 0], [0, 0], passk_k=3)


# --- registry and argument errors -------------------------------------------------------------
def test_registry_miss_lists_valid_names():
    with pytest.raises(KeyError) as err:
        adv_of("grpoo", [1, 0], [0, 0])
    msg = str(err.value)
    assert "did you mean 'grpo'" in msg
    for name in ("grpo", "dr_grpo", "rloo", "reinforce_pp", "reinforce_pp_baseline", "passk"):
        assert name in msg and name in ADV_ESTIMATORS


def test_unknown_parameter_and_bad_shapes():
    with pytest.raises(TypeError, match="std_epsilon"):
        adv_of("grpo", [1, 0], [0, 0], std_epsilon=1e-6)
    with pytest.raises(ValueError, match="response_mask"):
        compute_advantages("grpo", rewards=[1, 0], group_index=[0, 0], response_mask=np.ones(2))


def test_package_imports_no_framework():
    code = ("import sys, algorithms; "
            "bad = [m for m in ('torch', 'mindspore') if m in sys.modules]; "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parents[2])


# --- std == 0 with std_eps = 0 (issue 10): advantage 0, never NaN -----------------------------
@pytest.mark.parametrize("rewards", [[1.0, 1.0, 1.0, 1.0], [0.1, 0.1, 0.1], [0.0, 0.0]])
@pytest.mark.parametrize("ddof", [0, 1])
def test_grpo_equal_group_with_zero_eps_is_zero(rewards, ddof):
    # 0.1 * 3 / 3 != 0.1 in float64: the centred rewards are ~1e-17, not 0; an exact
    # "std == 0" test alone would divide 1e-17 by 1e-17 and give +-1
    n = len(rewards)
    a = adv_of("grpo", rewards + [1.0, 0.0], [0] * n + [1, 1], std_ddof=ddof, std_eps=0.0)
    assert np.isfinite(a).all()
    np.testing.assert_array_equal(a[:n], 0.0)
    # the other group, by hand: mean 0.5, ddof 1 std sqrt(0.5) -> +-0.5/sqrt(0.5); ddof 0 -> +-1
    expected = 0.5 / math.sqrt(0.5) if ddof == 1 else 1.0
    np.testing.assert_allclose(a[n:, 0], [expected, -expected], rtol=1e-12)


@pytest.mark.parametrize("name", ["reinforce_pp", "reinforce_pp_baseline"])
def test_reinforce_pp_constant_batch_with_zero_eps_is_zero(name):
    mask = np.array([[1, 1, 0], [1, 1, 1]], dtype=float)
    # reinforce_pp, gamma 1: every valid token's return is the outcome 0.3 -> std 0 -> 0;
    # baseline: centred rewards 0 everywhere -> 0
    a = adv_of(name, [0.3, 0.3], [0, 0], mask, gamma=1.0, std_eps=0.0)
    assert np.isfinite(a).all()
    np.testing.assert_array_equal(a, 0.0)
