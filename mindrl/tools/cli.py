"""``mindrl sandbox run FILE.py``: run a snippet exactly as a rollout's tool call would, print
what the model would see and the verdict, so users can check their limits and isolation."""

from __future__ import annotations

import argparse
import sys

from mindrl.errors import UserError


def _run(args: argparse.Namespace) -> int:
    from mindrl.tools.sandbox import Sandbox, SandboxLimits, describe

    try:
        with open(args.file, encoding="utf-8") as f:
            code = f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"sandbox run {args.file}: {getattr(e, 'strerror', None) or e}") from None
    limits = SandboxLimits(timeout_s=args.timeout, memory_mb=args.memory,
                           output_bytes=args.max_output)
    sandbox = Sandbox(limits, isolation=args.isolation, hide_paths=args.hide)
    print(describe(sandbox.isolation, sandbox.drop_uid), file=sys.stderr)
    res = sandbox.run(code)
    print("--- stdout ---")
    sys.stdout.write(res.stdout)
    print("--- stderr ---")
    sys.stdout.write(res.stderr)
    detail = f" ({res.detail})" if res.detail else ""
    trunc = f", output truncated at {limits.output_bytes} bytes" if res.truncated else ""
    print(f"--- verdict: {res.verdict}{detail}{trunc}; {res.wall_s:.2f}s, "
          f"isolation {res.isolation} ---")
    return 0 if res.verdict == "ok" else 1


def add_sandbox_parser(sub) -> None:
    from mindrl.command import DefaultsHelpFormatter

    sb = sub.add_parser("sandbox", help="run Python snippets in the tool sandbox")
    sb_sub = sb.add_subparsers(dest="sandbox_command", metavar="ACTION")
    sb_sub.required = True
    run = sb_sub.add_parser("run", help="run FILE.py as a rollout's python tool call would; "
                            "print stdout, stderr and the verdict (exit 0 only when ok)",
                            formatter_class=DefaultsHelpFormatter)
    run.add_argument("file", help="the Python file to run")
    run.add_argument("--timeout", type=float, default=10.0, help="wall-time limit in seconds "
                     "(also the CPU-time limit)")
    run.add_argument("--memory", type=int, default=1024, help="address-space limit in MB")
    run.add_argument("--max-output", type=int, default=16384,
                     help="stdout+stderr bytes kept")
    run.add_argument("--isolation", default="auto", choices=["auto", "bwrap", "unshare", "none"],
                     help="auto takes the strongest available")
    run.add_argument("--hide", action="append", default=[],
                     help="another path to hide (repeatable); $HOME, /root, /home always are")
    run.set_defaults(func=_run)
