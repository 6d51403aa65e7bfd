"""torchrun worker for test_torchrun_equality (the ``ddp`` part of torchrun_suite_worker.py):
each rank trains on its half of a fixed global batch; rank 0 writes the updated parameters and
metrics. ``run`` is also called in-process by the test with the whole batch (the 1-process
reference)."""

import dataclasses
import json
import os
import sys

import numpy as np

STEPS = 2


def global_batch():
    from mindrl.types import TrainBatch, pad_token_batch

    rng = np.random.default_rng(7)
    B, P, T = 8, 6, 5
    prompts = [rng.integers(3, 1000, rng.integers(2, P + 1)).tolist() for _ in range(B)]
    responses = [rng.integers(3, 1000, rng.integers(1, T + 1)).tolist() for _ in range(B)]
    tokens = pad_token_batch(prompts, responses, pad_id=0, prompt_len=P, response_len=T)
    adv = rng.normal(size=(B, 1)).astype(np.float32) * tokens.response_mask
    return TrainBatch(tokens, adv, np.zeros((B, T), np.float32))


def run(model_dir, rank=0, world=1):
    """Train STEPS steps on this rank's rows; returns (params dict, list of metrics)."""
    from mindrl.backends.base import build_backend
    from mindrl.config.schema import RunConfig
    from mindrl.types import LossNormalizers

    cfg = RunConfig()
    cfg = dataclasses.replace(
        cfg, model=dataclasses.replace(cfg.model, path=model_dir),
        train=dataclasses.replace(cfg.train, lr=1e-3, warmup_steps=1, grad_clip=0.5))
    be = build_backend("torch", cfg)
    batch = global_batch()
    norm = LossNormalizers(global_tokens=float(batch.tokens.response_mask.sum()),
                           global_seqs=float(len(batch)), max_len=5.0)
    per_rank = len(batch) // world
    mine = batch.rows(slice(rank * per_rank, (rank + 1) * per_rank))
    metrics = []
    for _ in range(STEPS):
        mine.old_logp = be.logprobs(mine.tokens, temperature=1.0) - 0.1   # ratio != 1
        metrics.append(be.train_step([mine.rows(slice(0, 2)), mine.rows(slice(2, None))], norm))
    params = {k: v.detach().numpy().copy() for k, v in be.model.named_parameters()}
    return params, metrics, be


def main(model_dir, out):
    """Under torchrun (2 ranks): train on this rank's half; rank 0 writes OUT.npz (parameters)
    and OUT.json (metrics)."""
    params, metrics, be = run(model_dir, int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]))
    assert be.world == 2, be.world
    summed = be.all_reduce_sum(np.array([1.0, be.rank]))
    gathered = be.all_gather(np.array([[be.rank, 10 + be.rank]]))
    assert summed.tolist() == [2.0, 1.0], summed
    assert gathered.tolist() == [[0, 10], [1, 11]], gathered
    be.barrier()
    if be.rank == 0:
        np.savez(out + ".npz", **params)
        with open(out + ".json", "w") as f:
            json.dump(metrics, f)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
    import torch.distributed as dist

    dist.destroy_process_group()
