"""Meta fetches the image of a DM from its URL before it sends; so does the sandbox.

A URL that cannot be fetched within a few seconds, answers other than 200, is not a JPEG,
PNG or GIF or is larger than 8 MB refuses the whole message with code 100, subcode 2018008
"Failed to fetch the file from the url" (the Messenger platform's error for it). Both an
image attachment's ``payload.url`` and a generic template element's ``image_url`` are
fetched. The fetch happens before the send's checks, which stay synchronous.
"""

from __future__ import annotations

from typing import Any

import httpx

from sandbox.errors import GraphError

FETCH_TIMEOUT_S = 5.0
IMAGE_MAX_BYTES = 8 * 1024 * 1024
IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif"})
FETCH_FAILED = 2018008


def fetch_failed(url: str) -> GraphError:
    return GraphError(
        f"(#100) Failed to fetch the file from the url: {url[:200]}", 100, subcode=FETCH_FAILED
    )


def image_urls(message: object) -> list[str]:
    """Every image URL a ``message`` object asks Meta to fetch, read leniently."""
    if not isinstance(message, dict):
        return []
    attachment = message.get("attachment")
    if not isinstance(attachment, dict):
        return []
    payload = attachment.get("payload")
    if not isinstance(payload, dict):
        return []
    if attachment.get("type") == "image" and isinstance(payload.get("url"), str):
        return [payload["url"]]
    if attachment.get("type") != "template" or not isinstance(payload.get("elements"), list):
        return []
    return [
        element["image_url"]
        for element in payload["elements"]
        if isinstance(element, dict) and isinstance(element.get("image_url"), str)
    ]


async def _fetchable(client: httpx.AsyncClient, url: str) -> bool:
    try:
        async with client.stream("GET", url) as response:
            if response.status_code != 200:
                return False
            kind = response.headers.get("content-type", "").split(";", 1)[0].strip().lower()
            if kind not in IMAGE_TYPES:
                return False
            length = response.headers.get("content-length", "")
            if length.isdigit() and int(length) > IMAGE_MAX_BYTES:
                return False
            size = 0
            async for chunk in response.aiter_bytes():
                size += len(chunk)
                if size > IMAGE_MAX_BYTES:
                    return False
            return True
    except (httpx.HTTPError, ValueError):
        return False


async def fetch_images(message: object) -> dict[str, bool]:
    """URL → whether Meta could use the image there."""
    urls = list(dict.fromkeys(image_urls(message)))[:10]
    if not urls:
        return {}
    async with httpx.AsyncClient(timeout=FETCH_TIMEOUT_S, follow_redirects=True) as client:
        return {url: await _fetchable(client, url) for url in urls}


def require_fetched(message: Any, fetched: dict[str, bool]) -> None:
    for url in image_urls(message):
        if not fetched.get(url, False):
            raise fetch_failed(url)
