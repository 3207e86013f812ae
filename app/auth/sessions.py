"""Server-side sessions in Redis, with the id rotated at sign-in and no write-back races.

Litestar's stock backend keeps whatever id the browser sends (session fixation), writes the
session back on every response (a slow read-only request can resurrect a session that a
concurrent logout deleted), and stores an empty session for every anonymous visitor. This
backend differs in three ways:

- `rotate_session(request, data)` marks the session; on the way out the old id's data is
  deleted and the data is stored under a fresh id, so an id known before sign-in is worthless;
- a session is written only when its content changed during the request;
- an empty session for a visitor who had none sets no cookie and stores nothing.

The store is Redis under its own key namespace (`oncereply:sessions:<id>`); it is registered
explicitly, because Litestar silently falls back to process memory for an unknown store name.
"""

from __future__ import annotations

from typing import Any, cast

from litestar.connection import ASGIConnection
from litestar.datastructures import Cookie, MutableScopeHeaders
from litestar.middleware.session.server_side import (
    ServerSideSessionBackend,
    ServerSideSessionConfig,
)
from litestar.stores.redis import RedisStore
from litestar.types import Empty, Message, ScopeSession
from litestar.utils.dataclass import extract_dataclass_items
from redis.asyncio import Redis
from redis.exceptions import RedisError

SESSION_COOKIE = "oncereply_session"
# Under https: a cookie name browsers accept only from this exact origin, Secure, for path /.
SECURE_SESSION_COOKIE = "__Host-oncereply_session"
SESSION_STORE = "sessions"
SESSION_NAMESPACE = "oncereply:sessions"
SESSION_MAX_AGE_S = 14 * 24 * 3600

# Set by `rotate_session`, removed by the backend before the data is stored.
_ROTATE_MARKER = "__rotate__"
# Where the backend remembers the stored bytes it loaded, to detect a change.
_LOADED_KEY = "oncereply.session.loaded"

# Paths that never need a session: machine endpoints, assets polled or fetched often, the
# shared report pages, which must set no cookie, and the tracked-link redirect, which must
# set none either and must not wait on Redis (a fan may be signed in to the dashboard too).
SESSIONLESS_PATHS = ["^/static/", "^/health", "^/status/", "^/webhooks/", "^/r/", "^/go/"]


def rotate_session(connection: ASGIConnection[Any, Any, Any, Any], data: dict[str, Any]) -> None:
    """Replace the session with `data` under a brand-new id (sign-in, privilege change)."""
    connection.set_session({**data, _ROTATE_MARKER: True})


async def peek_session(connection: ASGIConnection[Any, Any, Any, Any]) -> dict[str, Any]:
    """The session's data, read without taking part in it, for a path the session middleware
    skips: nothing is written back or expired, so a poll cannot race a sign-in or sign-out.
    Empty when there is no session or the store does not answer."""
    # Only this origin over https can set the `__Host-` name; the badge this serves shows
    # nothing a planted plain-http session id could abuse.
    session_id = connection.cookies.get(SECURE_SESSION_COOKIE) or connection.cookies.get(
        SESSION_COOKIE
    )
    if not session_id or session_id == "null":
        return {}
    try:
        raw = await connection.app.stores.get(SESSION_STORE).get(session_id)
    except RedisError:
        return {}
    return RotatingSessionBackend.deserialize_data(raw) if raw else {}


def end_session(connection: ASGIConnection[Any, Any, Any, Any]) -> None:
    """Delete the session from the store and expire the browser's cookie."""
    connection.clear_session()


class RotatingSessionBackend(ServerSideSessionBackend):
    def _cookie_params(self) -> dict[str, Any]:
        return dict(
            extract_dataclass_items(self.config, exclude_none=True, include=Cookie.__dict__.keys())
        )

    async def load_from_connection(
        self, connection: ASGIConnection[Any, Any, Any, Any]
    ) -> dict[str, Any]:
        session_id = connection.cookies.get(self.config.key)
        if not session_id or session_id == "null":
            return {}
        store = self.config.get_store_from_app(connection.scope["app"])
        data = await self.get(session_id, store=store)
        if data is None:
            return {}
        _scope_state(connection)[_LOADED_KEY] = data
        return self.deserialize_data(data)

    async def store_in_message(
        self,
        scope_session: ScopeSession,
        message: Message,
        connection: ASGIConnection[Any, Any, Any, Any],
    ) -> None:
        scope = connection.scope
        store = self.config.get_store_from_app(scope["app"])
        headers = MutableScopeHeaders.from_message(message)
        cookie_id = connection.cookies.get(self.config.key)
        if cookie_id == "null":
            cookie_id = None
        loaded: bytes | None = _scope_state(connection).get(_LOADED_KEY)

        if scope_session is Empty or not scope_session:
            if cookie_id:
                await self.delete(cookie_id, store=store)
                headers.add("Set-Cookie", self._expired_cookie())
            return

        data = dict(cast("dict[str, Any]", scope_session))
        if data.pop(_ROTATE_MARKER, False):
            if cookie_id:
                await self.delete(cookie_id, store=store)
            new_id = self.generate_session_id()
            await self.set(new_id, self.serialize_data(data, scope), store=store)
            headers.add("Set-Cookie", self._cookie(new_id))
            return

        serialized = self.serialize_data(data, scope)
        if cookie_id and serialized == loaded:
            return  # unchanged: writing it back could undo a concurrent logout or rotation
        session_id = cookie_id or self.generate_session_id()
        await self.set(session_id, serialized, store=store)
        if session_id != cookie_id:
            headers.add("Set-Cookie", self._cookie(session_id))

    def _cookie(self, session_id: str) -> str:
        return Cookie(value=session_id, key=self.config.key, **self._cookie_params()).to_header(
            header=""
        )

    def _expired_cookie(self) -> str:
        params = {**self._cookie_params(), "max_age": 0}
        return Cookie(value="", key=self.config.key, expires=0, **params).to_header(header="")


def _scope_state(connection: ASGIConnection[Any, Any, Any, Any]) -> dict[str, Any]:
    scope = cast("dict[str, Any]", connection.scope)
    state: dict[str, Any] = scope.setdefault("state", {})
    return state


class RotatingSessionConfig(ServerSideSessionConfig):
    _backend_class = RotatingSessionBackend


def session_cookie_name(*, secure: bool) -> str:
    return SECURE_SESSION_COOKIE if secure else SESSION_COOKIE


def session_config(*, secure: bool) -> RotatingSessionConfig:
    return RotatingSessionConfig(
        key=session_cookie_name(secure=secure),
        max_age=SESSION_MAX_AGE_S,
        secure=secure,
        httponly=True,
        samesite="lax",  # strict would drop the cookie on the redirect back from Instagram
        store=SESSION_STORE,
        exclude=SESSIONLESS_PATHS,
    )


def session_store(redis: Redis) -> RedisStore:
    """The sessions store; the caller owns (and closes) the Redis client."""
    return RedisStore(redis=redis, namespace=SESSION_NAMESPACE, handle_client_shutdown=False)
