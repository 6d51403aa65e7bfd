"""The pure part of the mindformers adapter: names, model config, packing (and the parallel layout,
which lives in :mod:`mindrl.config.parallel` because the config checks it at load).

Nothing here imports mindspore or mindformers, so all of it is tested on any machine
(``tests/backends/mindformers``). The facts it encodes were read from the mindformers 2.0.0
wheel (the release that pairs with MindSpore 2.10):

* Qwen2/Qwen2.5 train through the legacy ``LlamaForCausalLM`` with ``qkv_has_bias=True``
  (mindformers' own Qwen2.5 fine-tune recipes do; its ``Qwen2ForCausalLM`` raises in train mode).
* With ``qkv_concat=False`` every parameter is one Hugging Face tensor under another name
  (``LlamaForCausalLM.convert_name``); both layouts store linear weights ``[out, in]`` like HF,
  so conversion is a rename, never a transpose or a fused split.
* The model is causal with no padding mask in training: sequences must be right-padded (real
  tokens first), which :func:`pack_right` does for mindrl's left-padded prompts.
"""

from __future__ import annotations

import re
from typing import Dict, Iterable, Iterator, List, Mapping, Tuple

import numpy as np

# The layout arithmetic is checked at config load, so it lives with the config; re-exported here.
from mindrl.config.parallel import ParallelLayout, parallel_layout  # noqa: F401

# model_type of the checkpoints this adapter maps onto mindformers' LlamaForCausalLM
MAPPED_FAMILIES = ("qwen2",)


def check_family(hf_config: Mapping) -> None:
    """One line, before mindformers is imported or a weight is read, for a checkpoint this
    adapter does not map (``mindrl train`` prints it and exits 2)."""
    from mindrl.errors import UserError

    mt = hf_config.get("model_type") or "<missing>"
    if mt not in MAPPED_FAMILIES:
        raise UserError(
            f"model.path: config.json model_type '{mt}' is not mapped by backend=mindformers "
            f"(it maps: {', '.join(MAPPED_FAMILIES)}); backend=mindspore runs qwen2, qwen3, "
            "llama, qwen3_moe and qwen2_moe data-parallel")


# (Hugging Face name, mindformers name); "{i}" is the layer index, "{p}" weight or bias.
_NAME_PAIRS: List[Tuple[str, str]] = [
    ("model.embed_tokens.weight", "model.tok_embeddings.embedding_weight"),
    ("model.layers.{i}.self_attn.q_proj.{p}", "model.layers.{i}.attention.wq.{p}"),
    ("model.layers.{i}.self_attn.k_proj.{p}", "model.layers.{i}.attention.wk.{p}"),
    ("model.layers.{i}.self_attn.v_proj.{p}", "model.layers.{i}.attention.wv.{p}"),
    ("model.layers.{i}.self_attn.o_proj.weight", "model.layers.{i}.attention.wo.weight"),
    ("model.layers.{i}.mlp.gate_proj.weight", "model.layers.{i}.feed_forward.w1.weight"),
    ("model.layers.{i}.mlp.down_proj.weight", "model.layers.{i}.feed_forward.w2.weight"),
    ("model.layers.{i}.mlp.up_proj.weight", "model.layers.{i}.feed_forward.w3.weight"),
    ("model.layers.{i}.input_layernorm.weight", "model.layers.{i}.attention_norm.weight"),
    ("model.layers.{i}.post_attention_layernorm.weight", "model.layers.{i}.ffn_norm.weight"),
    ("model.norm.weight", "model.norm_out.weight"),
    ("lm_head.weight", "lm_head.weight"),
]


def _rule(src: str, dst: str) -> Tuple[str, str]:
    """A template pair as (regex over ``src``, replacement producing ``dst``)."""
    pattern = "^" + re.escape(src).replace(r"\{i\}", r"(?P<i>\d+)").replace(
        r"\{p\}", r"(?P<p>weight|bias)") + "$"
    return pattern, dst.replace("{i}", r"\g<i>").replace("{p}", r"\g<p>")


_HF_TO_MF = [_rule(hf, mf) for hf, mf in _NAME_PAIRS]
_MF_TO_HF = [_rule(mf, hf) for hf, mf in _NAME_PAIRS]


def _rename(name: str, rules: List[Tuple[str, str]], what: str) -> str:
    for pattern, repl in rules:
        new, n = re.subn(pattern, repl, name)
        if n:
            return new
    raise KeyError(f"{what} parameter {name!r} has no counterpart in the mindformers Qwen2 "
                   "(LlamaForCausalLM, qkv_concat=False) layout")


def hf_to_mf(name: str) -> str:
    """Hugging Face Qwen2 parameter name -> mindformers ``LlamaForCausalLM`` name."""
    return _rename(name, _HF_TO_MF, "Hugging Face")


def mf_to_hf(name: str) -> str:
    """mindformers ``LlamaForCausalLM`` parameter name -> Hugging Face Qwen2 name."""
    return _rename(name, _MF_TO_HF, "mindformers")


def to_hf(named: Iterable[Tuple[str, np.ndarray]], tied: bool) -> Iterator[Tuple[str, np.ndarray]]:
    """mindformers (name, array) pairs as HF pairs; a tied model has no separate lm_head, so it
    is yielded as the embedding (what ``state_dict()`` of a tied HF model shows)."""
    for name, arr in named:
        hf = mf_to_hf(name)
        if tied and hf == "lm_head.weight":
            continue
        yield hf, arr
        if tied and hf == "model.embed_tokens.weight":
            yield "lm_head.weight", arr


def _first_int(x, default: int = 0) -> int:
    if isinstance(x, (list, tuple)):
        x = x[0] if x else None
    return default if x is None else int(x)


def rope_theta(hf_config: Mapping) -> float:
    """``rope_theta`` at the top level (transformers 4) or under ``rope_parameters`` (5)."""
    if "rope_theta" in hf_config:
        return float(hf_config["rope_theta"])
    params = hf_config.get("rope_parameters") or {}
    return float(params.get("rope_theta", 10000.0))


def llama_config_kwargs(hf_config: Mapping, mf, layout: ParallelLayout, *, dtype: str,
                        seq_length: int, pad_id: int) -> Dict:
    """Keyword arguments of mindformers ``LlamaConfig`` for a Qwen2/Qwen2.5 ``config.json``.

    ``mf`` is the recipe's ``mindformers`` section; ``pad_id`` is the id :func:`pack_right` pads
    with (the model's causal mask hides keys equal to ``pad_token_id``, so it must be the pad
    id really used, never a real token such as 0). Compute in ``dtype`` (bf16 on Ascend),
    parameters and norms in float32 (mindformers' Qwen2.5 recipes), q/k/v bias on, no fused
    q/k/v so names map one to one. ``mf.extra_model_config`` is applied last (expert knobs).
    """
    heads = int(hf_config["num_attention_heads"])
    recompute = {"recompute": bool(mf.recompute), "select_recompute": False,
                 "parallel_optimizer_comm_recompute": False, "mp_comm_recompute": True,
                 "recompute_slice_activation": True}
    kwargs = dict(
        batch_size=1, seq_length=int(seq_length),
        hidden_size=int(hf_config["hidden_size"]), num_layers=int(hf_config["num_hidden_layers"]),
        num_heads=heads, n_kv_heads=int(hf_config.get("num_key_value_heads", heads)),
        intermediate_size=int(hf_config["intermediate_size"]),
        vocab_size=int(hf_config["vocab_size"]),
        max_position_embedding=int(hf_config.get("max_position_embeddings", seq_length)),
        rms_norm_eps=float(hf_config.get("rms_norm_eps", 1e-6)),
        theta=rope_theta(hf_config),
        tie_word_embeddings=bool(hf_config.get("tie_word_embeddings", False)),
        pad_token_id=int(pad_id),
        bos_token_id=_first_int(hf_config.get("bos_token_id")),
        eos_token_id=_first_int(hf_config.get("eos_token_id")),
        compute_dtype=dtype, layernorm_compute_type="float32", softmax_compute_type="float32",
        rotary_dtype="float32", param_init_type="float32",
        qkv_has_bias=True, qkv_concat=False, use_past=False,
        use_flash_attention=bool(mf.use_flash_attention), fused_rms_norm=True,
        offset=list(mf.stage_layer_offset) if mf.stage_layer_offset else 0,
        parallel_config=dict(
            data_parallel=layout.dp, model_parallel=layout.tp, pipeline_stage=layout.pp,
            micro_batch_num=layout.micro_batches, use_seq_parallel=bool(mf.sequence_parallel),
            vocab_emb_dp=bool(mf.vocab_emb_dp) and layout.pp == 1,
            gradient_aggregation_group=4, recompute=recompute),
    )
    kwargs.update(dict(mf.extra_model_config))
    return kwargs


# ---------------------------------------------------------------------------- packing
def accumulation_steps(global_rows: int, dp: int, micro_batch_size: int) -> int:
    """Slices of the global batch that one step feeds one at a time (gradient accumulation,
    one stage): the fewest that keep each device at most ``micro_batch_size`` rows per slice
    (``train.micro_batch_size``), each slice whole over the ``dp`` data-parallel ranks.
    Divides ``global_rows / dp``; 1 = the whole batch in one forward."""
    per_device = max(1, global_rows // max(1, dp))
    for m in range(1, per_device + 1):
        if per_device % m == 0 and per_device // m <= max(1, micro_batch_size):
            return m
    return per_device


def pack_right(input_ids: np.ndarray, attention_mask: np.ndarray, prompt_len: int,
               seq_length: int, pad_id: int) -> Tuple[np.ndarray, np.ndarray]:
    """A :class:`mindrl.types.TokenBatch` layout (prompts left-padded to ``prompt_len``,
    responses right-padded) -> right-padded sequences for a causal model without a padding mask,
    and where each response token's log-prob sits.

    Returns ``ids`` (B, seq_length + 1) int32 (the model reads ``ids[:, :-1]`` and predicts
    ``ids[:, 1:]``) and ``gather`` (B, T) int32: the log-prob of response token j of row b is
    ``logp[b, gather[b, j]]`` where ``logp[b, t] = log p(ids[b, t + 1] | ids[b, :t + 1])``.
    Padding response slots point at position 0 (their response mask is 0).
    """
    B, total_len = input_ids.shape
    T = total_len - prompt_len
    att = attention_mask.astype(bool)
    ids = np.full((B, seq_length + 1), pad_id, dtype=np.int32)
    gather = np.zeros((B, T), dtype=np.int32)
    for b in range(B):
        prompt = input_ids[b, :prompt_len][att[b, :prompt_len]]
        response = input_ids[b, prompt_len:][att[b, prompt_len:]]
        n = len(prompt) + len(response)
        if n > seq_length + 1:
            raise ValueError(f"row {b}: {len(prompt)} prompt + {len(response)} response tokens "
                             f"exceed mindformers.seq_length + 1 = {seq_length + 1}")
        if len(prompt) == 0:
            raise ValueError(f"row {b} has an empty prompt; the first response token would "
                             "have no prefix to condition on")
        ids[b, :len(prompt)] = prompt
        ids[b, len(prompt):n] = response
        gather[b, :len(response)] = np.arange(len(prompt) - 1, n - 1)
    return ids, gather
