"""Large training files: rows read by index (JSONL line offsets, parquet row groups), mapped on
demand, and the training stream over them (order, resume, bounded cache). The 1M-row
measurements are in bench/data_io.py; here the files are a few hundred rows."""

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import mindrl.data.io as io
from mindrl.config.schema import DataConfig
from mindrl.data.formats import index_file, load_file
from mindrl.data.io import DataError, JsonlRows, ParquetRows, iter_rows, open_indexed
from mindrl.trainer.prompts import FileStream, ListStream, build_streams, epoch_order


def verl_rows(n):
    return [{"data_source": "openai/gsm8k",
             "prompt": [{"role": "user", "content": f"What is {i} + 17?"}],
             "ability": "math", "reward_model": {"style": "rule", "ground_truth": str(i + 17)},
             "extra_info": {"split": "train", "index": i}} for i in range(n)]


def write_parquet(path: Path, rows, group: int) -> Path:
    pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=group)
    return path


def write_jsonl(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def messy_jsonl(tmp_path: Path) -> Path:
    """Every line shape the streaming reader accepts: a BOM, blank and whitespace-only lines
    (an ideographic space too), CRLF endings, an indented row, a list row, no final newline."""
    lines = ['\ufeff{"q": "a", "answer": "1"}\n', "\n", "   \n", '{"q": "b", "answer": "2"}\r\n',
             "\u3000\n", '  {"q": "c", "answer": "3"}\n', "\r\n",
             '[{"value": "d"}, {"ground_truth": {"value": "4"}}]\n',
             '{"q": "é", "answer": "5"}\n', "\t\n", '{"q": "f", "answer": "6"}']
    path = tmp_path / "messy.jsonl"
    path.write_bytes("".join(lines).encode("utf-8"))
    return path


# ------------------------------------------------------------------ readers by index
@pytest.mark.parametrize("chunk", [io.INDEX_CHUNK, 5, 1])
def test_jsonl_index_yields_what_the_streaming_reader_yields(tmp_path, monkeypatch, chunk):
    # tiny chunks put line starts and newlines on every chunk boundary
    monkeypatch.setattr(io, "INDEX_CHUNK", chunk)
    path = messy_jsonl(tmp_path)
    expect = list(iter_rows(path))
    # by hand: the six rows sit on lines 1, 4, 6, 8, 9, 11 (blank lines counted)
    assert [pos for pos, _ in expect] == [1, 4, 6, 8, 9, 11]
    rows = JsonlRows(path)
    assert len(rows) == 6
    assert rows.read(range(6)) == expect
    assert rows.read([5, 0, 3]) == [expect[5], expect[0], expect[3]]
    for k in (1, 2, 3, 6, 9):
        assert JsonlRows(path, max_rows=k).read(range(min(k, 6))) == list(iter_rows(path, k))
    plain = write_jsonl(tmp_path / "plain.jsonl", [{"q": i} for i in range(5)])
    for k in (1, 2, 4, 5, 7):               # indexing stops early; the last row stays whole
        assert JsonlRows(plain, max_rows=k).read(range(min(k, 5))) == list(iter_rows(plain, k))


def test_jsonl_bad_line_is_named_when_read(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b'{"q": "a"}\n\n{"q": oops}\n{"q": "\xff"}\n{"q": "d"}\n')
    rows = JsonlRows(path)                  # indexing does not parse
    assert len(rows) == 4 and rows.read([3]) == [(5, {"q": "d"})]
    with pytest.raises(DataError) as lazy:
        rows.read([1])
    with pytest.raises(DataError) as eager:
        list(iter_rows(path))
    assert str(lazy.value) == str(eager.value)
    assert f"{path}: line 3: not valid JSON" in str(lazy.value)
    with pytest.raises(DataError, match="line 4: not UTF-8 text"):
        rows.read([2])


def test_parquet_rows_by_group_and_row(tmp_path):
    rows = verl_rows(50)
    path = write_parquet(tmp_path / "v.parquet", rows, group=7)   # groups of 7, the last of 1
    pr = ParquetRows(path)
    assert pr.group_sizes.tolist() == [7] * 7 + [1]
    order = [49, 0, 13, 14, 6, 7, 48, 20]
    assert pr.read(order) == [(i + 1, rows[i]) for i in order]
    assert [r for _, r in pr.read(range(50))] == [r for _, r in iter_rows(path)]
    # max_rows cuts inside a group
    cut = ParquetRows(path, max_rows=17)
    assert len(cut) == 17 and cut.group_sizes.tolist() == [7, 7, 3]
    assert cut.read(range(17)) == list(iter_rows(path, 17))
    with pytest.raises(IndexError):
        cut.read([17])


def test_parquet_cache_holds_at_most_its_budget(tmp_path):
    path = write_parquet(tmp_path / "v.parquet", verl_rows(100), group=10)
    pr = ParquetRows(path, cache_rows=25)
    for i in np.random.default_rng(0).permutation(100):
        pr.read([i])
        assert sum(t.num_rows for t in pr._cache.values()) <= 25


def test_json_file_has_no_indexed_reader(tmp_path):
    path = tmp_path / "rows.json"
    path.write_text(json.dumps([{"q": "a", "answer": "1"}]))
    with pytest.raises(DataError, match="read whole"):
        open_indexed(path)


# ------------------------------------------------------------------ mapping = the eager path
@pytest.mark.parametrize("kind", ["jsonl", "parquet"])
def test_indexed_mapping_equals_the_eager_loader(tmp_path, kind):
    rows = verl_rows(40)
    path = write_jsonl(tmp_path / "v.jsonl", rows) if kind == "jsonl" else \
        write_parquet(tmp_path / "v.parquet", rows, group=6)
    plan, eager = load_file(path, "rl")
    plan2, indexed = index_file(path, "rl")
    assert plan2.describe() == plan.describe() == ("detected: verl (problem <- prompt, answer <- "
                                                   "reward_model.ground_truth, id <- "
                                                   "extra_info.index)")
    assert indexed.get(range(40)) == eager
    assert eager[3]["problem"] == "What is 3 + 17?" and eager[3]["answer"] == "20"
    # the training stream with shuffle off: the same rows in the same order, epoch after epoch
    stream = FileStream(indexed, seed=0, shuffle=False)
    assert stream.take(25) + stream.take(25) == eager + eager[:10]


def test_indexed_mapping_with_field_paths_and_max_rows(tmp_path):
    path = write_jsonl(tmp_path / "c.jsonl", [{"meta": {"q": f"q{i}"}, "sol": [str(i), "x"]}
                                              for i in range(9)])
    fields = {"problem": "meta.q", "answer": "sol"}
    _, eager = load_file(path, "rl", fields=fields, max_rows=5)
    _, indexed = index_file(path, "rl", fields=fields, max_rows=5)
    assert len(indexed) == 5 and indexed.get(range(5)) == eager
    assert eager[2]["answer"] == ["2", "x"]


def test_mapping_error_names_the_line(tmp_path):
    rows = verl_rows(5)
    del rows[3]["reward_model"]["ground_truth"]
    path = tmp_path / "v.jsonl"
    path.write_text("\n" + "".join(json.dumps(r) + "\n" for r in rows))
    _, indexed = index_file(path, "rl")
    assert len(indexed.get([0, 1, 2, 4])) == 4
    with pytest.raises(DataError, match=r"v.jsonl: line 5: field 'reward_model.ground_truth'"):
        indexed.get([3])


# ------------------------------------------------------------------ the shuffle
def test_epoch_order_by_hand():
    assert epoch_order(5, 0, 0, shuffle=False).tolist() == [0, 1, 2, 3, 4]
    # no groups, or everything in one window: ListStream's permutation
    assert epoch_order(6, 4, 2).tolist() == np.random.default_rng(6).permutation(6).tolist()
    assert epoch_order(6, 4, 2, group_sizes=[2, 4], window_rows=6).tolist() == \
        np.random.default_rng(6).permutation(6).tolist()
    # groups 0: rows 0-1, 1: rows 2-4, 2: row 5; windows close at >= 3 rows
    rng = np.random.default_rng(7 + 1)
    g = rng.permutation(3).tolist()
    windows, cur = [], []
    for x in g:
        cur += {0: [0, 1], 1: [2, 3, 4], 2: [5]}[x]
        if len(cur) >= 3:
            windows.append(cur)
            cur = []
    windows += [cur] if cur else []
    expect = [w[j] for w in windows for j in rng.permutation(len(w))]
    assert epoch_order(6, 7, 1, group_sizes=[2, 3, 1], window_rows=3).tolist() == expect


def _window_cuts(groups):
    """Positions p where no group has rows on both sides of p (windows end at such cuts)."""
    first = {g: i for i, g in reversed(list(enumerate(groups)))}
    last = {g: i for i, g in enumerate(groups)}
    return [p for p in range(1, len(groups))
            if all(last[g] < p or first[g] >= p for g in first)]


@pytest.mark.parametrize("window", [1, 30, 64, 10_000])
def test_windowed_shuffle_is_a_permutation_of_whole_windows(window):
    sizes = [13, 7, 20, 1, 19, 4]          # 64 rows
    starts = np.concatenate([[0], np.cumsum(sizes)])
    group_of = np.searchsorted(starts, np.arange(64), side="right") - 1
    orders = [epoch_order(64, 5, e, group_sizes=sizes, window_rows=window) for e in range(3)]
    for e, order in enumerate(orders):
        assert sorted(order.tolist()) == list(range(64))            # each row once
        cuts = _window_cuts(group_of[order].tolist())
        if window == 1:        # one group a window: each group's rows come out together
            assert len(cuts) == 5
        elif window == 30:     # windows of >= 30 rows: one cut at least 30 rows in
            assert any(30 <= c <= 64 - 1 for c in cuts) and all(c >= 30 for c in cuts)
        else:                  # n <= window: one window, ListStream's permutation
            assert order.tolist() == np.random.default_rng(5 + e).permutation(64).tolist()
    assert orders[0].tolist() != orders[1].tolist() != orders[2].tolist()


def test_windowed_shuffle_mixes_groups_within_a_window():
    order = epoch_order(64, 0, 0, group_sizes=[16] * 4, window_rows=32)
    groups = order // 16
    first, second = set(groups[:32].tolist()), set(groups[32:].tolist())
    assert len(first) == 2 and len(second) == 2 and not first & second


# ------------------------------------------------------------------ the stream
@pytest.mark.parametrize("kind", ["jsonl", "parquet"])
def test_file_stream_epochs_and_exact_resume(tmp_path, kind):
    rows = verl_rows(60)
    path = write_jsonl(tmp_path / "v.jsonl", rows) if kind == "jsonl" else \
        write_parquet(tmp_path / "v.parquet", rows, group=8)
    _, indexed = index_file(path, "rl")
    stream = FileStream(indexed, seed=11, window_rows=20)
    ids = [r["id"] for r in stream.take(60)]
    assert sorted(ids, key=int) == [str(i) for i in range(60)]      # each row once an epoch
    assert ids != [str(i) for i in range(60)]
    stream.take(17)
    state = stream.state()
    assert state == {"epoch": 1, "pos": 17, "rows": 60}
    expect = [r["id"] for r in stream.take(100)]                      # crosses into epoch 2
    _, again = index_file(path, "rl")
    resumed = FileStream(again, seed=11, window_rows=20)
    resumed.restore(state)
    assert [r["id"] for r in resumed.take(100)] == expect
    if kind == "jsonl":        # the order of ListStream over the eager rows, exactly
        eager = ListStream(load_file(path, "rl")[1], seed=11)
        eager.restore({"epoch": 1, "pos": 17})
        assert [r["id"] for r in eager.take(100)] == expect
        resumed.restore({"epoch": 1, "pos": 17})                    # a ListStream state
        assert [r["id"] for r in resumed.take(100)] == expect


def test_file_stream_refuses_a_state_from_another_file(tmp_path):
    _, indexed = index_file(write_jsonl(tmp_path / "v.jsonl", verl_rows(10)), "rl")
    with pytest.raises(DataError, match="saved with 12 training rows, the file now has 10"):
        FileStream(indexed, seed=0).restore({"epoch": 0, "pos": 3, "rows": 12})


def test_file_stream_cache_stays_within_a_window(tmp_path):
    path = write_parquet(tmp_path / "v.parquet", verl_rows(200), group=10)
    _, indexed = index_file(path, "rl")
    stream = FileStream(indexed, seed=3, window_rows=30)
    for _ in range(45):                     # a bit more than two epochs, 10 rows a step
        stream.take(10)
        assert sum(t.num_rows for t in indexed.source._cache.values()) <= 30 + 10


def test_build_streams_reads_large_formats_by_index(tmp_path, caplog):
    import logging

    from mindrl.config.loader import load_config

    rows = verl_rows(30)
    pq_path = write_parquet(tmp_path / "v.parquet", rows, group=4)
    cfg = load_config(None, ["model.chat_template=none", f"data.train_file={pq_path}",
                             "data.val_file=",
                             "data.max_train_samples=25", "data.preflight_rows=8"])
    with caplog.at_level(logging.INFO, logger="mindrl.data"):
        train, val = build_streams(cfg.data, 0, cfg=cfg)
    assert isinstance(train, FileStream) and len(train.rows) == 25 and val == []
    assert f"data: {pq_path} (25 rows): detected: verl" in caplog.text
    assert "gold answer: 17  (id 0)" in caplog.text
    _, eager = load_file(pq_path, "rl", max_rows=25)
    stream = ListStream(eager, 0)
    assert sorted(r["id"] for r in train.take(25)) == sorted(r["id"] for r in stream.take(25))
    # .json is one document: held in memory
    js = tmp_path / "v.json"
    js.write_text(json.dumps(rows))
    train, _ = build_streams(DataConfig(train_file=str(js), val_file=""), 0)
    assert isinstance(train, ListStream)
    jl = write_jsonl(tmp_path / "v.jsonl", rows)
    train, _ = build_streams(DataConfig(train_file=str(jl), val_file="", shuffle=False), 0)
    assert isinstance(train, FileStream)
    assert [r["id"] for r in train.take(3)] == ["0", "1", "2"]
