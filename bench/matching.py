"""Keyword matching benchmark: `choose_campaign`, the CPU ingest spends on each comment.

    uv run python -m bench.matching            # full run (about half a minute)
    uv run python -m bench.matching --smoke    # seconds, for CI (exit status 1 on wrong answers)

Pure CPU, no services. An account with 20 active campaigns (`--campaigns`), in two sets:

- `text`: text keywords only (whole word, contains, exact; phrases; Cyrillic, Japanese);
- `mixed`: the same with a quarter turned into emoji keywords (🔥, 🙏🏽, 👨‍👩‍👧, 🇫🇷) and number
  codes (2024), and an excluded emoji (👎) everywhere, so every comment's emoji units and its
  look-alike readings are worked out too.

Each set against four kinds of comment (seeded, so every run sees the same ones): short ASCII,
short with emoji and accents, number codes typed with look-alike letters, and comments at
Instagram's 2,200-character limit. For each pair it prints the median time per comment over
`--repeat` rounds (µs of this process's CPU time, so a busy machine
skews it less) and comments per second; `checks` lists wrong decisions on a fixed set
of comments whose winner is known (an emoji variant, a read code, a longer number, a ZWJ
family member) — any makes the exit status 1.

Target (on one of 2 busy cores): a short comment against 20 campaigns ≤ 200 µs, one at the
2,200-character limit ≤ 5 ms, with emoji keywords and codes at most twice the text-only cost.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from app.campaigns.matching import CampaignRule, CommentFacts, choose_campaign
from app.db.models import CampaignScope, CampaignStatus, MatchMode

T0 = datetime(2026, 1, 1, tzinfo=UTC)
POST = "17900000000000001"
TEXT_KEYWORDS: list[tuple[tuple[str, ...], MatchMode]] = [
    (("recipe", "guide"), MatchMode.WHOLE_WORD),
    (("free pdf",), MatchMode.WHOLE_WORD),
    (("link",), MatchMode.CONTAINS),
    (("гайд", "рецепт"), MatchMode.WHOLE_WORD),
    (("レシピ",), MatchMode.CONTAINS),
    (("yes please",), MatchMode.EXACT),
    (("café", "crème"), MatchMode.WHOLE_WORD),
    (("workout", "plan"), MatchMode.WHOLE_WORD),
]
SPECIAL_KEYWORDS: list[tuple[tuple[str, ...], MatchMode]] = [
    (("🔥",), MatchMode.WHOLE_WORD),
    (("🙏🏽", "👍"), MatchMode.CONTAINS),
    (("👨‍👩‍👧",), MatchMode.WHOLE_WORD),
    (("🇫🇷",), MatchMode.EXACT),
    (("2024",), MatchMode.WHOLE_WORD),
    (("101", "777"), MatchMode.WHOLE_WORD),
]
WORDS = [
    "love",
    "this",
    "so",
    "much",
    "where",
    "did",
    "you",
    "get",
    "it",
    "omg",
    "need",
    "this",
    "looks",
    "amazing",
    "so",
    "pretty",
    "want",
    "one",
    "please",
    "share",
    "thanks",
    "beautiful",
    "nice",
    "work",
    "wow",
    "great",
]
ACCENTED = [
    "très",
    "joli",
    "crème",
    "brûlée",
    "naïve",
    "façade",
    "привет",
    "спасибо",
    "すごい",
    "かわいい",
]
EMOJI = ["😍", "❤️", "🔥", "👏🏼", "🙏🏾", "✨", "😂", "💯", "🏃‍♀️", "🇫🇷", "1️⃣"]
LIMIT = 2200


def rules(count: int, *, mixed: bool) -> list[CampaignRule]:
    """`count` active any-post campaigns; with `mixed`, a quarter have emoji or code keywords."""
    made: list[CampaignRule] = []
    for index in range(count):
        if mixed and index % 4 == 3:
            keywords, mode = SPECIAL_KEYWORDS[(index // 4) % len(SPECIAL_KEYWORDS)]
        else:
            keywords, mode = TEXT_KEYWORDS[index % len(TEXT_KEYWORDS)]
        made.append(
            CampaignRule(
                id=index + 1,
                name=f"c{index + 1}",
                status=CampaignStatus.ACTIVE,
                scope=CampaignScope.ANY_POST,
                media_id=None,
                keywords=keywords,
                excluded_keywords=("giveaway", "👎") if mixed else ("giveaway",),
                match_mode=mode,
                priority=0,
                created_at=T0 - timedelta(days=index),
            )
        )
    return made


def comments(kind: str, count: int, rng: random.Random) -> list[str]:
    def words(n: int, pool: list[str]) -> list[str]:
        return [rng.choice(pool) for _ in range(n)]

    made: list[str] = []
    for _ in range(count):
        if kind == "short_ascii":
            text = " ".join(words(rng.randint(2, 12), WORDS))
        elif kind == "short_emoji":
            mix = words(rng.randint(2, 8), WORDS + ACCENTED) + words(rng.randint(1, 4), EMOJI)
            rng.shuffle(mix)
            text = " ".join(mix)
        elif kind == "codes":
            code = rng.choice(["2O24", "2o24", "l0l", "12O245", "2024", "7O7", "IOI"])
            text = " ".join([*words(rng.randint(0, 4), WORDS), code, *words(2, WORDS)])
        else:
            parts: list[str] = []
            while sum(len(p) + 1 for p in parts) < LIMIT:
                parts.append(rng.choice(WORDS + ACCENTED + EMOJI))
            text = " ".join(parts)[:LIMIT]
        made.append(text)
    return made


def timed(campaigns: list[CampaignRule], texts: list[str], repeat: int) -> dict[str, Any]:
    facts = [CommentFacts(text=text, media_id=POST) for text in texts]
    rounds: list[float] = []
    for _ in range(repeat):
        started = time.process_time()
        for comment in facts:
            choose_campaign(campaigns, comment)
        rounds.append((time.process_time() - started) / len(facts))
    per_comment = statistics.median(rounds)
    return {
        "us_per_comment_p50": round(per_comment * 1e6, 1),
        "us_per_comment_min": round(min(rounds) * 1e6, 1),
        "comments_per_s": round(1 / per_comment),
    }


# (comment, winning campaign's first keyword or None, the word read as a code or None)
KNOWN: list[tuple[str, str | None, str | None]] = [
    ("RECIPE please!", "recipe", None),
    ("so good 🔥🔥", "🔥", None),
    ("🙏🏿 thank you", "🙏🏽", None),
    ("👨", None, None),
    ("👨‍👩‍👧 goals", "👨‍👩‍👧", None),
    ("🇫🇷!", "🇫🇷", None),
    ("code 2O24", "2024", "2O24"),
    ("code 12O245", None, None),
    ("lol", None, None),
    ("🔥 giveaway", None, None),
]


def checks(campaigns: list[CampaignRule]) -> list[str]:
    wrong: list[str] = []
    for text, winner, read in KNOWN:
        decision = choose_campaign(campaigns, CommentFacts(text=text, media_id=POST))
        won = decision.campaign.keywords[0] if decision.campaign is not None else None
        if (won, decision.read_as_digits) != (winner, read):
            wrong.append(f"{text!r}: won by {won!r} reading {decision.read_as_digits!r}")
    return wrong


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="a few seconds, for CI")
    parser.add_argument("--campaigns", type=int, default=20)
    parser.add_argument("--comments", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    count, repeat = (200, 3) if args.smoke else (args.comments, args.repeat)
    rng = random.Random(14)
    corpus = {
        kind: comments(kind, count if kind != "at_limit" else max(count // 10, 20), rng)
        for kind in ("short_ascii", "short_emoji", "codes", "at_limit")
    }
    sets = {
        "text": rules(args.campaigns, mixed=False),
        "mixed": rules(args.campaigns, mixed=True),
    }
    results = {
        name: {kind: timed(campaigns, texts, repeat) for kind, texts in corpus.items()}
        for name, campaigns in sets.items()
    }
    wrong = checks(sets["mixed"])
    print(
        json.dumps(
            {
                "campaigns": args.campaigns,
                "comments_per_kind": count,
                "repeat": repeat,
                "results": results,
                "checks": {"known_comments": len(KNOWN), "wrong": wrong},
            },
            indent=2,
            ensure_ascii=False,
        )
    )
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
