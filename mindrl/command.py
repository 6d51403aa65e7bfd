"""How every ``mindrl`` subcommand ends: user errors (:mod:`mindrl.errors`) as one line on
stderr and exit code 2, anything else a bug with its traceback. Shared by :mod:`mindrl.cli`
and the subcommands that also run on their own (``python -m mindrl.eval.cli``)."""

from __future__ import annotations

import argparse
import logging
import sys

from mindrl.errors import ConfigError, UserError


class DefaultsHelpFormatter(argparse.HelpFormatter):
    """Adds ``(default: X)`` to an option's help once, and only when it says something: not when
    the help already names its default, and not for None, empty or boolean-flag defaults
    (argparse's ArgumentDefaultsHelpFormatter prints "(default: None)" on every such option)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if ("(default" in text or default is None or default == "" or default is False
                or default is argparse.SUPPRESS or isinstance(action, argparse._StoreTrueAction)
                or not (action.option_strings or action.nargs in ("?", "*"))):
            return text
        return f"{text} (default: %(default)s)"


def user_message(e: BaseException) -> str:
    """The text of a user error: a list of one problem ("header:\n  - item") on one line."""
    text = str(e).strip()
    head, sep, rest = text.partition("\n  - ")
    if sep and "\n" not in rest:
        return f"{head} {rest}"
    return text


class _DropTokenLengthWarning(logging.Filter):
    """transformers' "Token indices sequence length is longer than the specified maximum" is
    noise here: prompts longer than ``data.max_prompt_len`` are counted by the preflight and
    skipped by the trainer, and mindrl never runs a sequence past the model's positions."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Token indices sequence length is longer")


_TOKEN_LENGTH_FILTER = _DropTokenLengthWarning()


def quiet_known_noise() -> None:
    """Install the filters for third-party warnings that say nothing to a mindrl user (imports
    nothing; idempotent)."""
    logging.getLogger("transformers.tokenization_utils_base").addFilter(_TOKEN_LENGTH_FILTER)


def run_command(args: argparse.Namespace) -> int:
    """Run a parsed subcommand; a user error (bad config, data, eval input, launch) prints as
    ``mindrl: ...error: MESSAGE`` on stderr and gives exit code 2, anything else is a bug and
    keeps its traceback. Every subcommand, and ``python -m mindrl.eval.cli``, ends here."""
    quiet_known_noise()
    try:
        return int(args.func(args) or 0)
    except ConfigError as e:
        print(f"mindrl: configuration error: {user_message(e)}", file=sys.stderr)
        return 2
    except UserError as e:  # data, eval, launch, model path: one line naming file / row / key
        print(f"mindrl: error: {user_message(e)}", file=sys.stderr)
        return 2
