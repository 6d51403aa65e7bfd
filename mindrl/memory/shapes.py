"""Decoder shapes from a Hugging Face ``config.json``, and the parameter counts they imply.

Pure arithmetic, no framework. :func:`shape_from_config` reads the fields transformers and vLLM
read (Qwen2, Qwen2.5, Qwen3, Qwen3-MoE, Qwen2-MoE, Llama); :data:`KNOWN_MODELS` holds the
published ``config.json`` shapes of the models the shipped recipes name, so a plan can be made
for ``/models/Qwen2.5-7B-Instruct`` on a machine that has no copy of it.

Parameters of one decoder layer (h hidden, q = heads x head_dim, k = kv_heads x head_dim,
i intermediate)::

    attention  h*q + 2*h*k + q*h  (+ q + 2k biases: Qwen2)  (+ 2 head_dim q/k norms: Qwen3)
    MLP        3*h*i  (SwiGLU: gate, up, down)
    MoE MLP    E * 3*h*i_moe + h*E (router)  (+ a shared expert: Qwen2-MoE)
    norms      2*h

plus the embedding V*h, the final norm h, and the LM head V*h unless the embeddings are tied.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Mapping, Optional

from mindrl.errors import ConfigError


@dataclass(frozen=True)
class ModelShape:
    """The sizes of a decoder-only LM that memory depends on."""

    name: str
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    tied: bool
    attention_bias: bool = False      # q/k/v biases (Qwen2)
    qk_norm: bool = False             # per-head RMSNorm of q and k (Qwen3)
    experts: int = 0                  # routed experts per MoE layer (0 = dense)
    experts_per_token: int = 0
    moe_intermediate: int = 0
    moe_layers: int = 0               # decoder layers whose MLP is a MoE block
    shared_expert_intermediate: int = 0   # Qwen2-MoE's shared expert (0 = none)
    max_positions: int = 0

    # ------------------------------------------------------------------ parameter counts
    @property
    def q_dim(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_dim

    def attention_params(self) -> int:
        h, q, k = self.hidden, self.q_dim, self.kv_dim
        n = h * q + 2 * h * k + q * h
        if self.attention_bias:
            n += q + 2 * k
        if self.qk_norm:
            n += 2 * self.head_dim
        return n

    def dense_mlp_params(self) -> int:
        return 3 * self.hidden * self.intermediate

    def moe_mlp_params(self) -> int:
        h = self.hidden
        n = self.experts * 3 * h * self.moe_intermediate + h * self.experts
        if self.shared_expert_intermediate:
            n += 3 * h * self.shared_expert_intermediate + h   # + its sigmoid gate
        return n

    def layer_params(self, moe: bool = False) -> int:
        mlp = self.moe_mlp_params() if moe else self.dense_mlp_params()
        return self.attention_params() + mlp + 2 * self.hidden

    def decoder_params(self) -> int:
        """All decoder layers."""
        dense = self.layers - self.moe_layers
        return dense * self.layer_params(False) + self.moe_layers * self.layer_params(True)

    def embedding_params(self) -> int:
        return self.vocab * self.hidden

    def head_params(self) -> int:
        """The LM head's own parameters (0 when tied to the embedding)."""
        return 0 if self.tied else self.vocab * self.hidden

    def params(self) -> int:
        return (self.embedding_params() + self.decoder_params() + self.hidden
                + self.head_params())

    def largest_tensor(self) -> int:
        """Elements of the largest single parameter tensor (the embedding for these models)."""
        h = self.hidden
        cands = [self.embedding_params(), h * self.q_dim, h * self.intermediate]
        if self.experts:
            cands.append(h * self.moe_intermediate)
        return max(cands)

    def kv_bytes_per_token(self, dtype_bytes: int) -> int:
        """KV cache of one token over all layers (keys and values)."""
        return 2 * self.layers * self.kv_dim * dtype_bytes

    def lora_params(self, rank: int, targets) -> int:
        """Trainable parameters of LoRA adapters (A: r x in, B: out x r) on ``targets``."""
        h, q, k, i = self.hidden, self.q_dim, self.kv_dim, self.intermediate
        dims = {"q_proj": (h, q), "k_proj": (h, k), "v_proj": (h, k), "o_proj": (q, h),
                "gate_proj": (h, i), "up_proj": (h, i), "down_proj": (i, h)}
        per_layer = sum(rank * (a + b) for t, (a, b) in dims.items() if t in targets)
        return per_layer * self.layers


def shape_from_config(cfg: Mapping, name: str = "") -> ModelShape:
    """A :class:`ModelShape` from a ``config.json`` mapping; ConfigError names a field that is
    missing or not a number."""
    try:
        return _shape_from_config(cfg, name)
    except KeyError as e:
        raise ConfigError(f"the config.json of {name or 'the model'} has no {e.args[0]!r}: not "
                          "a decoder the memory plan knows; set plan.model_config to one (or a "
                          "known name such as Qwen2.5-7B)") from None
    except (TypeError, ValueError) as e:
        raise ConfigError(f"the config.json of {name or 'the model'}: {e}") from None


def _shape_from_config(cfg: Mapping, name: str) -> ModelShape:
    model_type = str(cfg.get("model_type", ""))
    text = cfg.get("text_config")
    if isinstance(text, Mapping) and "hidden_size" not in cfg:   # multimodal wrappers
        cfg = text
    h = int(cfg["hidden_size"])
    heads = int(cfg["num_attention_heads"])
    kv = int(cfg.get("num_key_value_heads") or heads)
    head_dim = int(cfg.get("head_dim") or h // heads)
    layers = int(cfg["num_hidden_layers"])
    experts = int(cfg.get("num_experts") or cfg.get("num_local_experts") or 0)
    moe_layers = 0
    if experts:
        dense = set(cfg.get("mlp_only_layers") or [])
        step = int(cfg.get("decoder_sparse_step") or 1)
        moe_layers = sum(1 for i in range(layers) if i not in dense and (i + 1) % step == 0)
    family = model_type or ""
    bias = cfg.get("attention_bias")
    if bias is None:
        bias = family.startswith("qwen2")          # Qwen2 / Qwen2.5 / Qwen2-MoE: q/k/v biases
    return ModelShape(
        name=name or str(cfg.get("_name_or_path", "") or model_type),
        hidden=h, layers=layers, heads=heads, kv_heads=kv, head_dim=head_dim,
        intermediate=int(cfg.get("intermediate_size") or 4 * h),
        vocab=int(cfg["vocab_size"]), tied=bool(cfg.get("tie_word_embeddings", False)),
        attention_bias=bool(bias), qk_norm=family.startswith("qwen3"),
        experts=experts, experts_per_token=int(cfg.get("num_experts_per_tok") or 0),
        moe_intermediate=int(cfg.get("moe_intermediate_size") or 0), moe_layers=moe_layers,
        shared_expert_intermediate=int(cfg.get("shared_expert_intermediate_size") or 0),
        max_positions=int(cfg.get("max_position_embeddings") or 0))


def _qwen2(h, layers, heads, kv, i, vocab, tied, max_pos=32768) -> Dict:
    return dict(model_type="qwen2", hidden_size=h, num_hidden_layers=layers,
                num_attention_heads=heads, num_key_value_heads=kv, intermediate_size=i,
                vocab_size=vocab, tie_word_embeddings=tied, max_position_embeddings=max_pos)


def _qwen3(h, layers, heads, kv, i, vocab, tied, head_dim=128, **moe) -> Dict:
    out = dict(model_type="qwen3_moe" if moe else "qwen3", hidden_size=h,
               num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv,
               head_dim=head_dim, intermediate_size=i, vocab_size=vocab,
               tie_word_embeddings=tied, max_position_embeddings=40960, attention_bias=False)
    out.update(moe)
    return out


# The published config.json shapes (hidden, layers, heads, kv heads, intermediate, vocab, tied
# embeddings) of the models the shipped recipes and the docs name, keyed by the directory name
# a recipe's model.path ends with.
_Q25_05 = _qwen2(896, 24, 14, 2, 4864, 151936, True)
_Q25_15 = _qwen2(1536, 28, 12, 2, 8960, 151936, True)
_Q25_3 = _qwen2(2048, 36, 16, 2, 11008, 151936, True)
_Q25_7 = _qwen2(3584, 28, 28, 4, 18944, 152064, False)
_Q25_14 = _qwen2(5120, 48, 40, 8, 13824, 152064, False)
_Q25_32 = _qwen2(5120, 64, 40, 8, 27648, 152064, False)
_MATH_15 = _qwen2(1536, 28, 12, 2, 8960, 151936, True, max_pos=4096)
_MATH_7 = _qwen2(3584, 28, 28, 4, 18944, 152064, False, max_pos=4096)
_R1_15 = _qwen2(1536, 28, 12, 2, 8960, 151936, False, max_pos=131072)
_R1_7 = _qwen2(3584, 28, 28, 4, 18944, 152064, False, max_pos=131072)
_R1_32 = _qwen2(5120, 64, 40, 8, 27648, 152064, False, max_pos=131072)
KNOWN_MODELS: Dict[str, Dict] = {
    "Qwen2.5-0.5B": _Q25_05, "Qwen2.5-0.5B-Instruct": _Q25_05,
    "Qwen2.5-1.5B": _Q25_15, "Qwen2.5-1.5B-Instruct": _Q25_15,
    "Qwen2.5-3B": _Q25_3, "Qwen2.5-3B-Instruct": _Q25_3,
    "Qwen2.5-7B": _Q25_7, "Qwen2.5-7B-Instruct": _Q25_7,
    "Qwen2.5-7B-Instruct-1M": dict(_Q25_7, max_position_embeddings=1010000),
    "Qwen2.5-14B": _Q25_14, "Qwen2.5-14B-Instruct": _Q25_14,
    "Qwen2.5-32B": _Q25_32, "Qwen2.5-32B-Instruct": _Q25_32,
    "Qwen2.5-Math-1.5B": _MATH_15, "Qwen2.5-Math-1.5B-Instruct": _MATH_15,
    "Qwen2.5-Math-7B": _MATH_7, "Qwen2.5-Math-7B-Instruct": _MATH_7,
    "Qwen2.5-Math-7B-RoPE-300k": dict(_MATH_7, max_position_embeddings=32768),
    "DeepSeek-R1-Distill-Qwen-1.5B": _R1_15,
    "DeepSeek-R1-Distill-Qwen-7B": _R1_7,
    "DeepSeek-R1-Distill-Qwen-32B": _R1_32,
    "R1-Distill-Qwen-32B": _R1_32,
    "QwQ-32B": dict(_Q25_32, max_position_embeddings=40960),
    "Skywork-OR1-7B": _R1_7, "Skywork-OR1-32B": _R1_32,
    "OpenThinker3-7B": _Q25_7,
    "Qwen3-0.6B": _qwen3(1024, 28, 16, 8, 3072, 151936, True),
    "Qwen3-1.7B": _qwen3(2048, 28, 16, 8, 6144, 151936, True),
    "Qwen3-4B": _qwen3(2560, 36, 32, 8, 9728, 151936, True),
    "Qwen3-8B": _qwen3(4096, 36, 32, 8, 12288, 151936, False),
    "Qwen3-30B-A3B": _qwen3(2048, 48, 32, 4, 6144, 151936, False, num_experts=128,
                            num_experts_per_tok=8, moe_intermediate_size=768,
                            decoder_sparse_step=1, mlp_only_layers=[]),
    "Llama-3.1-8B": dict(model_type="llama", hidden_size=4096, num_hidden_layers=32,
                         num_attention_heads=32, num_key_value_heads=8,
                         intermediate_size=14336, vocab_size=128256, tie_word_embeddings=False,
                         attention_bias=False, max_position_embeddings=131072),
}
KNOWN_MODELS["Qwen3-30B-A3B-Base"] = KNOWN_MODELS["Qwen3-30B-A3B"]
KNOWN_MODELS["Llama-3.1-8B-Instruct"] = KNOWN_MODELS["Llama-3.1-8B"]


def builtin_shape(name: str) -> ModelShape:
    """The shape of ``builtin:NAME`` (:data:`mindrl.models.tiny.BUILTINS`), without building
    it."""
    from mindrl.models.tiny import BUILTINS, FAMILIES

    kw = BUILTINS[name]
    family = kw.get("family", "qwen2")
    fields = dict(FAMILIES[family][2])
    h = kw["hidden"]
    cfg = dict(fields, model_type=family, hidden_size=h, num_hidden_layers=kw["layers"],
               num_attention_heads=kw["heads"], num_key_value_heads=kw["kv_heads"],
               head_dim=h // kw["heads"], intermediate_size=4 * h, vocab_size=kw["vocab"],
               tie_word_embeddings=kw.get("tie_word_embeddings", True))
    return shape_from_config(cfg, "builtin:" + name)


def read_config_json(path: Path) -> Dict:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ConfigError(f"{path}: cannot read the model's config.json: {e}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: config.json is not a JSON object")
    return data


def known_shape(path: str) -> Optional[ModelShape]:
    """The shape of a model named like one in :data:`KNOWN_MODELS` (by the last path part,
    ``Qwen/Qwen2.5-7B`` and ``/models/Qwen2.5-7B`` alike), else None."""
    base = Path(str(path).rstrip("/")).name
    cfg = KNOWN_MODELS.get(base)
    if cfg is None:
        lower = {k.lower(): v for k, v in KNOWN_MODELS.items()}
        cfg = lower.get(base.lower())
    return None if cfg is None else shape_from_config(cfg, base)


def shape_from_path(path: str) -> Optional[ModelShape]:
    """The shape of the model at ``path``: a built-in name, a directory holding config.json (a
    model, a checkpoint step folder or a run folder), a config.json file, or a known model
    name (:data:`KNOWN_MODELS`); None when none of those."""
    from mindrl.models.tiny import BUILTIN_PREFIX, BUILTINS

    if path.startswith(BUILTIN_PREFIX):
        name = path[len(BUILTIN_PREFIX):]
        if name not in BUILTINS:
            raise ConfigError(f"unknown built-in model '{path}'; valid: "
                              + ", ".join(BUILTIN_PREFIX + n for n in sorted(BUILTINS)))
        return builtin_shape(name)
    p = Path(path).expanduser()
    if p.is_file() and p.suffix == ".json":
        return shape_from_config(read_config_json(p), p.parent.name)
    if p.is_dir():
        from mindrl.paths import locate_model_dir

        cfg_file = Path(locate_model_dir(str(p))) / "config.json"
        if cfg_file.is_file():
            return shape_from_config(read_config_json(cfg_file), p.name)
    return known_shape(path)
