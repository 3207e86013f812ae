"""The kept click counts: copies racing on real connections count each click and person once.

The campaign page and the summary read `link_click_hours` (kept by the recorder's one
statement, `app.clicks.rollup`) instead of counting `link_clicks`; these tests race that
statement against itself on separate PostgreSQL connections, with replayed clicks and the
same people in several batches, and hold the counts against an oracle worked out here and
against a recount of the raw rows.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from sqlalchemy.ext.asyncio import create_async_engine

from app.clicks.recorder import SpooledClick, copy_clicks
from app.clicks.visitors import Visit
from app.db.models import MessageKind
from app.delivery_log.clicks import CampaignClicks, campaign_clicks
from app.resources import Resources
from app.settings import Settings
from tests.support.log_data import Creator, add_log, signed_in_creator

HOUR = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)


@pytest.fixture
async def owner(settings: Settings, resources: Resources) -> AsyncIterator[Creator]:
    async with signed_in_creator(settings, resources) as creator:
        yield creator


def _raw_url(settings: Settings) -> str:
    return settings.database_url.replace("+psycopg", "")


async def _copy_until_done(settings: Settings, batches: list[list[SpooledClick]]) -> int:
    """Every batch copied at once on its own connection; a batch PostgreSQL cancels (a deadlock
    between two copies of one replayed click) is copied again, as the recorder does."""
    engine = create_async_engine(settings.database_url, pool_size=len(batches), max_overflow=0)
    retried = 0
    try:
        waiting = list(batches)
        while waiting:
            outcomes = await asyncio.gather(
                *(copy_clicks(engine, batch) for batch in waiting), return_exceptions=True
            )
            failed = [b for b, o in zip(waiting, outcomes, strict=True) if o is not None]
            for outcome in outcomes:
                if outcome is not None and not isinstance(outcome, psycopg.errors.DeadlockDetected):
                    raise outcome
            retried += len(failed)
            waiting = failed
    finally:
        await engine.dispose()
    return retried


async def test_racing_copies_count_every_click_and_person_once(
    settings: Settings, resources: Resources, owner: Creator
) -> None:
    people = ["111", "111", "222", "333", "444", "555"]  # 111 got two deliveries
    rows = [
        await add_log(resources, owner, recipient_id=p, message_kind=MessageKind.REVEAL)
        for p in people
    ]
    clicks = []
    for n in range(120):
        row = rows[n % len(rows)]
        visit = Visit.PREVIEW if n % 7 == 0 else Visit.CLICK
        at = HOUR + timedelta(minutes=n * 2)  # four hours
        clicks.append(SpooledClick(os.urandom(16), row, n % 3 % 2, visit, at))
    # Eight copies at once, each with its own share and every other copy's first clicks again
    # (replays of one request, a segment copied twice).
    shared = clicks[:10]
    batches = [clicks[i::8] + shared for i in range(8)]
    await _copy_until_done(settings, batches)

    taps = [c for c in clicks if c.visit is Visit.CLICK]
    person_of = dict(zip(rows, people, strict=True))
    expected_people = {person_of[c.dm_log_id] for c in taps}
    shown = await _shown(resources, owner)
    assert (shown.taps, shown.people, shown.previews) == (
        len(taps),
        len(expected_people),
        len(clicks) - len(taps),
    )
    per_button = {b.button: (b.taps, b.people) for b in shown.buttons}
    assert per_button == {
        button: (
            sum(1 for c in taps if c.button == button),
            len({person_of[c.dm_log_id] for c in taps if c.button == button}),
        )
        for button in (0, 1)
    }
    # Per hour, as the charts read them: the raw rows and the kept counts agree.
    async with await psycopg.AsyncConnection.connect(_raw_url(settings)) as conn:
        kept = await (
            await conn.execute(
                "SELECT hour, button, taps, previews FROM link_click_hours ORDER BY 1, 2"
            )
        ).fetchall()
        raw = await (
            await conn.execute(
                "SELECT date_trunc('hour', clicked_at, 'UTC'), button, "
                "count(*) FILTER (WHERE visit = 'click'), "
                "count(*) FILTER (WHERE visit = 'preview') "
                "FROM link_clicks GROUP BY 1, 2 ORDER BY 1, 2"
            )
        ).fetchall()
        kept_quarters = await (
            await conn.execute(
                "SELECT quarter, button, taps FROM link_click_quarters ORDER BY 1, 2"
            )
        ).fetchall()
        raw_quarters = await (
            await conn.execute(
                "SELECT date_bin('15 minutes', clicked_at, TIMESTAMPTZ '2000-01-01 00:00+00'),"
                " button, count(*) FROM link_clicks WHERE visit = 'click' GROUP BY 1, 2"
                " ORDER BY 1, 2"
            )
        ).fetchall()
        people_total = await (
            await conn.execute("SELECT sum(people), sum(button_people) FROM link_click_hours")
        ).fetchone()
    assert len(kept) == 8  # four hours, two buttons
    assert kept == raw
    # Per 15-minute slice (the charts' taps): the same.
    assert len(kept_quarters) > len(kept)
    assert kept_quarters == raw_quarters
    assert sum(n for _, _, n in kept_quarters) == len(taps)
    assert people_total == (len(expected_people), sum(v[1] for v in per_button.values()))


async def test_a_batch_copied_again_changes_nothing(
    settings: Settings, resources: Resources, owner: Creator
) -> None:
    row = await add_log(resources, owner, recipient_id="111", message_kind=MessageKind.REVEAL)
    batch = [SpooledClick(os.urandom(16), row, 0, Visit.CLICK, HOUR) for _ in range(3)]
    await _copy_until_done(settings, [batch])
    first = await _shown(resources, owner)
    await _copy_until_done(settings, [batch, batch])
    again = await _shown(resources, owner)
    assert (first.taps, first.people) == (3, 1)
    assert again == first


async def test_no_taps_yet_is_zero(resources: Resources, owner: Creator) -> None:
    shown = await _shown(resources, owner)
    assert (shown.taps, shown.people, shown.previews, shown.rate_percent) == (0, 0, 0, None)


async def _shown(resources: Resources, owner: Creator) -> CampaignClicks:
    async with resources.sessionmaker() as session:
        return await campaign_clicks(
            session,
            workspace_id=owner.workspace_id,
            campaign_id=owner.campaign_id,
            buttons=[{"title": "Recipe", "url": "https://sunny.example/lemon"}] * 2,
        )
