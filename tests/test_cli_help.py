"""Every `mindrl ... --help` page says each default at most once and never "(default: None)"."""

import argparse
import re

from mindrl.cli import build_parser, main


def _pages(parser, name="mindrl"):
    yield name, parser.format_help()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                yield from _pages(sub, f"{name} {sub_name}")


def test_help_pages_state_defaults_once():
    pages = dict(_pages(build_parser()))
    assert {"mindrl data filter", "mindrl eval", "mindrl analyze lengths",
            "mindrl data clean"} <= set(pages)
    for name, text in pages.items():
        flat = re.sub(r"\s+", " ", text)
        assert "(default: None)" not in flat, name
        assert not re.search(r"\(default:[^()]*\)\s*\(default:", flat), name
    # and a real default is still shown
    assert "(default: 30)" in re.sub(r"\s+", " ", pages["mindrl analyze lengths"])


def test_user_facing_text_speaks_to_users(capsys):
    """Help pages, recipe summaries and the README say nothing of this project's own logs, its
    CI or the month a page was read."""
    from pathlib import Path

    assert main(["recipes"]) == 0
    texts = [capsys.readouterr().out] + [t for _, t in _pages(build_parser())]
    texts.append((Path(__file__).resolve().parents[1] / "README.md").read_text())
    flat = re.sub(r"\s+", " ", "\n".join(texts))
    for phrase in ("seed log", "CI-sized", "the seeds use", "as read in 2026-12"):
        assert phrase not in flat, phrase
    assert "few-minute CPU check of deepscaler_1.5b" in flat


def test_token_length_warning_is_silenced_by_every_command(tiny_dir):
    """transformers warns once per tokenizer when a text is longer than model_max_length; every
    mindrl command (run_command) drops that line (the preflight counts long prompts, the
    trainer skips them)."""
    import logging

    from transformers import AutoTokenizer

    from mindrl.command import _TOKEN_LENGTH_FILTER, quiet_known_noise

    logger = logging.getLogger("transformers.tokenization_utils_base")
    seen = []

    class Catch(logging.Handler):
        def emit(self, record):
            seen.append(record.getMessage())

    handler, level = Catch(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.WARNING)
    try:
        logger.removeFilter(_TOKEN_LENGTH_FILTER)
        AutoTokenizer.from_pretrained(tiny_dir).encode("hello world " * 1100)
        assert any(m.startswith("Token indices sequence length") for m in seen)  # unfiltered
        seen.clear()
        quiet_known_noise()
        AutoTokenizer.from_pretrained(tiny_dir).encode("hello world " * 1100)
        assert not any(m.startswith("Token indices sequence length") for m in seen)
        assert main(["config", "show", "grpo_tiny_demo", "--keys"]) == 0   # installs it too
        assert _TOKEN_LENGTH_FILTER in logger.filters
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def test_unknown_recipe_suggests_the_closest_names(capsys):
    from mindrl.config.loader import REPO_CONFIGS

    assert main(["train", "grpo_own_mth_tiny"]) == 2
    err = capsys.readouterr().err.strip()
    n = len(list(REPO_CONFIGS.glob("*.yaml")))
    assert err == (f"mindrl: configuration error: recipe 'grpo_own_mth_tiny' not found (not a "
                   f"file, not in {REPO_CONFIGS}); did you mean grpo_own_math_tiny or "
                   f"grpo_own_choice_tiny or grpo_own_math? `mindrl recipes` lists all {n}")
    assert len(err) < 300
    assert main(["train", "xyzzy"]) == 2
    assert capsys.readouterr().err.strip().endswith(f"); `mindrl recipes` lists all {n}")
