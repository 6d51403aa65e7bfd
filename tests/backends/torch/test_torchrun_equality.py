"""Data parallel over 2 torchrun processes (gloo, CPU) gives the same updated parameters and
metrics as 1 process with the whole global batch."""

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent


@pytest.mark.slow
def test_two_ranks_equal_one_process(tiny_dir, ddp_run):
    """ddp_worker.py under torchrun (the ``ddp`` part of the one launch in conftest.py)."""
    out = ddp_run
    spec = importlib.util.spec_from_file_location("ddp_worker", HERE / "ddp_worker.py")
    worker = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(worker)
    ref_params, ref_metrics, _ = worker.run(tiny_dir)
    got = np.load(str(out) + ".npz")
    assert set(got.files) == set(ref_params)
    diff = max(float(np.abs(got[k] - ref_params[k]).max()) for k in ref_params)
    assert diff < 1e-5, diff
    got_metrics = json.loads(Path(str(out) + ".json").read_text())
    for g, r in zip(got_metrics, ref_metrics):
        for key in ("loss", "grad_norm", "lr", "clipfrac", "entropy", "ratio_max"):
            assert g[key] == pytest.approx(r[key], rel=1e-4, abs=1e-6), key
    assert ref_metrics[-1]["grad_norm"] > 0
