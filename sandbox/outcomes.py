"""How a Graph or OAuth call ends: success, a Meta error, or an injected fault.

``perform`` runs one operation under the fault rules. ``deliver_then_*`` rules let the
operation happen for real (the message lands, the comment's private reply is spent, the echo
webhook goes out) and only then answer with an error, hang past the client's timeout, or reset
the TCP connection so the client never sees a response at all.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from litestar import Request, Response

from sandbox.errors import OAUTH, GraphError, LegacyOAuthError
from sandbox.faults import FaultBook, FaultRule, FaultTarget
from sandbox.runtime import Sandbox

log = logging.getLogger("sandbox")

RESET_EXTENSION = "sandbox.connection_reset"
_JSON = "application/json; charset=UTF-8"
_HTML_500 = (
    b"<!DOCTYPE html><html><head><title>Error</title></head><body>"
    b"<h1>Sorry, something went wrong.</h1><p>We're working on it and we'll get it fixed as "
    b"soon as we can.</p></body></html>"
)
_DEFAULT_MESSAGES = {
    1: "An unknown error occurred",
    2: "An unexpected error has occurred. Please retry your request later.",
    4: "(#4) Application request limit reached",
    10: "(#10) Application does not have permission for this action",
    17: "(#17) User request limit reached",
    100: "(#100) Invalid parameter",
    190: "Error validating access token: Session has expired.",
    200: "(#200) Permissions error",
    368: "(#368) The action attempted has been deemed abusive or is otherwise disallowed",
    551: "(#551) This person isn't available right now.",
    613: "(#613) Calls to this api have exceeded the rate limit.",
}
_TRANSIENT = frozenset({2, 4, 17, 32, 341, 613})


@dataclass(slots=True)
class Reply:
    payload: Any
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delivered: bool = False


def json_bytes(payload: Any) -> bytes:
    return json.dumps(payload, separators=(",", ":")).encode()


def reply_response(reply: Reply) -> Response[bytes]:
    return Response(
        json_bytes(reply.payload),
        status_code=reply.status,
        headers=dict(reply.headers),
        media_type=_JSON,
    )


def error_response(error: GraphError) -> Response[bytes]:
    return Response(
        error.body(), status_code=error.http_status, headers=dict(error.headers), media_type=_JSON
    )


def legacy_error_response(error: LegacyOAuthError) -> Response[bytes]:
    return Response(error.body(), status_code=error.code, media_type=_JSON)


def _fault_status(code: int) -> int:
    if code == 1:
        return 500
    if code == 2:
        return 503
    if code in (10, 200):
        return 403
    return 400


def _summary(code: int | None, subcode: int | None, message: str | None) -> dict[str, Any]:
    return {"code": code, "subcode": subcode, "message": message}


def fault_response(rule: FaultRule, *, legacy: bool) -> tuple[Response[bytes], dict[str, Any]]:
    """The answer an error fault gives, and its summary for the request journal."""
    spec = rule.spec
    raw_body = spec.body in ("html", "empty") or (
        spec.code is None and spec.http_status is not None and spec.body != "graph"
    )
    if raw_body:
        content = b"" if spec.body == "empty" else _HTML_500
        response = Response(content, status_code=spec.http_status or 500, media_type="text/html")
        return response, _summary(None, None, spec.message or "non-JSON error body")
    code = spec.code if spec.code is not None else 1
    status = spec.http_status or _fault_status(code)
    message = spec.message or _DEFAULT_MESSAGES.get(code, f"(#{code}) Sandbox fault")
    summary = _summary(code, spec.subcode, message)
    if legacy:
        return legacy_error_response(LegacyOAuthError(message, code=status)), summary
    error = GraphError(
        message,
        code,
        subcode=spec.subcode,
        type_=OAUTH if code in (1, 2, 4, 190) else "IGApiException",
        http_status=status,
        is_transient=True if code in _TRANSIENT else None,
    )
    return error_response(error), summary


def reset_connection(request: Request[Any, Any, Any]) -> bool:
    """Abort the TCP connection under this request (see ``sandbox.server``)."""
    extensions = request.scope.get("extensions") or {}
    hook = extensions.get(RESET_EXTENSION, {}).get("reset")
    if callable(hook):
        hook()
        return True
    log.warning("deliver_then_reset needs the sandbox's own server; answering 500 instead")
    return False


async def perform(
    sandbox: Sandbox,
    request: Request[Any, Any, Any],
    *,
    endpoint: str,
    target: FaultTarget,
    operation: Callable[[], Reply],
    record: dict[str, Any] | None = None,
    legacy: bool = False,
) -> Response[bytes]:
    faults = sandbox.faults
    latency = faults.latency(endpoint, target)
    if latency:
        await asyncio.sleep(latency)
    # From here to the end of the operation nothing awaits, so no other call can take this
    # rule in between; it is spent only if it really shapes this call's answer.
    rule = faults.match(endpoint, target)
    if rule is not None and rule.spec.action == "reject":
        _applied(faults, rule, record)
        return _noted(record, *fault_response(rule, legacy=legacy))
    try:
        # Synchronous on purpose: the checks and the mutation happen with no await between.
        reply = operation()
    except GraphError as error:
        summary = _summary(error.code, error.subcode, error.message)
        return _noted(record, error_response(error), summary)
    except LegacyOAuthError as error:
        summary = _summary(error.code, None, error.message)
        return _noted(record, legacy_error_response(error), summary)
    if record is not None:
        record["result"] = reply.payload
        record["delivered"] = reply.delivered
    if rule is None:
        return _noted(record, reply_response(reply))
    _applied(faults, rule, record)
    action = rule.spec.action
    if action == "deliver_then_hang":
        await asyncio.sleep(rule.seconds)
        return _noted(record, reply_response(reply))
    if action == "deliver_then_reset":
        if reset_connection(request):
            if record is not None:
                record["status"] = "reset"
            return Response(b"", status_code=500)
        return _noted(record, Response(b"", status_code=500))
    return _noted(record, *fault_response(rule, legacy=legacy))


def _applied(faults: FaultBook, rule: FaultRule, record: dict[str, Any] | None) -> None:
    faults.spend(rule)
    if record is not None:
        record["fault"] = {"id": rule.id, "action": rule.spec.action}


def _noted(
    record: dict[str, Any] | None,
    response: Response[bytes],
    error: dict[str, Any] | None = None,
) -> Response[bytes]:
    """Copy what the caller saw into the journal record of a send request."""
    if record is not None:
        record["status"] = response.status_code
        record["error"] = error
    return response


def note_error(record: dict[str, Any], error: GraphError) -> GraphError:
    """Fill a journal record with an error raised before ``perform`` ran; returns it to raise."""
    record["status"] = error.http_status
    record["error"] = _summary(error.code, error.subcode, error.message)
    return error
