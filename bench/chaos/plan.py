"""What the run does, decided before it starts (pure): who comments where, and the faults.

Comments: each fan comments on a few different posts (a campaign per post, so each is its own
delivery), and a few fans comment twice on the same post. Every fourth campaign lets a person
get its message again, so a second comment there is a second delivery with the same text to the
same fan; on the others it is a dedupe skip. A fan receives at most a handful of messages, so
the inbox check (which reads the 20 newest of a conversation) can see every one of them.

Faults: the sandbox applies the first matching rule of a kind, each rolled in turn, so a rule's
probability is conditional on the ones before it not firing. `conditional` turns the overall
shares wanted into those conditional probabilities.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

COMMENTS_PER_FAN = 8
REPEAT_SHARE = 0.03  # comments that are a fan's second comment on the same post
AGAIN_EVERY = 4  # every 4th campaign is not "once per person"
KEYWORD = "recipe"


@dataclass(frozen=True, slots=True)
class PlannedComment:
    fan: int
    post: int
    text: str


@dataclass(frozen=True, slots=True)
class Shape:
    comments: int
    posts: int
    fans: int


def shape_for(comments: int, per_post: int) -> Shape:
    """Posts so that none has more than `per_post` comments (the reconciler reads the newest
    800 of a post, at most 30 new ones per sweep), and fans for `COMMENTS_PER_FAN` each."""
    posts = max(2, math.ceil(comments / per_post))
    fans = max(2, math.ceil(comments * (1 - REPEAT_SHARE) / min(COMMENTS_PER_FAN, posts)))
    return Shape(comments, posts, fans)


def once_per_person(post: int) -> bool:
    return post % AGAIN_EVERY != AGAIN_EVERY - 1


def plan_comments(shape: Shape, rng: random.Random) -> list[PlannedComment]:
    """Exactly `shape.comments` comments, in the order they are made. Each (fan, post) pair
    is distinct but for the repeats, which come after the fan's first comment there."""
    repeats = round(shape.comments * REPEAT_SHARE)
    firsts = shape.comments - repeats
    per_fan = min(COMMENTS_PER_FAN, shape.posts)
    pairs: list[tuple[int, int]] = []
    fan = 0
    while len(pairs) < firsts:
        for post in rng.sample(range(shape.posts), per_fan):
            if len(pairs) < firsts:
                pairs.append((fan % shape.fans, post))
        fan += 1
    rng.shuffle(pairs)
    planned = [PlannedComment(f, p, f"RECIPE please! ({f}/{p})") for f, p in pairs]
    for _ in range(repeats):
        index = rng.randrange(len(planned))
        first = planned[index]
        again = PlannedComment(first.fan, first.post, f"recipe again? ({first.fan}/{first.post})")
        planned.insert(rng.randrange(index + 1, len(planned) + 1), again)
    return planned


def conditional(shares: Sequence[float]) -> list[float]:
    """Per-rule probabilities, each rolled only when the ones before did not fire, that give
    these overall shares."""
    left = 1.0
    probabilities: list[float] = []
    for share in shares:
        if share < 0 or share > left + 1e-12:
            raise ValueError("shares must be non-negative and add up to at most 1")
        probabilities.append(min(1.0, share / left) if left > 0 else 0.0)
        left -= share
    return probabilities


def _with_probabilities(rules: Sequence[tuple[float, dict[str, Any]]]) -> list[dict[str, Any]]:
    shares = [share for share, _ in rules]
    return [
        {**spec, "probability": round(p, 6), "share": share}
        for (share, spec), p in zip(rules, conditional(shares), strict=True)
    ]


def message_faults(send_timeout_s: float) -> list[dict[str, Any]]:
    """Send faults: ~5% deliver-then-error/hang/reset, ~5% retryable, ~3% final rejections."""
    return _with_probabilities(
        [
            (0.015, {"action": "deliver_then_error", "code": 1}),
            (0.010, {"action": "deliver_then_error", "code": 2}),
            (0.0125, {"action": "deliver_then_hang", "seconds": send_timeout_s + 1.5}),
            (0.0125, {"action": "deliver_then_reset"}),
            (0.030, {"action": "reject", "code": 4}),
            (0.020, {"action": "reject", "code": 17}),
            (0.020, {"action": "reject", "code": 551}),
            (0.010, {"action": "reject", "code": 10, "subcode": 2534022}),
        ]
    )


def webhook_faults() -> list[dict[str, Any]]:
    """10% of comment webhooks dropped (only the reconciler brings them back), 30% sent three
    times."""
    return _with_probabilities(
        [
            (0.10, {"action": "drop"}),
            (0.30, {"action": "duplicate", "count": 3}),
        ]
    )
