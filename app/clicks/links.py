"""The tracked form of a campaign's links: `PUBLIC_BASE_URL/go/<token>`, UTM tags optional.

`LinkTracker.track(button, url)` is what the composer calls for each link button (and for
`{link}`, which is the first button's URL). With the campaign's UTM switch on, the
destination gains `utm_source=instagram&utm_medium=dm&utm_campaign=<campaign name>`; a
parameter the creator already put in the URL wins over ours. The result is deterministic: the
same delivery and button always give the same link, so a retried send says the same words.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from app.clicks.tokens import MAX_BUTTON, LinkTarget, make_token

LINK_PATH = "/go/"
UTM_SOURCE = "instagram"
UTM_MEDIUM = "dm"


def with_utm(url: str, campaign_name: str) -> str:
    """`url` with the default UTM tags added (the URL's own values kept)."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    present = {name for name, _ in query}
    tags = [
        ("utm_source", UTM_SOURCE),
        ("utm_medium", UTM_MEDIUM),
        ("utm_campaign", campaign_name.strip() or "oncereply"),
    ]
    added = [(name, value) for name, value in tags if name not in present]
    if not added:
        return url
    joined = "&".join(filter(None, [parts.query, urlencode(added)]))
    return urlunsplit(parts._replace(query=joined))


@dataclass(frozen=True, slots=True)
class LinkTracker:
    """Makes the tracked links of one delivery."""

    base_url: str
    key: bytes
    dm_log_id: int
    campaign_name: str = ""
    utm: bool = False

    def destination(self, url: str) -> str:
        return with_utm(url, self.campaign_name) if self.utm else url

    def track(self, button: int, url: str) -> str:
        if not url.startswith(("http://", "https://")) or not 0 <= button <= MAX_BUTTON:
            return url
        token = make_token(self.key, LinkTarget(self.dm_log_id, button, self.destination(url)))
        return f"{self.base_url}{LINK_PATH}{token}"
