"""One msrun worker of test_ms_shard_optimizer.py. On this rank's half of 5 global batches:

- ``replicated``: 5 RL train steps, replicated AdamW (the unsharded 2-process run);
- ``sharded``: the same with ``train.shard_optimizer=true``, checkpointed after step 3;
- ``resumed``: a fresh sharded backend loads that checkpoint and runs steps 4-5;
- ``bf16``: ``model.dtype=bfloat16`` (float32 compute on CPU, float32 weights saved with the
  optimizer state), sharded, checkpointed after step 3;
- ``fp16``: the optimizer alone on float16 parameters (float32 masters), sharded and
  replicated, 5 steps on gradients given per rank.

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


def run(be, data, steps, save_dir=None, save_at=None, res=None, tag=""):
    """Train steps on this rank's half of each batch; (loss, grad_norm) per step. With
    ``save_dir``: a checkpoint after step ``save_at``, its weights into ``res``."""
    metrics = []
    for i, (b, norm) in enumerate(data[:steps], start=1):
        m = be.train_step([split(b, 4)[be.rank]], norm)
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
    """5 global gradients, and this rank's share of each (the shares sum to the global one)."""
    rng = np.random.default_rng(1)
    out = []
    for _ in range(STEPS):
        g = rng.normal(0, 1, n).astype(np.float32)
        mine = rng.normal(0, 1, n).astype(np.float32)
        out.append(mine if rank == 0 else g - mine)
    return out


def main(model_dir: str, out: str) -> None:
    import mindspore as ms
    from mindspore import ops

    from mindrl.backends.mindspore import MindSporeBackend
    from mindrl.backends.mindspore.optim import AdamW
    from mindrl.backends.mindspore.sharded_optim import ShardedAdamW
    from mindrl.backends.mindspore.weights import write_param

    data = batches()
    res = {}
    be = MindSporeBackend(ms_config(*SETTINGS), model_path=model_dir)
    assert be.world == 2 and type(be.optimizer).__name__ == "AdamW"
    res["replicated_metrics"] = run(be, data, STEPS)
    res.update({f"replicated/{k}": v for k, v in weights(be).items()})
    res.update({f"replicated_bytes/{k}": v for k, v in be.optimizer.state_nbytes().items()})

    sharded = ms_config(*SETTINGS, "train.shard_optimizer=true")
    be = MindSporeBackend(sharded, model_path=model_dir)
    assert type(be.optimizer).__name__ == "ShardedAdamW"
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
                            p, rank=be.rank, world=2, betas=(0.9, 0.999), weight_decay=0.01)),
                       ("fp16_replicated", lambda p: AdamW(
                            p, betas=(0.9, 0.999), weight_decay=0.01,
                            all_reduce=ops.AllReduce(ops.ReduceOp.SUM)))):
        params = fp16_params()
        opt = make(params)
        norms = []
        for g in fp16_grads(opt.grad_flat.shape[0], be.rank):
            write_param(opt.grad_flat, g)
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
