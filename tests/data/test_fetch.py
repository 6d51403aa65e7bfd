"""``mindrl data fetch`` against a local mirror of the Hub's file endpoints (tests/data/hub_mirror.py,
served from memory by a thread; HF_ENDPOINT points at it): the files land where the loaders read
them, checksums are verified, a cut transfer resumes, a second fetch downloads nothing."""

import hashlib
import io
import json
import os
import subprocess
import sys

import pytest

from hub_mirror import COMMIT, HubMirror
from mindrl.data.benchmarks import load_benchmark
from mindrl.data.fetch import FetchError, expand_names

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

MATH500 = [{"problem": "What is $1+1$?", "solution": "...", "answer": "2", "subject": "x",
            "level": 1, "unique_id": "test/a/1.json"},
           {"problem": "Simplify $\\frac{2}{4}$.", "solution": "...", "answer": "\\frac{1}{2}",
            "subject": "x", "level": 2, "unique_id": "test/a/2.json"}]
GSM8K = [{"question": "Tom has 3 apples and buys 4. How many?", "answer": "3+4=7\n#### 7"},
         {"question": "A box holds 1,200 pins; how many in two?", "answer": "x\n#### 2,400"}]


def _parquet(rows) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows), buf)
    return buf.getvalue()


@pytest.fixture
def hub():
    files = {("HuggingFaceH4/MATH-500", "test.jsonl"):
             "".join(json.dumps(r) + "\n" for r in MATH500).encode(),
             ("openai/gsm8k", "main/test-00000-of-00001.parquet"): _parquet(GSM8K)}
    with HubMirror(files) as m:
        yield m


def _fetch(hub, tmp_path, *names):
    env = dict(os.environ, HF_ENDPOINT=hub.url, HF_HUB_OFFLINE="0",
               HF_HUB_CACHE=str(tmp_path / "hub-cache"), NO_PROXY="127.0.0.1",
               PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "mindrl", "data", "fetch", *names,
                           "--data-dir", str(tmp_path / "data")],
                          env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.filterwarnings("ignore:.*rows, expected")
def test_fetch_writes_the_layout_the_loaders_read(hub, tmp_path):
    r = _fetch(hub, tmp_path, "math500", "gsm8k")
    assert r.returncode == 0, r.stderr
    data = tmp_path / "data"
    rows = load_benchmark("math500", str(data))
    assert [(x["id"], x["problem"], x["answer"]) for x in rows] == \
        [(m["unique_id"], m["problem"], m["answer"]) for m in MATH500]
    g = load_benchmark("gsm8k", str(data), limit=2)       # parquet -> JSONL, "#### " parsed
    assert [x["answer"] for x in g] == ["7", "2400"]
    assert [x["problem"] for x in g] == [q["question"] for q in GSM8K]
    man = json.loads((data / "fetched.json").read_text())
    served = hub.files[("openai/gsm8k", "main/test-00000-of-00001.parquet")]
    assert man["gsm8k"]["commit"] == COMMIT
    assert man["gsm8k"]["source_sha256"] == hashlib.sha256(served).hexdigest()
    assert man["gsm8k"]["rows"] == 2
    target = data / "eval" / "math500_test.simplerl.jsonl"
    assert man["math500"]["sha256"] == hashlib.sha256(target.read_bytes()).hexdigest()
    assert target.read_bytes() == hub.files[("HuggingFaceH4/MATH-500", "test.jsonl")]
    # the pinned revision is the one asked for
    assert any("/resolve/ff5b20257d8185524591543f8ff5993951537bb8/test.jsonl" in p
               for _, p, _ in hub.log)
    # a second fetch finds both verified and downloads nothing
    n_get = len(hub.gets())
    r2 = _fetch(hub, tmp_path, "math500,gsm8k")
    assert r2.returncode == 0, r2.stderr
    assert len(hub.gets()) == n_get
    assert r2.stdout.count("already in") == 2


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:.*rows, expected")
def test_fetch_resumes_a_cut_transfer(hub, tmp_path):
    hub.cut_once.add("main/test-00000-of-00001.parquet")
    r = _fetch(hub, tmp_path, "gsm8k")
    assert r.returncode == 0, r.stderr
    # the first GET stopped halfway; huggingface_hub tried again (from the bytes it had kept:
    # none here, since it writes in 10 MB chunks), and the file is whole and verified
    assert len(hub.gets("test-00000-of-00001.parquet")) == 2
    assert "resume" in r.stderr
    assert [x["answer"] for x in load_benchmark("gsm8k", str(tmp_path / "data"), limit=2)] == \
        ["7", "2400"]


def test_fetch_refuses_a_file_whose_checksum_differs(hub, tmp_path):
    hub.etags["test.jsonl"] = hashlib.sha256(b"other bytes").hexdigest()
    r = _fetch(hub, tmp_path, "math500")
    assert r.returncode == 2
    err = r.stderr.strip()
    assert len(err.splitlines()) == 1 and "SHA-256" in err and "math500" in err
    assert not (tmp_path / "data" / "eval" / "math500_test.simplerl.jsonl").exists()


def test_fetch_names():
    assert expand_names(["all"])[:2] == ["aime24", "aime25"]
    assert expand_names(["gsm8k,math500", "gsm8k"]) == ["gsm8k", "math500"]
    with pytest.raises(FetchError, match="unknown data set 'gsm9k'; valid names: .*math500"):
        expand_names(["gsm9k"])
