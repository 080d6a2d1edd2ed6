"""The HTTP server's own answers, over real sockets to a real `cari serve`: a request whose
head or body stops arriving is answered 408 where HTTP still allows an answer, and its
connection is closed, before any API key is checked (the server is given 1 s; a test waits up
to 30 s, for a busy machine); a request line it cannot parse is a documented 400 problem."""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Iterator

import pytest

from cari.settings import LOCAL_EMBEDDING_DIMENSION
from tests.conftest import cli_env
from tests.fake_openai import FakeOpenAI

TIMEOUT_S = 1
BOUND_S = 30
DRIP_S = 0.2  # a byte of the head this often: never a pause the server could call a stall
KEY = "slow-clients-key"


@pytest.fixture(scope="module")
def port(module_dsn: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """A `cari serve` that requires an API key and gives a request's head and body 1 s; at the
    end, it has logged no error."""
    from tests.test_cli import serving

    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("CARI_", "OTEL_")) and key != "DATABASE_URL"
    }
    env.update(
        CARI_API_KEYS=KEY,
        CARI_REQUEST_HEAD_TIMEOUT_S=str(TIMEOUT_S),
        CARI_REQUEST_BODY_TIMEOUT_S=str(TIMEOUT_S),
    )
    with (
        FakeOpenAI(dimension=LOCAL_EMBEDDING_DIMENSION) as fake,
        pytest.MonkeyPatch.context() as patch,
    ):
        patch.chdir(tmp_path_factory.mktemp("serve"))  # no developer `.env` is read
        printed: list[str] = []
        with serving(cli_env(env, module_dsn, fake), output=printed) as url:
            yield int(url.rsplit(":", 1)[1])
    # A client that stalls is the client's fault: no error is logged (a request's traceback).
    assert '"level": "ERROR"' not in printed[0], printed[0]


def until_closed(port: int, sent: bytes, drip: bytes = b"") -> bytes:
    """Send `sent`, then `drip` a byte every DRIP_S until the server answers; then read until
    it closes the connection. Everything it answered; fails if it is open after BOUND_S."""
    answer = bytearray()
    deadline = time.monotonic() + BOUND_S
    with socket.create_connection(("127.0.0.1", port), timeout=BOUND_S) as sock:
        sock.sendall(sent)
        sock.settimeout(DRIP_S)
        for i in range(10**9):
            if time.monotonic() > deadline:
                pytest.fail(f"still open after {BOUND_S} s; answered {bytes(answer)!r}")
            try:
                if drip and not answer:
                    sock.send(drip[i % len(drip) : i % len(drip) + 1])
                data = sock.recv(65536)
            except TimeoutError:
                continue
            except OSError:  # reset: the connection is closed
                break
            if not data:
                break
            answer += data
    return bytes(answer)


def responses(answer: bytes) -> list[tuple[int, bytes]]:
    """The (status, body) of each response in `answer`, each with a Content-Length."""
    found = []
    while answer:
        head, _, rest = answer.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        headers = dict(line.lower().split(b": ", 1) for line in lines[1:])
        length = int(headers[b"content-length"])
        found.append((int(lines[0].split()[1]), rest[:length]))
        answer = rest[length:]
    return found


def test_a_head_that_trickles_in_is_answered_408_and_closed(port: int) -> None:
    answer = until_closed(port, b"GET /v1/collections HTTP/1.1\r\nHost: x\r\n", b"X-Slow: ab\r\n")
    [(status, body)] = responses(answer)
    assert status == 408, answer
    assert json.loads(body)["code"] == "request_timeout"


def test_after_a_response_the_next_head_has_the_same_deadline(port: int) -> None:
    first = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /healthz HTTP/1.1\r\n"
    answer = until_closed(port, first, b"X-Slow: ab\r\n")
    assert [status for status, _ in responses(answer)] == [200, 408], answer


def test_a_connection_that_sends_nothing_is_closed(port: int) -> None:
    assert until_closed(port, b"") == b""


def test_a_body_that_stops_arriving_is_answered_408_and_closed(port: int) -> None:
    head = (
        "POST /v1/collections HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Authorization: Bearer {KEY}\r\nContent-Length: 100\r\n\r\n"
    )
    answer = until_closed(port, head.encode() + b'{"name": ')
    [(status, body)] = responses(answer)
    assert status == 408, answer
    assert json.loads(body)["code"] == "request_timeout"


def test_an_unauthenticated_body_that_stops_is_refused_then_closed(port: int) -> None:
    head = b"POST /v1/collections HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"
    answer = until_closed(port, head)
    assert [status for status, _ in responses(answer)] == [401], answer


def test_a_raw_control_character_in_the_query_is_a_400_problem(port: int) -> None:
    answer = until_closed(port, b"GET /v1/collections?q=a\x01b HTTP/1.1\r\nHost: x\r\n\r\n")
    [(status, body)] = responses(answer)
    assert status == 400, answer
    assert json.loads(body)["code"] == "invalid_request"
    assert b"application/problem+json" in answer.partition(b"\r\n\r\n")[0]
