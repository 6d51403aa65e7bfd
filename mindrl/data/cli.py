"""The ``mindrl data`` command line: training sets curated from an eval run's samples.

    mindrl data filter    SAMPLES... --lo 0.1 --hi 0.9 -o prompts.jsonl
    mindrl data pairs     SAMPLES... -o pairs.jsonl [--max-pairs 1] [--solved-pairs 2]
                          [--pair-format standard|pairwise] [--seed 0] [--prefer-shorter]
    mindrl data rejection SAMPLES... -o sft.jsonl [--lo 0 --hi 1] [--max-per-problem 0]
    mindrl data sample    IN -o OUT --n 2446 [--seed 0] [--by level]
    mindrl data inspect   FILE [--rows 2] [--template NAME] [field options]
    mindrl data convert   FILE -o OUT.parquet|OUT.jsonl --to verl|mindrl|pairs|sft [field options]
    mindrl data clean     IN OUT --drop-urls --drop-cjk [--field problem]   (mindrl.data.clean)
    mindrl data fetch     NAME... [--data-dir DIR] [--force]   (mindrl.data.fetch: the Hub)
    python -m mindrl.data.cli ...            (the same, without the top-level CLI)

SAMPLES is an eval run directory or its ``samples.jsonl``; several are pooled (the samples of
each problem across runs, e.g. three models). ``--tokenizer T --cot-longer-than N`` (and
``--cot-shorter-than``) keep only samples whose chain of thought (before ``</think>``) has more
(fewer) than N tokens of T, on filter, pairs, rejection and clean. Field options (``--format``,
``--problem-field``, ``--answer-field``, ``--id-field``, and for inspect/convert
``--response-field``, ``--chosen-field``, ``--rejected-field``) take the paths of
:mod:`mindrl.data.fields` (``reward_model.ground_truth``, ``prompt[-1].content``,
``year,contest,number``); for filter/pairs/rejection they map the benchmark files the samples
answer, overriding the run's settings. ``mindrl.cli`` calls
:func:`add_data_parser` on its subparsers and then ``args.func(args)``; the library functions
are in :mod:`mindrl.data.tools`.
"""

from __future__ import annotations

import argparse
import sys
from typing import List, Optional


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("samples", metavar="SAMPLES", nargs="+",
                   help="eval run directories or samples.jsonl files (several: pooled)")
    p.add_argument("-o", "--output", required=True, help="JSONL file to write (atomically)")
    p.add_argument("--problems", default=None,
                   help="benchmark specs the samples answer, comma-separated (default: the "
                        "run's settings.json)")
    p.add_argument("--data-dir", default=None,
                   help="directory with the benchmark files (default: the run's, else "
                        "$MINDRL_DATA_DIR or the user cache)")
    p.add_argument("--settings-hash", default=None,
                   help="which samples to use when the file holds several settings")
    _field_options(p, sft_pref=False)
    from mindrl.data.tools import length_options  # noqa: PLC0415

    length_options(p)


def _field_options(p: argparse.ArgumentParser, sft_pref: bool = True) -> None:
    from mindrl.data.formats import FORMATS  # noqa: PLC0415

    p.add_argument("--format", default="auto", choices=["auto"] + FORMATS.names(),
                   help="the data format (auto = detected from the columns)")
    p.add_argument("--problem-field", default="", help="path of the problem, e.g. "
                   "extra_info.question or prompt (chat messages: the user turn)")
    p.add_argument("--answer-field", default="", help="path of the gold answer, e.g. "
                   "reward_model.ground_truth")
    p.add_argument("--id-field", default="", help="path(s) of the id; comma-separated are "
                   "joined with '-', e.g. year,contest,number")
    if sft_pref:
        p.add_argument("--response-field", default="", help="SFT: path of the target")
        p.add_argument("--chosen-field", default="", help="DPO: path of the chosen response")
        p.add_argument("--rejected-field", default="",
                       help="DPO: path of the rejected response")
        p.add_argument("--templated-prompts", default="auto", choices=["auto", "always", "never"],
                       help="use prompts that carry chat markers as-is")


def _fields(args: argparse.Namespace) -> dict:
    return {role: getattr(args, f"{role}_field", "") or ""
            for role in ("problem", "answer", "id", "response", "chosen", "rejected")}


def add_data_parser(subparsers) -> argparse.ArgumentParser:
    """Add ``data filter|pairs|rejection`` to an argparse subparsers object."""
    from mindrl.command import DefaultsHelpFormatter as fmt  # noqa: PLC0415

    p = subparsers.add_parser("data", help="fetch the published data sets; build training sets "
                                           "from eval samples (difficulty filter, DPO pairs, "
                                           "rejection sampling)")
    sub = p.add_subparsers(dest="data_command", metavar="ACTION")
    sub.required = True

    f = sub.add_parser("filter", formatter_class=fmt,
                       help="keep problems whose pass rate lies in [lo, hi] (a prompt file); after "
                            "sampling k per problem, --lo 0 --hi (k-1)/k drops the always-solved")
    _common(f)
    f.add_argument("--lo", type=float, required=True, help="lowest pass rate kept (inclusive)")
    f.add_argument("--hi", type=float, required=True, help="highest pass rate kept (inclusive)")
    f.set_defaults(func=data_command)

    pr = sub.add_parser("pairs", formatter_class=fmt,
                        help="correct-vs-wrong preference pairs (prompt/chosen/rejected)")
    _common(pr)
    pr.add_argument("--max-pairs", type=int, default=1,
                    help="pairs per problem at most (0 = as many as the samples allow)")
    pr.add_argument("--seed", type=int, default=0, help="seed of the per-problem shuffles")
    pr.add_argument("--prefer-shorter", action="store_true",
                    help="choose the shortest correct samples")
    pr.add_argument("--keep-truncated", action="store_true",
                    help="keep samples cut off at max_new_tokens")
    pr.add_argument("--solved-pairs", type=int, default=2,
                    help="problems every sample solves: their K shortest correct samples "
                         "(chosen) against their K longest (rejected), K x K pairs (0 = off)")
    pr.add_argument("--pair-format", default="standard", choices=["standard", "pairwise"],
                    help="standard: prompt/chosen/rejected; pairwise: id, prompt, "
                         "completion_1, completion_2, preferred (the chosen column's name)")
    pr.set_defaults(func=data_command)

    rj = sub.add_parser("rejection", formatter_class=fmt,
                        help="correct samples as SFT rows (problem/response/answer)")
    _common(rj)
    rj.add_argument("--max-per-problem", type=int, default=0,
                    help="rows per problem at most (0 = every distinct correct sample)")
    rj.add_argument("--no-dedupe", action="store_true",
                    help="keep samples whose text repeats another's")
    rj.add_argument("--keep-truncated", action="store_true",
                    help="keep samples cut off at max_new_tokens")
    rj.add_argument("--lo", type=float, default=None, help="keep problems whose pass rate is "
                    "above this (pooled over all SAMPLES; exclusive unless --inclusive)")
    rj.add_argument("--hi", type=float, default=None, help="keep problems whose pass rate is "
                    "below this (--lo 0 --hi 1: solved sometimes, not always)")
    rj.add_argument("--inclusive", action="store_true", help="--lo/--hi bounds are inclusive")
    rj.set_defaults(func=data_command)

    ins = sub.add_parser("inspect", formatter_class=fmt,
                         help="a file's format, columns and mapping, and its first rows as each "
                              "job (train/eval, sft, dpo) sees them")
    ins.add_argument("file", metavar="FILE", help="a .jsonl, .json or .parquet file")
    ins.add_argument("--rows", type=int, default=2, help="rows shown per job")
    ins.add_argument("--template", default="", help="also show the prompt after this chat "
                     "template (a name that needs no tokenizer, e.g. qwen25-math-cot)")
    _field_options(ins)
    ins.set_defaults(func=data_command)

    cv = sub.add_parser("convert", formatter_class=fmt,
                        help="convert between formats: anything -> verl parquet, verl -> mindrl "
                             "jsonl, pairs, sft (streams; .parquet or .jsonl by suffix)")
    cv.add_argument("file", metavar="FILE", help="a .jsonl, .json or .parquet file")
    cv.add_argument("-o", "--output", required=True, help="file to write (.parquet or .jsonl)")
    cv.add_argument("--to", default="verl", choices=["verl", "mindrl", "pairs", "sft"],
                    help="target format")
    cv.add_argument("--data-source", default="", help="verl: data_source (default: the input "
                    "file's stem)")
    cv.add_argument("--ability", default="math", help="verl: ability")
    cv.add_argument("--split", default="train", help="verl: extra_info.split")
    _field_options(cv)
    cv.set_defaults(func=data_command)

    from mindrl.data.clean import add_clean_parser  # noqa: PLC0415
    from mindrl.data.sample import add_sample_parser  # noqa: PLC0415

    from mindrl.data.fetch import add_fetch_parser  # noqa: PLC0415

    add_clean_parser(sub)
    add_sample_parser(sub)
    add_fetch_parser(sub)
    return p


def data_command(args: argparse.Namespace) -> int:
    """Entry point bound to ``args.func``; prints a one-line summary, returns the exit code."""
    from mindrl.data import tools  # noqa: PLC0415
    from mindrl.data.io import DataError  # noqa: PLC0415

    try:
        if args.data_command == "inspect":
            from mindrl.data.convert import inspect_lines  # noqa: PLC0415

            for line in inspect_lines(args.file, rows=args.rows, fmt=args.format,
                                      fields=_fields(args), templated=args.templated_prompts,
                                      template=args.template):
                print(line)
            return 0
        if args.data_command == "convert":
            from mindrl.data.convert import convert  # noqa: PLC0415

            plan, n = convert(args.file, args.output, to=args.to, fmt=args.format,
                              fields=_fields(args), templated=args.templated_prompts,
                              data_source=args.data_source, ability=args.ability,
                              split=args.split)
            print(f"data convert: {n} rows -> {args.output} ({args.to}; {plan.describe()})")
            return 0
        fields = {"problem_field": args.problem_field, "answer_field": args.answer_field,
                  "id_field": args.id_field,
                  "format": "" if args.format == "auto" else args.format}
        runs = [tools.load_eval_samples(src, problems=args.problems, data_dir=args.data_dir,
                                        settings_hash=args.settings_hash, fields=fields)
                for src in args.samples]
        samples = tools.pool_samples(runs)
        samples, length_counts = tools.filter_lengths(samples, tools.length_filter(args))
        if length_counts:
            print(f"data {args.data_command}: chain-of-thought length filter: dropped "
                  f"{length_counts['cot_too_short']} too short, {length_counts['cot_too_long']} "
                  f"too long ({args.tokenizer})")
        if args.data_command == "filter":
            res = tools.filter_by_difficulty(samples, args.lo, args.hi, out=args.output)
        elif args.data_command == "pairs":
            res = tools.build_preference_pairs(
                samples, args.max_pairs, seed=args.seed, prefer_shorter=args.prefer_shorter,
                drop_truncated=not args.keep_truncated, out=args.output,
                solved_pairs=args.solved_pairs, pair_format=args.pair_format)
        else:
            res = tools.build_rejection_sampling_set(
                samples, args.max_per_problem, dedupe=not args.no_dedupe,
                drop_truncated=not args.keep_truncated, out=args.output, lo=args.lo,
                hi=args.hi, inclusive=args.inclusive)
    except (DataError, ValueError) as e:
        print(f"mindrl data {args.data_command}: error: {e}", file=sys.stderr)
        return 2
    if len(args.samples) > 1:
        print(f"data {args.data_command}: pooled {len(args.samples)} runs "
              f"({sum(len(r) for g in (samples.groups,) for r in g.values())} samples of "
              f"{len(samples.groups)} problems)")
    print(res.summary(f"data {args.data_command}"))
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="mindrl")
    add_data_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
