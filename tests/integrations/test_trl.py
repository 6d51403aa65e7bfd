"""mindrl reward functions inside a real TRL 1.16 GRPOTrainer step (trl_checks.py runs it)."""

import pytest

from peers import peer_dir, run_checks

pytestmark = pytest.mark.slow


def test_grpo_trainer_step_with_mindrl_rewards(tiny_dir, tmp_path):
    out = run_checks("trl_checks.py", str(peer_dir("trl")), str(tiny_dir), str(tmp_path))
    assert out["trl"] == "1.16.0" and out["global_step"] == 1
    calls = {c["name"]: c for c in out["calls"]}
    assert set(calls) == {"accuracy", "slow_len"}
    comps = calls["slow_len"]["completions"]
    assert len(comps) == 4 and calls["accuracy"]["answer"] == ["3"] * 4   # dataset column
    # slow_len scores each completion's length: check against the texts TRL generated
    assert calls["slow_len"]["scores"] == [float(len(c)) for c in comps]
    assert all(s in (0.0, 1.0) for s in calls["accuracy"]["scores"])
    # what TRL logged is what the functions returned, weighted by reward_weights (1, 0.01)
    log = next(entry for entry in out["logs"] if "rewards/slow_len/mean" in entry)
    mean_len = sum(len(c) for c in comps) / 4
    mean_acc = sum(calls["accuracy"]["scores"]) / 4
    assert log["rewards/slow_len/mean"] == pytest.approx(mean_len)
    assert log["rewards/accuracy/mean"] == pytest.approx(mean_acc)
    assert log["reward"] == pytest.approx(mean_acc + 0.01 * mean_len)


def test_grpo_trainer_step_with_a_judge(tiny_dir, tiny_judge_dir, tmp_path):
    """A judge (builtin:tiny-judge) as a TRL reward function: TRL's completions get the scores
    the judge gives them when called here, in process; TRL logs their weighted mean."""
    import json

    from mindrl.models.tiny_judge import TEMPLATE, VERDICTS
    from rewards.judge import Judge

    params = {"model": str(tiny_judge_dir), "template": TEMPLATE, "verdicts": VERDICTS,
              "max_new_tokens": 4}
    spec = json.dumps([{"name": "judge", "weight": 0.5, "params": params}])
    out = run_checks("trl_checks.py", str(peer_dir("trl")), str(tiny_dir), str(tmp_path), spec)
    assert out["global_step"] == 1
    (call,) = out["calls"]
    assert call["name"] == "judge" and call["answer"] == ["3"] * 4
    want = Judge(**params).score_batch(call["completions"], answer=call["answer"]).scores
    assert call["scores"] == want
    log = next(entry for entry in out["logs"] if "rewards/judge/mean" in entry)
    scored = [s for s in want if s is not None]
    if scored:
        assert log["rewards/judge/mean"] == pytest.approx(sum(scored) / len(scored))
