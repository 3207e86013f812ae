"""One HTTP/1.1 request written byte for byte, for what an HTTP client refuses to send: a
request target with `..` segments left as they are or bytes that are not ASCII, header values
that are not UTF-8, a Host header of the caller's (else the server's address). A large body
waits for the server's `100 Continue`. The answer is read until the server closes the
connection."""

from __future__ import annotations

import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

_CONTINUE_PAST = 64 * 1024


@dataclass(frozen=True, slots=True)
class RawAnswer:
    status: int
    headers: dict[str, str]  # lower-case names; a repeated header keeps its last value
    body: bytes

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", "replace")


def _dechunk(body: bytes) -> bytes:
    out = bytearray()
    while body:
        size_line, _, rest = body.partition(b"\r\n")
        size = int(size_line.split(b";")[0] or b"0", 16)
        if size == 0:
            break
        out += rest[:size]
        body = rest[size + 2 :]
    return bytes(out)


def raw_request(
    base_url: str,
    method: bytes,
    target: bytes,
    headers: list[tuple[bytes, bytes]] | None = None,
    body: bytes = b"",
    *,
    timeout_s: float = 60,
) -> RawAnswer:
    where = urlsplit(base_url)
    host, port = where.hostname or "127.0.0.1", where.port or 80
    lines = [method + b" " + target + b" HTTP/1.1"]
    if not any(name.lower() == b"host" for name, _ in headers or []):
        lines.append(b"host: " + f"{host}:{port}".encode())
    lines += [name + b": " + value for name, value in headers or []]
    lines += [b"connection: close", b"content-length: " + str(len(body)).encode()]
    big = len(body) > _CONTINUE_PAST
    if big:
        # The body only once the server asks for it: a server refusing it by its length
        # answers first, and a body it never reads would end in a reset connection.
        lines.append(b"expect: 100-continue")
    received = bytearray()
    with socket.create_connection((host, port), timeout=timeout_s) as conn:
        conn.sendall(b"\r\n".join(lines) + b"\r\n\r\n" + (b"" if big else body))
        if big:
            while b"\r\n\r\n" not in received and (chunk := conn.recv(65536)):
                received += chunk
            if received.startswith(b"HTTP/1.1 100"):
                del received[: received.index(b"\r\n\r\n") + 4]
                conn.sendall(body)
        while chunk := conn.recv(65536):
            received += chunk
    head, _, payload = bytes(received).partition(b"\r\n\r\n")
    status_line, *header_lines = head.split(b"\r\n")
    found: dict[str, str] = {}
    for line in header_lines:
        name, _, value = line.partition(b":")
        found[name.strip().lower().decode("latin-1")] = value.strip().decode("latin-1")
    if found.get("transfer-encoding", "").lower() == "chunked":
        payload = _dechunk(payload)
    return RawAnswer(int(status_line.split()[1]), found, payload)


def multipart_part(headers: bytes, value: bytes) -> bytes:
    """A multipart/form-data body (boundary `zz`) of one part, byte for byte: `headers` is what
    follows `content-disposition: form-data; ` (its parameters, then any header lines)."""
    return (
        b"--zz\r\ncontent-disposition: form-data; "
        + headers
        + b"\r\n\r\n"
        + value
        + b"\r\n--zz--\r\n"
    )
