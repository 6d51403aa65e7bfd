"""On-policy distillation closes most of the gap to an SFT'd teacher on the addition task (CPU).

Teacher and student come from one short SFT run of ``builtin:mini`` on correct 2-digit sums
(the demo's SFT recipe, ``yaml_configs/sft_tiny_demo.yaml``, with ``data.response_field=answer``,
150 steps at lr 2e-3), built once in a module fixture: the teacher is its last step, the student
its step 10 (it has barely learnt the answer's form). The student is then trained only by the
teacher's per-token reverse KL on its own rollouts (``yaml_configs/distill_tiny_demo.yaml``:
mode advantage, task_weight 0, no reward signal), 40 steps of 128 rollouts. The gap is measured
two ways: the reverse KL to the teacher on the student's own samples (``distill/reverse_kl``,
fresh prompts every step; the teacher's own is 0), and the mean NLL per token of 64 held-out
problems' gold answers (teacher-forced; never trained on).

What 150 SFT steps teach is the answer's form and most of its leading digit, not yet addition
(greedy accuracy of a few percent: the demo's model "clicks" after ~700-900 SFT steps, too slow
for a test), so the test asserts on the two gaps and prints the accuracies."""

import json
from pathlib import Path

import numpy as np
import pytest

SFT_STEPS = 150
DISTILL_STEPS = 40
QUIET = ["logging.tensorboard=false", "logging.progress_bar=false", "logging.plot=false"]


def _rows(path):
    return [json.loads(x) for x in Path(path, "metrics.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def teacher(tmp_path_factory):
    """The SFT run folder (its newest checkpoint is the teacher; step_000010 the student)."""
    from mindrl.config.loader import load_config
    from mindrl.trainer.sft import train_sft

    out = tmp_path_factory.mktemp("teacher")
    train_sft(load_config("sft_tiny_demo", [
        "data.response_field=answer", f"train.steps={SFT_STEPS}", "train.lr=2e-3",
        "train.lr_schedule=constant", f"validation.every={SFT_STEPS}", "checkpoint.every=10",
        "checkpoint.keep_last=15", f"logging.output_dir={out}", *QUIET]))
    return str(out)


def gold_nll(model_dir: str, n: int = 64) -> float:
    """Mean NLL per token of the held-out gold answers (answer digits + end token) after the
    prompt, teacher-forced, in nats."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from mindrl.config.schema import DataConfig
    from mindrl.paths import locate_model_dir
    from mindrl.trainer.prompts import build_streams

    model_dir = locate_model_dir(model_dir)
    _, val = build_streams(DataConfig(train_file="arithmetic:digits=2,ops=+",
                                      max_val_samples=n), seed=0)
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    total, count = 0.0, 0
    for row in val:
        p = tok.encode(row["problem"], add_special_tokens=False)
        a = tok.encode(row["answer"], add_special_tokens=False) + [tok.eos_token_id]
        ids = torch.tensor([p + a])
        with torch.no_grad():
            logp = torch.log_softmax(model(ids).logits[0, len(p) - 1:-1].float(), -1)
        total -= float(logp[torch.arange(len(a)), torch.tensor(a)].sum())
        count += len(a)
    return total / count


@pytest.mark.slow
def test_distillation_closes_most_of_the_gap(teacher, tmp_path):
    from mindrl.config.loader import load_config
    from mindrl.trainer.rl import train

    student = f"{teacher}/checkpoints/step_000010"
    before_nll, teacher_nll = gold_nll(student), gold_nll(teacher)
    train(load_config("distill_tiny_demo", [
        f"model.path={student}", f"algorithm.distill.teacher={teacher}",
        f"train.steps={DISTILL_STEPS}", f"validation.every={DISTILL_STEPS}",
        "checkpoint.save_final=true", f"logging.output_dir={tmp_path}", *QUIET]))
    rows = _rows(tmp_path)
    kl = [r["distill/reverse_kl"] for r in rows]
    after_nll = gold_nll(str(tmp_path))
    closed = (before_nll - after_nll) / (before_nll - teacher_nll)
    print(f"\nreverse KL to the teacher (nats/token, the student's samples): step 1 {kl[0]:.2f}, "
          f"mean of the last 5 steps {np.mean(kl[-5:]):.2f}; held-out gold NLL (nats/token): "
          f"student before {before_nll:.2f}, teacher {teacher_nll:.2f}, student after "
          f"{after_nll:.2f} ({closed:.0%} of the gap closed); greedy held-out accuracy: "
          f"teacher {_rows(teacher)[-1].get('val/accuracy')}, student after "
          f"{rows[-1].get('val/accuracy')}")
    assert np.mean(kl[-5:]) < 0.5 * kl[0]
    assert closed > 0.5, f"closed {closed:.0%} of the NLL gap"
