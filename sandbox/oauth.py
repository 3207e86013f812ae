"""Instagram Login: the authorize page, the code exchange and the token endpoints.

- ``GET /oauth/authorize`` shows a page where a person picks a test account and allows or
  denies; allow redirects to ``redirect_uri?code=...&state=...#_`` and deny to the documented
  ``error=access_denied`` redirect. (Meta's docs print ``#_&state=``; browsers would hide a
  state placed after the fragment from the server, so the state goes in the query and the
  ``#_`` marker at the end, which is what Instagram does.)
- ``POST /oauth/access_token`` (form body) trades a code (single use, one hour) for a
  short-lived token; its errors keep the legacy ``error_type/code/error_message`` shape.
- PKCE: Meta does not document it for Instagram Login. When the authorize request carries a
  ``code_challenge`` (S256 only), the exchange requires the matching ``code_verifier``, as an
  RFC 7636 server does, so a client's PKCE is really checked; without one, none is asked for.
- ``GET /access_token?grant_type=ig_exchange_token`` gives a 60-day token;
  ``GET /refresh_access_token`` renews one that is at least 24 hours old and not expired.
"""

from __future__ import annotations

import base64
import hashlib
import re
import secrets
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from litestar import Request, Response, get, post
from litestar.response import Redirect, Template

from sandbox.call import GraphCall
from sandbox.errors import OAUTH, GraphError, LegacyOAuthError, invalid_param
from sandbox.faults import FaultTarget
from sandbox.ids import auth_code
from sandbox.models import AuthCode, AuthRequest, Token
from sandbox.outcomes import Reply, perform
from sandbox.runtime import Sandbox, sandbox_of
from sandbox.tokens import ALL_SCOPES, BASIC, REFRESH_MIN_AGE, mint

CODE_LIFETIME = 3600.0
AUTH_REQUEST_LIFETIME = 3600.0
# PKCE (RFC 7636): a verifier is 43-128 unreserved characters; an S256 challenge is the
# unpadded base64url of its SHA-256, 43 characters.
_VERIFIER = re.compile(r"[A-Za-z0-9._~-]{43,128}")
_S256_CHALLENGE = re.compile(r"[A-Za-z0-9_-]{43}")


def s256_challenge(verifier: str) -> str:
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def _error_page(message: str) -> Template:
    return Template("oauth_error.html", context={"message": message}, status_code=400)


def _with_query(url: str, params: dict[str, str], fragment: str = "") -> str:
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True) + list(params.items())
    return urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(query), fragment))


def _scopes(raw: str) -> tuple[list[str], list[str]]:
    names = [s for s in raw.replace(",", " ").split() if s]
    return names, [s for s in names if s not in ALL_SCOPES]


@get("/oauth/authorize", name="oauth_authorize", sync_to_thread=False)
def authorize_page(request: Request[Any, Any, Any]) -> Template:
    sandbox = sandbox_of(request.app.state)
    params = dict(request.query_params.items())
    if params.get("client_id") != sandbox.config.instagram_app_id:
        return _error_page("Invalid platform app")
    redirect_uri = params.get("redirect_uri", "")
    parts = urlsplit(redirect_uri)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return _error_page("Invalid redirect_uri")
    if params.get("response_type") != "code":
        return _error_page("Invalid response_type: only code is supported")
    scopes, unknown = _scopes(params.get("scope", ""))
    if unknown:
        return _error_page(f"Invalid Scopes: {', '.join(unknown)}")
    if BASIC not in scopes:
        return _error_page(f"The {BASIC} scope is required")
    challenge = params.get("code_challenge") or None
    if challenge is not None:
        # RFC 7636 makes "plain" the default; a server may refuse it, and refusing it here
        # catches a client that meant S256 but dropped the method.
        if params.get("code_challenge_method") != "S256":
            return _error_page("Invalid code_challenge_method: only S256 is supported")
        if not _S256_CHALLENGE.fullmatch(challenge):
            return _error_page("Invalid code_challenge")
    now = sandbox.clock.now()
    world = sandbox.world
    for stale in [
        k for k, v in world.auth_requests.items() if now - v.created_at > AUTH_REQUEST_LIFETIME
    ]:
        del world.auth_requests[stale]
    pending = AuthRequest(
        id=secrets.token_urlsafe(16),
        redirect_uri=redirect_uri,
        scopes=tuple(dict.fromkeys(scopes)),
        state=params.get("state"),
        created_at=now,
        code_challenge=challenge,
    )
    world.auth_requests[pending.id] = pending
    return Template(
        "authorize.html",
        context={
            "request_id": pending.id,
            "accounts": list(world.accounts.values()),
            "scopes": pending.scopes,
            "app_name": world.app_name,
            "redirect_host": parts.netloc,
        },
    )


@post("/oauth/authorize", name="oauth_decide", status_code=302)
async def authorize_decision(request: Request[Any, Any, Any]) -> Redirect | Template:
    sandbox = sandbox_of(request.app.state)
    form = await request.form()
    world = sandbox.world
    pending = world.auth_requests.pop(str(form.get("request_id", "")), None)
    if pending is None:
        return _error_page("This authorization request has expired. Start again from the app.")
    state = {"state": pending.state} if pending.state is not None else {}
    if form.get("decision") != "allow":
        denied = {
            "error": "access_denied",
            "error_reason": "user_denied",
            "error_description": "The user denied your request",
        }
        return Redirect(_with_query(pending.redirect_uri, denied | state), status_code=302)
    account = world.account(str(form.get("account", "")))
    if account is None:
        return _error_page("Pick one of the test accounts")
    # Instagram's permission screen lets the person turn a permission off.
    granted = tuple(s for s in pending.scopes if not form.get(f"refuse_{s}"))
    if BASIC not in granted:
        return _error_page(f"The {BASIC} permission is required to continue")
    code = AuthCode(
        code=auth_code(),
        account_id=account.user_id,
        redirect_uri=pending.redirect_uri,
        scopes=granted,
        created_at=sandbox.clock.now(),
        code_challenge=pending.code_challenge,
    )
    world.codes[code.code] = code
    target = _with_query(pending.redirect_uri, {"code": code.code} | state, fragment="_")
    return Redirect(target, status_code=302)


def _token_body(sandbox: Sandbox, token: Token) -> dict[str, Any]:
    account = sandbox.world.accounts[token.account_id]
    if sandbox.settings.token_response_shape == "data":  # noqa: S105 - a shape name
        wrapped = {
            "access_token": token.value,
            "user_id": account.app_scoped_id,
            "permissions": ",".join(token.scopes),
        }
        return {"data": [wrapped]}
    # user_id is a JSON number above 2**53, as Meta sends it; json.dumps writes every digit.
    return {
        "access_token": token.value,
        "user_id": int(account.app_scoped_id),
        "permissions": list(token.scopes),
    }


@post("/oauth/access_token", name="oauth_access_token")
async def access_token_exchange(request: Request[Any, Any, Any]) -> Response[bytes]:
    sandbox = sandbox_of(request.app.state)
    form = {k: v for k, v in (await request.form()).items() if isinstance(v, str)}
    code_value = form.get("code", "")
    known = sandbox.world.codes.get(code_value)

    def operation() -> Reply:
        config = sandbox.config
        for name in ("client_id", "client_secret", "grant_type", "redirect_uri", "code"):
            if not form.get(name):
                raise LegacyOAuthError(f"You must provide a {name}")
        if form["client_id"] != config.instagram_app_id:
            raise LegacyOAuthError("Invalid platform app")
        if form["client_secret"] != config.instagram_app_secret:
            raise LegacyOAuthError("Error validating client secret.")
        if form["grant_type"] != "authorization_code":
            raise LegacyOAuthError("Invalid grant_type: only authorization_code is supported")
        code = sandbox.world.codes.get(form["code"])
        now = sandbox.clock.now()
        if code is None or code.used or now - code.created_at > CODE_LIFETIME:
            raise LegacyOAuthError("Matching code was not found or was already used")
        if form["redirect_uri"] != code.redirect_uri:
            raise LegacyOAuthError("Redirect URI does not match registered redirect URI")
        if code.code_challenge is not None:
            verifier = form.get("code_verifier", "")
            if not verifier:
                raise LegacyOAuthError("You must provide a code_verifier")
            # Like the other refusals, a wrong verifier leaves the code unused.
            if not _VERIFIER.fullmatch(verifier) or not secrets.compare_digest(
                s256_challenge(verifier), code.code_challenge
            ):
                raise LegacyOAuthError("Invalid code_verifier")
        code.used = True
        account = sandbox.world.accounts[code.account_id]
        token = mint(sandbox.world, account, kind="short", scopes=code.scopes, source="oauth")
        return Reply(_token_body(sandbox, token))

    return await perform(
        sandbox,
        request,
        endpoint="oauth_token",
        target=FaultTarget(known.account_id if known is not None else None),
        operation=operation,
        legacy=True,
    )


async def exchange(call: GraphCall) -> Response[bytes]:
    """``GET /access_token?grant_type=ig_exchange_token``: short-lived to 60 days."""
    sandbox = call.sandbox
    if call.param("grant_type") != "ig_exchange_token":
        raise invalid_param("Param grant_type must be ig_exchange_token")
    if call.param("client_secret") != sandbox.config.instagram_app_secret:
        raise GraphError("Error validating client secret.", 101, type_=OAUTH)
    short = call.token()
    account = call.account()

    def operation() -> Reply:
        if short.kind != "short":
            raise invalid_param("Only a short-lived access token can be exchanged")
        token = mint(sandbox.world, account, kind="long", scopes=short.scopes, source="exchange")
        return Reply(_lifetime_body(sandbox, token))

    return await perform(
        sandbox,
        call.request,
        endpoint="exchange",
        target=FaultTarget(account.user_id),
        operation=operation,
    )


async def refresh(call: GraphCall) -> Response[bytes]:
    """``GET /refresh_access_token``: a new 60 days for a long-lived token >= 24 h old."""
    sandbox = call.sandbox
    if call.param("grant_type") != "ig_refresh_token":
        raise invalid_param("Param grant_type must be ig_refresh_token")
    old = call.token()
    account = call.account()

    def operation() -> Reply:
        if old.kind != "long":
            raise invalid_param("Only a long-lived access token can be refreshed")
        if BASIC not in old.scopes:
            raise GraphError(f"(#10) The {BASIC} permission is required", 10, http_status=403)
        if sandbox.clock.now() - old.issued_at < REFRESH_MIN_AGE:
            raise invalid_param(
                "The access token can be refreshed only when it is at least 24 hours old"
            )
        token = mint(sandbox.world, account, kind="long", scopes=old.scopes, source="refresh")
        return Reply(_lifetime_body(sandbox, token))

    return await perform(
        sandbox,
        call.request,
        endpoint="refresh",
        target=FaultTarget(account.user_id),
        operation=operation,
    )


def _lifetime_body(sandbox: Sandbox, token: Token) -> dict[str, Any]:
    expires_in = int(token.expires_at - sandbox.clock.now())
    return {"access_token": token.value, "token_type": "bearer", "expires_in": expires_in}
