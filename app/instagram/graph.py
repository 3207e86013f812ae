"""An async client for the Instagram Graph API (Instagram Login flavour).

It reports what happened on the wire precisely, because the delivery protocol depends on it:
- `GraphApiError`: Meta answered with its error object (code, subcode, HTTP status, trace id);
- `GraphBadResponseError`: an answer came but it is not Meta's JSON (a proxy page, a cut body);
- `GraphTransportError`: no answer; `request_sent` says whether Meta may have received the
  request (a refused connection cannot have delivered anything; a read timeout may have).
Deciding what each means for a send is the job of the error classification, not this module.

Tokens go in the Authorization header, never the URL, so no URL we log carries one. The two
token exchanges Meta only takes as query parameters are the exception, so no transport error
repeats the URL it failed on (`_detail`).

The HTTP client is aiohttp: a worker's send costs about a tenth of the CPU it cost through
httpx, whose connection pool does work for every waiting request on every request (measured
with 32 concurrent posts to a local server: ~0.12 ms against ~1.3-1.9 ms of CPU a request).
aiohttp never resends a POST on its own; it retries a read (GET) once when a kept-alive
connection turns out closed, which repeats nothing.
"""

from __future__ import annotations

import json
import re
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import aiohttp

# Below common server idle timeouts (uvicorn's is 5 s): reusing a connection the server has
# just closed would turn a harmless reconnect into an "unknown outcome" for a send.
_KEEPALIVE_EXPIRY_S = 4.0
# Connecting (including waiting for a free connection of the pool) may take this long at most.
_CONNECT_TIMEOUT_S = 5.0
# A query string in an error message: it may carry a token or the app secret.
_QUERY = re.compile(r"\?[^\s\]\)'\"]*")


@dataclass(frozen=True, slots=True)
class Usage:
    """Meta's usage headers: percentages of the app and business-use-case budgets."""

    app: dict[str, Any] = field(default_factory=dict)
    business: dict[str, Any] = field(default_factory=dict)

    @property
    def regain_access_minutes(self) -> float | None:
        """The longest `estimated_time_to_regain_access` across BUC entries, if throttled."""
        minutes = [
            float(entry.get("estimated_time_to_regain_access") or 0)
            for entries in self.business.values()
            if isinstance(entries, list)
            for entry in entries
            if isinstance(entry, dict)
        ]
        longest = max(minutes, default=0.0)
        return longest or None


class GraphError(Exception):
    """Base for every way a Graph call can fail."""


class GraphApiError(GraphError):
    def __init__(
        self,
        *,
        http_status: int,
        code: int | None,
        subcode: int | None,
        message: str,
        error_type: str | None,
        fbtrace_id: str | None,
        is_transient: bool | None,
        usage: Usage,
    ) -> None:
        super().__init__(f"Graph API error {code}/{subcode} (HTTP {http_status}): {message}")
        self.http_status = http_status
        self.code = code
        self.subcode = subcode
        self.message = message
        self.error_type = error_type
        self.fbtrace_id = fbtrace_id
        self.is_transient = is_transient
        self.usage = usage


class GraphBadResponseError(GraphError):
    def __init__(self, http_status: int, preview: str) -> None:
        super().__init__(f"unreadable Graph API answer (HTTP {http_status}): {preview!r}")
        self.http_status = http_status
        self.preview = preview


class GraphTransportError(GraphError):
    def __init__(self, kind: str, *, request_sent: bool, detail: str) -> None:
        super().__init__(f"Graph API transport failure ({kind}): {detail}")
        self.kind = kind
        self.request_sent = request_sent
        self.detail = detail


@dataclass(frozen=True, slots=True)
class GraphResponse:
    http_status: int
    data: dict[str, Any]
    usage: Usage


@dataclass(frozen=True, slots=True)
class SentMessage:
    recipient_id: str | None
    message_id: str
    usage: Usage = field(default_factory=Usage)


@dataclass(frozen=True, slots=True)
class Page:
    items: list[dict[str, Any]]
    after: str | None


class GraphClient:
    """One per process; safe to share between tasks (it holds no per-user state). Made inside
    the process's event loop (`create`), as aiohttp asks."""

    def __init__(self, http: aiohttp.ClientSession, base_url: str, *, timeout_s: float) -> None:
        self._http = http
        self._base = base_url.rstrip("/")
        self._timeout = _timeout(timeout_s)

    @classmethod
    def create(cls, base_url: str, *, timeout_s: float, max_connections: int = 100) -> GraphClient:
        http = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(
                limit=max_connections, keepalive_timeout=_KEEPALIVE_EXPIRY_S
            ),
            headers={"User-Agent": "OnceReply/1"},
            # The environment's proxy for Meta's host, read once: aiohttp's own `trust_env`
            # reads it (and ~/.netrc) in a thread for every request, a sixth of a send's CPU.
            proxy=_proxy_for(base_url),
            # Meta's answers are small JSON objects; nothing here reads cookies.
            cookie_jar=aiohttp.DummyCookieJar(),
        )
        return cls(http, base_url, timeout_s=timeout_s)

    async def aclose(self) -> None:
        await self._http.close()

    @property
    def base_url(self) -> str:
        return self._base

    async def request(
        self,
        method: str,
        path: str,
        *,
        token: str | None,
        params: Mapping[str, str | int] | None = None,
        json_body: Mapping[str, Any] | None = None,
        timeout_s: float | None = None,
    ) -> GraphResponse:
        url = path if path.startswith("http") else f"{self._base}/{path.lstrip('/')}"
        headers = {"Authorization": f"Bearer {token}"} if token else None
        timeout = self._timeout if timeout_s is None else _timeout(timeout_s)
        try:
            async with self._http.request(
                method, url, params=params, json=json_body, headers=headers, timeout=timeout
            ) as response:
                body = await response.read()
                return _parse(response.status, response.headers, body)
        except (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError) as exc:
            # The request never left this machine (no connection, or none free in time):
            # nothing can have been delivered.
            raise GraphTransportError(
                type(exc).__name__, request_sent=False, detail=_detail(exc, "no connection")
            ) from None
        except TimeoutError as exc:
            # The call's whole time ran out (plain TimeoutError) or a read did, once connected.
            kind = type(exc).__name__ if isinstance(exc, aiohttp.ClientError) else "ReadTimeout"
            raise GraphTransportError(
                kind, request_sent=True, detail=_detail(exc, "timed out")
            ) from None
        except (aiohttp.ClientError, OSError) as exc:
            # Reset, half-closed connection, protocol error after writing: Meta may have acted.
            raise GraphTransportError(
                type(exc).__name__, request_sent=True, detail=_detail(exc, "connection failed")
            ) from None

    # --- Account -----------------------------------------------------------------------

    async def get_me(self, token: str) -> dict[str, Any]:
        fields = "id,user_id,username,name,account_type,profile_picture_url"
        return (await self.request("GET", "me", token=token, params={"fields": fields})).data

    async def subscribe_app(self, token: str, ig_user_id: str, fields: list[str]) -> bool:
        response = await self.request(
            "POST",
            f"{ig_user_id}/subscribed_apps",
            token=token,
            params={"subscribed_fields": ",".join(fields)},
        )
        return bool(response.data.get("success"))

    async def subscribed_fields(self, token: str, ig_user_id: str) -> list[str]:
        """The fields this app's subscription for the account holds, as Instagram reports them
        (`{"data":[{"subscribed_fields":[…]}]}`; no entry: not subscribed)."""
        data = (await self.request("GET", f"{ig_user_id}/subscribed_apps", token=token)).data
        fields: list[str] = []
        for entry in data.get("data") or []:
            listed = entry.get("subscribed_fields") if isinstance(entry, dict) else None
            if isinstance(listed, list):
                fields.extend(str(f) for f in listed if str(f) not in fields)
        return fields

    async def exchange_long_lived_token(self, short_token: str, app_secret: str) -> dict[str, Any]:
        params = {
            "grant_type": "ig_exchange_token",
            "client_secret": app_secret,
            "access_token": short_token,
        }
        return (
            await self.request("GET", self._unversioned("access_token"), token=None, params=params)
        ).data

    async def refresh_long_lived_token(self, token: str) -> dict[str, Any]:
        params = {"grant_type": "ig_refresh_token", "access_token": token}
        return (
            await self.request(
                "GET", self._unversioned("refresh_access_token"), token=None, params=params
            )
        ).data

    # --- Content -----------------------------------------------------------------------

    async def list_media(
        self, token: str, ig_user_id: str, *, after: str | None = None, limit: int = 25
    ) -> Page:
        params: dict[str, str | int] = {
            "fields": "id,caption,media_type,media_product_type,media_url,thumbnail_url,"
            "permalink,timestamp,comments_count,like_count",
            "limit": limit,
        }
        if after:
            params["after"] = after
        return _page(
            (await self.request("GET", f"{ig_user_id}/media", token=token, params=params)).data
        )

    async def list_stories(self, token: str, ig_user_id: str) -> Page:
        """GET /{ig}/stories: the account's live stories (the last 24 hours), newest first."""
        params: dict[str, str | int] = {
            "fields": "id,caption,media_type,media_product_type,media_url,thumbnail_url,"
            "permalink,timestamp",
            "limit": 100,
        }
        return _page(
            (await self.request("GET", f"{ig_user_id}/stories", token=token, params=params)).data
        )

    async def list_comments(self, token: str, media_id: str, *, after: str | None = None) -> Page:
        params: dict[str, str | int] = {
            "fields": "id,text,timestamp,username,from,parent_id,replies{id,from,timestamp}",
            "limit": 50,
        }
        if after:
            params["after"] = after
        return _page(
            (await self.request("GET", f"{media_id}/comments", token=token, params=params)).data
        )

    # --- Sends (only the worker calls these) --------------------------------------------

    async def send_message(
        self,
        token: str,
        ig_user_id: str,
        body: Mapping[str, Any],
        *,
        timeout_s: float | None = None,
    ) -> SentMessage:
        """POST /{ig}/messages: a private reply (by `comment_id`) or a DM (by `id`)."""
        response = await self.request(
            "POST", f"{ig_user_id}/messages", token=token, json_body=body, timeout_s=timeout_s
        )
        message_id = response.data.get("message_id")
        if not isinstance(message_id, str) or not message_id:
            # A 200 without a message id is not proof of delivery either way.
            raise GraphBadResponseError(response.http_status, json.dumps(response.data)[:200])
        recipient = response.data.get("recipient_id")
        return SentMessage(
            recipient_id=str(recipient) if recipient is not None else None,
            message_id=message_id,
            usage=response.usage,
        )

    async def reply_to_comment(
        self, token: str, comment_id: str, message: str, *, timeout_s: float | None = None
    ) -> str:
        response = await self.request(
            "POST",
            f"{comment_id}/replies",
            token=token,
            json_body={"message": message},
            timeout_s=timeout_s,
        )
        reply_id = response.data.get("id")
        if reply_id is None:
            raise GraphBadResponseError(response.http_status, json.dumps(response.data)[:200])
        return str(reply_id)

    # --- Messaging reads --------------------------------------------------------------

    async def user_follows_business(self, token: str, igsid: str) -> bool | None:
        """True/False when Meta says; None when it will not tell (no consent yet, any error)."""
        try:
            response = await self.request(
                "GET", igsid, token=token, params={"fields": "is_user_follow_business"}
            )
        except GraphError:
            return None
        value = response.data.get("is_user_follow_business")
        return value if isinstance(value, bool) else None

    async def find_conversation_id(self, token: str, ig_user_id: str, igsid: str) -> str | None:
        response = await self.request(
            "GET",
            f"{ig_user_id}/conversations",
            token=token,
            params={"platform": "instagram", "user_id": igsid},
        )
        data = response.data.get("data")
        if isinstance(data, list) and data and isinstance(data[0], dict) and data[0].get("id"):
            return str(data[0]["id"])
        return None

    async def conversation_messages(self, token: str, conversation_id: str) -> list[dict[str, Any]]:
        """The newest messages of a conversation (Meta returns at most 20), newest first."""
        response = await self.request(
            "GET",
            conversation_id,
            token=token,
            params={"fields": "messages{id,created_time,from,to,message}"},
        )
        messages = response.data.get("messages")
        items = messages.get("data") if isinstance(messages, dict) else None
        return [item for item in items if isinstance(item, dict)] if isinstance(items, list) else []

    def _unversioned(self, path: str) -> str:
        # access_token and refresh_access_token live at the host root, not under /vNN.0.
        head, _, last = self._base.rpartition("/")
        root = head if last.startswith("v") and last[1:].replace(".", "").isdigit() else self._base
        return f"{root}/{path}"


def _proxy_for(base_url: str) -> str | None:
    """The proxy the environment names for `base_url` (`HTTPS_PROXY`, `NO_PROXY`, …)."""
    parts = urllib.parse.urlsplit(base_url)
    if urllib.request.proxy_bypass(parts.hostname or ""):
        return None
    return urllib.request.getproxies().get(parts.scheme)


def _timeout(timeout_s: float) -> aiohttp.ClientTimeout:
    """Getting a connection (a free one of the pool, or a new one) within `connect`, so a call
    that ends then was never sent; then Meta's answer within `timeout_s`. The total only
    bounds an answer that trickles in, and cannot end a call still getting its connection."""
    connect = min(_CONNECT_TIMEOUT_S, timeout_s)
    return aiohttp.ClientTimeout(total=connect + timeout_s, connect=connect, sock_read=timeout_s)


def _detail(exc: BaseException, default: str) -> str:
    """What went wrong, without the query string of a URL the message may repeat."""
    return _QUERY.sub("?…", str(exc)) or default


def _usage(headers: Mapping[str, str]) -> Usage:
    def load(name: str) -> dict[str, Any]:
        raw = headers.get(name)
        if not raw:
            return {}
        try:
            value = json.loads(raw)
        except ValueError:
            return {}
        return value if isinstance(value, dict) else {}

    return Usage(app=load("x-app-usage"), business=load("x-business-use-case-usage"))


def _parse(status: int, headers: Mapping[str, str], content: bytes) -> GraphResponse:
    usage = _usage(headers)
    try:
        body = json.loads(content)
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        error = body["error"]
        raise GraphApiError(
            http_status=status,
            code=_int_or_none(error.get("code")),
            subcode=_int_or_none(error.get("error_subcode")),
            message=str(error.get("message") or error.get("error_user_msg") or ""),
            error_type=error.get("type") if isinstance(error.get("type"), str) else None,
            fbtrace_id=error.get("fbtrace_id")
            if isinstance(error.get("fbtrace_id"), str)
            else None,
            is_transient=error.get("is_transient")
            if isinstance(error.get("is_transient"), bool)
            else None,
            usage=usage,
        )
    if status >= 400 or not isinstance(body, dict):
        raise GraphBadResponseError(status, content[:200].decode("utf-8", "replace"))
    return GraphResponse(http_status=status, data=body, usage=usage)


def _page(data: dict[str, Any]) -> Page:
    items = data.get("data")
    paging = data.get("paging")
    paging = paging if isinstance(paging, dict) else {}
    cursors = paging.get("cursors")
    cursors = cursors if isinstance(cursors, dict) else {}
    after = cursors.get("after") if paging.get("next") else None
    return Page(
        items=[item for item in items if isinstance(item, dict)] if isinstance(items, list) else [],
        after=after if isinstance(after, str) else None,
    )


def _int_or_none(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return None
