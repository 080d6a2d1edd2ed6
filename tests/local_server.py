"""The lifecycle shared by the tests' HTTP fakes: serve on 127.0.0.1 in a background thread,
stop on `close()` or at the end of a `with`, and wait for every answer in progress."""

from __future__ import annotations

import threading
from http.server import ThreadingHTTPServer
from types import TracebackType
from typing import Self


class LocalServer:
    def __init__(self, server: ThreadingHTTPServer) -> None:
        self._server = server
        self._closing = threading.Event()
        self._closed = False
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """Base URL for the OpenAI-style clients (`…/v1`)."""
        return f"http://127.0.0.1:{self.port}/v1"

    def close(self) -> None:
        """Stop serving and wait for every answer in progress; the port then refuses."""
        if self._closed:
            return
        self._closed = True
        self._closing.set()  # cut every delay short
        self._server.shutdown()
        self._server.server_close()  # joins the request threads
        self._thread.join()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
