"""Model rewards (the judge, a reward model) through the scoring service that the reward server
and the framework plugins share: each worker loads its own copy before its first item, and the
TRL reward functions and verl's compute_score give the judge's known verdicts."""

import json

import pytest

from mindrl.models.tiny_judge import TEMPLATE, VERDICTS

COMPS = ["it is 3", "it is 5", "why?", "3 and 3"]
WANT = [1.0, 0.0, None, 1.0]            # builtin:tiny-judge's verdicts against reference "3"


def judge_entry(path, weight=1.0):
    return {"name": "judge", "weight": weight,
            "params": {"model": str(path), "template": TEMPLATE, "verdicts": VERDICTS,
                       "max_new_tokens": 4}}


@pytest.mark.slow
def test_service_trl_and_verl_score_with_a_judge(tiny_judge_dir):
    from mindrl.integrations.trl import reward_funcs, reward_weights
    from mindrl.integrations.verl import compute_score
    from mindrl.serve.service import ScoringService

    with ScoringService([judge_entry(tiny_judge_dir)], num_workers=1, timeout=5.0) as svc:
        res = svc.score(COMPS, answer=["3"] * 4)
    assert res.components["judge"] == WANT
    assert res.num_timeouts == {"judge": 0}         # the load was not charged to the items

    spec = json.dumps([judge_entry(tiny_judge_dir, weight=2.0)])   # MINDRL_REWARDS form
    fns = reward_funcs(spec, workers=1, timeout=5.0)
    assert [f.__name__ for f in fns] == ["judge"] and reward_weights(spec) == [2.0]
    got = fns[0](completions=[[{"role": "assistant", "content": c}] for c in COMPS],
                 prompts=["p"] * 4, answer=["3"] * 4, trainer_state=None)
    assert got == WANT

    info = compute_score("my_data", "the answer is 3", "3", rewards=spec, workers=1)
    assert info["score"] == 2.0 and info["mindrl/judge"] == 1.0
    info = compute_score("my_data", "what?", "3", rewards=spec, workers=1)
    assert info["score"] == 0.0 and info["mindrl/unscored"] == 1
