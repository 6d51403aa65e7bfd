"""The reward server over HTTP on loopback: scoring, limits, auth, errors, metrics, killed
workers."""

import os
import signal
import threading
import time

import pytest

from server_util import http, reward_server

pytestmark = pytest.mark.slow

GOOD = "<think>\nok\n</think>\n<answer>\n\\frac{1}{2}\n</answer>"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    token_file = tmp_path_factory.mktemp("tok") / "token"
    token_file.write_text("s3cret\n")
    with reward_server("--workers", "2", "--timeout", "0.5", "--reward", "accuracy",
                       "--reward", "format:0.5", "--reward", "pathological_rewards:slow_len:0",
                       "--token-file", str(token_file), "--max-request-bytes", "4000",
                       "--max-items", "64") as base:
        yield base


AUTH = {"Authorization": "Bearer s3cret"}


def test_health_is_open_and_names_the_rewards(server):
    status, body = http("GET", server + "/health")
    assert status == 200 and body["status"] == "ok"
    assert body["rewards"] == ["accuracy", "format", "slow_len"] and body["workers"] == 2


def test_score_batch(server):
    status, body = http("POST", server + "/score", {
        "completions": [GOOD, "\\boxed{3}"], "columns": {"answer": ["0.5", "4"]},
        "rewards": {"accuracy": 1.0, "format": 0.5}}, headers=AUTH)
    assert status == 200, body
    assert body["rewards"] == [1.5, 0.0]
    assert body["components"] == {"accuracy": [1.0, 0.0], "format": [1.0, 0.0]}


def test_auth_refused_without_or_with_a_wrong_token(server):
    req = {"completions": ["x"], "columns": {"answer": ["1"]}}
    assert http("POST", server + "/score", req)[0] == 401
    assert http("POST", server + "/score", req, headers={"Authorization": "Bearer nope"})[0] == 401
    assert http("GET", server + "/metrics")[0] == 401
    assert http("POST", server + "/score?token=s3cret", req)[0] == 200


def test_malformed_json_is_a_clean_400(server):
    status, body = http("POST", server + "/score", raw=b'{"completions": [', headers=AUTH)
    assert status == 400 and body["error"].startswith("malformed JSON")
    status, body = http("POST", server + "/score", {"completions": "x"}, headers=AUTH)
    assert status == 422 and body["error"] == "completions: input should be a valid array, " \
        "got a string"
    status, body = http("POST", server + "/score", {"completions": ["x"], "columns": {
        "answer": ["1", "2"]}}, headers=AUTH)
    assert status == 422 and body["field"] == "columns.answer"
    assert body["error"] == "columns.answer: has 2 entries for 1 completions (one per completion)"


def test_oversized_request_rejected(server):
    big = {"completions": ["x" * 5000], "columns": {"answer": ["1"]}}
    status, body = http("POST", server + "/score", big, headers=AUTH)
    assert status == 413 and "over the limit of 4000 bytes" in body["error"]
    many = {"completions": ["1"] * 65, "columns": {"answer": ["1"] * 65}}
    status, body = http("POST", server + "/score", many, headers=AUTH)
    assert status == 413 and "65 completions" in body["error"]


def test_pathological_batch_is_answered_within_the_timeout(server):
    # the two "sleep" items hang; the limit is 0.5 s: they score null as timeouts
    items = ["a", "sleep:60", "bb", "sleep:60", "ccc"]
    t0 = time.monotonic()
    status, body = http("POST", server + "/score", {"completions": items,
                                                    "rewards": ["slow_len"]}, headers=AUTH)
    took = time.monotonic() - t0
    assert status == 200
    assert body["components"]["slow_len"] == [1.0, None, 2.0, None, 3.0]
    assert body["timeouts"] == {"slow_len": 2}
    assert took < 3.0


def test_worker_killed_mid_batch(server):
    # 6 items of 0.3 s on 2 workers (limit 0.5 s; burst workers join after 0.1 s); the first
    # worker is killed while it runs its first item
    result = {}

    def call():
        result["r"] = http("POST", server + "/score", {"completions": ["sleep:0.3"] * 6,
                                                       "rewards": ["slow_len"]}, headers=AUTH)

    t = threading.Thread(target=call)
    t.start()
    time.sleep(0.15)
    pids = http("GET", server + "/health")[1]["worker_pids"]
    os.kill(pids[0], signal.SIGKILL)
    t.join(timeout=30)
    status, body = result["r"]
    assert status == 200
    vals = body["components"]["slow_len"]
    assert len(vals) == 6 and vals.count(None) == body["errors"]["slow_len"] == 1
    assert all(v == 9.0 for v in vals if v is not None)
    assert http("GET", server + "/health")[1]["worker_pids"] != pids


def test_openrlhf_protocol(server):
    prompt = "<|im_start|>user\nhalf?<|im_end|>\n<|im_start|>assistant\n"
    body = {"query": [prompt + GOOD + "<|im_end|>", prompt + "\\boxed{3}<|im_end|>"],
            "prompts": [prompt, prompt], "labels": ["0.5", "4"]}
    status, out = http("POST", server + "/openrlhf?token=s3cret", body)
    assert status == 200, out
    # accuracy 1 + 0.5 * format 1 (+ 0 * slow_len) for the first, 0 for the second
    assert out["rewards"] == out["scores"] == [1.5, 0.0]
    assert out["extra_logs"]["accuracy"] == [1.0, 0.0]
    assert out["extra_logs"]["format"] == [1.0, 0.0]


def test_metrics_count_requests_items_timeouts_and_rejections(server):
    http("POST", server + "/score", {"completions": ["sleep:60"], "rewards": ["slow_len"]},
         headers=AUTH)
    http("POST", server + "/score", raw=b"not json", headers=AUTH)
    status, text = http("GET", server + "/metrics", headers=AUTH)
    assert status == 200
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, v = line.rpartition(" ")
            values[name] = float(v)
    assert values["mindrl_reward_requests_total"] >= 1
    assert values["mindrl_reward_items_total"] >= 1
    assert values["mindrl_reward_timeouts_total"] >= 1
    assert values['mindrl_reward_rejected_requests_total{reason="malformed_json"}'] >= 1
    assert values["mindrl_reward_request_latency_seconds_count"] == \
        values["mindrl_reward_requests_total"]


def test_bad_reward_name_is_a_one_line_error(tmp_path):
    import subprocess
    import sys

    from server_util import REPO, free_port

    proc = subprocess.run([sys.executable, "-m", "mindrl", "serve-rewards", "--port",
                           str(free_port()), "--reward", "acuracy"], capture_output=True,
                          text=True, timeout=60, env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert proc.returncode == 2
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("mindrl: error: --reward: unknown reward")
