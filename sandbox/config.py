"""Typed start-up configuration: command-line options first, then ``SANDBOX_*`` variables.

A bad value stops the process with one line naming the option (exit code 2), never a
traceback, because ``make dev`` and test fixtures show that line to a person.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, NoReturn
from urllib.parse import urlsplit

DEFAULT_FIXTURE = Path(__file__).parent / "fixtures" / "default.json"

SignWith = Literal["instagram", "meta"]


class ConfigError(Exception):
    """A start-up option is missing or malformed; the message names the option."""


@dataclass(frozen=True, slots=True)
class SandboxConfig:
    host: str = "127.0.0.1"
    port: int = 8100
    fixture: Path = DEFAULT_FIXTURE
    instagram_app_id: str = "990602627938098"
    # Well-known development defaults: the sandbox guards nothing real.
    instagram_app_secret: str = "sandbox-instagram-app-secret"  # noqa: S105
    meta_app_secret: str = "sandbox-meta-app-secret"  # noqa: S105
    webhook_callback_url: str | None = None
    webhook_verify_token: str | None = None
    webhook_sign_with: SignWith = "instagram"
    public_url: str = "http://127.0.0.1:8100"
    private_replies_per_hour: int = 750
    sends_per_second: int = 100
    follow_lag_seconds: float = 0.0
    webhook_batch_window_ms: int = 50
    webhook_retry_base_seconds: float = 0.5
    webhook_max_attempts: int = 8
    webhook_timeout_seconds: float = 5.0

    def secret_for(self, sign_with: SignWith) -> str:
        return self.instagram_app_secret if sign_with == "instagram" else self.meta_app_secret


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise ConfigError(message)


def _parser() -> _Parser:
    parser = _Parser(prog="python -m sandbox", description="Local Instagram Platform sandbox")
    parser.add_argument("--host", help="interface to bind (env SANDBOX_HOST)")
    parser.add_argument("--port", help="port to bind (env SANDBOX_PORT, default 8100)")
    parser.add_argument("--fixture", help="seed fixture JSON (env SANDBOX_FIXTURE)")
    return parser


def _url(option: str, value: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError(f"{option}: {value!r} is not an http(s) URL")
    return value.rstrip("/")


def _int(option: str, value: str, *, minimum: int, maximum: int | None = None) -> int:
    try:
        number = int(value)
    except ValueError:
        raise ConfigError(f"{option}: {value!r} is not a whole number") from None
    if number < minimum or (maximum is not None and number > maximum):
        bound = f"between {minimum} and {maximum}" if maximum is not None else f">= {minimum}"
        raise ConfigError(f"{option}: {number} must be {bound}")
    return number


def _float(option: str, value: str, *, minimum: float) -> float:
    try:
        number = float(value)
    except ValueError:
        raise ConfigError(f"{option}: {value!r} is not a number") from None
    if not number >= minimum:  # also rejects NaN
        raise ConfigError(f"{option}: {value} must be >= {minimum}")
    return number


def load_config(argv: Sequence[str], environ: Mapping[str, str] | None = None) -> SandboxConfig:
    env = os.environ if environ is None else environ
    args = _parser().parse_args(list(argv))

    def pick(cli: str | None, var: str) -> tuple[str, str | None]:
        if cli is not None:
            return f"--{var.removeprefix('SANDBOX_').lower()}", cli
        value = env.get(var)
        return var, value if value not in (None, "") else None

    option, host = pick(args.host, "SANDBOX_HOST")
    host = host or "127.0.0.1"
    option, raw_port = pick(args.port, "SANDBOX_PORT")
    port = _int(option, raw_port, minimum=1, maximum=65535) if raw_port else 8100

    option, raw_fixture = pick(args.fixture, "SANDBOX_FIXTURE")
    fixture = Path(raw_fixture) if raw_fixture else DEFAULT_FIXTURE
    if not fixture.is_file():
        raise ConfigError(f"{option}: no fixture file at {fixture}")

    def text(var: str, default: str) -> str:
        value = env.get(var, "")
        return value if value else default

    defaults = SandboxConfig()
    callback = env.get("SANDBOX_WEBHOOK_CALLBACK_URL") or None
    verify_token = env.get("SANDBOX_WEBHOOK_VERIFY_TOKEN") or None
    if callback is not None:
        callback = _url("SANDBOX_WEBHOOK_CALLBACK_URL", callback)
        if verify_token is None:
            raise ConfigError(
                "SANDBOX_WEBHOOK_VERIFY_TOKEN: required when SANDBOX_WEBHOOK_CALLBACK_URL is set"
            )
    sign_with = text("SANDBOX_WEBHOOK_SIGN_WITH", "instagram")
    if sign_with not in ("instagram", "meta"):
        raise ConfigError(f"SANDBOX_WEBHOOK_SIGN_WITH: {sign_with!r} must be instagram or meta")

    public_url = env.get("SANDBOX_PUBLIC_URL") or ""
    public_url = (
        _url("SANDBOX_PUBLIC_URL", public_url)
        if public_url
        else f"http://{'127.0.0.1' if host in ('0.0.0.0', '::') else host}:{port}"  # noqa: S104
    )

    def number(var: str, default: int, minimum: int) -> int:
        value = env.get(var)
        return _int(var, value, minimum=minimum) if value else default

    def real(var: str, default: float, minimum: float) -> float:
        value = env.get(var)
        return _float(var, value, minimum=minimum) if value else default

    return SandboxConfig(
        host=host,
        port=port,
        fixture=fixture,
        instagram_app_id=text("SANDBOX_INSTAGRAM_APP_ID", defaults.instagram_app_id),
        instagram_app_secret=text("SANDBOX_INSTAGRAM_APP_SECRET", defaults.instagram_app_secret),
        meta_app_secret=text("SANDBOX_META_APP_SECRET", defaults.meta_app_secret),
        webhook_callback_url=callback,
        webhook_verify_token=verify_token,
        webhook_sign_with="meta" if sign_with == "meta" else "instagram",
        public_url=public_url,
        private_replies_per_hour=number("SANDBOX_PRIVATE_REPLIES_PER_HOUR", 750, 1),
        sends_per_second=number("SANDBOX_SENDS_PER_SECOND", 100, 1),
        follow_lag_seconds=real("SANDBOX_FOLLOW_LAG_SECONDS", 0.0, 0.0),
        webhook_batch_window_ms=number("SANDBOX_WEBHOOK_BATCH_WINDOW_MS", 50, 0),
        webhook_retry_base_seconds=real("SANDBOX_WEBHOOK_RETRY_BASE_SECONDS", 0.5, 0.0),
        webhook_max_attempts=number("SANDBOX_WEBHOOK_MAX_ATTEMPTS", 8, 1),
        webhook_timeout_seconds=real("SANDBOX_WEBHOOK_TIMEOUT_SECONDS", 5.0, 0.1),
    )
