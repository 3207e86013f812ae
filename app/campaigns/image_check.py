"""Whether a DM image's URL will do, asked of the server that hosts it (the editor, on save).

Meta fetches the image itself when the DM goes out and refuses the whole message if it cannot
use it; asking first turns that refusal into a field error while the creator is still there.
One HEAD request (a ranged GET when the server answers HEAD with no size or not at all), a
few seconds at most, on the event loop without blocking it: the type must be JPEG, PNG or GIF
and the size at most 8 MB (`media_message`).

Only public addresses are asked. The host name is resolved first and every address it gives
must be global (no private, loopback, link-local, shared or reserved range), and the request
goes to that checked address (the name still given as Host and TLS server name), so a name
that resolves again differently cannot slip an internal address in. Redirects are followed by
hand, at most `MAX_REDIRECTS`, each checked the same way. The loopback interface is allowed only
when `IMAGE_CHECK_ALLOW_LOOPBACK` says so (development and tests, where the sandbox serves
images on 127.0.0.1); that is also the only case an http:// URL is accepted.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit, urlunsplit

import httpx

from app.campaigns.media_message import IMAGE_MAX_BYTES, IMAGE_TYPES

MAX_REDIRECTS = 3
DEFAULT_TIMEOUT_S = 5.0
_USER_AGENT = "OnceReply image check"
_IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

UNREACHABLE = "That image could not be reached; check the link opens the image in a browser."
NOT_PUBLIC = (
    "That link points to a private or local address; use an image on the public internet "
    "(Instagram fetches it from there)."
)


class ImageRefusedError(Exception):
    """Why the URL will not do, in words for the creator."""


@dataclass(frozen=True, slots=True)
class ImageFacts:
    url: str
    content_type: str
    size: int | None


def address_allowed(address: _IPAddress, *, allow_loopback: bool) -> bool:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if address.is_loopback:
        return allow_loopback
    return address.is_global and not address.is_multicast


async def _resolve(host: str, port: int) -> list[_IPAddress]:
    try:
        literal = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        pass
    else:
        return [literal]
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise ImageRefusedError(
            "That image's address does not exist; check the link for typos."
        ) from exc
    return [ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in infos]


async def _pinned(url: str, *, allow_loopback: bool) -> tuple[str, str, str]:
    """(URL with the checked address as host, Host header, TLS server name) for `url`."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as exc:  # a bracketed host that is no address, a port that is no port
        raise ImageRefusedError(UNREACHABLE) from exc
    if parts.scheme not in ("https", "http") or not host:
        raise ImageRefusedError("Use a full https:// link to the image.")
    addresses = await _resolve(host, port)
    if not addresses or not all(
        address_allowed(a, allow_loopback=allow_loopback) for a in addresses
    ):
        raise ImageRefusedError(NOT_PUBLIC)
    if parts.scheme == "http" and not all(a.is_loopback for a in addresses):
        raise ImageRefusedError("Use an https:// link: Instagram fetches images over https only.")
    chosen = addresses[0]
    literal = f"[{chosen}]" if chosen.version == 6 else str(chosen)
    netloc = f"{literal}:{parts.port}" if parts.port else literal
    host_header = parts.netloc.rsplit("@", 1)[-1]
    pinned = urlunsplit((parts.scheme, netloc, parts.path or "/", parts.query, ""))
    return pinned, host_header, host


def _size_of(response: httpx.Response) -> int | None:
    content_range = response.headers.get("content-range", "")
    if response.status_code == 206 and "/" in content_range:
        total = content_range.rsplit("/", 1)[1].strip()
        return int(total) if total.isdigit() else None
    length = response.headers.get("content-length", "")
    return int(length) if length.isdigit() else None


def _type_of(response: httpx.Response) -> str:
    raw = str(response.headers.get("content-type", ""))
    return raw.split(";", 1)[0].strip().lower()


async def _ask(
    client: httpx.AsyncClient, method: str, url: str, *, allow_loopback: bool
) -> tuple[httpx.Response, str]:
    """One request, following redirects by hand; (final answer, its URL)."""
    current = url
    for _ in range(MAX_REDIRECTS + 1):
        pinned, host_header, server_name = await _pinned(current, allow_loopback=allow_loopback)
        headers = {"Host": host_header, "User-Agent": _USER_AGENT, "Accept": "image/*"}
        if method == "GET":
            headers["Range"] = "bytes=0-0"
        extensions = {"sni_hostname": server_name} if pinned.startswith("https:") else {}
        request = client.build_request(method, pinned, headers=headers, extensions=extensions)
        response = await client.send(request, stream=True)
        await response.aclose()
        location = response.headers.get("location")
        if response.is_redirect and location:
            current = urljoin(current, location)
            continue
        return response, current
    raise ImageRefusedError("That link redirects too many times; link to the image itself.")


async def check_image(
    url: str,
    *,
    allow_loopback: bool,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    transport: httpx.AsyncBaseTransport | None = None,
) -> ImageFacts:
    """What the host says about the image at `url`; `ImageRefusedError` when it will not do."""
    try:
        async with (
            asyncio.timeout(timeout_s),
            httpx.AsyncClient(
                timeout=timeout_s, follow_redirects=False, transport=transport
            ) as client,
        ):
            response, final = await _ask(client, "HEAD", url, allow_loopback=allow_loopback)
            if response.status_code in (405, 501) or (
                response.is_success and _size_of(response) is None
            ):
                response, final = await _ask(client, "GET", url, allow_loopback=allow_loopback)
    except TimeoutError as exc:
        raise ImageRefusedError(
            f"That image's server did not answer within {timeout_s:g} seconds."
        ) from exc
    except httpx.HTTPError as exc:
        raise ImageRefusedError(UNREACHABLE) from exc
    return _judge(response, final)


def _judge(response: httpx.Response, final: str) -> ImageFacts:
    if response.status_code in (404, 410):
        raise ImageRefusedError("Nothing is at that link (the server says not found).")
    if not response.is_success:
        raise ImageRefusedError(f"The image's server refused it (HTTP {response.status_code}).")
    content_type = _type_of(response)
    if content_type not in IMAGE_TYPES:
        shown = content_type or "no type"
        raise ImageRefusedError(
            f"That link is not a JPEG, PNG or GIF image (the server says {shown})."
        )
    size = _size_of(response)
    if size is not None and size > IMAGE_MAX_BYTES:
        raise ImageRefusedError(
            f"That image is {size / 1024 / 1024:.1f} MB; Instagram takes at most "
            f"{IMAGE_MAX_BYTES // 1024 // 1024} MB."
        )
    return ImageFacts(final, content_type, size)
