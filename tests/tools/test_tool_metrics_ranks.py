"""Tool metrics are gathered across data-parallel ranks: a 2-rank torchrun (gloo) step with
tools where rank 0's rows call ``print(6 * 7)`` and rank 1's rows call ``print(1/0)`` (the first
turn forced, as in test_tool_training.py; the sandbox and everything else are real). The logged
step must count rank 1's errors too: 2 of the 4 rows' calls failed (rank 0 alone saw none)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]

SCRIPT = """
import sys
from test_tool_training import BASE, ForcedFirstTurn
from mindrl.config.loader import load_config
from mindrl.trainer.rl import RLTrainer

cfg = load_config(None, BASE + ["logging.output_dir=" + sys.argv[1], "backend=torch",
                                "validation.every=1", "data.max_val_samples=2"])
tr = RLTrainer(cfg)
tr.engine = ForcedFirstTurn(tr.engine, tr.tokenizer,
                            "print(6 * 7)" if tr.rank == 0 else "print(1/0)")
tr.fit()
tr.close()
"""


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_two_ranks_log_the_tool_metrics_of_both(tmp_path):
    script = tmp_path / "run.py"
    script.write_text(SCRIPT)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), str(REPO), env.get("PYTHONPATH", "")])
    env["OMP_NUM_THREADS"] = "1"
    torchrun = Path(sys.executable).parent / "torchrun"
    out = tmp_path / "run"
    res = subprocess.run([str(torchrun), "--nproc_per_node", "2", "--master_port",
                          str(_free_port()), str(script), str(out)], env=env, timeout=600,
                         capture_output=True, text=True, cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    step = [r for r in rows if "tools/calls_per_sample" in r][-1]
    # 2 prompts x 2 samples: 2 rows per rank, each rank's rows one call each; rank 0's rows
    # take a second turn after "42", rank 1's traceback fills the 48-token budget (1 turn)
    assert step["tools/calls_per_sample"] == 1.0 and step["tools/turns_mean"] == 1.5
    assert step["tools/errors"] == 2.0            # rank 1's two ZeroDivisionErrors
    assert step["tools/error_fraction"] == 0.5    # 2 of the 4 calls
    # validation (greedy, 1 held-out prompt per rank) counts both ranks too
    assert step["val/samples"] == 2.0
    assert step["val/tools/calls_per_sample"] == 1.0 and step["val/tools/errors"] == 1.0
