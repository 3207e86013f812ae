"""Reading the tracked links a test finds in a fan's inbox."""

from __future__ import annotations

from app.clicks.links import LINK_PATH
from app.clicks.tokens import LinkTarget, link_key, read_token
from tests.support.infra import TEST_SECRET_KEY


def target_of(url: str, secret_key: str = TEST_SECRET_KEY) -> LinkTarget:
    """The delivery, button and destination a tracked link carries (fails on any other URL)."""
    _, marker, token = url.partition(LINK_PATH)
    assert marker, f"not a tracked link: {url}"
    target = read_token(link_key(secret_key), token)
    assert target is not None, f"a tracked link that does not verify: {url}"
    return target


def destination_of(url: str) -> str:
    return target_of(url).url


def destination_or_none(url: str) -> str | None:
    """The destination of a tracked link; None for any other URL."""
    _, marker, token = url.partition(LINK_PATH)
    target = read_token(link_key(TEST_SECRET_KEY), token) if marker else None
    return target.url if target else None
