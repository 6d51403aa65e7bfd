"""``mindrl analyze logprob-quantiles`` on hand-made rollouts whose quantiles are known: the
statistic by hand, the scoring against a plain transformers forward + numpy.quantile, the SFT
mode, and bad input (missing run, step not saved, reference with another vocabulary)."""

import json
from pathlib import Path

import numpy as np
import pytest

from mindrl.analyze.logprobs import position_quantiles, rl_quantiles, sft_quantiles
from mindrl.analyze.rollouts import AnalyzeError
from mindrl.cli import main


def test_position_quantiles_by_hand():
    logps = [np.array([-1.0, -2.0, -3.0]), np.array([-2.0, -4.0]), np.array([-3.0])]
    pos, val, cnt = position_quantiles(logps, 0.5)
    # position 0: median(-1, -2, -3) = -2; 1: median(-2, -4) = -3; 2: only -3
    assert pos.tolist() == [0, 1, 2] and cnt.tolist() == [3, 2, 1]
    np.testing.assert_allclose(val, [-2.0, -3.0, -3.0])
    pos, val, cnt = position_quantiles(logps, 0.25, min_count=2)
    # linear interpolation: q=0.25 of (-3, -2, -1) = -2.5; of (-4, -2) = -3.5
    assert pos.tolist() == [0, 1]
    np.testing.assert_allclose(val, [-2.5, -3.5])
    with pytest.raises(AnalyzeError, match="quantile"):
        position_quantiles(logps, 1.5)


def _record(step, index, group, prompt_text, prompt_ids, response_ids):
    return {"step": step, "index": index, "group": group, "sample": index, "group_size": 4,
            "problem": prompt_text, "answer": "1", "prompt": prompt_text,
            "prompt_ids": prompt_ids, "response": "", "response_ids": response_ids,
            "finish_reason": "stop", "rewards": {"accuracy": 1.0}, "reward": 1.0,
            "advantage": 0.5, "rollout_logprobs": [0.0] * len(response_ids)}


def _make_run(tmp_path, tokenizer, steps=(1, 3), bad_id=None):
    """A run directory with hand-made rollouts: ragged responses of known token ids."""
    run = tmp_path / "run"
    (run / "rollouts").mkdir(parents=True)
    rng = np.random.default_rng(0)
    prompts = ["12+34=", "what is 7 times 8?"]
    for s in steps:
        lines = []
        for i in range(6):
            text = prompts[i % 2]
            ids = tokenizer.encode(text, add_special_tokens=False)
            resp = rng.integers(3, 1000, size=int(rng.integers(1, 9))).tolist()
            if bad_id is not None and s == steps[-1] and i == 2:
                resp[0] = bad_id
            lines.append(json.dumps(_record(s, i, i % 2, text, ids, resp)))
        (run / "rollouts" / f"step_{s:06d}.jsonl").write_text("\n".join(lines) + "\n")
    return run


def _reference_logps(model_dir, recs):
    """Independent scoring: one unpadded transformers forward per response."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    out = []
    for r in recs:
        ids = torch.tensor([r["prompt_ids"] + r["response_ids"]])
        with torch.no_grad():
            logits = model(input_ids=ids).logits[0].double()
        P = len(r["prompt_ids"])
        lp = torch.log_softmax(logits, -1)
        out.append(np.array([float(lp[P - 1 + t, tok]) for t, tok in enumerate(r["response_ids"])]))
    return out


def _read(run, step):
    return [json.loads(x) for x in (run / "rollouts" / f"step_{step:06d}.jsonl").read_text()
            .splitlines()]


def test_rl_quantiles_match_transformers_and_numpy(tmp_path, tiny_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_dir)
    run = _make_run(tmp_path, tok)
    res = rl_quantiles(run, tiny_dir, q=0.2, batch_size=4)
    assert [c.label for c in res.curves] == ["step 1", "step 3"]
    for c, s in zip(res.curves, (1, 3)):
        recs = _read(run, s)
        lps = _reference_logps(tiny_dir, recs)
        T = max(len(x) for x in lps)
        want = [np.quantile([x[t] for x in lps if len(x) > t], 0.2) for t in range(T)]
        assert c.positions.tolist() == list(range(T))
        np.testing.assert_allclose(c.quantiles, want, atol=2e-5)
        assert c.counts.tolist() == [sum(len(x) > t for x in lps) for t in range(T)]
        assert c.responses == 6


def test_cli_writes_png_and_json(tmp_path, tiny_dir, capsys):
    from transformers import AutoTokenizer

    run = _make_run(tmp_path, AutoTokenizer.from_pretrained(tiny_dir))
    (run / "config.yaml").write_text(f"model:\n  path: {tiny_dir}\n")   # default reference
    assert main(["analyze", "logprob-quantiles", str(run), "--q", "0.5", "--steps", "3",
                 "--min-count", "1"]) == 0
    out = capsys.readouterr().out
    assert "step 3" in out and "step 1 " not in out
    data = json.loads((run / "analysis" / "logprob_quantiles.json").read_text())
    assert [c["label"] for c in data["curves"]] == ["step 3"] and data["q"] == 0.5
    png = run / "analysis" / "logprob_quantiles.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000


def test_bad_input_is_named(tmp_path, tiny_dir, capsys):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_dir)
    with pytest.raises(AnalyzeError, match="run directory not found: .*nope"):
        rl_quantiles(tmp_path / "nope", tiny_dir)
    (tmp_path / "empty").mkdir()
    with pytest.raises(AnalyzeError, match="no saved rollouts.*save_rollouts"):
        rl_quantiles(tmp_path / "empty", tiny_dir)
    run = _make_run(tmp_path, tok)
    with pytest.raises(AnalyzeError, match="step 2 was not saved; saved steps: 1, 3"):
        rl_quantiles(run, tiny_dir, steps=[2])
    assert main(["analyze", "logprob-quantiles", str(run), "--reference", tiny_dir,
                 "--steps", "2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "step 2 was not saved" in err[0]
    with pytest.raises(AnalyzeError, match="reference '.*missing'"):
        rl_quantiles(run, str(tmp_path / "missing"))


def test_reference_with_another_vocabulary(tmp_path, tiny_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_dir)
    run = _make_run(tmp_path, tok, bad_id=5000)          # the tiny vocabulary has 1024 ids
    with pytest.raises(AnalyzeError, match=f"reference '{tiny_dir}' has a vocabulary of 1024 "
                                           f"tokens but step 3 rollout 2 holds token id 5000"):
        rl_quantiles(run, tiny_dir)
    # ids in range, but the stored prompt ids are not what this tokenizer makes of the text
    run2 = _make_run(tmp_path / "b", tok)
    path = run2 / "rollouts" / "step_000001.jsonl"
    recs = _read(run2, 1)
    recs[0]["prompt_ids"] = [7, 7, 7]
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    with pytest.raises(AnalyzeError, match=f"reference '{tiny_dir}' tokenizes the prompt of "
                                           f"step 1 group 0 differently"):
        rl_quantiles(run2, tiny_dir)


@pytest.mark.slow
def test_sft_mode_one_curve_per_checkpoint(tmp_path, tiny_dir):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_dir)
    after = tmp_path / "after"                         # a "fine-tuned" checkpoint: new lm_head
    model = AutoModelForCausalLM.from_pretrained(tiny_dir)
    with torch.no_grad():
        model.lm_head.weight.mul_(3.0)
    model.save_pretrained(after)
    tok.save_pretrained(after)
    data = tmp_path / "sft.jsonl"
    rows = [{"problem": "1+2=", "response": "3"}, {"problem": "9+9=", "response": "18 is it"},
            {"problem": "2*3=", "response": "six"}]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    res = sft_quantiles(data, [tiny_dir, str(after)], q=0.5, template="none")
    assert [c.label for c in res.curves] == [Path(tiny_dir).name, "after"]
    eot = tok.convert_tokens_to_ids("<|im_end|>")
    recs = [{"prompt_ids": tok.encode(r["problem"], add_special_tokens=False),
             "response_ids": tok.encode(r["response"], add_special_tokens=False) + [eot]}
            for r in rows]
    for c, ckpt in zip(res.curves, (tiny_dir, str(after))):
        lps = _reference_logps(ckpt, recs)
        T = max(len(x) for x in lps)
        want = [np.quantile([x[t] for x in lps if len(x) > t], 0.5) for t in range(T)]
        np.testing.assert_allclose(c.quantiles, want, atol=2e-5)
    assert not np.allclose(res.curves[0].quantiles, res.curves[1].quantiles)
