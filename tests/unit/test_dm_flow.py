"""The pure parts of two-step DMs: payloads, the decision table, content, follow-up plans, and
which campaign a DM triggers."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from app.campaigns.dm_matching import choose_dm_campaign
from app.campaigns.matching import CampaignRule
from app.db.models import CampaignScope, CampaignStatus, MatchMode, MessageKind, TriggerKind
from app.delivery.content.compose import (
    DEFAULT_OPENING_BUTTON,
    CampaignTexts,
    follow_prompt,
    follow_up,
    opening_dm,
    reveal,
)
from app.delivery.content.follow_gate import (
    Path,
    comment_reply,
    decide,
    needs_follow_check,
    tap_path,
)
from app.delivery.content.follow_ups import FollowUpPlan, plan_follow_up
from app.delivery.content.postbacks import (
    Tap,
    TapAction,
    issue_payload,
    opening_payload,
    parse_payload,
    postback_key,
    prompt_payload,
)

REVEAL, PROMPT = MessageKind.REVEAL, MessageKind.FOLLOW_PROMPT

# --- payloads -------------------------------------------------------------------------------


def test_issued_payloads_parse_back() -> None:
    assert opening_payload(42, follow_gate=False) == "reveal:42:open"
    assert opening_payload(42, follow_gate=True) == "followcheck:42:open"
    assert prompt_payload(42) == "followcheck:42"
    for action in TapAction:
        for opening in (False, True):
            payload = issue_payload(action, 7, opening=opening)
            assert parse_payload(payload) == Tap(action, 7, opening=opening)
            assert Tap(action, 7, opening=opening).payload == payload


@pytest.mark.parametrize(
    "payload",
    [
        None,
        "",
        "GET_STARTED",
        "reveal:",
        "reveal:abc",
        "reveal:0",
        "reveal:-3",
        "reveal:12:closed",
        "followcheck:12:open:extra",
        "Reveal:12",
        "reveal:99999999999999999999",
        "reveal:12 ; drop",
    ],
)
def test_payloads_we_did_not_issue_are_refused(payload: str | None) -> None:
    assert parse_payload(payload) is None


def test_the_tap_key_is_a_stable_hash_of_account_campaign_person_and_mid() -> None:
    key = postback_key(1, 2, "1254459154682919", "aWdf-mid")
    assert len(key) == 64
    assert key == postback_key(1, 2, "1254459154682919", "aWdf-mid")
    assert key != postback_key(1, 2, "1254459154682919", "aWdf-other")
    assert key != postback_key(1, 3, "1254459154682919", "aWdf-mid")
    # No concatenation ambiguity between fields.
    assert postback_key(1, 23, "4", "m") != postback_key(12, 3, "4", "m")


# --- the decision table ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("opening", "gate", "sent"),
    [
        (False, False, MessageKind.REVEAL),
        (True, False, MessageKind.OPENING_DM),
        (False, True, MessageKind.FOLLOW_PROMPT),
        (True, True, MessageKind.OPENING_DM),  # opening DM → follow gate → link
    ],
)
def test_the_private_reply_to_a_comment(opening: bool, gate: bool, sent: MessageKind) -> None:
    assert comment_reply(opening_dm=opening, follow_gate=gate) is sent


def test_tap_paths() -> None:
    assert tap_path(Tap(TapAction.REVEAL, 1, opening=True)) is Path.OPENING_TAP
    assert tap_path(Tap(TapAction.FOLLOW_CHECK, 1, opening=True)) is Path.OPENING_TAP
    assert tap_path(Tap(TapAction.FOLLOW_CHECK, 1)) is Path.PROMPT_TAP
    assert tap_path(Tap(TapAction.REVEAL, 1)) is Path.OPENING_TAP


def test_follow_checks_only_where_meta_can_answer() -> None:
    assert not needs_follow_check(Path.COMMENT, follow_gate=True)  # 230: no consent yet
    for path in (Path.OPENING_TAP, Path.PROMPT_TAP, Path.DM_TRIGGER):
        assert needs_follow_check(path, follow_gate=True)
        assert not needs_follow_check(path, follow_gate=False)


TAPS_AND_DMS = [Path.OPENING_TAP, Path.PROMPT_TAP, Path.DM_TRIGGER]


@pytest.mark.parametrize(
    ("path", "follows", "rechecks_done", "sent", "recheck_in", "refused"),
    [
        # Gate on, follows: the link everywhere.
        *[(p, True, 0, REVEAL, None, False) for p in TAPS_AND_DMS],
        # Unknown: fail open after a tap, fail closed after a DM.
        (Path.OPENING_TAP, None, 0, REVEAL, None, False),
        (Path.PROMPT_TAP, None, 0, REVEAL, None, False),
        (Path.PROMPT_TAP, None, 2, REVEAL, None, False),
        (Path.DM_TRIGGER, None, 0, PROMPT, None, False),
        # Not following: ask (opening tap, DM) or check again after the lag (prompt tap).
        (Path.OPENING_TAP, False, 0, PROMPT, None, False),
        (Path.DM_TRIGGER, False, 0, PROMPT, None, False),
        (Path.PROMPT_TAP, False, 0, None, 20.0, False),
        (Path.PROMPT_TAP, False, 1, None, 40.0, False),
        (Path.PROMPT_TAP, False, 2, PROMPT, None, True),
        (Path.PROMPT_TAP, False, 5, PROMPT, None, True),
    ],
)
def test_the_gate(
    *,
    path: Path,
    follows: bool | None,
    rechecks_done: int,
    sent: MessageKind | None,
    recheck_in: float | None,
    refused: bool,
) -> None:
    step = decide(
        path,
        follow_gate=True,
        follows=follows,
        rechecks_done=rechecks_done,
        recheck_delays_s=(20.0, 40.0),
    )
    assert (step.send, step.recheck_in_s, step.refused) == (sent, recheck_in, refused)
    assert step.why


@pytest.mark.parametrize("path", TAPS_AND_DMS)
@pytest.mark.parametrize("follows", [True, False, None])
def test_without_the_gate_everyone_gets_the_link(path: Path, follows: bool | None) -> None:
    assert decide(path, follow_gate=False, follows=follows).send is REVEAL


def test_no_recheck_delays_means_asking_again_at_once() -> None:
    step = decide(Path.PROMPT_TAP, follow_gate=True, follows=False, recheck_delays_s=())
    assert (step.send, step.refused) == (PROMPT, True)


def test_a_comment_is_never_decided_by_a_check() -> None:
    with pytest.raises(ValueError, match="comment_reply"):
        decide(Path.COMMENT, follow_gate=True, follows=True)


# --- content ------------------------------------------------------------------------------

TEXTS = CampaignTexts(
    campaign_id=9,
    dm_text="Hi {username}! {link}",
    buttons=[{"title": "Recipe", "url": "https://example.com/r"}],
    opening_dm_text="Want it, {username}? {link}",
    opening_dm_button_title="Send me the link please!!",  # 25 characters: cut to 20
    follow_gate=True,
    follow_prompt_text="",
    follow_prompt_button_title=None,
)


def _template(body: dict[str, object]) -> dict[str, object]:
    attachment = body["attachment"]
    assert isinstance(attachment, dict)
    payload = attachment["payload"]
    assert isinstance(payload, dict)
    return payload


def test_the_opening_dm_is_a_one_button_postback_template() -> None:
    content = opening_dm(TEXTS, username="jane")
    assert content.kind is MessageKind.OPENING_DM
    assert content.fallbacks == (), "no text fallback: it would skip the tap"
    payload = _template(content.message.body)
    assert payload["text"] == "Want it, jane?"  # {link} has no place before the tap
    assert payload["buttons"] == [
        {"type": "postback", "title": "Send me the link ple", "payload": "followcheck:9:open"}
    ]


def test_the_prompt_has_defaults_and_the_reveal_a_text_fallback() -> None:
    prompt = follow_prompt(TEXTS, username=None)
    payload = _template(prompt.message.body)
    assert payload["buttons"] == [
        {"type": "postback", "title": "I'm following", "payload": "followcheck:9"}
    ]
    assert payload["text"]
    link = reveal(TEXTS, username="jane")
    assert link.kind is MessageKind.REVEAL
    assert link.message.kind == "template"
    [fallback] = link.fallbacks
    assert fallback.text == "Hi jane! https://example.com/r"
    untitled = opening_dm(CampaignTexts(campaign_id=1, dm_text="x", buttons=[]), username=None)
    assert _template(untitled.message.body)["buttons"] == [
        {"type": "postback", "title": DEFAULT_OPENING_BUTTON, "payload": "reveal:1:open"}
    ]


def test_a_follow_up_is_its_frozen_text_within_the_byte_limit() -> None:
    content = follow_up("  😀" * 400)
    assert content.kind is MessageKind.FOLLOW_UP
    assert content.message.body == {"text": content.message.text}
    assert len(content.message.text.encode()) <= 1000


# --- follow-up plans ----------------------------------------------------------------------

TAPPED = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def _plan(**changes: Any) -> FollowUpPlan | None:
    values: dict[str, Any] = {
        "trigger_kind": TriggerKind.POSTBACK,
        "message_kind": MessageKind.REVEAL,
        "enabled": True,
        "text": "Thanks {username}! Again: {link}",
        "delay_minutes": 90,
        "deadline_at": TAPPED + timedelta(hours=24),
        "username": "jane",
        "buttons": [{"title": "R", "url": "https://example.com/r"}],
    }
    return plan_follow_up(**(values | changes))


def test_a_follow_up_is_planned_from_the_interaction() -> None:
    plan = _plan()
    assert plan is not None
    assert plan.text == "Thanks jane! Again: https://example.com/r"
    assert plan.due_at == TAPPED + timedelta(minutes=90)
    assert plan.deadline_at == TAPPED + timedelta(hours=24)
    clamped = _plan(delay_minutes=5000, trigger_kind=TriggerKind.MESSAGE)
    assert clamped is not None
    assert clamped.due_at == TAPPED + timedelta(minutes=1440)


@pytest.mark.parametrize(
    "changes",
    [
        {"trigger_kind": TriggerKind.COMMENT},  # a private reply opens no window
        {"trigger_kind": TriggerKind.FOLLOW_UP},
        {"message_kind": MessageKind.FOLLOW_PROMPT},
        {"message_kind": MessageKind.OPENING_DM},
        {"enabled": False},
        {"text": "   "},
        {"deadline_at": None},
    ],
)
def test_no_follow_up_without_a_reveal_that_opened_the_window(changes: dict[str, Any]) -> None:
    assert _plan(**changes) is None


# --- DM keyword triggers --------------------------------------------------------------------

OLD = datetime(2026, 1, 1, tzinfo=UTC)


def _rule(id_: int, **changes: Any) -> CampaignRule:
    values: dict[str, Any] = {
        "id": id_,
        "name": f"c{id_}",
        "status": CampaignStatus.ACTIVE,
        "scope": CampaignScope.POST,
        "media_id": "1789",
        "keywords": ("guide",),
        "excluded_keywords": (),
        "match_mode": MatchMode.WHOLE_WORD,
        "priority": 0,
        "created_at": OLD + timedelta(days=id_),
        "dm_trigger": True,
    }
    return CampaignRule(**(values | changes))


def test_a_dm_picks_the_dm_trigger_campaign_by_priority_then_age() -> None:
    rules = [
        _rule(1, dm_trigger=False),
        _rule(2),
        _rule(3, priority=5),
        _rule(4, priority=5),
    ]
    match = choose_dm_campaign(rules, "Send the GUIDE pls")
    assert match is not None
    assert (match.campaign.id, match.keyword) == (3, "guide")
    # The post plays no part: a DM has none.
    assert choose_dm_campaign([_rule(5, scope=CampaignScope.ANY_POST, media_id=None)], "guide")


@pytest.mark.parametrize(
    ("rule", "text"),
    [
        (_rule(1), "guidebook"),
        (_rule(1, excluded_keywords=("refund",)), "guide refund"),
        (_rule(1, status=CampaignStatus.PAUSED), "guide"),
        (_rule(1, dm_trigger=False), "guide"),
        (_rule(1, match_mode=MatchMode.ANY_COMMENT), "anything at all"),
        (_rule(1, activated_at=TAPPED + timedelta(days=1)), "guide"),
        (_rule(1), "   "),
    ],
)
def test_dms_that_trigger_nothing(rule: CampaignRule, text: str) -> None:
    assert choose_dm_campaign([rule], text, sent_at=TAPPED) is None


# --- the re-check delays setting -------------------------------------------------------------


def test_follow_recheck_delays_are_a_setting() -> None:
    from app.settings import SettingsError, load_settings
    from tests.support.infra import base_env

    env = base_env("postgresql://postgres@127.0.0.1:5432/x", "redis://127.0.0.1:6379/1")
    assert load_settings(env).follow_recheck_delays_s == (20.0, 40.0)
    assert load_settings(env | {"FOLLOW_RECHECK_DELAYS_S": "5, 10,30"}).follow_recheck_delays_s == (
        5.0,
        10.0,
        30.0,
    )
    assert load_settings(env | {"FOLLOW_RECHECK_DELAYS_S": "none"}).follow_recheck_delays_s == ()
    for bad in ("0", "20,,40", "soon", "1,1,1,1,1,1", "601"):
        with pytest.raises(SettingsError, match="FOLLOW_RECHECK_DELAYS_S"):
            load_settings(env | {"FOLLOW_RECHECK_DELAYS_S": bad})
