"""LoRA on the torch backend, through ``peft``: the policy becomes a ``PeftModel`` whose base
weights are frozen, so the optimizer (built from parameters that require grad) holds the
adapters alone; the reference policy is the same module under ``disable_adapter()``; rollout
engines with their own weights (vLLM) receive merged weights W + s * B A under the base
model's names; checkpoints hold the adapter alone (peft's format). The math and the shared
initialisation are in :mod:`mindrl.backends.lora`."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Iterator, Tuple

import torch

from mindrl.backends import lora as L

ADAPTER = "default"                    # peft's adapter name


def add_adapters(model, lora_cfg, seed: int):
    """Wrap a transformers causal LM in a peft ``PeftModel`` with LoRA on
    ``lora_cfg.target_modules``; A from :func:`mindrl.backends.lora.init_adapter` (seeded),
    B = 0. Only the adapters require grad."""
    from peft import LoraConfig, get_peft_model

    pcfg = LoraConfig(r=lora_cfg.rank, lora_alpha=lora_cfg.alpha,
                      lora_dropout=lora_cfg.dropout, target_modules=list(lora_cfg.target_modules),
                      bias="none", task_type="CAUSAL_LM")
    peft_model = get_peft_model(model, pcfg)
    init = L.init_adapter(L.target_shapes(model.config.to_dict(), lora_cfg.target_modules),
                          lora_cfg.rank, seed)
    set_adapter_arrays(peft_model, init)
    return peft_model


def _lora_modules(peft_model):
    """(module path, peft LoRA layer) of every adapted linear layer, by HF path."""
    from peft.tuners.lora import LoraLayer

    base = peft_model.get_base_model()
    for path, mod in base.named_modules():
        if isinstance(mod, LoraLayer) and ADAPTER in mod.lora_A:
            yield path, mod


def adapter_tensors(peft_model) -> Iterator[Tuple[str, torch.Tensor]]:
    """(``<path>.lora_A.weight`` / ``lora_B.weight``, tensor) of every adapter."""
    for path, mod in _lora_modules(peft_model):
        yield f"{path}.lora_A.weight", mod.lora_A[ADAPTER].weight
        yield f"{path}.lora_B.weight", mod.lora_B[ADAPTER].weight


def set_adapter_arrays(peft_model, arrays) -> None:
    """Copy {``<path>.lora_A.weight``: array, ...} into the adapters; every adapter must be
    given and every array must have a home."""
    have = dict(adapter_tensors(peft_model))
    missing = sorted(set(have) - set(arrays))
    extra = sorted(set(arrays) - set(have))
    if missing or extra:
        raise RuntimeError(f"adapter tensors do not match the model: missing {missing[:3]}, "
                           f"unexpected {extra[:3]}")
    with torch.no_grad():
        for name, t in have.items():
            src = arrays[name]
            src = src if isinstance(src, torch.Tensor) else torch.as_tensor(src)
            if tuple(src.shape) != tuple(t.shape):
                raise RuntimeError(f"{name}: adapter shape {tuple(src.shape)} != model "
                                   f"{tuple(t.shape)}")
            t.copy_(src.to(device=t.device, dtype=t.dtype))


@contextlib.contextmanager
def scoring(peft_model, reference: bool):
    """Score without adapter dropout (eval mode), and with the adapters off for the
    reference policy; restores the training mode afterwards."""
    was = peft_model.training
    peft_model.eval()
    try:
        if reference:
            with peft_model.disable_adapter():
                yield
        else:
            yield
    finally:
        peft_model.train(was)


def merged_named_tensors(peft_model, master_of=lambda t: t) -> Iterator[Tuple[str, torch.Tensor]]:
    """(HF name, tensor) of the base model's state_dict with every adapted weight merged,
    W + s * B A (computed in float32 from the adapters' float32 masters, ``master_of``; cast
    to W's dtype), adapter entries left out: what a rollout engine that knows nothing of LoRA
    loads."""
    mods = dict(_lora_modules(peft_model))
    for name, t in peft_model.get_base_model().state_dict().items():
        if ".lora_" in name:
            continue
        name = name.replace(".base_layer.", ".")
        t = t.detach()
        path = name[:-len(".weight")] if name.endswith(".weight") else None
        mod = mods.get(path)
        if mod is not None:
            a = master_of(mod.lora_A[ADAPTER].weight).detach().float()
            b = master_of(mod.lora_B[ADAPTER].weight).detach().float()
            t = (t.float() + mod.scaling[ADAPTER] * (b @ a)).to(t.dtype)
        yield name, t


def save_adapter(peft_model, directory: str, base_model: str, lora_cfg) -> None:
    """``adapter_model.safetensors`` (peft names, the model's dtype) + ``adapter_config.json``."""
    import json

    from safetensors.torch import save_file

    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    tensors = {L.peft_name(n): t.detach().cpu().contiguous()
               for n, t in adapter_tensors(peft_model)}
    save_file(tensors, str(d / L.ADAPTER_WEIGHTS), metadata={"format": "pt"})
    (d / L.ADAPTER_CONFIG).write_text(json.dumps(L.adapter_config(lora_cfg, base_model),
                                                 indent=2))


def load_adapter(peft_model, directory: str, lora_cfg) -> None:
    """Load an adapter written by :func:`save_adapter` (or by the MindSpore backend, or peft)."""
    from safetensors.torch import load_file

    L.check_adapter_matches(directory, lora_cfg)
    state = load_file(str(Path(directory) / L.ADAPTER_WEIGHTS))
    set_adapter_arrays(peft_model, {L.plain_name(k).replace(f".{ADAPTER}.", "."): v
                                    for k, v in state.items()})
