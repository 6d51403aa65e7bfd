"""The one torchrun launch of the torch backend's 2-rank tests (tests/backends/torch/conftest.py):
the two ranks run, in turn, the parts named on the command line, each the ``main`` of its own
worker script, in the same two processes and process group, so torch is imported and the
group formed once (each launch costs several seconds before any step runs):

- ``ddp``: ddp_worker.py (test_torchrun_equality.py) -> OUT/ddp.npz, OUT/ddp.json;
- ``moe``: moe_ddp_worker.py (test_moe_balance.py) -> OUT/moe.npy, OUT/moe.json;
- ``fsdp``: fsdp_bf16_worker.py (test_master_weights.py) -> OUT/fsdp*.npz, OUT/fsdp_ckpt.

Usage: torchrun --nproc_per_node 2 torchrun_suite_worker.py TINY_DIR CACHE_DIR OUT PART[,PART]"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

PARTS = ("ddp", "moe", "fsdp")


def main(tiny_dir: str, cache_dir: str, out: str, parts: str) -> None:
    wanted = parts.split(",")
    unknown = sorted(set(wanted) - set(PARTS))
    assert not unknown, f"unknown part(s) {unknown}; known: {PARTS}"
    if "ddp" in wanted:
        import ddp_worker

        ddp_worker.main(tiny_dir, os.path.join(out, "ddp"))
    if "moe" in wanted:
        import moe_ddp_worker

        moe_ddp_worker.main(cache_dir, os.path.join(out, "moe"))
    if "fsdp" in wanted:
        import fsdp_bf16_worker

        fsdp_bf16_worker.main(tiny_dir, os.path.join(out, "fsdp"))


if __name__ == "__main__":
    main(*sys.argv[1:5])
    import torch.distributed as dist

    dist.destroy_process_group()
