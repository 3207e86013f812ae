"""Checks of the server itself: the settings, HTTPS, and the webhook verification handshake
answered through `PUBLIC_BASE_URL`, exactly as Meta will call it."""

from __future__ import annotations

import asyncio
import ipaddress
import secrets
from urllib.parse import urlsplit

import httpx

from app.settings import Settings
from app.setup_doctor.report import Check, Status

HANDSHAKE_PATH = "/webhooks/instagram"
HANDSHAKE_TIMEOUT_S = 8.0
_META_GRAPH_HOST = "graph.instagram.com"
_META_OAUTH_HOSTS = {"api.instagram.com", "www.instagram.com"}


def is_local(url: str) -> bool:
    """A loopback address: a development machine, where Meta cannot call anyway."""
    host = (urlsplit(url).hostname or "").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_settings(settings: Settings) -> Check:
    problems: list[str] = []
    notes: list[str] = []
    if not settings.instagram_app_id.isdigit():
        problems.append(
            "INSTAGRAM_APP_ID should be the number shown as “Instagram app ID” under "
            "Instagram → API setup with Instagram login (not the app's name)."
        )
    if len(settings.webhook_verify_token) < 8:
        problems.append(
            "WEBHOOK_VERIFY_TOKEN is very short; use a long random string "
            "(openssl rand -hex 16) and type the same into Meta's webhook settings."
        )
    if settings.instagram_app_secret == settings.instagram_app_id:
        problems.append("INSTAGRAM_APP_SECRET equals the app id; copy the app secret instead.")
    graph_host = urlsplit(settings.graph_api_base).hostname or ""
    oauth_host = urlsplit(settings.instagram_oauth_base).hostname or ""
    if graph_host != _META_GRAPH_HOST or oauth_host not in _META_OAUTH_HOSTS:
        notes.append(
            f"Instagram calls go to {settings.graph_api_base} and sign-in to "
            f"{settings.instagram_oauth_base}, not to Meta: fine for the local sandbox, but "
            "remove GRAPH_API_BASE and INSTAGRAM_OAUTH_BASE from the settings to go live."
        )
    if not settings.meta_app_secret:
        notes.append(
            "META_APP_SECRET is not set: webhooks signed with the Meta app secret (App settings → "
            "Basic) would be refused. Set it too if Meta's test events are refused."
        )
    if problems:
        return Check(
            "settings",
            "Settings",
            Status.FAIL,
            "Some settings look wrong.",
            " ".join(problems),
            " ".join(notes),
        )
    return Check(
        "settings",
        "Settings",
        Status.WARN if notes else Status.OK,
        "Every required setting is present and well-formed.",
        " ".join(notes),
    )


def check_https(settings: Settings) -> Check:
    url = settings.public_base_url
    if url.startswith("https://"):
        return Check("https", "HTTPS address", Status.OK, f"OnceReply is reached at {url}.")
    if is_local(url):
        return Check(
            "https",
            "HTTPS address",
            Status.INFO,
            f"{url} is this machine: fine for trying things out, but Meta cannot reach it.",
            "To go live, give the server a domain with HTTPS and set PUBLIC_BASE_URL to it "
            "(docs/going-live.md, step 1).",
        )
    return Check(
        "https",
        "HTTPS address",
        Status.FAIL,
        f"PUBLIC_BASE_URL is {url}: Meta only calls https:// addresses with a valid certificate, "
        "so no comment will arrive.",
        "Start the compose stack with its https profile (DOMAIN in .env) or put another HTTPS "
        "proxy in front, then set PUBLIC_BASE_URL to the https:// address.",
    )


async def check_handshake(
    settings: Settings, *, transport: httpx.AsyncBaseTransport | None = None
) -> Check:
    """Answer Meta's verification GET through PUBLIC_BASE_URL, with a fresh challenge."""
    url = f"{settings.public_base_url}{HANDSHAKE_PATH}"
    challenge = str(secrets.randbelow(10**12) + 10**11)
    params = {
        "hub.mode": "subscribe",
        "hub.verify_token": settings.webhook_verify_token,
        "hub.challenge": challenge,
    }
    title = "Webhook address answers Meta"
    advice = (
        "Check that PUBLIC_BASE_URL is the address of this server as seen from the internet, "
        "that the proxy in front forwards it here, and that Meta's Callback URL is " + url + "."
    )
    # A new client loads the CA bundle (a few hundred ms of CPU on a busy machine): not on
    # the event loop.
    verify = await asyncio.to_thread(httpx.create_ssl_context)
    try:
        async with httpx.AsyncClient(
            timeout=HANDSHAKE_TIMEOUT_S, follow_redirects=False, transport=transport, verify=verify
        ) as client:
            answer = await client.get(url, params=params)
    except httpx.HTTPError as exc:
        return Check(
            "handshake",
            title,
            Status.FAIL,
            f"{url} could not be reached from this server, so Meta probably cannot reach it "
            "either.",
            advice + " (A few networks do not let a server reach its own public address: if "
            "Meta's “Verify and save” succeeds, this one check can be ignored.)",
            f"{type(exc).__name__}: {exc}"[:300],
        )
    if answer.status_code in (301, 302, 303, 307, 308):
        return Check(
            "handshake",
            title,
            Status.FAIL,
            f"{url} redirects to {answer.headers.get('location', '?')}; Meta does not follow "
            "redirects.",
            "Set PUBLIC_BASE_URL to the final address (often https:// or without www).",
        )
    if answer.status_code == 200 and answer.text == challenge:
        return Check(
            "handshake",
            title,
            Status.OK,
            f"{url} answered the verification challenge with the verify token, as Meta requires.",
        )
    summary = (
        f"{url} did not answer the challenge (HTTP {answer.status_code}): PUBLIC_BASE_URL "
        "points at something other than this OnceReply server, or at one with another "
        "WEBHOOK_VERIFY_TOKEN. Meta's “Verify and save” would fail the same way."
    )
    return Check(
        "handshake",
        title,
        Status.FAIL,
        summary,
        advice,
        f"HTTP {answer.status_code}: {answer.text[:200]!r}",
    )
