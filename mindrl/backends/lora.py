"""LoRA for both backends, the framework-free part: which linear layers get an adapter, the
adapter's initial values, the adapter file format, and merging.

For a target linear layer y = x W^T + b (W of shape (out, in)), LoRA adds a rank-r update:

    y = x W^T + b + s * dropout(x) A^T B^T,     s = alpha / r,
    A (r, in) ~ U(-1/sqrt(in), 1/sqrt(in)),    B (out, r) = 0,

so training starts from the base model. The uniform bound is kaiming-uniform with a = sqrt(5)
(gain sqrt(2 / (1 + a^2)) times sqrt(3 / fan_in)), as peft initialises ``lora_A``. Both
backends draw A from one NumPy generator seeded with ``train.seed`` (:func:`init_adapter`),
so a torch run and a MindSpore run with the same seed start from the same adapter; peft's own
draw uses torch's generator and would differ between the two.

Merged weights (what a rollout engine without LoRA, or ``mindrl export``, receives):
W' = W + s * B A, exactly the map above at dropout 0.

Files: the adapter of a checkpoint is written in peft's format -- ``adapter_config.json`` and
``adapter_model.safetensors`` whose tensors are named
``base_model.model.<module path>.lora_A.weight`` / ``lora_B.weight`` -- by both backends, so
either loads the other's adapter, and ``peft.PeftModel.from_pretrained`` loads it too.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Dict, Iterable, Iterator, Optional, Tuple

import numpy as np

PEFT_PREFIX = "base_model.model."
ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = "adapter_model.safetensors"
_PARENT = {"q_proj": "self_attn", "k_proj": "self_attn", "v_proj": "self_attn",
           "o_proj": "self_attn", "gate_proj": "mlp", "up_proj": "mlp", "down_proj": "mlp"}


def scale(lora_cfg) -> float:
    """s = alpha / r (peft's ``scaling`` without rsLoRA)."""
    return float(lora_cfg.alpha) / float(lora_cfg.rank)


def target_shapes(hf_config: dict, targets: Iterable[str]) -> Dict[str, Tuple[int, int]]:
    """{module path: (in, out)} of every target linear layer of a Qwen2-architecture model,
    in layer order (``model.layers.0.self_attn.q_proj`` ...). A mixture-of-experts layer has no
    dense MLP: its experts are not adapted (as peft leaves transformers' fused experts), only
    its attention."""
    from mindrl.models.moe import moe_layer_flags

    H = hf_config["hidden_size"]
    nq = hf_config["num_attention_heads"]
    nk = hf_config.get("num_key_value_heads") or nq
    D = hf_config.get("head_dim") or H // nq
    inter = hf_config["intermediate_size"]
    dims = {"q_proj": (H, nq * D), "k_proj": (H, nk * D), "v_proj": (H, nk * D),
            "o_proj": (nq * D, H), "gate_proj": (H, inter), "up_proj": (H, inter),
            "down_proj": (inter, H)}
    out = {}
    moe = moe_layer_flags(hf_config)
    for i in range(hf_config["num_hidden_layers"]):
        for name in _PARENT:                     # a fixed order, whatever the config's order
            if name in targets and not (moe[i] and _PARENT[name] == "mlp"):
                out[f"model.layers.{i}.{_PARENT[name]}.{name}"] = dims[name]
    return out


def init_adapter(shapes: Dict[str, Tuple[int, int]], rank: int,
                 seed: int) -> Dict[str, np.ndarray]:
    """{``<path>.lora_A.weight``: (r, in) uniform in +-1/sqrt(in), ``<path>.lora_B.weight``:
    (out, r) zeros}, float32, A drawn in the order of ``shapes`` from one seeded generator."""
    rng = np.random.default_rng(seed)
    out = {}
    for path, (n_in, n_out) in shapes.items():
        bound = 1.0 / math.sqrt(n_in)
        out[f"{path}.lora_A.weight"] = rng.uniform(-bound, bound, (rank, n_in)).astype(np.float32)
        out[f"{path}.lora_B.weight"] = np.zeros((n_out, rank), np.float32)
    return out


def merge(named_base: Iterable[Tuple[str, np.ndarray]], adapter: Dict[str, np.ndarray],
          s: float) -> Iterator[Tuple[str, np.ndarray]]:
    """(name, array) of the base weights with W + s * B A at every adapted ``<path>.weight``
    (float32 arithmetic; the array keeps the base's dtype)."""
    for name, w in named_base:
        path = name[:-len(".weight")] if name.endswith(".weight") else None
        a = adapter.get(f"{path}.lora_A.weight") if path else None
        if a is None:
            yield name, w
            continue
        b = adapter[f"{path}.lora_B.weight"]
        merged = np.asarray(w, np.float32) + s * (np.asarray(b, np.float32) @
                                                  np.asarray(a, np.float32))
        yield name, merged.astype(np.asarray(w).dtype)


def adapter_config(lora_cfg, base_model: str) -> dict:
    """peft's ``adapter_config.json`` fields for this adapter."""
    return {"peft_type": "LORA", "task_type": "CAUSAL_LM", "r": int(lora_cfg.rank),
            "lora_alpha": float(lora_cfg.alpha), "lora_dropout": float(lora_cfg.dropout),
            "target_modules": sorted(lora_cfg.target_modules), "bias": "none",
            "base_model_name_or_path": str(base_model), "fan_in_fan_out": False,
            "init_lora_weights": True, "use_rslora": False, "use_dora": False,
            "modules_to_save": None, "inference_mode": True}


def is_adapter_dir(directory) -> bool:
    return (Path(directory) / ADAPTER_CONFIG).is_file()


def peft_name(name: str) -> str:
    """``model.layers.0...lora_A.weight`` -> peft's file name of the same tensor."""
    return PEFT_PREFIX + name


def plain_name(name: str) -> str:
    """peft's file name -> ``model.layers.0...lora_A.weight``."""
    return name[len(PEFT_PREFIX):] if name.startswith(PEFT_PREFIX) else name


def read_adapter_config(directory) -> dict:
    from mindrl.errors import UserError

    path = Path(directory) / ADAPTER_CONFIG
    try:
        cfg = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise UserError(f"{path}: not a readable adapter config ({e})") from None
    for key in ("r", "lora_alpha", "target_modules"):
        if key not in cfg:
            raise UserError(f"{path}: missing '{key}' (not a LoRA adapter written by peft or "
                            "mindrl)")
    return cfg


def check_adapter_matches(directory, lora_cfg) -> None:
    """Refuse an adapter whose rank, alpha or targets differ from this run's model.lora."""
    from mindrl.errors import UserError

    cfg = read_adapter_config(directory)
    want = adapter_config(lora_cfg, "")
    got_targets = sorted(cfg["target_modules"]) if isinstance(cfg["target_modules"], list) \
        else cfg["target_modules"]
    for key, got in (("r", cfg["r"]), ("lora_alpha", float(cfg["lora_alpha"])),
                     ("target_modules", got_targets)):
        if got != want[key]:
            raise UserError(f"{Path(directory) / ADAPTER_CONFIG}: {key}={got!r} but this run "
                            f"has model.lora {key}={want[key]!r}")


def resolve_model_dir(path) -> Path:
    """A run directory (its newest complete checkpoint), a checkpoint directory, or a model
    directory -> the directory holding the weights or the adapter."""
    from mindrl.errors import UserError
    from mindrl.paths import CKPT_ROOT, complete_steps

    p = Path(path)
    if not p.exists():
        raise UserError(f"{p}: no such run, checkpoint or model directory")
    if (p / CKPT_ROOT).is_dir():
        found = complete_steps(p / CKPT_ROOT)
        if not found:
            raise UserError(f"{p}/{CKPT_ROOT} holds no complete checkpoint")
        p = found[-1]
    if (p / "model").is_dir():
        p = p / "model"
    if not is_adapter_dir(p) and not (p / "config.json").is_file():
        raise UserError(f"{p}: neither a LoRA adapter ({ADAPTER_CONFIG}) nor a model "
                        "(config.json)")
    return p


def export_merged(src, out, base_model: Optional[str] = None) -> Path:
    """Merge the adapter of ``src`` (run, checkpoint or adapter directory) into its base model
    and write a plain Hugging Face directory to ``out`` (weights in the base's dtype, config,
    generation config, tokenizer). The base model is ``base_model`` or the adapter config's
    ``base_model_name_or_path`` (mindrl_meta.json's ``base_model`` as a fallback). Needs
    transformers and peft (the torch extra). Returns ``out``."""
    import shutil

    from mindrl.errors import UserError

    model_dir = resolve_model_dir(src)
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise UserError(f"--out {out} exists and is not empty")
    if not is_adapter_dir(model_dir):
        shutil.copytree(model_dir, out, dirs_exist_ok=True)   # already plain: copy it
        return out
    cfg = read_adapter_config(model_dir)
    base = base_model or cfg.get("base_model_name_or_path") or ""
    meta = model_dir / "mindrl_meta.json"
    if not (Path(base) / "config.json").is_file() and meta.is_file():
        base = json.loads(meta.read_text()).get("base_model", base)
    if not (Path(base) / "config.json").is_file():
        raise UserError(f"{model_dir}: the base model '{base}' is not a local model directory; "
                        "pass it with --base")
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(base, local_files_only=True)
    dtype = model.dtype
    merged = PeftModel.from_pretrained(model.float(), str(model_dir)).merge_and_unload()
    merged = merged.to(dtype)
    with torch.no_grad():
        merged.save_pretrained(str(out), safe_serialization=True)
    tok_dir = model_dir if any(model_dir.glob("tokenizer*")) else Path(base)
    AutoTokenizer.from_pretrained(str(tok_dir), local_files_only=True).save_pretrained(str(out))
    if meta.is_file():
        shutil.copy(meta, out / "mindrl_meta.json")
    return out
