"""Bad ids, numbers, dates and cursors from a URL or a form: a 404, a 422 or a filter ignored
with a sentence, never a 500.

Each case is one a review found answering 500: an id past PostgreSQL's `bigint`, a digit
Python's `str.isdigit` accepts but `int` refuses ("²"), a day whose next day is past year
9999, a cursor of microseconds beyond any timestamp.
"""

from __future__ import annotations

import base64
import json
import uuid

import pytest

from app.db.models import LegState
from app.resources import Resources
from app.settings import Settings
from tests.support.dashboard import csrf_token, tokens
from tests.support.log_data import add_log, signed_in_creator
from tests.support.raw_http import multipart_part

HUGE = "99999999999999999999"  # past bigint's 9223372036854775807
HTML = {"accept": "text/html"}


def _b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


@pytest.mark.parametrize(
    "path",
    [
        f"/log/{HUGE}",
        f"/campaigns/{HUGE}",
        f"/accounts/{HUGE}",
        "/log/0",
        "/campaigns/-1",
    ],
)
async def test_ids_out_of_range_in_a_path_are_not_found(
    settings: Settings, resources: Resources, path: str
) -> None:
    async with signed_in_creator(settings, resources) as creator:
        answer = await creator.client.get(path, headers=HTML)
        assert answer.status_code == 404, answer.text


@pytest.mark.parametrize(
    "query",
    [
        f"account={HUGE}",
        f"campaign={HUGE}",
        "account=%C2%B2",  # "²"
        "from=9999-12-31",
        "to=9999-12-31",
        "from=99999-01-01",
        f"before={_b64('9' * 25 + '.1')}",
        f"after={_b64('1.' + HUGE)}",
        f"before={_b64('-' + '9' * 25 + '.1')}",
    ],
)
async def test_filters_and_cursors_out_of_range_are_ignored_with_a_sentence(
    settings: Settings, resources: Resources, query: str
) -> None:
    async with signed_in_creator(settings, resources) as creator:
        await add_log(resources, creator)
        for path in ("/log/", "/log/misses"):
            answer = await creator.client.get(f"{path}?{query}", headers=HTML)
            assert answer.status_code == 200, (path, answer.text[:300])


@pytest.mark.parametrize(
    "live",
    [f"{HUGE}:1", f"1:{HUGE}", "²:1", "1:²", "١:1"],
)
async def test_live_versions_out_of_range_are_skipped(
    settings: Settings, resources: Resources, live: str
) -> None:
    async with signed_in_creator(settings, resources) as creator:
        answer = await creator.client.get(
            "/log/updates", params={"live": live}, headers={"HX-Request": "true"}
        )
        assert answer.status_code == 204, answer.text


async def test_a_live_window_out_of_range_is_ignored(
    settings: Settings, resources: Resources
) -> None:
    windows = [
        [[int("9" * 25), 0], []],
        [[0, 0], [[1, int(HUGE)]]],
        [[0, 0], "ab"],
        [[0, 0], {"a": 1}],
    ]
    async with signed_in_creator(settings, resources) as creator:
        for window in windows:
            token = _b64(json.dumps(window))
            answer = await creator.client.get(
                "/log/updates", params={"window": token}, headers={"HX-Request": "true"}
            )
            assert answer.status_code == 204, (window, answer.text)
        deep = _b64("[" * 5000 + "]" * 5000)
        answer = await creator.client.get("/log/updates", params={"window": deep})
        assert answer.status_code == 204, answer.text


async def test_the_export_past_year_9999_is_a_whole_csv(
    settings: Settings, resources: Resources
) -> None:
    async with signed_in_creator(settings, resources) as creator:
        await add_log(resources, creator, username="jane.doe")
        answer = await creator.client.get("/log/export.csv?from=2020-01-01&to=9999-12-31")
        assert answer.status_code == 200
        lines = answer.text.strip().splitlines()
        assert len(lines) == 2, answer.text
        assert "jane.doe" in lines[1]


async def test_bulk_retry_with_odd_digits_is_nothing_selected(
    settings: Settings, resources: Resources
) -> None:
    async with signed_in_creator(settings, resources) as creator:
        await add_log(resources, creator, state=LegState.FAILED)
        page = await creator.client.get("/log/", headers=HTML)
        for ids in (["²"], [HUGE], ["0"], ["١"]):
            answer = await creator.client.post(
                "/log/retry",
                data={**tokens(page.text, "/log/retry"), "_idem": str(uuid.uuid4()), "ids": ids},
                headers=HTML,
            )
            # A plain form post goes back to the log, which says nothing was retried.
            assert answer.status_code == 200, (ids, answer.text[:300])
            assert "Nothing was retried" in answer.text, (ids, answer.text[:300])


async def test_trying_a_comment_on_an_account_out_of_range_is_not_found(
    settings: Settings, resources: Resources
) -> None:
    async with signed_in_creator(settings, resources) as creator:
        page = await creator.client.get("/campaigns/try", headers=HTML)
        for account_id in (HUGE, "²", "0"):
            answer = await creator.client.post(
                "/campaigns/try",
                data={
                    "_csrf_token": csrf_token(page.text),
                    "account_id": account_id,
                    "comment": "x",
                },
                headers=HTML,
            )
            assert answer.status_code == 404, (account_id, answer.text[:300])


async def test_switching_to_a_workspace_out_of_range_is_not_found(
    settings: Settings, resources: Resources
) -> None:
    async with signed_in_creator(settings, resources) as creator:
        page = await creator.client.get("/", headers=HTML)
        for workspace_id in (HUGE, "²"):
            answer = await creator.client.post(
                "/workspaces/switch",
                data={
                    "_csrf_token": csrf_token(page.text),
                    "_idem": str(uuid.uuid4()),
                    "workspace_id": workspace_id,
                },
                headers=HTML,
            )
            assert answer.status_code == 404, (workspace_id, answer.text[:300])


async def test_a_campaign_saved_with_numbers_out_of_range_gets_field_errors(
    settings: Settings, resources: Resources
) -> None:
    async with signed_in_creator(settings, resources) as creator:
        page = await creator.client.get(f"/campaigns/{creator.campaign_id}", headers=HTML)
        answer = await creator.client.post(
            f"/campaigns/{creator.campaign_id}",
            data={
                **tokens(page.text, f"/campaigns/{creator.campaign_id}"),
                "name": "Lemon loaf",
                "account_id": HUGE,
                "priority": "²",
                "version": HUGE + "9" * 30,
                "follow_up_delay_minutes": "١",
                "dm_text": "Here it is",
            },
            headers=HTML,
        )
        assert answer.status_code == 422, answer.text[:300]
        assert "Choose the Instagram account" in answer.text
        assert "Priority is a whole number" in answer.text


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("/meta/data-deletion/%00", 404),
        ("/static/%00", 404),
        ("/static/app.css%00", 404),
        ("/static/" + "%C2%80" * 200, 404),
        ("/static/a/" + "b" * 300 + "/c.css", 404),
        ("/static/" + "abcdefgh/" * 600 + "c.css", 404),
        ("/invite/a%00b", 404),
        ("/log/?q=%00", 400),
        ("/log/misses?q=a%00", 400),
    ],
)
async def test_a_nul_character_in_the_address_is_refused(
    settings: Settings, resources: Resources, path: str, status: int
) -> None:
    async with signed_in_creator(settings, resources) as creator:
        answer = await creator.client.get(path, headers=HTML)
        assert answer.status_code == status, answer.text[:300]


async def test_a_nul_character_in_a_form_is_no_500(
    settings: Settings, resources: Resources
) -> None:
    async with signed_in_creator(settings, resources) as creator:
        path = f"/campaigns/{creator.campaign_id}"
        page = await creator.client.get(path, headers=HTML)
        saved = await creator.client.post(
            path,
            data={
                **tokens(page.text, path),
                "name": "Lemon\x00loaf",
                "account_id": str(creator.account_id),
                "keywords": ["re\x00cipe"],
                "dm_text": "Here\x00 it is",
            },
            headers=HTML,
        )
        assert saved.status_code < 500, saved.text[:300]
        page = await creator.client.get("/campaigns/try", headers=HTML)
        tried = await creator.client.post(
            "/campaigns/try",
            data={
                "_csrf_token": csrf_token(page.text),
                "account_id": str(creator.account_id),
                "comment": "re\x00cipe",
            },
            headers=HTML,
        )
        assert tried.status_code < 500, tried.text[:300]


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        (b"email=a%00b%40example.com&password=x", "application/x-www-form-urlencoded"),
        (b"email=a\x00b&password=x", "application/x-www-form-urlencoded"),
        (
            b'--zz\r\ncontent-disposition: form-data; name="email"\r\n\r\na\x00b\r\n--zz--\r\n',
            "multipart/form-data; boundary=zz",
        ),
    ],
)
async def test_a_nul_character_in_any_form_is_refused_before_any_handler(
    settings: Settings, resources: Resources, body: bytes, content_type: str
) -> None:
    # The sign-in form handed it to a query: PostgreSQL refuses NUL in text (it was a 500).
    async with signed_in_creator(settings, resources) as creator:
        page = await creator.client.get("/login", headers=HTML)
        answer = await creator.client.post(
            "/login",
            content=body,
            headers={
                **HTML,
                "content-type": content_type,
                "x-csrftoken": csrf_token(page.text),
            },
        )
        assert answer.status_code == 400, answer.text[:300]
        assert "The form carries a NUL character." in answer.text


@pytest.mark.parametrize("picker", ["media", "stories"])
async def test_a_post_or_story_picker_for_an_account_out_of_range_asks_for_an_account(
    settings: Settings, resources: Resources, picker: str
) -> None:
    async with signed_in_creator(settings, resources) as creator:
        for name in ("account_id", "media_account" if picker == "media" else "story_account"):
            answer = await creator.client.get(f"/campaigns/{picker}?{name}={HUGE}", headers=HTML)
            assert answer.status_code == 200, (name, answer.text[:300])
            assert "Choose an account" in answer.text, (name, answer.text[:300])


async def test_a_tracked_link_posted_to_says_how_to_open_it(
    settings: Settings, resources: Resources
) -> None:
    async with signed_in_creator(settings, resources) as creator:
        answer = await creator.client.post("/go/anything")
        assert answer.status_code == 405
        assert answer.headers["allow"] == "GET, HEAD"
        assert json.loads(answer.text)["detail"] == "A link is opened with GET."


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (
            multipart_part(b'name="email"\r\ncontent-type: text/plain; charset=nope', b"a"),
            "character set",
        ),
        (multipart_part(b'name="email"', b"\xff\xfe@example.com"), "character set"),
        (multipart_part(b'name="email"; filename="me.txt"', b"a@example.com"), "takes no files"),
        (multipart_part(b'name="_csrf_token"; filename="t.txt"', b"x" * 80), "takes no files"),
    ],
    ids=["unknown charset", "invalid UTF-8", "a file", "a file for the token"],
)
@pytest.mark.parametrize("method", ["GET", "POST"])
async def test_a_form_the_parser_cannot_read_is_refused_before_any_handler(
    settings: Settings, resources: Resources, body: bytes, words: str, method: str
) -> None:
    # Litestar's parser raised on these (a LookupError, a UnicodeDecodeError, a file where the
    # CSRF check wanted text) wherever the form was first read, even for a GET: a 500.
    async with signed_in_creator(settings, resources) as creator:
        page = await creator.client.get("/login", headers=HTML)
        answer = await creator.client.request(
            method,
            "/login",
            content=body,
            headers={
                **HTML,
                "content-type": "multipart/form-data; boundary=zz",
                "x-csrftoken": csrf_token(page.text),
            },
        )
        assert answer.status_code == 400, answer.text[:300]
        assert words in answer.text, answer.text[:2000]


GARBLED = "a" * 32 + "%C3%A9" * 40  # 32 letters, then "é" (escaped) 40 times


@pytest.mark.parametrize("where", ["header", "cookie", "form", "form, twice"])
async def test_a_csrf_token_that_is_not_ascii_is_refused_as_a_wrong_one(
    settings: Settings, resources: Resources, where: str
) -> None:
    # `secrets.compare_digest` raises TypeError on a str with non-ASCII characters: a 500.
    async with signed_in_creator(settings, resources) as creator:
        page = await creator.client.get("/team", headers=HTML)
        form = tokens(page.text, "/team/time-zone")
        headers = {**HTML, "content-type": "application/x-www-form-urlencoded"}
        token = form["_csrf_token"]
        if where == "header":  # as Litestar reads a header: latin-1
            headers["x-csrftoken"] = "a" * 32 + "\xc3\xa9" * 40
        elif where == "cookie":  # as Litestar reads a cookie: percent-decoded
            headers["cookie"] = f"csrftoken={GARBLED}"
        else:
            token = GARBLED + (f"&_csrf_token={token}" if where == "form, twice" else "")
        content = f"time_zone=Europe/Paris&_idem={form['_idem']}&_csrf_token={token}"
        raw = {name.encode(): value.encode("latin-1") for name, value in headers.items()}
        answer = await creator.client.post("/team/time-zone", content=content, headers=raw)
        assert answer.status_code == 403, answer.text[:300]
        # The same answer a plainly wrong token gets, and the right one still works.
        wrong = await creator.client.post(
            "/team/time-zone",
            data={"time_zone": "Europe/Paris", "_csrf_token": "b" * 80},
            headers=HTML,
        )
        assert wrong.status_code == 403
        assert wrong.text == answer.text
        right = await creator.client.post(
            "/team/time-zone", data={**form, "time_zone": "Europe/Paris"}, headers=HTML
        )
        assert right.status_code < 400, right.text[:300]
