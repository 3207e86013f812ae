"""The delivery log with the DM rows of taps, DM keyword triggers and follow-ups: labelled, a
timeline that says what triggered them and links what they follow, and Retry within the
24-hour window they had (never after it)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from html import unescape

import pytest

from app.db.models import (
    LegState,
    MessageKind,
    MessagingEvent,
    MessagingEventKind,
    MessagingMissReason,
    TriggerKind,
)
from app.resources import Resources
from app.settings import Settings
from tests.support.dashboard import tokens
from tests.support.log_data import Creator, add_log, log_row, signed_in_creator

HTML = {"accept": "text/html"}


@pytest.fixture
async def owner(
    settings: Settings, resources: Resources, test_env: dict[str, str]
) -> AsyncIterator[Creator]:
    async with signed_in_creator(settings, resources) as creator:
        yield creator


async def _dm_rows(resources: Resources, owner: Creator, *, window: timedelta) -> dict[str, int]:
    now = datetime.now(UTC)
    comment = await add_log(
        resources, owner, state=LegState.SENT, message_kind=MessageKind.OPENING_DM
    )
    tap = await add_log(
        resources,
        owner,
        state=LegState.FAILED,
        trigger_kind=TriggerKind.POSTBACK,
        trigger_id="postback:" + "a" * 64,
        text="Send me the link",
        source_log_id=comment,
        message_kind=MessageKind.REVEAL,
        deadline_at=now + window,
    )
    dm = await add_log(
        resources,
        owner,
        state=LegState.SENT,
        trigger_kind=TriggerKind.MESSAGE,
        trigger_id="dm:aWdf-mid",
        text="recipe please",
        username=None,
        message_kind=MessageKind.REVEAL,
        deadline_at=now + window,
    )
    follow_up = await add_log(
        resources,
        owner,
        state=LegState.PENDING,
        trigger_kind=TriggerKind.FOLLOW_UP,
        trigger_id=f"followup:{dm}",
        text="Did you bake it?",
        source_log_id=dm,
        message_kind=MessageKind.FOLLOW_UP,
        deadline_at=now + window,
    )
    return {"comment": comment, "tap": tap, "dm": dm, "follow_up": follow_up}


async def test_dm_rows_are_labelled_linked_and_retryable_in_their_window(
    resources: Resources, owner: Creator
) -> None:
    rows = await _dm_rows(resources, owner, window=timedelta(hours=20))
    page = unescape((await owner.client.get("/log", headers=HTML)).text)
    labels = dict(re.findall(r'<tr id="log-(\d+)".*?<span class="kind">([^<]+)</span>', page, re.S))
    assert labels == {
        str(rows["tap"]): "Button tap",
        str(rows["dm"]): "DM",
        str(rows["follow_up"]): "Follow-up",
    }
    assert f'action="/log/{rows["tap"]}/retry"' in page

    timeline = unescape((await owner.client.get(f"/log/{rows['tap']}", headers=HTML)).text)
    assert "The button that was tapped" in timeline
    assert f'href="/log/{rows["comment"]}"' in timeline
    assert 'id="message-kind">The link<' in timeline
    follow_up = unescape((await owner.client.get(f"/log/{rows['follow_up']}", headers=HTML)).text)
    assert "<h2>The follow-up</h2>" in follow_up
    assert f'href="/log/{rows["dm"]}"' in follow_up

    form = {**tokens(timeline, f"/log/{rows['tap']}/retry"), "from": "timeline"}
    retried = await owner.client.post(
        f"/log/{rows['tap']}/retry", data=form, follow_redirects=False
    )
    assert retried.status_code == 303
    after = await log_row(resources, rows["tap"])
    assert after.pr_state is LegState.PENDING
    assert after.pr_attempt_limit == after.pr_attempts + 3
    assert await resources.queue.count("incomplete") == 1


async def test_a_dm_row_past_its_24_hours_cannot_be_retried(
    resources: Resources, owner: Creator
) -> None:
    rows = await _dm_rows(resources, owner, window=timedelta(seconds=-1))
    page = (await owner.client.get("/log", headers=HTML)).text
    assert f'action="/log/{rows["tap"]}/retry"' not in page
    timeline = unescape((await owner.client.get(f"/log/{rows['tap']}", headers=HTML)).text)
    assert "The 24-hour messaging window has closed" in timeline
    assert 'id="retry-button"' not in timeline


async def test_story_rows_are_labelled_and_the_log_filters_by_trigger(
    resources: Resources, owner: Creator
) -> None:
    rows = await _dm_rows(resources, owner, window=timedelta(hours=20))
    now = datetime.now(UTC)
    reply = await add_log(
        resources,
        owner,
        state=LegState.SENT,
        trigger_kind=TriggerKind.STORY_REPLY,
        trigger_id="story:aWdf-story",
        text="LOAF please",
        username=None,
        message_kind=MessageKind.REVEAL,
        deadline_at=now + timedelta(hours=20),
    )
    mention = await add_log(
        resources,
        owner,
        state=LegState.SENT,
        trigger_kind=TriggerKind.STORY_MENTION,
        trigger_id="mention:aWdf-mention",
        text=None,
        username=None,
        message_kind=MessageKind.REVEAL,
        deadline_at=now + timedelta(hours=20),
    )
    page = unescape((await owner.client.get("/log", headers=HTML)).text)
    labels = dict(re.findall(r'<tr id="log-(\d+)".*?<span class="kind">([^<]+)</span>', page, re.S))
    assert labels[str(reply)] == "Story reply"
    assert labels[str(mention)] == "Story mention"
    assert "mentioned you in their story" in page
    assert '<option value="story_reply" >Story reply</option>' in page

    only = unescape((await owner.client.get("/log?trigger=story_reply", headers=HTML)).text)
    shown = set(re.findall(r'<tr id="log-(\d+)"', only))
    assert shown == {str(reply)}
    assert '<option value="story_reply" selected>Story reply</option>' in only
    mentions = unescape((await owner.client.get("/log?trigger=story_mention", headers=HTML)).text)
    assert set(re.findall(r'<tr id="log-(\d+)"', mentions)) == {str(mention)}
    comments = unescape((await owner.client.get("/log?trigger=comment", headers=HTML)).text)
    assert set(re.findall(r'<tr id="log-(\d+)"', comments)) == {str(rows["comment"])}
    odd = unescape((await owner.client.get("/log?trigger=reel", headers=HTML)).text)
    assert "Ignored the trigger “reel”." in odd
    assert len(set(re.findall(r'<tr id="log-(\d+)"', odd))) == 6

    timeline = unescape((await owner.client.get(f"/log/{mention}", headers=HTML)).text)
    assert "<h2>The story that mentioned you</h2>" in timeline
    assert "They mentioned you in their story." in timeline
    replied = unescape((await owner.client.get(f"/log/{reply}", headers=HTML)).text)
    assert "<h2>The reply to your story</h2>" in replied
    assert "LOAF please" in replied


async def test_the_misses_view_lists_story_replies_and_mentions_that_got_no_dm(
    resources: Resources, owner: Creator
) -> None:
    now = datetime.now(UTC)
    events = [
        (
            "message:s1",
            "loaf refund",
            {"story": "reply", "story_id": "1790001", "story_miss": "excluded_keyword"},
        ),
        ("message:s2", None, {"story": "mention", "story_miss": "no_story_campaign"}),
        ("message:s3", "just a DM", None),
        ("message:s4", "nice story", {"story": "reply", "story_id": "1790001"}),
    ]
    async with resources.sessionmaker() as session, session.begin():
        for key, text, details in events:
            session.add(
                MessagingEvent(
                    account_id=owner.account_id,
                    kind=MessagingEventKind.MESSAGE,
                    dedupe_key=key,
                    user_id="1254459154682919",
                    mid=key.split(":")[1],
                    text=text,
                    occurred_at=now,
                    opens_window=True,
                    miss_reason=MessagingMissReason.NO_MATCH,
                    details=details,
                )
            )
    page = unescape((await owner.client.get("/log/misses?kind=stories", headers=HTML)).text)
    reasons = re.findall(r'<tr id="story-miss-\d+" class="miss-row" data-reason="([^"]*)"', page)
    assert sorted(reasons) == ["excluded_keyword", "no_story_campaign"]
    assert "A matching campaign excludes a word in it" in page
    assert "No active campaign answers these" in page
    assert "mentioned you in their story" in page
    assert '<option value="stories" selected>' in page
    searched = unescape(
        (await owner.client.get("/log/misses?kind=stories&q=refund", headers=HTML)).text
    )
    assert len(re.findall(r'<tr id="story-miss-', searched)) == 1
    # The comments' misses stay as they were.
    comments = unescape((await owner.client.get("/log/misses", headers=HTML)).text)
    assert "story-miss-" not in comments
