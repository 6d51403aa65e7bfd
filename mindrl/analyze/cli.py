"""``mindrl analyze`` and ``mindrl show-rollouts``: ``mindrl.cli`` calls
:func:`add_analyze_parser` on its subparsers and then ``args.func(args)``.

    mindrl analyze logprob-quantiles RUN_DIR [--reference CKPT] [--q 0.01] [--steps 1,10,20]
    mindrl analyze logprob-quantiles --sft-data FILE --checkpoints BEFORE AFTER [...]
    mindrl analyze lengths EVAL_RUN [EVAL_RUN ...] [--labels before,after]
    mindrl show-rollouts RUN_DIR --step N [--group G] [--limit K]

Bad input (a missing run, a step not saved, a reference with another vocabulary) raises
:class:`~mindrl.analyze.rollouts.AnalyzeError`, which ``mindrl`` prints as one line.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def _ints(text: str):
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got '{text}'")


def _quantiles(args: argparse.Namespace) -> int:
    from mindrl.analyze import logprobs  # noqa: PLC0415
    from mindrl.analyze.rollouts import AnalyzeError  # noqa: PLC0415

    common = dict(q=args.q, backend=args.backend, device=args.device,
                  batch_size=args.batch_size, min_count=args.min_count)
    if args.sft_data:
        if args.run_dir:
            raise AnalyzeError("give either RUN_DIR (RL rollouts) or --sft-data (an SFT data "
                               "file), not both")
        if not args.checkpoints:
            raise AnalyzeError("--sft-data needs --checkpoints BEFORE AFTER [...]")
        res = logprobs.sft_quantiles(args.sft_data, args.checkpoints, template=args.template,
                                     problem_field=args.problem_field,
                                     response_field=args.response_field, limit=args.limit,
                                     **common)
        out = args.output_dir or "runs/analyze"
    else:
        if not args.run_dir:
            raise AnalyzeError("give RUN_DIR (a run trained with logging.save_rollouts) or "
                               "--sft-data FILE --checkpoints ...")
        res = logprobs.rl_quantiles(args.run_dir, args.reference, steps=args.steps,
                                    temperature=args.temperature, **common)
        out = args.output_dir or str(Path(args.run_dir) / "analysis")
    files = logprobs.write_result(res, out, smooth=args.smooth)
    print(res.table())
    for f in files:
        print(f)
    return 0


def _lengths(args: argparse.Namespace) -> int:
    from mindrl.analyze.lengths import compare_lengths  # noqa: PLC0415

    labels = [x.strip() for x in args.labels.split(",")] if args.labels else None
    benches = [x.strip() for x in args.benchmarks.split(",")] if args.benchmarks else None
    res = compare_lengths(args.eval_runs, labels, benches, args.output_dir, bins=args.bins)
    print(res["table"])
    for f in res["files"]:
        print(f)
    return 0


def _show(args: argparse.Namespace) -> int:
    from mindrl.analyze.rollouts import format_rollouts, load_step  # noqa: PLC0415

    print(format_rollouts(load_step(args.run_dir, args.step), group=args.group,
                          limit=args.limit, width=args.width, max_chars=args.max_chars))
    return 0


def add_analyze_parser(subparsers) -> argparse.ArgumentParser:
    """Add ``analyze logprob-quantiles|lengths`` and ``show-rollouts``."""
    from mindrl.command import DefaultsHelpFormatter as fmt  # noqa: PLC0415

    p = subparsers.add_parser("analyze", help="analyses with pictures: log-prob quantiles per "
                              "position, response lengths of eval runs")
    sub = p.add_subparsers(dest="analyze_command", metavar="ACTION")
    sub.required = True

    q = sub.add_parser("logprob-quantiles", formatter_class=fmt,
                       help="per response position, the q-quantile of token log-probs of a "
                            "run's saved rollouts under the initial policy, one curve per step "
                            "(or of a data file under SFT checkpoints)")
    q.add_argument("run_dir", metavar="RUN_DIR", nargs="?", default=None,
                   help="an RL run directory trained with logging.save_rollouts=N")
    q.add_argument("--reference", default=None,
                   help="the scoring policy (default: the run's starting model.path)")
    q.add_argument("--q", type=float, default=0.01, help="the quantile")
    q.add_argument("--steps", type=_ints, default=None,
                   help="saved steps to use, comma-separated (default: all)")
    q.add_argument("--sft-data", default=None,
                   help="SFT mode: a data file of problem/response rows, scored under "
                        "--checkpoints instead of a run's rollouts")
    q.add_argument("--checkpoints", nargs="+", default=None,
                   help="SFT mode: model directories, before SFT first")
    q.add_argument("--template", default=None,
                   help="SFT mode: chat template (default: the first checkpoint's "
                        "mindrl_meta.json, else the tokenizer's)")
    q.add_argument("--problem-field", default="", help="SFT mode: problem field "
                   "('' = problem/question/prompt)")
    q.add_argument("--response-field", default="", help="SFT mode: response field "
                   "('' = response/completion/answer)")
    q.add_argument("--limit", type=int, default=256, help="SFT mode: rows used (0 = all)")
    q.add_argument("--temperature", type=float, default=1.0,
                   help="score log softmax(logits / temperature)")
    q.add_argument("--backend", default="torch", choices=["torch", "mindspore"])
    q.add_argument("--device", default="cpu", choices=["cpu", "cuda", "ascend"])
    q.add_argument("--batch-size", type=int, default=8, help="responses per forward")
    q.add_argument("--min-count", type=int, default=4,
                   help="leave out positions fewer responses reach")
    q.add_argument("--smooth", type=int, default=1,
                   help="moving average over this many positions (plot only)")
    q.add_argument("-o", "--output-dir", default=None,
                   help="where the PNG and JSON go (default: RUN_DIR/analysis, or "
                        "runs/analyze in SFT mode)")
    q.set_defaults(func=_quantiles)

    ln = sub.add_parser("lengths", formatter_class=fmt,
                        help="response-length histograms and means of eval runs side by side, "
                             "split by correct / wrong / truncated (PNG + table)")
    ln.add_argument("eval_runs", metavar="EVAL_RUN", nargs="+",
                    help="`mindrl eval` output directories (e.g. before and after RL)")
    ln.add_argument("--labels", default=None, help="names of the runs, comma-separated "
                    "(default: the directory names)")
    ln.add_argument("--benchmarks", default=None, help="only these benchmarks, comma-separated")
    ln.add_argument("--bins", type=int, default=30, help="histogram bins")
    ln.add_argument("-o", "--output-dir", default="runs/analyze",
                    help="where lengths.png and lengths.md go")
    ln.set_defaults(func=_lengths)

    sr = subparsers.add_parser("show-rollouts", formatter_class=fmt,
                               help="print a saved step's rollouts: prompt, response, rewards "
                                    "per function, advantage")
    sr.add_argument("run_dir", metavar="RUN_DIR")
    sr.add_argument("--step", type=int, required=True, help="a saved step")
    sr.add_argument("--group", type=int, default=None, help="only this prompt group")
    sr.add_argument("--limit", type=int, default=0, help="at most this many rollouts (0 = all)")
    sr.add_argument("--width", type=int, default=0, help="line width (0 = the terminal's)")
    sr.add_argument("--max-chars", type=int, default=0,
                    help="cut each prompt/response after this many characters (0 = whole)")
    sr.set_defaults(func=_show)
    return p
