"""The oracle for the kept delivery counts: `delivery_counts` and `funnel_people` against a
plain recount of `dm_logs`, both read in one snapshot (a worker may still be writing)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.models import LegState
from app.delivery_log.kept_counts import COLUMN_STATES

_STATE_NAMES = list(COLUMN_STATES)
_COLUMNS = [
    *_STATE_NAMES,
    "dm_triggers",
    "link_sent",
    "proven",
    "proven_by_meta",
]
_KEY = "workspace_id, campaign_id, quarter, account_id, follow_on"


def _in(states: tuple[LegState, ...]) -> str:
    return ", ".join(f"'{state.value}'" for state in states)


# Each state column counts the rows in any of its states (PENDING and IN_FLIGHT share one).
_BY_STATE = ", ".join(
    f"count(*) FILTER (WHERE pr_state IN ({_in(states)})) AS n_{column}"
    for column, states in COLUMN_STATES.items()
)
_RECOUNT = text(
    f"""
SELECT {_KEY}, {", ".join(f"n_{c}" for c in _COLUMNS)} FROM (
    SELECT workspace_id, campaign_id,
           date_bin('15 minutes', created_at, TIMESTAMPTZ '2000-01-01 00:00+00') AS quarter,
           account_id, trigger_kind IN ('postback', 'follow_up') AS follow_on,
           {_BY_STATE},
           count(*) FILTER (WHERE trigger_kind IN ('message', 'story_reply', 'story_mention'))
               AS n_dm_triggers,
           count(*) FILTER (WHERE message_kind = 'reveal' AND pr_state = 'SENT') AS n_link_sent,
           count(*) FILTER (WHERE pr_evidence ? 'confirmed_by') AS n_proven,
           count(*) FILTER (WHERE pr_evidence -> 'confirmed_by' = '"meta_already_used"')
               AS n_proven_by_meta
    FROM dm_logs GROUP BY 1, 2, 3, 4, 5
) raw
"""  # noqa: S608 - composed from the LegState enum's names
)


def _kept(table: str, key: str, columns: list[str]) -> Any:
    """A kept table's rows, its stripes of one key added up."""
    sums = ", ".join(f"sum({name})" for name in columns)
    return text(f"SELECT {key}, {sums} FROM {table} GROUP BY {key}")  # noqa: S608 - constants


_KEPT = _kept("delivery_counts", _KEY, _COLUMNS)
_TOTALS = _kept("delivery_totals", "workspace_id, campaign_id, account_id, follow_on", _COLUMNS)
_WORKSPACE = _kept("delivery_workspace_quarters", "workspace_id, quarter", _STATE_NAMES)
_PEOPLE_RECOUNT = text(
    r"""
SELECT campaign_id, 'tapped' AS step, count(DISTINCT recipient_id) FROM dm_logs
WHERE trigger_kind = 'postback' AND trigger_payload LIKE '%\:open' AND campaign_id IS NOT NULL
GROUP BY campaign_id
UNION ALL
SELECT campaign_id, 'passed', count(DISTINCT recipient_id) FROM dm_logs
WHERE message_kind = 'reveal' AND pr_state = 'SENT' AND campaign_id IS NOT NULL
GROUP BY campaign_id
"""
)
_PEOPLE_KEPT = text(
    """
SELECT campaign_id, 'tapped', sum(tapped_people) FROM delivery_counts
WHERE campaign_id IS NOT NULL GROUP BY campaign_id
UNION ALL
SELECT campaign_id, 'passed', sum(passed_people) FROM delivery_counts
WHERE campaign_id IS NOT NULL GROUP BY campaign_id
"""
)
_PEOPLE_ROWS = text("SELECT campaign_id, step, count(*) FROM funnel_people GROUP BY 1, 2")


def _nonzero(rows: Any, width: int = 5) -> dict[tuple[Any, ...], tuple[int, ...]]:
    table: dict[tuple[Any, ...], tuple[int, ...]] = {}
    for row in rows:
        values = tuple(int(v) for v in row[width:])
        if any(values):
            table[tuple(row[:width])] = values
    return table


def _rolled(
    raw: dict[tuple[Any, ...], tuple[int, ...]], key: Any, columns: int
) -> dict[tuple[Any, ...], tuple[int, ...]]:
    """The recount's slices added up by `key` of a slice's key, the first `columns` counts."""
    sums: dict[tuple[Any, ...], list[int]] = {}
    for slice_key, values in raw.items():
        total = sums.setdefault(key(slice_key), [0] * columns)
        for i in range(columns):
            total[i] += values[i]
    return {k: tuple(v) for k, v in sums.items() if any(v)}


def _people(rows: Any) -> dict[tuple[int, str], int]:
    return {(int(c), str(s)): int(n) for c, s, n in rows if n}


async def kept_count_differences(engine: AsyncEngine) -> list[str]:
    """What the kept counts say that a recount of the rows does not (empty: they agree)."""
    async with engine.connect() as conn:
        await conn.execute(text("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ"))
        raw = _nonzero((await conn.execute(_RECOUNT)).all())
        kept = _nonzero((await conn.execute(_KEPT)).all())
        totals = _nonzero((await conn.execute(_TOTALS)).all(), 4)
        workspace = _nonzero((await conn.execute(_WORKSPACE)).all(), 2)
        people_raw = _people((await conn.execute(_PEOPLE_RECOUNT)).all())
        people_kept = _people((await conn.execute(_PEOPLE_KEPT)).all())
        people_rows = _people((await conn.execute(_PEOPLE_ROWS)).all())
        await conn.rollback()
    wrong = [
        f"slice {key}: kept {dict(zip(_COLUMNS, kept.get(key, ()), strict=False))} "
        f"!= rows {dict(zip(_COLUMNS, raw.get(key, ()), strict=False))}"
        for key in sorted(set(raw) | set(kept), key=str)
        if raw.get(key) != kept.get(key)
    ]
    # workspace, campaign, quarter, account, follow_on
    raw_totals = _rolled(raw, lambda k: (k[0], k[1], k[3], k[4]), len(_COLUMNS))
    if totals != raw_totals:
        wrong.append(f"campaign totals: kept {totals} != rows {raw_totals}")
    raw_workspace = _rolled(raw, lambda k: (k[0], k[2]), len(_STATE_NAMES))
    if workspace != raw_workspace:
        wrong.append(f"workspace slices: kept {workspace} != rows {raw_workspace}")
    if people_kept != people_raw:
        wrong.append(f"people per step: kept {people_kept} != rows {people_raw}")
    if people_rows != people_raw:
        wrong.append(f"funnel_people: {people_rows} != rows {people_raw}")
    return wrong
