"""Hypothesis-driven requests over every route in the app's route table, against a running
web process: path parameters, query strings, form fields and headers full of odd values
(ids past bigint, digits `int` refuses, days past 9999, odd Unicode, wrong types, huge
strings), signed and unsigned webhook bodies (deep nesting, huge numbers), as the owner, a
member and a stranger.

Beside them, a fixed hostile sweep on every route (`test_route_refuses_hostile_requests_clearly`),
written byte for byte (`tests.support.raw_http`) so nothing is cleaned up on the way: a method
the route does not take, ids no row can have, path traversal raw and escaped, invalid UTF-8,
cut-short escapes and NUL in the path, the query and the form, numbers past int64, days out
of range, repeated parameters and fields, five thousand parameters, forms past the body limit,
wrong content types (bad JSON, multipart without a boundary, text/plain, none), multipart parts
that are files or not in their character set, CSRF tokens that are not ASCII (header, cookie,
field), a forged session, methods no one knows, ranges no file has, an Expect header not
100-continue, overlong and undecodable headers, odd htmx, proxy and cache headers, Host headers
with a port no URL can hold or of another site, bad webhook bodies signed correctly; as the
owner, and in part as a member and a stranger.

Every route that answers GET is also asked with HEAD (`test_head_answers_like_get`): the same
status, content type and security headers as its GET twin, and no body.

Each request fails the test when it gets a 5xx, a body with a stack trace in it, a refusal
that is neither an HTML page with words in it nor JSON with a `detail`, an answer over
`MAX_ANSWER_BYTES`, or when it held the web process's event loop `STALL_S` or longer (the
process logs its own stalls, `tests.support.loop_stalls`; a stall counts only if the same
request stalls again on each of two replays, so a busy machine descheduling the process is
not a finding). The one refusal allowed to be plain text is the HTTP server's own, for a
request line it cannot parse: the app never sees that request.

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
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.fuzz_target import Target
from tests.support.loop_stalls import stalls_in
from tests.support.raw_http import multipart_part
from tests.support.route_sweep import PARAM, Hostile, Route, check_answer, route_table, send_raw

PROFILES = {"short": 6, "long": 150}
EXAMPLES = PROFILES[os.environ.get("FUZZ_PROFILE", "short")]
MAX_ANSWER_BYTES = 2 * 1024 * 1024
STALL_S = 0.2
# Requests that end the identity's session or membership would turn the rest of the run into
# a stranger's; the stranger still tries them.
SIGNED_IN_SKIPS = {("POST", "/logout"), ("POST", "/team/leave")}


ROUTES = route_table()

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
    for match in PARAM.finditer(route.path):
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


def _stalled(target: Target, replay: Callable[[], object]) -> float | None:
    """The longest stall the request just sent caused, if it caused one each of three times."""
    worst = 0.0
    for _ in range(3):
        stalls = stalls_in(target.log.read(), at_least_s=STALL_S)
        if not stalls:
            return None
        worst = max(worst, *(s.seconds for s in stalls))
        replay()
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
        check_answer(attempt, answer.status_code, answer.headers, answer.text)
        assert len(answer.content) <= MAX_ANSWER_BYTES, (attempt, len(answer.content))
        stall = _stalled(target, lambda: _send(target, attempt))
        assert stall is None, (attempt, f"held the event loop {stall:.3f} s")

    target.log.skip()
    one()


# --- the hostile sweep: the same fixed set of bad requests on every route ------------------

# What a path parameter is given: ids no row can have or no int parser takes, and text no
# handler can look up (traversal, invalid UTF-8 raw and escaped, a NUL, an overlong name).
BAD_IDS = [
    b"-1",
    b"0",
    b"%D9%A1",  # an Arabic-Indic one, which int() reads as 1
    b"abc",
    b"18446744073709551616",
    b"%EF%BC%91",
    b"%FF",
    b"1%00",
]
BAD_TEXT = [
    b"..%2F..%2F..%2Fetc%2Fpasswd",
    b"%C0%AE%C0%AE%C0%AF",
    b"%FF%FE",
    b"\xff\xfe",
    b"%00",
    b"a" * 300,
]
HUB_FIELDS = ["hub.mode", "hub.verify_token", "hub.challenge", "range", "kind", "page"]


def _every_field(value: bytes) -> bytes:
    """Each field name given `value`; the email is a new one each time (with `value` in it),
    so the sign-in throttle, which slows repeated failures for one email, is not what the
    sweep measures."""
    email = uuid.uuid4().hex.encode() + value
    return b"&".join(
        name.encode() + b"=" + (email if name == "email" else value)
        for name in FIELD_NAMES + HUB_FIELDS
    )


BAD_QUERIES = [
    _every_field(b"%FF%FE"),
    _every_field(b"99999999999999999999999999"),
    b"q=\xff\xfe&from=\xc3\x28&campaign=\xff",
    b"%00=%00",
    b"&&&==&=%&%%%zz=%G0&q=" + b"x" * 6000,
    # Repeated parameters, numbers and days out of range, escapes cut short, a header in a value.
    b"page=-1&page=abc&range=-1&range=99999999999&from=0000-00-00&from=2024-06-01&to=2024-13-01"
    b"&state=SENT&state=%FF&campaign=1&campaign=2&v=%ZZ&q=%E0%A4%A&next=%0d%0aSet-Cookie:x=1",
]


def _fill(route: Route, target: Target, bad: dict[str, bytes] | None = None) -> bytes:
    """The route's path with each parameter given a value a row may have (or `bad`'s)."""
    path = route.path.encode()
    for match in PARAM.finditer(route.path):
        good = str(target.known_ids[0]).encode() if match.group("kind") == "int" else b"x"
        value = (bad or {}).get(match.group("name"), good)
        path = path.replace(match.group(0).encode(), value, 1)
    return path + (b"/app.css" if route.mount else b"")


def _form(who: str, target: Target, fields: bytes) -> bytes:
    tokens = f"_csrf_token={quote(target.csrf[who])}&_idem={uuid.uuid4().hex}".encode()
    return fields + b"&" + tokens


def _wrong_method(route: Route) -> bytes:
    taken = {r.method for r in ROUTES if r.path == route.path}
    return next(m for m in (b"PATCH", b"PUT", b"DELETE") if m.decode() not in taken)


def _hostile_bodies(route: Route, target: Target, who: str) -> list[Hostile]:
    path = _fill(route, target)
    form = (b"content-type", b"application/x-www-form-urlencoded")
    multipart = (b"content-type", b"multipart/form-data; boundary=zz")
    csrf = (b"x-csrftoken", target.csrf[who].encode())
    bodies: list[tuple[str, tuple[tuple[bytes, bytes], ...], bytes]] = [
        ("form: invalid UTF-8", (form,), _form(who, target, _every_field(b"%FF%FE"))),
        ("form: raw invalid UTF-8", (form,), _form(who, target, b"name=\xff\xfe&keywords=\xc3(")),
        ("form: NUL", (form,), _form(who, target, _every_field(b"a%00b"))),
        ("form: no tokens, no fields", (form,), b""),
        ("form: 900 kB", (form,), _form(who, target, b"keywords=" + b"x," * 450_000)),
        ("form: past the body limit", (form,), _form(who, target, b"dm_text=" + b"x" * 1_100_000)),
        ("bad JSON", ((b"content-type", b"application/json"), csrf), b'{"name": '),
        ("multipart, no boundary", ((b"content-type", b"multipart/form-data"), csrf), b"--x\r\n"),
        (
            "multipart, garbage",
            ((b"content-type", b"multipart/form-data; boundary=zz"), csrf),
            b'--zz\r\ncontent-disposition: form-data; name="\xff"\r\n\r\n\x00\r\n--zz',
        ),
        ("no content type", (csrf,), _form(who, target, b"name=x")),
        ("text/plain", ((b"content-type", b"text/plain"), csrf), _form(who, target, b"name=x")),
        (
            "form: every field twice",
            (form,),
            _form(who, target, _every_field(b"1") + b"&" + _every_field(b"%FF")),
        ),
        # CSRF tokens that are not ASCII, in each place the check reads one.
        ("csrf header not ASCII", (form, (b"x-csrftoken", b"a" * 32 + b"\xc3\xa9" * 40)), b"x=1"),
        ("csrf field not ASCII", (form,), b"x=1&_csrf_token=" + b"a" * 32 + b"%C3%A9" * 40),
        (
            "csrf cookie not ASCII",
            (form, (b"cookie", b"csrftoken=" + b"a" * 32 + b"%C3%A9" * 40)),
            _form(who, target, b"x=1"),
        ),
        (
            "multipart: a file",
            (multipart, csrf),
            multipart_part(b'name="name"; filename="a.txt"', b"x"),
        ),
        (
            "multipart: the token a file",
            (multipart,),
            multipart_part(b'name="_csrf_token"; filename="t"', b"x"),
        ),
        (
            "multipart: invalid UTF-8",
            (multipart, csrf),
            multipart_part(b'name="name"', b"\xff\xfe"),
        ),
    ]
    return [Hostile(what, who, route.method.encode(), path, h, b) for what, h, b in bodies]


def _webhook_bodies_hostile(route: Route, target: Target) -> list[Hostile]:
    def signed(
        body: bytes, content_type: bytes = b"application/json"
    ) -> tuple[tuple[bytes, bytes], ...]:
        digest = hmac.new(target.webhook_secret.encode(), body, hashlib.sha256).hexdigest()
        return (
            (b"x-hub-signature-256", f"sha256={digest}".encode()),
            (b"content-type", content_type),
        )

    bodies = [
        ("signed bad JSON", b'{"object": "instagram", "entry": [', b"application/json"),
        ("signed invalid UTF-8", b'{"object": "\xff\xfe"}', b"application/json"),
        ("signed form", b"object=instagram&entry=1", b"application/x-www-form-urlencoded"),
        ("signed empty", b"", b"application/json"),
        (
            "signed NUL",
            b'{"object": "instagram\\u0000", "entry": [{"id": "\\u0000"}]}',
            b"application/json",
        ),
        (
            "signed, nested 100 000 deep",
            b'{"object": "instagram", "entry": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
            b"application/json",
        ),
        (
            # Past the size decoded on the event loop; an object the worker will refuse whole.
            "signed, 3 MB of entries",
            b'{"object": "not instagram", "entry": ['
            + b",".join([b'{"id": "1"}'] * 250_000)
            + b"]}",
            b"application/json",
        ),
        (
            "signed huge number",
            b'{"object": "instagram", "entry": [{"id": ' + b"9" * 5000 + b"}]}",
            b"application/json",
        ),
    ]
    found = [
        Hostile(what, "stranger", b"POST", route.path.encode(), signed(body, ct), body)
        for what, body, ct in bodies
    ]
    found.append(
        Hostile(
            "unsigned bad JSON",
            "stranger",
            b"POST",
            route.path.encode(),
            ((b"content-type", b"application/json"),),
            b"{",
        )
    )
    found.append(
        Hostile(
            "signature not hex",
            "stranger",
            b"POST",
            route.path.encode(),
            ((b"x-hub-signature-256", b"sha256=\xff\xfe"),),
            b"{}",
        )
    )
    return found


def _hostile(route: Route, target: Target) -> list[Hostile]:
    owner = "stranger" if (route.method, route.path) in SIGNED_IN_SKIPS else "owner"
    method = route.method.encode()
    path = _fill(route, target)
    found: list[Hostile] = []
    for match in PARAM.finditer(route.path):
        bad_values = BAD_IDS if match.group("kind") == "int" else BAD_TEXT
        for n, bad in enumerate(bad_values):
            who = ("owner", "member", "stranger")[n % 3] if owner == "owner" else owner
            at = _fill(route, target, {match.group("name"): bad})
            found.append(Hostile(f"path {match.group('name')}={bad[:40]!r}", who, method, at))
    if route.mount:
        base = path.rsplit(b"/", 1)[0]
        found += [
            Hostile(f"under the mount: {bad[:40]!r}", owner, method, base + b"/" + bad)
            for bad in BAD_TEXT
        ]
    found += [
        Hostile("traversal", owner, method, path + b"/../../../../etc/passwd"),
        Hostile("escaped traversal", owner, method, path + b"/..%2f..%2f..%2fetc%2fpasswd"),
        Hostile("wrong method", owner, _wrong_method(route), path),
    ]
    for n, query in enumerate(BAD_QUERIES):
        who = ("owner", "member", "stranger")[n % 3] if owner == "owner" else owner
        found.append(Hostile(f"query {query[:40]!r}", who, method, path + b"?" + query))
    found += [
        Hostile(
            "overlong htmx headers",
            owner,
            method,
            path,
            (
                (b"hx-request", b"true"),
                (b"hx-current-url", b"http://x/" + b"\xff" * 10 + b"a" * 8000),
                (b"hx-target", b"\x00" * 100),
            ),
        ),
        Hostile(
            "garbage cookies",
            "stranger",
            method,
            path,
            ((b"cookie", b"session=\xff\xfe; csrftoken=%00; x=" + b"y" * 7000),),
        ),
        Hostile(
            "odd accept", owner, method, path, ((b"accept", b"\xff/\xfe;q=x, */*;q=" + b"9" * 50),)
        ),
        Hostile(
            "odd htmx headers",
            owner,
            method,
            path,
            (
                (b"hx-request", b"false"),
                (b"hx-trigger", b"\xff"),
                (b"hx-boosted", b"maybe"),
                (b"hx-history-restore-request", b"true"),
                (b"hx-current-url", b"not a url"),
            ),
        ),
        Hostile(
            "odd proxy and cache headers",
            owner,
            method,
            path,
            (
                (b"x-forwarded-for", b"\xff, 1.2.3.4.5"),
                (b"x-forwarded-proto", b"gopher"),
                (b"if-modified-since", b"Thu, 99 Foo 9999 99:99:99 GMT"),
                (b"range", b"bytes=0-1,5-9999999999999999999999"),
            ),
        ),
        Hostile(
            "ranges no file has",
            owner,
            method,
            path,
            ((b"range", b"bytes=99999999999-"), (b"if-range", b"\xff")),
        ),
        Hostile("ranges backwards", owner, method, path, ((b"range", b"bytes=5-1,-0,x-y"),)),
        Hostile(
            "ranges by the thousand",
            owner,
            method,
            path,
            ((b"range", b"bytes=" + b",".join(b"%d-%d" % (n, n) for n in range(2000))),),
        ),
        Hostile("expect: not 100-continue", owner, method, path, ((b"expect", b"200-ok"),), b"x"),
        Hostile("a method no one knows", owner, b"FOO", path),
        Hostile("trace", owner, b"TRACE", path),
        Hostile(
            "forged session", "stranger", method, path, ((b"cookie", b"session=" + b"f" * 64),)
        ),
        Hostile(
            "five thousand parameters",
            owner,
            method,
            path + b"?" + b"&".join(b"a%d=1" % n for n in range(5000)),
        ),
        Hostile(
            "multipart in a charset no one knows",
            owner,
            method,
            path,
            (
                (b"content-type", b"multipart/form-data; boundary=zz"),
                (b"x-csrftoken", target.csrf[owner].encode()),
            ),
            multipart_part(b'name="name"\r\ncontent-type: text/plain; charset=nope', b"x"),
        ),
        Hostile("bad escape in the path", owner, method, path + b"%ZZ%C3%28"),
        Hostile("host: port past 65535", owner, method, path, ((b"host", b"127.0.0.1:99999"),)),
        Hostile("host: port not digits", "stranger", method, path, ((b"host", b"\xff\xfe:-1"),)),
        Hostile("host: another site", owner, method, path, ((b"host", b"evil.example"),)),
    ]
    if route.path.startswith("/webhooks/") and route.method == "GET":
        for challenge in (b"%FF%FE", b"\xff", b"a%00", b"x" * 5000):
            query = b"hub.mode=subscribe&hub.verify_token=%FF&hub.challenge=" + challenge
            found.append(
                Hostile(f"handshake {challenge[:20]!r}", owner, method, path + b"?" + query)
            )
    if route.path.startswith("/webhooks/") and route.method == "POST":
        found += _webhook_bodies_hostile(route, target)
    elif route.method == "POST":
        found += _hostile_bodies(route, target, owner)
        if owner == "owner":
            found += _hostile_bodies(route, target, "member")[:1]
            found += _hostile_bodies(route, target, "stranger")[:1]
    return found


@pytest.mark.parametrize("route", ROUTES, ids=[r.id for r in ROUTES])
def test_route_refuses_hostile_requests_clearly(target: Target, route: Route) -> None:
    """A fixed set of hostile requests on each route: no 5xx, no stack trace, a refusal with
    words in it (an HTML page or JSON with a `detail`), no stall of the event loop."""
    target.log.skip()
    for hostile in _hostile(route, target):
        answer = send_raw(target, hostile)
        target.requests[route.id] += 1
        what = (route.id, hostile.what, hostile.who, hostile.method, hostile.target[:120])
        check_answer(what, answer.status, answer.headers, answer.text)
        stall = _stalled(target, lambda h=hostile: send_raw(target, h))
        assert stall is None, (what, f"held the event loop {stall:.3f} s")


# --- HEAD: every route that answers GET answers HEAD the same way, without the body --------

GET_ROUTES = [route for route in ROUTES if route.method == "GET"]


def _head_pairs(route: Route, target: Target) -> list[Hostile]:
    """The GET requests whose HEAD twin must match: the page as the owner and a stranger, an
    id no row has, and a query the route cannot read."""
    path = _fill(route, target)
    found = [
        Hostile("page", "owner", b"GET", path),
        Hostile("page", "stranger", b"GET", path),
        Hostile("bad query", "owner", b"GET", path + b"?" + BAD_QUERIES[0]),
    ]
    for match in PARAM.finditer(route.path):
        bad = BAD_IDS[1] if match.group("kind") == "int" else BAD_TEXT[0]
        at = _fill(route, target, {match.group("name"): bad})
        found.append(Hostile(f"path {match.group('name')}", "owner", b"GET", at))
    return found


@pytest.mark.parametrize("route", GET_ROUTES, ids=[r.id for r in GET_ROUTES])
def test_head_answers_like_get(target: Target, route: Route) -> None:
    """HEAD gets GET's status, content type and security headers, and no body: a monitor or
    a link checker reads the page as alive (never a 405)."""
    target.log.skip()
    for get in _head_pairs(route, target):
        got = send_raw(target, get)
        head = send_raw(target, Hostile(get.what, get.who, b"HEAD", get.target, get.headers))
        target.requests[route.id] += 2
        what = (route.id, get.what, get.who, get.target[:120])
        check_answer(what, got.status, got.headers, got.text)
        assert head.status == got.status, (what, head.status, got.status, got.text[:300])
        assert head.body == b"", (what, head.body[:300])
        for name in ("content-type", "content-security-policy", "location"):
            seen = (name in head.headers, name in got.headers)
            assert seen[0] == seen[1], (what, name, head.headers, got.headers)
        assert head.headers.get("content-type") == got.headers.get("content-type"), what
