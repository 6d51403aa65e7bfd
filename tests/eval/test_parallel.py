"""Ray data-parallel evaluation: 2 workers greedy == 1 worker exactly; a killed worker is
restarted and its chunk redone; a worker that keeps dying loses its shard -> error."""

import json

import pytest

from mindrl.eval.runner import run_eval
from mindrl.eval.settings import EvalError, EvalSettings
from mindrl.eval.testing import EngineFactory

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def ray_session():
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


def _settings(tiny_model_dir, shared_data, out, **kw):
    base = dict(model=tiny_model_dir, benchmarks=["aime24", "amc23", "gsm8k"], limit=3, n=2,
                temperature=0.0, max_new_tokens=12, batch_size=4,
                data_dir=str(shared_data / "eval"), output_dir=str(out), plot=False)
    base.update(kw)
    return EvalSettings(**base)


def _samples(run_dir):
    rows = [json.loads(x) for x in (run_dir / "samples.jsonl").open()]
    return sorted((r["benchmark"], r["problem_id"], r["sample_index"], r["text"], r["length"],
                   r["finish_reason"]) for r in rows)


def test_two_workers_equal_one_and_dead_worker_is_redone(ray_session, tiny_model_dir,
                                                         shared_data, tmp_path):
    one = run_eval(_settings(tiny_model_dir, shared_data, tmp_path / "one"), echo_table=False)
    two = run_eval(_settings(tiny_model_dir, shared_data, tmp_path / "two", workers=2),
                   echo_table=False)
    assert len(_samples(two.run_dir)) == 18
    assert _samples(one.run_dir) == _samples(two.run_dir)
    assert one.results["benchmarks"] == two.results["benchmarks"]

    # the first worker engine to start kills its process inside generate: restarted, redone
    marker = tmp_path / "died"
    dying = run_eval(_settings(tiny_model_dir, shared_data, tmp_path / "dying", workers=2),
                     engine_factory=EngineFactory(die_marker=str(marker)), echo_table=False)
    assert marker.is_file()
    assert sum(dying.results["throughput"]["restarts"].values()) == 1
    assert _samples(dying.run_dir) == _samples(one.run_dir)


def test_worker_that_keeps_dying_loses_its_shard(ray_session, tiny_model_dir, shared_data,
                                                 tmp_path):
    marker = tmp_path / "died"
    with pytest.raises(EvalError, match="lost"):
        run_eval(_settings(tiny_model_dir, shared_data, tmp_path / "lost", workers=2,
                           max_restarts=0, limit=1),
                 engine_factory=EngineFactory(die_marker=str(marker)), echo_table=False)
    # what the surviving worker finished is on disk; a rerun completes the run
    done = (tmp_path / "lost" / "samples.jsonl")
    before = len(done.read_text().splitlines()) if done.exists() else 0
    assert before < 6
    res = run_eval(_settings(tiny_model_dir, shared_data, tmp_path / "lost", workers=2, limit=1),
                   echo_table=False)
    assert res.generated == 6 - before
