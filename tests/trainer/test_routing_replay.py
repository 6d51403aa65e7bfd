"""Routing replay for mixture-of-experts models (``model.moe.routing_replay``, torch backend):
the native engine records each token's experts, a trainer forward replays them with the
routing weights recomputed from its own router, and on a model whose router is near-tied the
rollout-vs-trainer gap shrinks from routing noise to float noise."""

import json

import numpy as np
import pytest
import torch

from mindrl.types import SamplingParams, pad_token_batch

pytestmark = pytest.mark.slow


def _backend(path, make_cfg, mode="rollout"):
    from mindrl.backends.base import build_backend
    from mindrl.config.loader import load_config

    cfg = load_config(None, [f"model.path={path}", f"model.moe.routing_replay={mode}",
                             "model.chat_template=none", "data.max_prompt_len=64",
                             "rollout.max_new_tokens=16", "train.threads=1"])
    return build_backend("torch", cfg)


@pytest.fixture(scope="module")
def moe_dir(tmp_path_factory):
    from mindrl.models.tiny import resolve_model_path

    return resolve_model_path("builtin:tiny-qwen3-moe",
                              cache_dir=str(tmp_path_factory.mktemp("moe")))


def _near_tied(src, dst, drift, seed=0):
    """Copy of ``src`` whose routers have experts 1 and 2 tied up to 1e-7 (slot 2 of the top 2
    is then decided by rounding), plus ``drift`` x a random direction on expert 2's row."""
    import transformers

    model = transformers.AutoModelForCausalLM.from_pretrained(src).float()
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("mlp.gate.weight"):
                n = torch.randn(p.shape[1], generator=g)
                p[2] = p[1] + 1e-7 * n / n.norm()
                d = torch.randn(p.shape[1], generator=torch.Generator().manual_seed(seed + 1))
                p[2] += drift * d / d.norm()
    model.save_pretrained(dst)
    for f in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja",
              "generation_config.json", "mindrl_tiny.json"):
        try:
            (dst / f).write_bytes((src / f).read_bytes())
        except FileNotFoundError:
            pass
    return str(dst)


def test_replay_identities_and_gradient(moe_dir, make_cfg):
    """Replaying the model's own routes (or none: all -1) changes nothing; forcing other
    experts changes the log-probs, and the router still gets a gradient under replay."""
    be = _backend(moe_dir, make_cfg, mode="old")
    rng = np.random.default_rng(0)
    prompts = [list(rng.integers(5, 1000, n)) for n in (6, 13, 9)]
    resps = [list(rng.integers(5, 1000, n)) for n in (7, 3, 10)]
    tb = pad_token_batch(prompts, resps, 0)
    native = be.logprobs(tb, temperature=1.0)
    routes = be.record_routes(tb)
    L, k = routes.shape[2:]
    assert routes.dtype == np.int16 and L == 2 and k == 2
    assert (routes[tb.attention_mask == 1] >= 0).all()
    assert (routes[tb.attention_mask == 0] == -1).all()
    tb.routing = routes
    np.testing.assert_allclose(be.logprobs(tb, temperature=1.0), native, atol=1e-6)
    assert be.route_flip_fraction() == 0.0
    tb.routing = np.full_like(routes, -1)
    np.testing.assert_allclose(be.logprobs(tb, temperature=1.0), native, atol=1e-6)
    forced = routes.copy()                         # every token: the two experts it did not use
    real = tb.attention_mask == 1
    for i, j in zip(*np.nonzero(real)):
        for layer in range(L):
            forced[i, j, layer] = sorted(set(range(4)) - set(routes[i, j, layer].tolist()))
    tb.routing = forced
    moved = be.logprobs(tb, temperature=1.0)
    assert np.abs(moved - native).max() > 1e-2
    assert be.route_flip_fraction() == 1.0
    # the router's gradient flows through the recomputed weights
    be.model.zero_grad()
    logits = be._response_logits(be.model, tb, 1.0)
    logits.logsumexp(-1).sum().backward()
    g = be.model.model.layers[0].mlp.gate.weight.grad
    assert g is not None and float(g.abs().sum()) > 0


def test_engine_records_the_routes_the_trainer_computes(moe_dir, make_cfg):
    """The native engine's recorded experts for every fed token equal a trainer forward's
    top-k on the same weights (prefill shared by a group's samples, rows dropping out)."""
    from mindrl.models.moe import layout_routes
    from mindrl.rollout.native_torch import make_native_engine

    be = _backend(moe_dir, make_cfg, mode="rollout")
    eng = make_native_engine(None, backend=be)
    eng.record_routes = True
    prompts = [[5, 6, 7, 8, 9], [30, 31, 32], [200, 201, 202, 203, 204, 205, 206]]
    stops = list(range(0, 1024, 5))               # a fifth of the vocabulary: rows end early
    ro = eng.generate(prompts, SamplingParams(n=3, temperature=1.0, max_new_tokens=12, seed=1,
                                              stop_token_ids=stops))
    assert len(ro.routed_experts) == 9
    for p, r, rt in zip(ro.prompt_ids, ro.response_ids, ro.routed_experts):
        assert rt.shape == (len(p) + len(r) - 1, 2, 2)
    assert len(set(len(r) for r in ro.response_ids)) > 1          # rows left at different steps
    P, T = max(map(len, ro.prompt_ids)), max(map(len, ro.response_ids))
    tb = pad_token_batch(ro.prompt_ids, ro.response_ids, 0, P, T)
    got = layout_routes(ro.routed_experts, [len(p) for p in ro.prompt_ids], P, T)
    want = be.record_routes(tb)
    fed = got >= 0
    assert fed.any()
    np.testing.assert_array_equal(np.sort(got, -1)[fed], np.sort(want, -1)[fed])
    # each row's last token was never fed: no route recorded there
    for i, r in enumerate(ro.response_ids):
        assert (got[i, P + len(r) - 1] == -1).all()
    # the rollout's own log-probs under replay equal the engine's
    tb.routing = got
    lp = be.logprobs(tb, temperature=1.0)
    for i, x in enumerate(ro.logprobs):
        np.testing.assert_allclose(lp[i, :len(x)], x, atol=1e-5)


def test_near_tied_router_gap_shrinks_with_replay(moe_dir, make_cfg, tmp_path):
    """An engine copy whose experts 1 and 2 are tied to 1e-7, and a trainer copy whose expert
    2 drifted by 1e-3 (what another kernel or an update does to a near tie): without replay
    the trainer routes a share of the tokens elsewhere and its log-probs miss the rollout's by
    far more than float noise; replaying the rollout's experts closes the gap."""
    from pathlib import Path

    from mindrl.rollout.native_torch import NativeTorchEngine

    src = Path(moe_dir)
    engine_dir = _near_tied(src, tmp_path / "engine", drift=0.0)
    trainer_dir = _near_tied(src, tmp_path / "trainer", drift=1e-3)
    be = _backend(trainer_dir, make_cfg, mode="rollout")
    eng = NativeTorchEngine.from_config(be.cfg, engine_dir)
    eng.record_routes = True
    rng = np.random.default_rng(3)
    prompts = [list(rng.integers(5, 1000, int(n))) for n in rng.integers(4, 12, 8)]
    ro = eng.generate(prompts, SamplingParams(n=4, temperature=1.0, max_new_tokens=12, seed=0))
    from mindrl.models.moe import layout_routes

    P, T = max(map(len, ro.prompt_ids)), max(map(len, ro.response_ids))
    tb = pad_token_batch(ro.prompt_ids, ro.response_ids, 0, P, T)
    rollout = np.zeros(tb.response_mask.shape, np.float32)
    for i, x in enumerate(ro.logprobs):
        rollout[i, :len(x)] = x
    m = tb.response_mask
    native_gap = np.abs(be.logprobs(tb, temperature=1.0) - rollout) * m
    tb.routing = layout_routes(ro.routed_experts, [len(p) for p in ro.prompt_ids], P, T)
    replay_gap = np.abs(be.logprobs(tb, temperature=1.0) - rollout) * m
    flips = be.route_flip_fraction()
    print(json.dumps({"flip_frac": flips, "native_gap_max": float(native_gap.max()),
                      "native_gap_mean": float(native_gap.sum() / m.sum()),
                      "replay_gap_max": float(replay_gap.max()),
                      "replay_gap_mean": float(replay_gap.sum() / m.sum())}))
    assert flips > 0.05                          # the test's premise: routes did flip
    assert native_gap.max() > 5e-3              # measured 1.6e-2 (13% of routes flipped)
    assert replay_gap.max() < 1e-3              # measured 2e-5
    assert replay_gap.sum() < native_gap.sum() / 10


def length_reward(completions, **_):
    """Longer completions score higher: the groups' rewards differ, so advantages are not 0."""
    return [len(text) / 10.0 for text in completions]


@pytest.mark.parametrize("mode", ["rollout", "old"])
def test_grpo_steps_with_replay(mode, moe_dir, tmp_path):
    """``mindrl train`` with routing replay on the MoE model: two GRPO steps (two mini-batches
    each, so old log-probs are computed and replayed), the flip metric logged, weights move."""
    from mindrl.config.loader import load_config
    from mindrl.trainer.rl import RLTrainer

    cfg = load_config(None, [
        f"model.path={moe_dir}", "model.chat_template=none", f"model.moe.routing_replay={mode}",
        "data.train_file=arithmetic:digits=2,ops=+", "data.max_val_samples=8", "rollout.n=4",
        "rollout.max_new_tokens=8", "train.prompts_per_step=2", "train.mini_batch_size=4",
        "train.micro_batch_size=4", "train.lr=1e-3", "train.steps=2", "reward.num_workers=0",
        "reward.functions=[{name: 'test_routing_replay:length_reward'}]",
        "logging.tensorboard=false", "logging.progress_bar=false", "logging.plot=false",
        "checkpoint.save_final=false", f"logging.output_dir={tmp_path / 'run'}"])
    tr = RLTrainer(cfg)
    tr.fit()
    tr.close()
    rows = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]
    for r in rows:
        assert 0.0 <= r["moe/route_flip_frac"] <= 1.0
        assert r["rollout/logprob_gap_mean"] < 1e-4 and r["grad_norm"] > 0


def test_config_errors_name_the_key():
    from mindrl.config.loader import load_config
    from mindrl.errors import ConfigError

    for over, part in ((["backend=mindformers", "device=ascend"], "needs backend=torch or mind"),
                       (["train.padding_free=true"], "padding_free=false"),
                       (["rollout.engine=vllm"], "needs rollout.engine=native"),
                       (["rollout.mode=async_ray"], "rollout.mode=async_ray is not supported")):
        with pytest.raises(ConfigError, match="model.moe.routing_replay=rollout") as e:
            load_config(None, ["model.moe.routing_replay=rollout", *over])
        assert part in str(e.value)


def test_dense_model_is_refused_in_one_line(tiny_dir, make_cfg):
    from mindrl.errors import UserError

    with pytest.raises(UserError, match="has no top-k expert routers"):
        _backend(tiny_dir, make_cfg, mode="old")
