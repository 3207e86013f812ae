"""Instagram Login (Business Login) as an OAuth 2 client: authorize URL and code exchange.

authlib's `AsyncOAuth2Client` builds the authorize URL with `state` and a PKCE S256
challenge and posts the code exchange. Three authlib traps, handled here:

- PKCE is only added when the client is built with `code_challenge_method="S256"`; the
  verifier must be 43–128 characters (`generate_token()` defaults to 30), so we make 64;
- authlib prefers the `httpx2` fork and warns when it falls back to `httpx`; we install
  `httpx` on purpose, so that one warning is silenced where authlib is imported;
- Instagram's token endpoint answers errors in its legacy shape
  (`{"error_type", "code", "error_message"}`) with no `error` key, which authlib would hand
  back as a "token" without `access_token`; and its success may be wrapped in `data: [...]`.

A client holds per-login token state, so each exchange makes its own and closes it.
Tokens and codes never reach a log line from here.
"""

from __future__ import annotations

import secrets
import warnings
from dataclasses import dataclass
from typing import Any

import httpx

from app.settings import Settings

with warnings.catch_warnings():
    # authlib warns that plain httpx is deprecated in favour of httpx2, which we do not install.
    # Its `deprecate` module installs an "always" filter when imported, so import it first and
    # put ours in front of it; leaving the block also drops authlib's global filter.
    import authlib.deprecate

    warnings.simplefilter("ignore", authlib.deprecate.AuthlibDeprecationWarning)
    from authlib.integrations.httpx_client import AsyncOAuth2Client, OAuthError

AUTHORIZE_PATH = "/oauth/authorize"
TOKEN_PATH = "/oauth/access_token"  # noqa: S105 - a URL path
CALLBACK_PATH = "/accounts/instagram/callback"
SCOPES = (
    "instagram_business_basic",
    "instagram_business_manage_comments",
    "instagram_business_manage_messages",
)
EXCHANGE_TIMEOUT_S = 15.0


class OAuthExchangeError(Exception):
    """The code exchange failed; `detail` is safe to log and `rejected` tells whether Instagram
    answered (a refusal) or did not (a transport problem)."""

    def __init__(self, detail: str, *, rejected: bool) -> None:
        super().__init__(detail)
        self.detail = detail
        self.rejected = rejected


@dataclass(frozen=True, slots=True)
class Authorization:
    url: str
    state: str
    verifier: str


@dataclass(frozen=True, slots=True)
class ShortLivedToken:
    access_token: str
    # As the token endpoint reports it (often the app-scoped id); `/me.user_id` is what counts.
    user_id: str | None
    # What the person granted on the permission screen (they can refuse one); None if unsaid.
    permissions: tuple[str, ...] | None = None


def redirect_uri(settings: Settings) -> str:
    return f"{settings.public_base_url}{CALLBACK_PATH}"


def _client(settings: Settings, transport: httpx.AsyncBaseTransport | None) -> AsyncOAuth2Client:
    extra: dict[str, Any] = {"transport": transport} if transport is not None else {}
    return AsyncOAuth2Client(
        client_id=settings.instagram_app_id,
        client_secret=settings.instagram_app_secret,
        # Instagram wants the secret in the form body, not in a Basic header.
        token_endpoint_auth_method="client_secret_post",  # noqa: S106 - a method name
        scope=",".join(SCOPES),
        redirect_uri=redirect_uri(settings),
        code_challenge_method="S256",
        timeout=EXCHANGE_TIMEOUT_S,
        **extra,
    )


async def start_authorization(settings: Settings) -> Authorization:
    """A fresh state and PKCE verifier and the URL to send the browser to."""
    state = secrets.token_urlsafe(32)
    verifier = secrets.token_urlsafe(48)  # 64 characters
    async with _client(settings, None) as client:
        url, _ = client.create_authorization_url(
            f"{settings.instagram_oauth_base}{AUTHORIZE_PATH}",
            state=state,
            code_verifier=verifier,
            enable_fb_login="0",
        )
    return Authorization(url=url, state=state, verifier=verifier)


def clean_code(code: str) -> str:
    """Instagram appends `#_` to the code in the redirect; it is not part of the code."""
    return code.removesuffix("#_")


async def exchange_code(
    settings: Settings,
    code: str,
    verifier: str,
    *,
    transport: httpx.AsyncBaseTransport | None = None,
) -> ShortLivedToken:
    async with _client(settings, transport) as client:
        try:
            token = await client.fetch_token(
                f"{settings.instagram_oauth_base}{TOKEN_PATH}",
                grant_type="authorization_code",
                code=clean_code(code),
                code_verifier=verifier,
            )
        except OAuthError as exc:
            raise OAuthExchangeError(
                f"token endpoint refused: {exc.error}: {exc.description}", rejected=True
            ) from None
        except httpx.HTTPStatusError as exc:
            raise OAuthExchangeError(
                f"token endpoint answered HTTP {exc.response.status_code}", rejected=False
            ) from None
        except httpx.HTTPError as exc:
            raise OAuthExchangeError(
                f"token endpoint unreachable: {type(exc).__name__}", rejected=False
            ) from None
        except ValueError as exc:
            raise OAuthExchangeError(f"unreadable token answer: {exc}", rejected=False) from None
    return _parse_token(dict(token))


def _permissions(raw: object) -> tuple[str, ...] | None:
    """A list in practice, a comma-separated string in the documentation."""
    if isinstance(raw, str):
        raw = raw.split(",")
    if not isinstance(raw, list):
        return None
    return tuple(dict.fromkeys(str(p).strip()[:64] for p in raw if str(p).strip()))


def _parse_token(body: dict[str, Any]) -> ShortLivedToken:
    data = body.get("data")
    if isinstance(data, list) and data and isinstance(data[0], dict):
        body = data[0]  # the documented wrapper; real answers are flat
    access_token = body.get("access_token")
    if isinstance(access_token, str) and access_token:
        user_id = body.get("user_id")
        return ShortLivedToken(
            access_token=access_token,
            user_id=str(user_id) if user_id is not None else None,
            permissions=_permissions(body.get("permissions")),
        )
    message = body.get("error_message") or body.get("error_description") or "no access_token"
    raise OAuthExchangeError(f"token endpoint refused: {message}", rejected=True)
