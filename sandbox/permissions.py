"""Meta's webhook field → permission matrix (Instagram Login): a field's events are sent only
for an account that granted what the field needs."""

from __future__ import annotations

from sandbox.tokens import BASIC, COMMENTS, MESSAGES

COMMENT_FIELDS = frozenset({"comments", "live_comments"})


def permissions_for(field: str) -> tuple[str, ...]:
    if field in COMMENT_FIELDS:
        return (BASIC, COMMENTS)
    return (MESSAGES,)
