"""Generated tasks as evaluation benchmarks: ``arithmetic:digits=2,ops=+``, ``kk:people=3``,
``countdown:gen``. A spec gives the held-out rows a training run on the same spec validates on
(train.seed 0). :func:`load_problems` is the one entry point of the eval runner and the data
tools: a generated spec here, anything else :func:`mindrl.data.benchmarks.load_benchmark`.
"""

from __future__ import annotations

from typing import List, Optional

from mindrl.data.benchmarks import Row, _check_ids, load_benchmark
from mindrl.data.io import DataError

GENERATED_EVAL_ROWS = 256


def generated_rows(spec: str, limit: Optional[int]) -> Optional[List[Row]]:
    """``{"id", "problem", "answer"}`` rows of a generated task, the first ``limit`` (default
    256); None when ``spec`` is not a generator."""
    from mindrl.data.prompts import _is_generator_spec, generate_prompts
    from mindrl.data.generators import GENERATORS, generator_val_rows, parse_generator_spec

    name = spec.partition(":")[0]
    if name in GENERATORS:
        try:
            rows = generator_val_rows(name, parse_generator_spec(spec)[1],
                                      limit or GENERATED_EVAL_ROWS, 0)
        except DataError as e:
            raise DataError(f"benchmark '{spec}': {e}") from None
    elif _is_generator_spec(spec):
        rows = generate_prompts(spec, limit or GENERATED_EVAL_ROWS)
    else:
        return None
    return _check_ids([{"id": str(i), "problem": r["problem"], "answer": str(r["answer"])}
                       for i, r in enumerate(rows)], spec)


def load_problems(spec: str, data_dir=None, **kwargs) -> List[Row]:
    """A benchmark's rows: a generated task, else :func:`load_benchmark` (same arguments)."""
    rows = generated_rows(spec, kwargs.get("limit"))
    return rows if rows is not None else load_benchmark(spec, data_dir, **kwargs)
