"""data.val_split: the own-data recipes validate on rows held out of the user's own file."""

import json

import numpy as np
import pytest

from mindrl.config.loader import load_config
from mindrl.data.io import DataError
from mindrl.trainer.prompts import build_streams, held_out_split


def _file(path, n):
    rows = [{"question": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(n)]
    if path.suffix == ".json":
        path.write_text(json.dumps(rows))
    else:
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _data_cfg(path, **kw):
    cfg = load_config("grpo_own_math_tiny", [f"data.train_file={path}"] +
                      [f"data.{k}={v}" for k, v in kw.items()])
    return cfg.data


@pytest.mark.parametrize("suffix", [".jsonl", ".json"])     # FileStream and ListStream
def test_own_recipe_holds_out_a_tenth_of_the_users_file(tmp_path, suffix):
    path = _file(tmp_path / f"mine{suffix}", 30)
    d = _data_cfg(path)
    assert (d.val_file, d.val_split) == ("", 0.1)
    train, val = build_streams(d, seed=0)
    held = sorted(np.random.default_rng(0).permutation(30)[:3].tolist())   # round(0.1 * 30)
    assert [r["problem"] for r in val] == [f"What is {i} + {i}?" for i in held]
    assert [r["answer"] for r in val] == [str(2 * i) for i in held]
    seen = [r["problem"] for r in train.take(27)]          # one epoch of the training rows
    assert sorted(seen) == sorted(f"What is {i} + {i}?" for i in range(30) if i not in held)
    # the split depends on the file, not on train.seed
    assert [r["problem"] for r in build_streams(d, seed=5)[1]] == [r["problem"] for r in val]


def test_split_size_cap_and_bad_values(tmp_path):
    assert held_out_split(10, 0.2) == ([4, 6], [0, 1, 2, 3, 5, 7, 8, 9])
    assert len(held_out_split(1000, 0.1, max_rows=16)[0]) == 16
    assert len(held_out_split(5, 0.01)[0]) == 1               # at least one row
    with pytest.raises(DataError, match="data.val_split=1.5"):
        held_out_split(10, 1.5)
    one = _file(tmp_path / "one.jsonl", 1)
    with pytest.raises(DataError, match=r"one.jsonl: 1 row\(s\): data.val_split=0.1 leaves none"):
        build_streams(_data_cfg(one), seed=0)


def test_a_validation_file_wins_over_the_split(tmp_path):
    path = _file(tmp_path / "mine.jsonl", 20)
    other = _file(tmp_path / "val.jsonl", 4)
    train, val = build_streams(_data_cfg(path, val_file=other), seed=0)
    assert [r["answer"] for r in val] == ["0", "2", "4", "6"]
    assert len({r["problem"] for r in train.take(20)}) == 20   # nothing held out


def test_the_split_is_said(tmp_path, caplog):
    import logging

    path = _file(tmp_path / "mine.jsonl", 30)
    with caplog.at_level(logging.INFO, logger="mindrl.data"):
        build_streams(_data_cfg(path), seed=0)
    assert (f"validation: 3 rows of {path} held out (data.val_split=0.1); training on the "
            f"other 27") in [r.getMessage() for r in caplog.records]
