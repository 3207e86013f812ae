"""Secrets never reach the log: tokens in URLs, JSON bodies and headers are scrubbed."""

from __future__ import annotations

import logging

import pytest

from app.logs import ScrubSecrets, scrub


@pytest.mark.parametrize(
    ("raw", "secret"),
    [
        (
            "GET https://graph.instagram.com/me?fields=id&access_token=IGAAsecret123",
            "IGAAsecret123",
        ),
        ("POST /oauth/access_token client_secret=abc123&code=zzz", "abc123"),
        ("callback /connect/callback?code=AQBxcode&state=s", "AQBxcode"),
        ('{"access_token": "IGAAjsonsecret", "user_id": 1}', "IGAAjsonsecret"),
        ("Authorization: Bearer IGAAheader.secret-value", "IGAAheader.secret-value"),
        ("unhandled error on GET /invite/o84jALmk1Zsr69jU_OLco94D-s", "o84jALmk1Zsr69jU_OLco94D-s"),
        ("GET /login?next=%2Finvite%2FAbc_def-123XYZ", "Abc_def-123XYZ"),
        ("GET https://reply.example/r/Qm9vX2Jhel9xdXV4LXJlcG9ydC10b2tlbi0xMjM0NTY3", "Qm9vX2Jh"),
    ],
)
def test_scrub_removes_the_value_and_keeps_the_name(raw: str, secret: str) -> None:
    cleaned = scrub(raw)
    assert secret not in cleaned
    assert "[redacted]" in cleaned


def test_meta_error_codes_are_left_alone() -> None:
    assert scrub("meta code=190 subcode=463") == "meta code=190 subcode=463"


def test_filter_rewrites_formatted_records(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("test.scrub")
    logger.addFilter(ScrubSecrets())
    with caplog.at_level(logging.INFO, logger="test.scrub"):
        logger.info("calling %s", "https://x/y?access_token=IGAAleak")
    assert "IGAAleak" not in caplog.text
    assert "access_token=[redacted]" in caplog.text


def test_building_the_app_keeps_the_scrubbing_handler() -> None:
    """Litestar's default logging config would replace the root handler and its filter."""
    from app.asgi import create_app
    from app.logs import configure_logging
    from app.settings import load_settings
    from tests.support.infra import base_env

    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    try:
        configure_logging("INFO")
        create_app(load_settings(base_env("postgresql://u@127.0.0.1/x", "redis://127.0.0.1/1")))
        filters = [f for handler in root.handlers for f in handler.filters]
        assert any(isinstance(f, ScrubSecrets) for f in filters)
    finally:
        root.handlers[:], _ = saved
        root.setLevel(saved[1])
