"""A fixed batch of token ids for the LoRA export test (imported as ``lora_probe``)."""

import numpy as np


def probe_batch():
    from mindrl.types import pad_token_batch

    rng = np.random.default_rng(7)
    prompts = [list(rng.integers(1, 1000, n)) for n in (3, 6, 5)]
    resps = [list(rng.integers(1, 1000, n)) for n in (4, 2, 3)]  # <= rollout.max_new_tokens
    return pad_token_batch(prompts, resps, 0)
