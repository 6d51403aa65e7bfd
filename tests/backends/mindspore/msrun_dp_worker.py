"""The ``dp`` part of msrun_suite_worker.py (test_ms_shard_optimizer.py): data-parallel train
steps (then an SFT step) on this rank's half of a global batch, with global normalisers; rank 0
writes the resulting weights to OUT.npz."""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from ms_helpers import ms_config, random_batch, split  # noqa: E402


def main(model_dir: str, out: str) -> None:
    from mindrl.backends.mindspore import MindSporeBackend
    from mindrl.types import LossNormalizers

    be = MindSporeBackend(ms_config("train.lr=1e-2", "train.grad_clip=0.5"), model_path=model_dir)
    assert be.world == 2, be.world
    batch = random_batch(np.random.default_rng(7), 8)
    norm = LossNormalizers(float(batch.tokens.response_mask.sum()), 8.0, 16.0)
    for _ in range(2):
        mine = split(batch, 4)[be.rank]
        metrics = be.train_step([mine], norm)
    sft = be.sft_step([split(batch, 4)[be.rank].tokens], norm)    # SFT shares the all-reduce
    gathered = be.all_gather(np.array([be.rank], np.int64))
    assert gathered.tolist() == [0, 1], gathered
    if be.rank == 0:
        np.savez(out, grad_norm=metrics["grad_norm"], loss=metrics["loss"],
                 sft_grad_norm=sft["grad_norm"], sft_loss=sft["loss"], sft_nll=sft["nll"],
                 **dict(be.named_weights()))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
