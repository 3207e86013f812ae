"""The sandbox object that ``create_app`` builds and keeps on ``app.state``.

It owns every piece of mutable state (world, journal, limits, faults, webhooks, settings,
clock) so that two apps in one process never share anything, and it knows how to put all of
it back to the fixture on ``POST /_admin/reset``.
"""

from __future__ import annotations

import random

from litestar.datastructures import State

from sandbox.clock import Clock
from sandbox.config import SandboxConfig
from sandbox.faults import FaultBook
from sandbox.fixture import Fixture, load_fixture
from sandbox.journal import Journal
from sandbox.limits import Limits
from sandbox.permissions import permissions_for
from sandbox.settings import Settings
from sandbox.state import World
from sandbox.webhook_events import WebhookEvent
from sandbox.webhooks import WebhookSender

STATE_KEY = "sandbox"


class Sandbox:
    def __init__(self, config: SandboxConfig, fixture: Fixture | None = None) -> None:
        self.config = config
        self.fixture = fixture if fixture is not None else load_fixture(config.fixture)
        self.clock = Clock()
        self.settings = Settings.from_config(config)
        self.rng = random.Random()  # noqa: S311 - fault probabilities, not secrets
        self.world = World(self.fixture, self.clock)
        self.journal = Journal()
        self.limits = Limits()
        self.faults = FaultBook(self.rng)
        self.webhooks = WebhookSender(config, self.settings, self.clock, self.faults, self._held)

    def _held(self, event: WebhookEvent) -> str | None:
        """Why Meta would not send this event (its status), or None when it would."""
        settings = self.settings
        if settings.app_mode == "development" and event.fan not in (None, *settings.app_roles):
            return "no_app_role"
        if not settings.require_subscription:
            return None
        account = self.world.accounts.get(event.account_id)
        if account is None or event.field not in account.subscribed_fields:
            return "not_subscribed"
        if not set(permissions_for(event.field)) <= set(account.subscribed_scopes):
            return "missing_permission"
        return None

    def emit(self, event: WebhookEvent) -> None:
        self.webhooks.emit(event)

    def apply_settings(self, changes: dict[str, object]) -> None:
        """Validate the changes as a whole, then apply them in place (others hold this object)."""
        updated = self.settings.updated(dict(changes))
        for name in Settings.__struct_fields__:
            setattr(self.settings, name, getattr(updated, name))

    def reset(self, *, keep_webhook: bool = True) -> None:
        self.clock.reset()
        defaults = Settings.from_config(self.config)
        for name in Settings.__struct_fields__:
            setattr(self.settings, name, getattr(defaults, name))
        self.world = World(self.fixture, self.clock)
        self.journal = Journal()
        self.limits = Limits()
        self.faults.clear()
        self.webhooks.reset(keep_registration=keep_webhook)


def sandbox_of(state: State) -> Sandbox:
    found = state[STATE_KEY]
    if not isinstance(found, Sandbox):
        raise TypeError("app.state has no sandbox")
    return found
