"""CSV export of the filtered delivery log: RFC 4180 quoting, cells no spreadsheet runs as a
formula, the filters and the workspace applied, and a body streamed in batches.
"""

from __future__ import annotations

import csv
import io
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest

from app.clicks.recorder import SpooledClick, copy_clicks
from app.clicks.visitors import Visit
from app.db.models import LegState
from app.delivery_log.export import EXPORT_BATCH, HEADER, export_csv, safe_cell
from app.delivery_log.filters import LogFilter
from app.delivery_log.queries import Names, workspace_names
from app.resources import Resources
from app.settings import Settings
from tests.support.log_data import (
    Creator,
    add_campaign,
    add_log,
    add_logs,
    log_values,
    other_workspace,
    signed_in_creator,
)


@pytest.fixture
async def owner(
    settings: Settings, resources: Resources, test_env: dict[str, str]
) -> AsyncIterator[Creator]:
    async with signed_in_creator(settings, resources) as creator:
        yield creator


async def workspace_names_of(resources: Resources, workspace_id: int) -> Names:
    async with resources.sessionmaker() as session:
        return await workspace_names(session, workspace_id)


def _parse(body: bytes) -> list[list[str]]:
    text = body.decode("utf-8")
    assert text.startswith("\ufeff")  # spreadsheets then read UTF-8 right
    return list(csv.reader(io.StringIO(text[1:], newline="")))


def test_formula_cells_are_neutralised() -> None:
    for dangerous in ("=1+1", "+1", "-2", "@SUM(A1)", "\tx", "\rx", '=HYPERLINK("x")'):
        assert safe_cell(dangerous) == "'" + dangerous
    assert safe_cell("hello") == "hello"
    assert safe_cell(None) == ""
    assert safe_cell(-5) == -5  # our own numbers stay numbers
    assert safe_cell(LegState.SENT) == "SENT"


async def test_the_export_quotes_and_neutralises_what_fans_wrote(
    settings: Settings, resources: Resources, owner: Creator
) -> None:
    tricky = await add_campaign(
        resources, owner.workspace_id, owner.account_id, '=cmd|"/c calc"!A1'
    )
    texts = [
        'RECIPE, please — "the lemon one"',
        "line one\nline two\r\nline three",
        '=HYPERLINK("http://evil.example","click")',
        "+33 6 12 34 56 78",
        "-1",
        "@everyone RECIPE",
        "Ольга 山田 Zoë 🍋",
    ]
    base = datetime.now(UTC) - timedelta(minutes=10)
    ids = [
        await add_log(
            resources,
            owner,
            text=text,
            username="-dash.user" if n == 4 else "jane.doe",
            created_at=base + timedelta(seconds=n),
            campaign_id=tricky if n == 0 else owner.campaign_id,
            pr_error_message="ambiguous: HTTP 500" if n == 1 else None,
        )
        for n, text in enumerate(texts)
    ]
    response = await owner.client.get("/log/export.csv")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/csv")
    assert response.headers["content-disposition"].startswith(
        'attachment; filename="oncereply-log-'
    )
    rows = _parse(response.content)
    assert rows[0] == HEADER
    data = rows[1:]
    assert [int(row[1]) for row in data] == list(reversed(ids))  # newest first
    column = {name: HEADER.index(name) for name in HEADER}
    by_id = {int(row[1]): row for row in data}
    assert by_id[ids[0]][column["comment_text"]] == texts[0]
    assert by_id[ids[0]][column["campaign"]] == "'" + '=cmd|"/c calc"!A1'
    assert by_id[ids[1]][column["comment_text"]] == texts[1]  # newlines survive, quoted
    assert by_id[ids[2]][column["comment_text"]] == "'" + texts[2]
    assert by_id[ids[3]][column["comment_text"]] == "'" + texts[3]
    assert by_id[ids[4]][column["comment_text"]] == "'-1"
    assert by_id[ids[4]][column["commenter"]] == "'-dash.user"
    assert by_id[ids[5]][column["comment_text"]] == "'@everyone RECIPE"
    assert by_id[ids[6]][column["comment_text"]] == texts[6]
    assert by_id[ids[1]][column["dm_error"]] == "ambiguous: HTTP 500"
    assert by_id[ids[6]][column["account"]] == "sunny.bakes"
    assert by_id[ids[6]][column["dm_state"]] == "SENT"
    assert datetime.fromisoformat(by_id[ids[6]][column["created_at"]]).tzinfo is not None


async def test_the_export_streams_the_filtered_log_in_batches(
    settings: Settings, resources: Resources, owner: Creator
) -> None:
    other = await other_workspace(settings, resources)
    start = datetime.now(UTC) - timedelta(hours=2)
    total = EXPORT_BATCH * 2 + 500
    await add_logs(
        resources,
        [
            log_values(
                owner,
                state=LegState.FAILED if n % 5 == 0 else LegState.SENT,
                created_at=start + timedelta(milliseconds=n),
                username=f"fan{n}",
            )
            for n in range(total)
        ],
    )
    await add_logs(resources, [log_values(other, username="not.mine") for _ in range(30)])

    response = await owner.client.get("/log/export.csv")
    assert "content-length" not in response.headers  # a streamed body, length unknown upfront
    rows = _parse(response.content)[1:]
    assert len(rows) == total
    assert "not.mine" not in {row[HEADER.index("commenter")] for row in rows}
    keys = [(row[0], int(row[1])) for row in rows]
    assert keys == sorted(keys, reverse=True)
    assert len({row[1] for row in rows}) == total  # each row once across batch boundaries

    # What the response streams: the header, then one chunk per batch read, never all rows.
    names = await workspace_names_of(resources, owner.workspace_id)
    chunks = [
        chunk
        async for chunk in export_csv(resources.engine, owner.workspace_id, LogFilter(), names)
    ]
    assert len(chunks) == 1 + -(-total // EXPORT_BATCH)
    assert b"".join(chunks) == response.content

    failed = await owner.client.get("/log/export.csv?state=FAILED&q=fan1")
    failed_rows = _parse(failed.content)[1:]
    expected = [n for n in range(total) if n % 5 == 0 and "fan1" in f"fan{n}"]
    assert len(failed_rows) == len(expected)
    assert {row[HEADER.index("dm_state")] for row in failed_rows} == {"FAILED"}


async def test_each_row_carries_its_link_taps(
    settings: Settings, resources: Resources, owner: Creator
) -> None:
    tapped = await add_log(resources, owner, username="jane.doe")
    untouched = await add_log(resources, owner, username="omar")
    first = datetime(2026, 5, 1, 9, 30, tzinfo=UTC)
    await copy_clicks(
        resources.engine,
        [
            SpooledClick(bytes([n]) * 16, tapped, 0, visit, first + timedelta(minutes=n))
            for n, visit in enumerate([Visit.PREVIEW, Visit.CLICK, Visit.CLICK, Visit.CLICK])
        ],
    )
    names = await workspace_names_of(resources, owner.workspace_id)
    chunks = [c async for c in export_csv(resources.engine, owner.workspace_id, LogFilter(), names)]
    rows = {row[1]: row for row in _parse(b"".join(chunks))[1:]}
    taps, first_tap = HEADER.index("link_taps"), HEADER.index("first_tap_at")
    # The preview at 09:30 is not a tap: three taps, the first at 09:31.
    assert (rows[str(tapped)][taps], rows[str(tapped)][first_tap]) == (
        "3",
        "2026-05-01T09:31:00+00:00",
    )
    assert (rows[str(untouched)][taps], rows[str(untouched)][first_tap]) == ("0", "")
