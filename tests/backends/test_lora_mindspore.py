"""LoRA cells on the MindSpore backend: the same initialisation and gradients as peft on the
torch backend (within 1e-4 on the builtin tiny model), adapters alone trainable, reference =
adapters off, a compiled step, adapter-only checkpoints that the torch backend loads."""

import numpy as np
import pytest

pytest.importorskip("mindspore")
torch = pytest.importorskip("torch")

from lora_helpers import hf_logprobs, lora_cfg, random_batch  # noqa: E402


@pytest.fixture(autouse=True)
def _in_tmp_dir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)            # MindSpore writes rank_*/ litter on errors


def _ms(*extra, with_reference=True):
    from mindrl.backends.mindspore.backend import MindSporeBackend

    return MindSporeBackend(lora_cfg("backend=mindspore", "train.micro_batch_size=4", *extra),
                            with_reference=with_reference)


def _torch(*extra):
    from mindrl.backends.torch.backend import TorchBackend

    return TorchBackend(lora_cfg(*extra), with_reference=False)


def _torch_adapter_grads(be, batch, norm):
    from mindrl.backends.torch.lora import adapter_tensors

    be.optimizer.zero_grad(set_to_none=True)
    loss, _ = be._micro_loss(batch, norm)
    loss.backward()
    return {n: t.grad.numpy().copy() for n, t in adapter_tensors(be.model)}


@pytest.mark.slow
def test_same_init_and_adapter_gradients_as_torch():
    from mindrl.backends.mindspore.lora import adapter_arrays, set_adapter_arrays
    from mindrl.backends.torch.lora import adapter_tensors, set_adapter_arrays as torch_set

    tb, mb = _torch("train.seed=5"), _ms("train.seed=5", with_reference=False)
    t_init = {n: t.detach().numpy().copy() for n, t in adapter_tensors(tb.model)}
    m_init = dict(adapter_arrays(mb.model))
    assert set(t_init) == set(m_init) and len(t_init) == 28
    for k in t_init:                       # the same seed gives the same adapter
        np.testing.assert_array_equal(m_init[k], t_init[k])
    # B = 0 makes dL/dA = 0: give B (and A) values, the same on both sides (torch -> MindSpore)
    rng = np.random.default_rng(0)
    vals = {k: (v + 0.05 * rng.normal(size=v.shape)).astype(np.float32)
            for k, v in t_init.items()}
    torch_set(tb.model, vals)
    set_adapter_arrays(mb.model, {n: t.detach().numpy() for n, t in adapter_tensors(tb.model)})
    batch, norm = random_batch(seed=4, B=4)
    want = _torch_adapter_grads(tb, batch, norm)
    got = mb.gradients([batch], norm)
    assert set(got) == set(want)           # the MindSpore optimizer holds adapters alone
    for k in want:
        scale = np.abs(want[k]).max()
        assert scale > 1e-6, k             # a real gradient on A and on B
        np.testing.assert_allclose(got[k], want[k], rtol=0, atol=1e-4 * max(scale, 1.0),
                                   err_msg=k)


@pytest.mark.slow
def test_reference_is_the_base_and_the_compiled_step_trains_adapters_only():
    from transformers import AutoModelForCausalLM

    from mindrl.backends.mindspore.lora import adapter_arrays, base_arrays
    from mindrl.models.tiny import resolve_model_path

    base = AutoModelForCausalLM.from_pretrained(resolve_model_path("builtin:tiny"),
                                                local_files_only=True).eval()
    be = _ms()
    assert be.reference is None
    assert all(".lora_A." in p.name or ".lora_B." in p.name for p in be.params)
    assert len(be.params) == 28
    batch, norm = random_batch(seed=6, B=4)
    want_base = hf_logprobs(base, batch.tokens)
    np.testing.assert_allclose(be.logprobs(batch.tokens, temperature=1.0), want_base, atol=1e-4)
    w0 = {k: v.copy() for k, v in base_arrays(be.model)}
    a0 = dict(adapter_arrays(be.model))
    for _ in range(2):
        m = be.train_step([batch], norm)
        assert m["update_skipped"] == 0 and m["grad_norm"] > 0
    assert be.compile_count == 1           # one compiled step for the one bucket shape
    for k, v in base_arrays(be.model):     # the base did not move
        np.testing.assert_array_equal(v, w0[k])
    assert any(not np.array_equal(v, a0[k]) for k, v in adapter_arrays(be.model))
    policy = be.logprobs(batch.tokens, temperature=1.0)
    ref = be.logprobs(batch.tokens, temperature=1.0, reference=True)
    assert np.abs(policy - want_base).max() > 1e-3
    np.testing.assert_allclose(ref, want_base, atol=1e-4)
    # and the adapters are back on after the reference pass
    np.testing.assert_allclose(be.logprobs(batch.tokens, temperature=1.0), policy, atol=1e-6)


@pytest.mark.slow
def test_adapter_checkpoint_loads_in_torch_and_merged_weights_agree(tmp_path):
    import copy

    from transformers import AutoModelForCausalLM

    from mindrl.models.tiny import resolve_model_path

    be = _ms(with_reference=False)
    batch, norm = random_batch(seed=8, B=4)
    for _ in range(2):
        be.train_step([batch], norm)
    be.save_pretrained(str(tmp_path / "model"))
    be.save_state(str(tmp_path / "state"))
    files = sorted(p.name for p in (tmp_path / "model").iterdir())
    assert "adapter_model.safetensors" in files and "model.safetensors" not in files
    want = be.logprobs(batch.tokens, temperature=1.0)
    tb = _torch()
    tb.load_pretrained(str(tmp_path / "model"))
    np.testing.assert_allclose(tb.logprobs(batch.tokens, temperature=1.0), want, atol=1e-4)
    # merged weights (what vLLM receives) score like the LoRA cells
    base = AutoModelForCausalLM.from_pretrained(resolve_model_path("builtin:tiny"),
                                                local_files_only=True).eval()
    plain = copy.deepcopy(base)
    plain.load_state_dict({k: torch.from_numpy(v) for k, v in be.named_weights()})
    np.testing.assert_allclose(hf_logprobs(plain, batch.tokens), want, atol=1e-4)
    # resume: a fresh backend with the adapter and the optimizer state takes the same step
    other = _ms("train.seed=11", with_reference=False)
    other.load_state(str(tmp_path / "state"))
    other.load_pretrained(str(tmp_path / "model"))
    m1, m2 = be.train_step([batch], norm), other.train_step([batch], norm)
    assert m1["loss"] == pytest.approx(m2["loss"], abs=1e-6)
    from mindrl.backends.mindspore.lora import adapter_arrays

    b = dict(adapter_arrays(other.model))
    for k, v in adapter_arrays(be.model):
        np.testing.assert_allclose(v, b[k], atol=1e-6)
