"""Engine ``vllm`` in bfloat16 fed by a bf16 torch trainer with float32 master weights: after
5 AdamW steps at lr 1e-6 the weights vLLM holds are the masters rounded to bf16 -- the float32
run's weights rounded -- in vLLM's own fused layout (qkv, gate_up)."""

import types

import numpy as np
import pytest
import torch

pytestmark = pytest.mark.slow


def _read_weights(worker):
    """On the vLLM worker: its model's parameters, by vLLM name."""
    return {n: p.detach().clone() for n, p in worker.model_runner.model.named_parameters()}


def _steps(be, steps=5, seed=0):
    """Unit-normal gradients (bf16-representable: both runs get the same) through the backend's
    own optimizer step: the loss sum(w * g) has gradient g."""
    gen = torch.Generator().manual_seed(seed)
    tb = types.SimpleNamespace(response_mask=np.ones(1, np.float32))
    for _ in range(steps):
        gs = [torch.randn(p.shape, generator=gen).bfloat16().float() for p in be.params]
        be._step([(tb, lambda gs=gs: (sum((p.float() * g).sum()
                                          for p, g in zip(be.params, gs)), {}))])


def test_vllm_holds_the_masters_rounded_after_a_sync(tiny_dir, make_cfg):
    pytest.importorskip("vllm")
    from mindrl.backends.base import build_backend
    from mindrl.rollout import build_engine

    train = {"lr": 1e-6, "grad_clip": 0.0, "warmup_steps": 0, "lr_schedule": "constant"}
    f32 = build_backend("torch", make_cfg(tiny_dir, train=train))
    cfg = make_cfg(tiny_dir, model={"path": tiny_dir, "dtype": "bfloat16"}, train=train,
                   data={"max_prompt_len": 32}, rollout={"max_new_tokens": 8})
    b16 = build_backend("torch", cfg)
    _steps(f32)
    _steps(b16)
    want = {n: p.detach().to(torch.bfloat16) for n, p in f32.model.named_parameters()}
    engine = build_engine("vllm", cfg)
    try:
        engine.load_weights(b16.named_tensors())
        got = engine.llm.collective_rpc(_read_weights)[0]
    finally:
        engine.close()
    fused = {"qkv_proj": ("q_proj", "k_proj", "v_proj"), "gate_up_proj": ("gate_proj", "up_proj")}
    checked = 0
    for name, t in got.items():
        parts = [name]
        for f, pieces in fused.items():
            if f".{f}." in name:
                parts = [name.replace(f, p) for p in pieces]
        if not all(p in want for p in parts):
            continue
        ref = torch.cat([want[p] for p in parts])
        assert t.dtype == torch.bfloat16, name
        assert torch.equal(t.cpu(), ref), name
        checked += sum(want[p].numel() for p in parts)
    assert checked == sum(p.numel() for p in f32.model.parameters())   # every weight compared
    # the trainer's own bf16 copy is the same rounding of its float32 masters
    for p in b16.params:
        assert torch.equal(p.detach(), b16.masters.master_of(p).to(torch.bfloat16))
