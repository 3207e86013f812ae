"""Settings: a missing variable is named, bad values are refused, defaults hold."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from app.settings import SettingsError, load_settings
from tests.support.infra import ROOT, base_env

VALID = base_env("postgresql://postgres@127.0.0.1:5432/x", "redis://127.0.0.1:6379/1")

REQUIRED = [
    "DATABASE_URL",
    "REDIS_URL",
    "SECRET_KEY",
    "ENCRYPTION_KEY",
    "INSTAGRAM_APP_ID",
    "INSTAGRAM_APP_SECRET",
    "WEBHOOK_VERIFY_TOKEN",
    "PUBLIC_BASE_URL",
]


def test_valid_environment_loads_with_documented_defaults() -> None:
    settings = load_settings(VALID)
    assert settings.database_url == "postgresql+psycopg://postgres@127.0.0.1:5432/x"
    assert settings.graph_api_base == "https://graph.instagram.com/v25.0"
    assert settings.instagram_oauth_base == "https://api.instagram.com"
    assert settings.private_replies_per_hour == 750
    assert settings.reconcile_interval_s == 300
    assert settings.encryption_key == bytes.fromhex("11" * 32)
    assert [name for name, _ in settings.webhook_secrets] == ["instagram", "meta"]
    assert settings.cookie_secure is False
    assert settings.request_read_timeout_s == 10.0


@pytest.mark.parametrize("name", REQUIRED)
def test_each_missing_required_setting_is_named(name: str) -> None:
    env = {k: v for k, v in VALID.items() if k != name}
    with pytest.raises(SettingsError, match=f"^{name} is not set$"):
        load_settings(env)


@pytest.mark.parametrize(
    ("name", "value", "complaint"),
    [
        ("DATABASE_URL", "mysql://root@localhost/x", "unsupported scheme"),
        ("DATABASE_URL", "not a url", "expected postgresql://"),
        ("REDIS_URL", "http://localhost", "expected redis://"),
        ("SECRET_KEY", "short", "at least 32 characters"),
        ("ENCRYPTION_KEY", "abc", "64 hex characters"),
        ("ENCRYPTION_KEY", "zz" * 32, "64 hex characters"),
        ("ENCRYPTION_OLD_KEYS", "11" * 32 + ",nope", "64 hex characters"),
        ("PUBLIC_BASE_URL", "localhost:8000", "http(s)://"),
        ("GRAPH_API_BASE", "ftp://graph", "http(s)://"),
        ("PRIVATE_REPLIES_PER_HOUR", "lots", "whole number"),
        ("PRIVATE_REPLIES_PER_HOUR", "0", "between 1 and 100000"),
        ("SEND_TIMEOUT_S", "0.1", "between"),
        ("LOG_LEVEL", "LOUD", "DEBUG, INFO"),
        ("TRUSTED_PROXIES", "caddy", "not an IP address or network"),
        ("TRUSTED_PROXIES", "10.0.0.1,*", "not an IP address or network"),
        ("METRICS_TOKEN", "short", "at least 16 characters"),
        ("WORKER_METRICS_PORT", "0", "between 1 and 65535"),
        ("REQUEST_READ_TIMEOUT_S", "0", "between 0.5 and 300"),
        ("REQUEST_READ_TIMEOUT_S", "soon", "expected a number"),
    ],
)
def test_malformed_settings_name_the_variable_and_the_problem(
    name: str, value: str, complaint: str
) -> None:
    with pytest.raises(SettingsError) as caught:
        load_settings({**VALID, name: value})
    message = str(caught.value)
    assert message.startswith(f"{name} is invalid:")
    assert complaint in message


def test_trusted_proxies_default_to_loopback_and_take_addresses_or_networks() -> None:
    assert load_settings(VALID).trusted_proxies == ("127.0.0.1", "::1")
    settings = load_settings({**VALID, "TRUSTED_PROXIES": " 172.30.116.2, 10.1.2.3/8 ,::1/128"})
    assert settings.trusted_proxies == ("172.30.116.2", "10.0.0.0/8", "::1")
    assert load_settings({**VALID, "TRUSTED_PROXIES": "none"}).trusted_proxies == ()


def test_metrics_are_loopback_only_and_workers_serve_none_by_default() -> None:
    settings = load_settings(VALID)
    assert (settings.metrics_token, settings.worker_metrics_port) == (None, None)
    assert settings.worker_metrics_host == "127.0.0.1"
    chosen = load_settings({**VALID, "METRICS_TOKEN": "t" * 16, "WORKER_METRICS_PORT": "9101"})
    assert (chosen.metrics_token, chosen.worker_metrics_port) == ("t" * 16, 9101)


def test_https_public_url_turns_on_secure_cookies() -> None:
    settings = load_settings({**VALID, "PUBLIC_BASE_URL": "https://dm.example.com/"})
    assert settings.cookie_secure is True
    assert settings.public_base_url == "https://dm.example.com"


def test_env_file_fills_gaps_and_the_environment_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env_file = tmp_path / ".env"
    lines = [f"{key}={value}" for key, value in VALID.items() if key != "ONCEREPLY_ENV_FILE"]
    env_file.write_text("# comment\nexport LOG_LEVEL='debug'\n" + "\n".join(lines) + "\n")
    for key in VALID:
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("PRIVATE_REPLIES_PER_HOUR", "200")
    settings = load_settings(env_file=str(env_file))
    assert settings.private_replies_per_hour == 200
    assert settings.redis_url == VALID["REDIS_URL"]


@pytest.mark.parametrize("module", ["app", "worker"])
def test_processes_stop_at_start_with_one_line_naming_the_setting(module: str) -> None:
    env = {k: v for k, v in VALID.items() if k != "ENCRYPTION_KEY"}
    env["PATH"] = "/usr/bin:/bin"
    args = [sys.executable, "-m", module] + (["serve"] if module == "app" else [])
    result = subprocess.run(
        args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "ENCRYPTION_KEY is not set" in lines[0]
