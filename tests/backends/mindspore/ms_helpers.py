"""Helpers shared by the MindSpore backend tests (imported as ``ms_helpers``)."""

import numpy as np
import torch
import transformers

VOCAB = 300


def make_hf_model(directory, tie: bool, seed: int = 0, rope_theta: float = 5000.0):
    """Random tiny Qwen2ForCausalLM (hidden 64, 2 layers, 2 heads, 1 kv head) saved to
    ``directory``; returns the torch model."""
    torch.manual_seed(seed)
    cfg = transformers.Qwen2Config(
        vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=1, tie_word_embeddings=tie,
        rope_theta=rope_theta, max_position_embeddings=512)
    model = transformers.Qwen2ForCausalLM(cfg).float().eval()
    with torch.no_grad():                     # larger biases/norms than the init: a real test
        for name, p in model.named_parameters():
            if name.endswith("bias") or "norm" in name:
                p.add_(0.1 * torch.randn_like(p))
    model.save_pretrained(str(directory))
    return model


def ms_config(*overrides):
    from mindrl.config.loader import load_config

    return load_config(None, ["backend=mindspore", "rollout.max_new_tokens=16",
                              "data.max_prompt_len=16", "train.micro_batch_size=4",
                              *overrides])


def random_batch(rng, B, max_prompt=9, max_resp=12, old=False, ref=False):
    from mindrl.types import TrainBatch, pad_token_batch

    prompts = [list(rng.integers(1, VOCAB, rng.integers(2, max_prompt + 1))) for _ in range(B)]
    resps = [list(rng.integers(1, VOCAB, rng.integers(1, max_resp + 1))) for _ in range(B)]
    tb = pad_token_batch(prompts, resps, 0)
    m = tb.response_mask
    adv = (rng.normal(size=m.shape) * m).astype(np.float32)
    o = ((rng.normal(size=m.shape) * 0.1 - 5.0) * m).astype(np.float32) if old else None
    r = ((rng.normal(size=m.shape) * 0.1 - 5.0) * m).astype(np.float32) if ref else None
    return TrainBatch(tb, adv, o, r, None)


def split(batch, size):
    from mindrl.types import TrainBatch

    out = []
    for s in range(0, len(batch), size):
        sl = slice(s, s + size)
        pick = (lambda a: None if a is None else a[sl])  # noqa: E731
        out.append(TrainBatch(batch.tokens.rows(sl), batch.advantages[sl],
                              pick(batch.old_logp), pick(batch.ref_logp),
                              pick(batch.rollout_logp)))
    return out


# The other decoder families at tiny size (head_dim 32): transformers config fields per case.
FAMILY_CASES = {
    # Qwen3: q/k RMSNorm per head, no bias, explicit head_dim (4 x 32 != hidden 64), tied
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", dict(
        hidden_size=64, num_attention_heads=4, num_key_value_heads=2, head_dim=32,
        tie_word_embeddings=True, use_sliding_window=False)),
    # Llama 3.1: llama3 RoPE scaling whose original context (16) the test batches cross, untied
    "llama3": ("LlamaConfig", "LlamaForCausalLM", dict(
        hidden_size=64, num_attention_heads=2, num_key_value_heads=1, head_dim=32,
        tie_word_embeddings=False, rope_parameters=dict(
            rope_type="llama3", rope_theta=500000.0, factor=8.0, low_freq_factor=1.0,
            high_freq_factor=4.0, original_max_position_embeddings=16))),
    # Llama with every bias flag on, tied embeddings and YaRN (its attention factor scales
    # cos/sin, in the trainer and in the sampler's host-side tables)
    "llama_bias_yarn": ("LlamaConfig", "LlamaForCausalLM", dict(
        hidden_size=64, num_attention_heads=2, num_key_value_heads=2, head_dim=32,
        attention_bias=True, mlp_bias=True, tie_word_embeddings=True, rope_parameters=dict(
            rope_type="yarn", rope_theta=10000.0, factor=4.0,
            original_max_position_embeddings=16))),
    # Qwen3-MoE: q/k norms, 4 experts top-2 with renormalised weights in every layer, untied
    "qwen3_moe": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM", dict(
        hidden_size=64, num_attention_heads=2, num_key_value_heads=1, head_dim=32,
        tie_word_embeddings=False, use_sliding_window=False, num_experts=4,
        num_experts_per_tok=2, moe_intermediate_size=32, norm_topk_prob=True)),
    # Qwen2-MoE: q/k/v bias, a gated shared expert, raw (not renormalised) top-2 weights of 4
    # experts, layer 1 dense (mlp_only_layers)
    "qwen2_moe": ("Qwen2MoeConfig", "Qwen2MoeForCausalLM", dict(
        hidden_size=64, num_attention_heads=2, num_key_value_heads=1,
        tie_word_embeddings=True, use_sliding_window=False, num_experts=4,
        num_experts_per_tok=2, moe_intermediate_size=32, shared_expert_intermediate_size=48,
        norm_topk_prob=False, mlp_only_layers=[1])),
}


def make_family_model(directory, case: str, seed: int = 0, **overrides):
    """Random tiny model of ``FAMILY_CASES[case]`` (2 layers, vocab 300), biases and norms
    perturbed, saved to ``directory``; returns the torch model."""
    config_name, model_name, fields = FAMILY_CASES[case]
    fields = {"vocab_size": VOCAB, "intermediate_size": 128, "num_hidden_layers": 2,
              "max_position_embeddings": 512, "rms_norm_eps": 1e-6, **fields, **overrides}
    torch.manual_seed(seed)
    cfg = getattr(transformers, config_name)(**fields)
    model = getattr(transformers, model_name)(cfg).float().eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias") or "norm" in name:
                p.add_(0.1 * torch.randn_like(p))
            elif "q_proj" in name or "k_proj" in name:
                p.mul_(4.0)          # peaked attention: RoPE / q-k norm errors show in log-probs
            elif "embed_tokens" in name or "lm_head" in name:
                p.mul_(5.0)          # peaked next-token distributions, varied greedy samples
            elif name.endswith("mlp.gate.weight"):
                p.mul_(20.0)         # decided routes: rounding never flips a top-k choice
    model.save_pretrained(str(directory))
    return model
