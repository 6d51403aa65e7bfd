"""Shared by the LoRA tests (imported as ``lora_helpers``): a random RL batch over the builtin
tiny model's vocabulary and a plain transformers scorer."""

import numpy as np

VOCAB = 1024


def random_batch(seed=0, B=4, max_prompt=7, max_resp=9):
    from mindrl.types import LossNormalizers, TrainBatch, pad_token_batch

    rng = np.random.default_rng(seed)
    prompts = [list(rng.integers(1, VOCAB, rng.integers(2, max_prompt + 1))) for _ in range(B)]
    resps = [list(rng.integers(1, VOCAB, rng.integers(1, max_resp + 1))) for _ in range(B)]
    tb = pad_token_batch(prompts, resps, 0)
    m = tb.response_mask
    adv = (rng.normal(size=m.shape) * m).astype(np.float32)
    batch = TrainBatch(tb, adv, None, None, None)
    return batch, LossNormalizers(float(m.sum()), float(B), float(m.shape[1]))


def hf_logprobs(model, tb):
    """(B, T) log-probs of the response tokens under a plain transformers model."""
    import torch

    with torch.no_grad():
        logits = model(input_ids=torch.tensor(tb.input_ids),
                       attention_mask=torch.tensor(tb.attention_mask),
                       position_ids=torch.tensor(tb.position_ids)).logits
        P = tb.prompt_len
        lp = torch.log_softmax(logits[:, P - 1:-1].float(), -1)
        lp = torch.gather(lp, -1, torch.tensor(tb.input_ids[:, P:]).unsqueeze(-1)).squeeze(-1)
    return lp.numpy() * tb.response_mask


def lora_cfg(*extra):
    from mindrl.config.loader import load_config

    return load_config(None, ["model.path=builtin:tiny", "model.lora.enabled=true",
                              "model.lora.rank=4", "model.lora.alpha=8", "train.lr=1e-2",
                              "train.grad_clip=0", *extra])
