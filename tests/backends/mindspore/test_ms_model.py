"""The MindSpore Qwen2 model: kernel selection, parity with transformers, checkpoint I/O."""

import json
import os

import numpy as np
import pytest
import torch

import mindspore as ms

from mindrl.backends.mindspore import weights as W
from mindrl.backends.mindspore.kernels import FUSED, PORTABLE, select_kernels
from mindrl.backends.mindspore.model import Qwen2ForCausalLM, Qwen2Spec
from mindrl.types import pad_token_batch
from ms_helpers import VOCAB


def test_kernel_selection_picks_portable_path_on_cpu():
    assert ms.get_context("device_target") == "CPU"
    assert select_kernels() is PORTABLE
    assert select_kernels("CPU") is PORTABLE
    assert select_kernels("Ascend") is FUSED      # chosen, never run here


def _load(directory):
    net = Qwen2ForCausalLM(Qwen2Spec.from_hf(W.read_config(directory)))
    W.load_into(net, W.iter_checkpoint(directory))
    return net


def _batch(seed=0):
    rng = np.random.default_rng(seed)
    prompts = [list(rng.integers(1, VOCAB, n)) for n in (3, 9, 6)]
    resps = [list(rng.integers(1, VOCAB, n)) for n in (5, 1, 7)]
    return pad_token_batch(prompts, resps, 0)


def _hf_logits(model, tb):
    with torch.no_grad():
        return model(input_ids=torch.tensor(tb.input_ids),
                     attention_mask=torch.tensor(tb.attention_mask),
                     position_ids=torch.tensor(tb.position_ids)).logits.numpy()


@pytest.mark.parametrize("which", ["hf_tied", "hf_untied"])
def test_parameter_names_are_hf_names(which, request):
    directory, hf = request.getfixturevalue(which)
    net = _load(directory)
    names = {p.name for p in net.get_parameters()}
    expected = set(hf.state_dict())
    if hf.config.tie_word_embeddings:
        expected.discard("lm_head.weight")
    assert names == expected


@pytest.mark.parametrize("which", ["hf_tied", "hf_untied"])
def test_logprobs_match_transformers(which, request):
    directory, hf = request.getfixturevalue(which)
    net = _load(directory)
    tb = _batch()
    T, P = tb.response_len, tb.prompt_len

    @ms.jit
    def response_logits(ids, pos, att):
        return net.response_logits(ids, pos, att, T)

    got = response_logits(ms.Tensor(tb.input_ids, ms.int32), ms.Tensor(tb.position_ids, ms.int32),
                          ms.Tensor(tb.attention_mask, ms.float32)).asnumpy()
    ref = _hf_logits(hf, tb)[:, P - 1:-1]
    mask = tb.response_mask > 0
    for temp in (1.0, 0.7):
        lp = torch.log_softmax(torch.tensor(got / temp), -1).numpy()
        lr = torch.log_softmax(torch.tensor(ref / temp), -1).numpy()
        tok = tb.input_ids[:, P:]
        a = np.take_along_axis(lp, tok[..., None], -1)[..., 0][mask]
        b = np.take_along_axis(lr, tok[..., None], -1)[..., 0][mask]
        np.testing.assert_allclose(a, b, atol=1e-4)


def test_sharded_bf16_checkpoint_roundtrip_loads_in_transformers(hf_untied, tmp_path):
    import transformers

    directory, hf = hf_untied
    net = _load(directory)
    out = tmp_path / "bf16"
    # tiny shard limit: several files + model.safetensors.index.json
    W.write_checkpoint(str(out), W.named_arrays(net), dtype="bfloat16", max_shard_bytes=20_000)
    cfg = W.read_config(directory)
    (out / "config.json").write_text(json.dumps(cfg))
    assert (out / "model.safetensors.index.json").is_file()
    assert len([f for f in os.listdir(out) if f.endswith(".safetensors")]) > 1
    reloaded = transformers.Qwen2ForCausalLM.from_pretrained(str(out), dtype=torch.float32)
    for name, p in hf.state_dict().items():
        q = reloaded.state_dict()[name]
        np.testing.assert_allclose(q.numpy(), p.numpy(), rtol=1e-2, atol=1e-2)  # bf16 rounding
        ref_bf16 = p.to(torch.bfloat16).float().numpy()
        np.testing.assert_array_equal(q.numpy(), ref_bf16)   # round-to-nearest-even, as torch
    # and MindSpore reads the sharded bf16 directory back
    net2 = _load(str(out))
    a = dict(W.named_arrays(net2))["model.layers.1.mlp.down_proj.weight"]
    np.testing.assert_array_equal(a, hf.state_dict()["model.layers.1.mlp.down_proj.weight"]
                                  .to(torch.bfloat16).float().numpy())


def test_fp32_checkpoint_is_exact(hf_tied, tmp_path):
    directory, hf = hf_tied
    net = _load(directory)
    W.write_checkpoint(str(tmp_path), W.named_arrays(net))
    from safetensors.numpy import load_file

    loaded = load_file(str(tmp_path / "model.safetensors"))
    for name, arr in loaded.items():
        np.testing.assert_array_equal(arr, hf.state_dict()[name].numpy())
