"""Images and cards on the Send API: what a private reply may carry, the image fetch, the
generic template's limits, and the image host stand-in (`/_media/…`) the product's image check
is tested against."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from sandbox.client import SandboxAdmin
from tests.integration.sandbox.helpers import (
    JANE_SUNNY_IGSID,
    OLGA_COMMENT,
    direct_message,
    error_of,
    private_reply,
)
from tests.support.sandbox_process import SandboxProcess


def image(url: str) -> dict[str, Any]:
    return {"attachment": {"type": "image", "payload": {"url": url}}}


def card(**element: Any) -> dict[str, Any]:
    payload = {"template_type": "generic", "elements": [{"title": "Recipe", **element}]}
    return {"attachment": {"type": "template", "payload": payload}}


def link(title: str = "Open") -> dict[str, str]:
    return {"type": "web_url", "title": title, "url": "https://sunny.example/r"}


@pytest.fixture
def media(sandbox_process: SandboxProcess) -> str:
    return f"{sandbox_process.base_url}/_media"


@pytest.mark.parametrize("kind", ["image", "card"])
def test_a_private_reply_carries_no_image_or_card(
    graph: httpx.Client, admin: SandboxAdmin, token: str, media: str, kind: str
) -> None:
    message = image(f"{media}/cover.png") if kind == "image" else card(buttons=[link()])
    refused = private_reply(graph, token, OLGA_COMMENT, message)
    assert refused.status_code == 400
    error = error_of(refused)
    assert (error["code"], error["error_subcode"]) == (100, 2534015)
    assert "private reply" in error["message"]
    # Refused before anything is delivered: the comment's one private reply is still there.
    assert admin.comment_stats(OLGA_COMMENT)["private_replies_delivered"] == 0
    assert private_reply(graph, token, OLGA_COMMENT).status_code == 200


def test_an_image_and_a_card_in_the_window(
    graph: httpx.Client, admin: SandboxAdmin, token: str, media: str
) -> None:
    admin.fan_dm("jane.doe", "sunny.bakes", "RECIPE")
    sent = direct_message(graph, token, JANE_SUNNY_IGSID, image(f"{media}/cover.png"))
    assert sent.status_code == 200, sent.text
    gif_card = card(subtitle="s" * 80, image_url=f"{media}/cover.gif", buttons=[link()] * 3)
    assert direct_message(graph, token, JANE_SUNNY_IGSID, gif_card).status_code == 200
    got = [m["attachment"] for m in admin.inbox("jane.doe")["messages"] if m.get("attachment")]
    assert got[-2] == image(f"{media}/cover.png")["attachment"]
    assert got[-1]["payload"]["template_type"] == "generic"


@pytest.mark.parametrize("name", ["huge.jpg", "page.html", "missing.png"])
def test_an_image_meta_cannot_use_is_refused(
    graph: httpx.Client, admin: SandboxAdmin, token: str, media: str, name: str
) -> None:
    admin.fan_dm("jane.doe", "sunny.bakes", "RECIPE")
    before = len(admin.inbox("jane.doe")["messages"])
    for message in (image(f"{media}/{name}"), card(image_url=f"{media}/{name}")):
        refused = direct_message(graph, token, JANE_SUNNY_IGSID, message)
        assert refused.status_code == 400
        error = error_of(refused)
        assert (error["code"], error["error_subcode"]) == (100, 2018008)
        assert "Failed to fetch the file from the url" in error["message"]
    assert len(admin.inbox("jane.doe")["messages"]) == before


@pytest.mark.parametrize(
    ("element", "mentions"),
    [
        ({"title": "t" * 81}, "[title]"),
        ({"subtitle": "s" * 81}, "[subtitle]"),
        ({"buttons": [link()] * 4}, "[buttons]"),
        ({"buttons": [link("b" * 21)]}, "[title]"),
        ({"image_url": "not a url"}, "[image_url]"),
    ],
)
def test_card_limits(
    graph: httpx.Client, admin: SandboxAdmin, token: str, element: dict[str, Any], mentions: str
) -> None:
    admin.fan_dm("jane.doe", "sunny.bakes", "RECIPE")
    refused = direct_message(graph, token, JANE_SUNNY_IGSID, card(**element))
    assert refused.status_code == 400
    error = error_of(refused)
    assert (error["code"], error["error_subcode"]) == (100, 2534015)
    assert mentions in error["message"]
    assert "[elements][0]" in error["message"]


def test_the_image_host_answers_head_with_the_size(media: str) -> None:
    with httpx.Client() as client:
        head = client.head(f"{media}/huge.jpg")
        assert head.status_code == 200
        assert head.headers["content-type"] == "image/jpeg"
        assert int(head.headers["content-length"]) == 9 * 1024 * 1024
        assert head.content == b""
        png = client.get(f"{media}/cover.png")
        assert png.headers["content-type"] == "image/png"
        assert png.content.startswith(b"\x89PNG")
        assert client.head(f"{media}/no-head.png").status_code == 405
        assert client.get(f"{media}/no-head.png").status_code == 200
        assert client.get(f"{media}/nothing").status_code == 404
