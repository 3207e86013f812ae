"""Access tokens: minting, lifetimes and the 190 errors (460 revoked, 463 expired, 467 unknown).

Short-lived tokens last an hour, long-lived ones 60 days; a long-lived token can be refreshed
once it is at least 24 hours old and until it expires.
"""

from __future__ import annotations

from sandbox.clock import session_time
from sandbox.errors import OAUTH, GraphError
from sandbox.ids import access_token
from sandbox.models import Account, Token
from sandbox.state import World

SHORT_LIVED = 3600.0
LONG_LIVED = 60 * 24 * 3600.0
REFRESH_MIN_AGE = 24 * 3600.0

BASIC = "instagram_business_basic"
MESSAGES = "instagram_business_manage_messages"
COMMENTS = "instagram_business_manage_comments"
ALL_SCOPES = (
    BASIC,
    MESSAGES,
    COMMENTS,
    "instagram_business_content_publish",
    "instagram_business_manage_insights",
)


def mint(
    world: World,
    account: Account,
    *,
    kind: str,
    scopes: tuple[str, ...],
    source: str,
    lifetime: float | None = None,
    age: float = 0.0,
) -> Token:
    issued = world.clock.now() - age
    if lifetime is None:
        lifetime = SHORT_LIVED if kind == "short" else LONG_LIVED
    token = Token(
        value=access_token(),
        account_id=account.user_id,
        kind="short" if kind == "short" else "long",
        issued_at=issued,
        expires_at=issued + lifetime,
        scopes=scopes,
        source=source,
    )
    world.tokens[token.value] = token
    return token


def _invalid(message: str, subcode: int) -> GraphError:
    headers = {"WWW-Authenticate": f'OAuth "Facebook Platform" "invalid_token" "{message}"'}
    return GraphError(message, 190, subcode=subcode, type_=OAUTH, headers=headers)


def authenticate(world: World, value: str | None) -> Token:
    """The token behind a Graph call, or the 190 (or 2500 when absent) error Meta gives."""
    if not value:
        raise GraphError(
            "An active access token must be used to query information about the current user.",
            2500,
            type_=OAUTH,
        )
    token = world.tokens.get(value)
    if token is None:
        raise _invalid("Invalid OAuth access token - Cannot parse access token", 467)
    if token.revoked:
        raise _invalid(
            "Error validating access token: The session has been invalidated because the user "
            "changed their password or Facebook has changed the session for security reasons.",
            460,
        )
    now = world.clock.now()
    if now >= token.expires_at:
        raise _invalid(
            f"Error validating access token: Session has expired on "
            f"{session_time(token.expires_at)}. The current time is {session_time(now)}.",
            463,
        )
    return token


def require_scope(token: Token, scope: str) -> None:
    if scope not in token.scopes:
        raise GraphError(
            f"(#200) Requires {scope} permission to manage the object",
            200,
            http_status=403,
        )
