"""The ``mindrl eval`` command line, self-contained: ``mindrl.cli`` calls
:func:`add_eval_parser` on its subparsers and then ``args.func(args)``.

    mindrl eval MODEL_DIR [--benchmarks math500,aime24,...] [--n 64] [--temperature 0.6] ...
    mindrl eval RUN_DIR [--all-checkpoints] [--max-new-tokens 16384,32768] ...   (a sweep)
    mindrl eval compare RUN_A RUN_B
    python -m mindrl.eval.cli ...            (the same, without the top-level CLI)

Options given on the command line override those of ``--config YAML`` (a mapping of
:class:`~mindrl.eval.settings.EvalSettings` fields, at the top level or under ``eval:``).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import fields
from pathlib import Path
from typing import Any, Dict, List, Optional

from mindrl.eval.settings import EvalError, EvalSettings

_FLAGS = {  # setting -> (flag, type)
    "benchmarks": ("--benchmarks", str), "n": ("--n", int), "temperature": ("--temperature", float),
    "top_p": ("--top-p", float), "top_k": ("--top-k", int), "min_p": ("--min-p", float),
    "max_new_tokens": ("--max-new-tokens", str), "seed": ("--seed", int),
    "template": ("--template", str), "system_prompt": ("--system-prompt", str),
    "engine": ("--engine", str), "backend": ("--backend", str), "dtype": ("--dtype", str),
    "device": ("--device", str), "tensor_parallel_size": ("--tensor-parallel-size", int),
    "data_dir": ("--data-dir", str), "problem_field": ("--problem-field", str),
    "answer_field": ("--answer-field", str), "id_field": ("--id-field", str),
    "limit": ("--limit", int), "output_dir": ("--output-dir", str), "workers": ("--workers", int),
    "ray_address": ("--ray-address", str), "ray_resource": ("--ray-resource", str),
    "max_restarts": ("--max-restarts", int), "batch_size": ("--batch-size", int),
    "extract_mode": ("--extract-mode", str), "grade_timeout": ("--grade-timeout", float),
    "approx_rel_tol": ("--approx-rel-tol", float),
    "grade_workers": ("--grade-workers", int), "cache_dir": ("--cache-dir", str),
    "tools": ("--tools", str), "tool_format": ("--tool-format", str),
    "max_turns": ("--max-turns", int), "tool_timeout": ("--tool-timeout", float),
}
_CHOICES = {"engine": ["native", "vllm"], "backend": ["torch", "mindspore"],
            "device": ["auto", "cpu", "cuda", "ascend"], "tool_format": ["tir", "chat"],
            "dtype": ["auto", "float32", "bfloat16", "float16"]}
# What a None default means, for settings whose help does not already say it.
_NONE_DEFAULT = {"problem_field": "the first usual problem field present",
                 "answer_field": "the first usual answer field present",
                 "id_field": "the first usual id field present, else the row number",
                 "cache_dir": "$MINDRL_CACHE, else ~/.cache/mindrl",
                 "approx_rel_tol": "off"}


def add_eval_parser(subparsers) -> argparse.ArgumentParser:
    """Add the ``eval`` command (and ``eval compare``) to an argparse subparsers object."""
    helps = {f.name: f.metadata.get("help", "") for f in fields(EvalSettings)}
    defaults = EvalSettings()
    p = subparsers.add_parser(
        "eval", help="evaluate a model on math benchmarks (or: eval compare RUN_A RUN_B)",
        description="Sample n responses per problem, grade them, report avg@n / pass@k / maj@k "
                    "and response lengths. 'mindrl eval compare RUN_A RUN_B' compares two runs.")
    p.add_argument("target", nargs="+", metavar="MODEL_DIR | RUN_DIR | compare RUN_A RUN_B",
                   help="a model directory (or builtin:tiny), a training run directory (its "
                        "newest checkpoint; every one with --all-checkpoints), or 'compare' "
                        "and two eval run dirs")
    for name, (flag, typ) in _FLAGS.items():
        default = getattr(defaults, name)
        if name == "benchmarks":
            default = ",".join(default)
        if default is None:             # the help says what None means, or _NONE_DEFAULT does
            default = _NONE_DEFAULT.get(name)
        shown = "" if default is None else f" (default: {default})"
        if name == "max_new_tokens":
            shown += "; a comma-separated list sweeps the lengths into one table"
        # default=None so that only flags actually given override the YAML config; the text
        # shows EvalSettings' default (argparse's ArgumentDefaultsHelpFormatter would show None)
        p.add_argument(flag, dest=name, type=typ, default=None, choices=_CHOICES.get(name),
                       help=f"{helps[name]}{shown}")
    p.add_argument("--last-number-fallback", dest="last_number_fallback",
                   action=argparse.BooleanOptionalAction, default=None,
                   help=f"{helps['last_number_fallback']} (default: on)")
    p.add_argument("--no-plot", dest="plot", action="store_false", default=None,
                   help="do not write lengths.png (default: write it)")
    p.add_argument("--all-checkpoints", action="store_true",
                   help="with a training run directory: evaluate every complete checkpoint "
                        "into one table (sweep.md) and one plot (sweep.png)")
    p.add_argument("--config", default=None, help="YAML file with eval settings")
    p.set_defaults(func=eval_command)
    return p


def settings_from_args(args: argparse.Namespace) -> EvalSettings:
    """EvalSettings from the YAML config (if any) overridden by the flags given."""
    d: Dict[str, Any] = {}
    if getattr(args, "config", None):
        from mindrl.config.loader import read_yaml_file  # noqa: PLC0415

        path = Path(args.config)
        if not path.is_file():
            raise EvalError(f"config file not found: {path}")
        path = path.resolve()
        loaded = read_yaml_file(path, error=EvalError) or {}
        if not isinstance(loaded, dict):
            raise EvalError(f"{path}: expected a mapping of eval settings")
        d.update(loaded.get("eval", loaded) if isinstance(loaded.get("eval"), dict) else loaded)
        where = str(path)
    else:
        where = "settings"
    for name in list(_FLAGS) + ["last_number_fallback", "plot"]:
        v = getattr(args, name, None)
        if v is not None:
            d[name] = v
    d["model"] = args.target[0]
    if "max_new_tokens" in d:           # one length here; a list is a sweep (eval_command)
        from mindrl.eval.sweep import parse_lengths  # noqa: PLC0415

        d["max_new_tokens"] = parse_lengths(d["max_new_tokens"])[0]
    return EvalSettings.from_dict(d, where)


def eval_command(args: argparse.Namespace) -> int:
    """Entry point bound to ``args.func``; returns the process exit code. User errors
    (EvalError, DataError, a bad model path: all UserError) go up to
    :func:`mindrl.command.run_command`, which prints them as one line and exits 2."""
    target = args.target
    if target[0] == "compare":
        if len(target) != 3:
            raise EvalError("usage: mindrl eval compare RUN_A RUN_B")
        from mindrl.eval.report import compare_runs  # noqa: PLC0415

        try:
            print(compare_runs(target[1], target[2]))
        except FileNotFoundError as e:          # a run directory without results.json
            raise EvalError(str(e)) from None
        return 0
    if len(target) != 1:
        raise EvalError(f"expected one MODEL_DIR, got {' '.join(target)}")
    from mindrl.eval import sweep  # noqa: PLC0415

    run_dir = sweep.is_run_dir(target[0])
    if not run_dir:
        _check_model_arg(target[0])
    settings = settings_from_args(args)
    lengths = sweep.parse_lengths(args.max_new_tokens) if getattr(args, "max_new_tokens", None) \
        else [settings.max_new_tokens]
    points = sweep.plan(settings, lengths, getattr(args, "all_checkpoints", False))
    if run_dir:
        for p in points:
            _check_model_arg(p.model)
    settings.check()
    if settings.output_dir:      # before the model loads, not at mkdir after it
        from mindrl.paths import check_output_path  # noqa: PLC0415

        check_output_path(settings.output_dir, "--output-dir", error=EvalError)
    if len(points) > 1:
        record = sweep.run_sweep(settings, points)
        print(record["table"], flush=True)
        print(f"\nsweep directory: {record['dir']} (sweep.md, sweep.json, sweep.png; one eval "
              "run per row inside)")
        return 0
    from mindrl.eval.runner import run_eval  # noqa: PLC0415

    import dataclasses  # noqa: PLC0415

    p = points[0]
    result = run_eval(dataclasses.replace(settings, model=p.model, max_new_tokens=p.max_new_tokens))
    print(f"\nrun directory: {result.run_dir} (results.json, table.md, samples, lengths.png)")
    return 0


def _check_model_arg(model: str) -> None:
    """MODEL_DIR before anything is loaded: a known ``builtin:`` name, or a directory with
    config.json, tokenizer and weights."""
    from mindrl.models.tiny import BUILTIN_PREFIX, builtin_names, check_model_dir  # noqa: PLC0415

    if model.startswith(BUILTIN_PREFIX):
        if model[len(BUILTIN_PREFIX):] not in builtin_names():
            raise EvalError(f"MODEL_DIR '{model}' is not a built-in model; valid: "
                            + ", ".join(BUILTIN_PREFIX + n for n in builtin_names()))
        return
    try:
        check_model_dir(model, key="MODEL_DIR")
    except FileNotFoundError as e:
        raise EvalError(str(e)) from None


def main(argv: Optional[List[str]] = None) -> int:
    from mindrl.command import run_command  # noqa: PLC0415

    parser = argparse.ArgumentParser(prog="mindrl")
    add_eval_parser(parser.add_subparsers(dest="command", required=True))
    return run_command(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
