"""The webhook sender: registration handshake, batching, signing, retries and webhook faults.

Bodies are serialised once per delivery with ``ensure_ascii=True`` and compact separators, and
the same bytes are signed (``X-Hub-Signature-256``, plus the legacy SHA-1 header) and sent on
every attempt, so a receiver has to verify the raw bytes exactly as Meta requires. A failed
attempt (non-2xx, timeout, connection error) is retried at once, then after growing gaps
(``webhook_retry_base_seconds`` x 1, 2, 4 ...), which compress Meta's 36 hours into seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from sandbox.clock import Clock
from sandbox.config import SandboxConfig, SignWith
from sandbox.faults import FaultBook, FaultTarget
from sandbox.ids import challenge
from sandbox.settings import Settings
from sandbox.webhook_events import WebhookEvent

log = logging.getLogger("sandbox.webhooks")

_LEGACY_ESCAPES = (("/", "\\/"), ("<", "\\u003C"), ("%", "\\u0025"), ("@", "\\u0040"))


@dataclass(slots=True)
class Registration:
    callback_url: str
    verify_token: str
    sign_with: SignWith
    verified_at: float

    def as_dict(self) -> dict[str, Any]:
        return {
            "callback_url": self.callback_url,
            "verify_token": self.verify_token,
            "sign_with": self.sign_with,
            "verified_at": self.verified_at,
        }


@dataclass(slots=True)
class Delivery:
    id: int
    events: list[WebhookEvent]
    body: bytes
    attempts: int = 0
    finished: int = 0  # attempts that have come back (or failed), for flush() to wait on
    state: str = "pending"
    wake: asyncio.Event = field(default_factory=asyncio.Event)


def encode_body(events: list[WebhookEvent], *, flat: bool, legacy: bool, now: float) -> bytes:
    """One POST body: entries grouped per account and kind, in the order events happened."""
    entries: list[dict[str, Any]] = []
    grouped: dict[tuple[str, str], dict[str, Any]] = {}
    for event in events:
        if event.kind == "change":
            if flat:
                entries.append(
                    {
                        "id": event.account_id,
                        "time": int(now),
                        "field": event.field,
                        "value": event.value,
                    }
                )
                continue
            key = (event.account_id, "change")
            entry = grouped.get(key)
            if entry is None:
                entry = grouped[key] = {"id": event.account_id, "time": int(now), "changes": []}
                entries.append(entry)
            entry["changes"].append({"field": event.field, "value": event.value})
        else:
            key = (event.account_id, "messaging")
            entry = grouped.get(key)
            if entry is None:
                # Messaging entries carry milliseconds, change entries seconds, as Meta sends them.
                entry = grouped[key] = {
                    "id": event.account_id,
                    "time": int(now * 1000),
                    "messaging": [],
                }
                entries.append(entry)
            entry["messaging"].append(event.value)
    text = json.dumps(
        {"object": "instagram", "entry": entries}, ensure_ascii=True, separators=(",", ":")
    )
    if legacy:
        # These characters only ever occur inside JSON strings, so a plain replace is exact.
        for plain, escaped in _LEGACY_ESCAPES:
            text = text.replace(plain, escaped)
    return text.encode("ascii")


def sign(secret: str, body: bytes, algorithm: str = "sha256") -> str:
    digest = hmac.new(secret.encode(), body, getattr(hashlib, algorithm)).hexdigest()
    return f"{algorithm}={digest}"


class WebhookSender:
    def __init__(
        self,
        config: SandboxConfig,
        settings: Settings,
        clock: Clock,
        faults: FaultBook,
        held: Callable[[WebhookEvent], str | None],
    ) -> None:
        self._config = config
        self._settings = settings
        self._clock = clock
        self._faults = faults
        self._held_by_platform = held
        self.registration: Registration | None = None
        self.events: list[WebhookEvent] = []
        self.attempts: list[dict[str, Any]] = []
        self._pending: list[WebhookEvent] = []
        self._flush_timer: asyncio.TimerHandle | None = None
        self._held: dict[int, tuple[asyncio.TimerHandle, Callable[[], None]]] = {}
        self._deliveries: dict[int, Delivery] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._registering: asyncio.Task[None] | None = None
        self._client: httpx.AsyncClient | None = None
        self._next_delivery = 1
        self._next_hold = 1

    # --- lifecycle -----------------------------------------------------------------------

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(
                limits=httpx.Limits(max_connections=64, max_keepalive_connections=32),
                headers={"User-Agent": "facebookexternalua"},
            )
        return self._client

    async def aclose(self) -> None:
        self.cancel_all()
        if self._registering is not None:
            self._registering.cancel()
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    def cancel_all(self) -> None:
        """Forget everything in flight, so one test's retries never reach the next test."""
        if self._flush_timer is not None:
            self._flush_timer.cancel()
            self._flush_timer = None
        for handle, _ in self._held.values():
            handle.cancel()
        self._held.clear()
        self._pending.clear()
        for task in self._tasks:
            task.cancel()
        self._tasks.clear()
        self._deliveries.clear()

    def reset(self, *, keep_registration: bool) -> None:
        self.cancel_all()
        self.events.clear()
        self.attempts.clear()
        if not keep_registration:
            self.registration = None
            if self._registering is not None:
                self._registering.cancel()
                self._registering = None

    # --- registration --------------------------------------------------------------------

    async def register(
        self, callback_url: str, verify_token: str, sign_with: SignWith
    ) -> dict[str, Any]:
        """Meta's dashboard handshake; the callback is kept only if it echoes the challenge."""
        if self._registering is not None and self._registering is not asyncio.current_task():
            self._registering.cancel()
            self._registering = None
        expected = challenge()
        params = {
            "hub.mode": "subscribe",
            "hub.challenge": expected,
            "hub.verify_token": verify_token,
        }
        result: dict[str, Any] = {"callback_url": callback_url, "verified": False}
        try:
            response = await self._http().get(
                callback_url, params=params, timeout=self._settings.webhook_timeout_seconds
            )
        except httpx.HTTPError as exc:
            result |= {"status": None, "error": f"{type(exc).__name__}: {exc}"}
            return result
        echoed = response.text.strip()
        result["status"] = response.status_code
        if response.status_code == 200 and echoed == expected:
            self.registration = Registration(
                callback_url, verify_token, sign_with, self._clock.now()
            )
            result["verified"] = True
        else:
            result["error"] = f"expected 200 with body {expected}, got {echoed[:200]!r}"
        return result

    def register_in_background(
        self, callback_url: str, verify_token: str, sign_with: SignWith
    ) -> None:
        """Keep trying the handshake: the product's web process may start after us."""

        async def keep_trying() -> None:
            pause = 0.2
            while True:
                result = await self.register(callback_url, verify_token, sign_with)
                if result["verified"]:
                    # At warning level so `make dev` (which hides info) shows the moment.
                    log.warning("webhook callback %s verified", callback_url)
                    self._registering = None
                    return
                await asyncio.sleep(pause)
                pause = min(pause * 1.5, 2.0)

        self._registering = asyncio.get_running_loop().create_task(keep_trying())

    def unregister(self) -> None:
        self.registration = None

    # --- emitting ------------------------------------------------------------------------

    def emit(self, event: WebhookEvent) -> None:
        """Queue one event for delivery; synchronous so callers stay atomic."""
        event.id = len(self.events) + 1
        self.events.append(event)
        # What Meta would not send at all is decided first: a test without a callback can
        # still tell the events that would have gone (no_callback) from those that would not.
        held = self._held_by_platform(event)
        if held is not None:
            event.status = held
            return
        if self.registration is None:
            event.status = "no_callback"
            return
        rule = self._faults.match(
            "webhook", FaultTarget(event.account_id, event.comment_id, event.fan)
        )
        if rule is None:
            self._enqueue(event)
            return
        self._faults.spend(rule)  # drop, delay and duplicate always apply
        action = rule.spec.action
        if action == "drop":
            event.status = "dropped"
        elif action == "delay":
            event.status = "delayed"
            self._hold(event, rule.seconds, alone=False)
        else:  # duplicate: the same event arrives `count` times, the copies a little later
            event.copies = rule.spec.count or 2
            self._enqueue(event)
            gap = max(self._settings.webhook_batch_window_ms / 1000, 0.01)
            for copy in range(1, event.copies):
                self._hold(event, gap * (copy + 1), alone=True)

    def _hold(self, event: WebhookEvent, seconds: float, *, alone: bool) -> None:
        key = self._next_hold
        self._next_hold += 1

        def release() -> None:
            self._held.pop(key, None)
            if alone:
                self._start([event])
            else:
                self._enqueue(event)

        handle = asyncio.get_running_loop().call_later(seconds, release)
        self._held[key] = (handle, release)

    def _enqueue(self, event: WebhookEvent) -> None:
        event.status = "pending"
        self._pending.append(event)
        window = self._settings.webhook_batch_window_ms
        if window == 0 or len(self._pending) >= self._settings.webhook_max_batch:
            self._flush_pending()
        elif self._flush_timer is None:
            self._flush_timer = asyncio.get_running_loop().call_later(
                window / 1000, self._flush_pending
            )

    def _flush_pending(self) -> None:
        if self._flush_timer is not None:
            self._flush_timer.cancel()
            self._flush_timer = None
        size = self._settings.webhook_max_batch
        while self._pending:
            batch, self._pending = self._pending[:size], self._pending[size:]
            self._start(batch)

    def _start(self, events: list[WebhookEvent]) -> None:
        body = encode_body(
            events,
            flat=self._settings.webhook_flat_form,
            legacy=self._settings.webhook_legacy_escapes,
            now=self._clock.now(),
        )
        delivery = Delivery(id=self._next_delivery, events=events, body=body)
        self._next_delivery += 1
        for event in events:
            event.status = "sending"
            event.delivery_ids.append(delivery.id)
        self._deliveries[delivery.id] = delivery
        task = asyncio.get_running_loop().create_task(self._deliver(delivery))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # --- delivering ----------------------------------------------------------------------

    def _gap(self, attempt: int) -> float:
        """Seconds to wait before ``attempt``: none for the first retry, then doubling."""
        if attempt <= 2:
            return 0.0
        return self._settings.webhook_retry_base_seconds * 2.0 ** (attempt - 3)

    async def _deliver(self, delivery: Delivery) -> None:
        try:
            while delivery.attempts < self._settings.webhook_max_attempts:
                gap = self._gap(delivery.attempts + 1)
                if gap > 0:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(delivery.wake.wait(), gap)
                delivery.wake.clear()
                if await self._attempt(delivery):
                    delivery.state = "delivered"
                    for event in delivery.events:
                        event.status = "delivered"
                    return
            delivery.state = "failed"
            for event in delivery.events:
                if event.status != "delivered":
                    event.status = "failed"
        finally:
            self._deliveries.pop(delivery.id, None)

    async def _attempt(self, delivery: Delivery) -> bool:
        registration = self.registration
        delivery.attempts += 1
        record: dict[str, Any] = {
            "delivery_id": delivery.id,
            "attempt": delivery.attempts,
            "event_ids": [e.id for e in delivery.events],
            "sent_at": self._clock.now(),
            "callback_url": registration.callback_url if registration else None,
            "body": delivery.body.decode("ascii"),
            "signature": None,
            "signature_sha1": None,
            "status": None,
            "error": None,
            "duration_ms": 0.0,
        }
        self.attempts.append(record)
        if registration is None:
            record["error"] = "no callback registered"
            delivery.finished += 1
            return False
        secret = self._config.secret_for(registration.sign_with)
        headers = {
            "Content-Type": "application/json",
            "X-Hub-Signature-256": sign(secret, delivery.body),
        }
        record["signature"] = headers["X-Hub-Signature-256"]
        if self._settings.webhook_sha1_header:
            headers["X-Hub-Signature"] = sign(secret, delivery.body, "sha1")
            record["signature_sha1"] = headers["X-Hub-Signature"]
        started = time.monotonic()
        try:
            response = await self._http().post(
                registration.callback_url,
                content=delivery.body,
                headers=headers,
                timeout=self._settings.webhook_timeout_seconds,
            )
        except httpx.HTTPError as exc:
            record["error"] = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            return False
        finally:
            record["duration_ms"] = round((time.monotonic() - started) * 1000, 2)
            delivery.finished += 1
        record["status"] = response.status_code
        return 200 <= response.status_code < 300

    async def flush(self, wait_seconds: float = 10.0) -> dict[str, int]:
        """Send what is waiting now: the open batch, held events and pending retries.

        Returns once each of those deliveries has made its next attempt, or after ``wait_seconds``.
        """
        held = list(self._held.values())
        for handle, release in held:
            handle.cancel()
            release()
        batched = len(self._pending)
        before = {d.id: d.finished for d in self._deliveries.values()}
        self._flush_pending()
        for delivery in self._deliveries.values():
            delivery.wake.set()
        watched = list(self._deliveries.values())
        deadline = time.monotonic() + wait_seconds
        while time.monotonic() < deadline:
            if all(d.finished > before.get(d.id, 0) or d.state != "pending" for d in watched):
                break
            await asyncio.sleep(0.01)
        return {"released": len(held), "batched": batched, "deliveries": len(watched)}

    def in_flight(self) -> int:
        return len(self._deliveries) + len(self._pending) + len(self._held)
