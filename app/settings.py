"""The one typed settings object, read from the environment (and a local `.env` in development).

Every process (web, worker, CLI, migrations) builds its `Settings` once at start. A missing or
malformed value raises `SettingsError` whose message names the variable; entry points print
that one line and exit with status 2, so a bad deployment stops before it serves anything.
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar
from urllib.parse import urlsplit

T = TypeVar("T")

# The longest SEND_TIMEOUT_S may be: it bounds how long a job that calls Meta may run.
SEND_TIMEOUT_MAX_S = 120.0

_HEX64 = re.compile(r"^[0-9a-fA-F]{64}$")


class SettingsError(Exception):
    """A setting is missing or malformed; the message names the variable."""


@dataclass(frozen=True, slots=True)
class Settings:
    database_url: str
    redis_url: str
    secret_key: str
    encryption_key: bytes
    encryption_old_keys: tuple[bytes, ...]
    instagram_app_id: str
    instagram_app_secret: str
    meta_app_secret: str | None
    webhook_verify_token: str
    public_base_url: str
    graph_api_base: str
    instagram_oauth_base: str
    private_replies_per_hour: int
    reconcile_interval_s: int
    send_timeout_s: float
    webhook_max_body_bytes: int
    worker_concurrency: int
    queue_name: str
    log_level: str
    # Where the web process spools link clicks until PostgreSQL has them (app.clicks.spool).
    click_spool_dir: str = "var/clicks"
    # Follow gate: re-check a "not following" after each of these waits (Meta lags a follow).
    follow_recheck_delays_s: tuple[float, ...] = (20.0, 40.0)
    # Peers whose X-Forwarded-For/-Proto are believed (the reverse proxy); anyone else's are
    # ignored, so a client cannot claim another address or scheme.
    trusted_proxies: tuple[str, ...] = ("127.0.0.1", "::1")
    # The private-reply budget's rolling window: Meta's hour. Only tests and benchmarks shorten
    # it (PRIVATE_REPLY_WINDOW_S), so a backlog drains in minutes instead of days.
    private_reply_window_s: float = 3600.0
    # `/metrics`: with a token, only requests bearing it; without one, only loopback clients.
    metrics_token: str | None = None
    # A worker's own metrics (its counters) on this port; None: not served.
    worker_metrics_port: int | None = None
    worker_metrics_host: str = "127.0.0.1"
    # The editor asks an image's host whether it will do (`app.campaigns.image_check`); only
    # public addresses, unless this lets it ask the loopback interface (development, tests).
    image_check_allow_loopback: bool = False
    image_check_timeout_s: float = 5.0
    # How long the web server waits for a request's line and headers in all, and for each
    # next piece of a body it was promised; then it answers 408 and hangs up
    # (app.web.bounded_protocol).
    request_read_timeout_s: float = 10.0
    # Public replies under comments per account per budget window: a budget of their own, so
    # they never take a private reply's slot (Meta counts them in the account's Instagram
    # usage, not in the 750 private replies).
    public_replies_per_hour: int = 750
    # Control-lane jobs (ingest, the pacer, the relays) one worker runs at once besides its
    # WORKER_CONCURRENCY deliveries (app.queue.options.Lane). An ingest job spends most of
    # its time waiting on PostgreSQL, and under a surge the web's jobs carry a few events each:
    # with 4 slots two workers ingested ~65 comments/s on the shared bench machine.
    worker_control_concurrency: int = 16

    @property
    def cookie_secure(self) -> bool:
        # Browsers drop Secure cookies on plain http, which is how `make dev` runs locally.
        return self.public_base_url.startswith("https://")

    @property
    def webhook_secrets(self) -> tuple[tuple[str, bytes], ...]:
        """Secrets a webhook signature may be made with, named for the log."""
        secrets = [("instagram", self.instagram_app_secret.encode())]
        if self.meta_app_secret:
            secrets.append(("meta", self.meta_app_secret.encode()))
        return tuple(secrets)


def load_settings(
    environ: Mapping[str, str] | None = None, *, env_file: str | None = None
) -> Settings:
    """Build `Settings` from `environ` (default: the process environment plus `.env`)."""
    env = dict(_read_env_file(env_file)) if environ is None else {}
    env.update(os.environ if environ is None else environ)
    reader = _Reader(env)
    return Settings(
        database_url=reader.required("DATABASE_URL", parse_database_url),
        redis_url=reader.required("REDIS_URL", _parse_redis_url),
        secret_key=reader.required("SECRET_KEY", _parse_secret_key),
        encryption_key=reader.required("ENCRYPTION_KEY", parse_encryption_key),
        encryption_old_keys=reader.optional("ENCRYPTION_OLD_KEYS", _parse_key_list, ()),
        instagram_app_id=reader.required("INSTAGRAM_APP_ID", _non_empty),
        instagram_app_secret=reader.required("INSTAGRAM_APP_SECRET", _non_empty),
        meta_app_secret=reader.optional("META_APP_SECRET", _non_empty, None),
        webhook_verify_token=reader.required("WEBHOOK_VERIFY_TOKEN", _non_empty),
        public_base_url=reader.required("PUBLIC_BASE_URL", _parse_http_url),
        graph_api_base=reader.optional(
            "GRAPH_API_BASE", _parse_http_url, "https://graph.instagram.com/v25.0"
        ),
        instagram_oauth_base=reader.optional(
            "INSTAGRAM_OAUTH_BASE", _parse_http_url, "https://api.instagram.com"
        ),
        private_replies_per_hour=reader.optional(
            "PRIVATE_REPLIES_PER_HOUR", _int_between(1, 100_000), 750
        ),
        reconcile_interval_s=reader.optional("RECONCILE_INTERVAL_S", _int_between(10, 86_400), 300),
        send_timeout_s=reader.optional(
            "SEND_TIMEOUT_S", _float_between(0.5, SEND_TIMEOUT_MAX_S), 10.0
        ),
        webhook_max_body_bytes=reader.optional(
            "WEBHOOK_MAX_BODY_BYTES", _int_between(1024, 64 * 1024 * 1024), 4 * 1024 * 1024
        ),
        worker_concurrency=reader.optional("WORKER_CONCURRENCY", _int_between(1, 1000), 32),
        public_replies_per_hour=reader.optional(
            "PUBLIC_REPLIES_PER_HOUR", _int_between(1, 100_000), 750
        ),
        worker_control_concurrency=reader.optional(
            "WORKER_CONTROL_CONCURRENCY", _int_between(1, 100), 16
        ),
        queue_name=reader.optional("QUEUE_NAME", _parse_queue_name, "delivery"),
        log_level=reader.optional("LOG_LEVEL", _parse_log_level, "INFO"),
        click_spool_dir=reader.optional("CLICK_SPOOL_DIR", _non_empty, "var/clicks"),
        follow_recheck_delays_s=reader.optional(
            "FOLLOW_RECHECK_DELAYS_S", _parse_delays, (20.0, 40.0)
        ),
        trusted_proxies=reader.optional("TRUSTED_PROXIES", _parse_networks, ("127.0.0.1", "::1")),
        private_reply_window_s=reader.optional(
            "PRIVATE_REPLY_WINDOW_S", _float_between(1.0, 3600.0), 3600.0
        ),
        metrics_token=reader.optional("METRICS_TOKEN", _parse_metrics_token, None),
        worker_metrics_port=reader.optional("WORKER_METRICS_PORT", _int_between(1, 65535), None),
        worker_metrics_host=reader.optional("WORKER_METRICS_HOST", _non_empty, "127.0.0.1"),
        image_check_allow_loopback=reader.optional(
            "IMAGE_CHECK_ALLOW_LOOPBACK", _parse_bool, False
        ),
        image_check_timeout_s=reader.optional(
            "IMAGE_CHECK_TIMEOUT_S", _float_between(0.5, 30.0), 5.0
        ),
        request_read_timeout_s=reader.optional(
            "REQUEST_READ_TIMEOUT_S", _float_between(0.5, 300.0), 10.0
        ),
    )


def database_url_from_env(environ: Mapping[str, str] | None = None) -> str:
    """Only `DATABASE_URL`, for tools (Alembic) that need nothing else."""
    env = dict(_read_env_file(None)) if environ is None else {}
    env.update(os.environ if environ is None else environ)
    return _Reader(env).required("DATABASE_URL", parse_database_url)


class _Reader:
    def __init__(self, env: Mapping[str, str]) -> None:
        self._env = env

    def required(self, name: str, parse: Callable[[str], T]) -> T:
        raw = self._env.get(name, "").strip()
        if not raw:
            raise SettingsError(f"{name} is not set")
        return self._parse(name, raw, parse)

    def optional(self, name: str, parse: Callable[[str], T], default: T) -> T:
        raw = self._env.get(name, "").strip()
        return self._parse(name, raw, parse) if raw else default

    @staticmethod
    def _parse(name: str, raw: str, parse: Callable[[str], T]) -> T:
        try:
            return parse(raw)
        except ValueError as exc:
            raise SettingsError(f"{name} is invalid: {exc}") from None


def _read_env_file(path: str | None) -> dict[str, str]:
    """Parse a dotenv file of KEY=VALUE lines; `ONCEREPLY_ENV_FILE=""` turns it off."""
    chosen = path if path is not None else os.environ.get("ONCEREPLY_ENV_FILE", ".env")
    if not chosen:
        return {}
    file = Path(chosen)
    if not file.is_file():
        return {}
    values: dict[str, str] = {}
    for line in file.read_text(encoding="utf-8").splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#") or "=" not in stripped:
            continue
        key, _, value = stripped.partition("=")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        values[key.strip().removeprefix("export ").strip()] = value
    return values


def _non_empty(raw: str) -> str:
    return raw


def _parse_bool(raw: str) -> bool:
    value = raw.strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off", ""}:
        return False
    raise ValueError("use true or false")


def _parse_metrics_token(raw: str) -> str:
    if len(raw) < 16:
        raise ValueError("must be at least 16 characters (try: openssl rand -hex 16)")
    return raw


def parse_database_url(raw: str) -> str:
    scheme, sep, rest = raw.partition("://")
    if not sep or not rest:
        raise ValueError("expected postgresql://user@host:port/dbname")
    if scheme in {"postgres", "postgresql", "postgresql+psycopg"}:
        return f"postgresql+psycopg://{rest}"
    raise ValueError(f"unsupported scheme {scheme!r}; use postgresql://")


def _parse_redis_url(raw: str) -> str:
    if urlsplit(raw).scheme not in {"redis", "rediss", "unix"}:
        raise ValueError("expected redis://host:port/db")
    return raw


def _parse_secret_key(raw: str) -> str:
    if len(raw) < 32:
        raise ValueError("must be at least 32 characters (try: openssl rand -hex 32)")
    return raw


def parse_encryption_key(raw: str) -> bytes:
    if not _HEX64.match(raw):
        raise ValueError("must be 64 hex characters, a 256-bit key (try: openssl rand -hex 32)")
    return bytes.fromhex(raw)


def _parse_key_list(raw: str) -> tuple[bytes, ...]:
    return tuple(parse_encryption_key(part.strip()) for part in raw.split(",") if part.strip())


def _parse_http_url(raw: str) -> str:
    parts = urlsplit(raw)
    if parts.scheme not in {"http", "https"} or not parts.netloc:
        raise ValueError("expected an http(s):// URL")
    return raw.rstrip("/")


def _parse_queue_name(raw: str) -> str:
    if not re.fullmatch(r"[a-z0-9_-]{1,40}", raw):
        raise ValueError("use 1-40 lowercase letters, digits, '-' or '_'")
    return raw


def _parse_log_level(raw: str) -> str:
    level = raw.upper()
    if level not in {"DEBUG", "INFO", "WARNING", "ERROR"}:
        raise ValueError("use DEBUG, INFO, WARNING or ERROR")
    return level


def _parse_delays(raw: str) -> tuple[float, ...]:
    """Comma-separated seconds between 0.1 and 600, e.g. "20,40"; "none" for no re-checks."""
    if raw.lower() == "none":
        return ()
    parse = _float_between(0.1, 600.0)
    delays = tuple(parse(part.strip()) for part in raw.split(","))
    if len(delays) > 5:
        raise ValueError("at most 5 re-checks")
    return delays


def _parse_networks(raw: str) -> tuple[str, ...]:
    """Comma-separated IP addresses or networks (`172.30.116.2`, `10.0.0.0/8`); "none": none."""
    if raw.lower() == "none":
        return ()
    networks: list[str] = []
    for part in (part.strip() for part in raw.split(",")):
        try:
            network = ipaddress.ip_network(part, strict=False)
        except ValueError:
            raise ValueError(f"{part!r} is not an IP address or network") from None
        single = network.num_addresses == 1
        networks.append(str(network.network_address) if single else str(network))
    return tuple(networks)


def _int_between(low: int, high: int) -> Callable[[str], int]:
    def parse(raw: str) -> int:
        try:
            value = int(raw)
        except ValueError:
            raise ValueError(f"expected a whole number, got {raw!r}") from None
        if not low <= value <= high:
            raise ValueError(f"must be between {low} and {high}")
        return value

    return parse


def _float_between(low: float, high: float) -> Callable[[str], float]:
    def parse(raw: str) -> float:
        try:
            value = float(raw)
        except ValueError:
            raise ValueError(f"expected a number, got {raw!r}") from None
        if not low <= value <= high:
            raise ValueError(f"must be between {low} and {high}")
        return value

    return parse
