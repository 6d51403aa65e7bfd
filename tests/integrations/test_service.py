"""ScoringService: concurrent requests on one worker set, per-item timeouts, killed workers."""

import os
import signal
import threading
import time

import pytest

from mindrl.serve.service import ColumnError, ScoringService

pytestmark = pytest.mark.slow

SLOW = {"name": "pathological_rewards:slow_len", "weight": 1.0}


def test_scores_equal_the_rewards_and_weights():
    # accuracy (math grader) and format (Open-R1), format weighted 0.5: totals by hand
    good = "<think>\nok\n</think>\n<answer>\n\\frac{1}{2}\n</answer>"
    with ScoringService([{"name": "accuracy"}, {"name": "format", "weight": 0.5}],
                        num_workers=2, timeout=5.0) as svc:
        r = svc.score([good, "\\boxed{3}", "no"], answer=["0.5", "4", "1"])
        assert r.components == {"accuracy": [1.0, 0.0, 0.0], "format": [1.0, 0.0, 0.0]}
        assert r.total.tolist() == [1.5, 0.0, 0.0]
        # a subset with a new weight
        r2 = svc.score([good], answer=["0.5"], rewards={"format": 2.0})
        assert list(r2.components) == ["format"] and r2.total.tolist() == [2.0]
        with pytest.raises(ValueError, match="unknown reward 'nope'"):
            svc.submit(["x"], rewards=["nope"], answer=["1"])


def test_pathological_batch_answers_everything_in_time():
    # 2 hanging items among 6 normal ones, 3 workers, 0.5 s limit: the hanging items are cut
    # (None, timeouts), the rest are scored, and the whole batch ends near one timeout
    batch = ["a", "sleep:30", "bb", "ccc", "sleep:30", "dddd", "raise", "eeeee"]
    with ScoringService([SLOW], num_workers=3, timeout=0.5) as svc:
        t0 = time.monotonic()
        r = svc.score(batch)
        took = time.monotonic() - t0
        assert r.components["slow_len"] == [1.0, None, 2.0, 3.0, None, 4.0, None, 5.0]
        assert r.num_timeouts == {"slow_len": 2} and r.num_errors == {"slow_len": 1}
        assert took < 3.0, took
        assert svc.stats.restarts == 2


def test_a_slow_request_does_not_delay_another():
    # request A hangs on one worker; request B (normal items) is answered by the other
    # workers well before A's item is cut at the timeout
    with ScoringService([SLOW], num_workers=2, timeout=3.0) as svc:
        svc.score(["warm"])
        a = svc.submit(["sleep:30"])
        time.sleep(0.1)
        t0 = time.monotonic()
        b = svc.score(["x", "yy", "zzz"])
        b_took = time.monotonic() - t0
        assert b.total.tolist() == [1.0, 2.0, 3.0]
        assert b_took < 1.5, b_took
        assert not a.done()
        assert a.result(timeout=10).num_timeouts == {"slow_len": 1}


def test_worker_killed_mid_batch_loses_nothing():
    # every item takes 0.3 s; a worker is SIGKILLed while the batch runs: the item it held
    # is answered as an error (None), every other item is scored, none is lost
    batch = ["sleep:0.3"] * 8
    with ScoringService([SLOW], num_workers=2, timeout=5.0) as svc:
        svc.score(["warm"])
        fut = svc.submit(batch)
        time.sleep(0.45)
        os.kill(svc.worker_pids[0], signal.SIGKILL)
        r = fut.result(timeout=20)
        vals = r.components["slow_len"]
        assert len(vals) == 8
        assert vals.count(None) == 1 and r.num_errors == {"slow_len": 1}
        assert all(v == 9.0 for v in vals if v is not None)
        assert svc.stats.restarts == 1
        assert svc.score(["ok"]).total.tolist() == [2.0]        # the pool is whole again


def test_many_threads_share_one_service():
    with ScoringService([SLOW], num_workers=2, timeout=5.0) as svc:
        out = {}

        def call(i):
            out[i] = svc.score(["x" * i, "y" * (i + 1)]).total.tolist()

        threads = [threading.Thread(target=call, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        assert out == {i: [float(i), float(i + 1)] for i in range(8)}


def test_clean_items_are_not_held_behind_stragglers_on_every_worker():
    # both workers hang on pathological items (timeout 2 s); a clean batch submitted after them
    # is answered by burst workers well before the stragglers are cut at 2 s
    with ScoringService([SLOW], num_workers=2, timeout=2.0) as svc:
        svc.score(["warm"])
        bad = [svc.submit(["sleep:30"]) for _ in range(2)]
        time.sleep(0.05)
        t0 = time.monotonic()
        clean = svc.submit(["x", "yy", "zzz", "w"])
        r = clean.result(timeout=10)
        took = time.monotonic() - t0
        assert r.total.tolist() == [1.0, 2.0, 3.0, 1.0]
        assert took < 1.2, took
        assert not any(b.done() for b in bad)
        assert [b.result(timeout=10).num_timeouts for b in bad] == [{"slow_len": 1}] * 2
        time.sleep(0.3)
        assert len(svc.worker_pids) == 2        # idle burst workers retired


def test_a_straggler_runs_at_the_lowest_priority_and_its_worker_comes_back():
    # an item past straggler_after, with tasks queued behind it, has its worker niced to 19
    # while it runs (the clean items on the other workers get the CPU first); after it ends the
    # worker serves again at our priority. Alone, with nothing queued, it keeps its priority.
    base = os.getpriority(os.PRIO_PROCESS, 0)
    with ScoringService([SLOW], num_workers=1, timeout=5.0, straggler_after=0.1,
                        max_burst_workers=1) as svc:
        svc.score(["warm"])
        before = svc.worker_pids
        slow = svc.submit(["spin:1.2"])
        time.sleep(0.4)                                        # past the mark, nothing queued
        assert [os.getpriority(os.PRIO_PROCESS, p) for p in before] == [base]
        assert svc.stats.deprioritized == 0
        clean = svc.submit(["x" * 3])                          # now a task waits behind it
        assert clean.result(timeout=10).total.tolist() == [3.0]   # served by a burst worker
        assert os.getpriority(os.PRIO_PROCESS, before[0]) == 19
        assert svc.stats.deprioritized == 1
        assert slow.result(timeout=10).total.tolist() == [8.0]     # len("spin:1.2"), not cut
        time.sleep(0.3)
        assert svc.worker_pids == before                          # restored, not replaced
        assert [os.getpriority(os.PRIO_PROCESS, p) for p in before] == [base]
        assert svc.score(["x" * 5]).total.tolist() == [5.0]


def test_deprioritize_off_keeps_stragglers_at_normal_priority():
    base = os.getpriority(os.PRIO_PROCESS, 0)
    with ScoringService([SLOW], num_workers=1, timeout=5.0, straggler_after=0.1,
                        deprioritize_stragglers=False, max_burst_workers=0) as svc:
        svc.score(["warm"])
        slow = svc.submit(["spin:0.6"])
        time.sleep(0.4)
        assert [os.getpriority(os.PRIO_PROCESS, p) for p in svc.worker_pids] == [base]
        assert svc.stats.deprioritized == 0
        slow.result(timeout=10)


def test_null_scores_say_why_per_item():
    # a timeout, an exception, a NaN score, a None the reward returned itself, and a clean item:
    # each None has its cause, counted apart, with a one-line reason per cause
    with ScoringService([SLOW], num_workers=2, timeout=0.5) as svc:
        r = svc.score(["sleep:30", "raise", "nan", "none", "abc"])
        assert r.components["slow_len"] == [None, None, None, None, 3.0]
        assert r.status["slow_len"] == ["timeout", "error", "error", "unscored", None]
        assert (r.num_timeouts, r.num_errors, r.num_unscored) == \
            ({"slow_len": 1}, {"slow_len": 2}, {"slow_len": 1})
        msgs = sorted(r.messages["slow_len"])        # in the order the items ended
        assert len(msgs) == 4
        assert "raised (RuntimeError: asked to raise)" in msgs[0]
        assert "non-finite score (nan)" in msgs[1] and "returned null" in msgs[2]
        assert "timed out after 0.5 s" in msgs[3]
        assert r.total.tolist() == [0.0, 0.0, 0.0, 0.0, 3.0]


def test_columns_may_not_be_completions_or_a_bound_setting():
    # a column named like a setting the configuration binds would override it in the call
    entries = [{"name": "pathological_rewards:scaled_len", "params": {"scale": 2.0}}]
    with ScoringService(entries, num_workers=1, timeout=5.0) as svc:
        assert svc.score(["abc"]).total.tolist() == [6.0]
        for name in ("completions", "scale"):
            with pytest.raises(ColumnError, match=f"'{name}' cannot be a column name") as e:
                svc.submit_columns(["abc"], {name: [10.0]})
            assert e.value.column == name
        # "rewards" is an ordinary column through the mapping form
        assert svc.submit_columns(["abc"], {"rewards": [1]}).result(10).total.tolist() == [6.0]
        with pytest.raises(TypeError, match=r"completions\[1\] must be a string, got int"):
            svc.submit_columns(["abc", 42], {})


def test_close_is_bounded_while_workers_hang():
    # both workers busy on 30 s items: close() kills them instead of waiting, and the pending
    # request fails instead of hanging
    with ScoringService([SLOW], num_workers=2, timeout=60.0, max_burst_workers=0) as svc:
        svc.score(["warm"])
        fut = svc.submit(["sleep:30", "sleep:30", "x"])
        time.sleep(0.3)
        pids = svc.worker_pids
        t0 = time.monotonic()
        svc.close()
        took = time.monotonic() - t0
        assert took < 1.5, took
        with pytest.raises(RuntimeError, match="closed"):
            fut.result(timeout=1)
        for pid in pids:
            with pytest.raises(ProcessLookupError):
                os.kill(pid, 0)
