"""torchrun worker for test_moe_balance.py's 2-rank test (the ``moe`` part of
torchrun_suite_worker.py): with ``model.moe.aux_loss_coef`` each rank takes its half of a
fixed mini-batch (two micro-batches); rank 0 writes the rank-summed gradient (padded, then
packed), then the metrics of one train step. ``run`` is also called in-process by the test
with the whole mini-batch on one process (the reference)."""

import json
import os
import sys

import numpy as np

COEF = 0.5


def mini_batch():
    """Eight rows, prompts of 2-7 tokens, responses of 1-20 tokens (the mix padding sees)."""
    from mindrl.types import TrainBatch, pad_token_batch

    rng = np.random.default_rng(3)
    lengths = [1, 20, 3, 9, 2, 14, 5, 1]
    prompts = [rng.integers(5, 1000, rng.integers(2, 8)).tolist() for _ in lengths]
    tokens = pad_token_batch(prompts, [rng.integers(5, 1000, n).tolist() for n in lengths], 0)
    adv = rng.normal(size=(len(lengths), 1)).astype(np.float32) * tokens.response_mask
    return TrainBatch(tokens, adv, None)


def run(cache_dir, rank=0, world=1):
    """(this rank's gradient by name, padded and packed (train.padding_free), train-step
    metrics, backend) on this rank's rows."""
    import dataclasses

    from mindrl.backends.base import build_backend
    from mindrl.config.loader import load_config
    from mindrl.models.tiny import resolve_model_path
    from mindrl.types import LossNormalizers

    path = resolve_model_path("builtin:tiny-qwen3-moe", cache_dir=cache_dir)
    cfg = load_config(None, [f"model.path={path}", f"model.moe.aux_loss_coef={COEF}",
                             "train.threads=1", "train.logprob_chunk_tokens=0",
                             "train.lr=1e-3", "train.warmup_steps=1"])
    be = build_backend("torch", cfg)
    batch = mini_batch()
    norm = LossNormalizers(float(batch.tokens.response_mask.sum()), float(len(batch)), 20.0)
    per = len(batch) // world
    mine = batch.rows(np.arange(rank * per, (rank + 1) * per))
    micro = [mine.rows(np.arange(0, 1)), mine.rows(np.arange(1, per))]
    grads = be.gradients(micro, norm)
    padded = be.cfg
    be.cfg = dataclasses.replace(padded, train=dataclasses.replace(padded.train,
                                                                   padding_free=True))
    packed = be.gradients(micro, norm)
    be.cfg = padded
    metrics = be.train_step(micro, norm)
    return grads, packed, metrics, be


def main(cache, out):
    """Under torchrun (2 ranks): rank 0 writes OUT.npy (the rank-summed gradients, padded and
    packed) and OUT.json (their keys, one train step's metrics)."""
    grads, packed, metrics, be = run(cache, int(os.environ["RANK"]),
                                     int(os.environ["WORLD_SIZE"]))
    assert be.world == 2, be.world
    keys = sorted(grads)
    assert sorted(packed) == keys
    total = [be.all_reduce_sum(np.concatenate([g[k].ravel() for k in keys]))
             for g in (grads, packed)]
    if be.rank == 0:
        np.save(out + ".npy", np.stack(total))
        with open(out + ".json", "w") as f:
            json.dump({"keys": keys, "metrics": metrics}, f)
    be.barrier()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
    import torch.distributed as dist

    dist.destroy_process_group()
