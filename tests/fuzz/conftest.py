"""The route fuzzer's target: a real web process (`tests.support.debug_web`, which logs every
stall of its event loop), a worker, the Instagram sandbox, real PostgreSQL and Redis, and three
people: the workspace's owner, a member, and a stranger with no account. Beside their
workspace, a neighbour's (`tests.support.fuzz_target.Neighbour`), with every kind of row a
path names.

Nothing here truncates between tests: the fuzzer's requests pile up on one seeded workspace,
as they would on a running server.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from app.db.models import MissReason, Role
from app.delivery_log.report_links import create_report_link
from app.jobs.registry import JOB_OPTIONS
from app.resources import Resources
from app.settings import load_settings
from app.workspaces.invites import InviteCreated, create_invite
from app.workspaces.service import create_user_with_workspace
from tests.support.dashboard import (
    PASSWORD,
    add_account,
    csrf_token,
    identity_of,
    sandbox_env,
    web_env_for,
)
from tests.support.fuzz_target import Neighbour, Target
from tests.support.log_data import (
    Creator,
    add_campaign,
    add_comment,
    add_log,
    add_member,
)
from tests.support.loop_stalls import LogWatch, start_debug_web
from tests.support.processes import free_port, start_worker, wait_until, worker_beating
from tests.support.sandbox_process import start_sandbox

OWNER = "owner@fuzz.example"
MEMBER = "member@fuzz.example"
# The neighbour's words: each is in one of its rows and must never reach the fuzzed people.
NEIGHBOUR_WORDS = {
    "owner": "quillon.owner@neighbour.example",
    "member": "quillon.member@neighbour.example",
    "invitee": "quillon.invitee@neighbour.example",
    "workspace": "Quillon Workshop",
    "account": "quillon.studio",
    "campaign": "Quillon secret launch",
    "fan": "quillon.fan",
    "comment": "QUILLONWORD please",
}


async def _seed(env: dict[str, str]) -> list[int]:
    """The owner's workspace with an account, a campaign and a delivery, and a member."""
    resources = await Resources.open(load_settings(env), jobs=JOB_OPTIONS)
    try:
        async with resources.sessionmaker() as session, session.begin():
            owner = await create_user_with_workspace(session, email=OWNER, password=PASSWORD)
        await add_member(resources, owner.workspace_id, MEMBER)
        account_id = await add_account(resources, owner.workspace_id)
        campaign_id = await add_campaign(resources, owner.workspace_id, account_id, "Fuzz")
        creator = Creator(None, owner.user_id, owner.workspace_id, account_id, campaign_id)
        dm_log_id = await add_log(resources, creator)
        return sorted({owner.workspace_id, account_id, campaign_id, dm_log_id})
    finally:
        await resources.close()


async def _seed_neighbour(env: dict[str, str]) -> Neighbour:
    """A second workspace with one row of each kind a path or a form names."""
    words = NEIGHBOUR_WORDS
    resources = await Resources.open(load_settings(env), jobs=JOB_OPTIONS)
    try:
        async with resources.sessionmaker() as session, session.begin():
            owner = await create_user_with_workspace(
                session, email=words["owner"], password=PASSWORD, workspace_name=words["workspace"]
            )
        await add_member(resources, owner.workspace_id, words["member"])
        member_id, _ = await identity_of(resources, words["member"])
        account_id = await add_account(
            resources, owner.workspace_id, ig_user_id="17841400000099999", username=words["account"]
        )
        campaign_id = await add_campaign(
            resources, owner.workspace_id, account_id, words["campaign"], keywords=["quillon"]
        )
        creator = Creator(None, owner.user_id, owner.workspace_id, account_id, campaign_id)
        dm_log_id = await add_log(resources, creator, username=words["fan"], text=words["comment"])
        await add_comment(
            resources,
            account_id,
            text=words["comment"],
            username=words["fan"],
            missed=MissReason.NO_KEYWORD,
        )
        async with resources.sessionmaker() as session, session.begin():
            invite = await create_invite(
                session,
                workspace_id=owner.workspace_id,
                inviter_id=owner.user_id,
                email=words["invitee"],
                role=Role.MEMBER,
            )
            link = await create_report_link(
                session,
                workspace_id=owner.workspace_id,
                campaign_id=campaign_id,
                user_id=owner.user_id,
            )
        assert isinstance(invite, InviteCreated)
        assert link is not None
        ids = {
            "workspace_id": owner.workspace_id,
            "account_id": account_id,
            "campaign_id": campaign_id,
            "dm_log_id": dm_log_id,
            "link_id": link.link_id,
            "invite_id": invite.invite_id,
            "user_id": member_id,
        }
        return Neighbour(owner.workspace_id, ids, tuple(words.values()))
    finally:
        await resources.close()


def _client(base_url: str, email: str | None) -> tuple[httpx.Client, str]:
    client = httpx.Client(base_url=base_url, timeout=60, follow_redirects=False)
    page = client.get("/login")
    token = csrf_token(page.text)
    if email is None:
        return client, token
    signed_in = client.post(
        "/login", data={"_csrf_token": token, "email": email, "password": PASSWORD}
    )
    assert signed_in.status_code == 303, signed_in.text
    return client, csrf_token(client.get("/", headers={"accept": "text/html"}).text)


@pytest.fixture(scope="session")
def target(test_env: dict[str, str], artifacts_dir: Path) -> Iterator[Target]:
    log_dir = artifacts_dir / "fuzz"
    with start_sandbox(sandbox_env(test_env), log_dir=log_dir) as sandbox:
        port = free_port()
        env = web_env_for(test_env, sandbox.base_url, f"http://127.0.0.1:{port}")
        # The slow clients of test_hostile_transport hang for as long as the test needs them
        # to, on a machine however busy; test_slow_clients checks the cut-off on its own web.
        env["REQUEST_READ_TIMEOUT_S"] = "120"
        known_ids = asyncio.run(_seed(env))
        neighbour = asyncio.run(_seed_neighbour(env))
        web = start_debug_web(env, port, log_dir)
        # With a worker, /health answers 200 (without one it says 503, rightly) and the
        # webhook events the fuzzer gets accepted are ingested as in production.
        worker = start_worker(env, log_dir)
        base_url = f"http://127.0.0.1:{port}"
        clients: dict[str, httpx.Client] = {}
        csrf: dict[str, str] = {}
        try:
            wait_until(
                lambda: worker_beating(port), timeout=90, what="the worker's first heartbeat"
            )
            for who, email in (("owner", OWNER), ("member", MEMBER), ("stranger", None)):
                clients[who], csrf[who] = _client(base_url, email)
            found = Target(
                base_url=base_url,
                web=web,
                log=LogWatch(str(web.log_path)),
                webhook_secret=env["INSTAGRAM_APP_SECRET"],
                clients=clients,
                csrf=csrf,
                known_ids=known_ids,
                neighbour=neighbour,
                database_url=env["DATABASE_URL"],
            )
            found.log.skip()
            yield found
            counts = dict(sorted(found.requests.items()))
            report = {"profile": os.environ.get("FUZZ_PROFILE", "short"), "requests": counts}
            report["total"] = sum(counts.values())
            (artifacts_dir / "fuzz-routes.json").write_text(json.dumps(report, indent=2))
        finally:
            for client in clients.values():
                client.close()
            worker.stop()
            web.stop()
