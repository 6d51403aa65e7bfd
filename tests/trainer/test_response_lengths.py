"""No response is cut without a word (data.max_response_len, data.max_truncated_share): DPO on
pairs of 600-token responses trains on the whole responses, or stops before training with one
line naming the key; SFT counts the rows it cuts and the run summary reports them."""

import json
from pathlib import Path

import numpy as np
import pytest

from mindrl.config.loader import load_config
from mindrl.data.io import DataError

DIGITS = 600          # the tiny tokenizer splits digits one by one: 600 digits = 600 tokens


def _digits(rng, n=DIGITS):
    return "".join(str(d) for d in rng.integers(0, 10, n))


def write_long_pairs(path: Path, n: int = 4) -> Path:
    rng = np.random.default_rng(0)
    with path.open("w") as f:
        for i in range(n):
            f.write(json.dumps({"prompt": f"{i}+{i}=", "chosen": _digits(rng),
                                "rejected": _digits(rng, DIGITS - 37 * i)}) + "\n")
    return path


def _cfg(tmp_path, train_file, *extra):
    return load_config(None, [
        "model.path=builtin:tiny", "model.chat_template=none", f"data.train_file={train_file}",
        "train.steps=1", "train.prompts_per_step=4", "train.micro_batch_size=2",
        "train.warmup_steps=0",
        "reward.num_workers=0", "reward.functions=[{name: arithmetic}]",
        "logging.tensorboard=false", "logging.progress_bar=false", "logging.plot=false",
        "checkpoint.save_final=false", f"logging.output_dir={tmp_path / 'run'}", *extra])


def _metrics(tmp_path):
    return [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_dpo_on_600_token_responses_trains_on_the_whole_responses(tmp_path):
    from mindrl.trainer.preference import PreferenceTrainer

    pairs = write_long_pairs(tmp_path / "pairs.jsonl")
    # rollout.max_new_tokens (the sampler's limit) has nothing to do with preference data
    tr = PreferenceTrainer(_cfg(tmp_path, pairs, "preference.loss=dpo",
                                "rollout.max_new_tokens=128"))
    try:
        want = sum(len(tr._encode(json.loads(x)["chosen"]))
                   for x in pairs.read_text().splitlines())
        assert want == 4 * (DIGITS + 1)
        tr.fit()
    finally:
        tr.close()
    m = _metrics(tmp_path)[-1]
    # the chosen responses' tokens the loss saw: all of them, end-of-turn included
    assert m["response_tokens"] == want
    assert m["truncated"] == 0 and m["truncated/total"] == 0


@pytest.mark.slow
def test_dpo_stops_before_training_with_one_line_naming_the_key(tmp_path):
    from mindrl.trainer.preference import PreferenceTrainer

    pairs = write_long_pairs(tmp_path / "pairs.jsonl")
    with pytest.raises(DataError) as e:
        PreferenceTrainer(_cfg(tmp_path, pairs, "preference.loss=dpo",
                               "data.max_response_len=512"))
    msg = str(e.value)
    assert "\n" not in msg
    assert msg.startswith("data.max_response_len=512: 4 of the first 4 pairs")
    assert "longest 601 tokens" in msg and "data.max_truncated_share=0.05" in msg
    assert not (tmp_path / "run" / "metrics.jsonl").exists()       # no step ran


@pytest.mark.slow
def test_sft_counts_cut_rows_and_the_summary_reports_them(tmp_path):
    from mindrl.config.stages import Stage
    from mindrl.trainer.sft import SFTTrainer
    from mindrl.trainer.summary import summary_lines

    rng = np.random.default_rng(1)
    data = tmp_path / "sft.jsonl"
    lengths = [DIGITS, 20, 30, 40]
    data.write_text("".join(json.dumps({"prompt": f"{i}+1=", "completion": _digits(rng, n)})
                            + "\n" for i, n in enumerate(lengths)))
    cfg = _cfg(tmp_path, data, "data.max_response_len=100",
               "data.max_truncated_share=0.3")
    tr = SFTTrainer(cfg)
    try:
        tr.fit()
    finally:
        tr.close()
    m = _metrics(tmp_path)[-1]
    assert m["truncated"] == 1 and m["truncated/total"] == 1
    assert m["tokens"] == 100 + 21 + 31 + 41           # the long row cut to 100 tokens
    lines = summary_lines([Stage(1, "", "sft", cfg, 1)], m, 1.0)
    assert "responses cut: 1 rows longer than data.max_response_len=100" in lines
    # more than the allowed share: stopped before the model trains
    with pytest.raises(DataError, match=r"^data\.max_response_len=100: 1 of the first 4 rows "
                                        r"have a response longer than that \(longest 601"):
        SFTTrainer(_cfg(tmp_path, data, "data.max_response_len=100",
                        "data.max_truncated_share=0.2"))


def test_check_response_lengths_counts_the_longest_and_the_share():
    from mindrl.trainer.lengths import check_response_lengths

    cfg = load_config(None, ["data.max_response_len=10", "data.max_truncated_share=0.5"])
    assert check_response_lengths([3, 10, 9], cfg) == (
        "response lengths: all of the first 3 rows fit data.max_response_len=10 (longest 10 "
        "tokens)")
    assert check_response_lengths([3, 11, 9, 25], cfg, "pairs") == (
        "response lengths: 2 of the first 4 pairs have a response longer than "
        "data.max_response_len=10 (longest 25 tokens) and will be cut to it")
    with pytest.raises(DataError, match=r"3 of the first 4 rows .* \(longest 12 tokens\)"):
        check_response_lengths([11, 12, 11, 2], cfg)
