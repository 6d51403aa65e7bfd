"""The judge reward (rewards/judge.py) with ``builtin:tiny-judge``, a causal LM whose verdicts
are known from its hand-set weights (mindrl/models/tiny_judge.py), through the native engine."""

import time

import pytest

from mindrl.models.tiny_judge import TEMPLATE, VERDICTS
from rewards import build_scorer
from rewards.judge import Judge, parse_verdict, render_template


def expected_verdict(reference: str, completion: str) -> str:
    """The tiny judge's rule, computed independently: shares of the marked tokens (digits,
    ?, !, #) in the reference, the template's # and the completion."""
    marked = [c for c in reference + "#" + completion if c.isdigit() or c in "?!#"]
    share = {c: marked.count(c) / len(marked) for c in set(marked)}
    if share.get("!", 0) > 0.2:
        return "loop"
    if share.get("?", 0) > 0.2:
        return "check"
    if any(c.isdigit() and s > 0.58 for c, s in share.items()):
        return "correct"
    return "wrong"


CASES = [("3", "the answer is 3"), ("3", "the answer is 5"), ("7", "7 and 7"),
         ("7", "no digit here"), ("2", "it is 2 or 9"), ("4", "444 but 1"),
         ("5", "why?"), ("0", "0"), ("9", "98")]


def test_parse_verdict_earliest_match_and_range():
    v = {"incorrect": 0.0, "correct": 1.0}
    assert parse_verdict("Incorrect, not correct", v) == 0.0     # earliest match wins
    assert parse_verdict("correct; incorrect later", v) == 1.0
    assert parse_verdict("no verdict", v) is None
    assert parse_verdict("I give it 8 of 10", score_range=[0, 10]) == pytest.approx(0.8)
    assert parse_verdict("score 3", score_range=[1, 5]) == pytest.approx(0.5)
    assert parse_verdict("score 12", score_range=[0, 10]) is None   # outside the range
    assert parse_verdict("none", score_range=[0, 10]) is None
    assert render_template("{problem}|{reference}|{completion}|{other}", problem="p",
                           reference="r", completion="{c}") == "p|r|{c}|{other}"


def test_judge_bad_params_name_the_key():
    with pytest.raises(ValueError, match="params.template"):
        Judge(model="builtin:tiny-judge", template="no completion here")
    with pytest.raises(ValueError, match="params.score_range"):
        Judge(model="x", score_range=[3, 1])
    with pytest.raises(ValueError, match="params.engine"):
        Judge(model="x", engine="tgi")
    with pytest.raises(FileNotFoundError, match="params.model=/no/such/judge"):
        build_scorer({"functions": [{"name": "judge", "params": {"model": "/no/such/judge"}}],
                      "num_workers": 0})


def test_tiny_judge_scores_known_verdicts(tiny_judge_dir):
    judge = Judge(model=tiny_judge_dir, template=TEMPLATE, verdicts=VERDICTS, batch_size=4,
                  max_new_tokens=4)
    refs = [r for r, _ in CASES]
    comps = [c for _, c in CASES]
    res = judge.score_batch(comps, answer=refs, problem=["p"] * len(CASES))
    want = [expected_verdict(r, c) for r, c in CASES]
    assert "correct" in want and "wrong" in want and "check" in want
    for got, out, w, case in zip(res.scores, res.outputs, want, CASES):
        assert out.strip() == w, case                  # the model's own words
        assert got == {"correct": 1.0, "wrong": 0.0, "check": None}[w], case
    assert res.counts == {"judged": len(CASES), "unparsed": want.count("check"),
                          "timeouts": 0, "rule": 0}


def test_judge_timeout_per_item_and_unparsed_counted(tiny_judge_dir):
    """A judge that never ends ("!" loops) is cut at the limit; the rest of its batch is
    scored; through the scoring pool both counts reach the metrics."""
    comps = ["it is 3", "say 3!", "what?", "it is 8"]
    params = dict(model=tiny_judge_dir, template=TEMPLATE, verdicts=VERDICTS,
                  max_new_tokens=1500, timeout=0.3, batch_size=8)
    with build_scorer({"functions": [{"name": "judge", "params": params}],
                       "num_workers": 0}) as scorer:
        t0 = time.monotonic()
        res = scorer.score(comps, answer=["3"] * 4)
        took = time.monotonic() - t0
    assert res.components["judge"] == [1.0, None, None, 0.0]
    assert res.num_timeouts == {"judge": 1}
    assert res.counts["judge"] == {"judged": 4, "unparsed": 1, "timeouts": 1, "rule": 0}
    assert res.outputs["judge"][1].startswith("!!!")        # cut mid-loop
    assert res.outputs["judge"][2].strip() == "check"
    m = res.metrics()
    assert m["reward/timeouts"] == 1 and m["reward/judge/unparsed"] == 1
    assert took < 10


def test_rule_first_judge_reads_only_unanswered(tiny_judge_dir):
    """rule: accuracy with unanswered=null scores the boxed answers; the judge reads the rest,
    and the score is the rule's where it answered, the judge's elsewhere."""
    comps = [r"\boxed{3}", r"\boxed{4}", "it is 3", "it is 5"]
    judge = Judge(model=tiny_judge_dir, template=TEMPLATE, verdicts=VERDICTS,
                  rule={"name": "accuracy", "params": {"unanswered": None}})
    res = judge.score_batch(comps, answer=["3"] * 4)
    assert res.scores == [1.0, 0.0, 1.0, 0.0]
    assert res.outputs[:2] == [None, None] and res.outputs[2].strip() == "correct"
    assert res.counts == {"judged": 2, "unparsed": 0, "timeouts": 0, "rule": 2}


def test_judge_mixed_with_rule_by_weight(tiny_judge_dir):
    """total = 0.5 * format + 2 * judge, components logged apart."""
    fmt_ok = "<think>\nx\n</think>\n<answer>\n3\n</answer>"
    params = dict(model=tiny_judge_dir, template=TEMPLATE, verdicts=VERDICTS)
    with build_scorer({"functions": [{"name": "format", "weight": 0.5},
                                     {"name": "judge", "weight": 2.0, "params": params}],
                       "num_workers": 0}) as scorer:
        res = scorer.score([fmt_ok, "it is 5", "it is 3"], answer=["3", "3", "3"])
    assert res.components["format"] == [1.0, 0.0, 0.0]
    assert res.components["judge"] == [1.0, 0.0, 1.0]
    assert res.total.tolist() == [2.5, 0.0, 2.0]


@pytest.mark.slow
def test_judge_on_its_own_ray_actor(tiny_judge_dir):
    """placement: actor decodes in another process (a Ray actor) with the same verdicts."""
    import os

    import ray

    before = ray.is_initialized()
    judge = Judge(model=tiny_judge_dir, template=TEMPLATE, verdicts=VERDICTS, max_new_tokens=4,
                  placement="actor")
    try:
        res = judge.score_batch([c for _, c in CASES], answer=[r for r, _ in CASES])
        pid = ray.get(judge._runner.actor.__ray_call__.remote(lambda self: os.getpid()))
    finally:
        judge.close()
    assert pid != os.getpid()
    assert [o.strip() for o in res.outputs] == [expected_verdict(r, c) for r, c in CASES]
    assert ray.is_initialized() == before          # a Ray it started is shut down again


def test_scored_keeps_judge_outputs_aligned_through_select_and_concat():
    """Dynamic sampling selects groups and concatenates them: outputs follow their rows."""
    import numpy as np

    from mindrl.trainer.base import Scored

    a = Scored(np.array([1.0, 0.0]), {"judge": np.array([1.0, 0.0])}, {"none": 0.0},
               {"judge": [" correct", " wrong"]})
    b = Scored(np.array([0.5]), {"judge": np.array([np.nan])}, {"none": 1.0}, {})
    both = Scored.concat([a, b])
    assert both.outputs == {"judge": [" correct", " wrong", None]}
    assert both.select(np.array([2, 0])).outputs == {"judge": [None, " correct"]}
    assert both.select(slice(1, 3)).outputs == {"judge": [" wrong", None]}


def test_long_completion_keeps_its_end_within_max_prompt_len(tiny_judge_dir):
    judge = Judge(model=tiny_judge_dir, template=TEMPLATE, verdicts=VERDICTS, max_prompt_len=24,
                  chat="false")
    long = "5 " * 200 + "so the answer is 3"
    text = judge._fit(long, "", "3")
    runner = judge._runner_()
    assert runner.length(text) <= 24
    assert text.endswith("so the answer is 3 Verdict:") and text.startswith("Reference: 3 #")
    assert judge._fit("it is 3", "", "3") == "Reference: 3 # Answer: it is 3 Verdict:"
    tight = Judge(model=tiny_judge_dir, template=TEMPLATE, max_prompt_len=5, chat="false")
    with pytest.raises(ValueError, match="params.max_prompt_len=5"):
        tight._fit("it is 3", "", "3")
