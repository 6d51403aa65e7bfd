"""mindrl inside verl 0.9.1, loaded the ways verl loads plugins (verl_checks.py runs them)."""

import itertools
import math

import numpy as np
import pytest

from peers import peer_dir, run_checks

pytestmark = pytest.mark.slow

ENV = {"VERL_USE_EXTERNAL_MODULES": "mindrl.integrations.verl", "RAY_AUTH_MODE": "disabled"}


@pytest.fixture(scope="module")
def verl_out(tiny_dir):
    return run_checks("verl_checks.py", str(peer_dir("verl")), str(tiny_dir), "plugins", env=ENV)


@pytest.fixture(scope="module")
def loop_out(tiny_dir, shared_data):
    return run_checks("verl_checks.py", str(peer_dir("verl")), str(tiny_dir), "reward_loop",
                      str(shared_data), env=ENV)


def test_custom_reward_function_through_verl_loader(verl_out):
    assert verl_out["verl"] == "0.9.1"
    # GSM8K number, MATH equivalence (1/2 == 0.5), a wrong boxed answer, a Countdown equation,
    # a GSM8K label without a number (unscorable: 0 in the score, counted)
    assert verl_out["custom"] == [{"score": s, "mindrl/unscored": u} for s, u in
                                  [(1.0, 0.0), (1.0, 0.0), (0.0, 0.0), (1.0, 0.0), (0.0, 1.0)]]
    # reward_kwargs rewards="accuracy:1,format:0.5": per-component keys, the same on every source
    want = {"score": 1.5, "mindrl/accuracy": 1.0, "mindrl/format": 1.0, "mindrl/unscored": 0.0}
    assert verl_out["custom_spec"] == want
    assert verl_out["custom_spec_gsm8k"] == want
    # the grader timed out (1 s) on 9^(9^(9^9)): accuracy 0 in the score and its key, counted
    assert verl_out["custom_spec_timeout"] == {"score": 0.5, "mindrl/accuracy": 0.0,
                                               "mindrl/format": 1.0, "mindrl/unscored": 1.0}


def _expect_last_token(rows, lengths, scores):
    for row, n, s in zip(rows, lengths, scores):
        want = [0.0] * len(row)
        want[n - 1] = s
        assert row == want


def test_batch_reward_manager_on_dataproto(verl_out):
    # math "\boxed{2}" vs 2 right, "\boxed{5}" vs 4 wrong, gsm8k 18 vs "#### 18" right, 17 wrong
    _expect_last_token(verl_out["legacy_rewards"], verl_out["response_lengths"],
                       [1.0, 0.0, 1.0, 0.0])
    # one value per row for every key, although the rows come from two data sources
    assert verl_out["legacy_extra"] == {"score": [1.0, 0.0, 1.0, 0.0],
                                        "mindrl/unscored": [0.0] * 4}
    # MINDRL_REWARDS fixes the spec: the math grader and format on every row (no boxed answer
    # in the GSM8K rows, no <think> anywhere), per-component keys aligned with the rows
    assert verl_out["legacy_extra_fixed"] == {
        "score": [1.0, 0.0, 0.0, 0.0], "mindrl/accuracy": [1.0, 0.0, 0.0, 0.0],
        "mindrl/format": [0.0] * 4, "mindrl/unscored": [0.0] * 4}


def test_reward_loop_manager_loaded_by_load_reward_manager(verl_out):
    assert verl_out["manager_class"] == "MindrlRewardManager"
    assert verl_out["loop_scores"] == [1.0, 0.0, 1.0, 0.0]
    _expect_last_token(verl_out["loop_rm_scores"], verl_out["response_lengths"],
                       [1.0, 0.0, 1.0, 0.0])
    assert verl_out["loop_extra"] == [{"score": s, "mindrl/unscored": 0.0}
                                      for s in [1.0, 0.0, 1.0, 0.0]]


def test_verl_reward_loop_on_a_mixed_gsm8k_math_batch(loop_out):
    """verl's RewardLoopManager.compute_rm_score (Ray, verl's naive manager calling
    compute_score) stacks the extra info by the first sample's keys: every row must have them."""
    assert loop_out["sources"] == ["simplelr_qwen", "openai/gsm8k", "simplelr_qwen",
                                   "openai/gsm8k", "simplelr_qwen"]
    # MATH right, GSM8K right, MATH wrong, GSM8K wrong, MATH grader timed out (1 s)
    scores = [1.0, 1.0, 0.0, 0.0, 0.0]
    _expect_last_token(loop_out["rm_scores"], loop_out["response_lengths"], scores)
    assert loop_out["extra_keys"] == ["score", "mindrl/unscored"]
    assert loop_out["extra"] == {"score": scores, "mindrl/unscored": [0.0, 0.0, 0.0, 0.0, 1.0]}
    assert loop_out["extra_finite"]


# ---------------------------------------------------------------- advantage estimators
ESTIMATORS = ["grpo", "dr_grpo", "rloo", "reinforce_pp", "reinforce_pp_baseline", "passk"]


def test_every_registered_estimator_is_checked(verl_out):
    assert verl_out["registered"] == sorted("mindrl_" + e for e in ESTIMATORS)
    # verl puts the KL into the token rewards: a kl_coef here would be ignored, so it is refused
    assert "['kl_coef']" in verl_out["kl_coef_rejected"]
    assert "use_kl_in_reward" in verl_out["kl_coef_rejected"]
    checked = {k.split("/")[0] for k in verl_out["advantages"]}
    assert checked == set(ESTIMATORS)
    # both reward shapes, and the KL really is per token (not only on the last token)
    tok = np.array(verl_out["adv_rewards"]["token"])
    last = np.array(verl_out["adv_rewards"]["last"])
    assert (np.abs(tok - last) > 1e-3).sum() > 20


@pytest.mark.parametrize("est", ["grpo", "dr_grpo", "rloo", "reinforce_pp",
                                 "reinforce_pp_baseline"])
def test_estimator_matches_verls_own(verl_out, est):
    """Same batch through verl's compute_advantage: mindrl_<est> vs verl's estimator, with
    last-token rewards and with KL-in-reward token rewards, gamma 1 and 0.9 (where verl's
    estimator reads gamma). Whitening differs only in eps: 1/(std + 1e-6) vs rsqrt(var + 1e-8)."""
    refs = {k: v for k, v in verl_out["verl_advantages"].items() if k.split("/")[0] == est}
    want_keys = {f"{est}/{kind}/{g}" for kind in ("last", "token")
                 for g in ((1.0,) if est == "reinforce_pp_baseline" else (1.0, 0.9))}
    assert set(refs) == want_keys
    for key, ref in refs.items():
        np.testing.assert_allclose(verl_out["advantages"][key], ref, atol=1e-5, err_msg=key)
    if est == "reinforce_pp":     # verl's returns are the (unwhitened) discounted returns
        for key, ref in verl_out["verl_returns"].items():
            np.testing.assert_allclose(verl_out["mindrl_returns"][key], ref, atol=1e-6,
                                       err_msg=key)


def _groups(uid):
    return {g: [i for i, u in enumerate(uid) if u == g] for g in dict.fromkeys(uid)}


def _passk_reference(correct, k):
    """Per rollout: the mean over the k-subsets that contain it of (pass(S) - R) / sigma, R the
    mean pass@k over all k-subsets, sigma = sqrt(R (1 - R)) (0 when sigma is 0)."""
    n = len(correct)
    subsets = list(itertools.combinations(range(n), k))
    passed = {s: float(any(correct[i] for i in s)) for s in subsets}
    r = sum(passed.values()) / len(subsets)
    sigma = math.sqrt(r * (1 - r))
    if sigma == 0:
        return [0.0] * n
    return [np.mean([(passed[s] - r) / sigma for s in subsets if i in s]) for i in range(n)]


def test_passk_against_subset_enumeration(verl_out):
    """verl has no analytic pass@k estimator: enumerate the k-subsets (k = 4) of each group."""
    mask = np.array(verl_out["adv_mask"])
    uid = verl_out["adv_uid"]
    for kind in ("last", "token"):
        r = np.array(verl_out["adv_rewards"][kind]).sum(-1)
        want = np.zeros(len(r))
        for idx in _groups(uid).values():
            want[idx] = _passk_reference([r[i] > 0.5 for i in idx], 4)
        assert np.abs(want).max() > 0.5        # group a (1 of 6 right) is not degenerate
        for g in (1.0, 0.9):
            np.testing.assert_allclose(verl_out["advantages"][f"passk/{kind}/{g}"],
                                       want[:, None] * mask, atol=1e-6)


def test_reinforce_pp_baseline_with_discount_by_hand(verl_out):
    """gamma 0.9 (verl's baseline estimator ignores gamma): r_i = sum of token rewards, r_i -
    group mean on the last response token, G_t = c_t + 0.9 G_(t+1) (a masked token passes G
    through), whitened over the response tokens with (unbiased std + 1e-6)."""
    mask = np.array(verl_out["adv_mask"])
    uid = verl_out["adv_uid"]
    for kind in ("last", "token"):
        r = np.array(verl_out["adv_rewards"][kind]).sum(-1)
        for idx in _groups(uid).values():
            r[idx] = r[idx] - r[idx].mean()
        returns = np.zeros_like(mask)
        for i in range(len(r)):
            running, last = 0.0, max(np.nonzero(mask[i])[0])
            for t in range(mask.shape[1] - 1, -1, -1):
                if mask[i, t]:
                    running = (r[i] if t == last else 0.0) + 0.9 * running
                    returns[i, t] = running
        valid = returns[mask > 0]
        want = (returns - valid.mean()) / (valid.std(ddof=1) + 1e-6) * mask
        np.testing.assert_allclose(verl_out["advantages"][f"reinforce_pp_baseline/{kind}/0.9"],
                                   want, atol=1e-5)


def test_reward_info_is_finite_with_the_same_keys():
    """No verl needed: a None and a NaN component count 0 and are counted in mindrl/unscored."""
    from mindrl.integrations.verl import reward_info
    from rewards.pool import RewardResult

    res = RewardResult(components={"accuracy": [1.0, None, float("nan")], "format": [1.0] * 3},
                       total=np.array([1.5, 0.5, np.nan]),
                       weights={"accuracy": 1.0, "format": 0.5})
    assert [reward_info(res, i, True) for i in range(3)] == [
        {"score": 1.5, "mindrl/accuracy": 1.0, "mindrl/format": 1.0, "mindrl/unscored": 0.0},
        {"score": 0.5, "mindrl/accuracy": 0.0, "mindrl/format": 1.0, "mindrl/unscored": 1.0},
        {"score": 0.5, "mindrl/accuracy": 0.0, "mindrl/format": 1.0, "mindrl/unscored": 1.0}]
    assert reward_info(res, 2, False) == {"score": 0.5, "mindrl/unscored": 1.0}
