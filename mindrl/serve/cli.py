"""``mindrl serve-rewards``: run the reward server until interrupted."""

from __future__ import annotations

import argparse
import os
import sys

from mindrl.errors import UserError

TOKEN_ENV = "MINDRL_REWARD_TOKEN"


def _rewards_from_args(args: argparse.Namespace):
    from mindrl.serve.labels import parse_reward_spec

    if args.recipe:
        from mindrl.config.loader import load_config

        cfg = load_config(args.recipe, [])
        return [{"name": f.name, "weight": f.weight, "params": dict(f.params or {})}
                for f in cfg.reward.functions]
    try:
        return parse_reward_spec(",".join(args.reward) if args.reward else "accuracy")
    except ValueError as e:
        raise UserError(f"--reward: {e}") from None


def _token(args: argparse.Namespace):
    if args.token_file:
        try:
            with open(args.token_file, encoding="utf-8") as f:
                token = f.read().strip()
        except OSError as e:
            raise UserError(f"--token-file {args.token_file}: {e.strerror}") from None
        if not token:
            raise UserError(f"--token-file {args.token_file} is empty")
        return token
    return os.environ.get(TOKEN_ENV) or None


def _limits(args: argparse.Namespace):
    from mindrl.serve.limits import ServerLimits

    limits = ServerLimits(max_header_bytes=args.max_header_bytes,
                          header_timeout=args.header_timeout, body_timeout=args.body_timeout,
                          keep_alive_timeout=args.keep_alive_timeout,
                          shutdown_grace=args.shutdown_grace)
    try:
        limits.check()
    except ValueError as e:
        raise UserError(str(e)) from None
    return limits


def serve(args: argparse.Namespace) -> int:
    from mindrl.registry import RegistryError, error_text
    from mindrl.serve import limits as server_limits
    from mindrl.serve.app import create_app
    from mindrl.serve.service import ScoringService

    if args.workers < 1:
        raise UserError("--workers must be >= 1")
    if args.timeout <= 0:
        raise UserError("--timeout must be positive")
    if args.max_burst_workers is not None and args.max_burst_workers < 0:
        raise UserError("--max-burst-workers must be >= 0")
    if args.max_request_bytes < 1 or args.max_items < 1:
        raise UserError("--max-request-bytes and --max-items must be >= 1")
    limits = _limits(args)
    entries = _rewards_from_args(args)
    token = _token(args)
    try:
        service = ScoringService(entries, num_workers=args.workers, timeout=args.timeout,
                                 max_burst_workers=args.max_burst_workers,
                                 deprioritize_stragglers=not args.no_deprioritize)
    except (RegistryError, KeyError, TypeError, ValueError) as e:
        raise UserError(f"--reward: {error_text(e)}") from None
    try:
        app = create_app(service, token=token, max_body_bytes=args.max_request_bytes,
                         max_items=args.max_items)
        print(f"mindrl reward server on http://{args.host}:{args.port} rewards={service.keys} "
              f"workers={args.workers} timeout={args.timeout:g}s auth={'on' if token else 'off'}",
              file=sys.stderr, flush=True)
        server_limits.run(app, args.host, args.port, limits, on_reject=app.state.metrics.reject)
    finally:
        service.close()
    print("mindrl reward server stopped; reward workers closed", file=sys.stderr, flush=True)
    return 0


def add_serve_parser(sub) -> None:
    """Add ``serve-rewards`` to the ``mindrl`` command's subparsers."""
    p = sub.add_parser("serve-rewards", help="serve mindrl rewards over HTTP (verl, OpenRLHF, any "
                       "client): batched, per-item timeouts, /health, /metrics")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: loopback)")
    p.add_argument("--workers", type=int, default=2, help="reward worker processes (default 2)")
    p.add_argument("--max-burst-workers", type=int, default=None,
                   help="extra workers while every worker is on a straggler (default 4 x --workers)")
    p.add_argument("--no-deprioritize", action="store_true",
                   help="keep a straggler's worker at normal CPU priority (default: nice 19 once an "
                        "item runs past min(0.1 s, timeout/4) while tasks are queued, so clean items get the "
                        "CPU first)")
    p.add_argument("--timeout", type=float, default=5.0,
                   help="seconds one item of one reward may take; then its worker is killed "
                        "and the item scores null (default 5)")
    p.add_argument("--reward", action="append", metavar="NAME[:WEIGHT]",
                   help="a reward to compute (repeatable, or comma-separated); a registered name "
                        "or pkg.mod:fn. Default: accuracy")
    p.add_argument("--recipe", help="take reward.functions (names, weights, params) from this "
                   "recipe instead of --reward")
    p.add_argument("--token-file", help=f"require 'Authorization: Bearer <token>' with the token "
                   f"in this file (or set {TOKEN_ENV})")
    p.add_argument("--max-request-bytes", type=int, default=16 << 20,
                   help="larger request bodies are refused with 413 (default 16 MiB)")
    p.add_argument("--max-items", type=int, default=4096,
                   help="requests with more completions are refused with 413 (default 4096)")
    p.add_argument("--max-header-bytes", type=int, default=16 << 10,
                   help="a larger request line + headers is refused with 431 (default 16 KiB)")
    p.add_argument("--header-timeout", type=float, default=10.0,
                   help="seconds a client has to send a request line and headers, from "
                        "connecting or its next request's first byte; then 408 and the "
                        "connection closes (default 10)")
    p.add_argument("--body-timeout", type=float, default=30.0,
                   help="seconds a client has to send the whole body after its headers; then "
                        "408 and the connection closes (default 30)")
    p.add_argument("--keep-alive-timeout", type=float, default=5.0,
                   help="seconds an idle kept-alive connection stays open (default 5)")
    p.add_argument("--shutdown-grace", type=float, default=10.0,
                   help="on SIGTERM / SIGINT, seconds requests in flight may take to finish "
                        "before they are cancelled and the server exits (default 10)")
    p.set_defaults(func=serve)
