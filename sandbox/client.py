"""A typed httpx client for the sandbox's admin and inspection APIs.

``SandboxAdmin`` is synchronous, ``AsyncSandboxAdmin`` the same calls awaited; both return the
decoded JSON and raise ``SandboxError`` on a 4xx/5xx. This module imports only httpx and the
standard library, so the product's tests and benchmarks can use it without the sandbox's
dependencies::

    with SandboxAdmin("http://127.0.0.1:8100") as sandbox:
        sandbox.reset()
        token = sandbox.mint_token("sunny.bakes", subscribe=["comments", "messages"])
        comment = sandbox.fan_comment("jane.doe", "17918195224117851", "RECIPE please")
        assert sandbox.comment_stats(comment["id"])["private_replies_delivered"] == 0
"""

from __future__ import annotations

from collections.abc import Awaitable
from types import TracebackType
from typing import Any, Generic, Self, TypeVar
from urllib.parse import quote

import httpx

R = TypeVar("R")


class SandboxError(Exception):
    def __init__(self, status: int, body: Any) -> None:
        super().__init__(f"sandbox answered {status}: {body}")
        self.status = status
        self.body = body


def _result(response: httpx.Response) -> Any:
    try:
        body = response.json() if response.content else None
    except ValueError:
        body = response.text
    if response.status_code >= 400:
        raise SandboxError(response.status_code, body)
    return body


def _part(value: str) -> str:
    return quote(value, safe="")


def _params(**values: Any) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


class _Calls(Generic[R]):
    """Every admin and inspection call, written once for both the sync and async clients."""

    def _call(
        self, method: str, path: str, *, json: Any = None, params: dict[str, Any] | None = None
    ) -> R:
        raise NotImplementedError

    # --- admin ---------------------------------------------------------------------------

    def health(self) -> R:
        return self._call("GET", "/_admin/health")

    def reset(self, *, keep_webhook: bool = True) -> R:
        return self._call("POST", "/_admin/reset", json={"keep_webhook": keep_webhook})

    def clock(self) -> R:
        return self._call("GET", "/_admin/clock")

    def advance_clock(self, seconds: float) -> R:
        return self._call("POST", "/_admin/clock/advance", json={"seconds": seconds})

    def mint_token(
        self,
        account: str,
        *,
        expires_in: float | None = None,
        kind: str = "long",
        scopes: list[str] | None = None,
        age_seconds: float = 0.0,
        subscribe: list[str] | None = None,
    ) -> R:
        body = _params(
            account=account,
            expires_in=expires_in,
            kind=kind,
            scopes=scopes,
            age_seconds=age_seconds,
            subscribe=subscribe,
        )
        return self._call("POST", "/_admin/tokens", json=body)

    def revoke_tokens(self, *, token: str | None = None, account: str | None = None) -> R:
        return self._call(
            "POST", "/_admin/tokens/revoke", json=_params(token=token, account=account)
        )

    def add_fault(self, endpoint: str, action: str, **options: Any) -> R:
        body = {"endpoint": endpoint, "action": action} | _params(**options)
        return self._call("POST", "/_admin/faults", json=body)

    def faults(self) -> R:
        return self._call("GET", "/_admin/faults")

    def remove_fault(self, fault_id: str) -> R:
        return self._call("DELETE", f"/_admin/faults/{_part(fault_id)}")

    def clear_faults(self) -> R:
        return self._call("DELETE", "/_admin/faults")

    def settings(self) -> R:
        return self._call("GET", "/_admin/settings")

    def update_settings(self, **changes: Any) -> R:
        return self._call("POST", "/_admin/settings", json=changes)

    def webhook(self) -> R:
        return self._call("GET", "/_admin/webhook")

    def register_webhook(
        self, callback_url: str, verify_token: str, *, sign_with: str = "instagram"
    ) -> R:
        body = {"callback_url": callback_url, "verify_token": verify_token, "sign_with": sign_with}
        return self._call("POST", "/_admin/webhook", json=body)

    def unregister_webhook(self) -> R:
        return self._call("DELETE", "/_admin/webhook")

    def flush_webhooks(self) -> R:
        return self._call("POST", "/_admin/webhooks/flush")

    def add_fan(self, username: str, name: str | None = None) -> R:
        return self._call("POST", "/_admin/fans", json=_params(username=username, name=name))

    def fan_comment(self, fan: str, media_id: str, text: str, *, parent_id: str | None = None) -> R:
        body = _params(media_id=media_id, text=text, parent_id=parent_id)
        return self._call("POST", f"/_admin/fans/{_part(fan)}/comment", json=body)

    def fan_reply(self, fan: str, comment_id: str, text: str) -> R:
        body = {"comment_id": comment_id, "text": text}
        return self._call("POST", f"/_admin/fans/{_part(fan)}/reply", json=body)

    def fan_follow(self, fan: str, account: str) -> R:
        return self._call("POST", f"/_admin/fans/{_part(fan)}/follow", json={"account": account})

    def fan_unfollow(self, fan: str, account: str) -> R:
        return self._call("POST", f"/_admin/fans/{_part(fan)}/unfollow", json={"account": account})

    def fan_dm(self, fan: str, account: str, text: str) -> R:
        body = {"account": account, "text": text}
        return self._call("POST", f"/_admin/fans/{_part(fan)}/dm", json=body)

    def fan_story_reply(self, fan: str, account: str, story_id: str, text: str) -> R:
        """The fan replies to one of the account's live stories."""
        body = {"account": account, "story_id": story_id, "text": text}
        return self._call("POST", f"/_admin/fans/{_part(fan)}/story_reply", json=body)

    def fan_story_mention(self, fan: str, account: str) -> R:
        """The fan mentions the account in a story of their own."""
        return self._call(
            "POST", f"/_admin/fans/{_part(fan)}/story_mention", json={"account": account}
        )

    def fan_tap(
        self, fan: str, account: str, *, mid: str | None = None, payload: str | None = None
    ) -> R:
        body = _params(account=account, mid=mid, payload=payload)
        return self._call("POST", f"/_admin/fans/{_part(fan)}/tap", json=body)

    def fan_seen(self, fan: str, account: str) -> R:
        return self._call("POST", f"/_admin/fans/{_part(fan)}/seen", json={"account": account})

    def delete_comment(self, comment_id: str) -> R:
        return self._call("DELETE", f"/_admin/comments/{_part(comment_id)}")

    def set_subscription(self, account: str, fields: list[str]) -> R:
        """An account's subscribed webhook fields, changed behind the product's back."""
        path = f"/_admin/accounts/{_part(account)}/subscription"
        return self._call("POST", path, json={"fields": fields})

    def set_app_mode(self, mode: str, *, roles: list[str] | None = None) -> R:
        """ "development" (webhooks only for fans in `roles`) or "live"."""
        return self.update_settings(app_mode=mode, app_roles=roles or [])

    def publish_media(
        self,
        account: str,
        caption: str,
        *,
        media_type: str = "IMAGE",
        media_product_type: str = "FEED",
    ) -> R:
        body = {
            "caption": caption,
            "media_type": media_type,
            "media_product_type": media_product_type,
        }
        return self._call("POST", f"/_admin/accounts/{_part(account)}/media", json=body)

    def publish_story(self, account: str, caption: str = "", *, media_type: str = "IMAGE") -> R:
        """A story, live for 24 hours (by the sandbox clock); listed by `/{id}/stories`."""
        return self.publish_media(
            account, caption, media_type=media_type, media_product_type="STORY"
        )

    # --- inspection ----------------------------------------------------------------------

    def world(self) -> R:
        return self._call("GET", "/_inspect/world")

    def inbox(self, fan: str) -> R:
        return self._call("GET", f"/_inspect/inbox/{_part(fan)}")

    def messages(
        self,
        *,
        account: str | None = None,
        comment_id: str | None = None,
        recipient: str | None = None,
    ) -> R:
        params = _params(account=account, comment_id=comment_id, recipient=recipient)
        return self._call("GET", "/_inspect/messages", params=params)

    def replies(self, *, account: str | None = None, comment_id: str | None = None) -> R:
        params = _params(account=account, comment_id=comment_id)
        return self._call("GET", "/_inspect/replies", params=params)

    def requests(
        self,
        *,
        endpoint: str | None = None,
        account: str | None = None,
        comment_id: str | None = None,
        since: int = 0,
    ) -> R:
        params = _params(endpoint=endpoint, account=account, comment_id=comment_id, since=since)
        return self._call("GET", "/_inspect/requests", params=params)

    def comment_stats(self, comment_id: str) -> R:
        return self._call("GET", f"/_inspect/comments/{_part(comment_id)}")

    def webhook_attempts(self, *, since: int = 0) -> R:
        return self._call("GET", "/_inspect/webhooks", params={"since": since})

    def webhook_events(self, *, field: str | None = None, status: str | None = None) -> R:
        return self._call(
            "GET", "/_inspect/webhook-events", params=_params(field=field, status=status)
        )


class SandboxAdmin(_Calls[Any]):
    def __init__(self, base_url: str, *, timeout: float = 10.0) -> None:
        self.base_url = base_url.rstrip("/")
        self._client = httpx.Client(base_url=self.base_url, timeout=timeout)

    def _call(
        self, method: str, path: str, *, json: Any = None, params: dict[str, Any] | None = None
    ) -> Any:
        return _result(self._client.request(method, path, json=json, params=params))

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


class AsyncSandboxAdmin(_Calls[Awaitable[Any]]):
    def __init__(self, base_url: str, *, timeout: float = 10.0) -> None:
        self.base_url = base_url.rstrip("/")
        self._client = httpx.AsyncClient(base_url=self.base_url, timeout=timeout)

    def _call(
        self, method: str, path: str, *, json: Any = None, params: dict[str, Any] | None = None
    ) -> Awaitable[Any]:
        return self._send(method, path, json, params)

    async def _send(self, method: str, path: str, json: Any, params: dict[str, Any] | None) -> Any:
        return _result(await self._client.request(method, path, json=json, params=params))

    async def aclose(self) -> None:
        await self._client.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()
