"""Hypothesis-driven requests over every route in the app's route table, against a running
web process: path parameters, query strings, form fields and headers full of odd values
(ids past bigint, digits `int` refuses, days past 9999, odd Unicode, wrong types, huge
strings), signed and unsigned webhook bodies (deep nesting, huge numbers), as the owner, a
member and a stranger.

Each request fails the test when it gets a 5xx, an answer over `MAX_ANSWER_BYTES`, or when
it held the web process's event loop `STALL_S` or longer (the process logs its own stalls,
`tests.support.loop_stalls`; a stall counts only if the same request stalls again on each of
two replays, so a busy machine descheduling the process is not a finding).

The routes are read from `create_app(...).routes` when the tests are collected, so a route
added later is fuzzed without a change here. `FUZZ_PROFILE=short` (the default, in `make
test`) tries a few requests per route; `make fuzz` runs `long` and writes the count per route
to `test-results/fuzz-routes.json`.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import uuid
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.asgi import create_app
from app.settings import load_settings
from tests.support.fuzz_target import Target
from tests.support.infra import base_env
from tests.support.loop_stalls import stalls_in

PROFILES = {"short": 6, "long": 150}
EXAMPLES = PROFILES[os.environ.get("FUZZ_PROFILE", "short")]
MAX_ANSWER_BYTES = 2 * 1024 * 1024
STALL_S = 0.2
# Requests that end the identity's session or membership would turn the rest of the run into
# a stranger's; the stranger still tries them.
SIGNED_IN_SKIPS = {("POST", "/logout"), ("POST", "/team/leave")}
_PARAM = re.compile(r"\{(?P<name>[^:}]+)(?::(?P<kind>[^}]+))?\}")


@dataclass(frozen=True, slots=True)
class Route:
    method: str
    path: str  # the template, like /log/{dm_log_id:int}
    mount: bool = False  # an ASGI mount answers every path under it

    @property
    def id(self) -> str:
        return f"{self.method} {self.path}"


def _route_table() -> list[Route]:
    app = create_app(load_settings(base_env("postgresql://fuzz@127.0.0.1/fuzz", "redis://x")))
    found: set[Route] = set()
    for route in app.routes:
        methods = set(route.methods) or {"GET", "POST"}  # an ASGI route takes any method
        handler = getattr(route, "route_handler", None)
        mount = bool(getattr(handler, "is_mount", False))
        found.update(Route(m, route.path, mount) for m in methods - {"OPTIONS", "HEAD"})
    return sorted(found, key=lambda r: (r.path, r.method))


ROUTES = _route_table()

# Names the app's forms and filters use, so many requests reach real parsing code.
FIELD_NAMES = [
    "account",
    "after",
    "before",
    "campaign",
    "field",
    "from",
    "ids",
    "live",
    "next",
    "q",
    "reason",
    "refused",
    "remove",
    "retried",
    "state",
    "to",
    "v",
    "window",
    "workspace_id",
    "notice",
    "welcome",
    "code",
    "token",
    "comment",
    "media_id",
    "name",
    "account_id",
    "scope",
    "match_mode",
    "keywords",
    "keywords_entry",
    "excluded_keywords",
    "excluded_keywords_entry",
    "dm_text",
    "public_replies",
    "priority",
    "version",
    "once_per_person",
    "button_title_1",
    "button_url_1",
    "opening_dm_enabled",
    "opening_dm_text",
    "follow_up_enabled",
    "follow_up_text",
    "follow_up_delay_minutes",
    "dm_trigger_enabled",
    "follow_gate_enabled",
    "dm_image_url",
    "card_enabled",
    "card_title",
    "card_subtitle",
    "email",
    "password",
    "password2",
    "workspace",
    "role",
    "confirm",
    "back",
    "signed_request",
]

ODD_NUMBERS = st.one_of(
    st.integers(min_value=-(2**80), max_value=2**80).map(str),
    st.sampled_from(["99999999999999999999", "9223372036854775808", "-1", "0", "1e9", "1_0"]),
    st.sampled_from(["²", "١٢", "²:1", "1:²", "٣:٣", "+5", " 7", "0x10", "NaN", "Infinity"]),
)
ODD_DATES = st.sampled_from(
    ["9999-12-31", "10000-01-01", "0001-01-01", "2024-02-30", "2024-W01-1", "２０２４-01-01"]
)
ODD_TEXT = st.one_of(
    st.text(max_size=40),
    st.text(alphabet=st.characters(codec="utf-8"), max_size=400),
    st.sampled_from(["\x00", "\ud7ff", "\u202e", "{username}", "{link}", "<script>", "%00"]),
    st.binary(max_size=60).map(lambda b: b.hex()),
)
# Only a form carries these: a URL this long is refused by the client before it is sent.
HUGE_TEXT = st.integers(min_value=100, max_value=60_000).map(lambda n: "x," * n)


def _odd_value(known_ids: list[int], *, huge: bool = False) -> st.SearchStrategy[str]:
    odd = st.one_of(ODD_NUMBERS, ODD_DATES, ODD_TEXT, st.sampled_from(known_ids).map(str))
    return st.one_of(odd, HUGE_TEXT) if huge else odd


def _json_values() -> st.SearchStrategy[Any]:
    leaves = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**70), max_value=2**70),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=30),
    )
    return st.recursive(
        leaves,
        lambda inner: st.one_of(
            st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
        ),
        max_leaves=30,
    )


def _webhook_bodies() -> st.SearchStrategy[bytes]:
    deep = st.integers(min_value=1, max_value=5000).map(
        lambda n: b'{"object":"instagram","entry":' + b"[" * n + b"]" * n + b"}"
    )
    huge = st.integers(min_value=20, max_value=5000).map(
        lambda n: b'{"object":"instagram","entry":[{"id":' + b"9" * n + b',"time":1e999}]}'
    )
    shaped = _json_values().map(
        lambda v: json.dumps(
            {"object": "instagram", "entry": [{"id": "1", "changes": [v]}]}
        ).encode()
    )
    odd = st.one_of(_json_values().map(lambda v: json.dumps(v).encode()), st.binary(max_size=200))
    return st.one_of(deep, huge, shaped, odd)


@dataclass(frozen=True, slots=True)
class Attempt:
    who: str
    method: str
    url: str
    query: list[tuple[str, str]]
    form: list[tuple[str, str]]
    headers: dict[str, str]
    body: bytes | None = None


def _path_value(kind: str | None, known_ids: list[int]) -> st.SearchStrategy[str]:
    if kind == "int":
        return st.one_of(st.sampled_from(known_ids).map(str), ODD_NUMBERS)
    return ODD_TEXT.filter(bool)


@st.composite
def _attempts(draw: st.DrawFn, route: Route, target: Target) -> Attempt:
    who = draw(st.sampled_from(["owner", "member", "stranger"]))
    if who != "stranger" and (route.method, route.path) in SIGNED_IN_SKIPS:
        who = "stranger"
    path = route.path
    for match in _PARAM.finditer(route.path):
        value = draw(_path_value(match.group("kind"), target.known_ids))
        path = path.replace(match.group(0), quote(value, safe=""), 1)
    if route.mount:
        path += "/" + quote(draw(_path_value(None, target.known_ids)), safe="")
    names = st.one_of(st.sampled_from(FIELD_NAMES), st.text(min_size=1, max_size=12))
    pairs = st.lists(st.tuples(names, _odd_value(target.known_ids)), max_size=6)
    fields = st.lists(st.tuples(names, _odd_value(target.known_ids, huge=True)), max_size=6)
    headers = {"accept": draw(st.sampled_from(["text/html", "application/json", "*/*"]))}
    if draw(st.booleans()):
        headers |= {"hx-request": "true", "hx-current-url": draw(ODD_TEXT).encode().hex()}
    form: list[tuple[str, str]] = []
    body: bytes | None = None
    if route.path.startswith("/webhooks/") and route.method == "POST":
        body = draw(_webhook_bodies())
        signed = draw(st.booleans()) or draw(st.booleans())
        secret = target.webhook_secret.encode() if signed else b"wrong"
        digest = hmac.new(secret, body, hashlib.sha256).hexdigest()
        headers |= {"x-hub-signature-256": f"sha256={digest}", "content-type": "application/json"}
    elif route.method == "POST":
        form = draw(fields)
        if draw(st.integers(0, 9)):  # mostly with the form's tokens, sometimes without
            form += [("_csrf_token", target.csrf[who]), ("_idem", uuid.uuid4().hex)]
    return Attempt(who, route.method, path, draw(pairs), form, headers, body)


def _send(target: Target, attempt: Attempt) -> httpx.Response:
    client = target.clients[attempt.who]
    if attempt.body is not None:
        return client.request(
            attempt.method, attempt.url, content=attempt.body, headers=attempt.headers
        )
    return client.request(
        attempt.method,
        attempt.url,
        params=attempt.query,
        data=dict(_grouped(attempt.form)) if attempt.form else None,
        headers=attempt.headers,
    )


def _grouped(pairs: list[tuple[str, str]]) -> dict[str, list[str]]:
    grouped: dict[str, list[str]] = {}
    for name, value in pairs:
        grouped.setdefault(name, []).append(value)
    return grouped


def _stalled(target: Target, attempt: Attempt) -> float | None:
    """The longest stall this request caused, if it caused one each of three times."""
    worst = 0.0
    for _ in range(3):
        stalls = stalls_in(target.log.read(), at_least_s=STALL_S)
        if not stalls:
            return None
        worst = max(worst, *(s.seconds for s in stalls))
        _send(target, attempt)
    return worst if stalls_in(target.log.read(), at_least_s=STALL_S) else None


@pytest.mark.filterwarnings("ignore::hypothesis.errors.HypothesisWarning")
@pytest.mark.parametrize("route", ROUTES, ids=[r.id for r in ROUTES])
def test_route_survives_odd_requests(target: Target, route: Route) -> None:
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(attempt=_attempts(route, target))
    def one(attempt: Attempt) -> None:
        answer = _send(target, attempt)
        target.requests[route.id] += 1
        assert answer.status_code < 500, (attempt, answer.status_code, answer.text[:500])
        assert len(answer.content) <= MAX_ANSWER_BYTES, (attempt, len(answer.content))
        stall = _stalled(target, attempt)
        assert stall is None, (attempt, f"held the event loop {stall:.3f} s")

    target.log.skip()
    one()
