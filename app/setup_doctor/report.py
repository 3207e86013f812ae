"""What the doctor says: one `Check` per thing it looked at, grouped per account."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class Status(StrEnum):
    OK = "ok"
    INFO = "info"
    WARN = "warn"
    FAIL = "fail"


@dataclass(frozen=True, slots=True)
class Check:
    key: str
    title: str
    status: Status
    # What was found, then what to do about it (empty when nothing needs doing).
    summary: str
    advice: str = ""
    # Technical details for whoever set the server up (codes, URLs), never the headline.
    details: str = ""

    @property
    def failed(self) -> bool:
        return self.status is Status.FAIL


@dataclass(frozen=True, slots=True)
class FieldSeen:
    field: str
    meaning: str
    last_at_text: str | None


@dataclass(slots=True)
class AccountReport:
    account_id: int
    username: str
    checks: list[Check] = field(default_factory=list)
    webhooks_seen: list[FieldSeen] = field(default_factory=list)
    # The re-subscribe button shows while the subscription check fails.
    can_resubscribe: bool = False


@dataclass(slots=True)
class DoctorReport:
    server: list[Check]
    accounts: list[AccountReport]

    def failures(self) -> list[str]:
        """Titles of the failed checks, for the overview's link."""
        titles = [c.title for c in self.server if c.failed]
        for account in self.accounts:
            titles.extend(f"@{account.username}: {c.title}" for c in account.checks if c.failed)
        return titles
