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
