"""MindSpore AdamW keeps float32 master weights of low-precision parameters: 5 steps at lr 1e-6
on a model at std 0.02 stored in float16 land where a float32 run's do, and every parameter is
its master rounded. MindSpore 2.10 on CPU cannot hold bfloat16 Parameters (creating one reads
it back through NumPy, which has no bfloat16) nor multiply in bf16, so the half-precision
storage here is float16 (at |w| = 0.02 its step, 2^-16, also rounds a 1e-6 update away); the
master logic does not depend on the dtype. A bf16 run on CPU computes in float32 and saves the
model in bf16: its float32 weights go with the optimizer state, so a resume is exact."""

import numpy as np
import pytest

import mindspore as ms
from mindspore import ops

from mindrl.backends.mindspore.optim import AdamW
from mindrl.backends.mindspore.weights import write_param

LR = 1e-6


def _model(directory, dtype, init):
    from mindrl.backends.mindspore import weights as W
    from mindrl.backends.mindspore.model import Qwen2ForCausalLM, Qwen2Spec

    model = Qwen2ForCausalLM(Qwen2Spec.from_hf(W.read_config(directory)), dtype=dtype)
    params = model.trainable_params()[:6]     # embeddings, layer 0's norm and attention
    for p, a in zip(params, init):
        write_param(p, a)
    return params


def _f32(p):
    return p.astype(ms.float32).asnumpy()


def _five_steps(params, grads):
    """Steps 1, 3, 5 through the separate path (reduce + norm, apply), 2 and 4 through the
    compiled in-graph update a fused train step inlines."""
    opt = AdamW(params, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
    fused = ms.jit(lambda_free(opt))
    for t, g in enumerate(grads, start=1):
        if t % 2:
            write_param(opt.grad_flat, g)
            opt.apply(LR, 0.0, opt.grad_norm())
        else:
            h = opt.hyper(LR, 0.0).asnumpy()
            norm, ok = fused(ms.Tensor(g), ms.Tensor(h))
            assert float(ok.asnumpy()) == 1.0
            opt.step += 1
    return opt


def lambda_free(opt):
    update = opt.update_in_graph

    def fused(g, h):
        return update(g, ops.zeros((), ms.float32), h[0], h[1], h[2], h[3])
    return fused


@pytest.mark.slow
def test_float16_params_keep_lr_1e6_updates_in_float32_masters(hf_tied):
    directory, _ = hf_tied
    rng = np.random.default_rng(0)
    probe = _model(directory, ms.float32, [])
    # re-initialised at std 0.02, values a float16 model holds exactly (both runs start equal)
    init = [rng.normal(0, 0.02, p.shape).astype(np.float16).astype(np.float32) for p in probe]
    n = sum(a.size for a in init)
    grads = [rng.normal(0, 1, n).astype(np.float32) for _ in range(5)]
    p32 = _model(directory, ms.float32, init)
    p16 = _model(directory, ms.float16, init)
    assert all(p.dtype == ms.float16 for p in p16)
    o32, o16 = _five_steps(p32, grads), _five_steps(p16, grads)
    updates = []
    for a0, w32, w16 in zip(init, p32, p16):
        w32 = _f32(w32)
        updates.append(np.abs(w32 - a0).max())
        assert updates[-1] > 4 * LR
        # the float16 model holds the float32 run's weights rounded (writing AdamW's result
        # straight into float16 parameters leaves most of them where they started)
        np.testing.assert_array_equal(_f32(w16), w32.astype(np.float16).astype(np.float32))
    assert o32.master is None                    # float32 parameters are their own masters
    masters = o16.master_arrays()
    changed = 0
    for a0, w32, w16, m, update in zip(init, p32, p16, masters, updates):
        assert m.dtype == np.float32
        assert np.abs(m - _f32(w32)).max() <= 1e-3 * update
        np.testing.assert_array_equal(_f32(w16), m.astype(np.float16).astype(np.float32))
        changed += int((m != a0).sum())
    assert changed / n > 0.999
    # the masters travel with the optimizer state and come back exactly
    state = o16.state_arrays()
    assert sum(k.startswith("master.") for k in state) == len(p16)
    again = _model(directory, ms.float16, init)
    o = AdamW(again, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
    o.load_state_arrays(state, 5)
    for m, m2, w, w2 in zip(masters, o.master_arrays(), p16, again):
        np.testing.assert_array_equal(m, m2)
        np.testing.assert_array_equal(_f32(w), _f32(w2))


@pytest.mark.slow
def test_bf16_on_cpu_saves_bf16_and_resumes_from_the_float32_weights(hf_tied, tmp_path):
    """model.dtype=bfloat16 on CPU: float32 compute, the model directory in bf16, the float32
    weights with the optimizer state: loading both gives back the trained weights bit for bit
    (the bf16 directory alone is off by up to half a bf16 step)."""
    import torch
    from safetensors.torch import load_file

    from mindrl.backends.mindspore import MindSporeBackend
    from mindrl.types import LossNormalizers
    from ms_helpers import ms_config, random_batch

    directory, _ = hf_tied
    cfg = ms_config("train.lr=1e-4", "model.dtype=bfloat16")
    be = MindSporeBackend(cfg, model_path=directory)
    assert be.dtype == ms.float32
    rng = np.random.default_rng(3)
    for _ in range(2):
        b = random_batch(rng, 4)
        be.train_step([b], LossNormalizers(float(b.tokens.response_mask.sum()), 4.0, 16.0))
    be.save_pretrained(str(tmp_path / "model"))
    be.save_state(str(tmp_path / "state"))
    trained = {p.name: _f32(p) for p in be.params}
    saved = load_file(str(tmp_path / "model" / "model.safetensors"))
    assert all(v.dtype == torch.bfloat16 for v in saved.values())   # written in bf16
    fresh = MindSporeBackend(cfg, model_path=directory)
    fresh.load_pretrained(str(tmp_path / "model"))
    rounded = {p.name: _f32(p) for p in fresh.params}
    assert max(np.abs(rounded[k] - trained[k]).max() for k in trained) > 0
    fresh.load_state(str(tmp_path / "state"))
    for p in fresh.params:
        np.testing.assert_array_equal(_f32(p), trained[p.name], err_msg=p.name)


@pytest.mark.slow
def test_masters_take_a_float32_checkpoint_at_its_own_precision(hf_tied):
    """Weights read into a float16 model (the backend's load path: ``load_into`` over
    ``set_masters``) land in the masters unrounded; the parameters hold them rounded."""
    directory, _ = hf_tied
    rng = np.random.default_rng(1)
    params = _model(directory, ms.float16, [])
    opt = AdamW(params, betas=(0.9, 0.999), eps=1e-8)
    files = [(p.name, rng.normal(0, 0.02, p.shape).astype(np.float32)) for p in params]
    passed = list(opt.set_masters(iter(files)))
    assert [n for n, _ in passed] == [n for n, _ in files]
    for p, (_, a) in zip(params, passed):
        write_param(p, a)
    for (_, a), m, p in zip(files, opt.master_arrays(), params):
        np.testing.assert_array_equal(m, a)                   # not rounded to float16
        assert not np.array_equal(a.astype(np.float16).astype(np.float32), a)
        np.testing.assert_array_equal(_f32(p), a.astype(np.float16).astype(np.float32))
