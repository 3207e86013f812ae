"""SQL over the kept delivery counts (`delivery_counts`, see `app.db.models.delivery_counts`):
the sums a report needs, named once so every reader adds the same columns.

A row is one 15-minute UTC slice of one campaign's deliveries (of one account, follow-on or
not); a report sums the rows of its range. `STATE_COLUMNS` names the column each private-reply
state is counted in, `COLUMN_STATES` each column once with its states; `DELIVERIES` and
`SKIPPED` add them up.
"""

from __future__ import annotations

from app.db.models import LegState

# Waiting to be sent (PENDING) or being sent (IN_FLIGHT): one column, so that a claim moves no
# count and runs no counting statement (migration 0037). No screen tells the two apart.
UNSETTLED = "unsettled"
STATE_COLUMNS: dict[LegState, str] = {
    state: state.value.lower() if state.is_final else UNSETTLED for state in LegState
}
COLUMN_STATES: dict[str, tuple[LegState, ...]] = {
    column: tuple(state for state, named in STATE_COLUMNS.items() if named == column)
    for column in dict.fromkeys(STATE_COLUMNS.values())
}
# Every delivery of a row, whatever its state; the ones skipped, whatever the reason.
DELIVERIES = "(" + " + ".join(COLUMN_STATES) + ")"
SKIPPED = "(" + " + ".join(column for state, column in STATE_COLUMNS.items() if state.is_skip) + ")"


def column_code(column: str) -> str:
    """A column's code in a page's data attributes: its state's name (`UNSETTLED` for both)."""
    return column.upper()
