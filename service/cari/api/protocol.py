"""The HTTP/1.1 protocol `cari serve` runs: uvicorn's h11 one, with deadlines for reading a
request. Its head must be whole within CARI_REQUEST_HEAD_TIMEOUT_S of the connection or of the
previous response, and its body may pause for at most CARI_REQUEST_BODY_TIMEOUT_S; else the
client is answered 408 (while no response has begun) and the connection is closed. A request
line or header h11 cannot parse is answered 400 (`invalid_request`) as a problem, as any answer
of Cari's.

uvicorn times out only an idle kept-alive connection, which a byte now and then keeps busy: a
few clients sending their headers that slowly, before any API key is checked, would hold the
server's connections for as long as they liked.
"""

from __future__ import annotations

import asyncio
import logging
from urllib.parse import quote

import h11
import msgspec
from uvicorn.protocols.http.h11_impl import STATUS_PHRASES, H11Protocol

from cari.api import problems
from cari.settings import Settings

log = logging.getLogger(__name__)


class _Deadlines(H11Protocol):
    head_timeout_s = 10.0
    body_timeout_s = 30.0

    _timer: asyncio.TimerHandle | None = None
    _head_since = 0.0  # when the head being read could begin: the connection, a response
    _last_read = 0.0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._head_since = self._last_read = self.loop.time()
        self._watch()

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        if self._timer is not None:
            self._timer.cancel()

    def data_received(self, data: bytes) -> None:
        self._last_read = self.loop.time()
        super().data_received(data)
        self._watch()

    def on_response_complete(self) -> None:
        self._head_since = self.loop.time()
        super().on_response_complete()
        self._watch()

    def send_400_response(self, msg: str) -> None:
        """A request line or header h11 refuses: a problem, as every answer of Cari's."""
        self._answer(400, msg)
        self.transport.close()

    def _deadline(self) -> float | None:
        """When what is being read must have arrived: the head, or the body's next bytes
        (none while the request is whole, being answered)."""
        if self.conn.their_state is h11.IDLE:
            return self._head_since + self.head_timeout_s
        if self.conn.their_state is h11.SEND_BODY:
            return self._last_read + self.body_timeout_s
        return None

    def _watch(self) -> None:
        """One timer, at the deadline or before it (it then looks again)."""
        deadline = self._deadline()
        if deadline is None or self.transport.is_closing():
            return
        if self._timer is not None:
            if self._timer.when() <= deadline:
                return
            self._timer.cancel()
        self._timer = self.loop.call_at(deadline, self._expire)

    def _expire(self) -> None:
        self._timer = None
        if self.flow.read_paused:  # the server, not the client, stopped the body: no pause
            self._last_read = self.loop.time()
        deadline = self._deadline()
        if deadline is None or self.transport.is_closing():
            return
        if self.loop.time() < deadline:
            self._watch()
            return
        if self.conn.their_state is h11.IDLE:
            if self.conn.trailing_data[0]:  # a head begun; a connection that sent nothing: closed
                self._answer(408, f"the request's head took over {self.head_timeout_s:g} s")
            self.transport.close()
            return
        cycle = self.cycle
        if not cycle.response_started:
            # The app reads a disconnect; what it answers goes nowhere.
            cycle.disconnected = True
            cycle.message_event.set()
            self._answer(
                408,
                f"the request's body paused for over {self.body_timeout_s:g} s",
                self.scope["path"],
            )
        self.transport.close()

    def _answer(self, status: int, detail: str, path: str | None = None) -> None:
        """A problem (RFC 9457) written as the connection's last response."""
        code = {400: "invalid_request", 408: "request_timeout"}[status]
        body = msgspec.json.encode(
            problems.Problem(
                type=problems.TYPE_PREFIX + code,
                title=problems.KINDS[code][1],
                status=status,
                detail=detail,
                instance=msgspec.UNSET if path is None else quote(path),
                code=code,
            )
        )
        headers = [
            (b"content-type", problems.MEDIA_TYPE.encode()),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
        ]
        log.info("%s to %s: %s", status, self.client, detail)
        try:
            for event in (
                h11.Response(status_code=status, headers=headers, reason=STATUS_PHRASES[status]),
                h11.Data(data=body),
                h11.EndOfMessage(),
            ):
                self.transport.write(self.conn.send(event))
        except h11.LocalProtocolError:  # the state does not allow an answer: closed without one
            pass


def http_protocol(settings: Settings) -> type[asyncio.Protocol]:
    """The protocol class for `uvicorn.run(http=...)`, with the settings' deadlines."""

    class Protocol(_Deadlines):
        head_timeout_s = settings.request_head_timeout_s
        body_timeout_s = settings.request_body_timeout_s

    return Protocol
