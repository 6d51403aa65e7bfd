"""Mixed precision on the torch backend: under model.dtype=bfloat16 the optimizer keeps float32
master weights, so small AdamW updates (lr 1e-6 at Qwen's weight scale, std 0.02) are kept
rather than rounded away; the model computes with the masters rounded to bfloat16; checkpoints
keep the Hugging Face directory in bfloat16 and the masters with the optimizer state."""

import types

import numpy as np
import pytest
import torch

LR = 1e-6


def _backend(cfg, **kw):
    from mindrl.backends.base import build_backend

    return build_backend("torch", cfg, **kw)


def _cfg(make_cfg, model_dir, dtype, **train):
    return make_cfg(model_dir, model={"path": model_dir, "dtype": dtype},
                    train={"lr": LR, "grad_clip": 0.0, "warmup_steps": 0,
                           "lr_schedule": "constant", "weight_decay": 0.0, **train})


def _names(be):
    return [n for n, p in be.model.named_parameters() if p.requires_grad]


def _unit_gradient_steps(be, steps=5, seed=0):
    """``steps`` optimizer steps through the backend's own step (accumulate, reduce, clip,
    AdamW, write-back), each with unit normal gradients (bf16-representable, so a float32 and
    a bfloat16 run see the same ones): the loss sum(w * g) has gradient g."""
    gen = torch.Generator().manual_seed(seed)
    shapes = [p.shape for p in be.params]
    tb = types.SimpleNamespace(response_mask=np.ones(1, np.float32))
    for _ in range(steps):
        gs = [torch.randn(s, generator=gen).bfloat16().float() for s in shapes]

        def loss(gs=gs):
            return sum((p.float() * g).sum() for p, g in zip(be.params, gs)), {}
        out = be._step([(tb, loss)])
        assert out["update_skipped"] == 0.0


def test_bf16_updates_at_lr_1e6_are_kept_by_float32_masters(tiny_dir, make_cfg):
    f32 = _backend(_cfg(make_cfg, tiny_dir, "float32"))
    b16 = _backend(_cfg(make_cfg, tiny_dir, "bfloat16"))
    names = _names(f32)
    assert names == _names(b16)
    start = {n: p.detach().clone() for n, p in zip(names, f32.params)}
    w = start["model.layers.0.mlp.up_proj.weight"]
    assert 0.015 < float(w.std()) < 0.025           # Qwen's weight scale: std 0.02
    assert all(p.dtype == torch.bfloat16 for p in b16.params)      # computes in bf16
    _unit_gradient_steps(f32)
    _unit_gradient_steps(b16)
    changed = total = 0
    for n, p32, p16 in zip(names, f32.params, b16.params):
        update = (p32.detach() - start[n]).abs().max()
        assert float(update) > 4 * LR, n          # 5 Adam steps of ~lr each
        # the bf16 model computes with the float32 run's weights rounded (plain AdamW on bf16
        # weights: only ~2% of them move at all)
        assert torch.equal(p16.detach(), p32.detach().to(torch.bfloat16)), n
        master = b16.masters.master_of(p16)
        assert master.dtype == torch.float32, n
        # the masters follow the float32 run (same float32 arithmetic, same gradients)
        assert float((master - p32.detach()).abs().max()) <= 1e-3 * float(update), n
        # the compute copy is the master rounded to bf16
        assert torch.equal(p16.detach(), master.to(torch.bfloat16)), n
        changed += int((master != start[n]).sum())
        total += master.numel()
    assert changed / total > 0.999                   # (plain AdamW on bf16 weights: ~2%)


@pytest.mark.slow
def test_fsdp2_bf16_two_ranks_equal_one_process(tiny_dir, fsdp_run):
    """train.fsdp in bf16: float32 shards, bf16 compute, float32 gradient reduce-scatter; 2 gloo
    ranks equal 1 process with float32 masters within 2e-4 of the update; the full weights
    handed to a rollout engine are the masters rounded to bf16; a checkpoint holds the model in
    bf16 and the masters in its state, and a fresh sharded backend resumes them exactly."""
    import importlib.util
    from pathlib import Path

    here = Path(__file__).resolve().parent
    out = fsdp_run                  # fsdp_bf16_worker.py under the one torchrun of conftest.py
    spec = importlib.util.spec_from_file_location("fsdp_bf16_worker", here / "fsdp_bf16_worker.py")
    worker = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(worker)
    ref, start, _ = worker.run(tiny_dir)
    got = np.load(str(out) + ".npz")
    sent = np.load(str(out) + "_sent.npz")
    resumed = np.load(str(out) + "_resumed.npz")
    from safetensors.torch import load_file

    saved = load_file(str(out.parent / "fsdp_ckpt" / "model" / "model.safetensors"))
    assert all(v.dtype == torch.bfloat16 for v in saved.values())
    import json

    assert json.loads((out.parent / "fsdp_ckpt" / "model" / "config.json").read_text())[
        "dtype"] == "bfloat16"
    assert set(got.files) == set(ref)
    for k in ref:
        update = np.abs(ref[k] - start[k]).max()
        assert update > 2 * worker.LR, k
        # 1 process: torch's fused AdamW and a sparse tied-embedding backward; FSDP's DTensor
        # shards: the foreach AdamW and a dense one - the same arithmetic in another order
        assert np.abs(got[k] - ref[k]).max() <= 2e-4 * update, k
        bf16 = torch.from_numpy(got[k]).bfloat16().float().numpy()
        np.testing.assert_array_equal(sent[k], bf16, err_msg=k)
        np.testing.assert_array_equal(resumed[k], got[k], err_msg=k)   # resume: exact


def _load(*extra):
    from mindrl.config.loader import load_config

    return load_config(None, ["model.path=builtin:tiny", "model.dtype=bfloat16",
                              "train.lr=1e-6", "train.warmup_steps=0", *extra])


def _norm(b):
    from mindrl.types import LossNormalizers

    m = b.tokens.response_mask
    return LossNormalizers(float(m.sum()), float(len(b)), float(m.shape[1]))


def test_lora_adapters_train_float32_masters_and_merge_from_them(fixed_batch):
    """LoRA in bf16: the frozen base and the adapters compute in bf16; AdamW steps the adapters'
    float32 masters; the merged weights a rollout engine loads are W + s B A from the masters,
    rounded once."""
    from mindrl.backends.torch.backend import TorchBackend
    from mindrl.backends.torch.lora import _lora_modules, ADAPTER

    be = TorchBackend(_load("model.lora.enabled=true", "model.lora.rank=4",
                            "model.lora.alpha=8"))
    assert all(p.dtype == torch.bfloat16 for p in be.model.parameters())
    opt = [p for g in be.optimizer.param_groups for p in g["params"]]
    assert len(opt) == 2 * 7 * 2 and all(p.dtype == torch.float32 for p in opt)
    b = fixed_batch()
    for _ in range(3):
        be.train_step([b], _norm(b))
    merged = dict(be.named_tensors())
    for path, mod in _lora_modules(be.model):
        a_m = be.masters.master_of(mod.lora_A[ADAPTER].weight)
        b_m = be.masters.master_of(mod.lora_B[ADAPTER].weight)
        assert torch.equal(mod.lora_B[ADAPTER].weight, b_m.bfloat16())
        assert float(b_m.abs().max()) > 0                   # B starts at 0: it was trained
        w = mod.base_layer.weight.detach()
        want = (w.float() + mod.scaling[ADAPTER] * (b_m @ a_m)).bfloat16()
        assert torch.equal(merged[path + ".weight"], want), path


def test_critic_backbone_computes_in_bf16_on_float32_masters(fixed_batch):
    """PPO critic in bf16: the backbone a bf16 copy of float32 masters, the value head float32;
    a step moves the masters and the copy is their rounding; saved arrays are the masters."""
    from mindrl.backends.torch.backend import TorchBackend
    from mindrl.types import ValueBatch

    be = TorchBackend(_load("algorithm.adv_estimator=gae", "critic.lr=1e-6"))
    c = be.critic
    assert c.score.weight.dtype == torch.float32
    body = [p for p in c.backbone.parameters()]
    assert all(p.dtype == torch.bfloat16 for p in body)
    start = [c.masters.master_of(p).clone() for p in body]
    tokens = fixed_batch().tokens
    m = tokens.response_mask
    vb = ValueBatch(tokens, np.zeros(m.shape, np.float32), (m * 0.5).astype(np.float32))
    c.step([vb], _norm(vb))
    moved = 0
    for p, s in zip(body, start):
        master = c.masters.master_of(p)
        assert master.dtype == torch.float32
        assert torch.equal(p.detach(), master.bfloat16())
        moved += int((master != s).sum())
    assert moved > 0.5 * sum(p.numel() for p in body)
    arrays = c.arrays()
    name, p = next(iter(c.backbone.named_parameters()))
    np.testing.assert_array_equal(arrays["model." + name], c.masters.master_of(p).numpy())


def _reference_accumulate(grads_per_micro):
    """The per-tensor float32 accumulation the masters' gradients must equal bit for bit:
    g1.float(), then + g.float() per later micro-batch (None: no gradient that micro-batch)."""
    out = []
    for gs in zip(*grads_per_micro):
        acc = None
        for g in gs:
            if g is not None:
                acc = g.float() if acc is None else acc + g.float()
        out.append(acc)
    return out


def test_accumulate_reuses_kept_float32_buffers_bit_for_bit():
    """bf16 gradients of three micro-batches widened and summed into the float32 master
    gradients: bit for bit the per-tensor ``g.float()`` sums (a tensor over the scratch size,
    whose slices are added in turn, its last slice partial; one without a gradient in the first
    micro-batch; a small one); the second step writes into the same float32 memory (no fresh
    gradient tensors on CPU) and none of the first step's sums leaks into it."""
    from mindrl.backends.torch import optim
    from mindrl.backends.torch.optim import MasterWeights

    gen = torch.Generator().manual_seed(0)
    big = (optim._SCRATCH_ELEMENTS // 1000 + 3, 1000)          # 1.05 slices of the scratch
    model = torch.nn.ParameterList([torch.nn.Parameter(torch.randn(s, generator=gen))
                                    for s in (big, (7, 5), (300, 11))])
    mw = MasterWeights.take(model, torch.bfloat16)
    assert mw.mixed and all(p.dtype == torch.bfloat16 for p in mw.model_params)
    first = None
    for step in range(2):
        micro = []
        for k in range(3):
            # magnitudes 2^-8..2^8 apart, so float32 sums round (bf16 inputs are exact in f32)
            gs = [(torch.randn(p.shape, generator=gen) * 2.0 ** (8 * (k - 1))).bfloat16()
                  for p in mw.model_params]
            if k == 0:
                gs[1] = None
            micro.append(gs)
            for p, g in zip(mw.model_params, gs):
                p.grad = None if g is None else g.clone()
            mw.accumulate()
            assert all(p.grad is None for p in mw.model_params)
        want = _reference_accumulate(micro)
        got = mw.grads()
        for w, g in zip(want, got):
            assert g.dtype == torch.float32 and torch.equal(g, w)
        if first is not None:          # the kept buffers, written again
            assert all(g is f for g, f in zip(got, first))
        first = got
        for m in mw.params:
            m.grad = None               # the optimizer's zero_grad(set_to_none=True)
