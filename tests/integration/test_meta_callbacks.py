"""Meta's deauthorize and data-deletion callbacks over HTTP: a valid signed_request does its
work once, a repeat changes nothing (and gets the same confirmation code), a forged or
malformed one is refused and changes nothing; the status page answers for a code."""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest
from litestar.testing import AsyncTestClient
from sqlalchemy import func, select

from app.accounts.tokens import seal_access_token
from app.asgi import create_app
from app.db.models import (
    AccountStatus,
    Campaign,
    CampaignStatus,
    Comment,
    DataDeletionRequest,
    InstagramAccount,
    OperationalEvent,
    SeenVia,
)
from app.instagram.signed_request import make_signed_request
from app.resources import Resources
from app.settings import Settings
from tests.support.webhooks import (
    ACCOUNT,
    INSTAGRAM_SECRET,
    META_SECRET,
    OTHER_ACCOUNT,
    seed_account,
    seed_campaign,
)

APP_SCOPED = "27640875392278831"
FAN = "1254459154682919"


@pytest.fixture
async def client(settings: Settings) -> AsyncIterator[AsyncTestClient]:  # type: ignore[type-arg]
    async with AsyncTestClient(create_app(settings)) as test_client:
        yield test_client


async def _seed(resources: Resources) -> tuple[int, int]:
    """A connected account with a token and an active campaign, and another account that has
    a comment from FAN. Returns both account ids."""
    async with resources.sessionmaker() as session, session.begin():
        account = await seed_account(session, ACCOUNT)
        account.app_scoped_id = APP_SCOPED
        seal_access_token(resources.cipher, account, "IGAA-secret-token")
        await seed_campaign(session, account)
        other = await seed_account(session, OTHER_ACCOUNT, username="north.trails")
        session.add(
            Comment(
                account_id=other.id,
                comment_id="17870000000000900",
                media_id="17918195224110000",
                text="GUIDE please, I'm Jane from Leeds",
                commenter_id=FAN,
                commenter_username="jane.doe",
                commented_at=datetime.now(UTC),
                first_seen_via=SeenVia.WEBHOOK,
            )
        )
        return account.id, other.id


def _signed_raw(payload: bytes) -> str:
    """A correctly signed request whose payload is `payload` as it is."""
    encoded = base64.urlsafe_b64encode(payload).rstrip(b"=")
    digest = hmac.new(INSTAGRAM_SECRET.encode(), encoded, hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode() + "." + encoded.decode()


def _form(signed: str) -> dict[str, str]:
    return {"signed_request": signed}


async def test_deauthorize_disconnects_once_and_repeats_change_nothing(
    client: AsyncTestClient,
    resources: Resources,  # type: ignore[type-arg]
) -> None:
    account_id, _ = await _seed(resources)
    signed = make_signed_request({"user_id": APP_SCOPED, "issued_at": 1764633600}, INSTAGRAM_SECRET)
    first = await client.post("/meta/deauthorize", data=_form(signed))
    assert first.status_code == 200, first.text
    assert first.json() == {"ok": True, "accounts_disconnected": 1}
    again = await client.post("/meta/deauthorize", data=_form(signed))
    assert again.status_code == 200
    assert again.json() == {"ok": True, "accounts_disconnected": 0}
    async with resources.sessionmaker() as session:
        account = await session.get(InstagramAccount, account_id)
        assert account is not None
        assert account.status is AccountStatus.DISCONNECTED
        assert account.token_ciphertext is None
        assert account.status_reason
        assert "Instagram's settings" in account.status_reason
        statuses = (
            await session.scalars(select(Campaign.status).where(Campaign.account_id == account_id))
        ).all()
        assert statuses == [CampaignStatus.PAUSED]
        events = (
            await session.scalars(
                select(OperationalEvent.message).where(
                    OperationalEvent.kind == "account_deauthorized"
                )
            )
        ).all()
        assert len(events) == 1
        assert "@sunny.bakes removed OnceReply" in events[0]


async def test_deauthorize_signed_with_the_meta_secret_and_the_professional_id_works(
    client: AsyncTestClient,
    resources: Resources,  # type: ignore[type-arg]
) -> None:
    account_id, _ = await _seed(resources)
    signed = make_signed_request({"user_id": ACCOUNT}, META_SECRET)
    answer = await client.post("/meta/deauthorize", data=_form(signed))
    assert answer.json() == {"ok": True, "accounts_disconnected": 1}
    async with resources.sessionmaker() as session:
        account = await session.get(InstagramAccount, account_id)
        assert account is not None
        assert account.status is AccountStatus.DISCONNECTED


@pytest.mark.parametrize("path", ["/meta/deauthorize", "/meta/data-deletion"])
async def test_forged_and_malformed_signed_requests_are_refused_and_change_nothing(
    client: AsyncTestClient,
    resources: Resources,
    path: str,  # type: ignore[type-arg]
) -> None:
    account_id, _ = await _seed(resources)
    genuine = make_signed_request({"user_id": APP_SCOPED}, INSTAGRAM_SECRET)
    signature, _, payload = genuine.partition(".")
    other_payload = make_signed_request({"user_id": ACCOUNT}, INSTAGRAM_SECRET).partition(".")[2]
    forged = {
        "another secret": make_signed_request({"user_id": APP_SCOPED}, "not-our-secret"),
        "payload swapped": f"{signature}.{other_payload}",
    }
    malformed = {
        "missing": None,
        "empty": "",
        "no dot": signature + payload,
        "not base64": "%%%." + payload,
        "not json": _signed_raw(b"user_id=1"),
        "not an object": _signed_raw(b"[1]"),
        "no user": make_signed_request({"issued_at": 1}, INSTAGRAM_SECRET),
        "other algorithm": make_signed_request(
            {"user_id": APP_SCOPED, "algorithm": "none"}, INSTAGRAM_SECRET
        ),
        "huge": "a" * 10_000 + "." + payload,
    }
    for name, value in forged.items():
        answer = await client.post(path, data=_form(value))
        assert answer.status_code == 401, name
        assert answer.json()["detail"] == "signed_request mismatch"
    for name, value in malformed.items():
        answer = await client.post(path, data={} if value is None else _form(value))
        assert answer.status_code == 400, (name, answer.status_code, answer.text)
        assert (
            answer.json()["detail"] == f"signed_request {'missing' if not value else 'malformed'}"
        )
    async with resources.sessionmaker() as session:
        account = await session.get(InstagramAccount, account_id)
        assert account is not None
        assert account.status is AccountStatus.ACTIVE
        assert account.token_ciphertext is not None
        assert await session.scalar(select(func.count()).select_from(DataDeletionRequest)) == 0
        refusals = await session.scalar(
            select(func.count())
            .select_from(OperationalEvent)
            .where(OperationalEvent.kind == "meta_callback_signature_invalid")
        )
        assert refusals is not None
        assert refusals >= 1


async def test_data_deletion_deletes_the_account_and_answers_a_code_with_a_status_page(
    client: AsyncTestClient,
    resources: Resources,
    settings: Settings,  # type: ignore[type-arg]
) -> None:
    account_id, other_id = await _seed(resources)
    signed = make_signed_request({"user_id": APP_SCOPED, "issued_at": 1764633600}, INSTAGRAM_SECRET)
    first = await client.post("/meta/data-deletion", data=_form(signed))
    assert first.status_code == 200, first.text
    code = first.json()["confirmation_code"]
    assert first.json()["url"] == f"{settings.public_base_url}/meta/data-deletion/{code}"
    again = await client.post("/meta/data-deletion", data=_form(signed))
    assert again.json() == first.json()
    async with resources.sessionmaker() as session:
        assert await session.get(InstagramAccount, account_id) is None
        campaigns = await session.scalar(
            select(func.count()).select_from(Campaign).where(Campaign.account_id == account_id)
        )
        assert campaigns == 0
        assert await session.get(InstagramAccount, other_id) is not None
        requests = (await session.scalars(select(DataDeletionRequest))).all()
        assert [(r.confirmation_code, r.accounts_deleted) for r in requests] == [(code, 1)]
    page = await client.get(f"/meta/data-deletion/{code}")
    assert page.status_code == 200
    assert code in page.text
    assert (
        "Connected Instagram accounts deleted, with their campaigns, comments and messages: 1"
        in (page.text)
    )
    assert (await client.get("/meta/data-deletion/0123456789abcdef0123")).status_code == 404


async def test_data_deletion_for_a_fan_erases_their_words_and_username(
    client: AsyncTestClient,
    resources: Resources,  # type: ignore[type-arg]
) -> None:
    _, other_id = await _seed(resources)
    signed = make_signed_request({"user_id": FAN, "issued_at": 1764633601}, INSTAGRAM_SECRET)
    answer = await client.post("/meta/data-deletion", data=_form(signed))
    assert answer.status_code == 200
    async with resources.sessionmaker() as session:
        comment = await session.scalar(select(Comment).where(Comment.account_id == other_id))
        assert comment is not None
        assert (comment.text, comment.commenter_username) == ("", None)
        receipt = await session.scalar(select(DataDeletionRequest))
        assert receipt is not None
        assert (receipt.accounts_deleted, receipt.comments_anonymised) == (0, 1)
