"""The webhook endpoint over real HTTP: handshake, signatures, refusals, and what gets stored."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import func, select

from app.db.models import (
    CampaignScope,
    Comment,
    DmLog,
    OperationalEvent,
    SeenVia,
    WebhookEvent,
    WebhookStatus,
)
from app.delivery.intake.comments import enqueue_deliveries, ingest_comments
from app.instagram.webhook_payload import comment_from_graph
from app.resources import Resources
from tests.integration.ingestion.conftest import MAX_BODY
from tests.support.processes import free_port, start_web, start_worker, wait_until
from tests.support.webhooks import (
    ACCOUNT,
    META_SECRET,
    REEL,
    VERIFY_TOKEN,
    comment_value,
    comments_body,
    ingest_received,
    meta_bytes,
    queued_keys,
    seed_account,
    seed_campaign,
    sign,
    signed_headers,
)


async def events(resources: Resources) -> list[WebhookEvent]:
    async with resources.sessionmaker() as session:
        result = await session.execute(select(WebhookEvent).order_by(WebhookEvent.id))
        return list(result.scalars())


async def count(resources: Resources, model: Any, *where: Any) -> int:
    async with resources.sessionmaker() as session:
        statement = select(func.count()).select_from(model).where(*where)
        return int((await session.execute(statement)).scalar_one())


async def eventually(check: Any, *, within_s: float = 10.0) -> None:
    """Poll `check` until it holds (never a fixed sleep); fail after `within_s`."""
    for _ in range(int(within_s / 0.05)):
        if await check():
            return
        await asyncio.sleep(0.05)
    raise TimeoutError(f"condition not met within {within_s:g} s")


async def post(
    client: httpx.AsyncClient, body: bytes, headers: dict[str, str] | None = None
) -> httpx.Response:
    chosen = signed_headers(body) if headers is None else headers
    return await client.post("/webhooks/instagram", content=body, headers=chosen)


async def test_verification_handshake(client: httpx.AsyncClient) -> None:
    ok = await client.get(
        "/webhooks/instagram",
        params={
            "hub.mode": "subscribe",
            "hub.verify_token": VERIFY_TOKEN,
            "hub.challenge": "1158201444",
        },
    )
    assert (ok.status_code, ok.text) == (200, "1158201444")
    for params in (
        {"hub.mode": "subscribe", "hub.verify_token": "nope", "hub.challenge": "1"},
        {"hub.mode": "unsubscribe", "hub.verify_token": VERIFY_TOKEN, "hub.challenge": "1"},
        {"hub.mode": "subscribe", "hub.verify_token": VERIFY_TOKEN},
        {},
    ):
        refused = await client.get("/webhooks/instagram", params=params)
        assert refused.status_code == 403, params
        assert refused.json()["status_code"] == 403
    assert (await client.put("/webhooks/instagram", content=b"{}")).status_code == 405


async def test_signed_by_either_secret_over_the_exact_raw_bytes(
    client: httpx.AsyncClient, resources: Resources
) -> None:
    # Meta's escapes: non-ASCII as \uXXXX and "/" as "\/". Re-serializing would change them.
    body = comments_body(comment_value("17870000000000100", "Grüße https://x.example/a"))
    assert b"\\u00fc" in body
    assert b"\\/" in body
    by_instagram = await post(client, body)
    by_meta = await post(client, body, signed_headers(body, META_SECRET))
    assert (by_instagram.status_code, by_instagram.text) == (200, "EVENT_RECEIVED")
    assert by_meta.status_code == 200
    stored = await events(resources)
    assert [(e.signature_key, e.body) for e in stored] == [("instagram", body), ("meta", body)]

    async def enqueued() -> bool:
        # One job per group of events stored together: `ingest:<first>-<last>`.
        covered: set[int] = set()
        for key in await queued_keys(resources):
            first, _, last = key.removeprefix("ingest:").partition("-")
            covered |= set(range(int(first), int(last) + 1))
        return covered == {e.id for e in stored}

    await eventually(enqueued)

    async def marked() -> bool:
        # ...and then marks them, so the outbox relay leaves them to those jobs.
        return all(e.status is WebhookStatus.ENQUEUED for e in await events(resources))

    await eventually(marked)


async def test_bad_signatures_are_refused_and_store_no_work(
    client: httpx.AsyncClient, resources: Resources
) -> None:
    body = comments_body(comment_value("17870000000000101"))
    digest = sign(body).removeprefix("sha256=")
    cases = {
        "missing": {"Content-Type": "application/json"},
        "wrong secret": {"X-Hub-Signature-256": sign(body, "not-our-secret")},
        "sha1 prefix": {"X-Hub-Signature-256": "sha1=" + digest[:40]},
        "no prefix": {"X-Hub-Signature-256": digest},
        "other body": {"X-Hub-Signature-256": sign(body + b" ")},
    }
    for name, headers in cases.items():
        refused = await post(client, body, headers)
        assert refused.status_code == 401, name
        assert refused.json()["status_code"] == 401
    assert await events(resources) == []
    assert await queued_keys(resources) == []
    recorded = await count(
        resources, OperationalEvent, OperationalEvent.kind == "webhook_signature_invalid"
    )
    assert recorded == len(cases)


async def test_refusal_events_are_throttled_but_every_refusal_is_answered(
    client: httpx.AsyncClient, resources: Resources
) -> None:
    for _ in range(12):
        assert (
            await post(client, b"{}", {"X-Hub-Signature-256": "sha256=" + "0" * 64})
        ).status_code == 401
    recorded = await count(
        resources, OperationalEvent, OperationalEvent.kind == "webhook_signature_invalid"
    )
    # At most 5 a minute; 12 refusals can straddle a minute boundary, so 5 to 10 rows.
    assert 5 <= recorded <= 10


async def test_signed_bodies_that_are_not_a_json_object_get_400_and_are_kept(
    client: httpx.AsyncClient, resources: Resources
) -> None:
    valid = comments_body(comment_value("17870000000000102"))
    bodies = [valid[:-7], b"{not json", b"", b"[1, 2, 3]", b'"instagram"', b"\xff\xfe{}"]
    for body in bodies:
        refused = await post(client, body)
        assert refused.status_code == 400, body
        assert refused.json()["detail"].startswith(("not JSON", "not a JSON object"))
    stored = await events(resources)
    assert [e.body for e in stored] == bodies
    assert {e.status for e in stored} == {WebhookStatus.REJECTED}
    assert all(e.reject_reason for e in stored)
    assert await queued_keys(resources) == []
    assert await count(resources, OperationalEvent, OperationalEvent.kind == "webhook_body_invalid")


async def test_signed_bodies_nested_too_deep_get_400_and_are_kept(
    client: httpx.AsyncClient, resources: Resources
) -> None:
    """Past the decoder's recursion limit (1000 levels) and just past ours (64): refused and
    kept, never an unhandled error; Meta's own nesting still passes."""
    bodies = [
        b'{"object":"instagram","entry":' + b"[" * 1000 + b"]" * 1000 + b"}",
        b'{"a":' * 1000 + b"1" + b"}" * 1000,
        b'{"a":' * 65 + b"1" + b"}" * 65,
    ]
    for body in bodies:
        refused = await post(client, body)
        assert refused.status_code == 400, refused.text
        assert "nested deeper than 64 levels" in refused.json()["detail"]
    stored = await events(resources)
    assert [e.body for e in stored] == bodies
    assert {e.status for e in stored} == {WebhookStatus.REJECTED}
    fine = b'{"object":"instagram","entry":[],"x":' + b'{"a":' * 60 + b"1" + b"}" * 60 + b"}"
    assert (await post(client, fine)).status_code == 200


async def test_large_bodies_are_checked_for_syntax_then_refused_whole_by_the_worker(
    client: httpx.AsyncClient, resources: Resources
) -> None:
    """Past 64 KB the web checks syntax only (building the objects would hold its event
    loop); what is wrong deeper in is the worker's to refuse, and the body is kept either
    way."""
    pad = "x" * 100_000
    not_an_object = meta_bytes([{"object": "instagram", "pad": pad}])
    refused = await post(client, not_an_object)
    assert refused.status_code == 400
    assert refused.json()["detail"] == "not a JSON object"
    broken = b'{"object":"instagram","entry":[' + b'{"id":"1"},' * 10_000 + b"]}"
    assert (await post(client, broken)).status_code == 400
    too_deep = b'{"object":"instagram","entry":[],"pad":"%s","deep":%s%s}' % (
        pad.encode(),
        b"[" * 70,
        b"]" * 70,
    )
    assert (await post(client, too_deep)).status_code == 200
    await ingest_received(resources)
    stored = await events(resources)
    assert [e.body for e in stored] == [not_an_object, broken, too_deep]
    assert [e.status for e in stored] == [WebhookStatus.REJECTED] * 3
    assert stored[2].reject_reason == "nested deeper than 64 levels"


async def test_bodies_over_the_cap_get_413_and_nothing_is_stored(
    client: httpx.AsyncClient, resources: Resources
) -> None:
    big = b'{"object":"instagram","entry":[],"pad":"' + b"x" * MAX_BODY + b'"}'
    announced = await post(client, big)
    assert announced.status_code == 413
    assert announced.json()["status_code"] == 413

    async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: capped while streaming
        for start in range(0, len(big), 64 * 1024):
            yield big[start : start + 64 * 1024]

    streamed = await client.post(
        "/webhooks/instagram",
        content=chunks(),
        headers={"X-Hub-Signature-256": sign(big), "Content-Type": "application/json"},
    )
    assert streamed.status_code == 413
    assert await events(resources) == []
    # A body just under the cap is fine.
    fits = meta_bytes({"object": "instagram", "entry": [], "pad": "x" * (MAX_BODY - 100)})
    assert (await post(client, fits)).status_code == 200


async def test_unknown_objects_and_wrong_types_are_accepted_then_recorded_by_ingest(
    client: httpx.AsyncClient, resources: Resources
) -> None:
    async with resources.sessionmaker() as session, session.begin():
        await seed_campaign(session, await seed_account(session))
    bad = comment_value("17870000000000103")
    bad["id"] = {"not": "an id"}
    for document in (
        {"object": "page", "entry": [{"id": "1", "time": 1, "changes": []}]},
        {"object": "instagram", "entry": "everything"},
        {
            "object": "instagram",
            "entry": [{"id": ACCOUNT, "changes": [{"field": "comments", "value": bad}]}],
        },
    ):
        assert (await post(client, meta_bytes(document))).status_code == 200
    await ingest_received(resources)
    stored = await events(resources)
    assert [e.status for e in stored] == [
        WebhookStatus.REJECTED,
        WebhookStatus.REJECTED,
        WebhookStatus.PROCESSED,
    ]
    assert stored[2].details is not None
    assert stored[2].details["problems"][0]["path"] == "entry[0].changes[0].value.id"
    assert await count(resources, Comment) == 0
    assert await count(resources, DmLog) == 0


async def test_the_same_comment_three_times_by_webhook_then_polled_is_one_of_each(
    client: httpx.AsyncClient, resources: Resources
) -> None:
    async with resources.sessionmaker() as session, session.begin():
        await seed_campaign(session, await seed_account(session))
    value = comment_value("17870000000000104", "Send the GUIDE 🙏")
    for body in (comments_body(value), comments_body(value, flat=True), comments_body(value)):
        assert (await post(client, body)).status_code == 200
    await ingest_received(resources)
    polled = comment_from_graph(
        ACCOUNT,
        REEL,
        {
            "id": "17870000000000104",
            "text": "Send the GUIDE 🙏",
            "from": {"id": "1254459154682919"},
        },
        fallback_time=(await events(resources))[0].received_at,
    )
    async with resources.sessionmaker() as session, session.begin():
        result = await ingest_comments(session, [polled], via=SeenVia.POLL)
    await enqueue_deliveries(resources.queue, result.deliveries)

    assert await count(resources, Comment) == 1
    assert await count(resources, DmLog) == 1
    deliveries = [key for key in await queued_keys(resources) if key.startswith("deliver:")]
    assert len(deliveries) == 1


async def test_a_thousand_comment_post(client: httpx.AsyncClient, resources: Resources) -> None:
    async with resources.sessionmaker() as session, session.begin():
        account = await seed_account(session)
        await seed_campaign(session, account, scope=CampaignScope.ANY_POST)
    values = [
        comment_value(f"19{n:015d}", "guide" if n % 2 else "wow", commenter_id=f"8{n:010d}")
        for n in range(1000)
    ]
    body = comments_body(*values)
    assert len(body) < MAX_BODY
    assert (await post(client, body)).status_code == 200
    summary = await ingest_received(resources)
    assert summary["items"] == 1000
    assert await count(resources, Comment) == 1000
    assert await count(resources, DmLog) == 500
    # Far more new comments than one batch of the account's budget may send at once: they go
    # to its pacer, with no job each.
    keys = await queued_keys(resources)
    assert [key for key in keys if key.startswith("deliver:")] == []
    assert [key for key in keys if key.startswith("pace:")] == [f"pace:{account.id}"]


async def test_database_down_answers_503_so_meta_redelivers(
    test_env: dict[str, str], artifacts_dir: Path
) -> None:
    closed = free_port()
    env = test_env | {"DATABASE_URL": f"postgresql://postgres@127.0.0.1:{closed}/nowhere"}
    port = free_port()
    web = start_web(env, port, artifacts_dir / "ingestion")
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=15) as http:
            body = comments_body(comment_value("17870000000000105"))
            unavailable = await post(http, body)
            assert unavailable.status_code == 503
            assert unavailable.headers["retry-after"] == "5"
            # Refusals do not depend on the database.
            assert (
                await post(http, body, {"X-Hub-Signature-256": sign(body, "x")})
            ).status_code == 401
            assert (await post(http, b"nope")).status_code == 400
    finally:
        web.stop()


async def test_through_real_web_and_worker_processes(
    test_env: dict[str, str], artifacts_dir: Path, client: httpx.AsyncClient, resources: Resources
) -> None:
    async with resources.sessionmaker() as session, session.begin():
        await seed_campaign(session, await seed_account(session))
    # Nothing in this test may reach Meta: point the Graph API at a closed port.
    worker = start_worker(
        test_env | {"GRAPH_API_BASE": f"http://127.0.0.1:{free_port()}/v25.0"},
        artifacts_dir / "ingestion",
    )
    try:
        assert (
            await post(client, comments_body(comment_value("17870000000000106")))
        ).status_code == 200

        async def ingested() -> bool:
            stored = await events(resources)
            return bool(stored) and stored[0].status is WebhookStatus.PROCESSED

        await eventually(ingested, within_s=30)
        assert await count(resources, Comment) == 1
        assert await count(resources, DmLog) == 1
    finally:
        worker.stop()
    wait_until(lambda: not worker.running, timeout=5, what="the worker to stop")
