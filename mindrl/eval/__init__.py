"""Math evaluation: benchmarks x n samples, avg@n / pass@k / maj@k, length reports, resumable
runs and Ray data-parallel inference. Heavy frameworks load only when a run starts."""

from mindrl.eval.settings import EvalError, EvalSettings

__all__ = ["EvalError", "EvalSettings"]
