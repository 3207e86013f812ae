"""A page on the same site but another origin (another port on the host, a sibling
subdomain) cannot act for a signed-in creator, even with a CSRF cookie and field of its own.

The forgery below is the one a review confirmed: the attacker's page gets a valid token pair
from our sign-in page for itself, sets that `csrftoken` cookie for our host (cookies do not
keep ports apart) and posts "pause" with the matching field. The browser sends the
creator's session cookie along, and says where the form came from.
"""

from __future__ import annotations

import uuid

from litestar.testing import AsyncTestClient
from sqlalchemy import select

from app.asgi import CSRF_COOKIE, create_app
from app.db.models import Campaign, CampaignStatus
from app.resources import Resources
from app.settings import Settings
from tests.support.dashboard import csrf_token
from tests.support.log_data import signed_in_creator

OWN_ORIGIN = "http://testserver.local"


async def _status(resources: Resources, campaign_id: int) -> CampaignStatus:
    async with resources.sessionmaker() as session:
        status: CampaignStatus = (
            await session.execute(select(Campaign.status).where(Campaign.id == campaign_id))
        ).scalar_one()
        return status


async def _attackers_token_pair(settings: Settings) -> tuple[str, str]:
    """What any page can get for itself: our sign-in page's CSRF cookie and field."""
    async with AsyncTestClient(create_app(settings)) as attacker:
        page = await attacker.get("/login")
        cookie = attacker.cookies.get(CSRF_COOKIE)
        assert cookie
        return cookie, csrf_token(page.text)


async def test_a_same_site_page_on_another_origin_cannot_pause_a_campaign(
    settings: Settings, resources: Resources
) -> None:
    cookie, field = await _attackers_token_pair(settings)
    async with signed_in_creator(settings, resources) as creator:
        client = creator.client
        client.cookies.set(CSRF_COOKIE, cookie, domain="testserver.local")
        pause = f"/campaigns/{creator.campaign_id}/pause"
        for headers in (
            {"origin": "http://testserver.local:8081", "sec-fetch-site": "same-site"},
            {"origin": "http://shop.testserver.local", "sec-fetch-site": "same-site"},
            {"origin": "http://testserver.local:8081"},  # a browser without Sec-Fetch-*
            {"sec-fetch-site": "cross-site"},
            {"origin": "null"},
        ):
            forged = await client.post(
                pause,
                data={"_csrf_token": field, "_idem": str(uuid.uuid4())},
                headers={"accept": "text/html", **headers},
                follow_redirects=False,
            )
            assert forged.status_code == 403, (headers, forged.status_code)
            assert "sent from another site" in forged.text
        assert await _status(resources, creator.campaign_id) is CampaignStatus.ACTIVE

        # The creator's own page (same origin) still pauses it.
        page = await client.get(
            f"/campaigns/{creator.campaign_id}", headers={"accept": "text/html"}
        )
        own = await client.post(
            pause,
            data={"_csrf_token": csrf_token(page.text), "_idem": str(uuid.uuid4())},
            headers={"origin": OWN_ORIGIN, "sec-fetch-site": "same-origin"},
            follow_redirects=False,
        )
        assert own.status_code in (200, 303), own.text
        assert await _status(resources, creator.campaign_id) is CampaignStatus.PAUSED


async def test_machine_endpoints_are_not_origin_checked(settings: Settings) -> None:
    """The webhook authenticates by signature: Meta's POST carries no Origin of ours."""
    async with AsyncTestClient(create_app(settings)) as client:
        answer = await client.post(
            "/webhooks/instagram",
            content=b"{}",
            headers={"origin": "https://facebook.com", "sec-fetch-site": "cross-site"},
        )
        assert answer.status_code == 401  # no signature: refused by the webhook itself


async def test_a_no_referrer_page_of_ours_may_post_with_origin_null(
    settings: Settings, resources: Resources
) -> None:
    """The invite pages send `Referrer-Policy: no-referrer`, so Chromium posts their forms with
    `Origin: null`; `Sec-Fetch-Site: same-origin` says they are ours."""
    async with signed_in_creator(settings, resources) as creator:
        client = creator.client
        page = await client.get(
            f"/campaigns/{creator.campaign_id}", headers={"accept": "text/html"}
        )
        own = await client.post(
            f"/campaigns/{creator.campaign_id}/pause",
            data={"_csrf_token": csrf_token(page.text), "_idem": str(uuid.uuid4())},
            headers={"origin": "null", "sec-fetch-site": "same-origin"},
            follow_redirects=False,
        )
        assert own.status_code in (200, 303), own.text
        assert await _status(resources, creator.campaign_id) is CampaignStatus.PAUSED
