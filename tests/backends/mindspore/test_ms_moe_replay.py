"""Routing replay on the MindSpore backend (``model.moe.routing_replay=old``), checked against
the torch backend's (an independent implementation: forward hooks on transformers' routers):
the same recorded routes, the same log-probs and GRPO gradients under forced routes, and a
GRPO run that replays its own routes."""

import json
import os
import shutil

import numpy as np
import pytest
import torch

from mindrl.types import pad_token_batch
from ms_helpers import make_family_model, ms_config, random_batch
from test_ms_train import _assert_grads_close, _norm, _torch_loss_and_grads

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def moe(tmp_path_factory, tiny_dir):
    from mindrl.backends.base import build_backend
    from mindrl.backends.mindspore import MindSporeBackend
    from mindrl.config.loader import load_config

    d = tmp_path_factory.mktemp("qwen3_moe")
    hf = make_family_model(d, "qwen3_moe", seed=5)
    for f in ("tokenizer.json", "tokenizer_config.json"):      # the torch backend loads one
        shutil.copy(os.path.join(tiny_dir, f), d / f)
    ms_be = MindSporeBackend(ms_config("data.max_prompt_len=32", "model.moe.routing_replay=old"),
                             model_path=str(d))
    torch_be = build_backend("torch", load_config(None, [
        f"model.path={d}", "model.moe.routing_replay=old", "train.threads=1"]))
    return str(d), hf, ms_be, torch_be


def _other_experts(routes, att, experts=4):
    """Every real token routed to the experts it did NOT choose (top-2 of 4)."""
    out = routes.copy()
    for i, j in zip(*np.nonzero(att == 1)):
        for layer in range(routes.shape[2]):
            out[i, j, layer] = sorted(set(range(experts)) - set(routes[i, j, layer].tolist()))
    return out


def test_routes_and_replayed_logprobs_match_torch(moe):
    _, _, ms_be, torch_be = moe
    rng = np.random.default_rng(0)
    tb = pad_token_batch([list(rng.integers(5, 300, n)) for n in (6, 13, 9)],
                         [list(rng.integers(5, 300, n)) for n in (7, 3, 10)], 0)
    native = ms_be.logprobs(tb, temperature=1.0)
    got, want = ms_be.record_routes(tb), torch_be.record_routes(tb)
    real = tb.attention_mask == 1
    assert got.shape == want.shape == tb.input_ids.shape + (2, 2)
    np.testing.assert_array_equal(np.sort(got, -1)[real], np.sort(want, -1)[real])
    assert (got[~real] == -1).all()
    tb.routing = got                                  # its own routes: nothing changes
    np.testing.assert_allclose(ms_be.logprobs(tb, temperature=1.0), native, atol=1e-6)
    tb.routing = _other_experts(want, tb.attention_mask)
    forced = ms_be.logprobs(tb, temperature=1.0)
    assert np.abs(forced - native).max() > 1e-2
    np.testing.assert_allclose(forced, torch_be.logprobs(tb, temperature=1.0), atol=1e-4)


def test_grpo_gradients_under_replay_match_torch(moe):
    from mindrl.backends.torch.moe_replay import RouterHooks

    directory, hf, ms_be, torch_be = moe
    rng = np.random.default_rng(1)
    batch = random_batch(rng, 4, max_prompt=9)
    batch.tokens.input_ids[batch.tokens.input_ids >= 300] %= 300
    routes = _other_experts(torch_be.record_routes(batch.tokens), batch.tokens.attention_mask)
    batch.tokens.routing = routes
    got = ms_be.gradients([batch], _norm(batch))
    ref_model = type(hf).from_pretrained(directory).float()
    hooks = RouterHooks.of(ref_model)
    with hooks.replaying(routes, torch.device("cpu")):
        _, ref = _torch_loss_and_grads(ref_model, batch, ms_be.cfg, _norm(batch))
    from mindrl.models.moe import unfuse_experts

    ref = dict(unfuse_experts(ref.items()))
    assert hooks.take_flip_fraction() == 1.0          # the replay did act in the reference
    _assert_grads_close(got, ref)
    router = got["model.layers.0.mlp.gate.weight"]
    assert np.abs(router).max() > 0                   # the router learns under replay


def test_sampler_records_the_routes_the_trainer_computes(moe):
    """The MindSpore sampler's recorded experts (prefill shared by a group, rows leaving the
    decode batch at different steps) equal a trainer forward's on every fed token, and the
    trainer replaying them reproduces the sampler's log-probs."""
    from mindrl.models.moe import layout_routes
    from mindrl.types import SamplingParams

    _, _, ms_be, _ = moe
    eng = ms_be.native_engine()
    eng.record_routes = True
    try:
        prompts = [[5, 6, 7, 8, 9], [30, 31, 32], [200, 201, 202, 203, 204, 205, 206]]
        ro = eng.generate(prompts, SamplingParams(n=3, temperature=1.0, max_new_tokens=12,
                                                  seed=1, stop_token_ids=list(range(0, 300, 5))))
    finally:
        eng.record_routes = False
    assert len(set(len(r) for r in ro.response_ids)) > 1
    for p, r, rt in zip(ro.prompt_ids, ro.response_ids, ro.routed_experts):
        assert rt.shape == (len(p) + len(r) - 1, 2, 2) and rt.dtype == np.int16
    P, T = max(map(len, ro.prompt_ids)), max(map(len, ro.response_ids))
    tb = pad_token_batch(ro.prompt_ids, ro.response_ids, 0, P, T)
    got = layout_routes(ro.routed_experts, [len(p) for p in ro.prompt_ids], P, T)
    want = ms_be.record_routes(tb)
    fed = got >= 0
    np.testing.assert_array_equal(np.sort(got, -1)[fed], np.sort(want, -1)[fed])
    assert fed.sum() == sum(len(p) + len(r) - 1 for p, r in
                            zip(ro.prompt_ids, ro.response_ids)) * 2 * 2
    tb.routing = got
    lp = ms_be.logprobs(tb, temperature=1.0)
    for i, x in enumerate(ro.logprobs):
        np.testing.assert_allclose(lp[i, :len(x)], x, atol=1e-4)


@pytest.mark.parametrize("mode", ["rollout"])     # "old" runs too (+60 s); record_routes above
def test_grpo_run_replays_routes(mode, tmp_path):
    """`mindrl train` on builtin:tiny-qwen3-moe with backend=mindspore and routing replay:
    two mini-batches per step, both replaying the routes the sampler recorded (rollout) or
    the ones recorded before the update (old)."""
    from mindrl.config.loader import load_config
    from mindrl.models.tiny import resolve_model_path
    from mindrl.trainer.rl import RLTrainer

    path = resolve_model_path("builtin:tiny-qwen3-moe", cache_dir=str(tmp_path / "cache"))
    cfg = load_config(None, [
        f"model.path={path}", "backend=mindspore", "model.chat_template=none",
        f"model.moe.routing_replay={mode}", "data.train_file=arithmetic:digits=2,ops=+",
        "data.max_val_samples=8", "rollout.n=4", "rollout.max_new_tokens=8",
        "train.prompts_per_step=2", "train.mini_batch_size=4", "train.micro_batch_size=4",
        "train.lr=1e-3", "train.steps=2", "reward.num_workers=0",
        "reward.functions=[{name: 'test_ms_families:length_reward'}]",
        "logging.tensorboard=false", "logging.progress_bar=false", "logging.plot=false",
        "checkpoint.save_final=false", f"logging.output_dir={tmp_path / 'run'}"])
    tr = RLTrainer(cfg)
    calls = []
    record = tr.backend.record_routes
    tr.backend.record_routes = lambda tb, mb=8: calls.append(len(tb)) or record(tb, mb)
    tr.fit()
    tr.close()
    rows = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]
    assert calls == ([8, 8] if mode == "old" else [])
    for r in rows:
        assert r["grad_norm"] > 0 and np.isfinite(r["loss"])
        assert r["rollout/logprob_gap_mean"] < 1e-4     # the first mini-batch: unchanged policy


def test_load_balancing_loss_and_its_gradient_match_torch(moe, tmp_path):
    """``model.moe.aux_loss_coef``: the MindSpore step adds coef x transformers'
    load-balancing loss of the mini-batch and its gradient, which reaches the routers, equals
    the torch backend's (transformers' own implementation), whether the mini-batch is one
    micro-batch or three (the expert shares are the mini-batch's)."""
    from mindrl.backends.base import build_backend
    from mindrl.backends.mindspore import MindSporeBackend
    from mindrl.config.loader import load_config
    from mindrl.models.moe import unfuse_experts

    directory, _, _, _ = moe
    over = ["model.moe.aux_loss_coef=0.5", "train.threads=1"]
    ms_be = MindSporeBackend(ms_config("data.max_prompt_len=32", *over), model_path=directory)
    torch_be = build_backend("torch", load_config(None, [f"model.path={directory}", *over]))
    rng = np.random.default_rng(2)
    batch = random_batch(rng, 4, max_prompt=9)
    batch.tokens.input_ids[batch.tokens.input_ids >= 300] %= 300
    norm = _norm(batch)
    got = ms_be.gradients([batch], norm)
    torch_be.model.zero_grad()
    loss, metrics = torch_be._micro_loss(batch, norm)
    loss.backward()
    aux = float(metrics["moe/aux_loss"])
    assert 2.0 <= aux < 4.0                 # E x sum f P: k = 2 when balanced, more when not
    ref = dict(unfuse_experts((n, p.grad.numpy()) for n, p in
                              torch_be.model.named_parameters()))
    _assert_grads_close(got, ref)
    split = ms_be.gradients([batch.rows(np.array(r)) for r in ([0, 1], [2], [3])], norm)
    for name, g in got.items():
        scale = max(float(np.abs(g).max()), 1e-3)
        np.testing.assert_allclose(split[name], g, atol=1e-5 * scale, rtol=0, err_msg=name)
    # the aux term's own gradient moved the routers: without it they differ
    plain = MindSporeBackend(ms_config("data.max_prompt_len=32"), model_path=directory)
    g0 = plain.gradients([batch], norm)["model.layers.0.mlp.gate.weight"]
    assert np.abs(got["model.layers.0.mlp.gate.weight"] - g0).max() > 1e-4


# Load balancing over 2 msrun workers (msrun_moe_worker.py) is checked in
# test_ms_shard_optimizer.py, in the module's one msrun launch.
