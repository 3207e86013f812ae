"""The setup doctor's pure parts: the likely cause from what arrived, HTTPS outside
development, and the settings' plausibility."""

from __future__ import annotations

import pytest

from app.settings import load_settings
from app.setup_doctor.diagnosis import diagnose
from app.setup_doctor.report import Status
from app.setup_doctor.server import check_https, check_settings, is_local
from app.setup_doctor.traffic import Traffic
from tests.support.infra import base_env

ENV = base_env("postgresql://postgres@127.0.0.1:5432/x", "redis://127.0.0.1:6379/1")


def traffic(hooked: int, recovered: int, people: int = 1, others: int = 0) -> Traffic:
    return Traffic({}, hooked, recovered, people, others)


def test_nothing_to_compare_is_information_not_a_failure() -> None:
    check = diagnose(traffic(0, 0, 0), comments_subscribed=True, comments_permission=True)
    assert check.status is Status.INFO


@pytest.mark.parametrize(("hooked", "recovered"), [(10, 0), (10, 3), (2, 1), (1, 1)])
def test_a_few_recovered_comments_are_meta_s_ordinary_losses(hooked: int, recovered: int) -> None:
    check = diagnose(traffic(hooked, recovered), comments_subscribed=True, comments_permission=True)
    assert check.status is Status.OK
    assert f"{hooked} of the last 7 days' {hooked + recovered} comments" in check.summary


def test_mostly_recovered_with_comments_unsubscribed_says_resubscribe() -> None:
    check = diagnose(traffic(1, 5), comments_subscribed=False, comments_permission=True)
    assert check.failed
    assert "not subscribed to the comments field" in check.summary
    assert check.advice == "Press Re-subscribe below."


def test_mostly_recovered_without_the_comments_permission_says_reconnect() -> None:
    check = diagnose(traffic(0, 3, 0), comments_subscribed=True, comments_permission=False)
    assert check.failed
    assert "comments permission was not granted" in check.summary
    assert "Reconnect" in check.advice


def test_webhooks_only_for_a_few_people_is_development_mode() -> None:
    check = diagnose(traffic(2, 6, 1, 4), comments_subscribed=True, comments_permission=True)
    assert check.failed
    assert "6 of 8 comments" in check.summary
    assert "only for 1 person, never for the 4 others" in check.summary
    assert "Development mode" in check.summary
    assert "Live" in check.advice


def test_no_webhook_at_all_lists_the_likely_causes() -> None:
    check = diagnose(traffic(0, 1, 0, 1), comments_subscribed=None, comments_permission=None)
    assert check.failed
    assert "Development mode" in check.summary
    assert "Advanced Access" in check.summary


@pytest.mark.parametrize(
    ("url", "status"),
    [
        ("https://dm.example.com", Status.OK),
        ("http://localhost:8000", Status.INFO),
        ("http://127.0.0.1:8000", Status.INFO),
        ("http://dm.example.com", Status.FAIL),
        ("http://10.0.0.5:8000", Status.FAIL),
    ],
)
def test_https_is_required_outside_development(url: str, status: Status) -> None:
    assert check_https(load_settings({**ENV, "PUBLIC_BASE_URL": url})).status is status
    assert is_local(url) is (status is Status.INFO)


def test_settings_check_names_what_looks_wrong() -> None:
    good = check_settings(
        load_settings(
            {
                **ENV,
                "GRAPH_API_BASE": "https://graph.instagram.com/v25.0",
                "INSTAGRAM_OAUTH_BASE": "https://api.instagram.com",
            }
        )
    )
    assert good.status is Status.OK
    sandboxed = check_settings(load_settings({**ENV, "GRAPH_API_BASE": "http://127.0.0.1:8100"}))
    assert sandboxed.status is Status.WARN
    assert "remove GRAPH_API_BASE" in sandboxed.advice
    bad = check_settings(
        load_settings({**ENV, "INSTAGRAM_APP_ID": "My Cool App", "WEBHOOK_VERIFY_TOKEN": "abc"})
    )
    assert bad.failed
    assert "INSTAGRAM_APP_ID should be the number" in bad.advice
    assert "WEBHOOK_VERIFY_TOKEN is very short" in bad.advice
