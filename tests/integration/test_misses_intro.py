"""The Misses page introduces itself in a creator's words: what it lists and that nothing is
left out, without the ledger, the reconciler or webhooks (those are ours, not theirs)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import pytest

from app.resources import Resources
from app.settings import Settings
from tests.support.log_data import Creator, signed_in_creator

HTML = {"accept": "text/html"}


@pytest.fixture
async def owner(settings: Settings, resources: Resources) -> AsyncIterator[Creator]:
    async with signed_in_creator(settings, resources) as creator:
        yield creator


async def test_the_misses_page_says_what_it_lists_in_plain_words(owner: Creator) -> None:
    page = (await owner.client.get("/log/misses", headers=HTML)).text
    intro = re.search(r"<h1>Misses</h1>.*?<p class=\"muted\">(.*?)</p>", page, re.DOTALL)
    assert intro, page[:2000]
    text = intro.group(1)
    assert "triggered no DM, and why" in text
    assert "None is left out" in text
    for jargon in ("ledger", "reconciler", "webhook"):
        assert jargon not in text.lower(), jargon
