"""LoRA on the torch backend (peft): adapters alone in the optimizer, no reference copy
(reference = adapters off), merged weights for rollout engines, adapter-only checkpoints, the
shared seeded initialisation."""

import math

import numpy as np
import pytest
import torch

from lora_helpers import hf_logprobs, lora_cfg, random_batch


@pytest.fixture(scope="module")
def base_model():
    from transformers import AutoModelForCausalLM

    from mindrl.models.tiny import resolve_model_path

    return AutoModelForCausalLM.from_pretrained(resolve_model_path("builtin:tiny"),
                                                local_files_only=True).eval()


def _backend(*extra, with_reference=True):
    from mindrl.backends.torch.backend import TorchBackend

    return TorchBackend(lora_cfg(*extra), with_reference=with_reference)


def test_optimizer_holds_adapters_only_and_no_reference_copy(base_model):
    be = _backend()
    assert be.reference is None                     # with_reference=True built no second model
    n_models = sum(1 for m in be.__dict__.values() if isinstance(m, torch.nn.Module))
    assert n_models == 1
    opt_params = [p for g in be.optimizer.param_groups for p in g["params"]]
    names = {id(p): n for n, p in be.model.named_parameters()}
    assert opt_params and all("lora_A" in names[id(p)] or "lora_B" in names[id(p)]
                              for p in opt_params)
    # 2 layers x (q, k, v, o, gate, up, down) x (A, B)
    assert len(opt_params) == 2 * 7 * 2
    H, inter, kv = 64, 256, 32
    per_layer = 4 * (H + H) + 4 * (H + kv) * 2 + 4 * (H + H) + 4 * (H + inter) * 2 + \
        4 * (inter + H)
    assert sum(p.numel() for p in opt_params) == 2 * per_layer
    frozen = [n for n, p in be.model.named_parameters() if not p.requires_grad]
    assert any(n.endswith("embed_tokens.weight") for n in frozen)


def test_init_is_the_shared_seeded_kaiming_uniform():
    from mindrl.backends.lora import init_adapter, target_shapes
    from mindrl.backends.torch.lora import adapter_tensors

    be = _backend("train.seed=3", with_reference=False)
    got = {n: t.detach().numpy() for n, t in adapter_tensors(be.model)}
    a = got["model.layers.1.mlp.down_proj.lora_A.weight"]
    assert a.shape == (4, 256)
    bound = 1.0 / math.sqrt(256)                    # gain sqrt(1/3) * sqrt(3 / fan_in)
    assert np.abs(a).max() <= bound and np.abs(a).max() > 0.9 * bound
    assert not got["model.layers.1.mlp.down_proj.lora_B.weight"].any()
    want = init_adapter(target_shapes(be.model.config.to_dict(), be.lora.target_modules), 4, 3)
    assert set(want) == set(got)
    for k in want:
        np.testing.assert_array_equal(got[k], want[k])


def test_reference_is_base_model_and_policy_moves(base_model):
    from mindrl.backends.torch.lora import adapter_tensors

    be = _backend()
    batch, norm = random_batch()
    base = hf_logprobs(base_model, batch.tokens)
    # B = 0: the LoRA policy starts as the base model
    np.testing.assert_allclose(be.logprobs(batch.tokens, temperature=1.0), base, atol=1e-5)
    before = {n: t.detach().clone() for n, t in adapter_tensors(be.model)}
    m = be.train_step([batch], norm)
    assert m["grad_norm"] > 0 and m["update_skipped"] == 0
    after = dict(adapter_tensors(be.model))
    assert any(not torch.equal(before[n], after[n]) for n in before)
    policy = be.logprobs(batch.tokens, temperature=1.0)
    ref = be.logprobs(batch.tokens, temperature=1.0, reference=True)
    assert np.abs(policy - base).max() > 1e-3       # the adapters changed the policy
    np.testing.assert_allclose(ref, base, atol=1e-5)   # adapters off = the frozen base
    # the base weights themselves did not move
    for n, t in be.model.get_base_model().state_dict().items():
        if ".lora_" in n:
            continue
        plain = n.replace(".base_layer.", ".")
        torch.testing.assert_close(t, base_model.state_dict()[plain], rtol=0, atol=0)


def test_merged_weights_score_like_the_lora_model(base_model):
    import copy

    be = _backend(with_reference=False)
    batch, norm = random_batch(seed=1)
    for _ in range(2):
        be.train_step([batch], norm)
    merged = dict(be.named_tensors())
    assert not any("lora" in k or "base_layer" in k for k in merged)
    assert set(merged) == set(base_model.state_dict())
    plain = copy.deepcopy(base_model)
    plain.load_state_dict(merged)
    want = be.logprobs(batch.tokens, temperature=1.0)
    np.testing.assert_allclose(hf_logprobs(plain, batch.tokens), want, atol=2e-5)
    assert np.abs(hf_logprobs(base_model, batch.tokens) - want).max() > 1e-3


def test_checkpoint_is_adapter_only_and_round_trips(tmp_path):
    from mindrl.backends.torch.lora import adapter_tensors

    be = _backend(with_reference=False)
    batch, norm = random_batch(seed=2)
    be.train_step([batch], norm)
    be.save_pretrained(str(tmp_path / "model"))
    be.save_state(str(tmp_path / "state"))
    files = sorted(p.name for p in (tmp_path / "model").iterdir())
    assert "adapter_model.safetensors" in files and "adapter_config.json" in files
    assert not any(f.startswith("model") and f.endswith(".safetensors") for f in files)
    # optimizer state: one entry per adapter tensor, nothing for the frozen base
    state = torch.load(tmp_path / "state" / "torch_optim.pt", weights_only=True)
    assert len(state["optimizer"]["state"]) == 2 * 7 * 2
    other = _backend(with_reference=False, *["train.seed=9"])
    other.load_pretrained(str(tmp_path / "model"))
    other.load_state(str(tmp_path / "state"))
    for (n, a), (_, b) in zip(adapter_tensors(be.model), adapter_tensors(other.model)):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    # the same next step from both
    m1, m2 = be.train_step([batch], norm), other.train_step([batch], norm)
    assert m1["loss"] == pytest.approx(m2["loss"], abs=1e-7)
    for (n, a), (_, b) in zip(adapter_tensors(be.model), adapter_tensors(other.model)):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-7)


def test_peft_loads_the_adapter(tmp_path, base_model):
    """The checkpoint's adapter is peft's format: PeftModel.from_pretrained scores like the
    backend."""
    import copy

    from peft import PeftModel

    be = _backend(with_reference=False)
    batch, norm = random_batch(seed=3)
    be.train_step([batch], norm)
    be.save_pretrained(str(tmp_path / "model"))
    pm = PeftModel.from_pretrained(copy.deepcopy(base_model), str(tmp_path / "model")).eval()
    np.testing.assert_allclose(hf_logprobs(pm, batch.tokens),
                               be.logprobs(batch.tokens, temperature=1.0), atol=1e-5)


def test_adapter_with_another_rank_is_refused(tmp_path):
    from mindrl.errors import UserError

    be = _backend(with_reference=False)
    be.save_pretrained(str(tmp_path / "model"))
    other = _backend("model.lora.rank=2", with_reference=False)
    with pytest.raises(UserError, match="r=4"):
        other.load_pretrained(str(tmp_path / "model"))
