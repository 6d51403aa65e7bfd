"""The ``zero`` part of msrun_suite_worker.py (test_ms_shard_optimizer.py). On this rank's
half of 5 global batches:

- ``replicated``: 5 RL train steps, replicated AdamW (the unsharded 2-process run);
- ``sharded``: the same with ``train.shard_optimizer=true``, checkpointed after step 3;
- ``resumed``: a fresh sharded backend loads that checkpoint and runs steps 4-5;
- ``bf16``: ``model.dtype=bfloat16`` (float32 compute on CPU, float32 weights saved with the
  optimizer state), sharded, checkpointed after step 3;
- ``fp16``: the optimizer alone on float16 parameters (float32 masters), sharded and
  replicated, 5 steps on 2 micro-batch gradients given per rank.

The sharded runs use small gradient buckets (several per step), and the ranks run unequal
numbers of micro-batches (2 and 3).

Every rank writes OUT/rank{r}.npz: per-step metrics, final weights, the bytes of its optimizer
arrays."""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from ms_helpers import ms_config, random_batch, split  # noqa: E402

STEPS, SAVE_AT = 5, 3
SETTINGS = ("train.lr=1e-3", "train.grad_clip=0.5", "train.weight_decay=0.01")


def batches():
    from mindrl.types import LossNormalizers

    rng = np.random.default_rng(7)
    out = []
    for _ in range(STEPS):
        b = random_batch(rng, 8)
        out.append((b, LossNormalizers(float(b.tokens.response_mask.sum()), 8.0, 16.0)))
    return out


# float32 bytes of one gradient bucket in the sharded runs: 7 buckets on the tiny model, so
# parameters straddle chunks and the tied embedding spans several buckets
BUCKET_BYTES = 56_000
FP16_BUCKET_BYTES = 2 * 4 * 300          # float16 parameters: chunks of 300, the last shorter


def micro_batches(half, rank):
    """Gradient accumulation with unequal counts: rank 0 cuts its 4 rows into 2 micro-batches,
    rank 1 into 3 (2 + 1 + 1 rows)."""
    return split(half, 2) if rank == 0 else split(half, 2)[:1] + split(split(half, 2)[1], 1)


def run(be, data, steps, save_dir=None, save_at=None, res=None, tag=""):
    """Train steps on this rank's half of each batch, in several micro-batches; (loss,
    grad_norm) per step. With ``save_dir``: a checkpoint after step ``save_at``, its weights
    into ``res``."""
    metrics = []
    for i, (b, norm) in enumerate(data[:steps], start=1):
        m = be.train_step(micro_batches(split(b, 4)[be.rank], be.rank), norm)
        metrics.append([m["loss"], m["grad_norm"]])
        if save_dir is not None and i == save_at:
            be.save_pretrained(save_dir)
            be.save_state(save_dir)                  # every rank writes its slice
            be.stage_checkpoint()                    # the trainer's way: rank 0 writes all
            if be.rank == 0:
                be.save_state(save_dir + "_staged")
            be.barrier()
            res.update({f"{tag}_at{save_at}/{k}": v for k, v in weights(be).items()})
    return np.array(metrics, np.float64)


def weights(be):
    from mindspore import float32

    # a copy: asnumpy() of a float32 Parameter can share its storage, which later steps update
    return {p.name: p.astype(float32).asnumpy().copy() for p in be.params}


def fp16_params():
    """float16 parameters at std 0.02 (an odd total size: the last slice is padded)."""
    import mindspore as ms

    rng = np.random.default_rng(0)
    return [ms.Parameter(ms.Tensor(rng.normal(0, 0.02, shape).astype(np.float16)),
                         name=f"w{i}") for i, shape in enumerate([(33, 64), (64,), (5, 7), (4,)])]


def fp16_exact():
    """float32 arrays of the float16 parameters' shapes that float16 cannot hold."""
    rng = np.random.default_rng(2)
    return [rng.normal(0, 0.02, p.shape).astype(np.float32) for p in fp16_params()]


def fp16_grads(n, rank):
    """5 steps of this rank's 2 micro-batch gradients (flat, float32); the 4 of a step (2 ranks
    x 2 micro-batches) sum to a standard normal global gradient."""
    rng = np.random.default_rng(1)
    out = []
    for _ in range(STEPS):
        g = rng.normal(0, 1, n).astype(np.float32)
        parts = [rng.normal(0, 1, n).astype(np.float32) for _ in range(3)]
        parts.append(g - parts[0] - parts[1] - parts[2])
        out.append(parts[2 * rank:2 * rank + 2])
    return out


def per_param(flat, params):
    """A flat float32 vector -> one tensor per parameter (their shapes)."""
    import mindspore as ms

    out, at = [], 0
    for p in params:
        k = int(np.prod(p.shape))
        out.append(ms.Tensor(flat[at:at + k].reshape(p.shape)))
        at += k
    return out


def main(model_dir: str, out: str) -> None:
    import mindspore as ms
    from mindspore import ops

    from mindrl.backends.mindspore import MindSporeBackend
    from mindrl.backends.mindspore.optim import AdamW
    from mindrl.backends.mindspore.sharded_optim import ShardedAdamW

    from mindrl.backends.mindspore import sharded_optim

    sharded_optim.BUCKET_BYTES = BUCKET_BYTES
    data = batches()
    res = {}
    be = MindSporeBackend(ms_config(*SETTINGS), model_path=model_dir)
    assert be.world == 2 and type(be.optimizer).__name__ == "AdamW"
    res["replicated_metrics"] = run(be, data, STEPS)
    res.update({f"replicated/{k}": v for k, v in weights(be).items()})
    res.update({f"replicated_bytes/{k}": v for k, v in be.optimizer.state_nbytes().items()})

    sharded = ms_config(*SETTINGS, "train.shard_optimizer=true")
    be = MindSporeBackend(sharded, model_path=model_dir)
    assert type(be.optimizer).__name__ == "ShardedAdamW" and len(be.optimizer.chunks) > 4
    res["sharded_metrics"] = run(be, data, STEPS, os.path.join(out, "ckpt"), SAVE_AT, res,
                                 "sharded")
    res.update({f"sharded/{k}": v for k, v in weights(be).items()})
    res.update({f"sharded_bytes/{k}": v for k, v in be.optimizer.state_nbytes().items()})

    be = MindSporeBackend(sharded, model_path=model_dir)
    be.load_state(os.path.join(out, "ckpt"))
    res["resumed_metrics"] = run(be, data[SAVE_AT:], STEPS - SAVE_AT)
    res.update({f"resumed/{k}": v for k, v in weights(be).items()})

    be = MindSporeBackend(ms_config(*SETTINGS, "train.shard_optimizer=true",
                                    "model.dtype=bfloat16"), model_path=model_dir)
    res["bf16_metrics"] = run(be, data, STEPS, os.path.join(out, "ckpt_bf16"), SAVE_AT, res,
                              "bf16")
    res.update({f"bf16/{k}": v for k, v in weights(be).items()})

    # the optimizer alone on float16 storage: sharded vs replicated (all-reduce) on 2 ranks
    for name, make in (("fp16_sharded", lambda p: ShardedAdamW(
                            p, rank=be.rank, world=2, betas=(0.9, 0.999), weight_decay=0.01,
                            bucket_bytes=FP16_BUCKET_BYTES)),
                       ("fp16_replicated", lambda p: AdamW(
                            p, betas=(0.9, 0.999), weight_decay=0.01,
                            all_reduce=ops.AllReduce(ops.ReduceOp.SUM)))):
        params = fp16_params()
        opt = make(params)
        norms = []
        n = sum(int(np.prod(p.shape)) for p in params)
        for micro in fp16_grads(n, be.rank):
            for g in micro:                             # gradient accumulation
                opt.add_gradients(per_param(g, params))
            norms.append(opt.grad_norm())
            opt.apply(1e-6, 1.0, norms[-1])
        res[f"{name}_norms"] = np.array(norms)
        for p in params:
            assert p.dtype == ms.float16
            res[f"{name}/{p.name}"] = p.astype(ms.float32).asnumpy().copy()
        res.update({f"{name}_bytes/{k}": v for k, v in opt.state_nbytes().items()})
        if name == "fp16_sharded":
            res["fp16_sharded_master_slice"] = opt.master.asnumpy().copy()
            # masters from float32 arrays (a checkpoint's), not from the float16 parameters
            exact = fp16_exact()
            passed = list(opt.set_masters((p.name, a) for p, a in zip(params, exact)))
            assert [n for n, _ in passed] == [p.name for p in params]
            res["fp16_set_master_slice"] = opt.master.asnumpy().copy()
    np.savez(os.path.join(out, f"rank{be.rank}.npz"), **res)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
