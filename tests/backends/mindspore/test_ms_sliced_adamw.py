"""Above one slice (``SLICE_BYTES`` of float32), the replicated MindSpore AdamW updates its flat
vectors slice by slice: the same bits as the whole-vector compiled update, with a few slices of
temporaries instead of ~3 whole vectors."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from mindspore import Parameter, Tensor

from mindrl.backends.mindspore.optim import AdamW, adamw_scalars, slice_plan
from mindrl.backends.mindspore.weights import write_param

SHAPES = [(7, 5), (11,), (), (3, 4, 2), (13, 3)]


def _opt(dtype, slice_bytes=None):
    rng = np.random.default_rng(0)
    ps = [Parameter(Tensor(rng.normal(size=s).astype(np.float32), dtype), name=f"p{i}")
          for i, s in enumerate(SHAPES)]
    return AdamW(ps, weight_decay=0.1, slice_bytes=slice_bytes)


def test_slice_plan_covers_every_row_once():
    sizes = [int(np.prod(s)) for s in SHAPES]
    plan = slice_plan(SHAPES, sizes, 12)
    assert plan[0][0] == 0 and plan[-1][1] == sum(sizes)
    for (lo, hi, pieces), nxt in zip(plan, plan[1:] + [(sum(sizes),)]):
        assert hi == nxt[0] and hi - lo <= 12 or len(pieces) == 1
        assert sum(b - a for *_, a, b in pieces) == hi - lo
    rows = {}
    for _, _, pieces in plan:
        for i, r0, r1, _, _ in pieces:
            rows.setdefault(i, []).append((r0, r1))
    for i, s in enumerate(SHAPES):     # contiguous, in order, all rows
        spans = rows[i]
        assert spans[0][0] == 0 and spans[-1][1] == (s[0] if s else 1)
        assert all(a[1] == b[0] for a, b in zip(spans, spans[1:]))


def _steps_agree(whole, sliced, steps):
    """``steps`` updates of both optimizers with the same random gradients (growing with the
    step, clipped at 1.0): the weights, moments and accumulators come out bit for bit equal."""
    rng = np.random.default_rng(1)
    n = whole.grad_flat.shape[0]
    for step in range(steps):
        g = rng.normal(size=n).astype(np.float32) * (step + 1)
        for o in (whole, sliced):
            write_param(o.grad_flat, g)
            o.apply(1e-2, 1.0, float(np.linalg.norm(g)))
    for a, b in zip(whole.params, sliced.params):
        np.testing.assert_array_equal(a.asnumpy(), b.asnumpy())
    for name in ("m_flat", "v_flat", "grad_flat"):
        np.testing.assert_array_equal(getattr(whole, name).asnumpy(),
                                      getattr(sliced, name).asnumpy())


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_sliced_update_equals_whole_vector_update(dtype):
    import mindspore as ms
    dt = getattr(ms, dtype)
    whole, sliced = _opt(dt), _opt(dt, slice_bytes=4 * 12)
    assert not whole.sliced and sliced.sliced and len(sliced._slices) > 4
    _steps_agree(whole, sliced, 3)
    assert not np.any(sliced.grad_flat.asnumpy())
    if dtype == "float16":
        np.testing.assert_array_equal(whole.master.asnumpy(), sliced.master.asnumpy())


@pytest.mark.slow
def test_update_peak_memory_is_a_few_slices():
    """AdamW.apply on 100M float32 values (0.4 GB per vector) in 20 parameters, peak RSS in a
    child process minus the RSS before the update, in vector sizes. Measured on CPU
    (MindSpore 2.10): the whole-vector compiled update 3.3, the compiled 16 MiB slices 0.37
    (bench/ms_sliced_adamw.py)."""
    code = textwrap.dedent("""
        import resource, sys
        import numpy as np
        from mindspore import Parameter, Tensor
        from mindrl.backends.mindspore.optim import AdamW
        from mindrl.backends.mindspore.weights import write_param
        N, K = 100_000_000, 20
        ps = [Parameter(Tensor(np.full(N // K, 0.5, np.float32)), name=f"p{i}")
              for i in range(K)]
        opt = AdamW(ps, weight_decay=0.01)
        write_param(opt.grad_flat, np.full(N, 0.01, np.float32))
        before = int(open("/proc/self/statm").read().split()[1]) * 4096
        opt.apply(1e-3, 1.0, 0.5)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        assert abs(float(ps[0].asnumpy()[0]) - 0.499) < 1e-4
        print("EXTRA", (peak - before) / (4 * N))
    """)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    extra = float(out.stdout.split("EXTRA")[1])
    assert extra < 1.5, f"the update added {extra:.2f} vector sizes of memory"


@pytest.mark.slow
def test_train_step_with_the_sliced_update_equals_the_fused_step(hf_tied, monkeypatch):
    """A model above one slice trains with the update after the compiled step, slice by slice;
    its weights after 2 steps are the fused (whole-vector, in-graph) step's."""
    from mindrl.backends.mindspore import MindSporeBackend
    from mindrl.backends.mindspore import optim
    from mindrl.types import LossNormalizers
    from ms_helpers import ms_config, random_batch, split

    directory, _ = hf_tied
    cfg = ms_config("train.lr=1e-2", "train.weight_decay=0.1", "train.grad_clip=0.5")
    rng = np.random.default_rng(5)
    batches = [random_batch(rng, 4) for _ in range(2)]

    def trained():
        be = MindSporeBackend(cfg, model_path=directory)
        for b in batches:
            be.train_step(split(b, 2), LossNormalizers(
                float(b.tokens.response_mask.sum()), float(len(b)), 16.0))
        return be

    fused = trained()
    monkeypatch.setattr(optim, "SLICE_BYTES", 4 * 4096)
    sliced = trained()
    assert not fused.optimizer.sliced and sliced.optimizer.sliced
    assert len(sliced.optimizer._slices) > 3
    assert sliced.optimizer_steps == 2
    a, b = dict(fused.named_weights()), dict(sliced.named_weights())
    for k in a:
        np.testing.assert_allclose(b[k], a[k], rtol=0, atol=1e-6, err_msg=k)
    moved = dict(MindSporeBackend(cfg, model_path=directory).named_weights())
    assert all(np.abs(b[k] - moved[k]).max() > 1e-4 for k in b)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_host_update_equals_the_compiled_slices(dtype):
    """On CPU the sliced update runs in place in the vectors' memory (NumPy, block by block);
    the compiled slice graphs (the path without host memory, one graph per slice length,
    shorter slices padded) give the same bits."""
    import mindspore as ms
    dt = getattr(ms, dtype)
    compiled, host = _opt(dt, slice_bytes=4 * 12), _opt(dt, slice_bytes=4 * 12)
    lengths = {hi - lo for lo, hi, _ in compiled._slices}
    assert len(compiled._slices) > len(lengths) > 1      # shorter slices: padded
    assert host.host_views() is not None
    rng = np.random.default_rng(2)
    n = compiled.grad_flat.shape[0]
    for step in range(3):
        g = rng.normal(size=n).astype(np.float32) * (step + 1)
        for o, flag in ((compiled, False), (host, True)):
            write_param(o.grad_flat, g)
            o._apply_sliced(*adamw_scalars(step + 1, o.b1, o.b2, 1e-2, 1.0,
                                           float(np.linalg.norm(g))), host=flag)
    for a, b in zip(compiled.params, host.params):
        np.testing.assert_array_equal(a.asnumpy(), b.asnumpy())
    for name in ("m_flat", "v_flat"):
        np.testing.assert_array_equal(getattr(compiled, name).asnumpy(),
                                      getattr(host, name).asnumpy())
    assert np.any(host.m_flat.asnumpy()) and not np.any(host.grad_flat.asnumpy())


def test_sliced_update_in_place_matches_hand_computed_adamw(monkeypatch):
    """Two sliced updates of three weights against AdamW worked by hand (float64; torch's
    formula: decoupled decay, bias-corrected moments, eps outside the square root), with the
    clip scaling the second step's gradient. The update writes into the vectors' own memory:
    no compiled slice graph runs, the moments and weights keep their storage, and a compiled
    graph reading a weight afterwards sees the new value."""
    import mindspore as ms
    from mindspore import ops
    from mindrl.backends.mindspore import optim

    ps = [Parameter(Tensor(np.array([1.0, -2.0], np.float32)), name="w"),
          Parameter(Tensor(np.array([0.5], np.float32)), name="b")]
    opt = AdamW(ps, betas=(0.9, 0.99), eps=1e-3, weight_decay=0.1, slice_bytes=4)
    assert opt.sliced
    monkeypatch.setattr(opt, "_slice_update", None)          # no compiled slice arithmetic
    where = {k: v.ctypes.data for k, v in opt.host_views().items()}
    lr, clip = 0.01, 1.0
    grads = [np.array([0.3, -0.4, 0.0]), np.array([3.0, 0.0, 4.0])]     # norms 0.5, 5
    p = np.array([1.0, -2.0, 0.5])
    m = np.zeros(3)
    v = np.zeros(3)
    for t, g in enumerate(grads, start=1):
        write_param(opt.grad_flat, g.astype(np.float32))
        norm = opt.grad_norm()
        assert norm == pytest.approx(np.linalg.norm(g), rel=1e-6)
        opt.apply(lr, clip, norm)
        if t == 1:      # by hand: m^ = 0.3, sqrt(v^) = 0.3; 1 (1 - 0.001) - 0.01 0.3 / 0.301
            assert float(ps[0].asnumpy()[0]) == pytest.approx(0.98903322, abs=1e-7)
        gc = g * min(1.0, clip / (np.linalg.norm(g) + 1e-6))
        m = 0.9 * m + 0.1 * gc
        v = 0.99 * v + 0.01 * gc * gc
        p = p * (1 - lr * 0.1) - lr / (1 - 0.9 ** t) * m / (
            np.sqrt(v) / np.sqrt(1 - 0.99 ** t) + 1e-3)
    got = np.concatenate([x.asnumpy().reshape(-1) for x in ps])
    np.testing.assert_allclose(got, p, rtol=2e-6, atol=1e-7)
    np.testing.assert_allclose(opt.m_flat.asnumpy(), m, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(opt.v_flat.asnumpy(), v, rtol=1e-6, atol=1e-12)
    assert not np.any(opt.grad_flat.asnumpy()) and opt.step == 2
    assert {k: v.ctypes.data for k, v in opt.host_views().items()} == where
    w = ps[0]

    def read():
        return ops.reduce_sum(w.value())

    assert float(ms.jit(read)().asnumpy()) == pytest.approx(float(got[0] + got[1]), rel=1e-6)


def test_host_update_of_pieces_longer_than_a_block_equals_the_whole_vector_update():
    """Slices of 100K values: each piece runs in several host blocks (64K values, the last
    one short); the bits are still the whole-vector compiled update's."""
    from mindrl.backends.mindspore import optim

    def opt(slice_bytes):
        rng = np.random.default_rng(0)
        ps = [Parameter(Tensor(rng.normal(size=(1000, 500)).astype(np.float32)), name="w"),
              Parameter(Tensor(rng.normal(size=(7,)).astype(np.float32)), name="b")]
        return AdamW(ps, weight_decay=0.1, slice_bytes=slice_bytes)

    whole, sliced = opt(None), opt(4 * 400_000)
    assert not whole.sliced and sliced.sliced
    longest = max(b - a for _, _, pieces in sliced._slices for *_, a, b in pieces)
    assert longest > optim.HOST_BLOCK and longest % optim.HOST_BLOCK
    _steps_agree(whole, sliced, 2)
