"""A delivery whose account token cannot be opened sends nothing and waits for the account.

`app/delivery/send/steps.py:may_send` opens the token from the loaded row's copy of the
account's columns; a token sealed under a key this process does not have (a key rotated out
of ENCRYPTION_OLD_KEYS too soon), or none at all, must not reach Meta.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from app.db.models import LegState
from app.delivery.send.dispatch import deliver
from tests.integration.delivery.conftest import World


@pytest.mark.parametrize(
    "change",
    [
        "token_key_id = 'deadbeef'",
        "token_ciphertext = NULL",
    ],
    ids=["sealed under an unknown key", "no token stored"],
)
async def test_an_unusable_token_sends_nothing_and_the_comment_waits(
    world: World, change: str
) -> None:
    row = await world.comment()
    await world.execute(
        f"UPDATE instagram_accounts SET {change} WHERE id = :id",  # noqa: S608 - test constants
        id=world.account_id,
    )

    report = await deliver(world.resources, worker_id="worker-1", dm_log_id=row.id)

    assert any(note.startswith("no usable token") for note in report.notes), report
    log = await world.log(row.id)
    assert log.pr_state is LegState.PENDING
    assert log.pr_next_attempt_at is not None
    assert log.pr_next_attempt_at > datetime.now(UTC)
    assert "reconnect the account" in (log.pr_error_message or "")
    assert await world.attempts(row.id) == []
    assert world.inbox("jane.doe") == []
