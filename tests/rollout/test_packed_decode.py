"""Decode on packed weights (``rollout.native_packed_weights``, CPU): each packed linear layer
equals ``F.linear`` on its weight (float32 to summation order, bfloat16 bit for bit) at every
row count, runs the packed copy only where it may (no grad, same weight, the packing thread),
gives its own forward back when closed; the native engine's decode steps (not the prefill) run
packed and sample the same tokens with the same log-probs as without packing."""

import threading

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from mindrl.backends.torch.decode_linear import MIN_ROWS, PackedLinears, packing_supported
from mindrl.types import SamplingParams

DTYPES = [torch.float32, torch.bfloat16]


def _layer(dtype, bias=True):
    torch.manual_seed(0)
    return torch.nn.Linear(72, 300, bias=bias).to(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_packed_layer_equals_linear_at_every_row_count(dtype):
    assert packing_supported(dtype)                 # this machine's CPU and torch pack both
    lin = _layer(dtype)
    model = torch.nn.Sequential(lin)
    with torch.no_grad(), PackedLinears(model) as packer:
        assert packer.pack() == 1 and "forward" in vars(lin) and packer.packed_bytes() == 0
        for rows in (1, 2, 3, 4, 7, 16, 33):
            x = torch.randn(rows, 1, 72).to(dtype)             # (batch, step, hidden)
            got, want = model(x), F.linear(x, lin.weight, lin.bias)
            assert got.shape == (rows, 1, 300) and got.dtype == dtype
            if dtype == torch.bfloat16 or rows < MIN_ROWS["float32"]:
                assert torch.equal(got, want)        # the same kernel / MKL's own at one row
            else:
                torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
            if rows == 1:          # float32: one row is MKL's matrix-vector product, unpacked
                assert packer.packed_bytes() == (300 * 72 * 2 if dtype == torch.bfloat16 else 0)
        assert packer.packed_bytes() == 300 * 72 * lin.weight.element_size()
    assert "forward" not in vars(lin) and packer.layers == []       # its own forward back


@pytest.mark.parametrize("dtype", DTYPES)
def test_packed_copy_runs_only_while_the_weight_is_the_packed_one(dtype):
    """A change through ``.data`` bypasses the version counter: the stale packed copy is what
    runs (shows the packed path is taken). An in-place update of the parameter, grad mode,
    another thread or a replaced parameter send the layer back to the plain product."""
    lin = _layer(dtype, bias=False)
    x = torch.randn(4, 72).to(dtype)
    with torch.no_grad():
        before = F.linear(x, lin.weight)
        packer = PackedLinears(lin)
        packer.pack()
        lin(x)                                           # packs the weight
        lin.weight.data.mul_(0.5)                        # unseen by the version counter
        torch.testing.assert_close(lin(x), before)       # the packed copy ran
        lin.weight.mul_(3.0)                              # an optimizer-style in-place update
        assert torch.equal(lin(x), F.linear(x, lin.weight))
    packer.close()
    with torch.no_grad():
        packer.pack()
        lin.weight = torch.nn.Parameter(lin.weight.detach() * 3)
        assert torch.equal(lin(x), F.linear(x, lin.weight))
    packer.close()
    with torch.no_grad():
        packer.pack()
        lin(x)
        lin.weight.data.mul_(0.5)
    y = lin(x)                                                         # grad on
    assert y.requires_grad and torch.equal(y.detach(), F.linear(x, lin.weight).detach())
    out = {}

    def other():
        with torch.no_grad():
            out["y"] = lin(x)

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert torch.equal(out["y"], F.linear(x, lin.weight).detach())
    packer.close()


def test_gradient_layers_and_other_devices_are_left_alone():
    """Only plain ``torch.nn.Linear`` layers with float32 / bfloat16 CPU weights are packed."""
    class Scaled(torch.nn.Linear):                         # a subclass: its own forward
        pass

    model = torch.nn.Sequential(torch.nn.Linear(8, 8), Scaled(8, 8),
                                torch.nn.Linear(8, 8).to(torch.float64), torch.nn.Embedding(4, 8))
    with PackedLinears(model) as packer:
        assert packer.pack() == 1 and [m for m, _ in packer.layers] == [model[0]]
        assert packer.pack() == 1                                      # once


# --------------------------------------------------------------------------- the engine
PROMPTS = [[1, 328, 201, 329, 267, 223, 19, 20, 21, 13, 22, 23, 33, 2, 201],
           [1, 328, 201, 19],
           [1, 333, 223, 26, 22, 810, 811]]
LENGTHS = [2, 5, 16, 9, 3, 16, 7, 1, 12, 4, 14, 6]   # rows of 3 prompts x 4: the live batch
                                                      # shrinks through 12 ... 1 rows


def _force_lengths(targets, eos):
    def per_call(rows):
        want = torch.tensor(targets[:rows])

        def step(row_ids, t, scores):
            scores = scores.clone()
            end = want[row_ids] - 1 == t
            scores[:, eos] = float("-inf")
            scores[end] = float("-inf")
            scores[end, eos] = 0.0
            return scores

        return step

    return per_call


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_engine_samples_the_same_tokens_packed(tiny_dir, make_cfg, dtype):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from mindrl.rollout.native_torch import make_native_engine

    model = AutoModelForCausalLM.from_pretrained(tiny_dir, dtype=getattr(torch, dtype)).eval()
    tok = AutoTokenizer.from_pretrained(tiny_dir)
    model.mindrl_logits_hook = _force_lengths(LENGTHS, tok.eos_token_id)
    cfg = make_cfg(tiny_dir)
    assert cfg.rollout.native_packed_weights is True                  # on by default
    engine = make_native_engine(cfg)
    engine.model, engine.tokenizer = model, tok
    packed_calls = []                         # per head call: rows, whether it ran packed
    model.lm_head.register_forward_hook(lambda mod, args, out: packed_calls.append(
        (args[0].shape[0], "forward" in vars(mod))))
    sp = SamplingParams(n=4, temperature=1.0, max_new_tokens=16, seed=7)
    packed = engine.generate(PROMPTS, sp)
    assert "forward" not in vars(model.lm_head)              # its own forward back after
    engine.packed_weights = False
    calls_packed, packed_calls[:] = list(packed_calls), []
    plain = engine.generate(PROMPTS, sp)
    assert [len(r) for r in packed.response_ids] == LENGTHS
    assert packed.response_ids == plain.response_ids
    tol = 1e-5 if dtype == "float32" else 2e-2
    for a, b in zip(packed.logprobs, plain.logprobs):
        np.testing.assert_allclose(a, b, atol=tol)
    # the prefill (3 prompts) plain, every decode step packed; never packed with the option off
    live = [sum(n > t for n in LENGTHS) for t in range(1, 16)]
    assert calls_packed == [(3, False)] + [(b, True) for b in live if b > 0]
    assert all(not p for _, p in packed_calls) and len(packed_calls) == len(calls_packed)
