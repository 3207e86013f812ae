"""Fault rules set through the admin API and matched against calls and webhook events.

A rule names an endpoint, optionally narrows it to an account, comment or recipient, and fires
for the next ``times`` matching calls, with ``probability`` on each, or (with neither) on
every matching call until removed. Latency rules add up; of the other rules the first match
decides the outcome of the call.

A rule is used up (``times``, ``hits``) only by a call it was applied to. Latency and
``reject`` always apply, and so do the webhook actions; a ``deliver_then_*`` rule applies only
when the operation succeeds: if the sandbox's own rules refuse it (2534025, a closed window),
the caller gets that real error and the rule waits for the next matching call. So "the next
delivered send fails with code 1" is what ``times: 1`` means, whatever is refused before it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import msgspec

from sandbox.state import World

Endpoint = Literal[
    "messages",
    "replies",
    "comments",
    "media",
    "me",
    "oauth_token",
    "exchange",
    "refresh",
    "subscribed_apps",
    "user_profile",
    "conversations",
    "webhook",
]
Action = Literal[
    "deliver_then_error",
    "deliver_then_hang",
    "deliver_then_reset",
    "reject",
    "latency",
    "drop",
    "duplicate",
    "delay",
]
WEBHOOK_ACTIONS = frozenset({"drop", "duplicate", "delay"})


class FaultSpec(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    endpoint: Endpoint
    action: Action
    account: str | None = None
    comment_id: str | None = None
    recipient: str | None = None
    code: int | None = None
    subcode: int | None = None
    http_status: Annotated[int, msgspec.Meta(ge=200, le=599)] | None = None
    message: str | None = None
    body: Literal["graph", "html", "empty"] | None = None
    seconds: Annotated[float, msgspec.Meta(ge=0)] | None = None
    times: Annotated[int, msgspec.Meta(ge=1)] | None = None
    probability: Annotated[float, msgspec.Meta(ge=0, le=1)] | None = None
    count: Annotated[int, msgspec.Meta(ge=2, le=100)] | None = None


class FaultSpecError(ValueError):
    """The rule cannot be applied as written."""


@dataclass(slots=True)
class FaultRule:
    id: str
    spec: FaultSpec
    account_id: str | None
    fan: str | None
    remaining: int | None
    hits: int = 0

    def as_dict(self) -> dict[str, Any]:
        described = {k: v for k, v in msgspec.structs.asdict(self.spec).items() if v is not None}
        return described | {"id": self.id, "remaining": self.remaining, "hits": self.hits}

    @property
    def seconds(self) -> float:
        if self.spec.seconds is not None:
            return self.spec.seconds
        return 30.0 if self.spec.action == "deliver_then_hang" else 1.0


@dataclass(frozen=True, slots=True)
class FaultTarget:
    account_id: str | None = None
    comment_id: str | None = None
    fan: str | None = None  # recipient (or sender, for webhooks) as a fan username


class FaultBook:
    def __init__(self, rng: random.Random) -> None:
        self._rng = rng
        self._rules: list[FaultRule] = []
        self._next_id = 1

    def add(self, spec: FaultSpec, world: World) -> FaultRule:
        is_webhook = spec.endpoint == "webhook"
        if is_webhook != (spec.action in WEBHOOK_ACTIONS):
            raise FaultSpecError(
                "drop, duplicate and delay apply to the webhook endpoint, and only they do"
            )
        account_id = fan = None
        if spec.account is not None:
            account = world.account(spec.account)
            if account is None:
                raise FaultSpecError(f"unknown account {spec.account!r}")
            account_id = account.user_id
        if spec.recipient is not None:
            found = world.fan(spec.recipient)
            if found is None:
                raise FaultSpecError(f"unknown recipient {spec.recipient!r}")
            fan = found.username
        rule = FaultRule(
            id=f"f{self._next_id}",
            spec=spec,
            account_id=account_id,
            fan=fan,
            remaining=spec.times,
        )
        self._next_id += 1
        self._rules.append(rule)
        return rule

    def remove(self, rule_id: str) -> bool:
        before = len(self._rules)
        self._rules = [r for r in self._rules if r.id != rule_id]
        return len(self._rules) != before

    def clear(self) -> None:
        self._rules.clear()

    def rules(self) -> list[FaultRule]:
        return list(self._rules)

    def _matches(self, rule: FaultRule, endpoint: str, target: FaultTarget) -> bool:
        spec = rule.spec
        if spec.endpoint != endpoint:
            return False
        if rule.account_id is not None and rule.account_id != target.account_id:
            return False
        if spec.comment_id is not None and spec.comment_id != target.comment_id:
            return False
        if rule.fan is not None and rule.fan != target.fan:
            return False
        return spec.probability is None or self._rng.random() < spec.probability

    def latency(self, endpoint: str, target: FaultTarget) -> float:
        """Seconds to wait before the call: every matching latency rule, each used up."""
        total = 0.0
        for rule in list(self._rules):
            if rule.spec.action == "latency" and self._matches(rule, endpoint, target):
                total += rule.seconds
                self.spend(rule)
        return total

    def match(self, endpoint: str, target: FaultTarget) -> FaultRule | None:
        """The first rule that decides the call's outcome; not used up until `spend`."""
        for rule in self._rules:
            if rule.spec.action != "latency" and self._matches(rule, endpoint, target):
                return rule
        return None

    def spend(self, rule: FaultRule) -> None:
        """Count one application of `rule`; a rule whose `times` ran out disappears."""
        rule.hits += 1
        if rule.remaining is not None:
            rule.remaining -= 1
            if rule.remaining <= 0:
                self._rules = [r for r in self._rules if r is not rule]
