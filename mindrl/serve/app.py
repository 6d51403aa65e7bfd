"""The reward server: mindrl's rewards over HTTP (FastAPI on uvicorn), scored by a ScoringService.

Endpoints (JSON in, JSON out):

  POST /score      {"completions": [str], "columns": {"answer": [...], ...},
                    "rewards": {"accuracy": 1.0} | ["accuracy"] (optional)}
                -> {"rewards": [total], "components": {key: [score | null]},
                    "timeouts": {key: n}, "errors": {key: n}}
  POST /openrlhf   OpenRLHF's ``--remote_rm_url`` protocol:
                   {"query": [str], "prompts": [str], "labels": [str]}
                -> {"rewards": [float], "scores": [float], "extra_logs": {key: [float]}}
                   The completion is ``query`` with its ``prompts`` prefix and a trailing
                   end-of-sequence token removed (OpenRLHF sends prompt + response decoded
                   with special tokens); a label is the gold answer, or a JSON object whose
                   keys become columns (see :func:`mindrl.serve.labels.columns_from_labels`).
  GET  /health     {"status": "ok", "workers": N, "rewards": [keys], "worker_pids": [...]}
  GET  /metrics    Prometheus text format: requests, items, timeouts, errors, rejected
                   requests by reason, restarts, and a request-latency histogram.

Rules: a body over ``max_body_bytes`` is refused with 413 before it is parsed (Content-Length
or while streaming); more than ``max_items`` completions with 413; malformed JSON with 400 and
the parser's message; a wrong shape with 422; with a ``token`` every endpoint but /health needs
``Authorization: Bearer <token>`` (401 otherwise). OpenRLHF's client sends no headers: give it
the token in the URL (``/openrlhf?token=...``), on a trusted network only.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import time
from typing import Any, Dict, List, Optional

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse

from mindrl.serve.labels import columns_from_labels, completion_from_query
from mindrl.serve.service import ScoringService

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class RequestError(Exception):
    """A request the server refuses: HTTP ``status`` and a one-line ``message``."""

    def __init__(self, status: int, reason: str, message: str):
        super().__init__(message)
        self.status, self.reason, self.message = status, reason, message


class Metrics:
    """Prometheus-style counters and a latency histogram, rendered as text exposition."""

    def __init__(self):
        self.requests = 0
        self.rejected: Dict[str, int] = {}
        self.latency_counts = [0] * (len(LATENCY_BUCKETS) + 1)
        self.latency_sum = 0.0

    def observe(self, seconds: float) -> None:
        self.requests += 1
        self.latency_sum += seconds
        for i, b in enumerate(LATENCY_BUCKETS):
            if seconds <= b:
                self.latency_counts[i] += 1
                return
        self.latency_counts[-1] += 1

    def reject(self, reason: str) -> None:
        self.rejected[reason] = self.rejected.get(reason, 0) + 1

    def render(self, service: ScoringService) -> str:
        s = service.stats
        lines = []

        def counter(name: str, help_text: str, value, labels: str = "") -> None:
            lines.append(f"# HELP {name} {help_text}")
            lines.append(f"# TYPE {name} counter")
            lines.append(f"{name}{labels} {value}")

        counter("mindrl_reward_requests_total", "Scoring requests answered.", self.requests)
        counter("mindrl_reward_items_total", "Completions received for scoring.", s.items)
        counter("mindrl_reward_timeouts_total", "Reward calls cut at the per-item timeout.",
                s.timeouts)
        counter("mindrl_reward_errors_total", "Reward calls that raised or crashed a worker.",
                s.errors)
        counter("mindrl_reward_worker_restarts_total", "Workers replaced after a kill or crash.",
                s.restarts)
        counter("mindrl_reward_stragglers_deprioritized_total",
                "Workers lowered to nice 19 while an item ran past the straggler threshold.",
                s.deprioritized)
        lines.append("# HELP mindrl_reward_rejected_requests_total Requests refused, by reason.")
        lines.append("# TYPE mindrl_reward_rejected_requests_total counter")
        for reason in sorted(self.rejected) or ["none"]:
            lines.append(f'mindrl_reward_rejected_requests_total{{reason="{reason}"}} '
                         f"{self.rejected.get(reason, 0)}")
        name = "mindrl_reward_request_latency_seconds"
        lines.append(f"# HELP {name} Wall time from request received to response ready.")
        lines.append(f"# TYPE {name} histogram")
        cum = 0
        for b, c in zip(LATENCY_BUCKETS, self.latency_counts):
            cum += c
            lines.append(f'{name}_bucket{{le="{b}"}} {cum}')
        cum += self.latency_counts[-1]
        lines.append(f'{name}_bucket{{le="+Inf"}} {cum}')
        lines.append(f"{name}_sum {self.latency_sum:.6f}")
        lines.append(f"{name}_count {cum}")
        return "\n".join(lines) + "\n"


async def _read_json(request: Request, limit: int) -> Any:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise RequestError(413, "too_large", f"request body of {declared} bytes is over the "
                                             f"limit of {limit} bytes")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise RequestError(413, "too_large", f"request body is over the limit of {limit} bytes")
        chunks.append(chunk)
    try:
        return json.loads(b"".join(chunks))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise RequestError(400, "malformed_json", f"malformed JSON: {e}") from None


def _str_list(body: Dict[str, Any], key: str, required: bool = True) -> Optional[List[Any]]:
    v = body.get(key)
    if v is None and not required:
        return None
    if not isinstance(v, list):
        raise RequestError(422, "bad_request", f"'{key}' must be a list")
    return v


def create_app(service: ScoringService, token: Optional[str] = None,
               max_body_bytes: int = 16 << 20, max_items: int = 4096) -> FastAPI:
    """The FastAPI application over ``service`` (the caller owns and closes the service)."""
    app = FastAPI(title="mindrl reward server", docs_url=None, redoc_url=None, openapi_url=None)
    metrics = Metrics()
    app.state.service, app.state.metrics = service, metrics

    def check_auth(request: Request) -> None:
        if token is None:
            return
        got = request.headers.get("authorization", "")
        given = (got[7:] if got.lower().startswith("bearer ")
                 else request.query_params.get("token", ""))
        if not hmac.compare_digest(given.encode(), token.encode()):
            raise RequestError(401, "unauthorized", "missing or wrong bearer token")

    async def score(request: Request, parse) -> JSONResponse:
        t0 = time.perf_counter()
        try:
            check_auth(request)
            body = await _read_json(request, max_body_bytes)
            if not isinstance(body, dict):
                raise RequestError(422, "bad_request", "the request body must be a JSON object")
            completions, columns, rewards, shape = parse(body)
            if len(completions) > max_items:
                raise RequestError(413, "too_many_items", f"{len(completions)} completions is "
                                                          f"over the limit of {max_items}")
            try:
                fut = service.submit(completions, rewards=rewards, **columns)
            except ValueError as e:
                raise RequestError(422, "bad_request", str(e)) from None
            result = await asyncio.wrap_future(fut)
        except RequestError as e:
            metrics.reject(e.reason)
            headers = {"WWW-Authenticate": "Bearer"} if e.status == 401 else None
            return JSONResponse({"error": e.message}, status_code=e.status, headers=headers)
        out = shape(result)
        metrics.observe(time.perf_counter() - t0)
        return JSONResponse(out)

    def parse_score(body):
        completions = _str_list(body, "completions")
        columns = body.get("columns") or {}
        if not isinstance(columns, dict):
            raise RequestError(422, "bad_request", "'columns' must be an object of lists")
        rewards = body.get("rewards")
        if rewards is not None and not isinstance(rewards, (list, dict)):
            raise RequestError(422, "bad_request", "'rewards' must be a list or an object")

        def shape(r):
            return {"rewards": r.total.tolist(), "components": r.components,
                    "timeouts": r.num_timeouts, "errors": r.num_errors}
        return completions, columns, rewards, shape

    def parse_openrlhf(body):
        queries = _str_list(body, "query")
        prompts = _str_list(body, "prompts", required=False) or [None] * len(queries)
        labels = _str_list(body, "labels", required=False) or [None] * len(queries)
        if not (len(prompts) == len(labels) == len(queries)):
            raise RequestError(422, "bad_request", "'query', 'prompts' and 'labels' must have "
                                                   "the same length")
        completions = [completion_from_query(q, p) for q, p in zip(queries, prompts)]
        columns = columns_from_labels(labels)

        def shape(r):
            total = r.total.tolist()
            logs = {k: [0.0 if v is None else v for v in vals] for k, vals in r.components.items()}
            return {"rewards": total, "scores": total, "extra_logs": logs}
        return completions, columns, None, shape

    @app.post("/score")
    async def score_endpoint(request: Request):
        return await score(request, parse_score)

    @app.post("/openrlhf")
    async def openrlhf_endpoint(request: Request):
        return await score(request, parse_openrlhf)

    @app.get("/health")
    async def health():
        return {"status": "ok", "workers": service.num_workers, "rewards": service.keys,
                "timeout": service.timeout, "worker_pids": service.worker_pids}

    @app.get("/metrics")
    async def metrics_endpoint(request: Request):
        try:
            check_auth(request)
        except RequestError as e:
            metrics.reject(e.reason)
            return JSONResponse({"error": e.message}, status_code=401,
                                headers={"WWW-Authenticate": "Bearer"})
        return PlainTextResponse(metrics.render(service),
                                 media_type="text/plain; version=0.0.4")

    return app
