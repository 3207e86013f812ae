"""Meta-shaped error bodies: the Graph error object and the legacy OAuth shape.

Graph endpoints answer ``{"error": {"message", "type", "code", "error_subcode"?, "is_transient"?,
"fbtrace_id"}}``; the OAuth code exchange answers the legacy Instagram shape
``{"error_type", "code", "error_message"}``. Every error carries a fresh ``fbtrace_id``.
"""

from __future__ import annotations

import json
from typing import Any

from sandbox.ids import fbtrace_id

IG = "IGApiException"
OAUTH = "OAuthException"


class GraphError(Exception):
    """An error the Graph API would return; raised anywhere, rendered once at the edge."""

    def __init__(
        self,
        message: str,
        code: int,
        *,
        subcode: int | None = None,
        type_: str = IG,
        http_status: int = 400,
        is_transient: bool | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.subcode = subcode
        self.type_ = type_
        self.http_status = http_status
        self.is_transient = is_transient
        self.headers = headers or {}

    def payload(self) -> dict[str, Any]:
        error: dict[str, Any] = {"message": self.message, "type": self.type_, "code": self.code}
        if self.subcode is not None:
            error["error_subcode"] = self.subcode
        if self.is_transient is not None:
            error["is_transient"] = self.is_transient
        error["fbtrace_id"] = fbtrace_id()
        return {"error": error}

    def body(self) -> bytes:
        return json.dumps(self.payload(), separators=(",", ":")).encode()


class LegacyOAuthError(Exception):
    """An error from ``POST /oauth/access_token``, which keeps Instagram's legacy shape."""

    def __init__(self, message: str, *, error_type: str = OAUTH, code: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.error_type = error_type
        self.code = code

    def body(self) -> bytes:
        payload = {"error_type": self.error_type, "code": self.code, "error_message": self.message}
        return json.dumps(payload, separators=(",", ":")).encode()


def unknown_path(path: str) -> GraphError:
    return GraphError(f"Unknown path components: {path}", 2500, type_=OAUTH)


def unsupported(method: str, object_id: str) -> GraphError:
    """100/33: the object is unknown, deleted, someone else's, or lacks the operation."""
    return GraphError(
        f"Unsupported {method.lower()} request. Object with ID '{object_id}' does not exist, "
        "cannot be loaded due to missing permissions, or does not support this operation",
        100,
        subcode=33,
    )


def invalid_param(message: str, *, subcode: int | None = None) -> GraphError:
    return GraphError(f"(#100) {message}", 100, subcode=subcode)


def outside_window() -> GraphError:
    return GraphError(
        "This message is sent outside of allowed window.", 10, subcode=2534022, http_status=403
    )


def unknown_error(http_status: int = 500) -> GraphError:
    return GraphError("An unknown error occurred", 1, type_=OAUTH, http_status=http_status)


def app_rate_limited() -> GraphError:
    return GraphError(
        "(#4) Application request limit reached",
        4,
        type_=OAUTH,
        http_status=400,
        is_transient=True,
    )
