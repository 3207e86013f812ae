"""Behaviour switches a test can flip at run time through ``POST /_admin/settings``.

Start-up options seed the defaults; ``POST /_admin/reset`` puts them back.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from sandbox.config import SandboxConfig

Positive = Annotated[int, msgspec.Meta(ge=1)]
NonNegative = Annotated[int, msgspec.Meta(ge=0)]
Seconds = Annotated[float, msgspec.Meta(ge=0)]


class Settings(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    # Meta allows one private reply per comment, but has been seen delivering a second one;
    # switching this off models that so a client cannot lean on 2534025 as its only guard.
    enforce_one_private_reply: bool = True
    private_replies_per_hour: Positive = 750
    sends_per_second: Positive = 100
    conversations_per_second: Positive = 2
    follow_lag_seconds: Seconds = 0.0
    # "flat" is what Meta really returns; "data" is the wrapper its documentation shows.
    token_response_shape: Literal["flat", "data"] = "flat"  # noqa: S105 - not a secret
    me_response_shape: Literal["flat", "data"] = "flat"
    require_subscription: bool = True
    # "development": webhooks only for people with a role on the app (`app_roles`, fan
    # usernames; the connected accounts' own events always flow), as Meta does before Live.
    app_mode: Literal["live", "development"] = "live"
    app_roles: list[str] = msgspec.field(default_factory=list)
    human_agent_approved: bool = False
    webhook_flat_form: bool = False
    webhook_batch_window_ms: NonNegative = 50
    webhook_max_batch: Annotated[int, msgspec.Meta(ge=1, le=1000)] = 1000
    webhook_retry_base_seconds: Seconds = 0.5
    webhook_max_attempts: Positive = 8
    webhook_timeout_seconds: Annotated[float, msgspec.Meta(gt=0)] = 5.0
    webhook_sha1_header: bool = True
    webhook_legacy_escapes: bool = False

    @classmethod
    def from_config(cls, config: SandboxConfig) -> Settings:
        return cls(
            private_replies_per_hour=config.private_replies_per_hour,
            sends_per_second=config.sends_per_second,
            follow_lag_seconds=config.follow_lag_seconds,
            webhook_batch_window_ms=config.webhook_batch_window_ms,
            webhook_retry_base_seconds=config.webhook_retry_base_seconds,
            webhook_max_attempts=config.webhook_max_attempts,
            webhook_timeout_seconds=config.webhook_timeout_seconds,
        )

    def updated(self, changes: dict[str, Any]) -> Settings:
        """A copy with ``changes`` applied, validated as a whole (unknown keys rejected)."""
        merged = msgspec.structs.asdict(self) | changes
        return msgspec.convert(merged, Settings)

    def as_dict(self) -> dict[str, Any]:
        return msgspec.structs.asdict(self)
