"""`mindrl rm` (Bradley-Terry reward model on preference pairs) and the `reward_model` reward:
a reward model trained on synthetic pairs ranks held-out pairs >= 90% right, and scores a
batch as it scores each text alone."""

import json
import random
from pathlib import Path

import numpy as np
import pytest

from mindrl.cli import main


def synthetic_pairs(path: Path, n: int = 240, seed: int = 0) -> Path:
    """Pairs in the standard format `mindrl data pairs` writes: the chosen response gives its
    answer bare (in one of three phrasings), the rejected one wraps it in <answer> tags."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        a, b = rng.randrange(10, 100), rng.randrange(10, 100)
        ans = str(a + b + rng.choice([0, 0, 1, -1]))
        rows.append({"prompt": f"{a}+{b}=", "rejected": f"<answer>{ans}</answer>",
                     "chosen": rng.choice([ans, f"{ans} {ans}", f"so {ans}"]),
                     "benchmark": "synthetic", "problem_id": str(i), "pair_type": "format"})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def train_rm(d: Path, tiny_dir, backend: str) -> Path:
    out = d / f"rm_{backend}"
    rc = main(["rm", str(synthetic_pairs(d / "pairs.jsonl")), "--model", tiny_dir,
               "--out", str(out), "--epochs", "2", "--lr", "1e-3", "--held-out", "0.2",
               "--backend", backend])
    assert rc == 0
    return out


@pytest.fixture(scope="module")
def trained_rm(tmp_path_factory, tiny_dir):
    return train_rm(tmp_path_factory.mktemp("rm"), tiny_dir, "torch")


@pytest.mark.slow
def test_rm_reaches_90_percent_held_out_on_both_backends(trained_rm, tmp_path, tiny_dir):
    """Both backends start from the same weights (same accuracy before training, each by its
    own forward pass), reach >= 90% on held-out pairs, and write a model that transformers
    loads and that ranks the held-out pairs as the report says."""
    from mindrl.trainer.preference import load_pairs
    from mindrl.trainer.reward_model import _split
    from rewards.reward_model import RewardModel

    ms_rm = train_rm(tmp_path, tiny_dir, "mindspore")
    reports = {b: json.loads((d / "rm_report.json").read_text())
               for b, d in (("torch", trained_rm), ("mindspore", ms_rm))}
    _, test = _split(load_pairs(str(tmp_path / "pairs.jsonl")), 0.2, 0)
    for backend, report in reports.items():
        assert report["held_out_pairs"] == len(test) == 48 and report["train_pairs"] == 192
        assert report["held_out_accuracy_before"] < 0.75, report     # not there by luck
        assert report["held_out_accuracy"] >= 0.9, report
        rm = RewardModel(str(trained_rm if backend == "torch" else ms_rm))
        c = rm([t["chosen"] for t in test], problem=[t["problem"] for t in test])
        r = rm([t["rejected"] for t in test], problem=[t["problem"] for t in test])
        assert np.mean(np.array(c) > np.array(r)) == report["held_out_accuracy"], backend
    assert reports["torch"]["held_out_accuracy_before"] == \
        reports["mindspore"]["held_out_accuracy_before"]
    assert json.loads((trained_rm / "mindrl_rm.json").read_text())["chat"] is True


@pytest.mark.slow
def test_reward_model_reward_scores_batches_as_single_texts(trained_rm):
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from rewards import build_scorer

    problems = ["12+30=", "45+45=", "99+1=", "10+10="]
    comps = ["<answer>42</answer>", "90", "<answer>100</answer> done", "so 20"]
    with build_scorer({"functions": [{"name": "reward_model",
                                      "params": {"model": str(trained_rm), "batch_size": 3}}],
                       "num_workers": 0}) as scorer:
        res = scorer.score(comps, problem=problems)
    got = res.components["reward_model"]
    assert res.counts["reward_model"] == {"scored": 4}
    # the same scores, one text at a time, without padding, through transformers directly
    tok = AutoTokenizer.from_pretrained(trained_rm)
    model = AutoModelForSequenceClassification.from_pretrained(trained_rm).eval()
    for p, c, g in zip(problems, comps, got):
        text = tok.apply_chat_template([{"role": "user", "content": p},
                                        {"role": "assistant", "content": c}], tokenize=False)
        ids = torch.tensor([tok(text, add_special_tokens=False)["input_ids"]])
        with torch.no_grad():
            want = float(model(input_ids=ids).logits[0, 0])
        assert g == pytest.approx(want, abs=1e-4)
    assert got[0] < got[1] and got[2] < got[3]      # bare answers preferred


def test_reward_model_refuses_a_causal_lm(tiny_dir):
    from rewards import build_scorer

    with pytest.raises(ValueError, match="not a reward model.*mindrl rm"):
        build_scorer({"functions": [{"name": "reward_model", "params": {"model": tiny_dir}}],
                      "num_workers": 0})
