"""Hostile input below the routes, on raw sockets: requests that send themselves slowly
(headers never finished, bodies that stop short of their Content-Length) must hold up no
one else, bodies past the limit must be refused while they are still arriving, and framing
the HTTP server cannot read (a Content-Length that is no number, two of them, one beside
chunked encoding) gets the server's own plain refusal and leaves the process serving.
"""

from __future__ import annotations

import hashlib
import hmac
import select
import socket
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import quote, urlsplit

import httpx
import pytest

from tests.support.fuzz_target import Target
from tests.support.route_sweep import check_answer

# More than the web process's database pool (10 + 10 overflow): a slow request that held a
# connection while it waited for its body would starve every other request.
SLOW_CLIENTS = 30
BIG_CHUNK = 256 * 1024
# Far past every body limit (forms 1 MiB, the webhook's WEBHOOK_MAX_BODY_BYTES): a server that
# read a body to its end before refusing it would take all of this.
BIG_BODY = 64 * 1024 * 1024


def _address(target: Target) -> tuple[str, int]:
    where = urlsplit(target.base_url)
    return where.hostname or "127.0.0.1", where.port or 80


def _cookie(target: Target, who: str) -> bytes:
    return "; ".join(f"{c.name}={c.value}" for c in target.clients[who].cookies.jar).encode()


def _head(target: Target, method: bytes, path: bytes, *headers: bytes) -> bytes:
    host, port = _address(target)
    lines = [method + b" " + path + b" HTTP/1.1", f"host: {host}:{port}".encode(), *headers]
    return b"\r\n".join(lines) + b"\r\n\r\n"


def _form_head(target: Target, path: bytes, content_type: bytes, length: int | None) -> bytes:
    """A signed-in owner's form POST (tokens in the headers) of `length` bytes, or chunked."""
    framing = b"transfer-encoding: chunked" if length is None else b"content-length: %d" % length
    return _head(
        target,
        b"POST",
        path,
        b"cookie: " + _cookie(target, "owner"),
        b"x-csrftoken: " + target.csrf["owner"].encode(),
        b"accept: text/html",
        b"content-type: " + content_type,
        framing,
    )


def _webhook_head(target: Target, body: bytes, length: int | None) -> bytes:
    digest = hmac.new(target.webhook_secret.encode(), body, hashlib.sha256).hexdigest()
    framing = b"transfer-encoding: chunked" if length is None else b"content-length: %d" % length
    return _head(
        target,
        b"POST",
        b"/webhooks/instagram",
        b"x-hub-signature-256: sha256=" + digest.encode(),
        b"content-type: application/json",
        framing,
    )


@contextmanager
def _held(target: Target, count: int) -> Iterator[list[socket.socket]]:
    """`count` connections, each stopped part-way through its request, in five shapes."""
    partial_form = b"_csrf_token=" + quote(target.csrf["owner"]).encode() + b"&name=slo"
    shapes = [
        # Headers never finished.
        _head(target, b"GET", b"/", b"cookie: " + _cookie(target, "owner"))[:-4] + b"\r\nx-slow: 1",
        # Bodies that stop short of what they announce, to routes that read the database.
        _form_head(target, b"/campaigns", b"application/x-www-form-urlencoded", 100_000)
        + partial_form,
        _form_head(target, b"/log/retry", b"multipart/form-data; boundary=zz", 100_000)
        + b'--zz\r\ncontent-disposition: form-data; name="ids"\r\n\r\n1',
        _form_head(target, b"/team/time-zone", b"application/x-www-form-urlencoded", 100_000)
        + partial_form,
        _webhook_head(target, b"", 100_000) + b'{"object": "instagram", "entry": [',
    ]
    conns: list[socket.socket] = []
    try:
        for n in range(count):
            conn = socket.create_connection(_address(target), timeout=30)
            conns.append(conn)
            conn.sendall(shapes[n % len(shapes)])
        yield conns
    finally:
        for conn in conns:
            conn.close()


def _still_waiting(conn: socket.socket) -> bool:
    """The server has neither answered nor closed this connection."""
    readable, _, _ = select.select([conn], [], [], 0)
    return not readable


def _signed_webhook(target: Target) -> httpx.Response:
    body = b'{"object": "instagram", "entry": []}'
    digest = hmac.new(target.webhook_secret.encode(), body, hashlib.sha256).hexdigest()
    return httpx.post(
        f"{target.base_url}/webhooks/instagram",
        content=body,
        headers={"x-hub-signature-256": f"sha256={digest}", "content-type": "application/json"},
        timeout=60,
    )


def test_slow_clients_hold_no_one_else_up(target: Target) -> None:
    """While 30 requests hang half-sent, a signed-in page, a form post and Meta's webhook are
    answered: none of the hanging ones holds a database connection or the event loop while
    it waits for its bytes."""
    with _held(target, SLOW_CLIENTS) as conns:
        owner = target.clients["owner"]
        for _ in range(2):  # and once more after each hanging request trickled one byte more
            page = owner.get("/", headers={"accept": "text/html"})
            assert page.status_code == 200, page.text[:300]
            zone = owner.post(
                "/team/time-zone",
                data={"time_zone": "Nowhere/Special", "_csrf_token": target.csrf["owner"]},
                headers={"accept": "text/html"},
            )
            assert zone.status_code == 422, zone.text[:300]
            assert _signed_webhook(target).status_code == 200
            assert all(_still_waiting(conn) for conn in conns)
            for conn in conns:
                conn.sendall(b"x")


def _stream(conn: socket.socket, chunked: bool) -> tuple[int, bytes]:
    """Send up to BIG_BODY bytes until the server answers; the bytes sent and the answer."""
    sent = 0
    chunk = b"a" * BIG_CHUNK
    piece = b"%x\r\n" % len(chunk) + chunk + b"\r\n" if chunked else chunk
    received = b""
    while sent < BIG_BODY:
        readable, _, _ = select.select([conn], [], [], 0)
        if readable:
            break
        try:
            conn.sendall(piece)
        except (BrokenPipeError, ConnectionResetError):
            break
        sent += len(chunk)
    conn.settimeout(30)
    try:
        while b"\r\n\r\n" not in received and (data := conn.recv(65536)):
            received += data
        head, _, body = received.partition(b"\r\n\r\n")
        length = next(
            (
                int(line[15:])
                for line in head.lower().split(b"\r\n")
                if line.startswith(b"content-length:")
            ),
            None,
        )
        while length is not None and len(body) < length and (data := conn.recv(65536)):
            body += data
        received = head + b"\r\n\r\n" + body
    except (ConnectionResetError, TimeoutError):
        pass
    return sent, received


BIG_BODIES = [
    ("form, chunked", b"/campaigns", b"application/x-www-form-urlencoded", True),
    ("form, announced", b"/campaigns", b"application/x-www-form-urlencoded", False),
    ("multipart, chunked", b"/campaigns/preview", b"multipart/form-data; boundary=zz", True),
    ("json, chunked", b"/team/time-zone", b"application/json", True),
    ("webhook, chunked", b"/webhooks/instagram", b"application/json", True),
    ("webhook, announced", b"/webhooks/instagram", b"application/json", False),
]


@pytest.mark.parametrize(("what", "path", "content_type", "chunked"), BIG_BODIES)
def test_large_bodies_are_refused_as_they_arrive(
    target: Target, what: str, path: bytes, content_type: bytes, chunked: bool
) -> None:
    """A body past the limit is refused, with words, long before 64 MiB of it is sent."""
    length = None if chunked else BIG_BODY
    head = (
        _webhook_head(target, b"", length)
        if path.startswith(b"/webhooks/")
        else _form_head(target, path, content_type, length)
    )
    with socket.create_connection(_address(target), timeout=30) as conn:
        conn.sendall(head)
        sent, received = _stream(conn, chunked)
    status_line, _, rest = received.partition(b"\r\n")
    status = int(status_line.split(b" ")[1])
    # 413, or a refusal given without reading the body at all (a JSON body no form takes).
    assert status == 413 or (400 <= status < 500 and not path.startswith(b"/webhooks/")), (
        what,
        received[:300],
    )
    assert sent < BIG_BODY // 4, (what, sent)
    headers, _, body = rest.partition(b"\r\n\r\n")
    found = {
        name.strip().lower().decode(): value.strip().decode("latin-1")
        for name, _, value in (line.partition(b":") for line in headers.split(b"\r\n"))
    }
    check_answer(what, status, found, body.decode("utf-8", "replace"))


BAD_FRAMING = [
    ("content-length not a number", b"content-length: abc\r\n", b""),
    ("content-length negative", b"content-length: -5\r\n", b""),
    ("content-length past int64", b"content-length: 99999999999999999999999\r\n", b"x"),
    ("two content-lengths", b"content-length: 5\r\ncontent-length: 7\r\n", b"hello"),
    ("content-length and chunked", b"content-length: 5\r\ntransfer-encoding: chunked\r\n", b"0"),
    ("chunk size not hex", b"transfer-encoding: chunked\r\n", b"zz\r\nabc\r\n0\r\n\r\n"),
]


@pytest.mark.parametrize(("what", "framing", "body"), BAD_FRAMING, ids=[b[0] for b in BAD_FRAMING])
def test_unreadable_framing_gets_a_plain_refusal(
    target: Target, what: str, framing: bytes, body: bytes
) -> None:
    host, port = _address(target)
    request = (
        b"POST /campaigns HTTP/1.1\r\nhost: %s:%d\r\ncookie: %s\r\n"
        % (host.encode(), port, _cookie(target, "owner"))
        + b"content-type: application/x-www-form-urlencoded\r\nconnection: close\r\n"
        + framing
        + b"\r\n"
        + body
    )
    with socket.create_connection((host, port), timeout=30) as conn:
        conn.sendall(request)
        received = b""
        while chunk := conn.recv(65536):
            received += chunk
    head, _, answer = received.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    assert 400 <= status < 500, (what, received[:300])
    check_answer(what, status, {}, answer.decode("utf-8", "replace"))
    # The process goes on serving.
    assert target.clients["owner"].get("/health/live").status_code == 200


def test_a_body_cut_short_leaves_nothing_behind(target: Target) -> None:
    """A form whose sender hangs up part-way is dropped: nothing is saved from it, and the
    same one-time key still works for the whole form afterwards."""
    idem = uuid.uuid4().hex
    name = f"Cut short {idem[:8]}"
    form = (
        f"_csrf_token={quote(target.csrf['owner'])}&_idem={idem}&name={quote(name)}"
        f"&account_id={target.known_ids[0]}&scope=any_post&keywords=cut&dm_text=hi"
    ).encode()
    head = _form_head(target, b"/campaigns", b"application/x-www-form-urlencoded", len(form))
    with socket.create_connection(_address(target), timeout=30) as conn:
        conn.sendall(head + form[: len(form) // 2])
    listing = target.clients["owner"].get("/campaigns", headers={"accept": "text/html"})
    assert listing.status_code == 200
    assert name not in listing.text
    whole = target.clients["owner"].post(
        "/campaigns",
        content=form,
        headers={"content-type": "application/x-www-form-urlencoded", "accept": "text/html"},
    )
    assert whole.status_code == 303, whole.text[:2000]
    listing = target.clients["owner"].get("/campaigns", headers={"accept": "text/html"})
    assert name in listing.text


@pytest.mark.parametrize(
    ("what", "line"),
    [
        ("one header", b"x-big: " + b"a" * BIG_CHUNK),
        ("many headers", b"\r\n".join(b"x-%d: %s" % (n, b"a" * 60) for n in range(4000))),
        ("request line", b""),
    ],
)
def test_endless_headers_are_refused_as_they_arrive(target: Target, what: str, line: bytes) -> None:
    """A request whose line or headers never end gets a 431 (the server's plain words) once
    its head passes 64 KiB, long before 64 MiB of it is sent; a head of a few kilobytes more
    than any browser sends is still served."""
    host, port = _address(target)
    start = b"GET /?q=" if what == "request line" else b"GET / HTTP/1.1\r\nhost: h\r\n"
    with socket.create_connection((host, port), timeout=30) as conn:
        conn.sendall(start + line)
        sent, received = _stream(conn, chunked=False)
    assert received.startswith(b"HTTP/1.1 431"), (what, received[:300])
    assert received.endswith(b"The request's headers are too large."), (what, received[-300:])
    assert sent < BIG_BODY // 4, (what, sent)
    cookies = "; ".join(f"c{n}=" + "v" * 40 for n in range(300))  # 14 kB of cookies
    page = target.clients["owner"].get("/login", headers={"cookie": cookies})
    assert page.status_code == 200, page.text[:300]
