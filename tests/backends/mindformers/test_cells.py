"""The mindformers backend's compiled cells, run in MindSpore graph mode on CPU with this
project's own Qwen2 Cell standing in for mindformers' model (same `.model` / `.lm_head`
interface): the vocabulary-parallel log-prob head (shard strategies are inert without a parallel
context; MindSpore 2.10 refuses semi-auto parallel on CPU) must give the torch backend's
log-probs on right-packed rows, and the RL loss cell must give the NumPy reference loss."""

from types import SimpleNamespace

import numpy as np
import pytest

from mindrl.backends.mindformers.layout import ParallelLayout, pack_right
from mindrl.config.schema import KLConfig, RolloutCorrectionConfig
from mindrl.types import LossNormalizers


@pytest.fixture(scope="module")
def cells(tiny_dir):
    import mindspore as ms
    from mindspore import nn, ops

    from algorithms.ops import get_ops
    from mindrl.backends.mindformers.backend import _cells
    from mindrl.backends.mindspore import weights as W
    from mindrl.backends.mindspore.model import Qwen2ForCausalLM, Qwen2Spec

    get_ops("mindspore")                       # MindSpore's numpy-2 warm-up
    qwen = Qwen2ForCausalLM(Qwen2Spec.from_hf(W.read_config(tiny_dir)), dtype=ms.float32)
    W.load_into(qwen, W.iter_checkpoint(tiny_dir))

    class Backbone(nn.Cell):
        """mindformers' LlamaModel(tokens) -> hidden: causal, no padding mask."""

        def __init__(self):
            super().__init__(auto_prefix=False)
            self.qwen = qwen

        def construct(self, tokens):
            B, S = tokens.shape
            pos = ops.arange(0, S, 1, dtype=ms.int32).reshape(1, S).broadcast_to((B, S))
            return self.qwen.hidden(tokens, pos, ops.ones((B, S), ms.int32))

    class LMHead(nn.Cell):
        def __init__(self):
            super().__init__(auto_prefix=False)
            self.qwen = qwen

        def construct(self, h):
            return self.qwen.head(h)

    return SimpleNamespace(ms=ms, nn=nn, ops=ops, _cells=_cells,
                           model=SimpleNamespace(model=Backbone(), lm_head=LMHead()))


def _build(cells, cfg, temperature, has_ref=False, has_old=True, has_roll=False):
    layout = ParallelLayout(world=1, dp=1, tp=1, pp=1, micro_batches=1, rollout_tp=1)
    return cells._cells(cells.ms, cells.nn, cells.ops, layout, cfg.algorithm,
                        1.0 / temperature, has_ref, has_old, has_roll)


# each option the RL loss reads: the loss cell must give the reference loss with it on
OPTIONS = {
    "default": {},
    "tis_cap": {"tis_cap": 1.02},
    "rollout_correction": {"rollout_correction": RolloutCorrectionConfig(
        rollout_is="token", rollout_is_threshold=1.02, rollout_rs="token_k1",
        rollout_rs_threshold="0.97_1.03")},
    "entropy_coef": {"entropy_coef": 0.3},
    "kl": {"kl": KLConfig(coef=0.2, estimator="k3"), "clip_eps_low": 0.01},
}


def _reference(tiny_dir, make_cfg, options):
    from mindrl.backends.base import build_backend

    cfg = make_cfg(tiny_dir, algorithm={"loss_agg_mode": "token_mean", **options})
    return cfg, build_backend("torch", cfg)


@pytest.mark.parametrize("option", [o if o == "default" else pytest.param(o, marks=pytest.mark.slow)
                                    for o in sorted(OPTIONS)])
@pytest.mark.slow
def test_head_and_loss_match_the_references(cells, tiny_dir, make_cfg, fixed_batch, option):
    from algorithms.is_correction import needs_rollout_logp
    from algorithms.ops import get_ops
    from algorithms.rl_loss import rl_loss

    ms = cells.ms
    cfg, torch_be = _reference(tiny_dir, make_cfg, OPTIONS[option])
    batch = fixed_batch(B=6, P=6, T=5, advantage=0.5)
    tb = batch.tokens
    rng = np.random.default_rng(0)
    adv = (batch.advantages * rng.normal(1.0, 1.0, (6, 1))).astype(np.float32)  # signs vary
    # the torch backend's log-probs and token entropies: an independent implementation
    want, want_ent = torch_be.logprobs_and_entropy(tb, temperature=0.7)
    ids, pos = pack_right(tb.input_ids, tb.attention_mask, tb.prompt_len, seq_length=12, pad_id=0)
    has_roll = needs_rollout_logp(cfg.algorithm)
    Head, RLLoss = _build(cells, cfg, temperature=0.7, has_ref=bool(cfg.algorithm.kl.coef),
                          has_roll=has_roll)
    mask = tb.response_mask.astype(np.float32)
    old = ((want - 0.05) * mask).astype(np.float32)           # ratio != 1: clipping matters
    roll = ((old + rng.normal(0, 0.03, old.shape)) * mask).astype(np.float32)
    ref = ((want + rng.normal(0, 0.2, old.shape)) * mask).astype(np.float32)
    norm = LossNormalizers(global_tokens=float(mask.sum()), global_seqs=6.0, max_len=5.0)
    inv = np.full(6, 1.0 / norm.global_tokens, np.float32)
    ms.set_context(mode=ms.GRAPH_MODE)
    try:
        head = Head(cells.model)
        out = head(ms.Tensor(ids), ms.Tensor(pos))
        got = (out[0] if cfg.algorithm.entropy_coef else out).asnumpy() * mask
        np.testing.assert_allclose(got, want, atol=5e-5)
        if cfg.algorithm.entropy_coef:
            np.testing.assert_allclose(out[1].asnumpy() * mask, want_ent, atol=5e-5)
        loss_cell = RLLoss(head)
        inputs = (ids, pos, mask, adv, old, ref, roll, inv)
        loss = float(loss_cell(*(ms.Tensor(x) for x in inputs)).asnumpy())
        # micro-batches fed one at a time (train.micro_batch_size, gradient accumulation)
        # with the global normaliser add up to the whole batch's loss
        parts = sum(float(loss_cell(*(ms.Tensor(x[rows]) for x in inputs)).asnumpy())
                    for rows in (slice(0, 2), slice(2, 4), slice(4, 6)))
    finally:
        ms.set_context(mode=ms.PYNATIVE_MODE)
    np_ops = get_ops("numpy")
    f64 = lambda a: a.astype(np.float64)  # noqa: E731
    kw = dict(logp=f64(want), old_logp=old, advantages=adv, response_mask=mask,
              ref_logp=ref if cfg.algorithm.kl.coef else None, cfg=cfg.algorithm,
              global_tokens=norm.global_tokens, global_seqs=norm.global_seqs,
              max_len=norm.max_len)
    expect, _ = rl_loss(np_ops, rollout_logp=roll if has_roll else None,
                        entropy=f64(want_ent), **kw)
    assert loss == pytest.approx(float(expect), rel=1e-4, abs=1e-6)
    assert parts == pytest.approx(loss, rel=1e-5, abs=1e-7)
    assert abs(loss) > 1e-4
    if option != "default":     # the option changes the loss: a cell ignoring it would differ
        bare, _ = rl_loss(np_ops, **{**kw, "cfg": make_cfg(tiny_dir).algorithm,
                                     "ref_logp": None})
        assert abs(float(expect) - float(bare)) > 1e-3 * abs(float(bare)), option


@pytest.mark.parametrize("rows,dp,micro,want", [
    (64, 1, 8, 8), (64, 1, 64, 1), (64, 4, 8, 2), (64, 4, 16, 1), (48, 2, 5, 6),
    (12, 1, 5, 3), (8, 8, 1, 1),
])
def test_accumulation_steps_bound_the_rows_per_device(rows, dp, micro, want):
    from mindrl.backends.mindformers.layout import accumulation_steps

    m = accumulation_steps(rows, dp, micro)
    assert m == want
    assert (rows // dp) % m == 0 and rows // dp // m <= micro


@pytest.mark.slow
def test_mindformers_loss_reads_every_algorithm_key_the_torch_loss_reads(cells, tiny_dir,
                                                                          make_cfg, fixed_batch):
    """The options walk for backend=mindformers, through its loss construction: with every loss
    option on, each ``algorithm.*`` key the torch backend's RL loss reads is read by the
    mindformers loss cell too (a key it never reads would be accepted and ignored)."""
    import sys
    from pathlib import Path

    from algorithms.is_correction import needs_rollout_logp
    from mindrl.types import TrainBatch

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "config"))
    from options_read import recording

    on = {"tis_cap": 1.02, "entropy_coef": 0.3, "kl": KLConfig(coef=0.2, estimator="k3"),
          "rollout_correction": OPTIONS["rollout_correction"]["rollout_correction"]}
    cfg, torch_be = _reference(tiny_dir, make_cfg, on)
    batch = fixed_batch(B=4, P=6, T=5, advantage=0.5)
    tb = batch.tokens
    mask = tb.response_mask.astype(np.float32)
    logp = torch_be.logprobs(tb, temperature=0.7)
    old = ((logp - 0.05) * mask).astype(np.float32)
    norm = LossNormalizers(float(mask.sum()), 4.0, 5.0)
    with recording() as reads:
        torch_be._micro_loss(TrainBatch(tb, batch.advantages, old, old, old), norm)
    want = {k for k in reads if k.startswith("algorithm.")}
    ms, nn = cells.ms, cells.nn

    class Scores(nn.Cell):
        """The head's outputs (log-probs, entropies), so the loss cell runs in PyNative, where
        every read of the config is a Python attribute read."""

        def construct(self, ids, positions):
            return ms.Tensor(logp), ms.Tensor(np.ones_like(logp))

    with recording() as reads:
        _, RLLoss = _build(cells, cfg, temperature=0.7, has_ref=True,
                           has_roll=needs_rollout_logp(cfg.algorithm))
        inv = np.full(4, 1.0 / norm.global_tokens, np.float32)
        ids = np.zeros((4, 13), np.int32)
        RLLoss(Scores())(*(ms.Tensor(x) for x in (
            ids, ids[:, :5], mask, batch.advantages, old, old, old, inv)))
    got = {k for k in reads if k.startswith("algorithm.")}
    assert {"algorithm.tis_cap", "algorithm.entropy_coef",
            "algorithm.rollout_correction.rollout_is"} <= want, sorted(want)
    assert not want - got, f"read by the torch loss, not by mindformers': {sorted(want - got)}"
