"""The mindformers backend's compiled cells, run in MindSpore graph mode on CPU with this
project's own Qwen2 Cell standing in for mindformers' model (same `.model` / `.lm_head`
interface): the vocabulary-parallel log-prob head (shard strategies are inert without a parallel
context; MindSpore 2.10 refuses semi-auto parallel on CPU) must give the torch backend's
log-probs on right-packed rows, and the RL loss cell must give the NumPy reference loss."""

from types import SimpleNamespace

import numpy as np
import pytest

from mindrl.backends.mindformers.layout import ParallelLayout, pack_right
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


def _build(cells, cfg, temperature, has_ref=False, has_old=True):
    layout = ParallelLayout(world=1, dp=1, tp=1, pp=1, micro_batches=1, rollout_tp=1)
    return cells._cells(cells.ms, cells.nn, cells.ops, layout, cfg.algorithm,
                        1.0 / temperature, has_ref, has_old)


def test_head_and_loss_match_the_references(cells, tiny_dir, make_cfg, fixed_batch):
    from algorithms.ops import get_ops
    from algorithms.rl_loss import rl_loss
    from mindrl.backends.base import build_backend

    ms = cells.ms
    cfg = make_cfg(tiny_dir, algorithm={"loss_agg_mode": "token_mean"})
    batch = fixed_batch(B=6, P=6, T=5, advantage=0.5)
    tb = batch.tokens
    want = build_backend("torch", cfg).logprobs(tb, temperature=0.7)
    ids, pos = pack_right(tb.input_ids, tb.attention_mask, tb.prompt_len, seq_length=12, pad_id=0)
    Head, RLLoss = _build(cells, cfg, temperature=0.7)
    ms.set_context(mode=ms.GRAPH_MODE)
    try:
        head = Head(cells.model)
        got = head(ms.Tensor(ids), ms.Tensor(pos)).asnumpy() * tb.response_mask
        np.testing.assert_allclose(got, want, atol=5e-5)
        old = (want - 0.05).astype(np.float32)               # ratio != 1: clipping matters
        norm = LossNormalizers(global_tokens=float(tb.response_mask.sum()), global_seqs=6.0,
                               max_len=5.0)
        inv = np.full(6, 1.0 / norm.global_tokens, np.float32)
        zeros = np.zeros_like(old)
        loss = RLLoss(head)(*(ms.Tensor(x) for x in (ids, pos, tb.response_mask.astype(np.float32),
                                                     batch.advantages, old, zeros, inv)))
        loss = float(loss.asnumpy())
    finally:
        ms.set_context(mode=ms.PYNATIVE_MODE)
    ref, _ = rl_loss(get_ops("numpy"), logp=want.astype(np.float64), old_logp=old,
                     advantages=batch.advantages, response_mask=tb.response_mask,
                     cfg=cfg.algorithm, global_tokens=norm.global_tokens,
                     global_seqs=norm.global_seqs, max_len=norm.max_len)
    assert loss == pytest.approx(float(ref), rel=1e-4, abs=1e-6)
    assert abs(loss) > 1e-4
