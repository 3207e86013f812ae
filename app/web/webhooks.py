"""`/webhooks/instagram`: Meta's verification handshake and the signed event POST.

The POST does the least durable work and answers: read the body (413 beyond
`WEBHOOK_MAX_BODY_BYTES`, announced or streamed), check `X-Hub-Signature-256` over those exact
bytes (401 when missing or wrong, nothing stored), check it is a JSON object (400 when not,
the body kept as a rejected event; beyond 64 KB only its syntax, the worker refusing too deep
a nesting or text that is not UTF-8), commit it to the outbox (503 when the database cannot
take it, so Meta redelivers), answer 200. Parsing the items is the worker's job. Bad input
never gets a 500.

This is a plain ASGI route rather than a Litestar handler on purpose: Meta may send
thousands of these a second, and request/response objects, dependency injection and
header containers cost more here than the work itself (measured with `bench/ingest.py`).
Errors answer the same JSON shape as the rest of the app (`app/web/errors.py`).
"""

from __future__ import annotations

import hmac
import json
import logging
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from urllib.parse import parse_qs

from litestar import Litestar, asgi
from litestar.types import Receive, Scope, Send

from app.db.models import EventLevel
from app.delivery.intake.webhook_writer import IntakeUnavailableError, WebhookIntake
from app.instagram.signature import verify_signature
from app.instagram.webhook_payload import EnvelopeError, check_object, decode_body
from app.instruments import WEBHOOK_EVENTS
from app.operations.alerts import record_throttled
from app.resources import Resources

logger = logging.getLogger("oncereply.webhooks")

WEBHOOK_PATH = "/webhooks/instagram"
_SIGNATURE = b"x-hub-signature-256"
_OK = b"EVENT_RECEIVED"
# Meta's bodies are a few kilobytes; decoding this much in full takes well under a millisecond.
_DECODE_INLINE_BYTES = 64 * 1024


class _BodyTooLargeError(Exception):
    pass


class _ClientGoneError(Exception):
    pass


@asgi(WEBHOOK_PATH, name="instagram_webhook", is_mount=False, copy_scope=False)
async def instagram_webhook(scope: Scope, receive: Receive, send: Send) -> None:
    app = Litestar.from_scope(scope)
    resources: Resources = app.state.resources
    method = scope.get("method")
    if method in {"GET", "HEAD"}:
        await _verify(scope, send, resources)
    elif method == "POST":
        await _receive_event(scope, receive, send, resources, app.state.webhook_intake)
    else:
        await _answer(send, 405, "use GET (verification) or POST (events)", allow=b"GET, POST")


async def _verify(scope: Scope, send: Send, resources: Resources) -> None:
    """Meta's subscription handshake: echo `hub.challenge` when the token is ours."""
    params = parse_qs(scope.get("query_string", b"").decode("latin-1"))
    mode = params.get("hub.mode", [""])[0]
    token = params.get("hub.verify_token", [""])[0]
    challenge = params.get("hub.challenge", [""])[0]
    expected = resources.settings.webhook_verify_token
    if mode != "subscribe" or not hmac.compare_digest(token.encode(), expected.encode()):
        await _answer(send, 403, "verify token or mode does not match")
    elif not challenge or len(challenge) > 256:
        await _answer(send, 403, "missing or oversized hub.challenge")
    else:
        await _respond(send, 200, challenge.encode(), b"text/plain; charset=utf-8")


async def _receive_event(
    scope: Scope, receive: Receive, send: Send, resources: Resources, intake: WebhookIntake
) -> None:
    headers = dict(scope["headers"])
    limit = resources.settings.webhook_max_body_bytes
    try:
        body = await _read_body(receive, headers.get(b"content-length"), limit)
    except _BodyTooLargeError:
        WEBHOOK_EVENTS.labels("refused").inc()
        await _answer(send, 413, f"the body is larger than {limit} bytes")
        return
    except _ClientGoneError:
        return
    signature = headers.get(_SIGNATURE)
    check = verify_signature(
        body, signature.decode("latin-1") if signature else None, resources.settings.webhook_secrets
    )
    if check.key_name is None:
        client = scope.get("client")
        await record_throttled(
            resources.sessionmaker,
            resources.redis,
            kind="webhook_signature_invalid",
            message=f"refused a webhook POST: signature {check.problem}",
            details={
                "problem": str(check.problem),
                "bytes": len(body),
                "client": client[0] if client else None,
                "user_agent": headers.get(b"user-agent", b"").decode("latin-1")[:200],
            },
        )
        WEBHOOK_EVENTS.labels("refused").inc()
        await _answer(send, 401, f"signature {check.problem}")
        return
    try:
        # Building a large body's objects would hold the event loop (a thread would not help:
        # the decoder keeps the GIL), so beyond a Meta-sized body only its syntax is checked
        # here and the worker's full decode refuses, and keeps, what is left.
        if len(body) > _DECODE_INLINE_BYTES:
            check_object(body)
        else:
            decode_body(body)
    except EnvelopeError as exc:
        WEBHOOK_EVENTS.labels("refused").inc()
        await _keep_rejected(resources, intake, body, check.key_name, str(exc))
        await _answer(send, 400, str(exc)[:200])
        return
    try:
        await intake.store(body, check.key_name)
    except IntakeUnavailableError as exc:
        logger.warning("webhook answered 503, Meta will redeliver: %s", exc)
        await _answer(send, 503, "the event could not be stored; please retry", retry_after=5)
        return
    WEBHOOK_EVENTS.labels("received").inc()
    await _respond(send, 200, _OK, b"text/plain; charset=utf-8")


async def _read_body(receive: Receive, announced: bytes | None, limit: int) -> bytes:
    if announced is not None and announced.isdigit() and int(announced) > limit:
        raise _BodyTooLargeError
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise _ClientGoneError
        chunk: bytes = message.get("body", b"")  # type: ignore[assignment]
        size += len(chunk)
        if size > limit:
            raise _BodyTooLargeError
        chunks.append(chunk)
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


async def _keep_rejected(
    resources: Resources, intake: WebhookIntake, body: bytes, key_name: str, reason: str
) -> None:
    event_id: int | None = None
    try:
        event_id = await intake.store_rejected(body, key_name, reason)
    except Exception as exc:  # noqa: BLE001 - the 400 stands; the log keeps the reason
        logger.warning("could not keep a rejected webhook body: %s", exc)
    await record_throttled(
        resources.sessionmaker,
        resources.redis,
        kind="webhook_body_invalid",
        level=EventLevel.WARNING,
        message=f"refused a signed webhook POST: {reason[:200]}",
        details={"webhook_event_id": event_id, "bytes": len(body)},
    )


async def _answer(
    send: Send, status: int, detail: str, *, retry_after: int | None = None, allow: bytes = b""
) -> None:
    """An error in the app's JSON error shape."""
    body = json.dumps({"status_code": status, "detail": detail}).encode()
    extra = [(b"retry-after", str(retry_after).encode())] if retry_after else []
    if allow:
        extra.append((b"allow", allow))
    await _respond(send, status, body, b"application/json", extra)


async def _respond(
    send: Send,
    status: int,
    body: bytes,
    content_type: bytes,
    extra: list[tuple[bytes, bytes]] | None = None,
) -> None:
    headers = [
        (b"content-type", content_type),
        (b"content-length", str(len(body)).encode()),
        (b"cache-control", b"no-store"),
        *(extra or []),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


@asynccontextmanager
async def webhook_intake_lifespan(app: Litestar) -> AsyncGenerator[None, None]:
    """Run the outbox writer for this process; needs `app.state.resources` opened first."""
    resources: Resources = app.state.resources
    intake = WebhookIntake(resources.engine, resources.queue)
    intake.start()
    app.state.webhook_intake = intake
    try:
        yield
    finally:
        await intake.close()
