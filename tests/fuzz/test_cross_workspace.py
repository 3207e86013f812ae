"""Another workspace's rows, named every way a request can name them, by the fuzzed
workspace's owner and member: its ids in each path parameter (every route in the app's route
table that takes one), in every query field and form field that carries an id, in a complete
campaign form (the neighbour's account for a new campaign and for an edit), plain and as htmx.

Each answer must pass the sweep's check (no 5xx, no stack trace, a refusal with words in it),
a path naming the neighbour's row must be refused (4xx), and no answer, body or redirect, may
hold any of the neighbour's words (its names, emails, its fan and their comment). After each
route the neighbour's rows are as they were, and no row of the fuzzed workspace points at one
of the neighbour's (`_snapshot`): nothing was shown, changed, moved or borrowed across.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from urllib.parse import quote

import psycopg
import pytest

from tests.support.fuzz_target import Neighbour, Target
from tests.support.route_sweep import PARAM, Hostile, Route, check_answer, route_table, send_raw

ROUTES = route_table()
# Ending the person's session or membership would make the rest of the run a stranger's.
SKIPS = {("POST", "/logout"), ("POST", "/team/leave")}
# Every query or form field of the app that carries a row's id, and which of the
# neighbour's ids it is given.
ID_FIELDS = {
    "account": "account_id",
    "account_id": "account_id",
    "media_account": "account_id",
    "story_account": "account_id",
    "connected": "account_id",
    "campaign": "campaign_id",
    "campaign_id": "campaign_id",
    "shared": "link_id",
    "link_id": "link_id",
    "ids": "dm_log_id",
    "dm_log_id": "dm_log_id",
    "invited": "invite_id",
    "invite_id": "invite_id",
    "user_id": "user_id",
    "workspace_id": "workspace_id",
}
FORM = (b"content-type", b"application/x-www-form-urlencoded")
HTMX = ((b"hx-request", b"true"), (b"hx-current-url", b"http://127.0.0.1/"))


def _id_fields(neighbour: Neighbour) -> bytes:
    return b"&".join(f"{name}={neighbour.ids[kind]}".encode() for name, kind in ID_FIELDS.items())


def _form(target: Target, who: str, fields: bytes) -> bytes:
    tokens = f"_csrf_token={quote(target.csrf[who])}&_idem={uuid.uuid4().hex}".encode()
    return fields + b"&" + tokens


def _campaign_form(target: Target, who: str) -> bytes:
    """A campaign the editor would save, on the neighbour's account."""
    fields = {
        "name": "Borrowed account",
        "account_id": str(target.neighbour.ids["account_id"]),
        "scope": "any_post",
        "match_mode": "whole_word",
        "keywords": "borrow",
        "dm_text": "Hello {username}",
        "once_per_person": "on",
        "priority": "0",
        "version": "1",
        "activate": "1",
    }
    return _form(target, who, "&".join(f"{k}={quote(v)}" for k, v in fields.items()).encode())


def _path(route: Route, ids: dict[str, int]) -> bytes | None:
    """The route's path with each int parameter given `ids`' value; None when the route
    has a text parameter (a token is a capability, not a row's id) or no int one."""
    path = route.path
    found = False
    for match in PARAM.finditer(route.path):
        if match.group("kind") != "int":
            return None
        path = path.replace(match.group(0), str(ids[match.group("name")]), 1)
        found = True
    return path.encode() if found else None


def _swept(route: Route) -> bool:
    """Every route but those that end the session, the static files and the webhook (no
    workspace's rows behind them), and `/metrics`: it answers the operator (a loopback client,
    as the fuzzer is, or the bearer of METRICS_TOKEN), not a workspace's people, and names
    every active account by design (so this test failed whenever the neighbour's account was
    still active when it was asked)."""
    return not (
        (route.method, route.path) in SKIPS
        or route.mount
        or route.path.startswith("/webhooks/")
        or route.path == "/metrics"
    )


def _requests(route: Route, target: Target) -> Iterator[tuple[Hostile, bool]]:
    """Each request with whether it names the neighbour's row in its path (then it must be
    refused)."""
    neighbour = target.neighbour.ids
    own = dict.fromkeys(neighbour, target.known_ids[0])
    paths: list[bytes] = []
    if (theirs := _path(route, neighbour)) is not None:
        paths.append(theirs)
        # Our parent row with their child row (a campaign of ours, their report link).
        for name in neighbour:
            mixed = _path(route, {**neighbour, name: own[name]})
            if mixed is not None and mixed not in paths and mixed != _path(route, own):
                paths.append(mixed)
    method = route.method.encode()
    post = method == b"POST"
    plain = _path(route, own) or route.path.encode()
    query = plain + b"?" + _id_fields(target.neighbour)
    # The owner plain and as htmx (a partial is another template), the member plain; a route
    # naming no row in its path shows the same workspace to both, and a POST no partial.
    people = [("owner", ()), ("owner", HTMX), ("member", ())]
    if not paths:
        people = people[:1] if post else people[:2]
    for who, htmx in people:
        headers = (FORM, *htmx) if post else htmx
        body = _form(target, who, b"") if post else b""
        for path in paths:
            yield Hostile("their id in the path", who, method, path, headers, body), True
        if post:
            body = _form(target, who, _id_fields(target.neighbour))
        yield Hostile("their ids in the query and form", who, method, query, headers, body), False
    if post and route.path.startswith("/campaigns"):
        body = _campaign_form(target, "owner")
        yield Hostile("their account in a campaign", "owner", method, plain, (FORM,), body), False


_SNAPSHOT = [
    "SELECT id, name, time_zone FROM workspaces WHERE id = %(ws)s",
    "SELECT workspace_id, user_id, role FROM workspace_members"
    " WHERE workspace_id = %(ws)s OR user_id = ANY(%(users)s) ORDER BY 1, 2",
    "SELECT id, email, password_hash FROM users WHERE id = ANY(%(users)s) ORDER BY id",
    "SELECT id, email, role, accepted_at, revoked_at FROM workspace_invites"
    " WHERE workspace_id = %(ws)s ORDER BY id",
    # The worker may find the account's token refused (needs_reauth); only a person disconnects.
    "SELECT id, workspace_id, status = 'disconnected', username, md5(token_ciphertext),"
    " webhook_subscribed_at FROM instagram_accounts WHERE workspace_id = %(ws)s ORDER BY id",
    "SELECT c.id, c.workspace_id, c.account_id, c.name, c.status, c.version FROM campaigns c"
    " WHERE c.workspace_id = %(ws)s OR c.account_id IN"
    " (SELECT id FROM instagram_accounts WHERE workspace_id = %(ws)s) ORDER BY c.id",
    "SELECT l.id, l.workspace_id, l.account_id, l.campaign_id, l.pr_state FROM dm_logs l"
    " WHERE l.workspace_id = %(ws)s OR l.account_id IN"
    " (SELECT id FROM instagram_accounts WHERE workspace_id = %(ws)s) OR l.campaign_id IN"
    " (SELECT id FROM campaigns WHERE workspace_id = %(ws)s) ORDER BY l.id",
    "SELECT r.id, r.workspace_id, r.campaign_id, r.revoked_at FROM campaign_report_links r"
    " WHERE r.workspace_id = %(ws)s OR r.campaign_id IN"
    " (SELECT id FROM campaigns WHERE workspace_id = %(ws)s) ORDER BY r.id",
]


def _snapshot(target: Target) -> list[list[tuple[object, ...]]]:
    """The neighbour's rows, and any row of another workspace that points at them."""
    with psycopg.connect(target.database_url) as conn:
        users = [
            row[0]
            for row in conn.execute(
                "SELECT user_id FROM workspace_members WHERE workspace_id = %s",
                (target.neighbour.workspace_id,),
            )
        ]
        params = {"ws": target.neighbour.workspace_id, "users": users}
        return [conn.execute(query, params).fetchall() for query in _SNAPSHOT]


SWEPT = [route for route in ROUTES if _swept(route)]


@pytest.mark.parametrize("route", SWEPT, ids=[r.id for r in SWEPT])
def test_neighbour_rows_stay_unseen_and_unchanged(target: Target, route: Route) -> None:
    before = _snapshot(target)
    words = [word.lower() for word in target.neighbour.words]
    for hostile, names_theirs in _requests(route, target):
        answer = send_raw(target, hostile)
        target.requests[route.id] += 1
        what = (route.id, hostile.what, hostile.who, hostile.target[:120])
        check_answer(what, answer.status, answer.headers, answer.text)
        seen = (answer.text + answer.headers.get("location", "")).lower()
        for word in words:
            assert word not in seen, (what, answer.status, word)
        if names_theirs:
            assert 400 <= answer.status < 500, (what, answer.status, answer.text[:300])
    assert _snapshot(target) == before, route.id
