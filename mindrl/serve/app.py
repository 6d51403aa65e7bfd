"""The reward server: mindrl's rewards over HTTP (FastAPI on uvicorn), scored by a ScoringService.

Endpoints (JSON in, JSON out; request bodies are validated by the models in schema.py):

  POST /score      {"completions": [str], "columns": {"answer": [...], ...},
                    "rewards": {"accuracy": 1.0} | ["accuracy"] (optional)}
                -> {"rewards": [total], "components": {key: [score | null]},
                    "timeouts": {key: n}, "errors": {key: n}, "unscored": {key: n},
                    "messages": {key: [why some scores are null]},
                    "warnings": [...] (only when there is something to say)}
  POST /openrlhf   OpenRLHF's ``--remote_rm_url`` protocol:
                   {"query": [str], "prompts": [str], "labels": [str | object]}
                -> {"rewards": [float], "scores": [float], "extra_logs": {key: [float],
                    "reward_timeouts": [n], "reward_errors": [n], "reward_unscored": [n]},
                    "timeouts": ..., "errors": ..., "unscored": ..., "messages": ...}
                   The completion is ``query`` with its ``prompts`` prefix and a trailing
                   end-of-sequence token removed (OpenRLHF sends prompt + response decoded
                   with special tokens); a label is the gold answer, or a JSON object whose
                   keys become columns (see :func:`mindrl.serve.labels.columns_from_labels`).
                   OpenRLHF turns every value into a tensor, so a null score is sent as 0.0
                   (the value it adds to the total) and counted per item in ``extra_logs``
                   (components of the item that timed out / failed / could not score it).
  GET  /health     {"status": "ok", "workers": N, "rewards": [keys], "worker_pids": [...]}
  GET  /metrics    Prometheus text format: requests, items, timeouts, errors, unscored items,
                   rejected requests by reason, restarts, and a request-latency histogram.

A null score has one of three causes, counted apart: ``timeouts`` (cut at the per-item
timeout), ``errors`` (the reward raised, crashed its worker or returned NaN / inf) and
``unscored`` (the reward returned null itself, e.g. for a gold answer it cannot parse);
``messages`` gives up to 5 distinct reasons per reward.

Refusals are JSON ``{"error": "<one line>"}``, plus ``"field"`` (the field at fault, e.g.
``completions[1]``, ``columns.answer``, ``rewards.accuracy``) and ``"details"`` (every field
at fault, up to 20) for a body of the wrong shape: 400 malformed JSON (including nesting
deeper than the parser's limit and numbers out of range), 401 missing or wrong bearer token,
408 request head or body not received in time, 413 body over ``max_body_bytes`` (refused
before it is parsed) or more than ``max_items`` completions, 422 wrong shape, 431 request
head too large; 404 / 405 unknown path or method, 503 while the service shuts down, and 500
(``{"error": "internal error (...)"}``, traceback in the log) for a bug. With a ``token`` every endpoint but /health needs ``Authorization: Bearer
<token>`` (401 otherwise). OpenRLHF's client sends no headers: give it the token in the URL
(``/openrlhf?token=...``), on a trusted network only. Connection limits (header size, header
and body timeouts, the shutdown grace) are set in limits.py.
"""

from __future__ import annotations

import asyncio
import hmac
import time
from typing import Any, Dict, List, Optional

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect

from mindrl.serve.labels import columns_from_labels, completion_from_query, label_columns
from mindrl.serve.schema import BadRequest, OpenRLHFRequest, ScoreRequest, field_error, parse
from mindrl.serve.service import ERROR, TIMEOUT, UNSCORED, ColumnError, ScoringService

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


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
        counter("mindrl_reward_errors_total", "Reward calls that raised, crashed a worker or "
                "returned NaN / inf.", s.errors)
        counter("mindrl_reward_unscored_total", "Items a reward returned null for by itself "
                "(e.g. a gold answer it cannot parse).", s.unscored)
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


async def _read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise BadRequest(413, "too_large", f"request body of {declared} bytes is over the "
                                           f"limit of {limit} bytes")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BadRequest(413, "too_large", f"request body is over the limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def _null_report(r) -> Dict[str, Any]:
    return {"timeouts": r.num_timeouts, "errors": r.num_errors, "unscored": r.num_unscored,
            "messages": r.messages}


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
            raise BadRequest(401, "unauthorized", "missing or wrong bearer token")

    def refuse(e: BadRequest) -> JSONResponse:
        metrics.reject(e.reason)
        headers = {"WWW-Authenticate": "Bearer"} if e.status == 401 else None
        out: Dict[str, Any] = {"error": e.message}
        if e.field is not None:
            out["field"], out["details"] = e.field, e.details
        return JSONResponse(out, status_code=e.status, headers=headers)

    async def score(request: Request, parse_body) -> Response:
        t0 = time.perf_counter()
        try:
            check_auth(request)
            raw = await _read_body(request, max_body_bytes)
            completions, columns, rewards, shape, column_field = parse_body(raw)
            if len(completions) > max_items:
                raise BadRequest(413, "too_many_items", f"{len(completions)} completions is "
                                                        f"over the limit of {max_items}")
            try:
                fut = service.submit_columns(completions, columns, rewards=rewards)
            except ColumnError as e:    # a name the configured rewards reserve
                raise field_error(column_field(e.column), str(e)) from None
            except ValueError as e:     # a reward name this server does not score
                raise field_error("rewards", str(e)) from None
            except RuntimeError as e:   # closed: the server is shutting down
                raise BadRequest(503, "unavailable", f"reward service unavailable: {e}") from None
            try:
                result = await asyncio.wrap_future(fut)
            except RuntimeError as e:   # the dispatcher failed or the service closed
                raise BadRequest(503, "unavailable", f"reward service unavailable: {e}") from None
        except BadRequest as e:
            return refuse(e)
        except ClientDisconnect:        # gone (or cut at --body-timeout): nobody to answer
            return Response(status_code=400)
        out = shape(result)
        metrics.observe(time.perf_counter() - t0)
        return JSONResponse(out)

    def parse_score(raw: bytes):
        req = parse(ScoreRequest, raw)
        columns = req.columns or {}

        def shape(r):
            out = {"rewards": r.total.tolist(), "components": r.components, **_null_report(r)}
            if req.columns is None and any(r.num_none.values()):
                out["warnings"] = ["the request has no 'columns': rewards that compare with a "
                                   "gold answer read it from a column, e.g. columns.answer"]
            return out
        return req.completions, columns, req.rewards, shape, lambda name: f"columns.{name}"

    def parse_openrlhf(raw: bytes):
        req = parse(OpenRLHFRequest, raw)
        n = len(req.query)
        prompts = req.prompts or [None] * n
        labels = req.labels if req.labels is not None else [None] * n
        completions = [completion_from_query(q, p) for q, p in zip(req.query, prompts)]
        columns = columns_from_labels(labels)

        def shape(r):
            total = r.total.tolist()
            logs: Dict[str, List[float]] = {
                k: [service.none_as if v is None else v for v in vals]
                for k, vals in r.components.items()}
            for name, kind in (("reward_timeouts", TIMEOUT), ("reward_errors", ERROR),
                               ("reward_unscored", UNSCORED)):
                logs[name] = [float(sum(st[i] == kind for st in r.status.values()))
                              for i in range(n)]
            return {"rewards": total, "scores": total, "extra_logs": logs, **_null_report(r)}

        def column_field(name: str) -> str:
            i = next((i for i, lab in enumerate(labels) if name in label_columns(lab)), None)
            return "labels" if i is None else f"labels[{i}].{name}"
        return completions, columns, None, shape, column_field

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException):
        # unknown path (404), wrong method (405): the same error format as every refusal
        metrics.reject("not_found" if exc.status_code == 404 else "bad_method"
                       if exc.status_code == 405 else "bad_request")
        return JSONResponse({"error": f"{request.method} {request.url.path}: {exc.detail}"},
                            status_code=exc.status_code, headers=exc.headers)

    @app.exception_handler(Exception)
    async def internal_error(request: Request, exc: Exception):
        metrics.reject("internal_error")
        return JSONResponse({"error": f"internal error ({type(exc).__name__}); the server log "
                                      "has the traceback"}, status_code=500)

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
        except BadRequest as e:
            return refuse(e)
        return PlainTextResponse(metrics.render(service),
                                 media_type="text/plain; version=0.0.4")

    return app
