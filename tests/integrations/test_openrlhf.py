"""OpenRLHF 0.11.2's own reward clients against mindrl: the --remote_rm_url HTTP protocol (the
server's /openrlhf endpoint) and the reward-function file convention."""

import importlib.metadata

import pytest

from peers import peer_dir, run_checks
from server_util import reward_server

pytestmark = pytest.mark.slow


def test_openrlhf_client_against_server_and_reward_file():
    peers = peer_dir("openrlhf")
    version = next(peers.glob("openrlhf-*.dist-info")).name.split("-")[1].removesuffix(".dist")
    assert version == "0.11.2"
    with reward_server("--workers", "2", "--reward", "accuracy,format:0.5") as base:
        out = run_checks("openrlhf_checks.py", str(peers), base + "/openrlhf",
                         env={"MINDRL_REWARDS": "accuracy,format:0.5",
                              "MINDRL_REWARD_WORKERS": "1"})
    # HTTP: OpenRLHF sends all queries in one request to one server and reads rewards/scores
    assert len(out["http"]) == 1
    resp = out["http"][0]
    # right (1/2 == 0.5) and well formatted: 1 + 0.5; wrong, unformatted: 0
    assert resp["rewards"] == resp["scores"] == [1.5, 0.0]
    assert resp["extra_logs"] == {"accuracy": [1.0, 0.0], "format": [1.0, 0.0],
                                  "reward_timeouts": [0.0, 0.0], "reward_errors": [0.0, 0.0],
                                  "reward_unscored": [0.0, 0.0]}
    assert resp["timeouts"] == resp["errors"] == resp["unscored"] == {"accuracy": 0, "format": 0}
    # the file: OpenRLHF calls reward_func once per query (batch size 1 in its thread pool)
    assert [f["rewards"] for f in out["file"]] == [[1.5], [0.0]]
    assert [f["extra_logs"]["format"] for f in out["file"]] == [[1.0], [0.0]]
