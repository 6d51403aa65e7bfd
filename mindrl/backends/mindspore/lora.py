"""LoRA cells for the MindSpore decoder (``model.py``, every family), the counterpart of peft on the
torch backend: the same target modules, the same parameter names
(``model.layers.0.self_attn.q_proj.lora_A.weight``, (r, in); ``lora_B.weight``, (out, r)),
the same seeded initialisation (:func:`mindrl.backends.lora.init_adapter`) and the same
adapter files (peft's format), so the two backends start from, train and save the same
adapter.

    y = x W^T + b + s * on * (x A^T) B^T,     s = alpha / r

``on`` is a per-layer non-trainable scalar Parameter, 1 normally and 0 inside
:func:`adapters_off` (the reference policy): a Parameter, not a Python flag, so every compiled
graph (scoring, train step, sampler) reads it at run time and one graph serves both. The base
weights keep their Parameters (no copy) with ``requires_grad=False``, so
``model.trainable_params()`` -- what the backend's AdamW holds -- is the adapters alone.
Adapter dropout is not implemented here (the config check refuses ``model.lora.dropout > 0``
with ``backend=mindspore``).
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Dict, Iterator, Tuple

import numpy as np
from mindspore import Parameter, Tensor, nn, ops

from mindrl.backends import lora as L
from mindrl.backends.mindspore import weights as W
from mindrl.backends.mindspore.model import Linear


class _Weight(nn.Cell):
    """A bare ``weight`` Parameter, so names end in ``lora_A.weight`` as in peft."""

    def __init__(self, shape, dtype):
        super().__init__()
        self.weight = Parameter(Tensor(np.zeros(shape, np.float32), dtype))


class LoRALinear(nn.Cell):
    """The base :class:`Linear` (its Parameters, frozen) plus a rank-r update."""

    def __init__(self, base: Linear, rank: int, s: float):
        super().__init__()
        self.n_out = base.n_out
        self.weight = base.weight
        self.weight.requires_grad = False
        self.has_bias = base.has_bias
        self.bias = base.bias
        if self.bias is not None:
            self.bias.requires_grad = False
        n_out, n_in = base.weight.shape
        dtype = base.weight.dtype
        self.lora_A = _Weight((rank, n_in), dtype)
        self.lora_B = _Weight((n_out, rank), dtype)
        self.scale = float(s)
        self.on = Parameter(Tensor(np.ones((), np.float32), dtype), name="lora_on",
                            requires_grad=False)
        self.matmul = ops.MatMul(transpose_b=True)

    def construct(self, x):
        lead = x.shape[:-1]
        x2 = x.reshape(-1, x.shape[-1])
        y = self.matmul(x2, self.weight)
        if self.has_bias:
            y = y + self.bias
        low = self.matmul(self.matmul(x2, self.lora_A.weight), self.lora_B.weight)
        y = y + low * (self.scale * self.on)
        return y.reshape(lead + (self.n_out,))


def _targets(model) -> Iterator[Tuple[str, nn.Cell, str]]:
    """(module path, parent cell, attribute) of every linear layer LoRA may adapt."""
    for i, layer in enumerate(model.model.layers):
        for parent_name, parent in (("self_attn", layer.self_attn), ("mlp", layer.mlp)):
            for attr in ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                         "down_proj"):
                if hasattr(parent, attr):
                    yield f"model.layers.{i}.{parent_name}.{attr}", parent, attr


def add_adapters(model, lora_cfg, hf_config: dict, seed: int) -> None:
    """Replace the target linear layers of ``model`` by :class:`LoRALinear` (in place), set A
    and B from :func:`mindrl.backends.lora.init_adapter` and freeze everything else."""
    for p in model.get_parameters():
        p.requires_grad = False
    s = L.scale(lora_cfg)
    for path, parent, attr in _targets(model):
        if attr in lora_cfg.target_modules:
            setattr(parent, attr, LoRALinear(getattr(parent, attr), lora_cfg.rank, s))
    # give the new Parameters their hierarchical names (model.layers.0...lora_A.weight)
    for name, p in model.parameters_and_names():
        p.name = name
    set_adapter_arrays(model, L.init_adapter(
        L.target_shapes(hf_config, lora_cfg.target_modules), lora_cfg.rank, seed))


def _lora_cells(model) -> Iterator[Tuple[str, LoRALinear]]:
    for path, parent, attr in _targets(model):
        cell = getattr(parent, attr)
        if isinstance(cell, LoRALinear):
            yield path, cell


def adapter_arrays(model) -> Iterator[Tuple[str, np.ndarray]]:
    """(``<path>.lora_A.weight`` / ``lora_B.weight``, float32 array) of every adapter."""
    for path, cell in _lora_cells(model):
        yield f"{path}.lora_A.weight", cell.lora_A.weight.asnumpy().astype(np.float32)
        yield f"{path}.lora_B.weight", cell.lora_B.weight.asnumpy().astype(np.float32)


def set_adapter_arrays(model, arrays: Dict[str, np.ndarray]) -> None:
    """Copy {``<path>.lora_A.weight``: array, ...} into the adapters (all of them, exactly)."""
    have = {}
    for path, cell in _lora_cells(model):
        have[f"{path}.lora_A.weight"] = cell.lora_A.weight
        have[f"{path}.lora_B.weight"] = cell.lora_B.weight
    missing, extra = sorted(set(have) - set(arrays)), sorted(set(arrays) - set(have))
    if missing or extra:
        raise RuntimeError(f"adapter tensors do not match the model: missing {missing[:3]}, "
                           f"unexpected {extra[:3]}")
    for name, p in have.items():
        arr = np.asarray(arrays[name], np.float32)
        if tuple(arr.shape) != tuple(p.shape):
            raise RuntimeError(f"{name}: adapter shape {arr.shape} != model {tuple(p.shape)}")
        W.write_param(p, arr)


@contextlib.contextmanager
def adapters_off(model):
    """The base model: every adapter's ``on`` = 0 inside, 1 again afterwards."""
    cells = [c for _, c in _lora_cells(model)]
    for c in cells:
        W.write_param(c.on, np.zeros((), np.float32))
    try:
        yield
    finally:
        for c in cells:
            W.write_param(c.on, np.ones((), np.float32))


def base_arrays(model) -> Iterator[Tuple[str, np.ndarray]]:
    """(HF name, float32 array) of the base model's parameters (adapters left out)."""
    for name, arr in W.named_arrays(model):
        if ".lora_" not in name and not name.endswith(".on"):
            yield name, arr


def merged_arrays(model, lora_cfg) -> Iterator[Tuple[str, np.ndarray]]:
    """(HF name, float32 array) with W + s * B A at every adapted weight."""
    yield from L.merge(base_arrays(model), dict(adapter_arrays(model)), L.scale(lora_cfg))


def save_adapter(model, directory: str, base_model: str, lora_cfg, dtype: str) -> None:
    """peft's files: ``adapter_model.safetensors`` (``dtype``) and ``adapter_config.json``."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    W.write_safetensors(str(d / L.ADAPTER_WEIGHTS),
                        {L.peft_name(n): a for n, a in adapter_arrays(model)}, dtype)
    tmp = d / (L.ADAPTER_CONFIG + ".tmp")
    tmp.write_text(json.dumps(L.adapter_config(lora_cfg, base_model), indent=2))
    tmp.replace(d / L.ADAPTER_CONFIG)


def load_adapter(model, directory: str, lora_cfg) -> None:
    """Load an adapter written by either backend (or by peft)."""
    L.check_adapter_matches(directory, lora_cfg)
    state = W.read_safetensors(str(Path(directory) / L.ADAPTER_WEIGHTS))
    set_adapter_arrays(model, {L.plain_name(k).replace(".default.", "."): v
                               for k, v in state.items()})

