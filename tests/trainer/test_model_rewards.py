"""Model rewards inside `mindrl train`: a GRPO run scored by a judge (grpo_judge_smoke), its
verdicts saved with the rollouts and counted in the metrics. (Both backends also run the recipe
in tests/trainer/test_recipe_smoke.py.)"""

import json
from pathlib import Path

import numpy as np
import pytest

from mindrl.cli import main
from mindrl.models.tiny_judge import TEMPLATE, VERDICTS


def judge_rule(tokenizer, reference: str, completion: str) -> str:
    """builtin:tiny-judge's verdict, from the shares of its marked tokens (digits, ?, !, #)
    in the prompt as the judge's tokenizer cuts it."""
    prompt = TEMPLATE.replace("{reference}", reference).replace("{completion}", completion)
    marks = []
    for t in tokenizer(prompt, add_special_tokens=False)["input_ids"]:
        text = tokenizer.decode([t]).strip()
        if len(text) == 1 and (text.isdigit() or text in "?!#"):
            marks.append(text)
    share = {m: marks.count(m) / len(marks) for m in marks}
    if share.get("!", 0) > 0.2:
        return "!"
    if share.get("?", 0) > 0.2:
        return "check"
    return "correct" if any(m.isdigit() and s > 0.58 for m, s in share.items()) else "wrong"


@pytest.fixture
def builtin_cache(tiny_dir, monkeypatch):
    """builtin:* resolve to the session's cache (tiny and tiny-judge built once)."""
    monkeypatch.setenv("MINDRL_CACHE", str(Path(tiny_dir).parent))


VLLM_JUDGE = ('reward.functions=[{name: judge, params: {model: "builtin:tiny-judge", '
              'template: "' + TEMPLATE + '", verdicts: {wrong: 0.0, correct: 1.0}, '
              'rule: {name: accuracy, params: {unanswered: null}}, max_new_tokens: 4, '
              'engine: vllm}}]')


@pytest.mark.slow
@pytest.mark.parametrize("engines", ["native", "vllm"])
def test_grpo_step_scored_by_a_judge(engines, tmp_path, builtin_cache, tiny_judge_dir,
                                     monkeypatch):
    """grpo_judge_smoke as shipped (native sampler, transformers judge), and with vLLM for
    both the rollouts and the judge (two in-process engines)."""
    from transformers import AutoTokenizer

    monkeypatch.chdir(tmp_path)
    run = tmp_path / "run"
    over = ["rollout.engine=vllm", VLLM_JUDGE] if engines == "vllm" else []
    assert main(["train", "grpo_judge_smoke", f"logging.output_dir={run}"] + over) == 0
    tok = AutoTokenizer.from_pretrained(tiny_judge_dir)
    metrics = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2]
    for step in (1, 2):
        recs = [json.loads(x) for x in
                (run / "rollouts" / f"step_{step:06d}.jsonl").read_text().splitlines()]
        assert len(recs) == 8
        judged = 0
        for r in recs:
            out = r["reward_outputs"]["judge"]
            if out is None:                       # the accuracy rule answered
                continue
            judged += 1
            want = judge_rule(tok, r["answer"], r["response"])
            assert out.strip().startswith(want), (r["response"], out)
            assert r["rewards"]["judge"] == VERDICTS.get(out.strip()), r
        m = metrics[step - 1]
        assert m["reward/judge/judged"] == judged
        assert m["reward/judge/judged"] + m["reward/judge/rule"] == 8
        assert m["reward/judge/unparsed"] == sum(
            r["rewards"]["judge"] is None for r in recs)
        if engines == "vllm":                   # the policy's engine was not disturbed
            assert m["rollout/logprob_gap_max"] < 1e-4


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["torch", "mindspore"])
def test_grpo_steps_scored_by_a_reward_model(backend, tmp_path, builtin_cache, tiny_dir,
                                             monkeypatch):
    """`mindrl rm` writes runs/rm_tiny, grpo_reward_model_tiny trains on its scores: each saved
    rollout's reward is the reward model's score of its text, recomputed here one text at a
    time through transformers."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    monkeypatch.chdir(tmp_path)
    rows = [{"prompt": f"{a}+{b}=", "chosen": str(a + b), "rejected": f"<answer>{a + b}"}
            for a in range(10, 40, 3) for b in (11, 57)]
    (tmp_path / "pairs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["rm", "pairs.jsonl", "--model", "builtin:tiny", "--out", "runs/rm_tiny",
                 "--epochs", "1", "--lr", "1e-3"]) == 0
    assert main(["train", "grpo_reward_model_tiny", f"backend={backend}"]) == 0
    run = tmp_path / "runs" / "grpo_reward_model_tiny"
    metrics = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2]
    assert all(m["reward/reward_model/scored"] == 8 for m in metrics)
    recs = [json.loads(x) for x in (run / "rollouts" / "step_000001.jsonl").read_text()
            .splitlines()]
    tok = AutoTokenizer.from_pretrained("runs/rm_tiny")
    rm = AutoModelForSequenceClassification.from_pretrained("runs/rm_tiny").eval()
    for r in recs:
        text = tok.apply_chat_template([{"role": "user", "content": r["problem"]},
                                        {"role": "assistant", "content": r["response"]}],
                                       tokenize=False)
        with torch.no_grad():
            want = float(rm(input_ids=torch.tensor(
                [tok(text, add_special_tokens=False)["input_ids"]])).logits[0, 0])
        assert r["rewards"]["reward_model"] == pytest.approx(want, abs=1e-4)
        assert r["reward"] == pytest.approx(want, abs=1e-4)
    assert np.std([r["reward"] for r in recs]) > 0          # scores differ: advantages too
    assert any(abs(r["advantage"]) > 0 for r in recs)
