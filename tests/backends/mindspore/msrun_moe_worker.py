"""The ``moe`` part of msrun_suite_worker.py (test_ms_shard_optimizer.py's load-balancing test
over 2 ranks): with ``model.moe.aux_loss_coef`` each rank takes its half of a fixed
mini-batch (two micro-batches); rank 0 writes the rank-summed gradient and one train step's
metrics to OUT.npz. ``run`` is also called in-process by the test with the whole mini-batch on
one process (the reference)."""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from ms_helpers import ms_config, random_batch  # noqa: E402


def run(model_dir: str):
    """(this rank's gradient by name, train-step metrics, backend) on this rank's rows (all
    of them on one process)."""
    from mindrl.backends.mindspore import MindSporeBackend
    from mindrl.types import LossNormalizers

    be = MindSporeBackend(ms_config("data.max_prompt_len=32", "model.moe.aux_loss_coef=0.5",
                                    "train.threads=1"), model_path=model_dir)
    batch = random_batch(np.random.default_rng(4), 8)
    m = batch.tokens.response_mask
    norm = LossNormalizers(float(m.sum()), float(len(batch)), float(m.shape[1]))
    per = len(batch) // be.world
    mine = batch.rows(np.arange(be.rank * per, (be.rank + 1) * per))
    micro = [mine.rows(np.arange(0, 1)), mine.rows(np.arange(1, per))]
    grads = be.gradients(micro, norm)
    metrics = be.train_step(micro, norm)
    return grads, metrics, be


def main(model_dir: str, out: str) -> None:
    grads, metrics, be = run(model_dir)
    assert be.world == 2, be.world
    keys = sorted(grads)
    total = be.all_reduce_sum(np.concatenate([grads[k].ravel() for k in keys]))
    if be.rank == 0:
        np.savez(out, grads=total, keys=np.array(keys),
                 **{f"metric:{k}": v for k, v in metrics.items()})
    be.barrier()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
