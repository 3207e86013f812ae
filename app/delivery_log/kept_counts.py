"""SQL over the kept delivery counts (`delivery_counts`, see `app.db.models.delivery_counts`):
the sums a report needs, named once so every reader adds the same columns.

A row is one 15-minute UTC slice of one campaign's deliveries (of one account, follow-on or
not); a report sums the rows of its range. `STATE_COLUMNS` names each private-reply state's
column; `DELIVERIES` and `SKIPPED` add them up.
"""

from __future__ import annotations

from app.db.models import LegState

STATE_COLUMNS: dict[LegState, str] = {state: state.value.lower() for state in LegState}
# Every delivery of a row, whatever its state; the ones skipped, whatever the reason.
DELIVERIES = "(" + " + ".join(STATE_COLUMNS.values()) + ")"
SKIPPED = "(" + " + ".join(column for state, column in STATE_COLUMNS.items() if state.is_skip) + ")"
