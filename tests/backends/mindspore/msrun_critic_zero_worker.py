"""The ``critic`` part of msrun_suite_worker.py (test_ms_shard_optimizer.py's critic tests).
The PPO critic of a tiny Qwen2 (``algorithm.adv_estimator=gae``), 4 value-loss steps on this
rank's half of each global batch (rank 0 in 2 micro-batches, rank 1 in 3):

- ``replicated``: the critic's replicated AdamW (the unsharded 2-process run);
- ``sharded``: ``train.shard_optimizer=true``, checkpointed after step 2 (the trainer's way:
  slices gathered to rank 0, which writes them);
- ``resumed``: a fresh sharded backend loads that checkpoint and runs steps 3-4.

Every rank writes OUT/critic_rank{r}.npz: per-step metrics, final critic weights, the bytes of
its critic optimizer's arrays."""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from ms_helpers import ms_config, random_batch  # noqa: E402
from msrun_zero_worker import BUCKET_BYTES  # noqa: E402

STEPS, SAVE_AT = 4, 2
SETTINGS = ("algorithm.adv_estimator=gae", "critic.lr=1e-3", "critic.grad_clip=0.5",
            "critic.weight_decay=0.01", "critic.cliprange_value=0.2")


def value_batches():
    """4 global batches of 8 rows: random tokens, old values and returns."""
    from mindrl.types import LossNormalizers, ValueBatch

    rng = np.random.default_rng(11)
    out = []
    for _ in range(STEPS):
        tb = random_batch(rng, 8).tokens
        m = tb.response_mask
        old = (rng.normal(0, 0.3, m.shape) * m).astype(np.float32)
        ret = (rng.normal(0, 1, m.shape) * m).astype(np.float32)
        out.append((ValueBatch(tb, old, ret), LossNormalizers(float(m.sum()), 8.0, 16.0)))
    return out


def micro_batches(vb, rank):
    """This rank's half (4 rows): rank 0 in 2 micro-batches of 2, rank 1 in 2 + 1 + 1."""
    half = vb.rows(slice(4 * rank, 4 * rank + 4))
    cuts = [(0, 2), (2, 4)] if rank == 0 else [(0, 2), (2, 3), (3, 4)]
    return [half.rows(slice(a, b)) for a, b in cuts]


def run(be, data, save_dir=None):
    metrics = []
    for i, (vb, norm) in enumerate(data, start=1):
        m = be.critic.step(micro_batches(vb, be.rank), norm)
        metrics.append([m["loss"], m["grad_norm"]])
        if save_dir is not None and i == SAVE_AT:
            be.stage_checkpoint()                    # collective: slices to rank 0
            if be.rank == 0:
                be.critic.save_state(save_dir)
            be.barrier()
    return np.array(metrics, np.float64)


def weights(be):
    from mindspore import float32

    return {p.name: p.astype(float32).asnumpy().copy() for p in be.critic.params}


def main(model_dir: str, out: str) -> None:
    from mindrl.backends.mindspore import MindSporeBackend, sharded_optim

    sharded_optim.BUCKET_BYTES = BUCKET_BYTES
    data = value_batches()
    res = {}
    be = MindSporeBackend(ms_config(*SETTINGS), model_path=model_dir)
    assert be.world == 2 and type(be.critic.optimizer).__name__ == "AdamW"
    res["replicated_metrics"] = run(be, data)
    res.update({f"replicated/{k}": v for k, v in weights(be).items()})
    res.update({f"replicated_bytes/{k}": v
                for k, v in be.critic.optimizer.state_nbytes().items()})

    sharded = ms_config(*SETTINGS, "train.shard_optimizer=true")
    be = MindSporeBackend(sharded, model_path=model_dir)
    assert type(be.critic.optimizer).__name__ == "ShardedAdamW"
    assert len(be.critic.optimizer.chunks) > 4
    ckpt = os.path.join(out, "critic_ckpt")
    res["sharded_metrics"] = run(be, data, ckpt)
    res.update({f"sharded/{k}": v for k, v in weights(be).items()})
    res.update({f"sharded_bytes/{k}": v for k, v in be.critic.optimizer.state_nbytes().items()})

    be = MindSporeBackend(sharded, model_path=model_dir)
    be.critic.load_state(ckpt)
    assert be.critic.optimizer.step == SAVE_AT and be.critic.optimizer_steps == SAVE_AT
    res["resumed_metrics"] = run(be, data[SAVE_AT:])
    res.update({f"resumed/{k}": v for k, v in weights(be).items()})
    np.savez(os.path.join(out, f"critic_rank{be.rank}.npz"), **res)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
