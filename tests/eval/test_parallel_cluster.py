"""`mindrl eval` across the nodes of a Ray cluster (two raylets on this machine): 2 workers,
one per node, give exactly the 1-worker samples; a wrong address is a clear error."""

import json

import pytest

from mindrl.eval.runner import run_eval
from mindrl.eval.settings import EvalError, EvalSettings

pytestmark = pytest.mark.slow


def _settings(tiny_model_dir, shared_data, out, **kw):
    base = dict(model=tiny_model_dir, benchmarks=["gsm8k", "amc23"], limit=3, n=2,
                temperature=0.0, max_new_tokens=12, batch_size=2,
                data_dir=str(shared_data / "eval"), output_dir=str(out), plot=False)
    base.update(kw)
    return EvalSettings(**base)


def _samples(run_dir):
    rows = [json.loads(x) for x in (run_dir / "samples.jsonl").read_text().splitlines()]
    return sorted((r["benchmark"], r["problem_id"], r["sample_index"], r["text"])
                  for r in rows)


def test_workers_on_two_cluster_nodes_equal_one_worker(ray_two_nodes, tiny_model_dir,
                                                       shared_data, tmp_path):
    import ray

    one = run_eval(_settings(tiny_model_dir, shared_data, tmp_path / "one"))
    two = run_eval(_settings(tiny_model_dir, shared_data, tmp_path / "two", workers=2,
                             ray_address=ray_two_nodes.address))
    assert not ray.is_initialized()            # the eval disconnected; the cluster lives on
    assert _samples(one.run_dir) == _samples(two.run_dir)
    assert len(_samples(two.run_dir)) == 2 * 3 * 2


def test_unreachable_cluster_is_named(tiny_model_dir, shared_data, tmp_path):
    with pytest.raises(EvalError, match="no Ray cluster at ray_address='127.0.0.1:1'"):
        run_eval(_settings(tiny_model_dir, shared_data, tmp_path / "x", workers=2,
                           ray_address="127.0.0.1:1"))
