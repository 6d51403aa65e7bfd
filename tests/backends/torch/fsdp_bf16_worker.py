"""torchrun worker for test_master_weights (the ``fsdp`` part of torchrun_suite_worker.py):
FSDP2 in bf16 (float32 sharded parameters, ``MixedPrecisionPolicy(param_dtype=bf16,
reduce_dtype=float32)``) trains 3 steps at lr 1e-5, each rank on its half of a fixed batch;
rank 0 writes the full float32 parameters (the masters). ``run`` without torchrun is the
1-process reference: the same bf16 model, its float32 masters, every micro-batch of the global
batch."""

import dataclasses
import os
import sys

import numpy as np

STEPS = 3
LR = 1e-5


def run(model_dir, rank=0, world=1):
    """-> (float32 masters by name, their values before training, backend)."""
    from mindrl.backends.base import build_backend
    from mindrl.config.schema import RunConfig
    from mindrl.types import LossNormalizers, TrainBatch, pad_token_batch

    cfg = RunConfig()
    cfg = dataclasses.replace(
        cfg, model=dataclasses.replace(cfg.model, path=model_dir, dtype="bfloat16"),
        train=dataclasses.replace(cfg.train, lr=LR, warmup_steps=0, grad_clip=0.0,
                                  lr_schedule="constant", fsdp=world > 1))
    be = build_backend("torch", cfg)
    rng = np.random.default_rng(5)
    B, P, T = 8, 6, 5
    prompts = [rng.integers(3, 1000, rng.integers(2, P + 1)).tolist() for _ in range(B)]
    responses = [rng.integers(3, 1000, rng.integers(1, T + 1)).tolist() for _ in range(B)]
    tokens = pad_token_batch(prompts, responses, pad_id=0, prompt_len=P, response_len=T)
    adv = rng.normal(size=(B, 1)).astype(np.float32) * tokens.response_mask
    batch = TrainBatch(tokens, adv, np.zeros((B, T), np.float32))
    norm = LossNormalizers(global_tokens=float(tokens.response_mask.sum()),
                           global_seqs=float(B), max_len=float(T))
    halves = [batch.rows(slice(0, B // 2)), batch.rows(slice(B // 2, B))]
    mine = halves if world == 1 else [halves[rank]]
    start = masters(be)
    for _ in range(STEPS):
        be.train_step(mine, norm)
    return masters(be), start, be


def masters(be):
    """Full float32 masters by parameter name (gathered from the shards under FSDP)."""
    out = {}
    for (name, p), m in zip([(n, p) for n, p in be.model.named_parameters() if p.requires_grad],
                            be.masters.params):
        t = m.detach()
        if hasattr(t, "full_tensor"):
            t = t.full_tensor()
        assert t.dtype.is_floating_point and t.element_size() == 4, (name, t.dtype)
        out[name] = t.cpu().numpy().copy()
    return out


def main(model_dir, out):
    """Under torchrun (2 ranks): 3 FSDP2 bf16 steps, the weights a rollout engine is sent, a
    checkpoint (OUT_ckpt) resumed by a fresh sharded backend; rank 0 writes OUT.npz,
    OUT_sent.npz, OUT_resumed.npz."""
    got, _, be = run(model_dir, int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]))
    assert be.world == 2 and be.fsdp, (be.world, be.fsdp)
    # the rollout engines' view: full tensors in bf16, the masters rounded
    sent = {k: v.float().cpu().numpy() for k, v in be.named_tensors()}
    # a checkpoint (model in bf16, float32 masters in the state) read by a fresh sharded backend
    ckpt = out + "_ckpt"
    be.stage_checkpoint()
    be.save_pretrained(ckpt + "/model")
    be.save_state(ckpt + "/state")
    be.barrier()
    from mindrl.backends.base import build_backend

    again = build_backend("torch", be.cfg)
    again.load_pretrained_weights(ckpt + "/model")
    again.load_state(ckpt + "/state")
    resumed = masters(again)
    if be.rank == 0:
        np.savez(out + ".npz", **got)
        np.savez(out + "_sent.npz", **sent)
        np.savez(out + "_resumed.npz", **resumed)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
    import torch.distributed as dist

    dist.destroy_process_group()
