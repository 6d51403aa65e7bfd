"""The one msrun launch of test_ms_shard_optimizer.py: the two workers run, in turn, the parts
named on the command line, each the ``main`` of its own worker script, in the same two
processes, so the cluster is built and torn down once (each msrun launch costs ~20-40 s of
start-up and finalisation on 2 CPU cores before any step runs):

- ``dp``: msrun_dp_worker.py (replicated data parallel, RL and SFT steps) -> OUT/dp.npz;
- ``zero``: msrun_zero_worker.py (sharded AdamW and gradients) -> OUT/rank{r}.npz;
- ``critic``: msrun_critic_zero_worker.py (the sharded PPO critic) -> OUT/critic_rank{r}.npz;
- ``moe``: msrun_moe_worker.py (MoE load balancing over the ranks, on MOE_DIR) -> OUT/moe.npz.

Usage: msrun ... msrun_suite_worker.py MODEL_DIR MOE_DIR OUT PART[,PART...]"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

PARTS = ("dp", "zero", "critic", "moe")


def main(model_dir: str, moe_dir: str, out: str, parts: str) -> None:
    wanted = parts.split(",")
    unknown = sorted(set(wanted) - set(PARTS))
    assert not unknown, f"unknown part(s) {unknown}; known: {PARTS}"
    if "dp" in wanted:
        import msrun_dp_worker

        msrun_dp_worker.main(model_dir, os.path.join(out, "dp.npz"))
    if "zero" in wanted:
        import msrun_zero_worker

        msrun_zero_worker.main(model_dir, out)
    if "critic" in wanted:
        import msrun_critic_zero_worker

        msrun_critic_zero_worker.main(model_dir, out)
    if "moe" in wanted:
        import msrun_moe_worker

        msrun_moe_worker.main(moe_dir, os.path.join(out, "moe.npz"))


if __name__ == "__main__":
    main(*sys.argv[1:5])
