"""mindrl inside verl 0.9.1, loaded the ways verl loads plugins (verl_checks.py runs them)."""

import math

import pytest

from peers import peer_dir, run_checks

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def verl_out(tiny_dir):
    return run_checks("verl_checks.py", str(peer_dir("verl")), str(tiny_dir),
                      env={"VERL_USE_EXTERNAL_MODULES": "mindrl.integrations.verl"})


def test_custom_reward_function_through_verl_loader(verl_out):
    assert verl_out["verl"] == "0.9.1"
    # GSM8K number, MATH equivalence (1/2 == 0.5), a wrong boxed answer, a Countdown equation
    assert [r["score"] for r in verl_out["custom"]] == [1.0, 1.0, 0.0, 1.0]
    assert verl_out["custom"][0]["mindrl/gsm8k_accuracy"] == 1.0
    assert verl_out["custom"][3]["mindrl/countdown_equation"] == 1.0
    # reward_kwargs rewards="accuracy:1,format:0.5" on a well-formatted right answer
    assert verl_out["custom_spec"] == {"score": 1.5, "mindrl/accuracy": 1.0, "mindrl/format": 1.0}


def _expect_last_token(rows, lengths, scores):
    for row, n, s in zip(rows, lengths, scores):
        want = [0.0] * len(row)
        want[n - 1] = s
        assert row == want


def test_batch_reward_manager_on_dataproto(verl_out):
    # math "\boxed{2}" vs 2 right, "\boxed{5}" vs 4 wrong, gsm8k 18 vs "#### 18" right, 17 wrong
    _expect_last_token(verl_out["legacy_rewards"], verl_out["response_lengths"],
                       [1.0, 0.0, 1.0, 0.0])


def test_reward_loop_manager_loaded_by_load_reward_manager(verl_out):
    assert verl_out["manager_class"] == "MindrlRewardManager"
    assert verl_out["loop_scores"] == [1.0, 0.0, 1.0, 0.0]
    _expect_last_token(verl_out["loop_rm_scores"], verl_out["response_lengths"],
                       [1.0, 0.0, 1.0, 0.0])


def test_advantage_estimators_through_compute_advantage(verl_out):
    # group a: outcome rewards [1, 0, 0, 1]; group b: [1, 1] (all equal -> 0)
    mask = [[1, 1, 0], [1, 1, 1], [1, 0, 0], [1, 1, 1], [1, 1, 0], [1, 1, 1]]
    sign = [1, -1, -1, 1, 0, 0]
    grpo = 0.5 / (math.sqrt(1 / 3) + 1e-6)      # (r - 0.5) / (unbiased std + 1e-6)
    per_row = {"mindrl_rloo": [s * 2 / 3 for s in sign],      # r - mean of the other three
               "mindrl_grpo": [s * grpo for s in sign],
               "mindrl_dr_grpo": [s * 0.5 for s in sign]}
    for name, vals in per_row.items():
        got = verl_out["advantages"][name]
        for row, m, v in zip(got, mask, vals):
            assert row == pytest.approx([v * k for k in m], abs=1e-6), name
