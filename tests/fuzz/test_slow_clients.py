"""Slow clients against a real web process whose read timeout (REQUEST_READ_TIMEOUT_S) is one
second: a head trickled a byte at a time is cut off with 408 once its time is up, however
steadily it trickles; a body that stops arriving is cut off the same way, one that keeps
arriving is not; a connection that never says anything is closed. Meanwhile other clients are
served, and the event loop (`tests.support.debug_web` logs every callback that holds it)
never stalls. Every wait here is on the server's answer, bounded only to fail a broken server.
"""

from __future__ import annotations

import hashlib
import hmac
import select
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from app.web.bounded_protocol import TOO_SLOW
from tests.support.loop_stalls import LogWatch, stalls_in, start_debug_web
from tests.support.processes import Service, free_port

READ_TIMEOUT_S = 1.0
TRICKLERS = 20
# How often each trickler sends its next byte: far more often than the read timeout.
TRICKLE_EVERY_S = 0.1
# Only a server that never cuts anyone off takes this long; a working one takes seconds.
GIVE_UP_S = 60.0
STALL_S = 0.2


@dataclass
class Web:
    base_url: str
    service: Service
    log: LogWatch

    @property
    def address(self) -> tuple[str, int]:
        return "127.0.0.1", int(self.base_url.rsplit(":", 1)[1])


@pytest.fixture(scope="module")
def web(test_env: dict[str, str], artifacts_dir: Path) -> Iterator[Web]:
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    env = {
        **test_env,
        "PUBLIC_BASE_URL": base_url,
        "REQUEST_READ_TIMEOUT_S": str(READ_TIMEOUT_S),
    }
    service = start_debug_web(env, port, artifacts_dir / "slow-clients")
    try:
        found = Web(base_url, service, LogWatch(str(service.log_path)))
        found.log.skip()
        yield found
    finally:
        service.stop()


@dataclass
class Trickler:
    conn: socket.socket
    opened: float
    sent: int = 0
    answer: bytes = b""
    closed_after: float | None = None
    last_sent: float = 0.0


def _read_to_end(conn: socket.socket) -> bytes:
    conn.settimeout(GIVE_UP_S)
    received = b""
    try:
        while data := conn.recv(65536):
            received += data
    except ConnectionResetError:
        pass
    return received


def _trickle_until_cut(tricklers: list[Trickler], next_byte: bytes) -> None:
    """Send each open trickler one more byte every TRICKLE_EVERY_S until the server has
    answered or closed every one of them."""
    deadline = time.monotonic() + GIVE_UP_S
    while (waiting := [t for t in tricklers if t.closed_after is None]) and (
        time.monotonic() < deadline
    ):
        readable, _, _ = select.select([t.conn for t in waiting], [], [], TRICKLE_EVERY_S)
        now = time.monotonic()
        for trickler in waiting:
            if trickler.conn in readable:
                trickler.closed_after = now - trickler.opened
                trickler.answer = _read_to_end(trickler.conn)
            elif now - trickler.last_sent >= TRICKLE_EVERY_S:
                try:
                    trickler.conn.sendall(next_byte)
                except (BrokenPipeError, ConnectionResetError):
                    continue  # closed by the server: the next select says so
                trickler.sent += 1
                trickler.last_sent = now
    assert all(t.closed_after is not None for t in tricklers), "a trickler was never cut off"


def _open(web: Web, first: bytes) -> Trickler:
    # Before connecting: the server may accept the connection before this process runs again.
    opened = time.monotonic()
    conn = socket.create_connection(web.address, timeout=GIVE_UP_S)
    conn.sendall(first)
    return Trickler(conn, opened, last_sent=opened)


def _assert_no_stalls(web: Web) -> None:
    log = web.log.read()
    assert not stalls_in(log, at_least_s=STALL_S), stalls_in(log, at_least_s=STALL_S)
    assert "Traceback" not in log, log[-3000:]


def _is_timeout(answer: bytes) -> bool:
    return answer.startswith(b"HTTP/1.1 408 ") and answer.endswith(TOO_SLOW)


def test_trickled_heads_are_cut_off_while_others_are_served(web: Web) -> None:
    """Twenty clients send their headers a byte every 0.1 s, each byte well within the
    timeout: each gets 408 once its head has taken a second in all, not before, and the
    connection closes. Requests on other connections meanwhile are answered."""
    served: list[int] = []

    def others() -> None:
        with httpx.Client(base_url=web.base_url, timeout=GIVE_UP_S) as client:
            for _ in range(5):
                served.append(client.get("/health/live").status_code)
                served.append(client.get("/login").status_code)

    tricklers = [
        _open(web, b"GET /login HTTP/1.1\r\nhost: 127.0.0.1\r\nx-slow: ") for _ in range(TRICKLERS)
    ]
    normal = threading.Thread(target=others)
    normal.start()
    try:
        _trickle_until_cut(tricklers, b"a")
    finally:
        normal.join(GIVE_UP_S)
        for trickler in tricklers:
            trickler.conn.close()
    assert served == [200] * 10
    for trickler in tricklers:
        assert _is_timeout(trickler.answer), trickler.answer[:300]
        assert trickler.closed_after is not None
        assert trickler.closed_after >= READ_TIMEOUT_S
        assert trickler.sent >= 2  # it kept sending: a total bound cut it off, not a pause
    _assert_no_stalls(web)


def _webhook_head(length: int) -> bytes:
    return (
        b"POST /webhooks/instagram HTTP/1.1\r\nhost: 127.0.0.1\r\n"
        b"content-type: application/json\r\ncontent-length: %d\r\n"
        b"x-hub-signature-256: sha256=%s\r\n\r\n" % (length, b"0" * 64)
    )


def test_a_body_that_stops_arriving_is_cut_off(web: Web) -> None:
    """A webhook and a sign-in form that announce more body than they send get 408 a second
    after their last byte, and the process goes on serving."""
    heads = [
        _webhook_head(100) + b'{"object": ',
        b"POST /login HTTP/1.1\r\nhost: 127.0.0.1\r\n"
        b"content-type: application/x-www-form-urlencoded\r\ncontent-length: 100\r\n\r\nemail=",
        # Chunked: a chunk announced, then nothing.
        b"POST /login HTTP/1.1\r\nhost: 127.0.0.1\r\n"
        b"content-type: application/x-www-form-urlencoded\r\ntransfer-encoding: chunked\r\n"
        b"\r\n10\r\nemail=",
    ]
    stalled = [_open(web, head) for head in heads]
    try:
        for trickler in stalled:
            trickler.answer = _read_to_end(trickler.conn)
            trickler.closed_after = time.monotonic() - trickler.opened
    finally:
        for trickler in stalled:
            trickler.conn.close()
    for trickler in stalled:
        assert _is_timeout(trickler.answer), trickler.answer[:300]
        assert trickler.closed_after is not None
        assert trickler.closed_after >= READ_TIMEOUT_S
    assert httpx.get(f"{web.base_url}/health/live", timeout=GIVE_UP_S).status_code == 200
    _assert_no_stalls(web)


def test_a_body_that_keeps_arriving_is_read_to_its_end(web: Web, test_env: dict[str, str]) -> None:
    """A webhook whose body comes a byte every 0.1 s, three times as long as the timeout in
    all, is read whole and answered: the bound is on each pause, not on the body's length."""
    body = b'{"object": "instagram", "entry": []}'
    secret = test_env["INSTAGRAM_APP_SECRET"].encode()
    digest = hmac.new(secret, body, hashlib.sha256).hexdigest().encode()
    head = _webhook_head(len(body)).replace(b"0" * 64, digest)
    with socket.create_connection(web.address, timeout=GIVE_UP_S) as conn:
        conn.sendall(head)
        began = time.monotonic()
        for byte in body:
            conn.sendall(bytes([byte]))
            time.sleep(TRICKLE_EVERY_S)
        answer = conn.recv(65536)
    assert time.monotonic() - began > 3 * READ_TIMEOUT_S
    assert answer.startswith(b"HTTP/1.1 200 "), answer[:300]


def test_a_silent_connection_is_closed(web: Web) -> None:
    """A connection that never sends a byte is closed, without an answer, after the timeout."""
    opened = time.monotonic()
    with socket.create_connection(web.address, timeout=GIVE_UP_S) as conn:
        assert _read_to_end(conn) == b""
        assert time.monotonic() - opened >= READ_TIMEOUT_S


def test_a_body_sent_on_after_its_answer_is_cut_off(web: Web) -> None:
    """A chunked body that never ends, refused (413) once past the form limit: the server
    stops reading it a second after answering instead of reading it for ever, and the whole
    answer reaches the client first."""
    head = (
        b"POST /login HTTP/1.1\r\nhost: 127.0.0.1\r\n"
        b"content-type: application/x-www-form-urlencoded\r\ntransfer-encoding: chunked\r\n\r\n"
    )
    chunk = b"%x\r\n%s\r\n" % (64 * 1024, b"a" * 64 * 1024)
    answer = b""
    with socket.create_connection(web.address, timeout=GIVE_UP_S) as conn:
        conn.sendall(head)
        deadline = time.monotonic() + GIVE_UP_S
        try:
            while time.monotonic() < deadline:
                readable, writable, _ = select.select([conn], [conn], [], TRICKLE_EVERY_S)
                if readable:
                    data = conn.recv(65536)
                    if not data:
                        break
                    answer += data
                if writable:
                    conn.sendall(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass
        closed_at = time.monotonic()
    assert closed_at < deadline, "the server read the endless body for as long as it came"
    # The whole answer arrived: the server closed after draining, not with a reset at once.
    head, _, words = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413 "), answer[:300]
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.lower().split(b"\r\n")
        if line.startswith(b"content-length:")
    )
    assert len(words) == length, answer


def test_an_idle_connection_between_requests_is_closed(web: Web) -> None:
    """After its answer, a kept-alive connection that sends nothing more is closed (after
    KEEP_ALIVE_S), quietly."""
    with socket.create_connection(web.address, timeout=GIVE_UP_S) as conn:
        conn.sendall(b"GET /health/live HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n")
        answer = b""
        while b"\r\n\r\n" not in answer:
            answer += conn.recv(65536)
        assert answer.startswith(b"HTTP/1.1 200 "), answer[:300]
        assert b"connection: close" not in answer.lower()
        # Closed (the read ends) with nothing more said: no second answer, no 408.
        rest = _read_to_end(conn)
        assert b"HTTP/1.1" not in rest, rest


def test_a_body_finished_after_its_answer_leaves_the_connection_bounded(web: Web) -> None:
    """Answered (403: no CSRF token) before its body was all sent, a request whose body then
    arrives whole leaves an idle connection, which is closed like any other."""
    length = 100_000
    head = (
        b"POST /login HTTP/1.1\r\nhost: 127.0.0.1\r\n"
        b"content-type: application/json\r\ncontent-length: %d\r\n\r\n" % length
    )
    with socket.create_connection(web.address, timeout=GIVE_UP_S) as conn:
        conn.sendall(head + b"{")
        answer = b""
        while b"\r\n\r\n" not in answer:
            answer += conn.recv(65536)
        assert answer.startswith(b"HTTP/1.1 403 "), answer[:300]
        conn.sendall(b" " * (length - 1))
        rest = _read_to_end(conn)
        assert b"HTTP/1.1" not in rest, rest
