"""The SFT loop with an engine that holds its own weights (vLLM): validation samples with the
weights just trained (the loop syncs them first), not the starting ones."""

import numpy as np
import pytest

from mindrl.config.loader import load_config
from mindrl.types import SamplingParams, pad_token_batch


@pytest.mark.slow
def test_sft_validation_uses_the_trained_weights(tmp_path):
    from mindrl.trainer.sft import SFTTrainer

    cfg = load_config("sft_tiny_demo", [
        "model.path=builtin:tiny", "train.steps=2", "train.prompts_per_step=8",
        "train.micro_batch_size=8", "train.lr=1e-2", "train.warmup_steps=0",
        "rollout.engine=vllm", "rollout.max_new_tokens=6", "validation.every=2",
        "data.max_val_samples=4", "reward.num_workers=0", "logging.tensorboard=false",
        "logging.progress_bar=false", "logging.plot=false", "checkpoint.save_final=false",
        f"logging.output_dir={tmp_path}"])
    tr = SFTTrainer(cfg)
    try:
        tr.fit()
        prompt = tr.encode(tr.val_rows[0]["problem"])
        ro = tr.engine.generate([prompt], SamplingParams(n=1, temperature=1.0, max_new_tokens=6,
                                                         seed=3))
        tokens = pad_token_batch([prompt], ro.response_ids, tr.pad_id)
        trainer_logp = tr.backend.logprobs(tokens, temperature=1.0)[0, :len(ro.logprobs[0])]
        gap = float(np.abs(trainer_logp - ro.logprobs[0]).max())
    finally:
        tr.close()
    assert gap < 2e-4, gap          # a stale engine is ~0.1+ nats off after two lr=1e-2 steps


# --------------------------------------------------------------------------- chat SFT
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "data"))
from sft_shapes import SHAPES, _write  # noqa: E402


def _chat_cfg(tmp_path, train_file, *extra):
    return load_config("sft_tiny_demo", [
        "model.path=builtin:tiny", "model.chat_template=model", f"data.train_file={train_file}",
        "data.response_field=", "train.steps=1", "train.prompts_per_step=3",
        "train.micro_batch_size=3", "train.warmup_steps=0", "rollout.engine=native",
        "rollout.max_new_tokens=64", "validation.every=0", "reward.num_workers=0",
        "logging.tensorboard=false", "logging.progress_bar=false", "logging.plot=false",
        "checkpoint.save_final=false", "checkpoint.every=0",
        f"logging.output_dir={tmp_path / 'run'}", *extra])


@pytest.mark.slow
@pytest.mark.parametrize("name", list(SHAPES))
def test_one_sft_step_on_each_published_shape(tmp_path, name):
    from mindrl.trainer.sft import SFTTrainer

    path = SHAPES[name][0](tmp_path)
    tr = SFTTrainer(_chat_cfg(tmp_path, path))
    try:
        rows = tr.train_stream.rows
        assert len(rows) == SHAPES[name][2]
        if not isinstance(rows, list):      # .jsonl / .parquet: read as taken (FileStream)
            rows = rows.get(range(len(rows)))
        expected_tokens = sum(sum(tr.chat_ids(r)[2]) for r in rows)
        metrics = tr.fit()
    finally:
        tr.close()
    assert np.isfinite(metrics["loss"]) and metrics["loss"] > 0
    assert metrics["tokens"] == expected_tokens > 0   # one step = every row, assistant tokens


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["torch", "mindspore"])
def test_sft_loss_is_the_masked_nll_of_assistant_tokens(tmp_path, tiny_dir, backend):
    """The first step's loss = sum of -log p over the assistant tokens (hand-made segments)
    / their count, from a plain transformers forward of each unpadded conversation; both
    backends train on the mask as built (zeros inside the response region)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from mindrl.trainer.sft import SFTTrainer

    convs = [[{"from": "human", "value": "what is 2 plus 3"}, {"from": "gpt", "value": "5"},
              {"from": "human", "value": "and times 2"}, {"from": "gpt", "value": "10"}],
             [{"from": "human", "value": "say yes"}, {"from": "gpt", "value": "yes"}]]
    path = _write(tmp_path / "chat.jsonl", [{"conversations": c} for c in convs])
    tok = AutoTokenizer.from_pretrained(tiny_dir)
    enc = lambda s: tok.encode(s, add_special_tokens=False)  # noqa: E731
    segments = [  # (text, trained?) of each conversation under the tiny ChatML template
        [("<|im_start|>user\nwhat is 2 plus 3<|im_end|>\n<|im_start|>assistant\n", 0),
         ("5<|im_end|>", 1),
         ("\n<|im_start|>user\nand times 2<|im_end|>\n<|im_start|>assistant\n", 0),
         ("10<|im_end|>", 1)],
        [("<|im_start|>user\nsay yes<|im_end|>\n<|im_start|>assistant\n", 0),
         ("yes<|im_end|>", 1)]]
    model = AutoModelForCausalLM.from_pretrained(tiny_dir, torch_dtype=torch.float32)
    nll, count = 0.0, 0
    with torch.no_grad():
        for segs in segments:
            ids, trained = [], []
            for text, t in segs:
                piece = enc(text)
                ids += piece
                trained += [t] * len(piece)
            logp = torch.log_softmax(model(torch.tensor([ids])).logits[0].float(), -1)
            for pos in range(1, len(ids)):
                if trained[pos]:
                    nll -= float(logp[pos - 1, ids[pos]])
                    count += 1
    tr = SFTTrainer(_chat_cfg(tmp_path, path, "model.path=" + str(tiny_dir),
                              "train.prompts_per_step=2", "train.micro_batch_size=1",
                              "data.shuffle=false", f"backend={backend}"))
    try:
        metrics = tr.fit()
    finally:
        tr.close()
    assert metrics["tokens"] == count == len(enc("5<|im_end|>10<|im_end|>yes<|im_end|>"))
    assert metrics["loss"] == pytest.approx(nll / count, rel=1e-4)


def test_a_misspelt_response_field_fails_before_the_model_loads(tmp_path):
    from mindrl.data.io import DataError
    from mindrl.trainer.sft import SFTTrainer

    path = _write(tmp_path / "plain.jsonl", [{"question": "1+1", "answer": "2",
                                              "response": "2"}] * 3)
    cfg = _chat_cfg(tmp_path, path, "data.response_field=respnse")
    with pytest.raises(DataError) as e:
        SFTTrainer(cfg)
    msg = str(e.value)
    # the file loader's message (mindrl.data.formats): file, 1-based line, field, the keys
    assert msg.startswith(f"{path}: line 1: field 'respnse': ") and "\n" not in msg
    assert "question, answer, response" in msg
    frames = [f.name for f in __import__("traceback").extract_tb(e.tb)]
    assert "build_streams" in frames and "build_backend" not in frames
    # a generated set too (the demo's arithmetic): checked on its first row
    cfg = load_config("sft_tiny_demo", ["model.path=builtin:tiny", "data.response_field=techer",
                                        f"logging.output_dir={tmp_path / 'run2'}"])
    with pytest.raises(DataError, match=r"row 1: field 'techer' \(data.response_field\)"):
        SFTTrainer(cfg)


def test_a_bad_chat_row_fails_before_the_model_loads(tmp_path):
    from mindrl.data.io import DataError
    from mindrl.trainer.sft import SFTTrainer

    rows = [{"messages": [{"role": "user", "content": "hi"},
                          {"role": "assistant", "content": "yo"}]}] * 2 + \
        [{"messages": [{"role": "user", "content": "hi"}, {"role": "bot", "content": "yo"}]}]
    path = _write(tmp_path / "m.jsonl", rows)
    with pytest.raises(DataError, match=r"m.jsonl: row 3: field 'messages\[1\]\.role': "
                                        r"unknown role 'bot'") as e:
        SFTTrainer(_chat_cfg(tmp_path, path))
    assert "build_backend" not in [f.name for f in __import__("traceback").extract_tb(e.tb)]
