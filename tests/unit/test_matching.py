"""Keyword modes across scripts, and the deterministic choice among matching campaigns."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from app.campaigns.matching import (
    CampaignRule,
    CommentFacts,
    Verdict,
    choose_campaign,
    keyword_is_matchable,
    match_keywords,
    normalize,
)
from app.db.models import Campaign, CampaignScope, CampaignStatus, MatchMode, MissReason

W, C, E, A = MatchMode.WHOLE_WORD, MatchMode.CONTAINS, MatchMode.EXACT, MatchMode.ANY_COMMENT

# (comment text, keyword, mode, expected match)
TABLE = [
    # Latin, case and accents
    ("GUIDE please", "guide", W, True),
    ("guidebook please", "guide", W, False),
    ("guidebook please", "guide", C, True),
    ("Café crème!", "cafe", W, True),
    ("CAFE", "café", E, True),
    ("Straße", "STRASSE", W, True),
    ("ｇｕｉｄｅ", "guide", W, True),  # full-width forms
    ("i want the e-book", "e-book", W, True),
    ("i want the e book", "e-book", W, True),
    ("i want the ebook", "e-book", W, False),
    ("send me the free guide!!", "free guide", W, True),
    ("send me the guide free", "free guide", W, False),
    ("free   guide", "free guide", E, True),
    ("the free guide", "free guide", E, False),
    ("LINK2024", "link", W, False),
    ("link 2024", "link", W, True),
    ("guide42", "42", C, True),
    # Cyrillic: inflected forms are different words
    ("Клод, привет!", "Клод", W, True),
    ("Привет Клодом", "Клод", W, False),
    ("Привет Клодом", "Клод", C, True),
    ("ЁЖИК", "ежик", W, True),  # ё folds to е, case-insensitive
    ("хочу ГАЙД", "гайд", W, True),
    # Greek: accents and final sigma
    ("Θέλω τον ΟΔΗΓΟ", "οδηγό", W, True),
    ("ΛΟΓΟΣ", "λόγος", E, True),
    ("λογοσ", "λόγος", W, True),
    ("οδηγός", "οδηγ", W, False),
    # Arabic: harakat and tatweel ignored, word boundaries by letters
    ("أريد الدليل من فضلك", "الدليل", W, True),
    ("أريد الدَّليل", "الدليل", W, True),
    ("أريد الدلـــيل", "الدليل", W, True),
    ("أريد الدليلين", "الدليل", W, False),
    ("أريد الدليلين", "الدليل", C, True),
    # CJK: no spaces, so whole-word only matches a keyword standing alone
    ("我爱猫咪", "猫", W, False),
    ("我爱猫咪", "猫", C, True),
    ("猫", "猫", W, True),
    ("猫！", "猫", E, True),
    ("ガイドください", "ガイド", C, True),
    ("ガイド ください", "ガイド", W, True),
    ("カイド", "ガイド", C, False),  # voicing marks are part of the kana
    ("가이드 주세요", "가이드", W, True),
    ("가이드주세요", "가이드", C, True),
    ("각", "가", C, False),  # Hangul stays composed: 가 is not inside 각
    # Emoji and punctuation separate words and are otherwise ignored
    ("🔥GUIDE🔥", "guide", W, True),
    ("guide🔥", "guide", E, True),
    ("«guide»", "guide", E, True),
    ("g.u.i.d.e", "guide", W, False),
    ("❤️❤️", "guide", W, False),
    # Zero-width characters inside a word do not split it
    ("gu\u200bide", "guide", W, True),
    # any comment: anything with text, emoji included
    ("🔥", "ignored", A, True),
    ("   ", "ignored", A, False),
]


@pytest.mark.parametrize(("text", "keyword", "mode", "expected"), TABLE)
def test_keyword_table(text: str, keyword: str, mode: MatchMode, expected: bool) -> None:
    result = match_keywords(text, [keyword], [], mode)
    assert result.matched is expected, (text, keyword, mode, normalize(text), normalize(keyword))
    if expected and mode is not A:
        assert result.keyword == keyword


def test_first_matching_keyword_is_recorded_in_the_campaigns_order() -> None:
    result = match_keywords("send LINK and GUIDE", ["guide", "link"], [], W)
    assert result.keyword == "guide"
    result = match_keywords("send LINK and GUIDE", ["pdf", "link", "guide"], [], W)
    assert result.keyword == "link"


def test_excluded_keywords_win_over_keywords_in_every_mode() -> None:
    for mode in (W, C, E, A):
        result = match_keywords("guide", ["guide"], ["guide"], mode)
        assert not result.matched
        assert result.excluded_by == "guide"
    whole = match_keywords("guide not for free", ["guide"], ["free"], W)
    assert whole.excluded_by == "free"
    # Whole-word exclusion does not fire inside a longer word; contains exclusion does.
    assert match_keywords("guide freedom", ["guide"], ["free"], W).matched
    assert match_keywords("guide freedom", ["guide"], ["free"], C).excluded_by == "free"
    assert match_keywords("Спам, гайд", ["гайд"], ["спам"], W).excluded_by == "спам"


def test_keywords_with_nothing_to_compare_never_match() -> None:
    assert not keyword_is_matchable(" !? ")
    assert keyword_is_matchable("猫")
    assert keyword_is_matchable("🔥🔥")  # an emoji keyword: see test_emoji_keywords
    assert not match_keywords("anything", [""], [], C).matched
    assert not match_keywords("!?", ["!?"], [], E).matched


# --- winner selection ---------------------------------------------------------------------

T0 = datetime(2026, 1, 1, tzinfo=UTC)
POST = "17900000000000001"
OTHER = "17900000000000002"


def rule(
    id_: int,
    *,
    scope: CampaignScope = CampaignScope.ANY_POST,
    media_id: str | None = None,
    keywords: tuple[str, ...] = ("guide",),
    excluded: tuple[str, ...] = (),
    priority: int = 0,
    age_days: int = 0,
    status: CampaignStatus = CampaignStatus.ACTIVE,
    activated_at: datetime | None = None,
    mode: MatchMode = W,
) -> CampaignRule:
    return CampaignRule(
        id=id_,
        name=f"c{id_}",
        status=status,
        scope=scope,
        media_id=media_id,
        keywords=keywords,
        excluded_keywords=excluded,
        match_mode=mode,
        priority=priority,
        created_at=T0 - timedelta(days=age_days),
        activated_at=activated_at,
    )


def facts(text: str = "GUIDE please", **kwargs: object) -> CommentFacts:
    return CommentFacts(text=text, media_id=kwargs.pop("media_id", POST), **kwargs)  # type: ignore[arg-type]


def test_a_specific_post_beats_any_post_whatever_the_priority() -> None:
    rules = [
        rule(1, priority=100, age_days=30),
        rule(2, scope=CampaignScope.POST, media_id=POST),
    ]
    decision = choose_campaign(rules, facts())
    assert decision.campaign_id == 2
    assert decision.matched_keyword == "guide"
    by_id = {c.campaign_id: c for c in decision.considered}
    assert by_id[1].verdict is Verdict.LOST
    assert by_id[1].lost_to == "c2"
    assert decision.to_json()["considered"][0] == {
        "campaign_id": 1,
        "name": "c1",
        "verdict": "lost",
        "keyword": "guide",
        "lost_to": "c2",
    }


def test_then_priority_then_oldest_then_smallest_id() -> None:
    assert choose_campaign([rule(1), rule(2, priority=5)], facts()).campaign_id == 2
    assert choose_campaign([rule(1), rule(2, age_days=1)], facts()).campaign_id == 2
    # A full tie (same post, priority and creation time): the smaller id, in any input order.
    tie = [rule(7), rule(3), rule(5)]
    assert choose_campaign(tie, facts()).campaign_id == 3
    assert choose_campaign(list(reversed(tie)), facts()).campaign_id == 3
    losers = [c for c in choose_campaign(tie, facts()).considered if c.verdict is Verdict.LOST]
    assert {c.campaign_id for c in losers} == {5, 7}
    assert {c.lost_to for c in losers} == {"c3"}


def test_an_ad_copy_matches_the_organic_posts_campaign() -> None:
    ad_comment = facts(media_id="17999999999999999", original_media_id=POST)
    rules = [rule(1, priority=9), rule(2, scope=CampaignScope.POST, media_id=POST)]
    assert choose_campaign(rules, ad_comment).campaign_id == 2
    elsewhere = facts(media_id=OTHER)
    decision = choose_campaign([rule(2, scope=CampaignScope.POST, media_id=POST)], elsewhere)
    assert decision.miss_reason is MissReason.NO_CAMPAIGN_FOR_POST
    assert decision.considered[0].verdict is Verdict.WRONG_POST


def test_next_post_matches_only_once_bound() -> None:
    unbound = rule(1, scope=CampaignScope.NEXT_POST)
    decision = choose_campaign([unbound], facts())
    assert decision.miss_reason is MissReason.NO_CAMPAIGN_FOR_POST
    assert decision.considered[0].verdict is Verdict.NOT_BOUND
    bound = rule(1, scope=CampaignScope.NEXT_POST, media_id=POST)
    assert choose_campaign([bound, rule(2, priority=50)], facts()).campaign_id == 1


def test_only_active_campaigns_and_only_after_activation() -> None:
    paused = rule(1, status=CampaignStatus.PAUSED)
    decision = choose_campaign([paused], facts())
    assert decision.miss_reason is MissReason.NO_ACTIVE_CAMPAIGN
    assert decision.considered[0].verdict is Verdict.INACTIVE
    assert choose_campaign([], facts()).miss_reason is MissReason.NO_ACTIVE_CAMPAIGN

    late = rule(1, activated_at=T0)
    early = facts(commented_at=T0 - timedelta(seconds=1))
    assert choose_campaign([late], early).miss_reason is MissReason.BEFORE_ACTIVATION
    assert choose_campaign([late], facts(commented_at=T0)).campaign_id == 1
    # A comment stamped (in whole seconds) in the second the campaign went live counts.
    mid_second = rule(1, activated_at=T0.replace(microsecond=0) + timedelta(milliseconds=700))
    same_second = facts(commented_at=T0.replace(microsecond=0))
    assert choose_campaign([mid_second], same_second).campaign_id == 1
    # Another campaign already active then still answers.
    assert choose_campaign([late, rule(2)], early).campaign_id == 2


def test_miss_reasons() -> None:
    rules = [rule(1, excluded=("spam",)), rule(2, keywords=("pdf",))]
    assert choose_campaign(rules, facts("nothing here")).miss_reason is MissReason.NO_KEYWORD
    excluded = choose_campaign(rules, facts("guide spam"))
    assert excluded.miss_reason is MissReason.EXCLUDED_KEYWORD
    assert excluded.considered[0].verdict is Verdict.EXCLUDED
    assert excluded.considered[0].keyword == "spam"
    assert choose_campaign(rules, facts("  ")).miss_reason is MissReason.EMPTY_TEXT
    own = choose_campaign(rules, facts(is_own=True))
    assert own.miss_reason is MissReason.OWN_COMMENT
    reply = choose_campaign(rules, facts(parent_id="17800000000000000"))
    assert reply.miss_reason is MissReason.REPLY_TO_COMMENT
    assert reply.to_json() == {
        "campaign_id": None,
        "campaign_name": None,
        "matched_keyword": None,
        "miss_reason": "reply_to_comment",
        "considered": [],
    }


def test_rule_from_a_campaign_row() -> None:
    campaign = Campaign(
        id=4,
        workspace_id=1,
        account_id=2,
        name="Guide",
        status=CampaignStatus.ACTIVE,
        scope=CampaignScope.POST,
        media_id=POST,
        keywords=["guide", "Гайд"],
        excluded_keywords=["spam"],
        match_mode=MatchMode.CONTAINS,
        priority=3,
        version=7,
        created_at=T0,
        activated_at=T0,
        public_reply_enabled=True,
        public_replies=["  ", "Check your DMs"],
    )
    built = CampaignRule.from_model(campaign)
    assert built.keywords == ("guide", "Гайд")
    assert built.public_reply is True
    assert built.version == 7
    assert choose_campaign([built], facts("гайдик", commented_at=T0)).matched_keyword == "Гайд"
