"""When the run is over (pure): settled and quiet, or stalled.

The run never waits on a wall-clock guess. Each tick it takes a `Snapshot` of our database
and the sandbox; `Watch` remembers since when the snapshot has not changed.

- **Settled**: every comment made has its row, no row is PENDING or IN_FLIGHT, and the
  sandbox has no webhook still on its way. Once settled and unchanged for `quiet_s`, with
  every UNCONFIRMED row checked in the inbox, the run is over and judged. An UNCONFIRMED row
  whose check never comes (its job was lost with Redis, say) is waited for `check_grace_s`
  of no change, then counted as unchecked rather than waited for forever.
- **Stalled**: not settled, and nothing changed for `stall_s` (a generous bound, many times the
  longest recovery interval). The run stops waiting and is judged as it stands; what is
  missing then shows as lost or not final. A slow machine makes slow progress, not none.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

NOT_FINAL = ("PENDING", "IN_FLIGHT")


@dataclass(frozen=True, slots=True)
class Snapshot:
    states: Mapping[str, int] = field(default_factory=dict)  # dm_logs rows by private leg state
    rows: int = 0
    unchecked_unconfirmed: int = 0  # UNCONFIRMED rows whose inbox check has no result yet
    ledger: int = 0  # comments in our ledger
    last_update: str = ""  # max(updated_at) of dm_logs, as text
    webhooks_in_flight: int = 0

    def key(self) -> tuple[object, ...]:
        return (
            tuple(sorted(self.states.items())),
            self.rows,
            self.unchecked_unconfirmed,
            self.ledger,
            self.last_update,
            self.webhooks_in_flight,
        )

    def pending(self) -> int:
        return sum(self.states.get(state, 0) for state in NOT_FINAL)

    def settled(self, comments: int) -> bool:
        return self.rows >= comments and self.pending() == 0 and self.webhooks_in_flight == 0


@dataclass
class Watch:
    quiet_s: float
    stall_s: float
    check_grace_s: float
    _key: tuple[object, ...] | None = None
    _since: float = 0.0

    def unchanged_for(self, snapshot: Snapshot, now: float) -> float:
        key = snapshot.key()
        if key != self._key:
            self._key, self._since = key, now
        return now - self._since

    def verdict(self, snapshot: Snapshot, comments: int, now: float) -> str | None:
        """ "quiet" or "stalled" when the run is over, else None (keep waiting)."""
        still = self.unchanged_for(snapshot, now)
        if snapshot.settled(comments):
            wait = self.check_grace_s if snapshot.unchecked_unconfirmed else self.quiet_s
            return "quiet" if still >= wait else None
        return "stalled" if still >= self.stall_s else None
