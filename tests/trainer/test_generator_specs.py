"""The arithmetic generator spec: a bad option is one line naming the key before any model
loads; ``offset=N`` skips the first N rows of the seeded stream (train and validation)."""

import random

import pytest

from mindrl.cli import main
from mindrl.config.schema import DataConfig
from mindrl.data.io import DataError
from mindrl.trainer.prompts import VAL_SEED_OFFSET, arithmetic_val_rows, build_streams
from rewards.arithmetic import make_problem


@pytest.mark.parametrize("spec, says", [
    ("arithmetic:digitz=2", "unknown option(s) digitz"),
    ("arithmetic:digits=two", "digits='two' is not an integer"),
    ("arithmetic:digits=2,offset=-3", "offset=-3 must be >= 0"),
    ("arithmetic:digits", "must look like key=value"),
])
def test_bad_spec_is_one_line_naming_the_key(spec, says, capsys, tmp_path):
    rc = main(["train", "grpo_tiny_demo", f"data.train_file={spec}",
               f"logging.output_dir={tmp_path}"])
    err = capsys.readouterr().err.splitlines()
    assert rc == 2 and len(err) == 1, err
    assert err[0].startswith(f"mindrl: error: data.train_file='{spec}'") and says in err[0]


def test_bad_validation_spec_names_val_file():
    with pytest.raises(DataError, match=r"^data.val_file='arithmetic:slip=2'.*slip"):
        build_streams(DataConfig(train_file="arithmetic:digits=2",
                                 val_file="arithmetic:slip=2"), 0)


def test_offset_starts_the_stream_later():
    def problem(seed, i):     # row i of the training stream, computed by hand
        return make_problem(random.Random(seed * VAL_SEED_OFFSET + i), 2, "+")["problem"]

    train, val = build_streams(DataConfig(train_file="arithmetic:digits=2,offset=5",
                                          val_file="arithmetic:digits=2", max_val_samples=8), 3)
    expected = [p for p in (problem(3, i) for i in range(5, 60))
                if p not in {r["problem"] for r in val}][:10]
    assert [r["problem"] for r in train.take(10)] == expected
    # validation: offset=4 drops exactly the first 4 rows of the same seeded set
    full = arithmetic_val_rows({"digits": "2"}, 12, 3)
    assert arithmetic_val_rows({"digits": "2", "offset": "4"}, 8, 3) == full[4:]
