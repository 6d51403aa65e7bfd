"""The mindformers adapter's pure parts (no mindformers here; see the backend's module doc):
parameter names, LlamaConfig arguments, the parallel layout checks, right-packing of batches,
and the clear error when mindformers is missing."""

from pathlib import Path

import numpy as np
import pytest

from mindrl.backends.mindformers.layout import (hf_to_mf, llama_config_kwargs, mf_to_hf,
                                                 pack_right, parallel_layout, to_hf)
from mindrl.config.loader import load_config
from mindrl.config.schema import ConfigError

# Qwen2.5-7B-Instruct and Qwen2.5-32B config.json values (as published on the Hub).
QWEN25_7B = {"hidden_size": 3584, "intermediate_size": 18944, "num_attention_heads": 28,
             "num_key_value_heads": 4, "num_hidden_layers": 28, "vocab_size": 152064,
             "rope_theta": 1000000.0, "rms_norm_eps": 1e-06, "tie_word_embeddings": False,
             "max_position_embeddings": 32768, "bos_token_id": 151643, "eos_token_id": 151645}
QWEN25_32B = {**QWEN25_7B, "hidden_size": 5120, "intermediate_size": 27648,
              "num_attention_heads": 40, "num_key_value_heads": 8, "num_hidden_layers": 64,
              "rms_norm_eps": 1e-05}


@pytest.mark.parametrize("hf, mf", [
    ("model.embed_tokens.weight", "model.tok_embeddings.embedding_weight"),
    ("model.layers.0.self_attn.q_proj.weight", "model.layers.0.attention.wq.weight"),
    ("model.layers.11.self_attn.k_proj.bias", "model.layers.11.attention.wk.bias"),
    ("model.layers.3.self_attn.v_proj.bias", "model.layers.3.attention.wv.bias"),
    ("model.layers.3.self_attn.o_proj.weight", "model.layers.3.attention.wo.weight"),
    ("model.layers.27.mlp.gate_proj.weight", "model.layers.27.feed_forward.w1.weight"),
    ("model.layers.27.mlp.down_proj.weight", "model.layers.27.feed_forward.w2.weight"),
    ("model.layers.27.mlp.up_proj.weight", "model.layers.27.feed_forward.w3.weight"),
    ("model.layers.5.input_layernorm.weight", "model.layers.5.attention_norm.weight"),
    ("model.layers.5.post_attention_layernorm.weight", "model.layers.5.ffn_norm.weight"),
    ("model.norm.weight", "model.norm_out.weight"),
    ("lm_head.weight", "lm_head.weight"),
])
def test_names_follow_mindformers_llama(hf, mf):
    assert hf_to_mf(hf) == mf
    assert mf_to_hf(mf) == hf


def test_every_weight_of_a_real_checkpoint_round_trips(tiny_dir):
    from safetensors.numpy import load_file

    weights = load_file(str(Path(tiny_dir) / "model.safetensors"))
    mf = {hf_to_mf(k): v for k, v in weights.items()}
    assert len(mf) == len(weights)                   # the map is one to one
    back = dict(to_hf(mf.items(), tied=False))
    assert back.keys() == weights.keys()
    for k in weights:
        assert back[k] is mf[hf_to_mf(k)]
    with pytest.raises(KeyError, match="model.layers.0.self_attn.rotary_emb.inv_freq"):
        hf_to_mf("model.layers.0.self_attn.rotary_emb.inv_freq")


def test_tied_models_yield_lm_head_as_the_embedding():
    emb = np.ones((4, 2), np.float32)
    out = dict(to_hf([("model.tok_embeddings.embedding_weight", emb),
                      ("lm_head.weight", np.zeros((4, 2)))], tied=True))
    assert set(out) == {"model.embed_tokens.weight", "lm_head.weight"}
    assert out["lm_head.weight"] is emb


def _mf(**kw):
    cfg = load_config(None, ["backend=mindformers", "device=ascend", "rollout.engine=vllm"]
                      + [f"mindformers.{k}={v}" for k, v in kw.items()])
    return cfg.mindformers


def test_llama_config_for_qwen25_7b():
    layout = parallel_layout(8, QWEN25_7B, tp=1, pp=2, micro_batches=16, rollout_tp=2,
                             global_rollouts=128)
    assert (layout.dp, layout.blocks) == (4, 4)
    kw = llama_config_kwargs(QWEN25_7B, _mf(extra_model_config="{use_rope_slice: true}",
                                            stage_layer_offset="[1, -1]"),
                             layout, dtype="bfloat16", seq_length=8192, pad_id=151643)
    assert (kw["hidden_size"], kw["num_layers"], kw["num_heads"], kw["n_kv_heads"]) == (3584, 28, 28, 4)
    assert (kw["intermediate_size"], kw["vocab_size"], kw["theta"], kw["rms_norm_eps"]) == (
        18944, 152064, 1e6, 1e-6)
    assert kw["qkv_has_bias"] and not kw["qkv_concat"] and not kw["tie_word_embeddings"]
    assert (kw["compute_dtype"], kw["param_init_type"], kw["seq_length"]) == ("bfloat16", "float32", 8192)
    assert kw["offset"] == [1, -1] and kw["use_rope_slice"] is True
    assert (kw["pad_token_id"], kw["eos_token_id"]) == (151643, 151645)
    # transformers 5 writes rope_theta under rope_parameters; eos may be a list
    nested = {k: v for k, v in QWEN25_7B.items() if k != "rope_theta"}
    nested.update(rope_parameters={"rope_theta": 5e5, "rope_type": "default"},
                  eos_token_id=[151645, 151643])
    kw = llama_config_kwargs(nested, _mf(), layout, dtype="bfloat16", seq_length=64, pad_id=7)
    assert (kw["theta"], kw["eos_token_id"], kw["pad_token_id"]) == (5e5, 151645, 7)
    par = kw["parallel_config"]
    assert (par["data_parallel"], par["model_parallel"], par["pipeline_stage"],
            par["micro_batch_num"]) == (4, 1, 2, 16)
    assert par["vocab_emb_dp"] is False and par["recompute"]["recompute"] is True


def test_layout_of_the_32b_recipe_and_its_errors():
    lay = parallel_layout(32, QWEN25_32B, tp=8, pp=4, micro_batches=16, rollout_tp=8,
                          global_rollouts=512)
    assert (lay.dp, lay.tp, lay.pp, lay.blocks) == (1, 8, 4, 4)
    bad = [
        (dict(tp=3, pp=1, micro_batches=1, rollout_tp=1), 30, "must divide the attention heads"),
        (dict(tp=8, pp=2, micro_batches=16, rollout_tp=1), 24, "not a multiple of"),
        (dict(tp=8, pp=4, micro_batches=2, rollout_tp=8), 32, "micro_batch_num=2 < pipeline_stages=4"),
        (dict(tp=8, pp=80, micro_batches=80, rollout_tp=8), 640, "exceeds the model's 64 layers"),
        (dict(tp=8, pp=1, micro_batches=3, rollout_tp=8), 16, "equal parts"),
        (dict(tp=8, pp=1, micro_batches=1, rollout_tp=3), 16, "rollout.tensor_parallel_size=3"),
    ]
    for kw, world, needle in bad:
        with pytest.raises(ConfigError, match=needle):
            parallel_layout(world, QWEN25_32B, global_rollouts=512, **kw)


def test_pack_right_puts_every_response_logprob_where_a_plain_forward_has_it(
        tiny_dir, make_cfg, fixed_batch):
    """The mindformers model has no padding mask, so batches are right-packed. A plain causal
    forward of the packed rows, gathered at ``positions``, must give the torch backend's
    padded-batch log-probs on the same weights."""
    import torch

    from mindrl.backends.base import build_backend

    be = build_backend("torch", make_cfg(tiny_dir))
    batch = fixed_batch(B=8, P=6, T=5).tokens
    want = be.logprobs(batch, temperature=1.0)
    ids, positions = pack_right(batch.input_ids, batch.attention_mask, batch.prompt_len,
                                seq_length=16, pad_id=0)
    assert ids.shape == (8, 17) and positions.shape == (8, 5)
    with torch.no_grad():
        logits = be.model(input_ids=torch.from_numpy(ids[:, :-1]).long()).logits
    token = torch.log_softmax(logits.double(), -1).gather(
        -1, torch.from_numpy(ids[:, 1:]).long().unsqueeze(-1)).squeeze(-1).numpy()
    got = np.take_along_axis(token, positions, 1) * batch.response_mask
    np.testing.assert_allclose(got, want, atol=2e-5)
    assert np.abs(want).sum() > 1                       # real log-probs, not all masked
    with pytest.raises(ValueError, match="exceed mindformers.seq_length"):
        pack_right(batch.input_ids, batch.attention_mask, batch.prompt_len, seq_length=4, pad_id=0)


def test_config_and_missing_package_errors(tiny_dir):
    with pytest.raises(ConfigError, match="Ascend only"):
        load_config(None, ["backend=mindformers", "rollout.engine=vllm"])
    with pytest.raises(ConfigError, match="no native sampler"):
        load_config(None, ["backend=mindformers", "device=ascend"])
    cfg = load_config(None, ["backend=mindformers", "device=ascend", "rollout.engine=vllm",
                             f"model.path={tiny_dir}"])
    from mindrl.backends.base import build_backend
    from mindrl.backends.mindformers.backend import BackendUnavailable

    with pytest.raises(BackendUnavailable, match="mindformers 2.0.x for MindSpore 2.10"):
        build_backend("mindformers", cfg)


def test_unmapped_family_is_one_line_before_mindformers_is_needed(tmp_path):
    """A Qwen3-MoE checkpoint with backend=mindformers: one line naming its model_type and the
    mapped list, raised before the (absent) mindformers package is imported."""
    from mindrl.backends.base import build_backend
    from mindrl.backends.mindformers.layout import MAPPED_FAMILIES, check_family
    from mindrl.errors import UserError

    (tmp_path / "config.json").write_text('{"model_type": "qwen3_moe"}')
    cfg = load_config(None, ["backend=mindformers", "device=ascend", "rollout.engine=vllm",
                             f"model.path={tmp_path}"])
    with pytest.raises(UserError) as e:
        build_backend("mindformers", cfg)
    msg = str(e.value)
    assert "\n" not in msg and "'qwen3_moe'" in msg and "maps: qwen2" in msg
    assert MAPPED_FAMILIES == ("qwen2",)
    check_family({"model_type": "qwen2"})          # the mapped family passes
