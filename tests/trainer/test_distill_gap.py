"""On-policy distillation closes the gap to an SFT'd teacher on the addition task (CPU).

The teacher: ``builtin:mini`` after a short SFT on correct 2-digit sums (the demo's SFT recipe,
``yaml_configs/sft_tiny_demo.yaml``, with ``data.response_field=answer``), built once in a
session fixture. The student: a fresh ``builtin:mini``, trained only by the teacher's per-token
reverse KL on its own rollouts (``yaml_configs/distill_tiny_demo.yaml``: mode advantage,
task_weight 0, no reward signal). The gap is measured two ways on fresh prompts: the mean
reverse KL to the teacher on the student's samples (``distill/reverse_kl``, the teacher's is 0)
and the held-out gold answers' mean NLL per token under the model (teacher-forced, 64 problems
never trained on), where the teacher is far below the fresh student.

A short SFT teaches the teacher the answer's form and most of its leading digit, not yet
addition (greedy accuracy of a few percent: the demo's model "clicks" after ~700-900 SFT steps,
too slow for a test), so the accuracies are printed, and the test asserts on the two gaps."""

import json
from pathlib import Path

import numpy as np
import pytest

SFT_STEPS = 150
DISTILL_STEPS = 30
QUIET = ["logging.tensorboard=false", "logging.progress_bar=false", "logging.plot=false"]


def _rows(path):
    return [json.loads(x) for x in Path(path, "metrics.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def teacher(tmp_path_factory):
    from mindrl.config.loader import load_config
    from mindrl.trainer.sft import train_sft

    out = tmp_path_factory.mktemp("teacher")
    train_sft(load_config("sft_tiny_demo", [
        "data.response_field=answer", f"train.steps={SFT_STEPS}", "train.lr=2e-3",
        "train.lr_schedule=constant", "validation.every=0", "checkpoint.every=0",
        f"logging.output_dir={out}", *QUIET]))
    return str(out)


def gold_nll(model_dir: str, n: int = 64) -> float:
    """Mean NLL per token of the held-out gold answers (answer digits + end token) after the
    prompt, teacher-forced, in nats."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from mindrl.config.schema import DataConfig
    from mindrl.trainer.prompts import build_streams

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
    from mindrl.models.tiny import resolve_model_path
    from mindrl.trainer.rl import train

    student_dir = resolve_model_path("builtin:mini")
    before_nll, teacher_nll = gold_nll(student_dir), gold_nll(resolve_model_path(teacher))
    teacher_acc = _rows(teacher)[-1].get("val/accuracy")
    train(load_config("distill_tiny_demo", [
        f"algorithm.distill.teacher={teacher}", f"train.steps={DISTILL_STEPS}",
        "validation.every=0", "checkpoint.every=0", "checkpoint.save_final=true",
        f"logging.output_dir={tmp_path}", *QUIET]))
    rows = _rows(tmp_path)
    kl = [r["distill/reverse_kl"] for r in rows]
    after_nll = gold_nll(resolve_model_path(str(tmp_path)))
    print(f"\nreverse KL to the teacher (nats/token, student's samples): step 1 {kl[0]:.3f}, "
          f"last 5 steps {np.mean(kl[-5:]):.3f}; held-out gold NLL (nats/token): student "
          f"before {before_nll:.3f}, teacher {teacher_nll:.3f}, student after {after_nll:.3f}; "
          f"teacher val accuracy {teacher_acc}, student after {rows[-1].get('val/accuracy')}")
    assert np.mean(kl[-5:]) < 0.25 * kl[0]
    closed = (before_nll - after_nll) / (before_nll - teacher_nll)
    assert closed > 0.7, f"closed {closed:.0%} of the NLL gap"
