"""Who opened a tracked link: a person, or a link-preview fetcher or prefetch.

Instagram (and every chat app a link is pasted into) fetches a link to draw its preview card,
and browsers prefetch; those visits are redirected like any other but counted apart, never as
clicks. A visit is a preview when it is a HEAD request, announces itself as a prefetch
(`Sec-Purpose`, `Purpose`, `X-Purpose`, `X-Moz`), has no user agent, or its user agent is a
known fetcher or crawler. Instagram's in-app browser ("… Instagram 312.0 …") is a person.
"""

from __future__ import annotations

import re
from enum import StrEnum

# Lower-case fragments of fetchers' and crawlers' user agents. Plain substring tests: a
# regular expression over this many alternatives cost ~25 times as much per click.
_FETCHERS = (
    "facebookexternalhit", "facebot", "facebookcatalog", "meta-external", "whatsapp",
    "telegrambot", "twitterbot", "slackbot", "slack-imgproxy", "discordbot", "linkedinbot",
    "skypeuripreview", "pinterestbot", "redditbot", "applebot", "googlebot",
    "google-inspectiontool", "bingbot", "bingpreview", "yandex", "baiduspider", "duckduckbot",
    "embedly", "iframely", "vkshare", "bot/", "crawler", "spider", "headlesschrome", "curl/",
    "wget/", "python-requests", "httpx",
)  # fmt: skip
_BOT_WORD = re.compile(r"\bbot\b")
_PREFETCH_HEADERS = (b"sec-purpose", b"purpose", b"x-purpose", b"x-moz")


class Visit(StrEnum):
    CLICK = "click"
    PREVIEW = "preview"


def classify(method: str, headers: dict[bytes, bytes]) -> Visit:
    if method == "HEAD":
        return Visit.PREVIEW
    for name in _PREFETCH_HEADERS:
        value = headers.get(name, b"").lower()
        if b"prefetch" in value or b"preview" in value or b"prerender" in value:
            return Visit.PREVIEW
    agent = headers.get(b"user-agent", b"").decode("latin-1")[:512].lower()
    if not agent.strip() or any(part in agent for part in _FETCHERS) or _BOT_WORD.search(agent):
        return Visit.PREVIEW
    return Visit.CLICK
