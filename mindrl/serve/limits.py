"""Connection limits of the reward server, and a uvicorn server that shuts down in bounded time.

uvicorn (0.55) bounds neither how long a client may take to send its request head or body nor
how long a graceful shutdown may wait, and it re-raises SIGTERM after shutting down (the
process then dies by the signal and no ``finally`` after ``uvicorn.run`` runs). Here:

  - :func:`limited_protocol` is uvicorn's h11 protocol with
      * ``max_header_bytes``: a request line + headers over the limit is answered 431;
      * ``header_timeout``: a connection that has not sent a whole request head within this
        many seconds of opening (or of the first byte of its next request) is answered 408 and
        closed; an idle kept-alive connection is closed after uvicorn's ``keep_alive_timeout``;
      * ``body_timeout``: a request body not received in full within this many seconds of its
        headers is answered 408 (when no response has started) and the connection closed;
    every refusal is a JSON body ``{"error": "..."}`` with ``Connection: close``.
  - :class:`GracefulServer` handles SIGINT / SIGTERM itself: it stops accepting, lets requests
    in flight finish for up to ``shutdown_grace`` seconds, then cancels the rest, closes every
    connection and returns (no re-raise), so the caller's clean-up runs and the exit is 0.
"""

from __future__ import annotations

import contextlib
import http
import json
import signal
import threading
from dataclasses import dataclass
from typing import Callable, Optional

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

HANDLED_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@dataclass(frozen=True)
class ServerLimits:
    """Per-connection limits (bytes, seconds); the defaults of ``mindrl serve-rewards``."""

    max_header_bytes: int = 16 << 10
    header_timeout: float = 10.0
    body_timeout: float = 30.0
    keep_alive_timeout: float = 5.0
    shutdown_grace: float = 10.0

    def check(self) -> None:
        """ValueError naming the option when a limit is not positive."""
        for name in ("max_header_bytes", "header_timeout", "body_timeout", "keep_alive_timeout"):
            if not getattr(self, name) > 0:
                raise ValueError(f"--{name.replace('_', '-')} must be positive")
        if not self.shutdown_grace >= 0:
            raise ValueError("--shutdown-grace must be >= 0")


def error_response(status: int, message: str) -> bytes:
    """A whole HTTP/1.1 response: JSON ``{"error": message}``, then the connection closes."""
    body = json.dumps({"error": message}).encode()
    phrase = http.HTTPStatus(status).phrase
    head = (f"HTTP/1.1 {status} {phrase}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n")
    return head.encode("latin-1") + body


def limited_protocol(limits: ServerLimits, on_reject: Optional[Callable[[str], None]] = None):
    """uvicorn's h11 protocol class with ``limits`` applied; ``on_reject(reason)`` is called for
    each connection refused here (``header_too_large``, ``header_timeout``, ``body_timeout``,
    ``bad_http``)."""

    class LimitedH11Protocol(H11Protocol):
        _timer = None
        _phase: Optional[str] = None

        def connection_made(self, transport) -> None:
            super().connection_made(transport)
            self._arm("header")

        def connection_lost(self, exc) -> None:
            self._disarm()
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            if self.conn.their_state is h11.IDLE and self._head_too_large(data):
                self._refuse_head()
                return
            super().data_received(data)
            self._follow()

        def _head_too_large(self, data: bytes) -> bool:
            # h11 bounds only a head still incomplete; one that arrives whole is measured here
            buf = self.conn.trailing_data[0] + data
            end = buf.find(b"\r\n\r\n", 0, limits.max_header_bytes + 4)
            return end + 4 > limits.max_header_bytes if end >= 0 \
                else len(buf) > limits.max_header_bytes

        def _refuse_head(self) -> None:
            self._refuse(431, "header_too_large", "request line and headers are over the "
                         f"limit of {limits.max_header_bytes} bytes (--max-header-bytes)")

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if self.conn.their_state is h11.IDLE:
                self._disarm()          # idle between requests: uvicorn's keep-alive timer
            self._follow()

        def send_400_response(self, msg: str) -> None:
            # h11 refused the request head; a head over max_header_bytes is the one case
            # where its receive buffer is over the limit
            if len(self.conn.trailing_data[0]) > limits.max_header_bytes:
                self._refuse_head()
            else:
                self._refuse(400, "bad_http", "invalid HTTP request")

        # -- timers ----------------------------------------------------------------------
        def _follow(self) -> None:
            """Arm the timer that matches where the client is in its request."""
            if self.transport is None or self.transport.is_closing():
                return
            state = self.conn.their_state
            if state is h11.IDLE:
                if self._phase is None and self._request_begun():
                    self._arm("header")
            elif state is h11.SEND_BODY:
                if self._phase != "body":
                    self._arm("body")
            else:
                self._disarm()

        def _request_begun(self) -> bool:
            return bool(self.conn.trailing_data[0])

        def _arm(self, phase: str) -> None:
            self._disarm()
            seconds = limits.header_timeout if phase == "header" else limits.body_timeout
            self._phase = phase
            self._timer = self.loop.call_later(seconds, self._expired, phase)

        def _disarm(self) -> None:
            if self._timer is not None:
                self._timer.cancel()
            self._timer, self._phase = None, None

        def _expired(self, phase: str) -> None:
            self._timer, self._phase = None, None
            if self.transport.is_closing():
                return
            cycle = self.cycle
            answering = cycle is not None and not cycle.response_complete
            if phase == "header" and self.conn.their_state is h11.IDLE and not answering:
                self._refuse(408, "header_timeout", "request line and headers not received "
                             f"within {limits.header_timeout:g} s (--header-timeout)")
            elif phase == "body" and self.conn.their_state is h11.SEND_BODY:
                if cycle is None or cycle.response_started:     # a response is out: just close
                    if on_reject is not None:
                        on_reject("body_timeout")
                    self.transport.close()
                else:
                    self._refuse(408, "body_timeout", "request body not received within "
                                 f"{limits.body_timeout:g} s of its headers (--body-timeout)")
                if answering:                   # the app, still reading, sees a disconnect
                    cycle.disconnected = True
                    cycle.message_event.set()

        def _refuse(self, status: int, reason: str, message: str) -> None:
            self._disarm()
            if on_reject is not None:
                on_reject(reason)
            self.transport.write(error_response(status, message))
            self.transport.close()

    return LimitedH11Protocol


class GracefulServer(uvicorn.Server):
    """A uvicorn server whose SIGINT / SIGTERM shutdown lasts at most ``config
    .timeout_graceful_shutdown`` seconds and does not re-raise the signal."""

    @contextlib.contextmanager
    def capture_signals(self):
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        original = {sig: signal.signal(sig, self.handle_exit) for sig in HANDLED_SIGNALS}
        try:
            yield
        finally:
            for sig, handler in original.items():
                signal.signal(sig, handler)

    async def shutdown(self, sockets=None) -> None:
        await super().shutdown(sockets=sockets)
        # connections still open after the grace (a client still sending its body): close them
        for conn in list(self.server_state.connections):
            transport = getattr(conn, "transport", None)
            if transport is not None and not transport.is_closing():
                transport.abort()


def run(app, host: str, port: int, limits: ServerLimits,
        on_reject: Optional[Callable[[str], None]] = None) -> None:
    """Serve ``app`` until SIGINT / SIGTERM; returns after a shutdown of at most
    ``limits.shutdown_grace`` seconds (plus the time to close sockets)."""
    config = uvicorn.Config(
        app, host=host, port=port, log_level="warning", access_log=False, lifespan="off",
        http=limited_protocol(limits, on_reject), ws="none",
        h11_max_incomplete_event_size=limits.max_header_bytes,
        timeout_keep_alive=limits.keep_alive_timeout,
        timeout_graceful_shutdown=limits.shutdown_grace)
    GracefulServer(config).run()
