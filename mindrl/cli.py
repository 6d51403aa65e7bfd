"""The ``mindrl`` command. Each subcommand parses its arguments and calls the library; heavy
frameworks are imported only by the subcommand that needs them."""

from __future__ import annotations

import argparse
import sys
from typing import List, Optional

from mindrl.command import run_command, user_message  # noqa: F401  (re-exported)


def _config_show(args: argparse.Namespace) -> int:
    from mindrl.config.loader import describe
    from mindrl.config.stages import describe_stages, load_stages

    if args.keys:
        for key, tp, default, help_text in describe():
            print(f"{key:42s} {tp:26s} default={default!r}\n    {help_text}")
        return 0
    recipe, overrides = args.recipe, list(args.overrides)
    if recipe is not None and "=" in recipe:  # no recipe given, only overrides
        recipe, overrides = None, [recipe] + overrides
    sys.stdout.write(describe_stages(load_stages(recipe, overrides)))
    return 0


def _plan(args: argparse.Namespace) -> int:
    from mindrl.config.stages import load_stages
    from mindrl.memory.plan import plan_stages

    _need_recipe(args, "plan")
    stages = load_stages(args.recipe, args.overrides)
    for i, plan in enumerate(plan_stages(stages, args.run, args.recipe)):
        print(("\n" if i else "") + plan.table())
    return 0


def _check_memory(stages) -> None:
    """Refuse before anything loads when a stage's memory plan exceeds its device."""
    from mindrl.memory.plan import check_fits

    check_fits(stages)


def _train(args: argparse.Namespace) -> int:
    import time

    from mindrl.config.stages import load_stages
    from mindrl.trainer.stages import run_stages
    from mindrl.trainer.summary import print_summary

    _need_recipe(args, "train")
    # every stage of a multi-stage recipe is checked here, before the first one starts
    stages = load_stages(args.recipe, args.overrides, require_model=True)
    _check_memory(stages)
    t0 = time.perf_counter()
    last = run_stages(stages)
    print_summary(stages, last, time.perf_counter() - t0, args.recipe)
    return 0


def _sft(args: argparse.Namespace) -> int:
    import time

    from mindrl.config.loader import load_config
    from mindrl.config.stages import Stage
    from mindrl.trainer.sft import train_sft
    from mindrl.trainer.summary import print_summary

    cfg = load_config(args.recipe, args.overrides, require_model=True)
    _check_memory([Stage(1, "", "sft", cfg, 1)])
    t0 = time.perf_counter()
    last = train_sft(cfg)
    print_summary([Stage(1, "", "sft", cfg, 1)], last, time.perf_counter() - t0, args.recipe)
    return 0


def _need_recipe(args: argparse.Namespace, command: str) -> None:
    if args.recipe is None:
        from mindrl.config.recipes import recipe_names
        from mindrl.errors import ConfigError

        raise ConfigError(f"mindrl {command} needs a recipe: mindrl {command} RECIPE "
                          f"[key=value ...]; recipes: {', '.join(recipe_names())} (details: "
                          "mindrl recipes)")


def _recipes(args: argparse.Namespace) -> int:
    from mindrl.config.recipes import format_table, list_recipes

    rows = list_recipes()
    if args.kind:
        rows = [r for r in rows if r.kind == args.kind]
    print(format_table(rows))
    print("\nrun one: mindrl train RECIPE [key=value ...]  (sft_*: mindrl sft; dpo_*/simpo_*: "
          "mindrl dpo / simpo); see its settings: mindrl config show RECIPE")
    return 0


def _pref(args: argparse.Namespace) -> int:
    from mindrl.config.loader import load_config
    from mindrl.trainer.preference import train_preference

    import time

    from mindrl.config.stages import Stage
    from mindrl.trainer.summary import print_summary

    overrides = list(args.overrides)
    if args.command in ("dpo", "simpo"):
        overrides = [f"preference.loss={args.command}"] + overrides
    cfg = load_config(args.recipe, overrides, require_model=True)
    _check_memory([Stage(1, "", args.command, cfg, 1)])
    t0 = time.perf_counter()
    last = train_preference(cfg)
    print_summary([Stage(1, "", args.command, cfg, 1)], last, time.perf_counter() - t0,
                  args.recipe)
    return 0


def _launch(args: argparse.Namespace) -> int:
    import dataclasses

    from mindrl.config.stages import load_stages
    from mindrl.distributed.launch import launch

    # the workers would each refuse; say it once, before any of them starts
    stages = load_stages(args.recipe, args.overrides)
    if len(stages) == 1:
        stages = [dataclasses.replace(stages[0], run=args.run)]
    _check_memory(stages)
    return launch(args.recipe, args.overrides, command=args.run)


def _demo(args: argparse.Namespace) -> int:
    from mindrl.paths import check_output_path
    from mindrl.trainer.demo import demo_output_dir, run_demo

    out, overrides = demo_output_dir(args.backend, args.task, args.overrides, args.output_dir)
    check_output_path(out, "--output-dir" if args.output_dir else "logging.output_dir")
    result = run_demo(backend=args.backend, output_dir=out, overrides=overrides, task=args.task)
    return 0 if result["rl_accuracy"] >= result["sft_accuracy"] else 1


def _plot(args: argparse.Namespace) -> int:
    from mindrl.trainer.plots import plot_run

    for path in plot_run(args.run_dir):
        print(path)
    return 0


def _export(args: argparse.Namespace) -> int:
    from mindrl.backends.lora import export_merged
    from mindrl.paths import check_output_path

    check_output_path(args.out, "--out")
    print(export_merged(args.source, args.out, base_model=args.base))
    return 0


def _build_tiny(args: argparse.Namespace) -> int:
    from mindrl.models.tiny import build_tiny_model

    print(build_tiny_model(args.directory))
    return 0


def _recipe_epilog() -> str:
    """The recipe names for ``mindrl train --help``, in rows that fit 100 columns."""
    from mindrl.config.recipes import recipe_names

    lines, cur = [], ""
    for name in recipe_names():
        if cur and len(cur) + len(name) + 2 > 96:
            lines.append(cur)
            cur = ""
        cur = f"{cur}  {name}" if cur else f"  {name}"
    lines.append(cur)
    return ("recipes (details: mindrl recipes; own data: grpo_own_math_tiny, grpo_own_choice_tiny"
            "):\n" + "\n".join(lines) + "\n\nexample: mindrl train grpo_own_math_tiny "
            "data.train_file=my.jsonl data.prompt_field=question data.answer_field=answer")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mindrl",
        description="RL fine-tuning of reasoning LLMs (GRPO, Dr.GRPO, RLOO, REINFORCE++, pass@k) "
                    "on MindSpore or PyTorch.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    cfg = sub.add_parser("config", help="inspect recipes")
    cfg_sub = cfg.add_subparsers(dest="config_command", metavar="ACTION")
    cfg_sub.required = True
    show = cfg_sub.add_parser("show", help="print the resolved config of a recipe with overrides")
    show.add_argument("recipe", nargs="?", default=None,
                      help="recipe file or name in yaml_configs/ (default: built-in defaults)")
    show.add_argument("overrides", nargs="*", help="dotted overrides, e.g. train.lr=1e-6")
    show.add_argument("--keys", action="store_true", help="list every option with its help")
    show.set_defaults(func=_config_show)

    rc = sub.add_parser("recipes", help="list the recipes: name, job, backend, model, kind "
                        "(demo, smoke, full) and purpose")
    rc.add_argument("--kind", choices=["demo", "smoke", "full"], default=None,
                    help="only recipes of this kind")
    rc.set_defaults(func=_recipes)

    tr = sub.add_parser("train", help="run RL training (GRPO family) from a recipe; a recipe "
                        "with stages runs them in order (resumable at any stage)",
                        formatter_class=argparse.RawDescriptionHelpFormatter,
                        epilog=_recipe_epilog())
    tr.add_argument("recipe", nargs="?", default=None,
                    help="recipe file or name in yaml_configs/ (list: mindrl recipes)")
    tr.add_argument("overrides", nargs="*", help="dotted overrides, e.g. algorithm.adv_estimator=rloo")
    tr.set_defaults(func=_train)

    pn = sub.add_parser("plan", help="per-device memory by part (weights, masters, gradients, "
                        "optimizer state, activations, log-prob head, reference / teacher / "
                        "critic, rollout engine, host weight sync) of a recipe, from the model's "
                        "config.json; no model is loaded")
    pn.add_argument("recipe", nargs="?", default=None,
                    help="recipe file or name in yaml_configs/ (list: mindrl recipes)")
    pn.add_argument("overrides", nargs="*", help="dotted overrides, e.g. "
                    "plan.device_memory_gb=141 model.gradient_checkpointing=true")
    pn.add_argument("--run", default=None, choices=["train", "sft", "dpo", "simpo", "pref"],
                    help="the job to plan (default: each stage's own; a recipe without stages "
                         "is planned as `mindrl train` unless its name starts with sft_, dpo_ "
                         "or simpo_)")
    pn.set_defaults(func=_plan)

    sf = sub.add_parser("sft", help="supervised fine-tuning (masked response NLL) from a recipe")
    sf.add_argument("recipe", help="recipe file or name in yaml_configs/")
    sf.add_argument("overrides", nargs="*", help="dotted overrides")
    sf.set_defaults(func=_sft)

    for name, text in (("dpo", "DPO on preference pairs (prompt, chosen, rejected)"),
                       ("simpo", "SimPO (+ optional SFT term, preference.pref_ftx) on pairs"),
                       ("pref", "preference training with preference.loss from the recipe")):
        pp = sub.add_parser(name, help=text)
        pp.add_argument("recipe", help="recipe file or name in yaml_configs/")
        pp.add_argument("overrides", nargs="*", help="dotted overrides")
        pp.set_defaults(func=_pref)

    la = sub.add_parser("launch", help="start a recipe's workers as distributed.* asks: one "
                        "process, torchrun, msrun, or a launcher per node on a Ray cluster")
    la.add_argument("recipe", help="recipe file or name in yaml_configs/")
    la.add_argument("overrides", nargs="*", help="dotted overrides, passed on to every worker")
    la.add_argument("--run", default="train", choices=["train", "sft", "dpo", "simpo", "pref"],
                    help="what each worker runs (default: train)")
    la.set_defaults(func=_launch)

    de = sub.add_parser("demo", help="the CPU demo: tiny model, SFT warm-up, GRPO, accuracy table")
    de.add_argument("--backend", default="torch", choices=["torch", "mindspore"])
    de.add_argument("--output-dir", default=None,
                    help="the run folder (default: runs/demo, or runs/demo-VARIANT for another "
                         "task, backend or overrides; logging.output_dir=DIR works too)")
    de.add_argument("--task", default="addition",
                    choices=["addition", "kk", "countdown", "tool"],
                    help="2-digit addition (default), compact Knights-and-Knaves (3-4 people), "
                         "compact Countdown (3-4 numbers) or 3-digit multiplication with the "
                         "Python tool")
    de.add_argument("overrides", nargs="*", help="dotted overrides for the GRPO stage")
    de.set_defaults(func=_demo)

    pl = sub.add_parser("plot", help="draw reward/accuracy/length/KL curves of a run to PNG")
    pl.add_argument("run_dir")
    pl.set_defaults(func=_plot)

    ex = sub.add_parser("export", help="merge a LoRA run's adapter into its base model: a plain "
                        "Hugging Face directory (transformers / vLLM load it)")
    ex.add_argument("source", metavar="RUN_OR_CHECKPOINT",
                    help="run directory (its newest checkpoint), checkpoint or adapter directory")
    ex.add_argument("--out", required=True, help="directory to write (new or empty)")
    ex.add_argument("--base", default=None, help="base model directory (default: the one the "
                    "adapter was trained on)")
    ex.set_defaults(func=_export)

    bt = sub.add_parser("build-tiny", help="write the offline tiny Qwen2-architecture model")
    bt.add_argument("directory")
    bt.set_defaults(func=_build_tiny)

    from mindrl.analyze.cli import add_analyze_parser
    from mindrl.data.cli import add_data_parser
    from mindrl.eval.cli import add_eval_parser
    from mindrl.serve.cli import add_serve_parser
    from mindrl.tools.cli import add_sandbox_parser

    add_eval_parser(sub)
    add_data_parser(sub)
    add_analyze_parser(sub)
    add_serve_parser(sub)
    add_sandbox_parser(sub)
    from mindrl.trainer.reward_model import add_rm_parser

    add_rm_parser(sub)
    return parser


def parse_argv(argv: Optional[List[str]] = None) -> argparse.Namespace:
    """Parse a command line. Overrides may follow an option (``mindrl launch RECIPE --run sft
    key=value``): argparse fills a ``*`` positional once, so the later ``key=value`` words come
    back unparsed and are added to the overrides here."""
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:
        if hasattr(args, "overrides") and all("=" in e and not e.startswith("-") for e in extra):
            args.overrides = list(args.overrides) + extra
        else:
            parser.error("unrecognized arguments: " + " ".join(extra))
    return args


def main(argv: Optional[List[str]] = None) -> int:
    return run_command(parse_argv(argv))


if __name__ == "__main__":
    sys.exit(main())
