"""The decoder families of ``arch.FAMILIES`` (Qwen2 / Qwen2.5 / R1-Distill-Qwen, Qwen3 dense,
Llama 3.x / R1-Distill-Llama, Qwen3-MoE, Qwen2-MoE) as MindSpore Cells, one shared decoder with
per-family switches.

Parameter names are the Hugging Face names (``model.embed_tokens.weight``,
``model.layers.0.self_attn.q_proj.weight``, ..., ``lm_head.weight``), so a transformers
checkpoint loads without a mapping table (see ``weights.py``).

Math per layer (as transformers' ``Qwen2DecoderLayer``):
    h = x + o_proj(attn(rope(q_proj(n1(x))), rope(k_proj(n1(x))), v_proj(n1(x))))
    y = h + down_proj(silu(gate_proj(n2(h))) * up_proj(n2(h)))
with n1, n2 RMSNorm, grouped-query attention and the rotate-half RoPE. Qwen2: q/k/v with bias,
o/gate/up/down without. Qwen3: no bias (``attention_bias``) and an RMSNorm over each head's
features on q and k before RoPE. Llama: biases from ``attention_bias`` / ``mlp_bias``. RoPE
frequencies (default, linear, llama3, yarn, dynamic) from ``arch.rope_frequencies``. MoE
layers replace the MLP by :class:`MoE` (router, per-expert SwiGLU MLPs under their checkpoint
names, an optional shared expert). Kernels
(portable CPU vs fused Ascend) come from ``kernels.select_kernels``, chosen once, at construction.

Inputs everywhere: ``input_ids`` (B, S) int32, ``position_ids`` (B, S) int32 (0 at each row's
first real token), ``key_mask`` (B, Sk) float32 (1 = a real token that may be attended to).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Tuple

import numpy as np
import mindspore as ms
from mindspore import Parameter, Tensor, nn, ops

from mindrl.backends.mindspore import arch
from mindrl.backends.mindspore.kernels import (NEG_INF, BlockedCausalAttention, Kernels,
                                               select_kernels)


@dataclass(frozen=True)
class Qwen2Spec:
    """The fields of a Hugging Face ``config.json`` the model uses: Qwen2 and the other
    families of ``arch.FAMILIES`` (the switches after ``tie_word_embeddings``)."""

    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    tie_word_embeddings: bool = False
    model_type: str = "qwen2"
    qkv_bias: bool = True
    o_bias: bool = False
    mlp_bias: bool = False
    qk_norm: bool = False                       # RMSNorm over head_dim on q and k (Qwen3)
    rope_inv_freq: Tuple[float, ...] = ()       # (head_dim/2,); () = default RoPE of rope_theta
    rope_attention_scaling: float = 1.0         # multiplies cos/sin (YaRN)
    rope_max_len: Optional[int] = None          # longest sequence the frequencies hold for
    moe_layers: Tuple[bool, ...] = ()           # per layer: a sparse MoE block (else dense MLP)
    num_experts: int = 0
    num_experts_per_tok: int = 0
    moe_intermediate_size: int = 0
    norm_topk_prob: bool = False                # renormalise the top-k routing weights
    shared_expert_intermediate_size: int = 0    # Qwen2-MoE's gated shared expert; 0 = none

    def is_moe_layer(self, i: int) -> bool:
        return bool(self.moe_layers) and self.moe_layers[i]

    @property
    def moe_layer_ids(self) -> Tuple[int, ...]:
        return tuple(i for i, m in enumerate(self.moe_layers) if m)

    @classmethod
    def from_hf(cls, cfg: dict) -> "Qwen2Spec":
        """Raises ``arch.UnsupportedArchitecture`` (one line) for a family or RoPE type this
        model does not implement, before anything is built or loaded."""
        switches = arch.family_switches(cfg)
        if cfg.get("use_sliding_window"):
            raise NotImplementedError("use_sliding_window=true is not supported")
        heads = cfg["num_attention_heads"]
        head_dim = cfg.get("head_dim") or cfg["hidden_size"] // heads
        inv_freq, attention_scaling, max_len = arch.rope_frequencies(cfg, head_dim)
        moe = _moe_fields(cfg, switches["model_type"])
        return cls(
            vocab_size=cfg["vocab_size"], hidden_size=cfg["hidden_size"],
            intermediate_size=cfg["intermediate_size"],
            num_hidden_layers=cfg["num_hidden_layers"], num_attention_heads=heads,
            num_key_value_heads=cfg.get("num_key_value_heads") or heads,
            head_dim=head_dim, rms_norm_eps=cfg.get("rms_norm_eps", 1e-6),
            rope_theta=float(arch.rope_parameters(cfg)["rope_theta"]),
            tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
            rope_inv_freq=tuple(float(f) for f in inv_freq),
            rope_attention_scaling=attention_scaling, rope_max_len=max_len, **moe, **switches)


def _moe_fields(cfg: dict, model_type: str) -> dict:
    """The spec's MoE fields (empty for a dense family); one-line errors for what the MoE block
    does not implement."""
    from mindrl.models import moe as M

    flags = M.moe_layer_flags(cfg)
    if not any(flags):
        return {}
    layers = cfg["num_hidden_layers"]
    bad = [i for i in cfg.get("mlp_only_layers") or [] if not 0 <= int(i) < layers]
    if bad:
        raise arch.UnsupportedArchitecture(
            f"model.path: config.json mlp_only_layers {bad} are outside the model's {layers} "
            "layers")
    k = int(cfg.get("num_experts_per_tok") or 0)
    experts = M.num_experts(cfg)
    if not 0 < k <= experts:
        raise arch.UnsupportedArchitecture(
            f"model.path: config.json num_experts_per_tok={k} must be in 1..num_experts="
            f"{experts}")
    shared = int(cfg.get("shared_expert_intermediate_size") or 0) \
        if model_type == "qwen2_moe" else 0
    return dict(moe_layers=tuple(flags), num_experts=experts, num_experts_per_tok=k,
                moe_intermediate_size=int(cfg["moe_intermediate_size"]),
                norm_topk_prob=bool(cfg.get("norm_topk_prob", False)),
                shared_expert_intermediate_size=shared)


def _param(shape, dtype, init: str = "zeros"):
    arr = np.ones(shape, np.float32) if init == "ones" else np.zeros(shape, np.float32)
    return Parameter(Tensor(arr, dtype))


class Linear(nn.Cell):
    """y = x W^T (+ b); ``weight`` (out, in) as in torch."""

    def __init__(self, n_in: int, n_out: int, bias: bool, dtype):
        super().__init__()
        self.n_out = n_out
        self.weight = _param((n_out, n_in), dtype)
        self.has_bias = bias
        self.bias = _param((n_out,), dtype) if bias else None
        self.matmul = ops.MatMul(transpose_b=True)

    def construct(self, x):
        lead = x.shape[:-1]
        y = self.matmul(x.reshape(-1, x.shape[-1]), self.weight)
        if self.has_bias:
            y = y + self.bias
        return y.reshape(lead + (self.n_out,))


class Embedding(nn.Cell):
    """Token embedding by ``ops.gather`` (``nn.Embedding``'s backward has no CPU kernel)."""

    def __init__(self, vocab: int, hidden: int, dtype):
        super().__init__()
        self.weight = _param((vocab, hidden), dtype)

    def construct(self, ids):
        return ops.gather(self.weight, ids, 0)


class RMSNorm(nn.Cell):
    def __init__(self, hidden: int, eps: float, kernels: Kernels, dtype):
        super().__init__()
        self.weight = _param((hidden,), dtype, "ones")
        self.eps = eps
        self.norm = kernels.rms_norm

    def construct(self, x):
        return self.norm(x, self.weight, self.eps)


class Attention(nn.Cell):
    def __init__(self, spec: Qwen2Spec, kernels: Kernels, dtype):
        super().__init__()
        H, D = spec.hidden_size, spec.head_dim
        self.nq, self.nk, self.d = spec.num_attention_heads, spec.num_key_value_heads, D
        self.q_proj = Linear(H, self.nq * D, spec.qkv_bias, dtype)
        self.k_proj = Linear(H, self.nk * D, spec.qkv_bias, dtype)
        self.v_proj = Linear(H, self.nk * D, spec.qkv_bias, dtype)
        self.o_proj = Linear(self.nq * D, H, spec.o_bias, dtype)
        self.qk_norm = spec.qk_norm
        if spec.qk_norm:                      # Qwen3: RMSNorm over each head's D features
            self.q_norm = RMSNorm(D, spec.rms_norm_eps, kernels, dtype)
            self.k_norm = RMSNorm(D, spec.rms_norm_eps, kernels, dtype)
        self.scale = 1.0 / math.sqrt(D)
        self.rope = kernels.rope
        self.attend = kernels.attention
        self.attend_long = BlockedCausalAttention(self.scale, kernels.query_block)

    def qkv(self, x, cos, sin):
        B, S = x.shape[0], x.shape[1]
        q = self.q_proj(x).reshape(B, S, self.nq, self.d)                       # (B, S, Nq, D)
        k = self.k_proj(x).reshape(B, S, self.nk, self.d)                       # (B, S, Nk, D)
        if self.qk_norm:
            q, k = self.q_norm(q), self.k_norm(k)
        q = q.transpose(0, 2, 1, 3)                                              # (B, Nq, S, D)
        k = k.transpose(0, 2, 1, 3)                                              # (B, Nk, S, D)
        v = self.v_proj(x).reshape(B, S, self.nk, self.d).transpose(0, 2, 1, 3)
        q, k = self.rope(q, k, cos, sin)
        return q, k, v

    def out(self, q, k, v, bias):
        """``bias`` (B, 1, Sq, Sk) additive, or for a long row's causal self-attention the key
        mask (B, S) (:meth:`Qwen2ForCausalLM.causal_mask`)."""
        B, S = q.shape[0], q.shape[2]
        if len(bias.shape) == 2:
            o = self.attend_long(q, k, v, bias)                                  # (B, Nq, S, D)
        else:
            o = self.attend(q, k, v, bias, self.scale)
        return self.o_proj(o.transpose(0, 2, 1, 3).reshape(B, S, self.nq * self.d))

    def construct(self, x, cos, sin, bias):
        q, k, v = self.qkv(x, cos, sin)
        return self.out(q, k, v, bias)


class MLP(nn.Cell):
    def __init__(self, spec: Qwen2Spec, kernels: Kernels, dtype, intermediate: int = 0):
        super().__init__()
        H, I = spec.hidden_size, intermediate or spec.intermediate_size
        self.gate_proj = Linear(H, I, spec.mlp_bias, dtype)
        self.up_proj = Linear(H, I, spec.mlp_bias, dtype)
        self.down_proj = Linear(I, H, spec.mlp_bias, dtype)
        self.act = kernels.swiglu

    def construct(self, x):
        return self.down_proj(self.act(self.gate_proj(x), self.up_proj(x)))


class MoE(nn.Cell):
    """A sparse MoE block as transformers' ``Qwen3MoeSparseMoeBlock`` (``Qwen2MoeSparseMoeBlock``
    with a shared expert), per token x (after ``post_attention_layernorm``)::

        p = softmax(x W_g^T) (float32);  S = the top-k experts of p
        w_e = p_e [e in S]  (/ sum_{j in S} p_j with norm_topk_prob);  w_e = 0 off S
        y = sum_e w_e * down_e(silu(gate_e x) * up_e x)  (+ sigmoid(x g^T) * shared(x))

    Every expert runs on every token and the routing weights select (exact, E/k times the
    expert work of a gathered dispatch: a CPU/test-size implementation; the dispatch on
    Ascend is a kernel choice). The router keeps its gradient through ``w``; the top-k
    selection itself is not differentiable, as in transformers.

    ``route`` (N, k) int32, optional: expert indices to use instead of the router's own top-k
    (routing replay); a row with any index < 0 routes natively. The weights are always
    recomputed from the current router.
    """

    def __init__(self, spec: Qwen2Spec, kernels: Kernels, dtype):
        super().__init__()
        H, E, I = spec.hidden_size, spec.num_experts, spec.moe_intermediate_size
        self.hidden, self.n_experts, self.k = H, E, spec.num_experts_per_tok
        self.norm_topk = spec.norm_topk_prob
        self.gate = Linear(H, E, False, dtype)
        self.experts = nn.CellList([MLP(spec, kernels, dtype, I) for _ in range(E)])
        self.has_shared = spec.shared_expert_intermediate_size > 0
        if self.has_shared:
            self.shared_expert = MLP(spec, kernels, dtype, spec.shared_expert_intermediate_size)
            self.shared_expert_gate = Linear(H, 1, False, dtype)
        self.expert_ids = Tensor(np.arange(E, dtype=np.int32).reshape(1, 1, E))

    def routes(self, x2):
        """x2 (N, H) -> (router probabilities (N, E) float32, native top-k indices (N, k))."""
        probs = ops.softmax(self.gate(x2).astype(ms.float32), -1)
        _, idx = ops.topk(probs, self.k)
        return probs, idx.astype(ms.int32)

    def mix(self, x2, probs, idx):
        """The block's output (N, H) for tokens x2 routed to experts ``idx`` (N, k)."""
        chosen = ops.equal(idx.reshape(idx.shape[0], self.k, 1), self.expert_ids)
        mask = ops.stop_gradient(chosen.astype(ms.float32).sum(1))              # (N, E)
        w = probs * mask
        if self.norm_topk:
            w = w / w.sum(-1, keepdims=True)
        w = w.astype(x2.dtype)
        y = None
        e = 0
        for expert in self.experts:
            ye = expert(x2) * w[:, e:e + 1]
            y = ye if y is None else y + ye
            e = e + 1
        if self.has_shared:
            y = y + ops.sigmoid(self.shared_expert_gate(x2)) * self.shared_expert(x2)
        return y

    def routed(self, x, route=None, stats: bool = False):
        """x (B, S, H) -> (output (B, S, H), the indices used (B*S, k) int32); with ``stats``
        also the router probabilities (B*S, E) and the native top-k as a 0/1 mask (B*S, E),
        the inputs of the load-balancing loss (:func:`router_sums`)."""
        lead = x.shape[:-1]
        x2 = x.reshape(-1, self.hidden)
        probs, idx = self.routes(x2)
        native_idx = idx
        if route is not None:
            native = (route < 0).any(-1, keep_dims=True)
            idx = ops.where(native, idx, route)
        out = self.mix(x2, probs, idx).reshape(lead + (self.hidden,))
        if stats:
            chosen = ops.equal(native_idx.reshape(native_idx.shape[0], self.k, 1),
                               self.expert_ids).astype(ms.float32).sum(1)
            return out, idx, probs, ops.stop_gradient(chosen)
        return out, idx

    def construct(self, x):
        return self.routed(x)[0]


class DecoderLayer(nn.Cell):
    def __init__(self, spec: Qwen2Spec, kernels: Kernels, dtype, index: int = 0):
        super().__init__()
        self.self_attn = Attention(spec, kernels, dtype)
        self.is_moe = spec.is_moe_layer(index)
        self.mlp = MoE(spec, kernels, dtype) if self.is_moe else MLP(spec, kernels, dtype)
        self.input_layernorm = RMSNorm(spec.hidden_size, spec.rms_norm_eps, kernels, dtype)
        self.post_attention_layernorm = RMSNorm(spec.hidden_size, spec.rms_norm_eps, kernels,
                                                dtype)

    def construct(self, x, cos, sin, bias):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, bias)
        return x + self.mlp(self.post_attention_layernorm(x))

    def routed(self, x, cos, sin, bias, route=None, stats: bool = False):
        """A MoE layer's ``construct`` that also returns the experts used (B*S, k); ``route``
        replays recorded ones; ``stats`` adds the router statistics (:meth:`MoE.routed`)."""
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, bias)
        out = self.mlp.routed(self.post_attention_layernorm(x), route, stats)
        return (x + out[0],) + out[1:]

    def step_with_cache(self, x, cos, sin, bias, k_cache, v_cache, write):
        """Like ``construct`` but attends to a static KV cache (B, Nk, Smax, D).

        ``write`` (1, 1, Smax, S) float32 is a 0/1 matrix placing the S new keys into their
        cache slots (prefill: the first S slots; decode: one slot), so every shape is static.
        Returns (y, new_k_cache, new_v_cache).
        """
        x, k_cache, v_cache = self.attend_with_cache(x, cos, sin, bias, k_cache, v_cache, write)
        return x + self.mlp(self.post_attention_layernorm(x)), k_cache, v_cache

    def attend_with_cache(self, x, cos, sin, bias, k_cache, v_cache, write):
        """The attention half of :meth:`step_with_cache`: (x + attention, caches)."""
        q, k, v = self.self_attn.qkv(self.input_layernorm(x), cos, sin)
        keep = 1.0 - write.sum(-1, keepdims=True)                            # (1, 1, Smax, 1)
        k_cache = k_cache * keep + ops.matmul(write, k)                     # (B, Nk, Smax, D)
        v_cache = v_cache * keep + ops.matmul(write, v)
        return x + self.self_attn.out(q, k_cache, v_cache, bias), k_cache, v_cache


def recompute_layers(model) -> None:
    """``model.gradient_checkpointing``: ``Cell.recompute()`` on every decoder layer of
    ``model`` (a :class:`Qwen2ForCausalLM` or the critic), so a compiled backward recomputes
    each layer's activations instead of keeping them (the layers' outputs stay stored). Call it
    after every sub-cell exists (LoRA adapters included): it marks the cells present now."""
    for layer in model.model.layers:
        layer.recompute()


class Qwen2Model(nn.Cell):
    def __init__(self, spec: Qwen2Spec, kernels: Kernels, dtype):
        super().__init__()
        self.embed_tokens = Embedding(spec.vocab_size, spec.hidden_size, dtype)
        self.layers = nn.CellList([DecoderLayer(spec, kernels, dtype, i)
                                   for i in range(spec.num_hidden_layers)])
        self.norm = RMSNorm(spec.hidden_size, spec.rms_norm_eps, kernels, dtype)


def router_sums(probs, chosen, key_mask):
    """The per-expert sums behind transformers' ``load_balancing_loss_func``: with w the
    real-token mask, over all MoE layers l and tokens n, (sum w_n [e in native top-k],
    sum w_n p_e), each (E,) float32; ``probs`` / ``chosen``: per layer (N, E) float32;
    ``key_mask`` (B, S) with N = B*S. The trainer divides by the mini-batch's rows
    R = layers x real tokens and fixes f = counts / R from a pre-pass
    (:mod:`mindrl.backends.torch.moe_balance` states the loss); the gradient flows through
    the probability sums only."""
    w = key_mask.astype(ms.float32).reshape(-1, 1)                        # (N, 1)
    f = None
    p = None
    for j in range(len(probs)):
        fl = (chosen[j] * w).sum(0)
        pl = (probs[j] * w).sum(0)
        f = fl if f is None else f + fl
        p = pl if p is None else p + pl
    return ops.stop_gradient(f), p


def routes_into_positions(position_ids: np.ndarray, routing: np.ndarray) -> np.ndarray:
    """(B, S) position ids and (B, S, L, k) routes -> the (B, S, 1 + L*k) int32 position input
    of :meth:`Qwen2ForCausalLM.hidden` under routing replay (positions first)."""
    B, S, L, k = routing.shape
    return np.concatenate([position_ids.reshape(B, S, 1),
                           routing.reshape(B, S, L * k)], -1).astype(np.int32)


class Qwen2ForCausalLM(nn.Cell):
    """Qwen2 causal LM. ``construct`` returns logits (B, S, V) in float32.

    ``response_logits(ids, pos, mask, T)`` returns only the logits that predict the last T
    tokens (positions S-T-1 .. S-2), the layout of :class:`mindrl.types.TokenBatch`.
    """

    def __init__(self, spec: Qwen2Spec, dtype=ms.float32, kernels: Optional[Kernels] = None):
        super().__init__()
        self.spec = spec
        self.kernels = kernels or select_kernels()
        self.compute_dtype = dtype
        self.model = Qwen2Model(spec, self.kernels, dtype)
        self.tied = spec.tie_word_embeddings
        if not self.tied:
            self.lm_head = Linear(spec.hidden_size, spec.vocab_size, False, dtype)
        half = spec.head_dim // 2
        if spec.rope_inv_freq:               # scaled RoPE (arch.rope_frequencies)
            inv = np.asarray(spec.rope_inv_freq, np.float32)
        else:
            inv = 1.0 / (spec.rope_theta ** (np.arange(0, spec.head_dim, 2, dtype=np.int64)
                                             .astype(np.float32) / spec.head_dim))
        self.inv_freq = Tensor(inv.astype(np.float32).reshape(1, 1, half))
        self.rope_scaling = float(spec.rope_attention_scaling)
        self.rope_max_len = int(spec.rope_max_len or 0)        # 0 = no limit
        self.head_matmul = ops.MatMul(transpose_b=True)

    # --- pieces -----------------------------------------------------------------------------
    def rope_tables(self, position_ids):
        """position_ids (B, S) -> cos, sin (B, 1, S, D) in the compute dtype."""
        freqs = position_ids.astype(ms.float32).expand_dims(-1) * self.inv_freq   # (B, S, D/2)
        emb = ops.concat((freqs, freqs), -1).expand_dims(1)
        if self.rope_max_len > 0 and position_ids.shape[1] > self.rope_max_len:
            raise ValueError("a sequence is longer than max_position_embeddings: dynamic NTK "
                             "RoPE scaling beyond it is not implemented by the MindSpore backend")
        if self.rope_scaling != 1.0:
            return ((ops.cos(emb) * self.rope_scaling).astype(self.compute_dtype),
                    (ops.sin(emb) * self.rope_scaling).astype(self.compute_dtype))
        return ops.cos(emb).astype(self.compute_dtype), ops.sin(emb).astype(self.compute_dtype)

    def attn_bias(self, q_slots, key_mask):
        """q_slots (Sq,) int32 cache slot of each query, key_mask (B, Sk) -> (B, 1, Sq, Sk):
        0 where key slot <= query slot and the key is real, NEG_INF elsewhere."""
        k_slots = ops.arange(0, key_mask.shape[1], 1, dtype=ms.int32)
        causal = (k_slots.reshape(1, -1) <= q_slots.reshape(-1, 1)).astype(ms.float32)
        allowed = causal.reshape(1, 1, causal.shape[0], causal.shape[1]) * \
            key_mask.astype(ms.float32).reshape(key_mask.shape[0], 1, 1, key_mask.shape[1])
        return (1.0 - allowed) * NEG_INF

    def causal_mask(self, key_mask):
        """The attention input of a forward over slots 0..S-1: the bias of :meth:`attn_bias`, or
        for a row longer than ``kernels.long_rows`` the key mask itself, from which the blocked
        kernel builds each query block's bias (no (S, S) tensor)."""
        S = key_mask.shape[1]
        if 0 < self.kernels.long_rows < S:
            return key_mask
        return self.attn_bias(ops.arange(0, S, 1, dtype=ms.int32), key_mask)

    def head(self, h):
        """h (B, S, H) -> float32 logits (B, S, V)."""
        w = self.model.embed_tokens.weight if self.tied else self.lm_head.weight
        B, S, H = h.shape
        return self.head_matmul(h.reshape(B * S, H), w).reshape(B, S, -1).astype(ms.float32)

    def hidden(self, input_ids, position_ids, key_mask):
        """Final hidden states (B, S, H). ``position_ids`` (B, S), or (B, S, 1 + L*k) for
        routing replay: the position ids, then each token's recorded experts per decoder layer
        (``k`` each, layer-major, -1 = route natively), which the MoE layers use instead of
        their own top-k (:func:`routes_into_positions`)."""
        x, _ = self._layers(input_ids, position_ids, key_mask, False)
        return x

    def _layers(self, input_ids, position_ids, key_mask, want_routes: bool,
                want_aux: bool = False):
        return self.layers_from(self.model.embed_tokens(input_ids), position_ids, key_mask,
                                want_routes, want_aux)

    def layers_from(self, x, position_ids, key_mask, want_routes: bool = False,
                    want_aux: bool = False):
        """The decoder layers and the final norm from the input embeddings ``x`` (B, S, H)
        (:meth:`_layers` after the lookup): a gradient w.r.t. ``x`` is the embedding rows'
        gradient, without the table's dense (V, H) one."""
        routes = None
        if len(position_ids.shape) == 3:            # replay: positions, then the routes
            routes = position_ids[:, :, 1:]
            position_ids = position_ids[:, :, 0]
        cos, sin = self.rope_tables(position_ids)
        bias = self.causal_mask(key_mask)
        k = self.spec.num_experts_per_tok
        used = ()
        probs = ()
        chosen = ()
        i = 0
        for layer in self.model.layers:
            if layer.is_moe and (routes is not None or want_routes or want_aux):
                route = None
                if routes is not None:
                    route = routes[:, :, i * k:(i + 1) * k].reshape(-1, k)
                out = layer.routed(x, cos, sin, bias, route, want_aux)
                x = out[0]
                used = used + (out[1],)
                if want_aux:
                    probs = probs + (out[2],)
                    chosen = chosen + (out[3],)
            else:
                x = layer(x, cos, sin, bias)
            i = i + 1
        if want_aux:
            return self.model.norm(x), router_sums(probs, chosen, key_mask)
        return self.model.norm(x), used

    def response_logits_and_router(self, input_ids, position_ids, key_mask, response_len: int):
        """:meth:`response_logits` and this forward's router-probability sums (E,) over MoE
        layers and real tokens (:func:`router_sums`), the differentiable part of the MoE
        load-balancing loss."""
        S = input_ids.shape[1]
        h, sums = self._layers(input_ids, position_ids, key_mask, False, True)
        return self.head(h[:, S - response_len - 1:S - 1]), sums[1]

    def router_stats(self, input_ids, position_ids, key_mask):
        """(2, E) float32: the native top-k counts and the router-probability sums over MoE
        layers and real tokens (:func:`router_sums`; the load-balancing loss's pre-pass)."""
        _, sums = self._layers(input_ids, position_ids, key_mask, False, True)
        return ops.stack(sums, 0)

    def route_indices(self, input_ids, position_ids, key_mask):
        """The experts each MoE layer routes every token to: (MoE layers, B*S, k) int32."""
        _, used = self._layers(input_ids, position_ids, key_mask, True)
        return ops.stack(used, 0)

    # --- entry points -----------------------------------------------------------------------
    def construct(self, input_ids, position_ids, key_mask):
        return self.head(self.hidden(input_ids, position_ids, key_mask))

    def response_logits(self, input_ids, position_ids, key_mask, response_len: int):
        S = input_ids.shape[1]
        h = self.hidden(input_ids, position_ids, key_mask)
        return self.head(h[:, S - response_len - 1:S - 1])

    def forward_with_cache(self, input_ids, position_ids, key_mask, q_slots, write,
                           k_caches, v_caches, want_routes: bool = False):
        """Run S new tokens against a static KV cache.

        input_ids/position_ids (B, S); key_mask (B, Smax) = real tokens in the cache after the
        write; q_slots (S,) the cache slot of each new token; write (1, 1, Smax, S) the 0/1
        placement matrix; k_caches/v_caches tuples (per layer) of (B, Nk, Smax, D).
        Returns (last-position float32 logits (B, V), new k_caches, new v_caches), and with
        ``want_routes`` also the experts each MoE layer chose, (MoE layers, B*S, k) int32.
        """
        cos, sin = self.rope_tables(position_ids)
        bias = self.attn_bias(q_slots, key_mask)
        x = self.model.embed_tokens(input_ids)
        new_k = ()
        new_v = ()
        used = ()
        i = 0
        for layer in self.model.layers:
            if want_routes and layer.is_moe:
                x, kc, vc = layer.attend_with_cache(x, cos, sin, bias, k_caches[i], v_caches[i],
                                                    write)
                y, idx = layer.mlp.routed(layer.post_attention_layernorm(x))
                x = x + y
                used = used + (idx,)
            else:
                x, kc, vc = layer.step_with_cache(x, cos, sin, bias, k_caches[i], v_caches[i],
                                                  write)
            new_k = new_k + (kc,)
            new_v = new_v + (vc,)
            i = i + 1
        if x.shape[1] > 1:                   # prefill; a decode step has one position
            x = x[:, -1:]
        h = self.model.norm(x)
        # reshape, not [:, 0]: a StridedSlice here cost ~0.7 ms per decode step on CPU
        if want_routes:
            return self.head(h).reshape(x.shape[0], -1), new_k, new_v, ops.stack(used, 0)
        return self.head(h).reshape(x.shape[0], -1), new_k, new_v
