"""Which Hugging Face decoder families the MindSpore model implements, read from ``config.json``.

One table, :data:`FAMILIES`: ``model_type`` -> the switches that set one family apart in
``model.py``'s shared decoder. Every family here is a pre-norm RMSNorm decoder with grouped-query
attention, rotate-half RoPE and a SwiGLU MLP; they differ in

    family   q/k/v bias          o bias              MLP bias    q/k RMSNorm per head
    qwen2    yes                 no                  no          no
    qwen3    attention_bias      attention_bias      no          yes (q_norm, k_norm over D)
    llama    attention_bias      attention_bias      mlp_bias    no
    qwen3_moe  as qwen3, with sparse MoE MLP blocks (top-k router, no shared expert)
    qwen2_moe  as qwen2 (q/k/v bias from ``qkv_bias``), MoE blocks with a shared expert

and all take ``head_dim`` from the config when given (else hidden / heads) and tied or untied
embeddings. The MoE families' layers (which ones, how many experts: :mod:`mindrl.models.moe`)
replace the dense MLP by ``model.MoE``; ``model.py`` picks Cells from the spec.

RoPE frequencies (:func:`rope_frequencies`) follow transformers' ``modeling_rope_utils``:
``default``, ``linear``, ``llama3``, ``yarn`` (with its attention factor on cos/sin) and
``dynamic``. Dynamic NTK scaling changes the frequencies only for sequences longer than
``max_position_embeddings``; below that it equals the default RoPE, which is what this model
computes; a longer sequence is refused (the model's ``rope_tables``, the sampler) rather than
scaled.
"""

from __future__ import annotations

import math
from typing import Dict, Optional, Tuple

import numpy as np

from mindrl.errors import UserError

# model_type -> fixed switches; None = read from the config key named in _FROM_CONFIG;
# (key, default) = read from that config key.
FAMILIES: Dict[str, dict] = {
    "qwen2": dict(qkv_bias=True, o_bias=False, mlp_bias=False, qk_norm=False),
    "qwen3": dict(qkv_bias=None, o_bias=None, mlp_bias=False, qk_norm=True),
    "llama": dict(qkv_bias=None, o_bias=None, mlp_bias=None, qk_norm=False),
    "qwen3_moe": dict(qkv_bias=None, o_bias=None, mlp_bias=False, qk_norm=True),
    "qwen2_moe": dict(qkv_bias=("qkv_bias", True), o_bias=False, mlp_bias=False,
                      qk_norm=False),
}
_FROM_CONFIG = {"qkv_bias": "attention_bias", "o_bias": "attention_bias", "mlp_bias": "mlp_bias"}
# architectures[0] -> model_type, for configs that lack model_type
_ARCHITECTURES = {"Qwen2ForCausalLM": "qwen2", "Qwen3ForCausalLM": "qwen3",
                  "LlamaForCausalLM": "llama", "Qwen3MoeForCausalLM": "qwen3_moe",
                  "Qwen2MoeForCausalLM": "qwen2_moe"}
ROPE_TYPES = ("default", "linear", "dynamic", "yarn", "llama3")


class UnsupportedArchitecture(UserError, ValueError):
    """A checkpoint this backend cannot run (``mindrl`` prints it as one line, exit 2)."""


def model_type_of(cfg: dict) -> str:
    mt = cfg.get("model_type")
    if not mt:
        archs = cfg.get("architectures") or []
        mt = _ARCHITECTURES.get(archs[0], archs[0]) if archs else "<missing>"
    return str(mt)


def family_switches(cfg: dict) -> dict:
    """The family's switches for ``cfg``; an unknown model_type raises one line naming it."""
    mt = model_type_of(cfg)
    if mt not in FAMILIES:
        raise UnsupportedArchitecture(
            f"model.path: config.json model_type '{mt}' (architectures "
            f"{cfg.get('architectures')}) is not implemented by backend=mindspore; supported "
            f"model_type: {', '.join(sorted(FAMILIES))} (backend=torch runs any transformers "
            "causal LM)")
    out = {"model_type": mt}
    for key, fixed in FAMILIES[mt].items():
        if fixed is None:
            out[key] = bool(cfg.get(_FROM_CONFIG[key], False))
        elif isinstance(fixed, tuple):                  # (config key, its default)
            out[key] = bool(cfg.get(fixed[0], fixed[1]))
        else:
            out[key] = fixed
    return out


def rope_parameters(cfg: dict) -> dict:
    """The RoPE dict as transformers 5 standardises it: ``rope_parameters`` (5.x) over
    ``rope_scaling`` (4.x), ``type`` read as ``rope_type``, ``rope_theta`` filled in."""
    p = dict(cfg.get("rope_scaling") or {})
    p.update(cfg.get("rope_parameters") or {})
    p.setdefault("rope_type", p.get("type") or "default")
    if p.get("rope_theta") is None:
        p["rope_theta"] = cfg.get("rope_theta") or 10000.0
    if p["rope_type"] in ("llama3", "yarn"):
        if cfg.get("original_max_position_embeddings") is not None:
            p["original_max_position_embeddings"] = cfg["original_max_position_embeddings"]
        else:
            p.setdefault("original_max_position_embeddings", cfg.get("max_position_embeddings"))
    return p


def rope_frequencies(cfg: dict, head_dim: int) -> Tuple[np.ndarray, float, Optional[int]]:
    """(inv_freq (head_dim/2,) float32, attention scaling of cos/sin, the longest sequence the
    frequencies are exact for or None) -- transformers' ``ROPE_INIT_FUNCTIONS``, in float32."""
    p = rope_parameters(cfg)
    kind = p["rope_type"]
    if kind not in ROPE_TYPES:
        raise UnsupportedArchitecture(
            f"model.path: config.json rope_type '{kind}' is not implemented by "
            f"backend=mindspore; supported: {', '.join(ROPE_TYPES)}")
    if float(p.get("partial_rotary_factor", 1.0) or 1.0) != 1.0:
        raise UnsupportedArchitecture("model.path: config.json partial_rotary_factor != 1 is "
                                      "not implemented by backend=mindspore")
    base = float(p["rope_theta"])
    dim = head_dim
    exponents = np.arange(0, dim, 2, dtype=np.int64).astype(np.float32) / np.float32(dim)
    inv_freq = (np.float32(1.0) / (np.float32(base) ** exponents)).astype(np.float32)
    scaling, limit = 1.0, None
    if kind == "linear":
        inv_freq = inv_freq / np.float32(p["factor"])
    elif kind == "dynamic":
        # equal to the default below max_position_embeddings (transformers' init frequencies)
        limit = int(cfg["max_position_embeddings"])
    elif kind == "llama3":
        factor, lo, hi = (float(p["factor"]), float(p["low_freq_factor"]),
                          float(p["high_freq_factor"]))
        old = float(p["original_max_position_embeddings"])
        low_wavelen, high_wavelen = old / lo, old / hi
        wavelen = np.float32(2 * math.pi) / inv_freq
        scaled = np.where(wavelen > low_wavelen, inv_freq / np.float32(factor), inv_freq)
        smooth = (np.float32(old) / wavelen - np.float32(lo)) / np.float32(hi - lo)
        smoothed = (1 - smooth) * scaled / np.float32(factor) + smooth * scaled
        medium = ~(wavelen < high_wavelen) & ~(wavelen > low_wavelen)
        inv_freq = np.where(medium, smoothed, scaled).astype(np.float32)
    elif kind == "yarn":
        inv_freq, scaling = _yarn(p, cfg, dim, base)
    return inv_freq.astype(np.float32), float(scaling), limit


def _yarn(p: dict, cfg: dict, dim: int, base: float) -> Tuple[np.ndarray, float]:
    factor = p.get("factor")
    original = p["original_max_position_embeddings"]
    if factor is None:
        factor = cfg["max_position_embeddings"] / original
    factor = float(factor)

    def mscale_of(scale, m=1.0):
        return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

    attention = p.get("attention_factor")
    if attention is None:
        m, m_all = p.get("mscale"), p.get("mscale_all_dim")
        attention = (mscale_of(factor, m) / mscale_of(factor, m_all) if m and m_all
                     else mscale_of(factor))
    beta_fast = p.get("beta_fast") or 32
    beta_slow = p.get("beta_slow") or 1

    def correction_dim(rotations):
        return (dim * math.log(original / (rotations * 2 * math.pi))) / (2 * math.log(base))

    low, high = correction_dim(beta_fast), correction_dim(beta_slow)
    if p.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001
    pos_freqs = np.float32(base) ** (np.arange(0, dim, 2).astype(np.float32) / np.float32(dim))
    extrapolation = np.float32(1.0) / pos_freqs
    interpolation = np.float32(1.0) / (np.float32(factor) * pos_freqs)
    ramp = np.clip((np.arange(dim // 2, dtype=np.float32) - np.float32(low))
                   / np.float32(high - low), 0, 1)
    extra_factor = 1 - ramp
    inv_freq = interpolation * (1 - extra_factor) + extrapolation * extra_factor
    return inv_freq.astype(np.float32), float(attention)
